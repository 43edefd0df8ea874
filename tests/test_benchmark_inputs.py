"""The benchmark and experiment scripts' inputs: each refuses a bad argument at parse
time with a message naming it, compares with a published figure only where it was
measured at the same settings, and reuses an output of an earlier run only when it was
made with the same settings (pure functions, and the corpus and data steps with the
builds stood in for)."""

from __future__ import annotations

import bz2
import json
import sys
from pathlib import Path

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "experiments"))
import bench_data_prep  # noqa: E402
import bench_shard_gather  # noqa: E402
import bench_text_split  # noqa: E402
import bench_train  # noqa: E402
import miniature_selfsim  # noqa: E402

# --------------------------------------------------------------------------- bench_train


@pytest.mark.framework
def test_train_public_figure_at_its_settings() -> None:
    """The default shape on the CPU is where the public code was measured: its figure
    for each objective set; an explicit fp32 teacher is the CPU's default, and longer
    runs measure the same."""
    args = bench_train.parse_args([])
    assert bench_train.public_figure("tacl,mlm,nsp", args) == 7.5
    assert bench_train.public_figure("mlm,nsp", args) == 9.7
    assert bench_train.public_figure("tacl", args) is None  # not measured
    assert bench_train.public_figure("tacl,mlm,nsp", bench_train.parse_args(["--teacher-dtype", "fp32"])) == 7.5
    assert bench_train.public_figure("tacl,mlm,nsp", bench_train.parse_args(["--warmup", "10", "--steps", "100"])) == 7.5
    # MLM+NSP has no teacher: its dtype changes nothing of that run.
    assert bench_train.public_figure("mlm,nsp", bench_train.parse_args(["--teacher-dtype", "bf16"])) == 9.7


@pytest.mark.framework
@pytest.mark.parametrize("flags", [
    ["--threads", "16"], ["--threads", "1"], ["--heads", "8"], ["--intermediate", "4096"], ["--vocab", "2000"],
    ["--teacher-dtype", "bf16"], ["--teacher-dtype", "fp16"], ["--hidden", "512"], ["--layers", "2"],
    ["--length", "64"], ["--batch", "8"], ["--device", "cuda"], ["--warmup", "0"], ["--steps", "10"],
])
def test_train_public_figure_not_beside_other_settings(flags: list[str]) -> None:
    """Any setting other than the public measurement's: no public figure and no ratio
    (the old gate looked at hidden size, layers, length, batch and device only)."""
    args = bench_train.parse_args(flags)
    assert bench_train.public_figure("tacl,mlm,nsp", args) is None, flags
    if "--teacher-dtype" not in flags:
        assert bench_train.public_figure("mlm,nsp", args) is None, flags


def error_line(err: str) -> str:
    """argparse's error line: the usage above it names every flag, so a flag found
    anywhere in ``err`` says nothing about why the arguments were refused."""
    last = err.strip().splitlines()[-1]
    assert ": error: " in last, err
    return last.split(": error: ", 1)[1]


