"""End-to-end tests of the Beam dataset build on the real samples (TACL_TEST_DATA)."""

from __future__ import annotations

import bz2
import json
import re
import shutil
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from conftest import EN_DUMP, EN_VOCAB, REAL_ZH_VOCAB, ROOT, ZH_SEGMENTED, ZH_TEXT, ZH_VOCAB, build_dataset

from data_prep.build import BuildError, parse_args
from data_prep.inspect import format_summary
from data_prep.multistream import write_multistream
from data_prep.tokenization import TokenizerConfig, load_tokenizer
from tacl_scale.data import DatasetError, PretrainDataset
from tacl_scale.data.manifest import SpecialIds

pytestmark = pytest.mark.slow

SHARD_FILES = ("*.bin", "*.idx", "*.npy")


def shard_bytes(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for pattern in SHARD_FILES for p in sorted(directory.glob(pattern))}


@pytest.fixture(scope="module")
def en_dataset(tmp_path_factory: pytest.TempPathFactory) -> PretrainDataset:
    out = tmp_path_factory.mktemp("en") / "ds"
    build_dataset(out, "--input", str(EN_DUMP), "--tokenizer", str(EN_VOCAB),
                  "--num-shards", "2", "--dupe-factor", "2", "--max-seq-len", "128")
    return PretrainDataset(out)


def test_english_dataset_is_well_formed(en_dataset: PretrainDataset) -> None:
    ds = en_dataset
    m = ds.manifest
    assert m.train.num_shards == 2 and len(ds) == m.train.totals.instances > 1000
    assert m.tokenizer.vocab_size == 30522 and m.token_dtype == "uint16"
    assert m.tokenizer.special_ids == SpecialIds(pad=0, unk=100, cls=101, sep=102, mask=103)
    # Every page of the dump is a document or a counted skip (other namespaces, redirects).
    xml = bz2.decompress(EN_DUMP.read_bytes()).decode()
    pages, articles = xml.count("<page>"), xml.count("<ns>0</ns>")
    skips = m.skips
    assert skips["not_article_namespace"] == pages - articles > 0
    assert skips["redirect"] == xml.count("<redirect ") > 0
    assert m.train.totals.documents + sum(skips.values()) == pages
    rng = np.random.default_rng(0)
    for i in rng.choice(len(ds), 400, replace=False).tolist():
        item = ds[i]
        ids, inp, tt = item["original_ids"], item["input_ids"], item["token_type_ids"]
        assert len(ids) <= 128 and ids[0] == 101 and ids[-1] == 102
        seps = np.flatnonzero(ids == 102)
        assert len(seps) == 2, "exactly [CLS] A [SEP] B [SEP]"
        assert (tt[: seps[0] + 1] == 0).all() and (tt[seps[0] + 1 :] == 1).all()
        pos = item["masked_positions"]
        assert (np.diff(pos) > 0).all() and len(pos) >= 1
        assert not np.isin(ids[pos], [0, 100, 101, 102, 103]).any(), "special tokens never masked"
        unmasked = np.setdiff1d(np.arange(len(ids)), pos)
        assert (inp[unmasked] == ids[unmasked]).all()
        assert item["nsp_label"] in (0, 1)


def test_english_dataset_statistics(en_dataset: PretrainDataset) -> None:
    t = en_dataset.manifest.train.totals
    assert 0.45 <= t.random_next / t.instances <= 0.60
    assert t.masked / t.maskable == pytest.approx(0.15, abs=0.005)
    assert t.mask_token / t.masked == pytest.approx(0.8, abs=0.01)
    assert t.random_token / t.masked == pytest.approx(0.1, abs=0.01)
    assert t.kept_token / t.masked == pytest.approx(0.1, abs=0.01)
    # The manifest's counts agree with the instances themselves.
    labels = [en_dataset[i]["nsp_label"] for i in range(0, len(en_dataset), 7)]
    assert abs(np.mean(labels) - t.random_next / t.instances) < 0.05


def test_reader_round_trip_decodes_wikipedia_text(en_dataset: PretrainDataset) -> None:
    tok = load_tokenizer(TokenizerConfig(str(EN_VOCAB)))
    text = " ".join(tok.id_to_token(int(i)) for i in en_dataset[0]["original_ids"])
    assert text.startswith("[CLS] ") and "[SEP]" in text
    # Wikipedia prose, not markup.
    for junk in ("{{", "[[", "<ref", "|}"):
        assert junk not in text


