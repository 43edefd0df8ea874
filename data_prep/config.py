"""Typed configuration of a dataset build, one dataclass per concern, parsed once
by the CLI (:mod:`data_prep.build`) and passed down."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tacl_scale.data.masking import MaskingConfig

from .instances import InstanceConfig
from .sentences import SentenceConfig
from .tokenization import TokenizerConfig


@dataclass(frozen=True)
class InputConfig:
    """What to read."""

    patterns: tuple[str, ...]
    format: str = "wiki-xml"  # wiki-xml | text | lines | wikiextractor-json
    # Split a multistream dump by its -index.txt.bz2 into units of about this many
    # compressed bytes, and an uncompressed text, lines or wikiextractor-json file
    # into units of about this many bytes of whole lines, so one huge file is read in
    # parallel.
    use_multistream_index: bool = True
    unit_bytes: int = 8 << 20

    def __post_init__(self) -> None:
        if self.unit_bytes < 1:
            raise ValueError("--unit-mb must be > 0 (a unit of at least one byte), "
                             f"got {self.unit_bytes / (1 << 20):g}")


@dataclass(frozen=True)
class CleaningConfig:
    """Which documents survive."""

    min_doc_chars: int = 200  # after markup removal; shorter documents are skipped
    # Word boundaries for Chinese whole-word masking: jieba, or pre-segmented input
    # (words separated by spaces).
    zh_segmenter: str = "jieba"

    def __post_init__(self) -> None:
        if self.min_doc_chars < 0:
            raise ValueError(f"--min-doc-chars must be >= 0, got {self.min_doc_chars}")

    @classmethod
    def for_format(cls, input_format: str, min_doc_chars: int | None = None,
                   zh_segmenter: str | None = None) -> CleaningConfig:
        """The cleaning of an input format: ``min_doc_chars`` when given, else the
        default, but 1 for ``lines`` (each line is a whole document, a sentence)."""
        if min_doc_chars is None:
            min_doc_chars = 1 if input_format == "lines" else cls.min_doc_chars
        return cls(min_doc_chars, zh_segmenter if zh_segmenter is not None else cls.zh_segmenter)


def add_cleaning_arguments(group: Any) -> None:
    """``--min-doc-chars`` and ``--traditional-to-simplified`` on an argparse parser or
    group: how documents are cleaned and split, which ``data_prep.build`` and
    ``tacl-sentence-list`` take alike, so a sentence list can agree with a build."""
    group.add_argument("--min-doc-chars", type=int, default=None,
                       help=f"skip documents shorter than this after markup removal (default: "
                       f"{CleaningConfig.min_doc_chars}; 1 with --format lines)")
    group.add_argument("--traditional-to-simplified", action="store_true",
                       help="Chinese: convert Traditional to Simplified (OpenCC t2s)")


def validation_fraction_problem(fraction: float) -> str | None:
    """Why ``--validation-fraction`` cannot be ``fraction`` (the build's and
    tacl-sentence-list's, which must pick the same documents), or None."""
    if not 0.0 <= fraction < 1.0:
        return f"--validation-fraction must be in [0, 1), got {fraction}"
    return None


@dataclass(frozen=True)
class OutputConfig:
    """Where and how the dataset is written."""

    directory: str
    num_shards: int = 1
    overwrite: bool = False
    # Share of documents (by a stable hash of their id) put in the validation split.
    validation_fraction: float = 0.0
    validation_shards: int = 1
    # num_shards was not given: data_prep.build sets it from the input's size
    # (auto_num_shards) before the output is prepared or the pipeline built, and the
    # manifest records both.
    auto_shards: bool = False

    def __post_init__(self) -> None:
        if self.num_shards < 1:
            raise ValueError(f"--num-shards must be >= 1, got {self.num_shards}")
        if problem := validation_fraction_problem(self.validation_fraction):
            raise ValueError(problem)
        if self.validation_shards < 1:
            raise ValueError(f"--validation-shards must be >= 1, got {self.validation_shards}")

    @property
    def shard_keys(self) -> range:
        """Keys of every shard built: training shards ``0 .. num_shards-1``, then the
        validation shards (when there is a split)."""
        extra = self.validation_shards if self.validation_fraction > 0 else 0
        return range(self.num_shards + extra)

    def split_of_key(self, key: int) -> tuple[str, int]:
        """(split, index within the split) of shard key ``key``."""
        return ("train", key) if key < self.num_shards else ("validation", key - self.num_shards)


# A shard's share of the input when data_prep.build chooses the shard count: bounded
# text per shard keeps a shard build's memory bounded (it holds a few dozen bytes per
# document: its id and offsets), and 256 MB of XML is some 10,000 Wikipedia articles, far above the 100
# documents a shard's random-B pool wants.
SHARD_INPUT_BYTES = 256 * 10**6
# Uncompressed size per compressed byte, for sizing: bz2 on MediaWiki XML is 3.6 on the
# English sample (the 22 GB English dump holds about 90 GB); gzip compresses text about 3x.
EXPANSION = {".bz2": 3.6, ".gz": 3.0}


def estimated_input_bytes(paths: list[str]) -> int:
    """The inputs' uncompressed size, estimated from their file sizes."""
    return sum(int(os.path.getsize(p) * EXPANSION.get(Path(p).suffix, 1.0)) for p in paths)


def auto_num_shards(input_bytes: int) -> int:
    """Shards for ``input_bytes`` of uncompressed input: one per
    :data:`SHARD_INPUT_BYTES` (rounded up), at least one."""
    return max(1, -(-input_bytes // SHARD_INPUT_BYTES))


@dataclass(frozen=True)
class BuildConfig:
    """Everything that determines a dataset's bytes (plus where to put it)."""

    input: InputConfig
    tokenizer: TokenizerConfig
    output: OutputConfig
    sentences: SentenceConfig = field(default_factory=SentenceConfig)
    cleaning: CleaningConfig = field(default_factory=CleaningConfig)
    instances: InstanceConfig = field(default_factory=InstanceConfig)
    masking: MaskingConfig = field(default_factory=MaskingConfig)
    dupe_factor: int = 5
    seed: int = 12345

    def __post_init__(self) -> None:
        if self.dupe_factor < 1:
            raise ValueError(f"--dupe-factor must be >= 1, got {self.dupe_factor}")
        if self.max_predictions > self.instances.max_seq_len:  # the manifest's reader refuses it
            raise ValueError(f"--max-predictions-per-seq must be at most --max-seq-len "
                             f"{self.instances.max_seq_len} (an instance has no more tokens to mask), got "
                             f"{self.max_predictions}")

    @property
    def max_predictions(self) -> int:
        return self.masking.resolved_max_predictions(self.instances.max_seq_len)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def runner_named(beam_args: list[str]) -> str | None:
    """The ``--runner`` among Beam's options (the last, as Beam takes it), or None."""
    name = None
    for i, arg in enumerate(beam_args):
        if arg == "--runner" and i + 1 < len(beam_args):
            name = beam_args[i + 1]
        elif arg.startswith("--runner="):
            name = arg.split("=", 1)[1]
    return name
