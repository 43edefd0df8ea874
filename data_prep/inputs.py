"""What a build reads, before any of it is read: the input formats, the files an
``--input`` glob names, a check that each is the format it is given as (sniffed from
its first bytes), and the :class:`WorkUnit` s of parallel work: a whole file, a byte
range of bz2 streams of a multistream dump split by its ``-index.txt.bz2``, or a byte
range of whole lines of a large uncompressed text file. And
how a unit's file is opened (decompressed, errors naming it, progress in stored
bytes), which the readers of :mod:`data_prep.sources` share."""

from __future__ import annotations

import bz2
import contextlib
import fnmatch
import glob
import gzip
import json
import logging
import os
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import BinaryIO

from tacl_scale.data.manifest import MANIFEST_NAME

log = logging.getLogger(__name__)

FORMATS = ("wiki-xml", "text", "lines", "wikiextractor-json")


class InputError(ValueError):
    """An input file is unreadable or malformed; the message names the file."""


@dataclass(frozen=True)
class WorkUnit:
    """A file, or bytes ``[start, stop)`` of one: the bz2 streams of a multistream
    dump, or whole lines of an uncompressed text file (:func:`plan_work_units`)."""

    path: str
    format: str
    start: int = 0
    stop: int | None = None
    # How document ids refer to the file: its path relative to the common folder of
    # all inputs (set by plan_work_units), so AA/wiki_00 and AB/wiki_00 differ and
    # ids do not depend on where the corpus lies. Defaults to the file name.
    name: str = field(default="", compare=False)
    # Of a text file's range: the number of its first line and (``text``) of its first
    # document in the whole file, which document ids name (the same ids whatever the split).
    first_line: int = field(default=1, compare=False)
    first_document: int = field(default=0, compare=False)

    @property
    def id_prefix(self) -> str:
        return self.name or Path(self.path).name

    def describe(self) -> str:
        if self.stop is None:
            return self.path
        return f"{self.path} (bytes {self.start}-{self.stop})"


# A Wikimedia multistream dump and the index published beside it.
MULTISTREAM_SUFFIX = "-multistream.xml.bz2"
INDEX_SUFFIX = "-multistream-index.txt.bz2"


def _as_glob(path: str) -> str:
    """The glob ``glob.glob`` is given for an ``--input`` ``path`` (``~`` already
    expanded): what names an existing file or directory is taken literally. A file
    ``q[1]/corpus/a.txt`` was otherwise a pattern matching ``q1/corpus/a.txt`` and
    "no input file" (brackets, ``*`` and ``?`` are legal in names), so the path
    itself is escaped when it names a file, else its longest leading part that names
    a directory (``q[1]/corpus/*.txt``); the rest stays a glob."""
    if os.path.isfile(path):
        return glob.escape(path)
    literal = path
    while literal and not os.path.isdir(literal):  # ends at "" or at a directory ("/" is one)
        literal = os.path.dirname(literal)
    return glob.escape(literal) + path[len(literal):] if literal else path


def expand_inputs(patterns: list[str]) -> list[str]:
    """Sorted files matching the globs (a path naming a file is that file, see
    :func:`_as_glob`); :class:`InputError` if none does. A multistream dump's index
    that a glob matches beside its dump (``dumps/*``) is the dump's index, not an
    input; an index without its dump is refused."""
    paths: set[str] = set()
    for pattern in patterns:
        matched = [p for p in glob.glob(_as_glob(os.path.expanduser(pattern)), recursive=True) if os.path.isfile(p)]
        if not matched:
            if os.path.isdir(os.path.expanduser(pattern)):  # WikiExtractor's output is a tree of directories
                raise InputError(f"{pattern}: a directory; name its files with a quoted glob, "
                                 f"e.g. --input '{os.path.join(pattern, '**', '*')}'")
            raise InputError(f"{pattern}: no input file matches")
        paths.update(os.path.abspath(p) for p in matched)
    paths -= {index_beside(p) for p in paths if p.endswith(MULTISTREAM_SUFFIX)}
    for path in sorted(paths):
        if path.endswith(INDEX_SUFFIX):
            raise InputError(f"{path}: a multistream dump's index, not a dump: give the dump, "
                             f"{path.removesuffix(INDEX_SUFFIX)}{MULTISTREAM_SUFFIX}")
    return sorted(paths)


