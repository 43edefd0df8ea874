"""The typed dataset contract (tacl_scale.data.manifest): the documented schema is
the JSON the dataclasses write, the JSON round-trips, older versions open with
their documented defaults, and a format-3 dataset moved anywhere trains, exports and
inspects without the tokenizer it was built from."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import ROOT, ZH_TEXT, ZH_VOCAB, build_dataset

from tacl_scale.data import PretrainDataset
from tacl_scale.data.manifest import MANIFEST_NAME, DatasetError, Manifest, MaskingRecord
from tacl_scale.data.masking import MaskingConfig

pytestmark = pytest.mark.framework  # also run on the GPU image's versions (scripts/test.sh --gpu-image)

BUILD = ("--format", "text", "--language", "zh", "--min-doc-chars", "10", "--dupe-factor", "1", "--max-seq-len", "64")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A dataset with a validation split and whole-word masking (every optional key)."""
    return build_dataset(tmp_path_factory.mktemp("manifest") / "ds", "--input", str(ZH_TEXT), "--tokenizer",
                         str(ZH_VOCAB), *BUILD, "--validation-fraction", "0.3", "--whole-word-masking")


# -- the schema is the JSON -------------------------------------------------------------------------------------

FREE_FORM_MAPS = ("skips", "length_histogram", "build_config", "pipeline_options", "checksums")
ALIASES = (("validation.shards[]", "shards[]"), ("validation.totals.", "totals."))


def json_paths(value: object, prefix: str = "") -> set[str]:
    """Every key path of a manifest's JSON in the doc's notation (``a.b``, ``a[]``,
    ``*`` for the shard-file map), the validation split's shards and totals
    written as the training ones they are like."""
    out: set[str] = set()
    if isinstance(value, dict):
        for key, inner in value.items():
            name = f"{prefix}.{key}" if prefix else key
            out.add(name)
            if key in FREE_FORM_MAPS:
                continue
            if key == "files" and prefix.endswith("[]"):
                for entry in inner.values():
                    out |= json_paths(entry, f"{name}.*")
                continue
            out |= json_paths(inner, name)
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, dict):
                out |= json_paths(item, f"{prefix}[]")
    normalised = set()
    for path in out:
        for alias, canonical in ALIASES:
            if path.startswith(alias):
                path = canonical + path[len(alias):]
        normalised.add(path)
    return normalised


def documented_paths() -> set[str]:
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    section = text[text.index("### manifest.json"):]
    return set(re.findall(r"^\| `([^`]+)` \|", section, flags=re.M))


def test_the_documented_schema_is_the_json_the_dataclasses_write(dataset: Path) -> None:
    written = json.loads((dataset / MANIFEST_NAME).read_text())
    assert written["validation"]["shards"] and written["masking"]["whole_word_masking"]
    assert json_paths(written) == documented_paths()


def test_the_json_round_trips(dataset: Path) -> None:
    written = json.loads((dataset / MANIFEST_NAME).read_text())
    manifest = Manifest.from_json(written)
    assert manifest.to_json() == written
    assert Manifest.from_json(json.loads(json.dumps(manifest.to_json()))) == manifest


@pytest.mark.parametrize(("change", "said"), [
    (lambda m: dataclasses.replace(m, validation=dataclasses.replace(m.validation, fraction=None)),
     "validation.fraction must be a number, not null"),
    (lambda m: dataclasses.replace(m, max_seq_len=2), "max_seq_len 2 is not in [3, 65536]"),
])
def test_a_manifest_that_would_not_load_is_not_written(dataset: Path, tmp_path: Path,
                                                        change: Callable[[Manifest], Manifest], said: str) -> None:
    """``write`` reads back what it would write: a manifest it could not load again is
    refused naming the field, and the manifest already in place stays as it was."""
    target = tmp_path / "ds"
    target.mkdir()
    shutil.copy(dataset / MANIFEST_NAME, target / MANIFEST_NAME)
    before = (target / MANIFEST_NAME).read_bytes()
    with pytest.raises(DatasetError, match=re.escape(f"{said} — not written")):
        change(Manifest.load(dataset)).write(target)
    assert (target / MANIFEST_NAME).read_bytes() == before