@pytest.mark.framework
@pytest.mark.parametrize(("flags", "said"), [
    (["--warmup", "-1"], "argument --warmup: -1: must be at least 0"),  # the timed start stayed at perf_counter's origin
    (["--steps", "0"], "argument --steps: 0: must be at least 1"),  # ZeroDivisionError
    (["--steps", "-3"], "argument --steps: -3: must be at least 1"),
    (["--steps", "many"], "argument --steps: 'many': not a whole number"),
    (["--batch", "0"], "argument --batch: 0: must be at least 1"),
    (["--threads", "0"], "argument --threads: 0: must be at least 1"),
    (["--vocab", "1000"], "argument --vocab: 1000: must be at least 1001"),  # token ids are drawn from 1000 up
    (["--heads", "3"], "--hidden 256 is not a multiple of --heads 3"),
])
def test_train_refuses_bad_counts(flags: list[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        bench_train.parse_args(flags)
    assert exit_.value.code == 2
    assert error_line(capsys.readouterr().err) == said


# --------------------------------------------------------------------------- bench_data_prep


@pytest.mark.parametrize(("flags", "said"), [
    (["--target-mb", "0"], "argument --target-mb: 0: must be a finite number above 0"),  # was: InputError, no <page>
    (["--target-mb", "-5"], "argument --target-mb: -5: must be a finite number above 0"),
    (["--target-mb", "nan"], "argument --target-mb: nan: must be a finite number above 0"),  # was: int(nan)
    (["--target-mb", "inf"], "argument --target-mb: inf: must be a finite number above 0"),
    (["--unit-mb", "-1"], "argument --unit-mb: -1: must be a finite number >= 0"),  # was: the CLI's default, silently
    (["--unit-mb", "nan"], "argument --unit-mb: nan: must be a finite number >= 0"),
    (["--unit-mb", "inf"], "argument --unit-mb: inf: must be a finite number >= 0"),
    (["--runners", "dask", "--workers", "1"],  # was: the corpus alone, exit 0
     "--runners dask with --workers 1 builds nothing: the dask runner runs for 2 workers and more only"),
    (["--runners"], "--runners with no runner builds nothing: name a runner, or add --stages for the stage times alone"),
])
def test_data_prep_refuses_bad_arguments(flags: list[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Refused at parse time, before the test data is looked for and any corpus is
    built."""
    with pytest.raises(SystemExit) as exit_:
        bench_data_prep.main(flags)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert error_line(err) == said
    assert "TACL_TEST_DATA" not in err


def test_data_prep_sizes_and_builds() -> None:
    """``--unit-mb 0`` stays the CLI's default; the DaskRunner runs for 2 workers
    and more only, the DirectRunner for any."""
    assert bench_data_prep.megabytes(zero=True)("0") == 0.0
    assert bench_data_prep.megabytes(zero=False)("0.5") == 0.5
    assert bench_data_prep.planned_builds(["direct", "dask"], [1, 2]) == [("direct", 1), ("direct", 2), ("dask", 2)]
    assert bench_data_prep.planned_builds(["dask"], [1]) == []


def write_sample(path: Path, pages: int) -> None:
    """A small dump of ``pages`` articles, as the sample is."""
    body = "".join(f"  <page>\n    <title>Article {k}</title>\n    <ns>0</ns>\n    <id>{k + 1}</id>\n"
                   f"    <revision>\n      <id>{k + 100}</id>\n      <text>Text of article {k}. {'word ' * 50}"
                   "</text>\n    </revision>\n  </page>\n" for k in range(pages))
    xml = f'<mediawiki xml:lang="en">\n  <siteinfo>\n    <sitename>W</sitename>\n  </siteinfo>\n{body}</mediawiki>\n'
    path.write_bytes(bz2.compress(xml.encode()))


def test_data_prep_keep_reuses_only_a_corpus_of_the_same_settings(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """``--keep DIR``: a corpus of another ``--target-mb`` (or another sample) is
    rebuilt, not reused at the size it had; one of the same settings is reused; a
    target below one page still gets one page."""
    sample = tmp_path / "sample.xml.bz2"
    write_sample(sample, 5)
    monkeypatch.setattr(bench_data_prep, "SAMPLE", sample)
    directory = tmp_path / "keep" / "corpus-x1"
    small_dump, small = bench_data_prep.build_corpus(2_000, directory, "bench1x")
    big_dump, big = bench_data_prep.build_corpus(20_000, directory, "bench1x")
    assert big >= 20_000 > small
    assert big_dump.stat().st_size > 0
    stamp = big_dump.stat().st_mtime_ns
    assert bench_data_prep.build_corpus(20_000, directory, "bench1x") == (big_dump, big)  # reused
    assert big_dump.stat().st_mtime_ns == stamp
    assert b"<title>Article 5</title>" not in bz2.decompress(big_dump.read_bytes())
    write_sample(sample, 6)  # another sample: rebuilt from it
    bench_data_prep.build_corpus(20_000, directory, "bench1x")
    assert b"<title>Article 5</title>" in bz2.decompress(big_dump.read_bytes())
    _, one_page = bench_data_prep.build_corpus(1, tmp_path / "tiny", "bench1x")  # was: InputError, no <page>
    assert one_page > 0


# --------------------------------------------------------------------------- miniature_selfsim


@pytest.fixture()
def inputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, list[list[str]]]:
    """A stand-in dump and model, and ``run`` replaced by one that records each
    command and makes its ``--output`` (a dataset's manifest, a sentence list)."""
    dump = tmp_path / "dump.xml.bz2"
    dump.write_bytes(b"first dump")
    model = tmp_path / "model"
    model.mkdir()
    (model / "vocab.txt").write_text("[PAD]\n[UNK]\n")
    (model / "config.json").write_text("{}")
    monkeypatch.setattr(miniature_selfsim, "DUMP", dump)
    commands: list[list[str]] = []

    def run(cmd: list[str], **env: str) -> None:
        commands.append(cmd)
        output = Path(cmd[cmd.index("--output") + 1])
        if "data_prep.build" in cmd:
            output.mkdir(parents=True, exist_ok=True)
            (output / "manifest.json").write_text("{}")
        else:
            output.write_text(f"sentences of {cmd}\n")

    monkeypatch.setattr(miniature_selfsim, "run", run)
    return model, commands


def test_miniature_rebuilds_data_made_with_other_settings(tmp_path: Path, inputs) -> None:
    """A rerun with another ``--sentences`` rebuilds the analysis sentences (it reused
    the old ones); another dump rebuilds everything made from it; the same settings
    reuse all."""
    model, commands = inputs
    work = tmp_path / "work"
    work.mkdir()
    miniature_selfsim.prepare_data(work, model, "python", miniature_selfsim.data_settings(model, 400))
    assert len(commands) == 4
    commands.clear()
    miniature_selfsim.prepare_data(work, model, "python", miniature_selfsim.data_settings(model, 400))
    assert commands == []
    miniature_selfsim.prepare_data(work, model, "python", miniature_selfsim.data_settings(model, 800))
    assert len(commands) == 1 and "data_prep.sentence_list" in commands[0]
    assert commands[0][commands[0].index("--count") + 1] == "800"
    commands.clear()
    miniature_selfsim.DUMP.write_bytes(b"another dump")
    miniature_selfsim.prepare_data(work, model, "python", miniature_selfsim.data_settings(model, 800))
    assert len(commands) == 4


def test_miniature_refuses_a_model_trained_with_other_settings(tmp_path: Path, inputs) -> None:
    """A model trained for 40 steps is not reused (and labelled) as one of 200 steps,
    nor one of another batch or dataset: refused, naming its folder; one of the same
    settings is reused; one not trained yet is trained."""
    model, _commands = inputs
    work = tmp_path / "work"
    data = miniature_selfsim.data_settings(model, 400)
    start = miniature_selfsim.model_settings(model)
    out = miniature_selfsim.run_dir(work, "TaCL")
    forty = miniature_selfsim.run_settings("TaCL", data["pairs"], start, 40, 16)
    assert miniature_selfsim.trained_problem(out, forty) is None  # nothing trained yet
    (out / "export").mkdir(parents=True)
    (out / "export" / "config.json").write_text("{}")
    unrecorded = miniature_selfsim.trained_problem(out, forty)
    assert unrecorded is not None and str(out) in unrecorded and "not recorded" in unrecorded
    miniature_selfsim.settings_file(out).write_text(json.dumps(forty))
    assert miniature_selfsim.trained_problem(out, forty) is None
    longer = miniature_selfsim.trained_problem(out, miniature_selfsim.run_settings("TaCL", data["pairs"], start, 200, 16))
    assert longer is not None and str(out) in longer and "steps: 40 -> 200" in longer
    bigger = miniature_selfsim.trained_problem(out, miniature_selfsim.run_settings("TaCL", data["pairs"], start, 40, 32))
    assert bigger is not None and "batch_size: 16 -> 32" in bigger
    other_data = miniature_selfsim.run_settings("TaCL", data["sentences"], start, 40, 16)
    assert "data: other inputs" in (miniature_selfsim.trained_problem(out, other_data) or "")


# --------------------------------------------------------------------------- bench_shard_gather


@pytest.mark.parametrize(("flags", "said"), [
    (["--parts", "0"], "argument --parts: 0: must be at least 1"),
    (["--shards", "x"], "argument --shards: 'x': not a whole number"),
    (["--shards", "4", "--measured-shards", "5"], "--measured-shards 5 is more than --shards 4"),
])
def test_shard_gather_refuses_bad_counts(flags: list[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        bench_shard_gather.parse_args(flags)
    assert exit_.value.code == 2
    assert error_line(capsys.readouterr().err) == said


def test_shard_gather_measures_both_formats_on_the_same_documents(capsys: pytest.CaptureFixture[str]) -> None:
    """A small run: both formats gather the same documents (it exits 1 otherwise) and
    the table has a row for each shard count of the dump."""
    assert bench_shard_gather.main(["--parts", "6", "--docs-per-part", "40", "--shards", "5",
                                    "--measured-shards", "2"]) == 0
    out = capsys.readouterr().out
    assert "6 parts of 40 documents over 5 shards written" in out
    per_shard = [line for line in out.splitlines() if line.startswith("ms per shard (")]
    assert len(per_shard) == 1 and "offsets" in per_shard[0] and "whole lists" in per_shard[0]
    rows = [line.split() for line in out.splitlines()[-2:]]
    assert [row[0] for row in rows] == ["310", "2048"] and all(float(row[1]) > 0 for row in rows)


# --------------------------------------------------------------------------- bench_text_split


@pytest.mark.parametrize(("flags", "said"), [
    (["--target-mb", "0"], "argument --target-mb: 0: must be above 0"),
    (["--unit-mb", "x"], "argument --unit-mb: 'x': not a number"),
    (["--workers", "0"], "argument --workers: 0: must be at least 1"),
])
def test_text_split_refuses_bad_sizes(flags: list[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        bench_text_split.parse_args(flags)
    assert exit_.value.code == 2
    assert error_line(capsys.readouterr().err) == said


@pytest.mark.real_data
def test_text_split_builds_both_ways_to_the_same_bytes(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A small run on the real sample: several units, both builds timed, their
    datasets byte-identical (it exits 1 otherwise)."""
    from conftest import REAL_ZH_TEXT, REAL_ZH_VOCAB

    monkeypatch.setattr(bench_text_split, "SAMPLE", REAL_ZH_TEXT)
    monkeypatch.setattr(bench_text_split, "VOCAB", REAL_ZH_VOCAB)
    assert bench_text_split.main(["--target-mb", "1", "--unit-mb", "0.2"]) == 0
    out = capsys.readouterr().out
    units = int(out.split("planning ")[1].split(" units")[0])
    assert units >= 4 and "datasets byte-identical" in out
