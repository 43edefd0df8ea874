"""One source record → one tokenized document (or a counted skip): filtering,
markup cleaning, sentence splitting and tokenization, in that order."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from .config import BuildConfig, OutputConfig
from .instances import InstanceConfig
from .sentences import ChineseWordBoundaries, SentenceSplitter
from .sources import CountSkip, PlainDocument, WikiPage
from .tokenization import EncodedSentence, PretrainTokenizer, load_tokenizer
from .wikitext import clean_wikitext, is_redirect

# Every reason a record can be dropped, and every kind of text changed to fit (the
# last ones); all appear (possibly 0) in the manifest's ``skips``.
SKIP_KINDS = (
    "not_article_namespace",
    "redirect",
    "empty_page",
    "too_short",
    "no_sentences",
    "invalid_utf8_lines",
    "malformed_json_lines",
    "duplicate_documents",
    "long_sentences_split",
)


@dataclass
class TokenizedDocument:
    """A cleaned document as its tokenized sentences: what the spill parts hold."""

    doc_id: str
    sentences: list[EncodedSentence]
    num_chars: int


def shard_of(doc_id: str, num_shards: int) -> int:
    """Stable shard of a document (same on every machine, runner and run)."""
    digest = hashlib.blake2b(doc_id.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little") % num_shards


VALIDATION_RULE = ("blake2b(b'validation\\x00' + UTF-8 document id, digest_size=8), read as a little-endian "
                   "integer, divided by 2**64, below the fraction")


def is_validation(doc_id: str, fraction: float) -> bool:
    """Whether a document belongs to the validation split (:data:`VALIDATION_RULE`):
    a hash independent of the shard's, so the split is spread over every shard."""
    if fraction <= 0:
        return False
    digest = hashlib.blake2b(b"validation\x00" + doc_id.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little") / 2**64 < fraction


def shard_key(doc_id: str, output: OutputConfig) -> int:
    """The key of the shard a document goes to (see ``OutputConfig.shard_keys``):
    validation documents to the validation shards, the others to the training ones."""
    if is_validation(doc_id, output.validation_fraction):
        return output.num_shards + shard_of(doc_id, output.validation_shards)
    return shard_of(doc_id, output.num_shards)


def sentence_budget(instances: InstanceConfig) -> tuple[int, int | None]:
    """How :func:`split_long_sentence` cuts a sentence for ``instances``: the most
    tokens a piece may have, what an instance holds besides its specials, and the
    least (None: pieces about equal).

    ``[CLS] sentence [SEP]``: at most ``max_seq_len - 2``, each an instance.
    ``[CLS] A [SEP] B [SEP]``: at most ``max_seq_len - 3``, pieces of at least half
    that. The pair builder gathers sentences until they reach the budget, so two such
    pieces make one pair (A and B its true continuation) that truncation trims by a
    word at most; pieces below half would take three, and pieces near the budget two,
    and truncation would drop up to a third or a half of them.
    """
    if instances.single_segment:
        return instances.max_seq_len - 2, None
    budget = instances.max_seq_len - 3
    return budget, -(-budget // 2)


def split_long_sentence(sentence: EncodedSentence, budget: int, least: int | None = None) -> list[EncodedSentence]:
    """``sentence`` as consecutive pieces of at most ``budget`` tokens that together
    hold every token in order (the sentence itself when it fits).

    A sentence longer than an instance (a table line, text without sentence
    punctuation) would otherwise become one instance and lose the rest of its
    tokens. Each cut goes at a word start: with ``least``, the first one at least
    ``least`` tokens into the piece; without, the one nearest to an even share of
    what is left (pieces near the budget, and the end shared out rather than left as
    a short last piece). A word too long for that is cut inside, and a piece opens a
    word, as a sentence does. The cuts depend on the tokens alone, so the dataset
    stays the same whatever the runner, the workers or a resume.
    """
    length = len(sentence.ids)
    if length <= budget:
        return [sentence]
    if least is not None and not 1 <= least <= budget:
        raise ValueError(f"a piece of at least {least} tokens cannot fit {budget}")
    word_starts = np.flatnonzero(sentence.word_starts)
    pieces: list[EncodedSentence] = []
    start = 0
    while start < length:
        left = length - start
        if left <= budget:
            stop = length
        else:
            if least is None:
                needed = -(-left // budget)  # pieces still needed, at the fewest
                ideal, earliest = start + -(-left // needed), start + 1  # an even share of what is left
            else:
                ideal = earliest = start + least
            lo, hi = np.searchsorted(word_starts, [earliest, start + budget + 1])
            candidates = word_starts[lo:hi]  # the word starts where this piece may end
            # The nearest (the earlier on a tie); none within reach: cut inside the word.
            stop = int(candidates[np.argmin(np.abs(candidates - ideal))]) if len(candidates) else ideal
        starts = sentence.word_starts[start:stop].copy()
        starts[0] = True
        pieces.append(EncodedSentence(sentence.ids[start:stop], starts))
        start = stop
    return pieces


def extract_sentences(
    record: WikiPage | PlainDocument,
    splitter: SentenceSplitter,
    min_doc_chars: int,
    count_skip: CountSkip,
) -> list[str] | None:
    """The sentences of a record (article filter, markup removal, splitting), or
    None and a counted skip."""
    if isinstance(record, WikiPage):
        if record.namespace != 0:
            count_skip("not_article_namespace")
            return None
        if record.redirect or is_redirect(record.text):
            count_skip("redirect")
            return None
        if not record.text.strip():
            count_skip("empty_page")
            return None
        paragraphs = clean_wikitext(record.text)
        pre_split = False
    else:
        paragraphs, pre_split = record.paragraphs, record.pre_split
        if not paragraphs:
            count_skip("empty_page")
            return None
    if sum(len(p) for p in paragraphs) < min_doc_chars:
        count_skip("too_short")
        return None
    if pre_split:
        sentences = [s for s in (splitter.normalize_line(p) for p in paragraphs) if s]
    else:
        sentences = [s for p in paragraphs for s in splitter(p)]
    if not sentences:
        count_skip("no_sentences")
        return None
    return sentences


class DocumentProcessor:
    """Holds the heavy objects (tokenizer, splitter, segmenter); build one per
    worker (Beam ``DoFn.setup``) and call it per record."""

    def __init__(self, config: BuildConfig, tokenizer: PretrainTokenizer | None = None) -> None:
        self.config = config
        self.tokenizer = tokenizer or load_tokenizer(config.tokenizer)
        self.splitter = SentenceSplitter(config.sentences)
        self.word_boundaries: ChineseWordBoundaries | None = None
        if config.masking.whole_word_masking and config.sentences.language == "zh":
            self.word_boundaries = ChineseWordBoundaries(config.cleaning.zh_segmenter)

    def sentences_of(self, record: WikiPage | PlainDocument, count_skip: CountSkip) -> list[str] | None:
        """The sentences of a record, or None (and a counted skip)."""
        return extract_sentences(record, self.splitter, self.config.cleaning.min_doc_chars, count_skip)

    def __call__(self, record: WikiPage | PlainDocument, count_skip: CountSkip) -> TokenizedDocument | None:
        sentences = self.sentences_of(record, count_skip)
        if sentences is None:
            return None
        boundaries = None
        if self.word_boundaries is not None:
            boundaries = [self.word_boundaries(s) for s in sentences]
        encoded = [e for e in self.tokenizer.encode(sentences, boundaries) if len(e.ids)]
        if not encoded:
            count_skip("no_sentences")
            return None
        budget, least = sentence_budget(self.config.instances)
        if any(len(e.ids) > budget for e in encoded):
            fitted: list[EncodedSentence] = []
            for e in encoded:
                if len(e.ids) > budget:
                    count_skip("long_sentences_split")
                fitted += split_long_sentence(e, budget, least)
            encoded = fitted
        return TokenizedDocument(record.doc_id, encoded, sum(len(s) for s in sentences))
