"""Generate a small, realistic, entirely synthetic MediaWiki XML dump.

The project may not ship any Wikipedia text, yet its quickstart and its tests need a
corpus that looks and behaves like a real ``enwiki``/``zhwiki`` pages-articles dump.
This module *generates* one: fictional rivers, towns, people, species, inventions,
organizations and battles, written from word lists and sentence templates, wrapped
in the markup a wikitext cleaner has to cope with (infoboxes, ``{{convert}}``,
``<ref>`` with citation templates, piped links, ``[[File:...]]`` with nested links,
tables, lists, comments, HTML tags, entities, categories, trailing sections ...).

The XML follows schema export-0.10: ``<siteinfo>`` with ``<namespaces>``, then one
``<page>`` per page (ordered by page id, namespaces mixed, as in a real dump) with
``<title>``, ``<ns>``, ``<id>``, an optional ``<redirect title="..." />`` and a
``<revision>`` holding ``<text xml:space="preserve">``.

Besides ``num_articles`` ordinary articles (namespace 0) every dump contains:

* one empty article and one single-sentence stub article (namespace 0);
* one disambiguation page (namespace 0) listing articles that share a name;
* :func:`num_redirects` redirect pages (namespace 0, ``#REDIRECT [[X]]``);
* :data:`OTHER_NAMESPACE_PAGES` pages in Talk, User, Wikipedia, File, Template
  and Category namespaces.

Output is a pure function of the arguments (``random.Random(seed)``, timestamps
drawn from a fixed range), so the same call always gives byte-identical text.

The words and templates are package data, one JSON file per language
(``data_prep/sample_corpus_data/en.json`` and ``zh.json``), with these keys:

* ``code``, ``dbname``, ``base``: the site; ``joiner``: what goes between sentences;
* name material: ``onsets`` and ``codas`` (English) or ``chars`` (Chinese) for
  invented names, ``countries`` as [name, demonym] pairs, person names,
  ``org_patterns`` (with their own ``{base}``, ``{country}`` and ``{dem}`` fields),
  ``usernames``, ``edit_comments`` ...;
* ``vocab``: word lists; each one is also a placeholder of the same name;
* article text: ``short_desc``, ``leads``, ``templates`` (sentence templates by tag:
  ``any``, a group of kinds such as ``geo``, or one kind), ``headings``,
  ``citations``, ``categories``, ``infobox`` (template name and fields) ...;
* ``pages``: the stub, disambiguation, redirect, talk, user, project, file,
  category and template pages.

A ``{key}`` placeholder in a template is filled from a fact of the article's
subject (birth year, genus ...), else by its filler in :data:`_FILLERS` (names,
links, numbers, dates), else with a random word of ``vocab[key]``. A digit suffix
asks for another value of the same sort (``{industry2}`` differs from
``{industry}``, ``{year2}`` is later than ``{year}``); a ``_plain`` suffix asks
for text without wiki links.

Command line::

    python -m data_prep.sample_corpus OUT_PATH [--articles N] [--seed S] [--language en|zh]
"""

from __future__ import annotations

import argparse
import bz2
import datetime as _dt
import functools
import hashlib
import json
import os
import pathlib
import random
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from typing import Any
from xml.sax.saxutils import escape

__all__ = [
    "LANGUAGES",
    "OTHER_NAMESPACE_PAGES",
    "generate_wiki_xml",
    "main",
    "num_redirects",
    "write_sample_dump",
]

LANGUAGES = ("en", "zh")

# How many pages each non-article namespace gets (namespace key -> count).
OTHER_NAMESPACE_PAGES: dict[int, int] = {1: 2, 2: 2, 4: 1, 6: 1, 10: 2, 14: 2}

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

# Article kinds, their weight when drawn at random, and the template group they
# share sentences with ("geo" sentences suit rivers, lakes, mountains and towns).
_KIND_WEIGHTS = {
    "settlement": 3, "river": 2, "person": 3, "lake": 1, "mountain": 1,
    "species": 2, "invention": 1, "organization": 1, "battle": 1,
}
_KIND_GROUP = {
    "settlement": "geo", "river": "geo", "lake": "geo", "mountain": "geo",
    "person": "bio", "species": "thing", "invention": "thing",
    "organization": "thing", "battle": "event",
}

# fmt: on

# Sentence-count bounds for one ordinary article (lead plus body sections).
_MIN_SENTENCES, _MAX_SENTENCES = 15, 60

# A placeholder is ``{key}``; the look-behind leaves wiki templates and template
# parameters (``{{reflist}}``, ``{{{name|}}}``) alone.
_PLACEHOLDER = re.compile(r"(?<!\{)\{([A-Za-z][A-Za-z_]*[0-9]*)\}")


def num_redirects(num_articles: int) -> int:
    """Number of redirect pages in a dump with ``num_articles`` articles."""
    return 3 + num_articles // 20


# ---------------------------------------------------------------------------
# Word lists and templates (package data)
# ---------------------------------------------------------------------------


@functools.cache
def _language_data(language: str) -> dict[str, Any]:
    """Word lists and templates of ``language``, read from ``sample_corpus_data/<language>.json``.

    The file is package data, read through :mod:`importlib.resources`, so this works
    from a checkout, an editable install and an installed wheel alike. It is read once
    per process; the returned dict is shared, so callers must not modify it.
    """
    path = resources.files("data_prep") / "sample_corpus_data" / f"{language}.json"
    return json.loads(path.read_text(encoding="utf-8"))


# ---------------------------------------------------------------------------
# Generator
# ---------------------------------------------------------------------------


@dataclass
class _Subject:
    """One article's topic: what the sentence templates say "it" is."""

    kind: str
    title: str
    base: str  # the invented name it is built on ("Varn" of "Varn River")
    short: str  # how the text names it ("the Varn River", "Hollis")
    home: int  # index into the language's country list
    refs_cap: list[str]  # sentence-initial ways to refer to it ("The river", "It")
    refs_low: list[str]  # the same, mid-sentence
    facts: dict[str, str] = field(default_factory=dict)
    headings: list[str] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)
    images: list[str] = field(default_factory=list)
    mdy: bool = False  # English date style of the article: "May 3, 1850" or "3 May 1850"


@dataclass
class _Page:
    title: str
    ns: int
    text: str
    redirect: str | None = None


@dataclass
class _ArticleState:
    """Per-article bookkeeping while writing its text."""

    named_refs: list[str] = field(default_factory=list)  # defined so far, reusable
    want_notes: bool = False  # the article has a Notes section, so {{efn}} may appear


