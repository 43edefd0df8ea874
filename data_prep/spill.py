"""Spill parts: the tokenized documents of stage 1 on disk, and stage 2's copy of one
shard's documents out of them.

Stage 1 (parallel over work units) appends each unit's tokenized documents to one
*spill part* (:class:`SpillWriter`): MMIDIDX files (sentences as sequences,
documents as documents; beside them each sentence's word starts) and the list of
its documents, in the build's temporary directory (named by
:mod:`data_prep.workspace`). Stage 2 (parallel over shards) reads every part once,
copying its own shard's documents into unlinked scratch files
(:class:`ShardDocuments`) that :func:`data_prep.shards.build_shard` reads in a
canonical order (by document id). Holding documents on disk instead of in the
runner's shuffle keeps memory flat whatever the corpus size.

The document list, ``PREFIX.shard-docs.jsonl``, holds one ``[doc_id, shard, doc_no]``
line per document (``doc_no``: its document number in the part's MMIDIDX files),
grouped by shard in ascending order, document order within a shard;
``PREFIX.shard-docs.offsets`` says where each shard's lines are: little-endian int64
byte offsets, shard k's lines being bytes ``offsets[k]:offsets[k + 1]`` of the list
(the part's highest shard + 2 offsets, the last the list's size). A shard build reads
its own two offsets (and the last, to check the file) and its own lines from each
part, never the other shards' (every part holds documents of nearly every shard, so
reading whole lists made the shard stage's work grow as shards × documents).

Two earlier formats are still read, for an interrupted build resumed by this
version: ``PREFIX.docs.jsonl`` alone (``[doc_id, shard]`` lines in document order,
read whole, as they were), and ``PREFIX.docs.jsonl`` with ``PREFIX.docs.shards``
(this format under those names, as main wrote it for three commits, b18696a to
6788687). The new names keep an earlier version from misreading a part of this one:
it fails on the missing ``.docs.jsonl``.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import uuid
from array import array
from collections.abc import Iterable, Iterator, Sequence
from itertools import accumulate
from pathlib import Path
from typing import BinaryIO

import numpy as np

from tacl_scale.data.indexed import IndexedReader, IndexedWriter, bin_path, idx_path

from .documents import TokenizedDocument
from .instances import Segment


class SpillWriter:
    """Appends tokenized documents to one spill part (see module docstring).

    It writes files of its own (``PREFIX.attempt-<random>.*``) and links them to the
    part's names when it closes, once their data is synced: two live attempts of one
    work unit (a runner's speculative execution, or a task run again while a worker
    thought lost still runs it) each write their own files; the part's names only
    ever hold a finished part, which a later attempt leaves in place (the same bytes:
    a unit's part is deterministic; replacing it would pull the files from under a
    shard build reading them, ESTALE on NFS); and an attempt that fails, in
    :meth:`close` too, removes its own files, never the part another attempt finished.
    A killed attempt's files are named by no completion marker: a resumed build
    removes them.

    Memory holds a byte count per shard, not per document: the document list is
    written as documents come (a compressed ``lines`` file is one work unit however
    large, a document per line) and regrouped by shard on disk when the part closes,
    :attr:`REGROUP_BUFFER_BYTES` of lines at a time (about 2.5 times that in memory,
    as Python objects)."""

    # Lines of the regrouped list held before they are written, in bytes.
    REGROUP_BUFFER_BYTES = 4 << 20

    def __init__(self, tmp_dir: str | os.PathLike, token_dtype: np.dtype, prefix: Path | None = None) -> None:
        Path(tmp_dir).mkdir(parents=True, exist_ok=True)
        self.prefix = prefix or Path(tmp_dir) / f"part-{uuid.uuid4().hex}"
        attempt = Path(f"{self.prefix}.attempt-{uuid.uuid4().hex[:16]}")
        self._docs_path = documents_path(attempt)
        self._offsets_path = shard_offsets_path(attempt)
        self._arrival_path = Path(f"{attempt}.arrivals.jsonl")  # the list in document order, until close
        # Each file as this attempt writes it, and as the part names it.
        self._links = {written: Path(f"{self.prefix}{str(written)[len(str(attempt)):]}") for written in (
            bin_path(attempt), idx_path(attempt), bin_path(f"{attempt}.wstart"), idx_path(f"{attempt}.wstart"),
            self._docs_path, self._offsets_path)}
        self._ids = IndexedWriter(attempt, token_dtype)
        self._starts = IndexedWriter(f"{attempt}.wstart", np.uint8)
        self._arrivals: BinaryIO | None = open(self._arrival_path, "wb")
        self._documents = 0
        self._shard_bytes: dict[int, int] = {}  # each shard's bytes of the list

    @property
    def shards(self) -> set[int]:
        """The shards the part holds documents of."""
        return set(self._shard_bytes)

    @property
    def files(self) -> list[Path]:
        """Every file of the part (once closed): what a completion marker syncs and names."""
        return list(self._links.values())

    def add(self, shard: int, document: TokenizedDocument) -> None:
        """Append ``document`` to the part, for shard ``shard``."""
        if not document.sentences:
            return  # nothing to pair; the document processor counts such skips
        if shard < 0:
            raise ValueError(f"{self.prefix}: shard {shard} of {document.doc_id!r}: shard keys start at 0")
        assert self._arrivals is not None, "the part is closed"
        self._ids.add_document([sentence.ids for sentence in document.sentences])
        self._starts.add_document([sentence.word_starts.astype(np.uint8) for sentence in document.sentences])
        line = (json.dumps([document.doc_id, shard, self._documents], ensure_ascii=False) + "\n").encode("utf-8")
        self._arrivals.write(line)
        self._shard_bytes[shard] = self._shard_bytes.get(shard, 0) + len(line)
        self._documents += 1

    def close(self) -> str:
        """Finish the part's files (the document list grouped by shard, and where each
        shard's lines start), sync them and link them to the part's names; return
        its prefix. A failure removes this attempt's files (:meth:`abort`)."""
        try:
            self._ids.close()
            self._starts.close()
            assert self._arrivals is not None, "the part is closed"
            self._arrivals.close()
            self._arrivals = None
            offsets = self._write_grouped()
            with open(self._offsets_path, "wb") as f:
                f.write(offsets.tobytes())
            for written in self._links:
                with open(written, "rb") as f:
                    os.fsync(f.fileno())  # before the link: the part's names never hold unsynced data
            for written, name in self._links.items():
                _link_unless_there(written, name)
        except BaseException:
            self.abort()
            raise
        self._arrival_path.unlink()
        return str(self.prefix)

    def _write_grouped(self) -> np.ndarray:
        """Write the document list grouped by shard from the arrivals file (each line
        written at its shard's next place, a buffer at a time); return the offsets."""
        top = max(self._shard_bytes, default=-1)
        sizes = np.zeros(top + 2, dtype="<i8")
        for shard, size in self._shard_bytes.items():
            sizes[shard + 1] = size
        offsets = np.cumsum(sizes, dtype="<i8")
        place = {shard: int(offsets[shard]) for shard in self._shard_bytes}  # where its next line goes
        held: dict[int, list[bytes]] = {}
        held_bytes = 0
        with open(self._arrival_path, "rb") as arrivals, open(self._docs_path, "wb") as grouped:

            def flush() -> None:
                for shard, lines in held.items():
                    data = b"".join(lines)
                    os.pwrite(grouped.fileno(), data, place[shard])
                    place[shard] += len(data)
                held.clear()

            for line in arrivals:  # binary lines end at b"\n" alone
                shard = json.loads(line)[1]
                held.setdefault(shard, []).append(line)
                held_bytes += len(line)
                if held_bytes >= self.REGROUP_BUFFER_BYTES:
                    flush()
                    held_bytes = 0
            flush()
        return offsets

    def abort(self) -> None:
        """Remove what this attempt wrote (a failed unit leaves no file of it; a part
        another attempt finished stays)."""
        self._ids.abort()
        self._starts.abort()
        if self._arrivals is not None:
            self._arrivals.close()
            self._arrivals = None
        for written in (*self._links, self._arrival_path):
            written.unlink(missing_ok=True)


