"""The build on Beam's DaskRunner: the runner, its defaults, and the settings its
workers should be started with.

Beam's DaskRunner translates a GroupByKey into ``dask.bag.groupby``: a task-based
shuffle whose tasks grow faster than its input partitions (6,838 tasks for the 174
work units of the benchmark's 1 GB build, 44,437 for the 697 of 4 GB, 139,800 for the
English dump's 2,600), every one of them scheduled, run and recorded by the workers,
and whose output partitions keep the shard builds on the workers that hold them (one
worker built three of four shards while the other waited). :func:`runner`'s
DaskRunner translates it with :func:`group_by_key` instead: about two tasks per input
partition, and a shard build per partition that Dask spreads over the workers.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.utils.windowed_value import WindowedValue

from .config import runner_named

if TYPE_CHECKING:  # Dask is an optional extra (tacl-scale[dask]): imported where a Dask build needs it
    import dask.bag as db

NAMES = ("DaskRunner", "dask", "apache_beam.runners.dask.dask_runner.DaskRunner")

# How to start the Dask workers a build runs on (slurm/prep_wiki.sh and the benchmark
# do). Each setting slows a periodic callback of the worker's event loop, which takes
# the GIL from the single thread that builds: on 2 single-threaded workers a 250 MB
# build took 79.8 s with Dask's defaults, 71.0 s with the profiler off and 64.7 s with
# all three (docs/benchmarks.md). Nothing here needs the worker's profile or a
# 20 ms reaction to a blocked event loop. And a worker is one of as many processes as
# cores: Hugging Face tokenizers' own pool of a thread per core would oversubscribe
# them (data_prep.build sets the same for the DirectRunner's worker processes).
WORKER_ENV = {
    "DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED": "False",  # default: a stack sample every 10 ms
    "DASK_DISTRIBUTED__ADMIN__TICK__INTERVAL": "1s",  # default: an event-loop health check every 20 ms
    "DASK_DISTRIBUTED__WORKER__MEMORY__MONITOR_INTERVAL": "1s",  # default: the process's memory every 100 ms
    "TOKENIZERS_PARALLELISM": "false",  # default: a thread per core in each worker process
}

# How many partials one task of group_by_key's tree merges (Dask's own default).
MERGE_FAN_IN = 8

# How long a build waits for --dask_scheduler_file to appear (a scheduler started in the
# same job writes it within seconds); Dask's Client itself waits for it forever.
SCHEDULER_FILE_WAIT_S = 60.0

log = logging.getLogger(__name__)


def scheduler_file_problem(beam_args: list[str], wait_s: float | None = None,
                           sleep: Callable[[float], None] = time.sleep) -> str | None:
    """Why the DaskRunner's ``--dask_scheduler_file`` cannot be used, or None: it is
    not there after ``wait_s`` seconds (a typo, or a scheduler that never started),
    or it is a directory. Without this a build hung, silently, in Dask's wait."""
    options = PipelineOptions(beam_args)
    if options.view_as(StandardOptions).runner not in NAMES:
        return None
    from apache_beam.runners.dask.dask_runner import DaskOptions  # imports Dask: only for a Dask build

    path = options.view_as(DaskOptions).scheduler_file
    if not path:
        return None
    wait_s = SCHEDULER_FILE_WAIT_S if wait_s is None else wait_s
    waited = 0.0
    while not os.path.exists(path) and waited < wait_s:
        if waited == 0.0:
            log.info("waiting up to %.0f s for the Dask scheduler file %s", wait_s, path)
        sleep(0.5)
        waited += 0.5
    if os.path.isdir(path):
        return f"--dask_scheduler_file {path}: a directory; name the file the scheduler writes"
    if not os.path.exists(path):
        return (f"--dask_scheduler_file {path}: not there after {wait_s:.0f} s; start the scheduler with "
                f"'dask scheduler --scheduler-file {path}' (slurm/prep_wiki.sh does), or give its address "
                "with --dask_client_address")
    return None


def worker_settings() -> dict[str, Any]:
    """The settings of :data:`WORKER_ENV` as this process has them (run on each
    Dask worker through ``Client.run``)."""
    import dask
    import dask.distributed  # noqa: F401  (registers the distributed.* defaults read below)
    from dask.utils import parse_timedelta

    return {"profile": bool(dask.config.get("distributed.worker.profile.enabled")),
            "tick_s": parse_timedelta(dask.config.get("distributed.admin.tick.interval")),
            "monitor_s": parse_timedelta(dask.config.get("distributed.worker.memory.monitor-interval")),
            "tokenizer_threads": os.environ.get("TOKENIZERS_PARALLELISM", "").lower() not in ("false", "0", "off")}


