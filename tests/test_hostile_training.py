"""Hostile probes of training, as a table (the build's are in tests/test_hostile.py):
each case damages a dataset or interrupts a run the way a user or a scheduler
would, and says what a mature tool does then. Runs are ``tacl-train`` as one
process in a plain shell (no launcher variables) unless said otherwise.

| case | expected outcome |
|---|---|
| the dataset's tokenizer copy replaced by another vocabulary | refused in one line naming the file, before anything is written |
| the manifest's tokenizer `sha256`, `file` or `vocab_size` edited | refused in one line naming what disagrees |
| a bit flipped in a shard | `tacl-inspect-dataset DIR --verify` names the file (exit 2); training refuses it by default |
| a token id past the vocabulary, shards not verified | one line naming the shard file, the instance and the position; exit 2; `inspect` shows the id as outside the vocabulary |
| a masked position past its instance, shards not verified, read by a DataLoader worker | one line naming the shard file and the instance; exit 2 (it hung at exit) |
| SIGUSR1 to the rank and its 2 DataLoader workers (as Slurm signals a job step) | checkpoint, `PREEMPTED`, exit 0; `--resume` goes on |
| SIGTERM while the run is being built | the same: a checkpoint and `PREEMPTED`, never a silent death |
| `metrics.jsonl` on a full disk (2 ranks, through the launcher) | rank 0: one `error:` line naming it and "the disk is full"; rank 1: one line saying another rank stopped; exit 2, the run lock released, no traceback |
| a checkpoint written to a full disk | one `error:` line naming it and the newest complete checkpoint; that one stays `latest` and resumes |
| torch.compile fails on the encoder (as it may on a GPU or torch it has not met) | the traceback (the report), then one `error:` line naming `--no-compile`; exit 2, the run lock released |
| Ctrl-C during training | one line naming the newest checkpoint and the resume command, exit 130, no traceback |
| `--eval-every` on a dataset whose validation split came out empty | refused naming the fraction and the fix |
| `run.json` written by a newer version | refused naming the version, not taken for changed settings |
| a `--model` whose `tokenizer.json` does not parse, or with `type_vocab_size` 1 on sentence pairs, or `intermediate_size` -5 | one line naming the file (and the key), exit 2, not even the run directory made |
| `--resume` with a `--model` of another shape (edited in place; another one with `--allow-changes`) | refused naming each setting with both values, before the checkpoint is loaded; the run's files untouched |
| a new run in an `--output` holding the `tokenizer/` and `initial/` of a first job stopped before recording itself (maybe under another `--model`) | `initial/` replaced by this run's init (removed for a pretrained `--model`); `tokenizer/` kept only where it is this run's tokenizer, else refused naming it, as is an `initial/` no run wrote; nothing deleted that a run did not write (they were taken as the run's, and another model's tokenizer exported beside its weights) |
| `--resume` with a `--model` whose config.json's dropout, activation, LayerNorm eps or pad id was edited in place | a change of the run's settings: refused naming each with both values, the files untouched; `--allow-changes` trains on and records it in run.json's history and student_config (it resumed silently) |
| `--model` a model's own `config.json` (beside its weights); a folder without a tokenizer whose `vocab_size` is not the dataset's vocabulary's | one line naming the file and the fix, exit 2, not even the run directory made |
| a sentence encoder (no MLM/NSP heads) on 2 ranks through the launcher | its new heads said once, by rank 0, grouped by head; no "checkpoint seem corrupted" from transformers |
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import (
    ROOT,
    ZH_TEXT,
    ZH_VOCAB,
    build_dataset,
    ctrl_c_in_exec,
    free_port,
    main_in_this_process,
    plain_env,
)

from data_prep.inspect import main as inspect_main
from tacl_scale.checkpoint import latest_tag
from tacl_scale.config import CheckpointConfig, DataConfig, EngineConfig, OptimConfig, TrainConfig
from tacl_scale.data.integrity import verify_tokenizer
from tacl_scale.data.manifest import Manifest
from tacl_scale.distributed import Distributed
from tacl_scale.locking import LOCK_NAME
from tacl_scale.metrics import read_records, step_records
from tacl_scale.run_dir import PREEMPTED_MARKER, RunDir
from tacl_scale.trainer import RankError, Trainer, TrainError

pytestmark = pytest.mark.slow



def copy_dataset(source: Path, target: Path) -> Path:
    import shutil

    shutil.copytree(source, target)
    return target


def edit_manifest(directory: Path, edit: Callable[[dict], None]) -> None:
    path = directory / "manifest.json"
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def tacl_train(*args: str) -> list[str]:
    return [str(Path(sys.executable).parent / "tacl-train"), "--recipe", "tiny-cpu", *args]


def common(dataset: Path, model: Path, run: Path, steps: int) -> list[str]:
    return ["--data", str(dataset), "--model", str(model), "--output", str(run), "--steps", str(steps),
            "--batch-size", "4", "--micro-batch-size", "2", "--no-export", "--log-every", "1"]


def run_cli(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(tacl_train(*args), env=plain_env(), capture_output=True, text=True, timeout=600)


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def signalled_run(args: list[str], sig: signal.Signals, when: str, log: Path) -> tuple[int, str]:
    """``tacl-train args`` in its own process group, sent ``sig`` (to the whole group,
    as Slurm signals every process of a job step) once ``when`` is in its output;
    its exit status and output."""
    with open(log, "w") as out:
        proc = subprocess.Popen(tacl_train(*args), env=plain_env(), stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            deadline = time.monotonic() + 300
            while when not in log.read_text():
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the run never printed {when!r}:\n{log.read_text()[-3000:]}")
                time.sleep(0.05)
            os.killpg(proc.pid, sig)
            proc.wait(timeout=300)
        finally:  # whatever failed above, nothing of the run is left running
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    return proc.returncode, log.read_text()


def make_config(dataset: Path, model: Path, output: Path, steps: int, **overrides) -> TrainConfig:
    config = TrainConfig(
        model=str(model), output=str(output), engine=EngineConfig("inline.json", {"zero_optimization": {"stage": 2}}),
        data=DataConfig((str(dataset),), num_workers=0),
        optim=OptimConfig(steps=steps, lr=1e-3, warmup_ratio=0.5, batch_size=4, micro_batch_size=2),
        checkpoint=CheckpointConfig(save_every=100), eval_every=0, log_every=1, export=False,
    )
    return replace(config, **overrides)


# -- the dataset ------------------------------------------------------------------------------------------------

def test_a_replaced_tokenizer_copy_is_refused_before_anything_is_written(
        zh_dataset: Path, tiny_bert_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = copy_dataset(zh_dataset, tmp_path / "ds")
    vocab = bad / "tokenizer" / ZH_VOCAB.name
    lines = vocab.read_text(encoding="utf-8").splitlines()
    vocab.write_text("\n".join([lines[1], lines[0], *lines[2:]]) + "\n", encoding="utf-8")  # two ids swapped
    code, stderr = main_in_this_process(["--recipe", "tiny-cpu", *common(bad, tiny_bert_file, tmp_path / "run", 2)], capsys)
    assert code == 2, stderr[-3000:]
    assert len(error_lines(stderr)) == 1 and str(vocab) in error_lines(stderr)[0], stderr[-3000:]
    assert "tokenizer copy was changed" in error_lines(stderr)[0]
    assert not (tmp_path / "run").exists()  # nothing written: not even the run directory


def test_a_dataset_whose_tokenizer_copy_lacks_its_added_tokens_is_refused_naming_the_fix(
        tiny_bert_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A dataset built from a tokenizer whose added_tokens.json adds id 21128 to its
    vocab.txt, by a version that did not copy that file into DATASET/tokenizer: the
    run's tokenizer (copied from there, and what its export ships) read the data's id
    21128 as [UNK]. Refused before anything is written, naming the copy and the file
    to copy in (and so does ``--verify``); with the file copied in, it trains."""
    tokenizer = tmp_path / "tokenizer"
    tokenizer.mkdir()
    shutil.copy(ZH_VOCAB, tokenizer / "vocab.txt")
    (tokenizer / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True,
                                                                 "tokenizer_class": "BertTokenizer"}))
    (tokenizer / "added_tokens.json").write_text(json.dumps({"[NEW]": 21128}))
    dataset = build_dataset(tmp_path / "ds", "--input", str(ZH_TEXT), "--format", "text", "--language", "zh",
                            "--tokenizer", str(tokenizer), "--min-doc-chars", "10", "--dupe-factor", "1",
                            "--max-seq-len", "64")
    assert Manifest.load(dataset).tokenizer.vocab_size == 21129
    (dataset / "tokenizer" / "added_tokens.json").unlink()
    # Listed by the manifest, as this version's copies are: a file missing, said once.
    assert verify_tokenizer(dataset, Manifest.load(dataset)) == [
        f"{dataset / 'tokenizer' / 'added_tokens.json'}: missing from the dataset's tokenizer copy"]

    def as_older_versions_recorded(manifest: dict) -> None:  # which copied no added_tokens.json
        manifest["tokenizer"]["files"].remove("added_tokens.json")
        del manifest["tokenizer"]["checksums"]["added_tokens.json"]

    edit_manifest(dataset, as_older_versions_recorded)
    model = tmp_path / "bert.json"
    model.write_text(json.dumps({**json.loads(tiny_bert_file.read_text()), "vocab_size": 21129}))
    run = tmp_path / "run"
    code, stderr = main_in_this_process(["--recipe", "tiny-cpu", *common(dataset, model, run, 1)], capsys)
    assert code == 2 and len(error_lines(stderr)) == 1, stderr[-3000:]
    said = (f"{dataset / 'tokenizer'}: gives ids 0–21127, and the dataset's vocab_size is 21129: the copy lacks the "
            "tokens added_tokens.json added (tacl-scale did not copy that file before), which a run's export would "
            f"read as [UNK]; copy {tokenizer / 'added_tokens.json'} into {dataset / 'tokenizer'}")
    assert error_lines(stderr)[0].startswith(f"error: {said}"), stderr[-3000:]
    assert not run.exists()
    capsys.readouterr()
    assert inspect_main([str(dataset), "--verify"]) == 2
    assert error_lines(capsys.readouterr().err) == [f"error: {said}"]
    shutil.copy(tokenizer / "added_tokens.json", dataset / "tokenizer")
    code, stderr = main_in_this_process(["--recipe", "tiny-cpu", *common(dataset, model, run, 1)], capsys)
    assert code == 0, stderr[-3000:]
    assert json.loads((run / "tokenizer" / "added_tokens.json").read_text()) == {"[NEW]": 21128}


