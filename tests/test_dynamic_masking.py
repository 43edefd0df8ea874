"""``--dynamic-masking`` follows the dataset's own static-masking rules: share,
cap, 80/10/10 split, replacement ids, whole words (from the boundaries the build
stored), and each blended dataset's own settings. Checked statistically against
the static masks of the real English sample."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import EN_DUMP, EN_VOCAB, build_dataset

from tacl_scale.data import DatasetError, PretrainDataset
from tacl_scale.data.blend import BlendedDatasets
from tacl_scale.data.loader import DynamicMasking, TrainingInstances

pytestmark = pytest.mark.slow
MASK = 103


@pytest.fixture(scope="module")
def datasets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, PretrainDataset]:
    root = tmp_path_factory.mktemp("dyn")
    common = ["--input", str(EN_DUMP), "--tokenizer", str(EN_VOCAB), "--dupe-factor", "1", "--max-seq-len", "128"]
    wwm = build_dataset(root / "wwm", *common, "--whole-word-masking")
    plain = build_dataset(root / "plain", *common, "--masked-lm-prob", "0.25")
    return {"wwm": PretrainDataset(wwm), "plain": PretrainDataset(plain)}


def statistics(items: list[dict], excluded: set[int]) -> dict[str, float]:
    """Masked share of maskable tokens, the [MASK]/random/kept split, the share
    of words cut by the masks (partly masked), random replacements from excluded ids."""
    masked = maskable = mask = kept = random = cut = words = bad_random = 0
    for item in items:
        original, inputs, positions = item["original_ids"], item["input_ids"], item["masked_positions"]
        special = np.isin(original, [0, 100, 101, 102, 103])
        maskable += int((~special).sum())
        masked += len(positions)
        placed = inputs[positions]
        is_mask = placed == MASK
        is_kept = ~is_mask & (placed == original[positions])
        mask += int(is_mask.sum())
        kept += int(is_kept.sum())
        random += int((~is_mask & ~is_kept).sum())
        bad_random += int(np.isin(placed[~is_mask & ~is_kept], list(excluded)).sum())
        if "word_starts" in item:
            chosen = np.zeros(len(original), dtype=bool)
            chosen[positions] = True
            starts = np.flatnonzero(item["word_starts"] | special)
            for begin, end in zip(starts, np.append(starts[1:], len(original)), strict=True):
                if not special[begin]:
                    words += 1
                    cut += int(0 < chosen[begin:end].sum() < end - begin)
    return {"share": masked / maskable, "mask": mask / masked, "kept": kept / masked, "random": random / masked,
            "cut_words": cut / max(words, 1), "bad_random": bad_random}


def test_dynamic_masks_follow_the_static_rules(datasets: dict[str, PretrainDataset]) -> None:
    ds = datasets["wwm"]
    assert ds.manifest.masking.whole_word_masking and "word_starts" in ds[0]
    excluded = set(ds.manifest.masking.replacement_excluded_ids)
    assert {0, 1, 100, 101, 102, 103} <= excluded and len(excluded) > 900  # specials and [unusedN]
    static = [ds[i] for i in range(len(ds))]
    dynamic = TrainingInstances(ds, [DynamicMasking.for_dataset(ds, seed=7)])
    remasked = [dynamic[(1, i)] for i in range(len(ds))]
    assert any(not np.array_equal(a["masked_positions"], b["masked_positions"])
               for a, b in zip(static[:20], remasked[:20], strict=True))
    s, d = statistics(static, excluded), statistics(remasked, excluded)
    # The cap: the dataset's own, and a lower one binds (whole words may stop short of it).
    masker = DynamicMasking.for_dataset(ds, seed=7)
    assert masker.max_predictions == ds.manifest.masking.max_predictions_per_seq
    assert max(len(x["masked_positions"]) for x in remasked) <= masker.max_predictions
    capped = TrainingInstances(ds, [dataclasses.replace(masker, max_predictions=3)])
    counts = [len(capped[(1, i)]["masked_positions"]) for i in range(len(ds))]
    assert max(counts) == 3 and sum(c < 3 for c in counts) < len(counts) // 2, counts
    assert s["cut_words"] == d["cut_words"] == 0.0  # whole words, both
    assert s["bad_random"] == d["bad_random"] == 0  # never a special or placeholder
    assert d["share"] == pytest.approx(s["share"], abs=0.005)
    for key in ("mask", "kept", "random"):
        assert d[key] == pytest.approx(s[key], abs=0.015), key


def test_each_blended_dataset_keeps_its_own_rules(datasets: dict[str, PretrainDataset]) -> None:
    wwm, plain = datasets["wwm"], datasets["plain"]
    blend = BlendedDatasets([wwm, plain])
    dynamic = TrainingInstances(blend, [DynamicMasking.for_dataset(wwm, 1), DynamicMasking.for_dataset(plain, 1)])
    excluded = set(wwm.manifest.masking.replacement_excluded_ids)
    first = statistics([dynamic[(0, i)] for i in range(0, len(wwm), 3)], excluded)
    second = statistics([dynamic[(0, len(wwm) + i)] for i in range(0, len(plain), 3)], excluded)
    assert first["share"] == pytest.approx(0.15, abs=0.01) and first["cut_words"] == 0.0
    assert second["share"] == pytest.approx(0.25, abs=0.01)


def test_a_dataset_without_recorded_rules_is_refused() -> None:
    from test_loader import _manifest

    manifest = _manifest(10, excluded=None)  # a version-1 dataset that did not record its replacement ids
    with pytest.raises(DatasetError, match="old-ds: built before.*rebuild"):
        DynamicMasking.for_dataset(SimpleNamespace(manifest=manifest, path=Path("old-ds")), seed=1)
