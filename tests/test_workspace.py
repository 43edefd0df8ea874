"""The build's own files in its output directory (data_prep.workspace), without Beam."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from data_prep.inputs import WorkUnit
from data_prep.workspace import TMP_DIR_NAME, Workspace, WorkspaceError, remove_build_files
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


def interrupted_workspace(tmp_path: Path) -> tuple[Workspace, dict[str, list[int]]]:
    """A workspace as a build killed after its first of two units leaves it: the
    build record, one completed part with its marker, one incomplete part."""
    corpus = tmp_path / "a.txt"
    corpus.write_text("One.\n")
    units = [WorkUnit(str(corpus), "text"), WorkUnit(str(corpus), "text", 0, 2)]
    inputs = {str(corpus): [5, 0]}
    workspace = Workspace(tmp_path / "out")
    workspace.start_run("digest", units, inputs, "sha", {"seed": 1})
    done, partial = workspace.part_prefix(units[0]), workspace.part_prefix(units[1])
    files = [Path(f"{done}.bin"), Path(f"{done}.idx")]
    for path in (*files, Path(f"{partial}.bin")):
        path.write_bytes(b"x")
    workspace.mark_done(done, files, {"unit": "a.txt", "bytes": 5, "shards": [0], "skips": {}, "documents": 1})
    return workspace, inputs


@pytest.mark.parametrize(("damage", "why"), [
    (b"", "empty"),
    (b'{"fingerprint": "dig', "not JSON: Unterminated string starting at: line 1 column 17 (char 16)"),
    (b"[1, 2]", "not a JSON object but an array"),
    (b"\xff\xfe{}", "not UTF-8: 'utf-8' codec can't decode byte 0xff in position 0: invalid start byte"),
])
def test_a_damaged_build_record_is_a_reason_not_to_resume_naming_it(tmp_path: Path, damage: bytes, why: str) -> None:
    """``: > OUTPUT/_tmp/build.json`` (a full disk, an edit) and ``--resume``: a
    JSONDecodeError's traceback, exit 1."""
    workspace, inputs = interrupted_workspace(tmp_path)
    assert workspace.resume_problem("digest", inputs, "sha", {"seed": 1}) is None
    record = workspace.root / "build.json"
    record.write_bytes(damage)
    assert workspace.resume_problem("digest", inputs, "sha", {"seed": 1}) == (
        f"{record}: unreadable ({why}): drop --resume to start over")
    record.unlink()
    assert workspace.resume_problem("digest", inputs, "sha", {"seed": 1}) == (
        f"{record}: missing (no interrupted build of this version to resume)")


@pytest.mark.parametrize(("damage", "why"), [
    (b"", "empty"),
    (b'{"files": ', "not JSON: Expecting value: line 1 column 11 (char 10)"),
    (b"null", "not a JSON object but null"),
    (b'{"files": "part-x.bin"}', 'its "files" is not a list of names'),
])
def test_a_damaged_marker_is_named_and_nothing_is_discarded(tmp_path: Path, damage: bytes, why: str) -> None:
    """A marker that could not be read made discard_incomplete (and every reader of
    the markers) raise a JSONDecodeError's traceback; it names the marker, and the
    workspace stays as it was."""
    workspace, _ = interrupted_workspace(tmp_path)
    (marker,) = workspace.root.glob("part-*.done.json")
    marker.write_bytes(damage)
    before = sorted(p.name for p in workspace.root.iterdir())
    message = f"^{re.escape(f'{marker}: unreadable ({why}): drop --resume to start over')}$"
    with pytest.raises(WorkspaceError, match=message):
        workspace.discard_incomplete()
    assert sorted(p.name for p in workspace.root.iterdir()) == before
    if "files" not in why:
        with pytest.raises(WorkspaceError, match=message):
            workspace.completed_units()
    assert workspace.completed_count() == 1


def test_discard_incomplete_keeps_the_completed_parts(tmp_path: Path) -> None:
    workspace, _ = interrupted_workspace(tmp_path)
    (marker,) = workspace.root.glob("part-*.done.json")
    kept = {"build.json", marker.name, *json.loads(marker.read_text())["files"]}
    assert workspace.discard_incomplete() == (1, 1)
    assert {p.name for p in workspace.root.iterdir()} == kept


