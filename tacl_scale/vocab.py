"""What a dataset and a model must agree on: the id of every token. A tokenizer's
vocabulary is read as ``token → id`` whatever files carry it (a WordPiece
``vocab.txt``, a HF ``tokenizer.json``, a SentencePiece ``.model``), so two
tokenizers compare equal exactly when they give every token the same id."""

from __future__ import annotations

import json
import re
from pathlib import Path

from .files import first_line, json_object

# The files of a Hugging Face tokenizer folder, named here once. Its vocabulary
# (token → id), most specific first; a SentencePiece ``*.model`` is one too.
VOCABULARY_FILES = ("tokenizer.json", "vocab.txt")
# The tokens a slow tokenizer's vocab.txt lacks (token → id), which AutoTokenizer still
# reads: an id past vocab.txt's lines, [UNK] to a copy without it.
ADDED_TOKENS_FILE = "added_tokens.json"
# Settings beside the vocabulary: JSON objects, which AutoTokenizer reads (and a run
# copies into its tokenizer/, an export ships).
SETTINGS_FILES = ("tokenizer_config.json", "special_tokens_map.json", ADDED_TOKENS_FILE)
# A folder holding one of these is a tokenizer AutoTokenizer loads (a dataset build
# reads it so); without, its vocab.txt or SentencePiece model alone.
AUTO_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
# A vocabulary's reserved rows, not words: BERT's [CLS], [unused0], ...; <S>, <T> of
# bert-base-chinese, <pad> of a SentencePiece one.
_PLACEHOLDER = re.compile(r"^(\[[^\]]*\]|<[^>]*>)$")


class VocabularyError(ValueError):
    """A tokenizer file that does not parse (an HTML error page saved as
    tokenizer.json, a vocab.txt in Latin-1); the message names the file."""


def vocabulary(location: str | Path) -> dict[str, int] | None:
    """``token → id`` of the tokenizer at ``location``: a vocab.txt, a SentencePiece
    .model, or a directory holding ``tokenizer.json``, ``vocab.txt`` or a ``*.model``;
    None for a directory with no tokenizer (a model given without one). A
    vocab.txt's repeated line maps to its last id, as the tokenizer does. A file
    that does not parse is a :class:`VocabularyError` naming it (an unreadable one
    is the OSError of reading it)."""
    location = Path(location)
    if location.is_dir():
        for name in VOCABULARY_FILES:
            if (location / name).is_file():
                return vocabulary(location / name)
        models = sorted(location.glob("*.model"))
        return vocabulary(models[0]) if models else None
    if location.name == "tokenizer.json":
        from tokenizers import Tokenizer

        try:
            return Tokenizer.from_file(str(location)).get_vocab(with_added_tokens=True)
        except Exception as err:  # noqa: BLE001 - the library raises a bare Exception ("expected value at line 1")
            raise VocabularyError(f"{location}: not a tokenizer file ({first_line(err)})") from err
    if location.suffix == ".model":
        import sentencepiece as spm

        try:
            model = spm.SentencePieceProcessor(model_file=str(location))
        except (RuntimeError, OSError, ValueError) as err:  # a file of another kind ("ParseFromArray failed")
            raise VocabularyError(f"{location}: not a SentencePiece model ({first_line(err)})") from err
        return {model.id_to_piece(i): i for i in range(model.get_piece_size())}
    ids: dict[str, int] = {}
    try:
        with open(location, encoding="utf-8") as lines:
            for index, line in enumerate(lines):
                ids[line.rstrip("\r\n")] = index
    except UnicodeDecodeError as err:
        raise VocabularyError(f"{location}: not a tokenizer file ({not_utf8(location)})") from err
    return ids


def id_count(directory: str | Path) -> int | None:
    """How many ids the tokenizer folder ``directory`` gives (its highest id + 1), read
    as a dataset build reads such a folder: a folder with a ``tokenizer.json`` or a
    ``tokenizer_config.json`` through AutoTokenizer, which adds the tokens of
    ``added_tokens.json`` and any special token of its settings the vocabulary lacks;
    else its :func:`vocabulary` (a bare vocab.txt, a SentencePiece model). 0 without a
    vocabulary; None where AutoTokenizer cannot load it (what is wrong is said where
    the folder is loaded)."""
    directory = Path(directory)
    if any((directory / name).is_file() for name in AUTO_TOKENIZER_FILES):
        from transformers import AutoTokenizer

        try:
            backend = AutoTokenizer.from_pretrained(str(directory), local_files_only=True).backend_tokenizer
            ids = backend.get_vocab(with_added_tokens=True).values()
        except Exception:  # noqa: BLE001 - the library raises bare Exceptions, OSError, ValueError, AttributeError
            return None
    else:
        ids = (vocabulary(directory) or {}).values()
    return max(ids) + 1 if ids else 0


def ids_short_of(folder: str | Path, vocab_size: int) -> int | None:
    """How many ids the tokenizer folder ``folder`` gives (:func:`id_count`) where that
    is fewer than ``vocab_size`` and it has no ``added_tokens.json``: a copy made
    before that file travelled with the rest, which lacks the tokens it adds to a
    vocab.txt. None otherwise: a folder with the file is whole (a count that differs
    there is another transformers version's), and one AutoTokenizer cannot load or
    without a vocabulary is refused where it is read."""
    if vocab_size <= 0 or (Path(folder) / ADDED_TOKENS_FILE).is_file():
        return None
    given = id_count(folder)
    return given if given and given < vocab_size else None


