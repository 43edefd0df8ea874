"""The run directory: every name in it, and ``run.json``, its typed record.

A training run writes one directory (``--output RUN_DIR``), and nothing else names
what is in it::

    RUN_DIR/
      run.json                   RunRecord: the settings as the first job resolved them,
                                 the student's BertConfig, the tokenizer's source, one
                                 history segment per job
      tokenizer/                 the tokenizer files, copied once (exports ship them)
      initial/                   a random init's weights (--model CONFIG.json): the
                                 reference line of analyses
      checkpoints/
        stepNNNNNNNN/            DeepSpeed's files, trainer_state.json, files.json (every
                                 file's size and checksum), .tacl-read-lock (exports)
        stepNNNNNNNN.universal/  a universal conversion (resumed at another rank count)
        latest                   the newest complete checkpoint's tag
      universal-conversion.log   the last conversion's output
      metrics.jsonl              one object per applied step, and events
      tensorboard/               the same as TensorBoard scalars
      PREEMPTED                  the job checkpointed on a signal; a Slurm job requeues on it
      export/                    the student as a Hugging Face model, at the end of the run
      .tacl-lock                 held by the training job (tacl_scale.locking)

``run.json`` is read only through :meth:`RunRecord.from_json`, where older layouts
get their defaults (as :class:`~tacl_scale.data.manifest.Manifest` does for
datasets). This module also holds what a job checks against the directory before
training (the resume-settings and data checks) and the pieces of the input snapshot
(the tokenizer's source and copy, the student's config), which
:func:`tacl_scale.parts.snapshot_inputs` writes.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .data.manifest import (
    MANIFEST_NAME,
    TOKENIZER_FILES,
    flat_settings,
    holds_a_vocabulary,
    missing_dataset_hint,
)
from .files import atomic_write, output_directory_problem
from .markers import (  # shared with data_prep through that light module
    EXPORT_DIR,
    MODEL_CONFIG,
    RUN_FILE,
    container_problem,
    marked_as,
)

if TYPE_CHECKING:
    from .config import TrainConfig
    from .data import PretrainDataset

TOKENIZER_DIR = "tokenizer"
INITIAL_DIR = "initial"
CHECKPOINTS_DIR = "checkpoints"
UNIVERSAL_LOG = "universal-conversion.log"
METRICS_FILE = "metrics.jsonl"
TENSORBOARD_DIR = "tensorboard"
PREEMPTED_MARKER = "PREEMPTED"
# Inside checkpoints/ (tacl_scale.checkpoint writes them):
LATEST = "latest"  # DeepSpeed's own pointer file name, moved by us only when a save is complete
CHECKPOINT_RECORD = "files.json"  # in each checkpoint: every file's size and checksum
CHECKPOINT_STATE = "trainer_state.json"  # in each checkpoint: step, data position, batch, ranks; no torch to read

# run.json's layout: 1 unversioned (before the field), 2 with ``version``. A newer
# one is refused by name, not taken for changed settings.
RUN_RECORD_VERSION = 2
# Settings a resumed job must share with the run (dotted paths of TrainConfig.to_dict()):
# they decide the data, the objectives, the model and the optimizer and its schedule.
RESUME_SETTINGS = ("model", "seed", "data.paths", "data.weights", "data.dynamic_masking", "objective", "optim")
PATH_SETTINGS = ("model", "data.paths")  # compared as the directories they name
RESUME_FREE = ("optim.micro_batch_size", "optim.max_skipped_in_a_row")  # may change with the ranks
# Settings added since runs were first recorded, with the value a run without them had.
ADDED_SETTINGS = {"objective.reference_compat": False}
# The student's BertConfig settings that decide its weights' shapes and its attention:
# a checkpoint holds weights of the run's, which no other can resume (RunRecord.student_config).
STUDENT_SHAPE = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                 "max_position_embeddings", "type_vocab_size")
# The student's BertConfig settings that change what the same weights compute or learn
# (not its shapes): a --model edited in place between jobs changes the run, as a flag does.
STUDENT_BEHAVIOUR = ("hidden_act", "hidden_dropout_prob", "attention_probs_dropout_prob", "layer_norm_eps",
                     "pad_token_id")


def missing_input(config: TrainConfig) -> str | None:
    """The first ``--data`` or ``--model`` that is not there, said before the run
    directory is made; one that ``--recipe`` filled is said to be the recipe's (a
    Slurm job of a recipe run where its paths do not exist)."""
    from .recipes import recipe

    chosen = recipe(config.recipe) if config.recipe else None
    from_recipe = {} if chosen is None else {
        os.path.abspath(path): flag for flag, path in (("--data", chosen.data), ("--model", chosen.model)) if path}
    inputs = [*(("--data", path) for path in config.data.paths), ("--model", config.model)]
    for flag, path in inputs:
        if os.path.exists(path):
            continue
        if from_recipe.get(path) == flag:
            return (f"{path}: not found: the {flag} of --recipe {config.recipe} (its paths are relative to the "
                    f"directory the job runs in); put it there or give {flag}")
        return f"{path}: not found ({flag}){missing_dataset_hint(path) if flag == '--data' else ''}"
    return None


def output_problem(output: Path, data: Sequence[str], model: str) -> str | None:
    """Why ``output`` cannot be a run directory, or None: it is (or is inside) one of
    the run's input directories; it is inside another run, an export or a dataset
    (:func:`~tacl_scale.markers.container_problem`: the other run's export, its
    rotation or the next export or build there would delete it); or, holding no
    run, it holds a dataset, a model or a run's files whose ``run.json`` is gone.
    A run writes ``tokenizer/``, ``initial/``, ``checkpoints/`` and ``export/`` into
    its directory, which would mix with (or replace) the files already there."""
    if problem := output_directory_problem(output, "a run directory"):
        return problem
    resolved = output.resolve()
    for flag, given in [*(("--data", path) for path in data), ("--model", model)]:
        source = Path(given).resolve()
        if source.is_dir() and (resolved == source or source in resolved.parents):
            where = "is" if resolved == source else "is inside"
            return (f"{output}: --output {where} the {flag} directory {given}: a run writes its checkpoints, "
                    "tokenizer and export there; choose another directory")
    # A run anywhere inside another one too, as a dataset build refuses (a run's
    # export/ is replaced whole at its end, its checkpoints/ rotated).
    if problem := container_problem(output, own_export=False):
        return problem
    if (output / RUN_FILE).is_file():
        return None
    if marked := marked_as(output, (MANIFEST_NAME, MODEL_CONFIG)):
        marker, what = marked
        return f"{output}: --output holds {what} ({marker}), not a run; choose a new or empty directory"
    if found := unrecorded_run_files(output):
        return (f"{output}: holds a training run's files ({', '.join(found)}) but no {RUN_FILE}, the record of its "
                f"settings: a new run there would replace them, and --resume could not check its settings against "
                f"the run's. Restore {output / RUN_FILE} (from a backup) to --resume it, or choose another --output")
    return None


def unrecorded_run_files(output: Path) -> list[str]:
    """What ``output`` holds of what a run writes once it has recorded itself in
    ``run.json`` (its saved checkpoints, metrics, TensorBoard log, export, preemption
    marker, universal-conversion log), relative to it; checked where ``run.json`` is
    missing. ``tokenizer/``, ``initial/`` and an empty ``checkpoints/`` are not
    among them: a first job writes them before its record, so one stopped while the
    engine was built (or requeued then) leaves them, and a new run there writes them
    anew (:func:`tacl_scale.parts.snapshot_inputs`)."""
    run = RunDir(output)
    found = []
    if run.checkpoints.is_dir():
        # Saved checkpoints: complete ones have their record (files.json) and state; an
        # older version's are named by latest. A folder without either holds no save.
        saved = sorted(entry.name for entry in run.checkpoints.iterdir() if not entry.name.startswith(".")
                       and any((entry / name).is_file() for name in (CHECKPOINT_RECORD, CHECKPOINT_STATE)))
        if saved:  # the newest, and how many more
            found.append(f"{CHECKPOINTS_DIR}/{saved[-1]}" + (f" and {len(saved) - 1} more" if len(saved) > 1 else ""))
        elif (run.checkpoints / LATEST).is_file():
            found.append(f"{CHECKPOINTS_DIR}/{LATEST}")
    found += [f"{path.name}/" for path in (run.export, run.tensorboard) if path.is_dir()]
    found += [path.name for path in (run.metrics_file, run.preempted_marker, run.universal_log) if path.is_file()]
    return found


class RunRecordError(ValueError):
    """``run.json`` is unreadable or newer than this code; the message names it
    and what to do."""


class RunDir:
    """The paths of one run directory (see the module docstring)."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.record_file = self.path / RUN_FILE  # run.json
        self.tokenizer, self.initial = self.path / TOKENIZER_DIR, self.path / INITIAL_DIR
        self.checkpoints, self.universal_log = self.path / CHECKPOINTS_DIR, self.path / UNIVERSAL_LOG
        self.metrics_file, self.tensorboard = self.path / METRICS_FILE, self.path / TENSORBOARD_DIR
        self.preempted_marker, self.export = self.path / PREEMPTED_MARKER, self.path / EXPORT_DIR

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    def has_record(self) -> bool:
        """Whether this directory holds a run (its ``run.json``)."""
        return self.record_file.is_file()

    def read_record(self) -> RunRecord:
        """``run.json``, parsed and checked (:class:`RunRecordError` naming it)."""
        path = self.record_file
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise RunRecordError(f"{path}: unreadable run record ({err}): restore it from a backup, or start a "
                                 "new run in another --output") from err
        return RunRecord.from_json(data, path)

    def write_record(self, record: RunRecord) -> Path:
        """Write ``run.json`` atomically (a reader sees the old record or the new)."""
        return atomic_write(self.record_file, json.dumps(record.to_json(), indent=2))


