"""Placeholder fillers: the text of ``{key}`` placeholders that are not plain words.

A filler gets the generator, the key without its ``_plain`` suffix ("year2"), and
the years already drawn for the template being filled (so that {year} < {year2}
within one sentence). :data:`FILLERS` maps a placeholder name (without digits and
``_plain``) to its filler; a placeholder that is neither a subject fact nor listed
there is a word from the vocabulary list of that name in the language data
("{noun}", "{quote}" ...).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from data_prep.sample_corpus.generator import Generator

_Years = dict[int, int]
Filler = Callable[["Generator", str, _Years], str]


def _refer(g: Generator, refs: list[str]) -> str:
    """One of the ways to name the subject, its name most often."""
    return g.rng.choices(refs, weights=[5, 3, 2][: len(refs)])[0]


def _pronoun(g: Generator, key: str, years: _Years) -> str:
    # English persons carry Pron/pron in their facts; Chinese has one form.
    return g.subj.facts.get("pron", "它")


def _home(g: Generator, key: str, years: _Years) -> str:
    return g.link(g.country_pair(g.subj.home)[0], 0.3)


def _region(g: Generator, key: str, years: _Years) -> str:
    home = _home(g, key, years)
    if g.zh:
        return f"{home}{g.rng.choice(g.d['region_dirs'])}部"
    return f"{g.rng.choice(g.d['direction_adjs'])} {home}"


def _nationality(g: Generator, key: str, years: _Years) -> str:
    country, dem = g.country_pair(g.subj.home)
    return g.link(country, 0.2, country if g.zh else dem)


def _pick(g: Generator, pool: list[tuple[str, str, str]], p: float) -> str:
    """A (possibly linked) name from ``pool``, other than the subject itself."""
    target, label, _ = g.rng.choice(g.without_subject(pool))
    return g.link(target, p, label)


def _person(g: Generator, key: str, years: _Years) -> str:
    full = g.rng.choice(g.people)
    if g.plain or g.zh:
        return g.link(full, 0.25)
    r = g.rng.random()
    if r < 0.1:
        return "Dr. " + g.link(full, 0.25)
    if r < 0.2:
        first, last = full.split(" ", 1)
        middle = g.rng.choice("ABCDEFGHJKLMNPRSTW")
        return g.link(full, 0.2, f"{first[0]}. {middle}. {last}")
    return g.link(full, 0.25)


def _university(g: Generator, key: str, years: _Years) -> str:
    _, label, base = g.rng.choice(g.places)
    name = f"{base}大学" if g.zh else f"University of {label}"
    return g.link(name, 0.2)


def _hills(g: Generator, key: str, years: _Years) -> str:
    base = g.rng.choice(g.places)[2]
    return f"{base}丘陵" if g.zh else f"{base} Hills"


def _range(g: Generator, key: str, years: _Years) -> str:
    base = g.rng.choice(g.mountains)[2]
    name = f"{base}山脉" if g.zh else f"{base} {g.rng.choice(['Mountains', 'Range'])}"
    return g.link(name, 0.3)


def _company(g: Generator, key: str, years: _Years) -> str:
    base = g.rng.choice(g.places)[2]
    return base + ("" if g.zh else " ") + g.rng.choice(g.v["company_types"])


def _work(g: Generator, key: str, years: _Years) -> str:
    """Title of a book or painting (italicised in English)."""
    if g.zh:
        return g.rng.choice(g.v["work_title"])
    return f"''The {g.rng.choice(g.v['work_adj'])} {g.rng.choice(g.v['work_noun'])}''"


def _adj(g: Generator, key: str, years: _Years) -> str:
    word = g.rng.choice(g.v["adj"])
    # Occasional emphasis, so italics also turn up mid-sentence.
    return f"''{word}''" if not g.zh and not g.plain and g.rng.random() < 0.04 else word


def _image(g: Generator, key: str, years: _Years) -> str:
    """File name of a picture of the subject, remembered for its ``File:`` page."""
    view = g.rng.choice(g.v["views"])
    name = f"{g.subj.title}{view}.jpg" if g.zh else f"{g.subj.title} {view}.jpg"
    g.subj.images.append(name)
    return name


def _url(g: Generator, key: str, years: _Years) -> str:
    host = g.rng.choice(["www.example.org", "archive.example.com", "www.example.net"])
    words = g.rng.sample(g.en["vocab"]["noun"], 2)
    return f"http://{host}/{'-'.join(words)}/{g.rng.randint(100, 99999)}.html"


def _year(g: Generator, key: str, years: _Years) -> str:
    """{year}, {year2}, {year3} ...: increasing years within one template."""
    return str(_nth_year(g, int(key[4:] or 1), years))


def _nth_year(g: Generator, idx: int, years: _Years) -> int:
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


def _decade(g: Generator, key: str, years: _Years) -> str:
    decade = g.rng.randrange(1700, 1990, 10)
    return str(decade) if g.zh else f"{decade}s"


def _century(g: Generator, key: str, years: _Years) -> str:
    c = g.rng.randint(15, 20)
    return str(c) if g.zh else f"{c}th"


def _month(g: Generator, key: str, years: _Years) -> str:
    m = g.rng.randint(1, 12)
    return str(m) if g.zh else g.d["months"][m - 1]


def _sigdate(g: Generator, key: str, years: _Years) -> str:
    """Timestamp of a talk-page signature."""
    day = _dt.date(g.rng.randint(2008, 2022), g.rng.randint(1, 12), g.rng.randint(1, 28))
    hh, mm = g.rng.randint(0, 23), g.rng.randint(0, 59)
    if g.zh:
        weekday = "一二三四五六日"[day.weekday()]
        return f"{day.year}年{day.month}月{day.day}日 ({weekday}) {hh:02d}:{mm:02d}"
    return f"{hh:02d}:{mm:02d}, {day.day} {g.d['months'][day.month - 1]} {day.year}"


def _ranged(lo: int, hi: int) -> Filler:
    """A filler writing a whole number in [lo, hi] (English adds thousands separators)."""
    return lambda g, key, years: g.number(g.rng.randint(lo, hi))


def _dated(first_year: int, last_year: int) -> Filler:
    """A filler writing a date between two years in the article's date style."""
    return lambda g, key, years: g.format_date(
        g.rng.randint(first_year, last_year), g.rng.randint(1, 12), g.rng.randint(1, 28)
    )


