"""The GPU check and the offline install, on the CPU: the bundle builds;
``scripts/install_offline.sh`` makes a venv over an interpreter's own torch in which
the ``deepspeed`` launcher trains from another directory; ``scripts/gpu_check.sh
--dry-run`` runs every phase; a phase over its budget is recorded as such and the
next one runs, keeping what the stopped one measured. The GPU tests themselves are
tests/test_gpu.py, run on a GPU by scripts/gpu_check.sh.

The heavy ones run in the GPU image's tier (``scripts/test.sh --gpu-image``), whose
interpreter has the versions the GPU machine has, as the node's python3 would."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import EN_DUMP, EN_VOCAB, ROOT, free_port

pytestmark = [pytest.mark.slow, pytest.mark.framework,
              pytest.mark.skipif(torch.cuda.is_available(), reason="the dry runs are for machines without CUDA")]
gpu_image_tier = pytest.mark.skipif(os.environ.get("TACL_TIER") != "gpu-image",
                                    reason="runs in the GPU image's tier: scripts/test.sh --gpu-image")

sys.path.insert(0, str(ROOT / "benchmarks"))
import gpu_check  # noqa: E402


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("gpu") / "bundle"
    # pip's cache in the tests' temporary directory, not the home directory's (the tier changes nothing
    # outside the clone): what it downloads is small, the deepspeed source and a few wheels.
    env = dict(os.environ, PY=sys.executable, EN_DUMP=str(EN_DUMP), EN_VOCAB=str(EN_VOCAB),
               PIP_CACHE_DIR=str(tmp_path_factory.mktemp("pip-cache")))
    # With a trailing slash, as a shell's completion writes it (it built beside the bundle, inside it).
    built = subprocess.run(["bash", "scripts/build_gpu_bundle.sh", f"{path}/"], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=900)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    return path


@pytest.fixture(scope="module")
def offline_venv(bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("offline") / "venv"
    env = dict(os.environ, PYTHON=sys.executable, GPU_BUNDLE=str(bundle),
               PIP_CACHE_DIR=str(tmp_path_factory.mktemp("pip-cache")))
    done = subprocess.run(["bash", "scripts/install_offline.sh", str(venv)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert f"from {venv}" in done.stdout  # deepspeed from the bundle, not from this interpreter
    return venv


@gpu_image_tier
def test_the_bundle_holds_what_the_gpu_image_lacks(bundle: Path) -> None:
    info = json.loads((bundle / "bundle.json").read_text())
    wheels = {name.split("-")[0] for name in info["wheels"]}
    assert {"deepspeed", "pydantic", "pydantic_core", "hjson", "xxhash"} <= wheels
    assert any("cp312" in name for name in info["wheels"])  # the GPU machine's Python
    manifest = json.loads((bundle / info["dataset"] / "manifest.json").read_text())
    assert manifest["max_seq_len"] == 256 and manifest["totals"]["instances"] > 1_000


@gpu_image_tier
def test_the_offline_venv_trains_through_the_launcher(offline_venv: Path, bundle: Path,
                                                                     tmp_path: Path) -> None:
    """What a user on an offline GPU node runs: the venv's ``deepspeed`` launcher on
    train.py, from another directory, on the interpreter's own torch; two ranks with
    mirror (its cross-rank gather) and TaCL. The bundle's dataset carries its
    tokenizer, so nothing depends on where it was built."""
    probe = subprocess.run([str(offline_venv / "bin" / "python"), "-c",
                            "import deepspeed, torch, tacl_scale; print(deepspeed.__file__, torch.__file__, "
                            "tacl_scale.__file__)"], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    deepspeed_file, torch_file, project_file = probe.stdout.split()
    assert deepspeed_file.startswith(str(offline_venv))
    assert Path(torch_file).is_relative_to(Path(torch.__file__).parents[1])  # the interpreter's own torch
    assert Path(project_file).is_relative_to(ROOT / "tacl_scale")  # this checkout's sources
    model = tmp_path / "bert.json"
    model.write_text(json.dumps({"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 2,
                                 "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 512}))
    data = bundle / json.loads((bundle / "bundle.json").read_text())["dataset"]
    env = dict(os.environ, DS_ACCELERATOR="cpu", OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    run = subprocess.run([str(offline_venv / "bin" / "deepspeed"), "--num_gpus", "2", "--master_port", str(free_port()),
                          str(ROOT / "tacl_scale" / "train.py"), "--ds", str(ROOT / "ds_configs" / "cpu.json"),
                          "--data", str(data), "--model", str(model), "--output", str(tmp_path / "run"),
                          "--steps", "2", "--batch-size", "4", "--micro-batch-size", "2", "--num-workers", "0",
                          "--objectives", "tacl,mlm,nsp,mirror"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "step 2/2" in run.stdout and (tmp_path / "run" / "export" / "model.safetensors").is_file()
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert record["world_size"] == 2 and "mirror" in record["config"]["objective"]["objectives"]


@gpu_image_tier
def test_the_dry_run_goes_through_every_phase(offline_venv: Path, bundle: Path, tmp_path: Path) -> None:
    results = tmp_path / "results"
    env = dict(os.environ, PYTHON=sys.executable, GPU_BUNDLE=str(bundle), GPU_VENV=str(offline_venv))
    done = subprocess.run(["bash", "scripts/gpu_check.sh", str(results), "--dry-run"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((results / "gpu_check.json").read_text())
    assert {name: p["status"] for name, p in report["phases"].items()} == dict.fromkeys(
        ("install", *gpu_check.PHASES), "passed")
    assert report["phases"]["tests"]["data"]["passed"] >= 2
    training = report["phases"]["training"]["data"]
    assert [r["name"] for r in training] == ["README command (zero2.json, auto)", "ZeRO-1 unpadded micro 2",
                                             "ZeRO-2 unpadded micro 2", "ZeRO-2 padded micro 2",
                                             "HF BertForPreTraining MLM+NSP eager micro 2"]
    assert all("error" not in r and r["tokens_per_s"] > 0 for r in training)
    assert training[0]["micro_batch"] == 4 and training[0]["precision"] == "fp32"  # "auto" settled on the CPU
    text = (results / "gpu_check.txt").read_text()
    assert "| training | passed |" in text and "ZeRO-1 unpadded micro 2" in text
    for phase in gpu_check.PHASES:
        assert (results / f"{phase}.log").is_file()


@gpu_image_tier
def test_without_cuda_the_check_stops_after_the_install(offline_venv: Path, bundle: Path, tmp_path: Path) -> None:
    env = dict(os.environ, PYTHON=sys.executable, GPU_BUNDLE=str(bundle), GPU_VENV=str(offline_venv))
    done = subprocess.run(["bash", "scripts/gpu_check.sh", str(tmp_path)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 2 and "no CUDA device" in done.stderr
    assert json.loads((tmp_path / "install.json").read_text())["status"] == "passed"


def test_a_phase_over_its_budget_is_stopped_and_keeps_what_it_measured(tmp_path: Path) -> None:
    """The training phase is stopped at its budget (long before a Trainer exists);
    the rows it had appended survive, and the status says timeout."""
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "bundle.json").write_text(json.dumps({"dataset": "data/none"}))
    row = {"name": "ZeRO-2 unpadded micro 64", "unpad": True, "ds_config": "zero2_bf16.json", "tokens_per_s": 1.0}
    (tmp_path / "training.jsonl").write_text(json.dumps(row) + "\n")
    args = argparse.Namespace(bundle=bundle, results=tmp_path, quick=False, dry_run=True)
    result = gpu_check.run_phase(args, "training", budget=0.5)
    assert result["status"] == "timeout" and result["data"] == [row]
    assert result["seconds"] < 15 and "budget of 0.5 s" in result["error"]
    assert (tmp_path / "training.log").is_file()


def test_a_stopped_test_phase_counts_the_tests_its_log_shows(tmp_path: Path) -> None:
    log = tmp_path / "tests.log"
    log.write_text("collected 5 items\n\n"
                   "tests/test_gpu.py::test_a[bf16] PASSED                                   [ 20%]\n"
                   "tests/test_gpu.py::test_b FAILED                                         [ 40%]\n"
                   "tests/test_tacl_triton.py::test_c SKIPPED (needs a GPU)                  [ 60%]\n"
                   "tests/test_gpu.py::test_d \n")
    counts = gpu_check.tests_from_log(log)
    assert (counts["passed"], counts["failures"], counts["skipped"], counts["tests"]) == (1, 1, 1, 3)
    assert counts["failed_tests"] == ["tests/test_gpu.py::test_b"]


def test_budgets_fit_the_device_time(tmp_path: Path) -> None:
    """Install plus phases: 6 minutes for a default run, 3 with --quick."""
    assert gpu_check.INSTALL_BUDGET + sum(gpu_check.BUDGETS.values()) <= 360
    assert gpu_check.INSTALL_BUDGET + sum(gpu_check.QUICK_BUDGETS.values()) <= 180
    script = (ROOT / "scripts" / "gpu_check.sh").read_text(encoding="utf-8")
    assert f"INSTALL_BUDGET={gpu_check.INSTALL_BUDGET} " in script  # the shell's budget is the one counted here
    assert gpu_check.parse_budgets(["tests=10"], quick=True)["tests"] == 10
    with pytest.raises(SystemExit, match="PHASE=SECONDS"):
        gpu_check.parse_budgets(["nothing=3"], quick=False)
    # nan meant no limit at all (a wait with a nan timeout), a negative budget a stop at once, "abc" a traceback
    for value in ("training=nan", "training=-5", "training=0", "training=abc", "training=inf"):
        with pytest.raises(SystemExit, match=f"--budget {value}: SECONDS must be a number > 0"):
            gpu_check.parse_budgets([value], quick=False)


def test_each_phase_gets_what_the_ones_before_left_and_none_passes_the_deadline() -> None:
    """Each phase had its own budget: the 10 s a stop may take came on top of each
    (the run could end 40 s past its 6 minutes), and a phase's unused seconds were
    lost to the training sweep after it."""
    now = [0.0]
    budgets = {"env": 10, "tests": 130, "tacl_loss": 20, "training": 140}
    clock = gpu_check.PhaseClock(budgets, deadline=300.0, now=lambda: now[0])
    assert clock.allow("env") == 10
    clock.spent(10, 4.0)
    now[0] = 4.0
    assert clock.allow("tests") == 136  # its 130 and the 6 env left
    clock.spent(136, 136 + gpu_check.STOP_GRACE)  # it hung: stopped after its time and the stop's
    now[0] = 150.0
    assert clock.allow("tacl_loss") == 20
    clock.spent(20, 2.0)
    now[0] = 152.0
    assert clock.allow("training") == 300 - 152 - gpu_check.STOP_GRACE  # 158 by the budgets; the deadline is first
    now[0] = 295.0
    assert clock.allow("training") == 0


def test_a_bad_argument_stops_the_check_before_the_install(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHON=sys.executable, GPU_BUNDLE=str(tmp_path / "nowhere"))
    for argument, says in ((["--budget", "training=abc"], "--budget training=abc: SECONDS must be a number > 0"),
                           (["--quik"], "unrecognized arguments: --quik")):
        res = subprocess.run(["bash", "scripts/gpu_check.sh", str(tmp_path / "results"), *argument], cwd=ROOT,
                             env=env, capture_output=True, text=True, timeout=120)
        assert res.returncode == 2 and says in res.stderr, res.stderr
        assert not (tmp_path / "results").exists()  # no install ran, nothing written
    # --help after RESULTS_DIR: argparse's help exited 0 from the check, and the whole check ran after it
    res = subprocess.run(["bash", "scripts/gpu_check.sh", str(tmp_path / "results"), "--help"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and res.stdout.startswith("Every GPU test and benchmark") and "--budget" in res.stdout
    assert not (tmp_path / "results").exists()


def test_a_missing_bundle_is_a_clear_error(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHON=sys.executable, GPU_BUNDLE=str(tmp_path / "nowhere"))
    for command in (["bash", "scripts/install_offline.sh", str(tmp_path / "venv")],
                    ["bash", "scripts/gpu_check.sh", str(tmp_path / "results")]):
        res = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert res.returncode == 2 and "build_gpu_bundle.sh" in res.stderr, command


def test_a_python_whose_setuptools_cannot_build_wheels_is_a_clear_error(tmp_path: Path) -> None:
    """The bundle builds deepspeed's wheel without build isolation: a setuptools
    older than 70.1 without the wheel package (python 3.11's venv) stops the build
    before anything is written, naming the fix (it failed deep in pip's output)."""
    fake = tmp_path / "python"  # imports deepspeed; has no bdist_wheel
    fake.write_text('#!/bin/sh\ncase "$*" in *bdist_wheel*) exit 1;; esac\nexit 0\n')
    fake.chmod(0o755)
    for name in ("dump.xml.bz2", "vocab.txt"):
        (tmp_path / name).write_bytes(b"x")
    env = dict(os.environ, PY=str(fake), EN_DUMP=str(tmp_path / "dump.xml.bz2"), EN_VOCAB=str(tmp_path / "vocab.txt"))
    res = subprocess.run(["bash", "scripts/build_gpu_bundle.sh", str(tmp_path / "bundle")], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2
    assert f"error: {fake}'s setuptools cannot build the deepspeed wheel (no bdist_wheel)" in res.stderr
    assert "pip install 'setuptools>=70.1'" in res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dump.xml.bz2", "python", "vocab.txt"]


def test_the_bundle_build_replaces_only_a_bundle_and_only_once_the_new_one_is_whole(tmp_path: Path) -> None:
    """It removed the folder it was given before building (``runs`` would have lost
    every run), and an interrupted build left no bundle at all."""
    for name in ("dump.xml.bz2", "vocab.txt"):
        (tmp_path / name).write_bytes(b"x")
    # A python that has everything and whose dataset build fails, as a Ctrl-C there would.
    fake = tmp_path / "python"
    fake.write_text('#!/bin/sh\ncase "$*" in *data_prep.build*) exit 1;; *importlib.metadata*) echo 1.0;; esac\nexit 0\n')
    fake.chmod(0o755)
    env = dict(os.environ, PY=str(fake), EN_DUMP=str(tmp_path / "dump.xml.bz2"), EN_VOCAB=str(tmp_path / "vocab.txt"))
    runs = tmp_path / "runs"
    (runs / "r1").mkdir(parents=True)
    res = subprocess.run(["bash", str(ROOT / "scripts/build_gpu_bundle.sh"), "runs"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and (runs / "r1").is_dir()  # relative to where it was typed, and refused
    assert f"error: {runs} exists and is not a GPU bundle (no bundle.json)" in res.stderr
    old = tmp_path / "bundle"
    old.mkdir()
    (old / "bundle.json").write_text("{}")
    res = subprocess.run(["bash", str(ROOT / "scripts/build_gpu_bundle.sh"), f"{old}/"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 1 and (old / "bundle.json").read_text() == "{}", res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle", "dump.xml.bz2", "python", "runs", "vocab.txt"]


@pytest.mark.parametrize("interrupted", [False, True])
def test_a_bundle_that_cannot_take_the_old_ones_place_leaves_the_old_one(tmp_path: Path, interrupted: bool) -> None:
    """The old bundle is moved aside before the new one moves in: a failed move, or a
    signal between the two moves (which left the old one under a temporary name and
    nothing in its place), puts it back."""
    for name in ("dump.xml.bz2", "vocab.txt"):
        (tmp_path / name).write_bytes(b"x")
    fake = tmp_path / "python"  # has everything, builds everything
    fake.write_text('#!/bin/sh\ncase "$*" in *importlib.metadata*) echo 1.0;; esac\nexit 0\n')
    fake.chmod(0o755)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stop = "kill -TERM $PPID; sleep 1\n" if interrupted else ""
    (bin_dir / "mv").write_text(f'#!/bin/bash\nif [[ $2 == *.building.* ]]; then {stop}exit 1; fi\n'
                                f'exec {shutil.which("mv")} "$@"\n')
    (bin_dir / "mv").chmod(0o755)
    old = tmp_path / "bundle"
    old.mkdir()
    (old / "bundle.json").write_text("{}")
    env = dict(os.environ, PY=str(fake), EN_DUMP=str(tmp_path / "dump.xml.bz2"), EN_VOCAB=str(tmp_path / "vocab.txt"),
               PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    res = subprocess.run(["bash", str(ROOT / "scripts/build_gpu_bundle.sh"), str(old)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == (-signal.SIGTERM if interrupted else 1), res.stderr
    assert (old / "bundle.json").read_text() == "{}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin", "bundle", "dump.xml.bz2", "python", "vocab.txt"]


def test_the_driver_exits_2_without_cuda(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, "benchmarks/gpu_check.py", "--results", str(tmp_path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 2 and "no CUDA device" in res.stderr


def test_the_mfu_target_is_judged_on_the_best_configuration_named() -> None:
    """The sweep's best row (ZeRO-1 here), not the first ZeRO-2 one, and which it was."""
    rows = [{"name": "ZeRO-2 unpadded micro 256", "ds_config": "zero2_bf16.json", "unpad": True, "mfu": 0.22,
             "tokens_per_s": 2.9e5},
            {"name": "ZeRO-2 padded micro 256", "ds_config": "zero2_bf16.json", "unpad": False, "mfu": 0.20,
             "tokens_per_s": 2.7e5},
            {"name": "ZeRO-1 unpadded micro 256", "ds_config": "zero1_bf16.json", "unpad": True, "mfu": 0.47,
             "tokens_per_s": 3.6e5},
            {"name": "ZeRO-2 unpadded micro 64", "ds_config": "zero2_bf16.json", "unpad": True,
             "error": "OutOfMemoryError"}]
    rows += [{"name": "README command (zero2.json, auto)", "ds_config": "zero2.json", "readme": True, "mfu": 0.40,
              "tokens_per_s": 3.4e5, "micro_batch": 256},
             {"name": "HF BertForPreTraining MLM+NSP compiled micro 256", "peer": "hf-compiled", "mfu": 0.3,
              "tokens_per_s": 4.0e5, "ds_config": None, "unpad": False},
             {"name": "ZeRO-1 unpadded micro 32", "ds_config": "zero1_bf16.json", "unpad": True, "mfu": 0.30,
              "tokens_per_s": 2.0e5, "micro_batch": 32}]
    rows[0]["micro_batch"] = rows[1]["micro_batch"] = rows[2]["micro_batch"] = 256
    rows[2]["tacl_loss_share"], rows[0]["tacl_loss_share"] = 0.004, 0.012
    found = gpu_check.targets({"phases": {"training": {"data": rows}}})
    assert found["TaCL-base end-to-end MFU (best: ZeRO-1 unpadded micro 256)"] == {
        "wanted": ">= 45%", "measured": "47.0%", "met": True}
    assert found["unpadded / padded tokens/s"]["measured"] == "1.07x"
    assert found["TaCL-base MFU, ZeRO-2 unpadded micro 256"] == {"wanted": ">= 45%", "measured": "22.0%",
                                                                "met": False}
    assert found["TaCL-base MFU, ZeRO-1 unpadded micro 32"]["wanted"] == ">= 35%"
    assert found["TaCL tokens/s / compiled HF MLM+NSP (ZeRO-1 unpadded micro 256)"]["measured"] == "0.90x"
    assert found["README command / best configuration"] == {"wanted": ">= 0.9x", "measured": "0.94x", "met": True}
    assert found["TaCL loss share of a step (largest of the sweep)"] == {
        "wanted": "< 1% (else Triton >= 3x)", "measured": "1.2%", "met": False}


def test_cuda_graph_rows_warm_up_until_their_graphs_replay() -> None:
    """A shape's graph is recorded at its second call: the --cuda-graphs row warms up
    until a step runs only shapes called twice before it, within its limit; the
    table says how many graphs were still recorded while timed."""
    from collections import Counter

    import bench_train_gpu

    calls: Counter[int] = Counter()
    plan = iter([[128, 256], [128, 384], [128, 256], [256, 128, 128], [384]])
    steps = bench_train_gpu.warm_up_graphs(lambda: calls.update(next(plan)), calls, 10)
    assert steps == 4 and calls == Counter({128: 5, 256: 3, 384: 1})  # the 4th ran 128 and 256, each called twice
    assert bench_train_gpu.warm_up_graphs(lambda: calls.update([512]), calls, 3) == 3  # a new shape each time
    row = {"name": "ZeRO-1 unpadded micro 32 CUDA graphs", "micro_batch": 32, "accumulation": 8, "step_ms": 90.0,
           "tokens_per_s": 5e5, "mfu": 0.3, "mfu_student": 0.3, "mfu_teacher": 0.4, "teacher_share": 0.1,
           "peak_mem_gib": 9.0, "graphs_recorded_while_timed": 2}
    report = {"mode": "dry", "phases": {"training": {"status": "ok", "data": [
        row, {**row, "graphs_recorded_while_timed": 0}]}}}
    lines = [line for line in gpu_check.table(report).splitlines() if line.startswith("| ZeRO-1")]
    assert lines[0].startswith("| ZeRO-1 unpadded micro 32 CUDA graphs (2 graphs recorded while timed) | 32 × 8 |")
    assert lines[1].startswith("| ZeRO-1 unpadded micro 32 CUDA graphs | 32 × 8 |")


def test_a_row_whose_compiled_run_failed_is_measured_eagerly_next(monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """On a GPU the first run of the compiled encoder may fail: the row keeps its
    error (first line in the table, traceback in the log), the same setup runs next
    with --no-compile, and no target is judged on such a fallback. Out of memory, a
    peer and a --cuda-graphs row get no fallback."""
    import bench_train_gpu
    from bench_train_gpu import Setup

    def run_config(data, model, workdir, setup: Setup, steps, warmup, workers) -> dict:
        if setup.micro_batch == 64:
            raise torch.OutOfMemoryError("CUDA out of memory")
        if not setup.eager_fallback and setup.peer is None:
            raise RuntimeError("InductorError: LoweringException | a line\nmore of it")
        return {"name": setup.name, "ds_config": setup.ds_config, "micro_batch": setup.micro_batch,
                "unpad": setup.unpad, "readme": setup.readme, "peer": setup.peer,
                "eager_fallback": setup.eager_fallback, "accumulation": 1, "step_ms": 100.0, "tokens_per_s": 1e5,
                "mfu": 0.2, "mfu_student": 0.2, "mfu_teacher": 0.2, "teacher_share": 0.2, "peak_mem_gib": 1.0,
                "tacl_loss_share": 0.5 if setup.eager_fallback else 0.0}

    monkeypatch.setattr(bench_train_gpu, "run_config", run_config)
    setups = [Setup("zero2.json", None, None, readme=True), Setup("zero1_bf16.json", 256, True),
              Setup("zero1_bf16.json", 256, False, peer="hf-compiled"), Setup("zero2_bf16.json", 64, True),
              Setup("zero1_bf16.json", 32, True, cuda_graphs=True)]
    rows = bench_train_gpu.sweep(Path("unused"), setups, 1, 1, eager_fallback=True)
    assert [(r["name"], "error" in r) for r in rows] == [
        ("README command (zero2.json, auto)", True),
        ("README command (zero2.json, auto, eager: its compiled run failed)", False),
        ("ZeRO-1 unpadded micro 256", True),
        ("ZeRO-1 unpadded micro 256 (eager: its compiled run failed)", False),
        ("HF BertForPreTraining MLM+NSP compiled micro 256", False),
        ("ZeRO-2 unpadded micro 64", True),
        ("ZeRO-1 unpadded micro 32 CUDA graphs", True)]
    assert capsys.readouterr().err.count("Traceback (most recent call last)") == 4
    report = {"mode": "full", "phases": {"training": {"status": "ok", "data": rows}}}
    found = gpu_check.targets(report)
    assert not any("eager" in name or "README" in name or "end-to-end" in name or "loss share" in name
                   for name in found), found
    text = gpu_check.table(report)
    assert "| ZeRO-1 unpadded micro 256 | | RuntimeError: InductorError: LoweringException / a line | |" in text
    assert "| ZeRO-1 unpadded micro 256 (eager: its compiled run failed) | 256 × 1 | 100 |" in text
    assert len(bench_train_gpu.sweep(Path("unused"), setups[:2], 1, 1, eager_fallback=False)) == 2
