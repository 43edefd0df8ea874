"""Shared test fixtures: paths to the real data in ../shared/data and a helper that
runs the dataset build in-process."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
EN_DUMP = DATA / "enwiki-sample.xml.bz2"
ZH_TEXT = DATA / "zhwiki-sample.txt"
ZH_SEGMENTED = DATA / "zhwiki-sample-segmented.txt"
EN_VOCAB = DATA / "vocab" / "bert-base-uncased.txt"
ZH_VOCAB = DATA / "vocab" / "bert-base-chinese.txt"

# Keep HF tokenizers from spawning threads that fight pytest for 2 cores.
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


# Without a GPU, the Triton kernels run under Triton's interpreter on CPU tensors;
# it must be chosen before any kernel is defined. DeepSpeed likewise picks its
# accelerator when first imported.
if not _has_cuda():
    os.environ.setdefault("TRITON_INTERPRET", "1")
    os.environ.setdefault("DS_ACCELERATOR", "cpu")


def build_dataset(output: Path, *args: str) -> Path:
    """Run ``data_prep.build`` in-process with CLI arguments; return the dataset dir."""
    from data_prep.build import parse_args, run_build

    command = parse_args(["--output", str(output), "--quiet", *args])
    run_build(command.config, command.beam_args)
    return output
