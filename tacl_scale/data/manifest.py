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

and ``manifest.json``, written last by write-to-temp-then-rename: a directory without
it is not a dataset (a crashed run never looks finished).

Format version 2 adds an optional **validation split**: whole documents, chosen by
a stable hash of their id (the manifest's ``validation.rule``), whose instances are
built among themselves (their random B segments come from other validation
documents) into shards of their own, ``validation-NNNNN.*`` with the same files.
The manifest lists them under ``validation`` (``null`` when there is none) with
their counts. Version 1 datasets (no split) still load.

``instance_kind`` says what an instance is: ``pairs`` (the default, and what a
manifest without the key means) or ``single-segment``, ``[CLS] sentence [SEP]``
(``data_prep.build --single-segment``: ``len_a`` is the sentence, ``nsp_label`` 0).
``static_masks`` false means the masked-position files hold no positions; such a
dataset feeds the ``mirror`` objective, or MLM/TaCL with dynamic masking.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

FORMAT_NAME = "tacl-scale-pretrain"
FORMAT_VERSION = 2
SUPPORTED_VERSIONS = (1, 2)  # 1: no validation split
SPLITS = ("train", "validation")
MANIFEST_NAME = "manifest.json"

# Suffixes of the files of one shard, relative to its prefix.
SHARD_FILE_SUFFIXES: dict[str, str] = {
    "tokens_bin": ".bin",
    "tokens_idx": ".idx",
    "masked_positions_bin": ".masked_positions.bin",
    "masked_positions_idx": ".masked_positions.idx",
    "masked_tokens_bin": ".masked_tokens.bin",
    "masked_tokens_idx": ".masked_tokens.idx",
    "meta": ".meta.npy",
}

# Only in datasets built with whole-word masking (format 2): per instance, 1 where a
# token starts a word, the word boundaries the static masks used, so that dynamic
# masking can use the same ones (Chinese segmentation cannot be recomputed from ids).
WORD_START_SUFFIXES: dict[str, str] = {
    "word_starts_bin": ".word_starts.bin",
    "word_starts_idx": ".word_starts.idx",
}

META_DTYPE = [("len_a", "<u2"), ("nsp_label", "u1")]


class DatasetError(ValueError):
    """A dataset directory is missing, incomplete or inconsistent."""


def file_sha256(path: str | os.PathLike) -> str:
    """The vocabulary fingerprint the manifest records (``tokenizer.sha256``): the
    sha256 of the tokenizer's file."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def shard_name(index: int, split: str = "train") -> str:
    return f"shard-{index:05d}" if split == "train" else f"{split}-{index:05d}"


def shard_file_names(name: str, word_starts: bool = False) -> dict[str, str]:
    """The file name of every part of shard ``name``, keyed as in the manifest
    (``word_starts``: with the whole-word boundaries)."""
    suffixes = {**SHARD_FILE_SUFFIXES, **(WORD_START_SUFFIXES if word_starts else {})}
    return {key: name + suffix for key, suffix in suffixes.items()}


def load_manifest(directory: str | os.PathLike) -> dict[str, Any]:
    """Parse and check ``DIR/manifest.json``; raise :class:`DatasetError` naming the
    file and the problem when it is absent, unparsable or of another format."""
    path = Path(directory) / MANIFEST_NAME
    if not Path(directory).is_dir():
        raise DatasetError(f"{directory}: not a directory")
    if not path.is_file():
        raise DatasetError(
            f"{path}: missing — {directory} is not a finished dataset "
            "(the build did not complete, or this is not a dataset directory)"
        )
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DatasetError(f"{path}: unreadable manifest: {err}") from err
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_NAME:
        raise DatasetError(f"{path}: not a {FORMAT_NAME} manifest")
    version = manifest.get("format_version")
    if version not in SUPPORTED_VERSIONS:
        raise DatasetError(
            f"{path}: format version {version!r}, this reader supports "
            f"{', '.join(map(str, SUPPORTED_VERSIONS))}: update tacl-scale to read it"
        )
    for key in ("tokenizer", "max_seq_len", "shards", "totals"):
        if key not in manifest:
            raise DatasetError(f"{path}: manifest lacks {key!r}")
    return manifest


def has_validation(manifest: dict[str, Any]) -> bool:
    """Whether a dataset has a validation split with instances in it."""
    validation = manifest.get("validation")
    return bool(validation) and int(validation["totals"]["instances"]) > 0


def split_entries(manifest: dict[str, Any], split: str, directory: str | os.PathLike) -> tuple[list, int]:
    """The shard entries and the instance count of ``split`` (``train`` or
    ``validation``); a :class:`DatasetError` naming the directory when the split
    does not exist."""
    if split not in SPLITS:
        raise ValueError(f"split {split!r} is not one of {SPLITS}")
    if split == "train":
        return manifest["shards"], int(manifest["totals"]["instances"])
    if not manifest.get("validation"):
        raise DatasetError(f"{directory}: has no validation split; rebuild it with "
                           "python -m data_prep.build ... --validation-fraction F (e.g. 0.01)")
    validation = manifest["validation"]
    return validation["shards"], int(validation["totals"]["instances"])
