"""Tests of the synthetic MediaWiki dump generator (data_prep.sample_corpus)."""

from __future__ import annotations

import bz2
import hashlib
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import mwparserfromhell
import pytest

from data_prep.sample_corpus import (
    LANGUAGES,
    OTHER_NAMESPACE_PAGES,
    generate_wiki_xml,
    main,
    num_redirects,
    write_sample_dump,
)
from data_prep.sample_corpus.fillers import FILLERS
from data_prep.sample_corpus.generator import PLACEHOLDER, language_data

NS = "{http://www.mediawiki.org/xml/export-0.10/}"
REPO_ROOT = Path(__file__).resolve().parents[1]
NS_PREFIX = {1: "Talk:", 2: "User:", 4: "Wikipedia:", 6: "File:", 10: "Template:", 14: "Category:"}
TRAILING_EN = ["See also", "Notes", "References", "Further reading", "External links"]
TRAILING_ZH = ["参见", "注释", "参考文献", "延伸阅读", "外部链接"]
# A ``{key}`` the generator failed to fill (wiki templates use double braces).
LEFTOVER_PLACEHOLDER = re.compile(r"(?<!\{)\{[A-Za-z_]+[0-9]*\}(?!\})")


def _pages(xml_text: str) -> list[dict]:
    root = ET.fromstring(xml_text)
    out = []
    for page in root.findall(f"{NS}page"):
        redirect = page.find(f"{NS}redirect")
        out.append(
            {
                "title": page.findtext(f"{NS}title"),
                "ns": int(page.findtext(f"{NS}ns")),
                "id": int(page.findtext(f"{NS}id")),
                "redirect": None if redirect is None else redirect.get("title"),
                "rev_id": int(page.findtext(f"{NS}revision/{NS}id")),
                "timestamp": page.findtext(f"{NS}revision/{NS}timestamp"),
                "model": page.findtext(f"{NS}revision/{NS}model"),
                "format": page.findtext(f"{NS}revision/{NS}format"),
                "text_elem": page.find(f"{NS}revision/{NS}text"),
                "text": page.findtext(f"{NS}revision/{NS}text") or "",
            }
        )
    return out


def _articles(pages: list[dict]) -> list[dict]:
    """Namespace-0 pages that are neither redirects nor empty."""
    return [p for p in pages if p["ns"] == 0 and p["redirect"] is None and p["text"]]


@pytest.fixture(scope="module")
def en_xml() -> str:
    return generate_wiki_xml()


@pytest.fixture(scope="module")
def zh_xml() -> str:
    return generate_wiki_xml(language="zh")


@pytest.fixture(scope="module")
def en_pages(en_xml: str) -> list[dict]:
    return _pages(en_xml)


@pytest.fixture(scope="module")
def zh_pages(zh_xml: str) -> list[dict]:
    return _pages(zh_xml)


# -- determinism ---------------------------------------------------------------------


@pytest.mark.parametrize("language", ["en", "zh"])
def test_same_arguments_give_identical_output(language: str) -> None:
    assert generate_wiki_xml(20, 7, language) == generate_wiki_xml(20, 7, language)


@pytest.mark.parametrize("language", ["en", "zh"])
def test_different_seed_gives_different_output(language: str) -> None:
    assert generate_wiki_xml(20, 1, language) != generate_wiki_xml(20, 2, language)


def test_languages_differ() -> None:
    assert generate_wiki_xml(10, 0, "en") != generate_wiki_xml(10, 0, "zh")


# sha256 of generate_wiki_xml(60, 0, language). Any change to the data files, the
# generator or its order of random draws changes these; update them only on purpose.
GOLDEN_SHA256 = {
    "en": "81f48eac1b77fe37cf31819ce30c3db1e3ef7d1c842e7d2a16440f5d571db653",
    "zh": "90de2d2d9e97e35465961d0f9c03f33658dbc2fa98370738c5db2c7140c828da",
}


def test_output_is_pinned(en_xml: str, zh_xml: str) -> None:
    for language, xml in (("en", en_xml), ("zh", zh_xml)):
        digest = hashlib.sha256(xml.encode("utf-8")).hexdigest()
        assert digest == GOLDEN_SHA256[language], f"the generated {language} corpus changed"


