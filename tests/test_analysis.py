"""Self-similarity (Eq. 3), isotropy, the analysis CLI and the training-time
evaluation."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from conftest import EN_VOCAB  # noqa: I001
from transformers import BertConfig, BertModel, BertTokenizerFast

from tacl_scale.analysis import isotropy, main
from tacl_scale.evaluation import layer_self_similarity
from tacl_scale.similarity import LayerStats, sentence_self_similarity

pytestmark = pytest.mark.framework  # also run on the GPU image's versions (scripts/test.sh --gpu-image)


def test_eq3_hand_computed() -> None:
    identical = torch.ones(1, 3, 4)
    orthogonal = torch.eye(3, 4)[None]
    mask = torch.ones(1, 3, dtype=torch.bool)
    sums, pairs = sentence_self_similarity(torch.cat([identical, orthogonal]), mask.repeat(2, 1))
    assert pairs.tolist() == [6, 6]
    assert (sums / pairs).tolist() == pytest.approx([1.0, 0.0])
    # two vectors at 60°: cos = 0.5
    pair = torch.tensor([[[1.0, 0.0], [0.5, 3**0.5 / 2]]])
    s, n = sentence_self_similarity(pair, torch.ones(1, 2, dtype=torch.bool))
    assert float(s / n) == pytest.approx(0.5)


def test_padding_is_ignored_and_the_two_aggregates_differ() -> None:
    # Seeded: the sum of cosines can nearly cancel, and with unseeded data about 1.6% of
    # runs put its float32 rounding past the relative tolerance below.
    hidden = torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(0))
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    sums, pairs = sentence_self_similarity(hidden, mask)
    garbage = hidden.clone()
    garbage[0, 3:] = 1000.0
    sums2, _ = sentence_self_similarity(garbage, mask)
    assert torch.allclose(sums, sums2)
    unit = torch.nn.functional.normalize(hidden[0, :3], dim=-1)
    direct = (unit @ unit.T).sum() - 3
    assert float(sums[0]) == pytest.approx(float(direct), rel=1e-5) and pairs.tolist() == [6, 20]
    stats = LayerStats([])
    stats.add(torch.tensor([6.0, 0.0]), torch.tensor([6.0, 20.0]))
    summary = stats.summary()
    assert summary["eq3_mean"] == pytest.approx(0.5)  # mean of per-sentence values (1, 0)
    assert summary["pair_weighted_mean"] == pytest.approx(6 / 26)  # pair-weighted
    assert summary["n_sentences"] == 2 and summary["n_pairs"] == 26


def test_isotropy_uses_pairs_from_different_sentences_only() -> None:
    tokens = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    assert isotropy(tokens, torch.tensor([0, 0, 1])) == pytest.approx(0.0)
    assert isotropy(tokens, torch.tensor([0, 1, 2])) == pytest.approx(1 / 3)


@pytest.fixture
def tiny_model(tmp_path: Path) -> Path:
    torch.manual_seed(0)
    directory = tmp_path / "tiny"
    BertModel(BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64)).save_pretrained(directory)
    (directory / "vocab.txt").write_bytes(EN_VOCAB.read_bytes())
    BertTokenizerFast.from_pretrained(str(directory)).save_pretrained(directory)
    return directory


def test_cli_writes_json_csv_and_readable_pngs(tiny_model: Path, tmp_path: Path) -> None:
    sentences = tmp_path / "s.txt"
    sentences.write_text("The river flows north.\nA small town lies on the hill.\nIt rained.\n\nShort one.\n")
    out = tmp_path / "out"
    assert main(["selfsim", "--model", str(tiny_model), "--model", str(tiny_model), "--sentences", str(sentences),
                 "--out", str(out), "--batch-size", "2", "--heatmap-sentence", "The river flows north."]) == 0
    report = json.loads((out / "selfsim.json").read_text())
    assert list(report["models"]) == ["tiny", "tiny-2"]
    layers = report["models"]["tiny"]
    assert [r["layer"] for r in layers] == [0, 1, 2] and all(r["n_sentences"] == 4 for r in layers)
    assert all(-1 <= r["eq3_mean"] <= 1 and -1 <= r["isotropy"] <= 1 for r in layers)
    assert (out / "selfsim.csv").read_text().count("\n") == 1 + 2 * 3
    import matplotlib.image as mpimg

    for png in ("selfsim_by_layer.png", "heatmap_tiny.png"):
        image = mpimg.imread(out / png)
        assert image.shape[0] > 100 and image.shape[1] > 100
    excluded = tmp_path / "ex"
    assert main(["selfsim", "--model", str(tiny_model), "--sentences", str(sentences), "--out", str(excluded),
                 "--exclude-special"]) == 0
    with_special = json.loads((out / "selfsim.json").read_text())["models"]["tiny"][0]["n_pairs"]
    without = json.loads((excluded / "selfsim.json").read_text())["models"]["tiny"][0]["n_pairs"]
    assert without < with_special
    empty = tmp_path / "empty.txt"
    empty.write_text("\n")
    assert main(["selfsim", "--model", str(tiny_model), "--sentences", str(empty), "--out", str(excluded)]) == 2


def test_sentences_that_give_no_figure_are_refused_and_cut_ones_said(
        tiny_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    """One sentence printed "0.6288±0.0000 ... nan" (no spread, no isotropy);
    sentences of one token gave nan; a sentence past the model's positions was cut
    without a word."""
    cases = [("The river flows north.\n", "one sentence: the analysis compares sentences"),
             ("river\nnorth\n", "no sentence has two real tokens for ")]
    for text, says in cases:
        sentences = tmp_path / "s.txt"
        sentences.write_text(text)
        assert main(["selfsim", "--model", str(tiny_model), "--sentences", str(sentences), "--out",
                     str(tmp_path / "out"), "--exclude-special"]) == 2
        errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
        assert len(errors) == 1 and errors[0].startswith(f"error: {sentences}: {says}"), errors
    sentences.write_text("river " * 600 + "\nIt rained.\n")
    with caplog.at_level(logging.WARNING, logger="tacl_scale.analysis"):
        assert main(["selfsim", "--model", str(tiny_model), "--sentences", str(sentences), "--out",
                     str(tmp_path / "long"), "--heatmap-sentence", "river " * 600]) == 0
    assert "tiny: 1 of the 2 sentences are longer than its 512 positions: only their first 512 tokens" in caplog.text
    # The heat map cut it too (its position embeddings ended at 512: an IndexError).
    assert "the heat-map sentence is longer than its 512 positions: only its first 512 tokens are drawn" in caplog.text
    import matplotlib.image as mpimg

    height, width = mpimg.imread(tmp_path / "long" / "heatmap_tiny.png").shape[:2]
    assert 1000 < height <= 40 * 120 and 1000 < width <= 40 * 120  # capped: 512 labelled cells made 21,000 pixels


def test_bad_sentence_files_and_outputs_are_one_error_line_naming_them(tiny_model: Path, tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    sentences = tmp_path / "s.txt"
    sentences.write_text("The river flows north.\nIt rained.\n")
    binary = tmp_path / "corpus.xml.bz2"
    binary.write_bytes(b"BZh91AY&SY\xb4\x00")
    cases = [(binary, tmp_path / "out", f"{binary}: not UTF-8 text"),
             (tmp_path, tmp_path / "out", f"{tmp_path}: is a directory"),
             (sentences, sentences, f"{sentences}: is a file, not a directory for the report (--out)"),
             (tmp_path / "missing.txt", tmp_path / "out", f"{tmp_path / 'missing.txt'}: no such file; --sentences")]
    for given, out, says in cases:
        assert main(["selfsim", "--model", str(tiny_model), "--sentences", str(given), "--out", str(out)]) == 2
        errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
        assert len(errors) == 1 and errors[0].startswith(f"error: {says}"), errors
    assert not (tmp_path / "out").exists() and sentences.read_text() == "The river flows north.\nIt rained.\n"


def test_a_bad_model_is_one_error_line_naming_it(tiny_model: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """A folder that is neither a model nor a run was reported as a bad run directory,
    and a model that would not load was a traceback."""
    sentences = tmp_path / "s.txt"
    sentences.write_text("The river flows north.\nIt rained.\n")
    truncated = tmp_path / "truncated"
    truncated.mkdir()
    for file in tiny_model.iterdir():
        (truncated / file.name).write_bytes(file.read_bytes()[:1000] if file.suffix == ".safetensors"
                                            else file.read_bytes())
    no_tokenizer = tmp_path / "no-tokenizer"  # as a Trainer checkpoint: weights and config alone
    no_tokenizer.mkdir()
    for file in tiny_model.iterdir():
        if file.suffix in (".safetensors", ".bin") or file.name == "config.json":
            (no_tokenizer / file.name).write_bytes(file.read_bytes())
    reshaped = tmp_path / "reshaped"  # another model's config.json beside these weights
    reshaped.mkdir()
    for file in tiny_model.iterdir():
        (reshaped / file.name).write_bytes(file.read_bytes())
    config = json.loads((tiny_model / "config.json").read_text())
    (reshaped / "config.json").write_text(json.dumps({**config, "intermediate_size": 2 * config["intermediate_size"]}))
    cases = [(tmp_path, "neither a Hugging Face model directory (no config.json) nor a training run"),
             (reshaped, "cannot load the model: its weights do not have the shapes its config.json gives (6 of them, "
                        "e.g. encoder.layer.0.intermediate.dense.bias: "),
             (truncated, "cannot load the model: Error while deserializing header"),
             # transformers built a tokenizer of its specials alone: every word [UNK], figures all the same
             (no_tokenizer, "no tokenizer vocabulary (vocab.txt, tokenizer.json or a sentencepiece .model)")]
    for model, says in cases:
        assert main(["selfsim", "--model", str(model), "--sentences", str(sentences), "--out",
                     str(tmp_path / "out")]) == 2
        errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
        assert len(errors) == 1 and errors[0].startswith(f"error: {model}: {says}"), errors


@pytest.mark.parametrize(("flags", "said"), [
    (["--device", "cuda:7"], "error: --device cuda:7: this machine's torch sees "),  # was a traceback
    (["--device", "tpu"], "error: --device tpu: not a device (cpu, cuda, cuda:1, ...)"),  # was a traceback
    (["--heatmap-sentence", "It rained.", "--heatmap-layer", "3"], "has layers 0 (the embeddings) to 2"),  # IndexError
    (["--batch-size", "0"], "error: --batch-size must be >= 1, got 0"),  # was "range() arg 3 must not be zero"
    (["--max-sentences", "-3"], "error: --max-sentences must be >= 2, got -3"),  # was all but the last 3
    (["--max-sentences", "1"], "error: --max-sentences must be >= 2, got 1"),  # isotropy was nan
])
def test_bad_analysis_options_are_one_error_line(flags: list[str], said: str, tiny_model: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    sentences = tmp_path / "s.txt"
    sentences.write_text("The river flows north.\nIt rained.\n")
    argv = ["selfsim", "--model", str(tiny_model), "--sentences", str(sentences), "--out", str(tmp_path / "out"),
            *flags]
    if "cuda:7" in flags and torch.cuda.device_count() > 7:
        pytest.skip("this machine has a cuda:7")
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's refusal
        code = exit_.code
    assert code == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error: " in line]
    assert len(errors) == 1 and said in errors[0], errors
    assert not (tmp_path / "out").exists()  # a heat-map layer the model lacks left an empty --out


def test_layer_self_similarity_of_an_encoder(tiny_model: Path) -> None:
    """Eq. 3 per layer, embeddings first, over each sequence's real tokens: each
    sequence alone, its tokens' mean pairwise cosine, averaged over the sequences."""
    encoder = BertModel.from_pretrained(tiny_model).eval()
    generator = torch.Generator().manual_seed(0)
    mask = torch.ones(3, 10, dtype=torch.long)
    mask[1, 6:] = 0  # a padded sequence: its padding is no token of it
    batch = {"original_ids": torch.randint(1000, 2000, (3, 10), generator=generator), "attention_mask": mask,
             "token_type_ids": torch.zeros(3, 10, dtype=torch.long)}
    with torch.no_grad():
        values = layer_self_similarity(encoder, [batch])
        expected = []
        for layer in range(3):
            per_sequence = []
            for row in range(3):
                length = int(mask[row].sum())
                alone = encoder(input_ids=batch["original_ids"][row : row + 1, :length],
                                token_type_ids=batch["token_type_ids"][row : row + 1, :length],
                                output_hidden_states=True).hidden_states[layer][0]
                unit = torch.nn.functional.normalize(alone, dim=-1)
                per_sequence.append(float(((unit @ unit.T).sum() - length) / (length * (length - 1))))
            expected.append(sum(per_sequence) / 3)
    assert values == pytest.approx(expected, rel=1e-4, abs=1e-5)


