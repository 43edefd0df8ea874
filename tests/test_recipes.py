"""One source per setting: a flag > a trainer setting of the user's --ds config >
the --recipe > the typed config's default; the ds configs hold only DeepSpeed's own."""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path

import pytest
from conftest import ROOT, main_in_this_process, shipped_ds_configs

from tacl_scale.cli import UsageError
from tacl_scale.config import EngineConfig, OptimConfig
from tacl_scale.recipes import RECIPES, RecipeError, recipe
from tacl_scale.train import parse_args

TRAINER_KEYS = ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_clipping")


def legacy_config(tmp_path: Path) -> Path:
    """A DeepSpeed config as they were written before: batch shape and clipping in it."""
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 4, "gradient_clipping": 0.5,
                                "zero_optimization": {"stage": 2}}))
    return path


def test_a_recipe_fills_what_the_flags_leave_out() -> None:
    config = parse_args(["--recipe", "tacl-large-en"])
    # Absolute, as run.json records them: a resume from another directory compares them.
    assert (config.model, config.output, config.data.paths) == (
        os.path.abspath("models/bert-large-uncased"), os.path.abspath("runs/tacl-large-en"),
        (os.path.abspath("data/enwiki-bert-uncased-256"),))
    assert Path(config.engine.path).name == "zero2.json"
    # The paper's numbers are the typed defaults; the micro-batch is the trainer's choice.
    assert config.optim == OptimConfig()
    assert config.optim.micro_batch_size is None


def test_flags_win_over_the_recipe() -> None:
    config = parse_args(["--recipe", "tacl-base-zh", "--model", "m", "--data", "d1", "--data", "d2",
                         "--output", "o", "--micro-batch-size", "16", "--batch-size", "128"])
    assert (config.model, config.data.paths, config.output) == (
        os.path.abspath("m"), (os.path.abspath("d1"), os.path.abspath("d2")), os.path.abspath("o"))
    assert (config.optim.batch_size, config.optim.micro_batch_size) == (128, 16)


def test_the_users_ds_config_wins_over_the_recipe(tmp_path: Path) -> None:
    """The issue's case: `sbatch slurm/pretrain_large.sh --ds OLD.json` trained with the
    recipe's micro-batch instead of the config's and was refused."""
    old = legacy_config(tmp_path)
    config = parse_args(["--recipe", "tacl-large-en", "--ds", str(old)])
    assert (config.optim.batch_size, config.optim.micro_batch_size, config.optim.grad_clip) == (8, 4, 0.5)
    assert config.engine.path == str(old)
    # ... and a flag wins over both.
    flagged = parse_args(["--recipe", "tiny-cpu", "--ds", str(old), "--data", "d", "--model", "m", "--output", "o",
                          "--micro-batch-size", "2"])
    assert (flagged.optim.batch_size, flagged.optim.micro_batch_size) == (8, 2)


def test_an_old_config_has_a_note_and_ours_have_none(tmp_path: Path) -> None:
    """The note names an older config's trainer settings and where they belong now
    (that train.py says it once: test_train_says_an_old_config_once)."""
    note = EngineConfig.from_file(legacy_config(tmp_path)).trainer_settings_note()
    assert note is not None and "batch_size 8, micro_batch_size 4, grad_clip 0.5" in note and "flags" in note
    for path in shipped_ds_configs():
        assert EngineConfig.from_file(path).trainer_settings_note() is None, path


