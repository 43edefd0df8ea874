"""The build's own files in its output directory (data_prep.workspace), without Beam."""

from __future__ import annotations

from pathlib import Path

from data_prep.workspace import TMP_DIR_NAME, remove_build_files
from tacl_scale.data.manifest import TOKENIZER_DIR
from tacl_scale.locking import LOCK_NAME

BUILD_FILES = (TMP_DIR_NAME, TOKENIZER_DIR, f".{TOKENIZER_DIR}.tmp", LOCK_NAME, ".manifest.json.1a2b.tmp",
               "shard-00000.bin", "shard-00000.idx", "validation-00003.meta.npy")
USER_FILES = ("notes.txt", "shard-3.bin", "manifest.json", "my-dir")


def output_directory(tmp_path: Path) -> Path:
    """An output directory holding every kind of build file (directories with a file
    in them among them) and files of the user's."""
    directory = tmp_path / "out"
    directory.mkdir(parents=True)
    for name in (*BUILD_FILES, *USER_FILES):
        if name in (TMP_DIR_NAME, TOKENIZER_DIR, f".{TOKENIZER_DIR}.tmp", "my-dir"):
            (directory / name).mkdir()
            (directory / name / "inside").write_text("x")
        else:
            (directory / name).write_text("x")
    return directory


def test_remove_build_files_removes_the_builds_files_but_those_kept_and_never_a_users(tmp_path: Path) -> None:
    directory = output_directory(tmp_path)
    remove_build_files(directory, keep=(LOCK_NAME,))
    assert sorted(p.name for p in directory.iterdir()) == sorted([LOCK_NAME, *USER_FILES])
    assert (directory / "my-dir" / "inside").is_file()

    directory = output_directory(tmp_path / "resumed")
    remove_build_files(directory, keep=(TMP_DIR_NAME, LOCK_NAME))
    assert sorted(p.name for p in directory.iterdir()) == sorted([TMP_DIR_NAME, LOCK_NAME, *USER_FILES])
    assert (directory / TMP_DIR_NAME / "inside").is_file()  # the workspace kept whole

    directory = output_directory(tmp_path / "all")
    remove_build_files(str(directory), keep=())  # a str path too; nothing kept, the lock goes
    assert sorted(p.name for p in directory.iterdir()) == sorted(USER_FILES)
