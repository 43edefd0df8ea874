"""The DaskRunner's translation of a GroupByKey (data_prep.dask_runner.group_by_key),
computed with Dask's synchronous scheduler: what it groups, how it partitions, and
how many tasks it costs beside Dask's own groupby. (tests/test_dask.py runs whole
builds on a real Dask cluster.)"""

from __future__ import annotations

from pathlib import Path

import dask
import dask.bag as db
import pytest
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.windowed_value import WindowedValue

from data_prep.dask_runner import group_by_key, scheduler_file_problem, with_defaults


def windowed(pairs: list[tuple[int, str]]) -> list[tuple[int, WindowedValue]]:
    """Items as Beam's GroupByKeyOnly receives them on the DaskRunner."""
    return [(key, WindowedValue(value, 0, (GlobalWindow(),))) for key, value in pairs]


def computed_partitions(bag: db.Bag) -> list[list[tuple[int, list[str]]]]:
    with dask.config.set(scheduler="sync"):
        return [list(part) for part in dask.compute(*bag.to_delayed())]


@pytest.mark.parametrize("units", [1, 7, 40])
def test_every_value_is_grouped_once_under_its_key(units: int) -> None:
    pairs = [(unit * 3 % 5, f"part-{unit}-{copy}") for unit in range(units) for copy in range(2)]
    partitions = computed_partitions(group_by_key(db.from_sequence(windowed(pairs), partition_size=2)))
    groups = [group for part in partitions for group in part]
    assert sorted(key for key, _ in groups) == sorted({key for key, _ in pairs})  # each key once
    assert {key: sorted(values) for key, values in groups} == {
        key: sorted(value for k, value in pairs if k == key) for key in {k for k, _ in pairs}}


def test_the_groups_are_spread_one_per_partition() -> None:
    """As many partitions as the input had, at most one key in each while there are
    fewer keys than partitions: each shard build is a task of its own."""
    pairs = [(unit % 16, f"part-{unit}") for unit in range(64)]
    grouped = group_by_key(db.from_sequence(windowed(pairs), partition_size=1))
    partitions = computed_partitions(grouped)
    assert len(partitions) == grouped.npartitions == 64
    assert sorted(len(part) for part in partitions) == [0] * 48 + [1] * 16


def test_the_groups_go_into_as_many_partitions_as_asked() -> None:
    """The build asks for one partition per shard: each partition is a task of the
    shard stage, and a Dask worker keeps every task's arguments (the DoFn, with the
    tokenizer's replacement ids) until the build ends, so 697 partitions for 16
    shards grew a worker by ~9 MB a shard."""
    pairs = [(unit % 16, f"part-{unit}") for unit in range(697)]
    grouped = group_by_key(db.from_sequence(windowed(pairs), partition_size=1), npartitions=16)
    partitions = computed_partitions(grouped)
    assert len(partitions) == grouped.npartitions == 16
    assert sorted(key for part in partitions for key, _ in part) == list(range(16))
    assert all(len(part) == 1 for part in partitions)
    # Fewer keys than partitions (shards no document went to): some stay empty.
    few = computed_partitions(group_by_key(db.from_sequence(windowed(pairs[:3]), partition_size=1), npartitions=16))
    assert len(few) == 16 and sum(len(part) for part in few) == 3


def test_the_dask_runner_groups_into_the_partitions_it_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    """runner(group_partitions) is what data_prep.build passes the shard count to."""
    from apache_beam.runners.dask.overrides import _GroupByKeyOnly

    import data_prep.dask_runner as module

    asked: list[int | None] = []
    real = module.group_by_key

    def recording(items, npartitions=None):
        asked.append(npartitions)
        return real(items, npartitions)

    class Node:  # what Beam's pipeline visitor hands the translation
        transform = _GroupByKeyOnly()

        class Input:
            producer = "upstream"

        inputs = (Input(),)

    visitor = module.runner(group_partitions=5).to_dask_bag_visitor()
    visitor.bags["upstream"] = db.from_sequence(windowed([(1, "a"), (2, "b")]), partition_size=1)
    monkeypatch.setattr(module, "group_by_key", recording)
    visitor.visit_transform(Node)
    assert asked == [5]
    assert visitor.bags[Node].npartitions == 5


