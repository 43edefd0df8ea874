"""``python -m data_prep.train_vocab``: train a BERT WordPiece ``vocab.txt`` on a
corpus, read and cleaned exactly as ``data_prep.build`` reads it. What it skips as
the build does (lines that are not UTF-8, malformed JSON lines, redirects, pages of
other namespaces) is said on stderr, file by file.

For from-scratch runs and for the quickstart, whose generated corpus must not depend
on any downloaded vocabulary. Continual pre-training (TaCL's setting) keeps the
vocabulary of the checkpoint it starts from instead.

The same corpus and arguments give the same ``vocab.txt``, byte for byte. Hugging
Face's WordPiece trainer alone does not: it numbers the ``##`` continuation pieces
in hash-map order, which changes every process, and it breaks ties between equally
frequent merges by those numbers, so the learnt tokens themselves differ run to run
(huggingface/tokenizers#1794). :func:`train_wordpiece` therefore settles the
alphabet and the continuation pieces itself, in sorted order, before training.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

from tacl_scale.cli import error_exit, make_parser
from tacl_scale.files import atomic_write, cannot_write, output_file_problem
from tacl_scale.preemption import ctrl_c_ends

from .documents import extract_sentences
from .inputs import FORMATS, InputError, WorkUnit, expand_inputs, output_among_inputs, plan_work_units
from .sentences import SentenceConfig, SentenceSplitter
from .sources import SkipTally, read_records

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
CONTINUATION = "##"
# Hugging Face's default for BERT: characters beyond the 1,000 most frequent become
# [UNK] rather than vocabulary entries (with their ``##`` twins) that a model would
# rarely see.
LIMIT_ALPHABET = 1000
# Sentences normalised and pre-tokenised per call while counting characters.
_CHUNK = 1000


class EmptyCorpusError(InputError):
    """The corpus gave no text to train on (its skips, if any, say why)."""


def iter_sentences(patterns: list[str], fmt: str, language: str, skips: SkipTally | None = None) -> Iterator[str]:
    """Sentences of the articles of the inputs, as the build extracts them (no
    minimum document length); what is skipped on the way (lines that are not UTF-8,
    redirects, ...) is counted in ``skips``. The inputs are looked up now
    (:class:`InputError` if a pattern matches nothing, before anything is written)
    and read as iterated."""
    units = plan_work_units(expand_inputs(patterns), fmt, use_index=False)
    return _sentences(units, SentenceSplitter(SentenceConfig(language)), skips if skips is not None else SkipTally())


def _sentences(units: list[WorkUnit], splitter: SentenceSplitter, skips: SkipTally) -> Iterator[str]:
    for unit in units:
        count_skip = skips.counter(unit.path)
        for record in read_records(unit, count_skip):
            yield from extract_sentences(record, splitter, 0, count_skip) or []


@dataclass
class Alphabet:
    """The characters of a corpus's words, as the WordPiece trainer splits them."""

    counts: Counter[str] = field(default_factory=Counter)
    # Characters seen after the first one of a word: those get a ``##`` piece.
    inside: set[str] = field(default_factory=set)

    def add(self, words: Iterable[str]) -> None:
        for word in words:
            self.counts.update(word)
            self.inside.update(word[1:])

    def kept(self, limit: int) -> list[str]:
        """The ``limit`` most frequent characters (ties by code point), sorted."""
        ranked = sorted(self.counts, key=lambda c: (-self.counts[c], c))
        return sorted(ranked[:limit])


