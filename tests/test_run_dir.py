"""The run directory's owner: its names, and run.json read through RunRecord.from_json
(every layout written so far, newer ones refused by name)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import ROOT, main_in_this_process

from tacl_scale.config import CheckpointConfig, DataConfig, EngineConfig, TrainConfig
from tacl_scale.resume_checks import check_student_config, data_changes, settings_changes
from tacl_scale.run_dir import (
    RUN_RECORD_VERSION,
    JobSegment,
    RunDir,
    RunRecord,
    RunRecordError,
    TokenizerSource,
    output_problem,
    record_job,
)

# run.json as the first training code wrote it (311c4f5: no version, device, student
# config or history), with its paths shortened.
VERSION_1 = {
    "config": {"model": "models/bert-base-uncased", "output": "/runs/a", "seed": 1234},
    "world_size": 8,
    "tokenizer_source": {"vocab_file": "/data/vocab.txt", "lowercase": True, "kind": "wordpiece"},
    "deepspeed_config": {"train_batch_size": 256},
}


def version_2() -> dict:
    """run.json as the code before RunRecord wrote it (version 2)."""
    return {
        "version": 2,
        "config": {"model": "/m/config.json", "output": "/runs/b", "seed": 7},
        "world_size": 2,
        "device": "cpu",
        "unpad": False,
        "fused_optimizer": False,
        "student_config": {"hidden_size": 32, "model_type": "bert"},
        "tokenizer_source": {"directory": "/m"},
        "deepspeed_config": {"train_batch_size": 8, "zero_optimization": {"stage": 2}},
        "history": [
            {"started_at_step": 0, "world_size": 2, "device": "cpu", "unpad": False, "compile": False,
             "changes": []},
            {"started_at_step": 4, "world_size": 1, "device": "cpu", "unpad": False, "compile": False,
             "changes": ["optim.lr: 0.001 -> 0.002"]},
        ],
    }


def test_the_names_of_a_run_directory(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    assert {p.name for p in (run.record_file, run.tokenizer, run.initial, run.checkpoints, run.universal_log,
                             run.metrics_file, run.tensorboard, run.preempted_marker, run.export)} == {
        "run.json", "tokenizer", "initial", "checkpoints", "universal-conversion.log", "metrics.jsonl",
        "tensorboard", "PREEMPTED", "export"}
    assert all(p.parent == tmp_path for p in (run.record_file, run.export, run.checkpoints))


def test_version_2_reads_as_written_and_writes_back_the_same(tmp_path: Path) -> None:
    record = RunRecord.from_json(version_2())
    assert record.model == "/m/config.json" and record.world_size == 2 and record.device == "cpu"
    assert record.tokenizer_source == TokenizerSource(directory="/m")
    assert record.student_config == {"hidden_size": 32, "model_type": "bert"}
    assert record.history[1] == JobSegment(4, 1, "cpu", False, False, ["optim.lr: 0.001 -> 0.002"])
    assert record.to_json() == version_2()
    RunDir(tmp_path).write_record(record)
    assert json.loads((tmp_path / "run.json").read_text()) == version_2()


def test_version_1_gets_the_defaults_of_what_it_lacked() -> None:
    record = RunRecord.from_json(VERSION_1)
    assert record.version == RUN_RECORD_VERSION
    assert (record.device, record.unpad, record.fused_optimizer, record.student_config, record.history) == (
        "unknown", False, False, None, [])
    assert record.tokenizer_source == TokenizerSource(vocab_file="/data/vocab.txt", lowercase=True,
                                                      kind="wordpiece")
    assert record.to_json()["tokenizer_source"] == VERSION_1["tokenizer_source"]


def test_a_newer_record_is_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text(json.dumps({**version_2(), "version": RUN_RECORD_VERSION + 1}))
    with pytest.raises(RunRecordError, match=r"run\.json: run record version 3, written by a newer tacl-scale"):
        RunDir(tmp_path).read_record()


@pytest.mark.parametrize(("text", "problem"), [
    ("{not json", "unreadable run record"),
    ("[1, 2]", "a run record is a JSON object, not list"),
    (json.dumps({"version": 2, "config": {}}), "not a run record this code can read (world_size is missing)"),
    (json.dumps({**VERSION_1, "history": [{"world_size": 1}]}),
     "not a run record this code can read (history[0].started_at_step is missing)"),
    # Each read as its type says, not coerced: bool("false") was true, int("8") was 8.
    (json.dumps({**VERSION_1, "unpad": "false"}),
     'not a run record this code can read (unpad must be true or false, not "false")'),
    (json.dumps({**VERSION_1, "world_size": "8"}),
     'not a run record this code can read (world_size must be an integer, not "8")'),
    (json.dumps({**VERSION_1, "tokenizer_source": {"vocab_file": 5}}),
     "not a run record this code can read (tokenizer_source.vocab_file must be a string, not 5)"),
])
def test_a_broken_record_is_one_error_naming_the_file(tmp_path: Path, text: str, problem: str) -> None:
    (tmp_path / "run.json").write_text(text)
    with pytest.raises(RunRecordError) as caught:
        RunDir(tmp_path).read_record()
    assert str(caught.value).startswith(f"{tmp_path / 'run.json'}: ") and problem in str(caught.value)


class _Config:
    """What record_job needs of a TrainConfig."""

    def __init__(self, settings: dict) -> None:
        self.settings = settings

    def to_dict(self) -> dict:
        return self.settings


def test_each_job_adds_a_segment_and_changes_replace_the_settings(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    first = RunRecord.from_json(version_2())
    first.history = []
    segment = JobSegment(0, 2, "cpu", False, False, [])
    record_job(run, None, segment, first, _Config({"model": "x"}))  # type: ignore[arg-type]
    assert run.read_record().history == [segment]
    # A resumed job keeps the record (not the new one it was offered) and adds itself.
    record_job(run, run.read_record(), JobSegment(4, 1, "cpu", False, False, []), RunRecord.from_json(VERSION_1),
               _Config({"model": "y"}))  # type: ignore[arg-type]
    kept = run.read_record()
    assert kept.world_size == 2 and kept.config["model"] == "/m/config.json" and len(kept.history) == 2
    record_job(run, run.read_record(), JobSegment(6, 1, "cpu", False, False, ["seed: 7 -> 8"]), first,
               _Config({"model": "/m/config.json", "seed": 8}))  # type: ignore[arg-type]
    changed = run.read_record()
    assert changed.config == {"model": "/m/config.json", "seed": 8}
    assert [s.started_at_step for s in changed.history] == [0, 4, 6]


def test_an_output_that_is_an_input_or_holds_a_dataset_or_model_is_refused(tmp_path: Path) -> None:
    """The run writes tokenizer/, initial/, checkpoints/ and export/ into --output: into
    a dataset directory they mixed with its shards (and a rebuild with --overwrite
    would delete the run), into a model directory beside its weights."""
    data, model = tmp_path / "data", tmp_path / "model"
    data.mkdir()
    (data / "manifest.json").write_text("{}")
    model.mkdir()
    (model / "config.json").write_text("{}")
    config_file = tmp_path / "bert.json"
    config_file.write_text("{}")

    def problem(output: Path, model_given: Path = config_file) -> str | None:
        return output_problem(output, [str(data)], str(model_given))

    assert problem(data) == (f"{data}: --output is the --data directory {data}: a run writes its checkpoints, "
                             "tokenizer and export there; choose another directory")
    assert "--output is inside the --data directory" in problem(data / "run")
    assert "--output is the --model directory" in problem(model, model)
    assert problem(model) == (f"{model}: --output holds a model (config.json), not a run; choose a new or empty "
                              "directory")
    copied = tmp_path / "copy"
    copied.mkdir()
    (copied / "manifest.json").write_text("{}")
    assert "--output holds a dataset (manifest.json)" in problem(copied)
    # a new, an empty, a run's own and a half-started directory are fine (Slurm's log goes in first)
    started = tmp_path / "started"
    (started / "tokenizer").mkdir(parents=True)
    (started / "slurm-12.log").write_text("job 12\n")
    resumed = tmp_path / "resumed"
    resumed.mkdir()
    (resumed / "run.json").write_text("{}")
    (resumed / "config.json").write_text("{}")  # the user's own file beside a run: not ours to judge
    for fine in (tmp_path / "new", started, resumed, tmp_path, config_file.parent / "runs" / "a"):
        assert problem(fine) is None, fine
    # under a file: mkdir's "[Errno 17] File exists: '.../bert.json'" reached the user as it was
    assert problem(config_file / "runs" / "a") == f"{config_file / 'runs' / 'a'}: {config_file} is a file, not a directory"


def test_a_resume_compares_the_directories_its_paths_name_not_their_spelling(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run started with ``--data /abs/ds`` and resumed from its directory with
    ``--data ds`` (or from a symlink to it) is the same run; another directory is not."""
    (tmp_path / "ds").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "ds")
    monkeypatch.chdir(tmp_path)
    saved = {"model": str(tmp_path / "bert.json"), "data": {"paths": [str(tmp_path / "ds")]}}
    same = {"model": "bert.json", "data": {"paths": ["link"]}}
    assert settings_changes(saved, _Config(same)) == []  # type: ignore[arg-type]
    other = {"model": "bert.json", "data": {"paths": ["other"]}}
    assert settings_changes(saved, _Config(other)) == [  # type: ignore[arg-type]
        f"data.paths: [{str(tmp_path / 'ds')!r}] -> [{str(tmp_path / 'other')!r}]"]