def test_a_configs_accumulation_steps_without_its_batch_are_said_to_be_unused(tmp_path: Path) -> None:
    """gradient_accumulation_steps 5 (meaning a global batch of micro × 5 × ranks) was
    dropped without a word: the trainer takes --batch-size."""
    alone = tmp_path / "ga.json"
    alone.write_text(json.dumps({"gradient_accumulation_steps": 5, "zero_optimization": {"stage": 2}}))
    note = EngineConfig.from_file(alone).trainer_settings_note()
    assert note == (f"{alone}: gradient_accumulation_steps 5 is not used: the accumulation steps are --batch-size / "
                    "(micro-batch × ranks), so set --batch-size for the global batch you want")
    with_micro = tmp_path / "ga_micro.json"
    with_micro.write_text(json.dumps({"gradient_accumulation_steps": 5, "train_micro_batch_size_per_gpu": 4,
                                      "zero_optimization": {"stage": 2}}))
    note = EngineConfig.from_file(with_micro).trainer_settings_note()
    assert note is not None and "(micro_batch_size 4)" in note and "gradient_accumulation_steps 5 is not used" in note
    # beside its train_batch_size it agrees with what the trainer derives: nothing to say about it
    legacy = json.loads(legacy_config(tmp_path).read_text()) | {"gradient_accumulation_steps": 2}
    (tmp_path / "old.json").write_text(json.dumps(legacy))
    assert "gradient_accumulation_steps" not in EngineConfig.from_file(tmp_path / "old.json").trainer_settings_note()


@pytest.mark.parametrize("path", shipped_ds_configs(), ids=lambda p: p.name)
def test_the_ds_configs_hold_only_deepspeeds_own(path: Path) -> None:
    settings = json.loads(path.read_text())
    assert all(settings.get(key, "auto") == "auto" for key in TRAINER_KEYS), path
    assert "optimizer" not in settings and "scheduler" not in settings
    assert "zero_optimization" in settings


def test_without_a_recipe_the_paths_are_required() -> None:
    with pytest.raises(UsageError, match=re.escape("--ds is required (or a --recipe that sets it)")):
        parse_args(["--data", "d", "--model", "m", "--output", "o"])
    with pytest.raises(UsageError, match="invalid choice: 'no-such-recipe'"):
        parse_args(["--recipe", "no-such-recipe"])
    with pytest.raises(RecipeError, match="no such recipe; known: tacl-base-en, tacl-base-zh"):
        recipe("no-such-recipe")


def test_every_recipe_names_a_config_that_exists_and_the_slurm_scripts_use_them() -> None:
    for r in RECIPES.values():
        assert Path(r.ds_path()).is_file(), r
    body = (ROOT / "slurm" / "_pretrain.sh").read_text()
    named = set(re.findall(r"RECIPE:-(tacl-[a-z]+-[a-z]+)", body))
    named |= {f"tacl-base-{lang}" for lang in ("en", "zh")} if "tacl-base-${LANG_CODE:-en}" in body else set()
    assert named == {"tacl-large-en", "tacl-base-en", "tacl-base-zh"} and named <= set(RECIPES)


def test_a_recipes_config_is_found_from_another_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    config = parse_args(["--recipe", "tiny-cpu", "--data", "d", "--model", "m", "--output", "o"])
    assert Path(config.engine.path) == ROOT / "ds_configs" / "cpu.json"
    assert (config.optim.batch_size, config.optim.micro_batch_size) == (8, 4)


