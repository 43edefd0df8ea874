"""Tokenizers for data preparation: a WordPiece ``vocab.txt`` (HF fast tokenizer), a
HF model/tokenizer directory, or a SentencePiece ``.model``.

Every kind is reduced to the same small interface, :class:`PretrainTokenizer`, which
turns the sentences of a document into token ids plus a per-token "starts a word"
flag (for whole-word masking), and knows its special ids and its fingerprint
(sha256 of the vocabulary file), which the dataset manifest records so training can
refuse a model whose vocabulary differs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np

from tacl_scale.data.integrity import file_checksum
from tacl_scale.data.manifest import TOKENIZER_DIR, TOKENIZER_FILES, SpecialIds, TokenizerRecord
from tacl_scale.files import file_sha256
from tacl_scale.markers import MODEL_CONFIG
from tacl_scale.vocab import AUTO_TOKENIZER_FILES, SETTINGS_FILES, has_capitals, is_placeholder, vocabulary

# How BERT's pre-tokenizer splits printable ASCII: runs of letters and digits, and
# every other character but the space alone (all of them are ASCII punctuation).
_ASCII_WORD = re.compile(r"[A-Za-z0-9]+|[^ A-Za-z0-9]")
# The same on lower-cased text (a smaller class is a faster scan).
_LOWER_ASCII_WORD = re.compile(r"[a-z0-9]+|[^ a-z0-9]")

# BERT's own limit; a tokenizer directory may declare a larger one.
DEFAULT_MAX_POSITIONS = 512


class TokenizerError(ValueError):
    """The tokenizer path is missing, unreadable or lacks a required special token."""


@dataclass(frozen=True)
class TokenizerConfig:
    """Where the tokenizer comes from and how to apply it."""

    path: str
    # None: a vocab.txt is lower-cased when at most 1% of its entries have upper case
    # (as bert-base-uncased/-chinese, which carry a few cased strays); a directory
    # follows its own tokenizer config.
    lowercase: bool | None = None


@dataclass
class EncodedSentence:
    """One sentence as token ids, with where its words begin (whole-word masking)."""

    ids: np.ndarray  # int32 token ids, no special tokens
    word_starts: np.ndarray  # bool, True where a token begins a word


class PretrainTokenizer:
    """Common interface over the supported tokenizer kinds (see module docstring).

    Attributes: ``kind`` (``wordpiece``, ``hf``, ``sentencepiece``), ``source_file``
    (the file fingerprinted), ``sha256``, ``vocab_size``, ``lowercase``,
    ``special_ids`` (pad, unk, cls, sep, mask), ``max_positions`` and, when a model
    folder's ``config.json`` set it, where it comes from (``max_positions_from``).
    """

    kind: str
    source_file: Path
    vocab_size: int
    lowercase: bool | None
    special_ids: SpecialIds
    max_positions: int
    max_positions_from: str | None = None

    def source_sha256(self) -> str:
        """The sha256 of the file that defines this tokenizer, read now: the build takes
        it at its start and checks the dataset's copy against it at its end."""
        return file_sha256(self.source_file)

    def encode(
        self, sentences: list[str], word_boundaries: list[set[int]] | None = None
    ) -> list[EncodedSentence]:
        """Tokenize sentences. ``word_boundaries[k]`` (optional) holds the character
        offsets where a word starts in ``sentences[k]`` (for Chinese, whose words a
        WordPiece tokenizer splits into characters); without it word starts follow
        the tokenizer's own word split (WordPiece ``##``, SentencePiece ``▁``)."""
        raise NotImplementedError

    def id_to_token(self, token_id: int) -> str:
        raise NotImplementedError

    def vocab_tokens(self) -> list[str]:
        return [self.id_to_token(i) for i in range(self.vocab_size)]

    def replacement_ids(self) -> np.ndarray:
        """Ids a masked token may be replaced by: every id that is not special, not a
        placeholder, and not the shadowed first copy of a repeated vocabulary line
        (no token: the tokenizer never produces it)."""
        specials = set(self.special_ids.all())
        keep = [
            i
            for i, token in enumerate(self.vocab_tokens())
            if token and i not in specials and not is_placeholder(token)
        ]
        return np.asarray(keep, dtype=np.int32)

    def files(self) -> tuple[Path, ...]:
        """The files that make this tokenizer (what :func:`load_tokenizer` reads):
        a directory's tokenizer files, or the one vocabulary or model file."""
        if self.kind == "hf":
            directory = self.source_file.parent
            return tuple(directory / name for name in TOKENIZER_FILES if (directory / name).is_file())
        return (self.source_file,)

    def copy_into(self, dataset_dir: Path, sha256: str) -> TokenizerRecord:
        """Copy this tokenizer's files into ``DATASET/tokenizer/`` (through a
        temporary directory and a rename) and return the manifest's record, which
        names them relative to the dataset. ``sha256``: the fingerprint taken when
        the build started; a file changed since then is an error, not a dataset
        whose ids and tokenizer disagree."""
        target, tmp = dataset_dir / TOKENIZER_DIR, dataset_dir / f".{TOKENIZER_DIR}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for path in self.files():
            shutil.copy2(path, tmp / path.name)
        copied = file_sha256(tmp / self.source_file.name)
        if copied != sha256:
            shutil.rmtree(tmp, ignore_errors=True)
            raise TokenizerError(f"{self.source_file}: changed while the dataset was being built (sha256 "
                                 f"{sha256[:12]}… at the start, {copied[:12]}… now): build again")
        shutil.rmtree(target, ignore_errors=True)
        os.replace(tmp, target)
        path = TOKENIZER_DIR if self.kind == "hf" else f"{TOKENIZER_DIR}/{self.source_file.name}"
        return TokenizerRecord(
            kind=self.kind, file=self.source_file.name, sha256=sha256, vocab_size=self.vocab_size,
            lowercase=self.lowercase, special_ids=self.special_ids, path=path,
            files=tuple(p.name for p in self.files()), source=str(self.source_file.resolve()),
            checksums={p.name: file_checksum(target / p.name) for p in self.files()},
        )