def test_data_content_is_compared_only_where_the_run_recorded_it_for_the_same_paths(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "run")
    run.path.mkdir()
    record = RunRecord.from_json(version_2())
    record.config = {"data": {"paths": ["/d/a"]}}
    record.data_fingerprints = ["f-a"]
    run.write_record(record)

    class Config(_Config):
        data = type("Data", (), {"paths": ("/d/a",)})

    class OtherData(_Config):
        data = type("Data", (), {"paths": ("/d/b",)})

    same = Config({})
    assert data_changes(run.read_record(), same, ["f-a"]) == []  # type: ignore[arg-type]
    assert data_changes(run.read_record(), same, ["f-b"])[0].startswith(  # type: ignore[arg-type]
        "data content: /d/a: not the dataset")
    assert data_changes(run.read_record(), OtherData({}), ["f-b"]) == []  # type: ignore[arg-type]  # as data.paths
    assert data_changes(None, same, ["f-b"]) == []  # type: ignore[arg-type]  # a new run: nothing to compare
    record.data_fingerprints = None  # a run from before fingerprints: nothing to compare
    run.write_record(record)
    assert data_changes(run.read_record(), same, ["f-b"]) == []  # type: ignore[arg-type]
    record_job(run, run.read_record(), JobSegment(2, 1, "cpu", False, False, []), RunRecord.from_json(
        {**version_2(), "data_fingerprints": ["f-b"]}), same)  # type: ignore[arg-type]
    assert run.read_record().data_fingerprints == ["f-b"]  # recorded from its first resume on


