"""Every command refuses bad input the same way: one ``error:`` line naming what is
wrong, and exit status 2 (``tacl_scale.EXIT_ERROR``, argparse's for a usage error)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import Corpus

from tacl_scale import EXIT_ERROR


def _commands(tmp_path: Path) -> dict[str, tuple[Callable[[list[str]], int], list[str], str]]:
    from data_prep.build import main as build
    from data_prep.inspect import main as inspect
    from data_prep.multistream import main as multistream
    from data_prep.sentence_list import main as sentence_list
    from data_prep.train_vocab import main as train_vocab
    from tacl_scale.export import main as export

    missing = str(tmp_path / "missing.xml")
    return {
        "build": (build, ["--input", missing, "--tokenizer", missing, "--output", str(tmp_path / "new" / "out")], missing),
        "inspect": (inspect, [str(tmp_path)], "manifest.json"),
        "multistream": (multistream, [missing, str(tmp_path / "new" / "x-multistream.xml.bz2")], missing),
        "sentence_list": (sentence_list, ["--input", missing, "--output", str(tmp_path / "new" / "s.txt")], missing),
        "train_vocab": (train_vocab, ["--input", missing, "--output", str(tmp_path / "new" / "vocab.txt")], missing),
        "export": (export, [str(tmp_path), str(tmp_path / "new" / "export")], "run.json"),
    }


@pytest.mark.parametrize("name", ["build", "inspect", "multistream", "sentence_list", "train_vocab", "export"])
def test_a_refusal_is_one_error_line_and_exit_status_2(name: str, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    main, argv, named = _commands(tmp_path)[name]
    before = sorted(tmp_path.rglob("*"))
    assert main(argv) == EXIT_ERROR == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and named in errors[0], errors
    # nothing is left behind: the build left an empty OUTPUT.build.log and named it as its log, multistream
    # made the output's directory
    assert sorted(tmp_path.rglob("*")) == before
    assert "runner log" not in errors[0]


def test_a_build_refused_for_its_output_or_its_length_leaves_no_runner_log(
        made_en: Corpus, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A build refused before it starts (an output that holds someone's files, a
    --max-seq-len past the tokenizer's positions) left OUTPUT.build.log beside the
    output, with the shard count and Beam's import warnings, and named it."""
    from data_prep.build import main as build

    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine")
    for output, flags, said in ((taken, [], "exists, is not empty and is not a dataset (holds 'notes.txt')"),
                                (taken, ["--resume"], "exists, is not empty and is not a dataset"),  # nothing to resume
                                (tmp_path / "long", ["--max-seq-len", "1024"], "--max-seq-len 1024 is larger than "
                                                                                 "the 512 positions")):
        before = sorted(tmp_path.rglob("*"))
        assert build(["--input", str(made_en.dump), "--tokenizer", str(made_en.vocab), "--output", str(output),
                      *flags]) == 2
        errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
        assert len(errors) == 1 and said in errors[0] and "runner log" not in errors[0], errors
        assert sorted(tmp_path.rglob("*")) == before
    # An output a live build holds is said to be in use by it (not "already holds a dataset;
    # pass --overwrite", which would then be refused as in use).
    from tacl_scale.locking import DirectoryLock

    (taken / "manifest.json").write_text("{}")
    with DirectoryLock(taken, "data_prep.build"):
        assert build(["--input", str(made_en.dump), "--tokenizer", str(made_en.vocab), "--output", str(taken)]) == 2
    assert f"error: {taken}: in use by data_prep.build pid {os.getpid()}" in capsys.readouterr().err


