"""``python -m data_prep.train_vocab``: train a BERT WordPiece ``vocab.txt`` on a
corpus, read and cleaned exactly as ``data_prep.build`` reads it.

For from-scratch runs and for the quickstart, whose generated corpus must not depend
on any downloaded vocabulary. Continual pre-training (TaCL's setting) keeps the
vocabulary of the checkpoint it starts from instead.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path

from tacl_scale import EXIT_ERROR

from .documents import extract_sentences
from .sentences import SentenceConfig, SentenceSplitter
from .sources import FORMATS, InputError, expand_inputs, plan_work_units, read_records


def iter_sentences(patterns: list[str], fmt: str, language: str) -> Iterator[str]:
    """Sentences of the articles of the inputs, as the build extracts them (no
    minimum document length)."""
    splitter = SentenceSplitter(SentenceConfig(language))
    for unit in plan_work_units(expand_inputs(patterns), fmt, use_index=False):
        for record in read_records(unit, lambda kind: None):
            yield from extract_sentences(record, splitter, 0, lambda kind: None) or []


def train_wordpiece(sentences: Iterator[str], vocab_size: int, lowercase: bool, output: Path) -> Path:
    """Train and save ``output`` (a vocab.txt, one token a line, ids by line)."""
    from tokenizers import BertWordPieceTokenizer

    tokenizer = BertWordPieceTokenizer(lowercase=lowercase, handle_chinese_chars=True)
    tokenizer.train_from_iterator(
        sentences,
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
        show_progress=False,
    )
    output.parent.mkdir(parents=True, exist_ok=True)
    vocab = sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])
    output.write_text("".join(token + "\n" for token, _ in vocab), encoding="utf-8")
    return output


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m data_prep.train_vocab", description=__doc__,
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--input", action="append", required=True, metavar="GLOB")
    p.add_argument("--format", choices=FORMATS, default="wiki-xml")
    p.add_argument("--language", choices=("en", "zh"), default="en")
    p.add_argument("--vocab-size", type=int, default=8000)
    p.add_argument("--cased", action="store_true", help="keep case (default: lower-case)")
    p.add_argument("--output", required=True, help="vocab.txt to write")
    args = p.parse_args(argv)
    try:
        path = train_wordpiece(
            iter_sentences(args.input, args.format, args.language),
            args.vocab_size,
            not args.cased,
            Path(args.output),
        )
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_ERROR
    lines = path.read_text(encoding="utf-8").count("\n")
    print(f"wrote {path} ({lines} tokens)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
