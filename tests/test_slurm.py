"""The Slurm scripts against a real local Slurm (Debian's 22.05, two slurmd daemons
on this machine as nodes n1 and n2), started by tests/slurm/start_slurm.sh."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from conftest import EN_DUMP, EN_VOCAB, ROOT, TINY_BERT, ZH_TEXT, ZH_VOCAB

from tacl_scale.data import PretrainDataset
from tacl_scale.metrics import read_records, step_records
from tacl_scale.run_dir import RunDir

pytestmark = [pytest.mark.slow, pytest.mark.cluster]



@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory):
    if os.environ.get("TACL_TIER") != "cluster":  # it installs packages and writes /etc: only when asked
        pytest.skip("the cluster tier: run bash scripts/test.sh --cluster")
    if os.geteuid() != 0 and shutil.which("slurmctld") is None:
        pytest.skip("installing Slurm needs root")
    state = tmp_path_factory.mktemp("slurm-state")
    try:  # stopped by PID whatever happens, a start that fails half-way included
        start = subprocess.run(["bash", "tests/slurm/start_slurm.sh", str(state)], cwd=ROOT,
                               env=dict(os.environ, NODES="2"), capture_output=True, text=True, timeout=600)
        assert start.returncode == 0, start.stderr[-3000:]
        yield state
    finally:
        subprocess.run(["bash", "tests/slurm/stop_slurm.sh", str(state)], cwd=ROOT, timeout=60)


def job_env() -> dict[str, str]:
    return dict(os.environ, DS_ACCELERATOR="cpu", TACL_HOME=str(ROOT))


def submit(args: list[str], log_dir: Path) -> str:
    res = subprocess.run(["sbatch", "--parsable", f"--output={log_dir}/%x-%j.out", *args], cwd=ROOT,
                         env=job_env(), capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    return res.stdout.strip().split(";")[0]


def job_info(job: str) -> dict[str, str]:
    out = subprocess.run(["scontrol", "show", "job", job], capture_output=True, text=True).stdout
    return dict(re.findall(r"(\w+)=(\S+)", out))


def wait(job: str, timeout: float = 600, restarts: int = 0) -> dict[str, str]:
    """Poll ``scontrol show job`` (sbatch --wait polls slowly) until the job ends."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = job_info(job)
        if info.get("JobState") in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL") and int(
            info.get("Restarts", "0")
        ) >= restarts:
            return info
        time.sleep(0.5)
    raise AssertionError(f"job {job} did not finish: {job_info(job)}")


