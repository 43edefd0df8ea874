"""clean_wikitext / is_redirect: hand-written wikitext for each construct, then the
real English sample (MediaWiki export of real articles)."""

from __future__ import annotations

import re

import pytest
from conftest_sources_helpers import enwiki_articles

from data_prep.wikitext import blank_plain_list_lines, clean_wikitext, is_redirect


def clean(text: str) -> str:
    """All paragraphs joined by newlines, for substring checks."""
    return "\n".join(clean_wikitext(text))


# ---------------------------------------------------------------- templates


def test_infobox_and_multiline_templates_removed() -> None:
    text = (
        "{{Short description|French novelist}}\n"
        "{{Infobox writer\n"
        "| name        = Jean Dupont\n"
        "| birth_date  = {{birth date|1950|1|1}}\n"
        "| birth_place = [[Paris]], France\n"
        "| occupation  = Novelist\n"
        "}}\n"
        "'''Jean Dupont''' is a French novelist.\n"
        "{{Navbox\n| title = Writers\n| list1 = [[Someone]]\n}}\n"
    )
    assert clean_wikitext(text) == ["Jean Dupont is a French novelist."]


def test_nested_and_citation_templates_removed_inline() -> None:
    text = "He left in 1990.{{citation needed|date=May 2020}} She {{outer|{{inner|x}}|y}}stayed."
    assert clean_wikitext(text) == ["He left in 1990. She stayed."]


def test_convert_rendered_as_running_text() -> None:
    assert clean_wikitext("The trail is {{convert|3|km}} long.") == ["The trail is 3 km long."]
    # only the value and the first unit: the target unit is not text
    assert clean_wikitext("It rose {{convert|5|mi|km|abbr=on}} high.") == ["It rose 5 mi high."]


@pytest.mark.parametrize(
    ("wikitext", "expected"),
    [
        ("She said {{lang|fr|bonjour}} twice.", "She said bonjour twice."),
        ("A {{nowrap|New York}} story.", "A New York story."),
        ("A {{cvt|10|kg}} weight.", "A 10 kg weight."),
    ],
)
def test_inline_text_templates_rendered(wikitext: str, expected: str) -> None:
    assert clean_wikitext(wikitext) == [expected]


# ---------------------------------------------------------------- refs and comments


def test_refs_removed() -> None:
    text = (
        "Paris is large.<ref>{{cite web|url=http://x.org|title=Paris}}</ref> "
        'It is old.<ref name=x /> It is busy.<ref name="y" /> '
        "It is rich.<ref name=\"z\">Smith, ''Cities'',\n p. 3.</ref> The end."
    )
    assert clean_wikitext(text) == ["Paris is large. It is old. It is busy. It is rich. The end."]


def test_references_tag_removed() -> None:
    assert clean_wikitext("Body text.\n\n<references />\n{{reflist}}") == ["Body text."]


def test_comments_removed() -> None:
    text = "Alpha <!-- hidden --> beta.<!-- a comment\nover several\nlines --> Gamma."
    assert clean_wikitext(text) == ["Alpha beta. Gamma."]


def test_unterminated_comment_hides_the_rest() -> None:
    # MediaWiki hides everything after an unclosed comment; so do we.
    assert clean_wikitext("Shown text.\n<!-- never closed\nHidden text.") == ["Shown text."]


# ---------------------------------------------------------------- links


def test_internal_links() -> None:
    text = "A [[Writer|novelist]] from [[Paris]] who likes [[dog]]s and [[New York City|NYC]]."
    assert clean_wikitext(text) == ["A novelist from Paris who likes dogs and NYC."]