@dataclass(frozen=True)
class TokenizerSource:
    """Where the run's tokenizer files come from: a directory of Hugging Face
    tokenizer files, or one vocabulary file (a WordPiece ``vocab.txt`` with its
    case, or a SentencePiece model)."""

    directory: str | None = None
    vocab_file: str | None = None
    lowercase: bool | None = None
    kind: str | None = None  # the dataset's tokenizer kind for a vocab_file: wordpiece, sentencepiece

    def to_json(self) -> dict[str, Any]:
        if self.directory is not None:
            return {"directory": self.directory}
        return {"vocab_file": self.vocab_file, "lowercase": self.lowercase, "kind": self.kind}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TokenizerSource:
        if "directory" in data:
            return cls(directory=str(data["directory"]))
        return cls(vocab_file=str(data["vocab_file"]), lowercase=data.get("lowercase"), kind=data.get("kind"))


@dataclass(frozen=True)
class JobSegment:
    """One job of a run: where it started, on what, and what it changed."""

    started_at_step: int
    world_size: int
    device: str
    unpad: bool
    compile: bool = False
    changes: list[str] = field(default_factory=list)  # "name: old -> new", with --allow-changes


@dataclass
class RunRecord:
    """``run.json``: what a run is, as its first job resolved it, and its jobs."""

    config: dict[str, Any]  # TrainConfig.to_dict(): the settings (since the last --allow-changes)
    world_size: int  # the first job's
    device: str
    unpad: bool
    fused_optimizer: bool
    tokenizer_source: TokenizerSource
    deepspeed_config: dict[str, Any]  # the DeepSpeed JSON as the first job resolved it
    student_config: dict[str, Any] | None = None  # the student's BertConfig; None: runs before it was kept
    history: list[JobSegment] = field(default_factory=list)
    # Manifest.content_fingerprint of each --data, in order; None: runs before they were kept
    data_fingerprints: list[str] | None = None
    version: int = RUN_RECORD_VERSION

    @property
    def model(self) -> str:
        """The run's ``--model``."""
        return str(self.config["model"])

    @classmethod
    def from_json(cls, data: Any, path: str | os.PathLike = RUN_FILE) -> RunRecord:
        """The record of ``run.json``'s object; every version this code wrote is
        read, a newer one refused by name."""
        if not isinstance(data, dict):
            raise RunRecordError(f"{path}: a run record is a JSON object, not {type(data).__name__}")
        version = data.get("version", 1)  # runs before versioned records: 1
        if not isinstance(version, int) or version > RUN_RECORD_VERSION:
            raise RunRecordError(f"{path}: run record version {version!r}, written by a newer tacl-scale (this one "
                                 f"reads up to {RUN_RECORD_VERSION}): update tacl-scale to resume this run")
        try:
            return cls(
                config=dict(data["config"]),
                world_size=int(data["world_size"]),
                device=str(data.get("device", "unknown")),  # the first records did not say
                unpad=bool(data.get("unpad", False)),
                fused_optimizer=bool(data.get("fused_optimizer", False)),
                tokenizer_source=TokenizerSource.from_json(data["tokenizer_source"]),
                deepspeed_config=dict(data.get("deepspeed_config", {})),
                student_config=data.get("student_config"),
                data_fingerprints=[str(f) for f in data["data_fingerprints"]] if data.get("data_fingerprints") else None,
                history=[JobSegment(int(s["started_at_step"]), int(s["world_size"]), str(s["device"]),
                                    bool(s.get("unpad", False)), bool(s.get("compile", False)),
                                    [str(c) for c in s.get("changes", [])])
                         for s in data.get("history", [])],
                version=RUN_RECORD_VERSION,
            )
        except (KeyError, TypeError, ValueError) as err:
            raise RunRecordError(f"{path}: not a run record this code can read ({type(err).__name__}: {err}): "
                                 "restore it from a backup, or start a new run in another --output") from err

    def to_json(self) -> dict[str, Any]:
        return {
            "version": RUN_RECORD_VERSION,
            "config": self.config,
            "world_size": self.world_size,
            "device": self.device,
            "unpad": self.unpad,
            "fused_optimizer": self.fused_optimizer,
            "student_config": self.student_config,
            # only once known: a record of a run from before them reads and writes back the same
            **({"data_fingerprints": self.data_fingerprints} if self.data_fingerprints is not None else {}),
            "tokenizer_source": self.tokenizer_source.to_json(),
            "deepspeed_config": self.deepspeed_config,
            "history": [asdict(segment) for segment in self.history],
        }


