"""The on-disk dataset contract between ``data_prep`` (writer) and training (reader).

A dataset is a directory that holds, per shard ``shard-NNNNN``:

- ``shard-NNNNN.bin/.idx`` — MMIDIDX (see :mod:`tacl_scale.data.indexed`), one
  sequence per instance: the **unmasked** ``[CLS] A [SEP] B [SEP]`` token ids;
  documents are the source articles.
- ``shard-NNNNN.masked_positions.bin/.idx`` — MMIDIDX (uint16), per instance the
  sorted positions chosen for the masked-LM objective.
- ``shard-NNNNN.masked_tokens.bin/.idx`` — MMIDIDX (token dtype), per instance the
  token placed at each of those positions (``[MASK]``, a random token, or the
  original one).
- ``shard-NNNNN.meta.npy`` — a structured array, one row per instance:
  ``len_a`` (uint16, tokens of segment A without specials) and ``nsp_label`` (uint8,
  HF convention: 0 = B follows A, 1 = B is random).
- ``shard-NNNNN.word_starts.bin/.idx`` — only with whole-word masking: MMIDIDX
  (uint8), per instance 1 where a token starts a word.

the same files for the validation split's shards ``validation-NNNNN.*``, a copy of
the tokenizer's files in ``tokenizer/`` (format 3), and ``manifest.json``, written
last by write-to-temp-then-rename: a directory without it is not a dataset (a
crashed run never looks finished).

The manifest is the :class:`Manifest` dataclass and its records, here; its JSON is
:meth:`Manifest.to_json`, and :meth:`Manifest.from_json` is the one place that
reads the JSON and knows what older versions lacked:

- version 1: no ``validation`` split; no ``instance_kind`` (pairs), no
  ``static_masks`` (true), no ``warnings``, and its masking rules may lack
  ``replacement_excluded_ids`` and ``zh_segmenter``;
- version 2: the validation split; the tokenizer named by the path the build read
  it from (absolute, or relative to where the build ran);
- version 3: the tokenizer's files copied into the dataset and named relative to
  it, so a dataset directory can move anywhere;
- version 4: a checksum (xxh3-128, :mod:`.integrity`) of every shard file and of
  every file of the tokenizer copy;
- version 5: the static masks drawn per pass over a document
  (:func:`.masking.mask_pass`) instead of per instance (:func:`.masking.mask_instances`):
  the same files and rules, other random masks for the same seed. Readers need
  nothing new; the version says which bytes a seed gives.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from ..files import atomic_write
from ..json_fields import JsonObject, MalformedField
from ..locking import holder
from ..vocab import SETTINGS_FILES, VOCABULARY_FILES
from .masking import MaskingConfig

FORMAT_NAME = "tacl-scale-pretrain"
FORMAT_VERSION = 5
# 1: no validation split; 2: the tokenizer outside the dataset; 3: no checksums;
# 4: masks drawn per instance (the same files as 5)
SUPPORTED_VERSIONS = (1, 2, 3, 4, 5)
SPLITS = ("train", "validation")
MANIFEST_NAME = "manifest.json"
TOKENIZER_DIR = "tokenizer"  # the dataset's copy of its tokenizer files (format 3)
# The files of a HF tokenizer directory that a dataset copies and an export carries
# (tacl_scale.vocab names each), in the order a dataset's manifest lists them.
TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", *SETTINGS_FILES)
# What a folder without a vocabulary lacks, in the refusals that name it.
NO_VOCABULARY = "no tokenizer vocabulary (vocab.txt, tokenizer.json or a sentencepiece .model)"
INSTANCE_KINDS = ("pairs", "single-segment")
TOKENIZER_KINDS = ("wordpiece", "hf", "sentencepiece")
TOKEN_DTYPES = ("uint8", "uint16", "int32")  # indexed.smallest_token_dtype's choices
MAX_SEQ_LEN_LIMIT = 65536  # masked positions are stored as uint16

# The MMIDIDX arrays of one shard, each a PREFIX.bin and a PREFIX.idx
# (tacl_scale.data.indexed): the instances' tokens at the shard's name, the others at
# NAME.PART (:func:`part_prefix`).
INDEXED_PARTS = ("tokens", "masked_positions", "masked_tokens")
# Only in datasets built with whole-word masking (format 2): per instance, 1 where a
# token starts a word, the word boundaries the static masks used, so that dynamic
# masking can use the same ones (Chinese segmentation cannot be recomputed from ids).
WORD_STARTS_PART = "word_starts"


def part_prefix(name: str, part: str) -> str:
    """The MMIDIDX prefix of array ``part`` of shard ``name`` (:data:`INDEXED_PARTS`)."""
    return name if part == "tokens" else f"{name}.{part}"


def _indexed_suffixes(parts: tuple[str, ...]) -> dict[str, str]:
    return {f"{part}_{ext}": f"{part_prefix('', part)}.{ext}" for part in parts for ext in ("bin", "idx")}


# Suffixes of the files of one shard, relative to its name, keyed as the manifest's
# shard ``files`` map (in its order): tokens_bin ".bin", ..., meta ".meta.npy".
SHARD_FILE_SUFFIXES: dict[str, str] = {**_indexed_suffixes(INDEXED_PARTS), "meta": ".meta.npy"}
WORD_START_SUFFIXES: dict[str, str] = _indexed_suffixes((WORD_STARTS_PART,))

META_DTYPE = [("len_a", "<u2"), ("nsp_label", "u1")]


class DatasetError(ValueError):
    """A dataset directory is missing, incomplete or inconsistent."""


def holds_a_vocabulary(directory: Path) -> bool:
    """Whether a tokenizer folder holds a vocabulary, in any of the forms a run's
    copy takes (``tacl_scale.run_tokenizer.write_tokenizer``): settings files alone
    (tokenizer_config.json) are none, and Hugging Face would then build a tokenizer
    of its special tokens alone, every word [UNK]."""
    return (any((directory / name).is_file() for name in VOCABULARY_FILES)
            or any(directory.glob("*.model")))


def shard_name(index: int, split: str = "train") -> str:
    """The name of shard ``index`` of a split: ``shard-00003``, ``validation-00000``."""
    return f"shard-{index:05d}" if split == "train" else f"{split}-{index:05d}"


def shard_file_names(name: str, word_starts: bool = False) -> dict[str, str]:
    """The file name of every part of shard ``name``, keyed as in the manifest
    (``word_starts``: with the whole-word boundaries)."""
    suffixes = {**SHARD_FILE_SUFFIXES, **(WORD_START_SUFFIXES if word_starts else {})}
    return {key: name + suffix for key, suffix in suffixes.items()}


# -- records ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SpecialIds:
    """The ids of the tokenizer's special tokens."""

    pad: int
    unk: int
    cls: int
    sep: int
    mask: int

    def all(self) -> tuple[int, ...]:
        """Every special id once, ascending."""
        return tuple(sorted({self.pad, self.unk, self.cls, self.sep, self.mask}))