def test_spill_unit_spills_a_units_documents_and_marks_it_done_with_its_totals(tmp_path: Path) -> None:
    """One work unit read, cleaned, tokenized and spilled by the plain function the
    Beam step wraps: its marker holds the shards it touched and its totals, its skips
    counted by kind; a unit that fails half-way leaves no part file and no marker."""
    from conftest import ZH_TEXT, ZH_VOCAB

    from data_prep.build import parse_args
    from data_prep.documents import DocumentProcessor
    from data_prep.inputs import plan_work_units
    from data_prep.pipeline import spill_unit
    from data_prep.shards import TokenizerFacts
    from data_prep.tokenization import load_tokenizer

    corpus = tmp_path / "corpus.txt"
    corpus.write_text(ZH_TEXT.read_text(encoding="utf-8") + "\n\n短\n", encoding="utf-8")  # a too-short document
    config = parse_args(["--input", str(corpus), "--format", "text", "--tokenizer", str(ZH_VOCAB),
                         "--output", str(tmp_path / "out"), "--num-shards", "3"]).config
    tokenizer = load_tokenizer(config.tokenizer)
    facts = TokenizerFacts(tokenizer.vocab_size, tokenizer.special_ids, tokenizer.replacement_ids())
    [unit] = plan_work_units([str(corpus)], "text", False, config.input.unit_bytes)
    workspace = Workspace(config.output.directory)
    workspace.root.mkdir(parents=True)
    heard: list[str] = []
    shards, totals = spill_unit(unit, DocumentProcessor(config), facts, workspace, heard.append)
    marker = workspace.marker(workspace.part_prefix(unit))
    assert marker is not None and marker["shards"] == shards and set(shards) <= {0, 1, 2} and len(shards) > 1
    assert (marker["documents"], marker["tokens"], marker["unk_tokens"]) == (
        totals.documents, totals.tokens, totals.unk_tokens)
    assert totals.documents > 10 and totals.tokens > 100 * totals.documents and totals.chars > totals.documents
    assert marker["skips"] == totals.skips and sum(totals.skips.values()) == len(heard) >= 1, (totals.skips, heard)
    assert all((workspace.root / name).is_file() for name in marker["files"])

    class Failing(DocumentProcessor):
        def __call__(self, record, count_skip):  # type: ignore[no-untyped-def]
            if self.seen:
                raise RuntimeError("worker lost")
            self.seen = True
            return super().__call__(record, count_skip)

    other = Workspace(tmp_path / "other")
    other.root.mkdir(parents=True)
    failing = Failing(config)
    failing.seen = False
    with pytest.raises(RuntimeError, match="worker lost"):
        spill_unit(unit, failing, facts, other, heard.append)
    assert other.marker(other.part_prefix(unit)) is None
    assert list(other.root.iterdir()) == []


def test_a_marker_is_written_after_its_parts_data_and_names_are_synced(tmp_path: Path, monkeypatch) -> None:
    """The part's files, then the directory that holds their names (they get them by
    link or rename), are synced before the marker that says the unit is done: a
    power loss must not keep a marker whose part's names were lost."""
    import stat

    import data_prep.workspace as workspace_module

    synced: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced.append("directory" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real_fsync(fd)

    real_atomic_write = workspace_module.atomic_write

    def recording_atomic_write(path, data, fsync=False):
        synced.append(f"write {Path(path).name}")
        return real_atomic_write(path, data, fsync)

    monkeypatch.setattr(workspace_module.os, "fsync", recording_fsync)
    monkeypatch.setattr(workspace_module, "atomic_write", recording_atomic_write)
    workspace = Workspace(tmp_path)
    workspace.root.mkdir()
    files = [workspace.root / "part-u.bin", workspace.root / "part-u.idx"]
    for path in files:
        path.write_bytes(b"x")
    workspace.mark_done(workspace.root / "part-u", files, {"bytes": 1, "shards": [0], "skips": {}, "documents": 1})
    assert synced[:4] == ["file", "file", "directory", "write part-u.done.json"]


def test_a_resume_over_other_work_units_of_the_same_inputs_says_so(tmp_path: Path) -> None:
    """An interrupted build that read a large text file as one unit (an earlier
    version), resumed by one that splits it: the same settings and files, other
    units, named as the reason."""
    from data_prep.inputs import plan_work_units
    from data_prep.workspace import fingerprint

    corpus = tmp_path / "a.txt"
    corpus.write_text("".join(f"Line {k} of the corpus.\n" for k in range(100)))
    whole = plan_work_units([str(corpus)], "lines", unit_bytes=1 << 20, split_text=True)
    split = plan_work_units([str(corpus)], "lines", unit_bytes=500, split_text=True)
    assert len(whole) == 1 and len(split) > 1
    config = {"input": {"format": "lines"}, "seed": 1}
    inputs = {str(corpus): [corpus.stat().st_size, 0]}
    workspace = Workspace(tmp_path / "out")
    workspace.start_run(fingerprint(config, whole), whole, inputs, "sha", {"seed": 1})
    assert workspace.resume_problem(fingerprint(config, whole), inputs, "sha", {"seed": 1}) is None
    assert workspace.resume_problem(fingerprint(config, split), inputs, "sha", {"seed": 1}) == (
        f"{workspace.root}: its parts were made from other work units of the same inputs (a multistream index "
        "beside a dump appeared, went or changed, or an earlier version read a large text file as one unit); "
        "drop --resume to start over")
