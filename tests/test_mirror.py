"""The sentence-level contrastive objective (``mirror``: Mirror-BERT / SimCSE): the
InfoNCE value and gradients against an independent computation, pooling, the two
views, and negatives gathered across two gloo ranks equal to one rank over the
concatenated batch."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import free_port
from transformers import BertConfig, BertModel

from tacl_scale.config import MirrorConfig
from tacl_scale.data.loader import CollateConfig, collate
from tacl_scale.data.views import MirrorViews, span_masked
from tacl_scale.mirror import info_nce, pool
from tacl_scale.model import ObjectiveConfig, mirror_loss

pytestmark = pytest.mark.framework  # also run on the GPU image's versions (scripts/test.sh --gpu-image)

CLS, SEP, MASK, PAD = 101, 102, 103, 0
SPECIALS = (PAD, CLS, SEP, MASK)


def nt_xent_by_hand(view1: torch.Tensor, view2: torch.Tensor, temperature: float) -> torch.Tensor:
    """NT-Xent as pytorch_metric_learning's NTXentLoss computes it (what Mirror-BERT
    calls), written out anchor by anchor: every vector of both views is an anchor,
    its other view the positive, every vector with another label a negative."""
    vectors = list(view1) + list(view2)
    n = len(view1)
    labels = list(range(n)) * 2
    losses = []
    for i, anchor in enumerate(vectors):
        def sim(j: int, anchor: torch.Tensor = anchor) -> torch.Tensor:
            other = vectors[j]
            return torch.dot(anchor, other) / (anchor.norm() * other.norm()) / temperature

        positive = (i + n) % (2 * n)
        negatives = [j for j in range(2 * n) if labels[j] != labels[i]]
        numerator = torch.exp(sim(positive))
        denominator = numerator + sum(torch.exp(sim(j)) for j in negatives)
        losses.append(-torch.log(numerator / denominator))
    return torch.stack(losses).mean()


@pytest.mark.parametrize("temperature", [0.04, 0.5])
def test_info_nce_value_and_gradients_match_an_independent_computation(temperature: float) -> None:
    torch.manual_seed(0)
    a = torch.randn(5, 8, dtype=torch.float64, requires_grad=True)
    b = (a.detach() + 1.5 * torch.randn(5, 8, dtype=torch.float64)).requires_grad_(True)
    loss, accuracy = info_nce(a, b, temperature)
    loss.backward()
    grads = (a.grad.clone(), b.grad.clone())
    a.grad = b.grad = None
    expected = nt_xent_by_hand(a, b, temperature)
    expected.backward()
    # info_nce computes in float32 (as it would in a bf16 run); the reference in float64.
    assert float(loss.detach()) > 0.1
    assert float(loss.detach()) == pytest.approx(float(expected.detach()), rel=1e-5)
    assert torch.allclose(grads[0], a.grad, rtol=1e-4, atol=1e-6)
    assert torch.allclose(grads[1], b.grad, rtol=1e-4, atol=1e-6)
    sims = F.normalize(torch.cat([a, b]).detach(), dim=-1) @ F.normalize(torch.cat([a, b]).detach(), dim=-1).T
    sims.fill_diagonal_(-2)
    assert float(accuracy) == pytest.approx(float((sims.argmax(1) == (torch.arange(10) + 5) % 10).double().mean()))


def test_info_nce_is_low_for_matching_views_and_high_for_swapped_ones() -> None:
    torch.manual_seed(1)
    a = torch.randn(6, 16)
    good, good_acc = info_nce(a, a + 0.01 * torch.randn(6, 16), 0.04)
    bad, bad_acc = info_nce(a, a[torch.tensor([1, 2, 3, 4, 5, 0])], 0.04)
    assert float(good_acc) == 1.0 and float(bad_acc) == 0.0
    assert float(good) < 0.01 < 10 < float(bad)


def padded_and_packed(lengths: list[int], dim: int = 4) -> tuple[torch.Tensor, dict, torch.Tensor, dict]:
    torch.manual_seed(2)
    longest = max(lengths)
    hidden = torch.randn(len(lengths), longest, dim)
    mask = torch.zeros(len(lengths), longest, dtype=torch.long)
    for row, n in enumerate(lengths):
        mask[row, :n] = 1
        hidden[row, n:] = 1e6  # padding: must never reach a pooled vector
    packed = torch.cat([hidden[row, :n] for row, n in enumerate(lengths)])
    cu = torch.tensor([0, *np.cumsum(lengths)], dtype=torch.int32)
    return hidden, {"attention_mask": mask}, packed, {"cu_seqlens": cu}


def test_pooling_uses_real_tokens_only_in_both_layouts() -> None:
    lengths = [3, 7, 5]
    hidden, padded, packed, packed_batch = padded_and_packed(lengths)
    mean = pool(hidden, padded, "mean")
    expected = torch.stack([hidden[row, :n].mean(dim=0) for row, n in enumerate(lengths)])
    assert torch.allclose(mean, expected, atol=1e-6)
    assert torch.allclose(pool(packed, packed_batch, "mean"), expected, atol=1e-6)
    assert torch.equal(pool(hidden, padded, "cls"), hidden[:, 0])
    assert torch.equal(pool(packed, packed_batch, "cls"), hidden[:, 0])


def test_span_masking_masks_one_window_of_non_special_tokens() -> None:
    tokens = np.array([CLS, *range(1000, 1012), SEP, *range(2000, 2006), SEP])
    maskable = ~np.isin(tokens, SPECIALS)
    seen = set()
    for seed in range(50):
        out = span_masked(tokens, maskable, 3, MASK, np.random.default_rng(seed))
        where = np.flatnonzero(out != tokens)
        assert len(where) == 3 and np.all(np.diff(where) == 1) and np.all(out[where] == MASK)
        assert maskable[where].all()  # never a special, never across the middle [SEP]
        seen.add(int(where[0]))
    assert len(seen) > 5  # the span moves
    short = np.array([CLS, 1000, 1001, 1002, 1003, 1004, SEP])  # 5 maskable < 6 × span
    assert np.array_equal(span_masked(short, ~np.isin(short, SPECIALS), 1, MASK, np.random.default_rng(0)), short)
    assert np.array_equal(span_masked(tokens, maskable, 0, MASK, np.random.default_rng(0)), tokens)


def test_views_are_the_original_and_a_span_masked_copy_seeded_by_epoch_and_instance() -> None:
    views = MirrorViews(seed=7, span_tokens=2, mask_id=MASK, special_ids=SPECIALS)
    item = {"original_ids": np.array([CLS, *range(1000, 1020), SEP])}
    first = views.apply(item, 0, 3)["mirror_ids"]
    assert first.shape == (2, 22)
    assert np.array_equal(first[0], item["original_ids"])
    assert int((first[1] == MASK).sum()) == 2
    assert np.array_equal(views.apply(item, 0, 3)["mirror_ids"], first)  # deterministic
    by_epoch = {views.apply(item, e, 3)["mirror_ids"][1].tobytes() for e in range(10)}
    by_instance = {views.apply(item, 0, i)["mirror_ids"][1].tobytes() for i in range(10)}
    assert len(by_epoch) > 5 and len(by_instance) > 5  # each of the two moves the span
    assert views.apply(item, 1, 3)["mirror_ids"][1].tobytes() != views.apply(item, 3, 1)["mirror_ids"][1].tobytes()


def tiny_encoder(dropout: float) -> BertModel:
    from tacl_scale.attention import register

    torch.manual_seed(3)
    config = BertConfig(vocab_size=3000, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=dropout,
                        attention_probs_dropout_prob=dropout)
    config._attn_implementation = register()  # as load_student does: packed batches attend per sequence
    return BertModel(config)


def instances(count: int, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    items = []
    for k in range(count):
        a, b = rng.integers(1000, 3000, rng.integers(4, 12)), rng.integers(1000, 3000, rng.integers(4, 12))
        original = np.array([CLS, *a, SEP, *b, SEP])
        types = np.array([0] * (len(a) + 2) + [1] * (len(b) + 1))
        item = {"original_ids": original, "input_ids": original.copy(), "token_type_ids": types,
                "masked_positions": np.zeros(0, dtype=np.int64), "nsp_label": 0}
        items.append(MirrorViews(5, 2, MASK, SPECIALS).apply(item, 0, k))
    return items


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_mirror_loss_is_the_same_padded_and_packed(pooling: str) -> None:
    encoder = tiny_encoder(0.0).eval()
    items = instances(6)
    config = MirrorConfig(temperature=0.05, pooling=pooling, span_tokens=2)
    padded, packed = collate(items, CollateConfig(pad_id=PAD)), collate(items, CollateConfig(pad_id=PAD, unpad=True))
    assert packed["mirror_ids"].shape == (2, int(packed["cu_seqlens"][-1]))
    loss_padded, _ = mirror_loss(encoder, padded, config)
    loss_packed, _ = mirror_loss(encoder, packed, config)
    assert float(loss_padded.detach()) == pytest.approx(float(loss_packed.detach()), rel=1e-5)
    # The sentence vectors themselves agree (a random tiny encoder's loss is near log(2N − 1)
    # whatever it computes, so the vectors are the sharper check).
    from tacl_scale.mirror import both_views
    from tacl_scale.model import encode

    vectors = []
    for batch in (padded, packed):
        ids, doubled = both_views(batch)
        hidden = encode(encoder, ids, doubled).last_hidden_state
        vectors.append(pool(hidden[0] if "cu_seqlens" in doubled else hidden, doubled, pooling))
    assert vectors[0].shape == (12, 32)
    assert torch.allclose(vectors[0], vectors[1], atol=1e-5)


def test_dropout_makes_the_two_views_differ_and_eval_does_not() -> None:
    items = instances(4)
    for item in items:  # span 0: the views differ by dropout alone (SimCSE)
        item["mirror_ids"] = np.stack([item["original_ids"], item["original_ids"]])
    batch = collate(items, CollateConfig(pad_id=PAD))
    encoder = tiny_encoder(0.1)
    from tacl_scale.mirror import both_views

    ids, doubled = both_views(batch)
    for training, differ in ((True, True), (False, False)):
        encoder.train(training)
        hidden = encoder(input_ids=ids, **doubled).last_hidden_state
        view1, view2 = pool(hidden, doubled, "cls").chunk(2)
        assert (not torch.allclose(view1, view2)) == differ


def test_objective_config_validation() -> None:
    assert ObjectiveConfig(("mlm", "nsp", "mirror")).mirror.temperature == 0.04
    with pytest.raises(ValueError, match="subset of tacl,mlm,nsp,mirror"):
        ObjectiveConfig(("mirror", "simcse"))
    with pytest.raises(ValueError, match="twice"):
        ObjectiveConfig(("mirror", "mirror"))
    with pytest.raises(ValueError, match="pooling"):
        MirrorConfig(pooling="max")
    with pytest.raises(ValueError, match="temperature"):
        MirrorConfig(temperature=0)


# -- negatives from the global batch -------------------------------------------------------------------------

def _loss_and_grads(encoder: BertModel, items: list[dict], gather) -> tuple[float, dict[str, torch.Tensor]]:
    encoder.zero_grad()
    loss, _ = mirror_loss(encoder, collate(items, CollateConfig(pad_id=PAD)),
                          MirrorConfig(temperature=0.05, pooling="mean"), gather)
    loss.backward()
    return float(loss.detach()), {name: p.grad.clone() for name, p in encoder.named_parameters() if p.grad is not None}


def _rank(rank: int, port: int, out: str) -> None:
    import torch.distributed as dist

    from tacl_scale.distributed import Distributed

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        torch.set_num_threads(1)
        items = instances(8)[rank * 4 : rank * 4 + 4]
        loss, grads = _loss_and_grads(tiny_encoder(0.0), items, Distributed(rank, rank, 2, torch.device("cpu")).gather_rows)
        # What DeepSpeed does with each rank's gradients and what train.py logs: the mean over ranks.
        for grad in grads.values():
            dist.all_reduce(grad)
            grad /= 2
        total = torch.tensor([loss])
        dist.all_reduce(total)
        if rank == 0:
            torch.save({"loss": float(total) / 2, "grads": grads}, out)
    finally:
        dist.destroy_process_group()


def test_two_ranks_with_gathered_negatives_equal_one_rank_over_the_whole_batch(tmp_path: Path) -> None:
    """Dropout is 0 so both runs see the same views (the span masks come from the
    data side, seeded per instance); the difference would be the negatives."""
    import torch.multiprocessing as mp

    out = tmp_path / "two_ranks.pt"
    # spawn, not fork: a fork copies the locks of this process's other threads (an earlier test's
    # compile workers, gloo), and a rank hung in torch's first call after the fork.
    mp.start_processes(_rank, args=(free_port(), str(out)), nprocs=2, start_method="spawn")
    two = torch.load(out)
    loss, grads = _loss_and_grads(tiny_encoder(0.0), instances(8), None)
    assert two["loss"] == pytest.approx(loss, rel=1e-5)
    assert set(two["grads"]) == set(grads)
    for name, grad in grads.items():
        assert torch.allclose(two["grads"][name], grad, rtol=1e-4, atol=1e-7), name
    # Without the gather each rank would see 3 negatives instead of 7: a different loss.
    local = [_loss_and_grads(tiny_encoder(0.0), instances(8)[k : k + 4], None)[0] for k in (0, 4)]
    assert sum(local) / 2 != pytest.approx(loss, rel=1e-3)


def _gather_rank(rank: int, port: int, out: str) -> None:
    import torch.distributed as dist

    from tacl_scale.distributed import Distributed

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        torch.set_num_threads(1)  # a forked child must not use the parent's OpenMP pool
        view1, view2 = _anchor_vectors()
        mine = slice(3 * rank, 3 * rank + 3)
        a, b = view1[mine].clone().requires_grad_(True), view2[mine].clone().requires_grad_(True)
        loss, _ = info_nce(a, b, 0.5, Distributed(rank, rank, 2, torch.device("cpu")).gather_rows)
        loss.backward()
        # DeepSpeed averages the ranks' gradients; the logged loss is the ranks' mean.
        total = loss.detach().double().reshape(1)
        dist.all_reduce(total)
        torch.save({"loss": float(total) / 2, "grad1": a.grad / 2, "grad2": b.grad / 2}, f"{out}.{rank}")
    finally:
        dist.destroy_process_group()


def _anchor_vectors() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(11)
    view1 = torch.randn(6, 5, generator=g, dtype=torch.float64)
    return view1, view1 + 0.8 * torch.randn(6, 5, generator=g, dtype=torch.float64)


def test_the_cross_rank_gather_is_autograd_correct_against_a_float64_nt_xent(tmp_path: Path) -> None:
    """Two gloo ranks of 3 sequences each, through ``Distributed.gather_rows`` (the
    collective torch ships in every supported version): the loss and every vector's
    gradient equal NT-Xent over all 6 sequences, written anchor by anchor in float64.
    A gather without a backward (or one that dropped the other rank's gradient)
    would leave the gradients of the negatives out."""
    import torch.multiprocessing as mp

    out = tmp_path / "gather"
    mp.start_processes(_gather_rank, args=(free_port(), str(out)), nprocs=2, start_method="spawn")
    view1, view2 = (v.clone().requires_grad_(True) for v in _anchor_vectors())
    expected = nt_xent_by_hand(view1, view2, 0.5)
    expected.backward()
    ranks = [torch.load(f"{out}.{rank}") for rank in (0, 1)]
    assert ranks[0]["loss"] == pytest.approx(float(expected.detach()), rel=1e-5)
    got1 = torch.cat([r["grad1"] for r in ranks]).double()
    got2 = torch.cat([r["grad2"] for r in ranks]).double()
    # info_nce computes in float32, the reference in float64.
    torch.testing.assert_close(got1, view1.grad, rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(got2, view2.grad, rtol=1e-4, atol=1e-6)