@pytest.mark.parametrize(
    "link",
    [
        "[[File:Foo.jpg|thumb|A caption about foo]]",
        "[[Image:Bar.png|thumb|left|200px|A [[nested]] caption]]",
        "[[file:lower case.svg]]",
        "[[Category:French novelists]]",
        "[[Category:French novelists|Dupont, Jean]]",
        "[[de:Jean Dupont]]",
        "[[fr:Jean Dupont]]",
        "[[zh-yue:Jean Dupont]]",
        "[[zh-classical:Jean Dupont]]",
        "[[simple:Jean Dupont]]",
        "[[zh-min-nan:Jean Dupont]]",
    ],
)
def test_non_text_links_dropped(link: str) -> None:
    assert clean_wikitext(f"Before text. {link} After text.") == ["Before text. After text."]


def test_file_link_on_its_own_line_dropped_with_caption() -> None:
    text = "[[File:Map.svg|thumb|upright=1.2|Map of the region, showing [[Paris]]]]\nThe region is flat."
    assert clean_wikitext(text) == ["The region is flat."]


def test_external_links() -> None:
    text = "See [http://example.org the Example site] and [http://bare.example.org] here."
    assert clean_wikitext(text) == ["See the Example site and here."]


# ---------------------------------------------------------------- tables, tags, entities, style


def test_tables_removed() -> None:
    text = (
        "Before the table.\n"
        '{| class="wikitable sortable"\n'
        "|+ Caption text\n"
        "|-\n"
        "! Year !! Title\n"
        "|-\n"
        "| 1990 || [[Some Book]] {{small|note}}\n"
        "|-\n"
        "| 1995 || Other cell\n"
        "|}\n"
        "After the table."
    )
    out = clean_wikitext(text)
    assert out == ["Before the table.", "After the table."]


def test_html_tags_stripped_text_kept() -> None:
    text = (
        'It is <small>quite small</small>, <span style="color:red">red</span>, '
        "<sup>super</sup>, <sub>sub</sub>, <b>bold</b> and <i>italic</i>."
    )
    assert clean_wikitext(text) == ["It is quite small, red, super, sub, bold and italic."]


def test_dropped_tags_lose_their_content() -> None:
    text = "Let <math>x^2 + 1</math> be it.<gallery>\nFile:A.jpg|Caption A\n</gallery> Done."
    assert clean_wikitext(text) == ["Let be it. Done."]


def test_entities_decoded() -> None:
    out = clean_wikitext("Tom&nbsp;Smith &amp; Sons &mdash; est. 1900 &copy; &#233;t&#xE9;.")
    assert out == ["Tom Smith & Sons — est. 1900 © été."]
    assert "\u00a0" not in out[0]  # a non-breaking space becomes a plain space


def test_bold_and_italic_markup_removed() -> None:
    text = "'''Bold''' and ''italic'' and '''''both''''' and ''[[Linked Title|linked]]''."
    assert clean_wikitext(text) == ["Bold and italic and both and linked."]


def test_apostrophes_that_are_not_markup_kept() -> None:
    assert clean_wikitext("Achilles' heel and rock 'n' roll.") == ["Achilles' heel and rock 'n' roll."]


def test_list_lines_dropped() -> None:
    text = (
        "Prose before.\n"
        "* bullet item\n"
        "** nested bullet\n"
        "# numbered item\n"
        ": indented line\n"
        "; term\n"
        "Prose after."
    )
    assert clean_wikitext(text) == ["Prose before.", "Prose after."]


def test_paragraphs_split_on_blank_lines_and_lines_joined() -> None:
    text = "First line\nof the same paragraph.\n\n\nSecond paragraph."
    assert clean_wikitext(text) == ["First line of the same paragraph.", "Second paragraph."]


def test_magic_words_and_leftover_punctuation_tidied() -> None:
    text = "__NOTOC__\n'''Jean''' ({{IPA|ʒɑ̃}}; born 1950) is a writer ( ) indeed ."
    assert clean_wikitext(text) == ["Jean (born 1950) is a writer indeed."]


def test_empty_and_markup_only_input() -> None:
    assert clean_wikitext("") == []
    assert clean_wikitext("{{Infobox}}\n[[Category:X]]\n<!-- c -->\n") == []


