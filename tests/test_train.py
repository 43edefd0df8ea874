"""Training through a real launcher with CPU ranks (gloo), on a dataset built by the
pipeline from the project-made Chinese corpus.

The tests whose subject is the ``deepspeed`` launcher (the README's command, how its
ranks' errors reach the console, a killed launcher) run under it; the others run the
same ``train.py`` under ``torchrun``, which the design supports as well and which
starts in about 4 s less on the tier's 2 cores (it does not import DeepSpeed twice
before the ranks start)."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import ROOT, TINY_BERT, ZH_TEXT, ZH_VOCAB, build_dataset, free_port, main_in_this_process

from tacl_scale.metrics import read_records, step_records
from tacl_scale.run_dir import RunDir

pytestmark = [pytest.mark.slow, pytest.mark.framework]

DEEPSPEED = Path(sys.executable).parent / "deepspeed"
TORCHRUN = Path(sys.executable).parent / "torchrun"


def _env() -> dict[str, str]:
    return dict(os.environ, DS_ACCELERATOR="cpu", TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1")


def launch(args: list[str], ranks: int = 2, launcher: str = "torchrun") -> subprocess.CompletedProcess[str]:
    """``torchrun --nproc_per_node RANKS tacl_scale/train.py ARGS`` on CPU, or with
    ``launcher="deepspeed"``, ``deepspeed --num_gpus RANKS ...``."""
    port = str(free_port())
    if launcher == "deepspeed":
        cmd = [str(DEEPSPEED), "--num_gpus", str(ranks), "--master_port", port, "tacl_scale/train.py", *args]
    else:
        cmd = [str(TORCHRUN), "--nproc_per_node", str(ranks), "--master_port", port, "tacl_scale/train.py", *args]
    res = subprocess.run(cmd, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=600)
    # DeepSpeed's CPU all-reduce leaves a shared-memory segment per rank; each rank removes
    # its own once all have mapped it, so none is left, also by a run that failed.
    left = list(Path("/dev/shm").glob(f"deepspeed_allreduce_buffer_*_{port}_*"))
    assert not left, left
    return res


def test_launch_ports_are_free_and_below_the_kernels_ephemeral_range() -> None:
    """The ports ``launch`` gives a launcher: nothing holds them, and the kernel
    never hands them to an outgoing connection (a port it picked itself could be
    taken by a rank's own gloo connection before the rendezvous binds it)."""
    import socket

    ephemeral = Path("/proc/sys/net/ipv4/ip_local_port_range")
    if not ephemeral.exists():
        pytest.skip("no /proc/sys/net/ipv4/ip_local_port_range (not Linux)")
    first_ephemeral = int(ephemeral.read_text().split()[0])
    if first_ephemeral <= 2048:
        pytest.skip(f"the kernel's ephemeral ports start at {first_ephemeral}: no range below them to draw from")
    for _ in range(20):
        port = free_port()
        assert 1024 < port < first_ephemeral
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
            listener.bind(("127.0.0.1", port))


def metrics(run: Path) -> dict[int, dict[str, float]]:
    """Per-step metrics of rank 0 (the last record of a step wins after a resume)."""
    return {r["step"]: r for r in step_records(read_records(RunDir(run).metrics_file))}


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("train")
    dataset = build_dataset(root / "ds", "--input", str(ZH_TEXT), "--format", "text", "--language", "zh",
                            "--tokenizer", str(ZH_VOCAB), "--min-doc-chars", "10", "--dupe-factor", "1",
                            "--max-seq-len", "64")
    config = root / "bert.json"
    config.write_text(json.dumps(TINY_BERT))
    return {"root": root, "data": dataset, "config": config}


def common(setup: dict[str, Path], steps: int = 6) -> list[str]:
    return ["--recipe", "tiny-cpu", "--data", str(setup["data"]), "--model", str(setup["config"]),
            "--steps", str(steps), "--save-every", "3", "--log-every", "1", "--num-workers", "1",
            "--lr", "1e-3"]


@pytest.fixture(scope="module")
def full_run(setup: dict[str, Path]) -> Path:
    run = setup["root"] / "full"
    res = launch([*common(setup), "--output", str(run)], launcher="deepspeed")  # the README's launcher
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return run


def test_two_ranks_train_checkpoint_log_and_export(full_run: Path) -> None:
    steps = metrics(full_run)
    assert sorted(steps) == [1, 2, 3, 4, 5, 6]
    for record in steps.values():
        for key in ("loss", "tacl", "mlm", "nsp", "tacl_acc", "lr", "samples_per_s", "tokens_per_s"):
            assert key in record and math.isfinite(record[key]), (key, record)
        assert record["loss"] == pytest.approx(record["tacl"] + record["mlm"] + record["nsp"], rel=1e-5)
    run = json.loads((full_run / "run.json").read_text())
    assert run["world_size"] == 2 and run["deepspeed_config"]["gradient_accumulation_steps"] == 1
    assert (full_run / "checkpoints" / "latest").read_text() == "step00000006"
    assert sorted(p.name for p in (full_run / "checkpoints").iterdir() if p.is_dir()) == [
        "step00000003", "step00000006"]
    assert list((full_run / "tensorboard").glob("events.out.tfevents.*"))

    from transformers import AutoModel, BertForPreTraining, BertTokenizerFast

    exported = full_run / "export"
    model = BertForPreTraining.from_pretrained(exported)
    encoder = AutoModel.from_pretrained(exported)
    assert torch.equal(model.bert.embeddings.word_embeddings.weight, encoder.embeddings.word_embeddings.weight)
    tokenizer = BertTokenizerFast.from_pretrained(exported)
    assert tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]", "[MASK]"]) == [101, 102, 103]
    from data_prep.tokenization import TokenizerConfig, load_tokenizer

    ours = load_tokenizer(TokenizerConfig(str(ZH_VOCAB)))
    sentence = "数学是研究数量、结构以及空间等概念的一门学科。"
    assert tokenizer(sentence, add_special_tokens=False)["input_ids"] == ours.encode([sentence])[0].ids.tolist()


