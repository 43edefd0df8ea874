"""Input readers: MediaWiki XML dumps (plain, bz2 single- or multi-stream, or a
multistream dump split into byte ranges by its ``-index.txt.bz2``), plain text (one
sentence a line, blank line between documents), string lists (``lines``: one document
a line) and WikiExtractor JSON lines.

The unit of parallel work is a :class:`WorkUnit`: a whole file, or a byte range of
bz2 streams of a multistream dump. Readers stream: memory stays O(one page).
"""

from __future__ import annotations

import bz2
import contextlib
import fnmatch
import glob
import gzip
import json
import os
import sys
import xml.etree.ElementTree as ET
import zlib
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import BinaryIO

from tacl_scale.data.manifest import MANIFEST_NAME

FORMATS = ("wiki-xml", "text", "lines", "wikiextractor-json")
_CHUNK = 1 << 20


class InputError(ValueError):
    """An input file is unreadable or malformed; the message names the file."""


@dataclass(frozen=True)
class WorkUnit:
    """A file, or the bz2 streams in bytes ``[start, stop)`` of a multistream dump."""

    path: str
    format: str
    start: int = 0
    stop: int | None = None
    # How document ids refer to the file: its path relative to the common folder of
    # all inputs (set by plan_work_units), so AA/wiki_00 and AB/wiki_00 differ and
    # ids do not depend on where the corpus lies. Defaults to the file name.
    name: str = field(default="", compare=False)

    @property
    def id_prefix(self) -> str:
        return self.name or Path(self.path).name

    def describe(self) -> str:
        if self.stop is None:
            return self.path
        return f"{self.path} (bytes {self.start}-{self.stop})"


@dataclass
class WikiPage:
    """One ``<page>`` of a dump, its wikitext not yet cleaned."""

    doc_id: str
    title: str
    namespace: int
    redirect: bool
    text: str
    source: str


@dataclass
class PlainDocument:
    """A document from text or JSON input: paragraphs, or sentences when
    ``pre_split`` (the text format has one sentence a line)."""

    doc_id: str
    title: str
    paragraphs: list[str]
    pre_split: bool
    source: str


CountSkip = Callable[[str], None]


class SkipTally:
    """The skips of the commands that read a corpus outside the build (which keeps
    its own in the manifest), counted by file and kind so that a Latin-1 file read
    as UTF-8 is said, not dropped line by line without a word. Kinds are those of
    :data:`data_prep.documents.SKIP_KINDS`, listed in the order first met."""

    def __init__(self) -> None:
        self.by_file: dict[str, Counter[str]] = {}

    def counter(self, path: str) -> CountSkip:
        """The ``count_skip`` callback for the records of ``path``."""
        counts = self.by_file.setdefault(path, Counter())

        def count_skip(kind: str) -> None:
            counts[kind] += 1

        return count_skip

    def totals(self) -> str:
        """Every kind summed over the files, ``invalid_utf8_lines 3, too_short 1``,
        or "nothing"."""
        total: Counter[str] = Counter()
        for counts in self.by_file.values():
            total.update(counts)
        return describe_skips(total)

    def say(self) -> None:
        """One ``FILE: skipped: KIND N, ...`` line on stderr for each file with a skip."""
        for path, counts in self.by_file.items():
            if any(counts.values()):
                print(f"{path}: skipped: {describe_skips(counts)}", file=sys.stderr)


def describe_skips(counts: Mapping[str, int]) -> str:
    """Skip counts as the commands and the build say them, ``redirect 6, too_short 2``
    (kinds with none left out), or "nothing"."""
    return ", ".join(f"{kind} {count:,}" for kind, count in counts.items() if count) or "nothing"


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


_SNIFF_BYTES = 4096
UTF8_BOM = b"\xef\xbb\xbf"
# Byte-order marks of the encodings a text input must not be in (UTF-32's first: its
# little-endian mark begins with UTF-16's).
_FOREIGN_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"),
                 (b"\xff\xfe", "UTF-16"), (b"\xfe\xff", "UTF-16"))


