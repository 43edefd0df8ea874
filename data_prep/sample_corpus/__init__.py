"""Generate a small, realistic, entirely synthetic MediaWiki XML dump.

The project may not ship any Wikipedia text, yet its quickstart and its tests need a
corpus that looks and behaves like a real ``enwiki``/``zhwiki`` pages-articles dump.
This package *generates* one: fictional rivers, towns, people, species, inventions,
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

Output is a pure function of the arguments (``random.Random(f"{language}:{seed}")``, timestamps
drawn from a fixed range), so the same call always gives byte-identical text.

The package reads as the data flow: :mod:`.generator` writes wikitext from the
language data (``data/en.json``, ``data/zh.json``), :mod:`.fillers` fills the
placeholders that are not plain words, :mod:`.pages` decides which pages a dump
holds, and :mod:`.xml_dump` writes them as export XML.

Command line::

    python -m data_prep.sample_corpus OUT_PATH [--articles N] [--seed S] [--language en|zh]
"""

from __future__ import annotations

import bz2
import os
import pathlib
import random
import sys

from data_prep.sample_corpus.generator import MAX_ARTICLES, Generator, language_data
from data_prep.sample_corpus.pages import OTHER_NAMESPACE_PAGES, build_pages, num_redirects
from data_prep.sample_corpus.xml_dump import render_dump
from tacl_scale.cli import error_exit, make_parser
from tacl_scale.files import atomic_write, cannot_write, output_file_problem
from tacl_scale.preemption import ctrl_c_ends

__all__ = [
    "LANGUAGES",
    "MAX_ARTICLES",
    "OTHER_NAMESPACE_PAGES",
    "generate_wiki_xml",
    "main",
    "num_redirects",
    "write_sample_dump",
]

LANGUAGES = ("en", "zh")


def generate_wiki_xml(num_articles: int = 60, seed: int = 0, language: str = "en") -> str:
    """Return the text of a synthetic MediaWiki XML dump (schema export-0.10).

    Args:
        num_articles: ordinary articles to write, 0 to :data:`MAX_ARTICLES`. The dump also holds an
            empty article, a stub, a disambiguation page, ``num_redirects(n)``
            redirects and the pages of :data:`OTHER_NAMESPACE_PAGES`.
        seed: seed of the random generator; equal arguments give equal output.
        language: ``"en"`` (enwiki-like) or ``"zh"`` (zhwiki-like).
    """
    if language not in LANGUAGES:
        raise ValueError(f"language must be one of {LANGUAGES}, not {language!r}")
    if not 0 <= num_articles <= MAX_ARTICLES:
        raise ValueError(f"num_articles must be between 0 and {MAX_ARTICLES}, not {num_articles} "
                         "(for a larger corpus, write several dumps with different seeds)")
    gen = Generator(language_data(language), random.Random(f"{language}:{seed}"))
    pages = build_pages(gen, num_articles)
    return render_dump(pages, gen, language)


def write_sample_dump(
    path: str | os.PathLike,
    num_articles: int = 60,
    seed: int = 0,
    language: str = "en",
    compress: bool | None = None,
) -> pathlib.Path:
    """Write :func:`generate_wiki_xml` output to ``path`` and return the path.

    The file is bz2-compressed when ``compress`` is true, or when it is None and
    the path ends with ``.bz2``. Missing parent directories are created; the file
    is replaced whole (:func:`tacl_scale.files.atomic_write`).
    """
    out = pathlib.Path(path)
    if compress is None:
        compress = out.name.endswith(".bz2")
    data = generate_wiki_xml(num_articles, seed, language).encode("utf-8")
    if compress:
        data = bz2.compress(data, compresslevel=9)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(out, data)
    return out


@ctrl_c_ends
def main(argv: list[str] | None = None) -> int:
    """Command-line entry point: write a sample dump to OUT_PATH."""
    parser = make_parser("python -m data_prep.sample_corpus",
                         "Write a synthetic MediaWiki XML dump (no real Wikipedia text).")
    parser.add_argument("out_path", metavar="OUT_PATH", help="output file; .bz2 suffix compresses")
    parser.add_argument("--articles", type=int, default=60, help=f"number of ordinary articles, at most {MAX_ARTICLES}")
    parser.add_argument("--seed", type=int, default=0, help="random seed: another seed, another corpus")
    parser.add_argument("--language", choices=LANGUAGES, default="en", help="content language")
    parser.add_argument("--overwrite", action="store_true", help="replace OUT_PATH if it exists (else refused)")
    args = parser.parse_args(argv)
    if not 0 <= args.articles <= MAX_ARTICLES:
        parser.error(f"--articles must be between 0 and {MAX_ARTICLES}, not {args.articles} "
                     "(for a larger corpus, write several dumps with different --seed values)")
    if problem := output_file_problem(args.out_path, args.overwrite):
        return error_exit(problem)
    try:
        out = write_sample_dump(args.out_path, args.articles, args.seed, args.language)
    except OSError as err:
        return error_exit(cannot_write(args.out_path, err))
    print(f"wrote {out} ({out.stat().st_size} bytes)", file=sys.stderr)
    return 0

