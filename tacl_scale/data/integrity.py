"""Is a dataset directory the bytes its manifest describes?

The manifest (format 4 on) records a checksum of every shard file and of every
file of the tokenizer copy; this module computes them (:func:`file_checksum`) and
checks a dataset against them. Two levels, for two costs:

- :func:`verify_tokenizer` — the tokenizer copy (kilobytes to a few MB): its
  files exist, the fingerprinted file has the manifest's ``sha256`` and, for a
  ``vocab.txt``, the manifest's ``vocab_size`` lines, for a tokenizer folder ids up
  to its ``vocab_size``; training does it always.
- :func:`verify_shards` — every byte of the shard files against their checksums
  (xxh3-128, about 10 GB/s on one core, so the disk sets the pace);
  ``tacl-inspect-dataset DIR --verify`` and training's ``--verify-data`` (on by
  default up to :data:`VERIFY_BY_DEFAULT_BYTES`).

Each problem is one string that names the file and what is wrong with it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from ..files import file_sha256
from ..vocab import ADDED_TOKENS_FILE, VocabularyError, ids_short_of
from .manifest import Manifest, ShardRecord

CHECKSUM_ALGORITHM = "xxh3_128"
# Training verifies the shards of datasets up to this size unless told otherwise
# (about 10 s at the 2 GB/s of a local NVMe disk; a network file system is slower).
VERIFY_BY_DEFAULT_BYTES = 20 * 10**9
_BLOCK = 8 << 20


def file_checksum(path: str | os.PathLike) -> str:
    """``xxh3_128:<hex>`` of a file's bytes: a non-cryptographic hash fast enough for
    hundreds of GB (it detects corruption, not tampering by someone who also edits
    the manifest)."""
    import xxhash

    digest = xxhash.xxh3_128()
    with open(path, "rb") as f:
        while block := f.read(_BLOCK):
            digest.update(block)
    return f"{CHECKSUM_ALGORITHM}:{digest.hexdigest()}"


def shard_bytes(manifest: Manifest) -> int:
    """The bytes of every shard file of both splits, as the manifest records them."""
    return sum(f.bytes for shard in all_shards(manifest) for f in shard.files.values())


def all_shards(manifest: Manifest) -> list[ShardRecord]:
    """The shards of both splits, training first."""
    return [*manifest.train.shards, *(manifest.validation.shards if manifest.validation else ())]


def verify_shards(directory: str | os.PathLike, manifest: Manifest,
                  shards: Iterable[ShardRecord] | None = None) -> list[str]:
    """Every file of ``shards`` (default: all of both splits) against the manifest:
    present, of its recorded size and checksum (a dataset built before format 4
    records none: :func:`unchecked_files` counts them; their sizes are checked)."""
    directory = Path(directory)
    problems: list[str] = []
    for shard in (all_shards(manifest) if shards is None else shards):
        for record in shard.files.values():
            path = directory / record.path
            if not path.is_file():
                problems.append(f"{path}: missing")
                continue
            size = path.stat().st_size
            if size != record.bytes:
                problems.append(f"{path}: {size} bytes, the manifest records {record.bytes}")
            elif record.checksum is not None and (actual := file_checksum(path)) != record.checksum:
                problems.append(f"{path}: checksum {actual}, the manifest records {record.checksum}: the file is "
                                "corrupt (rebuild the dataset, or copy this file again from a good copy)")
    return problems


def unchecked_files(manifest: Manifest) -> int:
    """Shard files whose checksum the manifest does not record (format < 4)."""
    return sum(f.checksum is None for shard in all_shards(manifest) for f in shard.files.values())


def verify_tokenizer(directory: str | os.PathLike, manifest: Manifest) -> list[str]:
    """The dataset's tokenizer copy against the manifest (see the module docstring).
    Datasets before format 3 name a tokenizer outside themselves: only its
    fingerprint is checked, if the file is still there."""
    directory = Path(directory)
    tok = manifest.tokenizer
    location = tok.location(directory)
    fingerprinted = location / tok.file if location.is_dir() else location
    if not tok.portable:
        if fingerprinted.is_file() and file_sha256(fingerprinted) != tok.sha256:
            return [f"{fingerprinted}: not the tokenizer {directory} was built with (its sha256 differs from the "
                    "manifest's): restore that file, or rebuild the dataset"]
        return []
    problems = []
    copy_dir = fingerprinted.parent
    bad: set[str] = set()
    for name in tok.files:
        path = copy_dir / name
        if not path.is_file():
            problems.append(f"{path}: missing from the dataset's tokenizer copy")
            bad.add(name)
        elif name in tok.checksums and (actual := file_checksum(path)) != tok.checksums[name]:
            problems.append(f"{path}: checksum {actual}, the manifest records {tok.checksums[name]}: the tokenizer "
                            "copy was changed after the build; the shards' ids belong to the original (rebuild the "
                            "dataset, or restore the file)")
            bad.add(name)
    if tok.file not in tok.files:
        problems.append(f"{directory / 'manifest.json'}: tokenizer file {tok.file!r} is not one of the copied "
                        f"files {list(tok.files)}: the manifest was edited")
    elif tok.file not in bad and fingerprinted.is_file():
        if file_sha256(fingerprinted) != tok.sha256:
            problems.append(f"{fingerprinted}: its sha256 is not the manifest's tokenizer sha256: the shards' ids "
                            "belong to another vocabulary (rebuild the dataset, or restore the file)")
        elif tok.kind == "wordpiece" and (lines := _line_count(fingerprinted)) != tok.vocab_size:
            problems.append(f"{directory / 'manifest.json'}: tokenizer vocab_size {tok.vocab_size}, but "
                            f"{fingerprinted} has {lines} tokens: the manifest was edited")
        elif tok.kind == "hf" and (problem := _missing_added_tokens(copy_dir, tok.vocab_size, tok.source, tok.files)):
            problems.append(problem)
    return problems


def _missing_added_tokens(copy_dir: Path, vocab_size: int, source: str | None, listed: tuple[str, ...]) -> str | None:
    """Why a Hugging Face tokenizer copy gives fewer ids than the dataset's
    ``vocab_size`` (:func:`~tacl_scale.vocab.ids_short_of`), or None: a copy made
    before added_tokens.json was copied with the rest (its manifest's ``listed`` files
    lack it) lacks the tokens that file adds to a vocab.txt, which an export of a run
    on the dataset would then read as [UNK]."""
    if ADDED_TOKENS_FILE in listed:  # this version's copy, the file lost since: said as missing
        return None
    try:
        given = ids_short_of(copy_dir, vocab_size)
    except (VocabularyError, OSError):  # its sha256 matched: what the build read, and parsed
        return None
    if given is None:
        return None
    origin = Path(source).parent / ADDED_TOKENS_FILE if source else f"the {ADDED_TOKENS_FILE} of the tokenizer it was built with"
    return (f"{copy_dir}: gives ids 0–{given - 1}, and the dataset's vocab_size is {vocab_size}: the copy lacks the "
            f"tokens {ADDED_TOKENS_FILE} added (tacl-scale did not copy that file before), which a run's export would "
            f"read as [UNK]; copy {origin} into {copy_dir}")


def _line_count(path: Path) -> int:
    with open(path, "rb") as f:
        data = f.read()
    return data.count(b"\n") + (0 if not data or data.endswith(b"\n") else 1)


def verify_dataset(directory: str | os.PathLike, manifest: Manifest | None = None) -> list[str]:
    """:func:`verify_tokenizer` and :func:`verify_shards` of a whole dataset."""
    manifest = manifest or Manifest.load(directory)
    return [*verify_tokenizer(directory, manifest), *verify_shards(directory, manifest)]
