"""The document-level validation split of ``data_prep.build --validation-fraction``:
whole documents by a stable hash, built among themselves into files of their own,
never seen by training instances (not even as random B segments)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import EN_DUMP, EN_VOCAB, REAL_EN_DUMP, REAL_EN_VOCAB, ROOT, build_dataset, segment_windows

from data_prep.documents import is_validation
from tacl_scale.data import DatasetError, PretrainDataset
from tacl_scale.data.manifest import FORMAT_VERSION, Manifest

pytestmark = pytest.mark.slow


SPLIT = ["--num-shards", "2", "--dupe-factor", "2", "--max-seq-len", "128", "--validation-fraction", "0.2",
         "--validation-shards", "2"]


@pytest.fixture(scope="module")
def split_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_dataset(tmp_path_factory.mktemp("split") / "ds", "--input", str(EN_DUMP), "--tokenizer",
                         str(EN_VOCAB), *SPLIT)


@pytest.fixture(scope="module")
def real_split_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Real text: the leak check below relies on 12-token windows being nearly unique
    to a document, which the generated corpus's templated sentences are not."""
    return build_dataset(tmp_path_factory.mktemp("real-split") / "ds", "--input", str(REAL_EN_DUMP), "--tokenizer",
                         str(REAL_EN_VOCAB), *SPLIT)


def test_the_split_has_its_own_files_and_manifest_entry(split_dataset: Path) -> None:
    manifest = json.loads((split_dataset / "manifest.json").read_text())
    assert manifest["format_version"] == FORMAT_VERSION and Manifest.from_json(manifest).has_validation
    validation = manifest["validation"]
    assert validation["fraction"] == 0.2 and "blake2b" in validation["rule"] and validation["num_shards"] == 2
    assert [s["name"] for s in validation["shards"]] == ["validation-00000", "validation-00001"]
    assert [s["name"] for s in manifest["shards"]] == ["shard-00000", "shard-00001"]
    assert sorted(p.name for p in split_dataset.glob("validation-00000*")) == [
        "validation-00000.bin", "validation-00000.idx", "validation-00000.masked_positions.bin",
        "validation-00000.masked_positions.idx", "validation-00000.masked_tokens.bin",
        "validation-00000.masked_tokens.idx", "validation-00000.meta.npy"]
    train, held = PretrainDataset(split_dataset), PretrainDataset(split_dataset, split="validation")
    assert len(train) == manifest["totals"]["instances"] and len(held) == validation["totals"]["instances"] > 0
    docs_total = manifest["totals"]["documents"] + validation["totals"]["documents"]
    assert 0.08 < validation["totals"]["documents"] / docs_total < 0.35  # about the fraction, by hash
    assert held[0]["original_ids"][0] == 101 and len(held.source_documents()) == len(held)


def test_no_validation_text_reaches_training_instances(real_split_dataset: Path) -> None:
    """Every 12-token window shared by a validation and a training instance is text
    that both a training and a validation document contain themselves (Wikipedia
    repeats some sentences verbatim across articles), never a leak such as a
    validation segment used as a training instance's random B."""
    train, held = PretrainDataset(real_split_dataset), PretrainDataset(real_split_dataset, split="validation")
    train_own, train_all = segment_windows(train)
    valid_own, valid_all = segment_windows(held)
    shared = valid_all & train_all
    assert all(w in train_own and w in valid_own for w in shared)
    assert len(shared) < 0.001 * len(valid_all)
    # The check itself finds a leak: a training instance whose random B is a
    # validation instance's segment A, windowed as the training set's instances are.
    victim = next(i for i in range(len(train)) if train[i]["nsp_label"] == 1
                  and int((train[i]["token_type_ids"] == 1).sum()) > 13)
    item = dict(train[victim])
    ids = item["original_ids"].copy()
    b_start, b_len = int((item["token_type_ids"] == 0).sum()), int((item["token_type_ids"] == 1).sum()) - 1
    source = held[next(k for k in range(len(held)) if int((held[k]["token_type_ids"] == 0).sum()) - 2 >= b_len)]
    ids[b_start : b_start + b_len] = source["original_ids"][1 : 1 + b_len]
    item["original_ids"] = ids
    planted_own, planted_all = segment_windows(_OneInstance(item, train.source_documents()[victim]))
    leaky_own = {w: train_own.get(w, set()) | planted_own.get(w, set()) for w in train_own.keys() | planted_own.keys()}
    leaky = valid_all & (train_all | planted_all)
    assert not all(w in leaky_own and w in valid_own for w in leaky)


class _OneInstance:
    """A one-instance stand-in for a dataset, as ``segment_windows`` reads one."""

    def __init__(self, item: dict, document: int) -> None:
        self.item, self.document = item, document

    def __len__(self) -> int:
        return 1

    def __getitem__(self, index: int) -> dict:
        return self.item

    def source_documents(self) -> list[int]:
        return [self.document]


