"""A run's inputs checked against one another before anything is written: each
dataset against the model (the same token ids, whatever files the model keeps its
tokenizer in; text lower-cased as its tokenizer does; sequences within its positions;
sentence pairs only where it has a second token type) and against the objectives
(pairs for NSP, masks for MLM and TaCL). Each refusal is a :class:`TrainError`
naming the dataset or the model folder and the fix."""

from __future__ import annotations

from pathlib import Path

from transformers import BertForPreTraining

from .config import TrainConfig
from .data import PretrainDataset
from .errors import TrainError
from .files import os_error_line
from .vocab import (
    VocabularyError,
    first_difference,
    has_capitals,
    model_vocabulary,
    tokenizer_error_line,
    tokenizer_lowercase,
    vocabulary,
)


def check_data_and_model(datasets: list[PretrainDataset], student: BertForPreTraining,
                         model_path: str) -> list[str]:
    """Refuse a dataset whose tokenizer does not match the model's (token by token,
    whatever files the model directory holds it in, and in lower-casing where they
    say), or whose sequences are longer than the model's positions, or whose
    sentence pairs need a second token type the model has not; a model directory
    whose tokenizer files do not parse (the run copies them, and its export ships
    them); and, for a model directory without a tokenizer, a dataset vocabulary of
    another size than the model's embeddings. Returns what the caller should warn
    about, once: such a directory's tokenizer taken to be the dataset's."""
    notes: list[str] = []
    first = datasets[0].manifest.tokenizer
    for ds in datasets[1:]:
        if ds.manifest.tokenizer.sha256 != first.sha256:
            tok = ds.manifest.tokenizer
            raise TrainError(f"{ds.path}: built with another tokenizer than {datasets[0].path} ({tok.file}, sha256 "
                             f"{tok.sha256[:12]}…, against {first.file}, sha256 {first.sha256[:12]}…): the same ids "
                             "would be other tokens; rebuild it with the other's --tokenizer")
    model_vocab = None
    pretrained = Path(model_path).is_dir()  # a BertConfig JSON: a random init, whose tokenizer is the dataset's
    if pretrained:
        try:
            model_vocab = model_vocabulary(model_path)
        except (VocabularyError, OSError) as err:
            raise TrainError(tokenizer_error_line(err, model_path)) from err
    if pretrained and model_vocab is None:
        notes.append(_no_tokenizer_note(datasets[0], student.config.vocab_size, model_path))
    if model_vocab is not None:
        location = first.location(datasets[0].path)
        if not location.exists():
            raise TrainError(f"{datasets[0].path}: its tokenizer {location} is gone, so it cannot be checked against "
                             f"the model's: rebuild the dataset (datasets of format 3 carry their tokenizer)")
        difference = first_difference(_read_vocabulary(location) or {}, model_vocab)
        if difference is not None:
            token, in_data, in_model = difference
            raise TrainError(
                f"{datasets[0].path} was tokenized with {first.file}, and the tokenizer of {model_path} gives other "
                f"ids ({token!r}: {in_data} in the dataset, {in_model} in the model): rebuild the dataset with "
                f"--tokenizer {model_path}")
    if pretrained:  # the same ids, and the text lower-cased as the model's tokenizer does
        _check_lowercase(datasets, model_path, model_vocab)
    config = student.config
    if first.vocab_size > config.vocab_size:
        raise TrainError(f"{datasets[0].path}: vocabulary of {first.vocab_size} tokens, the model has "
                         f"{config.vocab_size} embeddings ({model_path})")
    for ds in datasets:
        if ds.manifest.max_seq_len > config.max_position_embeddings:
            raise TrainError(f"{ds.path}: sequences up to {ds.manifest.max_seq_len} tokens, the model "
                             f"has {config.max_position_embeddings} positions ({model_path})")
        if ds.manifest.instance_kind == "pairs" and config.type_vocab_size < 2:
            # An IndexError in the embedding at the first step, after run.json was written.
            settings = Path(model_path) if Path(model_path).is_file() else Path(model_path) / "config.json"
            raise TrainError(f"{settings}: type_vocab_size {config.type_vocab_size}, and {ds.path} holds sentence "
                             "pairs, whose second segment is token type 1: set type_vocab_size 2 (BERT's), or train "
                             "on a single-segment dataset")
    return notes


