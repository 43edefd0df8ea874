"""The shell scripts' own inputs (environment variables, arguments, the files they
read) refused with one line naming the input and the problem, before anything is
written: slurm/_env.sh's VENV and CONDA_ENV, slurm/_pretrain.sh's LAUNCHER and
LANG_CODE, slurm/prep_wiki.sh's --output with a quote in it, scripts/setup.sh's
arguments and its virtualenv without pip, scripts/install_offline.sh's bundle.json.
The Slurm commands (srun, scontrol) and conda are stand-ins on PATH; nothing is
downloaded (pip runs with no index)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

VENV = Path(sys.executable).parent.parent  # the virtualenv the tests run in


def job_env(**extra: str) -> dict[str, str]:
    """A job's environment: this checkout, this virtualenv, no Slurm task count or job id."""
    env = dict(os.environ, TACL_HOME=str(ROOT), VENV=str(VENV))
    for key in ("SLURM_NTASKS", "SLURM_JOB_ID", "SLURM_JOB_NUM_NODES", "CONDA_ENV", "LAUNCHER", "LANG_CODE",
                "RECIPE", "SIZE"):
        env.pop(key, None)
    return env | extra


def stand_in(directory: Path, name: str, body: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_text("#!/usr/bin/env bash\n" + body, encoding="utf-8")
    (directory / name).chmod(0o755)


def path_without_conda() -> str:
    return os.pathsep.join(d for d in os.environ["PATH"].split(os.pathsep) if not (Path(d) / "conda").exists())


def source_env_sh(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """slurm/_env.sh sourced as the job scripts do (set -euo pipefail), then the python it leaves on PATH."""
    return subprocess.run(["bash", "-c", 'set -euo pipefail; source "$TACL_HOME/slurm/_env.sh"; command -v python'],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)


# --- slurm/_env.sh: VENV and CONDA_ENV ---------------------------------------------------


@pytest.mark.slow  # starts bash (and python or pip)
def test_a_venv_that_is_not_one_stops_the_job_naming_it(tmp_path: Path) -> None:
    """``VENV=/typo`` was passed over: the job ran the python on PATH and then blamed
    "train.py refuses these flags"."""
    typo = tmp_path / "typo"
    job = tmp_path / "job"
    job.mkdir()
    done = subprocess.run(["bash", str(ROOT / "slurm" / "pretrain_base.sh")], cwd=job, env=job_env(VENV=str(typo)),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [f"error: VENV={typo}: not a virtualenv (no bin/activate in it, seen from "
                                        f"{ROOT}): set VENV to one, or unset it for {ROOT}/.venv"], done.stderr
    assert not list(job.iterdir())


@pytest.mark.slow  # starts bash (and python or pip)
def test_a_conda_env_without_conda_stops_the_job_naming_it(tmp_path: Path) -> None:
    """``CONDA_ENV=x`` without conda on PATH said "conda: command not found" and went on
    with the python on PATH."""
    job = tmp_path / "job"
    job.mkdir()
    done = subprocess.run(["bash", str(ROOT / "slurm" / "pretrain_base.sh")], cwd=job,
                          env=job_env(CONDA_ENV="x", PATH=path_without_conda()), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == ["error: CONDA_ENV=x: conda not found on PATH (load or initialise conda in "
                                        "the job's environment, or unset CONDA_ENV)"], done.stderr
    assert not list(job.iterdir())


@pytest.mark.slow  # starts bash (and python or pip)
def test_a_conda_env_conda_cannot_activate_stops_the_job_and_one_it_can_is_used(tmp_path: Path) -> None:
    """A stand-in conda whose ``activate`` knows only the environment ``good`` (its
    python first on PATH)."""
    base, good_bin = tmp_path / "conda", tmp_path / "envs" / "good" / "bin"
    stand_in(tmp_path / "bin", "conda", f'[[ "$*" == "info --base" ]] && echo "{base}"\n')
    stand_in(good_bin, "python", "exit 0\n")
    (base / "etc" / "profile.d").mkdir(parents=True)
    (base / "etc" / "profile.d" / "conda.sh").write_text(
        'conda() {\n  [[ $1 == activate && $2 == good ]] || { echo "EnvironmentNameNotFound: $2" >&2; return 1; }\n'
        f'  export PATH="{good_bin}:$PATH"\n}}\n', encoding="utf-8")
    path = f"{tmp_path / 'bin'}{os.pathsep}{path_without_conda()}"

    done = source_env_sh(tmp_path, job_env(CONDA_ENV="missing", PATH=path))
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert done.stderr.splitlines()[-1] == ("error: CONDA_ENV=missing: conda cannot activate this environment "
                                            "(`conda env list` names those there are)"), done.stderr

    done = source_env_sh(tmp_path, job_env(CONDA_ENV="good", PATH=path))
    assert (done.returncode, done.stdout, done.stderr) == (0, f"{good_bin / 'python'}\n", "")


def without_venv(clone: Path) -> list[dict[str, str]]:
    """A job's environments for the checkout ``clone``: VENV unset, and VENV empty."""
    unset = job_env(TACL_HOME=str(clone))
    del unset["VENV"]
    return [unset, unset | {"VENV": ""}]


@pytest.mark.slow  # starts bash (and python or pip)
def test_without_venv_the_checkouts_venv_is_used_if_there_and_else_the_python_on_path(tmp_path: Path) -> None:
    """The default stays: ``$TACL_HOME/.venv`` if it has bin/activate (an empty VENV
    counts as none), else nothing is activated and nothing is refused."""
    clone = tmp_path / "clone"
    for name in ("slurm/_env.sh", "scripts/usage.sh"):
        (clone / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, clone / name)
    on_path = subprocess.run(["bash", "-c", "command -v python"], capture_output=True, text=True).stdout
    for env in without_venv(clone):
        done = source_env_sh(tmp_path, env)
        assert (done.returncode, done.stdout, done.stderr) == (0, on_path, "")

    stand_in(clone / ".venv" / "bin", "python", "exit 0\n")
    (clone / ".venv" / "bin" / "activate").write_text(f'export PATH="{clone}/.venv/bin:$PATH"\n', encoding="utf-8")
    for env in without_venv(clone):
        done = source_env_sh(tmp_path, env)
        assert (done.returncode, done.stdout, done.stderr) == (0, f"{clone}/.venv/bin/python\n", "")
    # A relative TACL_HOME (from where the job was submitted) names the same checkout: the job
    # moves into it, and what it then reads there (scripts/usage.sh) was looked for under the
    # relative name again, from inside it.
    done = source_env_sh(tmp_path, without_venv(clone)[0] | {"TACL_HOME": "clone"})
    assert (done.returncode, done.stdout, done.stderr) == (0, f"{clone}/.venv/bin/python\n", "")


# --- slurm/_pretrain.sh: LAUNCHER and LANG_CODE ------------------------------------------


@pytest.mark.slow  # starts bash (and python or pip)
@pytest.mark.parametrize(("script", "variables", "said"), [
    ("pretrain_base.sh", {"LAUNCHER": "torchrun"}, "error: LAUNCHER must be srun (the default) or deepspeed, "
                                                    "not 'torchrun'"),
    ("pretrain_large.sh", {"LANG_CODE": "zh"}, "error: LANG_CODE=zh: the large recipe (pretrain_large.sh, "
                                               "tacl-large-en) is English only; LANG_CODE=zh is for pretrain_base.sh "
                                               "(tacl-base-zh)"),
    ("pretrain_base.sh", {"LANG_CODE": "fr"}, "error: LANG_CODE must be en or zh (the base recipes: tacl-base-en, "
                                              "tacl-base-zh), not 'fr'"),
])
def test_a_launcher_or_language_the_job_cannot_use_stops_it_before_anything_is_written(
        script: str, variables: dict[str, str], said: str, tmp_path: Path) -> None:
    """``LAUNCHER=torchrun`` launched through srun; ``LANG_CODE=zh`` on pretrain_large.sh
    trained the English recipe; ``LANG_CODE=fr`` on pretrain_base.sh was left to the
    recipe's name. Everything else here would launch (a stand-in srun)."""
    bin_dir = tmp_path / "bin"
    stand_in(bin_dir, "srun", f'touch "{tmp_path}/srun-ran"\n')
    stand_in(bin_dir, "scontrol", "[[ $1 == show ]] && echo localhost\nexit 0\n")
    for name in ("data", "model"):
        (tmp_path / name).mkdir()
    run = tmp_path / "run"
    done = subprocess.run(["bash", str(ROOT / "slurm" / script), "--data", str(tmp_path / "data"),
                           "--model", str(tmp_path / "model"), "--output", str(run)], cwd=tmp_path,
                          env=job_env(SLURM_JOB_ID="42", SLURM_JOB_NODELIST="localhost",
                                      PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", **variables),
                          capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stderr.splitlines()) == (2, [said]), done.stderr
    assert not run.exists() and not (tmp_path / "srun-ran").exists()


@pytest.mark.slow  # starts bash (and python)
@pytest.mark.parametrize(("script", "language"), [("pretrain_large.sh", "zh"), ("pretrain_base.sh", "fr")])
@pytest.mark.parametrize("chosen", [{"RECIPE": "tacl-base-zh"}, {}])
def test_a_recipe_chosen_by_name_is_not_refused_for_the_scripts_language(chosen: dict[str, str], script: str,
                                                                       language: str, tmp_path: Path) -> None:
    """LANG_CODE picks the recipe only when none is named: a RECIPE, or a --recipe
    argument (which replaces the script's), is not refused for a LANG_CODE the
    script's own recipes lack (pretrain_base.sh refused LANG_CODE=fr even then)."""
    bin_dir = tmp_path / "bin"
    stand_in(bin_dir, "srun", f'touch "{tmp_path}/srun-ran"\n')
    stand_in(bin_dir, "scontrol", "[[ $1 == show ]] && echo localhost\nexit 0\n")
    for name in ("data", "model"):
        (tmp_path / name).mkdir()
    flags = [] if chosen else ["--recipe", "tacl-base-zh"]
    done = subprocess.run(["bash", str(ROOT / "slurm" / script), *flags, "--data", str(tmp_path / "data"),
                           "--model", str(tmp_path / "model"), "--output", str(tmp_path / "run")], cwd=tmp_path,
                          env=job_env(SLURM_JOB_ID="42", SLURM_JOB_NODELIST="localhost", LANG_CODE=language,
                                      PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", **chosen),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and (tmp_path / "srun-ran").exists(), done.stderr
    assert "recipe tacl-base-zh" in (tmp_path / "run" / "slurm-42.log").read_text()


# --- slurm/prep_wiki.sh: an --output with a quote ----------------------------------------


@pytest.mark.slow  # starts bash (and python or pip)
def test_prep_wiki_checks_a_shared_output_whose_path_holds_a_quote(tmp_path: Path) -> None:
    """The check that the --output folder is seen from every node put the path inside
    ``bash -c '...'``: a single quote in it broke the command and the job said the
    folder "is not visible from every node". srun here runs its command on this
    machine; scontrol stops the job right after the check."""
    bin_dir = tmp_path / "bin"
    stand_in(bin_dir, "srun", f'echo "$*" >> "{tmp_path}/srun.log"\nwhile [[ $1 == --* ]]; do shift; done\n'
                              'exec "$@"\n')
    stand_in(bin_dir, "scontrol", 'echo "scontrol stand-in: the test stops here" >&2\nexit 3\n')
    shared = tmp_path / "it's shared"
    shared.mkdir()
    done = subprocess.run(["bash", str(ROOT / "slurm" / "prep_wiki.sh"), "--input", "x", "--output",
                           str(shared / "out")], cwd=tmp_path,
                          env=job_env(SLURM_JOB_NUM_NODES="2", SLURM_JOB_ID="7", SLURM_CPUS_PER_TASK="1",
                                      SLURM_JOB_NODELIST="n[1-2]", PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}"),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 3 and "not visible" not in done.stderr, done.stderr
    assert "scontrol stand-in: the test stops here" in done.stderr
    assert "bash -c" in (tmp_path / "srun.log").read_text()  # the check ran, through srun
    assert not list(shared.iterdir())  # its probe file removed


# --- scripts/setup.sh: arguments, a virtualenv without pip -------------------------------


def setup_clone(tmp_path: Path) -> Path:
    """scripts/setup.sh (and usage.sh) in a stand-in clone, so that nothing lands in the checkout."""
    clone = tmp_path / "clone"
    (clone / "scripts").mkdir(parents=True)
    for name in ("setup.sh", "usage.sh"):
        shutil.copy(ROOT / "scripts" / name, clone / "scripts" / name)
    return clone


def offline_pip_env(**extra: str) -> dict[str, str]:
    """pip without an index, find-links or config files: nothing can be installed (or downloaded)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") and k != "VIRTUAL_ENV"}
    return env | {"PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"} | extra


@pytest.mark.slow  # starts bash (and python or pip)
def test_setup_refuses_arguments_before_making_anything(tmp_path: Path) -> None:
    """setup.sh takes none (its settings are environment variables); ``--venv x`` was
    ignored and the default virtualenv made."""
    clone = setup_clone(tmp_path)
    venv = tmp_path / "venv"
    before = sorted(clone.rglob("*"))
    done = subprocess.run(["bash", "scripts/setup.sh", "--venv", "x"], cwd=clone, env=offline_pip_env(VENV=str(venv)),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr == ("error: usage: bash scripts/setup.sh takes no arguments, got '--venv' (its settings come "
                           "from the environment; --help says more)\n")
    assert not venv.exists() and sorted(clone.rglob("*")) == before


@pytest.mark.slow  # starts bash (and python or pip)
def test_setup_gives_a_virtualenv_without_pip_its_pip_back(tmp_path: Path) -> None:
    """A first run stopped after the venv's python and before its pip: every rerun
    failed with "No module named pip". Here pip has no index, so the run ends at
    torch's install, after the repair."""
    clone = setup_clone(tmp_path)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    done = subprocess.run(["bash", "scripts/setup.sh"], cwd=clone, env=offline_pip_env(VENV=str(venv)),
                          capture_output=True, text=True, timeout=300)
    assert "No module named pip" not in done.stderr, done.stderr
    assert f"{venv} has no pip (an earlier run stopped part-way?): installing it with ensurepip" in done.stdout
    assert done.returncode == 1 and "No matching distribution found for torch" in done.stderr, done.stderr
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "--version"], check=True, capture_output=True,
                   timeout=60)
    assert sorted(p.name for p in clone.iterdir()) == ["scripts"]  # its pip temporary folder removed


# --- scripts/install_offline.sh: bundle.json ---------------------------------------------


@pytest.mark.slow  # starts bash (and python or pip)
@pytest.mark.parametrize(("content", "problem"), [
    (b'{"packages": ["deepspeed", "hj', "not a readable JSON file (Unterminated string"),
    (b'{"wheels": []}', 'no "packages" list of package names in it'),
    (b'{"packages": []}', 'no "packages" list of package names in it'),
    (b"\xff\xfe\x00", "not a readable JSON file ("),
])
def test_install_offline_refuses_a_bundle_json_it_cannot_read_before_making_the_venv(
        content: bytes, problem: str, tmp_path: Path) -> None:
    """A truncated bundle.json gave a JSON traceback not naming it, then pip's "You
    must give at least one requirement", after the offline venv was made."""
    bundle, venv = tmp_path / "bundle", tmp_path / "venv"
    bundle.mkdir()
    (bundle / "bundle.json").write_bytes(content)
    done = subprocess.run(["bash", "scripts/install_offline.sh", str(venv)], cwd=ROOT,
                          env=dict(os.environ, PYTHON=sys.executable, GPU_BUNDLE=str(bundle)),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith(f"error: {bundle}/bundle.json: {problem}"), line
    assert line.endswith(": rebuild the bundle with 'bash scripts/build_gpu_bundle.sh' on a networked machine and "
                         "copy it here"), line
    assert not venv.exists() and (bundle / "bundle.json").read_bytes() == content


# --- one header printer -------------------------------------------------------------------


def test_the_header_comment_is_printed_by_one_function() -> None:
    """The sed that prints a command's header comment was written out in scripts/usage.sh
    and in slurm/_env.sh; _env.sh now uses usage.sh's print_header."""
    scripts = sorted((ROOT / "scripts").glob("*.sh")) + sorted((ROOT / "slurm").glob("*.sh"))
    holding = [p.name for p in scripts if re.search(r"s/\^# \\\{0,1\\\}//p", p.read_text(encoding="utf-8"))]
    assert holding == ["usage.sh"]
    assert "print_header" in (ROOT / "slurm" / "_env.sh").read_text(encoding="utf-8")


# --- slurm/pretrain_*.sh: where it runs from, RECIPE, outside Slurm ---------------------


@pytest.mark.slow  # starts bash (and python)
@pytest.mark.parametrize(("script", "first_line", "needs"), [
    ("pretrain_base.sh", "TaCL-base, English", "slurm/_pretrain.sh"),
    ("prep_wiki.sh", "The batch data preprocessing job", "slurm/_env.sh"),
])
def test_a_job_script_finds_its_checkout_or_says_it_cannot(script: str, first_line: str, needs: str,
                                                          tmp_path: Path) -> None:
    """Run with bash from another directory, ``--help`` said "./slurm/_pretrain.sh: No
    such file or directory" (127): outside sbatch the script's own checkout is the
    default. Named by a relative path, its help read "sed: can't read slurm/..." once
    the job had moved into the checkout. A TACL_HOME that is no checkout is one line."""
    env = job_env()
    del env["TACL_HOME"]
    env.pop("SLURM_SUBMIT_DIR", None)
    done = subprocess.run(["bash", str(ROOT / "slurm" / script), "--help"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.startswith(first_line), done.stderr
    # From tests/, "../slurm/X" names the script, and names nothing once the job is in the checkout.
    done = subprocess.run(["bash", f"../slurm/{script}", "--help"], cwd=ROOT / "tests",
                          env=env | {"TACL_HOME": str(ROOT)}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.startswith(first_line) and not done.stderr, done.stderr
    done = subprocess.run(["bash", str(ROOT / "slurm" / script), "--help"], cwd=tmp_path,
                          env=env | {"TACL_HOME": str(tmp_path)}, capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stderr) == (2, f"error: {tmp_path} is not a tacl-scale checkout (no "
                                                 f"{needs}): submit the job from the checkout, or set "
                                                 "TACL_HOME to it\n")
    assert not list(tmp_path.iterdir())


@pytest.mark.slow  # starts bash (and python)
@pytest.mark.parametrize(("variables", "said"), [
    ({"RECIPE": "bogus", "SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "localhost"},
     "error: RECIPE=bogus: no such recipe; known: tacl-base-en, tacl-base-zh, tacl-large-en, tiny-cpu"),
    ({}, "error: not inside a Slurm job (SLURM_JOB_NODELIST is unset): submit it with sbatch, or train without "
         "Slurm with deepspeed --module tacl_scale.train --recipe tacl-base-en --data {tmp}/data --model "
         "{tmp}/model --output {tmp}/run --resume (docs/training.md)"),
])
def test_a_training_job_it_cannot_run_stops_in_one_line_before_anything_is_written(
        variables: dict[str, str], said: str, tmp_path: Path) -> None:
    """``RECIPE=bogus`` was argparse's "argument --recipe: invalid choice" (no word of
    RECIPE) under a second line blaming the flags; outside Slurm the job made its run
    directory and log, then stopped on "SLURM_JOB_NODELIST: unbound variable"."""
    for name in ("data", "model"):
        (tmp_path / name).mkdir()
    done = subprocess.run(["bash", str(ROOT / "slurm" / "pretrain_base.sh"), "--data", str(tmp_path / "data"),
                           "--model", str(tmp_path / "model"), "--output", str(tmp_path / "run")], cwd=tmp_path,
                          env=job_env(**variables), capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stderr.splitlines()) == (2, [said.format(tmp=tmp_path)]), done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "model"]
