"""The writer of one dump's wikitext, from a language's word lists and templates.

:class:`Generator` invents the names a dump mentions and the topics of its articles,
and writes the text of articles, the stub, the disambiguation page and redirects.
Every random draw comes from one ``random.Random`` in a fixed order, so the text
depends only on the seed.

The words and templates are package data, one JSON file per language
(``data_prep/sample_corpus/data/en.json`` and ``zh.json``), with these keys:

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
subject (birth year, genus ...), else by its filler in
:data:`data_prep.sample_corpus.fillers.FILLERS` (names, links, numbers, dates),
else with a random word of ``vocab[key]``. A digit suffix asks for another value of
the same sort (``{industry2}`` differs from ``{industry}``, ``{year2}`` is later
than ``{year}``); a ``_plain`` suffix asks for text without wiki links.
"""

from __future__ import annotations

import functools
import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, TypeVar

from data_prep.sample_corpus.fillers import FILLERS

T = TypeVar("T")

# Hand-aligned data tables are kept out of the formatter.
# fmt: off

# The template group each article kind shares sentences with ("geo" sentences suit
# rivers, lakes, mountains and towns).
KIND_GROUP = {
    "settlement": "geo", "river": "geo", "lake": "geo", "mountain": "geo",
    "person": "bio", "species": "thing", "invention": "thing",
    "organization": "thing", "battle": "event",
}

# fmt: on

# The most ordinary articles one dump may hold: generation keeps the whole dump in
# memory (50,000 articles: 330 MB of XML, about 2.7 GB of Python objects). Larger
# corpora are several dumps with different seeds.
MAX_ARTICLES = 50_000

# Sentence-count bounds for one ordinary article (lead plus body sections).
_MIN_SENTENCES, _MAX_SENTENCES = 15, 60

# A placeholder is ``{key}``; the look-behind leaves wiki templates and template
# parameters (``{{reflist}}``, ``{{{name|}}}``) alone.
PLACEHOLDER = re.compile(r"(?<!\{)\{([A-Za-z][A-Za-z_]*[0-9]*)\}")


@functools.cache
def language_data(language: str) -> dict[str, Any]:
    """Word lists and templates of ``language``, read from ``data/<language>.json``.

    The file is package data, read through :mod:`importlib.resources`, so this works
    from a checkout, an editable install and an installed wheel alike. It is read once
    per process; the returned dict is shared, so callers must not modify it.
    """
    path = resources.files("data_prep.sample_corpus") / "data" / f"{language}.json"
    return json.loads(path.read_text(encoding="utf-8"))


class Excluding(Sequence[T]):
    """``[x for i, x in enumerate(items) if i not in skip]`` without the copy.

    ``random.choice`` and ``random.sample`` draw the same indices from it as from
    the copy, so a dump's text is unchanged, and each draw costs O(len(skip))
    instead of O(len(items)): the copies made dumps of thousands of articles
    quadratic."""

    def __init__(self, items: Sequence[T], skip: Sequence[int]) -> None:
        self.items, self.skip = items, sorted(skip)

    def __len__(self) -> int:
        return len(self.items) - len(self.skip)

    def __getitem__(self, index: int) -> T:  # type: ignore[override]
        if not 0 <= index < len(self):
            raise IndexError(index)
        for position in self.skip:
            if position > index:
                break
            index += 1
        return self.items[index]


@dataclass
class Subject:
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
class ArticleState:
    """Per-article bookkeeping while writing its text."""

    named_refs: list[str] = field(default_factory=list)  # defined so far, reusable
    want_notes: bool = False  # the article has a Notes section, so {{efn}} may appear