def glob_matches(pattern: str, path: str) -> bool:
    """Whether ``glob.glob(pattern, recursive=True)`` would list ``path`` were it
    there (both absolute): ``*``, ``?`` and ``[...]`` within a name, ``**`` any
    number of directories; a name starting with a dot only where the pattern's does.
    """
    def match(names: list[str], parts: list[str]) -> bool:
        if not names:
            return not parts
        if names[0] == "**":  # glob's ** does not descend into hidden directories either
            return any(match(names[1:], parts[i:]) for i in range(len(parts) + 1)
                       if not any(part.startswith(".") for part in parts[:i]))
        return (bool(parts) and (names[0].startswith(".") or not parts[0].startswith("."))
                and fnmatch.fnmatchcase(parts[0], names[0]) and match(names[1:], parts[1:]))

    return match(PurePath(pattern).parts[1:], PurePath(path).parts[1:])


def output_among_inputs(output: str, patterns: list[str], directory: bool = False) -> str | None:
    """Why ``output`` may not be written where it is, in words, or None: an
    ``--input`` glob matches it (``--input 'corpus/*' --output corpus/vocab.txt``),
    or with ``directory`` the files written in it (``--input 'data/**/*' --output
    data/ds``), so the next run would read them as a corpus."""
    target = os.path.abspath(os.path.join(output, MANIFEST_NAME) if directory else output)
    for pattern in patterns:
        # Escaped as expand_inputs reads it, after abspath: the working directory
        # may hold brackets too.
        if glob_matches(_as_glob(os.path.abspath(os.path.expanduser(pattern))), target):
            what, read = ("the files written in it", "them") if directory else ("it", "it")
            return (f"{output}: --input {pattern!r} matches {what} too, so a next run would read {read} as a "
                    "corpus: write it outside the glob, or narrow the glob")
    return None


def read_multistream_index(index_path: str) -> list[int]:
    """Sorted distinct stream offsets from a ``...-multistream-index.txt.bz2``
    (lines ``offset:page_id:title``)."""
    offsets: set[int] = set()
    opener = bz2.open if index_path.endswith(".bz2") else open
    try:
        with opener(index_path, "rt", encoding="utf-8") as f:
            for line_no, line in enumerate(f, 1):
                if not line.strip():
                    continue
                head = line.split(":", 1)[0]
                if not head.isdigit():
                    raise InputError(f"{index_path}: line {line_no} is not 'offset:id:title'")
                offsets.add(int(head))
    except (OSError, EOFError, UnicodeDecodeError) as err:
        raise InputError(f"{index_path}: unreadable multistream index: {err}") from err
    if not offsets:
        raise InputError(f"{index_path}: empty multistream index")
    return sorted(offsets)


def index_beside(dump_path: str) -> str:
    """Where Wikimedia puts a multistream dump's index:
    ``X-multistream.xml.bz2`` → ``X-multistream-index.txt.bz2``."""
    if not dump_path.endswith(MULTISTREAM_SUFFIX):
        raise ValueError(f"{dump_path}: the name must end in {MULTISTREAM_SUFFIX}")
    return dump_path.removesuffix(MULTISTREAM_SUFFIX) + INDEX_SUFFIX


def find_index(dump_path: str) -> str | None:
    """The index file Wikimedia publishes beside a multistream dump, if present."""
    if dump_path.endswith(MULTISTREAM_SUFFIX) and os.path.isfile(candidate := index_beside(dump_path)):
        return candidate
    return None