class _HFTokenizer(PretrainTokenizer):
    """A ``tokenizers`` backend, from a vocab.txt or a transformers directory."""

    def __init__(self, backend: Any, kind: str, source_file: Path, lowercase: bool | None,
                 special_tokens: dict[str, str | None], max_positions: int) -> None:
        if backend.padding is not None or backend.truncation is not None:
            # A model's tokenizer.json may pad and truncate every input (all-MiniLM-L6-v2:
            # to 128 tokens); a dataset needs each sentence's own tokens. A copy, so the
            # caller's tokenizer keeps its settings.
            from tokenizers import Tokenizer

            backend = Tokenizer.from_str(backend.to_str())
            backend.no_padding()
            backend.no_truncation()
        self._backend = backend
        self.kind = kind
        self.source_file = source_file
        self.lowercase = lowercase
        # Ids run to the highest one: a vocab.txt with repeated lines (bert-base-chinese
        # repeats 53, e.g. "##s") has fewer distinct tokens than ids, and its model has
        # an embedding row per line.
        vocab = backend.get_vocab(with_added_tokens=True)
        self.vocab_size = max(vocab.values()) + 1
        self.max_positions = max_positions
        ids: dict[str, int] = {}
        for role, token in special_tokens.items():
            token_id = backend.token_to_id(token) if token else None
            if token_id is None:
                raise TokenizerError(f"{source_file}: no {role} token ({token!r}) in the vocabulary")
            ids[role] = int(token_id)
        self.special_ids = SpecialIds(**ids)
        self._continues_word = _wordpiece_continuations(backend, vocab, self.vocab_size)
        self._words = _WordCache.for_backend(backend) if self._continues_word is not None else None

    @property
    def backend(self) -> Any:
        """The ``tokenizers.Tokenizer`` every encoding goes through."""
        return self._backend

    @property
    def word_cache(self) -> _WordCache | None:
        """The word cache (None where the tokenizer encodes whole sentences)."""
        return self._words

    def route_backend(self, backend: Any) -> None:
        """Send every call to the tokenizer library through ``backend`` (a stand-in
        with its ``encode_batch``): the data-prep benchmark times the library's
        share of the tokenize stage this way."""
        self._backend = backend
        if self._words is not None:
            self._words._backend = backend

    def encode(
        self, sentences: list[str], word_boundaries: list[set[int]] | None = None
    ) -> list[EncodedSentence]:
        if word_boundaries is None and self._words is not None:
            return self._encode_by_words(sentences)
        return self._encode_whole(sentences, word_boundaries)

    def _encode_whole(self, sentences: list[str], word_boundaries: list[set[int]] | None) -> list[EncodedSentence]:
        """:meth:`encode` with the tokenizer run on whole sentences."""
        encodings = self._backend.encode_batch(sentences, add_special_tokens=False)
        out = []
        for k, enc in enumerate(encodings):
            ids = np.asarray(enc.ids, dtype=np.int32)
            if word_boundaries is not None:
                bounds = word_boundaries[k]
                starts = np.fromiter(
                    (start in bounds for start, _ in enc.offsets), dtype=bool, count=len(ids)
                )
            elif self._continues_word is not None:
                starts = ~self._continues_word[ids]
            else:
                word_ids = np.asarray([-1 if w is None else w for w in enc.word_ids])
                starts = np.ones(len(ids), dtype=bool)
                starts[1:] = word_ids[1:] != word_ids[:-1]
            if len(starts):
                starts[0] = True
            out.append(EncodedSentence(ids, starts))
        return out

    def _encode_by_words(self, sentences: list[str]) -> list[EncodedSentence]:
        """:meth:`encode` through the word cache, all of its sentences' ids and word
        starts computed at once; sentences it cannot take go through the tokenizer
        whole, in one batch."""
        assert self._words is not None and self._continues_word is not None
        taken, joined, lengths = self._words.encode(sentences)
        starts = ~self._continues_word[joined]
        ends = np.cumsum(lengths, dtype=np.int64)
        firsts = ends - np.asarray(lengths, dtype=np.int64)
        starts[firsts[firsts < len(joined)]] = True  # a sentence opens a word
        encoded = {k: EncodedSentence(joined[first:end], starts[first:end])
                   for k, first, end in zip(taken, firsts.tolist(), ends.tolist(), strict=True)}
        if len(taken) < len(sentences):
            rest = [k for k in range(len(sentences)) if k not in encoded]
            encoded.update(zip(rest, self._encode_whole([sentences[k] for k in rest], None), strict=True))
        return [encoded[k] for k in range(len(sentences))]

    def id_to_token(self, token_id: int) -> str:
        return self._backend.id_to_token(int(token_id)) or ""