def test_the_compiled_encoder_trains_as_the_eager_one(setup: dict[str, Path], tmp_path: Path) -> None:
    """``--compile`` (the CUDA default) on packed batches through the launcher gives
    the eager path's losses step by step, for every objective (mirror's doubled
    batches included; fp32; a model without dropout, since the compiled graph draws
    its masks from inductor's own random stream). One rank: two would compile the
    same graphs at once on the tier's two cores."""
    model = tmp_path / "bert.json"
    model.write_text(json.dumps({**TINY_BERT, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}))
    runs = {}
    for flag in ("--compile", "--no-compile"):
        run = tmp_path / flag.strip("-")
        # lr 1e-4: Adam turns fp32 rounding in near-zero gradients into whole steps; at 1e-3 the two
        # paths' losses drifted 1.04e-4 apart by step 4 on torch 2.11 (within 1e-5 relative).
        args = [*common(setup, steps=4), "--model", str(model), "--unpad", flag, "--no-export", "--lr", "1e-4",
                "--objectives", "tacl,mlm,nsp,mirror", "--output", str(run)]
        res = launch(args, ranks=1)
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
        segment = json.loads((run / "run.json").read_text())["history"][-1]
        assert segment["compile"] is (flag == "--compile") and segment["unpad"] is True
        # dynamo falls back to eager past its recompile limit, with a warning only: the losses would still match
        assert "torch._dynamo hit config." not in res.stderr, res.stderr[-3000:]
        runs[flag] = metrics(run)
    assert sorted(runs["--compile"]) == [1, 2, 3, 4]
    for step, eager in runs["--no-compile"].items():
        for key in ("loss", "tacl", "mlm", "nsp", "mirror", "tacl_acc", "mlm_acc", "mirror_acc"):
            assert runs["--compile"][step][key] == pytest.approx(eager[key], abs=1e-4), (step, key)
    assert runs["--no-compile"][4]["loss"] != runs["--no-compile"][1]["loss"]  # it trained


