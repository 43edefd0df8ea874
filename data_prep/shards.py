"""Spill files, shard building and the manifest: everything between tokenized
documents and the finished dataset directory (format: :mod:`tacl_scale.data.manifest`).

Stage 1 (parallel over inputs) appends tokenized documents to *spill parts*: MMIDIDX
files (sentences as sequences, documents as documents) in the build's temporary
directory. Stage 2 (parallel over shards) reads every part once, copying its own
documents into a scratch file, takes them in a canonical order (by document id),
builds and masks the instances and writes the shard. Holding documents on disk
instead of in the runner's shuffle keeps memory flat whatever the corpus size.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import uuid
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from tacl_scale.data.indexed import IndexedReader, IndexedWriter, bin_path, idx_path, smallest_token_dtype
from tacl_scale.data.integrity import file_checksum
from tacl_scale.data.manifest import (
    META_DTYPE,
    Counts,
    FileRecord,
    Manifest,
    MaskingRecord,
    ShardRecord,
    SplitRecord,
    TokenizerRecord,
    shard_file_names,
    shard_name,
)
from tacl_scale.data.masking import MaskedInstances, mask_pass, seeded_generators
from tacl_scale.data.spilled import SpilledArray

from .config import BuildConfig
from .documents import VALIDATION_RULE, TokenizedDocument
from .instances import PairSpec, Segment, assemble_all, create_pairs_from_document, single_segments
from .workspace import Workspace


class EmptyDatasetError(RuntimeError):
    """No training instance was built (no document survived cleaning, or none made
    an instance); no dataset is written."""

LENGTH_BIN = 32  # width of the instance-length histogram bins in the manifest
# Random B segments come from the shard's own documents; below this many, they come
# from a handful of documents (google-research/bert draws them from the whole corpus).
MIN_DOCUMENTS_PER_SHARD = 100


def random_b_pool_warnings(shards: list[ShardRecord], single_segment: bool = False) -> list[str]:
    """One warning per non-empty shard whose random-B pool is small (none for
    single-segment instances, which have no B)."""
    if single_segment:
        return []
    return [
        f"{s.name}: {s.counts.documents} documents; its random B segments come from these only "
        f"(use fewer shards: about documents / {MIN_DOCUMENTS_PER_SHARD} at most)"
        for s in sorted(shards, key=lambda s: s.key)
        if 0 < s.counts.documents < MIN_DOCUMENTS_PER_SHARD
    ]


@dataclass(frozen=True)
class TokenizerFacts:
    """What shard building needs from the tokenizer (small, picklable)."""

    vocab_size: int
    special_ids: dict[str, int]
    replacement_ids: np.ndarray

    @property
    def token_dtype(self) -> np.dtype:
        return smallest_token_dtype(self.vocab_size)


class SpillWriter:
    """Appends tokenized documents to one spill part (see module docstring)."""

    def __init__(self, tmp_dir: str | os.PathLike, token_dtype: np.dtype, prefix: Path | None = None) -> None:
        Path(tmp_dir).mkdir(parents=True, exist_ok=True)
        self.prefix = prefix or Path(tmp_dir) / f"part-{uuid.uuid4().hex}"
        self._ids = IndexedWriter(self.prefix, token_dtype)
        self._starts = IndexedWriter(f"{self.prefix}.wstart", np.uint8)
        self._docs_path = Path(f"{self.prefix}.docs.jsonl")
        self._docs = open(self._docs_path, "w", encoding="utf-8")
        self.shards: set[int] = set()

    @property
    def files(self) -> list[Path]:
        """Every file of the part: what a completion marker syncs and names."""
        return [bin_path(self.prefix), idx_path(self.prefix), bin_path(f"{self.prefix}.wstart"),
                idx_path(f"{self.prefix}.wstart"), self._docs_path]

    def add(self, shard: int, document: TokenizedDocument) -> None:
        """Append ``document`` to the part, for shard ``shard``."""
        if not document.sentences:
            return  # nothing to pair; the document processor counts such skips
        self._ids.add_document([sentence.ids for sentence in document.sentences])
        self._starts.add_document([sentence.word_starts.astype(np.uint8) for sentence in document.sentences])
        self._docs.write(json.dumps([document.doc_id, shard], ensure_ascii=False) + "\n")
        self.shards.add(shard)

    def close(self) -> str:
        """Finish the part's files; return its prefix."""
        self._ids.close()
        self._starts.close()
        self._docs.close()
        return str(self.prefix)

    def abort(self) -> None:
        """Remove what the part wrote (a failed unit leaves no file of it)."""
        self._ids.abort()
        self._starts.abort()
        self._docs.close()
        self._docs_path.unlink(missing_ok=True)