def _link_unless_there(written: Path, name: Path) -> None:
    """Give the finished file ``written`` the part's ``name`` and drop its own: by a
    hard link, which fails where the name is taken (another attempt's finished file,
    left as it is); on a filesystem without hard links, by a rename unless the name
    is taken."""
    try:
        os.link(written, name)
    except FileExistsError:
        pass
    except OSError:  # no hard links here (EPERM, EOPNOTSUPP, ...)
        # Two attempts closing in the same instant may both find the name free (a
        # rename cannot refuse to replace): the later replaces identical bytes.
        if not name.exists():
            os.replace(written, name)
            return
    written.unlink()


def documents_path(prefix: str | os.PathLike) -> Path:
    """A spill part's document list (see the module docstring)."""
    return Path(f"{prefix}.shard-docs.jsonl")


def shard_offsets_path(prefix: str | os.PathLike) -> Path:
    """Where each shard's lines of a spill part's document list are (see the module docstring)."""
    return Path(f"{prefix}.shard-docs.offsets")


def earlier_documents_path(prefix: str | os.PathLike) -> Path:
    """The document list of a part of an earlier format (see the module docstring)."""
    return Path(f"{prefix}.docs.jsonl")


def earlier_shard_offsets_path(prefix: str | os.PathLike) -> Path:
    """The shard offsets of a part of the grouped format under its earlier names."""
    return Path(f"{prefix}.docs.shards")