def worker_advice(settings: dict[str, dict[str, Any]]) -> str | None:
    """One line when some workers (``settings``: worker address -> what
    :func:`worker_settings` returned there) run with the defaults that
    :data:`WORKER_ENV` changes; None when none do."""
    slow = sorted(address for address, got in settings.items()
                  if got["profile"] or got["tick_s"] < 1 or got["monitor_s"] < 1 or got["tokenizer_threads"])
    if not slow:
        return None
    variables = " ".join(f"{k}={v}" for k, v in WORKER_ENV.items())
    return (f"{len(slow)} of {len(settings)} Dask worker(s) run with Dask's default profiler, tick and memory "
            "monitor (which cost a build about a fifth of its time) or with Hugging Face tokenizers' threads; "
            f"start the workers with {variables} (slurm/prep_wiki.sh does)")


def with_defaults(beam_args: list[str]) -> list[str]:
    """On the DaskRunner, one work unit per Dask partition (its default packs 128
    into one, which leaves all but one worker idle), unless the user chose."""
    joined = " ".join(beam_args)
    dask = runner_named(beam_args) in NAMES
    if dask and "--dask_npartitions" not in joined and "--dask_partition_size" not in joined:
        return [*beam_args, "--dask_partition_size=1"]
    return beam_args


def _key(item: tuple[Any, Any]) -> Any:
    return item[0]


def _append(values: list[Any], item: tuple[Any, Any]) -> list[Any]:
    value = item[1]
    values.append(value.value if isinstance(value, WindowedValue) else value)
    return values


def _join(first: list[Any], second: list[Any]) -> list[Any]:
    return first + second  # new lists: a finished task's result may be read again


def group_by_key(items: db.Bag, npartitions: int | None = None) -> db.Bag:
    """Beam's GroupByKeyOnly on a bag of ``(key, windowed value)``: ``(key, [value,
    ...])`` per key, in ``npartitions`` partitions (default ``items.npartitions``) of
    at most one key each while there are no more keys than partitions.

    Each partition is grouped where it is, the partial groups are merged in a tree
    (:data:`MERGE_FAN_IN` at a time) and the merged groups split into partitions
    again, so that the steps after it (a shard build per key) spread over the
    workers. The merged groups pass through one task: fit for what a GroupByKey
    carries here (a few ``(shard, part)`` pairs per work unit), not for bulk data.
    Each partition is a task of the steps after it, and a Dask worker keeps every task
    it ran, with its arguments, until the computation ends: ``npartitions`` is best
    the number of keys.
    """
    grouped = items.foldby(_key, _append, list, combine=_join, combine_initial=list, split_every=MERGE_FAN_IN)
    return grouped.repartition(npartitions=max(1, npartitions or items.npartitions))


def runner(group_partitions: int | None = None) -> Any:
    """Beam's DaskRunner with :func:`group_by_key` as its GroupByKey, which puts the
    groups into ``group_partitions`` partitions (the build: one per shard; default:
    as many as its input has). With one per work unit, each of the 681 empty
    partitions of a 4 GB build (697 units, 16 shards) ran a task of the shard stage,
    and a worker kept the arguments of each, a copy of the DoFn with the tokenizer's
    replacement ids (118 KB), until the build ended: its memory grew by ~9 MB a shard
    built (135 to 210 MB)."""
    from apache_beam.runners.dask.dask_runner import DaskRunner
    from apache_beam.runners.dask.overrides import _GroupByKeyOnly

    class GroupingDaskRunner(DaskRunner):
        @staticmethod
        def to_dask_bag_visitor(*args: Any, **kwargs: Any) -> Any:
            # Beam's own arguments, whatever they are (bag_kwargs; since Beam 2.78 also
            # lazy_side_inputs, which a visitor taking one argument failed on).
            visitor = DaskRunner.to_dask_bag_visitor(*args, **kwargs)
            translate = visitor.visit_transform

            def visit_transform(node: Any) -> None:
                if type(node.transform) is not _GroupByKeyOnly:
                    translate(node)
                    return
                (pcollection,) = node.inputs
                visitor.bags[node] = group_by_key(visitor.bags[pcollection.producer], group_partitions)

            visitor.visit_transform = visit_transform
            return visitor

    return GroupingDaskRunner()