def _trained_run(run: Path) -> dict[str, bytes]:
    """What a run that trained 2 steps and exported holds besides run.json (its
    saved checkpoints' records, metrics, export), written as files; their bytes."""
    for tag in ("step00000001", "step00000002"):
        (run / "checkpoints" / tag).mkdir(parents=True)
        (run / "checkpoints" / tag / "files.json").write_text("{}")
        (run / "checkpoints" / tag / "trainer_state.json").write_text(json.dumps({"step": int(tag[4:])}))
    (run / "checkpoints" / "latest").write_text("step00000002")
    (run / "export").mkdir()
    (run / "export" / "tacl_export.json").write_text("{}")
    (run / "metrics.jsonl").write_text('{"step": 1}\n{"step": 2}\n')
    (run / "tokenizer").mkdir()
    (run / "initial").mkdir()
    return {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}


def test_a_runs_files_without_its_run_json_are_refused_not_replaced(tmp_path: Path) -> None:
    """A run folder that lost run.json was taken for an empty one: a new run there
    replaced its checkpoints and export, and --resume continued its checkpoint
    without comparing any setting, then wrote a fresh run.json."""
    run = tmp_path / "run"
    _trained_run(run)
    said = output_problem(run, [str(tmp_path / "ds")], str(tmp_path / "bert.json"))
    assert said == (f"{run}: holds a training run's files (checkpoints/step00000002 and 1 more, export/, "
                    "metrics.jsonl) but no run.json, the record of its settings: a new run there would replace "
                    f"them, and --resume could not check its settings against the run's. Restore {run / 'run.json'} "
                    "(from a backup) to --resume it, or choose another --output")
    # each of them alone is enough
    for name, make in [("latest", lambda d: (d / "checkpoints").mkdir() or (d / "checkpoints" / "latest").write_text("x")),
                       ("export/", lambda d: (d / "export").mkdir()),
                       ("tensorboard/", lambda d: (d / "tensorboard").mkdir()),
                       ("metrics.jsonl", lambda d: (d / "metrics.jsonl").write_text("")),
                       ("PREEMPTED", lambda d: (d / "PREEMPTED").write_text("SIGUSR1")),
                       ("universal-conversion.log", lambda d: (d / "universal-conversion.log").write_text(""))]:
        alone = tmp_path / f"alone-{name.strip('/')}"
        alone.mkdir()
        make(alone)
        assert f"holds a training run's files ({'checkpoints/' if name == 'latest' else ''}{name})" in (
            output_problem(alone, [], str(tmp_path / "bert.json")) or ""), name
    # What a first job writes before its record (a job stopped while its engine was
    # built, or requeued then, starts again over it), and a checkpoint folder with
    # no save in it (a test's stand-in for a full disk), are no run's files.
    first_job = tmp_path / "first-job"
    (first_job / "checkpoints" / "step00000004").mkdir(parents=True)
    (first_job / "checkpoints" / "step00000004" / "mp_rank_00_model_states.pt").symlink_to("/dev/full")
    (first_job / "tokenizer").mkdir()
    (first_job / "initial").mkdir()
    (first_job / ".tacl-lock").write_text("")
    assert output_problem(first_job, [], str(tmp_path / "bert.json")) is None
    (run / "run.json").write_text("{}")  # the run, recorded: resumed (or refused without --resume) by training
    assert output_problem(run, [], str(tmp_path / "bert.json")) is None


