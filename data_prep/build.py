"""``python -m data_prep.build``: build a sharded, masked, memory-mapped
pre-training dataset from Wikipedia dumps, plain text or WikiExtractor JSON.

Options this parser does not know are Beam pipeline options and go to the runner
unchanged (``--runner FlinkRunner --flink_master ...``, ``--direct_num_workers 4``).
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import logging
import math
import os
import re
import shutil
import signal
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tacl_scale import EXIT_ERROR, EXIT_INTERRUPTED
from tacl_scale.cli import make_parser
from tacl_scale.data.indexed import IndexedFormatError
from tacl_scale.data.manifest import (
    MANIFEST_NAME,
    DatasetError,
    FileRecord,
    Manifest,
    flat_settings,
)
from tacl_scale.data.masking import MaskingConfig
from tacl_scale.files import output_directory_problem
from tacl_scale.locking import LOCK_NAME, DirectoryLock, LockedError, holder
from tacl_scale.markers import EXPORT_MARKER, MODEL_CONFIG, RUN_FILE, container_problem, marked_as
from tacl_scale.preemption import CtrlC

from .build_log import build_logging
from .config import (
    SHARD_INPUT_BYTES,
    BuildConfig,
    CleaningConfig,
    InputConfig,
    OutputConfig,
    add_cleaning_arguments,
    auto_num_shards,
    estimated_input_bytes,
    runner_named,
)
from .inputs import (
    FORMATS,
    InputError,
    WorkUnit,
    check_format,
    expand_inputs,
    output_among_inputs,
    plan_work_units,
)
from .instances import InstanceConfig
from .replace import recover_swap, staging_directory, swap_in
from .sentences import SentenceConfig
from .shards import EmptyDatasetError, FinalizeInputs, TokenizerFacts
from .tokenization import (
    PretrainTokenizer,
    TokenizerConfig,
    TokenizerError,
    load_tokenizer,
    no_lowercase_problem,
)
from .workspace import (
    TMP_DIR_NAME,
    OutputError,
    Workspace,
    WorkspaceError,
    describe_os_error,
    determining_settings,
    fingerprint,
    first_changed_setting,
    input_stats,
    is_build_file,
    remove_build_files,
    writing,
)

# A path given as a URL (gs://, s3://, hdfs://, file://): refused, see parse_args.
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
log = logging.getLogger("data_prep.build")


class BuildError(RuntimeError):
    """A build refused to start or failed; the message says why."""


@dataclass(frozen=True)
class CommandLine:
    """The parsed command line: the build, the Beam options, and logging."""

    config: BuildConfig
    beam_args: list[str]
    quiet: bool = False
    resume: bool = False
    verbose: bool = False


def parse_args(argv: list[str] | None = None) -> CommandLine:
    """CLI → :class:`CommandLine` (unknown options are Beam pipeline options)."""
    p = make_parser("python -m data_prep.build", __doc__)
    io = p.add_argument_group("input and output")
    io.add_argument("--input", action="extend", nargs="+", required=True, metavar="GLOB",
                    help="input files or globs (quoted, the command expands a glob itself; unquoted, the shell "
                    "does: both work); repeatable")
    io.add_argument("--format", choices=FORMATS, default=InputConfig.format,
                    help="wiki-xml: MediaWiki dump (.xml, .xml.bz2, multistream); text: one "
                    "sentence a line, blank line between documents; lines: one string a line, each its own "
                    "document (a sentence list, as Mirror-BERT/SimCSE train on); wikiextractor-json: "
                    "WikiExtractor --json output")
    io.add_argument("--output", required=True, metavar="DIR", help="dataset directory")
    io.add_argument("--num-shards", type=int, default=None,
                    help="output shards; random B segments are drawn from the documents of the same shard, "
                    "so keep at least a few hundred documents a shard (default: one per 256 MB of uncompressed "
                    "input, estimated from the files' sizes; the summary says how many)")
    io.add_argument("--validation-fraction", type=float, default=OutputConfig.validation_fraction, metavar="F",
                    help="share of documents (by a stable hash of their id) held out as a validation split, "
                    "built among themselves into validation-NNNNN files (0: none)")
    io.add_argument("--validation-shards", type=int, default=OutputConfig.validation_shards,
                    help="shards of the validation split")
    io.add_argument("--overwrite", action="store_true",
                    help="replace an existing dataset in --output")
    io.add_argument("--resume", action="store_true",
                    help="continue a build of the same command that was killed: work units it completed are "
                    "reused, the output is byte-identical to an uninterrupted build")
    io.add_argument("--no-multistream-index", action="store_true",
                    help="read a multistream dump as one unit even if its -index.txt.bz2 is beside it")
    io.add_argument("--unit-mb", type=float, default=InputConfig.unit_bytes / (1 << 20),
                    help="MiB per unit of parallel work: compressed MiB of a multistream dump, MiB of whole "
                    "lines of an uncompressed text, lines or wikiextractor-json file")
    text = p.add_argument_group("text")
    text.add_argument("--language", choices=("en", "zh"), default=SentenceConfig.language,
                      help="the text's language: sentence splitting, and Chinese word boundaries")
    add_cleaning_arguments(text)
    text.add_argument("--zh-segmenter", choices=("jieba", "pre-segmented"), default=CleaningConfig.zh_segmenter,
                      help="Chinese word boundaries for --whole-word-masking")
    tok = p.add_argument_group("tokenizer")
    tok.add_argument("--tokenizer", required=True, metavar="PATH",
                     help="WordPiece vocab.txt, HF tokenizer/model directory, or SentencePiece .model")
    case = tok.add_mutually_exclusive_group()
    case.add_argument("--lowercase", dest="lowercase", action="store_true", default=None,
                      help="lower-case before WordPiece (default: inferred from the vocabulary)")
    case.add_argument("--no-lowercase", dest="lowercase", action="store_false", default=None,
                      help="keep case (a cased vocabulary)")
    inst = p.add_argument_group("instances and masking")
    inst.add_argument("--max-seq-len", type=int, default=InstanceConfig.max_seq_len,
                      help="tokens of an instance, [CLS] and [SEP]s included")
    inst.add_argument("--short-seq-prob", type=float, default=InstanceConfig.short_seq_prob,
                      help="share of instances given a shorter, random target length (as google-research/bert)")
    inst.add_argument("--masked-lm-prob", type=float, default=MaskingConfig.masked_lm_prob,
                      help="share of an instance's tokens chosen for MLM (80%% [MASK], 10%% random, 10%% kept)")
    inst.add_argument("--max-predictions-per-seq", type=int, default=None,
                      help="default: ceil(max_seq_len * masked_lm_prob)")
    inst.add_argument("--dupe-factor", type=int, default=None,
                      help=f"copies of the data with different masks and pairings (default: "
                      f"{BuildConfig.dupe_factor}; 1 with --single-segment)")
    inst.add_argument("--single-segment", action="store_true",
                      help="every sentence alone as [CLS] sentence [SEP]: no NSP pairs and no static masks, for "
                      "train.py --objectives mirror (Mirror-BERT/SimCSE)")
    inst.add_argument("--whole-word-masking", action="store_true",
                      help="mask every piece of a chosen word together (Chinese: words by --zh-segmenter)")
    inst.add_argument("--seed", type=int, default=BuildConfig.seed,
                      help="seeds the pairings and masks (the same seed and input give the same bytes)")
    chatter = p.add_mutually_exclusive_group()
    chatter.add_argument("--quiet", action="store_true", help="print warnings and the summary only")
    chatter.add_argument("--verbose", action="store_true",
                         help="print the runner's and its workers' logs too (by default they go to "
                         "OUTPUT.build.log beside the output)")
    args, beam_args = p.parse_known_args(argv)
    if problem := beam_args_problem(beam_args, p):
        p.error(problem)
    if (runner := runner_named(beam_args)) and runner.lower().rsplit(".", 1)[-1] in ("dataflowrunner", "dataflow"):
        p.error(f"--runner {runner}: not supported: the build's workers read and write through file paths the "
                "driver sees too (a shared filesystem with atomic renames and locks), which Dataflow's workers "
                "do not have (docs/data-prep.md, Other runners)")
    if args.single_segment and args.dupe_factor not in (None, 1):
        p.error(f"--single-segment writes no masks or pairings, so --dupe-factor {args.dupe_factor} would write "
                "identical copies: leave it at 1 (the trainer's epochs repeat the data)")
    for flag, paths in (("--input", args.input), ("--tokenizer", [args.tokenizer]), ("--output", [args.output])):
        if url := next((path for path in paths if _URL.match(path)), None):
            # abspath made gs://b/ds a folder ./gs:/b/ds on local disk, silently.
            p.error(f"{flag} {url}: a URL; the build reads and writes file paths that every worker sees at "
                    "the same path (a local disk, a shared mount), not object stores")
    if not math.isfinite(args.unit_mb):  # no whole number of bytes (int() raised OverflowError)
        p.error(f"--unit-mb must be > 0 (a unit of at least one byte), got {args.unit_mb}")
    dupe_factor = args.dupe_factor if args.dupe_factor is not None else (
        1 if args.single_segment else BuildConfig.dupe_factor)

    try:
        config = BuildConfig(
            input=InputConfig(
                patterns=tuple(args.input),
                format=args.format,
                use_multistream_index=not args.no_multistream_index,
                unit_bytes=int(args.unit_mb * (1 << 20)),
            ),
            # Absolute: every worker loads it again, from its own working directory.
            tokenizer=TokenizerConfig(os.path.abspath(os.path.expanduser(args.tokenizer)), args.lowercase),
            output=OutputConfig(os.path.abspath(args.output), 1 if args.num_shards is None else args.num_shards,
                                args.overwrite, args.validation_fraction, args.validation_shards,
                                auto_shards=args.num_shards is None),
            sentences=SentenceConfig(args.language, args.traditional_to_simplified),
            cleaning=CleaningConfig.for_format(args.format, args.min_doc_chars, args.zh_segmenter),
            instances=InstanceConfig(args.max_seq_len, args.short_seq_prob, single_segment=args.single_segment),
            masking=MaskingConfig(
                masked_lm_prob=args.masked_lm_prob,
                max_predictions_per_seq=args.max_predictions_per_seq,
                whole_word_masking=args.whole_word_masking,
            ),
            dupe_factor=dupe_factor,
            seed=args.seed,
        )
    except ValueError as err:
        p.error(str(err))
    return CommandLine(config, beam_args, args.quiet, args.resume, args.verbose)


def beam_args_problem(beam_args: list[str], parser: argparse.ArgumentParser) -> str | None:
    """Why ``beam_args`` (what this command's ``parser`` left over) holds something
    that is no Beam pipeline option either, in words naming it, or None. Beam drops
    what it cannot parse with a warning in the runner log only, so a mistyped option
    (``--num_shards 8``) built a dataset without it."""
    if not beam_args:
        return None
    # Before the build's logging is set up: a module-level logging.warning() of Beam's
    # (its BigQuery client's "apitools not found") would print on the console and give
    # the root logger a console handler for good.
    root, mute = logging.getLogger(), logging.NullHandler()
    root.addHandler(mute)
    try:
        from apache_beam.options import pipeline_options

        if any("dask" in arg.lower() for arg in beam_args):
            # Its DaskOptions join Beam's options only once imported; without Dask, the
            # DaskRunner's own refusal says what to install.
            with contextlib.suppress(ImportError):
                import apache_beam.runners.dask.dask_runner  # noqa: F401
    finally:
        root.removeHandler(mute)
    try:  # Beam's parser of every option, as PipelineOptions.get_all_options builds it (private API)
        beams = pipeline_options._BeamArgumentParser(allow_abbrev=False)
        for options in {str(cls): cls for cls in pipeline_options.PipelineOptions.__subclasses__()}.values():
            options._add_argparse_args(beams)
    except AttributeError:  # another Beam: the options go unchecked, as Beam itself leaves them
        return None
    _, unknown = beams.parse_known_args(beam_args)
    if not unknown:
        return None
    name = unknown[0].split("=", 1)[0]
    if not name.startswith("-"):
        return f"{name!r}: an argument that follows no option taking it"
    flags = [*parser._option_string_actions, *beams._option_string_actions]
    close = difflib.get_close_matches(name, flags, n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return f"{name}: neither an option of this command nor a Beam pipeline option{hint}"


def _prepare_output(config: BuildConfig, units: list[WorkUnit], resume: bool, tokenizer_sha256: str) -> None:
    """Refuse to touch an existing dataset or a directory of other files unless
    ``overwrite``; an old dataset is made unreadable first (its manifest goes first).
    Leftovers of an unfinished build (no manifest) are cleared, except, with
    ``resume``, the work units it completed (see :mod:`data_prep.workspace`). Files
    that are not ours are never removed."""
    directory = Path(config.output.directory)
    manifest = directory / MANIFEST_NAME
    workspace = Workspace(directory)
    settings, inputs = determining_settings(config.to_dict()), input_stats(units)
    digest = fingerprint(config.to_dict(), units)
    if resume and workspace.exists():
        problem = workspace.resume_problem(digest, inputs, tokenizer_sha256, settings,
                                      legacy_digest=fingerprint(config.to_dict(), units, legacy=True))
        if problem is not None:
            raise BuildError(f"--resume: {problem}")
        try:
            kept, removed = workspace.discard_incomplete()
        except WorkspaceError as err:  # a damaged marker: nothing was removed
            raise BuildError(f"--resume: {err}") from err
        remove_build_files(directory, keep=(TMP_DIR_NAME, LOCK_NAME))  # shards of the interrupted run are rebuilt
        log.info("resuming: %d of %d work unit(s) already done, reading the other %d (%d incomplete file(s) "
                 "discarded)", kept, len(units), len(units) - kept, removed)
        workspace.start_run(digest, units, inputs, tokenizer_sha256, settings)
        return
    if resume:
        log.info("--resume: %s holds no interrupted build; starting from the beginning", directory)
    if problem := occupied_output_problem(directory, config.output.overwrite):
        raise BuildError(problem)
    manifest.unlink(missing_ok=True)
    if directory.exists():
        remove_build_files(directory, keep=(LOCK_NAME,))  # the lock is this build's, held
    directory.mkdir(parents=True, exist_ok=True)
    workspace.start_run(digest, units, inputs, tokenizer_sha256, settings)


def occupied_output_problem(directory: Path, overwrite: bool) -> str | None:
    """Why a build may not write into ``directory`` without ``overwrite``, in words,
    or None: it holds a dataset, or files that are not a build's own."""
    if overwrite:
        return None
    if (directory / MANIFEST_NAME).exists():
        return f"{directory}: already holds a dataset; pass --overwrite to replace it"
    foreign = [p.name for p in directory.iterdir() if not is_build_file(p)] if directory.is_dir() else []
    if foreign:
        return (f"{directory}: exists, is not empty and is not a dataset (holds {foreign[0]!r}); choose another "
                "--output or pass --overwrite (only the build's own files are removed)")
    return None


def _held(output: Path) -> bool:
    """Whether a live build holds ``output``'s lock; a lock file this process cannot
    probe (unreadable, a file system without flock) counts as held, which leaves the
    verdict to taking the lock."""
    try:
        return holder(output) is not None
    except OSError:
        return True


def model_folder_problem(output: Path) -> str | None:
    """Why ``output`` may not hold a dataset, or None: it is (or is inside) a model's,
    an export's or a training run's folder. ``--overwrite`` removes only the build's
    own files, so the dataset would lie beside the model's; and the next export, or
    the run's checkpoint rotation and end-of-run export, replaces its folder whole,
    dataset and all."""
    if problem := container_problem(output, own_export=False):
        return problem
    if marked := marked_as(output, (EXPORT_MARKER, RUN_FILE, MODEL_CONFIG)):
        marker, what = marked
        return (f"{output}: holds {what} ({marker}), which a dataset must not be mixed with, even with "
                "--overwrite: choose another --output")
    return None


def run_build(config: BuildConfig, beam_args: list[str] | None = None, resume: bool = False) -> Path:
    """Check the inputs, run the Beam pipeline, return the manifest path. Raises
    :class:`BuildError` with a message naming the file and the problem. ``resume``
    reuses the work units an interrupted build of the same settings completed. The
    output directory is locked for the build's duration."""
    beam_args = list(beam_args or [])
    if problem := (output_directory_problem(config.output.directory, "a dataset directory")
                   or output_among_inputs(config.output.directory, list(config.input.patterns), directory=True)
                   or model_folder_problem(Path(config.output.directory))):
        raise BuildError(problem)
    try:
        paths = expand_inputs(list(config.input.patterns))
        for path in paths:
            check_format(path, config.input.format)
        tokenizer = load_tokenizer(config.tokenizer)
    except (InputError, TokenizerError) as err:
        raise BuildError(str(err)) from err
    max_len = config.instances.max_seq_len
    if max_len > tokenizer.max_positions:
        source = f" ({tokenizer.max_positions_from})" if tokenizer.max_positions_from else ""
        raise BuildError(
            f"--max-seq-len {max_len} is larger than the {tokenizer.max_positions} positions "
            f"a model of tokenizer {config.tokenizer.path} supports{source}"
        )
    if config.output.auto_shards:  # the same input gives the same shards, whatever the runner
        config = replace(config, output=replace(config.output,
                                                num_shards=auto_num_shards(estimated_input_bytes(paths))))
    if problem := no_lowercase_problem(tokenizer, config.tokenizer.lowercase):
        log.warning("%s", problem)
    tokenizer_sha256 = tokenizer.source_sha256()
    output = Path(config.output.directory)
    try:
        recover_swap(output)
    except OSError as err:
        raise BuildError(f"{output}: cannot finish the replacement a killed build began: "
                         f"{describe_os_error(err)}") from err
    # What _prepare_output refuses under the lock, said before Beam is imported (its import
    # warnings made a runner log beside the output, which the refusal then named). Left to
    # the checks under the lock: a live build's output (the lock names its holder), and one
    # that --resume may continue (its _tmp) or find finished (its manifest).
    resumable = resume and (Workspace(output).exists() or (output / MANIFEST_NAME).exists())
    if not resumable and (problem := occupied_output_problem(output, config.output.overwrite)) and not _held(output):
        raise BuildError(problem)
    from .dask_runner import scheduler_file_problem

    if problem := scheduler_file_problem(beam_args):  # after the checks that need no waiting
        raise BuildError(problem)
    lock = DirectoryLock(config.output.directory, "data_prep.build")
    try:
        lock.acquire()
    except LockedError as err:
        raise BuildError(str(err)) from err
    except OSError as err:  # not a directory, not writable, a full disk
        raise BuildError(f"{config.output.directory}: cannot use it as the output directory: "
                         f"{describe_os_error(err)}") from err
    try:
        if resume and (built := _finished_build(config, paths, tokenizer_sha256)) is not None:
            return built
        try:  # after the checks that take no time: a large text file's cuts take a pass over it
            units = plan_work_units(paths, config.input.format, config.input.use_multistream_index,
                                    config.input.unit_bytes, split_text=True)
        except InputError as err:
            raise BuildError(str(err)) from err
        return _build(config, beam_args, resume, units, paths, tokenizer, tokenizer_sha256)
    finally:
        lock.release()


def _finished_build(config: BuildConfig, paths: list[str], tokenizer_sha256: str) -> Path | None:
    """With ``--resume``: the manifest of the dataset in the output directory when
    this build has already finished it (same settings, inputs and tokenizer: a
    requeued job, a Ctrl-C after the last rename), so that there is nothing to do;
    ``None`` when there is work (no dataset, or ``--overwrite`` of another one).
    Raises :class:`BuildError` for a dataset of other settings without ``--overwrite``."""
    directory = Path(config.output.directory)
    if not (directory / MANIFEST_NAME).exists():
        return None
    try:
        manifest = Manifest.load(directory)
    except DatasetError as err:
        raise BuildError(str(err)) from err
    difference = _build_difference(manifest, config, paths, tokenizer_sha256)
    if difference is None:
        staging = staging_directory(directory)
        if staging.exists():  # an interrupted --overwrite of the same settings: it would build the same bytes
            shutil.rmtree(staging)
        log.info("%s: already holds the dataset of these settings, inputs and tokenizer; nothing to resume",
                 directory)
        return directory / MANIFEST_NAME
    if config.output.overwrite:
        return None
    raise BuildError(f"{directory}: holds a finished dataset ({difference}): there is nothing to resume; "
                     "pass --overwrite to replace it")


def _build_difference(manifest: Manifest, config: BuildConfig, paths: list[str],
                      tokenizer_sha256: str) -> str | None:
    """``None`` when ``manifest`` records a build of ``config`` from ``paths`` (their
    sizes) and the tokenizer of ``tokenizer_sha256``, else the first difference.
    The inputs are the files ``paths`` names, however ``--input`` spelled them (a
    quoted glob, or the files the shell expanded it to)."""
    if (difference := first_changed_setting(flat_settings(manifest.build_config),
                                          determining_settings(config.to_dict()))) is not None:
        name, then, now = difference
        return f"built with {name} {then!r}, this build's is {now!r}"
    recorded_sizes = {s.path: s.bytes for s in manifest.sources}
    for path in paths:
        if path not in recorded_sizes:
            return f"{path}: an input of this build that the dataset was not built from"
        if recorded_sizes[path] != os.path.getsize(path):
            return f"{path}: its size changed since the dataset was built"
    if gone := sorted(set(recorded_sizes) - set(paths)):
        return f"{gone[0]}: an input the dataset was built from that this build does not read"
    if manifest.tokenizer.sha256 != tokenizer_sha256:
        return "built with another tokenizer file"
    return None


def _build(config: BuildConfig, beam_args: list[str], resume: bool, units: list[WorkUnit], paths: list[str],
           tokenizer: PretrainTokenizer, tokenizer_sha256: str) -> Path:
    """The build of :func:`run_build` once its output directory is locked: the
    output prepared (beside the old dataset with ``--overwrite``), the pipeline run,
    the manifest written last, the new dataset swapped in."""
    from apache_beam.options.pipeline_options import PipelineOptions

    from . import dask_runner
    from .shards import finalize

    final = Path(config.output.directory)
    replacing = config.output.overwrite and (final / MANIFEST_NAME).exists()
    if replacing:
        # Built beside the old dataset, which stays whole until the new one is.
        config = replace(config, output=replace(config.output, directory=str(staging_directory(final))))
    _prepare_output(config, units, resume, tokenizer_sha256)

    options = PipelineOptions(dask_runner.with_defaults(beam_args))
    facts = TokenizerFacts(tokenizer.vocab_size, tokenizer.special_ids, tokenizer.replacement_ids())
    finalize_inputs = FinalizeInputs(
        tokenizer=tokenizer,
        tokenizer_sha256=tokenizer_sha256,  # fingerprinted at the start: finalize checks its copy against it
        sources=[FileRecord(p, os.path.getsize(p)) for p in paths],
        pipeline_options=options.get_all_options(drop_default=True, retain_unknown_options=True),
    )
    if config.output.auto_shards:
        log.info("%d shard(s) for about %.0f MB of input (one per %.0f MB; --num-shards to choose)",
                 config.output.num_shards, estimated_input_bytes(paths) / 1e6, SHARD_INPUT_BYTES / 1e6)
    log.info("%d input file(s), %d work unit(s) -> %s", len(paths), len(units), config.output.directory)
    try:
        _run_pipeline(config, options, units, facts)
        with writing(config.output.directory):
            manifest = finalize(config, facts, finalize_inputs, recorded_directory=str(final))
    except Exception as err:
        raise _failed(err, Path(config.output.directory), replacing, len(units)) from err
    if replacing:
        swap_in(manifest.parent, final)
        return final / MANIFEST_NAME
    return manifest


def _run_pipeline(config: BuildConfig, options: Any, units: list[WorkUnit], facts: TokenizerFacts) -> None:
    """The Beam pipeline over ``units`` on the runner ``options`` name, to its end,
    with the build-wide progress line; on Dask, what its workers' settings lack is
    said, and the client the DaskRunner leaves open is closed."""
    import apache_beam as beam

    from . import dask_runner
    from .pipeline import build_pipeline

    pipeline = beam.Pipeline(runner=_runner(options, len(config.output.shard_keys)), options=options)
    # The progress line comes from the workers where their log records reach the
    # driver (the DirectRunner's), else from the driver alone.
    build_pipeline(pipeline, units, config, facts, worker_progress=workers_log_to_driver(options))
    with _driver_progress(options, Workspace(config.output.directory)):
        result = pipeline.run()
        client = getattr(result, "client", None)  # the DaskRunner's, which it leaves open
        try:
            if client is not None:
                advice = dask_runner.worker_advice(client.run(dask_runner.worker_settings))
                if advice is not None:
                    log.warning("%s", advice)
            wait_or_cancel(result)
        finally:
            if client is not None:
                client.close()


def wait_or_cancel(result: Any) -> None:
    """Wait for the pipeline's ``result``; when the wait ends otherwise (Ctrl-C,
    SIGTERM, a failure), cancel the job: a remote runner's (Flink, Spark) runs on
    after its driver stops, writing into an output whose lock the build releases."""
    try:
        result.wait_until_finish()
    except BaseException:
        with contextlib.suppress(Exception):  # a runner that cannot cancel, or a job already ended
            result.cancel()
        raise


def _failed(err: BaseException, directory: Path, replacing: bool, units: int) -> BuildError:
    """The one line of a build that failed with ``err``, once its output directory
    is cleaned up: the completed work units stay for --resume (the directory goes
    with its lock when none completed); no shard file of a dataset that does not
    exist is left in it."""
    remove_build_files(directory, keep=(TMP_DIR_NAME, LOCK_NAME))
    kept = " (the old dataset is unchanged)" if replacing else ""
    workspace = Workspace(directory)
    done = workspace.completed_count() if workspace.exists() else None  # None: got past its units
    if done == 0:  # nothing to resume
        workspace.remove()
    left = _resume_note(done, units)
    return BuildError(f"build failed, no dataset written{kept}: {_root_message(err)}{f' ({left})' if left else ''}")


def _runner(options: Any, shards: int) -> Any:
    """The runner the options name; by default the local DirectRunner's FnApiRunner.
    ``shards``: how many the build makes (the DaskRunner's shard stage is one
    partition per shard).

    Beam's DirectRunner would first try the Prism runner, which downloads a binary
    at run time; we go straight to the in-process FnApiRunner it falls back to
    (which honours --direct_num_workers and --direct_running_mode).
    """
    from apache_beam.options.pipeline_options import StandardOptions

    from . import dask_runner

    name = options.view_as(StandardOptions).runner
    if name in dask_runner.NAMES:  # Beam knows it by its module path only
        return dask_runner.runner(group_partitions=shards)
    if name not in (None, "DirectRunner", "direct"):
        return None  # Beam resolves the named runner
    from apache_beam.portability.api import beam_provision_api_pb2
    from apache_beam.runners.portability.fn_api_runner import fn_runner
    from apache_beam.runners.portability.portable_runner import JobServiceHandle

    encoded = JobServiceHandle.encode_pipeline_options(options.get_all_options())
    provision = fn_runner.ExtendedProvisionInfo(
        beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded)
    )
    return fn_runner.FnApiRunner(provision_info=provision)


