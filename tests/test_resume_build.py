"""A dataset build killed part-way and rerun with ``--resume`` reuses the work
units it had completed and writes the same bytes as an uninterrupted build."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import EN_DUMP, EN_VOCAB, ROOT

from tacl_scale import EXIT_ERROR

pytestmark = pytest.mark.slow


def digests(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir()) if p.is_file()}


def build_command(dump: Path, output: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "data_prep.build", "--input", str(dump), "--tokenizer", str(EN_VOCAB),
            "--output", str(output), "--num-shards", "2", "--dupe-factor", "1", "--max-seq-len", "128",
            "--unit-mb", "0.05", "--validation-fraction", "0.1", *extra]


def test_a_killed_build_resumes_byte_identical(tmp_path: Path) -> None:
    from data_prep.multistream import main as multistream_main

    dump = tmp_path / "enwiki-multistream.xml.bz2"
    assert multistream_main([str(EN_DUMP), str(dump), "--pages-per-stream", "10"]) == 0
    # The same output path for both builds: the manifest records it.
    killed = tmp_path / "ds"
    straight = subprocess.run(build_command(dump, killed), cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert straight.returncode == 0, straight.stderr[-3000:]
    killed.rename(tmp_path / "straight")
    units = int(straight.stderr.split(" work unit(s)")[0].rsplit(" ", 1)[-1])
    assert units >= 6

    proc = subprocess.Popen(build_command(dump, killed), cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and len(list((killed / "_tmp").glob("part-*.done.json"))) < 3:
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done = len(list((killed / "_tmp").glob("part-*.done.json")))
    assert 3 <= done < units and not (killed / "manifest.json").exists()

    # Resuming with other settings is refused naming the setting, and the completed parts stay.
    other = subprocess.run(build_command(dump, killed, "--resume", "--seed", "7"), cwd=ROOT, capture_output=True,
                           text=True, timeout=600)
    assert other.returncode == 2, other.stderr[-3000:]
    assert f"--resume: {killed}/_tmp: its parts were made with other settings (seed 12345, this build's is 7)" in (
        other.stderr)
    assert len(list((killed / "_tmp").glob("part-*.done.json"))) == done

    resumed = subprocess.run(build_command(dump, killed, "--resume"), cwd=ROOT, capture_output=True, text=True,
                             timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    log = resumed.stderr
    assert f"resuming: {done} of {units} work unit(s) already done, reading the other {units - done}" in log
    assert log.count("reused ") == done and log.count(" INFO data_prep.pipeline: read ") == units - done
    assert log.count(f"progress: work units {units}/{units} done") == 1
    assert digests(killed) == digests(tmp_path / "straight")  # manifest, shards and validation shards

    finished = subprocess.run(build_command(dump, killed, "--resume"), cwd=ROOT, capture_output=True, text=True,
                              timeout=600)
    assert finished.returncode == 0 and "nothing to resume" in finished.stderr
    assert digests(killed) == digests(tmp_path / "straight")


def test_a_damaged_workspace_is_named_on_resume_and_kept_until_the_build_starts_over(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``: > OUTPUT/_tmp/build.json`` (or a damaged part's marker) and ``--resume``:
    a JSONDecodeError's traceback, exit 1. Now one line naming the file and the way
    out, exit 2, and nothing of the workspace removed; dropping --resume starts over."""
    import data_prep.pipeline
    from data_prep.build import main

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for k in range(3):  # three work units
        (corpus / f"part-{k}.txt").write_text("".join(
            f"Document {k}-{d} is about the river.\nThe river runs past the old mill.\n\n" for d in range(20)))
    out = tmp_path / "ds"
    argv = ["--input", str(corpus / "*.txt"), "--format", "text", "--tokenizer", str(EN_VOCAB), "--output", str(out),
            "--num-shards", "1", "--max-seq-len", "64", "--min-doc-chars", "10", "--dupe-factor", "1", "--quiet",
            "--direct_num_workers", "1"]

    def full_disk(*_: object) -> None:
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patched:  # every unit completes, then the shard stage fails
        patched.setattr(data_prep.pipeline, "build_shard", full_disk)
        assert main(argv) == EXIT_ERROR
    assert "3 of its 3 work unit(s) completed and are kept" in capsys.readouterr().err
    workspace = out / "_tmp"
    markers = sorted(workspace.glob("part-*.done.json"))
    assert len(markers) == 3
    saved = {p.name: p.read_bytes() for p in workspace.iterdir()}

    for damaged in (workspace / "build.json", markers[1]):
        damaged.write_bytes(b"")
        assert main([*argv, "--resume"]) == EXIT_ERROR
        errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
        assert len(errors) == 1 and errors[0].startswith(
            f"error: --resume: {damaged}: unreadable (empty): drop --resume to start over"), errors
        assert {p.name for p in workspace.iterdir()} == set(saved)  # nothing discarded
        assert not (out / "manifest.json").exists()
        damaged.write_bytes(saved[damaged.name])

    markers[1].write_bytes(b"{")
    assert main(argv) == 0  # without --resume: the damaged workspace goes, the build starts over
    assert (out / "manifest.json").is_file() and not workspace.exists()
