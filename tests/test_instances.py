"""NSP pair construction (data_prep.instances), checked against the semantics of
google-research/bert ``create_instances_from_document`` / ``truncate_seq_pair``."""

from __future__ import annotations

import random

import numpy as np
import pytest

from data_prep.instances import (
    InstanceConfig,
    PairSpec,
    Segment,
    assemble,
    assemble_all,
    create_pairs_from_document,
    single_segments,
)

CLS, SEP = 101, 102


class InMemoryStore:
    """A :class:`~data_prep.instances.TokenStore` over per-document lists of
    per-sentence arrays (the build's store is the spill parts)."""

    def __init__(self, documents: list[list[np.ndarray]]) -> None:
        self.documents = documents

    def values(self, segment: Segment) -> np.ndarray:
        joined = np.concatenate(list(self.documents[segment.document][segment.first : segment.last + 1]))
        return joined[segment.start : segment.stop]

    def lengths(self) -> list[list[int]]:
        return [[len(s) for s in doc] for doc in self.documents]


def make_corpus(
    seed: int,
    num_docs: int,
    sentences: tuple[int, int] = (1, 25),
    length: tuple[int, int] = (3, 40),
) -> list[list[np.ndarray]]:
    """Documents of sentences whose token values are globally unique and
    consecutive inside a document (so contiguity is visible in the values)."""
    rng = random.Random(seed)
    docs: list[list[np.ndarray]] = []
    next_token = 1000
    for _ in range(num_docs):
        doc = []
        for _ in range(rng.randint(*sentences)):
            n = rng.randint(*length)
            doc.append(np.arange(next_token, next_token + n, dtype=np.int64))
            next_token += n
        next_token += 1000  # a gap between documents
        docs.append(doc)
    return docs


def all_pairs(
    docs: list[list[np.ndarray]], config: InstanceConfig, seed: int
) -> list[tuple[int, list[PairSpec]]]:
    lengths = InMemoryStore(docs).lengths()
    return [
        (d, create_pairs_from_document(lengths, d, config, random.Random(seed * 100_003 + d)))
        for d in range(len(docs))
    ]


def full_length(lengths: list[list[int]], seg: Segment) -> int:
    return sum(lengths[seg.document][seg.first : seg.last + 1])


# ---------------------------------------------------------------- basic shape


@pytest.mark.parametrize("max_seq_len", [16, 64, 128])
@pytest.mark.parametrize("short_seq_prob", [0.0, 0.1, 1.0])
def test_every_instance_fits_and_both_segments_non_empty(max_seq_len, short_seq_prob):
    docs = make_corpus(1, 40)
    store = InMemoryStore(docs)
    lengths = store.lengths()
    config = InstanceConfig(max_seq_len=max_seq_len, short_seq_prob=short_seq_prob)
    total = 0
    for d, pairs in all_pairs(docs, config, seed=3):
        assert pairs, f"document {d} produced no pair"
        for p in pairs:
            total += 1
            assert p.a.document == d
            assert len(p.a) >= 1 and len(p.b) >= 1
            for seg in (p.a, p.b):
                assert 0 <= seg.first <= seg.last < len(lengths[seg.document])
                assert 0 <= seg.start < seg.stop <= full_length(lengths, seg)
            a, b = store.values(p.a), store.values(p.b)
            assert len(a) == len(p.a) and len(b) == len(p.b)
            seq = assemble(a, b, CLS, SEP)
            assert len(seq) <= max_seq_len
            assert len(a) + len(b) <= max_seq_len - 3
    assert total > 100


def test_non_random_b_is_the_continuation_of_a():
    docs = make_corpus(2, 60)
    store = InMemoryStore(docs)
    lengths = store.lengths()
    config = InstanceConfig(max_seq_len=128, short_seq_prob=0.1)
    contiguous = 0
    for _, pairs in all_pairs(docs, config, seed=5):
        for p in pairs:
            if p.is_random_next:
                continue
            assert p.b.document == p.a.document
            assert p.b.first == p.a.last + 1, "B must start at the sentence after A's last"
            a, b = store.values(p.a), store.values(p.b)
            # Inside each segment the tokens are a contiguous run of the document.
            assert np.all(np.diff(a) == 1) and np.all(np.diff(b) == 1)
            if p.a.stop == full_length(lengths, p.a) and p.b.start == 0:
                # Not truncated where they meet: B's first token follows A's last.
                assert b[0] == a[-1] + 1
                contiguous += 1
    assert contiguous > 20