@dataclass(frozen=True)
class TokenizerRecord:
    """The tokenizer the dataset was built with."""

    kind: str  # wordpiece (a vocab.txt), hf (a tokenizer directory), sentencepiece (a .model)
    file: str  # name of the file fingerprinted by sha256 (the vocab.txt, tokenizer.json or .model)
    sha256: str
    vocab_size: int  # number of ids (a vocab.txt's lines, repeated ones included)
    lowercase: bool | None
    special_ids: SpecialIds
    # What to open: format 3, relative to the dataset directory (tokenizer/...);
    # older formats, the path the build read (absolute, or relative to where it ran).
    path: str
    files: tuple[str, ...] = ()  # format 3: the files of the dataset's tokenizer/ copy
    source: str | None = None  # format 3: where the build read the tokenizer (a record only)
    checksums: dict[str, str] = field(default_factory=dict)  # format 4: of each of ``files``

    @property
    def portable(self) -> bool:
        """Whether the dataset carries its tokenizer (format 3)."""
        return bool(self.files)

    def location(self, dataset_dir: str | os.PathLike) -> Path:
        """The tokenizer file or directory to open for the dataset in ``dataset_dir``."""
        return Path(dataset_dir) / self.path if self.portable else Path(self.path)


@dataclass(frozen=True)
class MaskingRecord:
    """The static masks' rules, which ``--dynamic-masking`` applies again."""

    masked_lm_prob: float
    max_predictions_per_seq: int  # resolved: the cap the build used
    mask_token_prob: float
    random_token_prob: float
    keep_token_prob: float
    whole_word_masking: bool
    # Never placed as the random replacement: specials and placeholders ([unusedN], <s>, ...).
    # None in version-1 datasets that did not record it.
    replacement_excluded_ids: tuple[int, ...] | None
    zh_segmenter: str | None  # the Chinese word segmenter of whole-word masking

    def config(self) -> MaskingConfig:
        """The :class:`MaskingConfig` these rules came from (field by field)."""
        return MaskingConfig(**{f.name: getattr(self, f.name) for f in fields(MaskingConfig)})

    def replacement_ids(self, vocab_size: int) -> np.ndarray:
        """The ids a masked token may be replaced by (the complement of the excluded)."""
        if self.replacement_excluded_ids is None:
            raise ValueError("this dataset did not record its replacement ids")
        return np.setdiff1d(np.arange(vocab_size), np.asarray(self.replacement_excluded_ids, dtype=np.int64))

    @classmethod
    def of(cls, config: MaskingConfig, max_predictions: int, replacement_ids: np.ndarray, vocab_size: int,
           zh_segmenter: str | None) -> MaskingRecord:
        """The record of a build's masking ``config``."""
        values = {f.name: getattr(config, f.name) for f in fields(MaskingConfig)}
        return cls(**{**values, "max_predictions_per_seq": max_predictions},
                   keep_token_prob=round(1 - config.mask_token_prob - config.random_token_prob, 6),
                   replacement_excluded_ids=tuple(np.setdiff1d(np.arange(vocab_size), replacement_ids).tolist()),
                   zh_segmenter=zh_segmenter)


