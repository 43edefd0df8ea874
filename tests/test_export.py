"""tacl_scale.export.export_student: an export directory is whole or as it was.

The exports of real runs (through the launcher, from checkpoints, while rotation
removes them) are tested in tests/test_train.py and tests/test_export_rotation.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import TINY_BERT
from transformers import BertConfig, BertForPreTraining

from tacl_scale.export import EXPORT_MARKER, export_student

pytestmark = pytest.mark.framework  # also run on the GPU image's versions (scripts/test.sh --gpu-image)


@pytest.fixture
def tokenizer_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "tokenizer"
    directory.mkdir()
    (directory / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n", encoding="utf-8")
    return directory


def student(seed: int) -> BertForPreTraining:
    torch.manual_seed(seed)
    return BertForPreTraining(BertConfig(**TINY_BERT))


def test_an_export_interrupted_between_its_renames_keeps_the_earlier_one(tokenizer_dir: Path, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The earlier export was set aside, the new one not yet in place, and the
    cleanup removed both: an error (or, before preemption.uninterrupted held it
    back, Ctrl-C) at that moment left no export at all."""
    out = tmp_path / "export"
    export_student(student(0), out, tokenizer_dir, "first")
    replace = os.replace

    def interrupted_before_the_new_one(src: str | os.PathLike, dst: str | os.PathLike) -> None:
        if Path(src).name == f".{out.name}.partial":
            raise OSError(5, "Input/output error")
        replace(src, dst)

    monkeypatch.setattr(os, "replace", interrupted_before_the_new_one)
    with pytest.raises(OSError, match="Input/output error"):
        export_student(student(1), out, tokenizer_dir, "second")
    monkeypatch.setattr(os, "replace", replace)
    assert json.loads((out / EXPORT_MARKER).read_text())["source"] == "first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export", "tokenizer"]  # nothing set aside is left


