"""The run directory's owner: its names, and run.json read through RunRecord.from_json
(every layout written so far, newer ones refused by name)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tacl_scale.run_dir import (
    RUN_RECORD_VERSION,
    JobSegment,
    RunDir,
    RunRecord,
    RunRecordError,
    TokenizerSource,
    data_changes,
    output_problem,
    record_job,
    settings_changes,
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
    (json.dumps({"version": 2, "config": {}}), "not a run record this code can read (KeyError"),
    (json.dumps({**VERSION_1, "history": [{"world_size": 1}]}), "not a run record this code can read"),
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
