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
datasets). What a resumed job is checked against in it is
:mod:`tacl_scale.resume_checks`; the run's copy of its tokenizer,
:mod:`tacl_scale.run_tokenizer`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .data.manifest import (
    MANIFEST_NAME,
    missing_dataset_hint,
)
from .files import atomic_write, output_directory_problem
from .json_fields import JsonObject, MalformedField
from .markers import (  # shared with data_prep through that light module
    EXPORT_DIR,
    MODEL_CONFIG,
    RUN_FILE,
    container_problem,
    marked_as,
)

if TYPE_CHECKING:
    from .config import TrainConfig

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
    engine was built (or requeued then) leaves them, and a new run there replaces
    them where they are a run's and its own, and refuses them otherwise
    (:func:`tacl_scale.parts.snapshot_inputs`)."""
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
    def from_json(cls, data: Any, name: str = "tokenizer_source") -> TokenizerSource:
        """The source recorded as ``data``; a :class:`MalformedField` names the field
        (as ``name.FIELD``) that is missing or of another type."""
        entry = JsonObject(data, name)
        if "directory" in entry.data:
            return cls(directory=entry.get("directory", "str"))
        return cls(vocab_file=entry.get("vocab_file", "str"), lowercase=entry.get("lowercase", "bool?", None),
                   kind=entry.get("kind", "str?", None))


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
        top = JsonObject(data, whole="the run record")
        try:
            return cls(
                config=top.get("config", "map"),
                world_size=top.get("world_size", "int"),
                device=top.get("device", "str", "unknown"),  # the first records did not say
                unpad=top.get("unpad", "bool", False),
                fused_optimizer=top.get("fused_optimizer", "bool", False),
                tokenizer_source=TokenizerSource.from_json(top.get("tokenizer_source", "map")),
                deepspeed_config=top.get("deepspeed_config", "map", {}),
                student_config=top.get("student_config", "map?", None),
                data_fingerprints=top.get("data_fingerprints", "strs?", None) or None,
                history=[JobSegment(s.get("started_at_step", "int"), s.get("world_size", "int"), s.get("device", "str"),
                                    s.get("unpad", "bool", False), s.get("compile", "bool", False),
                                    s.get("changes", "strs", []))
                         for s in top.objects("history", [])],
                version=RUN_RECORD_VERSION,
            )
        except MalformedField as err:
            raise RunRecordError(f"{path}: not a run record this code can read ({err}): restore it from a backup, "
                                 "or start a new run in another --output") from err

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


def student_config_dict(student: Any) -> dict[str, Any]:
    """The student's ``BertConfig`` as ``run.json`` keeps it (no attention choice:
    that belongs to the run, not to the exported model)."""
    config = student.config.to_dict()
    return {k: v for k, v in config.items() if "attn_implementation" not in k}
