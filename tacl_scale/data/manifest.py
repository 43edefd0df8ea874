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

and ``manifest.json``, written last by write-to-temp-then-rename: a directory without
it is not a dataset (a crashed run never looks finished).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

FORMAT_NAME = "tacl-scale-pretrain"
FORMAT_VERSION = 1
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


def shard_name(index: int) -> str:
    return f"shard-{index:05d}"


def shard_file_names(name: str) -> dict[str, str]:
    """The file name of every part of shard ``name``, keyed as in the manifest."""
    return {key: name + suffix for key, suffix in SHARD_FILE_SUFFIXES.items()}


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
    if version != FORMAT_VERSION:
        raise DatasetError(
            f"{path}: format version {version!r}, this reader supports {FORMAT_VERSION}"
        )
    for key in ("tokenizer", "max_seq_len", "shards", "totals"):
        if key not in manifest:
            raise DatasetError(f"{path}: manifest lacks {key!r}")
    return manifest