@dataclass(frozen=True)
class Counts:
    """What a shard (or a split, summed) holds."""

    instances: int = 0
    tokens: int = 0
    documents: int = 0
    random_next: int = 0  # instances whose B is a random segment
    masked: int = 0  # positions masked
    maskable: int = 0  # positions that could have been (non-special)
    mask_token: int = 0  # masked positions given [MASK]
    random_token: int = 0  # ... a random token
    kept_token: int = 0  # ... their own token
    length_histogram: dict[int, int] = field(default_factory=dict)  # instance lengths in bins of 32

    @classmethod
    def total(cls, parts: list[Counts]) -> Counts:
        """The counts of ``parts`` added up (their length histograms merged)."""
        histogram: dict[int, int] = {}
        for part in parts:
            for length, count in part.length_histogram.items():
                histogram[length] = histogram.get(length, 0) + count
        numbers = {f.name: sum(getattr(p, f.name) for p in parts) for f in fields(cls) if f.name != "length_histogram"}
        return cls(**numbers, length_histogram=dict(sorted(histogram.items())))

    def to_json(self, prefix: str = "") -> dict[str, Any]:
        """As JSON; a shard entry prefixes the first counts with ``num_`` (its keys since version 1)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            if f.name == "length_histogram":
                out[f.name] = {str(k): v for k, v in sorted(self.length_histogram.items())}
            else:
                out[(prefix if f.name in _PREFIXED_COUNTS else "") + f.name] = getattr(self, f.name)
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any], prefix: str = "", name: str = "totals") -> Counts:
        """The counts of a split's ``totals`` or (``prefix`` ``num_``) of a shard's
        entry; ``name`` is where it is in the manifest, for a malformed field."""
        entry = JsonObject(data, name)
        values = {f.name: entry.get((prefix if f.name in _PREFIXED_COUNTS else "") + f.name, "int")
                  for f in fields(cls) if f.name != "length_histogram"}
        return cls(**values, length_histogram=entry.get("length_histogram", "histogram"))


_PREFIXED_COUNTS = ("instances", "tokens", "documents", "random_next", "masked", "maskable")


@dataclass(frozen=True)
class FileRecord:
    """A file and its size: a shard's part (``path``: its name in the dataset
    directory), or an input of the build (the path the build read)."""

    path: str
    bytes: int
    checksum: str | None = None  # a shard's file, format 4: ``xxh3_128:<hex>`` (:mod:`.integrity`)

    def to_json(self) -> dict[str, Any]:
        """A shard file's entry (``name``, ``bytes`` and, from format 4, ``checksum``)."""
        entry: dict[str, Any] = {"name": self.path, "bytes": self.bytes}
        if self.checksum is not None:
            entry["checksum"] = self.checksum
        return entry

    @classmethod
    def from_json(cls, data: dict[str, Any], name: str = "shards[].files.*") -> FileRecord:
        entry = JsonObject(data, name)
        return cls(entry.get("name", "str"), entry.get("bytes", "int"), entry.get("checksum", "str?", None))