def test_the_rule_is_a_stable_hash_of_the_document_id() -> None:
    ids = [f"page-{i}" for i in range(20_000)]
    chosen = [is_validation(i, 0.1) for i in ids]
    assert 0.09 < np.mean(chosen) < 0.11
    # The same documents in another process with another str hash seed (the build's
    # workers, tacl-sentence-list): the rule must not depend on Python's hash().
    code = ("import json; from data_prep.documents import is_validation; "
            f"print(json.dumps([is_validation(f'page-{{i}}', 0.1) for i in range({len(ids)})]))")
    env = {**os.environ, "PYTHONHASHSEED": "4321", "PYTHONPATH": str(ROOT)}
    other = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert json.loads(other.stdout) == chosen
    assert not any(is_validation(i, 0.0) for i in ids[:100])
    assert all(is_validation(i, 0.2) for i, c in zip(ids, chosen, strict=True) if c)  # nested as F grows


def test_datasets_without_a_split(tmp_path: Path) -> None:
    from conftest import ZH_TEXT, ZH_VOCAB

    plain = build_dataset(tmp_path / "plain", "--input", str(ZH_TEXT), "--format", "text", "--language", "zh",
                          "--tokenizer", str(ZH_VOCAB), "--min-doc-chars", "10", "--dupe-factor", "1",
                          "--max-seq-len", "64")
    manifest = json.loads((plain / "manifest.json").read_text())
    assert manifest["validation"] is None and not Manifest.from_json(manifest).has_validation
    with pytest.raises(DatasetError, match="no validation split.*--validation-fraction"):
        PretrainDataset(plain, split="validation")
    # a version-1 dataset (written before the split existed) still loads
    manifest["format_version"] = 1
    del manifest["validation"]
    (plain / "manifest.json").write_text(json.dumps(manifest))
    assert len(PretrainDataset(plain)) == manifest["totals"]["instances"]
    manifest["format_version"] = FORMAT_VERSION + 1  # from a newer tacl-scale
    (plain / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(DatasetError, match=f"format version {FORMAT_VERSION + 1}.*supports 1, 2, 3, 4, 5"):
        PretrainDataset(plain)


def test_small_random_b_pools_are_warned_about(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A shard of fewer than 100 documents draws its random B segments from them
    alone: the build says so in its log, the manifest and the summary."""
    from conftest import ZH_TEXT, ZH_VOCAB

    from data_prep.inspect import format_summary

    with caplog.at_level("WARNING"):
        small = build_dataset(tmp_path / "small", "--input", str(ZH_TEXT), "--format", "text", "--language",
                              "zh", "--tokenizer", str(ZH_VOCAB), "--min-doc-chars", "10", "--dupe-factor", "1",
                              "--max-seq-len", "64", "--num-shards", "3")
    manifest = json.loads((small / "manifest.json").read_text())
    warned = [s["name"] for s in manifest["shards"] if 0 < s["num_documents"] < 100]
    assert warned and len(manifest["warnings"]) == len(warned)  # an empty shard has no pool to warn about
    assert all(w.startswith(name) for w, name in zip(manifest["warnings"], warned, strict=True))
    assert "random B" in caplog.text
    assert f"warning: {warned[0]}" in format_summary(Manifest.from_json(manifest), str(small))


def test_an_empty_validation_split_is_warned_about(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """``--validation-fraction 0.1`` on 4 documents: the hash holds none of them out.
    Once the build said nothing and training found no split; now the build warns in
    its log, the manifest and the summary, naming the fraction, the documents and the
    fix."""
    from data_prep.inspect import format_summary

    text = tmp_path / "tiny.txt"  # its documents are tiny.txt:0 .. tiny.txt:3
    sentences = ["The war ended in the spring.", "He worked on the code at the park.",
                 "His colleagues admired the work.", "The section was moved to the city."]
    text.write_text("\n\n".join("\n".join(sentences[k:] + sentences[:k]) for k in range(4)) + "\n")
    assert not any(is_validation(f"tiny.txt:{k}", 0.1) for k in range(4))
    with caplog.at_level("WARNING"):
        out = build_dataset(tmp_path / "ds", "--input", str(text), "--format", "text", "--tokenizer",
                            str(EN_VOCAB), "--min-doc-chars", "10", "--dupe-factor", "1", "--max-seq-len", "64",
                            "--num-shards", "1", "--validation-fraction", "0.1")
    manifest = Manifest.load(out)
    assert manifest.train.totals.documents == 4 and manifest.validation.totals.instances == 0
    empty = [w for w in manifest.warnings if "validation split is empty" in w]
    assert len(empty) == 1
    for part in ("--validation-fraction 0.1", "no document of the 4 documents", "larger --validation-fraction",
                 "more input"):
        assert part in empty[0]
    assert empty[0] in caplog.text
    assert f"warning: {empty[0]}" in format_summary(manifest, str(out))
    # A split that holds instances is not warned about.
    split = build_dataset(tmp_path / "split", "--input", str(text), "--format", "text", "--tokenizer", str(EN_VOCAB),
                          "--min-doc-chars", "10", "--dupe-factor", "1", "--max-seq-len", "64", "--num-shards", "1",
                          "--validation-fraction", "0.5")
    held = Manifest.load(split)
    assert held.validation.totals.instances > 0
    assert not any("validation split is empty" in w for w in held.warnings)
