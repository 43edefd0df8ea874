"""The driver's own progress lines (data_prep.pipeline.DriverProgress) for runners
whose workers keep their logs (Dask): a Dask build printed no ``progress:`` line,
neither on the console nor in the runner log, because the workers' lines stayed in
the workers. The reporter reads the completion markers the workers leave in
``_tmp/``; here they are made by hand (or by a build whose workers' own lines are
silenced, as Dask's are)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import ZH_TEXT, ZH_VOCAB, build_dataset

from data_prep import pipeline
from data_prep.inputs import WorkUnit
from data_prep.pipeline import DriverProgress
from data_prep.workspace import Workspace


def started_workspace(tmp_path: Path, units: int) -> tuple[Workspace, list[WorkUnit]]:
    planned = [WorkUnit("dump.xml.bz2", "wiki-xml", start, start + 100) for start in range(0, 100 * units, 100)]
    workspace = Workspace(tmp_path)
    workspace.start_run("digest", planned, inputs={}, tokenizer_sha256="0" * 64)
    return workspace, planned


def finish(workspace: Workspace, unit: WorkUnit) -> None:
    workspace.mark_done(workspace.part_prefix(unit), [], {"bytes": 100, "shards": [0], "skips": {}, "documents": 1})


def progress_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage().split(" done")[0] for r in caplog.records if r.getMessage().startswith("progress:")]


def wait_for(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_the_driver_logs_progress_from_the_markers_while_the_workers_run_and_nothing_after_it_stops(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Its thread logs a line for units done since its last (the first at once, then
    one per interval), the stage's last line once, and ends; leaving the block joins
    it and nothing more is logged."""
    workspace, units = started_workspace(tmp_path, 4)
    caplog.set_level(logging.INFO, logger="data_prep.pipeline")
    with DriverProgress(workspace, every_s=0.5, poll_s=0.01) as progress:
        assert progress_lines(caplog) == []  # no unit done yet: nothing to say
        finish(workspace, units[0])
        wait_for(lambda: len(progress_lines(caplog)) == 1)
        finish(workspace, units[1])
        wait_for(lambda: len(progress_lines(caplog)) == 2)  # once the interval has passed
        finish(workspace, units[2])
        finish(workspace, units[3])
        wait_for(lambda: progress.finished)
        thread = progress._thread
        wait_for(lambda: not thread.is_alive())  # the stage is complete: nothing more to report
    assert not thread.is_alive()
    lines = progress_lines(caplog)
    # Units 3 and 4 finish together; only a stall of the interval between the two
    # (a loaded machine) would let a "3/4" line in: allowed, as the thread is right to say it.
    assert lines[:2] == ["progress: work units 1/4", "progress: work units 2/4"], lines
    assert lines[-1] == "progress: work units 4/4" and lines.count(lines[-1]) == 1, lines
    assert set(lines[2:-1]) <= {"progress: work units 3/4"}, lines
    assert not [t for t in threading.enumerate() if t.name == "driver-progress"]