class _Generator:
    """Writes the pages of one dump in one language from a seeded random generator.

    It invents the names the dump mentions (:meth:`_make_pools`) and the topics of
    its articles (:meth:`_make_subject`), and writes the wikitext of articles
    (:meth:`article`), the stub, the disambiguation page and redirects;
    :func:`_build_pages` and :func:`_other_namespace_pages` drive it. Every random
    draw comes from ``rng`` in a fixed order, so the text depends only on the seed.
    """

    def __init__(self, data: dict[str, Any], rng: random.Random) -> None:
        self.d = data
        self.v: dict[str, list[str]] = data["vocab"]
        self.en = _language_data("en")  # English words also appear in Chinese pages
        self.rng = rng
        self.zh = data["code"] == "zh"
        self.used_titles: set[str] = set()
        self.used_bases: set[str] = set()
        self.subj: _Subject | None = None
        self.deck: list[str] = []  # sentence templates not yet used in this article
        self.plain = False  # set while a ``*_plain`` placeholder is being filled
        self.articles: list[_Subject] = []
        # Pools of names that recur across articles, as (link target, label, base).
        self.places: list[tuple[str, str, str]] = []
        self.rivers: list[tuple[str, str, str]] = []
        self.lakes: list[tuple[str, str, str]] = []
        self.mountains: list[tuple[str, str, str]] = []
        self.orgs: list[tuple[str, str, str]] = []
        self.people: list[str] = []

    # -- names ---------------------------------------------------------------

    def _new_base(self) -> str:
        """A fresh invented name ("Varn", "青石"), never used before in this dump."""
        for _ in range(1000):
            base = self._invent()
            if base not in self.used_bases:
                self.used_bases.add(base)
                return base
        raise RuntimeError("ran out of invented names")

    def _invent(self) -> str:
        """An invented name ("Varn", "青石"), possibly one used before."""
        if self.zh:
            return "".join(self.rng.sample(self.d["chars"], 2))
        return self.rng.choice(self.d["onsets"]) + self.rng.choice(self.d["codas"])

    def _claim(self, title: str) -> bool:
        if title in self.used_titles:
            return False
        self.used_titles.add(title)
        return True

    def _country(self, idx: int) -> tuple[str, str]:
        """(country, demonym) of country number ``idx``."""
        country, dem = self.d["countries"][idx]
        return country, dem

    def _new_person_name(self) -> tuple[str, str, str]:
        """(full name, first name, last name), unique within the dump."""
        while True:
            if self.zh:
                last = self.rng.choice(self.d["surnames"])
                first = "".join(self.rng.sample(self.d["given"], self.rng.choice([1, 2])))
                full = last + first
            else:
                first = self.rng.choice(self.d["first_names"])
                if self.rng.random() < 0.6:
                    last = self.rng.choice(self.d["last_names"])
                else:
                    last = self.rng.choice(self.d["onsets"]) + self.rng.choice(self.d["last_suffixes"])
                full = f"{first} {last}"
            if self._claim(full):
                return full, first, last

    def _make_pools(self) -> None:
        """Background names (places, people ...) that sentences mention."""
        for _ in range(30):
            base = self._new_base()
            label = base + self.rng.choice(["镇", "县", "市", "村"]) if self.zh else base
            self.places.append((label, label, base))
        named = (
            (self.rivers, 10, "{} River", "河"),
            (self.lakes, 6, "Lake {}", "湖"),
            (self.mountains, 6, "Mount {}", "山"),
        )
        for pool, count, en_pattern, zh_suffix in named:
            for _ in range(count):
                base = self._new_base()
                name = base + zh_suffix if self.zh else en_pattern.format(base)
                pool.append((name, name, base))
        for _ in range(8):
            self.orgs.append(self._org_name())
        for _ in range(30):
            self.people.append(self._new_person_name()[0])

    def _org_name(self) -> tuple[str, str, str]:
        while True:
            base = self._new_base()
            country, dem = self._country(self.rng.randrange(len(self.d["countries"])))
            pattern = self.rng.choice(self.d["org_patterns"])
            name = pattern.replace("{base}", base).replace("{country}", country).replace("{dem}", dem)
            if self._claim(name):
                return name, name, base

    # -- subjects ------------------------------------------------------------

    def _make_subject(self, kind: str, base: str | None = None, comma_title: bool = False) -> _Subject:
        """Invent an article topic of ``kind``; ``base`` forces its name."""
        rng = self.rng
        home = rng.randrange(len(self.d["countries"]))
        country, dem = self._country(home)
        facts: dict[str, str] = {}
        while True:
            b = base or self._new_base()
            title, short, cap, low = self._title_for(kind, b, (country, dem), comma_title, facts)
            if self._claim(title):
                break
            base = None  # forced name collided; fall back to a fresh one
        subj = _Subject(kind, title, b, short, home, cap, low, facts, mdy=self.rng.random() < 0.4)
        self.subj = subj  # facts are written in the subject's own date style
        self._add_facts(subj)
        self.subj = None
        return subj

    def _title_for(
        self, kind: str, b: str, home: tuple[str, str], comma: bool, facts: dict[str, str]
    ) -> tuple[str, str, list[str], list[str]]:
        """(title, short name, sentence-initial refs, mid-sentence refs) for a topic."""
        rng = self.rng
        country, dem = home
        if self.zh:
            generic = {
                "river": "该河",
                "lake": "该湖",
                "mountain": "该山",
                "settlement": "该镇",
                "species": "该物种",
                "invention": "这种机器",
                "organization": "该组织",
                "battle": "这场战役",
            }
            if kind == "person":
                full, _first, last = self._new_person_name()
                self.used_titles.discard(full)  # claimed again by the caller
                female = any(ch in self.d["female_given"] for ch in full[1:])
                facts.update(pron="她" if female else "他", sortkey=full)
                return full, full, [full, facts["pron"]], [full, facts["pron"]]
            if kind == "river":
                title = b + rng.choice(["河", "江", "溪"])
            elif kind == "lake":
                title = b + "湖"
            elif kind == "mountain":
                title = b + rng.choice(["山", "峰", "岭"])
            elif kind == "settlement":
                title = b + rng.choice(["镇", "县", "市"])
            elif kind == "species":
                title = b + rng.choice(self.d["species_kinds"])
            elif kind == "invention":
                title = b + "式" + rng.choice(self.d["device_words"])
            elif kind == "organization":
                pattern = rng.choice(self.d["org_patterns"])
                title = pattern.replace("{base}", b).replace("{country}", country)
            else:
                title = b + rng.choice(["之战", "战役", "围城战"])
            return title, title, [title, generic[kind]], [title, generic[kind]]

        if kind == "person":
            full, first, last = self._new_person_name()
            self.used_titles.discard(full)
            female = first in self.d["female"]
            facts.update(
                Pron="She" if female else "He",
                pron="she" if female else "he",
                Pos="Her" if female else "His",
                pos="her" if female else "his",
                obj="her" if female else "him",
                sortkey=f"{last}, {first}",
                first=first,
            )
            return full, last, [last, facts["Pron"]], [last, facts["obj"]]
        if kind == "river":
            title = f"{b} River"
            return title, title, [f"The {title}", "The river", "It"], [f"the {title}", "the river", "it"]
        if kind == "lake":
            title = f"Lake {b}"
            return title, title, [title, "The lake", "It"], [title, "the lake", "it"]
        if kind == "mountain":
            title = rng.choice([f"Mount {b}", f"{b} Peak"])
            return title, title, [title, "The mountain", "It"], [title, "the mountain", "it"]
        if kind == "settlement":
            title = f"{b}, {country}" if comma or rng.random() < 0.3 else b
            return title, b, [b, "The town", "It"], [b, "the town", "it"]
        if kind == "species":
            genus = b + rng.choice(self.d["species_suffixes"])
            epithet = rng.choice(self.d["epithets"])
            facts.update(genus=genus, epithet=epithet, family=genus[:-1].rstrip("aeiou") + "idae")
            title = f"{genus} {epithet}"
            short = f"''{genus[0]}. {epithet}''"
            return title, short, [short, "The species", "It"], [short, "the species", "it"]
        if kind == "invention":
            owner = b if rng.random() < 0.5 else rng.choice(self.d["last_names"])
            title = f"{owner} {rng.choice(self.d['device_words'])}"
            return title, title, [f"The {title}", "The device", "It"], [f"the {title}", "the device", "it"]
        if kind == "organization":
            pattern = rng.choice(self.d["org_patterns"])
            title = pattern.replace("{base}", b).replace("{country}", country).replace("{dem}", dem)
            words = [w for w in title.replace("'", "").split() if w[0].isupper()]
            facts["abbr"] = "".join(w[0] for w in words)
            return title, title, [f"The {title}", "The society", "It"], [f"the {title}", "the society", "it"]
        title = f"{rng.choice(['Battle', 'Siege'])} of {b}"
        return title, title, [f"The {title}", "The battle", "It"], [f"the {title}", "the battle", "it"]

    def _add_facts(self, subj: _Subject) -> None:
        """Dates and other facts that several sentences of one article share."""
        rng, f = self.rng, subj.facts
        if subj.kind == "person":
            f["profession"] = rng.choice(self.v["profession"])
            birth = rng.randint(1780, 1930)
            death = birth + rng.randint(38, 95)
            bm, bd, dm, dd = rng.randint(1, 12), rng.randint(1, 28), rng.randint(1, 12), rng.randint(1, 28)
            f.update(
                byear=str(birth),
                dyear=str(death),
                dage=str(death - birth - (1 if dm < bm else 0)),
                bdate=self._format_date(birth, bm, bd),
                ddate=self._format_date(death, dm, dd),
                bdate_tpl=f"{{{{birth date|{birth}|{bm}|{bd}}}}}",
                ddate_tpl=f"{{{{death date and age|{death}|{dm}|{dd}|{birth}|{bm}|{bd}}}}}",
            )
        year = rng.randint(1650, 1960)
        f.setdefault("fyear", str(year))
        f.setdefault("fdate", self._format_date(year, rng.randint(1, 12), rng.randint(1, 28)))
        if subj.kind == "species":
            f["taxon"] = rng.choice(self.v["taxon"])
            if self.zh:
                # zhwiki gives the Latin name in the lead; invent one.
                genus = rng.choice(self.en["onsets"]) + rng.choice(self.en["species_suffixes"])
                f.update(genus=genus, epithet=rng.choice(self.en["epithets"]), family=subj.base + "科")
                f["binomial"] = f"{f['genus']} {f['epithet']}"
            else:
                f["common"] = f"{rng.choice(self.v['colour'])} {f['taxon']}"

    # -- formatting of numbers and dates ----------------------------------------

    def _format_date(self, y: int, m: int, d: int) -> str:
        if self.zh:
            return f"{y}年{m}月{d}日"
        month = self.d["months"][m - 1]
        return f"{month} {d}, {y}" if self.subj is not None and self.subj.mdy else f"{d} {month} {y}"

    def _int(self, n: int) -> str:
        return str(n) if self.zh else f"{n:,}"

    def _measure(self, n: int, unit: str, convert_to: str, zh_unit: str) -> str:
        """A measurement written one of the ways real articles write it."""
        r = self.rng.random()
        if r < 0.35:
            return f"{{{{convert|{n}|{unit}|{convert_to}}}}}"
        if r < 0.55:
            return f"{self._int(n)}&nbsp;{zh_unit if self.zh else unit}"
        return f"{self._int(n)}{zh_unit}" if self.zh else f"{self._int(n)} {unit}"

    # -- placeholder filling -----------------------------------------------------

    def fill(self, template: str, extra: dict[str, str] | None = None) -> str:
        """Replace every ``{key}`` of ``template``; repeated keys get one value."""
        cache: dict[str, str] = dict(extra or {})
        years: dict[int, int] = {}

        def repl(m: re.Match[str]) -> str:
            key = m.group(1)
            if key not in cache:
                # {industry2} should differ from {industry}: retry a few times.
                stem = key.rstrip("0123456789")
                taken = {v for k, v in cache.items() if k != key and k.rstrip("0123456789") == stem}
                for _ in range(5):
                    cache[key] = self._value(key, years)
                    if cache[key] not in taken:
                        break
            return cache[key]

        return _PLACEHOLDER.sub(repl, template)

    def _value(self, key: str, years: dict[int, int]) -> str:
        """One placeholder's text: a fact of the subject, else the output of its
        filler in :data:`_FILLERS`, else a word from the vocabulary list of that name."""
        plain = key.endswith("_plain")
        name = key[: -len("_plain")] if plain else key
        base = name.rstrip("0123456789")
        outer, self.plain = self.plain, self.plain or plain
        try:
            subj = self.subj
            if subj is not None and name in subj.facts:
                return subj.facts[name]
            filler = _FILLERS.get(base)
            if filler is not None:
                return filler(self, name, years)
            if base in self.v:
                word = self.rng.choice(self.v[base])
                # Vocabulary entries may themselves contain placeholders.
                return self.fill(word) if "{" in word else word
            raise KeyError(f"unknown placeholder {{{key}}}")
        finally:
            self.plain = outer

    def _link(self, target: str, p: float, label: str | None = None) -> str:
        """``label``, as a link to ``target`` with probability ``p`` (never in plain text)."""
        label = target if label is None else label
        if self.plain or self.rng.random() >= p:
            return label
        return f"[[{target}]]" if target == label else f"[[{target}|{label}]]"

    # -- sentences, paragraphs, sections -------------------------------------------

    def _templates_for(self, kind: str) -> list[str]:
        """Sentence templates an article of ``kind`` draws from."""
        tags = ("any", _KIND_GROUP[kind], kind)
        out: list[str] = []
        for tag, templates in self.d["templates"].items():
            if tag in tags:
                # Kind-specific sentences are rarer in the list, so weigh them up.
                for tmpl in templates:
                    out.extend([tmpl] * (2 if tag == kind else 1))
        return out

    def _sentence(self, pool: list[str]) -> str:
        if self.zh and self.rng.random() < 0.04:
            tmpl = self.rng.choice(self.d["traditional"])
        else:
            # Deal templates like cards, so an article rarely repeats a sentence.
            if not self.deck:
                self.deck = self.rng.sample(pool, len(pool))
            tmpl = self.deck.pop()
        return _capitalize(self.fill(tmpl))

    def _citation(self) -> str:
        return self.fill(self.rng.choice(self.d["citations"]))

    def _ref(self, art: _ArticleState) -> str:
        """A footnote: a new (possibly named) ``<ref>`` or a reuse ``<ref name=... />``."""
        r = self.rng.random()
        if art.named_refs and r < 0.25:
            return f'<ref name="{self.rng.choice(art.named_refs)}" />'
        if r < 0.5:
            name = f"{self.rng.choice(self.en['last_names']).lower()}{len(art.named_refs) + 1}"
            art.named_refs.append(name)
            return f'<ref name="{name}">{self._citation()}</ref>'
        return f"<ref>{self._citation()}</ref>"

    def _after_sentence(self, art: _ArticleState) -> str:
        """Footnotes and inline maintenance templates that follow a sentence."""
        out = ""
        if art.want_notes and self.rng.random() < 0.07:
            out += f"{{{{efn|{self.fill(self.rng.choice(self.v['note_text']))}}}}}"
        if self.rng.random() < 0.22:
            out += self._ref(art)
        elif self.rng.random() < 0.02:
            out += self.fill(self.d["citation_needed"])
        return out

    def _paragraph(self, n: int, pool: list[str], art: _ArticleState, first: str | None = None) -> str:
        sentences = []
        for i in range(n):
            s = first if (i == 0 and first is not None) else self._sentence(pool)
            sentences.append(s + self._after_sentence(art))
        text = self.d["joiner"].join(sentences)
        if self.rng.random() < 0.06:
            comment = self.fill(self.rng.choice(self.v["comment"]))
            text = f"{comment}\n{text}" if self.rng.random() < 0.5 else f"{text} {comment}"
        return text

    def _image_line(self, force_prefix: str | None = None) -> str:
        prefix = force_prefix or self.rng.choice(["File", "File", "Image"])
        opts = self.rng.choice(["thumb", "thumb|right", "thumb|left|upright=1.2", "thumb|220px"])
        return f"[[{prefix}:{self.fill('{image}')}|{opts}|{self.fill(self.rng.choice(self.v['caption']))}]]"

    def _table(self, art: _ArticleState) -> str:
        t = self.d["tables"]
        rows: list[str] = []
        if self.subj.kind == "settlement":
            caption, headers = t["caption_pop"], t["headers_pop"]
            pop = self.rng.randint(300, 20000)
            for year in sorted(self.rng.sample(range(1850, 2021, 10), self.rng.randint(3, 6))):
                new = max(50, int(pop * self.rng.uniform(0.85, 1.5)))
                change = f"{(new - pop) / pop * 100:+.1f}%"
                pop = new
                rows.append(f"| {year} || {self._int(pop)} || {change}")
        else:
            caption, headers = t["caption_list"], t["headers_list"]
            for year in sorted(self.rng.sample(range(1700, 2021), self.rng.randint(3, 5))):
                note = self.fill(self.rng.choice(self.v["table_notes"]))
                rows.append(f"| {year} || {self.fill(self.rng.choice(t['event']))} || {note}")
        # Real tables carry footnotes and line breaks inside cells.
        rows[-1] += self._ref(art) if self.rng.random() < 0.5 else "<sup>[a]</sup>"
        if len(rows) > 2:
            rows[1] += "<br /><small>(revised)</small>" if not self.zh else "<br /><small>（修订）</small>"
        head = '! scope="col" | ' + " !! ".join(headers)
        body = "\n|-\n".join(rows)
        cls = self.rng.choice(
            ['class="wikitable"', 'class="wikitable sortable"', 'class="wikitable" style="text-align:right"']
        )
        return f"{{| {cls}\n|+ {caption}\n|-\n{head}\n|-\n{body}\n|}}"

    def _bullets(self) -> str:
        lines = [self.fill(self.rng.choice(self.v["list_intro"]))]
        for _ in range(self.rng.randint(3, 6)):
            lines.append("* " + _capitalize(self.fill(self.rng.choice(self.v["list_item"]))))
            if self.rng.random() < 0.15:
                lines.append("** " + _capitalize(self.fill(self.rng.choice(self.v["list_item"]))))
        return "\n".join(lines)

    def _heading(self, title: str, level: int) -> str:
        bars = "=" * level
        return f"{bars}{title}{bars}" if self.rng.random() < 0.2 else f"{bars} {title} {bars}"

    def _plan(self) -> tuple[int, list[list[int]]]:
        """Lead length and, per body section, its paragraphs' sentence counts."""
        rng = self.rng
        while True:
            lead = rng.randint(2, 4)
            sections = [
                [rng.randint(2, 6) for _ in range(rng.randint(1, 4))] for _ in range(rng.randint(2, 6))
            ]
            total = lead + sum(map(sum, sections))
            if _MIN_SENTENCES <= total <= _MAX_SENTENCES:
                return lead, sections

    # -- whole pages ------------------------------------------------------------

    def article(self, subj: _Subject, showcase: bool = False) -> str:
        """Full wikitext of an ordinary article.

        ``showcase`` forces every optional construct on, so even a one-article
        dump contains all the markup a cleaner must handle.
        """
        rng, d = self.rng, self.d
        self.subj = subj
        self.deck = []
        art = _ArticleState()

        def chance(p: float) -> bool:
            return showcase or rng.random() < p

        trailing = [
            k
            for k, p in (
                ("see_also", 0.5),
                ("notes", 0.15),
                ("references", 0.8),
                ("further", 0.3),
                ("external", 0.5),
            )
            if chance(p)
        ]
        art.want_notes = "notes" in trailing
        pool = self._templates_for(subj.kind)
        lead_n, plan = self._plan()

        top: list[str] = []
        if chance(0.5):
            top.append(f"{{{{Short description|{self.fill(d['short_desc'][subj.kind])}}}}}")
        if not self.zh and not subj.mdy and chance(0.25):
            top.append(f"{{{{Use dmy dates|date={rng.choice(d['months'])} {rng.randint(2015, 2023)}}}}}")
        if self.zh and chance(0.3):
            top.append("{{NoteTA\n|G1 = Geography\n}}")
        if subj.kind == "species" and not self.zh:
            top.append("{{Italic title}}")
        if chance(0.75):
            top.append(self._infobox(subj))
        if chance(0.1):
            top.append(self.fill(rng.choice(self.v["comment"])))

        lead_first = _capitalize(self.fill(rng.choice(d["leads"][subj.kind])))
        if showcase:
            # Guarantee a named <ref> with {{cite web}} and a later reuse of it.
            art.named_refs.append("showcase")
            cite = self.fill(d["citations"][0])
            lead_first += f'<ref name="showcase">{cite}</ref>'
        lead = self._paragraph(lead_n, pool, art, first=lead_first)
        if showcase:
            lead += '<ref name="showcase" />'
        if art.want_notes:
            lead += f"{{{{efn|{self.fill(rng.choice(self.v['note_text']))}}}}}"

        headings = rng.sample(d["headings"][subj.kind], len(plan))
        subj.headings = headings
        need_file, need_image = showcase, showcase
        need_table, need_list, need_ext = showcase, showcase, showcase
        sections: list[str] = []
        for heading, paragraphs in zip(headings, plan, strict=True):
            # Heading, hatnote and image sit on consecutive lines; blocks of
            # running text, lists and tables are separated by blank lines.
            head = [self._heading(heading, 2)]
            if rng.random() < 0.1:
                head.append(self.fill(rng.choice(d["hatnote"])))
            if need_file or need_image or rng.random() < 0.2:
                prefix = "File" if need_file else ("Image" if need_image else None)
                need_file = need_file and prefix != "File"
                need_image = need_image and prefix != "Image"
                head.append(self._image_line(prefix))
            split = len(paragraphs) >= 2 and rng.random() < 0.3
            cut = rng.randint(1, len(paragraphs) - 1) if split else len(paragraphs)
            blocks = [self._paragraph(n, pool, art) for n in paragraphs[:cut]]
            if need_ext:
                blocks[-1] += d["joiner"] + self.fill(d["extlink_sentence"])
                need_ext = False
            if split:
                sub = self._heading(rng.choice(d["subheadings"]), 3)
                blocks.append(sub + "\n" + self._paragraph(paragraphs[cut], pool, art))
                blocks.extend(self._paragraph(n, pool, art) for n in paragraphs[cut + 1 :])
            if need_list or rng.random() < 0.12:
                blocks.append(self._bullets())
                need_list = False
            if need_table or rng.random() < 0.1:
                blocks.append(self._table(art))
                need_table = False
            sections.append("\n".join(head) + "\n" + "\n\n".join(blocks))

        tail = [self._trailing(k, subj) for k in trailing]
        bottom = self._bottom(subj, showcase)
        return "".join(t + "\n" for t in top) + lead + "\n\n" + "\n\n".join(sections + tail) + "\n\n" + bottom

    def _infobox(self, subj: _Subject) -> str:
        box = self.d["infobox"][subj.kind]
        fields: dict[str, str] = box["fields"]
        width = max(map(len, fields))
        lines = ["{{" + box["template"]]
        for key, value in fields.items():
            lines.append(f"| {key.ljust(width)} = {self.fill(value)}")
        lines.append("}}")
        return "\n".join(lines)

    def _trailing(self, key: str, subj: _Subject) -> str:
        d, rng = self.d, self.rng
        head = self._heading(d["trailing"][key], 2)
        if key == "see_also":
            others = [a.title for a in self.articles if a is not subj]
            items = rng.sample(others, min(len(others), rng.randint(1, 3)))
            items.append(self.fill(d["see_also_extra"]))
            return head + "\n" + "\n".join(f"* [[{t}]]" for t in items)
        if key == "notes":
            return head + "\n{{notelist}}"
        if key == "references":
            return head + "\n" + rng.choice(d["reflists"])
        if key == "further":
            return (
                head + "\n" + "\n".join(self.fill(rng.choice(d["further"])) for _ in range(rng.randint(1, 3)))
            )
        lines = [self.fill(t) for t in rng.sample(d["external"], rng.randint(1, len(d["external"])))]
        if not any(line.startswith("* [") for line in lines):
            lines.insert(0, self.fill(d["external"][0]))
        return head + "\n" + "\n".join(lines)

    def _bottom(self, subj: _Subject, showcase: bool) -> str:
        """Stub notice, DEFAULTSORT and categories that end an article."""
        lines: list[str] = []
        country = self._country(subj.home)[0]
        stub = self.d["stub_suffix"].get(subj.kind)
        if stub and (showcase or self.rng.random() < 0.25):
            lines.append("{{" + f"{country}-{stub}-stub" + "}}")
        if subj.kind == "person":
            lines.append(f"{{{{DEFAULTSORT:{subj.facts['sortkey']}}}}}")
        cats = [self.fill(c) for c in self.d["categories"][subj.kind]]
        subj.categories = cats
        lines.extend(f"[[Category:{c}]]" for c in cats)
        return "\n".join(lines)

    def stub(self, subj: _Subject) -> str:
        self.subj = subj
        return self.fill(self.d["pages"]["stub"])

    def disambiguation(self, base: str, entries: list[_Subject]) -> str:
        pages = self.d["pages"]
        lines = [self.fill(pages["disambig_intro"], {"T": base}), ""]
        for subj in entries:
            self.subj = subj
            desc = self.fill(self.d["short_desc"][subj.kind])
            sep = "，" if self.zh else ", "
            lines.append(f"* [[{subj.title}]]{sep}{desc[0].lower() + desc[1:] if not self.zh else desc}")
        lines.append(self.fill(pages["disambig_other"], {"T": base}))
        lines += ["", pages["disambig_end"]]
        return "\n".join(lines)

    def redirect(self, target: _Subject) -> tuple[str, str]:
        """(redirect title, wikitext) pointing at ``target``."""
        pages, rng = self.d["pages"], self.rng
        title = self._redirect_title(target)
        anchor = f"#{target.headings[0]}" if target.headings and rng.random() < 0.2 else ""
        text = f"{rng.choice(pages['redirect_word'])} [[{target.title}{anchor}]]"
        if rng.random() < 0.6:
            text += "\n\n" + pages["redirect_tail"]
        return title, text

    def _redirect_title(self, subj: _Subject) -> str:
        b, country = subj.base, self._country(subj.home)[0]
        if self.zh:
            # zhwiki is full of redirects from Traditional-character titles.
            kind_word = {
                "river": "河流",
                "lake": "湖泊",
                "mountain": "山峰",
                "settlement": "城镇",
                "species": "生物",
                "invention": "机器",
                "organization": "组织",
                "battle": "战役",
            }.get(subj.kind) or subj.facts.get("profession", "人物")
            candidates = [
                "".join(self.d["s2t"].get(ch, ch) for ch in subj.title),
                f"{subj.title}（{kind_word}）",
            ]
        else:
            candidates = {
                "river": [f"River {b}", f"{b} river"],
                "lake": [f"{b} Lake", f"Lake {b} ({country})"],
                "mountain": [f"Mt. {b}", f"{b} Mountain"],
                "settlement": [f"{b} (town)", f"{b}, {country}"],
                "person": [
                    f"{subj.facts.get('first', '')[:1]}. {subj.short}",
                    f"{subj.short}, {subj.facts.get('first', '')}",
                ],
                "species": [subj.facts.get("common", "").capitalize(), f"{subj.facts.get('genus', b)}"],
                "invention": [subj.title.title(), f"{subj.title} ({country})"],
                "organization": [subj.facts.get("abbr", b), f"{subj.title} ({country})"],
                "battle": [subj.title.replace(" of ", " at "), f"{subj.title} ({country})"],
            }[subj.kind]
        candidates.append(f"{subj.title}（{country}）" if self.zh else f"{subj.title} ({country})")
        for cand in candidates:
            if cand and cand != subj.title and self._claim(cand):
                return cand
        for i in range(2, 1000):
            cand = f"{subj.title} ({i})"
            if self._claim(cand):
                return cand
        raise RuntimeError("no free redirect title")


