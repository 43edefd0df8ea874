"""Typed configuration of a dataset build, one dataclass per concern, parsed once
by the CLI (:mod:`data_prep.build`) and passed down."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from tacl_scale.data.masking import MaskingConfig

from .instances import InstanceConfig
from .sentences import SentenceConfig
from .tokenization import TokenizerConfig


@dataclass(frozen=True)
class InputConfig:
    """What to read."""

    patterns: tuple[str, ...]
    format: str = "wiki-xml"  # wiki-xml | text | wikiextractor-json
    # Split a multistream dump by its -index.txt.bz2 into units of about this many
    # compressed bytes, so one huge file is read in parallel.
    use_multistream_index: bool = True
    unit_bytes: int = 8 << 20


@dataclass(frozen=True)
class CleaningConfig:
    """Which documents survive."""

    min_doc_chars: int = 200  # after markup removal; shorter documents are skipped
    # Word boundaries for Chinese whole-word masking: jieba, or pre-segmented input
    # (words separated by spaces).
    zh_segmenter: str = "jieba"

    @classmethod
    def for_format(cls, input_format: str, min_doc_chars: int | None = None,
                   zh_segmenter: str | None = None) -> CleaningConfig:
        """The cleaning of an input format: ``min_doc_chars`` when given, else the
        default, but 1 for ``lines`` (each line is a whole document, a sentence)."""
        if min_doc_chars is None:
            min_doc_chars = 1 if input_format == "lines" else cls.min_doc_chars
        return cls(min_doc_chars, zh_segmenter if zh_segmenter is not None else cls.zh_segmenter)


@dataclass(frozen=True)
class OutputConfig:
    """Where and how the dataset is written."""

    directory: str
    num_shards: int = 1
    overwrite: bool = False
    # Share of documents (by a stable hash of their id) put in the validation split.
    validation_fraction: float = 0.0
    validation_shards: int = 1

    def __post_init__(self) -> None:
        if self.num_shards < 1:
            raise ValueError(f"num_shards must be >= 1, got {self.num_shards}")
        if not 0.0 <= self.validation_fraction < 1.0:
            raise ValueError(f"validation_fraction must be in [0, 1), got {self.validation_fraction}")
        if self.validation_shards < 1:
            raise ValueError(f"validation_shards must be >= 1, got {self.validation_shards}")

    @property
    def shard_keys(self) -> range:
        """Keys of every shard built: training shards ``0 .. num_shards-1``, then the
        validation shards (when there is a split)."""
        extra = self.validation_shards if self.validation_fraction > 0 else 0
        return range(self.num_shards + extra)

    def split_of_key(self, key: int) -> tuple[str, int]:
        """(split, index within the split) of shard key ``key``."""
        return ("train", key) if key < self.num_shards else ("validation", key - self.num_shards)


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
            raise ValueError(f"dupe_factor must be >= 1, got {self.dupe_factor}")

    @property
    def max_predictions(self) -> int:
        return self.masking.resolved_max_predictions(self.instances.max_seq_len)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
