"""Sentence segmentation (English with BlingFire's trained segmenter, Chinese on
sentence-final punctuation), Traditional→Simplified conversion, and Chinese word
boundaries for whole-word masking."""

from __future__ import annotations

import ctypes
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass

# A Chinese sentence ends at 。！？ (full- or half-width, possibly repeated, or an
# ellipsis ……) followed by any closing quotes/brackets, which stay with it.
# Unambiguous closers may follow after a space (space-separated characters, as in
# the TaCL reference's Chinese data); ASCII quotes only directly.
_ZH_SENTENCE_END = re.compile(
    r"(?:[。！？!?]+|…{2,}|\.{6})(?:[\"'”’」』》）)】〕]|\s*[”’」』》）)】〕])*"
)
_ONLY_CLOSERS = re.compile(r"[\"'”’」』》）)】〕\s]+")
# A "sentence" that is only initials or a title ("J. R. R.", "Dr.") is a wrong
# break of BlingFire after the previous sentence; it belongs to the next one.
_ONLY_INITIALS_OR_TITLE = re.compile(
    r"(?:(?:[A-Z]|Dr|Mr|Mrs|Ms|Mme|Mlle|Prof|St|Jr|Sr|Gen|Col|Lt|Capt|Cmdr|Sgt|Cpl|Maj|Adm"
    r"|Rev|Fr|Gov|Sen|Rep|Hon|Pres|Mt|Ft|No|Nos|Vol|Fig|Ch|Sec|Art|cf|ca|approx|vs)\.\s*)+"
)
# Whitespace runs other than a lone plain space (replacing that by itself is a no-op).
_SPACE = re.compile(r"[^\S ]\s*| \s+")


def _collapse_spaces(text: str) -> str:
    """``_SPACE.sub(" ", text).strip()``, without running the regex on text it would
    not change: every whitespace character but the space is non-printable, so
    printable text without a double space has nothing to collapse (most paragraphs)."""
    if text.isprintable() and "  " not in text:
        return text.strip()
    return _SPACE.sub(" ", text).strip()


def split_chinese(paragraph: str) -> list[str]:
    """Split Chinese text after sentence-final punctuation, keeping the punctuation
    and trailing closing quotes with the sentence."""
    sentences = []
    start = 0
    for match in _ZH_SENTENCE_END.finditer(paragraph):
        sentences.append(paragraph[start : match.end()])
        start = match.end()
    sentences.append(paragraph[start:])
    merged: list[str] = []
    for sentence in (s.strip() for s in sentences):
        if not sentence:
            continue
        if merged and _ONLY_CLOSERS.fullmatch(sentence):
            merged[-1] += " " + sentence  # a closing quote cut off by a space
        else:
            merged.append(sentence)
    return merged


class BlingFireBreaker:
    """BlingFire's sentence breaker, ``blingfire.text_to_sentences``, with its output
    buffer kept between calls (one per thread). The library's wrapper builds a new
    ctypes buffer type and buffer on every call, which cost as much as breaking the
    sentences of a typical paragraph. The C call and its sizes are the wrapper's, so
    the result is the same (tested on the real sample)."""

    def __init__(self) -> None:
        import blingfire

        self._library = blingfire.blingfire
        self._local = threading.local()

    def __call__(self, text: str) -> str:
        """Sentences of ``text``, one per line."""
        data = text.encode("utf-8")
        size = len(data) * 2  # the wrapper's output size
        buffer = getattr(self._local, "buffer", None)
        if buffer is None or len(buffer) < size:
            buffer = self._local.buffer = ctypes.create_string_buffer(max(size, 1 << 16))
        length = self._library.TextToSentences(ctypes.c_char_p(data), ctypes.c_int(len(data)),
                                               ctypes.byref(buffer), ctypes.c_int(size))
        if length == -1 or length > size:
            return ""
        # Up to the first NUL, as the wrapper's ``.value`` of its zeroed buffer.
        return ctypes.string_at(buffer, length).split(b"\0", 1)[0].decode("utf-8")


def split_english(paragraph: str, breaker: Callable[[str], str] | None = None) -> list[str]:
    """Split English text with BlingFire's sentence breaker (a trained model that
    knows abbreviations, initials, decimals, quotes); ``breaker`` is a
    :class:`BlingFireBreaker` to reuse, else one call of the library's wrapper."""
    if breaker is None:
        import blingfire

        breaker = blingfire.text_to_sentences
    text = _collapse_spaces(paragraph)
    if not text:
        return []
    sentences: list[str] = []
    pending = ""
    for piece in breaker(text).split("\n"):
        piece = piece.strip()
        if not piece:
            continue
        if _ONLY_INITIALS_OR_TITLE.fullmatch(piece):
            pending += piece + " "
            continue
        sentences.append(pending + piece)
        pending = ""
    if pending:
        sentences.append(pending.strip())
    return sentences


@dataclass(frozen=True)
class SentenceConfig:
    """How documents become sentences."""

    language: str = "en"  # en | zh
    traditional_to_simplified: bool = False  # Chinese only


class SentenceSplitter:
    """Turns paragraphs into sentences for one language, with optional conversion."""

    def __init__(self, config: SentenceConfig) -> None:
        if config.language not in ("en", "zh"):
            raise ValueError(f"unsupported language {config.language!r} (en, zh)")
        self.config = config
        self._split: Callable[[str], list[str]] = split_chinese
        if config.language == "en":
            breaker = BlingFireBreaker()
            self._split = lambda paragraph: split_english(paragraph, breaker)
        self._convert: Callable[[str], str] | None = None
        if config.traditional_to_simplified:
            import opencc

            self._convert = opencc.OpenCC("t2s").convert

    def __call__(self, paragraph: str) -> list[str]:
        if self._convert is not None:
            paragraph = self._convert(paragraph)
        return self._split(paragraph)

    def normalize_line(self, line: str) -> str:
        """A line that is already one sentence (text input): only convert it."""
        line = line.strip()
        return self._convert(line) if self._convert is not None and line else line


class ChineseWordBoundaries:
    """Character offsets where words start, for Chinese whole-word masking.

    ``pre-segmented`` input has words separated by spaces (the spaces are kept in
    the sentence; a WordPiece tokenizer drops them around CJK characters);
    ``jieba`` segments unsegmented text.
    """

    def __init__(self, method: str) -> None:
        if method not in ("jieba", "pre-segmented"):
            raise ValueError(f"unknown Chinese segmenter {method!r} (jieba, pre-segmented)")
        self.method = method
        self._tokenizer = None
        if method == "jieba":
            import logging

            import jieba

            jieba.setLogLevel(logging.WARNING)
            self._tokenizer = jieba.Tokenizer()

    def __call__(self, sentence: str) -> set[int]:
        if self._tokenizer is None:
            return {m.start() for m in re.finditer(r"\S+", sentence)}
        return {start for _, start, _ in self._tokenizer.tokenize(sentence)}
