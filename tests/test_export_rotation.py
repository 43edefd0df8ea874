"""An export while a run rotates its checkpoints (``--save-every 1 --keep-last 1``):
the checkpoint an export reads is held with a shared lock, rotation keeps it for a
later rotation (never waiting), and an export of a run directory whose newest
checkpoint was rotated away before it could be locked takes the newest one then.
The races are played out step by step (hooks at the race windows), never left to
timing."""

from __future__ import annotations

import fcntl
import json
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from conftest import FakeSavingEngine, OneRank

from tacl_scale import checkpoint, export
from tacl_scale.run_dir import CHECKPOINTS_DIR, RUN_FILE

pytestmark = pytest.mark.framework  # also run on the GPU image's versions (scripts/test.sh --gpu-image)


def save(root: Path, step: int, keep_last: int = 1) -> None:
    checkpoint.save(FakeSavingEngine(), root, step, {"step": step}, keep_last=keep_last, group=OneRank())


def held_until_released(root: Path, lock: checkpoint.ReadLock, held: int, then: int) -> None:
    """Saving step ``then`` (keep_last 1) keeps step ``held`` while ``lock`` holds it;
    the save after the release removes it."""
    try:
        save(root, then)
        assert checkpoint.tags(root) == [checkpoint.tag_for(held), checkpoint.tag_for(then)]
    finally:
        lock.release()
    save(root, then + 2)
    assert checkpoint.tags(root) == [checkpoint.tag_for(then + 2)]


@pytest.fixture
def run(tmp_path: Path) -> Path:
    """A run directory (what the export needs to take it for one) with step 2 saved."""
    run = tmp_path / "run"
    run.mkdir()
    (run / RUN_FILE).write_text("{}")
    save(run / CHECKPOINTS_DIR, 2)
    return run


def test_rotation_keeps_a_checkpoint_a_reader_holds_and_removes_it_later(tmp_path: Path) -> None:
    root = tmp_path / "checkpoints"
    save(root, 2)
    with checkpoint.ReadLock(root / "step00000002"):
        save(root, 3)
        save(root, 4)
        assert checkpoint.tags(root) == ["step00000002", "step00000004"]  # step 3 is gone, not step 2
        assert checkpoint.latest_tag(root) == "step00000004"
        assert checkpoint.record_problem(root / "step00000002") is None  # whole, still
    save(root, 5)
    assert checkpoint.tags(root) == ["step00000005"]
    assert sorted(p.name for p in root.iterdir()) == ["latest", "step00000005"]  # nothing renamed away is left
    # The lock file is the readers', not the checkpoint's: not recorded, so it never fails a verification.
    assert checkpoint.READ_LOCK not in json.loads((root / "step00000005" / checkpoint.CHECKPOINT_RECORD).read_text())


def test_readers_share_the_lock_and_rotation_never_waits(tmp_path: Path) -> None:
    root = tmp_path / "checkpoints"
    save(root, 2)
    first, second = checkpoint.ReadLock(root / "step00000002"), checkpoint.ReadLock(root / "step00000002")
    first.acquire()
    second.acquire()  # would wait forever if readers excluded each other
    first.release()
    save(root, 3)
    assert checkpoint.tags(root) == ["step00000002", "step00000003"]  # the other reader still holds it
    assert checkpoint.rotate(root, 1, "step00000003") == ["step00000002"]
    second.release()
    assert checkpoint.rotate(root, 1, "step00000003") == []
    assert checkpoint.tags(root) == ["step00000003"]


def test_a_reader_that_dies_frees_its_checkpoint(tmp_path: Path) -> None:
    """The lock is the kernel's: a killed export holds nothing."""
    root = tmp_path / "checkpoints"
    save(root, 2)
    holder = ("import fcntl, os, sys\n"
              f"fd = os.open({str(root / 'step00000002' / checkpoint.READ_LOCK)!r}, os.O_RDONLY)\n"
              "fcntl.flock(fd, fcntl.LOCK_SH)\n"
              "print('locked', flush=True)\n"
              "sys.stdin.read()\n")
    reader = subprocess.Popen([sys.executable, "-c", holder], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert reader.stdout is not None and reader.stdout.readline() == "locked\n"
        save(root, 3)
        assert checkpoint.tags(root) == ["step00000002", "step00000003"]
    finally:
        reader.kill()
        reader.wait()
    save(root, 4)
    assert checkpoint.tags(root) == ["step00000004"]


def test_a_rotation_or_conversion_killed_midway_leaves_nothing_after_the_next_save(tmp_path: Path) -> None:
    """What a killed rotation and a killed universal conversion leave (a BERT-large
    conversion's is about 4 GB) goes at the next rotation."""
    root = tmp_path / "checkpoints"
    save(root, 2)
    (root / f".step00000001{checkpoint.REMOVING}" / "zero").mkdir(parents=True)
    (root / f".step00000002{checkpoint.UNIVERSAL}.tmp" / "zero").mkdir(parents=True)
    save(root, 3)
    assert sorted(p.name for p in root.iterdir()) == ["latest", "step00000003"]


def hook_first(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, before: Any) -> None:
    """Run ``before`` once, just before the first call of ``owner.name``."""
    original, calls = getattr(owner, name), []

    def hooked(*args: Any, **kwargs: Any) -> Any:
        if not calls:
            calls.append(1)
            before()
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, hooked)