def _length(g: Generator, key: str, years: _Years) -> str:
    # Used as "a {length}-kilometre river": skip numbers that would need "an".
    while True:
        n = str(g.rng.randint(20, 900))
        if not (n.startswith("8") or n in ("11", "18")):
            return n


def _pages(g: Generator, key: str, years: _Years) -> str:
    first = g.rng.randint(1, 400)
    return f"{first}–{first + g.rng.randint(2, 40)}"


def _area(g: Generator, key: str, years: _Years) -> str:
    n = g.rng.randint(2, 3000)
    r = g.rng.random()
    if r < 0.3:
        return f"{{{{convert|{n}|km2|sqmi}}}}"
    if r < 0.7 or g.plain:
        return f"{g.number(n)}平方公里" if g.zh else f"{g.number(n)} km²"
    return f"{g.number(n)}&nbsp;km<sup>2</sup>"


def _discharge(g: Generator, key: str, years: _Years) -> str:
    n = g.rng.randint(3, 900)
    r = g.rng.random()
    if r < 0.4:
        return f"{{{{convert|{n}|m3/s|cuft/s}}}}"
    return f"{n}立方米每秒" if g.zh and r < 0.7 else f"{n}&nbsp;m<sup>3</sup>/s"


# Placeholder name (without digits and ``_plain``) -> its filler. A placeholder that
# is neither a subject fact nor listed here is a word from the vocabulary list of
# that name in the language data ("{noun}", "{quote}" ...).
FILLERS: dict[str, Filler] = {
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
    "country": lambda g, key, years: g.link(g.rng.choice(g.d["countries"])[0], 0.3),
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
    "oldname": lambda g, key, years: g.invent(),
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
    "date": _dated(1700, 2020),
    "access_date": _dated(2008, 2023),
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
    "big": lambda g, key, years: g.number(
        g.rng.choice([g.rng.randint(120, 9999), g.rng.randint(10000, 250000)])
    ),
    "pct": lambda g, key, years: f"{g.rng.uniform(1.5, 85):.1f}",
    "decimal": lambda g, key, years: f"{g.rng.uniform(1.2, 40):.1f}",
    "money": lambda g, key, years: str(g.rng.randint(100, 9000)) if g.zh else f"{g.rng.uniform(1.2, 95):.1f}",
    # Measurements, written the several ways articles write them.
    "km": lambda g, key, years: g.measure(g.rng.randint(5, 900), "km", "mi", "公里"),
    "km_convert": lambda g, key, years: f"{{{{convert|{g.rng.randint(20, 900)}|km|mi|abbr=on}}}}",
    "num_m": lambda g, key, years: g.measure(g.rng.randint(8, 4800), "m", "ft", "米"),
    "area": _area,
    "discharge": _discharge,
}