@pytest.mark.parametrize(("flags", "said"), [
    (["--objectives", "foo"], "--objectives must be a non-empty subset of tacl,mlm,nsp,mirror, got foo"),
    (["--steps", "many"], "argument --steps: invalid int value: 'many'"),
    (["--no-such-flag"], "unrecognized arguments: --no-such-flag"),
    (["--data-weights", "1", "2"], "--data-weights has 2 values for 1 --data"),
])
def test_a_refused_train_command_line_is_one_line_said_by_rank_0_only(
        flags: list[str], said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every rank of a launch parses the same flags: argparse's usage block (35 lines
    for tacl-train), printed by each rank, buried the error."""
    from conftest import main_in_this_process

    argv = ["--recipe", "tiny-cpu", "--data", str(tmp_path / "data"), "--model", str(tmp_path / "bert.json"),
            "--output", str(tmp_path / "run"), *flags]
    code, stderr = main_in_this_process(argv, capsys)
    assert code == EXIT_ERROR
    assert stderr == f"error: {said} (deepspeed tacl_scale/train.py --help lists the options)\n"
    code, stderr = main_in_this_process(argv, capsys, launcher={"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2"})
    assert (code, stderr) == (EXIT_ERROR, "")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("rank", [0, 1])
def test_ranks_but_the_first_log_their_warnings_only_naming_their_rank(rank: int) -> None:
    """Every rank's INFO lines (the model it loaded, the checkpoint it resumed) said
    each thing once a rank: 8 times on a node of 8 GPUs."""
    code = ("import logging, warnings; logging.basicConfig(level=logging.INFO, format='%(levelname)s %(message)s')\n"
            "from transformers.utils import logging as transformers_logging\n"
            f"from tacl_scale.train import quiet_other_ranks, route_transformers_logs; quiet_other_ranks({rank})\n"
            "route_transformers_logs(transformers_logging)\n"
            "log = logging.getLogger('tacl_scale.x'); log.info('loaded'); log.warning('careful')\n"
            "warnings.warn('`torch.distributed.all_gather_into_tensor` is deprecated. Use ...', FutureWarning)\n"
            # transformers' own lines (a tied-weights warning) came out bare, without the rank
            "hf = transformers_logging.get_logger('transformers.modeling_utils'); hf.info('info'); hf.warning('tied')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    lines = [re.sub(r"^\S+ \S+ ", "", line) for line in done.stderr.splitlines()]  # the time
    assert lines == (["INFO loaded", "WARNING careful", "WARNING tied"] if rank == 0 else
                     ["WARNING rank 1 tacl_scale.x: careful", "WARNING rank 1 transformers.modeling_utils: tied"])


@pytest.mark.parametrize(("flags", "said"), [
    (["--num-shards", "0"], "--num-shards must be >= 1, got 0"),  # was taken for 1
    (["--short-seq-prob", "2"], "--short-seq-prob must be in [0, 1], got 2.0"),  # was accepted
    (["--unit-mb", "0"], "--unit-mb must be > 0"),  # was accepted
    (["--unit-mb", "-1"], "--unit-mb must be > 0 (a unit of at least one byte), got -1\n"),  # said -1048576 bytes
    (["--unit-mb", "inf"], "--unit-mb must be > 0 (a unit of at least one byte), got inf\n"),  # a traceback
    (["--unit-mb", "nan"], "--unit-mb must be > 0 (a unit of at least one byte), got nan\n"),
    (["--min-doc-chars", "-1"], "--min-doc-chars must be >= 0, got -1"),  # was accepted
    (["--validation-fraction", "1"], "--validation-fraction must be in [0, 1), got 1.0"),
    (["--masked-lm-prob", "0"], "--masked-lm-prob 0.0 must be in (0, 1)"),
    # built to its end, to fail at writing a manifest that no reader takes
    (["--max-seq-len", "64", "--max-predictions-per-seq", "100"],
     "--max-predictions-per-seq must be at most --max-seq-len 64 (an instance has no more tokens to mask), got 100"),
])
def test_build_refuses_a_number_out_of_range_naming_its_flag(flags: list[str], said: str,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from data_prep.build import parse_args

    with pytest.raises(SystemExit) as refused:
        parse_args(["--input", "in.xml", "--tokenizer", "vocab.txt", "--output", "out", *flags])
    assert refused.value.code == EXIT_ERROR and f"error: {said}" in capsys.readouterr().err


@pytest.mark.parametrize(("flags", "said"), [
    # each built a dataset without it: Beam dropped it with a warning in the runner log
    (["--num_shards", "4"], "--num_shards: neither an option of this command nor a Beam pipeline option "
                            "(did you mean --num-shards?)"),
    (["--random-next-prob", "0.3"], "--random-next-prob: neither an option of this command nor a Beam pipeline "
                                    "option"),
    (["--runner", "DirectRunner", "--direct_num_wokers", "2"], "--direct_num_wokers: neither an option of this "
                                                              "command nor a Beam pipeline option (did you mean "
                                                              "--direct_num_workers?)"),
    (["stray.xml"], "'stray.xml': an argument that follows no option taking it"),
])
def test_build_refuses_what_is_neither_its_option_nor_beams(flags: list[str], said: str,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    from data_prep.build import parse_args

    with pytest.raises(SystemExit) as refused:
        parse_args(["--input", "in.xml", "--tokenizer", "vocab.txt", "--output", "out", *flags])
    assert refused.value.code == EXIT_ERROR and f"error: {said}\n" in capsys.readouterr().err


@pytest.mark.parametrize(("paths", "said"), [
    (["--input", "gs://b/dump.xml.bz2", "--tokenizer", "v.txt", "--output", "out"], "--input gs://b/dump.xml.bz2"),
    (["--input", "in.xml", "--tokenizer", "hdfs://n/v.txt", "--output", "out"], "--tokenizer hdfs://n/v.txt"),
    (["--input", "in.xml", "--tokenizer", "v.txt", "--output", "gs://b/ds"], "--output gs://b/ds"),
])
def test_build_refuses_a_url_for_a_path(paths: list[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``--output gs://b/ds`` became the local folder ./gs:/b/ds, silently: the build
    reads and writes file paths every worker sees, not object stores."""
    from data_prep.build import parse_args

    with pytest.raises(SystemExit) as refused:
        parse_args(paths)
    assert refused.value.code == EXIT_ERROR
    assert f"error: {said}: a URL; the build reads and writes file paths" in capsys.readouterr().err