@pytest.mark.parametrize("resume", [False, True])
def test_train_refuses_a_run_without_run_json_before_it_writes(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                               resume: bool) -> None:
    run = tmp_path / "run"
    before = _trained_run(run)
    args = ["--ds", str(ROOT / "ds_configs" / "cpu.json"), "--data", str(tmp_path / "ds"), "--model",
            str(tmp_path / "bert.json"), "--output", str(run), "--steps", "2", *(["--resume"] if resume else [])]
    code, stderr = main_in_this_process(args, capsys)
    errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert code == 2 and len(errors) == 1, stderr[-3000:]
    assert errors[0].startswith(f"error: {run}: holds a training run's files (checkpoints/step00000002 and 1 more")
    after = {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}
    assert after == before  # not even the lock file


def test_a_run_inside_another_run_an_export_or_a_dataset_is_refused(tmp_path: Path) -> None:
    """``--output RUN/export/sub-run`` was accepted, and RUN's end-of-run export
    replaced RUN/export whole, the run inside it with it."""
    run, dataset, export = tmp_path / "run", tmp_path / "ds", tmp_path / "exported"
    for directory, marker in ((run, "run.json"), (dataset, "manifest.json"), (export, "tacl_export.json")):
        directory.mkdir()
        (directory / marker).write_text("{}")
    (dataset / "shard-00000.idx").write_bytes(b"")
    (run / "export").mkdir()
    (run / "export" / "tacl_export.json").write_text("{}")
    model = str(tmp_path / "bert.json")
    said = {run / "export" / "sub-run": f"inside the export {run / 'export'}, which the next export there replaces",
            run / "checkpoints" / "x": f"inside the training run {run}, whose checkpoints and export training "
                                       "rotates and replaces: choose a place outside it",
            run / "sub": f"inside the training run {run}",
            dataset / "run": f"inside the dataset {dataset}: choose a place outside it",
            export / "x" / "run": f"inside the export {export}, which the next export there replaces whole"}
    for out, says in said.items():
        problem = output_problem(out, [], model) or ""
        assert problem.startswith(f"{out}: {says}"), (out, problem)
        assert "is the run's own export" not in problem  # an export's alone may go there
    (run / "export").rename(tmp_path / "moved")  # a run still training has no export yet: refused all the same
    assert (output_problem(run / "export" / "sub-run", [], model) or "").startswith(
        f"{run / 'export' / 'sub-run'}: inside the training run {run}")
    for fine in (run, tmp_path / "beside", tmp_path / "runs" / "a"):
        assert output_problem(fine, [], model) is None, fine


def resumed_with(model: str, allow_changes: bool = False) -> TrainConfig:
    """A resume's settings with ``--model model`` (and ``--allow-changes``)."""
    return TrainConfig(model=model, output="/runs/b", engine=EngineConfig("inline.json"), data=DataConfig(("/d",)),
                       checkpoint=CheckpointConfig(resume=True, allow_changes=allow_changes))