def workers_log_to_driver(options: Any) -> bool:
    """Whether the runner the options name brings its workers' log records to the
    driver's logging (the DirectRunner, in-process or relaying its worker processes'),
    so that their progress lines reach the console and the runner log. Dask's, Flink's
    and Spark's workers keep theirs."""
    from apache_beam.options.pipeline_options import StandardOptions

    return options.view_as(StandardOptions).runner in (None, "DirectRunner", "direct")


def _driver_progress(options: Any, workspace: Workspace) -> contextlib.AbstractContextManager[Any]:
    """Around the pipeline's run: the driver's own progress lines
    (:class:`data_prep.pipeline.DriverProgress`) where the workers' do not reach it;
    nothing on the DirectRunner, whose workers' lines do (each said once)."""
    from .pipeline import DriverProgress

    if workers_log_to_driver(options):
        return contextlib.nullcontext()
    return DriverProgress(workspace)


# The errors whose message names the input file and the problem.
_OUR_ERRORS: tuple[type[Exception], ...] = (InputError, EmptyDatasetError, TokenizerError, DatasetError,
                                            IndexedFormatError, OutputError, WorkspaceError)


def _resume_note(done: int | None, units: int) -> str:
    """What a failed build that completed ``done`` of its ``units`` work units
    leaves for ``--resume``, in words; "" when it had got past its units (``done``
    None: an empty dataset), where there is nothing to say."""
    if done is None:
        return ""
    if done == 0:  # a scheduler never reached, a first unit that failed
        return "no work unit had completed: once the cause is fixed, rerun the same command"
    return (f"{done} of its {units} work unit(s) completed and are kept: once the cause is fixed, "
            "rerun the same command with --resume")


