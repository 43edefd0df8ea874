"""The Apache Beam pipeline: a thin layer that distributes the plain functions of
``sources``, ``documents``, ``spill`` and ``shards`` over a runner (DirectRunner,
DaskRunner; Flink or Spark on a shared filesystem — unchanged code).

    work units ─Reshuffle─▶ PrepareDocuments ──(shard key, spill part)──▶ GroupByKey ─▶ BuildShard

It uses only what every runner translates the same way: Create, Reshuffle, ParDos
with one output, GroupByKey; no tagged outputs, side inputs or combiners (the
DaskRunner, for one, merges a ParDo's tagged outputs into its main output). What
the steps report travels through the shared temporary directory instead: each work
unit's completion marker holds its skip counts (:mod:`data_prep.workspace`) and each
shard's manifest entry is written to ``_tmp/entries/``. After the pipeline,
:func:`data_prep.shards.finalize` runs in the driver: it fills in empty shards,
removes the temporary directory and writes ``manifest.json`` last.

Shards are keyed: training shards ``0 .. N-1`` and, with ``--validation-fraction``,
validation shards after them (``OutputConfig.shard_keys``), so a validation
document is grouped, paired and masked only with other validation documents.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apache_beam as beam
import numpy as np
from apache_beam.metrics import Metrics

from tacl_scale.data.manifest import shard_name

from .config import BuildConfig
from .documents import DocumentProcessor, shard_key
from .inputs import ReadProgress, WorkUnit
from .shards import TokenizerFacts, build_shard
from .sources import read_records
from .spill import SpillWriter
from .workspace import Workspace, unit_bytes, writing

log = logging.getLogger(__name__)
METRICS_NAMESPACE = "data_prep"


# One DocumentProcessor per worker thread, kept across bundles: the DaskRunner calls
# setup() for every bundle (a Dask partition) on a fresh copy of the DoFn, which
# would start each work unit with an empty word cache (see data_prep.tokenization).
_THREAD_PROCESSOR = threading.local()


def _thread_processor(config: BuildConfig) -> DocumentProcessor:
    """This thread's processor for ``config`` (built on first use)."""
    processor = getattr(_THREAD_PROCESSOR, "processor", None)
    if processor is None or processor.config != config:
        processor = _THREAD_PROCESSOR.processor = DocumentProcessor(config)
    return processor


# A progress line reads every unit's completion marker, so one per unit would read
# units²/2 markers over a build (3.4 million for the English dump's 2,600 units, each
# a file on the shared file system): a worker thread writes one at most every
# PROGRESS_EVERY_S seconds, and whichever unit first finds the stage complete writes
# the last, once. A unit a resumed build reuses writes none but that last one: the
# build said how many it reuses, and a line per reused unit said the same again.
PROGRESS_EVERY_S = 30.0
_THREAD_PROGRESS = threading.local()


def _log_progress(workspace: Workspace, reused: bool = False) -> None:
    """The build-wide progress line, when this thread's last is PROGRESS_EVERY_S old
    (or it has none yet) and the unit was read (not ``reused``), or once when every
    work unit is done."""
    now = time.monotonic()
    if workspace.all_units_done():
        if not workspace.claim_last_progress():
            return  # another unit wrote the last line
    else:
        last = getattr(_THREAD_PROGRESS, "logged_at", None)
        if reused or (last is not None and now - last < PROGRESS_EVERY_S):
            return
    _THREAD_PROGRESS.logged_at = now
    log.info("progress: %s", workspace.progress_line())


# How often the driver's reporter looks at the markers' directory (a listing, no
# marker read) for a unit done since its last line or for the end of the stage.
DRIVER_POLL_S = 1.0


