"""The run's own copy of its tokenizer, ``RUN_DIR/tokenizer`` (which every export
ships): where it comes from (the model folder's files, else the dataset's copy), and
copying it once, so that an export never depends on the original paths."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from .data.manifest import TOKENIZER_DIR, TOKENIZER_FILES, holds_a_vocabulary
from .markers import RUN_FILE
from .run_dir import RunDir, TokenizerSource

if TYPE_CHECKING:
    from .data import PretrainDataset


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
        directory = Path(source.directory)
        # A SentencePiece model is a vocabulary too (holds_a_vocabulary): without it the copy had none.
        for path in [*(directory / name for name in TOKENIZER_FILES), *sorted(directory.glob("*.model"))]:
            if path.is_file():
                shutil.copy2(path, out / path.name)
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


def snapshot_tokenizer(source: TokenizerSource, run: RunDir, new_run: bool = False, data_ids: int = 0) -> Path:
    """Copy the run's tokenizer files to ``RUN_DIR/tokenizer`` once (written to a
    temporary folder, then renamed), so exports never depend on the original paths.
    A ``new_run`` (nothing in ``run.json`` yet) that finds the folder there already
    (a first job stopped before recording itself, requeued) replaces it with its own
    copy only where it is the same tokenizer as ``source``'s (the same files, the
    same ids in each vocabulary file, lower-casing the same): one of another model,
    or a folder that is not a run's, is refused, never deleted. ``data_ids``: how many
    ids the run's data may hold (its dataset's ``vocab_size``); a tokenizer, the run's
    copy or this job's, that gives fewer is refused (:func:`missing_ids_problem`)."""
    target = run.tokenizer
    if target.is_dir() and not new_run:
        if problem := missing_ids_problem(target, data_ids):
            raise ValueError(problem)
        return target
    tmp = run.path / f".{TOKENIZER_DIR}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:  # nothing half-copied or refused stays in the run
        try:
            write_tokenizer(source, tmp)
        except OSError as err:
            raise ValueError(f"{target}: the run's tokenizer could not be copied into it ({err}): copy the "
                             f"dataset's tokenizer/ files to {target}") from err
        # A copy of one vocabulary file is what the dataset was built from; a folder's may lack some of it.
        if source.directory is not None and (
                problem := missing_ids_problem(tmp, data_ids, copied=(Path(source.directory), target))):
            raise ValueError(problem)
        if not (target.exists() or target.is_symlink()):
            os.replace(tmp, target)
            return target
        if problem := _other_tokenizer(target, tmp):
            raise ValueError(f"{target}: {problem}, and no {RUN_FILE} records a run here: a first job that stopped "
                             "before recording itself left it (under another --model?), or it is not a run's "
                             f"folder; remove {target}, or choose another --output")
        # The same tokenizer: this job's copy in its place, as this version writes it.
        aside = run.path / f".{TOKENIZER_DIR}.replaced"
        shutil.rmtree(aside, ignore_errors=True)
        os.replace(target, aside)
        os.replace(tmp, target)
        shutil.rmtree(aside)
        return target
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def missing_ids_problem(folder: Path, data_ids: int, copied: tuple[Path, Path] | None = None) -> str | None:
    """Why the tokenizer folder ``folder`` cannot be a run's whose data hold ids below
    ``data_ids``, or None (``copied``: the source and the run's folder ``folder`` is
    this job's copy for, which the words name instead): a copy without its
    added_tokens.json gives fewer ids (:func:`~tacl_scale.vocab.ids_short_of`), so the
    export would read the tokens of the others as [UNK]."""
    from .vocab import ADDED_TOKENS_FILE, ids_short_of

    if (given := ids_short_of(folder, data_ids)) is None:
        return None
    fix_in = folder if copied is None else copied[0]
    named = folder if copied is None else f"{copied[0]} (the run's tokenizer, copied into {copied[1]})"
    return (f"{named}: gives ids 0–{given - 1}, and the run's data hold ids up to {data_ids - 1} (its dataset's "
            f"vocab_size {data_ids}): an export would read their tokens as [UNK]. A copy of a tokenizer made before "
            f"tacl-scale copied {ADDED_TOKENS_FILE} lacks the tokens that file adds: copy it from the tokenizer the "
            f"dataset was built from (its manifest's tokenizer.source) into {fix_in}")


def _other_tokenizer(found: Path, wanted: Path) -> str | None:
    """How the tokenizer folder ``found`` differs from ``wanted`` (a run's copy of
    its tokenizer), in words, or None: the same files, the same token ids in each
    vocabulary file (an export ships them all), lower-casing alike. Settings files
    that say no id (``tokenizer_config.json``, ``special_tokens_map.json``) may be
    there in one and not the other: which of them ``save_pretrained`` writes for a
    vocab.txt depends on the transformers version a requeued job runs under."""
    from .files import json_object
    from .vocab import (
        ADDED_TOKENS_FILE,
        SETTINGS_FILES,
        VOCABULARY_FILES,
        VocabularyError,
        first_difference,
        tokenizer_lowercase,
        vocabulary,
    )

    if not found.is_dir() or found.is_symlink():
        return "not a folder a run wrote"
    optional = set(SETTINGS_FILES) - {ADDED_TOKENS_FILE}
    held_names = {path.name for path in found.iterdir()} - optional
    own_names = {path.name for path in wanted.iterdir()} - optional
    if extra := sorted(held_names - own_names):
        return f"holds {extra[0]}, which this run's tokenizer has not"
    if missing := sorted(own_names - held_names):
        return f"holds no {missing[0]}, which this run's tokenizer has"
    for own_file in sorted(wanted.iterdir()):
        if own_file.name not in (*VOCABULARY_FILES, ADDED_TOKENS_FILE) and own_file.suffix != ".model":
            continue
        try:
            if own_file.name == ADDED_TOKENS_FILE:  # token → id, as the tokenizer reads it
                held, own = (json_object(folder / own_file.name) for folder in (found, wanted))
            else:
                held, own = vocabulary(found / own_file.name), vocabulary(own_file)
        except (VocabularyError, OSError) as err:
            return f"holds tokenizer files that cannot be read ({err})"
        if (difference := first_difference(own or {}, held or {})) is not None:
            token, in_run, in_found = difference
            return (f"holds another tokenizer than this run's ({own_file.name}: {token!r} is id {in_found} there, "
                    f"{in_run} in this run's)")

    def lowercases(folder: Path) -> bool | None:  # the setting, wherever the folder says it
        said = tokenizer_lowercase(folder)
        return None if said is None else said[0]

    if lowercases(found) != lowercases(wanted):
        return "holds a tokenizer that lower-cases otherwise than this run's"
    return None