def test_a_resume_with_a_student_of_another_shape_names_each_setting(tmp_path: Path) -> None:
    """Resumed after --model's hidden_size was edited (or with another model and
    --allow-changes), the checkpoint's load ended in 43 lines of size mismatches."""
    run = RunDir(tmp_path)
    record = RunRecord.from_json(version_2())
    record.student_config = {"hidden_size": 64, "intermediate_size": 256, "num_hidden_layers": 2,
                             "hidden_dropout_prob": 0.1, "model_type": "bert"}
    config = resumed_with("/m/bert.json")
    same = {**record.student_config, "transformers_version": "9", "chunk_size_feed_forward": 0}
    assert check_student_config(run, record, same, config) == []  # what no run computes differs
    other = {**same, "hidden_size": 32, "intermediate_size": 128}
    for allowed in (False, True):
        with pytest.raises(RunRecordError) as refused:
            check_student_config(run, record, other, resumed_with("/m/bert.json", allowed))
        assert str(refused.value).startswith(
            f"{tmp_path / 'run.json'}: --resume with --model /m/bert.json, a student of another shape than the "
            "run's (its student_config): hidden_size 64 in the run, 32 in --model; intermediate_size 256 in the run, "
            "128 in --model. Its checkpoints hold weights of the run's shape")
    assert check_student_config(run, None, other, config) == []  # a new run
    record.student_config = None  # a run recorded before the config was kept: nothing to compare
    assert check_student_config(run, record, other, config) == []


def test_a_resume_with_a_student_config_edited_in_place_is_a_change_of_settings(tmp_path: Path) -> None:
    """--model's config.json given other dropout or another activation between two
    jobs resumed silently: the run trained on as another model than it records."""
    run = RunDir(tmp_path)
    record = RunRecord.from_json(version_2())
    record.student_config = {"hidden_size": 64, "hidden_dropout_prob": 0.1, "hidden_act": "gelu"}
    edited = {**record.student_config, "hidden_dropout_prob": 0.0, "hidden_act": "relu"}
    with pytest.raises(RunRecordError) as refused:
        check_student_config(run, record, edited, resumed_with("/m/bert.json"))
    assert str(refused.value) == (
        f"{tmp_path / 'run.json'}: --resume with --model /m/bert.json, whose config changes the run's student (its "
        "student_config): student_config.hidden_act: 'gelu' -> 'relu'; student_config.hidden_dropout_prob: 0.1 -> "
        "0.0. Resume with the run's --model as it was, or add --allow-changes to continue with these (recorded in "
        "its history)")
    allowed = resumed_with("/m/bert.json", allow_changes=True)
    changes = check_student_config(run, record, edited, allowed)
    assert changes == ["student_config.hidden_act: 'gelu' -> 'relu'", "student_config.hidden_dropout_prob: 0.1 -> 0.0"]
    # Recorded: the run's student from here is the edited one, so the next resume with it is no change.
    new = RunRecord.from_json(version_2())
    new.student_config = edited
    written = record_job(run, record, JobSegment(5, 1, "cpu", False, False, changes), new, allowed)
    assert RunDir(tmp_path).read_record().student_config == edited == written.student_config
    assert check_student_config(run, written, edited, resumed_with("/m/bert.json")) == []


def test_a_new_runs_leftover_tokenizer_is_replaced_only_where_it_is_this_runs(tmp_path: Path) -> None:
    """snapshot_tokenizer(new_run=True) over a first job's tokenizer/: the same
    tokenizer (the same files and ids; lower-casing alike, wherever each says it) is
    replaced by this job's copy; a folder with a file more or less (an added_tokens.json
    a copy from before it travelled lacks) is refused, not kept to be exported."""
    from tokenizers import BertWordPieceTokenizer

    from tacl_scale.run_tokenizer import snapshot_tokenizer

    model = tmp_path / "model"
    model.mkdir()
    (model / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nword\n", encoding="utf-8")
    BertWordPieceTokenizer(str(model / "vocab.txt"), lowercase=True).save(str(model / "tokenizer.json"))
    (model / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))
    run = RunDir(tmp_path / "run")
    run.path.mkdir()
    source = TokenizerSource(directory=str(model))
    copy = snapshot_tokenizer(source, run, new_run=True)
    (copy / "tokenizer_config.json").write_text(json.dumps({}))  # lower-cases all the same: tokenizer.json says so
    assert snapshot_tokenizer(source, run, new_run=True) == copy
    assert json.loads((copy / "tokenizer_config.json").read_text()) == {"do_lower_case": True}  # this job's copy
    # A settings file that says no id, written by another transformers version's save_pretrained.
    (copy / "special_tokens_map.json").write_text(json.dumps({"unk_token": "[UNK]"}))
    assert snapshot_tokenizer(source, run, new_run=True) == copy
    assert not (copy / "special_tokens_map.json").exists()  # this job's copy again
    (copy / "notes.txt").write_text("mine")  # no run's file
    with pytest.raises(ValueError, match=re.escape(f"{copy}: holds notes.txt, which this run's tokenizer has not")):
        snapshot_tokenizer(source, run, new_run=True)
    (copy / "notes.txt").unlink()
    (model / "added_tokens.json").write_text(json.dumps({"[NEW]": 6}))
    with pytest.raises(ValueError) as refused:
        snapshot_tokenizer(source, run, new_run=True)
    assert str(refused.value).startswith(f"{copy}: holds no added_tokens.json, which this run's tokenizer has, and "
                                         "no run.json records a run here"), refused.value
    assert sorted(p.name for p in run.path.iterdir()) == ["tokenizer"]  # no copy left beside it
    assert snapshot_tokenizer(source, run, new_run=False) == copy  # a recorded run's is its own, as it is