def test_chunks_cover_each_document_in_order():
    """Every sentence ends up exactly once in an A or a real-next B, in document
    order; a random-next instance puts its unused sentences back."""
    docs = make_corpus(3, 60)
    lengths = InMemoryStore(docs).lengths()
    config = InstanceConfig(max_seq_len=96, short_seq_prob=0.2)
    for d, pairs in all_pairs(docs, config, seed=7):
        expected_next = 0
        for p in pairs:
            assert p.a.first == expected_next
            expected_next = p.a.last + 1 if p.is_random_next else p.b.last + 1
        assert expected_next == len(lengths[d])


def test_random_next_b_comes_from_another_document():
    docs = make_corpus(4, 30)
    store = InMemoryStore(docs)
    config = InstanceConfig(max_seq_len=128)
    n_random = 0
    for d, pairs in all_pairs(docs, config, seed=11):
        for p in pairs:
            if p.is_random_next:
                n_random += 1
                assert p.b.document != d
                b = store.values(p.b)
                assert np.all(np.diff(b) == 1)  # contiguous sentences of that document
    assert n_random > 50


def test_one_sentence_chunks_are_always_random_next():
    # Every sentence alone reaches the target: every chunk is one sentence long.
    docs = [[np.arange(50) + 100 * k for k in range(6)] for _ in range(5)]
    lengths = InMemoryStore(docs).lengths()
    config = InstanceConfig(max_seq_len=32, short_seq_prob=0.0)
    pairs = create_pairs_from_document(lengths, 0, config, random.Random(0))
    assert len(pairs) == 6
    assert all(p.is_random_next and p.a.first == p.a.last for p in pairs)


def test_nsp_random_share_is_about_half():
    """random_next_prob = 0.5, but a chunk of one sentence (a single sentence
    reaching the target, or the last sentence of a document) always gets a random
    B — as in google-research/bert — so the share lies a little above 50%."""
    config = InstanceConfig(max_seq_len=128)
    n = n_random = 0
    for seed in range(4):
        docs = make_corpus(100 + seed, 150)
        for _, pairs in all_pairs(docs, config, seed):
            n += len(pairs)
            n_random += sum(p.is_random_next for p in pairs)
    share = n_random / n
    assert n > 2000
    assert 0.45 <= share <= 0.62, share


def test_random_next_prob_zero_gives_real_next_for_multi_sentence_chunks():
    docs = make_corpus(5, 40, sentences=(4, 20))
    config = InstanceConfig(max_seq_len=128, random_next_prob=0.0)
    n = n_random = 0
    for _, pairs in all_pairs(docs, config, seed=1):
        for p in pairs:
            if p.is_random_next:
                # only a one-sentence chunk may be random when the probability is 0
                assert p.a.first == p.a.last
                n_random += 1
            n += 1
    assert n_random < 0.2 * n


def test_short_seq_prob_gives_shorter_instances():
    docs = make_corpus(6, 150, sentences=(10, 30))

    def mean_length(prob: float) -> float:
        config = InstanceConfig(max_seq_len=128, short_seq_prob=prob)
        sizes = [len(p.a) + len(p.b) for _, pairs in all_pairs(docs, config, 2) for p in pairs]
        return float(np.mean(sizes))

    long, short = mean_length(0.0), mean_length(1.0)
    assert short < 0.8 * long, (short, long)


def test_short_seq_prob_one_gives_many_instances_per_document():
    docs = make_corpus(7, 60, sentences=(20, 30))
    long = sum(len(p) for _, p in all_pairs(docs, InstanceConfig(128, 0.0), 3))
    short = sum(len(p) for _, p in all_pairs(docs, InstanceConfig(128, 1.0), 3))
    assert short > long


# ------------------------------------------------------------------ truncation


