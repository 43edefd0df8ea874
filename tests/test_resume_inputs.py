"""``--resume`` knows a build's inputs by the files its ``--input`` expands to (paths
and sizes), not by how they were spelled: a quoted glob the build expands and the
same glob unquoted, expanded by the shell, are the same inputs. A resume that is
refused names the first setting or input that differs."""

from __future__ import annotations

import hashlib
import json
import logging
import re
from pathlib import Path

import pytest
from conftest import ZH_TEXT, ZH_VOCAB

from data_prep import shards
from data_prep.build import BuildError, parse_args, run_build

pytestmark = pytest.mark.slow

ARGS = ["--format", "text", "--language", "zh", "--tokenizer", str(ZH_VOCAB), "--min-doc-chars", "10",
        "--dupe-factor", "1", "--max-seq-len", "64", "--num-shards", "2", "--quiet"]


def build(output: Path, inputs: list[str], *args: str, resume: bool = False) -> Path:
    """The build of ``--input INPUTS... --output OUTPUT`` in this process."""
    command = parse_args(["--input", *inputs, "--output", str(output), *ARGS, *args])
    return run_build(command.config, command.beam_args, resume)


@pytest.fixture
def corpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Two text files in ``corpus/`` under the working directory (``tmp_path``), as
    the shell expands ``corpus/*.txt``: the generated Chinese documents, split in two."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "corpus").mkdir()
    documents = ZH_TEXT.read_text(encoding="utf-8").split("\n\n")
    half = len(documents) // 2
    for name, part in (("a.txt", documents[:half]), ("b.txt", documents[half:])):
        (tmp_path / "corpus" / name).write_text("\n\n".join(part), encoding="utf-8")
    return ["corpus/a.txt", "corpus/b.txt"]


QUOTED = ["corpus/*.txt"]  # the build expands it


def dataset_files(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir()) if p.is_file()}


def interrupted_before_the_manifest(output: Path, inputs: list[str], monkeypatch: pytest.MonkeyPatch) -> int:
    """A build of ``inputs`` stopped after every work unit completed, before the
    dataset was written (as a kill there leaves it); the number of units it left."""
    def stopped(*args: object, **kwargs: object) -> Path:
        raise OSError(5, "stopped by the test before the manifest")

    with monkeypatch.context() as patch:
        patch.setattr(shards, "finalize", stopped)
        with pytest.raises(BuildError, match="build failed, no dataset written"):
            build(output, inputs)
    units = len(list((output / "_tmp").glob("part-*.done.json")))
    assert units == 2 and not (output / "manifest.json").exists()
    return units


def test_a_finished_build_resumed_with_the_other_spelling_of_its_inputs_has_nothing_to_do(
        tmp_path: Path, corpus: list[str], caplog: pytest.LogCaptureFixture) -> None:
    """Built from a quoted glob and resumed with the files the shell expands it to,
    it was refused: "built with input.patterns ['corpus/*.txt'], this build's is
    ['corpus/a.txt', 'corpus/b.txt']"."""
    out = tmp_path / "ds"
    manifest = build(out, QUOTED)
    before = dataset_files(out)
    for spelling in (corpus, [str(tmp_path / "corpus" / "b.txt"), "corpus/a.txt"], QUOTED):
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="data_prep.build"):
            assert build(out, spelling, resume=True) == manifest
        assert "already holds the dataset of these settings, inputs and tokenizer; nothing to resume" in caplog.text
    assert dataset_files(out) == before

    # Other files are other inputs, whatever the spelling: refused naming the file.
    (tmp_path / "corpus" / "c.txt").write_text("另一篇文章。\n", encoding="utf-8")
    with pytest.raises(BuildError) as refused:
        build(out, QUOTED, resume=True)
    assert str(refused.value) == (f"{out}: holds a finished dataset ({tmp_path}/corpus/c.txt: an input of this build "
                                  "that the dataset was not built from): there is nothing to resume; pass --overwrite "
                                  "to replace it")
    with pytest.raises(BuildError, match=re.escape(f"({tmp_path}/corpus/b.txt: an input the dataset was built from "
                                                   "that this build does not read)")):
        build(out, ["corpus/a.txt"], resume=True)
    assert dataset_files(out) == before


def test_an_interrupted_build_resumes_with_the_other_spelling_of_its_inputs(
        tmp_path: Path, corpus: list[str], caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Its parts were refused as "made with other settings or inputs". The resumed
    build reuses every unit and says so once, with no progress line per reused unit
    (it wrote "work units 2/2 done ... 0.00 MB/s" for each); its shards are those of
    an uninterrupted build."""
    straight = build(tmp_path / "straight", QUOTED).parent
    out = tmp_path / "ds"
    units = interrupted_before_the_manifest(out, QUOTED, monkeypatch)
    caplog.clear()
    with caplog.at_level(logging.INFO):
        build(out, corpus, resume=True)
    assert f"resuming: {units} of {units} work unit(s) already done" in caplog.text
    assert caplog.text.count("reused ") == units
    assert caplog.text.count("progress: work units") == 1 and f"progress: work units {units}/{units} done" in caplog.text
    shards = {name: digest for name, digest in dataset_files(out).items() if name != "manifest.json"}
    assert shards == {name: digest for name, digest in dataset_files(straight).items() if name != "manifest.json"}
    # The manifest records --input as this run spelled it, and the files it read.
    recorded = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert recorded["build_config"]["input"]["patterns"] == corpus
    assert [s["path"] for s in recorded["sources"]] == [str(tmp_path / "corpus" / n) for n in ("a.txt", "b.txt")]


def test_an_interrupted_build_resumed_otherwise_is_refused_naming_the_difference(
        tmp_path: Path, corpus: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """It said "its parts were made with other settings or inputs", naming neither."""
    out = tmp_path / "ds"
    interrupted_before_the_manifest(out, QUOTED, monkeypatch)
    parts = sorted(p.name for p in (out / "_tmp").iterdir())
    again = "rerun the same command, or drop --resume to start over"
    with pytest.raises(BuildError) as refused:
        build(out, corpus, "--seed", "7", resume=True)
    assert str(refused.value) == (f"--resume: {out}/_tmp: its parts were made with other settings (seed 12345, "
                                  f"this build's is 7); {again}")
    with pytest.raises(BuildError, match=r"^--resume: .*\(masking\.masked_lm_prob 0\.15, this build's is 0\.2\)"):
        build(out, QUOTED, "--masked-lm-prob", "0.2", resume=True)
    with pytest.raises(BuildError) as refused:
        build(out, ["corpus/a.txt"], resume=True)
    assert str(refused.value) == (f"--resume: {tmp_path}/corpus/b.txt: an input of the interrupted build that this "
                                  f"build does not read (its parts were made from other inputs); {again}")
    (tmp_path / "corpus" / "c.txt").write_text("另一篇文章。\n", encoding="utf-8")
    with pytest.raises(BuildError, match="^" + re.escape(f"--resume: {tmp_path}/corpus/c.txt: an input of this "
                                                         "build that the interrupted build did not read")):
        build(out, QUOTED, resume=True)
    assert sorted(p.name for p in (out / "_tmp").iterdir()) == parts  # the completed parts stay


def test_a_build_record_without_settings_resumes_by_its_fingerprint(tmp_path: Path) -> None:
    """An interrupted build of a version that recorded no settings in build.json (its
    fingerprint took the inputs' spelling in) still resumes with the same command,
    and is refused, as then, with another."""
    from data_prep.inputs import WorkUnit
    from data_prep.workspace import Workspace, fingerprint

    config = parse_args(["--input", "corpus/*.txt", "--output", str(tmp_path / "ds"), *ARGS]).config.to_dict()
    units = [WorkUnit(str(tmp_path / "a.txt"), "text", 0, 10)]
    workspace = Workspace(tmp_path / "ds")
    legacy = fingerprint(config, units, legacy=True)
    workspace.start_run(legacy, units, inputs={}, tokenizer_sha256="0" * 64)  # no settings, as those versions
    assert "settings" not in json.loads((workspace.root / "build.json").read_text(encoding="utf-8"))
    assert legacy != fingerprint(config, units)
    assert workspace.resume_problem(fingerprint(config, units), {}, "0" * 64, {}, legacy_digest=legacy) is None
    assert "other settings or inputs" in str(workspace.resume_problem("another", {}, "0" * 64, {}, legacy_digest="other"))


def test_the_tokenizer_is_known_by_its_bytes_not_by_how_its_path_was_spelled(
        tmp_path: Path, corpus: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """``--tokenizer vocab.txt`` and ``--tokenizer ./vocab.txt`` (or a copy elsewhere)
    are the same tokenizer, as its sha256 says: a resume was refused as "other
    settings (tokenizer.path ...)"; a file of other bytes is still refused."""
    (tmp_path / "vocab.txt").write_bytes(ZH_VOCAB.read_bytes())
    respelled = [*ARGS[:ARGS.index("--tokenizer")], *ARGS[ARGS.index("--tokenizer") + 2:]]

    def build_with(output: Path, tokenizer: str, resume: bool = False) -> Path:
        command = parse_args(["--input", *QUOTED, "--output", str(output), *respelled, "--tokenizer", tokenizer])
        return run_build(command.config, command.beam_args, resume)

    finished = build_with(tmp_path / "ds", "vocab.txt")
    assert build_with(tmp_path / "ds", "./vocab.txt", resume=True) == finished
    assert build_with(tmp_path / "ds", str(ZH_VOCAB), resume=True) == finished
    out = tmp_path / "interrupted"
    interrupted_before_the_manifest(out, QUOTED, monkeypatch)  # with --tokenizer ZH_VOCAB
    build_with(out, "./vocab.txt", resume=True)
    assert (out / "manifest.json").is_file()
    other = tmp_path / "other-vocab.txt"
    other.write_bytes(ZH_VOCAB.read_bytes() + b"extra\n")
    with pytest.raises(BuildError, match="built with another tokenizer file"):
        build_with(tmp_path / "ds", str(other), resume=True)


def test_large_text_files_are_cut_only_when_there_is_work(tmp_path: Path, corpus: list[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Cutting a large text file into work units takes a pass over it: a refused
    output and a resumed build that has already finished need no units, and give
    their answer without that pass."""
    from data_prep import build as build_module

    finished = build(tmp_path / "done", corpus)
    real_plan = build_module.plan_work_units
    planned: list[int] = []

    def counted_plan(*args: object, **kwargs: object) -> object:
        planned.append(1)
        return real_plan(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(build_module, "plan_work_units", counted_plan)
    with pytest.raises(BuildError, match="already holds a dataset; pass --overwrite"):
        build(tmp_path / "done", corpus)
    assert build(tmp_path / "done", corpus, resume=True) == finished
    assert planned == []
    build(tmp_path / "other", corpus, "--unit-mb", "0.002")
    assert planned == [1]