def test_masking_rules_round_trip_by_field_name() -> None:
    import numpy as np

    config = MaskingConfig(masked_lm_prob=0.2, max_predictions_per_seq=9, mask_token_prob=0.7,
                           random_token_prob=0.2, whole_word_masking=True)
    record = MaskingRecord.of(config, 9, np.arange(5, 50), 60, "jieba")
    assert record.config() == config and record.keep_token_prob == pytest.approx(0.1)
    assert record.replacement_ids(60).tolist() == list(range(5, 50))
    assert record.replacement_excluded_ids == (0, 1, 2, 3, 4, *range(50, 60))


# -- older versions ---------------------------------------------------------------------------------------------

def _rewrite(directory: Path, edit: Callable[[dict], None]) -> None:
    path = directory / MANIFEST_NAME
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def test_a_version_2_dataset_names_its_tokenizer_by_the_path_it_was_built_from(dataset: Path,
                                                                             tmp_path: Path) -> None:
    old = tmp_path / "v2"
    shutil.copytree(dataset, old)
    shutil.rmtree(old / "tokenizer")

    def to_version_2(data: dict) -> None:
        data["format_version"] = 2
        tokenizer = data["tokenizer"]
        tokenizer["path"] = str(ZH_VOCAB)
        del tokenizer["files"], tokenizer["source"]

    _rewrite(old, to_version_2)
    ds = PretrainDataset(old)
    assert not ds.manifest.tokenizer.portable
    assert ds.manifest.tokenizer.location(old) == ZH_VOCAB and len(ds) > 0


def test_a_version_1_dataset_opens_with_the_documented_defaults(dataset: Path, tmp_path: Path) -> None:
    old = tmp_path / "v1"
    shutil.copytree(dataset, old)

    def to_version_1(data: dict) -> None:
        data["format_version"] = 1
        for key in ("validation", "instance_kind", "static_masks", "warnings"):
            del data[key]
        del data["masking"]["replacement_excluded_ids"], data["masking"]["zh_segmenter"]
        del data["tokenizer"]["files"], data["tokenizer"]["source"]

    _rewrite(old, to_version_1)
    manifest = PretrainDataset(old).manifest
    assert (manifest.instance_kind, manifest.static_masks, manifest.warnings, manifest.validation) == (
        "pairs", True, (), None)
    assert manifest.masking.replacement_excluded_ids is None and manifest.masking.zh_segmenter is None
    assert not manifest.has_validation


@pytest.mark.parametrize(("key", "value", "said"), [
    ("instance_kind", "triples", "instance_kind 'triples' is not one of pairs, single-segment"),
    ("tokenizer.kind", "bpe", "tokenizer.kind 'bpe' is not one of wordpiece, hf, sentencepiece"),
    ("token_dtype", "float32", "token_dtype 'float32' is not one of uint8, uint16, int32"),
    ("token_dtype", "uint8", "tokenizer.vocab_size 21128 does not fit token_dtype uint8"),
    ("tokenizer.special_ids.mask", 21128, "tokenizer.special_ids [21128] are outside the vocabulary of 21128"),
    ("max_seq_len", -5, "max_seq_len -5 is not in [3, 65536]"),
    ("max_seq_len", 70000, "max_seq_len 70000 is not in [3, 65536]"),
    ("dupe_factor", 0, "dupe_factor 0 is not >= 1"),
    ("random_next_prob", 1.5, "random_next_prob 1.5 is not in [0, 1]"),
    ("masking.masked_lm_prob", 7, "masking.masked_lm_prob 7.0 is not in [0, 1]"),
    ("masking.keep_token_prob", 0.5, "masking.mask_token_prob + random_token_prob + keep_token_prob is 1.4, not 1"),
    ("masking.max_predictions_per_seq", 65, "masking.max_predictions_per_seq 65 is not in [0, max_seq_len 64]"),
])
def test_a_value_no_build_writes_is_refused_naming_its_key(dataset: Path, key: str, value: object,
                                                           said: str) -> None:
    """A hand-edited or damaged manifest opened, and its value met later as a crash
    in training (a max_seq_len of -5, an instance_kind no reader knows)."""
    data = json.loads((dataset / MANIFEST_NAME).read_text())
    *parents, last = key.split(".")
    inner = data
    for name in parents:
        inner = inner[name]
    inner[last] = value
    with pytest.raises(DatasetError, match=re.escape(f"manifest.json: malformed manifest: {said}")):
        Manifest.from_json(data)


MISSING = object()  # the key deleted


