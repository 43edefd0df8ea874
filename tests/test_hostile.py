"""Hostile probes, as a table: each case damages or races something, and says
what a mature tool does then. The next hostile test starts from this file.

| case | expected outcome |
|---|---|
| a build whose second input is corrupt | fails in one line naming the file; its completed work units stay in `_tmp/`, no shard file or tokenizer copy is left in the output |
| `--resume` after the vocabulary was changed in place | refused in one line: the tokenizer changed, start over |
| `--resume` after an input was regenerated (new size or mtime) | refused in one line naming the input |
| a second build into an output that a build holds | refused at once, naming the holder's pid |
| training on (or inspecting) a dataset whose build is still running | one line naming the build's pid, host and start: in use by it, readable once it has finished (tests/test_manifest.py) |
| a build that makes no instance | fails in one line; no empty shard files are left, nor the output directory it made |
| a 1 MB "sentence" (no sentence punctuation, a huge table line) | split into consecutive pieces that each fit an instance, none of its tokens lost, counted as `long_sentences_split` in the manifest and the summary; the same bytes on 1 or 2 worker processes |
| `--validation-fraction 0.1` on an input too small to hold any document out | the build warns (log, manifest `warnings`, summary), naming the fraction, the number of documents and the fix (tests/test_validation_split.py) |
| an `--output` that the command's own `--input` glob matches (`'data/**/*'` with `data/ds`; `'corpus/*'` with `corpus/vocab.txt`) | refused before anything runs: the rerun read its own output as a dump (here; tests/test_cli.py) |
| Ctrl-C or an error between the two renames that swap a new dataset or export into place | held back until both are done and the old copy is removed; a failed second rename puts the old one back (here; tests/test_export.py) |
| SIGKILL between the two renames of a build's swap (no dataset in place, the old one hidden) | the next build of that output finishes the swap (or puts the old one back), keeping the user's files; with `--resume` and the same settings it has nothing left to do |
| `--resume` of a build that had finished (a requeued job) | nothing to do, exit 0; refused naming the setting when the dataset was built otherwise |
| `--overwrite` with a corrupt input among good ones | fails; the old dataset is whole and readable; a good `--overwrite` then replaces it, keeping the user's own files |
| Ctrl-C in export, analysis, inspect or a data command that writes one file | "interrupted", exit status 130, the old output as it was (tests/test_cli.py) |
| SIGTERM during a build (a Slurm time limit, scancel) | one line, "SIGTERM: the build stopped; rerun ... with --resume", exit status 143, no traceback; the resume finishes it (it said only the shell's "Terminated") |
| Ctrl-C during a build (to its process group, as a terminal sends it; also while Beam defines a dataclass by `exec`) | one line, "interrupted; rerun ... with --resume", exit status 130 (not death by SIGINT), no traceback |
| a lost, empty or stale `checkpoints/latest` | `--resume` takes the newest checkpoint that verifies (tests/test_checkpoint.py) |
| a checkpoint saved below newer ones | rotation keeps it (tests/test_checkpoint.py) |
| a bit flipped in a checkpoint, then export | refused in one line; a run directory exports its older checkpoint and says so (tests/test_trainer.py) |
| the disk fills while a worker writes its part | fails in one line naming the part and "the disk is full"; the completed work units stay; `--resume` once there is space finishes a dataset byte-identical to an uninterrupted build |
| a worker process cannot write (2 worker processes) | the build ends promptly, one line naming the file and the cause, no traceback |
| the runner log's disk is full (2 worker processes) | the build finishes; the console says once that the log's lines are dropped, and the last line calls the log incomplete |
| a checkpoint with no `files.json` (an old version's) that is truncated or corrupt | `--resume` falls back to the older verified one, naming the file (tests/test_checkpoint.py) |
| `--lr=-1e-3`, `--save-every 0`, `--steps -5`, `--warmup-ratio -1` | refused when parsed, one line (tests/test_trainer.py) |
| a batch that does not divide, `--output` naming a file | refused before anything is written (tests/test_trainer.py) |
| a model whose tokenizer.json gives other ids | refused naming a token and its two ids (tests/test_trainer.py) |
| `--resume` with other data, objectives, model or optimizer settings | refused naming each change; `--allow-changes` continues and records them (tests/test_trainer.py) |
| a second job on a live run directory | refused at once, naming the holder (tests/test_trainer.py) |
| a job resumed after a kill | each step logged once (tests/test_trainer.py, tests/test_train.py) |
| an export while training rotates checkpoints (`--keep-last 1`) | the export holds its checkpoint; rotation keeps it for later (tests/test_export_rotation.py) |
| an export into the model the run started from, the run directory (or a place inside it but its `export/`), a dataset, another export or a file | refused in one line, nothing in it touched; an earlier export is replaced whole, no stale weight shard left (tests/test_train.py) |
| a data command's output that is a directory, under a file, or a file already there (without `--overwrite`); a multistream of a truncated dump | one line naming it; files already there stay as they were (tests/test_cli.py) |
| `tacl-inspect-dataset --start` past the last instance, or negative `-n`/`--start` | one line with the dataset's last index (it printed nothing, or counted from the end) (tests/test_cli.py) |
| a refused `tacl-train` flag under the launcher (every rank parses it) | one line from rank 0, none from the others (tests/test_cli.py); in the Slurm job, before it starts (tests/test_recipes.py) |
| `--model` that is not a loadable BERT: no config.json or weights, a run directory, truncated weights, another shape, a RoBERTa/DistilBERT directory | one line naming it; it used to re-initialise every weight and train on (tests/test_model.py) |
| `--model` a JSON file of something else (a DeepSpeed config, a manifest.json) or of another `model_type` | one line naming it; it trained BERT-base from random weights (tests/test_model.py) |
| `--model M/config.json` of a pretrained model (beside `model.safetensors`, `pytorch_model.bin` or a sharded index) | one line naming the folder to pass instead; it trained from random weights, said in an INFO line (tests/test_model.py, tests/test_hostile_training.py) |
| `--model` a pretrained folder without tokenizer files, on a dataset whose vocabulary has another size than its `vocab_size` (a 4000-token one against 30522) | one line naming both sizes and the fix; it trained and exported the 4000 lines beside `vocab_size 30522`. Of the same size: a warning, once, that the dataset's tokenizer is taken for the model's (tests/test_trainer.py, tests/test_hostile_training.py) |
| a dataset built with `--no-lowercase` for a model whose tokenizer lower-cases (or lower-cased for a model with a cased vocabulary; bert-base-chinese's `do_lower_case false` over its uncased vocabulary trains) | one line naming both settings and the rebuild that fixes it; it trained, and the export's tokenizer cut text otherwise than the data (tests/test_trainer.py, tests/test_vocab.py, tests/test_hostile_training.py) |
| a `--ds` config with a string where DeepSpeed wants an object or a scalar (`"timers": "off"`, `"steps_per_print": "auto"`) or a trainer number out of range (`"train_batch_size": -8`) | one line naming the file and the key, before anything is written (it was a TypeError at the first step, after `run.json`, or blamed on `--batch-size`) (tests/test_trainer.py) |
| a full disk at the end-of-run export, at `tacl-export`, or under `tacl-analyze --overwrite` | one line naming the folder, exit 2; the last checkpoint, the earlier export or the earlier report as they were (tests/test_train.py, tests/test_export.py, tests/test_analysis.py) |
| UTF-16/UTF-32 text or a binary file (NULs over a tenth of its first 4 KB) as a text input; an emptied `_tmp/build.json` or part marker on `--resume` | one line naming the file (the text was read as one mangled document; the resume a JSONDecodeError), nothing discarded (tests/test_sources.py, tests/test_workspace.py, tests/test_resume_build.py) |
| a manifest field of the wrong type (`skips: []`, `max_seq_len: Infinity`), an `.idx` entry outside its `.bin`, masked positions past their instance (not verified) | one line naming the file (and the instance), from inspect and training alike (tests/test_manifest.py, tests/test_indexed.py, tests/test_dataset.py, tests/test_cli.py) |
| `--recipe` run where its `--data` or `--model` is not | one line naming the path as the recipe's and the flag to give; no `runs/` left (tests/test_recipes.py) |
| `--output` that is (or is inside) a `--data` or `--model` directory, or holds a dataset or a model | refused before the lock file is written (tests/test_run_dir.py, tests/test_train.py) |
| `--resume` on a dataset rebuilt in place (another `--seed`) | refused naming it; `--allow-changes` continues and records its new fingerprint (tests/test_trainer.py) |
| `--resume --allow-changes` with another `--lr`, `--steps` or `--weight-decay` | in force from the first resumed update, not the checkpoint's (tests/test_trainer.py) |
| `--resume` from a checkpoint past `--steps`; one dataset twice as `--data`; `--tacl-impl triton` on the CPU | refused in one line before anything runs (tests/test_trainer.py) |
| `--num-shards 0`, `--short-seq-prob 2`, `--unit-mb 0`; `tacl-analyze --device tpu`, `--heatmap-layer` past the top | one line naming the flag (tests/test_cli.py, tests/test_analysis.py) |
| `--help` (or a mistyped flag) to a script in `scripts/` or a Slurm job | its usage, nothing installed, built or started (a mistyped flag: one line, exit 2); the training job made a run directory named `usage:` and launched (tests/test_test_script.py, tests/test_recipes.py) |
| `tacl-analyze` on one sentence, or on sentences of one token, or longer than the model's positions | refused in one line (the figures were nan); the cut sentences counted in the log (tests/test_analysis.py) |
| the rename of a new multistream index fails after its dump's | no old index is left beside the new dump (tests/test_cli.py) |
| a failed build | its message is ours alone, without the Beam step appended to it |
| `--output` a run folder that lost its `run.json` (saved checkpoints, `export/`, `metrics.jsonl` still there), with or without `--resume` | refused naming what it holds and to restore `run.json`, nothing touched; it was taken for an empty folder and its checkpoints and export replaced, or resumed with no settings check (tests/test_run_dir.py) |
| `--output` inside another run (`RUN/export/sub-run`, `RUN/checkpoints/x`, `RUN/sub`), an export or a dataset | refused before anything is written; the parent run's end-of-run export deleted it (tests/test_run_dir.py) |
| `--resume` after `--model`'s shape changed (`hidden_size` edited in its BertConfig JSON; another model with `--allow-changes`) | refused naming each setting, `hidden_size 64 in the run, 32 in --model`, before the checkpoint is loaded: it was 43 lines of size mismatches (tests/test_run_dir.py, tests/test_hostile_training.py) |
| a dataset (or a run) whose tokenizer copy an older version made without the `added_tokens.json` of a vocab.txt tokenizer, so its ids stop short of the data's | one line before anything is written (and from `--verify`), naming the copy, both id counts and the file to copy in; the export read the added tokens as [UNK] (tests/test_hostile_training.py, tests/test_run_dir.py) |
| a `--model` directory whose `tokenizer.json` is an HTML page, whose `vocab.txt` has a Latin-1 line, or whose `tokenizer_config.json` is no JSON object | one line naming the file, "not a tokenizer file (...)", before anything is written; it was the library's traceback (tests/test_vocab.py, tests/test_hostile_training.py) |
| a BertConfig (JSON or a directory's `config.json`) with `intermediate_size` -5, `hidden_size` 0, `num_hidden_layers` -1, `pad_token_id` past the vocabulary; `type_vocab_size` 1 on sentence pairs | one line naming the file and the key, before anything is written; it was a traceback (the pairs' IndexError after `run.json` was written) or, for -1 layers, a trained and exported model of none (tests/test_model.py, tests/test_vocab.py, tests/test_hostile_training.py) |
| corrupt shards, an edited tokenizer copy, signals, a full disk and Ctrl-C inside training | tests/test_hostile_training.py |
"""