# ---------------------------------------------------------------- sections


def test_headings_not_emitted_normal_sections_kept() -> None:
    text = (
        "Intro paragraph.\n"
        "== Early life ==\n"
        "Born in Lyon.\n"
        "=== Education ===\n"
        "Studied in Paris.\n"
        "== Career ==\n"
        "Wrote books."
    )
    out = clean_wikitext(text)
    assert out == ["Intro paragraph.", "Born in Lyon.", "Studied in Paris.", "Wrote books."]
    joined = "\n".join(out)
    for heading in ("Early life", "Education", "Career", "=="):
        assert heading not in joined


def test_heading_ends_a_paragraph() -> None:
    assert clean_wikitext("Line one\n==History==\nLine two") == ["Line one", "Line two"]


@pytest.mark.parametrize(
    "title",
    [
        "References",
        "External links",
        "See also",
        "Further reading",
        "Notes",
        "Bibliography",
        "REFERENCES",
        "参考文献",
        "外部链接",
        "参见",
        "參考資料",
    ],
)
def test_trailing_sections_dropped(title: str) -> None:
    text = (
        "Intro prose.\n"
        "== History ==\n"
        "History prose.\n"
        f"== {title} ==\n"
        "Dropped prose one.\n"
        "=== A subsection ===\n"
        "Dropped prose two.\n"
        "* [http://x.org A link]\n"
    )
    out = clean_wikitext(text)
    assert out == ["Intro prose.", "History prose."]


def test_normal_section_after_dropped_section_kept() -> None:
    text = (
        "Intro.\n"
        "== See also ==\n"
        "See-also prose.\n"
        "== Legacy ==\n"
        "Legacy prose.\n"
        "==References==\n"
        "Reference prose.\n"
        "==External links==\n"
        "Link prose."
    )
    assert clean_wikitext(text) == ["Intro.", "Legacy prose."]


def test_dropped_subsection_ends_at_sibling_heading() -> None:
    text = (
        "Intro.\n"
        "== Works ==\n"
        "Works prose.\n"
        "=== Notes ===\n"
        "Notes prose.\n"
        "=== Novels ===\n"
        "Novel prose.\n"
        "== Later ==\n"
        "Later prose."
    )
    assert clean_wikitext(text) == ["Intro.", "Works prose.", "Novel prose.", "Later prose."]


def test_chinese_article() -> None:
    text = (
        "'''北京'''是[[中华人民共和国]]的[[首都]]。<ref>来源</ref>\n"
        "== 历史 ==\n"
        "北京历史悠久。\n"
        "== 参见 ==\n"
        "参见文字。\n"
        "== 参考文献 ==\n"
        "参考文字。\n"
        "== 外部链接 ==\n"
        "外部文字。\n"
        "[[分类:首都]]\n"
    )
    assert clean_wikitext(text) == ["北京是中华人民共和国的首都。", "北京历史悠久。"]


# ---------------------------------------------------------------- is_redirect


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("#REDIRECT [[Target]]", True),
        ("#redirect [[Target]]", True),
        ("  #Redirect[[Target]] {{R from move}}", True),
        ("\n#REDIRECT [[Target#Section]]", True),
        ("#重定向 [[目标]]", True),
        ("Text first.\n#REDIRECT [[Target]]", False),
        ("#REDIRECTION is a word", False),
        ("# a numbered list item", False),
        ("", False),
    ],
)
def test_is_redirect(text: str, expected: bool) -> None:
    assert is_redirect(text) is expected


# ---------------------------------------------------------------- real pages

# Markup that must not survive cleaning.
REMNANTS = ("{{", "}}", "[[", "]]", "<ref", "</", "{|", "|}", "'''", "==")


@pytest.fixture(scope="module")
def cleaned_articles() -> dict[str, list[str]]:
    articles = enwiki_articles()
    assert len(articles) == 106
    return {page.title: clean_wikitext(page.text) for page in articles}