@dataclass(frozen=True)
class ShardRecord:
    """One shard: its files (with their sizes) and counts."""

    name: str  # shard-NNNNN or validation-NNNNN
    index: int  # NNNNN
    key: int  # its place among all shards of the build (train first)
    split: str
    files: dict[str, FileRecord]  # by the keys of shard_file_names
    counts: Counts
    duplicate_documents: int = 0  # documents whose id came twice (the later copies are skipped)

    @property
    def has_word_starts(self) -> bool:
        return "word_starts_bin" in self.files

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "index": self.index, "key": self.key, "split": self.split,
                "files": {k: f.to_json() for k, f in self.files.items()},
                "duplicate_documents": self.duplicate_documents, **self.counts.to_json(prefix="num_")}

    @classmethod
    def from_json(cls, data: dict[str, Any], name: str = "shards[]") -> ShardRecord:
        """A shard's entry; ``name`` is where it is in the manifest (``shards[3]``),
        for a malformed field."""
        entry = JsonObject(data, name)
        files = entry.get("files", "map", {})
        return cls(name=entry.get("name", "str"), index=entry.get("index", "int"), key=entry.get("key", "int"),
                   split=entry.get("split", "str"),
                   files={k: FileRecord.from_json(f, f"{name}.files.{k}") for k, f in files.items()},
                   counts=Counts.from_json(data, prefix="num_", name=name),
                   duplicate_documents=entry.get("duplicate_documents", "int", 0))


@dataclass(frozen=True)
class SplitRecord:
    """The shards of one split and their totals."""

    shards: tuple[ShardRecord, ...]
    totals: Counts
    fraction: float | None = None  # validation: the share of documents it holds
    rule: str | None = None  # validation: how a document's id chooses its split

    @property
    def num_shards(self) -> int:
        return len(self.shards)

    @classmethod
    def of(cls, shards: list[ShardRecord], fraction: float | None = None, rule: str | None = None) -> SplitRecord:
        ordered = tuple(sorted(shards, key=lambda s: s.key))
        return cls(ordered, Counts.total([s.counts for s in ordered]), fraction, rule)


