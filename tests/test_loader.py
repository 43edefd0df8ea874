"""The micro-batch sampler over the global order, collate (padded and packed) and dynamic masking."""

from __future__ import annotations

import itertools
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from conftest import ZH_TEXT, ZH_VOCAB, build_dataset

from tacl_scale.data import PretrainDataset
from tacl_scale.data.loader import CollateConfig, MicroBatchSampler, collate, sequence_lengths
from tacl_scale.data.manifest import Counts, Manifest, MaskingRecord, SpecialIds, SplitRecord, TokenizerRecord
from tacl_scale.data.shuffle import BatchLayout, GlobalOrder

pytestmark = pytest.mark.framework  # also run on the GPU image's versions (scripts/test.sh --gpu-image)


def test_sampler_yields_this_ranks_micro_batches_of_the_global_order() -> None:
    """Every rank's sampler takes its micro-batches of each step; together they
    are the step's positions of the global order, whatever the rank count."""
    order = GlobalOrder(50, seed=3)
    per_step: dict[int, list[set[tuple[int, int]]]] = {}
    for world in (1, 2, 4):
        steps: list[set[tuple[int, int]]] = [set() for _ in range(5)]
        for rank in range(world):
            sampler = MicroBatchSampler(order, BatchLayout(8, 2, world, rank), consumed=16)
            for k, keys in enumerate(itertools.islice(sampler, 5 * 4 // world)):
                assert len(keys) == 2 and len({key[2] for key in keys}) == 1
                steps[k // (4 // world)] |= {(e, i) for e, i, _ in keys}
        per_step[world] = steps
    assert per_step[1] == per_step[2] == per_step[4]
    epochs, instances = order.instances(np.arange(16, 24))
    assert per_step[1][0] == set(zip(epochs.tolist(), instances.tolist(), strict=True))
    # across the epoch boundary (50 instances): step 4 holds positions 48..55
    assert {e for e, _ in per_step[1][4]} == {0, 1}


@pytest.mark.slow
def test_collate_real_instances(tmp_path: Path) -> None:
    out = build_dataset(tmp_path / "ds", "--input", str(ZH_TEXT), "--format", "text", "--language", "zh",
                        "--tokenizer", str(ZH_VOCAB), "--min-doc-chars", "10", "--dupe-factor", "1",
                        "--max-seq-len", "100")
    ds = PretrainDataset(out)
    items = [ds[i] for i in range(6)]
    batch = collate(items, CollateConfig(pad_id=0, pad_to_multiple_of=8))
    length = batch["input_ids"].shape[1]
    assert length % 8 == 0 and length >= max(len(i["original_ids"]) for i in items)
    for row, item in enumerate(items):
        n = len(item["original_ids"])
        assert batch["attention_mask"][row].sum() == n
        assert torch.equal(batch["original_ids"][row, :n], torch.from_numpy(item["original_ids"]))
        assert torch.equal(batch["input_ids"][row, :n], torch.from_numpy(item["input_ids"]))
        assert (batch["input_ids"][row, n:] == 0).all() and (batch["token_type_ids"][row, n:] == 0).all()
        positions = torch.from_numpy(item["masked_positions"])
        assert torch.equal(batch["masked"][row].nonzero().squeeze(1), positions)
    assert batch["nsp_label"].tolist() == [i["nsp_label"] for i in items]
    # The masked rows as the kernels and the MLM head gather them: their labels are the original ids.
    rows = batch["tacl_rows"]
    labels = np.concatenate([i["original_ids"][i["masked_positions"]] for i in items])
    assert batch["original_ids"].reshape(-1)[rows.index].tolist() == labels.tolist()
    assert rows.num_masked == len(labels) and rows.max_len == max(len(i["original_ids"]) for i in items)
    fixed = collate(items, CollateConfig(pad_to_length=128))
    assert fixed["input_ids"].shape == (6, 128)
    with pytest.raises(ValueError, match="exceeds pad_to_length"):
        collate(items, CollateConfig(pad_to_length=16))
    with pytest.raises(ValueError, match="empty"):
        collate([], CollateConfig())
    # Packed: the same real tokens back to back, nothing else.
    packed = collate(items, CollateConfig(unpad=True))
    real = batch["attention_mask"].bool()
    for key in ("input_ids", "original_ids", "token_type_ids", "masked"):
        assert torch.equal(packed[key], batch[key][real]), key
    lengths = [len(i["original_ids"]) for i in items]
    assert packed["cu_seqlens"].dtype == torch.int32
    assert packed["cu_seqlens"].tolist() == [0, *itertools.accumulate(lengths)]
    assert packed["max_seqlen"] == max(lengths) and "attention_mask" not in packed
    assert packed["position_ids"].tolist() == [p for n in lengths for p in range(n)]
    assert torch.equal(packed["nsp_label"], batch["nsp_label"])
    assert sequence_lengths(packed).tolist() == sequence_lengths(batch).tolist() == lengths


def _manifest(vocab_size: int = 500, excluded: tuple[int, ...] | None = (0, 1, 2, 3, 4)) -> Manifest:
    """A manifest with masking rules and a tokenizer, and no shards."""
    return Manifest(
        tokenizer=TokenizerRecord("wordpiece", "vocab.txt", "0" * 64, vocab_size, True, SpecialIds(0, 1, 2, 3, 4),
                                  "vocab.txt"),
        token_dtype="uint16", max_seq_len=128,
        masking=MaskingRecord(0.15, 20, 0.8, 0.1, 0.1, False, excluded, None),
        train=SplitRecord((), Counts()))


def test_dynamic_masking_is_seeded_by_epoch_and_instance() -> None:
    from tacl_scale.data.loader import DynamicMasking, TrainingInstances

    rng = np.random.default_rng(0)
    items = []
    for _ in range(50):
        ids = rng.integers(5, 500, 100)
        ids[0], ids[40], ids[-1] = 2, 3, 3
        items.append({"original_ids": ids, "input_ids": ids.copy(), "token_type_ids": np.zeros(100, int),
                      "masked_positions": np.array([5]), "nsp_label": 0})
    dyn = DynamicMasking.for_dataset(SimpleNamespace(manifest=_manifest(), path="ds"), seed=3)
    data = TrainingInstances(items, [dyn])
    a, again, other_epoch = data[(0, 7)], data[(0, 7)], data[(1, 7)]
    assert np.array_equal(a["masked_positions"], again["masked_positions"])
    assert not np.array_equal(a["masked_positions"], other_epoch["masked_positions"])
    masked_total = 0
    for key in range(50):
        item = data[(2, key)]
        pos = item["masked_positions"]
        assert not np.isin(item["original_ids"][pos], [0, 1, 2, 3, 4]).any()
        assert not np.isin(item["input_ids"], [0, 1]).any()  # never a random special
        unmasked = np.setdiff1d(np.arange(100), pos)
        assert np.array_equal(item["input_ids"][unmasked], item["original_ids"][unmasked])
        masked_total += len(pos)
    assert masked_total == 50 * 15  # round(0.15 * 97 maskable)
    static = TrainingInstances(items)
    assert np.array_equal(static[(0, 7)]["masked_positions"], [5])


def test_blended_datasets_follow_the_weights() -> None:
    from tacl_scale.data.blend import BlendedDatasets

    a = [{"src": "a", "i": i} for i in range(100)]
    b = [{"src": "b", "i": i} for i in range(300)]
    plain = BlendedDatasets([a, b])
    assert len(plain) == 400 and [plain[k] for k in range(400)] == a + b  # concatenation
    blend = BlendedDatasets([a, b], weights=[3, 1], seed=1)
    items = [blend[k] for k in range(len(blend))]
    assert len(items) == 400 and sum(x["src"] == "a" for x in items) == 300
    from_a = [x["i"] for x in items if x["src"] == "a"]
    assert sorted(set(from_a)) == list(range(100)) and all(from_a.count(i) == 3 for i in range(100))
    from_b = [x["i"] for x in items if x["src"] == "b"]
    assert len(set(from_b)) == 100 and max(from_b) > 250, "a spread-out subset of b"
    assert [blend[k] for k in range(400)] == [BlendedDatasets([a, b], [3, 1], seed=1)[k] for k in range(400)]
    with pytest.raises(ValueError, match="weight"):
        BlendedDatasets([a, b], weights=[1])