def test_truncation_trims_only_the_longer_side_at_both_ends():
    # Long sentences and a small maximum force truncation on both sides.
    docs = make_corpus(8, 40, sentences=(1, 8), length=(5, 120))
    lengths = InMemoryStore(docs).lengths()
    max_seq_len = 48
    max_num_tokens = max_seq_len - 3
    config = InstanceConfig(max_seq_len=max_seq_len, short_seq_prob=0.1)
    seen = {"a_front": 0, "a_back": 0, "b_front": 0, "b_back": 0}
    truncated = 0
    for _, pairs in all_pairs(docs, config, seed=9):
        for p in pairs:
            full_a, full_b = full_length(lengths, p.a), full_length(lengths, p.b)
            cut_a, cut_b = full_a - len(p.a), full_b - len(p.b)
            if full_a + full_b <= max_num_tokens:
                assert cut_a == cut_b == 0, "a pair that fits must not be truncated"
                continue
            truncated += 1
            # Truncation stops exactly at the maximum.
            assert len(p.a) + len(p.b) == max_num_tokens
            if cut_a and not cut_b:
                assert len(p.a) >= len(p.b), "A trimmed although it was not the longer side"
            if cut_b and not cut_a:
                assert len(p.b) >= len(p.a) - 1, "B trimmed although A was longer"
            if cut_a and cut_b:
                assert abs(len(p.a) - len(p.b)) <= 1
            seen["a_front"] += p.a.start > 0
            seen["a_back"] += p.a.stop < full_a
            seen["b_front"] += p.b.start > 0
            seen["b_back"] += p.b.stop < full_b
    assert truncated > 50
    assert all(v > 0 for v in seen.values()), seen


def _truncate_seq_pair(tokens_a: list[int], tokens_b: list[int], max_num_tokens: int, rng: random.Random) -> None:
    """google-research/bert's ``truncate_seq_pair``, verbatim but for names."""
    while True:
        total_length = len(tokens_a) + len(tokens_b)
        if total_length <= max_num_tokens:
            break
        trunc_tokens = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        assert len(trunc_tokens) >= 1
        if rng.random() < 0.5:
            del trunc_tokens[0]
        else:
            trunc_tokens.pop()


def test_truncation_equals_google_research_bert_draw_for_draw():
    """The same tokens survive as google-research/bert's list-based truncation with
    the same generator, and the generator is left in the same state."""
    from data_prep.instances import _truncate_pair

    sizes = random.Random(3)
    for seed in range(3_000):
        a_length, b_length = sizes.randint(1, 200), sizes.randint(1, 200)
        a_start, b_start = sizes.randint(0, 5), sizes.randint(0, 5)
        max_num_tokens = sizes.randint(2, 260)
        a = Segment(0, 0, 0, a_start, a_start + a_length)
        b = Segment(1, 0, 0, b_start, b_start + b_length)
        ours, theirs = random.Random(seed), random.Random(seed)
        got_a, got_b = _truncate_pair(a, b, max_num_tokens, ours)
        tokens_a, tokens_b = list(range(a.start, a.stop)), list(range(b.start, b.stop))
        _truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, theirs)
        assert list(range(got_a.start, got_a.stop)) == tokens_a
        assert list(range(got_b.start, got_b.stop)) == tokens_b
        assert ours.random() == theirs.random()


def test_randint_draws_as_random_randint():
    """The pair builder's randint gives random.Random.randint's values and leaves the
    generator in the same state (format 5's pairs depend on it), over small and
    large ranges, powers of two (the rejection loop's edge) included."""
    from data_prep.instances import randint

    sizes = random.Random(5)
    bounds = [(0, 0), (1, 1), (2, 2), (0, 1), (0, 3), (0, 4), (1, 2**20), (0, 2**31 - 1), (0, 2**31)]
    bounds += [(low, low + sizes.randint(0, 600)) for low in (sizes.randint(0, 50) for _ in range(2_000))]
    ours, theirs = random.Random(11), random.Random(11)
    for low, high in bounds:
        assert randint(ours, low, high) == theirs.randint(low, high)
    assert ours.getstate() == theirs.getstate()
    with pytest.raises(ValueError, match="empty range"):
        randint(ours, 3, 2)


def test_truncation_of_an_uneven_pair_keeps_the_short_side_whole():
    # One chunk [35, 10] against a budget of 40: only A (the longer side) loses tokens.
    docs = [[np.arange(35), np.arange(35, 45)]] + [[np.arange(5)] for _ in range(3)]
    lengths = InMemoryStore(docs).lengths()
    config = InstanceConfig(max_seq_len=43, short_seq_prob=0.0, random_next_prob=0.0)
    fronts = backs = 0
    for seed in range(40):
        (p,) = create_pairs_from_document(lengths, 0, config, random.Random(seed))
        assert not p.is_random_next
        assert (p.b.start, p.b.stop) == (0, 10)
        assert len(p.a) == 30
        fronts += p.a.start > 0
        backs += p.a.stop < 35
    assert fronts > 0 and backs > 0


# ----------------------------------------------------------------- determinism