# ---------------------------------------------------------------------------
# Placeholder fillers
# ---------------------------------------------------------------------------

# A filler writes the text of one ``{key}`` placeholder. It gets the generator, the
# key without its ``_plain`` suffix ("year2"), and the years already drawn for the
# template being filled (so that {year} < {year2} within one sentence).
_Years = dict[int, int]
_Filler = Callable[[_Generator, str, _Years], str]


def _refer(g: _Generator, refs: list[str]) -> str:
    """One of the ways to name the subject, its name most often."""
    return g.rng.choices(refs, weights=[5, 3, 2][: len(refs)])[0]


def _pronoun(g: _Generator, key: str, years: _Years) -> str:
    # English persons carry Pron/pron in their facts; Chinese has one form.
    return g.subj.facts.get("pron", "它")


def _home(g: _Generator, key: str, years: _Years) -> str:
    return g._link(g._country(g.subj.home)[0], 0.3)


def _region(g: _Generator, key: str, years: _Years) -> str:
    home = _home(g, key, years)
    if g.zh:
        return f"{home}{g.rng.choice(g.d['region_dirs'])}部"
    return f"{g.rng.choice(g.d['direction_adjs'])} {home}"


def _nationality(g: _Generator, key: str, years: _Years) -> str:
    country, dem = g._country(g.subj.home)
    return g._link(country, 0.2, country if g.zh else dem)


