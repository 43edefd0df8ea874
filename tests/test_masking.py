"""BERT masked-LM masking (tacl_scale.data.masking), checked against google-research/bert
``create_masked_lm_predictions`` with the documented deviations: the budget is
``round(masked_lm_prob * #maskable)``, random tokens come from ``replacement_ids``,
and the generator is a numpy ``Generator``."""

from __future__ import annotations

import random

import numpy as np
import pytest

from tacl_scale.data.masking import (
    MaskedTokens,
    MaskingConfig,
    mask_instances,
    mask_pass,
    mask_tokens,
    seeded_generators,
)

PAD, UNK, CLS, SEP, MASK = 0, 100, 101, 102, 103
SPECIALS = np.array([PAD, UNK, CLS, SEP, MASK])
VOCAB = 1000
REPLACEMENT_IDS = np.setdiff1d(np.arange(VOCAB), SPECIALS).astype(np.int32)


def make_batch(
    rng: np.random.Generator, count: int, length: int = 128
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``count`` sequences [CLS] A [SEP] B [SEP] of random ordinary tokens with a few
    [UNK]s (so the number of maskable tokens varies); returns tokens, maskable and
    word starts (words of about 1-5 tokens), each of shape (count, length)."""
    tokens = REPLACEMENT_IDS[rng.integers(0, len(REPLACEMENT_IDS), size=(count, length))].astype(np.int64)
    tokens[:, 0] = CLS
    tokens[np.arange(count), rng.integers(5, length - 5, size=count)] = SEP
    tokens[:, -1] = SEP
    unk = rng.random((count, length)) < rng.uniform(0.0, 0.2, size=(count, 1))
    unk[:, [0, -1]] = False
    tokens[unk] = UNK
    maskable = ~np.isin(tokens, SPECIALS)
    word_starts = (rng.random((count, length)) < 0.45) | ~maskable
    word_starts[:, :2] = True
    return tokens, maskable, word_starts


def make_sequence(rng: np.random.Generator, length: int = 128) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    tokens, maskable, word_starts = make_batch(rng, 1, length)
    return tokens[0], maskable[0], word_starts[0]


def run(tokens, maskable, word_starts, config=None, max_predictions=20, rng=None) -> MaskedTokens:
    return mask_tokens(
        tokens,
        maskable,
        word_starts,
        config or MaskingConfig(),
        max_predictions,
        MASK,
        REPLACEMENT_IDS,
        rng if rng is not None else np.random.default_rng(0),
    )


def check_basic(tokens, maskable, out: MaskedTokens, max_predictions: int) -> None:
    assert out.positions.dtype == np.int64 and out.placed.dtype == np.int64
    assert len(out.positions) == len(out.placed)
    assert len(out.positions) <= max_predictions
    assert np.all(np.diff(out.positions) > 0), "positions must be sorted and unique"
    assert np.all(maskable[out.positions]), "a special token was chosen"
    changed = out.placed != tokens[out.positions]
    random_placed = out.placed[changed & (out.placed != MASK)]
    assert np.all(np.isin(random_placed, REPLACEMENT_IDS))
    assert not np.any(np.isin(random_placed, SPECIALS))


# --------------------------------------------------------------- token masking


def test_statistics_over_a_large_sample():
    """20k sequences of 128 tokens: 15% of the maskable tokens are chosen, of those
    80% [MASK], 10% random, 10% unchanged."""
    rng = np.random.default_rng(1234)
    config = MaskingConfig()
    max_predictions = config.resolved_max_predictions(128)
    n_maskable = n_masked = n_mask = n_random = n_kept = 0
    for tokens, maskable, _ in zip(*make_batch(rng, 20_000), strict=True):
        out = run(tokens, maskable, None, config, max_predictions, rng)
        check_basic(tokens, maskable, out, max_predictions)
        m = int(maskable.sum())
        assert len(out.positions) == min(max_predictions, max(1, round(0.15 * m)))
        original = tokens[out.positions]
        n_maskable += m
        n_masked += len(out.positions)
        n_mask += int((out.placed == MASK).sum())
        n_random += int(((out.placed != MASK) & (out.placed != original)).sum())
        n_kept += int((out.placed == original).sum())
    assert n_mask + n_random + n_kept == n_masked
    assert abs(n_masked / n_maskable - 0.15) < 0.003, n_masked / n_maskable
    # A random draw equal to the original (probability 1/995 of 10%) counts as kept.
    assert abs(n_mask / n_masked - 0.80) < 0.01
    assert abs(n_random / n_masked - 0.10) < 0.01
    assert abs(n_kept / n_masked - 0.10) < 0.01


def test_custom_rates():
    rng = np.random.default_rng(5)
    config = MaskingConfig(masked_lm_prob=0.3, mask_token_prob=0.5, random_token_prob=0.5)
    n_masked = n_mask = n_maskable = n_kept = 0
    for tokens, maskable, _ in zip(*make_batch(rng, 2000), strict=True):
        out = run(tokens, maskable, None, config, 128, rng)
        check_basic(tokens, maskable, out, 128)
        n_maskable += int(maskable.sum())
        n_masked += len(out.positions)
        n_mask += int((out.placed == MASK).sum())
        n_kept += int((out.placed == tokens[out.positions]).sum())
    assert abs(n_masked / n_maskable - 0.3) < 0.003
    assert abs(n_mask / n_masked - 0.5) < 0.02
    # no "keep" share: only a random draw equal to the original (p = 1/995) stays
    assert n_kept / n_masked < 0.005


def test_specials_never_chosen_and_random_tokens_never_special():
    rng = np.random.default_rng(7)
    # All-random replacement makes the replacement check bite on every position.
    config = MaskingConfig(masked_lm_prob=0.5, mask_token_prob=0.0, random_token_prob=1.0)
    for tokens, maskable, _ in zip(*make_batch(rng, 500, 64), strict=True):
        out = run(tokens, maskable, None, config, 64, rng)
        check_basic(tokens, maskable, out, 64)
        assert np.all(np.isin(out.placed, REPLACEMENT_IDS))


def test_replacements_come_from_replacement_ids_only():
    tokens = np.arange(10, 74, dtype=np.int64)
    maskable = np.ones(64, dtype=bool)
    config = MaskingConfig(masked_lm_prob=0.5, mask_token_prob=0.0, random_token_prob=1.0)
    replacement_ids = np.array([500, 501, 502])
    seen = set()
    for seed in range(50):
        out = mask_tokens(tokens, maskable, None, config, 64, MASK, replacement_ids, np.random.default_rng(seed))
        seen.update(out.placed.tolist())
    assert seen == {500, 501, 502}


def test_budget_is_rounded_share_of_maskable_tokens_capped():
    config = MaskingConfig()
    for length in (1, 2, 3, 4, 7, 10, 13, 20, 33, 100, 126, 200, 500):
        tokens = np.arange(1000, 1000 + length + 2)
        tokens[0], tokens[-1] = CLS, SEP
        maskable = np.ones(length + 2, dtype=bool)
        maskable[[0, -1]] = False
        for cap in (1, 5, 20, 1000):
            out = run(tokens, maskable, None, config, cap)
            assert len(out.positions) == min(cap, max(1, int(round(0.15 * length))))
            check_basic(tokens, maskable, out, cap)


def test_no_maskable_tokens():
    tokens = np.array([CLS, SEP, SEP])
    out = run(tokens, np.zeros(3, dtype=bool), None)
    assert out.positions.size == 0 and out.placed.size == 0
    assert out.positions.dtype == np.int64 and out.placed.dtype == np.int64


def test_single_maskable_token_is_always_chosen():
    tokens = np.array([CLS, 555, SEP, SEP])
    maskable = np.array([False, True, False, False])
    for seed in range(10):
        out = run(tokens, maskable, None, rng=np.random.default_rng(seed))
        assert out.positions.tolist() == [1]


def test_input_not_modified():
    rng = np.random.default_rng(3)
    tokens, maskable, word_starts = make_sequence(rng)
    copies = tokens.copy(), maskable.copy(), word_starts.copy()
    run(tokens, maskable, word_starts, MaskingConfig(whole_word_masking=True), rng=rng)
    run(tokens, maskable, word_starts, rng=rng)
    for before, after in zip(copies, (tokens, maskable, word_starts), strict=True):
        assert np.array_equal(before, after)


# ---------------------------------------------------------- whole-word masking


def words_of(maskable: np.ndarray, word_starts: np.ndarray) -> list[np.ndarray]:
    """The words as whole-word masking must see them: a maskable token begins a
    word when word_starts says so or when the previous token is not maskable."""
    words: list[list[int]] = []
    for i in np.flatnonzero(maskable):
        if word_starts[i] or i == 0 or not maskable[i - 1] or not words:
            words.append([i])
        else:
            words[-1].append(i)
    return [np.array(w) for w in words]


def test_whole_word_masking_masks_whole_words_only():
    rng = np.random.default_rng(11)
    config = MaskingConfig(whole_word_masking=True)
    n_masked = n_maskable = 0
    multi_token_words_masked = 0
    for tokens, maskable, word_starts in zip(*make_batch(rng, 3000), strict=True):
        out = run(tokens, maskable, word_starts, config, 20, rng)
        check_basic(tokens, maskable, out, 20)
        budget = min(20, max(1, round(0.15 * int(maskable.sum()))))
        assert len(out.positions) <= budget
        chosen = np.zeros(len(tokens), dtype=bool)
        chosen[out.positions] = True
        for word in words_of(maskable, word_starts):
            assert chosen[word].all() or not chosen[word].any(), f"word {word} partly masked"
            multi_token_words_masked += len(word) > 1 and chosen[word].all()
        n_masked += len(out.positions)
        n_maskable += int(maskable.sum())
    assert multi_token_words_masked > 1000
    # Words that would overshoot are skipped, but single-token words fill the rest.
    assert 0.14 < n_masked / n_maskable <= 0.1505


def test_whole_word_masking_never_joins_pieces_across_a_gap():
    # A "word" whose continuation lies after a special token: the special breaks it,
    # so the two sides are separate words and neither drags the other along.
    tokens = np.array([CLS, 10, 11, UNK, 12, 13, 14, 15, 16, 17, SEP])
    maskable = ~np.isin(tokens, SPECIALS)
    word_starts = np.array([1, 1, 0, 1, 0, 0, 1, 1, 1, 1, 1], dtype=bool)
    # position 4 continues a word, but position 3 is special: 4..5 is its own word
    config = MaskingConfig(masked_lm_prob=0.25, whole_word_masking=True)
    seen_right_piece = seen_left_piece = 0
    for seed in range(300):
        out = run(tokens, maskable, word_starts, config, 20, np.random.default_rng(seed))
        chosen = set(out.positions.tolist())
        assert 3 not in chosen
        assert ({1, 2} <= chosen) or not ({1, 2} & chosen)
        assert ({4, 5} <= chosen) or not ({4, 5} & chosen)
        seen_left_piece += {1, 2} <= chosen and not ({4, 5} & chosen)
        seen_right_piece += {4, 5} <= chosen and not ({1, 2} & chosen)
    assert seen_left_piece and seen_right_piece


def test_whole_word_masking_skips_words_that_overshoot():
    # One 5-token word and three 1-token words; budget round(0.25 * 8) = 2.
    tokens = np.arange(20, 28)
    maskable = np.ones(8, dtype=bool)
    word_starts = np.array([1, 0, 0, 0, 0, 1, 1, 1], dtype=bool)
    config = MaskingConfig(masked_lm_prob=0.25, whole_word_masking=True)
    for seed in range(50):
        out = run(tokens, maskable, word_starts, config, 20, np.random.default_rng(seed))
        assert len(out.positions) == 2
        assert set(out.positions.tolist()) <= {5, 6, 7}


def test_whole_word_masking_without_word_starts_falls_back_to_tokens():
    rng = np.random.default_rng(2)
    tokens, maskable, _ = make_sequence(rng)
    out = run(tokens, maskable, None, MaskingConfig(whole_word_masking=True), 20, rng)
    assert len(out.positions) == min(20, round(0.15 * int(maskable.sum())))


# ----------------------------------------------------------------- determinism


def test_seeded_generators_are_deterministic():
    rng = np.random.default_rng(0)
    tokens, maskable, word_starts = make_sequence(rng)
    config = MaskingConfig(whole_word_masking=True)

    def masks(seed, doc, dupe):
        py_rng, np_rng = seeded_generators(seed, doc, dupe)
        assert isinstance(py_rng, random.Random) and isinstance(np_rng, np.random.Generator)
        out = run(tokens, maskable, word_starts, config, 20, np_rng)
        return py_rng.random(), out.positions.tolist(), out.placed.tolist()

    first = masks(12345, "Albert Einstein", 0)
    assert masks(12345, "Albert Einstein", 0) == first
    for other in (masks(12345, "Albert Einstein", 1), masks(12345, "Albert Einsteim", 0),
                  masks(12346, "Albert Einstein", 0)):
        assert other[0] != first[0]
        assert other[1:] != first[1:]


def test_seeded_generators_are_stable_across_processes():
    """No hash() randomisation: the values are pinned (blake2b of seed, id, dupe)."""
    py_rng, np_rng = seeded_generators(12345, "doc-1", 0)
    assert py_rng.getrandbits(32) == 3215846388
    assert int(np_rng.integers(0, 1 << 30)) == 605637063
    # The separator keeps ("1", "23") and ("12", "3") apart.
    assert seeded_generators(1, "23", 0)[0].random() != seeded_generators(12, "3", 0)[0].random()


# -------------------------------------------------------------------- config


def test_resolved_max_predictions():
    assert MaskingConfig().resolved_max_predictions(128) == 20
    assert MaskingConfig().resolved_max_predictions(256) == 39
    assert MaskingConfig().resolved_max_predictions(512) == 77
    assert MaskingConfig(max_predictions_per_seq=7).resolved_max_predictions(128) == 7
    assert MaskingConfig(masked_lm_prob=0.2).resolved_max_predictions(100) == 20


@pytest.mark.parametrize(
    ("kwargs", "said"),
    [
        ({"masked_lm_prob": 0.0}, r"--masked-lm-prob 0\.0 must be in \(0, 1\)"),
        ({"masked_lm_prob": 1.0}, r"--masked-lm-prob 1\.0 must be in \(0, 1\)"),
        ({"masked_lm_prob": -0.1}, r"--masked-lm-prob -0\.1 must be in \(0, 1\)"),
        ({"masked_lm_prob": float("nan")}, r"--masked-lm-prob nan must be in \(0, 1\)"),
        ({"mask_token_prob": -0.1}, r"mask_token_prob -0\.1 and random_token_prob 0\.1: each must be >= 0"),
        ({"random_token_prob": -0.1}, r"mask_token_prob 0\.8 and random_token_prob -0\.1: each must be >= 0"),
        ({"mask_token_prob": 0.9, "random_token_prob": 0.2}, r"0\.9 and random_token_prob 0\.2: .* sum at most 1"),
        ({"mask_token_prob": 1.5, "random_token_prob": 0.0}, r"1\.5 and random_token_prob 0\.0: .* sum at most 1"),
    ],
)
def test_masking_config_rejects_bad_values(kwargs, said):
    with pytest.raises(ValueError, match=said):
        MaskingConfig(**kwargs)


def test_masking_config_accepts_edge_values():
    """The ends of the accepted ranges are kept as given and mean what they say:
    every chosen token [MASK]; every chosen token left as it is; and nearly every
    maskable token chosen, in whole words."""
    tokens, maskable, word_starts = make_sequence(np.random.default_rng(7))
    maskable_positions = np.flatnonzero(maskable)

    always_mask = MaskingConfig(mask_token_prob=1.0, random_token_prob=0.0)
    assert (always_mask.mask_token_prob, always_mask.random_token_prob) == (1.0, 0.0)
    out = run(tokens, maskable, None, always_mask)
    check_basic(tokens, maskable, out, 20)
    assert len(out.positions) == min(20, round(0.15 * len(maskable_positions)))
    assert np.all(out.placed == MASK)

    never_replace = MaskingConfig(mask_token_prob=0.0, random_token_prob=0.0)
    assert (never_replace.mask_token_prob, never_replace.random_token_prob) == (0.0, 0.0)
    out = run(tokens, maskable, None, never_replace)
    check_basic(tokens, maskable, out, 20)
    assert len(out.positions) > 0 and np.array_equal(out.placed, tokens[out.positions])

    nearly_all = MaskingConfig(masked_lm_prob=0.999, whole_word_masking=True)
    assert nearly_all.masked_lm_prob == 0.999 and nearly_all.whole_word_masking
    assert nearly_all.resolved_max_predictions(128) == 128  # ceil(127.872)
    # round(0.999 * m) == m for fewer than 500 maskable tokens: every word fits the budget.
    out = run(tokens, maskable, word_starts, nearly_all, max_predictions=128)
    check_basic(tokens, maskable, out, 128)
    assert np.array_equal(out.positions, maskable_positions)


def test_masking_config_rejects_negative_max_predictions():
    with pytest.raises(ValueError, match="--max-predictions-per-seq -1 must be >= 1"):
        MaskingConfig(max_predictions_per_seq=-1)


def _reference_mask_tokens(tokens, maskable, word_starts, config, max_predictions, mask_id, replacement_ids, rng):
    """mask_tokens written plainly (as first committed): the fast version must draw
    the same numbers in the same order, since the masks are part of the dataset."""
    positions = np.flatnonzero(maskable)
    if len(positions) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    budget = min(max_predictions, max(1, int(round(len(positions) * config.masked_lm_prob))))
    if config.whole_word_masking and word_starts is not None:
        new_word = np.ones(len(positions), dtype=bool)
        new_word[1:] = word_starts[positions[1:]] | (np.diff(positions) != 1)
        starts = np.flatnonzero(new_word)
        ends = np.append(starts[1:], len(positions))
        pieces, count = [], 0
        for word in rng.permutation(len(starts)).tolist():
            if count >= budget:
                break
            size = int(ends[word] - starts[word])
            if count + size > budget:
                continue
            pieces.append(positions[starts[word] : ends[word]])
            count += size
        chosen = np.concatenate(pieces) if pieces else positions[:0]
    else:
        chosen = rng.permutation(positions)[:budget]
    chosen = np.sort(chosen).astype(np.int64)
    draws = rng.random(len(chosen))
    placed = np.asarray(tokens, dtype=np.int64)[chosen]
    placed[draws < config.mask_token_prob] = mask_id
    randomized = (draws >= config.mask_token_prob) & (draws < config.mask_token_prob + config.random_token_prob)
    placed[randomized] = replacement_ids[rng.integers(0, len(replacement_ids), int(randomized.sum()))]
    return chosen, placed


@pytest.mark.parametrize("whole_words", [False, True])
def test_mask_tokens_draws_as_the_plain_reference(whole_words):
    config = MaskingConfig(whole_word_masking=whole_words)
    replacement_ids = np.arange(5, 1000, dtype=np.int32)
    sizes = np.random.default_rng(0)
    for seed in range(300):
        n = int(sizes.integers(3, 260))
        tokens = sizes.integers(5, 1000, n).astype(np.int64)
        maskable = sizes.random(n) < 0.95
        word_starts = sizes.random(n) < 0.6
        # The same generator object runs on through several calls, as in a shard.
        fast_rng, plain_rng = np.random.default_rng(seed), np.random.default_rng(seed)
        for _ in range(3):
            got = mask_tokens(tokens, maskable, word_starts, config, 40, 4, replacement_ids, fast_rng)
            want = _reference_mask_tokens(tokens, maskable, word_starts, config, 40, 4, replacement_ids, plain_rng)
            assert got.positions.dtype == np.int64 and got.placed.dtype == np.int64
            assert got.positions.tolist() == want[0].tolist() and got.placed.tolist() == want[1].tolist()


@pytest.mark.parametrize("whole_words", [False, True])
def test_mask_instances_equals_one_plain_call_per_instance(whole_words):
    """A document's instances masked in one call: the same positions and tokens as
    masking each instance on its own, with generators shared by consecutive
    instances (one per dupe pass, as in a shard) and instances with nothing maskable."""
    config = MaskingConfig(whole_word_masking=whole_words)
    replacement_ids = np.arange(5, 1000, dtype=np.int32)
    sizes = np.random.default_rng(1)
    for seed in range(60):
        lengths, tokens, maskable, word_starts = _random_pass(sizes, seed, most_instances=12)
        passes = [np.random.default_rng([seed, p]) for p in range(len(lengths))]
        plain_passes = [np.random.default_rng([seed, p]) for p in range(len(lengths))]
        got = mask_instances(tokens, maskable, word_starts, lengths, [passes[k // 3] for k in range(len(lengths))],
                             config, 40, 4, replacement_ids)
        want_positions, want_placed, want_counts, first = [], [], [], 0
        for k, length in enumerate(lengths):
            end = first + length
            positions, placed = _reference_mask_tokens(tokens[first:end], maskable[first:end],
                                                       word_starts[first:end], config, 40, 4,
                                                       replacement_ids, plain_passes[k // 3])
            want_positions += positions.tolist()
            want_placed += placed.tolist()
            want_counts.append(len(positions))
            first = end
        assert got.counts == want_counts
        assert got.positions.tolist() == want_positions and got.placed.tolist() == want_placed
        assert got.positions.dtype == np.int64 and got.placed.dtype == np.int64


def _reference_mask_pass(tokens, maskable, word_starts, lengths, rng, config, max_predictions, mask_id,
                         replacement_ids):
    """mask_pass written plainly from its docstring (format 5's static masks): one
    key per maskable position (per word), each instance's smallest, then the draws."""
    bounds = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    instances = [np.flatnonzero(maskable[bounds[k]:bounds[k + 1]]) + bounds[k] for k in range(len(lengths))]
    budgets = [min(len(p), max_predictions, max(1, int(round(len(p) * config.masked_lm_prob)))) for p in instances]
    chosen = []
    if config.whole_word_masking:
        words = []  # (instance, its positions), in position order
        for k, positions in enumerate(instances):
            for i, position in enumerate(positions.tolist()):
                if i == 0 or word_starts[position] or position != positions[i - 1] + 1:
                    words.append((k, []))
                words[-1][1].append(position)
        keys = rng.random(len(words)).tolist()
        for k, budget in enumerate(budgets):
            mine = sorted((k + keys[w] / 2, w) for w in range(len(words)) if words[w][0] == k)
            taken = 0
            for _, w in mine:
                if taken >= budget:
                    break
                if taken + len(words[w][1]) <= budget:
                    chosen += words[w][1]
                    taken += len(words[w][1])
    else:
        keys = rng.random(sum(len(p) for p in instances)).tolist()
        at = 0
        for k, (positions, budget) in enumerate(zip(instances, budgets, strict=True)):
            mine = sorted((k + keys[at + i] / 2, int(p)) for i, p in enumerate(positions))
            chosen += [p for _, p in mine[:budget]]
            at += len(positions)
    chosen = np.array(sorted(chosen), dtype=np.int64)
    draws = rng.random(len(chosen))
    placed = np.asarray(tokens, dtype=np.int64)[chosen]
    placed[draws < config.mask_token_prob] = mask_id
    randomized = (draws >= config.mask_token_prob) & (draws < config.mask_token_prob + config.random_token_prob)
    placed[randomized] = replacement_ids[rng.integers(0, len(replacement_ids), int(randomized.sum()))]
    owner = np.searchsorted(bounds, chosen, side="right") - 1
    counts = np.bincount(owner, minlength=len(lengths)).tolist()
    return chosen - bounds[owner], placed, counts


def _random_pass(sizes: np.random.Generator, seed: int, most_instances: int = 40):
    """Instances of random lengths joined (tokens, maskable, word starts), as a pass
    over a document gives them."""
    lengths = sizes.integers(1, 200, int(sizes.integers(1, most_instances))).tolist()
    total = sum(lengths)
    tokens = sizes.integers(5, 1000, total).astype(np.int64)
    maskable = sizes.random(total) < 0.9
    maskable[: lengths[0]] &= seed % 3 != 0  # some passes open with an instance of specials only
    word_starts = sizes.random(total) < 0.6
    return lengths, tokens, maskable, word_starts


@pytest.mark.parametrize("whole_words", [False, True])
def test_mask_pass_draws_as_its_plain_reference(whole_words):
    """Format 5's static masks: the vectorised pass equals the contract written out
    instance by instance, with one generator running on through several passes."""
    config = MaskingConfig(whole_word_masking=whole_words)
    replacement_ids = np.arange(5, 1000, dtype=np.int32)
    sizes = np.random.default_rng(2)
    for seed in range(60):
        fast_rng, plain_rng = np.random.default_rng(seed), np.random.default_rng(seed)
        for _ in range(2):
            lengths, tokens, maskable, word_starts = _random_pass(sizes, seed)
            got = mask_pass(tokens, maskable, word_starts, lengths, fast_rng, config, 40, 4, replacement_ids)
            positions, placed, counts = _reference_mask_pass(tokens, maskable, word_starts, lengths, plain_rng,
                                                             config, 40, 4, replacement_ids)
            assert got.counts == counts
            assert got.positions.tolist() == positions.tolist() and got.placed.tolist() == placed.tolist()
            assert got.positions.dtype == np.int64 and got.placed.dtype == np.int64


class _TiedKeys:
    """A generator whose uniforms are all equal (every key ties), its integers real."""

    def __init__(self, seed: int) -> None:
        self.real = np.random.default_rng(seed)

    def random(self, n: int) -> np.ndarray:
        return np.full(n, 0.3)

    def integers(self, low: int, high: int, size: int) -> np.ndarray:
        return self.real.integers(low, high, size)


@pytest.mark.parametrize("whole_words", [False, True])
def test_mask_pass_decides_equal_keys_by_position(whole_words):
    """Keys equal at an instance's cut (here all of them) are taken in position
    order: each instance's first maskable positions (its first words that fit)."""
    config = MaskingConfig(whole_word_masking=whole_words, mask_token_prob=0.2, random_token_prob=0.2)
    replacement_ids = np.arange(5, 1000, dtype=np.int32)
    lengths, tokens, maskable, word_starts = _random_pass(np.random.default_rng(3), 1)
    got = mask_pass(tokens, maskable, word_starts, lengths, _TiedKeys(0), config, 40, 4, replacement_ids)
    positions, placed, counts = _reference_mask_pass(tokens, maskable, word_starts, lengths, _TiedKeys(0), config,
                                                     40, 4, replacement_ids)
    assert got.counts == counts and got.positions.tolist() == positions.tolist()
    assert got.placed.tolist() == placed.tolist()
    if not whole_words:
        first = at = 0
        for length, count in zip(lengths, got.counts, strict=True):
            mine = np.flatnonzero(maskable[first : first + length])
            assert got.positions[at : at + count].tolist() == mine[:count].tolist()
            first, at = first + length, at + count
        assert sum(got.counts) > 0


def test_mask_pass_statistics():
    """Over many passes: each instance gets exactly its budget of non-special
    positions, every maskable position is as likely as another, and the chosen
    tokens become [MASK] / random / kept at 80 / 10 / 10."""
    config = MaskingConfig()
    rng = np.random.default_rng(4)
    length, instances = 100, 8
    tokens = rng.integers(200, VOCAB, length * instances).astype(np.int64)
    maskable = np.ones(length * instances, dtype=bool)
    maskable[::length] = maskable[length - 1 :: length] = False  # [CLS] ... [SEP]
    hits = np.zeros(length * instances)
    mask = random_token = kept = 0
    for seed in range(400):
        got = mask_pass(tokens, maskable, None, [length] * instances, np.random.default_rng(seed), config, 20,
                        MASK, REPLACEMENT_IDS)
        assert got.counts == [round(98 * 0.15)] * instances
        absolute = got.positions + np.repeat(np.arange(instances) * length, got.counts)
        assert maskable[absolute].all()
        hits[absolute] += 1
        original = tokens[absolute]
        mask += int(np.count_nonzero(got.placed == MASK))
        kept += int(np.count_nonzero(got.placed == original))
        random_token += int(np.count_nonzero((got.placed != MASK) & (got.placed != original)))
    chosen = mask + random_token + kept
    assert abs(mask / chosen - 0.8) < 0.01 and abs(kept / chosen - 0.1) < 0.01
    rate = hits[maskable] / 400  # each position: chosen with probability 15/98
    assert abs(rate.mean() - 15 / 98) < 1e-9 and rate.std() < 0.03 and rate.min() > 0.08
