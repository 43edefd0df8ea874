"""What a resumed job must share with the run it continues, checked against its
``run.json`` (:class:`~tacl_scale.run_dir.RunRecord`) before a checkpoint is loaded:
the settings that decide the data, the objectives, the model and the optimizer; the
datasets' content; the student's config. A difference is refused naming each one,
or (where it can be) taken with ``--allow-changes`` and returned to be recorded in
the run's history; a student of another shape is refused either way."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from .data.manifest import flat_settings
from .markers import RUN_FILE
from .run_dir import RunDir, RunRecord, RunRecordError

if TYPE_CHECKING:
    from .config import TrainConfig

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
    return _unless_allowed(changes, config, f"{run.path}: --resume with other settings than the run's ({RUN_FILE}): "
                           f"{'; '.join(changes)}. Resume with the run's settings, or add --allow-changes to "
                           "continue with these (recorded in its history)")


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
    return _unless_allowed(changes, config, f"{run.record_file}: --resume with --model {config.model}, whose config "
                           f"changes the run's student (its student_config): {'; '.join(changes)}. Resume with the "
                           "run's --model as it was, or add --allow-changes to continue with these (recorded in its "
                           "history)")


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
    return _unless_allowed(changes, config, f"{run.path}: --resume on other data than the run's ({RUN_FILE}): "
                           f"{'; '.join(changes)}. Resume on the run's data, or add --allow-changes to continue on "
                           "this (recorded in its history)")


def _unless_allowed(changes: list[str], config: TrainConfig, refusal: str) -> list[str]:
    """``changes`` of a resume, which ``--allow-changes`` takes (returned, to be
    recorded in the run's history); without it, any is :class:`RunRecordError`
    ``refusal``."""
    if changes and not config.checkpoint.allow_changes:
        raise RunRecordError(refusal)
    return changes
