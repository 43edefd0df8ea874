"""``python -m data_prep.sentence_list``: a sample of the sentences of a corpus, one
a line. This is the input of a Mirror-BERT/SimCSE job (``data_prep.build --format
lines --single-segment``) and of ``tacl_scale.analysis``.

It cleans and splits the documents exactly as ``data_prep.build`` does (given the
build's ``--min-doc-chars`` and ``--traditional-to-simplified``, if it had them). With
``--validation-fraction F --split validation`` it takes only the documents that
a build with the same ``F`` holds out, and with ``--split train`` only the others
(``F`` without a ``--split`` is refused: it would choose nothing). Sentences from
held-out documents can then be analysed without ever having been trained on. What
it skips as the build does (lines that are not UTF-8, malformed JSON lines, short
documents, redirects) is said on stderr, file by file. The sample is the
``--count`` sentences with the smallest stable hash (seeded): uniform,
deterministic, and streamed in O(count) memory. It reads sequentially in one
process, which suits sample-sized lists (10k sentences of a dump part), not whole
dumps.
"""

from __future__ import annotations

import hashlib
import heapq
import sys
from collections.abc import Iterator
from pathlib import Path

from tacl_scale.cli import error_exit, make_parser
from tacl_scale.files import atomic_write, cannot_write, output_file_problem
from tacl_scale.preemption import ctrl_c_ends

from .config import CleaningConfig, InputConfig, add_cleaning_arguments, validation_fraction_problem
from .documents import extract_sentences, is_validation
from .inputs import FORMATS, InputError, expand_inputs, output_among_inputs, plan_work_units
from .sentences import SentenceConfig, SentenceSplitter
from .sources import SkipTally, read_records


def corpus_sentences(inputs: list[str], input_format: str, sentences_config: SentenceConfig,
                     cleaning: CleaningConfig, validation_fraction: float = 0.0,
                     split: str = "all", skips: SkipTally | None = None) -> Iterator[tuple[str, str]]:
    """(document id, sentence) for every sentence of the documents of ``split``
    (``all``, or the ``train``/``validation`` side of ``validation_fraction``),
    cleaned and split as a build with these configs does; what is skipped on the
    way (lines that are not UTF-8, short documents, ...) is counted in ``skips``."""
    splitter = SentenceSplitter(sentences_config)
    skips = skips if skips is not None else SkipTally()
    for unit in plan_work_units(expand_inputs(inputs), input_format):
        count_skip = skips.counter(unit.path)
        for record in read_records(unit, count_skip):
            held_out = is_validation(record.doc_id, validation_fraction)
            if split != "all" and held_out != (split == "validation"):
                continue  # the other side of the split: not a skip, the choice asked for
            sentences = extract_sentences(record, splitter, cleaning.min_doc_chars, count_skip)
            for sentence in sentences or []:
                yield record.doc_id, sentence


def sample(sentences: Iterator[tuple[str, str]], count: int, seed: int, min_words: int, max_words: int,
           language: str) -> list[str]:
    """The ``count`` distinct sentences of acceptable length with the smallest
    seeded hash, in corpus order."""
    heap: list[tuple[int, int, str]] = []  # (-hash, position, sentence): the largest hash on top
    seen: set[str] = set()
    for position, (_, sentence) in enumerate(sentences):
        size = len(sentence) if language == "zh" else len(sentence.split())
        if not min_words <= size <= max_words or sentence in seen:
            continue
        digest = hashlib.blake2b(f"{seed}\x00{sentence}".encode(), digest_size=8).digest()
        key = int.from_bytes(digest, "little")
        if len(heap) < count:
            heapq.heappush(heap, (-key, position, sentence))
            seen.add(sentence)
        elif key < -heap[0][0]:
            _, _, dropped = heapq.heapreplace(heap, (-key, position, sentence))
            seen.discard(dropped)
            seen.add(sentence)
    return [sentence for _, _, sentence in sorted(heap, key=lambda entry: entry[1])]


# What each --split takes sentences from, in messages.
DOCUMENTS = {"all": "documents", "train": "training documents", "validation": "held-out documents"}


@ctrl_c_ends
def main(argv: list[str] | None = None) -> int:
    p = make_parser("python -m data_prep.sentence_list", __doc__)
    p.add_argument("--input", action="extend", nargs="+", required=True, metavar="GLOB", help="as data_prep.build")
    p.add_argument("--format", choices=FORMATS, default=InputConfig.format,
                   help="the input's format, as data_prep.build")
    p.add_argument("--language", choices=("en", "zh"), default=SentenceConfig.language,
                   help="the text's language, as data_prep.build")
    add_cleaning_arguments(p)
    p.add_argument("--output", required=True, metavar="FILE", help="the sentence list, one a line")
    p.add_argument("--overwrite", action="store_true", help="replace --output if it exists (else refused)")
    p.add_argument("--count", type=int, default=10_000, help="sentences (Mirror-BERT: 10k)")
    p.add_argument("--validation-fraction", type=float, default=0.0, metavar="F",
                   help="the --validation-fraction of the dataset the list must agree with (with --split train or "
                   "validation)")
    p.add_argument("--split", choices=("all", "train", "validation"), default="all",
                   help="documents a build with --validation-fraction F trains on, holds out, or all")
    p.add_argument("--min-words", type=int, default=5, help="shortest sentence kept (characters for zh)")
    p.add_argument("--max-words", type=int, default=40, help="longest sentence kept (characters for zh)")
    p.add_argument("--seed", type=int, default=0, help="seeds the hash that picks the sample")
    args = p.parse_args(argv)
    if problem := validation_fraction_problem(args.validation_fraction):
        p.error(problem)
    if args.split != "all" and args.validation_fraction <= 0:
        p.error(f"--split {args.split} needs the --validation-fraction of the dataset")
    if args.split == "all" and args.validation_fraction > 0:
        # The fraction alone chose nothing: a list meant for held-out analysis took
        # training documents too, without a word.
        p.error(f"--validation-fraction {args.validation_fraction} picks documents only with --split train or "
                "--split validation; give one (a list of every document needs no fraction)")
    if args.count < 1:
        p.error("--count must be >= 1")
    if not 1 <= args.min_words <= args.max_words:
        p.error(f"--min-words and --max-words must satisfy 1 <= min <= max, not {args.min_words} and {args.max_words}")
    try:  # the build's configs, for the same input and flags
        sentences_config = SentenceConfig(args.language, args.traditional_to_simplified)
        cleaning = CleaningConfig.for_format(args.format, args.min_doc_chars)
    except ValueError as err:
        p.error(str(err))
    if problem := output_file_problem(args.output, args.overwrite) or output_among_inputs(args.output, args.input):
        return error_exit(problem)
    skips = SkipTally()
    try:
        sentences = corpus_sentences(list(args.input), args.format, sentences_config, cleaning,
                                     args.validation_fraction, args.split, skips)
        chosen = sample(sentences, args.count, args.seed, args.min_words, args.max_words, args.language)
    except InputError as err:
        return error_exit(str(err))
    skips.say()  # what the list does not reflect, by file, as a build's manifest records it
    if not chosen:
        return error_exit(f"{', '.join(args.input)}: no sentence of {args.min_words}-{args.max_words} words in "
                          f"the {DOCUMENTS[args.split]}; skipped: {skips.totals()}")
    out = Path(args.output)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(out, "\n".join(chosen) + "\n")
    except OSError as err:
        return error_exit(cannot_write(out, err))
    short = f" (of the {args.count} asked)" if len(chosen) < args.count else ""
    print(f"{out}: {len(chosen)} sentences{short} from the {DOCUMENTS[args.split]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