class _SentencePieceTokenizer(PretrainTokenizer):
    _ROLES = {
        "pad": ("[PAD]", "<pad>"),
        "unk": ("[UNK]", "<unk>"),
        "cls": ("[CLS]", "<cls>"),
        "sep": ("[SEP]", "<sep>"),
        "mask": ("[MASK]", "<mask>"),
    }

    def __init__(self, model_file: Path) -> None:
        import sentencepiece as spm

        try:
            self._sp = spm.SentencePieceProcessor(model_file=str(model_file))
        except (OSError, RuntimeError) as err:
            raise TokenizerError(f"{model_file}: not a SentencePiece model: {err}") from err
        self.kind = "sentencepiece"
        self.source_file = model_file
        self.lowercase = None
        self.vocab_size = self._sp.get_piece_size()
        self.max_positions = DEFAULT_MAX_POSITIONS
        ids: dict[str, int] = {}
        for role, candidates in self._ROLES.items():
            for piece in candidates:
                token_id = self._sp.piece_to_id(piece)
                if token_id != self._sp.unk_id() or role == "unk" and piece == "<unk>":
                    ids[role] = int(token_id)
                    break
            else:
                raise TokenizerError(
                    f"{model_file}: no {role} piece ({' or '.join(candidates)}); train the "
                    "model with --user_defined_symbols=[CLS],[SEP],[MASK] and a pad id"
                )
        self.special_ids = SpecialIds(**ids)

    def encode(
        self, sentences: list[str], word_boundaries: list[set[int]] | None = None
    ) -> list[EncodedSentence]:
        out = []
        for k, ids_list in enumerate(self._sp.encode(sentences)):
            ids = np.asarray(ids_list, dtype=np.int32)
            pieces = [self._sp.id_to_piece(i) for i in ids_list]
            if word_boundaries is not None:
                # Character offset of each piece in the sentence; "▁" stands for
                # the space before a word (or the dummy prefix at the start).
                offsets, offset = [], 0
                for piece in pieces:
                    if piece.startswith("\u2581"):
                        offset += 1 if offset else 0
                        piece = piece[1:]
                    offsets.append(offset)
                    offset += len(piece)
                starts = np.asarray([o in word_boundaries[k] for o in offsets], dtype=bool)
            else:
                starts = np.asarray([p.startswith("\u2581") for p in pieces], dtype=bool)
            if len(starts):
                starts[0] = True
            out.append(EncodedSentence(ids, starts))
        return out

    def id_to_token(self, token_id: int) -> str:
        return self._sp.id_to_piece(int(token_id))