# -- before a job trains -------------------------------------------------------------------------------


def settings_changes(saved: dict[str, Any], config: TrainConfig) -> list[str]:
    """What ``config`` changes of the run's recorded settings (``run.json``'s
    ``config``) among :data:`RESUME_SETTINGS`, one ``name: old -> new`` each."""
    old, new = flat_settings(saved), flat_settings(config.to_dict())
    for settings in (old, new):  # one directory, however it was written (runs recorded relative paths)
        for key in PATH_SETTINGS:
            if isinstance(settings.get(key), str):
                settings[key] = os.path.realpath(settings[key])
            elif isinstance(settings.get(key), list):
                settings[key] = [os.path.realpath(path) for path in settings[key]]
    changes = []
    for key in sorted(old.keys() | new.keys()):
        if not key.startswith(RESUME_SETTINGS) or key in RESUME_FREE:
            continue
        before = old.get(key, ADDED_SETTINGS.get(key))
        if before != new.get(key):
            changes.append(f"{key}: {before!r} -> {new.get(key)!r}")
    return changes


def check_resume_settings(run: RunDir, record: RunRecord | None, config: TrainConfig) -> list[str]:
    """Refuse (:class:`RunRecordError`) to resume the run ``record`` describes (None:
    none yet) with other settings than its own that decide the data, the
    objectives, the model or the optimizer, naming each difference;
    ``--allow-changes`` accepts them (returned, to be recorded)."""
    if record is None:
        return []
    changes = settings_changes(record.config, config)
    if changes and not config.checkpoint.allow_changes:
        raise RunRecordError(f"{run.path}: --resume with other settings than the run's ({RUN_FILE}): "
                             f"{'; '.join(changes)}. Resume with the run's settings, or add --allow-changes to "
                             "continue with these (recorded in its history)")
    return changes