def not_utf8(path: Path) -> str:
    """Where the text file ``path`` stops being UTF-8, in words ("line 7 is not
    UTF-8 text (byte 0xe9)"); UnicodeDecodeError counts from its chunk, not the file."""
    data = path.read_bytes()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        return f"line {line} is not UTF-8 text: byte 0x{data[err.start]:02x}"
    return "not UTF-8 text"


def model_vocabulary(directory: str | Path) -> dict[str, int] | None:
    """:func:`vocabulary` of the model directory ``directory`` (None where it holds
    no tokenizer), once every tokenizer file in it is known to be usable: a
    ``tokenizer.json`` that parses, a ``vocab.txt`` of UTF-8 text, a SentencePiece
    ``.model``, settings files (``tokenizer_config.json``, ...) that are JSON objects;
    a :class:`VocabularyError` naming the first that is not (an unreadable one is the
    OSError of reading it). Checked before the library loads them, whose errors name
    no file (``Exception: expected value at line 1 column 1``, a UnicodeDecodeError);
    :func:`tokenizer_files_problem` says it in one line."""
    directory = Path(directory)
    present = [directory / name for name in VOCABULARY_FILES if (directory / name).is_file()]
    vocabularies = [vocabulary(path) for path in present or sorted(directory.glob("*.model"))[:1]]
    for path in (directory / name for name in SETTINGS_FILES):
        if path.is_file():
            try:
                settings = json.loads(path.read_text(encoding="utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as err:
                raise VocabularyError(f"{path}: not a tokenizer file ({first_line(err)})") from err
            if not isinstance(settings, dict):
                raise VocabularyError(f"{path}: not a tokenizer file (a JSON {type(settings).__name__}, not an object)")
    return vocabularies[0] if vocabularies else None


def tokenizer_files_problem(directory: str | Path) -> str | None:
    """Why the tokenizer files of the model directory ``directory`` cannot be used
    (:func:`model_vocabulary`'s refusal), in one line naming the file, or None (also
    for a directory holding none). Training asks it of ``--model``; an analysis
    before AutoTokenizer."""
    try:
        model_vocabulary(directory)
    except (VocabularyError, OSError) as err:
        return tokenizer_error_line(err, directory)
    return None


def tokenizer_error_line(err: VocabularyError | OSError, directory: str | Path) -> str:
    """:func:`model_vocabulary`'s refusal of ``directory`` in one line naming the file."""
    if isinstance(err, VocabularyError):
        return str(err)
    return f"{err.filename or directory}: cannot read the tokenizer file: {err.strerror or err}"


def is_placeholder(token: str) -> bool:
    """Whether ``token`` is a reserved row of a vocabulary rather than a word (a
    bracketed ``[CLS]``, ``[unused0]``, an angled ``<S>``, ``<pad>``): what masking
    never draws as a random replacement, and what no casing rule counts."""
    return _PLACEHOLDER.match(token) is not None


def has_capitals(vocab: dict[str, int]) -> bool:
    """Whether a vocabulary is a cased one (bert-base-cased: thousands of capitalised
    words), not an uncased one, which still carries a few upper-case strays
    (bert-base-chinese: 8 of 21k): over 1% of its words (its tokens that are not
    :func:`is_placeholder`) hold an upper-case letter. The one rule for both: the
    build lower-cases text for a vocab.txt without them, training holds a model's
    tokenizer to it."""
    words = [token for token in vocab if not is_placeholder(token)]
    return sum(token.lower() != token for token in words) > 0.01 * max(len(words), 1)


def tokenizer_lowercase(directory: str | Path) -> tuple[bool, str] | None:
    """Whether the tokenizer of the model directory ``directory`` lower-cases text,
    with what says so (``"tokenizer_config.json do_lower_case true"``), or None where
    its files say nothing. ``tokenizer_config.json``'s ``do_lower_case`` first, as
    AutoTokenizer applies it over ``tokenizer.json``'s normalizer; then that normalizer
    (a BertNormalizer's ``lowercase``, or a Lowercase step). Files that do not parse
    say nothing here: :func:`tokenizer_files_problem` names them."""
    directory = Path(directory)
    settings = json_object(directory / "tokenizer_config.json")
    if settings is not None and isinstance(settings.get("do_lower_case"), bool):
        value = settings["do_lower_case"]
        return value, f"tokenizer_config.json do_lower_case {json.dumps(value)}"
    tokenizer = json_object(directory / "tokenizer.json")
    if tokenizer is not None and (value := _normalizer_lowercase(tokenizer.get("normalizer"))) is not None:
        return value, f"tokenizer.json's normalizer lowercase {json.dumps(value)}"
    return None


def _normalizer_lowercase(normalizer: object) -> bool | None:
    """Whether a ``tokenizer.json`` normalizer lower-cases: a BertNormalizer says so
    in its ``lowercase``, a Lowercase step does; None where neither is in it (a
    normalizer of another kind says nothing a vocabulary's casing could be held to)."""
    if not isinstance(normalizer, dict):
        return None
    kind = normalizer.get("type")
    if kind == "BertNormalizer" and isinstance(normalizer.get("lowercase"), bool):
        return normalizer["lowercase"]
    if kind == "Lowercase":
        return True
    if kind == "Sequence":
        found = [_normalizer_lowercase(step) for step in normalizer.get("normalizers") or ()]
        return True if True in found else (False if False in found else None)
    return None


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
