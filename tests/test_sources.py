"""Input readers: globbing, MediaWiki XML (plain, bz2, multistream by index),
text and WikiExtractor JSON, and their errors on bad input."""

from __future__ import annotations

import bz2
import gzip
import itertools
import json
import os
import random
import re
from pathlib import Path

import pytest
from conftest_sources_helpers import (
    ENWIKI_SAMPLE,
    XML_FOOTER,
    ZHWIKI_SAMPLE,
    SkipCounter,
    enwiki_pages,
    enwiki_raw_xml,
    page_key,
    page_xml,
    single_xml,
    split_dump,
    synthetic_pages,
    write_index,
    write_multistream,
)

from data_prep.inputs import (
    InputError,
    WorkUnit,
    expand_inputs,
    find_index,
    plan_work_units,
    read_multistream_index,
    sniff_format,
)
from data_prep.sources import (
    PlainDocument,
    WikiPage,
    read_line_documents,
    read_records,
    read_text_documents,
    read_wiki_pages,
    read_wikiextractor_documents,
)


def read_all(path: Path | str, **plan: object) -> list[WikiPage]:
    units = plan_work_units([str(path)], "wiki-xml", **plan)  # type: ignore[arg-type]
    return [page for unit in units for page in read_wiki_pages(unit)]


# ---------------------------------------------------------------- expand_inputs