def check_student_config(run: RunDir, record: RunRecord | None, student_config: dict[str, Any],
                         config: TrainConfig) -> list[str]:
    """Refuse (:class:`RunRecordError`) to resume the run ``record`` describes with a
    student (``student_config``, the BertConfig ``--model`` gave) other than the
    run's (``run.json``'s ``student_config``), naming each setting with both values.
    Another shape (:data:`STUDENT_SHAPE`) is refused even with ``--allow-changes``:
    the checkpoints hold weights of the run's shape (loading them was a page of
    size mismatches). Another behaviour (:data:`STUDENT_BEHAVIOUR`: dropout, the
    activation, ... of a config.json edited in place) is a change of the run's
    settings: refused unless ``--allow-changes``, which returns them to be recorded.
    Nothing to compare for a new run or one recorded before the config was kept."""
    saved = record.student_config if record is not None else None
    if not isinstance(saved, dict):
        return []

    def differing(keys: tuple[str, ...]) -> list[str]:
        return [key for key in keys if key in saved and key in student_config and saved[key] != student_config[key]]

    if shape := differing(STUDENT_SHAPE):
        raise RunRecordError(f"{run.record_file}: --resume with --model {config.model}, a student of another shape "
                             f"than the run's (its student_config): "
                             f"{'; '.join(f'{k} {saved[k]!r} in the run, {student_config[k]!r} in --model' for k in shape)}. "
                             "Its checkpoints hold weights of the run's shape, which this one cannot load, with "
                             "--allow-changes or without: resume with the run's --model as it was, or start a new run "
                             "in another --output")
    changes = [f"student_config.{k}: {saved[k]!r} -> {student_config[k]!r}" for k in differing(STUDENT_BEHAVIOUR)]
    if changes and not config.checkpoint.allow_changes:
        raise RunRecordError(f"{run.record_file}: --resume with --model {config.model}, whose config changes the "
                             f"run's student (its student_config): {'; '.join(changes)}. Resume with the run's "
                             "--model as it was, or add --allow-changes to continue with these (recorded in its "
                             "history)")
    return changes