def _pick(g: _Generator, pool: list[tuple[str, str, str]], p: float) -> str:
    """A (possibly linked) name from ``pool``, other than the subject itself."""
    own = g.subj.title if g.subj else None
    candidates = [e for e in pool if e[0] != own] or pool
    target, label, _ = g.rng.choice(candidates)
    return g._link(target, p, label)


def _person(g: _Generator, key: str, years: _Years) -> str:
    full = g.rng.choice(g.people)
    if g.plain or g.zh:
        return g._link(full, 0.25)
    r = g.rng.random()
    if r < 0.1:
        return "Dr. " + g._link(full, 0.25)
    if r < 0.2:
        first, last = full.split(" ", 1)
        middle = g.rng.choice("ABCDEFGHJKLMNPRSTW")
        return g._link(full, 0.2, f"{first[0]}. {middle}. {last}")
    return g._link(full, 0.25)


def _university(g: _Generator, key: str, years: _Years) -> str:
    _, label, base = g.rng.choice(g.places)
    name = f"{base}大学" if g.zh else f"University of {label}"
    return g._link(name, 0.2)


def _hills(g: _Generator, key: str, years: _Years) -> str:
    base = g.rng.choice(g.places)[2]
    return f"{base}丘陵" if g.zh else f"{base} Hills"


