"""DocumentProcessor (filtering, cleaning, splitting, tokenizing, counted skips)
and shard_of."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from conftest import EN_VOCAB, ZH_VOCAB
from conftest_sources_helpers import (
    ZHWIKI_SEGMENTED,
    SkipCounter,
    enwiki_pages,
)

from data_prep.config import BuildConfig, CleaningConfig, InputConfig, OutputConfig
from data_prep.documents import (
    SKIP_KINDS,
    DocumentProcessor,
    TokenizedDocument,
    sentence_budget,
    shard_of,
    split_long_sentence,
)
from data_prep.inputs import WorkUnit
from data_prep.instances import InstanceConfig
from data_prep.sentences import SentenceConfig
from data_prep.sources import PlainDocument, WikiPage, read_text_documents
from data_prep.tokenization import EncodedSentence, PretrainTokenizer, TokenizerConfig
from tacl_scale.data.masking import MaskingConfig

REPO = Path(__file__).resolve().parents[1]


def make_config(
    vocab: Path = EN_VOCAB,
    language: str = "en",
    t2s: bool = False,
    min_doc_chars: int = 200,
    whole_word: bool = False,
    segmenter: str = "jieba",
) -> BuildConfig:
    return BuildConfig(
        input=InputConfig(("unused",)),
        tokenizer=TokenizerConfig(str(vocab)),
        output=OutputConfig("unused-out"),
        sentences=SentenceConfig(language, t2s),
        cleaning=CleaningConfig(min_doc_chars=min_doc_chars, zh_segmenter=segmenter),
        masking=MaskingConfig(whole_word_masking=whole_word),
    )


@pytest.fixture(scope="module")
def en_processor() -> DocumentProcessor:
    return DocumentProcessor(make_config())


@pytest.fixture(scope="module")
def en_processor_no_minimum(en_processor: DocumentProcessor) -> DocumentProcessor:
    # reuse the loaded tokenizer
    return DocumentProcessor(make_config(min_doc_chars=0), tokenizer=en_processor.tokenizer)


def page(text: str, namespace: int = 0, redirect: bool = False, doc_id: str = "1") -> WikiPage:
    return WikiPage(doc_id, f"Title {doc_id}", namespace, redirect, text, "test-source")


ARTICLE = (
    "{{Infobox scientist\n| name = Alan Turing\n| birth_date = 1912\n}}\n"
    "'''Alan Mathison Turing''' was an English [[mathematician]] and computer scientist.<ref>Ref.</ref> "
    "He was born in [[London]] in 1912. Turing studied at [[King's College, Cambridge]].\n\n"
    "== Career ==\n"
    "During the war he worked on the Enigma code at Bletchley Park. "
    "His unaffable colleagues admired the work.\n\n"
    "== References ==\n"
    "Some reference prose that must not appear.\n"
)


def decode(tokenizer: PretrainTokenizer, ids: np.ndarray) -> str:
    text = " ".join(tokenizer.id_to_token(int(i)) for i in ids)
    return text.replace(" ##", "")


def squash(text: str) -> str:
    return "".join(text.split())


# ---------------------------------------------------------------- skips


@pytest.mark.parametrize(
    ("record", "kind"),
    [
        (page(ARTICLE, namespace=1), "not_article_namespace"),
        (page(ARTICLE, namespace=4), "not_article_namespace"),
        (page(ARTICLE, redirect=True), "redirect"),
        (page("#REDIRECT [[Alan Turing]]\n" + "{{R from move}} padding text " * 20), "redirect"),
        (page(""), "empty_page"),
        (page("  \n\t\n"), "empty_page"),
        (page("'''Stub''' is short."), "too_short"),
        (page("{{Infobox}}\n[[Category:X]]\n" * 30), "too_short"),  # long wikitext, no prose
        (PlainDocument("d", "t", [], False, "s"), "empty_page"),
        (PlainDocument("d", "t", ["Too short."], True, "s"), "too_short"),
    ],
)
def test_skips_counted(en_processor: DocumentProcessor, record: WikiPage | PlainDocument, kind: str) -> None:
    skips = SkipCounter()
    assert en_processor(record, skips) is None
    assert skips == {kind: 1}
    assert kind in SKIP_KINDS


def test_namespace_checked_before_redirect_and_empty(en_processor: DocumentProcessor) -> None:
    skips = SkipCounter()
    assert en_processor(page("", namespace=2, redirect=True), skips) is None
    assert skips == {"not_article_namespace": 1}


def test_no_sentences_skips(en_processor_no_minimum: DocumentProcessor) -> None:
    processor = en_processor_no_minimum
    cases = [
        page("{{Infobox}}\n[[Category:X]]\n<!-- only markup -->"),  # cleans to nothing
        PlainDocument("d", "t", ["   ", "\t"], True, "s"),  # pre-split lines that are blank
        page("\ufffd " * 150),  # text the tokenizer drops entirely
    ]
    for record in cases:
        skips = SkipCounter()
        assert processor(record, skips) is None, record
        assert skips == {"no_sentences": 1}, record


def test_sentences_of_counts_no_sentences(en_processor_no_minimum: DocumentProcessor) -> None:
    skips = SkipCounter()
    assert en_processor_no_minimum.sentences_of(page("{{Only template}}"), skips) is None
    assert skips == {"no_sentences": 1}


def test_min_doc_chars_counts_cleaned_text(en_processor: DocumentProcessor) -> None:
    # 250 characters of wikitext, under 200 of them prose after cleaning
    text = "{{Infobox|a=" + "x" * 100 + "}}" + "Short prose sentence here. " * 5
    assert len(text) > 200
    skips = SkipCounter()
    assert en_processor(page(text), skips) is None
    assert skips == {"too_short": 1}
    longer = text + "More prose here. " * 5
    skips = SkipCounter()
    assert en_processor(page(longer), skips) is not None
    assert not skips


# ---------------------------------------------------------------- normal pages


def test_article_sentences_and_ids(en_processor: DocumentProcessor) -> None:
    skips = SkipCounter()
    sentences = en_processor.sentences_of(page(ARTICLE), skips)
    assert sentences == [
        "Alan Mathison Turing was an English mathematician and computer scientist.",
        "He was born in London in 1912.",
        "Turing studied at King's College, Cambridge.",
        "During the war he worked on the Enigma code at Bletchley Park.",
        "His unaffable colleagues admired the work.",
    ]
    doc = en_processor(page(ARTICLE, doc_id="42"), skips)
    assert not skips
    assert isinstance(doc, TokenizedDocument)
    assert doc.doc_id == "42"
    assert doc.num_chars == sum(len(s) for s in sentences)
    assert len(doc.sentences) == len(sentences)
    tokenizer = en_processor.tokenizer
    specials = set(tokenizer.special_ids.all())
    for encoded, sentence in zip(doc.sentences, sentences, strict=True):
        assert encoded.ids.dtype == np.int32 and encoded.word_starts.dtype == bool
        assert len(encoded.ids) == len(encoded.word_starts) > 0
        assert not specials.intersection(encoded.ids.tolist())  # no [CLS]/[SEP]/[UNK]/...
        assert encoded.ids.min() >= 0 and encoded.ids.max() < tokenizer.vocab_size
        assert squash(decode(tokenizer, encoded.ids)) == squash(sentence.lower())
        assert encoded.word_starts[0]
    # "unaffable" is split into word pieces: only its first piece starts a word
    last = doc.sentences[-1]
    tokens = [tokenizer.id_to_token(int(i)) for i in last.ids]
    continuation = [t.startswith("##") for t in tokens]
    assert any(continuation)
    assert last.word_starts.tolist() == [not c for c in continuation]


def test_plain_documents(en_processor: DocumentProcessor) -> None:
    lines = [f"Sentence number {i} of the document." for i in range(8)]
    pre_split = PlainDocument("t:0", "x", ["  " + lines[0] + "  ", ""] + lines[1:], True, "s")
    skips = SkipCounter()
    assert en_processor.sentences_of(pre_split, skips) == lines  # blank line dropped, stripped
    paragraphs = PlainDocument("j:1", "x", [" ".join(lines[:4]), " ".join(lines[4:])], False, "s")
    assert en_processor.sentences_of(paragraphs, skips) == lines  # split into sentences
    doc = en_processor(paragraphs, skips)
    assert doc is not None and doc.doc_id == "j:1" and len(doc.sentences) == 8
    assert not skips


def test_real_articles_processed(en_processor: DocumentProcessor) -> None:
    skips = SkipCounter()
    pages = enwiki_pages()
    docs = [d for d in (en_processor(p, skips) for p in pages[:60]) if d is not None]
    redirects = sum(p.redirect for p in pages[:60])
    articles = [p for p in pages[:60] if p.namespace == 0 and not p.redirect]
    assert skips["redirect"] == redirects
    assert len(docs) + skips["too_short"] + skips["no_sentences"] == len(articles)
    assert len(docs) >= len(articles) - 5
    anarchism = next(d for d in docs if d.doc_id == "12")
    first = anarchism.sentences[0]
    assert decode(en_processor.tokenizer, first.ids).startswith("anarchism is a political philosophy")
    assert len(anarchism.sentences) > 300


# ---------------------------------------------------------------- sentences longer than an instance


def test_a_1mb_sentence_is_split_into_pieces_that_each_fit_an_instance(en_processor: DocumentProcessor) -> None:
    """Text without sentence punctuation (a huge table line) is one "sentence": once
    it made one instance and the rest of it was dropped, counted nowhere. Now it is
    split into consecutive pieces that each fit, cut between words, and counted."""
    prose = ("during the war he worked on the enigma code at bletchley park and his unaffable colleagues "
             "admired the work of the mathematician in the cryptanalytic section ")
    line = (prose * (1_000_000 // len(prose) + 1)).strip()
    assert len(line) > 1_000_000
    whole = en_processor.tokenizer.encode([line])[0]
    assert not whole.word_starts.all()  # some words are several tokens: cuts must find word starts
    for single_segment, budget, least in ((False, 61, 31), (True, 62, 1)):
        config = replace(make_config(min_doc_chars=0), instances=InstanceConfig(64, single_segment=single_segment))
        assert sentence_budget(config.instances) == (budget, None if single_segment else least)
        processor = DocumentProcessor(config, tokenizer=en_processor.tokenizer)
        for pre_split in (True, False):  # one line a sentence, or paragraphs the splitter cuts
            skips = SkipCounter()
            record = PlainDocument("long", "t", ["A short first sentence.", line], pre_split, "s")
            doc = processor(record, skips)
            assert doc is not None and skips == {"long_sentences_split": 1}
            assert decode(processor.tokenizer, doc.sentences[0].ids) == "a short first sentence ."
            pieces = doc.sentences[1:]
            assert np.array_equal(np.concatenate([p.ids for p in pieces]), whole.ids)  # every token, in order
            lengths = [len(p.ids) for p in pieces]
            assert max(lengths) <= budget and min(lengths[:-1]) >= least
            if single_segment:  # near the budget (less what a cut at a word start costs), no short tail
                assert np.mean(lengths) > 0.8 * budget and min(lengths) > budget / 3
            cuts = np.cumsum(lengths)[:-1]
            assert whole.word_starts[cuts].all() and all(p.word_starts[0] for p in pieces)
            assert all(np.array_equal(p.word_starts[1:], whole.word_starts[c + 1 : c + n])
                       for p, c, n in zip(pieces, [0, *cuts], lengths, strict=True))
            again = processor(record, SkipCounter())
            assert [p.ids.tolist() for p in again.sentences] == [p.ids.tolist() for p in doc.sentences]


def test_split_long_sentence() -> None:
    ids = np.arange(100, 130, dtype=np.int32)
    starts = np.zeros(30, dtype=bool)
    starts[[0, 3, 4, 12, 20, 29]] = True  # words of 3, 1, 8, 8, 9 and 1 tokens
    sentence = EncodedSentence(ids, starts)
    assert split_long_sentence(sentence, 30) == [sentence] and split_long_sentence(sentence, 31) == [sentence]

    def cut(budget: int, least: int | None = None) -> list[list[int]]:
        pieces = split_long_sentence(sentence, budget, least)
        assert all(p.word_starts[0] for p in pieces)
        assert np.array_equal(np.concatenate([p.ids for p in pieces]), ids)
        return [[int(p.ids[0]) - 100, len(p.ids)] for p in pieces]

    assert cut(29) == [[0, 12], [12, 18]]  # the word start nearest an even share (15)
    assert cut(16) == [[0, 12], [12, 8], [20, 10]]
    assert cut(16, least=8) == [[0, 12], [12, 8], [20, 10]]  # the first word start at 8 tokens or more
    assert cut(20, least=13) == [[0, 20], [20, 10]]
    # A word longer than the budget is cut inside, where no word start is within reach.
    assert cut(5) == [[0, 4], [4, 5], [9, 3], [12, 5], [17, 3], [20, 5], [25, 5]]
    assert cut(5, least=3) == [[0, 3], [3, 3], [6, 3], [9, 3], [12, 3], [15, 5], [20, 3], [23, 3], [26, 4]]
    with pytest.raises(ValueError, match="at least 6 tokens"):
        split_long_sentence(sentence, 5, 6)


# ---------------------------------------------------------------- shard_of


def test_shard_of_deterministic_in_range_and_even() -> None:
    ids = [str(i) for i in range(1000)]
    shards = [shard_of(i, 4) for i in ids]
    assert shards == [shard_of(i, 4) for i in ids]
    assert set(shards) <= set(range(4))
    counts = Counter(shards)
    assert all(200 <= counts[s] <= 300 for s in range(4)), counts
    assert all(shard_of(i, 1) == 0 for i in ids[:50])
    assert all(0 <= shard_of(i, 7) < 7 for i in ids)
    # works on any text id (text-format ids, non-ASCII titles)
    assert 0 <= shard_of("wiki_00.txt:17", 3) < 3
    assert 0 <= shard_of("北京", 3) < 3


def test_shard_of_stable_across_processes() -> None:
    ids = ["12", "775", "zhwiki-sample.txt:3", "北京", "x" * 300]
    here = [shard_of(i, 16) for i in ids]
    code = (
        "import json, sys; from data_prep.documents import shard_of; "
        f"print(json.dumps([shard_of(i, 16) for i in {ids!r}]))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(here).replace("'", '"')


# ---------------------------------------------------------------- Chinese


@pytest.fixture(scope="module")
def zh_processor() -> DocumentProcessor:
    return DocumentProcessor(make_config(ZH_VOCAB, "zh", t2s=True, min_doc_chars=10, whole_word=True))


def test_chinese_whole_word_jieba(zh_processor: DocumentProcessor) -> None:
    assert zh_processor.word_boundaries is not None and zh_processor.word_boundaries.method == "jieba"
    text = "'''北京'''是[[中華人民共和國]]的首都。<ref>來源</ref>北京歷史悠久！\n== 參考文獻 ==\n參考。"
    skips = SkipCounter()
    doc = zh_processor(page(text), skips)
    assert doc is not None and not skips
    tokenizer = zh_processor.tokenizer
    first, second = doc.sentences
    assert "".join(tokenizer.id_to_token(int(i)) for i in first.ids) == "北京是中华人民共和国的首都。"
    # 北京 / 是 / 中华人民共和国 / 的 / 首都 / 。
    assert first.word_starts.tolist() == [c == "1" for c in "10110000001101"]
    assert "".join(tokenizer.id_to_token(int(i)) for i in second.ids) == "北京历史悠久！"
    for encoded in doc.sentences:
        assert encoded.word_starts[0] and not encoded.word_starts.all()


def test_chinese_without_whole_word_masking() -> None:
    processor = DocumentProcessor(make_config(ZH_VOCAB, "zh", min_doc_chars=10))
    assert processor.word_boundaries is None
    doc = processor(page("北京是中国的首都。北京历史悠久，文化灿烂！"), SkipCounter())
    assert doc is not None
    # without boundaries every CJK character is its own word
    assert all(s.word_starts.all() for s in doc.sentences)


def test_whole_word_masking_english_uses_tokenizer_words(en_processor: DocumentProcessor) -> None:
    processor = DocumentProcessor(make_config(whole_word=True), tokenizer=en_processor.tokenizer)
    assert processor.word_boundaries is None  # only Chinese needs a segmenter


def test_chinese_pre_segmented_text(zh_processor: DocumentProcessor) -> None:
    processor = DocumentProcessor(
        make_config(ZH_VOCAB, "zh", min_doc_chars=10, whole_word=True, segmenter="pre-segmented"),
        tokenizer=zh_processor.tokenizer,
    )
    skips = SkipCounter()
    docs = list(read_text_documents(WorkUnit(str(ZHWIKI_SEGMENTED), "text"), skips))
    doc = processor(docs[0], skips)
    assert doc is not None and not skips
    assert len(doc.sentences) == len(docs[0].paragraphs)
    tokenizer = processor.tokenizer
    compared = 0
    for encoded, line in list(zip(doc.sentences, docs[0].paragraphs, strict=True))[:40]:
        words = line.split()
        tokens = [tokenizer.id_to_token(int(i)) for i in encoded.ids]
        if any(t == "[UNK]" or t.startswith("##") or len(t) != 1 for t in tokens):
            continue  # Latin words / digits: pieces do not map 1:1 onto characters
        expected = [k == 0 for w in words for k in range(len(w))]
        assert encoded.word_starts.tolist() == expected, line
        compared += 1
    assert compared >= 10, f"only {compared} of the first 40 lines are all CJK characters: the check compared too few"
    assert any(not s.word_starts.all() for s in doc.sentences)


@pytest.fixture(scope="module")
def sample_sentences(en_processor: DocumentProcessor) -> list[str]:
    return [s for page in enwiki_pages() for s in en_processor.sentences_of(page, lambda kind: None) or []]


def _tokenizer_json_directory(directory: Path, padded_to: int | None = None) -> Path:
    """bert-base-uncased's vocabulary saved as a transformers directory with a
    tokenizer.json only; ``padded_to`` stores padding and truncation in it, as a
    sentence-transformers model does."""
    import shutil

    from tokenizers import Tokenizer
    from transformers import BertTokenizerFast

    directory.mkdir(exist_ok=True)
    shutil.copy2(EN_VOCAB, directory / "vocab.txt")
    BertTokenizerFast.from_pretrained(str(directory), do_lower_case=True).save_pretrained(directory)
    (directory / "vocab.txt").unlink()
    if padded_to is not None:
        backend = Tokenizer.from_file(str(directory / "tokenizer.json"))
        backend.enable_padding(length=padded_to)
        backend.enable_truncation(padded_to)
        backend.save(str(directory / "tokenizer.json"))
    return directory


EDGE_SENTENCES = [
    "a [MASK] [MASK] b", "a [mask] b", "[CLS]x[SEP]", "###abc #x ##y", "unaffable héllo", "Tab\there",
    "x" * 150 + " short", "Don't stop!!! ...it costs $1,000.00 (approx.) -- see [1]", "", "   ", "A~B|C^D`e",
    "résumé naïve", "日本語 text", "ALL CAPS Mixed",
]


@pytest.mark.parametrize("kind", ["vocab.txt", "tokenizer.json directory"])
def test_word_cache_and_wordpiece_table_equal_the_tokenizer(kind: str, sample_sentences: list[str],
                                                           tmp_path: Path) -> None:
    """Sentences are tokenized word by word through a cache, and WordPiece word starts
    are read off a per-id table (not a ``##`` piece): both must agree with the
    tokenizer run on whole sentences, and its own word ids, on every sentence of the
    real sample and on edge cases (added tokens in text, over-long words, non-ASCII)."""
    from data_prep.tokenization import load_tokenizer

    path = EN_VOCAB if kind == "vocab.txt" else _tokenizer_json_directory(tmp_path / "tok")
    tokenizer = load_tokenizer(TokenizerConfig(str(path)))
    assert tokenizer._continues_word is not None, "the table must apply to BERT WordPiece"
    assert tokenizer._words is not None, "the word cache must apply to BERT's normalizer and pre-tokenizer"
    # Every sentence through the vocab.txt, a quarter through the same vocabulary's tokenizer.json.
    sentences = sample_sentences[:: 1 if kind == "vocab.txt" else 4] + EDGE_SENTENCES
    assert len(sentences) > 4_000
    by_words = [e for k in range(0, len(sentences), 50) for e in tokenizer.encode(sentences[k : k + 50])]
    tokenizer._words = None  # whole sentences through the tokenizer, word starts from the table
    by_table = tokenizer.encode(sentences)
    tokenizer._continues_word = None  # word starts from the tokenizer's word ids
    by_word_ids = tokenizer.encode(sentences)
    assert sum(int((~s.word_starts).sum()) for s in by_words) > 2_000  # continuation pieces were seen
    for a, b, c in zip(by_words, by_table, by_word_ids, strict=True):
        assert a.ids.dtype == b.ids.dtype == np.int32
        assert np.array_equal(a.ids, b.ids) and np.array_equal(a.ids, c.ids)
        assert np.array_equal(a.word_starts, b.word_starts) and np.array_equal(a.word_starts, c.word_starts)


def test_word_cache_is_emptied_when_full_and_stays_exact(sample_sentences: list[str]) -> None:
    from data_prep.tokenization import _WordCache, load_tokenizer

    tokenizer = load_tokenizer(TokenizerConfig(str(EN_VOCAB)))
    small = _WordCache.for_backend(tokenizer._backend)
    assert small is not None
    small._max_words = 300
    sentences = sample_sentences[:2_000]
    want = [np.asarray(e.ids, dtype=np.int32)
            for e in tokenizer._backend.encode_batch(sentences, add_special_tokens=False)]
    got: dict[int, np.ndarray] = {}
    for batch in range(0, len(sentences), 20):
        taken, joined, lengths = small.encode(sentences[batch : batch + 20])
        assert sum(lengths) == len(joined) and joined.dtype == np.int32
        ends = np.cumsum(lengths).tolist()
        for k, first, end in zip(taken, [0, *ends[:-1]], ends, strict=True):
            got[batch + k] = joined[first:end]
        assert len(small._ids) <= 300 + 20 * 60  # emptied on the way, never much past the bound
    assert set(got) == set(range(len(sentences)))  # the sample has no [MASK] in its text
    assert any(not s.isascii() for s in sentences)
    assert all(np.array_equal(got[k], want[k]) for k in got)


@pytest.mark.parametrize(("vocab", "lowercase"), [(EN_VOCAB, True), (EN_VOCAB, False), (ZH_VOCAB, None)])
def test_word_cache_equals_the_tokenizer_on_random_unicode(vocab: Path, lowercase: bool | None) -> None:
    """Space-separated chunks with accents, combining marks, CJK, Greek capitals,
    odd spaces, control characters and added tokens' pieces: the cache's ids must
    be the tokenizer's on the whole sentence."""
    import random

    from data_prep.tokenization import load_tokenizer

    tokenizer = load_tokenizer(TokenizerConfig(str(vocab), lowercase))
    words = tokenizer._words
    assert words is not None
    alphabet = [" ", " ", " ", "a", "B", "z", "7", ".", ",", "'", "#", "[", "]", "MASK", "mask", "é", "E\u0301",
                "\u0301", "\u0308", "中", "國", "語", "\uff21", "\uff0c", "Σ", "ΟΔΟΣ", "ß", "İ", "ﬁ", "\t", "\n",
                "\u00a0", "\u3000", "\u200b", "\x00", "\x07", "\x1c", "\x85", "\x7f", "\ufffd", "😀", "–", "—", "“", "»", "·"]
    rng = random.Random(4)
    sentences = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 16))) for _ in range(20_000)]
    taken, joined, lengths = words.encode(sentences)
    assert len(taken) > 15_000  # only sentences holding an added token's text are left out
    want = tokenizer._backend.encode_batch([sentences[k] for k in taken], add_special_tokens=False)
    ends = np.cumsum(lengths).tolist()
    for k, first, end, encoding in zip(taken, [0, *ends[:-1]], ends, want, strict=True):
        assert joined[first:end].tolist() == encoding.ids, repr(sentences[k])


def test_a_tokenizer_json_that_pads_and_truncates_keeps_each_sentences_tokens(tmp_path: Path) -> None:
    """A model's tokenizer.json may pad and truncate every input (all-MiniLM-L6-v2 to
    128); a dataset must get the sentences' own tokens, not [PAD]s or cut ones."""
    from data_prep.tokenization import load_tokenizer

    padded = load_tokenizer(TokenizerConfig(str(_tokenizer_json_directory(tmp_path / "padded", 16))))
    plain = load_tokenizer(TokenizerConfig(str(EN_VOCAB)))
    sentences = ["Hello world.", "word " * 40, "a [MASK] b"]
    for a, b in zip(padded.encode(sentences), plain.encode(sentences), strict=True):
        assert np.array_equal(a.ids, b.ids)
    short, long, masked = (len(e.ids) for e in padded.encode(sentences))
    assert short < 16 and masked < 16 and long >= 40  # neither padded to 16 nor cut there
