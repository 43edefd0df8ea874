"""A dump's pages as MediaWiki export XML (schema export-0.10)."""

from __future__ import annotations

import datetime as _dt
import hashlib
from xml.sax.saxutils import escape

from data_prep.sample_corpus.generator import Generator
from data_prep.sample_corpus.pages import Page

EXPORT_NS = "http://www.mediawiki.org/xml/export-0.10/"

# Hand-aligned data tables below are kept out of the formatter.
# fmt: off

# Namespace table of a current Wikipedia dump. zhwiki lists the same canonical
# (English) names in its <siteinfo>, so both languages share it.
_NAMESPACES: list[tuple[int, str]] = [
    (-2, "Media"), (-1, "Special"), (0, ""), (1, "Talk"), (2, "User"),
    (3, "User talk"), (4, "Wikipedia"), (5, "Wikipedia talk"), (6, "File"),
    (7, "File talk"), (8, "MediaWiki"), (9, "MediaWiki talk"), (10, "Template"),
    (11, "Template talk"), (12, "Help"), (13, "Help talk"), (14, "Category"),
    (15, "Category talk"), (100, "Portal"), (101, "Portal talk"), (118, "Draft"),
    (119, "Draft talk"), (710, "TimedText"), (711, "TimedText talk"),
    (828, "Module"), (829, "Module talk"),
]

# fmt: on


def _sha1_base36(text: str) -> str:
    """Revision checksum as MediaWiki writes it: SHA-1 in base 36, 31 digits."""
    n = int(hashlib.sha1(text.encode("utf-8")).hexdigest(), 16)
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while n:
        n, r = divmod(n, 36)
        out = digits[r] + out
    return out.rjust(31, "0")


def _esc(s: str) -> str:
    # Dumps escape double quotes in text as well, so do the same.
    return escape(s, {'"': "&quot;"})


def render_dump(pages: list[Page], gen: Generator, lang: str) -> str:
    """The XML text of the dump: header, <siteinfo>, pages ordered by id."""
    rng, d = gen.rng, gen.d
    out = [
        f'<mediawiki xmlns="{EXPORT_NS}" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
        f'xsi:schemaLocation="{EXPORT_NS} http://www.mediawiki.org/xml/export-0.10.xsd" '
        f'version="0.10" xml:lang="{lang}">',
        "  <siteinfo>",
        "    <sitename>Wikipedia</sitename>",
        f"    <dbname>{d['dbname']}</dbname>",
        f"    <base>{_esc(d['base'])}</base>",
        "    <generator>MediaWiki 1.41.0-wmf.25</generator>",
        "    <case>first-letter</case>",
        "    <namespaces>",
    ]
    for key, name in _NAMESPACES:
        if name:
            out.append(f'      <namespace key="{key}" case="first-letter">{_esc(name)}</namespace>')
        else:
            out.append(f'      <namespace key="{key}" case="first-letter" />')
    out += ["    </namespaces>", "  </siteinfo>"]

    # Like a real dump, pages appear in page-id order with namespaces mixed, and
    # ids have gaps (deleted pages).
    order = list(pages)
    rng.shuffle(order)
    page_id = rng.randint(10, 40)
    used_revs: set[int] = set()
    start = _dt.datetime(2021, 1, 1, tzinfo=_dt.timezone.utc)
    for page in order:
        page_id += rng.randint(1, 40)
        rev = rng.randint(900_000_000, 1_190_000_000)
        while rev in used_revs:
            rev += 1
        used_revs.add(rev)
        stamp = start + _dt.timedelta(seconds=rng.randint(0, 3 * 365 * 86400))
        out += [
            "  <page>",
            f"    <title>{_esc(page.title)}</title>",
            f"    <ns>{page.ns}</ns>",
            f"    <id>{page_id}</id>",
        ]
        if page.redirect is not None:
            out.append(f'    <redirect title="{_esc(page.redirect)}" />')
        out += ["    <revision>", f"      <id>{rev}</id>"]
        if rng.random() < 0.9:
            out.append(f"      <parentid>{rev - rng.randint(1000, 50_000_000)}</parentid>")
        out.append(f"      <timestamp>{stamp.strftime('%Y-%m-%dT%H:%M:%SZ')}</timestamp>")
        out.append("      <contributor>")
        if rng.random() < 0.15:
            out.append(f"        <ip>192.0.2.{rng.randint(1, 254)}</ip>")
        else:
            out.append(f"        <username>{_esc(rng.choice(d['usernames']))}</username>")
            out.append(f"        <id>{rng.randint(1000, 45_000_000)}</id>")
        out.append("      </contributor>")
        if rng.random() < 0.3:
            out.append("      <minor />")
        comment = rng.choice(d["edit_comments"])
        if comment:
            out.append(f"      <comment>{_esc(comment)}</comment>")
        out += ["      <model>wikitext</model>", "      <format>text/x-wiki</format>"]
        size = len(page.text.encode("utf-8"))
        if page.text:
            out.append(f'      <text bytes="{size}" xml:space="preserve">{_esc(page.text)}</text>')
        else:
            out.append('      <text bytes="0" xml:space="preserve" />')
        out += [f"      <sha1>{_sha1_base36(page.text)}</sha1>", "    </revision>", "  </page>"]
    out.append("</mediawiki>")
    return "\n".join(out) + "\n"