def _range(g: _Generator, key: str, years: _Years) -> str:
    base = g.rng.choice(g.mountains)[2]
    name = f"{base}山脉" if g.zh else f"{base} {g.rng.choice(['Mountains', 'Range'])}"
    return g._link(name, 0.3)


def _company(g: _Generator, key: str, years: _Years) -> str:
    base = g.rng.choice(g.places)[2]
    return base + ("" if g.zh else " ") + g.rng.choice(g.v["company_types"])


def _work(g: _Generator, key: str, years: _Years) -> str:
    """Title of a book or painting (italicised in English)."""
    if g.zh:
        return g.rng.choice(g.v["work_title"])
    return f"''The {g.rng.choice(g.v['work_adj'])} {g.rng.choice(g.v['work_noun'])}''"


def _adj(g: _Generator, key: str, years: _Years) -> str:
    word = g.rng.choice(g.v["adj"])
    # Occasional emphasis, so italics also turn up mid-sentence.
    return f"''{word}''" if not g.zh and not g.plain and g.rng.random() < 0.04 else word


def _image(g: _Generator, key: str, years: _Years) -> str:
    """File name of a picture of the subject, remembered for its ``File:`` page."""
    view = g.rng.choice(g.v["views"])
    name = f"{g.subj.title}{view}.jpg" if g.zh else f"{g.subj.title} {view}.jpg"
    g.subj.images.append(name)
    return name


