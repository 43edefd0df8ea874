"""Input readers: MediaWiki XML dumps (plain, bz2 single- or multi-stream, or a
byte range of bz2 streams of a multistream dump), plain text (one sentence a line,
blank line between documents), string lists (``lines``: one document a line) and
WikiExtractor JSON lines, the last three whole or as a byte range of whole lines of
an uncompressed file. Each reads one :class:`~data_prep.inputs.WorkUnit` (which
:mod:`data_prep.inputs` plans) and streams: memory stays O(one page).
"""

from __future__ import annotations

import bz2
import json
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import BinaryIO

from .inputs import (
    SNIFF_BYTES,
    InputError,
    ReadProgress,
    WorkUnit,
    decode_line,
    not_utf8_text,
    open_decompressed,
    read_errors,
)

_CHUNK = 1 << 20


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
    unit: WorkUnit, count_skip: CountSkip, progress: ReadProgress | None = None
) -> Iterator[tuple[int, str]]:
    """The lines of a text input's unit (the whole file, or its byte range of whole
    lines), decoded, numbered in the file from 1 (a line that is not UTF-8 a counted
    skip); a UTF-8 byte-order mark is dropped. :class:`InputError` for a file in
    another encoding (UTF-16, UTF-32) or none (NUL bytes in its first block)."""
    path = unit.path
    with read_errors(unit.describe()):
        with open_decompressed(path) as f:
            head = f.read(SNIFF_BYTES)
        if problem := not_utf8_text(head):
            raise InputError(f"{path}: {problem}")
        with open_decompressed(path, progress) as f:
            lines: Iterable[bytes] = f
            if unit.stop is not None:  # a range of an uncompressed file, cut at line starts
                if unit.start > 0:
                    f.seek(unit.start - 1)
                    if f.read(1) != b"\n":
                        raise InputError(f"{unit.describe()}: the file changed since the build cut it into work "
                                         "units (no line ends before the range); run the build again")
                f.seek(unit.start)
                lines = _bounded(f, unit.stop - unit.start)
            for line_no, raw in enumerate(lines, unit.first_line):
                text = decode_line(raw, line_no)
                if text is None:
                    count_skip("invalid_utf8_lines")
                else:
                    yield line_no, text


def _bounded(f: BinaryIO, size: int) -> Iterator[bytes]:
    """The lines of ``f`` from where it is, up to ``size`` bytes (a unit's range ends
    at a line start; the next unit's first line, however long, is not read)."""
    for raw in f:
        yield raw
        size -= len(raw)
        if size <= 0:
            return


def read_text_documents(
    unit: WorkUnit, count_skip: CountSkip, progress: ReadProgress | None = None
) -> Iterator[PlainDocument]:
    """Documents of a text file: one sentence a line, a blank line between
    documents (the format of google-research/bert and the TaCL reference)."""
    name = unit.id_prefix
    sentences: list[str] = []
    number = unit.first_document
    for _, line in _decoded_lines(unit, count_skip, progress):
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
    for line_no, line in _decoded_lines(unit, count_skip, progress):
        line = line.strip()
        if line:
            yield PlainDocument(f"{name}:{line_no}", line[:80], [line], True, unit.path)


def read_wikiextractor_documents(
    unit: WorkUnit, count_skip: CountSkip, progress: ReadProgress | None = None
) -> Iterator[PlainDocument]:
    """Documents of WikiExtractor ``--json`` output: one object a line with ``id``,
    ``title`` and ``text`` (paragraphs separated by newlines, the title first)."""
    name = unit.id_prefix
    for line_no, line in _decoded_lines(unit, count_skip, progress):
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
