"""The pages of one dump: articles, the special namespace-0 pages, redirects and
the pages of other namespaces, written by a :class:`Generator` in a fixed order."""

from __future__ import annotations

import re
from dataclasses import dataclass

from data_prep.sample_corpus.generator import Generator, Subject

# How many pages each non-article namespace gets (namespace key -> count).
OTHER_NAMESPACE_PAGES: dict[int, int] = {1: 2, 2: 2, 4: 1, 6: 1, 10: 2, 14: 2}

# Article kinds and their weight when drawn at random.
KIND_WEIGHTS = {
    "settlement": 3, "river": 2, "person": 3, "lake": 1, "mountain": 1,
    "species": 2, "invention": 1, "organization": 1, "battle": 1,
}  # fmt: skip


def num_redirects(num_articles: int) -> int:
    """Number of redirect pages in a dump with ``num_articles`` articles."""
    return 3 + num_articles // 20


@dataclass
class Page:
    """One page of the dump; ``redirect`` is the target title of a redirect page."""

    title: str
    ns: int
    text: str
    redirect: str | None = None


def build_pages(gen: Generator, num_articles: int) -> list[Page]:
    """All pages of the dump, in no particular order yet."""
    rng = gen.rng
    gen.make_pools()

    # The first articles share one name, so that the disambiguation page lists
    # real articles (a river, a town and a mountain called "Varn").
    shared = gen.new_base()
    forced = ["river", "settlement", "mountain"][:num_articles]
    kinds = forced + rng.choices(
        list(KIND_WEIGHTS), weights=list(KIND_WEIGHTS.values()), k=num_articles - len(forced)
    )
    subjects = [
        gen.make_subject(kind, base=shared, comma_title=True) if i < len(forced) else gen.make_subject(kind)
        for i, kind in enumerate(kinds)
    ]
    stub_subj = gen.make_subject("settlement")
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

    pages = [Page(s.title, 0, gen.article(s, showcase=(i == 0))) for i, s in enumerate(subjects)]

    # Special namespace-0 pages: empty, stub, disambiguation.
    empty_base = gen.new_base()
    empty_title = empty_base + "湾" if gen.zh else f"{empty_base} Cove"
    gen.claim(empty_title)
    pages.append(Page(empty_title, 0, ""))
    pages.append(Page(stub_subj.title, 0, gen.stub(stub_subj)))
    entries = [s for s in subjects if s.base == shared] or [stub_subj]
    disambig_title = shared if gen.claim(shared) else f"{shared} (disambiguation)"
    pages.append(Page(disambig_title, 0, gen.disambiguation(shared, entries)))

    targets = gen.articles
    shuffled = rng.sample(targets, len(targets))
    for i in range(num_redirects(num_articles)):
        target = shuffled[i % len(shuffled)]
        title, text = gen.redirect(target)
        pages.append(Page(title, 0, text, redirect=target.title))

    pages.extend(_other_namespace_pages(gen, targets))
    return pages


def _other_namespace_pages(gen: Generator, subjects: list[Subject]) -> list[Page]:
    """Talk, User, Wikipedia, File, Template and Category pages."""
    rng, p = gen.rng, gen.d["pages"]
    out: list[Page] = []
    shuffled = rng.sample(subjects, len(subjects))
    for i in range(OTHER_NAMESPACE_PAGES[1]):
        subj = gen.subj = shuffled[i % len(shuffled)]
        title = f"Talk:{subj.title}"
        if not gen.claim(title):  # fewer articles than talk pages: add an archive
            title = f"{title}/Archive {i}"
            gen.claim(title)
        out.append(Page(title, 1, gen.fill(p["talk"])))

    for user in rng.sample(gen.d["usernames"], OTHER_NAMESPACE_PAGES[2]):
        gen.subj = rng.choice(subjects)
        out.append(Page(f"User:{user}", 2, gen.fill(p["user"], {"user": user})))

    countries = rng.sample(gen.d["countries"], OTHER_NAMESPACE_PAGES[4])
    for country, _ in countries:
        gen.subj = rng.choice(subjects)
        name = f"Wikipedia:{country}专题" if gen.zh else f"Wikipedia:WikiProject {country}"
        out.append(Page(name, 4, gen.fill(p["project"], {"home_plain": country})))

    with_images = [s for s in subjects if s.images] or subjects
    for subj in rng.sample(with_images, OTHER_NAMESPACE_PAGES[6]):
        gen.subj = subj
        image = subj.images[0] if subj.images else gen.fill("{image}")
        cat = subj.categories[0] if subj.categories else "Images"
        caption = gen.fill(rng.choice(gen.v["caption"]))
        text = gen.fill(p["file"], {"cat": cat, "caption_plain": _strip_links(caption)})
        out.append(Page(f"File:{image}", 6, text))

    gen.subj = subjects[0]
    infobox_name = gen.d["infobox"][subjects[0].kind]["template"]
    tpl_titles = [f"Template:{infobox_name}"]
    stub_country = gen.country_pair(subjects[0].home)[0]
    tpl_titles.append(f"Template:{stub_country}-geo-stub")
    out.append(Page(tpl_titles[0], 10, p["infobox_template"]))
    out.append(
        Page(
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
        out.append(Page(f"Category:{cat}", 14, gen.fill(p["category"], extra)))
    return out


def _strip_links(s: str) -> str:
    """``[[a|b]]`` -> ``b``, ``[[a]]`` -> ``a`` (for template parameters)."""
    return re.sub(r"\[\[(?:[^|\]]*\|)?([^\]]*)\]\]", r"\1", s)