def _url(g: _Generator, key: str, years: _Years) -> str:
    host = g.rng.choice(["www.example.org", "archive.example.com", "www.example.net"])
    words = g.rng.sample(g.en["vocab"]["noun"], 2)
    return f"http://{host}/{'-'.join(words)}/{g.rng.randint(100, 99999)}.html"


def _year(g: _Generator, key: str, years: _Years) -> str:
    """{year}, {year2}, {year3} ...: increasing years within one template."""
    return str(_nth_year(g, int(key[4:] or 1), years))


def _nth_year(g: _Generator, idx: int, years: _Years) -> int:
    if idx not in years:
        if idx == 1:
            lo, hi = 1650, 1985
            if g.subj is not None and g.subj.kind == "person":
                # Events of a life fall within it.
                lo, hi = int(g.subj.facts["byear"]) + 12, int(g.subj.facts["dyear"]) - 3
            years[idx] = g.rng.randint(lo, hi)
        else:
            years[idx] = min(2023, _nth_year(g, idx - 1, years) + g.rng.randint(2, 45))
    return years[idx]


def _decade(g: _Generator, key: str, years: _Years) -> str:
    decade = g.rng.randrange(1700, 1990, 10)
    return str(decade) if g.zh else f"{decade}s"


def _century(g: _Generator, key: str, years: _Years) -> str:
    c = g.rng.randint(15, 20)
    return str(c) if g.zh else f"{c}th"


def _month(g: _Generator, key: str, years: _Years) -> str:
    m = g.rng.randint(1, 12)
    return str(m) if g.zh else g.d["months"][m - 1]


def _sigdate(g: _Generator, key: str, years: _Years) -> str:
    """Timestamp of a talk-page signature."""
    day = _dt.date(g.rng.randint(2008, 2022), g.rng.randint(1, 12), g.rng.randint(1, 28))
    hh, mm = g.rng.randint(0, 23), g.rng.randint(0, 59)
    if g.zh:
        weekday = "一二三四五六日"[day.weekday()]
        return f"{day.year}年{day.month}月{day.day}日 ({weekday}) {hh:02d}:{mm:02d}"
    return f"{hh:02d}:{mm:02d}, {day.day} {g.d['months'][day.month - 1]} {day.year}"


def _ranged(lo: int, hi: int) -> _Filler:
    """A filler writing a whole number in [lo, hi] (English adds thousands separators)."""
    return lambda g, key, years: g._int(g.rng.randint(lo, hi))


def _length(g: _Generator, key: str, years: _Years) -> str:
    # Used as "a {length}-kilometre river": skip numbers that would need "an".
    while True:
        n = str(g.rng.randint(20, 900))
        if not (n.startswith("8") or n in ("11", "18")):
            return n


def _pages(g: _Generator, key: str, years: _Years) -> str:
    first = g.rng.randint(1, 400)
    return f"{first}–{first + g.rng.randint(2, 40)}"


def _area(g: _Generator, key: str, years: _Years) -> str:
    n = g.rng.randint(2, 3000)
    r = g.rng.random()
    if r < 0.3:
        return f"{{{{convert|{n}|km2|sqmi}}}}"
    if r < 0.7 or g.plain:
        return f"{g._int(n)}平方公里" if g.zh else f"{g._int(n)} km²"
    return f"{g._int(n)}&nbsp;km<sup>2</sup>"


