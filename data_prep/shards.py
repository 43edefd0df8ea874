"""Shard building and the manifest: everything between the spill parts of
tokenized documents (:mod:`data_prep.spill`) and the finished dataset directory
(format: :mod:`tacl_scale.data.manifest`).

Stage 2 (parallel over shards, :func:`build_shard`) gathers a shard's documents out
of every spill part, takes them in a canonical order (by document id), builds and
masks the instances and writes the shard. After the pipeline, :func:`finalize`
(in the driver) fills in empty shards, removes the temporary directory and writes
the manifest last (:func:`make_manifest`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from tacl_scale.data.indexed import IndexedWriter, smallest_token_dtype
from tacl_scale.data.integrity import file_checksum
from tacl_scale.data.manifest import (
    META_DTYPE,
    WORD_STARTS_PART,
    Counts,
    FileRecord,
    Manifest,
    MaskingRecord,
    ShardRecord,
    SpecialIds,
    SplitRecord,
    TokenizerRecord,
    part_prefix,
    shard_file_names,
    shard_name,
)
from tacl_scale.data.masking import MaskedInstances, mask_pass, seeded_generators
from tacl_scale.data.spilled import SpilledArray

from .config import BuildConfig
from .documents import SKIP_KINDS, VALIDATION_RULE
from .instances import PairSpec, assemble_all, create_pairs_from_document, single_segments
from .sources import describe_skips
from .spill import ShardDocuments
from .tokenization import PretrainTokenizer
from .workspace import Workspace

# finalize's warnings go out under the logger they always had (the build log's lines
# name it): this code was data_prep.pipeline's.
log = logging.getLogger("data_prep.pipeline")


class EmptyDatasetError(RuntimeError):
    """No training instance was built (no document survived cleaning, or none made
    an instance); no dataset is written."""

LENGTH_BIN = 32  # width of the instance-length histogram bins in the manifest
# Random B segments come from the shard's own documents; below this many, they come
# from a handful of documents (google-research/bert draws them from the whole corpus).
MIN_DOCUMENTS_PER_SHARD = 100


def random_b_pool_warnings(shards: list[ShardRecord], single_segment: bool = False) -> list[str]:
    """One warning per non-empty shard whose random-B pool is small (none for
    single-segment instances, which have no B), with the fix: fewer shards, or, for
    the only shard of its split (``shards`` holds every shard, empty ones too), where
    fewer is impossible, more input (more documents held out, for validation)."""
    if single_segment:
        return []
    of_split = {split: sum(1 for s in shards if s.split == split) for split in {s.split for s in shards}}

    def advice(split: str) -> str:
        if of_split[split] > 1:
            return f"use fewer shards: about documents / {MIN_DOCUMENTS_PER_SHARD} at most"
        if split == "validation":
            return (f"the only validation shard: too few documents are held out for a random-B pool of "
                    f"{MIN_DOCUMENTS_PER_SHARD}; a larger --validation-fraction holds out more")
        return (f"the only shard: the input is too small for a random-B pool of {MIN_DOCUMENTS_PER_SHARD} "
                "documents")

    return [
        f"{s.name}: {s.counts.documents} documents; its random B segments come from these only ({advice(s.split)})"
        for s in sorted(shards, key=lambda s: s.key)
        if 0 < s.counts.documents < MIN_DOCUMENTS_PER_SHARD
    ]


# A larger share of [UNK] among the source tokens is warned about: the vocabulary does
# not fit the text (an uncased one under --no-lowercase: ~12% of the real English
# sample; the real samples with their own vocabularies: well under 0.1%).
MAX_UNK_SHARE = 0.01


def unknown_token_warnings(tokens: int, unk_tokens: int, lowercase: bool | None) -> list[str]:
    """The warning for a build whose documents' ``tokens`` hold more than
    :data:`MAX_UNK_SHARE` ``[UNK]`` (``unk_tokens``), naming the case setting
    (``lowercase``: whether the tokenizer lower-cased; None where it has no such
    setting), or none."""
    if tokens <= 0 or unk_tokens <= MAX_UNK_SHARE * tokens:
        return []
    question = {
        False: "is --no-lowercase right for this vocabulary (an uncased one has no capital letters), and is it "
               "one for the text's language?",
        True: "is --lowercase right for this vocabulary (a cased one wants --no-lowercase), and is it one for the "
              "text's language?",
        None: "is the vocabulary one for the text's language?",
    }[lowercase]
    return [f"{100 * unk_tokens / tokens:.1f}% of the tokens are [UNK] ({unk_tokens:,} of {tokens:,}): {question}"]


@dataclass(frozen=True)
class TokenizerFacts:
    """What shard building needs from the tokenizer (small, picklable)."""

    vocab_size: int
    special_ids: SpecialIds
    replacement_ids: np.ndarray

    @property
    def token_dtype(self) -> np.dtype:
        return smallest_token_dtype(self.vocab_size)


def _move_into_place(tmp_prefix: Path, directory: Path, name: str, word_starts: bool) -> dict[str, FileRecord]:
    files: dict[str, FileRecord] = {}
    for key, file_name in shard_file_names(name, word_starts).items():
        tmp_file = tmp_prefix.parent / file_name
        target = directory / file_name
        os.replace(tmp_file, target)
        files[key] = FileRecord(file_name, target.stat().st_size, file_checksum(target))
    return files


@dataclass
class DocumentInstances:
    """All instances of one source document (every dupe pass), each kind of value
    joined into one array; ``lengths[k]``/``masked_counts[k]`` delimit instance k."""

    pairs: list[PairSpec]
    tokens: np.ndarray  # int64, [CLS] A [SEP] B [SEP] of every instance
    word_starts: np.ndarray | None  # bool, parallel to tokens; None without whole-word masking
    maskable: np.ndarray  # bool, parallel to tokens: not a special token
    lengths: list[int]
    masked_positions: np.ndarray  # int64, positions within each instance
    masked_tokens: np.ndarray  # int64, the token placed at each position
    masked_counts: list[int]


def document_instances(docs: ShardDocuments, doc_index: int, config: BuildConfig, facts: TokenizerFacts,
                       is_special: np.ndarray) -> DocumentInstances:
    """The NSP pairs of ``dupe_factor`` passes over one document, each pass with its
    own generators seeded from (seed, document id, dupe index), assembled and masked.
    Assembly works on the whole document at once, masking on one pass at a time
    (:func:`~tacl_scale.data.masking.mask_pass`: a few draws per pass, in the order
    that defines the dataset's bytes)."""
    specials = facts.special_ids
    docs.start_document(doc_index)
    pairs: list[PairSpec] = []
    pass_sizes: list[int] = []
    mask_rngs: list[np.random.Generator] = []
    for dupe in range(config.dupe_factor):
        pair_rng, mask_rng = seeded_generators(config.seed, docs.doc_ids[doc_index], dupe)
        if config.instances.single_segment:
            dupe_pairs = single_segments(docs.sentence_lengths[doc_index], doc_index, config.instances)
        else:
            dupe_pairs = create_pairs_from_document(docs.sentence_lengths, doc_index, config.instances, pair_rng)
        pairs += dupe_pairs
        pass_sizes.append(len(dupe_pairs))
        mask_rngs.append(mask_rng)
    tokens, lengths = assemble_all(pairs, docs.tokens, specials.cls, specials.sep)
    # Word starts matter only to whole-word masking (and its word_starts file).
    word_starts = None
    if config.masking.whole_word_masking:
        assert docs.word_starts is not None, "build_shard opens ShardDocuments with word_starts under whole-word masking"
        word_starts = assemble_all(pairs, docs.word_starts, 1, 1, dtype=bool)[0]
    maskable = ~is_special[tokens]
    if config.instances.single_segment:  # single-segment data has no static masks
        empty = np.zeros(0, dtype=np.int64)
        masked = MaskedInstances(empty, empty.copy(), [0] * len(pairs))
    else:
        masked = _mask_passes(tokens, maskable, word_starts, lengths, pass_sizes, mask_rngs, config, facts)
    return DocumentInstances(pairs, tokens, word_starts, maskable, lengths,
                             masked.positions, masked.placed, masked.counts)


def _mask_passes(tokens: np.ndarray, maskable: np.ndarray, word_starts: np.ndarray | None, lengths: list[int],
                 pass_sizes: list[int], rngs: list[np.random.Generator], config: BuildConfig,
                 facts: TokenizerFacts) -> MaskedInstances:
    """:func:`mask_pass` on each pass's instances (``pass_sizes[d]`` of them, joined
    in pass order; there is at least one pass), the results joined."""
    positions: list[np.ndarray] = []
    placed: list[np.ndarray] = []
    counts: list[int] = []
    first = start = 0
    for size, rng in zip(pass_sizes, rngs, strict=True):
        pass_lengths = lengths[first : first + size]
        stop = start + sum(pass_lengths)
        masked = mask_pass(tokens[start:stop], maskable[start:stop],
                           None if word_starts is None else word_starts[start:stop], pass_lengths, rng,
                           config.masking, config.max_predictions, facts.special_ids.mask,
                           facts.replacement_ids)
        positions.append(masked.positions)
        placed.append(masked.placed)
        counts += masked.counts
        first, start = first + size, stop
    return MaskedInstances(np.concatenate(positions), np.concatenate(placed), counts)


def _count(stats: dict[str, int], histogram: dict[int, int], instances: DocumentInstances,
           mask_id: int) -> None:
    """Add a document's instances to the shard's statistics (the fields of
    :class:`~tacl_scale.data.manifest.Counts`)."""
    for length in instances.lengths:
        bin_start = (length - 1) // LENGTH_BIN * LENGTH_BIN
        histogram[bin_start] = histogram.get(bin_start, 0) + 1
    placed = instances.masked_tokens
    instance_starts = np.cumsum([0, *instances.lengths], dtype=np.int64)[:-1]
    original = instances.tokens[instances.masked_positions + np.repeat(instance_starts, instances.masked_counts)]
    is_mask = placed == mask_id
    mask_count = int(np.count_nonzero(is_mask))
    kept_count = int(np.count_nonzero(~is_mask & (placed == original)))
    stats["instances"] += len(instances.pairs)
    stats["tokens"] += len(instances.tokens)
    stats["random_next"] += sum(pair.is_random_next for pair in instances.pairs)
    stats["maskable"] += int(np.count_nonzero(instances.maskable))
    stats["masked"] += len(placed)
    stats["mask_token"] += mask_count
    stats["kept_token"] += kept_count
    stats["random_token"] += len(placed) - mask_count - kept_count


def build_shard(
    shard: int,
    part_prefixes: Iterable[str],
    config: BuildConfig,
    facts: TokenizerFacts,
) -> ShardRecord:
    """Build, mask and write the shard of key ``shard`` (a training shard, or a
    validation one: ``OutputConfig.split_of_key``); return its manifest record.

    Documents are visited in id order (:func:`document_instances` makes each one's
    instances). The instances of one source document form one MMIDIDX document.
    Files are written under the temporary directory and renamed into place.
    """
    directory = Path(config.output.directory)
    tmp_dir = Workspace(directory).shard_scratch()
    split, index = config.output.split_of_key(shard)
    name = shard_name(index, split)
    docs = ShardDocuments(shard, part_prefixes, tmp_dir, word_starts=config.masking.whole_word_masking)
    is_special = np.zeros(facts.vocab_size, dtype=bool)
    is_special[list(facts.special_ids.all())] = True
    if config.instances.max_seq_len > np.iinfo(np.uint16).max:
        raise ValueError("max_seq_len does not fit the uint16 masked positions")

    stats = {"instances": 0, "tokens": 0, "random_next": 0, "masked": 0, "maskable": 0, "mask_token": 0,
             "random_token": 0, "kept_token": 0}
    histogram: dict[int, int] = {}
    tmp_prefix = tmp_dir / name
    whole_words = config.masking.whole_word_masking
    with contextlib.ExitStack() as writers:  # on an error every writer removes its partial files
        meta = writers.enter_context(SpilledArray(META_DTYPE, tmp_dir))  # len_a and NSP label per instance
        def writer(part: str, dtype: Any) -> IndexedWriter:
            return writers.enter_context(IndexedWriter(tmp_dir / part_prefix(name, part), dtype))

        tokens_out = writer("tokens", facts.token_dtype)
        positions_out = writer("masked_positions", np.uint16)
        placed_out = writer("masked_tokens", facts.token_dtype)
        starts_out = writer(WORD_STARTS_PART, np.uint8) if whole_words else None
        for doc_index in range(len(docs)):
            instances = document_instances(docs, doc_index, config, facts, is_special)
            tokens_out.add_joined_document(instances.tokens, instances.lengths)
            positions_out.add_joined_document(instances.masked_positions, instances.masked_counts)
            placed_out.add_joined_document(instances.masked_tokens, instances.masked_counts)
            if starts_out is not None:  # whole-word masking: word_starts assembled
                starts_out.add_joined_document(instances.word_starts.astype(np.uint8), instances.lengths)
            meta.extend([(len(pair.a), pair.is_random_next) for pair in instances.pairs])
            _count(stats, histogram, instances, facts.special_ids.mask)
        meta.save_npy(tmp_dir / shard_file_names(name)["meta"])

    files = _move_into_place(tmp_prefix, directory, name, whole_words)
    shutil.rmtree(tmp_dir, ignore_errors=True)
    counts = Counts(**stats, documents=len(docs), length_histogram=dict(sorted(histogram.items())))
    return ShardRecord(name, index, shard, split, files, counts, docs.duplicates)


def make_manifest(
    config: BuildConfig,
    tokenizer: TokenizerRecord,
    shards: list[ShardRecord],
    skips: dict[str, int],
    sources: list[FileRecord],
    pipeline_options: dict[str, Any],
    facts: TokenizerFacts,
) -> Manifest:
    """The dataset's :class:`~tacl_scale.data.manifest.Manifest`."""
    from tacl_scale import __version__

    masking = config.masking
    validation = [s for s in shards if s.split == "validation"]
    zh_segmenter = config.cleaning.zh_segmenter if masking.whole_word_masking and config.sentences.language == "zh" \
        else None
    return Manifest(
        created_by=f"tacl-scale {__version__} data_prep.build",
        language=config.sentences.language,
        input_format=config.input.format,
        tokenizer=tokenizer,
        token_dtype=str(np.dtype(facts.token_dtype)),
        max_seq_len=config.instances.max_seq_len,
        instance_kind=config.instances.kind,
        static_masks=not config.instances.single_segment,
        short_seq_prob=config.instances.short_seq_prob,
        random_next_prob=config.instances.random_next_prob,
        masking=MaskingRecord.of(masking, config.max_predictions, facts.replacement_ids, facts.vocab_size,
                                 zh_segmenter),
        dupe_factor=config.dupe_factor,
        seed=config.seed,
        train=SplitRecord.of([s for s in shards if s.split == "train"]),
        validation=SplitRecord.of(validation, config.output.validation_fraction, VALIDATION_RULE)
        if validation else None,
        skips=skips,
        warnings=tuple(random_b_pool_warnings(shards, config.instances.single_segment)),
        sources=tuple(sources),
        build_config=config.to_dict(),
        pipeline_options=pipeline_options,
    )


def empty_validation_warnings(config: BuildConfig, shards: list[ShardRecord]) -> list[str]:
    """The warning for a validation split that was asked for (``--validation-fraction``)
    but holds no instance, as a small input leaves it: the documents are held out by a
    hash of their id, so a few documents may give none."""
    fraction = config.output.validation_fraction
    held = [s for s in shards if s.split == "validation"]
    if fraction <= 0 or sum(s.counts.instances for s in held):
        return []
    held_documents = sum(s.counts.documents for s in held)
    documents = held_documents + sum(s.counts.documents for s in shards if s.split == "train")
    what = "no document" if not held_documents else f"{held_documents} document(s) that made no instance"
    return [f"the validation split is empty: --validation-fraction {fraction:g} held out {what} of the "
            f"{documents} documents built (about {fraction * documents:.1f} expected; each document is held out "
            "by a hash of its id), so training has nothing to validate on; use a larger --validation-fraction "
            "or more input"]


@dataclass(frozen=True)
class FinalizeInputs:
    """What :func:`finalize` needs beside the build's settings, gathered by the
    driver before the pipeline runs (it is never sent to a worker).

    - ``tokenizer``: the build's tokenizer, copied into ``DATASET/tokenizer/``.
    - ``tokenizer_sha256``: its file's sha256 as fingerprinted when the build
      started; the copy is checked against it.
    - ``sources``: each input file and its size, as the manifest records them.
    - ``pipeline_options``: the Beam options the build ran with (those set, unknown
      ones kept), as the manifest records them.
    """

    tokenizer: PretrainTokenizer
    tokenizer_sha256: str
    sources: list[FileRecord]
    pipeline_options: dict[str, Any]


def finalize(config: BuildConfig, facts: TokenizerFacts, inputs: FinalizeInputs,
             recorded_directory: str | None = None) -> Path:
    """Complete the dataset after the pipeline: gather the shard entries and the
    units' skip counts, fill in empty shards, drop the temporary files and write
    the manifest (last). ``recorded_directory``: the output the manifest records,
    when the dataset is built elsewhere first (``--overwrite``)."""
    directory = Path(config.output.directory)
    workspace = Workspace(directory)
    shards = workspace.entries()
    built = {s.key for s in shards}
    shards += [build_shard(k, [], config, facts) for k in config.output.shard_keys if k not in built]
    skip_counts = dict.fromkeys(SKIP_KINDS, 0)
    tokens = unk_tokens = 0
    for marker in workspace.completed_units():
        for kind, count in marker["skips"].items():
            skip_counts[kind] = skip_counts.get(kind, 0) + count
        # A unit completed by a version that did not count them (a resumed build) has none.
        tokens += marker.get("tokens", 0)
        unk_tokens += marker.get("unk_tokens", 0)
    skip_counts["duplicate_documents"] += sum(s.duplicate_documents for s in shards)
    workspace.remove()
    if sum(s.counts.instances for s in shards if s.split == "train") == 0:
        skipped = describe_skips(skip_counts)
        raise EmptyDatasetError(
            f"{directory}: no instance was built from {len(inputs.sources)} input file(s); skipped: {skipped} "
            f"(do --format {config.input.format} and --min-doc-chars {config.cleaning.min_doc_chars} fit them?)"
        )
    tokenizer = inputs.tokenizer.copy_into(directory, inputs.tokenizer_sha256)
    recorded = config if recorded_directory is None else replace(
        config, output=replace(config.output, directory=recorded_directory))
    manifest = make_manifest(recorded, tokenizer, shards, skip_counts, inputs.sources, inputs.pipeline_options,
                             facts)
    manifest = replace(manifest, warnings=(*manifest.warnings, *empty_validation_warnings(config, shards),
                                           *unknown_token_warnings(tokens, unk_tokens, inputs.tokenizer.lowercase)))
    for warning in manifest.warnings:
        log.warning("%s", warning)
    return manifest.write(directory)