@pytest.fixture(scope="module")
def dataset(slurm: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built through the Slurm data-prep job."""
    root = tmp_path_factory.mktemp("slurm-data")
    job = submit(["--cpus-per-task=2", "slurm/prep_wiki.sh", "--input", str(ZH_TEXT), "--format", "text",
                  "--language", "zh", "--tokenizer", str(ZH_VOCAB), "--min-doc-chars", "10", "--dupe-factor", "1",
                  "--max-seq-len", "64", "--quiet", "--output", str(root / "ds")], root)
    info = wait(job)
    assert info["JobState"] == "COMPLETED" and info["ExitCode"] == "0:0", info
    return root / "ds"


def test_prep_wiki_job_on_the_english_dump(slurm: Path, tmp_path: Path) -> None:
    job = submit(["--cpus-per-task=2", "slurm/prep_wiki.sh", "--input", str(EN_DUMP), "--tokenizer", str(EN_VOCAB),
                  "--max-seq-len", "128", "--dupe-factor", "1", "--num-shards", "2", "--quiet",
                  "--output", str(tmp_path / "en")], tmp_path)
    info = wait(job)
    assert info["JobState"] == "COMPLETED", (info, _logs(tmp_path))
    ds = PretrainDataset(tmp_path / "en")
    assert len(ds) > 1000 and ds.manifest.pipeline_options["direct_num_workers"] == 2
    assert "2 worker process(es)" in _logs(tmp_path)


def _logs(directory: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in directory.rglob("*.out"))


def _train_args(dataset: Path, model: Path, run: Path, steps: int, save_every: int, workers: int = 0) -> list[str]:
    return ["--ds", "ds_configs/cpu.json", "--model", str(model), "--data", str(dataset), "--output", str(run),
            "--steps", str(steps), "--save-every", str(save_every), "--batch-size", "8",
            "--micro-batch-size", "4", "--num-workers", str(workers), "--log-every", "1"]


def _losses(run: Path) -> dict[int, float]:
    return {r["step"]: r["loss"] for r in step_records(read_records(RunDir(run).metrics_file))}


@pytest.fixture(scope="module")
def baseline(dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """1 node × 2 tasks, uninterrupted."""
    root = tmp_path_factory.mktemp("slurm-base")
    model = root / "bert.json"
    model.write_text(json.dumps(TINY_BERT))
    job = submit(["--nodes=1", "--ntasks-per-node=2", "--gpus-per-node=0", "--cpus-per-task=1",
                  "slurm/pretrain_large.sh", *_train_args(dataset, model, root / "run", 30, 10)], root)
    info = wait(job)
    assert info["JobState"] == "COMPLETED" and info["ExitCode"] == "0:0", (info, _logs(root))
    return root / "run"


def test_pretrain_job_two_tasks_trains_checkpoints_and_logs(baseline: Path) -> None:
    assert sorted(_losses(baseline)) == list(range(1, 31))
    assert (baseline / "checkpoints" / "latest").read_text() == "step00000030"
    assert list((baseline / "tensorboard").glob("events.out.tfevents.*"))
    assert (baseline / "export" / "config.json").exists()
    run = json.loads((baseline / "run.json").read_text())
    assert run["world_size"] == 2 and run["config"]["optim"]["batch_size"] == 8
    log = next(baseline.glob("slurm-*.log")).read_text()
    assert "recipe tacl-large-en, global batch 8 = micro 4 x 2 x accumulation 1" in log


def test_preempted_job_checkpoints_requeues_and_matches(baseline: Path, dataset: Path, tmp_path: Path) -> None:
    model = tmp_path / "bert.json"
    model.write_text(json.dumps(TINY_BERT))
    run = tmp_path / "run"
    # With DataLoader workers: scancel signals every process of the job step, the workers too.
    job = submit(["--nodes=1", "--ntasks-per-node=2", "--gpus-per-node=0", "--cpus-per-task=1",
                  "slurm/pretrain_large.sh", *_train_args(dataset, model, run, 30, 10, workers=2)], tmp_path)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not (run / "metrics.jsonl").exists():
        time.sleep(0.1)
    while time.monotonic() < deadline and len(_losses(run)) < 3:
        time.sleep(0.05)
    subprocess.run(["scancel", "--signal=USR1", job], check=True)
    info = wait(job, restarts=1)
    assert info["JobState"] == "COMPLETED" and int(info["Restarts"]) >= 1, (info, _logs(tmp_path))
    log = next(run.glob("slurm-*.log")).read_text()
    assert "SIGUSR1: checkpointed step" in log and "requeuing job" in log and "resumed from" in log
    assert "killed by signal" not in log
    assert _losses(run) == pytest.approx(_losses(baseline), rel=1e-6)


def test_two_node_job_matches_one_node(baseline: Path, dataset: Path, tmp_path: Path) -> None:
    model = tmp_path / "bert.json"
    model.write_text(json.dumps(TINY_BERT))
    job = submit(["--nodes=2", "--ntasks-per-node=1", "--gpus-per-node=0", "--cpus-per-task=1",
                  "slurm/pretrain_large.sh", *_train_args(dataset, model, tmp_path / "run", 30, 10)], tmp_path)
    info = wait(job)
    assert info["JobState"] == "COMPLETED", (info, _logs(tmp_path))
    assert info["NodeList"] == "n[1-2]"
    assert _losses(tmp_path / "run") == pytest.approx(_losses(baseline), rel=1e-6)


def test_impossible_global_batch_is_refused(slurm: Path, tmp_path: Path) -> None:
    job = submit(["--nodes=1", "--ntasks-per-node=2", "--gpus-per-node=0", "--cpus-per-task=1",
                  "slurm/pretrain_large.sh", "--batch-size", "10", "--micro-batch-size", "4",
                  "--output", str(tmp_path / "run")], tmp_path)
    info = wait(job)
    assert info["JobState"] == "FAILED" and info["ExitCode"] == "2:0"
    assert "error: global batch 10 is not micro-batch 4 × 2 rank(s) × a whole number of accumulation steps; " \
        "--micro-batch-size must divide the per-rank batch 5: one of 1, 5 (2 Slurm task(s))" in _logs(tmp_path)


def _data_files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file() and p.name != "manifest.json"}


def test_prep_wiki_on_two_nodes_runs_a_dask_cluster(slurm: Path, tmp_path: Path) -> None:
    """--nodes=2: a Dask scheduler on the first node, a worker on each, the build on
    Beam's DaskRunner; the same data files as a DirectRunner build; the cluster is
    stopped at the end, also when the build fails."""
    from conftest import build_dataset

    from data_prep.multistream import main as multistream_main

    dump = tmp_path / "enwiki-multistream.xml.bz2"
    assert multistream_main([str(EN_DUMP), str(dump), "--pages-per-stream", "10"]) == 0
    args = ["--input", str(dump), "--tokenizer", str(EN_VOCAB), "--num-shards", "2", "--dupe-factor", "1",
            "--max-seq-len", "128", "--unit-mb", "0.1"]
    job = submit(["--nodes=2", "--ntasks-per-node=1", "--cpus-per-task=1", "slurm/prep_wiki.sh", *args,
                  "--quiet", "--output", str(tmp_path / "dask")], tmp_path)
    info = wait(job)
    assert info["JobState"] == "COMPLETED" and info["NodeList"] == "n[1-2]", (info, _logs(tmp_path))
    assert "Dask cluster of 2 node(s) × 1 worker(s)" in _logs(tmp_path)
    ds = PretrainDataset(tmp_path / "dask")
    assert ds.manifest.pipeline_options["runner"] == "DaskRunner"
    direct = build_dataset(tmp_path / "direct", *args)
    assert _data_files(tmp_path / "dask") == _data_files(direct)
    assert not list(tmp_path.glob(".dask-scheduler-*"))
    assert "dask" not in subprocess.run(["pgrep", "-af", f"dask-scheduler-{job}"], capture_output=True,
                                        text=True).stdout

    failing = submit(["--nodes=2", "--ntasks-per-node=1", "--cpus-per-task=1", "slurm/prep_wiki.sh", *args[:2],
                      "--tokenizer", str(tmp_path / "missing-vocab.txt"), "--output", str(tmp_path / "bad")],
                     tmp_path)
    info = wait(failing)
    assert info["JobState"] == "FAILED", (info, _logs(tmp_path))
    assert "missing-vocab.txt" in _logs(tmp_path)
    assert "dask" not in subprocess.run(["pgrep", "-af", f"dask-scheduler-{failing}"], capture_output=True,
                                        text=True).stdout