class DriverProgress:
    """The build-wide progress line, logged by the driver from the markers in
    ``_tmp/``, for runners whose workers' logs stay with them (Dask, Flink, Spark):
    there a worker's :func:`_log_progress` line never reached the console or the
    runner log. On the DirectRunner the workers' lines reach the driver; this is not
    used there, so that nothing is said twice.

    A context manager around the pipeline's run: a daemon thread that looks every
    ``poll_s`` seconds and logs a line when a unit was done since its last one and
    that was ``every_s`` (default :data:`PROGRESS_EVERY_S`) ago or more (or it has
    none yet), and the stage's last line once, when every unit is done, then ends.
    Units already done when it starts (a resumed build's reused ones) get no line but
    that last. Leaving the block stops and joins the thread; a block left without an
    error also logs the last line if the thread had not yet; one left by an error or
    Ctrl-C logs nothing more. Reading the markers never fails the build."""

    def __init__(self, workspace: Workspace, every_s: float | None = None, poll_s: float | None = None) -> None:
        self.workspace = workspace
        self.every_s = PROGRESS_EVERY_S if every_s is None else every_s
        self.poll_s = min(DRIVER_POLL_S if poll_s is None else poll_s, self.every_s)
        self.finished = False  # the stage's last line is said
        self._last_done = 0
        self._logged_at: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="driver-progress", daemon=True)

    def __enter__(self) -> DriverProgress:
        counted = self._count()
        self._last_done = counted[0] if counted is not None else 0
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: Any) -> None:
        self._stop.set()
        self._thread.join()
        if exc_type is None:  # the pipeline has ended: its last line if the thread had not said it
            self.check(last_only=True)

    def _count(self) -> tuple[int, int] | None:
        # A _tmp/ that is gone (the build failed and removed it, or finished) or a
        # shared file system that fails a listing: no line, never an error.
        try:
            return self.workspace.units_done()
        except (OSError, ValueError, KeyError):
            return None

    def _watch(self) -> None:
        while not self.finished and not self._stop.wait(self.poll_s):
            self.check()

    def check(self, last_only: bool = False) -> None:
        """Log the progress line if it is due (see the class docstring);
        ``last_only``: only the stage's last one."""
        if self.finished or (counted := self._count()) is None:
            return
        done, units = counted
        now = time.monotonic()
        last = done >= units
        due = done > self._last_done and (self._logged_at is None or now - self._logged_at >= self.every_s)
        if not (last or (due and not last_only)):
            return
        try:
            line = self.workspace.progress_line()
        except (OSError, ValueError, KeyError):  # as in _count: a marker read as _tmp/ goes
            return
        self.finished, self._last_done, self._logged_at = last, done, now
        log.info("progress: %s", line)


@dataclass
class UnitTotals:
    """What one work unit came to (its completion marker holds it)."""

    documents: int = 0
    chars: int = 0
    tokens: int = 0
    unk_tokens: int = 0  # [UNK] among the tokens: a vocabulary that does not fit the text
    skips: dict[str, int] = field(default_factory=dict)  # records skipped, by kind


def spill_unit(unit: WorkUnit, processor: DocumentProcessor, facts: TokenizerFacts, workspace: Workspace,
               on_skip: Callable[[str], None] = lambda kind: None) -> tuple[list[int], UnitTotals]:
    """Read ``unit``, clean, split and tokenize its documents (``processor``), spill
    them to the unit's one part file and mark it done with its totals: the shards it
    touched, and those totals. ``on_skip`` hears of each skipped record as it is
    counted. A failure removes this attempt's files (never a part another attempt of
    the unit finished), so nothing half-written is left for a resumed build to take."""
    prefix = workspace.part_prefix(unit)
    totals = UnitTotals()

    def count_skip(kind: str) -> None:
        totals.skips[kind] = totals.skips.get(kind, 0) + 1
        on_skip(kind)

    started = last_report = time.monotonic()
    progress = ReadProgress(unit)
    records = read_records(unit, count_skip, progress)
    with writing(prefix):
        spill = SpillWriter(workspace.root, facts.token_dtype, prefix)
    unk_id = facts.special_ids.unk
    try:
        for record in records:
            if (now := time.monotonic()) - last_report > 30:
                last_report = now
                done = max(progress.fraction, 1e-6)
                log.info("reading %s: %.0f%% (%d documents, %.2f MB/s of input), ETA %.0f s", unit.describe(),
                         100 * done, totals.documents, done * progress.total / 1e6 / (now - started),
                         (now - started) * (1 - done) / done)
            document = processor(record, count_skip)
            if document is None:
                continue
            with writing(prefix):
                spill.add(shard_key(document.doc_id, processor.config.output), document)
            ids = np.concatenate([sentence.ids for sentence in document.sentences])
            totals.documents += 1
            totals.chars += document.num_chars
            totals.tokens += len(ids)
            totals.unk_tokens += int(np.count_nonzero(ids == unk_id))
    except BaseException:
        spill.abort()
        raise
    shards = sorted(spill.shards)
    with writing(prefix):
        spill.close()
        workspace.mark_done(prefix, spill.files, {"unit": unit.describe(), "bytes": unit_bytes(unit),
                                                  "shards": shards, "skips": totals.skips,
                                                  "documents": totals.documents, "tokens": totals.tokens,
                                                  "unk_tokens": totals.unk_tokens})
    return shards, totals


def _count_skip_metric(kind: str) -> None:
    Metrics.counter(METRICS_NAMESPACE, f"skipped_{kind}").inc()


