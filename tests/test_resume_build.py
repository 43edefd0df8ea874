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