def test_export_cli_matches_the_final_export(full_run: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    from transformers import BertForPreTraining

    from tacl_scale.export import main as export_main

    res = subprocess.run([sys.executable, "-m", "tacl_scale.export", str(full_run), str(tmp_path / "out")],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    # DeepSpeed's prints and both progress bars were most of the output
    assert res.stdout == f"exported {tmp_path / 'out'}\n"
    assert res.stderr.splitlines() == [f"INFO: exporting {full_run / 'checkpoints' / 'step00000006'}"], res.stderr
    a = BertForPreTraining.from_pretrained(tmp_path / "out").state_dict()
    b = BertForPreTraining.from_pretrained(full_run / "export").state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert export_main([str(tmp_path), str(tmp_path / "x")]) == 2  # not a run directory
    assert "run.json" in capsys.readouterr().err


def test_the_analysis_takes_a_run_its_checkpoints_or_one_checkpoint(full_run: Path, tmp_path: Path) -> None:
    """Each is exported to a temporary directory first; ``RUN/checkpoints`` was
    refused as neither a model nor a run."""
    from tacl_scale.analysis import main as analysis

    sentences = tmp_path / "s.txt"
    sentences.write_text("今天天气很好。\n我们一起去公园散步。\n", encoding="utf-8")
    models = [full_run, full_run / "checkpoints", full_run / "checkpoints" / "step00000006"]
    argv = ["selfsim", *(arg for model in models for arg in ("--model", str(model))), "--sentences", str(sentences),
            "--out", str(tmp_path / "out")]
    assert analysis(argv) == 0
    report = json.loads((tmp_path / "out" / "selfsim.json").read_text())["models"]
    assert len(report) == 3
    first, *others = report.values()
    assert all(other == first for other in others)  # the newest checkpoint, three ways


def test_an_export_replaces_an_earlier_export_whole_and_nothing_else(full_run: Path, tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from tacl_scale.export import EXPORT_MARKER
    from tacl_scale.export import main as export_main

    assert (full_run / "export" / EXPORT_MARKER).is_file()  # the run's own export is marked too
    out = tmp_path / "out"
    assert export_main([str(full_run), str(out)]) == 0
    assert json.loads((out / EXPORT_MARKER).read_text())["source"].startswith(str(full_run / "checkpoints"))
    (out / "model-00002-of-00002.safetensors").write_bytes(b"stale")  # as a differently sharded export leaves
    assert export_main([str(full_run), str(out)]) == 0
    assert not (out / "model-00002-of-00002.safetensors").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no partial or previous directory left

    # The model a run started from, the run directory itself or a place inside it, a file: refused, untouched.
    started_from = tmp_path / "bert-base-uncased"
    started_from.mkdir()
    (started_from / "config.json").write_text("{}", encoding="utf-8")
    a_file = tmp_path / "file"
    a_file.write_text("kept", encoding="utf-8")
    before = sorted(p.relative_to(full_run) for p in full_run.rglob("*"))
    for target in (started_from, full_run, a_file, full_run / "export" / "mine", full_run / "checkpoints" / "x"):
        capsys.readouterr()
        assert export_main([str(full_run), str(target)]) == 2, target
        errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
        assert len(errors) == 1 and errors[0].startswith(f"error: {target}: "), errors
    assert [p.name for p in started_from.iterdir()] == ["config.json"] and a_file.read_text() == "kept"
    assert sorted(p.relative_to(full_run) for p in full_run.rglob("*")) == before


def test_loss_falls_when_overfitting_and_objective_switch(setup: dict[str, Path]) -> None:
    run = setup["root"] / "overfit"
    args = ["--recipe", "tiny-cpu", "--data", str(setup["data"]), "--model", str(setup["config"]),
            "--steps", "40", "--save-every", "40", "--log-every", "10", "--num-workers", "0",
            "--lr", "3e-3", "--warmup-ratio", "0.05", "--objectives", "mlm,nsp", "--no-export",
            "--output", str(run), "--batch-size", "8", "--micro-batch-size", "4"]
    # Two ranks, 8-instance batches drawn from a dataset of a few dozen instances.
    res = launch(args, ranks=2)
    assert res.returncode == 0, res.stderr[-3000:]
    steps = metrics(run)
    assert "tacl" not in steps[1] and "mlm" in steps[1]
    early = sum(steps[s]["mlm"] for s in range(1, 6)) / 5
    late = sum(steps[s]["mlm"] for s in range(36, 41)) / 5
    assert late < early - 1.0, (early, late)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("vocab", "gives other ids ("),
        ("positions", "has 32 positions"),
        ("ds_no_zero", "no zero_optimization section (ZeRO stage)"),
        ("batch", "a whole number of accumulation steps; --micro-batch-size must divide"),
        ("existing_run", "holds another run"),
        ("no_validation", "needs a validation split"),
        ("output_is_data", "--output is the --data directory"),
    ],
)
def test_refusals(setup: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], change: str,
                  message: str) -> None:
    args = {"--recipe": "tiny-cpu", "--data": str(setup["data"]), "--model": str(setup["config"]),
            "--output": str(tmp_path / "run"), "--steps": "2", "--num-workers": "0"}
    if change == "vocab":
        model_dir = tmp_path / "model"
        from transformers import BertConfig, BertForPreTraining

        BertForPreTraining(BertConfig(**TINY_BERT)).save_pretrained(model_dir)
        (model_dir / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nother\n")
        args["--model"] = str(model_dir)
    elif change == "positions":
        small = tmp_path / "small.json"
        small.write_text(json.dumps(TINY_BERT | {"max_position_embeddings": 32}))
        args["--model"] = str(small)
    elif change == "ds_no_zero":
        bad = tmp_path / "ds.json"
        bad.write_text(json.dumps({"train_micro_batch_size_per_gpu": 4}))
        args["--ds"] = str(bad)
    elif change == "batch":
        args["--batch-size"] = "10"
        args["--micro-batch-size"] = "4"
    elif change == "existing_run":
        (tmp_path / "run").mkdir()
        (tmp_path / "run" / "run.json").write_text("{}")
    elif change == "no_validation":
        args["--eval-every"] = "5"
    elif change == "output_is_data":
        args["--output"] = args["--data"]
    data_files = sorted(setup["data"].rglob("*"))
    code, stderr = main_in_this_process([item for pair in args.items() for item in pair], capsys)
    assert code == 2, stderr[-3000:]
    errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and message in errors[0], errors
    assert sorted(setup["data"].rglob("*")) == data_files  # not even the run's lock file


def test_killed_run_resumes_with_the_same_losses(setup: dict[str, Path], full_run: Path) -> None:
    """SIGKILL the whole deepspeed launcher's process group once a checkpoint exists,
    resume, and compare every step with the uninterrupted run (steps done twice after
    the checkpoint are taken from the resumed job): resuming on the same ranks is
    exact."""
    import signal
    import time

    run = setup["root"] / "killed"
    port = str(free_port())
    cmd = [str(DEEPSPEED), "--num_gpus", "2", "--master_port", port, "tacl_scale/train.py",
           *common(setup), "--output", str(run)]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + 300
    latest = run / "checkpoints" / "latest"
    while time.monotonic() < deadline and not latest.exists() and proc.poll() is None:
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert latest.read_text() == "step00000003", "killed after the first checkpoint"
    assert not (run / "export").exists()
    resumed = launch([*common(setup), "--output", str(run), "--resume"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resumed from {run / 'checkpoints' / 'step00000003'}" in resumed.stdout + resumed.stderr
    straight, after = metrics(full_run), metrics(run)
    assert sorted(after) == [1, 2, 3, 4, 5, 6]
    # Steps logged after the checkpoint by the killed job are not logged twice.
    logged = [r["step"] for r in step_records(read_records(RunDir(run).metrics_file))]
    assert logged == [1, 2, 3, 4, 5, 6]
    for step in range(1, 7):
        assert after[step]["loss"] == pytest.approx(straight[step]["loss"], rel=1e-6, abs=1e-7), step


def test_an_interrupted_save_never_becomes_latest(tmp_path: Path) -> None:
    from tacl_scale.checkpoint import latest_tag

    root = tmp_path / "checkpoints"
    (root / "step00000003").mkdir(parents=True)
    assert latest_tag(root) is None  # written, but the pointer was never moved
    (root / "latest").write_text("step00000003")
    (root / "step00000006").mkdir()  # a later save that died before the pointer moved
    assert latest_tag(root) == "step00000003"
    (root / "latest").write_text("step00000009")  # pointer to a tag that is gone
    assert latest_tag(root) is None


def test_config_optimizer_params_are_defaults_and_flags_override(tmp_path: Path) -> None:
    from tacl_scale.train import parse_args

    ds = tmp_path / "ds.json"
    ds.write_text(json.dumps({"zero_optimization": {"stage": 2}, "train_batch_size": 64,
                              "train_micro_batch_size_per_gpu": 8, "gradient_clipping": 0.5,
                              "optimizer": {"type": "AdamW", "params": {"lr": 3e-4, "weight_decay": 0.1,
                                                                        "betas": [0.9, 0.98], "eps": 1e-8}}}))
    base = ["--ds", str(ds), "--data", "d", "--model", "m", "--output", "o"]
    config = parse_args(base)
    assert (config.optim.lr, config.optim.weight_decay, config.optim.betas, config.optim.eps) == (
        3e-4, 0.1, (0.9, 0.98), 1e-8)
    assert (config.optim.batch_size, config.optim.micro_batch_size, config.optim.grad_clip) == (64, 8, 0.5)
    config = parse_args([*base, "--lr", "1e-5", "--batch-size", "32", "--data", "d2",
                         "--data-weights", "1", "2", "--objectives", "mlm,nsp"])
    assert config.optim.lr == 1e-5 and config.optim.batch_size == 32
    assert config.data.weights == (1.0, 2.0) and config.objective.objectives == ("mlm", "nsp")
    paper = parse_args(["--ds", "ds_configs/zero2.json", "--data", "d", "--model", "m", "--output", "o"])
    assert (paper.optim.lr, paper.optim.batch_size, paper.optim.steps, paper.optim.warmup_ratio,
            paper.objective.temperature) == (1e-4, 256, 150_000, 0.1, 0.01)


def test_blended_data_and_dynamic_masking_train(setup: dict[str, Path], tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "blend"
    with_split = build_dataset(tmp_path / "with_split", "--input", str(ZH_TEXT), "--format", "text",
                               "--language", "zh", "--tokenizer", str(ZH_VOCAB), "--min-doc-chars", "10",
                               "--dupe-factor", "1", "--max-seq-len", "64", "--validation-fraction", "0.3")
    code, stderr = main_in_this_process(["--recipe", "tiny-cpu", "--data", str(setup["data"]), "--data",
                                         str(with_split), "--data-weights", "1", "3", "--dynamic-masking",
                                         "--eval-every", "1", "--model", str(setup["config"]), "--steps", "2",
                                         "--num-workers", "0", "--no-export", "--output", str(run)], capsys)
    assert code == 0, stderr[-3000:]
    run_info = json.loads((run / "run.json").read_text())
    assert run_info["config"]["data"]["weights"] == [1.0, 3.0] and run_info["config"]["data"]["dynamic_masking"]
    assert sorted(metrics(run)) == [1, 2]
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(next((run / "tensorboard").glob("events.out.tfevents.*"))))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    for tag in ("eval/loss", "eval/tacl", "eval/mlm", "eval/nsp", "eval/selfsim_layer0", "eval/selfsim_layer2",
                "eval_initial/selfsim_layer2", "train/loss", "train/lr", "train/grad_norm"):
        assert tag in tags, tag
    assert [e.step for e in events.Scalars("eval/selfsim_layer2")] == [1, 2]
    # metrics.jsonl holds the same evaluations, as events beside the steps' records.
    records = read_records(RunDir(run).metrics_file)
    evaluations = [r for r in records if r.get("event") == "eval"]
    assert [r["at_step"] for r in evaluations] == [1, 2]
    assert [r["selfsim_layer2"] for r in evaluations] == pytest.approx(
        [e.value for e in events.Scalars("eval/selfsim_layer2")], rel=1e-6)
    assert {"loss", "tacl", "mlm", "nsp"} <= evaluations[0].keys()
    assert [r["at_step"] for r in records if r.get("event") == "eval_initial"] == [1]


def test_a_full_disk_at_the_runs_export_is_one_line_and_keeps_the_checkpoint(
        setup: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The end-of-run export onto a full disk ended in safetensors' traceback
    (SafetensorError, exit 1). Now one line naming RUN/export, exit 2; the last
    checkpoint is whole, so ``tacl-export`` can make the export later."""
    import transformers.modeling_utils
    from safetensors import SafetensorError

    saved = transformers.modeling_utils.safe_save_file

    def full_at_the_export(tensors: object, filename: str, metadata: object = None) -> None:
        if ".export.partial" not in str(filename):  # initial/ is written as usual
            return saved(tensors, filename, metadata=metadata)
        Path(filename).write_bytes(b"half a shard")
        raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")

    monkeypatch.setattr(transformers.modeling_utils, "safe_save_file", full_at_the_export)
    run = tmp_path / "run"
    code, stderr = main_in_this_process([*common(setup, steps=2), "--save-every", "2", "--num-workers", "0",
                                         "--output", str(run)], capsys)
    assert (code, stderr.strip().splitlines()[-1]) == (
        2, f"error: {run / 'export'}: the export could not be written: No space left on device (the disk is full)")
    assert "Traceback" not in stderr
    assert not (run / "export").exists() and not list(run.glob(".export*"))
    assert (run / "checkpoints" / "latest").read_text().strip() == "step00000002"


def test_the_documented_config_settles_auto_on_cpu(setup: dict[str, Path], tmp_path: Path) -> None:
    """The README's zero2.json (precision and micro-batch "auto") on 2 CPU ranks: fp32,
    the largest micro-batch that divides the per-rank batch (up to 32), said once;
    the paper's fp16 (``--precision fp16``) falls back to fp32 there with one line."""
    res = launch(["--ds", "ds_configs/zero2.json", "--data", str(setup["data"]), "--model", str(setup["config"]),
                  "--steps", "2", "--batch-size", "8", "--num-workers", "0", "--precision", "fp16",
                  "--no-export", "--output", str(tmp_path / "run")], launcher="deepspeed")
    assert res.returncode == 0, res.stderr[-3000:]
    output = res.stdout + res.stderr
    assert output.count("asks for fp16, which the CPU accelerator cannot do: training in fp32") == 1
    assert output.count("micro-batch auto: 4 of the per-rank batch of 4 (on the CPU") == 1
    assert output.count("student: random init from") == 1  # rank 1 logs its warnings and errors only
    assert "FutureWarning" not in output  # DeepSpeed's call of a torch function torch 2.13 deprecates
    run_info = json.loads((tmp_path / "run" / "run.json").read_text())
    ds = run_info["deepspeed_config"]
    assert ds["fp16"]["enabled"] is False and ds["bf16"]["enabled"] is False
    assert ds["train_micro_batch_size_per_gpu"] == 4 and ds["gradient_accumulation_steps"] == 1
    assert ds["zero_optimization"]["stage"] == 2 and ds["zero_optimization"]["overlap_comm"] is True  # 2 ranks
    assert run_info["config"]["optim"]["micro_batch_size"] == 4


@pytest.mark.parametrize("change", ["no_manifest", "bad_json"])
def test_refusals_are_one_line_on_two_ranks(setup: dict[str, Path], tmp_path: Path, change: str) -> None:
    """Through the launcher with 2 ranks: one ``error:`` line naming the path, no
    traceback, exit code 2."""
    args = {"--recipe": "tiny-cpu", "--data": str(setup["data"]), "--model": str(setup["config"]),
            "--output": str(tmp_path / "run"), "--steps": "2", "--num-workers": "0"}
    if change == "no_manifest":
        (tmp_path / "empty").mkdir()
        args["--data"] = str(tmp_path / "empty")
        named = str(tmp_path / "empty" / "manifest.json")
    else:
        (tmp_path / "ds.json").write_text("{not json")
        args["--ds"] = named = str(tmp_path / "ds.json")
    # The deepspeed launcher (torchrun adds its own traceback and exit code 1 when a rank fails).
    res = launch([item for pair in args.items() for item in pair], ranks=2, launcher="deepspeed")
    output = res.stdout + res.stderr
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert res.returncode == 2, output[-3000:]
    assert len(errors) == 1 and named in errors[0], errors
    assert "Traceback" not in output


def test_resume_on_another_number_of_ranks(setup: dict[str, Path], tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """The data position is global and dropout is keyed by the micro-batch's global
    index: a run on 2 ranks logs the losses of the same run on 1, a 2-rank checkpoint
    resumes on 1 rank and a 1-rank one on 2 (through DeepSpeed's universal checkpoint)
    with the uninterrupted 1-rank run's losses, the micro-batch may change (same
    samples), the global batch may not."""
    args = ["--recipe", "tiny-cpu", "--data", str(setup["data"]), "--model", str(setup["config"]),
            "--steps", "12", "--save-every", "6", "--log-every", "1", "--num-workers", "0", "--lr", "1e-3",
            "--batch-size", "8", "--micro-batch-size", "2", "--no-export"]

    def run(name: str, ranks: int, *extra: str) -> dict[int, dict[str, float]]:
        """On ``ranks`` ranks under torchrun; ``ranks=0``: one rank, in this process."""
        if ranks == 0:
            code, stderr = main_in_this_process([*args, "--output", str(tmp_path / name), *extra], capsys)
            assert code == 0, stderr[-3000:]
        else:
            res = launch([*args, "--output", str(tmp_path / name), *extra], ranks=ranks)
            assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
        return metrics(tmp_path / name)

    def same(a: dict[int, dict[str, float]], b: dict[int, dict[str, float]], steps: range) -> None:
        for step in steps:
            assert b[step]["sample_digest"] == a[step]["sample_digest"], step
            for key in ("loss", "tacl", "mlm", "nsp"):
                assert b[step][key] == pytest.approx(a[step][key], rel=1e-5, abs=1e-6), (step, key)

    one = run("one", 0)  # the reference: uninterrupted, on 1 rank
    assert sorted(one) == list(range(1, 13)) and len({one[s]["sample_digest"] for s in one}) == 12

    # Steps 1-6 on 2 ranks, 7-12 on 1: both halves equal the 1-rank run's.
    run("two_then_one", 2, "--stop-after-steps", "6")
    shutil.copytree(tmp_path / "two_then_one", tmp_path / "micro")
    shrunk = run("two_then_one", 1, "--resume")
    assert (tmp_path / "two_then_one" / "checkpoints" / "step00000006.universal").is_dir()
    same(one, shrunk, range(1, 13))

    run("one_then_two", 0, "--stop-after-steps", "6")
    grown = run("one_then_two", 2, "--resume")
    same(one, grown, range(1, 13))

    bigger = run("micro", 0, "--resume", "--micro-batch-size", "4")
    for step in range(7, 13):  # same samples; other micro-batches, so other dropout masks
        assert bigger[step]["sample_digest"] == one[step]["sample_digest"]

    # Even with --allow-changes: another global batch would reorder the data.
    code, stderr = main_in_this_process([*args, "--output", str(tmp_path / "micro"), "--resume", "--batch-size",
                                         "16", "--allow-changes"], capsys)
    assert code == 2 and "global batch of 8" in stderr, stderr[-3000:]


def test_model_1_through_the_launcher_resumes_exactly(setup: dict[str, Path]) -> None:
    """MLM + NSP + mirror (the paper's model-1) on 2 CPU ranks, negatives gathered
    across them: a run stopped after 2 steps and resumed logs the losses of an
    uninterrupted run. The job stopped early exports nothing; the one that ends the run does."""
    args = [*common(setup, steps=4), "--objectives", "mlm,nsp,mirror", "--save-every", "2"]
    straight_run, resumed_run = setup["root"] / "model1", setup["root"] / "model1_resumed"
    straight = launch([*args, "--output", str(straight_run)])
    assert straight.returncode == 0, straight.stderr[-3000:]
    first = launch([*args, "--output", str(resumed_run), "--stop-after-steps", "2"])
    assert first.returncode == 0, first.stderr[-3000:]
    assert sorted(metrics(resumed_run)) == [1, 2] and not (resumed_run / "export").exists()
    second = launch([*args, "--output", str(resumed_run), "--resume"])
    assert second.returncode == 0, second.stderr[-3000:]
    assert (resumed_run / "export" / "config.json").is_file()
    expected, resumed = metrics(straight_run), metrics(resumed_run)
    assert sorted(resumed) == [1, 2, 3, 4]
    assert "tacl" not in expected[1]
    for step in range(1, 5):
        for key in ("loss", "mlm", "nsp", "mirror", "mirror_acc"):
            assert resumed[step][key] == pytest.approx(expected[step][key], rel=1e-6, abs=1e-7), (step, key)