def test_same_seed_same_pairs_different_seed_different_pairs():
    docs = make_corpus(10, 30, sentences=(10, 25))
    lengths = InMemoryStore(docs).lengths()
    config = InstanceConfig(max_seq_len=64)
    for d in range(5):
        first = create_pairs_from_document(lengths, d, config, random.Random(42))
        again = create_pairs_from_document(lengths, d, config, random.Random(42))
        assert first == again
        others = [create_pairs_from_document(lengths, d, config, random.Random(s)) for s in range(43, 48)]
        assert any(o != first for o in others)


def test_rng_is_the_only_source_of_randomness():
    docs = make_corpus(11, 10)
    lengths = InMemoryStore(docs).lengths()
    config = InstanceConfig(max_seq_len=64)
    random.seed(1)
    first = create_pairs_from_document(lengths, 3, config, random.Random(7))
    random.seed(2)
    np.random.seed(2)
    assert create_pairs_from_document(lengths, 3, config, random.Random(7)) == first


# ------------------------------------------------------------------ edge cases


def test_single_document_corpus():
    docs = make_corpus(12, 1, sentences=(30, 30))
    store = InMemoryStore(docs)
    lengths = store.lengths()
    config = InstanceConfig(max_seq_len=64)
    n = 0
    for seed in range(10):
        pairs = create_pairs_from_document(lengths, 0, config, random.Random(seed))
        assert pairs
        for p in pairs:
            n += 1
            # With one document, a "random" B can only come from the document itself
            # (google-research/bert gives up after 10 tries the same way).
            assert p.a.document == p.b.document == 0
            assert len(p.a) >= 1 and len(p.b) >= 1
            assert len(assemble(store.values(p.a), store.values(p.b), CLS, SEP)) <= 64
    assert n > 10


def test_single_one_sentence_document():
    docs = [[np.arange(7)]]
    lengths = InMemoryStore(docs).lengths()
    pairs = create_pairs_from_document(lengths, 0, InstanceConfig(max_seq_len=64), random.Random(0))
    assert len(pairs) == 1
    (p,) = pairs
    assert p.is_random_next
    assert len(p.a) == 7 and len(p.b) == 7


def test_empty_document_yields_no_pairs():
    lengths = [[], [5, 6], [7]]
    assert create_pairs_from_document(lengths, 0, InstanceConfig(max_seq_len=32), random.Random(0)) == []


def test_empty_document_is_never_the_random_next_source():
    lengths = [[10] * 8, []]
    config = InstanceConfig(max_seq_len=32, short_seq_prob=0.0)
    for seed in range(20):
        pairs = create_pairs_from_document(lengths, 0, config, random.Random(seed))
        assert pairs
        assert all(p.b.document == 0 for p in pairs if p.is_random_next)


def test_instance_config_rejects_tiny_max_seq_len():
    with pytest.raises(ValueError, match="--max-seq-len 4 leaves no room"):
        InstanceConfig(max_seq_len=4)
    InstanceConfig(max_seq_len=5)


# ---------------------------------------------------- assemble / store values


def test_assemble_places_cls_and_seps():
    a = np.array([7, 8, 9])
    b = np.array([20, 21])
    out = assemble(a, b, CLS, SEP)
    assert out.dtype == np.int64
    assert out.tolist() == [CLS, 7, 8, 9, SEP, 20, 21, SEP]
    out = assemble(np.array([5]), np.array([6]), 1, 2)
    assert out.tolist() == [1, 5, 2, 6, 2]


def test_assemble_all_joins_what_assemble_makes_pair_by_pair():
    docs = make_corpus(3, 6)
    store = InMemoryStore(docs)
    lengths = store.lengths()
    config = InstanceConfig(max_seq_len=40)
    pairs = [p for d in range(len(docs))
             for p in create_pairs_from_document(lengths, d, config, random.Random(d))]
    pairs += single_segments(lengths[0], 0, config)  # B-less pairs mixed in
    joined, sizes = assemble_all(pairs, store, CLS, SEP)
    one_by_one = [assemble(store.values(p.a), store.values(p.b) if p.b else None, CLS, SEP)
                  for p in pairs]
    assert sizes == [len(x) for x in one_by_one]
    assert joined.dtype == np.int64 and np.array_equal(joined, np.concatenate(one_by_one))
    empty, none = assemble_all([], store, CLS, SEP, dtype=bool)
    assert none == [] and empty.dtype == bool and len(empty) == 0