@pytest.mark.parametrize(("key", "value", "said"), [
    ("skips", [], "skips must be an object, not a list"),
    ("masking", [], "masking must be an object, not a list"),
    ("totals.length_histogram", [], "totals.length_histogram must be an object, not a list"),
    ("tokenizer.special_ids", [], "tokenizer.special_ids must be an object, not a list"),
    ("shards.0.files", [], "shards[0].files must be an object, not a list"),
    ("max_seq_len", float("inf"), "max_seq_len must be an integer, not Infinity"),
    ("tokenizer.path", None, "tokenizer.path must be a string, not null"),
    ("tokenizer.sha256", 5, "tokenizer.sha256 must be a string, not 5"),
    ("build_config", [], "build_config must be an object, not a list"),
    ("validation.fraction", "0.3", 'validation.fraction must be a number, not "0.3"'),
    ("validation.fraction", None, "validation.fraction must be a number, not null"),
    ("validation.fraction", 1.5, "validation.fraction 1.5 is not in [0, 1]"),
    ("static_masks", "false", 'static_masks must be true or false, not "false"'),
    ("shards.0.num_instances", "7", 'shards[0].num_instances must be an integer, not "7"'),
    ("shards.0.files.meta.bytes", 12.5, "shards[0].files.meta.bytes must be an integer, not 12.5"),
    ("validation.shards.0.name", 3, "validation.shards[0].name must be a string, not 3"),
    ("tokenizer.special_ids.mask", True, "tokenizer.special_ids.mask must be an integer, not true"),
    ("tokenizer.special_ids.bos", 0, "tokenizer.special_ids.bos is not one of pad, unk, cls, sep, mask"),
    ("tokenizer.kind", MISSING, "tokenizer.kind is missing"),
    ("shards.0", 5, "shards[0] must be an object, not 5"),
    ("warnings", [5], "warnings[0] must be a string, not 5"),
    ("sources.0.path", None, "sources[0].path must be a string, not null"),
    ("masking.replacement_excluded_ids", "abc", 'masking.replacement_excluded_ids must be a list, not "abc"'),
    ("validation.totals.length_histogram", {"x": 1}, 'validation.totals.length_histogram must have integer keys, '
                                                     'not "x"'),
    ("tokenizer.checksums", {"vocab.txt": 1}, "tokenizer.checksums.vocab.txt must be a string, not 1"),
])
def test_a_field_of_the_wrong_type_is_refused_naming_the_file_and_the_field(dataset: Path, tmp_path: Path, key: str,
                                                                           value: object, said: str) -> None:
    """A hand-edited or damaged manifest with a field of another type: it was an
    AttributeError, OverflowError or TypeError from the parsing (``skips: []``,
    ``max_seq_len: Infinity``), a "malformed manifest (KeyError: ...)", or it
    opened and failed later (``tokenizer.path: null`` in inspect, a validation
    fraction of 1.5 taken as it is)."""
    data = json.loads((dataset / MANIFEST_NAME).read_text())
    *parents, last = key.split(".")
    inner = data
    for name in parents:
        inner = inner[int(name)] if name.isdigit() else inner[name]
    if value is MISSING:
        del inner[last]
    elif isinstance(inner, list):
        inner[int(last)] = value
    else:
        inner[last] = value
    edited = tmp_path / "ds"
    edited.mkdir()
    (edited / MANIFEST_NAME).write_text(json.dumps(data))
    with pytest.raises(DatasetError) as refused:
        Manifest.load(edited)
    assert str(refused.value) == f"{edited / MANIFEST_NAME}: malformed manifest: {said}"


