"""The GPU check's offline bundle builds here and its CPU dry run installs the
bundle, imports everything and stops at the CUDA check with exit code 2 (the GPU
tests themselves are tests/test_gpu.py, run on a GPU by scripts/gpu_check.sh)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import EN_DUMP, EN_VOCAB, ROOT

pytestmark = [pytest.mark.slow, pytest.mark.framework,
              pytest.mark.skipif(torch.cuda.is_available(), reason="the dry run is for machines without CUDA")]


def test_bundle_builds_and_the_dry_run_reaches_the_cuda_check(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    env = dict(os.environ, PY=sys.executable, EN_DUMP=str(EN_DUMP), EN_VOCAB=str(EN_VOCAB))
    built = subprocess.run(["bash", "scripts/build_gpu_bundle.sh", str(bundle)], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=900)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    info = json.loads((bundle / "bundle.json").read_text())
    wheels = {name.split("-")[0] for name in info["wheels"]}
    assert {"deepspeed", "pydantic", "pydantic_core", "hjson"} <= wheels
    assert any("cp312" in name for name in info["wheels"])  # the GPU machine's Python
    manifest = json.loads((bundle / info["dataset"] / "manifest.json").read_text())
    assert manifest["max_seq_len"] == 256 and manifest["totals"]["instances"] > 10_000
    vocab = Path(manifest["tokenizer"]["path"])
    assert not vocab.is_absolute() and (ROOT / vocab).is_file()  # relative to the repo root, which travels

    env = dict(os.environ, PYTHON=sys.executable, GPU_BUNDLE=str(bundle))
    dry = subprocess.run(["bash", "scripts/gpu_check.sh", str(tmp_path / "results")], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    assert dry.returncode == 2, dry.stdout[-2000:] + dry.stderr[-2000:]
    assert "no CUDA device" in dry.stderr
    # deepspeed was imported from the bundle's install, not from this environment
    line = next(x for x in dry.stdout.splitlines() if x.startswith("deepspeed "))
    assert "tacl-gpu-site" in line, line


def test_missing_bundle_is_a_clear_error(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHON=sys.executable, GPU_BUNDLE=str(tmp_path / "nowhere"))
    res = subprocess.run(["bash", "scripts/gpu_check.sh"], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 2 and "build_gpu_bundle.sh" in res.stderr


def test_the_driver_exits_2_without_cuda(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, "benchmarks/gpu_check.py", "--results", str(tmp_path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 2 and "no CUDA device" in res.stderr