def train_wordpiece(sentences: Iterator[str], vocab_size: int, lowercase: bool, output: Path,
                    source: str = "the sentences") -> Path:
    """Train and save ``output`` (a vocab.txt, one token a line, ids by line);
    ``source`` names the corpus in the error raised when it holds no text.

    The sentences are spooled to a file beside ``output`` (one pass over the
    corpus, which is the slow part) and counted on the way; the trainer then
    reads the spool. ``output`` is replaced atomically, so a failed run leaves
    an existing file as it was."""
    from tokenizers import BertWordPieceTokenizer

    tokenizer = BertWordPieceTokenizer(lowercase=lowercase, handle_chinese_chars=True)
    normalizer, pre_tokenizer = tokenizer.normalizer, tokenizer.pre_tokenizer
    output.parent.mkdir(parents=True, exist_ok=True)
    spool = output.with_name(f".{output.name}.sentences.tmp")
    try:
        alphabet = Alphabet()
        with spool.open("w", encoding="utf-8") as out:
            # A sentence is one line of the spool: the normaliser makes newlines
            # spaces anyway, so joining them changes no word.
            lines = (s.replace("\n", " ") for s in sentences)
            while chunk := list(islice(lines, _CHUNK)):
                text = "\n".join(chunk)
                out.write(text + "\n")
                alphabet.add(word for word, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text)))
        if not alphabet.counts:
            raise EmptyCorpusError(f"{source}: no article text to train a vocabulary on")
        kept = alphabet.kept(LIMIT_ALPHABET)
        continuations = [CONTINUATION + c for c in kept if c in alphabet.inside]
        tokenizer.train(
            [str(spool)],
            vocab_size=vocab_size,
            min_frequency=2,
            # Registered up front, the continuation pieces get fixed ids instead of
            # hash-order ones (the trainer only adds those it has not got).
            special_tokens=SPECIAL_TOKENS + continuations,
            # With every character pre-counted as wanted, the trainer's own limit
            # (an unstable sort, ties in hash order) removes exactly the others.
            initial_alphabet=kept,
            limit_alphabet=len(kept),
            show_progress=False,
        )
        vocab = sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])
        atomic_write(output, "".join(token + "\n" for token, _ in vocab))
    finally:
        spool.unlink(missing_ok=True)
    return output


def size_note(made: int, asked: int) -> str:
    """Why a vocabulary has other than ``--vocab-size`` tokens, or "" when it has
    that many (else a user reads 90 tokens as the 6 asked, or 2,423 as 100,000)."""
    if made < asked:
        return f", fewer than the {asked} asked: the corpus has no more words and pieces seen twice"
    if made > asked:
        return (f", more than the {asked} asked: every character of the alphabet and its {CONTINUATION} piece "
                "is always kept")
    return ""


@ctrl_c_ends
def main(argv: list[str] | None = None) -> int:
    p = make_parser("python -m data_prep.train_vocab", __doc__)
    p.add_argument("--input", action="extend", nargs="+", required=True, metavar="GLOB",
                   help="corpus files or globs; repeatable, as data_prep.build")
    p.add_argument("--format", choices=FORMATS, default="wiki-xml", help="the input's format, as data_prep.build")
    p.add_argument("--language", choices=("en", "zh"), default="en", help="the text's language, as data_prep.build")
    p.add_argument("--vocab-size", type=int, default=8000, help="tokens in vocab.txt, the 5 special ones included")
    p.add_argument("--cased", action="store_true", help="keep case (default: lower-case)")
    p.add_argument("--output", required=True, metavar="FILE", help="vocab.txt to write")
    p.add_argument("--overwrite", action="store_true", help="replace --output if it exists (else refused)")
    args = p.parse_args(argv)
    if args.vocab_size <= len(SPECIAL_TOKENS):
        p.error(f"--vocab-size must be more than the {len(SPECIAL_TOKENS)} special tokens, not {args.vocab_size}")
    if problem := output_file_problem(args.output, args.overwrite) or output_among_inputs(args.output, args.input):
        return error_exit(problem)
    skips = SkipTally()
    try:
        path = train_wordpiece(
            iter_sentences(args.input, args.format, args.language, skips),
            args.vocab_size,
            not args.cased,
            Path(args.output),
            source=", ".join(args.input),
        )
    except EmptyCorpusError as err:  # read whole: say what was skipped, which is why nothing was left
        skips.say()
        return error_exit(f"{err}; skipped: {skips.totals()}")
    except InputError as err:
        return error_exit(str(err))
    except OSError as err:
        return error_exit(cannot_write(args.output, err))
    skips.say()  # what the vocabulary was not trained on, by file
    lines = path.read_text(encoding="utf-8").count("\n")
    print(f"wrote {path} ({lines} tokens{size_note(lines, args.vocab_size)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