def shard_documents(prefix: str, shard: int) -> Iterator[tuple[int, str]]:
    """``(doc_no, doc_id)`` of each of ``shard``'s documents in the spill part
    ``prefix``, in document order: its own lines of the list, found by the part's
    shard offsets (a part of the earlier format is read whole). A list and offsets
    that do not agree raise :class:`OSError` naming the file."""
    docs = documents_path(prefix)
    offsets_path = shard_offsets_path(prefix)
    if not docs.exists() and earlier_documents_path(prefix).exists():
        docs = earlier_documents_path(prefix)
        offsets_path = earlier_shard_offsets_path(prefix)
        if not offsets_path.exists():
            yield from _scan_documents(docs, shard)
            return
    damaged = "{} (a damaged spill part; drop --resume to start over)"
    with open(offsets_path, "rb") as offsets_file, open(docs, "rb") as docs_file:
        size = os.fstat(offsets_file.fileno()).st_size
        last = os.pread(offsets_file.fileno(), 8, size - 8) if size >= 8 else b""
        list_size = os.fstat(docs_file.fileno()).st_size
        if size % 8 or len(last) != 8 or int(np.frombuffer(last, dtype="<i8")[0]) != list_size:
            # A cut offsets file would lose the shards past its end without a word.
            raise OSError(damaged.format(f"{offsets_path}: {size} bytes, not offsets ending at the size of "
                                         f"{docs} ({list_size} bytes)"))
        pair = os.pread(offsets_file.fileno(), 16, 8 * shard) if 8 * shard + 16 <= size else b""
        if not pair:
            return  # past the part's highest shard: none of its documents
        start, stop = (int(v) for v in np.frombuffer(pair, dtype="<i8"))
        if start == stop:
            return
        where = f"{docs}: shard {shard}'s lines are bytes {start}:{stop} by {offsets_path}, {{}}"
        if not 0 <= start < stop <= list_size:
            raise OSError(damaged.format(where.format("reversed" if stop < start else "outside the list")))
        data = os.pread(docs_file.fileno(), stop - start, start)
    if not data.endswith(b"\n"):
        raise OSError(damaged.format(where.format("not ending where a line does")))
    # Lines end at "\n" alone: json.dumps leaves U+0085, U+2028 and U+2029 in a document
    # id as they are, and str.splitlines() would end a line at each.
    for line in data[:-1].split(b"\n"):
        try:
            doc_id, line_shard, doc_no = json.loads(line)
        except ValueError as err:  # UnicodeDecodeError among them
            text = line[:80].decode("utf-8", "replace")
            raise OSError(damaged.format(f"{docs}: {text!r} in shard {shard}'s lines is not "
                                         "[doc_id, shard, doc_no]")) from err
        if line_shard != shard:
            raise OSError(damaged.format(f"{docs}: a document of shard {line_shard} among shard {shard}'s lines"))
        yield doc_no, doc_id


def _scan_documents(docs: Path, shard: int) -> Iterator[tuple[int, str]]:
    """:func:`shard_documents` of a part of the earlier format: its list,
    ``[doc_id, shard]`` lines in document order, read whole."""
    with open(docs, encoding="utf-8") as f:
        for doc_no, line in enumerate(f):
            # Parse only the shard's own lines (the shard is the number after the last comma).
            if int(line[line.rindex(",") + 1 : line.rindex("]")]) == shard:
                yield doc_no, json.loads(line)[0]


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
    parts (it held four maps, each with its file open, per part: 10,400 files for
    the English dump's 2,600 parts, over the usual limit of 1,024), and reads its
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
            mine = list(shard_documents(prefix, shard))
            if not mine:
                continue
            ids = IndexedReader(prefix)
            dtype = ids.dtype
            starts = IndexedReader(f"{prefix}.wstart") if word_starts else None
            for doc_no, doc_id in mine:
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