def test_a_tokenizer_that_gives_fewer_ids_than_the_data_hold_is_refused(tmp_path: Path) -> None:
    """snapshot_tokenizer(data_ids=N): a source, or a recorded run's copy, whose files
    give fewer than the N ids its data may hold (a vocab.txt whose added_tokens.json a
    copy made before that file travelled lacks) is refused naming it, and nothing is
    left in the run. The ids are counted as the build counts them, through
    AutoTokenizer: added_tokens.json's, and a special token its settings add."""
    from tacl_scale.run_tokenizer import snapshot_tokenizer

    model = tmp_path / "model"
    model.mkdir()
    (model / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nword\n", encoding="utf-8")
    (model / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "BertTokenizer",
                                                             "do_lower_case": True}))
    run = RunDir(tmp_path / "run")
    run.path.mkdir()
    source = TokenizerSource(directory=str(model))
    with pytest.raises(ValueError) as refused:
        snapshot_tokenizer(source, run, new_run=True, data_ids=7)
    assert str(refused.value).startswith(f"{model} (the run's tokenizer, copied into {run.tokenizer}): gives ids "
                                         "0–5, and the run's data hold ids up to 6"), refused.value
    assert list(run.path.iterdir()) == []
    (model / "added_tokens.json").write_text(json.dumps({"[NEW]": 6}))
    copy = snapshot_tokenizer(source, run, new_run=True, data_ids=7)
    # With its added_tokens.json the copy is whole: a count that differs is another transformers version's.
    assert snapshot_tokenizer(source, run, new_run=False, data_ids=9) == copy
    (copy / "added_tokens.json").unlink()  # a run copied by an older version
    with pytest.raises(ValueError, match=re.escape(f"{copy}: gives ids 0–5, and the run's data hold ids up to 6")):
        snapshot_tokenizer(source, run, new_run=False, data_ids=7)
    assert snapshot_tokenizer(source, run, new_run=False, data_ids=6) == copy
    # A special token the settings add (id 6, as the build counted it): the ids are all there.
    (copy / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "BertTokenizer", "do_lower_case": True,
                                                            "additional_special_tokens": ["[E1]"]}))
    assert snapshot_tokenizer(source, run, new_run=False, data_ids=7) == copy
    for name in ("tokenizer_config.json", "vocab.txt"):  # no vocabulary: refused where the run checks for one
        (copy / name).unlink()
    assert snapshot_tokenizer(source, run, new_run=False, data_ids=7) == copy


def test_a_model_folder_whose_vocabulary_is_a_sentencepiece_model_gives_the_run_its_copy(tmp_path: Path) -> None:
    """A model folder is taken as the run's tokenizer source when it holds a
    vocabulary, a SentencePiece ``*.model`` among them; the copy took only the
    Hugging Face files, so the run was refused for a copy without a vocabulary."""
    from tacl_scale.data.manifest import holds_a_vocabulary
    from tacl_scale.run_tokenizer import write_tokenizer

    model = tmp_path / "model"
    model.mkdir()
    (model / "spm.model").write_bytes(b"a SentencePiece model's bytes")
    (model / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}))
    out = tmp_path / "copy"
    out.mkdir()
    write_tokenizer(TokenizerSource(directory=str(model)), out)
    assert sorted(p.name for p in out.iterdir()) == ["spm.model", "tokenizer_config.json"]
    assert (out / "spm.model").read_bytes() == b"a SentencePiece model's bytes" and holds_a_vocabulary(out)