def _root_message(err: BaseException) -> str:
    """Beam wraps worker errors (in multi-processing mode, as text); surface our own
    error, whose message names the file and the problem (without the step Beam
    appends to it, `` [while running 'PrepareDocuments']``)."""
    return re.sub(r"\s*\[while running '[^']*'\]", "", _our_message(err))


def _our_message(err: BaseException) -> str:
    """The message of our own error within ``err``, else its last line."""
    seen: BaseException | None = err
    while seen is not None:
        if isinstance(seen, _OUR_ERRORS):
            return str(seen)
        seen = seen.__cause__ or seen.__context__
    # A worker process's error reaches the driver as the text of its traceback.
    names = "|".join(cls.__name__ for cls in _OUR_ERRORS)
    found = re.findall(rf"(?:{names}): ([^\n]+)", str(err))
    if found:
        return found[-1]
    text = str(err).strip()
    return text.splitlines()[-1] if text else type(err).__name__


def main(argv: list[str] | None = None) -> int:
    from .inspect import format_summary

    command = parse_args(argv)
    # The runner's workers are a process per core already: Hugging Face tokenizers'
    # own thread per core in each would oversubscribe them. The DirectRunner's worker
    # processes inherit this; Dask workers get it from data_prep.dask_runner.WORKER_ENV.
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    with CtrlC(sigterm=True) as ctrl_c:
        try:
            with build_logging(command.config.output.directory, command.quiet, command.verbose) as runner_log:
                try:
                    manifest_path = run_build(command.config, command.beam_args, command.resume)
                except BuildError as err:
                    error = f"error: {err}"
                except KeyboardInterrupt:
                    ctrl_c.ignore()  # the build has stopped; the console back, then the one line, uninterrupted
                    raise
                else:
                    error = None
        except KeyboardInterrupt as stop:  # outside the logging block, which holds the console
            ctrl_c.ignore()
            if getattr(stop, "signal_name", None) == "SIGTERM":  # a time limit, scancel: the completed units stay
                print("SIGTERM: the build stopped; rerun the same command with --resume to continue",
                      file=sys.stderr)
                return 128 + signal.SIGTERM
            print("interrupted; rerun the same command with --resume to continue", file=sys.stderr)
            return EXIT_INTERRUPTED
    if error is not None:  # the runner log is complete (or known not to be) once its block has ended
        print(f"{error} ({runner_log.describe()})" if runner_log.written else error, file=sys.stderr)
        return EXIT_ERROR
    print(format_summary(Manifest.load(manifest_path.parent), str(manifest_path.parent)))
    print(runner_log.describe())
    return 0


if __name__ == "__main__":
    sys.exit(main())