def test_lines_are_at_least_the_interval_apart(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Each line reads every marker: one per PROGRESS_EVERY_S at most, whatever the
    units finishing meanwhile, and the stage's last one."""
    workspace, units = started_workspace(tmp_path, 5)
    clock = [1000.0]
    monkeypatch.setattr(pipeline.time, "monotonic", lambda: clock[0])
    progress = DriverProgress(workspace)  # not started: its checks called here, on the fake clock
    assert progress.every_s == pipeline.PROGRESS_EVERY_S
    caplog.set_level(logging.INFO, logger="data_prep.pipeline")
    for done, unit in enumerate(units, start=1):
        finish(workspace, unit)
        clock[0] += 10 if done != 4 else pipeline.PROGRESS_EVERY_S
        progress.check()
        progress.check()  # nothing new: no second line
    assert progress_lines(caplog) == ["progress: work units 1/5", "progress: work units 4/5",
                                      "progress: work units 5/5"]


def test_a_resumed_build_gets_no_line_for_its_reused_units_but_the_last(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    workspace, units = started_workspace(tmp_path, 3)
    for unit in units:
        finish(workspace, unit)  # all done before the build was resumed
    caplog.set_level(logging.INFO, logger="data_prep.pipeline")
    with DriverProgress(workspace, every_s=0.05, poll_s=0.01) as progress:
        wait_for(lambda: progress.finished)
    assert progress_lines(caplog) == ["progress: work units 3/3"]

    workspace, units = started_workspace(tmp_path / "partly", 3)
    finish(workspace, units[0])  # reused
    caplog.clear()
    with DriverProgress(workspace, every_s=60, poll_s=0.01):
        time.sleep(0.1)
        assert progress_lines(caplog) == []
        finish(workspace, units[1])
        wait_for(lambda: len(progress_lines(caplog)) == 1)
    assert progress_lines(caplog) == ["progress: work units 2/3"]  # the block left before the last unit


def test_a_pipeline_that_ends_between_two_looks_gets_its_last_line_when_the_block_ends(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    workspace, units = started_workspace(tmp_path, 2)
    caplog.set_level(logging.INFO, logger="data_prep.pipeline")
    with DriverProgress(workspace, every_s=600, poll_s=600):
        for unit in units:
            finish(workspace, unit)
    assert progress_lines(caplog) == ["progress: work units 2/2"]


def test_a_failed_or_interrupted_pipeline_gets_no_line_after_it(tmp_path: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    workspace, units = started_workspace(tmp_path, 2)
    caplog.set_level(logging.INFO, logger="data_prep.pipeline")
    for error in (RuntimeError("a worker failed"), KeyboardInterrupt()):
        with pytest.raises(type(error)), DriverProgress(workspace, every_s=600, poll_s=600):
            for unit in units:
                finish(workspace, unit)
            raise error
    assert progress_lines(caplog) == []
    assert not [t for t in threading.enumerate() if t.name == "driver-progress"]


def test_a_vanished_or_unreadable_tmp_never_fails_the_build(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    errors: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: errors.append(args.exc_value))
    workspace, units = started_workspace(tmp_path, 2)
    caplog.set_level(logging.INFO, logger="data_prep.pipeline")
    with DriverProgress(workspace, every_s=0.01, poll_s=0.01) as progress:
        finish(workspace, units[0])
        workspace.remove()  # as a failed build's cleanup, or finalize, removes it
        time.sleep(0.1)
        assert progress._thread.is_alive()
    with DriverProgress(Workspace(tmp_path / "never-made"), every_s=0.01, poll_s=0.01):
        time.sleep(0.05)

    def unreadable() -> str:
        raise FileNotFoundError("a marker removed between the listing and its read")

    workspace, units = started_workspace(tmp_path / "again", 1)
    monkeypatch.setattr(workspace, "progress_line", unreadable)
    with DriverProgress(workspace, every_s=0.01, poll_s=0.01):
        finish(workspace, units[0])
        time.sleep(0.05)
    assert errors == []
    assert [line for line in progress_lines(caplog) if not line.startswith("progress: work units 1/2")] == []


def test_a_build_whose_workers_keep_their_logs_shows_progress_from_the_driver(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """A build on a runner that brings no worker's log record to the driver (Dask's):
    the driver's lines are logged (the stage's last one once), none comes after the
    build's own last lines, and the workers write none: they neither list the
    workspace after each unit nor read its markers (work that no one would see, on
    the shared filesystem, growing with the units: it once ran there as everywhere)."""
    from data_prep import build

    listings = []
    real_all_units_done = Workspace.all_units_done
    monkeypatch.setattr(Workspace, "all_units_done", lambda self: listings.append(1) or real_all_units_done(self))
    monkeypatch.setattr(build, "workers_log_to_driver", lambda options: False)
    monkeypatch.setattr(pipeline, "PROGRESS_EVERY_S", 0.05)
    with caplog.at_level(logging.INFO):
        build_dataset(tmp_path / "out", "--input", str(ZH_TEXT), "--format", "text", "--language", "zh",
                      "--tokenizer", str(ZH_VOCAB), "--num-shards", "2", "--min-doc-chars", "10", "--unit-mb", "0.01")
    lines = progress_lines(caplog)
    units = int(lines[-1].split("/")[1])
    assert units >= 3 and lines[-1] == f"progress: work units {units}/{units}" and lines.count(lines[-1]) == 1
    assert listings == []  # no worker's progress line was even considered
    assert not [t for t in threading.enumerate() if t.name == "driver-progress"]


def test_the_direct_runner_brings_its_workers_lines_so_the_driver_says_none() -> None:
    from apache_beam.options.pipeline_options import PipelineOptions

    from data_prep.build import workers_log_to_driver

    assert workers_log_to_driver(PipelineOptions([]))
    assert workers_log_to_driver(PipelineOptions(["--runner", "DirectRunner", "--direct_num_workers", "2"]))
    assert not workers_log_to_driver(PipelineOptions(["--runner", "DaskRunner"]))
    assert not workers_log_to_driver(PipelineOptions(["--runner", "FlinkRunner"]))