@dataclass(frozen=True)
class Manifest:
    """Everything ``manifest.json`` records about a dataset (see the module docstring)."""

    tokenizer: TokenizerRecord
    token_dtype: str  # numpy dtype of the token ids: the smallest that holds the vocabulary
    max_seq_len: int
    masking: MaskingRecord
    train: SplitRecord
    validation: SplitRecord | None = None
    instance_kind: str = "pairs"  # pairs: [CLS] A [SEP] B [SEP] with NSP; single-segment: [CLS] s [SEP]
    static_masks: bool = True  # False: the masked-position files are empty (MLM needs dynamic masking)
    short_seq_prob: float = 0.1
    random_next_prob: float = 0.5
    dupe_factor: int = 1
    seed: int = 0
    language: str = "en"
    input_format: str = "wiki-xml"
    skips: dict[str, int] = field(default_factory=dict)  # inputs skipped, by reason
    warnings: tuple[str, ...] = ()
    sources: tuple[FileRecord, ...] = ()  # the build's input files
    # The build's own settings and the Beam pipeline options, as recorded (never read back).
    build_config: dict[str, Any] = field(default_factory=dict)
    pipeline_options: dict[str, Any] = field(default_factory=dict)
    created_by: str = ""
    format_version: int = FORMAT_VERSION

    @property
    def has_validation(self) -> bool:
        """Whether the dataset has a validation split with instances in it."""
        return self.validation is not None and self.validation.totals.instances > 0

    def content_fingerprint(self) -> str:
        """A hash of every shard file's name, size and checksum: the same for the
        dataset copied or moved, another for a rebuild (another seed, corpus or
        setting). A run records it, so that a resume notices a dataset rebuilt in
        place under it: its data order would continue in other instances."""
        shards = [*self.train.shards, *(self.validation.shards if self.validation else ())]
        listing = [[shard.name, sorted([role, f.path, f.bytes, f.checksum] for role, f in shard.files.items())]
                   for shard in shards]
        return hashlib.sha256(json.dumps(listing).encode("utf-8")).hexdigest()[:32]

    def split(self, name: str, directory: str | os.PathLike = "dataset") -> SplitRecord:
        """The ``train`` or ``validation`` split; a :class:`DatasetError` naming
        ``directory`` when the dataset has no such split."""
        if name not in SPLITS:
            raise ValueError(f"split {name!r} is not one of {SPLITS}")
        if name == "train":
            return self.train
        if self.validation is None:
            raise DatasetError(f"{directory}: has no validation split; rebuild it with "
                               "python -m data_prep.build ... --validation-fraction F (e.g. 0.01)")
        return self.validation

    # -- JSON -------------------------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """The manifest as the JSON object written to ``manifest.json``."""
        tok, masking = self.tokenizer, self.masking
        tokenizer: dict[str, Any] = {
            "kind": tok.kind, "file": tok.file, "path": tok.path, "sha256": tok.sha256, "vocab_size": tok.vocab_size,
            "lowercase": tok.lowercase, "special_ids": {f.name: getattr(tok.special_ids, f.name)
                                                       for f in fields(SpecialIds)}}
        if tok.portable:
            tokenizer.update(files=list(tok.files), source=tok.source)
        if tok.checksums:
            tokenizer["checksums"] = dict(tok.checksums)
        masking_json = {f.name: getattr(masking, f.name) for f in fields(MaskingRecord)}
        if masking.replacement_excluded_ids is not None:
            masking_json["replacement_excluded_ids"] = list(masking.replacement_excluded_ids)
        return {
            "format": FORMAT_NAME,
            "format_version": self.format_version,
            "created_by": self.created_by,
            "language": self.language,
            "input_format": self.input_format,
            "tokenizer": tokenizer,
            "token_dtype": self.token_dtype,
            "max_seq_len": self.max_seq_len,
            "instance_kind": self.instance_kind,
            "static_masks": self.static_masks,
            "short_seq_prob": self.short_seq_prob,
            "random_next_prob": self.random_next_prob,
            "masking": masking_json,
            "dupe_factor": self.dupe_factor,
            "seed": self.seed,
            "num_shards": self.train.num_shards,
            "shards": [s.to_json() for s in self.train.shards],
            "totals": self.train.totals.to_json(),
            "validation": None if self.validation is None else {
                "fraction": self.validation.fraction, "rule": self.validation.rule,
                "num_shards": self.validation.num_shards, "shards": [s.to_json() for s in self.validation.shards],
                "totals": self.validation.totals.to_json()},
            "skips": dict(self.skips),
            "warnings": list(self.warnings),
            "sources": [{"path": s.path, "bytes": s.bytes} for s in self.sources],
            "build_config": self.build_config,
            "pipeline_options": self.pipeline_options,
        }

    @classmethod
    def from_json(cls, data: Any, path: str | os.PathLike = MANIFEST_NAME) -> Manifest:
        """Read a manifest's JSON object, of any supported version (the defaults of
        older versions are here and nowhere else); a :class:`DatasetError` names
        ``path`` and what is wrong."""
        if not isinstance(data, dict) or data.get("format") != FORMAT_NAME:
            raise DatasetError(f"{path}: not a {FORMAT_NAME} manifest")
        version = data.get("format_version")
        if isinstance(version, bool) or version not in SUPPORTED_VERSIONS:
            raise DatasetError(f"{path}: format version {version!r}, this reader supports "
                               f"{', '.join(map(str, SUPPORTED_VERSIONS))}: update tacl-scale to read it")
        for key in ("tokenizer", "max_seq_len", "shards", "totals", "masking"):
            if key not in data:
                raise DatasetError(f"{path}: manifest lacks {key!r}")
        try:
            manifest = cls._parse(data, int(version))
        except MalformedField as err:
            raise DatasetError(f"{path}: malformed manifest: {err}") from err
        except (AttributeError, KeyError, OverflowError, TypeError, ValueError) as err:  # a check _parse lacks
            raise DatasetError(f"{path}: malformed manifest ({type(err).__name__}: {err})") from err
        if problem := manifest.value_problem():
            raise DatasetError(f"{path}: malformed manifest: {problem}")
        return manifest

    def value_problem(self) -> str | None:
        """The first recorded value no build writes (a hand-edited or damaged
        manifest), in words naming its key, or None: what readers rely on (the
        instance layout, the token and position types, the masking rules) is
        checked here once, so a bad value is not met later as a crash in training."""
        tok, masking = self.tokenizer, self.masking
        if self.instance_kind not in INSTANCE_KINDS:
            return f"instance_kind {self.instance_kind!r} is not one of {', '.join(INSTANCE_KINDS)}"
        if tok.kind not in TOKENIZER_KINDS:
            return f"tokenizer.kind {tok.kind!r} is not one of {', '.join(TOKENIZER_KINDS)}"
        if self.token_dtype not in TOKEN_DTYPES:
            return f"token_dtype {self.token_dtype!r} is not one of {', '.join(TOKEN_DTYPES)}"
        if tok.vocab_size < 1 or np.iinfo(self.token_dtype).max < tok.vocab_size - 1:
            return f"tokenizer.vocab_size {tok.vocab_size} does not fit token_dtype {self.token_dtype}"
        if outside := [i for i in tok.special_ids.all() if not 0 <= i < tok.vocab_size]:
            return f"tokenizer.special_ids {outside} are outside the vocabulary of {tok.vocab_size}"
        if not 3 <= self.max_seq_len <= MAX_SEQ_LEN_LIMIT:
            return f"max_seq_len {self.max_seq_len} is not in [3, {MAX_SEQ_LEN_LIMIT}]"
        if self.dupe_factor < 1:
            return f"dupe_factor {self.dupe_factor} is not >= 1"
        probabilities = {"short_seq_prob": self.short_seq_prob, "random_next_prob": self.random_next_prob,
                         **{f"masking.{name}": getattr(masking, name) for name in
                            ("masked_lm_prob", "mask_token_prob", "random_token_prob", "keep_token_prob")}}
        if self.validation is not None and self.validation.fraction is not None:
            probabilities["validation.fraction"] = self.validation.fraction
        for name, value in probabilities.items():
            if not 0.0 <= value <= 1.0:
                return f"{name} {value} is not in [0, 1]"
        shares = masking.mask_token_prob + masking.random_token_prob + masking.keep_token_prob
        if abs(shares - 1.0) > 1e-5:
            return f"masking.mask_token_prob + random_token_prob + keep_token_prob is {shares:g}, not 1"
        if not 0 <= masking.max_predictions_per_seq <= self.max_seq_len:
            return (f"masking.max_predictions_per_seq {masking.max_predictions_per_seq} is not in "
                    f"[0, max_seq_len {self.max_seq_len}]")
        return None

    @classmethod
    def _parse(cls, data: dict[str, Any], version: int) -> Manifest:
        """The manifest of JSON object ``data``: each field read as the type the
        format gives it (:class:`~tacl_scale.json_fields.JsonObject`), a :class:`MalformedField` naming the
        first that is not."""
        top = JsonObject(data, whole="the manifest")
        tok = top.get("tokenizer", "object")
        masking = top.get("masking", "object")
        special = tok.get("special_ids", "object")
        names = [f.name for f in fields(SpecialIds)]
        if unknown := [key for key in special.data if key not in names]:
            raise MalformedField(f"tokenizer.special_ids.{unknown[0]} is not one of {', '.join(names)}")
        mask_token_prob = masking.get("mask_token_prob", "number")
        random_token_prob = masking.get("random_token_prob", "number")
        excluded = masking.get("replacement_excluded_ids", "ints?", None)  # absent from early version-1 datasets
        validation = top.get("validation", "object?", None)  # absent before version 2
        return cls(
            format_version=version,
            created_by=top.get("created_by", "str", ""),
            language=top.get("language", "str", "en"),
            input_format=top.get("input_format", "str", "wiki-xml"),
            tokenizer=TokenizerRecord(
                kind=tok.get("kind", "str"), file=tok.get("file", "str"), sha256=tok.get("sha256", "str"),
                vocab_size=tok.get("vocab_size", "int"), lowercase=tok.get("lowercase", "bool?", None),
                special_ids=SpecialIds(**{key: special.get(key, "int") for key in names}),
                path=tok.get("path", "str"), files=tuple(tok.get("files", "strs", ())) if version >= 3 else (),
                source=tok.get("source", "str?", None),
                checksums=tok.get("checksums", "str-map", {}) if version >= 4 else {}),
            token_dtype=top.get("token_dtype", "str"),
            max_seq_len=top.get("max_seq_len", "int"),
            instance_kind=top.get("instance_kind", "str", "pairs"),
            static_masks=top.get("static_masks", "bool", True),
            short_seq_prob=top.get("short_seq_prob", "number", 0.1),
            random_next_prob=top.get("random_next_prob", "number", 0.5),
            masking=MaskingRecord(
                masked_lm_prob=masking.get("masked_lm_prob", "number"),
                max_predictions_per_seq=masking.get("max_predictions_per_seq", "int"),
                mask_token_prob=mask_token_prob,
                random_token_prob=random_token_prob,
                keep_token_prob=masking.get("keep_token_prob", "number",
                                            round(1 - mask_token_prob - random_token_prob, 6)),
                whole_word_masking=masking.get("whole_word_masking", "bool"),
                replacement_excluded_ids=None if excluded is None else tuple(excluded),
                zh_segmenter=masking.get("zh_segmenter", "str?", None)),
            dupe_factor=top.get("dupe_factor", "int", 1),
            seed=top.get("seed", "int", 0),
            train=SplitRecord(tuple(ShardRecord.from_json(s.data, s.name) for s in top.objects("shards")),
                              Counts.from_json(data["totals"], name="totals")),
            validation=None if validation is None or not validation.data else SplitRecord(
                tuple(ShardRecord.from_json(s.data, s.name) for s in validation.objects("shards")),
                Counts.from_json(validation.get("totals", "map"), name="validation.totals"),
                validation.get("fraction", "number"), validation.get("rule", "str?", None)),
            skips=top.get("skips", "int-map", {}),
            warnings=tuple(top.get("warnings", "strs", ())),
            sources=tuple(FileRecord(s.get("path", "str"), s.get("bytes", "int")) for s in top.objects("sources", [])),
            build_config=top.get("build_config", "map", {}),
            pipeline_options=top.get("pipeline_options", "map", {}),
        )

    # -- files ------------------------------------------------------------------------------------------------

    @classmethod
    def load(cls, directory: str | os.PathLike) -> Manifest:
        """Parse and check ``DIR/manifest.json``; a :class:`DatasetError` names the
        file and the problem when it is absent, unparsable or of another format."""
        path = Path(directory) / MANIFEST_NAME
        if not Path(directory).exists():
            raise DatasetError(f"{directory}: no such directory{missing_dataset_hint(directory)}")
        if Path(directory).name == MANIFEST_NAME:
            raise DatasetError(f"{directory}: a dataset is the directory that holds its {MANIFEST_NAME}: "
                               f"give {Path(directory).parent}")
        if not Path(directory).is_dir():
            raise DatasetError(f"{directory}: a file, not a dataset directory")
        if not path.is_file() and (busy := holder(directory)) is not None:
            raise DatasetError(f"{path}: missing — {directory} is in use by {busy}: a dataset can be read once its "
                               "build has finished")
        if not path.is_file():
            raise DatasetError(
                f"{path}: missing — {directory} is not a finished dataset "
                "(the build did not complete, or this is not a dataset directory)"
            )
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            raise DatasetError(f"{path}: unreadable manifest: {err}") from err
        return cls.from_json(data, path)

    def write(self, directory: str | os.PathLike) -> Path:
        """Write ``DIR/manifest.json`` durably and atomically: a reader sees no
        manifest or a complete one. A manifest that :meth:`load` would refuse (a
        validation split without its fraction, a value no build writes) is a
        :class:`DatasetError` naming the field, and nothing is written."""
        path = Path(directory) / MANIFEST_NAME
        text = json.dumps(self.to_json(), indent=2, ensure_ascii=False) + "\n"
        try:
            Manifest.from_json(json.loads(text), path)  # what a reader will parse
        except DatasetError as err:
            raise DatasetError(f"{err} — not written") from err
        return atomic_write(path, text, fsync=True)