SNIFF_BYTES = 4096
UTF8_BOM = b"\xef\xbb\xbf"
# Byte-order marks of the encodings a text input must not be in (UTF-32's first: its
# little-endian mark begins with UTF-16's).
_FOREIGN_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"),
                 (b"\xff\xfe", "UTF-16"), (b"\xfe\xff", "UTF-16"))


def _head(path: str) -> bytes | None:
    """The first :data:`SNIFF_BYTES` bytes of ``path``, decompressed; None when it
    cannot be read (the reader names the file and the problem)."""
    try:
        with open_decompressed(path) as f:
            return f.read(SNIFF_BYTES)
    except (OSError, EOFError, zlib.error):
        return None


def not_utf8_text(head: bytes) -> str | None:
    """Why a text input (``text``, ``lines``, ``wikiextractor-json``) whose first
    block is ``head`` is no UTF-8 text, in words, or None. Read as UTF-8, UTF-16 text
    was one "line" of NUL-riddled characters, or a counted skip, without a word."""
    for bom, encoding in _FOREIGN_BOMS:
        if head.startswith(bom):
            return f"{encoding} text (byte-order mark {bom.hex(' ').upper()}); convert it to UTF-8"
    # UTF-16/32 without a mark, or a binary file: NULs throughout. A stray NUL or two in
    # UTF-8 text (web-extracted corpora have them) is dropped by the cleaning, as before.
    if (nuls := head.count(b"\x00")) > len(head) // 10:
        return (f"not text: {nuls:,} NUL bytes in its first {len(head):,} bytes (UTF-16 or UTF-32 without a "
                "byte-order mark, or a binary file); give UTF-8 text")
    return None


def sniff_format(path: str) -> str | None:
    """``wiki-xml`` or ``wikiextractor-json`` when the start of ``path`` (decompressed)
    is plainly one (an XML declaration or ``<mediawiki``; a JSON object with a
    ``text`` field on the first line), else None: any text may be a corpus."""
    head = _head(path)
    return None if head is None else _format_of(head)  # None: the reader names the file and the problem


def _format_of(head: bytes) -> str | None:
    """:func:`sniff_format` of a file whose first bytes are ``head``."""
    head = head.removeprefix(UTF8_BOM).lstrip()
    if head.startswith((b"<?xml", b"<mediawiki")):
        return "wiki-xml"
    first_line = head.split(b"\n", 1)[0]
    if first_line.startswith(b"{"):
        try:
            record = json.loads(first_line)
        except ValueError:
            return None
        if isinstance(record, dict) and "text" in record:
            return "wikiextractor-json"
    return None


def check_format(path: str, fmt: str) -> None:
    """Refuse an input whose content is plainly another format than ``fmt``: a
    MediaWiki dump read as ``text`` became a corpus of XML markup, without a word.
    ``wiki-xml`` is not sniffed: its parser says what a file that is not XML is,
    but an empty file, which it called "not XML (no element found)", is named here."""
    if fmt == "wiki-xml":
        if os.path.getsize(path) == 0:
            raise InputError(f"{path}: an empty file, not a MediaWiki dump (a download cut short?)")
        return
    head = _head(path)
    if head is None:
        return  # the reader names the file and the problem
    if problem := not_utf8_text(head):
        raise InputError(f"{path}: {problem}")
    found = _format_of(head)
    if found is not None and found != fmt:
        what = "a MediaWiki XML dump" if found == "wiki-xml" else "WikiExtractor --json output (a JSON object a line)"
        raise InputError(f"{path}: {what}, given as --format {fmt}; read it with --format {found}")