def data_changes(record: RunRecord | None, config: TrainConfig, fingerprints: list[str]) -> list[str]:
    """Each ``--data`` whose content is not what the run's ``record`` holds (a
    dataset rebuilt in place), one ``data content: PATH: ...`` line each; none when
    there is no record, it holds no fingerprints or the paths themselves changed
    (a change listed as ``data.paths``)."""
    if record is None:
        return []
    saved_paths = [os.path.realpath(path) for path in record.config.get("data", {}).get("paths", [])]
    if record.data_fingerprints is None or saved_paths != [os.path.realpath(p) for p in config.data.paths]:
        return []
    return [f"data content: {path}: not the dataset the run trained on (rebuilt in place?): the data order "
            "would continue in other instances"
            for path, old, new in zip(config.data.paths, record.data_fingerprints, fingerprints, strict=False)
            if old != new]


def check_data_unchanged(run: RunDir, record: RunRecord | None, config: TrainConfig,
                         fingerprints: list[str]) -> list[str]:
    """Refuse (:class:`RunRecordError`) to resume on datasets rebuilt since the run
    recorded them, unless ``--allow-changes`` (the changes are returned, to be
    recorded)."""
    changes = data_changes(record, config, fingerprints)
    if changes and not config.checkpoint.allow_changes:
        raise RunRecordError(f"{run.path}: --resume on other data than the run's ({RUN_FILE}): {'; '.join(changes)}. "
                             "Resume on the run's data, or add --allow-changes to continue on this (recorded in its "
                             "history)")
    return changes


def record_job(run: RunDir, record: RunRecord | None, segment: JobSegment, new_record: RunRecord,
               config: TrainConfig) -> RunRecord:
    """Write ``run.json`` with this job added: a new run (``record`` None) gets
    ``new_record``; a resumed run keeps its ``record``, appends ``segment``, and
    (after ``--allow-changes``) takes ``config`` as its settings from now on."""
    if record is not None:
        record.history.append(segment)
        if segment.changes:  # the settings and student this run trains with from here
            record.config = config.to_dict()
            record.student_config = new_record.student_config
        if segment.changes or record.data_fingerprints is None:  # the data this run trains on from here
            record.data_fingerprints = new_record.data_fingerprints
    else:
        record = new_record
        record.history = [segment]
    run.write_record(record)
    return record


def tokenizer_source(model_path: str, dataset: PretrainDataset) -> TokenizerSource:
    """Where the exported model's tokenizer comes from: the model directory's own
    files, or else the dataset's tokenizer (its own copy, from format 3 on): a random
    init's by construction, and taken for a pretrained model's that came without one
    (:func:`tacl_scale.input_checks.check_data_and_model` refuses it when its size is not
    the model's ``vocab_size``, and the run warns that it takes it)."""
    model_dir = Path(model_path)
    if model_dir.is_dir() and holds_a_vocabulary(model_dir):  # settings files alone are no tokenizer
        return TokenizerSource(directory=str(model_dir.resolve()))
    tok = dataset.manifest.tokenizer
    location = tok.location(dataset.path).resolve()
    if tok.kind == "hf":  # a tokenizer directory (format 2 recorded the file fingerprinted in it)
        return TokenizerSource(directory=str(location if location.is_dir() else location.parent))
    return TokenizerSource(vocab_file=str(location), lowercase=tok.lowercase, kind=tok.kind)