class Generator:
    """Writes the pages of one dump in one language from a seeded random generator.

    It invents the names the dump mentions (:meth:`make_pools`) and the topics of
    its articles (:meth:`make_subject`), and writes the wikitext of articles
    (:meth:`article`), the stub, the disambiguation page and redirects;
    :func:`data_prep.sample_corpus.pages.build_pages` drives it. Every random
    draw comes from ``rng`` in a fixed order, so the text depends only on the seed.
    """

    def __init__(self, data: dict[str, Any], rng: random.Random) -> None:
        self.d = data
        self.v: dict[str, list[str]] = data["vocab"]
        self.en = language_data("en")  # English words also appear in Chinese pages
        self.rng = rng
        self.zh = data["code"] == "zh"
        self.used_titles: set[str] = set()
        self.used_bases: set[str] = set()
        # Where each title sits in each name pool: (pool length when indexed, index).
        self._pool_index: dict[int, tuple[int, dict[str, list[int]]]] = {}
        # The titles of ``articles`` and where each subject is, for :meth:`other_titles`.
        self._articles_index: tuple[tuple[int, int], list[str], dict[int, int]] = ((0, -1), [], {})
        self.name_syllables = 1  # of the names new_base invents now
        self.long_person_names = False  # set once the usual forms have run out
        self.subj: Subject | None = None
        self.deck: list[str] = []  # sentence templates not yet used in this article
        self.plain = False  # set while a ``*_plain`` placeholder is being filled
        self.articles: list[Subject] = []
        # Pools of names that recur across articles, as (link target, label, base).
        self.places: list[tuple[str, str, str]] = []
        self.rivers: list[tuple[str, str, str]] = []
        self.lakes: list[tuple[str, str, str]] = []
        self.mountains: list[tuple[str, str, str]] = []
        self.orgs: list[tuple[str, str, str]] = []
        self.people: list[str] = []

    # -- names ---------------------------------------------------------------

    def new_base(self) -> str:
        """A fresh invented name ("Varn", "青石"), never used before in this dump.

        Short names run out after a few hundred articles (600 English, 1,560
        Chinese); then names get a second part ("Varnbelford", "青石安"), then a
        third. The short draws come first, so a dump small enough for them is
        unchanged."""
        while self.name_syllables <= 3:
            for _ in range(1000):
                base = self.invent(self.name_syllables)
                if base not in self.used_bases:
                    self.used_bases.add(base)
                    return base
            self.name_syllables += 1  # 1,000 draws in a row were taken: this length is spent
        raise ValueError(f"ran out of invented names after {len(self.used_bases)}: "
                         f"ask for at most {MAX_ARTICLES} articles")

    def invent(self, syllables: int = 1) -> str:
        """An invented name ("Varn", "青石"; with 2, "Varnbelford", "青石安"),
        possibly one used before."""
        if self.zh:
            return "".join(self.rng.sample(self.d["chars"], 1 + syllables))
        parts = [self.rng.choice(self.d["onsets"]) + self.rng.choice(self.d["codas"]) for _ in range(syllables)]
        return parts[0] + "".join(part.lower() for part in parts[1:])

    def without_subject(self, pool: list[tuple[str, str, str]]) -> Sequence[tuple[str, str, str]]:
        """``pool``'s entries not titled as the article being written, or the
        whole pool when that would leave none."""
        if self.subj is None:
            return pool
        length, index = self._pool_index.get(id(pool), (-1, {}))
        if length != len(pool):  # pools only grow before articles are written
            index = {}
            for i, entry in enumerate(pool):
                index.setdefault(entry[0], []).append(i)
            self._pool_index[id(pool)] = (len(pool), index)
        skip = index.get(self.subj.title, [])
        return Excluding(pool, skip) if len(skip) < len(pool) else pool

    def other_titles(self, subj: Subject) -> Excluding[str]:
        """The titles of :attr:`articles` but ``subj``'s, in order."""
        key = (id(self.articles), len(self.articles))
        if self._articles_index[0] != key:
            titles = [a.title for a in self.articles]
            self._articles_index = (key, titles, {id(a): i for i, a in enumerate(self.articles)})
        _, titles, where = self._articles_index
        return Excluding(titles, [where[id(subj)]] if id(subj) in where else [])

    def claim(self, title: str) -> bool:
        if title in self.used_titles:
            return False
        self.used_titles.add(title)
        return True

    def country_pair(self, idx: int) -> tuple[str, str]:
        """(country, demonym) of country number ``idx``."""
        country, dem = self.d["countries"][idx]
        return country, dem

    def _new_person_name(self) -> tuple[str, str, str]:
        """(full name, first name, last name), unique within the dump.

        The usual forms (3,400 English names, 6,400 Chinese) run out in dumps of
        thousands of articles; after 1,000 taken draws in a row, English last names
        become two-syllable invented names ("Varnbelford") and Chinese given names
        three characters."""
        taken = 0
        while True:
            full, first, last = self._person_name()
            if self.claim(full):
                return full, first, last
            taken += 1
            if taken == 1000:
                if self.long_person_names:
                    raise ValueError(f"ran out of person names: ask for at most {MAX_ARTICLES} articles")
                self.long_person_names, taken = True, 0

    def _person_name(self) -> tuple[str, str, str]:
        if self.zh:
            last = self.rng.choice(self.d["surnames"])
            length = 3 if self.long_person_names else self.rng.choice([1, 2])
            first = "".join(self.rng.sample(self.d["given"], length))
            return last + first, first, last
        first = self.rng.choice(self.d["first_names"])
        if self.long_person_names:
            last = self.invent(2)
        elif self.rng.random() < 0.6:
            last = self.rng.choice(self.d["last_names"])
        else:
            last = self.rng.choice(self.d["onsets"]) + self.rng.choice(self.d["last_suffixes"])
        return f"{first} {last}", first, last

    def make_pools(self) -> None:
        """Background names (places, people ...) that sentences mention."""
        for _ in range(30):
            base = self.new_base()
            label = base + self.rng.choice(["镇", "县", "市", "村"]) if self.zh else base
            self.places.append((label, label, base))
        named = (
            (self.rivers, 10, "{} River", "河"),
            (self.lakes, 6, "Lake {}", "湖"),
            (self.mountains, 6, "Mount {}", "山"),
        )
        for pool, count, en_pattern, zh_suffix in named:
            for _ in range(count):
                base = self.new_base()
                name = base + zh_suffix if self.zh else en_pattern.format(base)
                pool.append((name, name, base))
        for _ in range(8):
            self.orgs.append(self._org_name())
        for _ in range(30):
            self.people.append(self._new_person_name()[0])

    def _org_name(self) -> tuple[str, str, str]:
        while True:
            base = self.new_base()
            country, dem = self.country_pair(self.rng.randrange(len(self.d["countries"])))
            pattern = self.rng.choice(self.d["org_patterns"])
            name = pattern.replace("{base}", base).replace("{country}", country).replace("{dem}", dem)
            if self.claim(name):
                return name, name, base

    # -- subjects ------------------------------------------------------------

    def make_subject(self, kind: str, base: str | None = None, comma_title: bool = False) -> Subject:
        """Invent an article topic of ``kind``; ``base`` forces its name."""
        rng = self.rng
        home = rng.randrange(len(self.d["countries"]))
        country, dem = self.country_pair(home)
        facts: dict[str, str] = {}
        while True:
            b = base or self.new_base()
            title, short, cap, low = self._title_for(kind, b, (country, dem), comma_title, facts)
            if self.claim(title):
                break
            base = None  # forced name collided; fall back to a fresh one
        subj = Subject(kind, title, b, short, home, cap, low, facts, mdy=self.rng.random() < 0.4)
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
            generic = self.d["kind_refs"]  # how the text says "it" of each kind
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

    def _add_facts(self, subj: Subject) -> None:
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
                bdate=self.format_date(birth, bm, bd),
                ddate=self.format_date(death, dm, dd),
                bdate_tpl=f"{{{{birth date|{birth}|{bm}|{bd}}}}}",
                ddate_tpl=f"{{{{death date and age|{death}|{dm}|{dd}|{birth}|{bm}|{bd}}}}}",
            )
        year = rng.randint(1650, 1960)
        f.setdefault("fyear", str(year))
        f.setdefault("fdate", self.format_date(year, rng.randint(1, 12), rng.randint(1, 28)))
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

    def format_date(self, y: int, m: int, d: int) -> str:
        if self.zh:
            return f"{y}年{m}月{d}日"
        month = self.d["months"][m - 1]
        return f"{month} {d}, {y}" if self.subj is not None and self.subj.mdy else f"{d} {month} {y}"

    def number(self, n: int) -> str:
        return str(n) if self.zh else f"{n:,}"

    def measure(self, n: int, unit: str, convert_to: str, zh_unit: str) -> str:
        """A measurement written one of the ways real articles write it."""
        r = self.rng.random()
        if r < 0.35:
            return f"{{{{convert|{n}|{unit}|{convert_to}}}}}"
        if r < 0.55:
            return f"{self.number(n)}&nbsp;{zh_unit if self.zh else unit}"
        return f"{self.number(n)}{zh_unit}" if self.zh else f"{self.number(n)} {unit}"

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

        return PLACEHOLDER.sub(repl, template)

    def _value(self, key: str, years: dict[int, int]) -> str:
        """One placeholder's text: a fact of the subject, else the output of its
        filler in :data:`FILLERS`, else a word from the vocabulary list of that name."""
        plain = key.endswith("_plain")
        name = key[: -len("_plain")] if plain else key
        base = name.rstrip("0123456789")
        outer, self.plain = self.plain, self.plain or plain
        try:
            subj = self.subj
            if subj is not None and name in subj.facts:
                return subj.facts[name]
            filler = FILLERS.get(base)
            if filler is not None:
                return filler(self, name, years)
            if base in self.v:
                word = self.rng.choice(self.v[base])
                # Vocabulary entries may themselves contain placeholders.
                return self.fill(word) if "{" in word else word
            raise KeyError(f"unknown placeholder {{{key}}}")
        finally:
            self.plain = outer

    def link(self, target: str, p: float, label: str | None = None) -> str:
        """``label``, as a link to ``target`` with probability ``p`` (never in plain text)."""
        label = target if label is None else label
        if self.plain or self.rng.random() >= p:
            return label
        return f"[[{target}]]" if target == label else f"[[{target}|{label}]]"

    # -- sentences, paragraphs, sections -------------------------------------------

    def _templates_for(self, kind: str) -> list[str]:
        """Sentence templates an article of ``kind`` draws from."""
        tags = ("any", KIND_GROUP[kind], kind)
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
        return capitalize(self.fill(tmpl))

    def _citation(self) -> str:
        return self.fill(self.rng.choice(self.d["citations"]))

    def _ref(self, art: ArticleState) -> str:
        """A footnote: a new (possibly named) ``<ref>`` or a reuse ``<ref name=... />``."""
        r = self.rng.random()
        if art.named_refs and r < 0.25:
            return f'<ref name="{self.rng.choice(art.named_refs)}" />'
        if r < 0.5:
            name = f"{self.rng.choice(self.en['last_names']).lower()}{len(art.named_refs) + 1}"
            art.named_refs.append(name)
            return f'<ref name="{name}">{self._citation()}</ref>'
        return f"<ref>{self._citation()}</ref>"

    def _after_sentence(self, art: ArticleState) -> str:
        """Footnotes and inline maintenance templates that follow a sentence."""
        out = ""
        if art.want_notes and self.rng.random() < 0.07:
            out += f"{{{{efn|{self.fill(self.rng.choice(self.v['note_text']))}}}}}"
        if self.rng.random() < 0.22:
            out += self._ref(art)
        elif self.rng.random() < 0.02:
            out += self.fill(self.d["citation_needed"])
        return out

    def _paragraph(self, n: int, pool: list[str], art: ArticleState, first: str | None = None) -> str:
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

    def _table(self, art: ArticleState) -> str:
        t = self.d["tables"]
        rows: list[str] = []
        if self.subj.kind == "settlement":
            caption, headers = t["caption_pop"], t["headers_pop"]
            pop = self.rng.randint(300, 20000)
            for year in sorted(self.rng.sample(range(1850, 2021, 10), self.rng.randint(3, 6))):
                new = max(50, int(pop * self.rng.uniform(0.85, 1.5)))
                change = f"{(new - pop) / pop * 100:+.1f}%"
                pop = new
                rows.append(f"| {year} || {self.number(pop)} || {change}")
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
            lines.append("* " + capitalize(self.fill(self.rng.choice(self.v["list_item"]))))
            if self.rng.random() < 0.15:
                lines.append("** " + capitalize(self.fill(self.rng.choice(self.v["list_item"]))))
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

    def article(self, subj: Subject, showcase: bool = False) -> str:
        """Full wikitext of an ordinary article.

        ``showcase`` forces every optional construct on, so even a one-article
        dump contains all the markup a cleaner must handle.
        """
        rng, d = self.rng, self.d
        self.subj = subj
        self.deck = []
        art = ArticleState()

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

        lead_first = capitalize(self.fill(rng.choice(d["leads"][subj.kind])))
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

    def _infobox(self, subj: Subject) -> str:
        box = self.d["infobox"][subj.kind]
        fields: dict[str, str] = box["fields"]
        width = max(map(len, fields))
        lines = ["{{" + box["template"]]
        for key, value in fields.items():
            lines.append(f"| {key.ljust(width)} = {self.fill(value)}")
        lines.append("}}")
        return "\n".join(lines)

    def _trailing(self, key: str, subj: Subject) -> str:
        d, rng = self.d, self.rng
        head = self._heading(d["trailing"][key], 2)
        if key == "see_also":
            others = self.other_titles(subj)
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

    def _bottom(self, subj: Subject, showcase: bool) -> str:
        """Stub notice, DEFAULTSORT and categories that end an article."""
        lines: list[str] = []
        country = self.country_pair(subj.home)[0]
        stub = self.d["stub_suffix"].get(subj.kind)
        if stub and (showcase or self.rng.random() < 0.25):
            lines.append("{{" + f"{country}-{stub}-stub" + "}}")
        if subj.kind == "person":
            lines.append(f"{{{{DEFAULTSORT:{subj.facts['sortkey']}}}}}")
        cats = [self.fill(c) for c in self.d["categories"][subj.kind]]
        subj.categories = cats
        lines.extend(f"[[Category:{c}]]" for c in cats)
        return "\n".join(lines)

    def stub(self, subj: Subject) -> str:
        self.subj = subj
        return self.fill(self.d["pages"]["stub"])

    def disambiguation(self, base: str, entries: list[Subject]) -> str:
        """The wikitext of a disambiguation page for ``base`` listing ``entries``."""
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

    def redirect(self, target: Subject) -> tuple[str, str]:
        """(redirect title, wikitext) pointing at ``target``."""
        pages, rng = self.d["pages"], self.rng
        title = self._redirect_title(target)
        anchor = f"#{target.headings[0]}" if target.headings and rng.random() < 0.2 else ""
        text = f"{rng.choice(pages['redirect_word'])} [[{target.title}{anchor}]]"
        if rng.random() < 0.6:
            text += "\n\n" + pages["redirect_tail"]
        return title, text

    def _redirect_title(self, subj: Subject) -> str:
        b, country = subj.base, self.country_pair(subj.home)[0]
        if self.zh:
            # zhwiki is full of redirects from Traditional-character titles.
            kind_word = self.d["kind_nouns"].get(subj.kind) or subj.facts.get("profession", "人物")
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
            if cand and cand != subj.title and self.claim(cand):
                return cand
        for i in range(2, 1000):
            cand = f"{subj.title} ({i})"
            if self.claim(cand):
                return cand
        raise RuntimeError("no free redirect title")



def capitalize(s: str) -> str:
    """Upper-case a sentence's first letter (templates may start with "it")."""
    return s[0].upper() + s[1:] if s and s[0].islower() else s