def test_shards_open_with_megatron_core(en_dataset: PretrainDataset) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.core.datasets.indexed_dataset import IndexedDataset

    prefix = en_dataset.path / "shard-00000"
    meg = IndexedDataset(str(prefix))
    ours = PretrainDataset(en_dataset.path)
    assert len(meg) == ours.manifest.train.shards[0].counts.instances
    for i in (0, len(meg) // 2, len(meg) - 1):
        np.testing.assert_array_equal(meg[i].astype(np.int64), ours[i]["original_ids"])
    assert len(meg.document_indices) == ours.manifest.train.shards[0].counts.documents + 1


def test_determinism_across_workers_and_seeds(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    common = ["--input", str(ZH_TEXT), "--format", "text", "--language", "zh",
              "--tokenizer", str(ZH_VOCAB), "--num-shards", "3", "--min-doc-chars", "10"]
    one = build_dataset(tmp_path / "one", *common, "--direct_num_workers", "1")
    with caplog.at_level("INFO"):
        two = build_dataset(tmp_path / "two", *common, "--direct_num_workers", "2",
                            "--direct_running_mode", "multi_processing")
    # the build-wide progress line comes from the worker processes too
    assert "progress: work units 1/1 done" in caplog.text
    other = build_dataset(tmp_path / "other", *common, "--seed", "7")
    assert shard_bytes(one) == shard_bytes(two)
    # One text file read as many work units (byte ranges of whole documents): the same bytes.
    from data_prep.inputs import plan_work_units

    units = len(plan_work_units([str(ZH_TEXT)], "text", unit_bytes=int(0.005 * (1 << 20)), split_text=True))
    assert units >= 4
    caplog.clear()
    with caplog.at_level("INFO"):
        split = build_dataset(tmp_path / "split", *common, "--unit-mb", "0.005", "--direct_num_workers", "2",
                              "--direct_running_mode", "multi_processing")
    assert f"progress: work units {units}/{units} done" in caplog.text
    assert shard_bytes(split) == shard_bytes(one)
    assert len(shard_bytes(one)) == 3 * 7
    a, b = PretrainDataset(one), PretrainDataset(other)
    assert not all(
        np.array_equal(a[i]["masked_positions"], b[i]["masked_positions"])
        for i in range(min(len(a), len(b), 20))
    )


def test_the_portable_runner_path_builds_the_same_bytes(tmp_path: Path) -> None:
    """Flink and Spark run the pipeline through Beam's portable runner API (its graph
    translated to protos, key coders made deterministic, bundles run by an SDK
    harness): Beam's in-process job service drives that path here, with no cluster,
    and its shards are the DirectRunner's byte for byte."""
    common = ["--input", str(ZH_TEXT), "--format", "text", "--language", "zh",
              "--tokenizer", str(ZH_VOCAB), "--num-shards", "3", "--min-doc-chars", "10"]
    direct = build_dataset(tmp_path / "direct", *common)
    portable = build_dataset(tmp_path / "portable", *common, "--runner", "PortableRunner", "--job_endpoint", "embed",
                             "--environment_type", "LOOPBACK")
    assert shard_bytes(portable) == shard_bytes(direct) and len(shard_bytes(direct)) == 3 * 7


def test_the_shard_count_is_chosen_from_the_input_size_when_not_given(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from data_prep import config as build_config
    from data_prep.config import auto_num_shards, estimated_input_bytes

    assert auto_num_shards(0) == 1 and auto_num_shards(256 * 10**6) == 1 and auto_num_shards(256 * 10**6 + 1) == 2
    assert auto_num_shards(estimated_input_bytes([str(EN_DUMP)])) == 1  # a small input: one shard
    # The English dump's 22 GB of bz2 (about 90 GB of XML): some 300 shards of 256 MB.
    assert 300 <= auto_num_shards(int(22e9 * build_config.EXPANSION[".bz2"])) <= 330
    monkeypatch.setattr(build_config, "SHARD_INPUT_BYTES", estimated_input_bytes([str(ZH_TEXT)]) // 3 + 1)
    common = ["--input", str(ZH_TEXT), "--format", "text", "--language", "zh", "--tokenizer", str(ZH_VOCAB),
              "--min-doc-chars", "10", "--dupe-factor", "1"]
    chosen = build_dataset(tmp_path / "auto", *common)
    manifest = PretrainDataset(chosen).manifest
    assert manifest.train.num_shards == 3 and manifest.build_config["output"]["auto_shards"] is True
    assert manifest.build_config["output"]["num_shards"] == 3
    given = build_dataset(tmp_path / "given", *common, "--num-shards", "3")
    assert shard_bytes(chosen) == shard_bytes(given)  # the same shards as asking for them
    assert "(one per " in format_summary(manifest, str(chosen))


def test_multistream_index_splits_one_dump_with_identical_output(tmp_path: Path, en_dataset: PretrainDataset) -> None:
    dump, _ = write_multistream(str(EN_DUMP), str(tmp_path / "enwiki-x-multistream.xml.bz2"), 10)
    config = parse_args(["--input", str(dump), "--tokenizer", "t", "--output", "o", "--unit-mb", "0.05"]).config
    from data_prep.inputs import plan_work_units

    assert len(plan_work_units([str(dump)], "wiki-xml", True, config.input.unit_bytes)) >= 5
    out = build_dataset(tmp_path / "ms", "--input", str(dump), "--tokenizer", str(EN_VOCAB),
                        "--num-shards", "2", "--dupe-factor", "2", "--max-seq-len", "128",
                        "--unit-mb", "0.05")
    assert shard_bytes(out) == shard_bytes(en_dataset.path)


def test_a_token_past_the_repeated_lines_of_bert_base_chinese(tmp_path: Path) -> None:
    """bert-base-chinese's vocab.txt repeats 53 lines, so it has 21,075 distinct
    tokens but ids up to 21,127 (锶, strontium, is the last line). Such a token once
    crashed the build (the special-id table was sized by distinct tokens); the
    vocabulary size is the number of ids, and the shadowed ids are never a random
    replacement."""
    text = tmp_path / "sr.txt"
    text.write_text("锶是一种化学元素，符号为Sr。锶的原子序数为38。\n锶化合物可以用于制造烟花。\n\n"
                    "钙是一种化学元素，符号为Ca。\n钙在自然界中广泛分布。\n", encoding="utf-8")
    out = build_dataset(tmp_path / "ds", "--input", str(text), "--format", "text", "--language", "zh",
                        "--tokenizer", str(REAL_ZH_VOCAB), "--min-doc-chars", "10")
    ds = PretrainDataset(out)
    assert ds.manifest.tokenizer.vocab_size == 21128
    assert any(21127 in ds[i]["original_ids"] for i in range(len(ds)))
    excluded = set(ds.manifest.masking.replacement_excluded_ids)
    lines = REAL_ZH_VOCAB.read_text(encoding="utf-8").split("\n")[:21128]
    last_line_of = {token: i for i, token in enumerate(lines)}
    shadowed = {i for i, token in enumerate(lines) if last_line_of[token] != i}
    assert len(shadowed) == 53 and shadowed <= excluded and 21127 not in excluded


def test_chinese_whole_word_masking_pre_segmented(tmp_path: Path) -> None:
    """Every word the pre-segmented file's spaces delimit (its instances' stored word
    starts; tests/test_documents.py holds those to the segmentation) is masked whole
    or not at all: its maskable tokens (not special, not [UNK]) all or none."""
    out = build_dataset(tmp_path / "zh", "--input", str(ZH_SEGMENTED), "--format", "text",
                        "--language", "zh", "--tokenizer", str(ZH_VOCAB), "--whole-word-masking",
                        "--zh-segmenter", "pre-segmented", "--min-doc-chars", "10")
    ds = PretrainDataset(out)
    assert ds.manifest.masking.whole_word_masking is True
    special = np.zeros(ds.manifest.tokenizer.vocab_size, dtype=bool)
    special[list(ds.manifest.tokenizer.special_ids.all())] = True
    multi_char_masked = 0
    for i in range(0, len(ds), 5):
        item = ds[i]
        starts = item["word_starts"].astype(bool)
        assert starts[0] and not starts.all()  # words of several characters
        masked = np.zeros(len(starts), dtype=bool)
        masked[item["masked_positions"]] = True
        maskable = ~special[item["original_ids"]]
        bounds = [*np.flatnonzero(starts).tolist(), len(starts)]
        for first, end in zip(bounds[:-1], bounds[1:], strict=True):
            word = masked[first:end][maskable[first:end]]
            assert word.all() or not word.any(), (i, first, end, masked[first:end], maskable[first:end])
            multi_char_masked += len(word) > 1 and bool(word.all())
    assert multi_char_masked > 20


def test_chinese_jieba_and_traditional_conversion(tmp_path: Path) -> None:
    corpus = tmp_path / "zh.txt"
    corpus.write_text("這個國家的數學很發達。\n數學是研究數量的學科。\n\n"
                      "语言学是研究语言的科学。\n它有很多分支。\n", encoding="utf-8")
    out = build_dataset(tmp_path / "zh", "--input", str(corpus), "--format", "text", "--language", "zh",
                        "--tokenizer", str(ZH_VOCAB), "--whole-word-masking", "--traditional-to-simplified",
                        "--min-doc-chars", "5", "--max-seq-len", "32")
    ds = PretrainDataset(out)
    tok = load_tokenizer(TokenizerConfig(str(ZH_VOCAB)))
    text = "".join(tok.id_to_token(int(t)) for i in range(len(ds)) for t in ds[i]["original_ids"])
    assert "这个国家" in text and "這" not in text
    assert ds.manifest.masking.zh_segmenter == "jieba"
    # jieba's words reach the instances: 国家 and 数学 are one word each (家, 学 continue them).
    pairs = {("国", "家"): 0, ("数", "学"): 0}
    for i in range(len(ds)):
        tokens = [tok.id_to_token(int(t)) for t in ds[i]["original_ids"]]
        starts = ds[i]["word_starts"].astype(bool)
        for k in range(len(tokens) - 1):
            if (tokens[k], tokens[k + 1]) in pairs:
                assert starts[k] and not starts[k + 1], (tokens, starts.tolist())
                pairs[(tokens[k], tokens[k + 1])] += 1
    assert all(pairs.values()), pairs


def test_wikiextractor_json_and_hf_directory_tokenizer(tmp_path: Path) -> None:
    from transformers import BertTokenizerFast

    tok_dir = tmp_path / "tok"
    tok_dir.mkdir()
    shutil.copy2(EN_VOCAB, tok_dir / "vocab.txt")
    BertTokenizerFast.from_pretrained(str(tok_dir), do_lower_case=True).save_pretrained(tok_dir)
    (tok_dir / "vocab.txt").unlink()  # the tokenizer.json alone must do
    lines = []
    for n in range(6):
        body = " ".join(f"Sentence number {k} of article {n} talks about rivers and hills." for k in range(12))
        lines.append(json.dumps({"id": str(n), "url": "u", "title": f"Art {n}", "text": f"Art {n}\n{body}"}))
    lines.insert(2, "{not json")
    src = tmp_path / "wiki_00"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = build_dataset(tmp_path / "ds", "--input", str(src), "--format", "wikiextractor-json",
                        "--tokenizer", str(tok_dir), "--max-seq-len", "64")
    ds = PretrainDataset(out)
    assert ds.manifest.tokenizer.kind == "hf"
    assert ds.manifest.tokenizer.special_ids.mask == 103
    assert ds.manifest.tokenizer.vocab_size == 30522
    assert ds.manifest.train.totals.documents == 6
    assert ds.manifest.skips["malformed_json_lines"] == 1


def test_sentencepiece_tokenizer(tmp_path: Path) -> None:
    import sentencepiece as spm

    text = tmp_path / "train.txt"
    sentences = [f"The river {w} flows through the valley of {v} in spring." for w in "abcdefghij" for v in range(30)]
    text.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    spm.SentencePieceTrainer.train(
        input=str(text), model_prefix=str(tmp_path / "sp"), vocab_size=120,
        user_defined_symbols=["[CLS]", "[SEP]", "[MASK]"], pad_id=3, pad_piece="[PAD]", hard_vocab_limit=False,
        minloglevel=2,
    )
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join("\n".join(sentences[i : i + 10]) for i in range(0, 300, 10)), encoding="utf-8")
    out = build_dataset(tmp_path / "ds", "--input", str(corpus), "--format", "text",
                        "--tokenizer", str(tmp_path / "sp.model"), "--max-seq-len", "64",
                        "--whole-word-masking")
    ds = PretrainDataset(out)
    assert ds.manifest.tokenizer.kind == "sentencepiece"
    assert ds.manifest.token_dtype == "uint8"
    specials = ds.manifest.tokenizer.special_ids
    item = ds[0]
    assert item["original_ids"][0] == specials.cls and item["original_ids"][-1] == specials.sep


# ---------------------------------------------------------------- bad input


def _expect_build_error(tmp_path: Path, match: str, *args: str) -> Path:
    out = tmp_path / "out"
    with pytest.raises(BuildError, match=match):
        build_dataset(out, *args)
    with pytest.raises(DatasetError):
        PretrainDataset(out)
    return out


def test_empty_glob(tmp_path: Path) -> None:
    _expect_build_error(tmp_path, "no input file matches",
                        "--input", str(tmp_path / "none*.xml"), "--tokenizer", str(EN_VOCAB))


def test_missing_and_bad_tokenizer(tmp_path: Path) -> None:
    _expect_build_error(tmp_path, "tokenizer not found",
                        "--input", str(EN_DUMP), "--tokenizer", str(tmp_path / "vocab.txt"))
    bad = tmp_path / "weird.model"
    bad.write_bytes(b"not a model")
    _expect_build_error(tmp_path, "weird.model", "--input", str(EN_DUMP), "--tokenizer", str(bad))


def test_max_seq_len_too_large(tmp_path: Path) -> None:
    _expect_build_error(tmp_path, "max-seq-len 4096",
                        "--input", str(EN_DUMP), "--tokenizer", str(EN_VOCAB), "--max-seq-len", "4096")


def test_truncated_bz2_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "cut.xml.bz2"
    bad.write_bytes(EN_DUMP.read_bytes()[: EN_DUMP.stat().st_size // 2])
    _expect_build_error(tmp_path, r"cut\.xml\.bz2: corrupt or truncated",
                        "--input", str(bad), "--tokenizer", str(EN_VOCAB))


def test_malformed_xml_names_file_and_line(tmp_path: Path) -> None:
    xml = bz2.decompress(EN_DUMP.read_bytes())
    bad = tmp_path / "bad.xml"
    cut = xml.index(b"</page>", 200_000)
    bad.write_bytes(xml[:cut] + b"<oops>" + xml[cut:])
    _expect_build_error(tmp_path, r"bad\.xml: malformed XML at line \d+",
                        "--input", str(bad), "--tokenizer", str(EN_VOCAB))


def test_non_utf8_in_xml_is_an_error_and_in_text_a_counted_skip(tmp_path: Path) -> None:
    xml = bz2.decompress(EN_DUMP.read_bytes())
    bad = tmp_path / "latin.xml"
    at = xml.index(b'xml:space="preserve">', xml.index(b"<ns>0</ns>")) + 30  # inside an article's text
    bad.write_bytes(xml[:at] + b"caf\xe9 " + xml[at:])
    _expect_build_error(tmp_path, r"latin\.xml: malformed XML",
                        "--input", str(bad), "--tokenizer", str(EN_VOCAB))
    text = tmp_path / "t.txt"
    good = "\n".join(f"This is sentence {k} of a document about rivers." for k in range(30))
    text.write_bytes(good.encode() + b"\nbad \xff\xfe line\n\n" + good.encode() + b"\n")
    out = build_dataset(tmp_path / "ok", "--input", str(text), "--format", "text",
                        "--tokenizer", str(EN_VOCAB), "--max-seq-len", "64")
    assert PretrainDataset(out).manifest.skips["invalid_utf8_lines"] == 1


def test_everything_skipped_writes_no_dataset(tmp_path: Path) -> None:
    text = tmp_path / "tiny.txt"
    text.write_text("Short.\n\nAlso short.\n", encoding="utf-8")
    _expect_build_error(tmp_path, re.escape("no instance was built from 1 input file(s); skipped: too_short 2 "
                                            "(do --format text and --min-doc-chars 200 fit them?)"),
                        "--input", str(text), "--format", "text", "--tokenizer", str(EN_VOCAB))


def test_existing_dataset_is_kept_unless_overwrite(tmp_path: Path) -> None:
    args = ["--input", str(ZH_TEXT), "--format", "text", "--language", "zh",
            "--tokenizer", str(ZH_VOCAB), "--min-doc-chars", "10", "--dupe-factor", "1"]
    out = build_dataset(tmp_path / "ds", *args)
    before = shard_bytes(out)
    with pytest.raises(BuildError, match="already holds a dataset"):
        build_dataset(out, *args, "--seed", "99")
    assert shard_bytes(out) == before and len(PretrainDataset(out)) > 0
    build_dataset(out, *args, "--seed", "99", "--overwrite")
    assert PretrainDataset(out).manifest.seed == 99
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "notes.txt").write_text("mine")
    with pytest.raises(BuildError, match="not empty"):
        build_dataset(tmp_path / "junk", *args)
    assert (tmp_path / "junk" / "notes.txt").read_text() == "mine"
    # A model's, an export's or a run's folder is refused even with --overwrite (which keeps
    # what is not the build's: the dataset went in beside the model's files).
    for marker in ("config.json", "tacl_export.json", "run.json"):
        folder = tmp_path / f"with-{marker}"
        folder.mkdir()
        (folder / marker).write_text("{}")
        with pytest.raises(BuildError, match=f"{re.escape(str(folder))}: holds .* \\({re.escape(marker)}\\), which a "
                                             "dataset must not be mixed with, even with --overwrite"):
            build_dataset(folder, *args, "--overwrite")
        assert [p.name for p in folder.iterdir()] == [marker]
    # ... and so is a place inside one, even a folder that is not there yet: the run's
    # export at its end (or its checkpoint rotation), or the next export, replaces it whole.
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text("{}")
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "tacl_export.json").write_text("{}")
    for inside in (run / "export" / "ds", run / "checkpoints" / "ds", run / "export", tmp_path / "model" / "ds"):
        with pytest.raises(BuildError, match=f"^{re.escape(str(inside))}: inside the (training run|export) "):
            build_dataset(inside, *args)
        assert not inside.exists()


def test_failure_mid_run_leaves_no_readable_dataset(tmp_path: Path) -> None:
    """A good file and a corrupt one: the good one's shard work may be done, but no
    manifest is written, so nothing can read the directory as a dataset."""
    bad = tmp_path / "z-cut.xml.bz2"
    bad.write_bytes(EN_DUMP.read_bytes()[: EN_DUMP.stat().st_size // 2])
    out = _expect_build_error(tmp_path, "corrupt or truncated", "--input", str(EN_DUMP),
                              "--input", str(bad), "--tokenizer", str(EN_VOCAB))
    assert not (out / "manifest.json").exists()


def test_killed_run_leaves_no_readable_dataset_and_a_rerun_succeeds(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    cmd = [sys.executable, "-m", "data_prep.build", "--quiet", "--input", str(EN_DUMP),
           "--tokenizer", str(EN_VOCAB), "--output", str(out), "--dupe-factor", "1", "--max-seq-len", "64"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not list((out / "_tmp").glob("*")):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert list((out / "_tmp").glob("*")), "the run was killed while writing"
    with pytest.raises(DatasetError, match="manifest.json: missing"):
        PretrainDataset(out)
    # No --overwrite needed: what is there is an unfinished build, not a dataset.
    build_dataset(out, "--input", str(EN_DUMP), "--tokenizer", str(EN_VOCAB),
                  "--dupe-factor", "1", "--max-seq-len", "64")
    assert len(PretrainDataset(out)) > 0 and not (out / "_tmp").exists()


def test_inspect_cli_prints_summary_and_marked_instances(en_dataset: PretrainDataset) -> None:
    res = subprocess.run([sys.executable, "-m", "data_prep.inspect", str(en_dataset.path), "-n", "2"],
                         cwd=ROOT, capture_output=True, text=True, check=True)
    assert "instances" in res.stdout and "NSP random next" in res.stdout and "skipped:" in res.stdout
    assert res.stdout.count("[CLS]") == 2
    assert "→[MASK]]" in res.stdout, "masked tokens are marked [original→placed]"
    assert f"  content fingerprint {en_dataset.manifest.content_fingerprint()}\n" in res.stdout  # as run.json has it


def test_build_cli_help_and_run_build_api(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, "-m", "data_prep.build", "--help"], cwd=ROOT,
                         capture_output=True, text=True, check=True)
    for flag in ("--num-shards", "--whole-word-masking", "--dupe-factor", "--max-seq-len", "--overwrite"):
        assert flag in res.stdout
    command = parse_args(["--input", "x", "--tokenizer", "t", "--output", "o",
                          "--runner", "DirectRunner", "--direct_num_workers", "2"])
    config = command.config
    assert command.beam_args == ["--runner", "DirectRunner", "--direct_num_workers", "2"]
    assert config.instances.max_seq_len == 256 and config.masking.masked_lm_prob == 0.15
    assert config.dupe_factor == 5 and config.output.num_shards == 1


def test_the_console_shows_the_builds_own_lines_and_the_log_file_the_rest(tmp_path: Path) -> None:
    """With worker processes, Beam's and the workers' chatter goes to OUTPUT.build.log;
    the console keeps the build's progress and summary. --verbose shows it all."""
    import subprocess
    import sys

    from conftest import ROOT

    args = [sys.executable, "-m", "data_prep.build", "--input", str(ZH_TEXT), "--format", "text", "--language",
            "zh", "--tokenizer", str(ZH_VOCAB), "--min-doc-chars", "10", "--direct_num_workers", "2",
            "--direct_running_mode", "multi_processing"]
    quiet = subprocess.run([*args, "--output", str(tmp_path / "ds")], cwd=ROOT, capture_output=True, text=True,
                           timeout=600)
    assert quiet.returncode == 0, quiet.stderr[-2000:]
    lines = [line for line in quiet.stderr.splitlines() if line.strip()]
    assert lines and all(" data_prep." in line for line in lines), lines
    assert any("progress: work units 1/1 done" in line for line in lines)
    assert "instances" in quiet.stdout and "runner log:" in quiet.stdout
    log = (tmp_path / "ds.build.log").read_text()
    assert "apache_beam" in log and "progress: work units 1/1 done" in log
    verbose = subprocess.run([*args, "--output", str(tmp_path / "ds2"), "--verbose"], cwd=ROOT, capture_output=True,
                             text=True, timeout=600)
    assert verbose.returncode == 0 and "apache_beam" in verbose.stderr


def test_document_processor_is_kept_per_thread_across_setups(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The DaskRunner sets up a fresh copy of the DoFn for every bundle: in one
    thread they share one processor (and its warm word cache), another config gets
    its own, and another thread never shares one. The processor is the processing
    thread's, not the setting-up one's: Beam's SDK harness may set a DoFn up on one
    thread and run its bundles on others, which then shared a word cache that is not
    thread-safe."""
    import pickle
    import threading

    from data_prep import pipeline
    from data_prep.inputs import WorkUnit
    from data_prep.pipeline import PrepareDocuments
    from data_prep.shards import TokenizerFacts

    config = parse_args(["--input", str(EN_DUMP), "--tokenizer", str(EN_VOCAB), "--output", str(tmp_path / "a")]).config
    other = parse_args(["--input", str(EN_DUMP), "--tokenizer", str(EN_VOCAB), "--output", str(tmp_path / "b")]).config
    facts = TokenizerFacts(30522, {}, np.zeros(0, dtype=np.int32))
    used = []

    class Stop(Exception):
        pass

    def spill(unit, processor, *rest):
        used.append(processor)
        raise Stop

    monkeypatch.setattr(pipeline, "spill_unit", spill)

    def set_up(build_config):
        fn = pickle.loads(pickle.dumps(PrepareDocuments(build_config, facts)))  # as a runner ships it
        fn.setup()
        return fn

    def processor_of(fn):
        with pytest.raises(Stop):
            next(fn.process(WorkUnit(str(EN_DUMP), "wiki-xml")))
        return used[-1]

    first, second = processor_of(set_up(config)), processor_of(set_up(config))
    assert first is second
    assert processor_of(set_up(other)) is not first and processor_of(set_up(other)).config == other
    set_up_here = set_up(config)
    here = processor_of(set_up_here)  # this thread's, for config again (other's replaced first)
    elsewhere: list = []
    for set_up_where in (lambda: set_up(config), lambda: set_up_here):  # set up there, or here and run there
        thread = threading.Thread(target=lambda make=set_up_where: elsewhere.append(processor_of(make())))
        thread.start()
        thread.join()
    assert len(elsewhere) == 2 and all(p is not here and p.config == config for p in elsewhere)


def test_the_progress_line_is_written_once_per_interval_and_when_the_last_unit_finishes(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """A progress line reads every unit's marker: written for each of a build's units,
    they would read units²/2 markers. A worker thread writes its first, then one per
    PROGRESS_EVERY_S, and the unit that completes the stage writes the last."""
    import threading

    from data_prep import pipeline
    from data_prep.inputs import WorkUnit
    from data_prep.workspace import Workspace

    units = [WorkUnit("dump.xml.bz2", "wiki-xml", start, start + 100) for start in range(0, 500, 100)]
    workspace = Workspace(tmp_path)
    workspace.start_run("digest", units, inputs={}, tokenizer_sha256="0" * 64)
    clock = [1000.0]
    monkeypatch.setattr(pipeline.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(pipeline, "_THREAD_PROGRESS", threading.local())  # this test's thread starts afresh
    lines = []
    for done, unit in enumerate(units, start=1):
        workspace.mark_done(workspace.part_prefix(unit), [], {"bytes": 100, "shards": [0], "skips": {},
                                                               "documents": 1})
        clock[0] += 10 if done != 4 else pipeline.PROGRESS_EVERY_S  # the 4th unit comes 30 s after the 3rd
        caplog.clear()
        with caplog.at_level("INFO", logger="data_prep.pipeline"):
            pipeline._log_progress(workspace)
        lines += [r.getMessage() for r in caplog.records]
    assert [line.split(" done")[0] for line in lines] == [
        "progress: work units 1/5",  # this thread's first
        "progress: work units 4/5",  # 30 s after it
        "progress: work units 5/5"]  # the stage's last unit


def test_reused_units_write_no_progress_line_but_the_last_and_it_is_written_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """A resumed build wrote "progress: work units 3/3 done ... 0.00 MB/s" once for
    each unit it reused, all done before it started; the "resuming: N of M work
    unit(s) already done" line says that once. Every unit that finds the stage
    complete (units finishing together, or reused ones) used to write the last line."""
    import threading

    from data_prep import pipeline
    from data_prep.inputs import WorkUnit
    from data_prep.workspace import Workspace

    units = [WorkUnit("dump.xml.bz2", "wiki-xml", start, start + 100) for start in range(0, 400, 100)]
    workspace = Workspace(tmp_path)
    workspace.start_run("digest", units, inputs={}, tokenizer_sha256="0" * 64)
    monkeypatch.setattr(pipeline, "_THREAD_PROGRESS", threading.local())  # this test's thread starts afresh
    with caplog.at_level("INFO", logger="data_prep.pipeline"):
        for unit in units[:2]:  # done before the resume: reused, each a thread's first unit
            workspace.mark_done(workspace.part_prefix(unit), [], {"bytes": 100, "shards": [0], "skips": {},
                                                                   "documents": 1})
            pipeline._log_progress(workspace, reused=True)
            monkeypatch.setattr(pipeline, "_THREAD_PROGRESS", threading.local())
        assert caplog.records == []
        for unit in units[2:]:  # read now, each by a thread of its own
            workspace.mark_done(workspace.part_prefix(unit), [], {"bytes": 100, "shards": [0], "skips": {},
                                                                   "documents": 1})
            pipeline._log_progress(workspace)
            monkeypatch.setattr(pipeline, "_THREAD_PROGRESS", threading.local())
        for _ in range(2):  # units that find the stage complete too
            pipeline._log_progress(workspace, reused=True)
            pipeline._log_progress(workspace)
    assert [r.getMessage().split(" done")[0] for r in caplog.records] == [
        "progress: work units 3/4",  # the first unit read
        "progress: work units 4/4"]  # the stage's last, once


def test_a_file_of_a_hf_tokenizer_directory_is_refused_naming_the_directory(tmp_path: Path) -> None:
    """Read as a vocab.txt, a model's tokenizer.json or config.json said "sep_token
    not found in the vocabulary"."""
    from data_prep.tokenization import TokenizerError

    model = tmp_path / "bert"
    model.mkdir()
    for name in ("tokenizer.json", "config.json", "added_tokens.json"):
        (model / name).write_text("{}", encoding="utf-8")
        with pytest.raises(TokenizerError) as refused:
            load_tokenizer(TokenizerConfig(str(model / name)))
        assert str(refused.value) == (f"{model / name}: a file of a Hugging Face tokenizer or model directory: "
                                      f"give the directory, {model}")


def test_a_vocabulary_that_does_not_fit_the_case_of_the_text_is_warned_about(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, en_dataset: PretrainDataset) -> None:
    """An uncased vocabulary under --no-lowercase put [UNK] in 12% of the real English
    sample's tokens, without a word: the build warns at start-up (the vocabulary has no
    upper-case letter) and in its log, manifest and summary (the share of [UNK])."""
    with caplog.at_level("WARNING"):
        out = build_dataset(tmp_path / "ds", "--input", str(EN_DUMP), "--tokenizer", str(EN_VOCAB), "--no-lowercase",
                            "--num-shards", "1", "--dupe-factor", "1", "--max-seq-len", "64")
    assert (f"--no-lowercase with tokenizer {EN_VOCAB}, an uncased vocabulary (not one upper-case letter in its "
            "tokens): every capitalised word becomes [UNK]; drop --no-lowercase") in caplog.text
    manifest = PretrainDataset(out).manifest
    (unknown,) = [w for w in manifest.warnings if "[UNK]" in w]
    share, rest = unknown.split("% of the tokens are [UNK] (", 1)
    assert float(share) > 5 and rest.endswith(
        "): is --no-lowercase right for this vocabulary (an uncased one has no capital letters), and is it one "
        "for the text's language?")
    assert unknown in caplog.text and f"warning: {unknown}" in format_summary(manifest, str(out))
    # With the vocabulary's own case, none.
    assert not any("[UNK]" in w for w in en_dataset.manifest.warnings)
