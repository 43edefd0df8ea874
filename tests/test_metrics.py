"""A run's metrics.jsonl damaged after a crash (tacl_scale.metrics): a resumed job
and a reader leave the damaged lines out and keep every valid record around them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tacl_scale.metrics import MetricsLogger, drop_after, read_records, step_records
from tacl_scale.run_dir import RunDir

LOGGED = [{"step": 1, "loss": 2.0}, {"event": "eval", "at_step": 1, "loss": 2.1}, {"step": 2, "loss": 1.5},
          {"event": "skipped_update", "after_step": 2, "skipped_steps": 1}, {"step": 3, "loss": 1.25},
          {"step": 4, "loss": 1.0}]
# Not UTF-8 (a lone continuation byte, a cut sequence, 0xff), a newline among them.
GARBAGE = b"\x80\xfe\xff\xc3(\x9f\n\xe2\x82\x00\x00\xf0\x9f"


def lines(records: list[dict]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


@pytest.mark.parametrize("where", ["at the end", "between the records"])
def test_bytes_that_are_not_utf8_are_left_out_like_a_cut_line(tmp_path: Path, where: str) -> None:
    """It was a UnicodeDecodeError (``head -c 300 /dev/urandom >> metrics.jsonl``)."""
    path = tmp_path / "metrics.jsonl"
    data = lines(LOGGED) + GARBAGE if where == "at the end" else lines(LOGGED[:3]) + GARBAGE + b"\n" + lines(LOGGED[3:])
    path.write_bytes(data)
    assert read_records(path) == LOGGED
    assert read_records(str(path)) == LOGGED  # as training.md shows it: a path given as a string
    assert [r["step"] for r in step_records(read_records(path))] == [1, 2, 3, 4]
    drop_after(path, 3)  # a job resumed from step 3's checkpoint
    assert path.read_bytes() == lines(LOGGED[:5])


def test_a_resumed_job_logs_after_a_damaged_tail(tmp_path: Path) -> None:
    """The resume's own path: the logger drops what came after its first step,
    the damaged bytes with it, and appends its steps."""
    run = RunDir(tmp_path)
    run.metrics_file.write_bytes(lines(LOGGED) + GARBAGE)
    logger = MetricsLogger(run, True, total_steps=6, log_every=10, first_step=2)
    logger.log_step(3, {"loss": 1.2, "lr": 1e-3, "samples_per_s": 10.0})
    logger.close()
    assert read_records(run.metrics_file) == [*LOGGED[:3], {"step": 3, "loss": 1.2, "lr": 1e-3, "samples_per_s": 10.0}]
    run.metrics_file.read_bytes().decode("utf-8")  # the file is text again
