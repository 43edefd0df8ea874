"""``python -m tacl_scale.export CKPT OUT``: the student of a training checkpoint as
a HF model directory (weights, config, tokenizer files) that ``AutoModel`` and
``BertForPreTraining.from_pretrained`` load, for fine-tuning with standard scripts.

``CKPT`` is a run directory (its latest checkpoint) or one checkpoint directory
(``RUN_DIR/checkpoints/stepNNNNNNNN``). The weights are ZeRO's fp32 master weights,
consolidated by DeepSpeed from every rank's optimizer partition (``zero_to_fp32``,
or its universal conversion for ZeRO-1's bf16 optimizer), so an fp16/bf16 run exports what the optimizer holds, not the
half-precision copy the forward pass used. The run directory is self-sufficient:
``run.json`` holds the student's ``BertConfig`` and ``RUN_DIR/tokenizer`` its
tokenizer files, so the export does not need the original ``--model`` path.

A run that is still training may rotate checkpoints away (``--keep-last``) while
the export reads: the checkpoint read is held with a shared lock for as long as its
weights are read (:class:`tacl_scale.checkpoint.ReadLock`), and rotation keeps it
until the export is done. A run directory's newest checkpoint rotated away before
it could be locked is replaced by the newest one then; a named checkpoint that is
not there is refused in one line naming it.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from safetensors import SafetensorError

if TYPE_CHECKING:
    from transformers import BertForPreTraining

from .checkpoint import (
    CheckpointGone,
    ReadLock,
    lock_newest_verified,
    record_problem,
    tags,
    unrecorded_problem,
)
from .cli import error_exit, make_parser
from .data.manifest import MANIFEST_NAME, NO_VOCABULARY, TOKENIZER_FILES, holds_a_vocabulary
from .files import os_error_line, output_directory_problem, write_failed
from .markers import EXPORT_MARKER, container_problem
from .master_weights import master_weights
from .preemption import ctrl_c_ends, uninterrupted
from .run_dir import CHECKPOINT_RECORD, CHECKPOINTS_DIR, LATEST, RUN_FILE, RunDir
from .run_tokenizer import snapshot_tokenizer

log = logging.getLogger("tacl_scale.export")

# The names an export writes whatever its marker records: Hugging Face's weights and
# config in any sharding (a differently sharded earlier export leaves other shard
# names, which the next export replaces), the run tokenizer's files and the marker.
# Exports from before the marker listed its files are judged by these alone.
EXPORT_FILE_PATTERNS = ("config.json", "generation_config.json", "model.safetensors", "model-*-of-*.safetensors",
                        "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model-*-of-*.bin",
                        "pytorch_model.bin.index.json", *TOKENIZER_FILES, "*.model",
                        EXPORT_MARKER)


def export_target_problem(out: Path) -> str | None:
    """Why ``out`` may not receive an export, in words naming it, or None: it may be
    new, an empty directory, or an earlier export (marked by :data:`EXPORT_MARKER`)
    that holds only what an export writes (:func:`not_exported`). Anything else, such
    as the directory of the model a run started from, a run directory, a dataset
    (even one built into an export) or an export a user added files to, is refused
    rather than overwritten."""
    if problem := output_directory_problem(out, "a directory for the export") or container_problem(out):
        return problem
    if out.is_symlink():
        # The export is renamed into place: that would replace the link, not what it names.
        return (f"{out}: a symbolic link (to {os.path.realpath(out)}); export to the directory itself or to a new "
                "directory")
    if out.is_dir() and os.path.ismount(out):
        return (f"{out}: a mount point, which the export (written beside it, then renamed into place) cannot "
                f"replace; export into a new directory inside it ({out / 'model'})")
    if out.is_dir() and (out / MANIFEST_NAME).is_file():
        # Asked even of an earlier export: a build --overwrite into one keeps its
        # marker, and the export, replacing the directory whole, deleted the dataset.
        return (f"{out}: holds a dataset ({MANIFEST_NAME}), which an export there would delete; export to a new "
                "directory")
    if out.exists() and any(out.iterdir()):
        if not (out / EXPORT_MARKER).is_file():
            return (f"{out}: a directory that holds files and is not an earlier export (it has no {EXPORT_MARKER}); "
                    "export to a new directory, so that nothing in it is overwritten")
        if stray := not_exported(out):
            return (f"{out}: an earlier export that also holds {stray}, which an export does not write and the next "
                    "one would delete with the rest (an export replaces its directory whole); move it out of the "
                    "export, or export to a new directory")
    return None


def exported_names(out: Path) -> set[str]:
    """The file names the export in ``out`` wrote, as its marker lists them (none
    for a marker from before the list, or one that is not JSON)."""
    try:
        recorded = json.loads((out / EXPORT_MARKER).read_text(encoding="utf-8")).get("files")
    except (OSError, ValueError, AttributeError):  # unreadable, not JSON, not a JSON object
        return set()
    return {name for name in recorded if isinstance(name, str)} if isinstance(recorded, list) else set()


def not_exported(out: Path) -> str | None:
    """The first entry (by name) of the earlier export ``out`` that no export
    writes, such as a user's notes or an analysis report, or None: replacing the
    export whole would delete it."""
    listed = exported_names(out)
    for path in sorted(out.iterdir()):
        if path.is_dir() or not (path.name in listed or any(fnmatch.fnmatchcase(path.name, pattern)
                                                            for pattern in EXPORT_FILE_PATTERNS)):
            return path.name
    return None


def vocabulary_problem(tokenizer_dir: Path) -> str | None:
    """Why ``tokenizer_dir`` (a run's ``tokenizer/``) cannot go with an export, or None."""
    if holds_a_vocabulary(tokenizer_dir):
        return None
    return (f"{tokenizer_dir}: {NO_VOCABULARY}: a model exported without it cannot tokenize; copy the dataset's "
            "tokenizer/ files into it")


def export_student(student: BertForPreTraining, out: Path, tokenizer_dir: Path, source: str | os.PathLike,
                   managed: bool = False) -> Path:
    """Save ``student`` as fp32 weights with the tokenizer files of ``tokenizer_dir``
    and :data:`EXPORT_MARKER` naming ``source`` (where the weights came from).

    Written in a directory beside ``out`` and renamed into place, so ``out`` is a
    whole export or as it was, never half of one; an earlier export there is
    replaced whole (no stale weight shard survives). ``out`` must pass
    :func:`export_target_problem` unless ``managed``: the run's own ``export`` and
    ``initial`` directories, which runs older than the marker wrote without it.

    A write that fails (a full disk: safetensors raises its own ``SafetensorError``)
    is an OSError naming ``out`` (:func:`tacl_scale.files.write_failed`), which this
    command and training each say in one line; nothing is left beside ``out``."""
    if next(student.parameters()).dtype != torch.float32:
        raise ValueError("export_student takes fp32 weights; export a checkpoint for a half-precision run")
    out = Path(os.path.abspath(out))  # "." and ".." have no name to write beside
    if not managed and (problem := export_target_problem(out)):
        raise ValueError(problem)
    if problem := vocabulary_problem(tokenizer_dir):
        raise ValueError(problem)
    partial, previous = out.with_name(f".{out.name}.partial"), out.with_name(f".{out.name}.previous")
    _restore(previous, out)  # an export killed (SIGKILL) between its two renames left the old one there
    for leftover in (partial, previous):
        shutil.rmtree(leftover, ignore_errors=True)
    try:
        partial.mkdir(parents=True)
        student.save_pretrained(partial)
        for path in sorted(tokenizer_dir.iterdir()):
            if path.is_file():
                shutil.copy2(path, partial / path.name)
        # The files it wrote, so that the next export tells them from files added since (not_exported).
        files = sorted({path.name for path in partial.iterdir()} | {EXPORT_MARKER})
        (partial / EXPORT_MARKER).write_text(json.dumps({"source": str(source), "files": files}, indent=2) + "\n",
                                             encoding="utf-8")
        # safetensors writes its file owner-only (0600); an export is shared like the rest of it.
        mask = os.umask(0)
        os.umask(mask)
        for path in partial.iterdir():
            path.chmod(0o666 & ~mask)
        with uninterrupted():
            if out.exists():
                os.replace(out, previous)
            os.replace(partial, out)
    except (OSError, SafetensorError) as err:
        raise write_failed(err, out, "the export", scratch=partial) from err
    finally:
        _restore(previous, out)  # the second rename failed: the earlier export, not none
        shutil.rmtree(partial, ignore_errors=True)
        shutil.rmtree(previous, ignore_errors=True)
    return out


def _restore(previous: Path, out: Path) -> None:
    """Put an earlier export set aside at ``previous`` back at ``out`` when no new
    one took its place."""
    if previous.is_dir() and not out.exists():
        os.replace(previous, out)


def _resolve(ckpt: Path) -> tuple[Path, Path, ReadLock]:
    """(run directory, checkpoint directory, its read lock, held) of a CKPT
    argument, verified while locked, so rotation cannot remove it until the lock
    is released: a run directory's newest checkpoint whose files match their
    record (said when it is not the newest one; the newest again when one is
    rotated away before it is locked), or the named checkpoint, refused if it is
    not there or does not verify. ``RUN/checkpoints`` and DeepSpeed's
    ``RUN/checkpoints/latest`` name the run (its newest checkpoint)."""
    run_dir = run_of_checkpoint(ckpt)
    if run_dir is None:
        raise ValueError(f"{ckpt}: neither a run directory nor a checkpoint inside one ({RUN_FILE} not found)")
    if run_dir == ckpt.parent.parent and not (ckpt.name == LATEST and ckpt.is_file()):
        return run_dir, *_lock_named(ckpt)
    root = RunDir(run_dir).checkpoints
    lock, problems = lock_newest_verified(root)
    if lock is None:
        detail = f": {problems[0]}" if problems else ""
        raise ValueError(f"{run_dir}: no complete checkpoint under {root}{detail}")
    if problems:
        log.warning("%s: exporting %s, an older checkpoint than the newest, which does not verify: %s",
                    run_dir, lock.directory.name, problems[0])
    log.info("exporting %s", lock.directory)
    return run_dir, lock.directory, lock


def run_of_checkpoint(path: Path) -> Path | None:
    """The run directory a CKPT argument names: the run itself, its ``checkpoints/``,
    DeepSpeed's ``checkpoints/latest`` (its newest checkpoint) or one checkpoint of
    it; ``None`` when it names none."""
    if RunDir(path).has_record():
        return path
    run_dir = path.parent if path.name == CHECKPOINTS_DIR else path.parent.parent
    return run_dir if RunDir(run_dir).has_record() else None


def _lock_named(ckpt: Path) -> tuple[Path, ReadLock]:
    """(``ckpt``, its read lock, held) of a checkpoint named by its directory,
    refused if it is not there or does not verify."""
    lock = ReadLock(ckpt)
    try:
        lock.acquire()
    except CheckpointGone:
        present = tags(ckpt.parent)
        now = f"; the run's newest now: {present[-1]}" if present else ""
        raise ValueError(f"{ckpt}: no such checkpoint (a training run keeps only its newest --keep-last)"
                         f"{now}") from None
    try:
        if (ckpt / CHECKPOINT_RECORD).is_file():
            problem = record_problem(ckpt)
            if problem is not None:
                raise ValueError(f"{ckpt}: does not verify, not exported: {problem}")
        else:
            if problem := unrecorded_problem(ckpt):
                raise ValueError(f"{ckpt}: does not verify, not exported: {problem}")
            log.warning("%s has no %s (saved before checkpoints were verified): exported with its torch files "
                        "checked whole only", ckpt, CHECKPOINT_RECORD)
    except BaseException:
        lock.release()
        raise
    return ckpt, lock


def export_checkpoint(ckpt: Path, out: Path) -> Path:
    """Write checkpoint ``ckpt``'s student (fp32 master weights) to ``out``."""
    if problem := export_target_problem(out):  # before the seconds the weights take to read
        raise ValueError(problem)
    run_dir, ckpt_dir, lock = _resolve(ckpt)
    try:  # read under the lock; the weights in memory, rotation may have the checkpoint
        run = RunDir(run_dir)
        if run.tokenizer.is_dir() and (problem := vocabulary_problem(run.tokenizer)):
            raise ValueError(problem)  # before the seconds the weights take to read
        if not any(ckpt_dir.glob("*optim_states.pt")):
            raise ValueError(f"{ckpt_dir}: no ZeRO optimizer states (*optim_states.pt): not a complete checkpoint")
        weights = master_weights(ckpt_dir)
    finally:
        lock.release()
    return export_weights(weights, run_dir, out, ckpt_dir)


def export_weights(weights: dict[str, torch.Tensor], run_dir: Path, out: Path, source: Path | None = None,
                   managed: bool = False) -> Path:
    """Write the student of run ``run_dir`` with these fp32 ``weights`` to ``out``
    (its ``BertConfig`` from ``run.json``, its tokenizer from the run directory);
    ``source`` names where the weights came from, in errors and the export's
    marker; ``managed`` as :func:`export_student`."""
    source = source or run_dir
    run = RunDir(run_dir)
    record = run.read_record()
    if record.student_config is not None:
        # Imported here: 2 s that a refusal of the command line or of OUT need not wait for.
        from transformers import BertConfig, BertForPreTraining

        # Built on the meta device and given the weights as they are: a random
        # initialisation of BERT-base alone takes seconds, for values thrown away.
        with torch.device("meta"):
            student = BertForPreTraining(BertConfig.from_dict(record.student_config))
        embeddings = student.bert.embeddings
        embeddings.position_ids = torch.arange(student.config.max_position_embeddings).expand((1, -1))
        embeddings.token_type_ids = torch.zeros(embeddings.position_ids.size(), dtype=torch.long)
    else:  # runs written before run.json kept the config
        from .pretrained import load_student

        student = load_student(record.model)
    missing, unexpected = student.load_state_dict(weights, strict=False, assign=True)
    student.tie_weights()
    # Tied or buffer-like entries (the MLM decoder shares the word embeddings) may be absent.
    missing = [k for k in missing if not k.endswith(("decoder.weight", "position_ids", "token_type_ids"))]
    still_meta = [name for name, p in student.named_parameters() if p.is_meta]
    if missing or unexpected or still_meta:
        raise ValueError(f"{source}: weights do not fit the run's BertConfig: missing {(missing or still_meta)[:5]}, "
                         f"unexpected {unexpected[:5]}")
    tokenizer_dir = run.tokenizer
    if not tokenizer_dir.is_dir():  # runs before the snapshot: from where the first job took it
        tokenizer_dir = snapshot_tokenizer(record.tokenizer_source, run)
    return export_student(student.float(), out, tokenizer_dir, source, managed)


@ctrl_c_ends
def main(argv: list[str] | None = None) -> int:
    p = make_parser("python -m tacl_scale.export", __doc__)
    p.add_argument("checkpoint", type=Path, help="run directory or checkpoint directory")
    p.add_argument("output", type=Path, help="HF model directory to write")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s: %(message)s")
    from transformers.utils import logging as transformers_logging

    # Its "Writing model shards" bar is carriage-return noise in a job's log, as in training.
    transformers_logging.disable_progress_bar()
    try:
        out = export_checkpoint(args.checkpoint, args.output)
    except (ValueError, KeyError) as err:
        return error_exit(str(err))
    except OSError as err:
        return error_exit(os_error_line(err, args.output))
    print(f"exported {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