def test_inspect_and_training_say_a_malformed_manifest_in_one_line(dataset: Path, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from conftest import main_in_this_process

    from data_prep.inspect import main as inspect_main

    edited = tmp_path / "ds"
    shutil.copytree(dataset, edited)
    _rewrite(edited, lambda data: data.update(skips=[]))
    said = f"error: {edited / MANIFEST_NAME}: malformed manifest: skips must be an object, not a list\n"
    assert inspect_main([str(edited)]) == 2
    assert capsys.readouterr().err == said
    model = tmp_path / "bert.json"
    model.write_text(json.dumps({"vocab_size": 21128, "hidden_size": 32, "num_hidden_layers": 2,
                                 "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 64}))
    code, stderr = main_in_this_process(["--recipe", "tiny-cpu", "--data", str(edited), "--model", str(model),
                                         "--output", str(tmp_path / "run"), "--steps", "2"], capsys)
    assert code == 2 and said in stderr and "Traceback" not in stderr, stderr[-3000:]


# -- a dataset moved anywhere -----------------------------------------------------------------------------------

def test_a_moved_dataset_trains_exports_and_inspects_without_its_original_tokenizer(
        join: Callable, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Built with a vocabulary in a temporary directory that is then deleted, the
    dataset moved elsewhere: training from a config-only model (whose export needs
    the dataset's tokenizer), the export and the inspection still work."""
    from transformers import BertForPreTraining, BertTokenizerFast

    from data_prep.inspect import main as inspect_main
    from tacl_scale.config import CheckpointConfig, DataConfig, EngineConfig, OptimConfig, TrainConfig
    from tacl_scale.trainer import Trainer

    vocab_dir = tmp_path / "elsewhere"
    vocab_dir.mkdir()
    vocab = vocab_dir / "zh-vocab.txt"
    shutil.copy(ZH_VOCAB, vocab)
    built = build_dataset(tmp_path / "built", "--input", str(ZH_TEXT), "--tokenizer", str(vocab), *BUILD)
    shutil.rmtree(vocab_dir)
    moved = tmp_path / "another" / "place" / "ds"
    moved.parent.mkdir(parents=True)
    shutil.move(built, moved)
    assert PretrainDataset(moved).manifest.tokenizer.location(moved) == moved / "tokenizer" / "zh-vocab.txt"

    model = tmp_path / "bert.json"
    model.write_text(json.dumps({"vocab_size": 21128, "hidden_size": 32, "num_hidden_layers": 2,
                                 "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 64}))
    config = TrainConfig(model=str(model), output=str(tmp_path / "run"), engine=EngineConfig("inline.json"),
                         data=DataConfig((str(moved),), num_workers=0),
                         optim=OptimConfig(steps=2, lr=1e-3, batch_size=4, micro_batch_size=2),
                         checkpoint=CheckpointConfig(save_every=100), eval_every=0, log_every=1)
    trainer = Trainer.build(config, join())
    try:
        history = trainer.train()
    finally:
        trainer.close()
    assert [m["step"] for m in history] == [1, 2]
    exported = tmp_path / "run" / "export"
    assert BertForPreTraining.from_pretrained(exported).config.vocab_size == 21128
    tokenizer = BertTokenizerFast.from_pretrained(exported)
    assert tokenizer.convert_tokens_to_ids("[MASK]") == 103 and tokenizer.tokenize("的是") == ["的", "是"]

    capsys.readouterr()
    assert inspect_main([str(moved), "-n", "1"]) == 0
    out = capsys.readouterr().out
    assert "carried in tokenizer/zh-vocab.txt" in out and "[CLS]" in out and "decoding with ids only" not in out


def test_a_path_that_is_not_a_dataset_directory_says_what_it_is(dataset: Path, tmp_path: Path) -> None:
    """It said "not a directory" of a path that did not exist, and of the
    manifest.json itself given as --data, without the fix."""
    from tacl_scale.data.manifest import DatasetError

    a_file = tmp_path / "notes.txt"
    a_file.write_text("x")
    for given, said in [(tmp_path / "missing", "no such directory"),
                        (dataset / MANIFEST_NAME, f"a dataset is the directory that holds its {MANIFEST_NAME}: "
                                                  f"give {dataset}"),
                        (a_file, "a file, not a dataset directory")]:
        with pytest.raises(DatasetError) as refused:
            Manifest.load(given)
        assert str(refused.value) == f"{given}: {said}"


def test_a_dataset_still_being_built_is_said_to_be_in_use_by_its_build(tmp_path: Path) -> None:
    """Training on a dataset whose build was still running said only that the build
    "did not complete"."""
    from tacl_scale.data.manifest import DatasetError
    from tacl_scale.locking import DirectoryLock

    building = tmp_path / "ds"
    with DirectoryLock(building, "data_prep.build"), pytest.raises(DatasetError) as refused:
        Manifest.load(building)
    assert re.fullmatch(rf"{building}/{MANIFEST_NAME}: missing — {building} is in use by data_prep\.build pid "
                        rf"{os.getpid()} on \S+ since [-\d]+ [:\d]+: a dataset can be read once its build has finished",
                        str(refused.value)), refused.value
    building.mkdir()
    with pytest.raises(DatasetError, match="is not a finished dataset"):  # the build has ended (or died)
        Manifest.load(building)