def test_a_build_stopped_while_it_waits_cancels_the_runners_job() -> None:
    """Ctrl-C or SIGTERM on the driver left a Flink or Spark job running, writing into
    an output whose lock the build then released; a runner that cannot cancel is fine."""
    from data_prep.build import wait_or_cancel

    class Result:
        def __init__(self, cancels: bool) -> None:
            self.cancels, self.cancelled = cancels, False

        def wait_until_finish(self) -> None:
            raise KeyboardInterrupt

        def cancel(self) -> None:
            if not self.cancels:
                raise NotImplementedError("cannot cancel")
            self.cancelled = True

    for cancels in (True, False):
        result = Result(cancels)
        with pytest.raises(KeyboardInterrupt):
            wait_or_cancel(result)
        assert result.cancelled == cancels
    finished = Result(True)
    finished.wait_until_finish = lambda: None
    wait_or_cancel(finished)
    assert not finished.cancelled


def test_build_gives_its_workers_the_tokenizers_absolute_path(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Every worker loads the tokenizer again, from its own working directory (a Dask
    worker's, an SDK harness's): a relative path named another file or none there."""
    from data_prep.build import parse_args

    monkeypatch.chdir(tmp_path)
    parsed = parse_args(["--input", "in.xml", "--tokenizer", "models/vocab.txt", "--output", "out"])
    assert parsed.config.tokenizer.path == str(tmp_path / "models" / "vocab.txt")


@pytest.mark.parametrize("beam", [
    ["--direct_num_workers", "2", "--direct_running_mode", "multi_processing"],
    ["--runner", "FlinkRunner", "--flink_master", "localhost:8081", "--parallelism", "4"],
    ["--runner=SparkRunner", "--spark_master_url=spark://h:7077"],
])
def test_build_passes_beams_own_options_to_the_runner(beam: list[str]) -> None:
    from data_prep.build import parse_args

    parsed = parse_args(["--input", "in.xml", "--tokenizer", "vocab.txt", "--output", "out", *beam])
    assert parsed.beam_args == beam


@pytest.mark.parametrize("runner", [["--runner", "DataflowRunner"], ["--runner=dataflow"]])
def test_build_refuses_dataflow_whose_workers_share_no_filesystem(runner: list[str],
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Its workers failed on the output's paths only once the job ran on them."""
    from data_prep.build import parse_args

    with pytest.raises(SystemExit) as refused:
        parse_args(["--input", "in.xml", "--tokenizer", "vocab.txt", "--output", "out", *runner, "--project", "p",
                    "--region", "r", "--temp_location", "gs://b/t"])
    assert refused.value.code == EXIT_ERROR and ": not supported: the build's workers read and write through" in (
        capsys.readouterr().err)


def test_build_passes_the_dask_runners_options_where_dask_is_installed() -> None:
    pytest.importorskip("dask.distributed", reason="the [dask] extra is not installed")
    from data_prep.build import parse_args

    beam = ["--runner", "DaskRunner", "--dask_client_address", "host:8786"]
    assert parse_args(["--input", "in.xml", "--tokenizer", "v.txt", "--output", "o", *beam]).beam_args == beam


def test_input_takes_the_files_an_unquoted_glob_expands_to(tmp_path: Path) -> None:
    """``--input data/*.bz2`` unquoted: the shell passes every file; the build read
    the first and Beam dropped the others (with a warning in the runner log), and
    train_vocab and sentence_list refused the second as an unrecognized argument."""
    from data_prep import sentence_list, train_vocab
    from data_prep.build import parse_args

    parsed = parse_args(["--input", "a.xml", "b.xml", "--tokenizer", "v.txt", "--output", "o", "--input", "c.xml"])
    assert parsed.config.input.patterns == ("a.xml", "b.xml", "c.xml") and parsed.beam_args == []

    first, second = tmp_path / "a.txt", tmp_path / "b.txt"
    first.write_text("".join(f"apples of kind {i} are red and sweet today.\n" for i in range(10)))
    second.write_text("".join(f"zebras of kind {i} are black and white today.\n" for i in range(10)))
    inputs = ["--input", str(first), str(second), "--format", "text"]
    vocab, sentences = tmp_path / "vocab.txt", tmp_path / "sentences.txt"
    assert train_vocab.main([*inputs, "--vocab-size", "200", "--output", str(vocab)]) == 0
    assert {"apples", "zebras"} <= set(vocab.read_text().split())
    assert sentence_list.main([*inputs, "--output", str(sentences)]) == 0
    assert len(sentences.read_text().splitlines()) == 20


def _writers(tmp_path: Path, output: Path) -> dict[str, tuple[Callable[[list[str]], int], list[str]]]:
    """The commands that write one output file, asked to write ``output`` from the
    stand-in corpus of tests/conftest.py."""
    from conftest import EN_DUMP

    from data_prep.multistream import main as multistream
    from data_prep.sample_corpus import main as sample_corpus
    from data_prep.sentence_list import main as sentence_list
    from data_prep.train_vocab import main as train_vocab

    dump = str(EN_DUMP)
    return {
        "sample_corpus": (sample_corpus, [str(output), "--articles", "2"]),
        "train_vocab": (train_vocab, ["--input", dump, "--output", str(output)]),
        "sentence_list": (sentence_list, ["--input", dump, "--count", "5", "--output", str(output)]),
        "multistream": (multistream, [dump, str(output)]),
    }


@pytest.mark.parametrize("name", ["sample_corpus", "train_vocab", "sentence_list", "multistream"])
def test_an_output_that_is_a_directory_or_under_a_file_is_one_error_line(name: str, tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "out-multistream.xml.bz2"  # a name multistream accepts
    folder.mkdir()
    main, argv = _writers(tmp_path, folder)[name]
    assert main(argv) == EXIT_ERROR
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
    assert errors == [f"error: {folder}: is a directory; name the file to write"]

    a_file = tmp_path / "file"
    a_file.write_text("kept", encoding="utf-8")
    main, argv = _writers(tmp_path, a_file / "x-multistream.xml.bz2")[name]
    assert main(argv) == EXIT_ERROR
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
    assert errors == [f"error: {a_file / 'x-multistream.xml.bz2'}: {a_file} is a file, not a directory"]
    assert a_file.read_text(encoding="utf-8") == "kept"


@pytest.mark.parametrize("name", ["sample_corpus", "train_vocab", "sentence_list", "multistream"])
def test_an_existing_output_file_is_replaced_only_with_overwrite(name: str, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """A mistyped output naming a user's dump or vocabulary must not cost them it."""
    out = tmp_path / "mine-multistream.xml.bz2"
    out.write_bytes(b"the user's own file")
    main, argv = _writers(tmp_path, out)[name]
    assert main(argv) == EXIT_ERROR
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
    assert errors == [f"error: {out}: already exists; pass --overwrite to replace it, or name another file"]
    assert out.read_bytes() == b"the user's own file"
    assert main([*argv, "--overwrite"]) == 0
    assert out.read_bytes() != b"the user's own file"


@pytest.mark.parametrize("name", ["train_vocab", "sentence_list"])
def test_an_output_the_input_glob_matches_is_refused(name: str, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """``--input 'corpus/*' --output corpus/vocab.txt`` worked once; the rerun read the
    vocabulary as a dump and failed with "not XML"."""
    from conftest import EN_DUMP

    from data_prep.sentence_list import main as sentence_list
    from data_prep.train_vocab import main as train_vocab

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "en.xml.bz2").write_bytes(EN_DUMP.read_bytes())
    main = {"train_vocab": train_vocab, "sentence_list": sentence_list}[name]
    extra = ["--count", "5"] if name == "sentence_list" else []
    out = corpus / "out.txt"
    for given in (str(corpus / "*"), str(corpus / "**" / "*")):
        assert main(["--input", given, "--output", str(out), *extra]) == EXIT_ERROR
        assert capsys.readouterr().err == (f"error: {out}: --input {given!r} matches it too, so a next run would read "
                                           "it as a corpus: write it outside the glob, or narrow the glob\n")
        assert not out.exists()
    assert main(["--input", str(corpus / "*.xml.bz2"), "--output", str(out), *extra]) == 0


@pytest.mark.parametrize("name", ["sample_corpus", "train_vocab", "sentence_list", "multistream"])
def test_ctrl_c_is_one_line_and_exit_status_130_leaving_the_old_output(name: str, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """It was a KeyboardInterrupt traceback. The signal is real: sent to this
    process while the command reads its input."""
    import signal
    import time

    import data_prep.multistream
    import data_prep.sample_corpus
    from data_prep import inputs, sources

    out = tmp_path / "out-multistream.xml.bz2"
    out.write_bytes(b"the old output")

    def ctrl_c(*args: object, **kwargs: object) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)  # the handler raises first
        raise AssertionError("Ctrl-C did not interrupt")

    for module, function in ((inputs, "open_decompressed"), (sources, "open_decompressed"),
                             (data_prep.multistream, "open_decompressed"),
                             (data_prep.sample_corpus, "build_pages")):
        monkeypatch.setattr(module, function, ctrl_c)
    main, argv = _writers(tmp_path, out)[name]
    assert main([*argv, "--overwrite"]) == 130
    err = capsys.readouterr().err
    assert err.endswith("interrupted\n") and "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name] and out.read_bytes() == b"the old output"


def test_a_multistream_refuses_to_replace_an_index_already_beside_its_target(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from conftest import EN_DUMP

    from data_prep.multistream import main as multistream

    index = tmp_path / "x-multistream-index.txt.bz2"
    index.write_bytes(b"an index of another dump")
    target = tmp_path / "x-multistream.xml.bz2"
    assert multistream([str(EN_DUMP), str(target)]) == EXIT_ERROR
    assert capsys.readouterr().err == (f"error: {index}: already exists; pass --overwrite to replace it, "
                                       "or name another file\n")
    assert not target.exists() and index.read_bytes() == b"an index of another dump"
    assert multistream([str(EN_DUMP), str(tmp_path / "x.xml.bz2")]) == EXIT_ERROR
    assert "x.xml.bz2: the name must end in -multistream.xml.bz2" in capsys.readouterr().err


@pytest.mark.parametrize("under", [True, False], ids=["under-a-file", "a-file"])
def test_a_directory_output_that_is_or_is_under_a_file_is_one_error_line(under: bool, tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """The build said "cannot use it as the output directory: File exists" (or "Not a
    directory", after planning its work and writing a runner log beside the file);
    export and analysis "[Errno 20] Not a directory"."""
    from conftest import EN_DUMP, EN_VOCAB

    from data_prep.build import main as build
    from tacl_scale.analysis import main as analysis
    from tacl_scale.export import main as export

    a_file = tmp_path / "file"
    a_file.write_text("kept", encoding="utf-8")
    out = a_file / "out" if under else a_file
    sentences = tmp_path / "sentences.txt"
    sentences.write_text("a sentence\nand another\n", encoding="utf-8")
    commands = {
        "build": (build, ["--input", str(EN_DUMP), "--tokenizer", str(EN_VOCAB), "--output", str(out)],
                  "a dataset directory"),
        "export": (export, [str(tmp_path), str(out)], "a directory for the export"),
        "analysis": (analysis, ["selfsim", "--model", str(tmp_path), "--sentences", str(sentences), "--out", str(out)],
                     "a directory for the report (--out)"),
    }
    for name, (main, argv, role) in commands.items():
        assert main(argv) == EXIT_ERROR, name
        errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
        said = f"{a_file} is a file, not a directory" if under else f"is a file, not {role}"
        assert errors == [f"error: {out}: {said}"], (name, errors)
    assert sorted(tmp_path.iterdir()) == [a_file, sentences] and a_file.read_text(encoding="utf-8") == "kept"


@pytest.mark.parametrize("name", ["export", "analysis", "multistream"])
def test_an_os_error_is_the_file_and_its_cause_not_pythons_errno_line(
        name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A full disk under export said "[Errno 28] No space left on device: '...'"."""
    import errno

    from data_prep import multistream
    from tacl_scale import analysis, export

    shard = str(tmp_path / "out" / "model.safetensors")

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), shard)

    sentences = tmp_path / "s.txt"
    sentences.write_text("a sentence\nand another\n", encoding="utf-8")
    module, function, argv = {
        "export": (export, "export_checkpoint", [str(tmp_path), str(tmp_path / "out")]),
        "analysis": (analysis, "selfsim", ["selfsim", "--model", "m", "--sentences", str(sentences),
                                           "--out", str(tmp_path / "out")]),
        "multistream": (multistream, "write_multistream", [str(sentences), str(tmp_path / "x-multistream.xml.bz2")]),
    }[name]
    monkeypatch.setattr(module, function, full)
    assert module.main(argv) == EXIT_ERROR
    assert capsys.readouterr().err == f"error: {shard}: No space left on device (the disk is full)\n"


def test_a_multistream_of_a_truncated_dump_keeps_the_files_already_there(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    import bz2

    from conftest import EN_DUMP

    from data_prep.multistream import main as multistream

    target = tmp_path / "x-multistream.xml.bz2"
    assert multistream([str(EN_DUMP), str(target), "--pages-per-stream", "10"]) == 0
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert multistream([str(EN_DUMP), str(target), "--pages-per-stream", "0", "--overwrite"]) == EXIT_ERROR
    assert "--pages-per-stream must be at least 1, not 0" in capsys.readouterr().err
    cut = tmp_path / "cut.xml.bz2"
    xml = bz2.decompress(EN_DUMP.read_bytes())
    cut.write_bytes(bz2.compress(xml[: xml.index(b"</page>", len(xml) // 2)]))
    assert multistream([str(cut), str(target), "--overwrite"]) == EXIT_ERROR
    assert "truncated" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p != cut} == before  # no temporary file left


def test_a_multistream_whose_index_cannot_be_renamed_leaves_no_old_index_beside_the_new_dump(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The new dump beside the old index: a build read it at the old offsets."""
    import errno

    from conftest import EN_DUMP

    from data_prep import multistream
    from data_prep.inputs import find_index

    target = tmp_path / "x-multistream.xml.bz2"
    assert multistream.main([str(EN_DUMP), str(target), "--pages-per-stream", "10"]) == 0
    index = Path(find_index(str(target)))
    replace = os.replace

    def the_index_fails(src: str | os.PathLike, dst: str | os.PathLike) -> None:
        if Path(dst) == index:
            raise OSError(errno.EIO, os.strerror(errno.EIO), str(dst))
        replace(src, dst)

    monkeypatch.setattr(os, "replace", the_index_fails)
    assert multistream.main([str(EN_DUMP), str(target), "--pages-per-stream", "3", "--overwrite"]) == EXIT_ERROR
    assert str(index) in capsys.readouterr().err
    assert find_index(str(target)) is None and sorted(p.name for p in tmp_path.iterdir()) == [target.name]


def test_inspect_refuses_instances_the_dataset_does_not_hold(zh_dataset: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    from data_prep.inspect import main as inspect
    from tacl_scale.data import PretrainDataset

    size = len(PretrainDataset(zh_dataset))
    assert inspect([str(zh_dataset), "-n", "1", "--start", str(size - 1)]) == 0
    assert f"#{size - 1} " in capsys.readouterr().out
    assert inspect([str(zh_dataset), "-n", "1", "--start", str(size)]) == EXIT_ERROR
    assert capsys.readouterr().err == (f"error: {zh_dataset}: --start {size} is past its last instance, {size - 1} "
                                       f"(it holds {size:,})\n")
    for flag in ("-n", "--start"):
        with pytest.raises(SystemExit):
            inspect([str(zh_dataset), flag, "-5"])
        assert "count instances from 0" in capsys.readouterr().err


def test_inspect_says_when_its_tokenizer_is_not_the_datasets(zh_dataset: Path, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """--tokenizer with other ids decoded every instance into other words without a
    word; the same vocabulary under another name is not remarked on."""
    from conftest import EN_VOCAB, ZH_VOCAB

    from data_prep.inspect import main as inspect

    assert inspect([str(zh_dataset), "-n", "1", "--tokenizer", str(EN_VOCAB)]) == 0
    notes = [line for line in capsys.readouterr().out.splitlines() if line.startswith("(note: ")]
    assert len(notes) == 1 and f"{EN_VOCAB} is not the tokenizer the dataset was built with" in notes[0], notes
    assert re.search(r"'[^']+' is \d+ in the dataset and \d+ in ", notes[0]), notes[0]  # a token and its two ids
    renamed = tmp_path / "renamed.txt"
    renamed.write_bytes(ZH_VOCAB.read_bytes())
    assert inspect([str(zh_dataset), "-n", "1", "--tokenizer", str(renamed)]) == 0
    assert "(note: " not in capsys.readouterr().out


def test_inspect_with_a_tokenizer_beside_a_damaged_copy_of_the_datasets_says_so(
        zh_dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The dataset's own tokenizer copy in Latin-1: comparing it with --tokenizer was
    the VocabularyError's traceback; the instances are still decoded with --tokenizer."""
    import shutil

    from conftest import ZH_VOCAB

    from data_prep.inspect import main as inspect
    from tacl_scale.data import Manifest

    dataset = tmp_path / "dataset"
    shutil.copytree(zh_dataset, dataset)
    own = Manifest.load(dataset).tokenizer.location(dataset)
    with open(own, "ab") as f:
        f.write(b"caf\xe9\n")
    assert inspect([str(dataset), "-n", "1", "--tokenizer", str(ZH_VOCAB)]) == 0
    notes = [line for line in capsys.readouterr().out.splitlines() if line.startswith("(note: ")]
    assert notes == [f"(note: {ZH_VOCAB} could not be compared with the dataset's tokenizer: {own}: not a tokenizer "
                     f"file (line {len(ZH_VOCAB.read_bytes().splitlines()) + 1} is not UTF-8 text: byte 0xe9); the "
                     "tokens below are decoded with it all the same)"], notes


def test_inspect_names_a_damaged_instance_in_one_line(zh_dataset: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Masked positions past their instance (a shard damaged, not verified): the
    reader's DatasetError named the file and instance at the end of a traceback."""
    import shutil

    from data_prep.inspect import main as inspect

    dataset = tmp_path / "dataset"
    shutil.copytree(zh_dataset, dataset)
    positions = dataset / "shard-00000.masked_positions.bin"
    positions.write_bytes(b"\x60\xea" * (positions.stat().st_size // 2))
    assert inspect([str(dataset), "-n", "1"]) == EXIT_ERROR
    err = capsys.readouterr().err
    assert re.fullmatch(rf"error: {re.escape(str(positions))}, instance 0: masked position 60000 is past the sequence "
                        r"of \d+ tokens: the shard is corrupt \(.*\)\n", err), err


def test_every_console_script_is_a_command_with_help_and_in_the_readme(capsys: pytest.CaptureFixture[str]) -> None:
    """pyproject's console scripts name real ``main(argv)`` functions that answer
    ``--help``, and the README's table of commands lists each one."""
    import importlib

    from conftest import pyproject

    root = Path(__file__).resolve().parents[1]
    scripts = pyproject()["project"]["scripts"]
    readme = (root / "README.md").read_text(encoding="utf-8")
    assert {"tacl-build-dataset", "tacl-train", "tacl-export", "tacl-analyze"} <= scripts.keys()
    for name, target in scripts.items():
        module, function = target.split(":")
        main = getattr(importlib.import_module(module), function)
        with pytest.raises(SystemExit) as exit_:
            main(["--help"])
        assert exit_.value.code == 0, name
        assert "usage:" in capsys.readouterr().out, name
        assert f"`{name}`" in readme, name


@pytest.mark.parametrize("given", [None, "true"])
def test_the_build_turns_off_tokenizers_threads_unless_the_user_chose(given: str | None, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Its runner's workers are a process per core, which inherit the build's
    environment: Hugging Face tokenizers' thread per core in each would oversubscribe
    them. A value the user set stays."""
    from data_prep.build import main as build

    if given is None:
        monkeypatch.delenv("TOKENIZERS_PARALLELISM", raising=False)
    else:
        monkeypatch.setenv("TOKENIZERS_PARALLELISM", given)
    build(_commands(tmp_path)["build"][1])  # refused (missing input) after the environment is set
    assert os.environ["TOKENIZERS_PARALLELISM"] == (given or "false")


def test_main_in_this_process_puts_transformers_logging_back(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """train.main routes transformers' lines through the root logger; the helper that
    runs it inside the test process must undo that, as it undoes the rest, or every
    later test in the process logs transformers' lines otherwise."""
    from conftest import main_in_this_process
    from transformers.utils import logging as transformers_logging

    library = transformers_logging.get_logger("transformers")
    before = (list(library.handlers), library.propagate)
    code, stderr = main_in_this_process(["--recipe", "tiny-cpu", "--data", str(tmp_path / "none"), "--model",
                                         str(tmp_path / "bert.json"), "--output", str(tmp_path / "run")], capsys)
    assert code == EXIT_ERROR and "none" in stderr, stderr  # refused after main() took its logging in hand
    assert (list(library.handlers), library.propagate) == before