def _remnants(cleaned: dict[str, list[str]]) -> dict[str, int]:
    found: dict[str, int] = {}
    for paragraphs in cleaned.values():
        text = "\n".join(paragraphs)
        for marker in REMNANTS:
            found[marker] = found.get(marker, 0) + text.count(marker)
    return {marker: n for marker, n in found.items() if n}


def test_real_articles_clean_within_budget(cleaned_articles: dict[str, list[str]]) -> None:
    # Template, ref, table and heading markup never survives; a handful of bold/italic
    # or link remnants come from parser mis-pairings of unbalanced quotes (see the
    # strict xfail tests below) and are bounded here so a regression shows.
    found = _remnants(cleaned_articles)
    for marker in ("{{", "}}", "<ref", "</", "{|", "|}", "=="):
        assert marker not in found, (marker, found)
    assert sum(found.values()) <= 5, found
    assert found.get("[[", 0) <= 1 and found.get("]]", 0) <= 1, found
    # and no raw markup at all in the overwhelming majority of articles
    dirty = [t for t, ps in cleaned_articles.items() if any(m in "\n".join(ps) for m in REMNANTS)]
    assert len(dirty) <= 3, dirty


def test_real_articles_have_no_markup_remnants(cleaned_articles: dict[str, list[str]]) -> None:
    assert _remnants(cleaned_articles) == {}


def test_real_articles_give_prose(cleaned_articles: dict[str, list[str]]) -> None:
    with_text = [t for t, ps in cleaned_articles.items() if ps]
    assert len(with_text) >= 100
    total = sum(len(p) for ps in cleaned_articles.values() for p in ps)
    assert total > 1_000_000  # most of the 6 MB of wikitext is prose
    for paragraphs in cleaned_articles.values():
        for paragraph in paragraphs:
            assert paragraph == paragraph.strip() and paragraph
            assert "\n" not in paragraph and "  " not in paragraph
            assert not re.match(r"[*#:;]", paragraph)  # no list line survived
            assert "&nbsp;" not in paragraph and "&amp;" not in paragraph


def test_real_anarchism_first_paragraph(cleaned_articles: dict[str, list[str]]) -> None:
    paragraphs = cleaned_articles["Anarchism"]
    assert paragraphs[0].startswith("Anarchism is a political philosophy")
    assert len(paragraphs) > 30
    joined = "\n".join(paragraphs)
    # section bodies are kept, their headings are not
    assert "Mutualism" in joined
    assert not any(p in ("History", "Etymology and terminology", "Criticisms") for p in paragraphs)


_DROPPED_HEADING = re.compile(
    r"^(=+)\s*(References|External links|See also|Further reading|Notes)\s*(=+)\s*$", re.MULTILINE
)


def test_real_dropped_sections_absent(cleaned_articles: dict[str, list[str]]) -> None:
    """Renaming the dropped headings (so their sections count as prose) brings back
    paragraphs that the real cleaning leaves out."""
    articles = {page.title: page for page in enwiki_articles()}
    brought_back = 0
    for title, cleaned in cleaned_articles.items():
        text = articles[title].text
        if not _DROPPED_HEADING.search(text):
            continue
        renamed = _DROPPED_HEADING.sub(lambda m: f"{m[1]} Renamed {m[2]} {m[3]}", text)
        with_sections = clean_wikitext(renamed)
        extra = [p for p in with_sections if p not in cleaned]
        brought_back += len(extra)
        for paragraph in extra:
            if len(paragraph) >= 40:  # long enough not to occur by chance inside prose
                assert paragraph not in "\n".join(cleaned), (title, paragraph)
        # the renamed sections only add paragraphs: the kept ones are unchanged
        assert [p for p in with_sections if p in cleaned] == cleaned
    assert brought_back >= 10


def test_real_dropped_section_text_examples(cleaned_articles: dict[str, list[str]]) -> None:
    joined = "\n".join(cleaned_articles["Aristotle"])
    assert "The following references are only a small selection" not in joined
    assert "Aristotle" in joined