def plan_work_units(
    paths: list[str], fmt: str, use_index: bool = True, unit_bytes: int = 8 << 20, split_text: bool = False
) -> list[WorkUnit]:
    """Split inputs into units of parallel work. A multistream dump with its index
    becomes ranges of about ``unit_bytes`` compressed bytes; with ``split_text``, an
    uncompressed file of a text format larger than that becomes ranges of whole
    lines (``text``: whole documents) of about ``unit_bytes``, found by one pass over
    it (:func:`split_text_file`); anything else is one unit a file. ``split_text`` is
    the build's: the vocabulary trainer and the sentence lists read every file in
    one process anyway, and the pass would be work for nothing."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown input format {fmt!r} ({', '.join(FORMATS)})")
    units: list[WorkUnit] = []
    root = os.path.commonpath([os.path.dirname(p) for p in paths]) if paths else ""
    for path in paths:
        check_format(path, fmt)
        name = os.path.relpath(path, root)
        if split_text and splittable(path, fmt) and os.path.getsize(path) > unit_bytes:
            units.extend(split_text_file(path, fmt, name, unit_bytes))
            continue
        index = find_index(path) if fmt == "wiki-xml" and use_index else None
        if index is None:
            units.append(WorkUnit(path, fmt, name=name))
            continue
        offsets = read_multistream_index(index)
        size = os.path.getsize(path)
        if offsets[-1] >= size:
            raise InputError(f"{index}: offset {offsets[-1]} beyond the end of {path} ({size} bytes)")
        bounds = offsets + [size]
        start = bounds[0]
        for k in range(1, len(bounds)):
            if bounds[k] - start >= unit_bytes or k == len(bounds) - 1:
                units.append(WorkUnit(path, fmt, start, bounds[k], name))
                start = bounds[k]
    return units


# The formats read a line at a time: an uncompressed file of one can be entered at
# any line start.
LINE_FORMATS = ("text", "lines", "wikiextractor-json")
_SCAN_CHUNK = 16 << 20


def is_compressed(path: str) -> bool:
    """Whether :func:`open_decompressed` decompresses ``path`` (by its name)."""
    return path.endswith((".bz2", ".gz"))


def splittable(path: str, fmt: str) -> bool:
    """Whether a file of format ``fmt`` may be read as several work units: a text
    format, not compressed (a .bz2 or .gz file cannot be entered mid-way)."""
    return fmt in LINE_FORMATS and not is_compressed(path)


def decode_line(raw: bytes, line_no: int) -> str | None:
    """A text input's line ``line_no`` (from 1) as the readers take it: UTF-8, the
    byte-order mark of the file's first line dropped; None for a line that is not
    UTF-8 (a counted skip, neither text nor blank). The readers and the planner's
    cuts of a ``text`` file both use it: a cut must fall where the reader sees a
    blank line, or document ids would drift."""
    if line_no == 1:
        raw = raw.removeprefix(UTF8_BOM)  # json.loads refused it; text kept it in the first sentence
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def split_text_file(path: str, fmt: str, name: str, unit_bytes: int) -> list[WorkUnit]:
    """The work units of an uncompressed ``text``, ``lines`` or
    ``wikiextractor-json`` file: byte ranges of about ``unit_bytes`` starting at a
    line start (``text``: after a blank line, so no document spans two), each with
    the numbers of its first line and document, so that its documents get the ids
    they get when the file is read whole."""
    log.info("splitting %s (%.1f MB) into work units of about %.1f MiB: one pass over it", path,
             os.path.getsize(path) / 1e6, unit_bytes / (1 << 20))
    units = _text_units(path, name, unit_bytes) if fmt == "text" else _line_units(path, fmt, name, unit_bytes)
    # No place to cut (one document, or one line): the whole file, named as an unsplit one.
    return units if len(units) > 1 else [WorkUnit(path, fmt, name=name)]


def _line_units(path: str, fmt: str, name: str, unit_bytes: int) -> list[WorkUnit]:
    """``lines`` and ``wikiextractor-json``: cut at line starts, counting newlines
    (document ids name lines)."""
    size = os.path.getsize(path)
    units: list[WorkUnit] = []
    start, first_line = 0, 1
    offset = 0  # of the chunk in the file
    with read_errors(path), open(path, "rb") as f:
        newlines = 0  # before the chunk, then before ``looked`` in it
        while chunk := f.read(_SCAN_CHUNK):
            looked = 0  # the chunk's bytes already searched for cuts
            after = newlines + chunk.count(b"\n")
            while True:
                # The next cut: just after the first newline at or past start + unit_bytes - 1.
                at = max(start + unit_bytes - 1 - offset, looked)
                newline = chunk.find(b"\n", at) if at < len(chunk) else -1
                if newline < 0 or offset + newline + 1 >= size:
                    break
                newlines += chunk.count(b"\n", looked, newline + 1)
                units.append(WorkUnit(path, fmt, start, offset + newline + 1, name, first_line))
                start, first_line, looked = offset + newline + 1, newlines + 1, newline + 1
            newlines = after
            offset += len(chunk)
    units.append(WorkUnit(path, fmt, start, size, name, first_line))
    return units


def _text_units(path: str, name: str, unit_bytes: int) -> list[WorkUnit]:
    """``text``: cut after blank lines, telling blank lines, lines of text and skipped
    lines apart as the reader does (document ids number a file's documents)."""
    size = os.path.getsize(path)
    units: list[WorkUnit] = []
    start, first_line, first_document = 0, 1, 0
    position = 0
    documents = 0  # begun so far
    in_document = False
    with read_errors(path), open(path, "rb") as f:
        for line_no, raw in enumerate(f, 1):
            position += len(raw)
            text = decode_line(raw, line_no)
            if text is None:
                continue  # skipped by the reader: neither text nor blank
            if text.strip():  # read_text_documents' test of a blank line
                documents += not in_document
                in_document = True
                continue
            in_document = False
            if position - start >= unit_bytes and position < size:
                units.append(WorkUnit(path, "text", start, position, name, first_line, first_document))
                start, first_line, first_document = position, line_no + 1, documents
    units.append(WorkUnit(path, "text", start, size, name, first_line, first_document))
    return units


class ReadProgress:
    """How far a reader is through its work unit, in bytes of the file as stored
    (compressed bytes for .bz2/.gz), for progress logs with an ETA."""

    def __init__(self, unit: WorkUnit) -> None:
        self.total = (unit.stop - unit.start) if unit.stop is not None else os.path.getsize(unit.path)
        self._origin = unit.start
        self._tell: Callable[[], int] = lambda: self._origin

    def track(self, raw: BinaryIO) -> None:
        # Once the reader closes the file, it has read it all.
        self._tell = lambda: self._origin + self.total if raw.closed else raw.tell()

    @property
    def fraction(self) -> float:
        if not self.total:
            return 1.0
        return min(1.0, max(0.0, (self._tell() - self._origin) / self.total))


@contextlib.contextmanager
def read_errors(what: str) -> Iterator[None]:
    """Errors of reading a source inside the block as :class:`InputError` naming
    ``what`` (the file, or a work unit of it): an error of the file system
    (missing, unreadable, an I/O error) as ``cannot read``, and the decompressors'
    complaints as ``corrupt or truncated compressed data`` (a cut-short .bz2/.gz
    raises EOFError, a corrupt .gz zlib.error, and a file that is not bz2 at all an
    OSError without an errno: "Invalid data stream", gzip's BadGzipFile). Wrap only
    reads: an error writing an output must still name the output."""
    try:
        yield
    except (EOFError, zlib.error) as err:
        raise InputError(f"{what}: corrupt or truncated compressed data: {err}") from err
    except OSError as err:
        if err.errno is None:
            raise InputError(f"{what}: corrupt or truncated compressed data: {err}") from err
        raise InputError(f"{what}: cannot read: {err.strerror}") from err


@contextlib.contextmanager
def open_decompressed(path: str, progress: ReadProgress | None = None) -> Iterator[BinaryIO]:
    """The decompressed bytes of a file (.bz2 with every stream of a multistream
    file, .gz, or plain)."""
    with open(path, "rb") as raw:
        if progress is not None:
            progress.track(raw)
        if path.endswith(".bz2"):
            with bz2.BZ2File(raw) as f:
                yield f
        elif path.endswith(".gz"):
            with gzip.GzipFile(fileobj=raw) as f:
                yield f
        else:
            yield raw