def test_train_says_an_old_config_once(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    """main() logs the note before anything else can fail (here: the data). Run as
    one rank with the launcher's variables, signal handlers and logging put back
    afterwards (main joins a process group, which sets them)."""
    with caplog.at_level(logging.WARNING, logger="tacl_scale.train"):
        code, stderr = main_in_this_process(["--ds", str(legacy_config(tmp_path)), "--data", str(tmp_path / "nothing"),
                                             "--model", "m", "--output", str(tmp_path / "run")], capsys)
    assert code == 2 and str(tmp_path / "nothing") in stderr.strip().splitlines()[-1]
    assert sum("holds settings of the trainer's" in r.getMessage() for r in caplog.records) == 1


@pytest.mark.parametrize(("flags", "said"), [
    (["--objectives", "foo"], "error: --objectives must be a non-empty subset of tacl,mlm,nsp,mirror, got foo"),
    (["--ds", "missing.json"], "error: missing.json: unreadable DeepSpeed config"),
    (["--data", "{tmp}/missing", "--output", "{tmp}/run"], "error: {tmp}/missing: not found (--data)"),
])
def test_the_slurm_job_refuses_bad_flags_in_train_pys_words_before_it_starts(flags: list[str], said: str,
                                                                             tmp_path: Path) -> None:
    """The job script's own check of the flags (before srun) printed a traceback for
    a refused flag or config, above "train.py refuses these flags (above)"."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, TACL_HOME=str(ROOT), VENV=str(Path(sys.executable).parent.parent))
    for key in ("SLURM_NTASKS", "SLURM_JOB_ID"):
        env.pop(key, None)
    flags = [flag.format(tmp=tmp_path) for flag in flags]
    done = subprocess.run(["bash", str(ROOT / "slurm" / "pretrain_base.sh"), *flags], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    # One line: a second one said "train.py refuses these flags (above)" of a path that was not there.
    assert len(lines) == 1 and lines[0].startswith(said.format(tmp=tmp_path)), done.stderr
    assert not list(tmp_path.iterdir())  # no run directory made for the job's log


def test_the_slurm_job_requeues_a_run_whose_path_holds_a_space(tmp_path: Path) -> None:
    """The job read its run directory with ``read -r RUN_DIR BATCH ...``: an
    ``--output`` with a space split there, the log went to a stray folder and the
    preemption marker was looked for in the wrong place, so a job checkpointed at
    its time limit ended without requeuing."""
    import os
    import subprocess
    import sys

    from tacl_scale.run_dir import PREEMPTED_MARKER

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # srun stands for train.py checkpointing on SIGUSR1: it leaves the marker in --output.
    (bin_dir / "srun").write_text(
        '#!/usr/bin/env bash\nwhile (( $# )); do [[ $1 == --output ]] && out=$2; shift; done\n'
        f'mkdir -p "$out" && echo SIGUSR1 > "$out/{PREEMPTED_MARKER}"\n')
    (bin_dir / "scontrol").write_text(
        f'#!/usr/bin/env bash\n[[ $1 == show ]] && {{ echo localhost; exit 0; }}\necho "$@" >> "{tmp_path}/scontrol.log"\n')
    for tool in ("srun", "scontrol"):
        (bin_dir / tool).chmod(0o755)
    (tmp_path / "data").mkdir()
    (tmp_path / "model").mkdir()
    run = tmp_path / "my runs" / "r1"
    env = dict(os.environ, TACL_HOME=str(ROOT), VENV=str(Path(sys.executable).parent.parent), SLURM_JOB_ID="42",
               SLURM_JOB_NODELIST="localhost", PATH=f"{bin_dir}:{os.environ['PATH']}")
    env.pop("SLURM_NTASKS", None)
    done = subprocess.run(["bash", str(ROOT / "slurm" / "pretrain_base.sh"), "--data", str(tmp_path / "data"),
                           "--model", str(tmp_path / "model"), "--output", str(run)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "scontrol.log").read_text() == "requeue 42\n"
    log = (run / "slurm-42.log").read_text()
    assert "requeuing job 42" in log and "global batch 256 = micro" in log, log
    assert sorted(p.name for p in (tmp_path / "my runs").iterdir()) == ["r1"] and not (tmp_path / "my").exists()


@pytest.mark.parametrize(("cpus", "flags"), [("6", ["--cpus-per-task=6"]), (None, [])])
def test_the_slurm_job_gives_each_rank_the_jobs_cpus(tmp_path: Path, cpus: str | None, flags: list[str]) -> None:
    """From Slurm 22.05 an srun step no longer inherits the job's --cpus-per-task: each
    rank (its DataLoader workers and OMP threads) got one CPU unless srun is told."""
    import os
    import subprocess
    import sys

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text(f'#!/usr/bin/env bash\nprintf "%s\\n" "$@" > "{tmp_path}/srun.args"\n')
    (bin_dir / "scontrol").write_text("#!/usr/bin/env bash\n[[ $1 == show ]] && echo localhost\nexit 0\n")
    for tool in ("srun", "scontrol"):
        (bin_dir / tool).chmod(0o755)
    (tmp_path / "data").mkdir()
    (tmp_path / "model").mkdir()
    env = dict(os.environ, TACL_HOME=str(ROOT), VENV=str(Path(sys.executable).parent.parent), SLURM_JOB_ID="42",
               SLURM_JOB_NODELIST="localhost", PATH=f"{bin_dir}:{os.environ['PATH']}")
    env.pop("SLURM_NTASKS", None)
    env.pop("SLURM_CPUS_PER_TASK", None)
    if cpus is not None:
        env["SLURM_CPUS_PER_TASK"] = cpus
    done = subprocess.run(["bash", str(ROOT / "slurm" / "pretrain_base.sh"), "--data", str(tmp_path / "data"),
                           "--model", str(tmp_path / "model"), "--output", str(tmp_path / "run")], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    srun = (tmp_path / "srun.args").read_text().splitlines()
    assert srun[:srun.index("bash")] == ["--kill-on-bad-exit=1", *flags]


def test_a_recipes_missing_paths_are_said_to_be_its_and_nothing_is_made(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``sbatch slurm/pretrain_base.sh`` from a directory without the recipe's data
    said only "data/...: no such directory", and left the recipe's ``runs/`` behind."""
    from conftest import main_in_this_process

    monkeypatch.chdir(tmp_path)
    code, stderr = main_in_this_process(["--recipe", "tacl-base-en"], capsys)
    data = tmp_path / "data" / "enwiki-bert-uncased-256"
    assert (code, stderr) == (2, f"error: {data}: not found: the --data of --recipe tacl-base-en (its paths are "
                                 "relative to the directory the job runs in); put it there or give --data\n")
    data.mkdir(parents=True)
    code, stderr = main_in_this_process(["--recipe", "tacl-base-en"], capsys)
    assert "models/bert-base-uncased: not found: the --model of --recipe tacl-base-en" in stderr
    code, stderr = main_in_this_process(["--recipe", "tacl-base-en", "--model", "mine"], capsys)
    assert stderr == f"error: {tmp_path / 'mine'}: not found (--model)\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]


@pytest.mark.parametrize(("script", "first_line", "flags_of"), [
    ("pretrain_large.sh", "TaCL-large (paper recipe)", "usage: deepspeed tacl_scale/train.py"),
    ("prep_wiki.sh", "The batch data preprocessing job (data_prep.build).", "usage: python -m data_prep.build"),
])
def test_a_slurm_jobs_help_is_its_usage_and_its_commands_flags_and_starts_nothing(
        script: str, first_line: str, flags_of: str, tmp_path: Path) -> None:
    """The training job's check of its flags read train.py's help as its values: it
    made a run directory named ``usage:`` in the checkout and went on to launch."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, TACL_HOME=str(ROOT), VENV=str(Path(sys.executable).parent.parent))
    for key in ("SLURM_NTASKS", "SLURM_JOB_ID"):
        env.pop(key, None)
    before = sorted(p.name for p in ROOT.iterdir())
    done = subprocess.run(["bash", str(ROOT / "slurm" / script), "--output", "x", "--help"], cwd=tmp_path,
                          env={**env, "SLURM_JOB_NUM_NODES": "2"}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(first_line) and flags_of in done.stdout, done.stdout
    assert "SBATCH" not in done.stdout  # the header ends at the scheduler's directives
    if script.startswith("pretrain_"):  # the wrapper's usage (it printed the shared body's alone), then the body's
        assert "Shared body of slurm/pretrain_{base,large}.sh" in done.stdout and "RECIPE" in done.stdout
    assert sorted(p.name for p in ROOT.iterdir()) == before and not list(tmp_path.iterdir())


def test_the_recipe_listing_refuses_an_argument_it_does_not_take(capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m tacl_scale.recipes --bogus`` ignored it and exited 0."""
    from tacl_scale.recipes import main

    assert main([]) == 0
    assert "tacl-base-en:" in capsys.readouterr().out
    with pytest.raises(SystemExit) as refused:
        main(["--bogus"])
    assert refused.value.code == 2 and "unrecognized arguments: --bogus" in capsys.readouterr().err