# ---------------------------------------------------------------- regressions


def test_italic_followed_by_apostrophe_s() -> None:
    assert clean_wikitext("the ''Iliad'''s story and ''X''") == ["the Iliad's story and X"]


def test_file_caption_with_unbalanced_bold() -> None:
    text = "[[File:S.svg|thumb|A '''b'' c]]\nSome '''d''' text."
    assert clean_wikitext(text) == ["Some d text."]


def test_wiktionary_link_text_kept() -> None:
    text = "A great [[wikt:brigand|brigand]] becomes a ruler. Workers' [[wiktionary:solidarity|solidarity]]."
    assert clean_wikitext(text) == ["A great brigand becomes a ruler. Workers' solidarity."]


def test_real_wiktionary_link_text_kept(cleaned_articles: dict[str, list[str]]) -> None:
    joined = "\n".join(cleaned_articles["Anarchism"])
    assert "A great brigand becomes a ruler of a Nation." in joined
    assert "Workers' solidarity, Direct action and Workers' self-management" in joined


def test_escaped_angle_brackets_kept_as_text() -> None:
    assert clean_wikitext("The type List&lt;T&gt; is generic.") == ["The type List<T> is generic."]


def test_tables_are_removed_before_parsing() -> None:
    from data_prep.wikitext import strip_tables

    text = "Before.\n{| class=x\n|-\n| a || b\n{|\n| nested\n|}\n|}\nAfter.\n{|\n| never closed\n"
    assert strip_tables(text) == "Before.\n\nAfter.\n{|\n| never closed\n"
    assert strip_tables("no table {| here\n") == "no table {| here\n"  # {| only counts at a line start


def test_plain_links_are_resolved_before_parsing() -> None:
    from data_prep.wikitext import resolve_simple_links

    assert resolve_simple_links("[[Paris]] and [[Lyon|the city]] [[a|]]") == "Paris and the city "
    assert resolve_simple_links("[[Category:Towns]][[fr:Paris]][[:Category:X|x]]") == ""
    assert resolve_simple_links("[[wikt:word|word]]") == "word"
    # anything with markup inside is left to the parser
    for kept in ("[[a|''b'']]x".replace("''", "<b>"), "[[a|b|c]]", "[[a|{{b}}]]", "[[[a]]]", "[[a&amp;b]]"):
        assert resolve_simple_links(kept) == kept