class _WordCache:
    """Token ids of whole words, for a WordPiece model behind BERT's normalizer and
    pre-tokenizer.

    Most of the tokenizer's time goes into normalizing and splitting text with
    offset tracking we do not use, and into the same frequent words again and
    again. BERT's pre-tokenizer always cuts at a space, and its normalizer works
    character by character, so a sentence's ids are those of its space-separated
    chunks joined. A chunk of printable ASCII is cut further as the pre-tokenizer
    cuts it (runs of letters and digits; every other character is ASCII punctuation
    and stands alone: ``_ASCII_WORD``), after lower-casing if the normalizer does;
    any other chunk is kept whole. Each word or chunk is tokenized once, by the
    tokenizer itself, and its ids are reused: the ids equal encoding the sentence
    (tested on the real English and Chinese samples and on random Unicode).
    Sentences with an added token's text (``[MASK]`` in text is one token) are left
    to the tokenizer. The cache is emptied when it reaches ``max_words``.
    """

    def __init__(self, backend: Any, lowercase: bool, added_tokens: list[str], max_words: int = 200_000) -> None:
        self._backend = backend
        self._lowercase = lowercase
        self._ascii_words = (_LOWER_ASCII_WORD if lowercase else _ASCII_WORD).findall
        self._added = (re.compile("|".join(map(re.escape, added_tokens)), re.IGNORECASE)
                       if added_tokens else None)
        self._ids: dict[str, bytes] = {}  # int32 ids of each word, as bytes
        self._max_words = max_words
        self.looked_up = 0  # words looked up so far
        self.tokenized = 0  # of which new ones, tokenized by the tokenizer

    @classmethod
    def for_backend(cls, backend: Any) -> _WordCache | None:
        """The cache for ``backend``, or None unless it normalizes and splits words
        exactly as BERT (BertNormalizer, BertPreTokenizer) and its added tokens are
        printable ASCII without spaces (the sentence check finds those)."""
        from tokenizers import normalizers, pre_tokenizers

        if not (type(backend.normalizer) is normalizers.BertNormalizer
                and type(backend.pre_tokenizer) is pre_tokenizers.BertPreTokenizer):
            return None
        added = [token.content for token in backend.get_added_tokens_decoder().values() if token.content]
        if not all(token.isascii() and token.isprintable() and " " not in token for token in added):
            return None
        return cls(backend, bool(backend.normalizer.lowercase), added)

    def _split_words(self, sentence: str) -> list[str]:
        lowercase, ascii_words = self._lowercase, self._ascii_words
        if sentence.isascii() and sentence.isprintable():
            return ascii_words(sentence.lower() if lowercase else sentence)
        words: list[str] = []
        for chunk in sentence.split(" "):
            if chunk.isascii() and chunk.isprintable():
                words += ascii_words(chunk.lower() if lowercase else chunk)
            elif chunk:
                words.append(chunk)  # never equal to an ASCII word: a key of its own
        return words

    def encode(self, sentences: list[str]) -> tuple[list[int], np.ndarray, list[int]]:
        """The sentences the cache takes (their indices), their int32 ids joined, and
        each one's number of ids; the others are left to the tokenizer."""
        words_of: list[list[str]] = []
        taken: list[int] = []
        for k, sentence in enumerate(sentences):
            if self._added is not None and self._added.search(sentence):
                continue
            taken.append(k)
            words_of.append(self._split_words(sentence))
        new = set(chain.from_iterable(words_of)).difference(self._ids)
        if new:
            if len(self._ids) + len(new) > self._max_words:
                self._ids.clear()
                new = set(chain.from_iterable(words_of))
            words = sorted(new)
            for word, enc in zip(words, self._backend.encode_batch(words, add_special_tokens=False), strict=True):
                self._ids[word] = np.asarray(enc.ids, dtype=np.int32).tobytes()
            self.tokenized += len(words)
        self.looked_up += sum(map(len, words_of))
        ids_of_word = self._ids.__getitem__
        # Ids are kept as bytes: joining bytes is the cheapest way to concatenate them.
        per_sentence = [b"".join(map(ids_of_word, words)) for words in words_of]
        joined = np.frombuffer(bytearray(b"".join(per_sentence)), dtype=np.int32)  # writable
        return taken, joined, [len(ids) // 4 for ids in per_sentence]


def _wordpiece_continuations(backend: Any, vocab: dict[str, int], vocab_size: int) -> np.ndarray | None:
    """For a WordPiece model behind BERT's pre-tokenizer, a table of which ids
    continue a word (``##ing``); None for any other kind. There a token starts a word
    exactly when it is not a continuation (the pre-tokenizer isolates every ``#``, so
    no word's first piece carries the prefix), which is the same as comparing word
    ids and a fraction of the cost (tested against word ids on the real samples)."""
    from tokenizers import models, pre_tokenizers

    prefix = getattr(backend.model, "continuing_subword_prefix", None)
    if not (isinstance(backend.model, models.WordPiece) and prefix
            and isinstance(backend.pre_tokenizer, pre_tokenizers.BertPreTokenizer)):
        return None
    table = np.zeros(vocab_size, dtype=bool)
    for token, token_id in vocab.items():
        table[token_id] = token.startswith(prefix)
    return table


def no_lowercase_problem(tokenizer: PretrainTokenizer, lowercase: bool | None) -> str | None:
    """Why ``--no-lowercase`` (``lowercase`` False) is wrong for ``tokenizer``, in
    words, or None: its vocabulary has no upper-case letter outside its special and
    placeholder tokens (an uncased one), so every capital letter of the text is
    ``[UNK]`` or an odd split (12% of the real English sample's tokens were ``[UNK]``)."""
    if lowercase is not False or tokenizer.kind == "sentencepiece":
        return None
    for token in tokenizer.vocab_tokens():
        if not is_placeholder(token) and token != token.lower():
            return None
    return (f"--no-lowercase with tokenizer {tokenizer.source_file}, an uncased vocabulary (not one upper-case "
            "letter in its tokens): every capitalised word becomes [UNK]; drop --no-lowercase")


def _from_vocab_file(vocab_file: Path, lowercase: bool | None) -> PretrainTokenizer:
    from tokenizers import BertWordPieceTokenizer

    try:
        if lowercase is None:
            lowercase = not has_capitals(vocabulary(vocab_file) or {})
        backend = BertWordPieceTokenizer(
            str(vocab_file), lowercase=lowercase, handle_chinese_chars=True
        )
    except Exception as err:  # tokenizers raises plain Exception, beside OSError and UnicodeDecodeError
        raise TokenizerError(f"{vocab_file}: not a WordPiece vocab.txt: {err}") from err
    roles = {"pad": "[PAD]", "unk": "[UNK]", "cls": "[CLS]", "sep": "[SEP]", "mask": "[MASK]"}
    return _HFTokenizer(backend, "wordpiece", vocab_file, lowercase, roles, DEFAULT_MAX_POSITIONS)


def _from_directory(directory: Path, lowercase: bool | None) -> PretrainTokenizer:
    for name in AUTO_TOKENIZER_FILES:
        if (directory / name).is_file():
            break
    else:
        if (directory / "vocab.txt").is_file():
            return _from_vocab_file(directory / "vocab.txt", lowercase)
        models = sorted(directory.glob("*.model"))
        if models:
            return _SentencePieceTokenizer(models[0])
        raise TokenizerError(
            f"{directory}: no tokenizer.json, tokenizer_config.json, vocab.txt or *.model"
        )
    from transformers import AutoTokenizer

    kwargs = {} if lowercase is None else {"do_lower_case": lowercase}
    try:
        hf = AutoTokenizer.from_pretrained(str(directory), local_files_only=True, **kwargs)
    except (OSError, ValueError) as err:
        raise TokenizerError(f"{directory}: cannot load tokenizer: {err}") from err
    if not getattr(hf, "is_fast", False):
        raise TokenizerError(f"{directory}: only a slow tokenizer is available")
    source = next(
        (directory / n for n in ("vocab.txt", "tokenizer.json") if (directory / n).is_file()),
        directory / "tokenizer_config.json",
    )
    roles = {
        "pad": hf.pad_token,
        "unk": hf.unk_token,
        "cls": hf.cls_token,
        "sep": hf.sep_token,
        "mask": hf.mask_token,
    }
    model_max = getattr(hf, "model_max_length", DEFAULT_MAX_POSITIONS)
    max_positions = model_max if 0 < model_max < 1_000_000 else DEFAULT_MAX_POSITIONS
    return _HFTokenizer(
        hf.backend_tokenizer,
        "hf",
        source,
        getattr(hf, "do_lower_case", lowercase),
        roles,
        max_positions,
    )


# Files of a HF directory that are no tokenizer alone: --tokenizer takes the directory.
HF_DIRECTORY_FILES = ("tokenizer.json", *SETTINGS_FILES, MODEL_CONFIG)


def _model_positions(directory: Path) -> int | None:
    """The ``max_position_embeddings`` of the model whose folder ``directory`` is
    (its ``config.json``), or None without one. The tokenizer's own limit
    (``model_max_length``, 512 for a bare vocab.txt) says nothing of the model's
    position table: a dataset longer than it was built, and training refused it."""
    path = directory / MODEL_CONFIG
    if not path.is_file():
        return None
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise TokenizerError(f"{path}: unreadable model config ({err}); the build reads its "
                             "max_position_embeddings to bound --max-seq-len") from err
    positions = config.get("max_position_embeddings") if isinstance(config, dict) else None
    if isinstance(positions, bool) or not isinstance(positions, int) or positions <= 0:
        return None
    return positions


def load_tokenizer(config: TokenizerConfig) -> PretrainTokenizer:
    """Open the tokenizer at ``config.path``; :class:`TokenizerError` names the path
    and the problem when it is missing or unusable."""
    path = Path(config.path)
    if not path.exists():
        raise TokenizerError(f"{path}: tokenizer not found")
    if path.is_dir():
        tokenizer = _from_directory(path, config.lowercase)
        positions = _model_positions(path)
        if positions is not None and positions < tokenizer.max_positions:
            tokenizer.max_positions = positions
            tokenizer.max_positions_from = f"max_position_embeddings {positions} in {path / MODEL_CONFIG}"
        return tokenizer
    if path.name in HF_DIRECTORY_FILES:  # read as a vocab.txt, it said "sep_token not found"
        raise TokenizerError(f"{path}: a file of a Hugging Face tokenizer or model directory: give the directory, "
                             f"{path.parent}")
    try:
        with open(path, "rb") as f:
            f.read(1)
    except OSError as err:
        raise TokenizerError(f"{path}: unreadable: {err}") from err
    if path.suffix == ".model":
        return _SentencePieceTokenizer(path)
    return _from_vocab_file(path, config.lowercase)