def _discharge(g: _Generator, key: str, years: _Years) -> str:
    n = g.rng.randint(3, 900)
    r = g.rng.random()
    if r < 0.4:
        return f"{{{{convert|{n}|m3/s|cuft/s}}}}"
    return f"{n}立方米每秒" if g.zh and r < 0.7 else f"{n}&nbsp;m<sup>3</sup>/s"


# Placeholder name (without digits and ``_plain``) -> its filler. A placeholder that
# is neither a subject fact nor listed here is a word from the vocabulary list of
# that name in the language data ("{noun}", "{quote}" ...).
_FILLERS: dict[str, _Filler] = {
    # The article's subject.
    "T": lambda g, key, years: g.subj.title,
    "name": lambda g, key, years: g.subj.base,
    "S": lambda g, key, years: _refer(g, g.subj.refs_cap),
    "s": lambda g, key, years: _refer(g, g.subj.refs_low),
    "Pron": _pronoun,
    "pron": _pronoun,
    "home": _home,
    "region": _region,
    "nationality": _nationality,
    # Other places, people and things.
    "country": lambda g, key, years: g._link(g.rng.choice(g.d["countries"])[0], 0.3),
    "direction": lambda g, key, years: g.rng.choice(g.d["directions"]),
    "place": lambda g, key, years: _pick(g, g.places, 0.35),
    "river": lambda g, key, years: _pick(g, g.rivers, 0.3),
    "lake": lambda g, key, years: _pick(g, g.lakes, 0.3),
    "mountain": lambda g, key, years: _pick(g, g.mountains, 0.3),
    "org": lambda g, key, years: _pick(g, g.orgs, 0.25),
    "article": lambda g, key, years: g.rng.choice(g.articles).title,  # plain: callers wrap it
    "person": _person,
    "lastname": lambda g, key, years: (
        g.rng.choice(g.d["surnames"]) if g.zh else g.rng.choice(g.people).split(" ", 1)[1]
    ),
    "firstname": lambda g, key, years: (
        g.rng.choice(g.d["given"]) if g.zh else g.rng.choice(g.people).split(" ", 1)[0]
    ),
    "user": lambda g, key, years: g.rng.choice(g.d["usernames"]),
    "university": _university,
    "hills": _hills,
    "range": _range,
    "company": _company,
    "oldname": lambda g, key, years: g._invent(),
    "work": _work,
    "book_title": lambda g, key, years: _work(g, key, years).strip("'"),
    "adj": _adj,
    # Files, links and identifiers.
    "image": _image,
    "extlink": lambda g, key, years: f"[{_url(g, key, years)} {g.rng.choice(g.v['link_labels'])}]",
    "url": _url,
    "isbn": lambda g, key, years: (
        f"978-{g.rng.randint(0, 1)}-{g.rng.randint(1000, 9999)}-{g.rng.randint(1000, 9999)}-{g.rng.randint(0, 9)}"
    ),
    "doi": lambda g, key, years: (
        f"{g.rng.randint(1000, 9999)}/{g.rng.choice('abcdefghjk')}{g.rng.randint(10000, 99999)}"
    ),
    # Years and dates.
    "year": _year,
    "tagyear": lambda g, key, years: str(g.rng.randint(2010, 2023)),
    "tagmonth": lambda g, key, years: f"{g.rng.randint(1, 12):02d}",
    "tagday": lambda g, key, years: f"{g.rng.randint(1, 28):02d}",
    "pubyear": lambda g, key, years: str(g.rng.randint(1850, 2022)),
    "decade": _decade,
    "century": _century,
    "month": _month,
    "date": lambda g, key, years: g._format_date(
        g.rng.randint(1700, 2020), g.rng.randint(1, 12), g.rng.randint(1, 28)
    ),
    "access_date": lambda g, key, years: g._format_date(
        g.rng.randint(2008, 2023), g.rng.randint(1, 12), g.rng.randint(1, 28)
    ),
    "iso_date": lambda g, key, years: (
        f"{g.rng.randint(2005, 2022)}-{g.rng.randint(1, 12):02d}-{g.rng.randint(1, 28):02d}"
    ),
    "sigdate": _sigdate,
    # Numbers.
    "num": _ranged(2, 40),
    "hours": _ranged(2, 14),
    "rain": _ranged(300, 2600),
    "cm": _ranged(3, 90),
    "grams": _ranged(5, 900),
    "page": _ranged(3, 480),
    "length": _length,
    "height": lambda g, key, years: str(g.rng.randint(300, 4800)),
    "pages": _pages,
    "big": lambda g, key, years: g._int(
        g.rng.choice([g.rng.randint(120, 9999), g.rng.randint(10000, 250000)])
    ),
    "pct": lambda g, key, years: f"{g.rng.uniform(1.5, 85):.1f}",
    "decimal": lambda g, key, years: f"{g.rng.uniform(1.2, 40):.1f}",
    "money": lambda g, key, years: str(g.rng.randint(100, 9000)) if g.zh else f"{g.rng.uniform(1.2, 95):.1f}",
    # Measurements, written the several ways articles write them.
    "km": lambda g, key, years: g._measure(g.rng.randint(5, 900), "km", "mi", "公里"),
    "km_convert": lambda g, key, years: f"{{{{convert|{g.rng.randint(20, 900)}|km|mi|abbr=on}}}}",
    "num_m": lambda g, key, years: g._measure(g.rng.randint(8, 4800), "m", "ft", "米"),
    "area": _area,
    "discharge": _discharge,
}


def _capitalize(s: str) -> str:
    """Upper-case a sentence's first letter (templates may start with "it")."""
    return s[0].upper() + s[1:] if s and s[0].islower() else s


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


def _build_pages(gen: _Generator, num_articles: int) -> list[_Page]:
    """All pages of the dump, in no particular order yet."""
    rng = gen.rng
    gen._make_pools()

    # The first articles share one name, so that the disambiguation page lists
    # real articles (a river, a town and a mountain called "Varn").
    shared = gen._new_base()
    forced = ["river", "settlement", "mountain"][:num_articles]
    kinds = forced + rng.choices(
        list(_KIND_WEIGHTS), weights=list(_KIND_WEIGHTS.values()), k=num_articles - len(forced)
    )
    subjects = [
        gen._make_subject(kind, base=shared, comma_title=True) if i < len(forced) else gen._make_subject(kind)
        for i, kind in enumerate(kinds)
    ]
    stub_subj = gen._make_subject("settlement")
    # Link targets, "See also" entries, talk pages ... need at least one topic.
    gen.articles = subjects or [stub_subj]
    # Article topics become link targets of other articles' sentences.
    for s in subjects:
        entry = (s.title, s.short if s.kind == "settlement" else s.title, s.base)
        pool = {
            "settlement": gen.places,
            "river": gen.rivers,
            "lake": gen.lakes,
            "mountain": gen.mountains,
            "organization": gen.orgs,
        }.get(s.kind)
        if pool is not None:
            pool.append(entry)
        elif s.kind == "person":
            gen.people.append(s.title)

    pages = [_Page(s.title, 0, gen.article(s, showcase=(i == 0))) for i, s in enumerate(subjects)]

    # Special namespace-0 pages: empty, stub, disambiguation.
    empty_base = gen._new_base()
    empty_title = empty_base + "湾" if gen.zh else f"{empty_base} Cove"
    gen._claim(empty_title)
    pages.append(_Page(empty_title, 0, ""))
    pages.append(_Page(stub_subj.title, 0, gen.stub(stub_subj)))
    entries = [s for s in subjects if s.base == shared] or [stub_subj]
    disambig_title = shared if gen._claim(shared) else f"{shared} (disambiguation)"
    pages.append(_Page(disambig_title, 0, gen.disambiguation(shared, entries)))

    targets = gen.articles
    shuffled = rng.sample(targets, len(targets))
    for i in range(num_redirects(num_articles)):
        target = shuffled[i % len(shuffled)]
        title, text = gen.redirect(target)
        pages.append(_Page(title, 0, text, redirect=target.title))

    pages.extend(_other_namespace_pages(gen, targets))
    return pages


