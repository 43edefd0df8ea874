"""What a dataset and a model must agree on: the id of every token. A tokenizer's
vocabulary is read as ``token → id`` whatever files carry it (a WordPiece
``vocab.txt``, a HF ``tokenizer.json``, a SentencePiece ``.model``), so two
tokenizers compare equal exactly when they give every token the same id."""

from __future__ import annotations

from pathlib import Path

# What a model directory may hold its tokenizer as, most specific first.
_DIRECTORY_FILES = ("tokenizer.json", "vocab.txt")


def vocabulary(location: str | Path) -> dict[str, int] | None:
    """``token → id`` of the tokenizer at ``location``: a vocab.txt, a SentencePiece
    .model, or a directory holding ``tokenizer.json``, ``vocab.txt`` or a ``*.model``;
    None for a directory with no tokenizer (a model given without one). A
    vocab.txt's repeated line maps to its last id, as the tokenizer does."""
    location = Path(location)
    if location.is_dir():
        for name in _DIRECTORY_FILES:
            if (location / name).is_file():
                return vocabulary(location / name)
        models = sorted(location.glob("*.model"))
        return vocabulary(models[0]) if models else None
    if location.name == "tokenizer.json":
        from tokenizers import Tokenizer

        return Tokenizer.from_file(str(location)).get_vocab(with_added_tokens=True)
    if location.suffix == ".model":
        import sentencepiece as spm

        model = spm.SentencePieceProcessor(model_file=str(location))
        return {model.id_to_piece(i): i for i in range(model.get_piece_size())}
    ids: dict[str, int] = {}
    with open(location, encoding="utf-8") as lines:
        for index, line in enumerate(lines):
            ids[line.rstrip("\r\n")] = index
    return ids


def first_difference(a: dict[str, int], b: dict[str, int]) -> tuple[str, int | None, int | None] | None:
    """A token the two vocabularies disagree on (the one with the smallest id; of
    two with the same, the one with the smaller id in ``a``, then by text: the same
    one every time), with its id in each (None where it is missing), or None when
    they are equal."""
    if a == b:
        return None
    missing = max(len(a), len(b))  # sorts after every id

    def order(t: str) -> tuple[int, int, str]:
        return min(i for i in (a.get(t), b.get(t)) if i is not None), a.get(t, missing), t

    token = min((t for t in a.keys() | b.keys() if a.get(t) != b.get(t)), key=order)
    return token, a.get(token), b.get(token)