def test_deterministic_across_processes() -> None:
    """Hash randomisation of a fresh interpreter must not change the output."""
    code = "import sys; from data_prep.sample_corpus import generate_wiki_xml as g; sys.stdout.write(g(8, 3))"
    outs = {
        subprocess.run(
            [sys.executable, "-c", code],
            cwd=REPO_ROOT,
            env={"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2")
    }
    assert outs == {generate_wiki_xml(8, 3)}


# -- XML structure -------------------------------------------------------------------


@pytest.mark.parametrize(("language", "dbname"), [("en", "enwiki"), ("zh", "zhwiki")])
def test_xml_parses_with_export_schema(language: str, dbname: str) -> None:
    root = ET.fromstring(generate_wiki_xml(10, 0, language))
    assert root.tag == f"{NS}mediawiki"
    assert root.get("version") == "0.10"
    assert root.get("{http://www.w3.org/XML/1998/namespace}lang") == language
    siteinfo = root.find(f"{NS}siteinfo")
    assert siteinfo is not None
    assert siteinfo.findtext(f"{NS}dbname") == dbname
    assert siteinfo.findtext(f"{NS}sitename") == "Wikipedia"
    namespaces = {int(n.get("key")): (n.text or "") for n in siteinfo.find(f"{NS}namespaces")}
    for key, prefix in NS_PREFIX.items():
        assert namespaces[key] + ":" == prefix
    assert namespaces[0] == ""


def test_xml_header_and_escaping(en_xml: str) -> None:
    assert en_xml.startswith('<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/"')
    assert en_xml.endswith("</mediawiki>\n")
    # Markup inside <text> is escaped in the file and restored by the parser.
    assert "&lt;ref" in en_xml and "&amp;nbsp;" in en_xml and "&quot;" in en_xml
    texts = "\n".join(p["text"] for p in _pages(en_xml))
    assert "<ref" in texts and "&nbsp;" in texts and " & " in texts


@pytest.mark.parametrize("language", ["en", "zh"])
@pytest.mark.parametrize("num_articles", [0, 1, 5, 60])
def test_page_counts(language: str, num_articles: int) -> None:
    pages = _pages(generate_wiki_xml(num_articles, 0, language))
    extra = sum(OTHER_NAMESPACE_PAGES.values())
    assert len(pages) == num_articles + 3 + num_redirects(num_articles) + extra
    counts = Counter(p["ns"] for p in pages)
    assert counts[0] == num_articles + 3 + num_redirects(num_articles)
    for ns, expected in OTHER_NAMESPACE_PAGES.items():
        assert counts[ns] == expected
    assert sum(p["redirect"] is not None for p in pages) == num_redirects(num_articles)
    assert len({p["title"] for p in pages}) == len(pages)


def test_default_counts(en_pages: list[dict]) -> None:
    assert len(en_pages) == 79
    assert num_redirects(60) == 6
    assert len(_articles(en_pages)) == 62  # 60 articles, the stub, the disambiguation page


def test_ids_timestamps_and_revision_fields(en_pages: list[dict]) -> None:
    ids = [p["id"] for p in en_pages]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert len({p["rev_id"] for p in en_pages}) == len(en_pages)
    for p in en_pages:
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", p["timestamp"])
        assert p["model"] == "wikitext" and p["format"] == "text/x-wiki"
        elem = p["text_elem"]
        assert elem.get("{http://www.w3.org/XML/1998/namespace}space") == "preserve"
        assert int(elem.get("bytes")) == len(p["text"].encode("utf-8"))


def test_namespaces_match_title_prefixes(en_pages: list[dict], zh_pages: list[dict]) -> None:
    for page in en_pages + zh_pages:
        if page["ns"] == 0:
            assert not any(page["title"].startswith(prefix) for prefix in NS_PREFIX.values())
        else:
            assert page["title"].startswith(NS_PREFIX[page["ns"]])


@pytest.mark.parametrize("language", ["en", "zh"])
def test_redirects_point_at_existing_articles(language: str) -> None:
    pages = _pages(generate_wiki_xml(60, 0, language))
    titles = {p["title"] for p in _articles(pages)}
    redirects = [p for p in pages if p["redirect"] is not None]
    assert redirects
    for page in redirects:
        assert page["ns"] == 0
        assert page["redirect"] in titles
        m = re.match(r"#(?:REDIRECT|redirect|重定向) \[\[([^\]#]+)(#[^\]]*)?\]\]", page["text"])
        assert m, page["text"]
        assert m.group(1) == page["redirect"]


def test_special_articles(en_pages: list[dict], zh_pages: list[dict]) -> None:
    for pages, refer in ((en_pages, "may refer to:"), (zh_pages, "可以指：")):
        ns0 = [p for p in pages if p["ns"] == 0 and p["redirect"] is None]
        empty = [p for p in ns0 if p["text"] == ""]
        assert len(empty) == 1
        assert empty[0]["text_elem"].get("bytes") == "0"
        disambig = [p for p in ns0 if refer in p["text"]]
        assert len(disambig) == 1
        text = disambig[0]["text"]
        assert re.search(r"\{\{disambig(uation)?\}\}", text)
        linked = re.findall(r"^\* \[\[([^\]]+)\]\]", text, flags=re.M)
        assert len(linked) == 3
        assert set(linked) <= {p["title"] for p in ns0}
    stubs = [p for p in _articles(en_pages) if len(p["text"]) < 80 and "may refer" not in p["text"]]
    assert len(stubs) == 1
    stub = mwparserfromhell.parse(stubs[0]["text"]).strip_code()
    assert stub.count(".") == 1 and stub.endswith(".")
    zh_stubs = [p for p in _articles(zh_pages) if len(p["text"]) < 40]
    assert len(zh_stubs) == 1 and zh_stubs[0]["text"].count("。") == 1


# -- wikitext content ----------------------------------------------------------------

EN_CONSTRUCTS = {
    "infobox": r"\{\{Infobox [a-z]",
    "multi-line infobox": r"\{\{Infobox [^\n]*\n\| \w+ +=",
    "convert": r"\{\{convert\|\d+\|km\|mi",
    "cite web in ref": r"<ref( name=\"[^\"]+\")?>\{\{cite web \|url=http",
    "cite book": r"\{\{cite book \|",
    "self-closing named ref": r'<ref name="[^"]+" />',
    "plain wikilink": r"\[\[[^\]|:]+\]\]",
    "piped wikilink": r"\[\[[^\]|:]+\|[^\]]+\]\]",
    "file": r"\[\[File:[^|\]]+\.jpg\|thumb[^\]]*\|",
    "image": r"\[\[Image:[^|\]]+\.jpg\|",
    "category": r"\[\[Category:[^\]]+\]\]",
    "comment": r"<!--.*?-->",
    "bold": r"'''[^']+'''",
    "italic": r"(?<!')''[^']+''(?!')",
    "external link": r"\[https?://[^\s\]]+ [^\]]+\]",
    "small": r"<small>",
    "br": r"<br />",
    "sup": r"<sup>",
    "table": r"\{\| class=\"wikitable[^\n]*\n\|\+ .*?\n\|\}",
    "bullet list": r"\n\* \S",
    "nested bullet": r"\n\*\* \S",
    "nbsp": r"&nbsp;",
    "reflist": r"\{\{[Rr]eflist|<references />",
    "efn": r"\{\{efn\|",
    "notelist": r"\{\{notelist\}\}",
    "sub-section": r"\n=== ?[^=\n]+ ?===\n",
    "short description": r"\{\{Short description\|",
    "hatnote": r"\{\{(Main|See also|Further)\|",
    "abbreviations": r"(Dr\.|U\.S\.|approx\.|e\.g\.|i\.e\.|St\.|c\.) ",
    "quotes": r'"[^"\n]{3,}"',
    "parentheses": r"\([^()\n]{3,}\)",
    "decimal number": r"\b\d+\.\d\b",
}


def test_english_markup_constructs(en_pages: list[dict]) -> None:
    texts = [p["text"] for p in _articles(en_pages)]
    everything = "\n".join(texts)
    missing = [name for name, pattern in EN_CONSTRUCTS.items() if not re.search(pattern, everything, re.S)]
    assert not missing
    for heading in TRAILING_EN:
        assert re.search(rf"\n== ?{heading} ?==\n", everything), heading
    # Constructs are spread over the articles, not piled into one.
    for pattern in (r"<ref", r"\[\[", r"\[\[Category:", r"'''"):
        assert sum(bool(re.search(pattern, t)) for t in texts) > len(texts) // 2, pattern


@pytest.mark.parametrize("language", ["en", "zh"])
def test_one_article_holds_every_construct(language: str) -> None:
    """Even a one-article dump exercises the main markup constructs."""
    (article,) = [p for p in _articles(_pages(generate_wiki_xml(1, 5, language))) if "{{Infobox" in p["text"]]
    text = article["text"]
    for needle in (
        "{{Infobox",
        "{{convert|",
        "{{cite web",
        " />",
        "[[File:",
        "[[Image:",
        "[[Category:",
        "{|",
        "\n* ",
        "[http",
        "{{efn|",
        "{{notelist}}",
        "<br />",
    ):
        assert needle in text, needle
    trailing = TRAILING_EN if language == "en" else TRAILING_ZH
    assert all(re.search(rf"== ?{h} ?==", text) for h in trailing)


def test_article_structure(en_pages: list[dict], zh_pages: list[dict]) -> None:
    for pages, trailing in ((en_pages, TRAILING_EN), (zh_pages, TRAILING_ZH)):
        for page in _articles(pages):
            if len(page["text"]) < 300:  # stub and disambiguation page
                continue
            headings = re.findall(r"^== ?([^=\n]+?) ?==$", page["text"], flags=re.M)
            body = [h for h in headings if h not in trailing]
            assert 2 <= len(body) <= 6, (page["title"], headings)
            assert "[[Category:" in page["text"]


@pytest.mark.parametrize("language", ["en", "zh"])
def test_mwparserfromhell_parses_every_page(language: str) -> None:
    pages = _pages(generate_wiki_xml(60, 0, language))
    for page in pages:
        code = mwparserfromhell.parse(page["text"])
        assert str(code) == page["text"]
    for page in _articles(pages):
        code = mwparserfromhell.parse(page["text"])
        if len(page["text"]) > 300:
            assert code.filter_templates() and code.filter_wikilinks()
        # Well-formed markup: stripping leaves no template, link or tag debris.
        stripped = code.strip_code()
        for debris in ("{{", "}}", "[[", "]]", "<ref", "<!--", "'''"):
            assert debris not in stripped, (page["title"], debris)


@pytest.mark.parametrize("language", ["en", "zh"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_no_unfilled_placeholders(language: str, seed: int) -> None:
    for page in _pages(generate_wiki_xml(60, seed, language)):
        assert not LEFTOVER_PLACEHOLDER.search(page["text"]), (page["title"], page["text"][:200])


def test_chinese_content(zh_pages: list[dict]) -> None:
    articles = [p for p in _articles(zh_pages) if len(p["text"]) > 300]
    everything = "\n".join(p["text"] for p in articles)
    stripped = [mwparserfromhell.parse(p["text"]).strip_code() for p in articles]
    for ender in "。！？":
        assert ender in everything
    for char in "這個國說":
        assert char in everything, char
    for heading in TRAILING_ZH:
        assert re.search(rf"\n== ?{heading} ?==\n", everything), heading
    for needle in ("{{Infobox", "{{convert|", "<ref", "[[File:", "[[Image:", "[[Category:", "{|", "&nbsp;"):
        assert needle in everything, needle
    # The prose is Chinese: mostly CJK characters, hardly any Latin letters.
    prose = "".join(stripped)
    cjk = sum("\u4e00" <= ch <= "\u9fff" for ch in prose)
    latin = sum(ch.isascii() and ch.isalpha() for ch in prose)
    assert cjk > 5 * latin


# -- data files and placeholder dispatch ---------------------------------------------

# Placeholders filled from a fact of the article's subject (set by the generator
# for some kinds only) or from values the caller passes to ``fill``.
SUBJECT_FACTS = {
    "Pos", "pos", "byear", "dyear", "dage", "bdate", "ddate", "bdate_tpl", "ddate_tpl",
    "fyear", "fdate", "genus", "epithet", "family", "common", "binomial", "abbr",
}  # fmt: skip
CALLER_SUPPLIED = {"cat", "catdesc", "parentcat", "tpl_title"}


def _data_strings(obj: object, key: str = "") -> list[tuple[str, str]]:
    """(top-level key, string) for every string of the language data.

    ``org_patterns`` are left out: their ``{base}``, ``{country}`` and ``{dem}``
    are replaced directly, not filled as placeholders.
    """
    if isinstance(obj, str):
        return [(key, obj)]
    if isinstance(obj, dict):
        return [item for k, v in obj.items() if k != "org_patterns" for item in _data_strings(v, key or k)]
    if isinstance(obj, list):
        return [item for v in obj for item in _data_strings(v, key)]
    return []


def _placeholder_names(language: str) -> set[str]:
    """Placeholder names used by a language's templates, without digits and ``_plain``."""
    return {
        name.removesuffix("_plain").rstrip("0123456789")
        for _, text in _data_strings(language_data(language))
        for name in PLACEHOLDER.findall(text)
    }


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_placeholder_has_a_source(language: str) -> None:
    """Each placeholder is a filler of the dispatch table, a vocabulary list of the
    language, a subject fact or a caller-supplied value."""
    vocab = set(language_data(language)["vocab"])
    unknown = _placeholder_names(language) - set(FILLERS) - vocab - SUBJECT_FACTS - CALLER_SUPPLIED
    assert not unknown


def test_dispatch_table_has_no_unused_entries() -> None:
    used = set().union(*(_placeholder_names(language) for language in LANGUAGES))
    assert set(FILLERS) - used == set()


def test_no_placeholder_the_filler_cannot_see() -> None:
    """Every ``{word}`` field in the templates is one that ``PLACEHOLDER`` matches."""
    lookalike = re.compile(r"(?<!\{)\{[A-Za-z_][A-Za-z0-9_]*\}(?!\})")
    invisible = [
        (language, key, field)
        for language in LANGUAGES
        for key, text in _data_strings(language_data(language))
        for field in lookalike.findall(text)
        if not PLACEHOLDER.fullmatch(field)
    ]
    assert not invisible


@pytest.mark.parametrize("language", LANGUAGES)
def test_data_files_are_package_data(language: str) -> None:
    """The word lists load through importlib.resources and are listed as package data."""
    data = language_data(language)
    assert data["code"] == language
    assert language_data(language) is data  # read once
    from conftest import pyproject

    assert "data/*.json" in pyproject()["tool"]["setuptools"]["package-data"]["data_prep.sample_corpus"]


# -- writing files and the command line ---------------------------------------------------


def test_write_plain_and_bz2(tmp_path: Path) -> None:
    expected = generate_wiki_xml(5, 2)
    plain = write_sample_dump(tmp_path / "a" / "b" / "dump.xml", 5, 2)
    assert plain == tmp_path / "a" / "b" / "dump.xml"
    assert plain.read_text(encoding="utf-8") == expected

    packed = write_sample_dump(tmp_path / "dump.xml.bz2", 5, 2)
    raw = packed.read_bytes()
    assert raw[:3] == b"BZh"
    assert bz2.decompress(raw).decode("utf-8") == expected
    with bz2.open(packed, "rt", encoding="utf-8") as fh:
        assert ET.fromstring(fh.read()).tag == f"{NS}mediawiki"

    forced = write_sample_dump(str(tmp_path / "forced.xml"), 5, 2, compress=True)
    assert bz2.decompress(forced.read_bytes()).decode("utf-8") == expected
    unpacked = write_sample_dump(tmp_path / "plain.xml.bz2", 5, 2, compress=False)
    assert unpacked.read_text(encoding="utf-8") == expected


def test_write_is_byte_identical(tmp_path: Path) -> None:
    a = write_sample_dump(tmp_path / "a.xml.bz2", 10, 4, "zh")
    b = write_sample_dump(tmp_path / "b.xml.bz2", 10, 4, "zh")
    assert a.read_bytes() == b.read_bytes()


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match=r"language must be one of \('en', 'zh'\), not 'fr'"):
        generate_wiki_xml(5, 0, "fr")
    with pytest.raises(ValueError, match="num_articles must be between 0 and 50000, not -1"):
        generate_wiki_xml(-1)


def test_main_writes_file(tmp_path: Path) -> None:
    out = tmp_path / "sub" / "zh.xml.bz2"
    assert main([str(out), "--articles", "4", "--seed", "3", "--language", "zh"]) == 0
    assert bz2.decompress(out.read_bytes()).decode("utf-8") == generate_wiki_xml(4, 3, "zh")


def test_main_rejects_bad_language(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main([str(tmp_path / "x.xml"), "--language", "fr"])
    assert "--language: invalid choice: 'fr'" in capsys.readouterr().err
    assert not (tmp_path / "x.xml").exists()


def test_module_cli(tmp_path: Path) -> None:
    out = tmp_path / "cli.xml"
    subprocess.run(
        [sys.executable, "-m", "data_prep.sample_corpus", str(out), "--articles", "3", "--seed", "9"],
        cwd=REPO_ROOT,
        check=True,
        capture_output=True,
    )
    assert out.read_text(encoding="utf-8") == generate_wiki_xml(3, 9, "en")


# -- large dumps ------------------------------------------------------------------


def test_a_dump_larger_than_the_short_names_has_unique_titles() -> None:
    # 800 English articles need more names than 600 one-syllable ones; this raised
    # RuntimeError("ran out of invented names") before names grew a second part.
    pages = _articles(_pages(generate_wiki_xml(800, 0, "en")))
    titles = [p["title"] for p in pages]
    assert len(titles) == len(set(titles)) > 800
    assert any(re.fullmatch(r"[A-Z][a-z]+", t) and len(t) > 9 for t in titles)  # "Varnbelford"


@pytest.mark.parametrize("language", LANGUAGES)
def test_names_grow_longer_once_the_usual_forms_run_out(language: str) -> None:
    import random

    from data_prep.sample_corpus.generator import Generator

    gen = Generator(language_data(language), random.Random(0))
    bases = [gen.new_base() for _ in range(1700)]  # more than 600 (en) and 1,560 (zh) short ones
    people = [gen._new_person_name()[0] for _ in range(7000)]  # more than 3,400 (en) and 6,400 (zh)
    assert len(set(bases)) == len(bases) and len(set(people)) == len(people)
    assert gen.name_syllables == 2 and gen.long_person_names


def test_excluding_draws_what_the_copy_would() -> None:
    import random

    from data_prep.sample_corpus.generator import Excluding

    # random.sample copies populations up to 37 items and indexes larger ones: both paths.
    for size in (1, 2, 5, 36, 40, 300):
        items = list(range(size))
        for skip in ([], [0], [size - 1], [0, size // 2, size - 1]):
            skip = sorted(set(skip))
            if len(skip) >= size:
                continue
            copy = [x for i, x in enumerate(items) if i not in skip]
            view = Excluding(items, skip)
            assert list(view) == copy and len(view) == len(copy)
            a, b = random.Random(size), random.Random(size)
            assert [a.choice(view) for _ in range(20)] == [b.choice(copy) for _ in range(20)]
            k = min(len(copy), 3)
            assert [a.sample(view, k) for _ in range(5)] == [b.sample(copy, k) for _ in range(5)]
    with pytest.raises(IndexError):
        Excluding([1, 2], [0])[1]


def test_too_many_articles_is_refused_with_the_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from data_prep.sample_corpus import MAX_ARTICLES

    with pytest.raises(ValueError, match=f"between 0 and {MAX_ARTICLES}, not {MAX_ARTICLES + 1}"):
        generate_wiki_xml(MAX_ARTICLES + 1)
    with pytest.raises(SystemExit):
        main([str(tmp_path / "x.xml"), "--articles", str(MAX_ARTICLES + 1)])
    assert "different --seed values" in capsys.readouterr().err
    assert not (tmp_path / "x.xml").exists()