def test_expand_inputs_sorted_absolute_deduplicated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("b.txt", "a.txt", "c.xml"):
        (tmp_path / name).write_text("x\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "d.txt").write_text("x\n")
    (tmp_path / "dir.txt").mkdir()  # a directory matching the glob is not an input
    monkeypatch.chdir(tmp_path)
    got = expand_inputs(["*.txt", str(tmp_path / "a.txt"), "**/*.txt"])
    assert got == sorted(str(tmp_path / n) for n in ("a.txt", "b.txt", "sub/d.txt"))
    assert all(os.path.isabs(p) for p in got)


def test_expand_inputs_empty_glob_names_pattern(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("x\n")
    pattern = str(tmp_path / "nothing-*.xml.bz2")
    with pytest.raises(InputError, match=re.escape(pattern)):
        expand_inputs([str(tmp_path / "a.txt"), pattern])


def test_a_path_with_brackets_naming_a_file_or_directory_is_taken_literally(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``q[1]/corpus/a.txt`` was a glob matching ``q1/corpus/a.txt`` only: an existing
    file was refused with "no input file matches", or another file read in its
    place. What names an existing file, or a glob's leading directories that exist,
    is read literally; the rest stays a glob."""
    from data_prep.inputs import output_among_inputs

    corpus = tmp_path / "q[1]" / "corpus"
    corpus.mkdir(parents=True)
    for path in (corpus / "a.txt", corpus / "b.txt"):
        path.write_text("x\n")
    assert expand_inputs([str(corpus / "a.txt")]) == [str(corpus / "a.txt")]
    (tmp_path / "q1" / "corpus").mkdir(parents=True)
    (tmp_path / "q1" / "corpus" / "a.txt").write_text("another file\n")
    assert expand_inputs([str(corpus / "a.txt")]) == [str(corpus / "a.txt")]
    monkeypatch.chdir(tmp_path)
    assert expand_inputs(["q[1]/corpus/a.txt"]) == [str(corpus / "a.txt")]
    assert expand_inputs(["q[1]/corpus/*.txt"]) == [str(corpus / "a.txt"), str(corpus / "b.txt")]
    # where no directory has the brackets in its name, they are a glob's, as before
    assert expand_inputs(["q[0-9]/corpus/a.txt"]) == [str(tmp_path / "q1" / "corpus" / "a.txt")]
    assert expand_inputs(["*/corpus/a.txt"]) == [str(tmp_path / "q1" / "corpus" / "a.txt"), str(corpus / "a.txt")]
    # the output check reads the inputs as expand_inputs does: the glob below q[1] takes q[1]/corpus/out.txt
    assert output_among_inputs(str(corpus / "out.txt"), ["q[1]/corpus/*"]) is not None
    assert output_among_inputs(str(corpus / "out.txt"), ["q[1]/corpus/a.txt"]) is None
    monkeypatch.chdir(corpus)  # a working directory with brackets in its path
    assert expand_inputs(["*.txt"]) == [str(corpus / "a.txt"), str(corpus / "b.txt")]
    assert output_among_inputs("out.txt", ["*"]) is not None


def test_glob_matches_says_what_glob_lists(tmp_path: Path) -> None:
    """Checked against glob itself on a tree: it decides whether an --input glob
    would take a command's --output for a corpus file."""
    import glob

    from data_prep.inputs import glob_matches

    files = ["a.txt", "b.xml.bz2", "d/c.txt", "d/e/f.txt", "d/e/g.xml", "x1/h.txt", "x22/h.txt", ".hidden.txt",
             ".h/i.txt", "d/.j.txt"]
    for name in files:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    for pattern in ("*", "*.txt", "**/*", "**/*.txt", "d/**/*.xml", "d/*", "x?/h.txt", "x[0-9]*/*.txt", "**",
                    "d/**", "d/e/*.xml", "nothing/*", ".*", ".h/*", "d/.*.txt"):
        absolute = str(tmp_path / pattern)
        listed = {os.path.relpath(p, tmp_path) for p in glob.glob(absolute, recursive=True) if os.path.isfile(p)}
        assert {name for name in files if glob_matches(absolute, str(tmp_path / name))} == listed, pattern


def test_a_multistream_index_beside_its_dump_is_not_an_input(tmp_path: Path) -> None:
    """``--input 'dumps/*'`` took the index for a dump and failed in the pipeline
    with "not XML"; alone, the index is refused naming the dump to give instead."""
    dump, index = tmp_path / "enwiki-multistream.xml.bz2", tmp_path / "enwiki-multistream-index.txt.bz2"
    for path in (dump, index, tmp_path / "other.xml.bz2"):
        path.write_bytes(b"x")
    assert expand_inputs([str(tmp_path / "*")]) == [str(dump), str(tmp_path / "other.xml.bz2")]
    with pytest.raises(InputError) as refused:
        expand_inputs([str(index), str(tmp_path / "other.xml.bz2")])
    assert str(refused.value) == f"{index}: a multistream dump's index, not a dump: give the dump, {dump}"


def test_a_directory_input_is_refused_with_the_glob_that_takes_its_files(tmp_path: Path) -> None:
    """WikiExtractor writes a tree (AA/wiki_00, AB/wiki_00, ...): its directory as --input
    said "no input file matches"; the error now gives the glob, and that glob works."""
    for part in ("AA/wiki_00", "AA/wiki_01", "AB/wiki_00"):
        (tmp_path / "extracted" / part).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "extracted" / part).write_text("{}\n")
    directory = str(tmp_path / "extracted")
    with pytest.raises(InputError, match="a directory; name its files") as refused:
        expand_inputs([directory])
    suggested = re.search(r"--input '([^']+)'", str(refused.value)).group(1)
    assert [os.path.relpath(p, directory) for p in expand_inputs([suggested])] == [
        "AA/wiki_00", "AA/wiki_01", "AB/wiki_00"]


def test_expand_inputs_real_sample() -> None:
    assert expand_inputs([str(ENWIKI_SAMPLE.parent / "enwiki-*.xml.bz2")]) == [str(ENWIKI_SAMPLE)]


# ---------------------------------------------------------------- the real sample


def test_real_sample_pages() -> None:
    pages = enwiki_pages()
    assert len(pages) == 206
    assert sum(p.redirect for p in pages) == 100
    namespaces = {}
    for page in pages:
        namespaces[page.namespace] = namespaces.get(page.namespace, 0) + 1
    assert namespaces == {0: 205, 4: 1}
    articles = [p for p in pages if p.namespace == 0 and not p.redirect]
    assert len(articles) == 106
    ids = [p.doc_id for p in pages]
    assert len(set(ids)) == 206 and all(i.isdigit() for i in ids)
    assert (pages[0].doc_id, pages[0].title, pages[0].redirect) == ("10", "AccessibleComputing", True)
    assert (pages[1].doc_id, pages[1].title, pages[1].redirect) == ("12", "Anarchism", False)
    assert pages[1].text.startswith("{{") and "'''Anarchism''' is a" in pages[1].text
    assert (pages[-1].doc_id, pages[-1].title) == ("775", "Algorithm")
    other = next(p for p in pages if p.namespace == 4)
    assert other.title.startswith("Wikipedia:")
    assert all(p.source == str(ENWIKI_SAMPLE) for p in pages)
    # entities are decoded by the XML parser: wikitext, not XML escapes
    assert "&lt;ref" not in pages[1].text and "<ref" in pages[1].text
    # every redirect has a redirect text
    assert all(re.match(r"\s*#redirect", p.text, re.I) for p in pages if p.redirect)


def test_real_sample_uncompressed(tmp_path: Path) -> None:
    plain = tmp_path / "enwiki-sample.xml"
    plain.write_bytes(enwiki_raw_xml())
    pages = read_all(plain)
    assert [page_key(p) for p in pages] == [page_key(p) for p in enwiki_pages()]
    assert pages[0].source == str(plain)


# ---------------------------------------------------------------- small dumps


def test_plain_xml_fields(tmp_path: Path) -> None:
    pages = [
        page_xml(1, "Alpha", "'''Alpha''' is <b>first</b> & best."),
        page_xml(2, "Beta", "#REDIRECT [[Alpha]]", redirect="Alpha"),
        page_xml(3, "Talk:Alpha", "Chat.", ns=1),
        page_xml(4, "空白", ""),
    ]
    path = tmp_path / "dump.xml"
    path.write_bytes(single_xml(pages))
    got = read_all(path)
    assert [(p.doc_id, p.title, p.namespace, p.redirect) for p in got] == [
        ("1", "Alpha", 0, False),
        ("2", "Beta", 0, True),
        ("3", "Talk:Alpha", 1, False),
        ("4", "空白", 0, False),
    ]
    assert got[0].text == "'''Alpha''' is <b>first</b> & best."
    assert got[3].text == ""


def test_xml_without_namespace_declaration(tmp_path: Path) -> None:
    xml = b"<mediawiki>\n" + page_xml(5, "Plain", "Text.") + XML_FOOTER
    path = tmp_path / "bare.xml"
    path.write_bytes(xml)
    assert [(p.doc_id, p.title, p.text) for p in read_all(path)] == [("5", "Plain", "Text.")]


def test_bz2_single_stream_and_gz(tmp_path: Path) -> None:
    xml = single_xml(synthetic_pages(30))
    (tmp_path / "d.xml").write_bytes(xml)
    (tmp_path / "d.xml.bz2").write_bytes(bz2.compress(xml))
    (tmp_path / "d.xml.gz").write_bytes(gzip.compress(xml))
    plain = [page_key(p) for p in read_all(tmp_path / "d.xml")]
    assert len(plain) == 30
    assert sum(p[3] for p in plain) == 6  # every 5th page is a redirect
    assert [p[2] for p in plain].count(1) == 4  # every 7th (not 5th) in Talk:
    assert [page_key(p) for p in read_all(tmp_path / "d.xml.bz2")] == plain
    assert [page_key(p) for p in read_all(tmp_path / "d.xml.gz")] == plain


def test_large_page_across_read_chunks(tmp_path: Path) -> None:
    big = "Word " * 600_000  # 3 MB of text: several 1 MiB read chunks
    xml = single_xml([page_xml(1, "Big", big), page_xml(2, "Small", "x")])
    (tmp_path / "big.xml.bz2").write_bytes(bz2.compress(xml))
    pages = read_all(tmp_path / "big.xml.bz2")
    assert [p.title for p in pages] == ["Big", "Small"]
    assert pages[0].text == big


# ---------------------------------------------------------------- multistream


@pytest.fixture(scope="module")
def real_multistream(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[int]]:
    """The real sample rewritten as a Wikimedia multistream dump, 20 pages a stream."""
    header, pages, footer = split_dump(enwiki_raw_xml())
    assert len(pages) == 206
    return write_multistream(tmp_path_factory.mktemp("ms"), "enwiki-test", pages, 20, header, footer)


def test_multistream_layout(real_multistream: tuple[Path, Path, list[int]]) -> None:
    dump, index, offsets = real_multistream
    assert find_index(str(dump)) == str(index)
    assert read_multistream_index(str(index)) == offsets
    assert len(offsets) == 11  # 206 pages, 20 a stream
    # one index line a page, with titles that contain colons kept whole
    lines = bz2.decompress(index.read_bytes()).decode().splitlines()
    assert len(lines) == 206
    assert any(line.split(":", 2)[2].startswith("Wikipedia:") for line in lines)


def test_multistream_units_read_the_same_pages(real_multistream: tuple[Path, Path, list[int]]) -> None:
    dump, _, offsets = real_multistream
    size = dump.stat().st_size
    units = plan_work_units([str(dump)], "wiki-xml", unit_bytes=150_000)
    assert 4 <= len(units) < len(offsets)
    # contiguous byte ranges from the first page stream to the end of the file
    assert units[0].start == offsets[0] > 0
    assert units[-1].stop == size
    for a, b in itertools.pairwise(units):
        assert a.stop == b.start
    assert all(u.start in offsets for u in units)
    assert all(u.path == str(dump) and u.format == "wiki-xml" for u in units)

    per_unit = [list(read_wiki_pages(u)) for u in units]
    assert all(per_unit)
    pages = [p for chunk in per_unit for p in chunk]
    assert [page_key(p) for p in pages] == [page_key(p) for p in enwiki_pages()]
    # a page's source names its byte range
    assert per_unit[1][0].source == f"{dump} (bytes {units[1].start}-{units[1].stop})"


def test_multistream_one_unit_per_stream(real_multistream: tuple[Path, Path, list[int]]) -> None:
    dump, _, offsets = real_multistream
    units = plan_work_units([str(dump)], "wiki-xml", unit_bytes=1)
    assert [u.start for u in units] == offsets
    assert sum(len(list(read_wiki_pages(u))) for u in units) == 206


def test_multistream_without_index_use(real_multistream: tuple[Path, Path, list[int]]) -> None:
    dump, _, _ = real_multistream
    units = plan_work_units([str(dump)], "wiki-xml", use_index=False, unit_bytes=1)
    assert units == [WorkUnit(str(dump), "wiki-xml")]
    # bz2.open reads every concatenated stream
    pages = list(read_wiki_pages(units[0]))
    assert [page_key(p) for p in pages] == [page_key(p) for p in enwiki_pages()]


def test_multistream_without_index_file(tmp_path: Path) -> None:
    pages = synthetic_pages(23)
    dump, index, _ = write_multistream(tmp_path, "small", pages, 4, write_index=False)
    assert not index.exists() and find_index(str(dump)) is None
    units = plan_work_units([str(dump)], "wiki-xml", unit_bytes=1)
    assert units == [WorkUnit(str(dump), "wiki-xml")]
    got = list(read_wiki_pages(units[0]))
    assert [p.doc_id for p in got] == [str(i) for i in range(1, 24)]


def test_small_multistream_units(tmp_path: Path) -> None:
    pages = synthetic_pages(23)
    dump, _, offsets = write_multistream(tmp_path, "small", pages, 4)
    assert len(offsets) == 6
    units = plan_work_units([str(dump)], "wiki-xml", unit_bytes=1)
    assert len(units) == 6
    got = [p for u in units for p in read_wiki_pages(u)]
    whole = list(read_wiki_pages(WorkUnit(str(dump), "wiki-xml")))
    assert [page_key(p) for p in got] == [page_key(p) for p in whole]
    assert [p.doc_id for p in got] == [str(i) for i in range(1, 24)]
    assert got[2].title == "Topic: part 3"  # entities and colons survive
    # one unit when the size limit is never reached
    assert len(plan_work_units([str(dump)], "wiki-xml")) == 1


def test_plan_other_formats_and_files(tmp_path: Path) -> None:
    a, b = tmp_path / "a.txt", tmp_path / "b-multistream.xml.bz2"
    a.write_text("x\n")
    b.write_bytes(bz2.compress(single_xml(synthetic_pages(2))))
    assert plan_work_units([str(a)], "text") == [WorkUnit(str(a), "text")]
    # an index is only looked for on wiki-xml input; absent → the whole file
    c = tmp_path / "c-multistream.xml.bz2"  # WikiExtractor's JSON, named like a dump
    c.write_bytes(bz2.compress(b'{"id": "1", "title": "T", "text": "x"}\n'))
    assert plan_work_units([str(c)], "wikiextractor-json") == [WorkUnit(str(c), "wikiextractor-json")]
    assert plan_work_units([str(b)], "wiki-xml") == [WorkUnit(str(b), "wiki-xml")]
    with pytest.raises(ValueError, match="csv"):
        plan_work_units([str(a)], "csv")


# What a split must keep whole: a byte-order mark, CRLF ends, blank lines of ASCII
# and of Unicode whitespace (U+3000, U+001C: str.strip() takes both), lines that are
# not UTF-8 (skipped, neither text nor blank), a document of many lines, a last line
# without a newline.
SPLIT_TEXT = (
    b"\xef\xbb\xbfFirst sentence.\r\n  Second sentence.  \n\n\n\n"
    b"Doc two \xff\xfe bad line\nDoc two line.\n   \t\n"
    b"Third doc \xe4\xb8\xad\xe6\x96\x87.\n\xc3\nStill the third.\n\xe3\x80\x80\n"
    b"Fourth.\n\x1c\nFifth one\nhas\nfour\nlines.\r\n\r\n\xc3\n\n"
    b"Last line without newline."
)
SPLIT_JSON = b"".join([
    b'\xef\xbb\xbf{"id": "7", "title": "A", "text": "A\\nOne.\\nTwo."}\n',
    b'{"title": "No id", "text": "Three."}\n', b"\n", b"not json\n", b"\xff\xfe\n",
    b'{"id": "9", "title": "B", "text": "B\\nFour."}\r\n', b'{"title": "Last", "text": "Five."}',
])


@pytest.mark.parametrize("chunk", [1, 3, 16 << 20])
@pytest.mark.parametrize(("fmt", "content"), [("text", SPLIT_TEXT), ("lines", SPLIT_TEXT),
                                              ("wikiextractor-json", SPLIT_JSON)])
def test_an_uncompressed_text_file_split_into_units_reads_as_the_whole_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str, content: bytes, chunk: int) -> None:
    """A large uncompressed text, lines or wikiextractor-json file is read in
    parallel as byte ranges of whole lines (text: whole documents): at every unit
    size, the units' documents are the whole file's, with the same ids (they name
    a file's lines and number its documents), in the same order, and the same skips;
    whether the planner's pass finds a cut's newline in the chunk it reads or chunks later."""
    import data_prep.inputs as inputs_module

    monkeypatch.setattr(inputs_module, "_SCAN_CHUNK", chunk)
    path = tmp_path / "corpus.txt"
    path.write_bytes(content)
    whole_skips = SkipCounter()
    whole = [r for u in plan_work_units([str(path)], fmt) for r in read_records(u, whole_skips)]
    assert len(whole) >= 4 and whole_skips
    splits = set()
    for unit_bytes in range(1, len(content) + 2):
        units = plan_work_units([str(path)], fmt, unit_bytes=unit_bytes, split_text=True)
        skips = SkipCounter()
        assert [r for u in units for r in read_records(u, skips)] == whole, unit_bytes
        assert skips == whole_skips, unit_bytes
        assert [u.start for u in units[1:]] == [u.stop for u in units[:-1]]
        assert units == [WorkUnit(str(path), fmt)] or units[-1].stop == len(content)
        splits.add(len(units))
    assert max(splits) >= 5 and 1 in splits  # cut finely, and not at all once a unit holds the file


def test_only_large_uncompressed_text_files_are_split(tmp_path: Path) -> None:
    """A file no larger than a unit stays one unit named as before (a resumed build
    finds its part); a compressed one cannot be entered mid-way; and a split asked
    for by the build alone (``train_vocab`` reads every file anyway)."""
    plain, packed = tmp_path / "a.txt", tmp_path / "b.txt.gz"
    plain.write_bytes(SPLIT_TEXT)
    packed.write_bytes(gzip.compress(SPLIT_TEXT * 50))
    size = len(SPLIT_TEXT)
    assert plan_work_units([str(plain)], "text", unit_bytes=size, split_text=True) == [WorkUnit(str(plain), "text")]
    assert len(plan_work_units([str(plain)], "lines", unit_bytes=size // 2, split_text=True)) == 2
    # Larger than a unit, but no blank line past the unit's size to cut after: whole.
    assert plan_work_units([str(plain)], "text", unit_bytes=size - 1, split_text=True) == [WorkUnit(str(plain), "text")]
    assert plan_work_units([str(plain)], "text", unit_bytes=10) == [WorkUnit(str(plain), "text")]
    assert plan_work_units([str(packed)], "text", unit_bytes=10, split_text=True) == [WorkUnit(str(packed), "text")]


def test_a_unit_does_not_read_the_next_units_first_line(tmp_path: Path) -> None:
    """A range ends at a line start: the next unit's first line, however long, is
    not read (it was, and dropped: a 300 MB line cost 550 MB at each cut)."""
    import tracemalloc

    path = tmp_path / "a.txt"
    path.write_bytes(b"short line\n" + b"x" * (20 << 20) + b"\n")
    first = plan_work_units([str(path)], "lines", unit_bytes=1, split_text=True)[0]
    assert (first.start, first.stop) == (0, 11)
    tracemalloc.start()
    try:
        records = list(read_records(first, SkipCounter()))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [r.doc_id for r in records] == ["a.txt:1"] and peak < 1 << 20, peak


def test_a_file_changed_after_its_cuts_is_an_error_naming_the_unit(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_bytes(b"alpha\nbravo\ncharlie\n")
    unit = plan_work_units([str(path)], "lines", unit_bytes=6, split_text=True)[1]
    path.write_bytes(b">alpha\nbravo\ncharlie\n")
    with pytest.raises(InputError, match=re.escape(f"{path} (bytes 6-12): the file changed since the build cut it")):
        list(read_records(unit, SkipCounter()))


def test_a_split_unit_names_its_range_in_errors(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_bytes(SPLIT_TEXT)
    unit = plan_work_units([str(path)], "lines", unit_bytes=40, split_text=True)[1]
    path.unlink()
    with pytest.raises(InputError, match=re.escape(f"{path} (bytes {unit.start}-{unit.stop})")):
        list(read_records(unit, SkipCounter()))


@pytest.mark.parametrize(("content", "given", "found"), [
    (single_xml(synthetic_pages(2)), "text", "wiki-xml"),
    (single_xml(synthetic_pages(2)), "lines", "wiki-xml"),
    (single_xml(synthetic_pages(2)), "wikiextractor-json", "wiki-xml"),
    (b'\xef\xbb\xbf\n{"id": "1", "title": "T", "text": "First."}\n', "text", "wikiextractor-json"),
])
def test_an_input_plainly_of_another_format_is_refused_naming_the_right_one(
        tmp_path: Path, content: bytes, given: str, found: str) -> None:
    """A dump read as --format text made a corpus of XML markup (a vocabulary of 3,876
    tokens, a dataset, a sentence list), without a word."""
    path = tmp_path / "input.bz2"
    path.write_bytes(bz2.compress(content))
    with pytest.raises(InputError, match=re.escape(f"{path}: ") + ".*" + re.escape(
            f", given as --format {given}; read it with --format {found}")):
        plan_work_units([str(path)], given)
    assert plan_work_units([str(path)], found)


def test_plain_text_read_as_a_dump_says_which_format_reads_it(tmp_path: Path) -> None:
    """It said "malformed XML at line 1, column 0 (bad markup, truncated file, or bytes
    that are not UTF-8)", which sends the user looking for damage."""
    path = tmp_path / "corpus.txt"
    path.write_text("Hello world. This is text.\n\nAnother document.\n", encoding="utf-8")
    with pytest.raises(InputError, match=re.escape(f"{path}: not XML (syntax error: line 1, column 0); --format "
                                                   "wiki-xml reads MediaWiki dumps: plain text is --format text")):
        list(read_wiki_pages(WorkUnit(str(path), "wiki-xml")))


def test_text_that_merely_looks_like_markup_or_json_is_read_as_text(tmp_path: Path) -> None:
    for first_line in (b"<b>Bold</b> is a tag.", b'{"an": "object without text"}', b"{not json at all",
                       b"<?xm not a declaration"):
        path = tmp_path / "corpus.txt"
        path.write_bytes(first_line + b"\nSecond line.\n")
        assert sniff_format(str(path)) is None, first_line
        assert plan_work_units([str(path)], "text") == [WorkUnit(str(path), "text")]
    path.write_bytes(b"")
    assert sniff_format(str(path)) is None


def test_index_offset_past_end_of_file(tmp_path: Path) -> None:
    dump, index, offsets = write_multistream(tmp_path, "bad", synthetic_pages(10), 3)
    size = dump.stat().st_size
    write_index(index, [f"{offsets[0]}:1:Page 1", f"{size + 100}:2:Page 2"])
    with pytest.raises(InputError) as err:
        plan_work_units([str(dump)], "wiki-xml")
    assert str(index) in str(err.value) and str(size + 100) in str(err.value)


def test_index_offset_inside_a_stream(tmp_path: Path) -> None:
    dump, index, offsets = write_multistream(tmp_path, "mid", synthetic_pages(10), 3)
    write_index(index, [f"{offsets[0]}:1:Page 1", f"{offsets[1] + 7}:4:Page 4"])
    units = plan_work_units([str(dump)], "wiki-xml", unit_bytes=1)
    assert len(units) == 2
    with pytest.raises(InputError, match=re.escape(str(dump))):
        list(read_wiki_pages(units[1]))


def test_malformed_and_empty_index(tmp_path: Path) -> None:
    dump, index, _ = write_multistream(tmp_path, "idx", synthetic_pages(4), 2)
    write_index(index, ["123:1:A", "not-a-number:2:B"])
    with pytest.raises(InputError, match=r"line 2"):
        plan_work_units([str(dump)], "wiki-xml")
    write_index(index, [""])
    with pytest.raises(InputError, match="empty"):
        plan_work_units([str(dump)], "wiki-xml")
    index.write_bytes(b"not bz2 at all")
    with pytest.raises(InputError, match=re.escape(str(index))):
        plan_work_units([str(dump)], "wiki-xml")


def test_truncated_multistream_errors(tmp_path: Path) -> None:
    dump, index, offsets = write_multistream(tmp_path, "cut", synthetic_pages(40), 5)
    data = dump.read_bytes()
    cut = (offsets[-1] + offsets[-2]) // 2  # inside the second-to-last page stream
    dump.write_bytes(data[:cut])
    # the index now names an offset past the end: refused when planning
    with pytest.raises(InputError, match="beyond the end"):
        plan_work_units([str(dump)], "wiki-xml", unit_bytes=1)
    # with an index that fits, the unit ending inside a stream fails when read
    write_index(index, [f"{o}:1:x" for o in offsets[:-1]])
    units = plan_work_units([str(dump)], "wiki-xml", unit_bytes=1)
    for unit in units[:-1]:
        assert list(read_wiki_pages(unit))
    with pytest.raises(InputError, match=re.escape(units[-1].describe())):
        list(read_wiki_pages(units[-1]))


# ---------------------------------------------------------------- bad wiki-xml input


def test_truncated_bz2_names_file(tmp_path: Path) -> None:
    data = bz2.compress(single_xml(synthetic_pages(200)))
    path = tmp_path / "truncated.xml.bz2"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match=re.escape(str(path))) as err:
        list(read_wiki_pages(WorkUnit(str(path), "wiki-xml")))
    assert "truncated" in str(err.value) or "ended" in str(err.value)


@pytest.mark.parametrize("damage", ["garbage", "flipped", "not-bz2"])
def test_corrupt_bz2(tmp_path: Path, damage: str) -> None:
    xml = single_xml(synthetic_pages(50))
    data = bz2.compress(xml)
    if damage == "garbage":
        data = b"BZh9" + random.Random(0).randbytes(4000)
    elif damage == "flipped":
        raw = bytearray(data)
        raw[len(raw) // 2] ^= 0xFF
        data = bytes(raw)
    else:
        data = xml  # plain XML under a .bz2 name
    path = tmp_path / f"{damage}.xml.bz2"
    path.write_bytes(data)
    with pytest.raises(InputError, match=re.escape(str(path))):
        list(read_wiki_pages(WorkUnit(str(path), "wiki-xml")))


def _read_as(fmt: str, path: Path) -> None:
    unit = WorkUnit(str(path), fmt)
    if fmt == "wiki-xml":
        list(read_wiki_pages(unit))
    elif fmt == "text":
        list(read_text_documents(unit, SkipCounter()))
    else:
        list(read_wikiextractor_documents(unit, SkipCounter()))


@pytest.mark.parametrize("fmt", ["wiki-xml", "text", "wikiextractor-json"])
def test_every_reader_tells_damaged_data_from_a_file_it_cannot_read(tmp_path: Path, fmt: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """One mapping (``inputs.read_errors``) for every reader and ``tacl-multistream``:
    a cut-short .gz or a .bz2 that is not bz2 is corrupt data; an I/O error is not
    (the XML reader called an EIO corrupt data, the text readers called both
    "unreadable or corrupt")."""
    import errno

    from data_prep import inputs, sources

    body = single_xml(synthetic_pages(20)) if fmt == "wiki-xml" else b"".join(b"Line %d of the text.\n" % i for i in range(400))
    if fmt == "wikiextractor-json":
        body = b"".join(json.dumps({"id": str(i), "title": "T", "text": "A line."}).encode() + b"\n"
                        for i in range(200))
    cut = tmp_path / "cut.gz"
    compressed = gzip.compress(body, mtime=0)
    cut.write_bytes(compressed[: len(compressed) // 2])
    not_bz2 = tmp_path / "plain.bz2"
    not_bz2.write_bytes(body)
    for damaged in (cut, not_bz2):
        with pytest.raises(InputError, match=f"^{re.escape(str(damaged))}: corrupt or truncated compressed data: "):
            _read_as(fmt, damaged)

    readable = tmp_path / "readable"
    readable.write_bytes(body)
    real_open = open

    class FailingRead:
        def __init__(self, raw):
            self.raw = raw

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.raw.close()

        def __getattr__(self, name):
            return getattr(self.raw, name)

        def read(self, *args):
            raise OSError(errno.EIO, os.strerror(errno.EIO))

        def readinto(self, *args):
            raise OSError(errno.EIO, os.strerror(errno.EIO))

        def __iter__(self):
            raise OSError(errno.EIO, os.strerror(errno.EIO))

    for module in (inputs, sources):  # the readers open files there, and through inputs.open_decompressed
        monkeypatch.setattr(module, "open", lambda path, mode="r", *a, **k: FailingRead(real_open(path, mode, *a, **k))
                            if str(path) == str(readable) else real_open(path, mode, *a, **k), raising=False)
    with pytest.raises(InputError, match=f"^{re.escape(str(readable))}: cannot read: {os.strerror(errno.EIO)}$"):
        _read_as(fmt, readable)


def test_malformed_xml_names_file_and_line(tmp_path: Path) -> None:
    good = page_xml(1, "Good", "Fine.")
    bad = page_xml(2, "Bad", "Text.").replace(b"</title>", b"")  # <title> never closed
    xml = single_xml([good, bad, page_xml(3, "After", "x")])
    path = tmp_path / "malformed.xml"
    path.write_bytes(xml)
    # expat reports the mismatch at the </page> that closes the unclosed <title>'s parent
    lines = xml.decode().splitlines()
    bad_line = next(i for i, line in enumerate(lines, 1) if "<title>Bad" in line)
    close_line = next(i for i, line in enumerate(lines, 1) if line.strip() == "</page>" and i > bad_line)
    reader = read_wiki_pages(WorkUnit(str(path), "wiki-xml"))
    with pytest.raises(InputError) as err:
        list(reader)
    message = str(err.value)
    assert str(path) in message
    assert f"line {close_line}" in message


def test_malformed_xml_yields_pages_before_error(tmp_path: Path) -> None:
    bad = page_xml(2, "Bad", "Text.").replace(b"</title>", b"")
    path = tmp_path / "m.xml"
    path.write_bytes(single_xml([page_xml(1, "Good", "Fine."), bad]))
    reader = read_wiki_pages(WorkUnit(str(path), "wiki-xml"))
    assert next(reader).title == "Good"
    with pytest.raises(InputError):
        next(reader)


def test_malformed_xml_in_multistream_unit(tmp_path: Path) -> None:
    pages = synthetic_pages(9)
    pages[7] = pages[7].replace(b"</ns>", b"")
    dump, _, _ = write_multistream(tmp_path, "mx", pages, 3)
    units = plan_work_units([str(dump)], "wiki-xml", unit_bytes=1)
    assert len(list(read_wiki_pages(units[0]))) == 3
    with pytest.raises(InputError, match=r"malformed XML at line \d+") as err:
        list(read_wiki_pages(units[2]))
    assert units[2].describe() in str(err.value)


def test_non_utf8_bytes_in_page(tmp_path: Path) -> None:
    latin1 = page_xml(2, "Cafe", "Un caf\u00e9 noir.").replace("caf\u00e9".encode(), b"caf\xe9")
    xml = single_xml([page_xml(1, "Ok", "ok"), latin1])
    path = tmp_path / "latin1.xml"
    path.write_bytes(xml)
    line = next(i for i, raw in enumerate(xml.split(b"\n"), 1) if b"\xe9" in raw)
    with pytest.raises(InputError) as err:
        list(read_wiki_pages(WorkUnit(str(path), "wiki-xml")))
    assert str(path) in str(err.value) and f"line {line}" in str(err.value)
    # the same in a bz2 file
    zipped = tmp_path / "latin1.xml.bz2"
    zipped.write_bytes(bz2.compress(xml))
    with pytest.raises(InputError, match=re.escape(str(zipped))):
        list(read_wiki_pages(WorkUnit(str(zipped), "wiki-xml")))


def test_truncated_gz_names_file(tmp_path: Path) -> None:
    data = gzip.compress(single_xml(synthetic_pages(200)), mtime=0)
    path = tmp_path / "cut.xml.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match=re.escape(str(path))):
        list(read_wiki_pages(WorkUnit(str(path), "wiki-xml")))


def _damaged_gzip_copies(tmp_path: Path, suffix: str, content: bytes) -> list[Path]:
    data = gzip.compress(content, mtime=0)
    paths = []
    for pos in (30, len(data) // 3, len(data) // 2):
        damaged = bytearray(data)
        damaged[pos] ^= 0xFF
        path = tmp_path / f"damaged-{pos}{suffix}"
        path.write_bytes(bytes(damaged))
        paths.append(path)
    return paths


def test_corrupt_gz_wiki_xml(tmp_path: Path) -> None:
    for path in _damaged_gzip_copies(tmp_path, ".xml.gz", single_xml(synthetic_pages(300))):
        with pytest.raises(InputError, match=re.escape(str(path))):
            list(read_wiki_pages(WorkUnit(str(path), "wiki-xml")))


def test_corrupt_gz_text(tmp_path: Path) -> None:
    content = ("A sentence of text input.\n" * 3000).encode()
    for path in _damaged_gzip_copies(tmp_path, ".txt.gz", content):
        with pytest.raises(InputError, match=re.escape(str(path))):
            list(read_text_documents(WorkUnit(str(path), "text"), SkipCounter()))


@pytest.mark.parametrize("content", [b"", b"<mediawiki>\n  <page>\n    <title>X</title>\n"])
def test_empty_or_truncated_plain_xml(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "short.xml"
    path.write_bytes(content)
    with pytest.raises(InputError, match=re.escape(str(path))):
        list(read_wiki_pages(WorkUnit(str(path), "wiki-xml")))


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "gone.xml.bz2"
    with pytest.raises(InputError, match=re.escape(str(path))):
        list(read_wiki_pages(WorkUnit(str(path), "wiki-xml")))


# ---------------------------------------------------------------- text format


def test_text_documents(tmp_path: Path) -> None:
    path = tmp_path / "docs.txt"
    path.write_bytes(
        b"First sentence.\r\n"
        b"  Second sentence.  \n"
        b"\n\n\n"
        b"Doc two \xff\xfe bad line\n"
        b"Doc two line.\n"
        b"   \t\n"
        b"Third doc \xe4\xb8\xad\xe6\x96\x87.\n"
        b"\xc3\n"
        b"Last line without newline."
    )
    skips = SkipCounter()
    docs = list(read_text_documents(WorkUnit(str(path), "text"), skips))
    assert docs == [
        PlainDocument(
            "docs.txt:0", "First sentence.", ["First sentence.", "Second sentence."], True, str(path)
        ),
        PlainDocument("docs.txt:1", "Doc two line.", ["Doc two line."], True, str(path)),
        PlainDocument(
            "docs.txt:2",
            "Third doc 中文.",
            ["Third doc 中文.", "Last line without newline."],
            True,
            str(path),
        ),
    ]
    assert skips == {"invalid_utf8_lines": 2}


# A corpus of short documents, as the audit made it: each read as UTF-8 text had been
# one document with NULs in every word, or a counted skip, exit 0.
CORPUS = "".join(f"Document {k} opens here.\nIts second sentence follows.\n\n" for k in range(30))
TEXT_FORMATS = ("text", "lines", "wikiextractor-json")


@pytest.mark.parametrize(("encoding", "bom"), [("utf-16", "FF FE"), ("utf-16-be", "FE FF"), ("utf-32", "FF FE 00 00"),
                                               ("utf-32-be", "00 00 FE FF")])
@pytest.mark.parametrize("fmt", TEXT_FORMATS)
def test_text_in_utf16_or_utf32_is_refused_naming_the_file_and_the_encoding(
        tmp_path: Path, encoding: str, bom: str, fmt: str) -> None:
    """``iconv -t utf-16``'s output read as --format text was one document of NUL-riddled
    words, its first line a counted ``invalid_utf8_lines`` skip, exit 0; sentence_list
    wrote lines full of NULs. The reader the build, train_vocab and sentence_list share
    refuses it, and so does planning (before a build starts)."""
    name = "UTF-32" if "32" in encoding else "UTF-16"
    path = tmp_path / "docs.txt.gz"  # compressed: the decompressed bytes are checked
    data = CORPUS.encode(encoding)
    if encoding.endswith("-be"):  # Python writes no byte-order mark for an explicit byte order
        data = ("\ufeff" + CORPUS).encode(encoding)
    path.write_bytes(gzip.compress(data))
    message = re.escape(f"{path}: {name} text (byte-order mark {bom}); convert it to UTF-8")
    with pytest.raises(InputError, match=f"^{message}$"):
        plan_work_units([str(path)], fmt)
    skips = SkipCounter()
    with pytest.raises(InputError, match=f"^{message}$"):
        list(read_records(WorkUnit(str(path), fmt), skips))
    assert not skips


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
def test_a_file_with_nul_bytes_in_its_first_block_is_not_text(tmp_path: Path, fmt: str) -> None:
    """UTF-16 without a byte-order mark (``iconv -t utf-16le``), or a binary file (a
    shard's int32 tokens); a stray NUL in UTF-8 text (web-extracted corpora have
    them) is not refused: the cleaning drops it, as it did before the check."""
    for name, data in (("le.txt", CORPUS.encode("utf-16-le")), ("binary.txt", b"\x07\x00\x00\x00" * 1024)):
        path = tmp_path / name
        path.write_bytes(data)
        block = data[:4096]
        message = re.escape(f"{path}: not text: {block.count(0):,} NUL bytes in its first {len(block):,} bytes "
                            "(UTF-16 or UTF-32 without a byte-order mark, or a binary file); give UTF-8 text")
        with pytest.raises(InputError, match=f"^{message}$"):
            plan_work_units([str(path)], fmt)
        with pytest.raises(InputError, match=f"^{message}$"):
            list(read_records(WorkUnit(str(path), fmt), SkipCounter()))
    stray = tmp_path / "stray.txt"
    stray.write_bytes(CORPUS.replace("opens", "op\x00ens", 1).encode())
    assert plan_work_units([str(stray)], "text") and len(list(read_records(WorkUnit(str(stray), "text"),
                                                                           SkipCounter()))) == 30


def test_a_utf8_byte_order_mark_is_dropped(tmp_path: Path) -> None:
    """Kept, it began the first sentence (``\\ufeffFirst.``) and made the first JSON
    line a ``malformed_json_lines`` skip."""
    text = tmp_path / "bom.txt"
    text.write_bytes(b"\xef\xbb\xbfFirst sentence.\nSecond.\n\nOther.\n")
    skips = SkipCounter()
    (first, _) = read_text_documents(WorkUnit(str(text), "text"), skips)
    assert first.paragraphs == ["First sentence.", "Second."] and first.title == "First sentence."
    (line, *_) = read_line_documents(WorkUnit(str(text), "lines"), skips)
    assert line.paragraphs == ["First sentence."]
    wiki = tmp_path / "wiki_00"
    wiki.write_bytes(b"\xef\xbb\xbf" + json.dumps({"id": "7", "title": "T", "text": "T\nFirst."}).encode() + b"\n")
    assert plan_work_units([str(wiki)], "wikiextractor-json")
    (doc,) = read_wikiextractor_documents(WorkUnit(str(wiki), "wikiextractor-json"), skips)
    assert (doc.doc_id, doc.paragraphs) == ("7", ["First."])
    assert not skips


def test_text_title_truncated_and_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    path.write_text("x" * 200 + "\n")
    (doc,) = read_text_documents(WorkUnit(str(path), "text"), SkipCounter())
    assert doc.title == "x" * 80 and doc.paragraphs == ["x" * 200]
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n  \n")
    assert list(read_text_documents(WorkUnit(str(empty), "text"), SkipCounter())) == []


def test_text_compressed(tmp_path: Path) -> None:
    content = b"One.\nTwo.\n\nThree.\n"
    (tmp_path / "t.txt.bz2").write_bytes(bz2.compress(content))
    (tmp_path / "t.txt.gz").write_bytes(gzip.compress(content))
    for name in ("t.txt.bz2", "t.txt.gz"):
        docs = list(read_text_documents(WorkUnit(str(tmp_path / name), "text"), SkipCounter()))
        assert [(d.doc_id, d.paragraphs) for d in docs] == [
            (f"{name}:0", ["One.", "Two."]),
            (f"{name}:1", ["Three."]),
        ]


def test_text_truncated_bz2(tmp_path: Path) -> None:
    data = bz2.compress(("A sentence here.\n" * 20000).encode())
    path = tmp_path / "cut.txt.bz2"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match=re.escape(str(path))):
        list(read_text_documents(WorkUnit(str(path), "text"), SkipCounter()))


def test_text_real_zh_sample() -> None:
    skips = SkipCounter()
    docs = list(read_text_documents(WorkUnit(str(ZHWIKI_SAMPLE), "text"), skips))
    assert [d.doc_id for d in docs] == [f"zhwiki-sample.txt:{i}" for i in range(4)]
    assert sum(len(d.paragraphs) for d in docs) == 497
    assert all(d.pre_split for d in docs)
    assert docs[0].title == "数 学"
    assert not skips


def test_text_ids_distinct_across_folders(tmp_path: Path) -> None:
    """WikiExtractor writes AA/wiki_00, AB/wiki_00, ...: the planned units name files
    by their path below the common input folder, so document ids stay distinct."""
    paths = []
    for folder in ("AA", "AB"):
        (tmp_path / folder).mkdir()
        path = tmp_path / folder / "wiki_00"
        path.write_text(f"Text of {folder}.\n")
        paths.append(str(path))
    ids = [
        d.doc_id
        for unit in plan_work_units(paths, "text")
        for d in read_text_documents(unit, SkipCounter())
    ]
    assert ids == ["AA/wiki_00:0", "AB/wiki_00:0"]


# ---------------------------------------------------------------- WikiExtractor JSON


def test_wikiextractor_documents(tmp_path: Path) -> None:
    lines = [
        json.dumps({"id": "7", "url": "u", "title": "Paris", "text": "Paris\n\nParis is big.\nIt is old.\n"}),
        "{not json",
        json.dumps({"id": "8", "title": "No text"}),
        "",
        json.dumps({"title": "No id", "text": "No id\nOnly paragraph."}),
        json.dumps({"id": "9", "title": "Bad", "text": 5}),
        json.dumps(["a", "list"]),
        json.dumps("a string"),
        json.dumps({"id": "10", "title": "Title later", "text": "First para.\nTitle later"}),
        json.dumps({"id": "11", "title": "中文", "text": "中文\n中文是语言。"}, ensure_ascii=False),
    ]
    path = tmp_path / "wiki_00.json"
    path.write_bytes("\n".join(lines).encode() + b'\n\xff{"id": 1}\n')
    skips = SkipCounter()
    docs = list(read_wikiextractor_documents(WorkUnit(str(path), "wikiextractor-json"), skips))
    assert [(d.doc_id, d.title, d.paragraphs) for d in docs] == [
        ("7", "Paris", ["Paris is big.", "It is old."]),
        ("wiki_00.json:5", "No id", ["Only paragraph."]),
        ("10", "Title later", ["First para.", "Title later"]),  # only a leading title is dropped
        ("11", "中文", ["中文是语言。"]),
    ]
    assert all(not d.pre_split and d.source == str(path) for d in docs)
    assert skips == {"malformed_json_lines": 5, "invalid_utf8_lines": 1}


def test_wikiextractor_title_only_document(tmp_path: Path) -> None:
    path = tmp_path / "w.json"
    path.write_text(json.dumps({"id": "1", "title": "Stub", "text": "Stub\n"}) + "\n")
    (doc,) = read_wikiextractor_documents(WorkUnit(str(path), "wikiextractor-json"), SkipCounter())
    assert doc.paragraphs == []


def test_read_progress_tracks_stored_bytes(tmp_path: Path) -> None:
    """The progress (for ETA logs) rises monotonically to 1 for a whole file and for
    a byte range of a multistream dump."""
    from data_prep.inputs import ReadProgress
    from data_prep.multistream import write_multistream as recompress

    dump, _ = recompress(str(ENWIKI_SAMPLE), str(tmp_path / "p-multistream.xml.bz2"), 20)
    units = [WorkUnit(str(ENWIKI_SAMPLE), "wiki-xml"), *plan_work_units([str(dump)], "wiki-xml", unit_bytes=400_000)]
    for unit in units:
        progress = ReadProgress(unit)
        seen = [progress.fraction]
        for _ in read_wiki_pages(unit, progress):
            seen.append(progress.fraction)
        assert seen == sorted(seen) and seen[0] < 0.5 and seen[-1] == 1.0


def test_an_empty_dump_is_refused_when_planned(tmp_path: Path) -> None:
    """It failed inside the pipeline as "not XML (no element found: line 1, column 0)"."""
    empty = tmp_path / "enwiki-pages-articles.xml"
    empty.write_bytes(b"")
    with pytest.raises(InputError) as refused:
        plan_work_units([str(empty)], "wiki-xml")
    assert str(refused.value) == f"{empty}: an empty file, not a MediaWiki dump (a download cut short?)"