@pytest.fixture(scope="module")
def sample_pages(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The wikitext of every article of the real English sample and of a generated dump."""
    from conftest import REAL_EN_DUMP

    from data_prep.inputs import plan_work_units
    from data_prep.sample_corpus import write_sample_dump
    from data_prep.sources import read_records

    generated = tmp_path_factory.mktemp("wikitext") / "enwiki-generated.xml.bz2"
    write_sample_dump(str(generated), num_articles=120)
    pages = [record.text for path in (REAL_EN_DUMP, generated)
             for unit in plan_work_units([str(path)], "wiki-xml", True, 8 << 20)
             for record in read_records(unit, lambda kind: None, None)
             if record.namespace == 0 and not record.redirect]
    assert len(pages) > 200
    return pages


def test_pre_passes_change_the_cost_not_the_output(sample_pages: list[str]) -> None:
    """On every article of the real English sample and a generated dump, the
    paragraphs equal those of parsing everything."""
    pages = sample_pages
    assert sum(page.count("{|") for page in pages) > 50 and sum(page.count("[[") for page in pages) > 20_000
    assert sum(page.count("\n*") for page in pages) > 5_000  # list lines, blanked before parsing
    for page in pages:
        assert clean_wikitext(page) == clean_wikitext(page, parse_all=True)


def _renders_from_tokens(source: str) -> bool:
    """Whether the token walk renders ``source`` itself (no fall-back to the tree)."""
    from data_prep.wikitext import _TokenRenderer, _TreeNeeded, tokenize_wikitext

    try:
        _TokenRenderer(tokenize_wikitext(source)).document()
    except _TreeNeeded:
        return False
    return True


def test_tokens_render_as_the_node_tree(sample_pages: list[str]) -> None:
    """Rendering from the tokenizer's tokens gives the text of rendering the builder's
    node tree, on every real and generated article, with and without the pre-passes
    (which leave tables, links and lists to the parser)."""
    from data_prep.wikitext import pre_parse, render_wikitext

    from_tokens = 0
    for page in sample_pages:
        for parse_all in (False, True):
            source = pre_parse(page, parse_all)
            assert render_wikitext(source) == render_wikitext(source, tree=True)
            from_tokens += _renders_from_tokens(source)
    assert from_tokens == 2 * len(sample_pages)  # link titles with entities included


# Pieces of markup that open, close and nest every construct the renderer handles,
# unbalanced too, for random wikitext.
_MARKUP_PIECES = (
    "{{", "}}", "[[", "]]", "|", "=", "<ref>", "</ref>", "<br/>", "<br>", "<b>", "</b>", '<span class="x">', "</span>",
    "<div style={{x}}>", "</div>", "&nbsp;", "&#233;", "&#xE9;", "&amp", "\n", "\n\n", "==", "=== ", "'''", "''",
    "[http://x.org ", "[//y.org]", "]", "http://z.net/a ", "{{{", "}}}", "<!--", "-->", "\n* ", "\n:", "\n;", "\n#",
    "File:", "Category:", "fr:", ":", "convert", "lang", "nowrap", "zh", "Notes", "References", "{|", "|}", "|-",
    "<li>", "</li>", "----", "<table>", "</table>", "<nowiki>", "</nowiki>", "<small>", "</small>", "<p>", " ", "  ",
    "a", "word", "Ünï", "中文", "{{#if:", "<ref name=x/>", "__NOTOC__", "<math>", "</math>", "<gallery>", "\n{|",
    "\n|}", "<", ">", "/>",
)


def test_tokens_render_as_the_node_tree_on_random_markup() -> None:
    import random

    from data_prep.wikitext import pre_parse, render_wikitext

    rng = random.Random(0)
    from_tokens = 0
    for _ in range(3000):
        text = "".join(rng.choice(_MARKUP_PIECES) for _ in range(rng.randint(0, 30)))
        for source in (text, pre_parse(text)):
            assert render_wikitext(source) == render_wikitext(source, tree=True), source
            from_tokens += _renders_from_tokens(source)
    assert from_tokens > 5900  # the tree is the exception


def test_the_pure_python_tokenizer_where_mwparserfromhell_has_no_c_extension(
        monkeypatch: pytest.MonkeyPatch, sample_pages: list[str]) -> None:
    """Without the C tokenizer (``use_c`` off, as mwparserfromhell sets it when its
    extension does not import), cleaning goes through the Python one, and gives the
    same paragraphs."""
    from mwparserfromhell import parser as mw_parser

    from data_prep.wikitext import PythonTokenizer

    calls: list[str] = []
    python_tokenize = PythonTokenizer.tokenize

    def counted(self: PythonTokenizer, *args: object) -> list:
        calls.append("python")
        return python_tokenize(self, *args)

    monkeypatch.setattr(PythonTokenizer, "tokenize", counted)
    pages = sample_pages[-3:]  # generated articles, short: the Python tokenizer is slow
    with_c = [clean_wikitext(page) for page in pages]
    assert mw_parser.use_c and calls == []  # the C tokenizer by default
    monkeypatch.setattr(mw_parser, "use_c", False)
    assert [clean_wikitext(page) for page in pages] == with_c
    assert len(calls) == len(pages)


def test_markup_in_a_link_title_falls_back_to_the_node_tree() -> None:
    from data_prep.wikitext import render_wikitext

    source = "Before [[a{{b}}c|shown]] and [[{{x}}|y]] after."
    assert not _renders_from_tokens(source)
    assert render_wikitext(source) == render_wikitext(source, tree=True) == "Before shown and y after."
    assert _renders_from_tokens("[[a&nbsp;b|shown]]")  # an entity is its own source


def test_blank_plain_list_lines() -> None:
    text = "Intro.\n* item one\n# numbered\n: indented\n; term\n*{{lang|fr|x}}\n* [[A|b]] c\n* <b>x</b>\nEnd."
    assert blank_plain_list_lines(text) == "Intro.\n\n\n\n\n*{{lang|fr|x}}\n* [[A|b]] c\n* <b>x</b>\nEnd."
    # the paragraphs are those of parsing the lists
    page = "First line.\n* a list\n*# nested\nSecond paragraph.\n: quote\nThird."
    assert clean_wikitext(page) == clean_wikitext(page, parse_all=True) == [
        "First line.", "Second paragraph.", "Third."]


def test_faster_regexes_match_the_plain_ones() -> None:
    """Patterns rewritten so the regex engine can search for a literal (or skip the
    no-op single space) replace exactly what the plain patterns replace."""
    import random
    import re

    from data_prep import sentences, wikitext

    plain = {
        wikitext._SPACES: (re.compile(r"[ \t\u00a0\u2009\u200b]+"), " "),
        sentences._SPACE: (re.compile(r"\s+"), " "),
        wikitext._POSSESSIVE_AFTER_STYLE: (re.compile(r"(?<=\w)'''(?=s\b)"), "'"),
        wikitext._STYLE_QUOTES: (re.compile(r"'{2,}"), ""),
        wikitext._SIMPLE_LINK: (re.compile(r"(?<!\[)\[\[([^\[\]{}|<>&\n]+)(?:\|([^\[\]{}|<>&\n]*))?\]\](?!\])"),
                                wikitext._simple_link_text),
    }
    alphabet = [" ", " ", "\t", "\u00a0", "\u2009", "\u200b", "\n", "\u3000", "a", "s", "'", "'", "[", "[",
                "]", "]", "|", "{", "é"]
    rng = random.Random(0)
    for _ in range(40_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14)))
        for fast, (slow, replacement) in plain.items():
            assert fast.sub(replacement, text) == slow.sub(replacement, text), (fast.pattern, text)
    # <ref>s and comments, from pieces of their markup
    slow = re.compile(r"<!--.*?(?:-->|$)|<ref\b[^>]*/>|<ref\b[^>/]*>(?:(?!</?ref\b).)*?</ref\s*>",
                      re.DOTALL | re.IGNORECASE)
    pieces = ["<ref", "<REF", "</ref", "</Ref", ">", "/>", " ", "\n", "a", "<", "/", "-", " name=x", "s", "</ref >",
              "<!--", "-->", "<references/>", "<b>", "</b>", "<refx>"]
    for _ in range(40_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        assert wikitext._PRE_STRIP.sub("", text) == slow.sub("", text), text


def test_tidy_equals_the_plain_five_substitutions() -> None:
    """_tidy skips substitutions that cannot match; the result must be what running
    all five gives."""
    import random

    from data_prep import wikitext

    def plain(paragraph: str) -> str:
        paragraph = wikitext._SPACES.sub(" ", paragraph)
        paragraph = wikitext._PAREN_LEADING_PUNCT.sub(r"\1", paragraph)
        paragraph = wikitext._EMPTY_PARENS.sub("", paragraph)
        paragraph = wikitext._SPACE_BEFORE_PUNCT.sub(r"\1", paragraph)
        return wikitext._SPACES.sub(" ", paragraph).strip()

    alphabet = [" ", " ", "\t", "\u00a0", "\u2009", "\u200b", "\u3000", "(", ")", "（", "）", ",", ";", "、", ":", ".", "a", "b"]
    rng = random.Random(1)
    for _ in range(40_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14)))
        assert wikitext._tidy(text) == plain(text), text