class _GatheredValues:
    """A :class:`~data_prep.instances.TokenStore` over one shard's documents,
    gathered into one unlinked scratch file (:class:`ShardDocuments` writes it).

    Values are read with ``os.pread``: the document being built
    (:meth:`start_document`) as one copy on its first read, a segment of any other (a
    random B) by itself. Nothing is memory-mapped: a mapped page, once read, stays in
    the process's RSS, and the kernel maps a window of pages around each page read,
    so NSP's random B segments, read from anywhere in the shard's documents spread
    over every spill part, mapped up to 64 KB of other shards' data each (300 MB of a
    4 GB build's shard build between two releases, 200 MB at 1 GB).
    """

    def __init__(self, file: BinaryIO, what: str, dtype: np.dtype, bases: Sequence[int],
                 sentence_lengths: Sequence[Sequence[int]]) -> None:
        self._file = file  # kept open: the file has no name, closing it deletes it
        self._what = what  # for errors: which scratch file, where
        self._fd = file.fileno()
        self._dtype = dtype
        self._bases = bases  # where each document's values start in the file, in values
        # Each document's sentence lengths (ShardDocuments' table): where a sentence
        # starts is added up when it is read, so nothing per sentence is kept in
        # memory (a shard's size is the user's choice).
        self._lengths = sentence_lengths
        self._document = -1  # the document being built
        self._copy: np.ndarray | None = None  # its values, once read
        self._copy_starts: list[int] = []  # where its sentences start in them

    def start_document(self, document: int) -> None:
        """``document``'s instances are being made now: its values are read (on first
        use) as one copy, which replaces the previous document's."""
        self._document = document
        self._copy = None

    def values(self, segment: Segment) -> np.ndarray:
        document = segment.document
        count = segment.stop - segment.start
        if document != self._document:  # a random B: its offset added up, the segment read
            begin = sum(self._lengths[document][: segment.first]) + segment.start
            return self._read(self._bases[document] + begin, count)
        if self._copy is None:
            lengths = self._lengths[document]
            self._copy_starts = [0, *accumulate(lengths)]
            self._copy = self._read(self._bases[document], self._copy_starts[-1])
        begin = self._copy_starts[segment.first] + segment.start
        return self._copy[begin : begin + count]

    def _read(self, offset: int, count: int) -> np.ndarray:
        """``count`` values from value ``offset`` of the file."""
        itemsize = self._dtype.itemsize
        data = os.pread(self._fd, count * itemsize, offset * itemsize)
        if len(data) != count * itemsize:  # the scratch file was truncated under us
            raise OSError(f"{self._what}: short read at value {offset} ({len(data)} of {count * itemsize} bytes)")
        return np.frombuffer(data, dtype=self._dtype)