def test_layer_axis_has_integer_ticks() -> None:
    import matplotlib.pyplot as plt

    from tacl_scale.analysis import layer_figure

    fig = layer_figure({"a": [{"layer": k, "eq3_mean": 0.1 * k} for k in range(3)]})
    try:
        assert list(fig.axes[0].get_xticks()) == [0, 1, 2]
    finally:
        plt.close(fig)


def test_models_load_quietly_and_missing_encoder_weights_are_one_warning(tmp_path: Path) -> None:
    """Hugging Face printed a table of the heads a ``BertModel`` ignores (every
    pre-training checkpoint has them) and a progress bar per model; encoder weights
    initialised at random, which do change the figures, were one row of such a table."""
    import subprocess
    import sys

    from safetensors.torch import load_file, save_file
    from transformers import BertForPreTraining

    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64)
    pretraining, partial = tmp_path / "pretraining", tmp_path / "partial"
    BertForPreTraining(config).save_pretrained(pretraining)
    BertModel(config).save_pretrained(partial)
    weights = load_file(partial / "model.safetensors")
    del weights["encoder.layer.1.output.dense.weight"]
    save_file(weights, partial / "model.safetensors", metadata={"format": "pt"})
    for directory in (pretraining, partial):
        (directory / "vocab.txt").write_bytes(EN_VOCAB.read_bytes())
    sentences = tmp_path / "s.txt"
    sentences.write_text("The river flows north.\nA small town lies on the hill.\n")
    done = subprocess.run([sys.executable, "-m", "tacl_scale.analysis", "selfsim", "--model", str(pretraining),
                           "--model", str(partial), "--sentences", str(sentences), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        f"WARNING: {partial}: 1 encoder weights are not in the checkpoint and were initialised at random "
        "(e.g. encoder.layer.1.output.dense.weight): its figures describe a partly random model"], done.stderr


def selfsim_argv(models: list[Path], sentences: Path, out: Path, *flags: str) -> list[str]:
    return ["selfsim", *(arg for model in models for arg in ("--model", str(model))), "--sentences", str(sentences),
            "--out", str(out), *flags]


def one_error(capsys: pytest.CaptureFixture[str]) -> str:
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, errors
    return errors[0]


def test_an_export_a_run_or_a_dataset_is_refused_as_out(tiny_model: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """``--out runs/tour/model`` (an export) was taken, and the next export there
    deleted the report with the rest; a run or a dataset directory got the report
    among its files. Each is refused, nothing in it touched."""
    from tacl_scale.export import EXPORT_MARKER
    from tacl_scale.run_dir import RUN_FILE

    sentences = tmp_path / "s.txt"
    sentences.write_text("The river flows north.\nIt rained.\n")
    export, run, dataset = tmp_path / "export", tmp_path / "run", tmp_path / "dataset"
    for directory, marker in ((export, EXPORT_MARKER), (run, RUN_FILE), (dataset, "manifest.json")):
        directory.mkdir()
        (directory / marker).write_text("{}")
    said = {export: f"{export}: is an export, which the next export there replaces whole (it has {EXPORT_MARKER})",
            export / "analysis": f"{export / 'analysis'}: inside the export {export}",
            run: f"{run}: is a training run directory (it has {RUN_FILE})",
            # not there yet: the run's end writes it, replacing what is there
            run / "export": f"{run / 'export'}: inside the training run {run}'s own export/, which training writes",
            run / "checkpoints" / "x": f"{run / 'checkpoints' / 'x'}: inside the training run {run}'s own checkpoints/",
            dataset: f"{dataset}: is a dataset directory (it has manifest.json)"}
    before = sorted(tmp_path.rglob("*"))
    for out, says in said.items():
        assert main(selfsim_argv([tiny_model], sentences, out, "--overwrite")) == 2, out
        assert one_error(capsys).startswith(f"error: {says}"), out
    assert sorted(tmp_path.rglob("*")) == before
    assert main(selfsim_argv([tiny_model], sentences, run / "analysis")) == 0  # beside the run's own folders
    assert (run / "analysis" / "selfsim.json").is_file()


def test_a_used_out_needs_overwrite_and_holds_one_report(tiny_model: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Two models with heat maps, then one without, into one folder: selfsim.json
    named one model and the earlier heat maps stayed beside it, looking current."""
    sentences = tmp_path / "s.txt"
    sentences.write_text("The river flows north.\nA small town lies on the hill.\n")
    out = tmp_path / "out"
    assert main(selfsim_argv([tiny_model, tiny_model], sentences, out, "--heatmap-sentence", "It rained.")) == 0
    first = {path.name: path.read_bytes() for path in out.iterdir()}
    assert sorted(first) == ["heatmap_tiny-2.png", "heatmap_tiny.png", "selfsim.csv", "selfsim.json",
                             "selfsim_by_layer.png"]
    assert main(selfsim_argv([tiny_model], sentences, out)) == 2
    assert one_error(capsys).startswith(f"error: {out}: already holds an analysis report (heatmap_tiny-2.png); "
                                        "pass --overwrite to replace it")
    assert {path.name: path.read_bytes() for path in out.iterdir()} == first
    assert main(selfsim_argv([tiny_model], sentences, out, "--overwrite")) == 0
    assert sorted(path.name for path in out.iterdir()) == ["selfsim.csv", "selfsim.json", "selfsim_by_layer.png"]
    assert list(json.loads((out / "selfsim.json").read_text())["models"]) == ["tiny"]
    # A file the analysis does not write is never removed, --overwrite or not.
    (out / "NOTES.md").write_text("mine")
    for flags in ([], ["--overwrite"]):
        assert main(selfsim_argv([tiny_model], sentences, out, *flags)) == 2
        assert one_error(capsys).startswith(f"error: {out}: holds NOTES.md, which the analysis does not write")
    assert (out / "NOTES.md").read_text() == "mine" and (out / "selfsim.json").is_file()


def test_a_failed_analysis_leaves_out_as_it_was(tiny_model: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """A heat-map layer the second model lacks, or a second model that cannot be
    used, failed after --out was made (and the first model's heat map written in
    it); checked before the first model is analysed now, and --out is written only
    once the whole report is ready."""
    sentences = tmp_path / "s.txt"
    sentences.write_text("The river flows north.\nIt rained.\n")
    deeper = tmp_path / "deeper"  # 4 layers: layer 3 is in it, not in tiny
    BertModel(BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=4, num_attention_heads=2,
                         intermediate_size=64)).save_pretrained(deeper)
    (deeper / "vocab.txt").write_bytes(EN_VOCAB.read_bytes())
    no_vocabulary = tmp_path / "no-vocabulary"
    BertModel(BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64)).save_pretrained(no_vocabulary)
    out, earlier = tmp_path / "out", tmp_path / "earlier"
    assert main(selfsim_argv([tiny_model], sentences, earlier)) == 0
    kept = {path.name: path.read_bytes() for path in earlier.iterdir()}
    cases = [([deeper, tiny_model], ["--heatmap-sentence", "It rained.", "--heatmap-layer", "3"],
              f"--heatmap-layer 3: {tiny_model} has layers 0 (the embeddings) to 2"),
             ([tiny_model], ["--device", "cdua"], "--device cdua: not a device"),
             ([tiny_model, no_vocabulary], [], f"{no_vocabulary}: no tokenizer vocabulary")]
    for models, flags, says in cases:
        for target in (out, earlier):
            assert main(selfsim_argv(models, sentences, target, "--overwrite", *flags)) == 2, (flags, target)
            assert one_error(capsys).startswith(f"error: {says}"), (flags, target)
        assert not out.exists(), flags
        assert {path.name: path.read_bytes() for path in earlier.iterdir()} == kept, flags


def test_a_full_disk_keeps_the_earlier_report_and_leaves_no_temporary_file(
        tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``selfsim --overwrite`` onto a full disk removed the earlier report first and
    then failed writing the new one: --out held the new selfsim.csv and a PNG and no
    selfsim.json. Now the new files are written whole first: the disk filling then
    is one line naming --out, and the earlier report is byte for byte as it was, no
    temporary file beside it (a new --out is not left behind at all)."""
    import builtins
    import errno
    import io

    sentences = tmp_path / "s.txt"
    sentences.write_text("The river flows north.\nA small town lies on the hill.\n")
    out, new = tmp_path / "out", tmp_path / "new"
    assert main(selfsim_argv([tiny_model], sentences, out)) == 0
    earlier = {path.name: path.read_bytes() for path in out.iterdir()}
    real_open, room = builtins.open, {"files": 1}

    class FullFile(io.BufferedWriter):
        def write(self, data: bytes) -> int:  # type: ignore[override]
            super().write(bytes(data)[: len(data) // 2])
            self.flush()
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # a write names no file

    def a_disk_with_room_for_one_file(file: object, mode: str = "r", *args: object, **kwargs: object) -> object:
        if isinstance(file, (str, os.PathLike)) and Path(file).parent in (out, new) and "w" in mode:
            if room["files"] == 0:
                return FullFile(real_open(file, "wb", buffering=0))
            room["files"] -= 1
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", a_disk_with_room_for_one_file)
    said = {}
    for target in (out, new):
        room["files"] = 1
        assert main(selfsim_argv([tiny_model, tiny_model], sentences, target, "--overwrite",
                                 "--heatmap-sentence", "It rained.")) == 2
        said[target] = one_error(capsys)
    monkeypatch.setattr(builtins, "open", real_open)
    assert {path.name: path.read_bytes() for path in out.iterdir()} == earlier
    assert not new.exists()
    assert said == {target: f"error: {target}: the report could not be written: No space left on device (the disk is "
                            "full)" for target in (out, new)}
    # A report file a killed analysis left under its temporary name is no stranger's
    # file: the next analysis there removes it, --overwrite or not.
    (out / ".selfsim.json.0123abcd.tmp").write_bytes(b"half")
    assert main(selfsim_argv([tiny_model], sentences, out, "--overwrite")) == 0
    assert sorted(path.name for path in out.iterdir()) == sorted(earlier)
    for path in out.iterdir():
        path.unlink()
    (out / ".heatmap_tiny.png.0123abcd.tmp").write_bytes(b"half")
    assert main(selfsim_argv([tiny_model], sentences, out)) == 0
    assert sorted(path.name for path in out.iterdir()) == sorted(earlier)


def test_a_tokenizer_file_that_is_not_one_is_one_error_line_naming_it(
        tiny_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A vocab.txt that is not UTF-8 ended in the tokenizers library's traceback
    ("Exception: Error while initializing WordPiece: stream did not contain valid
    UTF-8"), and an HTML page saved as tokenizer.json named no file. Refused in one
    line naming the file, before the first model is analysed."""
    import shutil

    sentences = tmp_path / "s.txt"
    sentences.write_text("The river flows north.\nIt rained.\n")
    html = b"<!DOCTYPE html>\n<html><body>Sign in to download</body></html>\n"

    def damaged(name: str, damage: Callable[[Path], object]) -> Path:
        model = tmp_path / name
        shutil.copytree(tiny_model, model)
        damage(model)
        return model

    def latin1_vocabulary(model: Path) -> None:
        (model / "tokenizer.json").unlink()  # so that the vocab.txt is what is read
        with open(model / "vocab.txt", "ab") as f:
            f.write(b"caf\xe9\n")

    line = len((tiny_model / "vocab.txt").read_bytes().splitlines()) + 1
    cases = [(damaged("latin1", latin1_vocabulary), "vocab.txt", f"line {line} is not UTF-8 text: byte 0xe9)"),
             (damaged("html", lambda model: (model / "tokenizer.json").write_bytes(html)), "tokenizer.json",
              "expected value at line 1 column 1)"),
             (damaged("not-a-tokenizer", lambda model: (model / "tokenizer.json").write_text('{"version": "1.0"}')),
              "tokenizer.json", ""),
             (damaged("html-settings", lambda model: (model / "tokenizer_config.json").write_bytes(html)),
              "tokenizer_config.json", "Expecting value: line 1 column 1 (char 0))")]
    out = tmp_path / "out"
    for model, name, why in cases:
        assert main(selfsim_argv([tiny_model, model], sentences, out)) == 2, name
        assert one_error(capsys).startswith(f"error: {model / name}: not a tokenizer file ({why}"), model
        assert not out.exists()