from __future__ import annotations

import errno
import os
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import (
    EN_DUMP,
    EN_VOCAB,
    ROOT,
    ZH_TEXT,
    ZH_VOCAB,
    Corpus,
    ctrl_c_in_exec,
)

from data_prep.build import BuildError, parse_args, run_build
from tacl_scale.locking import DirectoryLock

pytestmark = pytest.mark.slow


def build(output: Path, *args: str, resume: bool = False) -> Path:
    command = parse_args(["--output", str(output), "--quiet", *args])
    return run_build(command.config, command.beam_args, resume)


def zh_args(vocab: Path, *inputs: Path) -> list[str]:
    args = [item for path in inputs for item in ("--input", str(path))]
    return [*args, "--format", "text", "--language", "zh", "--tokenizer", str(vocab), "--min-doc-chars", "10",
            "--dupe-factor", "1", "--max-seq-len", "64"]


@pytest.fixture
def failed_build(tmp_path: Path) -> tuple[Path, list[str], Path, Path]:
    """A build of a good dump and one cut short, failed: (output, args, vocab, good dump)."""
    vocab, good, cut = tmp_path / "vocab.txt", tmp_path / "a-good.xml.bz2", tmp_path / "z-cut.xml.bz2"
    vocab.write_bytes(EN_VOCAB.read_bytes())
    good.write_bytes(EN_DUMP.read_bytes())
    cut.write_bytes(EN_DUMP.read_bytes()[: EN_DUMP.stat().st_size // 2])
    out = tmp_path / "ds"
    args = ["--input", str(good), "--input", str(cut), "--tokenizer", str(vocab), "--dupe-factor", "1",
            "--max-seq-len", "64"]
    with pytest.raises(BuildError, match="z-cut.xml.bz2: corrupt or truncated"):
        build(out, *args)
    return out, args, vocab, good


def test_a_failed_builds_message_is_ours_without_the_beam_step_appended(tmp_path: Path) -> None:
    """Beam appended "[while running 'PrepareDocuments']" to the message, between
    the problem and what to do about it."""
    plain = tmp_path / "plain.txt"
    plain.write_text("A document about rivers. It has sentences.\n" * 20)
    with pytest.raises(BuildError) as failed:
        build(tmp_path / "ds", "--input", str(plain), "--tokenizer", str(EN_VOCAB), "--max-seq-len", "64")
    assert str(failed.value) == (
        f"build failed, no dataset written: {plain}: not XML (syntax error: line 1, column 0); --format wiki-xml "
        "reads MediaWiki dumps: plain text is --format text or lines, WikiExtractor's output --format "
        "wikiextractor-json (no work unit had completed: once the cause is fixed, rerun the same command)")


def test_a_failed_build_keeps_its_completed_units_and_leaves_no_dataset_files(failed_build) -> None:
    out, _, _, _ = failed_build
    assert (out / "_tmp").is_dir() and list((out / "_tmp").glob("part-*.done.json"))
    assert sorted(p.name for p in out.iterdir()) == ["_tmp"]  # the lock too is gone with its holder


def test_a_build_that_completed_no_unit_does_not_say_resume(tmp_path: Path) -> None:
    cut = tmp_path / "cut.xml.bz2"
    cut.write_bytes(EN_DUMP.read_bytes()[: EN_DUMP.stat().st_size // 2])
    with pytest.raises(BuildError) as failed:
        build(tmp_path / "ds", "--input", str(cut), "--tokenizer", str(EN_VOCAB), "--max-seq-len", "64")
    assert str(failed.value).endswith("(no work unit had completed: once the cause is fixed, rerun the same command)")
    assert not (tmp_path / "ds").exists()  # nothing to resume: the directory the build made went with it


def three_inputs(corpus: Corpus, directory: Path) -> list[str]:
    """The corpus's dump under three names: three work units."""
    directory.mkdir()
    args = []
    for name in ("a", "b", "c"):
        shutil.copy(corpus.dump, directory / f"{name}.xml.bz2")
        args += ["--input", str(directory / f"{name}.xml.bz2")]
    return [*args, "--tokenizer", str(corpus.vocab), "--num-shards", "2", "--dupe-factor", "1",
            "--max-seq-len", "64"]


def dataset_files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in directory.glob("shard-*")}


def test_a_full_disk_keeps_the_completed_units_and_resume_finishes_the_same_dataset(
        made_en: Corpus, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from data_prep.spill import SpillWriter

    args = three_inputs(made_en, tmp_path / "in")
    # The writers themselves, kept alive: a set of id()s missed the third writer whenever
    # it reused the address of a freed one (the test then failed now and then).
    add, writers = SpillWriter.add, []

    def add_until_the_disk_fills(self, shard, document):  # the third unit's part finds the disk full
        if not any(writer is self for writer in writers):
            writers.append(self)
        if len(writers) == 3:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # a write to an open file names none
        return add(self, shard, document)

    monkeypatch.setattr(SpillWriter, "add", add_until_the_disk_fills)
    out = tmp_path / "ds"
    with pytest.raises(BuildError, match=r"ds/_tmp/part-[0-9a-f]+: No space left on device \(the disk is full\)"
                                         r".*\(2 of its 3 work unit\(s\) completed and are kept: once the cause is "
                                         r"fixed, rerun the same command with --resume\)$"):
        build(out, *args)
    assert len(list((out / "_tmp").glob("part-*.done.json"))) == 2
    assert sorted(p.name for p in out.iterdir()) == ["_tmp"]
    monkeypatch.setattr(SpillWriter, "add", add)
    build(out, *args, resume=True)
    assert dataset_files(out) == dataset_files(build(tmp_path / "whole", *args).parent)


def run_cli(args: list[str], limit_file_bytes: int | None = None) -> subprocess.CompletedProcess[str]:
    """``data_prep.build`` on 2 worker processes; ``limit_file_bytes``: no process of
    it can write a file past that size (EFBIG, as a disk that refuses writes)."""

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # inherited: a write past the limit fails instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_file_bytes, limit_file_bytes))

    cmd = [sys.executable, "-m", "data_prep.build", *args, "--direct_num_workers", "2",
           "--direct_running_mode", "multi_processing"]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=240,
                          preexec_fn=limit if limit_file_bytes else None)


def test_a_worker_process_that_cannot_write_ends_the_build_in_one_line(made_en: Corpus, tmp_path: Path) -> None:
    out = tmp_path / "ds"
    res = run_cli([*three_inputs(made_en, tmp_path / "in"), "--output", str(out), "--quiet"],
                  limit_file_bytes=20_000)
    assert res.returncode == 2, res.stderr[-3000:]
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in res.stderr, res.stderr[-3000:]
    assert re.match(rf"error: build failed, no dataset written: {re.escape(str(out))}/_tmp/part-[0-9a-f]+: File too "
                    r"large \(no work unit had completed", errors[0]), errors[0]
    assert not list(out.glob("shard-*"))


def test_a_full_disk_under_the_runner_log_does_not_stop_the_build(made_en: Corpus, tmp_path: Path) -> None:
    out = tmp_path / "ds"
    (tmp_path / "ds.build.log").symlink_to("/dev/full")  # every write: ENOSPC
    res = run_cli([*three_inputs(made_en, tmp_path / "in"), "--output", str(out)])
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stderr.count("cannot write the runner log") == 1
    assert "the disk is full" in res.stderr
    assert "runner log:" in res.stdout and "(incomplete: No space left on device" in res.stdout
    assert (out / "manifest.json").is_file()


def test_resume_refuses_a_vocabulary_changed_in_place(failed_build) -> None:
    out, args, vocab, _ = failed_build
    lines = vocab.read_text(encoding="utf-8").splitlines()
    vocab.write_text("\n".join([lines[1], lines[0], *lines[2:]]) + "\n", encoding="utf-8")
    with pytest.raises(BuildError, match="--resume: the tokenizer's file changed since the interrupted build"):
        build(out, *args, resume=True)


def test_resume_refuses_a_regenerated_input(failed_build) -> None:
    out, args, _, good = failed_build
    os.utime(good, ns=(good.stat().st_atime_ns, good.stat().st_mtime_ns + 10**9))  # rewritten, same size
    with pytest.raises(BuildError, match="--resume: .*a-good.xml.bz2 changed since the interrupted build"):
        build(out, *args, resume=True)


def test_a_second_build_into_a_held_output_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    with DirectoryLock(out, "data_prep.build"), pytest.raises(BuildError, match=rf"ds: in use by data_prep\.build pid {os.getpid()}\b"):
        build(out, *zh_args(ZH_VOCAB, ZH_TEXT))
    assert len(list(build(out, *zh_args(ZH_VOCAB, ZH_TEXT)).parent.glob("shard-*"))) > 0  # free again
    assert not (out / ".tacl-lock").exists()  # removed by its holder when done


def test_a_build_into_a_directory_its_input_glob_reads_is_refused(tmp_path: Path) -> None:
    """``--input 'data/**/*' --output data/ds`` built once; the rerun (--overwrite)
    read the dataset's own shard files as dumps and failed in the pipeline."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "en.xml.bz2").write_bytes(EN_DUMP.read_bytes())
    pattern = str(data / "**" / "*")
    with pytest.raises(BuildError) as refused:
        build(data / "ds", "--input", pattern, "--tokenizer", str(EN_VOCAB), "--overwrite")
    assert str(refused.value) == (f"{data / 'ds'}: --input {pattern!r} matches the files written in it too, so a "
                                  "next run would read them as a corpus: write it outside the glob, or narrow the glob")
    assert sorted(p.name for p in data.iterdir()) == ["en.xml.bz2"]


def test_a_build_that_makes_no_instance_leaves_no_empty_shards(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    with pytest.raises(BuildError, match="no instance was built") as failed:
        build(out, *zh_args(ZH_VOCAB, ZH_TEXT), "--min-doc-chars", "100000000")
    assert str(failed.value).endswith("fit them?)")  # no word of work units or --resume: nothing is kept
    assert not out.exists()  # no empty shard file, nor the directory the build made for them


FIRST = "A table follows."  # the sentence before the long one


def long_sentence_inputs(directory: Path, vocab: Path) -> tuple[list[str], str]:
    """Two text files of ordinary documents, the second also holding one document
    whose second sentence is a 1 MB line without sentence punctuation; the line.
    Its words are whole words of ``vocab``, a token each."""
    entries = vocab.read_text(encoding="utf-8").splitlines()
    words = [w for w in entries if w.isascii() and w.isalpha() and w.islower() and len(w) > 2][:300]
    rng = random.Random(0)
    directory.mkdir()
    documents = [
        "\n".join(" ".join(rng.choice(words) for _ in range(rng.randint(8, 15))).capitalize() + "." for _ in range(6))
        for _ in range(40)
    ]
    line = " ".join(rng.choice(words) for _ in range(200_000))
    assert len(line) > 1_000_000
    (directory / "a.txt").write_text("\n\n".join(documents[:20]) + "\n", encoding="utf-8")
    (directory / "b.txt").write_text("\n\n".join([*documents[20:], f"{FIRST}\n{line}"]) + "\n",
                                     encoding="utf-8")
    return [str(directory / "a.txt"), str(directory / "b.txt")], line


def test_a_1mb_sentence_is_split_into_instances_not_cut_to_one(made_en: Corpus, tmp_path: Path) -> None:
    """Once, such a line made one instance of its first tokens and the rest was
    dropped, counted nowhere."""
    from data_prep.inspect import format_summary
    from data_prep.tokenization import TokenizerConfig, load_tokenizer
    from tacl_scale.data import PretrainDataset

    inputs, line = long_sentence_inputs(tmp_path / "in", made_en.vocab)
    first, tokens = (e.ids for e in load_tokenizer(TokenizerConfig(str(made_en.vocab))).encode([FIRST, line]))
    args = [*(item for path in inputs for item in ("--input", path)), "--format", "text", "--tokenizer",
            str(made_en.vocab), "--num-shards", "1", "--dupe-factor", "1", "--max-seq-len", "64"]
    out = build(tmp_path / "ds", *args).parent
    ds = PretrainDataset(out)
    assert ds.manifest.skips["long_sentences_split"] == 1
    assert "long_sentences_split 1" in format_summary(ds.manifest, str(out))
    # Pieces of 31 to 61 tokens (64 less [CLS] [SEP] [SEP]), two to a pair: its instances
    # hold nearly every token of the line, as A or as B that follows A.
    documents = ds.source_documents()
    kept = 0
    for i in np.flatnonzero(documents == np.bincount(documents).argmax()):
        item = ds[int(i)]
        a_end = int(np.flatnonzero(item["original_ids"] == ds.manifest.tokenizer.special_ids.sep)[0])
        kept += a_end - 1 if item["nsp_label"] else len(item["original_ids"]) - 3
        assert len(item["original_ids"]) <= 64
    assert 0.97 * len(tokens) < kept <= len(first) + len(tokens)
    # The same bytes on 2 worker processes (one work unit each), and the summary says it.
    res = run_cli([*args, "--output", str(tmp_path / "two")])
    assert res.returncode == 0, res.stderr[-3000:]
    assert "long_sentences_split 1" in res.stdout
    assert dataset_files(tmp_path / "two") == dataset_files(out)
    # Single-segment instances: the pieces, in order, are the line's tokens, every one.
    single = PretrainDataset(build(tmp_path / "single", *args, "--single-segment").parent)
    assert single.manifest.skips["long_sentences_split"] == 1
    documents = single.source_documents()
    pieces = [single[int(i)]["original_ids"] for i in np.flatnonzero(documents == np.bincount(documents).argmax())]
    assert max(len(p) for p in pieces) <= 64
    assert np.array_equal(pieces[0][1:-1], first)
    assert np.array_equal(np.concatenate([p[1:-1] for p in pieces[1:]]), tokens)


def assert_interrupted(returncode: int, stderr: str) -> None:
    """The build's answer to Ctrl-C: exit status 130 (not death by SIGINT, -2), one line, no traceback."""
    assert returncode == 130, (returncode, stderr[-2000:])
    said = [line for line in stderr.splitlines() if line.startswith(("error:", "interrupted"))]
    assert said == ["interrupted; rerun the same command with --resume to continue"], stderr[-2000:]
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr[-2000:]


def started_build(out: Path) -> tuple[list[str], subprocess.Popen[str]]:
    """A build of the made English dump into ``out`` (its command, and its process in
    a session of its own), once it has begun to write its work units."""
    cmd = [sys.executable, "-m", "data_prep.build", "--input", str(EN_DUMP), "--tokenizer", str(EN_VOCAB),
           "--output", str(out), "--dupe-factor", "1", "--max-seq-len", "64", "--quiet"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not list((out / "_tmp").glob("*")):
        time.sleep(0.05)
    return cmd, proc


def stopped_build(proc: subprocess.Popen[str], sig: signal.Signals) -> str:
    """``sig`` to the build's whole process group (as a terminal's Ctrl-C and Slurm's
    signals go), its stderr once it ended; a build still running after 120 s is killed
    with its group (the test fails on its status), not left behind."""
    os.killpg(proc.pid, sig)
    try:
        return proc.communicate(timeout=120)[1]
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        return proc.communicate()[1]


def test_ctrl_c_is_one_line_that_says_resume(tmp_path: Path) -> None:
    _, proc = started_build(tmp_path / "ds")
    stderr = stopped_build(proc, signal.SIGINT)
    assert_interrupted(proc.returncode, stderr)


def test_sigterm_ends_a_build_in_one_line_that_says_resume(tmp_path: Path) -> None:
    """A Slurm time limit or scancel (SIGTERM to the job's processes) ended the build
    with the shell's "Terminated" alone: nothing said that its completed work units
    stay for --resume. A resume then finishes the dataset."""
    out = tmp_path / "ds"
    cmd, proc = started_build(out)
    stderr = stopped_build(proc, signal.SIGTERM)
    assert proc.returncode == 143, (proc.returncode, stderr[-2000:])
    said = [line for line in stderr.splitlines() if line.startswith(("error:", "interrupted", "SIGTERM"))]
    assert said == ["SIGTERM: the build stopped; rerun the same command with --resume to continue"], stderr[-2000:]
    assert "Traceback" not in stderr, stderr[-2000:]
    resumed = subprocess.run([*cmd, "--resume"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert (out / "manifest.json").is_file()


def test_ctrl_c_inside_code_run_by_exec_still_exits_130(tmp_path: Path) -> None:
    """About one run in ten of the test above died of SIGINT (-2) that way."""
    res = ctrl_c_in_exec(tmp_path, "data_prep.build", "run_build", "--input", str(EN_DUMP), "--tokenizer",
                         str(EN_VOCAB), "--output", str(tmp_path / "ds"), "--quiet")
    assert_interrupted(res.returncode, res.stderr)


def test_overwrite_replaces_a_dataset_only_once_the_new_one_is_complete(tmp_path: Path) -> None:
    from tacl_scale.data import PretrainDataset

    out = tmp_path / "ds"
    build(out, *zh_args(ZH_VOCAB, ZH_TEXT))
    (out / "notes.txt").write_text("mine")
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file() and p.name != ".tacl-lock"}
    cut = tmp_path / "z-cut.xml.bz2"
    cut.write_bytes(EN_DUMP.read_bytes()[: EN_DUMP.stat().st_size // 2])
    with pytest.raises(BuildError, match="the old dataset is unchanged.*z-cut.xml.bz2"):
        build(out, "--input", str(EN_DUMP), "--input", str(cut), "--tokenizer", str(EN_VOCAB), "--overwrite")
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file() and p.name != ".tacl-lock"} == before
    assert len(PretrainDataset(out)) > 0
    build(out, "--input", str(EN_DUMP), "--tokenizer", str(EN_VOCAB), "--dupe-factor", "1", "--max-seq-len", "64",
          "--overwrite")
    replaced = PretrainDataset(out)
    assert replaced.manifest.language == "en" and replaced.manifest.build_config["output"]["directory"] == str(out)
    assert (out / "notes.txt").read_text() == "mine"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".ds.")]  # no staging or old copy left


def old_and_new_dataset(tmp_path: Path) -> tuple[Path, Path]:
    """Stand-ins for a dataset ``ds`` (with a file of the user's) and the one an
    ``--overwrite`` build finished beside it: (output, staging)."""
    output, staging = tmp_path / "ds", tmp_path / ".ds.overwrite"
    for directory, text in ((output, "old"), (staging, "new")):
        directory.mkdir()
        (directory / "manifest.json").write_text(text)
    (output / "notes.txt").write_text("mine")
    return output, staging


def test_swap_in_puts_the_old_dataset_back_when_the_new_one_cannot_take_its_place(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The old dataset was renamed aside, the new one's rename failed, and the
    output path held nothing, the user's files hidden in ``.ds.replaced-PID``."""
    from data_prep.replace import swap_in

    output, staging = old_and_new_dataset(tmp_path)
    rename = os.rename

    def the_second_fails(src: str | os.PathLike, dst: str | os.PathLike) -> None:
        if Path(src) == staging:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        rename(src, dst)

    monkeypatch.setattr(os, "rename", the_second_fails)
    with pytest.raises(OSError):
        swap_in(staging, output)
    assert (output / "manifest.json").read_text() == "old" and (output / "notes.txt").read_text() == "mine"
    monkeypatch.setattr(os, "rename", rename)
    swap_in(staging, output)
    assert (output / "manifest.json").read_text() == "new" and (output / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]


def test_a_ctrl_c_held_through_the_swap_leaves_no_old_copy_hidden(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The held Ctrl-C ended the build after the renames, before the old dataset set
    aside in ``.ds.replaced-PID`` was removed: a hidden copy as large as the dataset."""
    from data_prep.replace import swap_in

    output, staging = old_and_new_dataset(tmp_path)
    rename = os.rename

    def ctrl_c_during_the_first(src: str | os.PathLike, dst: str | os.PathLike) -> None:
        rename(src, dst)
        if Path(src) == output and Path(dst).name.startswith(".ds.replaced-"):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)

    monkeypatch.setattr(os, "rename", ctrl_c_during_the_first)
    with pytest.raises(KeyboardInterrupt):
        swap_in(staging, output)
    assert (output / "manifest.json").read_text() == "new" and (output / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]


def test_the_next_build_finishes_the_swap_of_a_build_killed_in_it(tmp_path: Path) -> None:
    """SIGKILL between the two renames left no dataset at ``ds``, the old one (and the
    user's files) hidden in ``.ds.replaced-PID`` and the new one in ``.ds.overwrite``;
    rerunning the command started a third dataset from scratch and hid both for good."""
    from tacl_scale.data import PretrainDataset

    out = tmp_path / "ds"
    build(out, *zh_args(ZH_VOCAB, ZH_TEXT))
    (out / "notes.txt").write_text("mine")
    args = ["--output", str(out), *zh_args(ZH_VOCAB, ZH_TEXT), "--seed", "7", "--overwrite"]
    killed_in_the_swap = f"""
import os, signal, sys
import data_prep.build as build
rename = os.rename
def rename_then_die(src, dst):
    rename(src, dst)
    if os.path.basename(dst).startswith(".ds.replaced-"):
        os.kill(os.getpid(), signal.SIGKILL)
os.rename = rename_then_die
sys.exit(build.main({args!r}))
"""
    res = subprocess.run([sys.executable, "-c", killed_in_the_swap], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == -signal.SIGKILL, res.stderr[-2000:]
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".ds."))

    # The same command again, with --resume: the new dataset put in place, nothing rebuilt.
    res = subprocess.run([sys.executable, "-m", "data_prep.build", *args, "--resume"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "put in place the dataset a build killed while replacing the old one had finished" in res.stderr
    assert "nothing to resume" in res.stderr and " work unit(s) -> " not in res.stderr
    assert PretrainDataset(out).manifest.seed == 7 and (out / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds", "ds.build.log"]  # the runner log, beside it


def test_recover_swap_puts_the_old_dataset_back_without_a_new_one_and_leaves_a_live_swap_alone(
        tmp_path: Path) -> None:
    from data_prep.replace import recover_swap

    output, old = tmp_path / "ds", tmp_path / ".ds.replaced-123"
    old.mkdir()
    (old / "manifest.json").write_text("old")
    (old / "notes.txt").write_text("mine")
    # What reads the dataset meanwhile says where it is and how to put it back.
    from tacl_scale.config import DataConfig, EngineConfig, TrainConfig
    from tacl_scale.data.manifest import DatasetError, Manifest
    from tacl_scale.run_dir import missing_input

    with pytest.raises(DatasetError, match=rf"no such directory — .*set the dataset aside in {re.escape(str(old))}: "
                                           "rerun that build with --resume"):
        Manifest.load(output)
    said = missing_input(TrainConfig(model=str(tmp_path), output=str(tmp_path / "run"),
                                     engine=EngineConfig("inline.json"), data=DataConfig((str(output),))))
    assert said is not None and said.startswith(f"{output}: not found (--data) — ") and str(old) in said
    with DirectoryLock(old, "data_prep.build"):  # its build is between the renames now
        recover_swap(output)
        assert not output.exists() and (old / "manifest.json").is_file()
    recover_swap(output)  # no new dataset finished: the old one goes back
    assert (output / "manifest.json").read_text() == "old" and (output / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]

    leftover = tmp_path / ".ds.replaced-456"  # killed after the second rename: only the old copy is left
    leftover.mkdir()
    (leftover / "manifest.json").write_text("older")
    (leftover / "also-mine.txt").write_text("mine too")
    recover_swap(output)
    assert (output / "manifest.json").read_text() == "old" and (output / "also-mine.txt").read_text() == "mine too"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]


def test_resume_of_a_finished_build_is_nothing_to_do_unless_its_settings_differ(tmp_path: Path) -> None:
    """A requeued job (or a rerun after Ctrl-C in the last rename) with ``--resume``
    failed on the dataset it had finished."""
    from tacl_scale.data import PretrainDataset

    out, corpus = tmp_path / "ds", tmp_path / "zh.txt"
    shutil.copy(ZH_TEXT, corpus)
    manifest = build(out, *zh_args(ZH_VOCAB, corpus))
    before = {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert build(out, *zh_args(ZH_VOCAB, corpus), resume=True) == manifest
    assert {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    with pytest.raises(BuildError, match=r"built with seed 12345, this build's is 7.*nothing to resume.*--overwrite"):
        build(out, *zh_args(ZH_VOCAB, corpus), "--seed", "7", resume=True)
    with corpus.open("a", encoding="utf-8") as more:
        more.write("\n又一篇文章。\n")
    with pytest.raises(BuildError, match=f"{corpus}: its size changed since the dataset was built"):
        build(out, *zh_args(ZH_VOCAB, corpus), resume=True)
    assert {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    build(out, *zh_args(ZH_VOCAB, corpus), "--seed", "7", "--overwrite", resume=True)
    assert PretrainDataset(out).manifest.seed == 7


def test_ctrl_c_and_the_schedulers_signals_wait_for_the_end_of_an_uninterrupted_block() -> None:
    """What must happen together (the renames of a swap) happens together; the
    signal's handler then runs as it would have."""
    from tacl_scale.preemption import uninterrupted

    done = []
    with pytest.raises(KeyboardInterrupt), uninterrupted():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)  # a signal not held back would interrupt here
        done.append("both renames")
    assert done == ["both renames"]
    received = []
    previous = signal.signal(signal.SIGUSR1, lambda signum, frame: received.append(signum))
    try:
        with uninterrupted():
            os.kill(os.getpid(), signal.SIGUSR1)
            time.sleep(0.05)
            assert received == []
        assert received == [signal.SIGUSR1]
    finally:
        signal.signal(signal.SIGUSR1, previous)