class _SentenceLengthTable(Sequence[array]):
    """Each gathered document's sentence lengths (``table[d][k]``: the tokens of
    sentence k of document d) in an unlinked scratch file, read with ``os.pread``.

    Memory holds 12 bytes a document and the documents read last, up to
    :attr:`RECENT_BYTES` of lengths (the one being built is read for each dupe pass,
    a random B's for its sentences and again when its tokens are assembled), not
    4 bytes a sentence: a shard's size is the user's choice.
    """

    RECENT_BYTES = 1 << 20  # sentence lengths kept after their reads, the oldest dropped first
    ENTRY_BYTES = 128  # what a kept document costs beside its lengths (its array object, the dict's entry)

    def __init__(self, file: BinaryIO, what: str, firsts: array, counts: array) -> None:
        self._file = file  # kept open: the file has no name, closing it deletes it
        self._what = what
        self._fd = file.fileno()
        self._firsts = firsts  # array("q"): each document's first sentence in the file
        self._counts = counts  # array("i"): each document's number of sentences
        self._recent: dict[int, array] = {}  # in the order read
        self._recent_bytes = 0

    def __len__(self) -> int:
        return len(self._counts)

    def __getitem__(self, document: int) -> array:  # type: ignore[override]  # no slices
        lengths = self._recent.get(document)
        if lengths is not None:
            return lengths
        document = range(len(self._counts))[document]  # IndexError out of range, as a list's
        size = 4 * self._counts[document]
        data = os.pread(self._fd, size, 4 * self._firsts[document])
        if len(data) != size:  # the scratch file was truncated under us
            raise OSError(f"{self._what}: short read of document {document}'s sentence lengths "
                          f"({len(data)} of {size} bytes)")
        lengths = array("i", data)
        self._recent[document] = lengths
        self._recent_bytes += self.ENTRY_BYTES + size
        while self._recent_bytes > self.RECENT_BYTES and len(self._recent) > 1:
            oldest = next(iter(self._recent))
            self._recent_bytes -= self.ENTRY_BYTES + 4 * len(self._recent.pop(oldest))
        return lengths