def _head(path: str) -> bytes | None:
    """The first :data:`_SNIFF_BYTES` bytes of ``path``, decompressed; None when it
    cannot be read (the reader names the file and the problem)."""
    try:
        with open_decompressed(path) as f:
            return f.read(_SNIFF_BYTES)
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
    paths: list[str], fmt: str, use_index: bool = True, unit_bytes: int = 8 << 20
) -> list[WorkUnit]:
    """Split inputs into units of parallel work. A multistream dump with its index
    becomes ranges of about ``unit_bytes`` compressed bytes; anything else is one
    unit a file."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown input format {fmt!r} ({', '.join(FORMATS)})")
    units: list[WorkUnit] = []
    root = os.path.commonpath([os.path.dirname(p) for p in paths]) if paths else ""
    for path in paths:
        check_format(path, fmt)
        name = os.path.relpath(path, root)
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


def _bz2_range_chunks(
    path: str, start: int, stop: int, progress: ReadProgress | None = None
) -> Iterator[bytes]:
    """Decompressed bytes of the bz2 streams lying in ``[start, stop)``."""
    with open(path, "rb") as f:
        f.seek(start)
        if progress is not None:
            progress.track(f)
        remaining = stop - start
        decompressor = bz2.BZ2Decompressor()
        mid_stream = False
        while remaining > 0:
            data = f.read(min(_CHUNK, remaining))
            if not data:
                break
            remaining -= len(data)
            while data:
                yield decompressor.decompress(data)
                mid_stream = not decompressor.eof
                data = b""
                if decompressor.eof:
                    data = decompressor.unused_data
                    decompressor = bz2.BZ2Decompressor()
        if remaining > 0 or mid_stream:
            raise EOFError("the data ends inside a bz2 stream")


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _page_from_element(page: ET.Element, source: str) -> WikiPage:
    fields = {_local(child.tag): child for child in page}
    text = ""
    revision = fields.get("revision")
    if revision is not None:
        for child in revision:
            if _local(child.tag) == "text":
                text = child.text or ""
    title = (fields["title"].text or "") if "title" in fields else ""
    ns_text = fields["ns"].text if "ns" in fields else "0"
    page_id = (fields["id"].text or "").strip() if "id" in fields else ""
    return WikiPage(
        doc_id=page_id or title,
        title=title,
        namespace=int(ns_text or 0),
        redirect="redirect" in fields,
        text=text,
        source=source,
    )


def _parse_pages(chunks: Iterator[bytes], source: str, fragment: bool) -> Iterator[WikiPage]:
    """Pages from XML fed in chunks; a fragment (bz2 streams of a multistream dump)
    is a run of ``<page>`` elements, wrapped here in a root element."""
    parser = ET.XMLPullParser(events=("start", "end"))
    root: ET.Element | None = None
    depth = 0
    carry = b""
    if fragment:
        parser.feed(b"<pages>")
    try:
        for chunk in chunks:
            if fragment:
                # The dump's closing tag sits in its last stream; a fragment has no
                # matching open tag, so drop it (the carry handles a split tag).
                chunk = (carry + chunk).replace(b"</mediawiki>", b"")
                carry, chunk = chunk[-12:], chunk[:-12]
            parser.feed(chunk)
            for event, element in parser.read_events():
                if event == "start":
                    if root is None:
                        root = element
                    depth += 1
                    continue
                depth -= 1
                if _local(element.tag) == "page":
                    yield _page_from_element(element, source)
                    assert root is not None
                    root.clear()  # O(1) memory: forget the pages already read
        if fragment:
            parser.feed(carry + b"</pages>")
        parser.close()
        for event, element in parser.read_events():
            if event == "end" and _local(element.tag) == "page":
                yield _page_from_element(element, source)
    except ET.ParseError as err:
        line, column = err.position
        if root is None and not fragment:  # not one element: no dump at all, most likely another format
            raise InputError(
                f"{source}: not XML ({err}); --format wiki-xml reads MediaWiki "
                "dumps: plain text is --format text or lines, WikiExtractor's output --format wikiextractor-json"
            ) from err
        raise InputError(
            f"{source}: malformed XML at line {line}, column {column} "
            f"(bad markup, truncated file, or bytes that are not UTF-8): {err}"
        ) from err


def _file_chunks(path: str, progress: ReadProgress | None = None) -> Iterator[bytes]:
    with open_decompressed(path, progress) as f:
        while True:
            data = f.read(_CHUNK)
            if not data:
                return
            yield data


def read_wiki_pages(unit: WorkUnit, progress: ReadProgress | None = None) -> Iterator[WikiPage]:
    """Every page of a wiki-xml work unit; :class:`InputError` on corrupt input."""
    fragment = unit.stop is not None
    chunks = (
        _bz2_range_chunks(unit.path, unit.start, unit.stop, progress)
        if unit.stop is not None
        else _file_chunks(unit.path, progress)
    )
    with read_errors(unit.describe()):
        yield from _parse_pages(chunks, unit.describe(), fragment)


def _decoded_lines(
    path: str, count_skip: CountSkip, progress: ReadProgress | None = None
) -> Iterator[tuple[int, str]]:
    """The lines of a text input, decoded, numbered from 1 (a line that is not UTF-8
    a counted skip); a UTF-8 byte-order mark is dropped. :class:`InputError` for a file
    in another encoding (UTF-16, UTF-32) or none (NUL bytes in its first block)."""
    with read_errors(path):
        with open_decompressed(path) as f:
            head = f.read(_SNIFF_BYTES)
        if problem := not_utf8_text(head):
            raise InputError(f"{path}: {problem}")
        with open_decompressed(path, progress) as f:
            for line_no, raw in enumerate(f, 1):
                if line_no == 1:
                    raw = raw.removeprefix(UTF8_BOM)  # json.loads refused it; text kept it in the first sentence
                try:
                    yield line_no, raw.decode("utf-8")
                except UnicodeDecodeError:
                    count_skip("invalid_utf8_lines")


def read_text_documents(
    unit: WorkUnit, count_skip: CountSkip, progress: ReadProgress | None = None
) -> Iterator[PlainDocument]:
    """Documents of a text file: one sentence a line, a blank line between
    documents (the format of google-research/bert and the TaCL reference)."""
    name = unit.id_prefix
    sentences: list[str] = []
    number = 0
    for _, line in _decoded_lines(unit.path, count_skip, progress):
        line = line.strip()
        if line:
            sentences.append(line)
            continue
        if sentences:
            yield PlainDocument(f"{name}:{number}", sentences[0][:80], sentences, True, unit.path)
            number += 1
            sentences = []
    if sentences:
        yield PlainDocument(f"{name}:{number}", sentences[0][:80], sentences, True, unit.path)


def read_line_documents(
    unit: WorkUnit, count_skip: CountSkip, progress: ReadProgress | None = None
) -> Iterator[PlainDocument]:
    """Documents of a string list: every non-blank line is a document of one
    sentence (Mirror-BERT's and SimCSE's training files), ``FILE:LINE`` its id, so
    each string is sharded and held out on its own."""
    name = unit.id_prefix
    for line_no, line in _decoded_lines(unit.path, count_skip, progress):
        line = line.strip()
        if line:
            yield PlainDocument(f"{name}:{line_no}", line[:80], [line], True, unit.path)


def read_wikiextractor_documents(
    unit: WorkUnit, count_skip: CountSkip, progress: ReadProgress | None = None
) -> Iterator[PlainDocument]:
    """Documents of WikiExtractor ``--json`` output: one object a line with ``id``,
    ``title`` and ``text`` (paragraphs separated by newlines, the title first)."""
    name = unit.id_prefix
    for line_no, line in _decoded_lines(unit.path, count_skip, progress):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            text = record["text"]
            if not isinstance(text, str):
                raise TypeError("text is not a string")
        except (json.JSONDecodeError, KeyError, TypeError):
            count_skip("malformed_json_lines")
            continue
        title = str(record.get("title", ""))
        paragraphs = [p.strip() for p in text.split("\n") if p.strip()]
        if paragraphs and paragraphs[0] == title:
            paragraphs = paragraphs[1:]
        doc_id = str(record.get("id") or f"{name}:{line_no}")
        yield PlainDocument(doc_id, title, paragraphs, False, unit.path)


def read_records(
    unit: WorkUnit, count_skip: CountSkip, progress: ReadProgress | None = None
) -> Iterator[WikiPage | PlainDocument]:
    """The records of a work unit in the reader of its format."""
    if unit.format == "wiki-xml":
        return read_wiki_pages(unit, progress)
    if unit.format == "text":
        return read_text_documents(unit, count_skip, progress)
    if unit.format == "lines":
        return read_line_documents(unit, count_skip, progress)
    return read_wikiextractor_documents(unit, count_skip, progress)