@pytest.mark.parametrize("edit, says", [
    (lambda m: m["tokenizer"].update(sha256="0" * 64), "sha256 is not the manifest's"),
    (lambda m: m["tokenizer"].update(file="vocab.txt"), "'vocab.txt' is not one of the copied files"),
    (lambda m: m["tokenizer"].update(vocab_size=1000), "vocab_size 1000, but"),
])
def test_an_edited_tokenizer_record_is_refused(zh_dataset: Path, tmp_path: Path, edit, says: str) -> None:
    bad = copy_dataset(zh_dataset, tmp_path / "ds")
    assert verify_tokenizer(bad, Manifest.load(bad)) == []
    edit_manifest(bad, edit)
    problems = verify_tokenizer(bad, Manifest.load(bad))
    assert len(problems) == 1 and says in problems[0], problems


def test_a_flipped_bit_is_named_by_verify_and_refused_by_training(zh_dataset: Path, tiny_bert_file: Path, tmp_path: Path,
                                                                  join: Callable[[], Distributed],
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    good = copy_dataset(zh_dataset, tmp_path / "good")
    assert inspect_main([str(good), "--verify"]) == 0
    assert "all match" in capsys.readouterr().out
    bad = copy_dataset(zh_dataset, tmp_path / "ds")
    target = bad / "shard-00000.masked_tokens.bin"
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 1  # one low bit: the ids stay in the vocabulary, the loss barely moves
    target.write_bytes(bytes(data))
    assert inspect_main([str(bad), "--verify"]) == 2
    stderr = capsys.readouterr().err
    assert error_lines(stderr) == [f"error: {target}: " + stderr.split(f"{target}: ", 1)[1].splitlines()[0]]
    assert "the file is corrupt" in stderr
    with pytest.raises(TrainError, match=rf"{target}: checksum xxh3_128:\w+, the manifest records"):
        Trainer.build(make_config(bad, tiny_bert_file, tmp_path / "run", 2), join())
    assert not (tmp_path / "run" / "run.json").exists()


def test_a_token_id_past_the_vocabulary_names_shard_instance_and_position(zh_dataset: Path, tiny_bert_file: Path,
                                                                          tmp_path: Path,
                                                                          join: Callable[[], Distributed],
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    bad = copy_dataset(zh_dataset, tmp_path / "ds")
    tokens = np.memmap(bad / "shard-00000.bin", dtype=np.uint16, mode="r+")
    tokens[::41] = 65535
    tokens.flush()
    del tokens
    assert inspect_main([str(bad), "--num-instances", "1"]) == 0
    assert "<id 65535 outside the vocabulary of 21128: run --verify>" in capsys.readouterr().out
    config = make_config(bad, tiny_bert_file, tmp_path / "run", 3, data=DataConfig((str(bad),), num_workers=0,
                                                                              verify=False))
    message = rank_error_of(config, join)
    assert message.startswith(f"{bad / 'shard-00000.bin'}, instance ") and "token id 65535" in message
    instance, position = (int(part.split()[-1]) for part in message.split(":")[0].split(", ")[1:])
    from tacl_scale.data import PretrainDataset

    assert PretrainDataset(bad)[instance]["original_ids"][position] == 65535
    # As the command says it: that one line, exit 2.
    code, stderr = main_in_this_process(["--recipe", "tiny-cpu", *common(bad, tiny_bert_file, tmp_path / "cli", 3),
                                         "--no-verify-data", "--num-workers", "0"], capsys)
    assert code == 2, stderr[-3000:]
    assert error_lines(stderr) == [f"error: {message}"], stderr[-3000:]


def test_a_masked_position_past_its_instance_read_by_a_loader_worker_is_one_line_and_exits(
        zh_dataset: Path, tiny_bert_file: Path, tmp_path: Path) -> None:
    """Shards not verified, a DataLoader worker reads the damaged instance: it was
    ``IndexError: index 60000 is out of bounds``, and then the process hung at
    exit (the error's frames held the loader, whose workers ignore SIGTERM)."""
    bad = copy_dataset(zh_dataset, tmp_path / "ds")
    positions = bad / "shard-00000.masked_positions.bin"
    positions.write_bytes(b"\x60\xea" * (positions.stat().st_size // 2))
    done = subprocess.run(tacl_train(*common(bad, tiny_bert_file, tmp_path / "run", 2), "--no-verify-data",
                                     "--num-workers", "2"),
                          env=plain_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr[-3000:]
    [line] = error_lines(done.stderr)
    assert re.fullmatch(rf"error: {re.escape(str(positions))}, instance \d+: masked position 60000 is past the "
                        r"sequence of \d+ tokens: the shard is corrupt \(python -m data_prep\.inspect DIR --verify "
                        r"checks it; rebuild the dataset\)", line), line
    assert "Traceback" not in done.stderr


def test_a_damaged_validation_shard_is_one_line(tiny_bert_file: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Rank 0 reads the validation batches itself, not through the loader's checks:
    a damaged instance there was the DatasetError's traceback, exit 1."""
    from conftest import ZH_TEXT, ZH_VOCAB, build_dataset

    dataset = build_dataset(tmp_path / "ds", "--input", str(ZH_TEXT), "--format", "text", "--language", "zh",
                            "--tokenizer", str(ZH_VOCAB), "--min-doc-chars", "10", "--dupe-factor", "1",
                            "--max-seq-len", "64", "--validation-fraction", "0.3")
    positions = dataset / "validation-00000.masked_positions.bin"
    positions.write_bytes(b"\x60\xea" * (positions.stat().st_size // 2))
    code, stderr = main_in_this_process(["--recipe", "tiny-cpu", *common(dataset, tiny_bert_file, tmp_path / "run", 2),
                                         "--no-verify-data", "--eval-every", "1", "--num-workers", "0"], capsys)
    assert code == 2, stderr[-3000:]
    assert re.fullmatch(rf"error: {re.escape(str(positions))}, instance \d+: masked position 60000 is past the "
                        r"sequence of \d+ tokens: .*", stderr.strip().splitlines()[-1]), stderr[-3000:]
    assert "Traceback" not in stderr


def test_a_defect_in_a_loader_worker_ends_the_process(zh_dataset: Path, tiny_bert_file: Path,
                                                      tmp_path: Path) -> None:
    """Any other exception a DataLoader worker raises (a defect: its traceback is the
    report) ended in the traceback and then a hang: the error's frames kept the
    loader's iterator, so its workers were not stopped, and at exit multiprocessing
    sent them SIGTERM, which they ignore (they outlive a preemption's signal), and
    waited. The failure is injected by a sitecustomize module on the path."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import torch.utils.data\n"
        "from tacl_scale.data import dataset\n"
        "read = dataset.PretrainDataset.__getitem__\n"
        "def fails_in_a_worker(self, index):\n"
        "    if torch.utils.data.get_worker_info() is not None:\n"
        "        raise RuntimeError('injected: a worker fails')\n"
        "    return read(self, index)\n"
        "dataset.PretrainDataset.__getitem__ = fails_in_a_worker\n")
    env = plain_env() | {"PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(tacl_train(*common(zh_dataset, tiny_bert_file, tmp_path / "run", 2), "--num-workers", "2"),
                          env=env, capture_output=True, text=True, timeout=120)  # a hang: TimeoutExpired
    assert done.returncode == 1, done.stderr[-3000:]
    assert done.stderr.strip().splitlines()[-1].endswith("RuntimeError: injected: a worker fails"), done.stderr[-3000:]


# -- the model --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("how", ["an HTML page as tokenizer.json", "type_vocab_size 1", "intermediate_size -5",
                                 "a model's config.json beside its weights", "no tokenizer and another vocab_size"])
def test_a_model_that_cannot_train_on_the_data_is_refused_before_anything_is_written(
        zh_dataset: Path, tiny_bert_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str) -> None:
    """A tokenizer.json that does not parse ended in ``Exception: expected value at
    line 1 column 1``; type_vocab_size 1 on sentence pairs in an IndexError at the
    first step, run.json written; intermediate_size -5 in a RuntimeError. A model's
    own config.json trained from random weights; a folder without its tokenizer
    trained whatever vocabulary the data had (the lower-casing check:
    tests/test_vocab.py)."""
    from tacl_scale.pretrained import load_student

    if how in ("an HTML page as tokenizer.json", "a model's config.json beside its weights"):
        model = tmp_path / "model"
        load_student(tiny_bert_file).save_pretrained(model)
        if how == "an HTML page as tokenizer.json":
            (model / "tokenizer.json").write_text("<!DOCTYPE html><html>Not Found</html>\n")
            said = f"error: {model / 'tokenizer.json'}: not a tokenizer file (expected value at line 1 column 1)"
        else:
            model = model / "config.json"
            said = f"error: {model}: a model's config beside its weights (model.safetensors): pass the folder "
    elif how == "no tokenizer and another vocab_size":
        model = tmp_path / "model"
        settings = {**json.loads(tiny_bert_file.read_text()), "vocab_size": 30522}
        bert_json = tmp_path / "bert.json"
        bert_json.write_text(json.dumps(settings))
        load_student(bert_json).save_pretrained(model)
        said = f"error: {model}: holds no tokenizer (vocab.txt, tokenizer.json or a sentencepiece .model), and "
    else:
        key, value = how.split()
        model = tmp_path / "bert.json"
        model.write_text(json.dumps({**json.loads(tiny_bert_file.read_text()), key: int(value)}))
        said = f"error: {model}: {key} {value}"
    code, stderr = main_in_this_process(["--recipe", "tiny-cpu", *common(zh_dataset, model, tmp_path / "run", 2)],
                                        capsys)
    assert code == 2 and len(error_lines(stderr)) == 1, stderr[-3000:]
    assert error_lines(stderr)[0].startswith(said), stderr[-3000:]
    assert "Traceback" not in stderr
    assert not (tmp_path / "run").exists()  # nothing written: not even the run directory


def stopped_before_recording(run: Path) -> None:
    """``run`` as a first job leaves it when it stops before recording itself in
    run.json (while its engine was built): its tokenizer/ and initial/ alone."""
    for path in run.iterdir():
        if path.name not in ("tokenizer", "initial"):
            shutil.rmtree(path) if path.is_dir() else path.unlink()


def test_a_new_run_over_a_stopped_first_jobs_files_writes_its_own_initial_and_keeps_only_its_tokenizer(
        zh_dataset: Path, tiny_bert_file: Path, tmp_path: Path, join: Callable[[], Distributed]) -> None:
    """A first job stopped before recording itself leaves tokenizer/ and initial/; a
    new run there under another --model took them as its own: another model's random
    init as the analyses' reference, another model's tokenizer exported beside its
    weights. Now its own init replaces a run's initial/; a tokenizer/ is kept where it
    is this run's, refused (never deleted) where it is another's or no run's."""
    settings = json.loads(tiny_bert_file.read_text())
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    first.write_text(json.dumps(settings))
    second.write_text(json.dumps({**settings, "intermediate_size": settings["intermediate_size"] * 2}))
    run = tmp_path / "run"

    def train(model: Path) -> None:
        trainer = Trainer.build(make_config(zh_dataset, model, run, 1, export=True), join())
        try:
            trainer.train()
        finally:
            trainer.close()

    train(first)
    stopped_before_recording(run)
    train(second)  # the same dataset: the same tokenizer, kept; the initial/ export is this run's
    initial = json.loads((run / "initial" / "config.json").read_text())
    assert initial["intermediate_size"] == settings["intermediate_size"] * 2
    assert json.loads((run / "run.json").read_text())["config"]["model"] == str(second)
    # A pretrained --model writes no initial/: a first job's random init is removed, not left as the reference.
    pretrained = tmp_path / "pretrained"
    shutil.copytree(run / "export", pretrained)
    stopped_before_recording(run)
    train(pretrained)
    assert not (run / "initial").exists()
    # Another tokenizer, or files no run wrote: refused, naming the folder; nothing deleted.
    stopped_before_recording(run)
    vocab = run / "tokenizer" / "vocab.txt"
    lines = vocab.read_text(encoding="utf-8").splitlines()
    vocab.write_text("\n".join([lines[1], lines[0], *lines[2:]]) + "\n", encoding="utf-8")  # two ids swapped
    (run / "initial").mkdir()
    (run / "initial" / "notes.txt").write_text("mine")
    before = {p: p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}
    with pytest.raises(TrainError) as refused:
        Trainer.build(make_config(zh_dataset, first, run, 1), join())
    assert str(refused.value).startswith(f"{run / 'tokenizer'}: holds another tokenizer than this run's ("), refused.value
    assert str(refused.value).endswith(f"or it is not a run's folder; remove {run / 'tokenizer'}, or choose another "
                                       "--output"), refused.value
    vocab.write_text("\n".join(lines) + "\n", encoding="utf-8")
    (run / "tokenizer" / "notes.txt").write_text("mine")  # the same tokenizer, and a file no run writes
    with pytest.raises(TrainError) as refused:
        Trainer.build(make_config(zh_dataset, first, run, 1), join())
    assert str(refused.value).startswith(f"{run / 'tokenizer'}: holds notes.txt, which this run's tokenizer has "
                                         "not, and no run.json records a run here"), refused.value
    (run / "tokenizer" / "notes.txt").unlink()
    refusal = ("and no run.json records a run here: this new run's initial weights go there; move it away, or choose "
               "another --output")
    with pytest.raises(TrainError) as refused:
        Trainer.build(make_config(zh_dataset, first, run, 1), join())
    assert str(refused.value) == f"{run / 'initial'}: not a run's initial weights (no tacl_export.json), {refusal}"
    # A run's export of its init, with a file of someone's beside it: not replaced whole.
    (run / "initial" / "tacl_export.json").write_text(json.dumps({"source": "x", "files": ["tacl_export.json"]}))
    with pytest.raises(TrainError) as refused:
        Trainer.build(make_config(zh_dataset, first, run, 1), join())
    assert str(refused.value) == f"{run / 'initial'}: holds notes.txt, which no run writes, {refusal}"
    assert (run / "initial" / "notes.txt").read_text() == "mine"
    assert {p for p in sorted(run.rglob("*")) if p.is_file()} >= set(before) - {vocab}


def test_a_resume_with_a_model_of_another_shape_is_refused_naming_the_setting(
        zh_dataset: Path, tiny_bert_file: Path, tmp_path: Path, join: Callable[[], Distributed]) -> None:
    """--model's hidden_size edited between two jobs (or another model given with
    --allow-changes): the checkpoint's load ended in 43 lines of size mismatches, exit 1."""
    model = tmp_path / "bert.json"
    settings = json.loads(tiny_bert_file.read_text())
    model.write_text(json.dumps(settings))
    run = tmp_path / "run"
    config = make_config(zh_dataset, model, run, 2, checkpoint=CheckpointConfig(save_every=1))
    trainer = Trainer.build(config, join())
    try:
        trainer.train()
    finally:
        trainer.close()
    files = {p: p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}
    assert latest_tag(run / "checkpoints") is not None
    model.write_text(json.dumps({**settings, "hidden_size": settings["hidden_size"] * 2}))
    other = tmp_path / "other.json"
    other.write_text(json.dumps({**settings, "num_hidden_layers": settings["num_hidden_layers"] + 1}))
    for changed, allow, says in [
            (model, False, f"hidden_size {settings['hidden_size']} in the run, {settings['hidden_size'] * 2} in "
                           "--model"),
            (other, True, f"num_hidden_layers {settings['num_hidden_layers']} in the run, "
                          f"{settings['num_hidden_layers'] + 1} in --model")]:
        resume = replace(config, model=str(changed), checkpoint=CheckpointConfig(save_every=1, resume=True,
                                                                                 allow_changes=allow))
        with pytest.raises(TrainError) as refused:
            Trainer.build(resume, join())
        assert str(refused.value).startswith(f"{run / 'run.json'}: --resume with --model {changed}, a student of "
                                             "another shape than the run's"), refused.value
        assert says in str(refused.value), refused.value
    assert {p: p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()} == files

    # Its dropout edited in place: the same weights train otherwise, a change of the run's
    # settings (it resumed silently): refused, or taken and recorded with --allow-changes.
    dropout = settings.get("hidden_dropout_prob", 0.1)
    model.write_text(json.dumps({**settings, "hidden_dropout_prob": dropout / 2}))
    change = f"student_config.hidden_dropout_prob: {dropout!r} -> {dropout / 2!r}"
    resume = replace(config, checkpoint=CheckpointConfig(save_every=1, resume=True))
    with pytest.raises(TrainError) as refused:
        Trainer.build(resume, join())
    assert str(refused.value).startswith(f"{run / 'run.json'}: --resume with --model {model}, whose config changes "
                                         f"the run's student (its student_config): {change}. "), refused.value
    assert {p: p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()} == files
    trainer = Trainer.build(replace(resume, optim=replace(config.optim, steps=3), checkpoint=CheckpointConfig(
        save_every=1, resume=True, allow_changes=True)), join())
    try:
        trainer.train()
    finally:
        trainer.close()
    record = json.loads((run / "run.json").read_text())
    assert change in record["history"][-1]["changes"], record["history"]
    assert record["student_config"]["hidden_dropout_prob"] == dropout / 2


def rank_error_of(config: TrainConfig, join: Callable[[], Any]) -> str:
    """The one line of the RankError that training ``config`` in this process ends with
    (and, on the way, that a Trainer built without a stop request leaves this
    process's signal handlers as they were)."""
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGUSR1)}
    trainer = Trainer.build(config, join())
    assert {sig: signal.getsignal(sig) for sig in handlers} == handlers
    try:
        with pytest.raises(RankError) as caught:
            trainer.train()
    finally:
        trainer.close()
    return str(caught.value)


# -- signals ----------------------------------------------------------------------------------------------------

def signalled_job(dataset: Path, model: Path, tmp_path: Path, sig: signal.Signals, when: str,
                  *extra: str) -> tuple[Path, int, str]:
    """A 200-step run in ``tmp_path/run`` with 2 DataLoader workers, sent ``sig`` once
    its log shows ``when``: (the run directory, the exit status, the log)."""
    run = tmp_path / "run"
    status, log = signalled_run([*common(dataset, model, run, 200), "--num-workers", "2", *extra], sig, when,
                                tmp_path / "log")
    return run, status, log


def test_a_preemption_signal_to_the_workers_too_checkpoints_and_resumes(zh_dataset: Path, tiny_bert_file: Path,
                                                                        tmp_path: Path) -> None:
    run, status, log = signalled_job(zh_dataset, tiny_bert_file, tmp_path, signal.SIGUSR1, "step 3/200",
                                     "--save-every", "1000")
    assert status == 0, log[-3000:]
    assert "killed by signal" not in log and "Traceback" not in log
    marker = (run / PREEMPTED_MARKER).read_text()
    assert marker.startswith("SIGUSR1 at step ")
    step = int(marker.split()[-1])
    assert latest_tag(run / "checkpoints") == f"step{step:08d}"
    res = run_cli([*common(zh_dataset, tiny_bert_file, run, 200), "--num-workers", "2", "--resume", "--stop-after-steps", "2"])
    assert res.returncode == 0, res.stderr[-3000:]
    assert not (run / PREEMPTED_MARKER).exists()
    steps = [r["step"] for r in step_records(read_records(RunDir(run).metrics_file))]
    assert steps == list(range(1, step + 3))


def test_sigterm_while_the_run_is_built_still_checkpoints_and_leaves_the_marker(zh_dataset: Path, tiny_bert_file: Path,
                                                                                tmp_path: Path) -> None:
    # The shards are verified early in the build: before the models, the engine and the first step.
    run, status, log = signalled_job(zh_dataset, tiny_bert_file, tmp_path, signal.SIGTERM,
                                     "verified the 1 shard(s) of --data")
    assert status == 0, log[-3000:]
    # Stopped before its first step (the check train() makes first), with step 0's checkpoint.
    assert (run / PREEMPTED_MARKER).read_text() == "SIGTERM at step 0\n"
    assert latest_tag(run / "checkpoints") == "step00000000" and "step 1/200" not in log


def test_a_failed_compile_says_no_compile_trains_without_it(zh_dataset: Path, tiny_bert_file: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Inductor failing as it compiles the encoder (injected: its entry point raises)."""
    import torch._dynamo
    import torch._inductor.compile_fx

    def compile_fx(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("injected: inductor cannot compile this graph")

    monkeypatch.setattr(torch._inductor.compile_fx, "compile_fx", compile_fx)
    torch._dynamo.reset()  # nothing compiled earlier in this process may stand in for the failing compile
    run = tmp_path / "run"
    try:
        code, stderr = main_in_this_process(["--recipe", "tiny-cpu", "--compile",
                                             *common(zh_dataset, tiny_bert_file, run, 2)], capsys)
    finally:
        torch._dynamo.reset()
    assert code == 2, stderr[-3000:]
    assert "injected: inductor cannot compile this graph" in stderr and "Traceback" in stderr
    assert error_lines(stderr) == [
        "error: torch.compile failed on the encoder (traceback above); --no-compile trains the same model without "
        "it (Hugging Face's BertModel, slower). Please report the traceback."]
    assert not (run / LOCK_NAME).exists()


def test_ctrl_c_is_one_line_naming_the_checkpoint_and_the_resume_command(zh_dataset: Path, tiny_bert_file: Path,
                                                                         tmp_path: Path) -> None:
    run, status, log = signalled_job(zh_dataset, tiny_bert_file, tmp_path, signal.SIGINT, "step 3/200",
                                     "--save-every", "2")
    assert status == 130, log[-3000:]
    assert "Traceback" not in log and "KeyboardInterrupt" not in log
    [line] = [line for line in log.splitlines() if line.startswith("interrupted")]
    newest = latest_tag(run / "checkpoints")
    assert newest is not None and f"the newest checkpoint is {run / 'checkpoints' / newest}" in line
    assert line.endswith("--resume") and "tacl-train" in line
    assert not (run / LOCK_NAME).exists()


def test_ctrl_c_before_the_first_checkpoint_names_a_command_that_starts_again(tmp_path: Path) -> None:
    """Before the first checkpoint it said "start again with the same command", which
    the run's own run.json then refused ("pass --resume"); and a job of several
    ranks was told a command without its launcher's options, which resumed on one."""
    from tacl_scale.distributed import LaunchEnv
    from tacl_scale.train import _interrupted, parse_args

    argv = ["--ds", str(ROOT / "ds_configs" / "cpu.json"), "--data", str(tmp_path / "ds"), "--model", str(tmp_path / "m.json"),
            "--output", str(tmp_path / "run")]
    config = parse_args(argv)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "run.json").write_text("{}")
    alone = _interrupted(config, argv, LaunchEnv.standalone_here())
    assert alone == (f"interrupted; {tmp_path / 'run'} has no checkpoint yet: start it again from step 0 with "
                     f"tacl-train {' '.join(argv)} --resume")
    two_ranks = _interrupted(config, [*argv, "--local_rank=1"], LaunchEnv(1, 1, 2, "127.0.0.1", "29500"))
    assert two_ranks == (f"interrupted; {tmp_path / 'run'} has no checkpoint yet: start it again from step 0 with "
                         f"deepspeed --module tacl_scale.train {' '.join(argv)} --resume (with this job's "
                         "launcher options: it ran on 2 ranks)")


def test_ctrl_c_before_the_run_is_built_says_nothing_was_written(tiny_bert_file: Path, zh_dataset: Path,
                                                                  tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The command line is settled before the training stack is imported: a Ctrl-C
    in those seconds named a resume command (and, for an --output holding another
    run, that run's newest checkpoint) although this job had written nothing."""
    from tacl_scale.distributed import Distributed

    def interrupted(*_args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(Distributed, "setup", staticmethod(interrupted))
    code, stderr = main_in_this_process(["--recipe", "tiny-cpu", *common(zh_dataset, tiny_bert_file, tmp_path / "run", 3)],
                                        capsys)
    assert (code, stderr.strip().splitlines()[-1]) == (130, "interrupted before training started; nothing was "
                                                             "written")
    assert not (tmp_path / "run").exists()


def test_ctrl_c_inside_code_run_by_exec_still_exits_130(tmp_path: Path) -> None:
    """``python -m tacl_scale.train`` and ``deepspeed --module`` died of SIGINT (-2)."""
    res = ctrl_c_in_exec(tmp_path, "tacl_scale.train", "parse_args")
    assert res.returncode == 130, (res.returncode, res.stderr[-2000:])
    assert res.stderr.strip().splitlines()[-1] == "interrupted before training started; nothing was written"
    assert "Traceback" not in res.stderr


# -- faults inside training -------------------------------------------------------------------------------------

def test_metrics_on_a_full_disk_is_one_line_per_rank_and_releases_the_lock(zh_dataset: Path, tiny_bert_file: Path,
                                                                           tmp_path: Path) -> None:
    """Two ranks through the launcher: rank 0 names the file; rank 1, whose
    collective lost rank 0, says that instead of a traceback."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").symlink_to("/dev/full")  # every write: ENOSPC
    deepspeed = Path(sys.executable).parent / "deepspeed"
    env = plain_env() | {"DS_ACCELERATOR": "cpu"}
    res = subprocess.run([str(deepspeed), "--num_gpus", "2", "--master_port", str(free_port()), "tacl_scale/train.py",
                          "--ds", "ds_configs/cpu.json", *common(zh_dataset, tiny_bert_file, run, 3)],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    output = res.stdout + res.stderr
    assert res.returncode == 2, output[-3000:]
    first, second = error_lines(output)
    assert first == f"error: rank 0: {run / 'metrics.jsonl'}: No space left on device (the disk is full)"
    assert second.startswith("error: rank 1: another rank stopped, so this one stops too")
    assert "Traceback" not in output
    assert not (run / LOCK_NAME).exists()


def test_an_encoders_new_heads_are_said_once_for_the_node(zh_dataset: Path, tiny_bert_file: Path,
                                                          tmp_path: Path) -> None:
    """Two ranks through the launcher on a sentence encoder (no MLM/NSP heads): each
    rank printed transformers' "This checkpoint seem corrupted" (without a rank tag),
    and rank 1 repeated rank 0's warning about the weights it initialised."""
    from transformers import BertConfig, BertModel

    model = tmp_path / "encoder"
    BertModel(BertConfig(**json.loads(tiny_bert_file.read_text()))).save_pretrained(model)
    tokenizer = Manifest.load(zh_dataset).tokenizer
    (model / "vocab.txt").write_bytes(tokenizer.location(zh_dataset).read_bytes())
    deepspeed = Path(sys.executable).parent / "deepspeed"
    env = plain_env() | {"DS_ACCELERATOR": "cpu"}
    res = subprocess.run([str(deepspeed), "--num_gpus", "2", "--master_port", str(free_port()), "tacl_scale/train.py",
                          "--ds", "ds_configs/cpu.json", *common(zh_dataset, model, tmp_path / "run", 1)],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    output = res.stdout + res.stderr
    assert res.returncode == 0, output[-3000:]
    said = [line for line in output.splitlines() if "initialised" in line]
    assert len(said) == 1 and " rank 1 " not in said[0], said
    assert said[0].endswith("student: the MLM head (cls.predictions.*: 6 weights) and the NSP head "
                            f"(cls.seq_relationship.*: 2 weights) are new: initialised at random (not in {model})")
    assert "corrupted" not in output


def test_a_model_without_a_tokenizer_is_said_at_the_runs_start_not_at_each_resume(
        zh_dataset: Path, tiny_bert_file: Path, tmp_path: Path, join: Callable[[], Distributed],
        caplog: pytest.LogCaptureFixture) -> None:
    """The warning that a model folder without tokenizer files takes the dataset's
    came again at every job of the run (a Slurm requeue, each --resume), where the
    run had taken it at its first."""
    from transformers import BertConfig, BertModel

    model = tmp_path / "encoder"
    BertModel(BertConfig(**json.loads(tiny_bert_file.read_text()))).save_pretrained(model)  # no tokenizer files
    run = tmp_path / "run"
    said: list[int] = []
    for stop_after, resume in ((1, False), (None, True)):  # a job stopped at step 1 of 2, then resumed
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="tacl_scale"):
            trainer = Trainer.build(make_config(zh_dataset, model, run, 2, checkpoint=CheckpointConfig(
                save_every=1, resume=resume, stop_after_steps=stop_after)), join())
            try:
                trainer.train()
            finally:
                trainer.close()
        said.append(sum(f"{model} holds no tokenizer: " in record.getMessage() for record in caplog.records))
    assert said == [1, 0]
    assert json.loads((run / "run.json").read_text())["history"][-1]["started_at_step"] == 1  # resumed


def test_a_checkpoint_on_a_full_disk_names_it_and_keeps_the_older_one(zh_dataset: Path, tiny_bert_file: Path,
                                                                      tmp_path: Path, join: Callable[[], Distributed],
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import deepspeed

    import tacl_scale.files

    run = tmp_path / "run"
    full = run / "checkpoints" / "step00000004"
    save = deepspeed.DeepSpeedEngine.save_checkpoint

    def disk_full_at_step_4(engine, save_dir, tag=None, **kwargs):
        if tag == full.name:  # the disk fills as step 4 is saved: DeepSpeed's writes fail as there
            full.mkdir(parents=True, exist_ok=True)
            for name in ("mp_rank_00_model_states.pt", "zero_pp_rank_0_mp_rank_00_optim_states.pt"):
                (full / name).symlink_to("/dev/full")
        return save(engine, save_dir, tag=tag, **kwargs)

    monkeypatch.setattr(deepspeed.DeepSpeedEngine, "save_checkpoint", disk_full_at_step_4)
    # torch.save reports a failed write without an errno; the free space says why.
    monkeypatch.setattr(tacl_scale.files, "free_bytes", lambda path: 1 << 20)
    config = make_config(zh_dataset, tiny_bert_file, run, 6, checkpoint=CheckpointConfig(save_every=2))
    assert rank_error_of(config, join) == (f"{full}: the checkpoint of step 4 could not be written: the disk is full (1 MiB "
                                 f"free); the newest complete checkpoint is {run / 'checkpoints' / 'step00000002'} "
                                 "(--resume continues from it)")
    assert latest_tag(run / "checkpoints") == "step00000002"
    assert not (run / LOCK_NAME).exists()
    # Space again; step 4's links stay, and its save again replaces them (they would fail it again).
    monkeypatch.setattr(deepspeed.DeepSpeedEngine, "save_checkpoint", save)
    resumed = Trainer.build(replace(config, checkpoint=CheckpointConfig(save_every=2, resume=True)), join())
    try:
        assert resumed.state.step == 2
        assert [m["step"] for m in resumed.train()] == [3, 4, 5, 6]
    finally:
        resumed.close()


# -- records ----------------------------------------------------------------------------------------------------

def test_an_empty_validation_split_is_refused_naming_the_fraction(zh_dataset: Path, tiny_bert_file: Path, tmp_path: Path,
                                                                  join: Callable[[], Distributed]) -> None:
    small = build_dataset(tmp_path / "ds", "--input", str(ZH_TEXT), "--format", "text", "--language", "zh",
                          "--tokenizer", str(ZH_VOCAB), "--min-doc-chars", "10", "--dupe-factor", "1",
                          "--max-seq-len", "64", "--validation-fraction", "0.0001")
    assert not Manifest.load(small).has_validation
    with pytest.raises(TrainError, match=rf"{re.escape(str(small))} was built with --validation-fraction 0\.0001, but "
                       r"none of its \d+ documents .*: rebuild it with a larger --validation-fraction or more input, "
                       "or pass --eval-every 0"):
        Trainer.build(make_config(small, tiny_bert_file, tmp_path / "run", 2, eval_every=1), join())


def test_a_run_record_from_a_newer_version_is_refused_by_name(zh_dataset: Path, tiny_bert_file: Path, tmp_path: Path,
                                                              join: Callable[[], Distributed]) -> None:
    run = tmp_path / "run"
    config = make_config(zh_dataset, tiny_bert_file, run, 2)
    trainer = Trainer.build(config, join())
    try:
        trainer.train()
    finally:
        trainer.close()
    record = json.loads((run / "run.json").read_text())
    assert record["version"] == 2
    record["version"] = 99
    record["config"]["a_setting_of_the_future"] = 1
    (run / "run.json").write_text(json.dumps(record))
    resume = replace(config, checkpoint=CheckpointConfig(save_every=100, resume=True))
    with pytest.raises(TrainError, match=r"run record version 99, written by a newer tacl-scale"):
        Trainer.build(resume, join())