class ShardDocuments:
    """The documents of one shard gathered from spill parts, sorted by id (then
    content), with exact duplicates (same id and same tokens: the same page given
    twice) dropped and counted.

    Opening reads every part once, in turn, and copies this shard's documents (their
    tokens, word starts and sentence lengths) into unlinked files in ``scratch`` (a
    temporary directory when None): a part's files are closed before the next is
    opened, so a shard build holds three files open (two with ``word_starts=False``)
    and maps nothing, whatever the number of
    parts (it held four maps, each with its file open, per part: 11,000 files for
    the English dump's 2,750 parts, over the usual limit of 1,024), and reads its
    documents from one place instead of from every part.
    """

    def __init__(self, shard: int, part_prefixes: Iterable[str], scratch: str | os.PathLike | None = None,
                 word_starts: bool = True) -> None:
        tokens_file = tempfile.TemporaryFile(dir=scratch)
        starts_file = tempfile.TemporaryFile(dir=scratch) if word_starts else None
        lengths_file = tempfile.TemporaryFile(dir=scratch)  # int32 sentence lengths
        found: list[tuple[str, str, int]] = []  # (doc_id, digest, number in gathered order)
        bases = array("q")  # in values, the same in both files (one value per token)
        firsts = array("q")  # in sentences, in lengths_file
        counts = array("i")  # sentences
        base = 0
        sentences = 0
        dtype = np.dtype(np.int32)  # the parts' token type (an empty shard reads none)
        for prefix in sorted(set(part_prefixes)):
            ids = IndexedReader(prefix)
            dtype = ids.dtype
            starts = IndexedReader(f"{prefix}.wstart") if word_starts else None
            with open(f"{prefix}.docs.jsonl", encoding="utf-8") as f:
                for doc_no, line in enumerate(f):
                    # Every shard reads every part's list: parse only its own lines
                    # (``[doc_id, shard]``: the shard is the number after the last comma).
                    if int(line[line.rindex(",") + 1 : line.rindex("]")]) != shard:
                        continue
                    doc_id = json.loads(line)[0]
                    first = int(ids.document_index[doc_no])
                    end = int(ids.document_index[doc_no + 1])
                    content = ids.span(first, end - 1).tobytes() if end > first else b""
                    digest = hashlib.blake2b(content, digest_size=8).hexdigest()
                    found.append((doc_id, digest, len(bases)))
                    tokens_file.write(content)
                    if starts_file is not None and starts is not None and end > first:
                        starts_file.write(starts.span(first, end - 1).tobytes())
                    lengths_file.write(ids.sequence_lengths[first:end].astype(np.int32).tobytes())
                    firsts.append(sentences)
                    counts.append(end - first)
                    sentences += end - first
                    bases.append(base)
                    base += len(content) // ids.dtype.itemsize
            del ids, starts  # unmapped and closed before the next part is opened
        for file in (tokens_file, starts_file, lengths_file):
            if file is not None:
                file.flush()
        found.sort()
        # doc_ids are unique keys (they seed the random choices): a second document
        # with the same id but other content keeps its own, content-derived key.
        self.doc_ids: list[str] = []
        kept: list[int] = []
        self.duplicates = 0
        previous: tuple[str, str] | None = None
        for doc_id, digest, number in found:
            if previous == (doc_id, digest):
                self.duplicates += 1
                continue
            same_id = previous is not None and previous[0] == doc_id
            previous = (doc_id, digest)
            self.doc_ids.append(f"{doc_id}#{digest}" if same_id else doc_id)
            kept.append(number)
        where = scratch if scratch is not None else tempfile.gettempdir()
        # Each document's sentence lengths, as ``array("i")`` (indexing gives Python
        # ints, as the pair loop wants).
        self.sentence_lengths = _SentenceLengthTable(
            lengths_file, f"{where}: shard {shard}'s sentence lengths (unlinked)",
            array("q", (firsts[n] for n in kept)), array("i", (counts[n] for n in kept)))
        kept_bases = array("q", (bases[n] for n in kept))
        self.tokens = _GatheredValues(tokens_file, f"{where}: shard {shard}'s copy of its tokens (unlinked)", dtype,
                                      kept_bases, self.sentence_lengths)
        self.word_starts = (_GatheredValues(starts_file, f"{where}: shard {shard}'s copy of its word starts (unlinked)",
                                            np.dtype(np.uint8), kept_bases, self.sentence_lengths)
                            if starts_file is not None else None)

    def start_document(self, doc_index: int) -> None:
        """The instances of document ``doc_index`` are being made now (see
        :class:`_GatheredValues`: it is read once)."""
        self.tokens.start_document(doc_index)
        if self.word_starts is not None:
            self.word_starts.start_document(doc_index)

    def __len__(self) -> int:
        return len(self.doc_ids)


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
    tokens, lengths = assemble_all(pairs, docs.tokens, specials["cls"], specials["sep"])
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
                           config.masking, config.max_predictions, facts.special_ids["mask"],
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
    is_special[list(facts.special_ids.values())] = True
    if config.instances.max_seq_len > np.iinfo(np.uint16).max:
        raise ValueError("max_seq_len does not fit the uint16 masked positions")

    stats = {"instances": 0, "tokens": 0, "random_next": 0, "masked": 0, "maskable": 0, "mask_token": 0,
             "random_token": 0, "kept_token": 0}
    histogram: dict[int, int] = {}
    tmp_prefix = tmp_dir / name
    whole_words = config.masking.whole_word_masking
    with contextlib.ExitStack() as writers:  # on an error every writer removes its partial files
        meta = writers.enter_context(SpilledArray(META_DTYPE, tmp_dir))  # len_a and NSP label per instance
        tokens_out = writers.enter_context(IndexedWriter(tmp_prefix, facts.token_dtype))
        positions_out = writers.enter_context(IndexedWriter(tmp_dir / f"{name}.masked_positions", np.uint16))
        placed_out = writers.enter_context(IndexedWriter(tmp_dir / f"{name}.masked_tokens", facts.token_dtype))
        starts_out = (writers.enter_context(IndexedWriter(tmp_dir / f"{name}.word_starts", np.uint8))
                      if whole_words else None)
        for doc_index in range(len(docs)):
            instances = document_instances(docs, doc_index, config, facts, is_special)
            tokens_out.add_joined_document(instances.tokens, instances.lengths)
            positions_out.add_joined_document(instances.masked_positions, instances.masked_counts)
            placed_out.add_joined_document(instances.masked_tokens, instances.masked_counts)
            if starts_out is not None:  # whole-word masking: word_starts assembled
                starts_out.add_joined_document(instances.word_starts.astype(np.uint8), instances.lengths)
            meta.extend([(len(pair.a), pair.is_random_next) for pair in instances.pairs])
            _count(stats, histogram, instances, facts.special_ids["mask"])
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