class PrepareDocuments(beam.DoFn):
    """Read one work unit, clean, split and tokenize its documents, and spill them
    to one part file (:func:`spill_unit`); emit ``(shard, part prefix)`` for each
    shard it touches. Its skip counts, and its documents' tokens and ``[UNK]`` tokens
    (``tokens``, ``unk_tokens``: a vocabulary that does not fit the text, see
    :func:`data_prep.shards.unknown_token_warnings`), go into the unit's completion
    marker (:mod:`data_prep.workspace`); a unit already marked done (a resumed
    build) is not read again.

    ``worker_progress``: whether the workers write the build-wide progress line
    (:func:`_log_progress`), as on the DirectRunner, whose workers' log records reach
    the driver. Elsewhere (Dask, Flink, Spark) the driver writes it
    (:class:`DriverProgress`) and the workers' would reach no one: they list the
    workspace after every unit and read every marker for each line, work on the
    shared filesystem that grows with the units and that no one would see."""

    def __init__(self, config: BuildConfig, facts: TokenizerFacts, worker_progress: bool = True) -> None:
        self.config = config
        self.facts = facts
        self.worker_progress = worker_progress

    def setup(self) -> None:
        _thread_processor(self.config)  # the tokenizer loaded before the first unit

    def process(self, unit: WorkUnit) -> Iterator[Any]:
        workspace = Workspace(self.config.output.directory)
        prefix = workspace.part_prefix(unit)
        done = workspace.marker(prefix)
        if done is not None:  # completed before this (resumed) build started
            log.info("reused %s: completed before the build was resumed (%d documents)", unit.describe(),
                     done["documents"])
            for kind, count in done["skips"].items():
                Metrics.counter(METRICS_NAMESPACE, f"skipped_{kind}").inc(count)
            yield from self._emit(str(prefix), done["shards"], done["documents"], workspace, reused=True)
            return
        started = time.monotonic()
        # The processing thread's own (its word cache is not thread-safe): Beam's SDK harness
        # may call setup() on one thread for DoFns whose bundles then run on several.
        shards, totals = spill_unit(unit, _thread_processor(self.config), self.facts, workspace, _count_skip_metric)
        elapsed = time.monotonic() - started
        log.info("read %s: %d documents, %.1f MB of text in %.1f s (%.2f MB/s)", unit.describe(), totals.documents,
                 totals.chars / 1e6, elapsed, totals.chars / 1e6 / max(elapsed, 1e-9))
        yield from self._emit(str(prefix), shards, totals.documents, workspace)

    def _emit(self, prefix: str, shards: list[int], documents: int, workspace: Workspace,
              reused: bool = False) -> Iterator[Any]:
        """A unit's outputs (the same whether it was read now or ``reused``; its skip
        counts are in its marker), and the build-wide progress line."""
        Metrics.counter(METRICS_NAMESPACE, "documents").inc(documents)
        if self.worker_progress:
            _log_progress(workspace, reused)
        for shard in shards:
            yield (shard, prefix)


class BuildShard(beam.DoFn):
    """Build one shard from the spill parts holding its documents; its manifest
    entry goes to ``_tmp/entries/`` for :func:`data_prep.shards.finalize`."""

    def __init__(self, config: BuildConfig, facts: TokenizerFacts) -> None:
        self.config = config
        self.facts = facts

    def process(self, element: tuple[int, Any]) -> Iterator[int]:
        shard, prefixes = element
        started = time.monotonic()
        workspace = Workspace(self.config.output.directory)
        split, index = self.config.output.split_of_key(shard)
        with writing(Path(self.config.output.directory) / shard_name(index, split)):
            entry = build_shard(shard, list(prefixes), self.config, self.facts)
            workspace.write_entry(entry)
        Metrics.counter(METRICS_NAMESPACE, "instances").inc(entry.counts.instances)
        log.info("built %s: %d documents, %d instances in %.1f s", entry.name, entry.counts.documents,
                 entry.counts.instances, time.monotonic() - started)
        yield shard


def build_pipeline(pipeline: beam.Pipeline, units: list[WorkUnit], config: BuildConfig,
                   facts: TokenizerFacts, worker_progress: bool = True) -> beam.PCollection:
    """Attach stages 1 and 2 of the build to ``pipeline`` (run
    :func:`data_prep.shards.finalize` once it has finished); ``worker_progress`` as
    :class:`PrepareDocuments` takes it."""
    return (
        pipeline
        | "WorkUnits" >> beam.Create(units)
        # Spread the units over workers (Create would keep them in one bundle).
        | "Distribute" >> beam.Reshuffle()
        | "PrepareDocuments" >> beam.ParDo(PrepareDocuments(config, facts, worker_progress))
        | "GroupPartsByShard" >> beam.GroupByKey()
        | "BuildShard" >> beam.ParDo(BuildShard(config, facts))
    )
