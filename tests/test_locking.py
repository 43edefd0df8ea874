"""The directory lock of builds and runs (``tacl_scale.locking``): one holder at a
time, and nothing of it left when the holder is done."""

from __future__ import annotations

from pathlib import Path

import pytest

from tacl_scale.locking import LOCK_NAME, DirectoryLock, LockedError


def test_a_second_holder_is_refused_naming_the_first(tmp_path: Path) -> None:
    with DirectoryLock(tmp_path / "out", "build"), pytest.raises(LockedError, match=r"out: in use by build pid \d+ "):
        DirectoryLock(tmp_path / "out", "training").acquire()
    DirectoryLock(tmp_path / "out", "training").acquire().release()  # free again


def test_a_directory_the_lock_made_goes_with_it_unless_the_holder_wrote_there(tmp_path: Path) -> None:
    """A job refused after taking the lock (a model too short for the data) left its
    new --output behind, empty, and the parents it had made for it (a recipe's
    ``runs/``)."""
    refused = tmp_path / "runs" / "refused"
    with DirectoryLock(refused, "training"):
        assert (refused / LOCK_NAME).is_file()
    assert sorted(tmp_path.iterdir()) == []
    (tmp_path / "runs").mkdir()
    with DirectoryLock(refused, "training"):
        pass
    assert sorted(tmp_path.iterdir()) == [tmp_path / "runs"]  # a parent that was there stays

    worked = tmp_path / "runs" / "worked"
    with DirectoryLock(worked, "training"):
        (worked / "run.json").write_text("{}")
    assert sorted(p.name for p in worked.iterdir()) == ["run.json"]

    existing = tmp_path / "existing"
    existing.mkdir()
    with DirectoryLock(existing, "training"):
        pass
    assert existing.is_dir() and not any(existing.iterdir())  # the user's own, empty, directory stays


def test_a_directory_removed_by_a_refused_holder_is_made_again(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The race of two jobs on a new --output: the second made (found) the directory,
    the first removed it on release before the second opened its lock file."""
    import os

    target = tmp_path / "out"
    real_open = os.open
    removed = []

    def open_after_the_first_released(path: str, *args: object) -> int:
        if str(path) == str(target / LOCK_NAME) and not removed:
            removed.append(True)
            target.rmdir()  # what the first holder's release did meanwhile
        return real_open(path, *args)

    monkeypatch.setattr(os, "open", open_after_the_first_released)
    lock = DirectoryLock(target, "training").acquire()
    assert removed and (target / LOCK_NAME).is_file()
    lock.release()
    assert not target.exists()