def test_an_earlier_export_left_aside_by_a_kill_is_put_back_first(tokenizer_dir: Path, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Killed between the renames, an export left ``.export.previous`` and no
    ``export``; the next export deleted it as a leftover, and when that one failed
    too (a full disk), no export was left."""
    out = tmp_path / "export"
    export_student(student(0), out, tokenizer_dir, "first")
    os.replace(out, tmp_path / ".export.previous")
    failing = student(1)

    def disk_full(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(failing, "save_pretrained", disk_full)
    with pytest.raises(OSError, match="No space left"):
        export_student(failing, out, tokenizer_dir, "second")
    assert json.loads((out / EXPORT_MARKER).read_text())["source"] == "first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export", "tokenizer"]


def test_an_export_inside_a_run_a_dataset_or_an_export_is_refused(tmp_path: Path) -> None:
    """``tacl-export RUN RUN/export/mine`` wrote there, and the run's next export
    replaced RUN/export whole, the user's export with it."""
    from tacl_scale.export import container_problem, export_target_problem
    from tacl_scale.run_dir import RUN_FILE

    run, dataset, export = tmp_path / "run", tmp_path / "ds", tmp_path / "exported"
    for directory, marker in ((run, RUN_FILE), (dataset, "manifest.json"), (export, EXPORT_MARKER)):
        directory.mkdir()
        (directory / marker).write_text("{}")
    (dataset / "shard-00000.idx").write_bytes(b"")
    said = {run / "export" / "mine": f"inside the training run {run}, whose checkpoints and export training",
            run / "checkpoints" / "x": f"inside the training run {run}",
            run / "mine": f"inside the training run {run}",
            dataset / "x": f"inside the dataset {dataset}: choose a place outside it",
            export / "x" / "y": f"inside the export {export}, which the next export there replaces whole"}
    for out, says in said.items():
        assert (export_target_problem(out) or "").startswith(f"{out}: {says}"), out
    for allowed in (run / "export", tmp_path / "new", export):
        assert export_target_problem(allowed) is None, allowed
    assert container_problem(run / "analysis", runs_and_datasets=False) is None  # a report beside the run's files
    assert container_problem(export / "analysis", runs_and_datasets=False) is not None


def test_an_export_without_a_vocabulary_is_refused(tmp_path: Path) -> None:
    """A run whose tokenizer/ lost its files exported a model that cannot tokenize,
    with exit 0; now refused, naming the folder, and nothing is written."""
    empty = tmp_path / "tokenizer"
    empty.mkdir()
    (empty / "tokenizer_config.json").write_text("{}", encoding="utf-8")  # settings alone are no vocabulary
    with pytest.raises(ValueError, match=f"{empty}: no tokenizer vocabulary \\(vocab.txt, tokenizer.json or a "):
        export_student(student(0), tmp_path / "model", empty, "run")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tokenizer"]
    (empty / "spm.model").write_bytes(b"a sentencepiece model")  # a sentencepiece run's snapshot
    assert (export_student(student(0), tmp_path / "model", empty, "run") / "spm.model").is_file()


def test_an_export_to_dot_a_link_or_a_mount_point(tokenizer_dir: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """'.' (an empty working directory) is the directory it names (it had no name to
    write beside: "PosixPath('.') has an empty name"); a symbolic link, which the
    rename would replace instead of what it names, and a mount point, which cannot
    be renamed, are refused naming them."""
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    assert export_student(student(0), Path("."), tokenizer_dir, "run") == here
    assert (here / "model.safetensors").is_file() and (here / EXPORT_MARKER).is_file()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = tmp_path / "link"
    link.symlink_to(elsewhere)
    with pytest.raises(ValueError, match=f"{link}: a symbolic link \\(to {elsewhere}\\)"):
        export_student(student(0), link, tokenizer_dir, "run")
    assert link.is_symlink() and list(elsewhere.iterdir()) == []
    monkeypatch.setattr(os.path, "ismount", lambda path: Path(path) == elsewhere)
    with pytest.raises(ValueError, match=f"{elsewhere}: a mount point, .* \\({elsewhere / 'model'}\\)"):
        export_student(student(0), elsewhere, tokenizer_dir, "run")


def test_an_export_holding_files_no_export_writes_is_refused(tokenizer_dir: Path, tmp_path: Path) -> None:
    """An analysis report (selfsim.json, selfsim.csv, selfsim_by_layer.png) and a
    NOTES.md a user added to an export were deleted by the next export there, which
    replaces the directory whole. Refused, naming the first such file; the export's
    own files, a differently sharded earlier export's shards among them, are not."""
    out = tmp_path / "model"
    export_student(student(0), out, tokenizer_dir, "first")
    recorded = json.loads((out / EXPORT_MARKER).read_text())["files"]
    assert {"config.json", "model.safetensors", "vocab.txt", EXPORT_MARKER} <= set(recorded)
    (out / "model-00002-of-00002.safetensors").write_bytes(b"stale")  # the next export replaces it
    export_student(student(1), out, tokenizer_dir, "second")
    for added in ("NOTES.md", "selfsim.json", "analysis"):
        path = out / added
        path.mkdir() if added == "analysis" else path.write_text("mine")
        with pytest.raises(ValueError, match=f"^{out}: an earlier export that also holds {added}, which an export "
                                             "does not write and the next one would delete"):
            export_student(student(2), out, tokenizer_dir, "third")
        assert path.exists() and json.loads((out / EXPORT_MARKER).read_text())["source"] == "second"
        path.rmdir() if added == "analysis" else path.unlink()
    # An export from before the marker listed its files: judged by the names an export writes.
    (out / EXPORT_MARKER).write_text(json.dumps({"source": "second"}))
    export_student(student(2), out, tokenizer_dir, "third")
    (out / EXPORT_MARKER).write_text(json.dumps({"source": "third"}))
    (out / "NOTES.md").write_text("mine")
    with pytest.raises(ValueError, match="also holds NOTES.md"):
        export_student(student(3), out, tokenizer_dir, "fourth")


def test_a_dataset_built_into_an_export_is_refused(tokenizer_dir: Path, tmp_path: Path) -> None:
    """``data_prep.build --output EXPORT --overwrite`` kept the export's marker, and
    the next export removed the dataset's manifest.json and shards."""
    out = tmp_path / "model"
    export_student(student(0), out, tokenizer_dir, "first")
    (out / "manifest.json").write_text("{}")
    (out / "shard-00000.idx").write_bytes(b"")
    with pytest.raises(ValueError, match=f"^{out}: holds a dataset \\(manifest.json\\), which an export there would "
                                         "delete; export to a new directory"):
        export_student(student(1), out, tokenizer_dir, "second")
    assert (out / "manifest.json").is_file() and (out / "shard-00000.idx").is_file()


def test_the_export_command_refuses_before_it_imports_transformers_models(tmp_path: Path) -> None:
    """``tacl-export --help`` and its refusals of the command line and of OUT took
    4-5 s on 2 cores, most of it importing transformers' models (2 s of
    ``transformers.modeling_utils``), which only the export itself needs."""
    probe = ("import sys\n"
             "from tacl_scale.export import main\n"
             "code = main(sys.argv[1:])\n"
             "print(code, 'transformers.modeling_utils' in sys.modules)\n")
    target = tmp_path / "a-file"
    target.write_text("x")
    done = subprocess.run([sys.executable, "-c", probe, str(tmp_path), str(target)], capture_output=True, text=True,
                          timeout=120)
    assert done.stdout.split() == ["2", "False"], done.stderr[-2000:]
    assert done.stderr.strip().splitlines() == [f"error: {target}: is a file, not a directory for the export"]


@pytest.mark.parametrize("fails", ["safetensors", "safetensors-no-errno", "tokenizer-copy"])
def test_a_full_disk_is_one_error_line_naming_the_export_and_keeps_the_earlier_one(
        fails: str, tokenizer_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``tacl-export CKPT OUT`` onto a full disk ended in safetensors' traceback
    ("SafetensorError: Error while serializing: I/O error: No space left on device
    (os error 28)"), exit 1. Now one line naming OUT, exit 2; the earlier export is
    byte for byte as it was and nothing is left beside it. A write error without an
    errno says the disk is full from the room left; a tokenizer file's copy that
    fails names no temporary file, nor the source it was copied from."""
    import errno
    import shutil

    import transformers.modeling_utils
    from safetensors import SafetensorError

    from tacl_scale import EXIT_ERROR, export, files

    out = tmp_path / "export"
    export_student(student(0), out, tokenizer_dir, "first")
    earlier = {path.name: path.read_bytes() for path in out.iterdir()}
    capsys.readouterr()  # its "Writing model shards" bar
    said = "No space left on device (the disk is full)"
    if fails.startswith("safetensors"):
        message = "Error while serializing: I/O error: No space left on device (os error 28)"
        if fails == "safetensors-no-errno":
            message, said = "Error while serializing: failed to write", "the disk is full (1 MiB free)"
            monkeypatch.setattr(files, "free_bytes", lambda path: 1 << 20)

        def full(tensors: object, filename: str, metadata: object = None) -> None:
            Path(filename).write_bytes(b"half a shard")
            raise SafetensorError(message)

        monkeypatch.setattr(transformers.modeling_utils, "safe_save_file", full)
    else:
        def full_copy(src: str | os.PathLike, dst: str | os.PathLike, **kwargs: object) -> None:
            Path(dst).write_bytes(b"half")  # shutil names both files, whichever failed
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(src), None, str(dst))

        monkeypatch.setattr(shutil, "copy2", full_copy)
    checkpoint = tmp_path / "checkpoint"
    monkeypatch.setattr(export, "export_checkpoint",
                        lambda ckpt, target: export_student(student(1), target, tokenizer_dir, ckpt))
    assert export.main([str(checkpoint), str(out)]) == EXIT_ERROR
    assert capsys.readouterr().err == f"error: {out}: the export could not be written: {said}\n"
    assert {path.name: path.read_bytes() for path in out.iterdir()} == earlier
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export", "tokenizer"]  # no .export.partial
    assert export.main([str(checkpoint), str(tmp_path / "new")]) == EXIT_ERROR  # none there before: none after
    assert capsys.readouterr().err.startswith(f"error: {tmp_path / 'new'}: the export could not be written: ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export", "tokenizer"]