def _other_namespace_pages(gen: _Generator, subjects: list[_Subject]) -> list[_Page]:
    """Talk, User, Wikipedia, File, Template and Category pages."""
    rng, p = gen.rng, gen.d["pages"]
    out: list[_Page] = []
    shuffled = rng.sample(subjects, len(subjects))
    for i in range(OTHER_NAMESPACE_PAGES[1]):
        subj = gen.subj = shuffled[i % len(shuffled)]
        title = f"Talk:{subj.title}"
        if not gen._claim(title):  # fewer articles than talk pages: add an archive
            title = f"{title}/Archive {i}"
            gen._claim(title)
        out.append(_Page(title, 1, gen.fill(p["talk"])))

    for user in rng.sample(gen.d["usernames"], OTHER_NAMESPACE_PAGES[2]):
        gen.subj = rng.choice(subjects)
        out.append(_Page(f"User:{user}", 2, gen.fill(p["user"], {"user": user})))

    countries = rng.sample(gen.d["countries"], OTHER_NAMESPACE_PAGES[4])
    for country, _ in countries:
        gen.subj = rng.choice(subjects)
        name = f"Wikipedia:{country}专题" if gen.zh else f"Wikipedia:WikiProject {country}"
        out.append(_Page(name, 4, gen.fill(p["project"], {"home_plain": country})))

    with_images = [s for s in subjects if s.images] or subjects
    for subj in rng.sample(with_images, OTHER_NAMESPACE_PAGES[6]):
        gen.subj = subj
        image = subj.images[0] if subj.images else gen.fill("{image}")
        cat = subj.categories[0] if subj.categories else "Images"
        caption = gen.fill(rng.choice(gen.v["caption"]))
        text = gen.fill(p["file"], {"cat": cat, "caption_plain": _strip_links(caption)})
        out.append(_Page(f"File:{image}", 6, text))

    gen.subj = subjects[0]
    infobox_name = gen.d["infobox"][subjects[0].kind]["template"]
    tpl_titles = [f"Template:{infobox_name}"]
    stub_country = gen._country(subjects[0].home)[0]
    tpl_titles.append(f"Template:{stub_country}-geo-stub")
    out.append(_Page(tpl_titles[0], 10, p["infobox_template"]))
    out.append(
        _Page(
            tpl_titles[1],
            10,
            gen.fill(p["stub_template"], {"tpl_title": tpl_titles[1], "home_plain": stub_country}),
        )
    )

    seen: set[str] = set()
    cats = []
    for subj in subjects:
        for cat in subj.categories:
            if cat not in seen:
                seen.add(cat)
                cats.append((cat, subj))
    for country, _ in gen.d["countries"]:  # tiny dumps: fall back to country categories
        if len(cats) >= OTHER_NAMESPACE_PAGES[14]:
            break
        gen.subj = subjects[0]
        cat = gen.fill(p["parentcat"], {"home_plain": country})
        if cat not in seen:
            seen.add(cat)
            cats.append((cat, subjects[0]))
    for cat, subj in rng.sample(cats, OTHER_NAMESPACE_PAGES[14]):
        gen.subj = subj
        extra = {"cat": cat, "article": subj.title}
        extra["catdesc"] = gen.fill(p["catdesc"], extra)
        extra["parentcat"] = gen.fill(p["parentcat"])
        out.append(_Page(f"Category:{cat}", 14, gen.fill(p["category"], extra)))
    return out


def _strip_links(s: str) -> str:
    """``[[a|b]]`` -> ``b``, ``[[a]]`` -> ``a`` (for template parameters)."""
    return re.sub(r"\[\[(?:[^|\]]*\|)?([^\]]*)\]\]", r"\1", s)


def _render(pages: list[_Page], gen: _Generator, lang: str) -> str:
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


# ---------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------


def generate_wiki_xml(num_articles: int = 60, seed: int = 0, language: str = "en") -> str:
    """Return the text of a synthetic MediaWiki XML dump (schema export-0.10).

    Args:
        num_articles: ordinary articles to write (>= 0). The dump also holds an
            empty article, a stub, a disambiguation page, ``num_redirects(n)``
            redirects and the pages of :data:`OTHER_NAMESPACE_PAGES`.
        seed: seed of the random generator; equal arguments give equal output.
        language: ``"en"`` (enwiki-like) or ``"zh"`` (zhwiki-like).
    """
    if language not in LANGUAGES:
        raise ValueError(f"language must be one of {LANGUAGES}, not {language!r}")
    if num_articles < 0:
        raise ValueError("num_articles must be >= 0")
    gen = _Generator(_language_data(language), random.Random(f"{language}:{seed}"))
    pages = _build_pages(gen, num_articles)
    return _render(pages, gen, language)


def write_sample_dump(
    path: str | os.PathLike,
    num_articles: int = 60,
    seed: int = 0,
    language: str = "en",
    compress: bool | None = None,
) -> pathlib.Path:
    """Write :func:`generate_wiki_xml` output to ``path`` and return the path.

    The file is bz2-compressed when ``compress`` is true, or when it is None and
    the path ends with ``.bz2``. Missing parent directories are created.
    """
    out = pathlib.Path(path)
    if compress is None:
        compress = out.name.endswith(".bz2")
    data = generate_wiki_xml(num_articles, seed, language).encode("utf-8")
    if compress:
        data = bz2.compress(data, compresslevel=9)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(data)
    return out


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point: write a sample dump to OUT_PATH."""
    parser = argparse.ArgumentParser(
        prog="python -m data_prep.sample_corpus",
        description="Write a synthetic MediaWiki XML dump (no real Wikipedia text).",
    )
    parser.add_argument("out_path", metavar="OUT_PATH", help="output file; .bz2 suffix compresses")
    parser.add_argument("--articles", type=int, default=60, help="number of ordinary articles (default 60)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--language", choices=LANGUAGES, default="en", help="content language (default en)")
    args = parser.parse_args(argv)
    if args.articles < 0:
        parser.error("--articles must be >= 0")
    out = write_sample_dump(args.out_path, args.articles, args.seed, args.language)
    print(f"wrote {out} ({out.stat().st_size} bytes)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