def write_tokenizer(source: TokenizerSource, out: Path) -> None:
    """The tokenizer files of ``source`` in folder ``out``, as Hugging Face loads them."""
    if source.directory is not None:
        for name in TOKENIZER_FILES:
            path = Path(source.directory) / name
            if path.is_file():
                shutil.copy2(path, out / name)
        return
    assert source.vocab_file is not None
    if source.kind == "sentencepiece":
        shutil.copy2(source.vocab_file, out / Path(source.vocab_file).name)
        return
    from transformers import BertTokenizerFast

    # from_pretrained on a directory holding vocab.txt reads it the same way in
    # every transformers version (constructor arguments changed in v5).
    shutil.copy2(source.vocab_file, out / "vocab.txt")
    lowercase = True if source.lowercase is None else source.lowercase
    tokenizer = BertTokenizerFast.from_pretrained(str(out), do_lower_case=lowercase)
    tokenizer.save_pretrained(out)


def snapshot_tokenizer(source: TokenizerSource, run: RunDir, new_run: bool = False) -> Path:
    """Copy the run's tokenizer files to ``RUN_DIR/tokenizer`` once (written to a
    temporary folder, then renamed), so exports never depend on the original paths.
    A ``new_run`` (nothing in ``run.json`` yet) that finds the folder there already
    (a first job stopped before recording itself, requeued) takes it only where it
    is the same tokenizer as ``source``'s (the same ids, lower-casing the same); one
    of another model, or a folder that is not a run's, is refused, never deleted."""
    target = run.tokenizer
    if target.is_dir() and not new_run:
        return target
    tmp = run.path / f".{TOKENIZER_DIR}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        write_tokenizer(source, tmp)
    except OSError as err:
        shutil.rmtree(tmp, ignore_errors=True)  # nothing half-copied stays in the run
        raise ValueError(f"{target}: the run's tokenizer could not be copied into it ({err}): copy the "
                         f"dataset's tokenizer/ files to {target}") from err
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if target.exists() or target.is_symlink():
        try:
            problem = _other_tokenizer(target, tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        if problem:
            raise ValueError(f"{target}: {problem}, and no {RUN_FILE} records a run here: a first job that stopped "
                             "before recording itself left it (under another --model?), or it is not a run's "
                             f"folder; remove {target}, or choose another --output")
        return target
    os.replace(tmp, target)
    return target


def _other_tokenizer(found: Path, wanted: Path) -> str | None:
    """How the tokenizer folder ``found`` differs from ``wanted`` (a run's copy of
    its tokenizer), in words, or None: each vocabulary file of ``wanted`` there too
    with the same token ids (an export ships them all), lower-casing alike."""
    from .vocab import VocabularyError, first_difference, tokenizer_lowercase, vocabulary

    if not found.is_dir() or found.is_symlink():
        return "not a folder a run wrote"
    for own_file in sorted(wanted.iterdir()):
        if own_file.name not in ("tokenizer.json", "vocab.txt") and own_file.suffix != ".model":
            continue
        if not (found / own_file.name).is_file():
            return f"holds no {own_file.name}, which this run's tokenizer has"
        try:
            held, own = vocabulary(found / own_file.name), vocabulary(own_file)
        except (VocabularyError, OSError) as err:
            return f"holds tokenizer files that cannot be read ({err})"
        if (difference := first_difference(own or {}, held or {})) is not None:
            token, in_run, in_found = difference
            return (f"holds another tokenizer than this run's ({own_file.name}: {token!r} is id {in_found} there, "
                    f"{in_run} in this run's)")
    if tokenizer_lowercase(found) != tokenizer_lowercase(wanted):
        return "holds a tokenizer that lower-cases otherwise than this run's"
    return None


def student_config_dict(student: Any) -> dict[str, Any]:
    """The student's ``BertConfig`` as ``run.json`` keeps it (no attention choice:
    that belongs to the run, not to the exported model)."""
    config = student.config.to_dict()
    return {k: v for k, v in config.items() if "attn_implementation" not in k}