@pytest.mark.parametrize("units", [174, 697])
def test_tasks_per_work_unit_stay_few_where_dasks_groupby_takes_forty_and_more(units: int) -> None:
    """The reason for the translation: Dask's task shuffle costs 39 tasks per input
    partition at 174 (a 1 GB build's work units), 64 at 697 (4 GB), each one
    scheduled and recorded by the workers."""
    items = db.from_sequence(windowed([(unit % 16, f"part-{unit}") for unit in range(units)]), partition_size=1)
    ours = len(dict(group_by_key(items).__dask_graph__())) - units  # without the input's own tasks
    dasks = len(dict(items.groupby(lambda item: item[0], shuffle="tasks").__dask_graph__())) - units
    assert ours <= 2.5 * units, ours
    assert dasks >= 35 * units, dasks


def test_the_dask_runner_gets_one_work_unit_per_partition_unless_the_user_chose() -> None:
    assert with_defaults(["--runner", "DaskRunner"]) == ["--runner", "DaskRunner", "--dask_partition_size=1"]
    assert with_defaults(["--runner=DaskRunner", "--dask_npartitions", "8"]) == [
        "--runner=DaskRunner", "--dask_npartitions", "8"]
    assert with_defaults(["--direct_num_workers", "2"]) == ["--direct_num_workers", "2"]


def test_a_scheduler_file_that_never_appears_is_refused_after_the_wait(tmp_path: Path) -> None:
    """Dask's Client waits for --dask_scheduler_file forever: a typo hung the build."""
    missing = tmp_path / "scheduler.json"
    slept: list[float] = []
    args = ["--runner", "DaskRunner", "--dask_scheduler_file", str(missing)]
    problem = scheduler_file_problem(args, wait_s=2, sleep=slept.append)
    assert problem is not None and problem.startswith(f"--dask_scheduler_file {missing}: not there after 2 s; ")
    assert f"dask scheduler --scheduler-file {missing}" in problem and sum(slept) == 2
    assert scheduler_file_problem(["--runner=DaskRunner", f"--dask_scheduler_file={missing}"], wait_s=0) is not None
    assert scheduler_file_problem(["--dask_scheduler_file", str(missing)], wait_s=0) is None  # not the DaskRunner
    assert "a directory" in scheduler_file_problem(["--runner", "DaskRunner", "--dask_scheduler_file",
                                                    str(tmp_path)], wait_s=0)


def test_a_scheduler_file_written_while_the_build_waits_is_taken(tmp_path: Path) -> None:
    written = tmp_path / "scheduler.json"

    def the_scheduler_starts(seconds: float) -> None:
        written.write_text('{"address": "tcp://127.0.0.1:8786"}')

    args = ["--runner", "DaskRunner", "--dask_scheduler_file", str(written)]
    assert scheduler_file_problem(args, wait_s=60, sleep=the_scheduler_starts) is None


@pytest.mark.slow
def test_the_build_refuses_a_missing_scheduler_file_before_it_writes(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from conftest import EN_DUMP, EN_VOCAB

    from data_prep import dask_runner
    from data_prep.build import BuildError, parse_args, run_build

    monkeypatch.setattr(dask_runner, "SCHEDULER_FILE_WAIT_S", 1.0)
    missing = tmp_path / "scheduler.json"
    command = parse_args(["--input", str(EN_DUMP), "--tokenizer", str(EN_VOCAB), "--output", str(tmp_path / "ds"),
                          "--runner", "DaskRunner", "--dask_scheduler_file", str(missing)])
    with pytest.raises(BuildError, match=f"--dask_scheduler_file {missing}: not there after 1 s"):
        run_build(command.config, command.beam_args)
    assert sorted(tmp_path.iterdir()) == []
