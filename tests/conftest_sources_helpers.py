"""Shared helpers for the data-prep tests (a plain module, imported by the test
files; not a conftest): paths of the real data, the real English sample read once,
and builders for small MediaWiki XML dumps, single- and multi-stream."""

from __future__ import annotations

import bz2
import functools
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from conftest import DATA

from data_prep.inputs import WorkUnit
from data_prep.sources import WikiPage, read_wiki_pages

DATA_DIR = DATA  # TACL_TEST_DATA (conftest)
ENWIKI_SAMPLE = DATA_DIR / "enwiki-sample.xml.bz2"
ZHWIKI_SAMPLE = DATA_DIR / "zhwiki-sample.txt"
ZHWIKI_SEGMENTED = DATA_DIR / "zhwiki-sample-segmented.txt"
VOCAB_EN = DATA_DIR / "vocab" / "bert-base-uncased.txt"
VOCAB_ZH = DATA_DIR / "vocab" / "bert-base-chinese.txt"

XML_HEADER = (
    b'<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/" '
    b'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" version="0.10" xml:lang="en">\n'
    b"  <siteinfo>\n"
    b"    <sitename>Wikipedia</sitename>\n"
    b"    <dbname>enwiki</dbname>\n"
    b"    <namespaces>\n"
    b'      <namespace key="0" case="first-letter" />\n'
    b'      <namespace key="1" case="first-letter">Talk</namespace>\n'
    b"    </namespaces>\n"
    b"  </siteinfo>\n"
)
XML_FOOTER = b"</mediawiki>\n"


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def page_xml(page_id: int, title: str, text: str, ns: int = 0, redirect: str | None = None) -> bytes:
    """One ``<page>`` element as a MediaWiki 0.10 export writes it."""
    redirect_line = f'    <redirect title="{_escape(redirect)}" />\n' if redirect is not None else ""
    return (
        "  <page>\n"
        f"    <title>{_escape(title)}</title>\n"
        f"    <ns>{ns}</ns>\n"
        f"    <id>{page_id}</id>\n"
        f"{redirect_line}"
        "    <revision>\n"
        f"      <id>{page_id * 100 + 7}</id>\n"
        "      <model>wikitext</model>\n"
        f'      <text xml:space="preserve">{_escape(text)}</text>\n'
        "    </revision>\n"
        "  </page>\n"
    ).encode()


def synthetic_pages(count: int) -> list[bytes]:
    """``count`` small article pages with ids 1..count (every 5th a redirect, every
    7th in the Talk namespace), titles with a colon now and then."""
    pages = []
    for i in range(1, count + 1):
        title = f"Page {i}" if i % 3 else f"Topic: part {i}"
        if i % 5 == 0:
            pages.append(page_xml(i, title, f"#REDIRECT [[Page {i - 1}]]", redirect=f"Page {i - 1}"))
        elif i % 7 == 0:
            pages.append(page_xml(i, f"Talk:{title}", f"Discussion number {i}.", ns=1))
        else:
            pages.append(page_xml(i, title, f"'''{title}''' is article {i} & it has <b>markup</b>."))
    return pages


def single_xml(pages: Sequence[bytes], header: bytes = XML_HEADER, footer: bytes = XML_FOOTER) -> bytes:
    return header + b"".join(pages) + footer


_PAGE_ID = re.compile(rb"<page>\s*<title>(.*?)</title>.*?<id>(\d+)</id>", re.DOTALL)


def write_multistream(
    directory: Path,
    name: str,
    pages: Sequence[bytes],
    per_stream: int,
    header: bytes = XML_HEADER,
    footer: bytes = XML_FOOTER,
    write_index: bool = True,
) -> tuple[Path, Path, list[int]]:
    """Write ``NAME-multistream.xml.bz2`` as Wikimedia does: the header (through
    ``</siteinfo>``) as one bz2 stream, then ``per_stream`` pages a stream, then a
    stream holding only ``</mediawiki>``; and ``NAME-multistream-index.txt.bz2``
    with one ``offset:page_id:title`` line a page (offset = the byte offset of the
    page's stream). Returns the dump path, the index path and the page-stream offsets."""
    dump = directory / f"{name}-multistream.xml.bz2"
    index = directory / f"{name}-multistream-index.txt.bz2"
    out = bytearray(bz2.compress(header))
    lines: list[str] = []
    offsets: list[int] = []
    for start in range(0, len(pages), per_stream):
        group = pages[start : start + per_stream]
        offset = len(out)
        offsets.append(offset)
        for page in group:
            match = _PAGE_ID.search(page)
            assert match is not None, page[:200]
            title = match.group(1).decode("utf-8").replace("&amp;", "&")
            lines.append(f"{offset}:{match.group(2).decode()}:{title}")
        out += bz2.compress(b"".join(group))
    out += bz2.compress(footer)
    dump.write_bytes(bytes(out))
    if write_index:
        index.write_bytes(bz2.compress(("\n".join(lines) + "\n").encode("utf-8")))
    return dump, index, offsets


def write_index(index: Path, lines: Sequence[str]) -> None:
    index.write_bytes(bz2.compress(("\n".join(lines) + "\n").encode("utf-8")))


@functools.lru_cache(maxsize=1)
def enwiki_raw_xml() -> bytes:
    return bz2.decompress(ENWIKI_SAMPLE.read_bytes())


def split_dump(raw: bytes) -> tuple[bytes, list[bytes], bytes]:
    """(header, pages, footer) of an uncompressed dump."""
    first = raw.index(b"  <page>")
    end = raw.rindex(b"</mediawiki>")
    pages = [b"  <page>" + chunk for chunk in raw[first:end].split(b"  <page>")[1:]]
    assert b"".join(pages) == raw[first:end]
    return raw[:first], pages, raw[end:]


@functools.lru_cache(maxsize=1)
def enwiki_pages() -> tuple[WikiPage, ...]:
    """Every page of the real English sample, read once per test session."""
    return tuple(read_wiki_pages(WorkUnit(str(ENWIKI_SAMPLE), "wiki-xml")))


def enwiki_articles() -> list[WikiPage]:
    return [p for p in enwiki_pages() if p.namespace == 0 and not p.redirect]


def page_key(page: WikiPage) -> tuple:
    """A page's content, without ``source`` (which names the unit read)."""
    return (page.doc_id, page.title, page.namespace, page.redirect, page.text)


class SkipCounter(Counter):
    """A ``count_skip`` callback that remembers what was counted."""

    def __call__(self, kind: str) -> None:
        self[kind] += 1