def replaced_prefix(directory: str | os.PathLike) -> str:
    """The name, but a process id, of the hidden sibling in which a build run with
    ``--overwrite`` sets the old dataset aside while it renames the new one into
    place (``.NAME.replaced-PID``)."""
    return f".{Path(directory).name}.replaced-"


def set_aside_copies(directory: str | os.PathLike) -> list[Path]:
    """The old datasets that builds killed while replacing ``directory`` (SIGKILL
    between their two renames) left set aside beside it, in name order."""
    path = Path(os.path.abspath(directory))
    return sorted(old for old in path.parent.glob(f"{glob.escape(replaced_prefix(path))}*") if old.is_dir())


def missing_dataset_hint(directory: str | os.PathLike) -> str:
    """For a dataset directory that is not there: where a build killed while
    replacing it left it, and how to put it back; empty when none did."""
    copies = set_aside_copies(directory)
    if not copies:
        return ""
    return (f" — a build killed while replacing it set the dataset aside in {copies[0]}: rerun that build with "
            "--resume, which puts the dataset in place first")


def flat_settings(settings: Any) -> dict[str, Any]:
    """A recorded settings object (a manifest's ``build_config``, run.json's
    ``config``, a config's ``to_dict()``) as dotted names to JSON values
    (``{"a": {"b": (1,)}}`` as ``{"a.b": [1]}``): how two records are compared
    setting by setting."""
    flat: dict[str, Any] = {}

    def walk(value: Any, prefix: str) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                walk(inner, f"{prefix}.{key}" if prefix else key)
        else:
            flat[prefix] = value

    walk(json.loads(json.dumps(settings)), "")
    return flat


def load_manifest(directory: str | os.PathLike) -> Manifest:
    """:meth:`Manifest.load`."""
    return Manifest.load(directory)
