"""Wiki markup → plain paragraphs, with mwparserfromhell as the wikitext parser.

What is kept: running text, the visible text of links and of formatting tags
(bold, italic, ``<small>``...). What is dropped: templates (infoboxes, citations,
navboxes; a few inline templates that carry running text are rendered), ``<ref>``,
tables, galleries, math, files/images, categories, interlanguage links, comments,
headings, lists, and whole sections that are not prose (References, External
links, See also, Further reading, Notes and their Chinese counterparts).
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from typing import TypeVar

from mwparserfromhell import parser as mw_parser
from mwparserfromhell.nodes import (
    Argument,
    Comment,
    ExternalLink,
    Heading,
    HTMLEntity,
    Node,
    Tag,
    Template,
    Text,
    Wikilink,
)
from mwparserfromhell.parser import tokens as wt
from mwparserfromhell.parser.builder import Builder
from mwparserfromhell.parser.tokenizer import Tokenizer as PythonTokenizer

# Section titles (lower-cased) whose whole section is dropped.
DROPPED_SECTIONS = frozenset(
    {
        "references", "reference", "external links", "external link", "see also",
        "further reading", "notes", "notes and references", "footnotes", "citations",
        "sources", "bibliography", "works cited", "related pages", "gallery",
        "参考文献", "参考资料", "参考來源", "参考来源", "參考文獻", "參考資料", "外部链接",
        "外部連結", "外部連接", "参见", "參見", "参看", "注释", "註釋", "脚注", "腳註",
        "延伸阅读", "延伸閱讀", "相关条目", "相關條目", "扩展阅读", "擴展閱讀", "注解", "資料來源",
    }
)

# Link namespaces that are not running text (English and Chinese names).
# Wiktionary links ([[wikt:word|word]]) are inline text, so they are not listed.
_FILE_NAMESPACES = r"file|image|media|文件|檔案|档案|图像|圖像|图片|圖片"
_NON_TEXT_LINK = re.compile(
    rf"^\s*:?\s*({_FILE_NAMESPACES}|category|分类|分類|simple|[a-z]{{2,3}}(?:-[a-z]+)*)\s*:",
    re.IGNORECASE,
)
_FILE_LINK_START = re.compile(rf"\[\[\s*:?\s*(?:{_FILE_NAMESPACES})\s*:", re.IGNORECASE)
_DROPPED_TAGS = frozenset(
    {"ref", "references", "table", "gallery", "math", "chem", "ce", "score", "timeline",
     "syntaxhighlight", "source", "code", "pre", "imagemap", "graph", "mapframe",
     "templatedata", "noinclude", "hiero", "poem", "nowiki", "del", "s", "strike"}
)
_LINE_BREAK_TAGS = frozenset({"br", "p", "div", "li", "dd", "dt", "hr", "tr", "blockquote"})
# Inline templates whose first arguments are running text.
_TEXT_TEMPLATES = {
    "convert": 2, "cvt": 2, "lang": -1, "nowrap": 1, "nobr": 1, "nihongo": 1,
    "transl": -1, "ill": 1, "interlanguage link": 1, "visible anchor": 1, "vanchor": 1,
    "bda": 0, "abbr": 1, "sic": 1, "val": 1, "zh": 0,
}
_MAGIC_WORD = re.compile(r"__[A-Z]+__")
# Removed before parsing: comments and <ref>s. Beside saving a third of the parse
# time, it keeps a citation with unbalanced markup inside from derailing the parser,
# which then leaves the rest of the paragraph as raw markup. A <ref>'s body is text
# up to the first <ref or </ref, which must be its </ref>: written as runs of
# non-"<" characters taken whole (possessive), the same as the plain
# ``(?:(?!</?ref\b).)*?`` (tested), which checks a lookahead at every character.
_PRE_STRIP = re.compile(
    r"<!--.*?(?:-->|$)|<ref\b[^>]*/>|<ref\b[^>/]*>[^<]*+(?:<(?!/?ref\b)[^<]*+)*+</ref\s*>",
    re.DOTALL | re.IGNORECASE,
)
_LEFTOVER_TAG = re.compile(r"</?[a-zA-Z][a-zA-Z0-9]*\b[^<>]*>")
# Bold/italic quote runs the parser could not pair (''Iliad'''s is italic + 's).
# (Lookarounds after the literal quotes, so the regex engine can search for them.)
_POSSESSIVE_AFTER_STYLE = re.compile(r"'''(?<=\w''')(?=s\b)")
# (Two literal quotes first, which the regex engine searches for: four times faster.)
_STYLE_QUOTES = re.compile(r"''+")
_EMPTY_PARENS = re.compile(r"[(（]\s*[,;，；、:：]?\s*[)）]")
_PAREN_LEADING_PUNCT = re.compile(r"([(（])\s*[,;，；、]\s*")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([,.;:!?，。；：！？)）])")
# Runs of spaces, tabs and invisible spaces, but not a lone plain space (replacing
# it by itself is a no-op, and there is one between every two words).
_SPACES = re.compile(r"[\t\u00a0\u2009\u200b][ \t\u00a0\u2009\u200b]*| [ \t\u00a0\u2009\u200b]+")
_NOT_PROSE_LINE = re.compile(r"^\s*([*#:;|!]|\{\||\|\}|=)")


# -- the rules, shared by the two renderers (the node tree's and the tokens') ----------------------------------

_T = TypeVar("_T")


def _text_arguments(name: str, positional: list[_T]) -> list[_T]:
    """The positional arguments of template ``name`` (its source text) that are running
    text: none for a template that is not inline text (an infobox, a citation)."""
    count = _TEXT_TEMPLATES.get(name.strip().lower().replace("_", " "), 0)
    if count == -1:  # {{lang|fr|texte}}: the text is the last positional argument
        return positional[-1:]
    return positional[:count]


def _tag_text(name: str, list_marker: str | None, contents: Callable[[], str]) -> str:
    """What a tag leaves of its ``contents`` (rendered when needed): nothing for a
    dropped tag, the wiki list marker (``*``, ``#``, ``;``...) of a list item, so that
    the line is recognised and dropped later, the contents on a line of their own for a
    block tag."""
    tag = name.strip().lower()
    if tag in _DROPPED_TAGS:
        return ""
    if list_marker and tag in ("li", "dt", "dd"):
        return list_marker
    if tag in _LINE_BREAK_TAGS:
        return "\n" + contents() + "\n"
    return contents()


class _Sections:
    """Which parts of an article are in a dropped section (:data:`DROPPED_SECTIONS`),
    fed its headings in order: a dropped section runs to the next heading of the
    same or a higher level."""

    def __init__(self) -> None:
        self.dropping_level: int | None = None

    @property
    def dropping(self) -> bool:
        """Whether what follows the last heading is left out."""
        return self.dropping_level is not None

    def heading(self, level: int, title: str) -> str:
        """What a heading of ``level`` with rendered ``title`` leaves in the text: a
        paragraph break where its section is kept, nothing where it is dropped."""
        if self.dropping_level is not None and level <= self.dropping_level:
            self.dropping_level = None
        if self.dropping_level is None and title.strip().strip(":：").lower() in DROPPED_SECTIONS:
            self.dropping_level = level
        return "" if self.dropping else "\n\n"


# -- the node tree's renderer -----------------------------------------------------------------------------------

def _render_template(template: Template) -> str:
    positional = [p for p in template.params if not p.showkey]
    return " ".join(_render(p.value.nodes).strip() for p in _text_arguments(str(template.name), positional))


def _render(nodes: list[Node]) -> str:
    parts: list[str] = []
    for node in nodes:
        if isinstance(node, Text):
            parts.append(str(node.value))
        elif isinstance(node, Wikilink):
            title = str(node.title)
            if _NON_TEXT_LINK.match(title):
                continue
            shown = node.text if node.text is not None else node.title
            parts.append(_render(shown.nodes))
        elif isinstance(node, ExternalLink):
            if node.title is not None:
                parts.append(_render(node.title.nodes))
        elif isinstance(node, HTMLEntity):
            # Decoded once, after leftover tags are removed, so &lt;T&gt; stays text.
            parts.append(str(node))
        elif isinstance(node, Tag):
            parts.append(_tag_text(str(node.tag), node.wiki_markup and str(node.wiki_markup),
                                   lambda inside=node.contents: "" if inside is None else _render(inside.nodes)))
        elif isinstance(node, Template):
            parts.append(_render_template(node))
        elif isinstance(node, (Comment, Argument, Heading)):
            continue
        # Other nodes (parser functions are Templates; nothing else carries text).
    return "".join(parts)


def _sections(nodes: list[Node]) -> list[list[Node]]:
    """Top-level nodes minus the nodes of dropped sections (a dropped section runs
    to the next heading of the same or a higher level)."""
    kept: list[Node] = []
    sections = _Sections()
    for node in nodes:
        if isinstance(node, Heading):
            if paragraph_break := sections.heading(node.level, _render(node.title.nodes)):
                kept.append(Text(paragraph_break))
        elif not sections.dropping:
            kept.append(node)
    return [kept]


_LINK_BRACKETS = re.compile(r"\[\[|\]\]")


def strip_file_links(wikitext: str) -> str:
    """Remove ``[[File:…]]``/``[[Image:…]]`` links, nested links in their captions
    included. Done before parsing: a caption with unbalanced bold/italic quotes
    otherwise pairs with quotes on later lines and the parser gives up on both."""
    out: list[str] = []
    position = 0
    for match in _FILE_LINK_START.finditer(wikitext):
        if match.start() < position:
            continue  # inside a link already removed
        depth = 0
        index = len(wikitext)  # an unclosed link runs to the end
        for bracket in _LINK_BRACKETS.finditer(wikitext, match.start()):
            depth += 1 if bracket.group() == "[[" else -1
            if depth == 0:
                index = bracket.end()
                break
        out.append(wikitext[position : match.start()])
        position = index
    out.append(wikitext[position:])
    return "".join(out)


_BRACES = re.compile(r"\{\{|\}\}")
_TEMPLATE_NAME = re.compile(r"[^|{}<\n]*")


def strip_dropped_templates(wikitext: str) -> str:
    """Remove the templates that would be dropped anyway (all but the few in
    ``_TEXT_TEMPLATES``), nested ones included, before parsing. Infoboxes, citations
    and navboxes are most of an article's markup; building parser nodes for their
    parameters is most of the parse time. An unclosed ``{{`` is left to the parser."""
    out: list[str] = []
    position = 0
    search_from = 0
    while True:
        start = wikitext.find("{{", search_from)
        if start < 0:
            break
        name = _TEMPLATE_NAME.match(wikitext, start + 2).group().strip().lower().replace("_", " ")
        if name in _TEXT_TEMPLATES:
            search_from = start + 2
            continue
        depth = 0
        end = -1
        for brace in _BRACES.finditer(wikitext, start):
            depth += 1 if brace.group() == "{{" else -1
            if depth == 0:
                end = brace.end()
                break
        if end < 0:
            break
        out.append(wikitext[position:start])
        position = search_from = end
    out.append(wikitext[position:])
    return "".join(out)


_TABLE_EDGE = re.compile(r"^[ \t]*(\{\||\|\})", re.MULTILINE)


def strip_tables(wikitext: str) -> str:
    """Remove wiki tables (``{|`` … ``|}`` at line starts, nested ones included),
    which are dropped anyway, before parsing: their cells are most of the parser's
    tag nodes. An unclosed table is left to the parser."""
    out: list[str] = []
    position = depth = start = 0
    for edge in _TABLE_EDGE.finditer(wikitext):
        if edge.group(1) == "{|":
            if depth == 0:
                start = edge.start(1)
            depth += 1
        elif depth > 0:
            depth -= 1
            if depth == 0:
                out.append(wikitext[position:start])
                position = edge.end(1)
    out.append(wikitext[position:])
    return "".join(out)


# [[Target]] and [[Target|label]] with nothing inside that the parser would read as
# markup (no brackets, braces, pipes beyond one, tags, entities or line breaks).
# (The lookbehind follows the literal brackets, so the regex engine can search for them.)
_SIMPLE_LINK = re.compile(r"\[\[(?<!\[\[\[)([^\[\]{}|<>&\n]+)(?:\|([^\[\]{}|<>&\n]*))?\]\](?!\])")


def _simple_link_text(link: re.Match[str]) -> str:
    title, label = link.group(1), link.group(2)
    if _NON_TEXT_LINK.match(title):
        return ""
    return label if label is not None else title


def resolve_simple_links(wikitext: str) -> str:
    """Replace plain wikilinks by their visible text, as :func:`_render` would,
    before parsing (an article has hundreds; each is several parser nodes). Links
    with markup inside are left to the parser."""
    return _SIMPLE_LINK.sub(_simple_link_text, wikitext)


# A list, indent or definition line (``* …``, ``# …``, ``: …``, ``; …``) with nothing
# on it that could open or close markup spanning lines.
_PLAIN_LIST_LINE = re.compile(r"^[*#:;][^\n{}\[\]<>]*$", re.MULTILINE)


def blank_plain_list_lines(wikitext: str) -> str:
    """Empty the list lines that hold no markup, before parsing. Each would become
    a list-item tag node whose rendered line is dropped as not prose (the marker is
    kept for that), ending the paragraph, which an empty line does the same way.
    On the real English sample they were 40% of the parser's tokens."""
    return _PLAIN_LIST_LINE.sub("", wikitext)


class _TreeNeeded(Exception):
    """A construct :class:`_TokenRenderer` leaves to the node tree: markup inside a
    link's title, a tag's name or a template's name (whose source text the tree
    keeps), or tokens out of the order the tree builder expects."""


class _TokenRenderer:
    """The rendering of :func:`_render` and :func:`_sections`, read straight from the
    tokenizer's tokens instead of the node tree that mwparserfromhell's builder makes
    of them. The builder creates a node, a node list and a wrapper per token, which
    was two thirds of the parse time (6 µs a token on the English sample); this walk
    mirrors the builder's handling of each token, renders every node as :func:`_render`
    does, and makes no nodes. What it cannot render without the tree's source text
    raises :class:`_TreeNeeded` (see :func:`render_wikitext`)."""

    def __init__(self, tokens: list[wt.Token]) -> None:
        self.tokens = tokens
        self.at = 0

    def _collect(self, stops: tuple[type, ...]) -> tuple[str, bool, wt.Token]:
        """The rendering of the nodes up to the next token of a type in ``stops``,
        whether it is their source text (text and entities only), and that token
        (consumed)."""
        tokens = self.tokens
        parts: list[str] = []
        plain = True
        while True:
            if self.at >= len(tokens):
                raise _TreeNeeded("a construct is not closed")
            token = tokens[self.at]
            self.at += 1
            kind = type(token)
            if kind is wt.Text:
                parts.append(token.text)
            elif kind is wt.HTMLEntityStart:  # rendered as its source
                parts.append(self._entity(token))
            elif kind in stops:
                return "".join(parts), plain, token
            else:
                plain = False
                parts.append(self._node(token, kind))

    def _node(self, token: wt.Token, kind: type) -> str:
        handler = _TOKEN_HANDLERS.get(kind)
        if handler is None:
            raise _TreeNeeded(f"unexpected {kind.__name__}")
        return handler(self, token)

    def document(self) -> str:
        """The article's rendering, dropped sections left out (:func:`_sections`)."""
        tokens = self.tokens
        kept: list[str] = []
        sections = _Sections()
        while self.at < len(tokens):
            token = tokens[self.at]
            self.at += 1
            kind = type(token)
            if kind is wt.HeadingStart:
                kept.append(sections.heading(token.level, self._collect((wt.HeadingEnd,))[0]))
                continue
            piece = token.text if kind is wt.Text else self._node(token, kind)  # consumed even where dropped
            if not sections.dropping:
                kept.append(piece)
        return "".join(kept)

    def _template(self, _: wt.Token) -> str:
        name, name_plain, token = self._collect(_TEMPLATE_NAME_STOPS)
        positional: list[str] = []  # the rendered values of the parameters without a key
        while type(token) is wt.TemplateParamSeparator:
            showkey = False
            while True:  # the value is what follows the (last) "="
                value, _, token = self._collect(_TEMPLATE_PARAM_STOPS)
                if type(token) is not wt.TemplateParamEquals:
                    break
                showkey = True
            if not showkey:
                positional.append(value)
        if not name_plain:
            raise _TreeNeeded("markup in a template name")
        return " ".join(value.strip() for value in _text_arguments(name, positional))

    def _argument(self, _: wt.Token) -> str:
        while type(self._collect(_ARGUMENT_STOPS)[2]) is not wt.ArgumentClose:
            pass
        return ""

    def _wikilink(self, _: wt.Token) -> str:
        title: tuple[str, bool] | None = None
        while True:
            shown, plain, token = self._collect(_WIKILINK_STOPS)
            if type(token) is wt.WikilinkSeparator:
                title = (shown, plain)
                continue
            if title is None:
                title, text = (shown, plain), None
            else:
                text = shown
            break
        source, plain = title
        if not plain:
            raise _TreeNeeded("markup in a link title")
        if _NON_TEXT_LINK.match(source):
            return ""
        return text if text is not None else source

    def _external_link(self, _: wt.Token) -> str:
        separated = False
        while True:
            shown, _, token = self._collect(_EXTERNAL_LINK_STOPS)
            if type(token) is wt.ExternalLinkClose:
                return shown if separated else ""
            separated = True

    def _entity(self, _: wt.Token) -> str:
        # As the builder: [Numeric [Hex]] value End.
        tokens, at = self.tokens, self.at
        try:
            token = tokens[at]
            if type(token) is not wt.HTMLEntityNumeric:
                rendered, at = f"&{token.text};", at + 2
            elif type(tokens[at + 1]) is wt.HTMLEntityHex:
                rendered, at = f"&#{tokens[at + 1].char}{tokens[at + 2].text};", at + 4
            else:
                rendered, at = f"&#{tokens[at + 1].text};", at + 3
        except IndexError:
            raise _TreeNeeded("an entity is not closed") from None
        if at > len(tokens):
            raise _TreeNeeded("an entity is not closed")
        self.at = at
        return rendered

    def _skipped(self, stop: type) -> str:
        self._collect((stop,))
        return ""

    def _heading(self, _: wt.Token) -> str:
        return self._skipped(wt.HeadingEnd)

    def _comment(self, _: wt.Token) -> str:
        return self._skipped(wt.CommentEnd)

    def _attribute(self) -> None:
        while True:
            token = self._collect(_ATTRIBUTE_STOPS)[2]
            if type(token) not in (wt.TagAttrEquals, wt.TagAttrQuote):
                self.at -= 1  # the tag's token, for _tag
                return

    def _tag(self, opening: wt.Token) -> str:
        parts: list[str] = []  # the node list being filled, as the builder's stack
        plain = True
        name: tuple[str, bool] | None = None
        contents = ""
        while True:
            shown, shown_plain, token = self._collect(_TAG_STOPS)
            parts.append(shown)
            plain = plain and shown_plain
            kind = type(token)
            if kind is wt.TagAttrStart:
                self._attribute()
            elif kind is wt.TagCloseOpen:
                name, parts, plain = ("".join(parts), plain), [], True
            elif kind is wt.TagOpenClose:
                contents, parts, plain = "".join(parts), [], True
            else:
                if kind is wt.TagCloseSelfclose:
                    name = ("".join(parts), plain)
                break
        if name is None:
            raise _TreeNeeded("a tag without a name")
        if not name[1]:
            raise _TreeNeeded("markup in a tag name")
        return _tag_text(name[0], opening.wiki_markup and str(opening.wiki_markup), lambda: contents)


_TEMPLATE_NAME_STOPS = (wt.TemplateParamSeparator, wt.TemplateClose)
_TEMPLATE_PARAM_STOPS = (wt.TemplateParamEquals, wt.TemplateParamSeparator, wt.TemplateClose)
_ARGUMENT_STOPS = (wt.ArgumentSeparator, wt.ArgumentClose)
_WIKILINK_STOPS = (wt.WikilinkSeparator, wt.WikilinkClose)
_EXTERNAL_LINK_STOPS = (wt.ExternalLinkSeparator, wt.ExternalLinkClose)
_ATTRIBUTE_STOPS = (wt.TagAttrEquals, wt.TagAttrQuote, wt.TagAttrStart, wt.TagCloseOpen, wt.TagCloseSelfclose)
_TAG_STOPS = (wt.TagAttrStart, wt.TagCloseOpen, wt.TagOpenClose, wt.TagCloseSelfclose, wt.TagCloseClose)
_TOKEN_HANDLERS = {
    wt.TemplateOpen: _TokenRenderer._template,
    wt.ArgumentOpen: _TokenRenderer._argument,
    wt.WikilinkOpen: _TokenRenderer._wikilink,
    wt.ExternalLinkOpen: _TokenRenderer._external_link,
    wt.HTMLEntityStart: _TokenRenderer._entity,
    wt.HeadingStart: _TokenRenderer._heading,
    wt.CommentStart: _TokenRenderer._comment,
    wt.TagOpenOpen: _TokenRenderer._tag,
}


def tokenize_wikitext(source: str) -> list[wt.Token]:
    """mwparserfromhell's tokens of ``source``, bold/italic quotes left as text, from
    the tokenizer ``mwparserfromhell.parse`` would use: the C one, unless the
    extension is missing or ``mwparserfromhell.parser.use_c`` is turned off."""
    c_tokenizer = getattr(mw_parser, "CTokenizer", None)  # None without the extension
    tokenizer = c_tokenizer() if mw_parser.use_c and c_tokenizer else PythonTokenizer()
    return tokenizer.tokenize(source, 0, True)


def render_wikitext(source: str, tree: bool = False) -> str:
    """The running text of ``source`` (after :func:`pre_parse`) as one string, dropped
    sections left out: tokenized by mwparserfromhell (bold/italic quotes stay text:
    cheaper, and never mis-paired) and rendered from its tokens; where that needs the
    node tree (:class:`_TreeNeeded`), or with ``tree``, from the tree its builder
    makes of them, as ``mwparserfromhell.parse`` does. The two give the same text
    (tested on the real sample and on random markup)."""
    tokens = tokenize_wikitext(source)
    if not tree:
        try:
            return _TokenRenderer(tokens).document()
        except _TreeNeeded:
            pass
    (nodes,) = _sections(Builder().build(tokens).nodes)
    return _render(nodes)


def pre_parse(wikitext: str, parse_all: bool = False) -> str:
    """What the parser is given: the article with comments, refs, file links and
    dropped templates removed and, unless ``parse_all``, tables removed, plain links
    resolved and plain list lines blanked (see :func:`clean_wikitext`)."""
    source = strip_dropped_templates(strip_file_links(_PRE_STRIP.sub("", wikitext)))
    if not parse_all:
        source = blank_plain_list_lines(resolve_simple_links(strip_tables(source)))
    return source


def clean_wikitext(wikitext: str, parse_all: bool = False) -> list[str]:
    """Plain-text paragraphs of an article's wikitext (see module docstring). The
    pre-passes before the parser only remove or resolve what the parsed rendering
    would drop or resolve the same way, so they change the cost, not the output;
    ``parse_all`` leaves tables, plain links and list lines to the parser (slower;
    for checking exactly that)."""
    text = _LEFTOVER_TAG.sub("", _MAGIC_WORD.sub("", render_wikitext(pre_parse(wikitext, parse_all))))
    text = html.unescape(_STYLE_QUOTES.sub("", _POSSESSIVE_AFTER_STYLE.sub("'", text)))
    paragraphs: list[str] = []
    current: list[str] = []
    for line in text.split("\n"):
        if not line.strip() or _NOT_PROSE_LINE.match(line):
            if current:
                paragraphs.append(" ".join(current))
                current = []
            continue
        current.append(line.strip())
    if current:
        paragraphs.append(" ".join(current))
    return [p for p in (_tidy(p) for p in paragraphs) if p]


def _tidy(paragraph: str) -> str:
    """Repair what removing markup leaves behind: "( ; born 1950)", double spaces."""
    # _SPACES only matches a double space or a non-printable space (tab, nbsp, ...).
    if "  " in paragraph or not paragraph.isprintable():
        paragraph = _SPACES.sub(" ", paragraph)
    emptied = 0
    if "(" in paragraph or "（" in paragraph:  # most paragraphs have no parentheses
        paragraph = _PAREN_LEADING_PUNCT.sub(r"\1", paragraph)
        paragraph, emptied = _EMPTY_PARENS.subn("", paragraph)
    paragraph = _SPACE_BEFORE_PUNCT.sub(r"\1", paragraph)
    if emptied:  # only a removed "()" can leave two spaces side by side now
        paragraph = _SPACES.sub(" ", paragraph)
    return paragraph.strip()


def is_redirect(wikitext: str) -> bool:
    """A page whose text is a redirect (the dump's ``<redirect>`` element is the
    primary signal; this catches exports without it)."""
    return bool(re.match(r"\s*#(redirect|重定向)\b", wikitext, re.IGNORECASE))