def test_the_newest_rotated_away_before_its_lock_exports_the_new_newest(run: Path, monkeypatch: pytest.MonkeyPatch,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    """The issue's failure: the export listed step 2, the run saved step 4 and
    rotated step 2 away before the export read it. It exports step 4, and holds it."""
    root = run / CHECKPOINTS_DIR
    hook_first(monkeypatch, checkpoint.ReadLock, "acquire", lambda: save(root, 4))
    with caplog.at_level("INFO", logger="tacl_scale"):
        run_dir, ckpt_dir, lock = export._resolve(run)
    assert (run_dir, ckpt_dir) == (run, root / "step00000004")
    assert "step00000002 was removed by rotation before it could be read" in caplog.text
    assert "older checkpoint than the newest" not in caplog.text  # nothing newer failed: no warning
    held_until_released(root, lock, held=4, then=6)


def rotate_before_first_shared_lock(monkeypatch: pytest.MonkeyPatch, root: Path, step: int) -> None:
    """Hold the reader between opening a lock file and locking it while the run
    saves ``step`` and rotates (it takes the lock first)."""
    real, calls = fcntl.flock, []

    def flock(fd: int, operation: int) -> None:
        if operation == fcntl.LOCK_SH and not calls:
            calls.append(1)
            save(root, step)
        real(fd, operation)

    monkeypatch.setattr(checkpoint, "fcntl", types.SimpleNamespace(
        flock=flock, LOCK_SH=fcntl.LOCK_SH, LOCK_EX=fcntl.LOCK_EX, LOCK_NB=fcntl.LOCK_NB))


def test_a_lock_taken_once_rotation_removed_its_checkpoint_is_refused(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The reader opened step 2's lock file, rotation locked it first and removed
    step 2: the lock the reader gets then is on a file no longer at its path."""
    root = tmp_path / "checkpoints"
    save(root, 2)
    rotate_before_first_shared_lock(monkeypatch, root, 4)
    with pytest.raises(checkpoint.CheckpointGone, match="step00000002: removed by checkpoint rotation"):
        checkpoint.ReadLock(root / "step00000002").acquire()
    assert checkpoint.tags(root) == ["step00000004"]


def test_the_export_looks_again_when_its_lock_came_too_late(run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = run / CHECKPOINTS_DIR
    rotate_before_first_shared_lock(monkeypatch, root, 4)
    _, ckpt_dir, lock = export._resolve(run)
    try:
        assert ckpt_dir == root / "step00000004"
        save(root, 6)
        assert checkpoint.tags(root) == ["step00000004", "step00000006"]
    finally:
        lock.release()


def test_a_named_checkpoint_that_is_gone_is_one_error_line(run: Path, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    root = run / CHECKPOINTS_DIR
    save(root, 4)  # rotates step 2 away
    out = tmp_path / "out"
    assert export.main([str(root / "step00000002"), str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {root / 'step00000002'}: no such checkpoint"), err
    assert "the run's newest now: step00000004" in err
    assert not out.exists()


def test_the_checkpoints_directory_and_its_latest_pointer_name_the_run(run: Path) -> None:
    """``RUN/checkpoints`` and ``RUN/checkpoints/latest`` (DeepSpeed's pointer, what
    its users pass) said "neither a run directory nor a checkpoint" and "no such
    checkpoint"."""
    root = run / CHECKPOINTS_DIR
    save(root, 4, keep_last=2)
    for given in (root, root / "latest"):
        run_dir, ckpt_dir, lock = export._resolve(given)
        lock.release()
        assert (run_dir, ckpt_dir) == (run, root / "step00000004"), given


def test_a_named_checkpoint_is_held_while_it_is_read(run: Path) -> None:
    root = run / CHECKPOINTS_DIR
    _, ckpt_dir, lock = export._resolve(root / "step00000002")
    assert ckpt_dir == root / "step00000002"
    held_until_released(root, lock, held=2, then=4)


def test_the_export_lets_go_of_its_checkpoint_when_it_fails(run: Path, tmp_path: Path) -> None:
    """A refused export (here: no optimizer states) does not keep the checkpoint from rotation."""
    root = run / CHECKPOINTS_DIR
    with pytest.raises(ValueError, match="no ZeRO optimizer states"):
        export.export_checkpoint(run, tmp_path / "out")
    save(root, 4)
    assert checkpoint.tags(root) == ["step00000004"]


def test_a_target_that_cannot_be_one_is_refused_before_the_checkpoint_is_looked_at(
        run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``tacl-export RUN runs/tour/vocab.txt`` said "INFO: exporting ..." and only
    then that the target is a file; so must an earlier export a user added files
    to: one error line, before the run's checkpoints are resolved or locked."""
    a_file = tmp_path / "vocab.txt"
    a_file.write_text("[PAD]\n")
    used = tmp_path / "model"
    used.mkdir()
    (used / export.EXPORT_MARKER).write_text(json.dumps({"source": "x", "files": [export.EXPORT_MARKER]}))
    (used / "NOTES.md").write_text("mine")

    def resolved(ckpt: Path) -> None:
        raise AssertionError("the checkpoint was looked at before the target was checked")

    monkeypatch.setattr(export, "_resolve", resolved)
    for target, says in ((a_file, "is a file, not a directory for the export"),
                         (used, "an earlier export that also holds NOTES.md")):
        assert export.main([str(run), str(target)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"error: {target}: {says}"), err
    assert a_file.read_text() == "[PAD]\n" and (used / "NOTES.md").read_text() == "mine"