def _no_tokenizer_note(dataset: PretrainDataset, vocab_size: int, model_path: str) -> str:
    """The warning for a pretrained ``model_path`` whose folder holds no tokenizer:
    the dataset's is then taken to be the model's (the run's ``tokenizer/`` and its
    export get it, :func:`~tacl_scale.run_tokenizer.tokenizer_source`). Refused when its
    vocabulary has another size than the model's embeddings: it cannot be the one the
    model was trained with (a 4000-token vocabulary against a 30522-token model's
    weights trained, and exported the 4000 lines beside ``vocab_size 30522``)."""
    tok = dataset.manifest.tokenizer
    # Larger than the embeddings: ids past them. Much smaller: another vocabulary (a few
    # rows more are a checkpoint's padding, e.g. 30522 tokens in 30528 rows).
    if tok.vocab_size > vocab_size or tok.vocab_size < 0.9 * vocab_size:
        raise TrainError(
            f"{model_path}: holds no tokenizer (vocab.txt, tokenizer.json or a sentencepiece .model), and "
            f"{dataset.path} was tokenized with {tok.file}, a vocabulary of {tok.vocab_size} tokens, where the model has "
            f"{vocab_size} (its config.json vocab_size): not the vocabulary its weights were trained with; put the "
            f"model's own tokenizer files in {model_path} and rebuild the dataset with --tokenizer {model_path}")
    return (f"{model_path} holds no tokenizer: {dataset.path}'s ({tok.file}, {tok.vocab_size} tokens; the model's "
            f"vocab_size is {vocab_size}) is taken to be the model's, and the run's tokenizer/ and its export get it; "
            "put the model's own tokenizer files in the folder if it is another")


def _check_lowercase(datasets: list[PretrainDataset], model_path: str, model_vocab: dict[str, int] | None) -> None:
    """Refuse a dataset lower-cased otherwise than the model directory's tokenizer
    says it lower-cases, where that loses what the model knows: text kept in its case
    for a model that lower-cases (its vocabulary has no capitals: they became [UNK]),
    or text lower-cased for a model with a cased vocabulary (bert-base-cased). The
    run's tokenizer and its export are the model's, and would tokenize text otherwise
    than the data the run trained on. A model that keeps the case of an uncased
    vocabulary (bert-base-chinese's tokenizer_config.json says do_lower_case false)
    takes lower-cased data as its own: nothing is lost. Nothing either where one
    says nothing (a SentencePiece dataset, a folder without the setting)."""
    said = tokenizer_lowercase(model_path)
    if said is None:
        return
    lowercase, source = said
    cased_vocabulary = model_vocab is not None and has_capitals(model_vocab)
    for ds in datasets:
        built = ds.manifest.tokenizer.lowercase
        if built is None or built == lowercase or (built and not cased_vocabulary):
            continue
        fix = "without --no-lowercase" if lowercase else "with --no-lowercase"
        raise TrainError(
            f"{ds.path} was tokenized {'with' if built else 'without'} lower-casing, and the tokenizer of {model_path} "
            f"{'lower-cases' if lowercase else 'keeps the case'} ({source}): the run's tokenizer and export, the "
            f"model's, would tokenize text otherwise than the data it trained on; rebuild the dataset {fix}")


def _read_vocabulary(location: str | Path) -> dict[str, int] | None:
    """:func:`~tacl_scale.vocab.vocabulary` of ``location``, its refusal a :class:`TrainError`."""
    try:
        return vocabulary(location)
    except VocabularyError as err:
        raise TrainError(str(err)) from err
    except OSError as err:
        raise TrainError(f"{os_error_line(err, location)}: the tokenizer cannot be read") from err


def check_data_and_objectives(datasets: list[PretrainDataset], config: TrainConfig) -> None:
    """Refuse objectives a dataset cannot feed: NSP on single-segment instances (no
    sentence pairs), MLM or TaCL on a dataset without static masks unless
    ``--dynamic-masking`` makes them."""
    objectives = config.objective.objectives
    for ds in datasets:
        kind = ds.manifest.instance_kind
        if "nsp" in objectives and kind != "pairs":
            raise TrainError(f"{ds.path}: {kind} instances have no sentence pairs for nsp: train it with "
                             "--objectives mirror (or mlm/tacl with --dynamic-masking), or build with pairs")
        needs_masks = [o for o in ("mlm", "tacl") if o in objectives]
        if needs_masks and not ds.manifest.static_masks and not config.data.dynamic_masking:
            raise TrainError(f"{ds.path}: built without static masks, which {','.join(needs_masks)} needs: add "
                             "--dynamic-masking")
