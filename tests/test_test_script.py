"""scripts/test.sh itself: a failing step fails its tier under ``--all`` (what CI
runs), and the tiers that promise it change nothing outside the clone
(scripts/test_env.sh). Run on a copy of the scripts in a stand-in clone, with stand-in
interpreters that log what they are asked to run."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from conftest import ROOT

STAND_IN_PYTHON = """#!/usr/bin/env bash
echo "$0 $*" >> "{log}"
if [[ "$*" == "-m ruff check ." && -e "{fail_ruff}" ]]; then exit 1; fi
if [[ "$*" == *"-m cluster"* ]]; then
  echo "$TMPDIR" > "{log}.cluster-tmp"; touch "$TMPDIR/left"
  if [[ -e "{fail_cluster}" ]]; then exit 1; fi
fi
exit 0
"""


def stand_in_clone(tmp_path: Path) -> tuple[Path, Path]:
    """A folder with scripts/test.sh and test_env.sh, a setup.sh that installs nothing
    and stand-in interpreters in .venv and .venv-gpu-image; returns it and the log."""
    clone, log = tmp_path / "clone", tmp_path / "calls.log"
    (clone / "scripts").mkdir(parents=True)
    for name in ("test.sh", "test_env.sh", "usage.sh"):
        shutil.copy(ROOT / "scripts" / name, clone / "scripts" / name)
    (clone / "scripts" / "setup.sh").write_text("exit 0\n", encoding="utf-8")
    for venv in (".venv", ".venv-gpu-image"):
        python = clone / venv / "bin" / "python"
        python.parent.mkdir(parents=True)
        python.write_text(STAND_IN_PYTHON.format(log=log, fail_ruff=tmp_path / "fail-ruff",
                                                      fail_cluster=tmp_path / "fail-cluster"), encoding="utf-8")
        python.chmod(0o755)
    return clone, log


def run_tests_script(clone: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "scripts/test.sh", *args], cwd=clone, capture_output=True, text=True, timeout=60)


def calls_made(log: Path) -> list[tuple[str, str]]:
    """(virtualenv, what) of each stand-in interpreter call: ``ruff``, ``pytest -m
    MARKERS`` or ``-c`` (the GPU-image tier's version line)."""
    calls = []
    for line in log.read_text(encoding="utf-8").splitlines():
        venv, args = line.split("/bin/python ", 1)
        what = "ruff" if args.startswith("-m ruff") else "-c" if args.startswith("-c") else \
            "pytest -m " + args.rsplit(" -m ", 1)[1]
        calls.append((venv, what))
    return calls


def test_a_lint_failure_fails_the_run_of_all_tiers_and_stops_its_tier(tmp_path: Path) -> None:
    clone, log = stand_in_clone(tmp_path)
    assert run_tests_script(clone, "--all").returncode == 0
    every_step = [(".venv", "ruff"), (".venv", "pytest -m not cluster"), (".venv", "pytest -m cluster"),
                  (".venv-gpu-image", "-c"), (".venv-gpu-image", "pytest -m framework")]
    assert calls_made(log) == every_step

    log.unlink()
    (tmp_path / "fail-ruff").touch()
    result = run_tests_script(clone, "--all")
    assert result.returncode != 0, (result.stdout, result.stderr)
    # the default tier stops at its lint; the cluster and GPU-image tiers still run
    assert calls_made(log) == [step for step in every_step if step != (".venv", "pytest -m not cluster")]


def test_the_tests_temporary_files_stay_in_the_clone_and_their_leftovers_go(tmp_path: Path) -> None:
    clone, _ = stand_in_clone(tmp_path)
    seen = tmp_path / "seen"
    command = f"""
source scripts/test_env.sh
TESTS_TMP_MAX_LEN=1000  # the stand-in clone is deep inside pytest's own temporary directory
in_clone_tmp bash -c 'echo "$TMPDIR $MPLCONFIGDIR" > {seen}; touch "$TMPDIR/jieba.cache";
  mkdir -p "$TMPDIR/pymp-x" "$TMPDIR/pytest-of-me/failed0"; exit 3' || echo "status $?"
"""
    result = subprocess.run(["bash", "-c", command], cwd=clone, capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "status 3"
    tmpdir, mplconfigdir = seen.read_text(encoding="utf-8").split()
    assert Path(tmpdir) == clone / ".cache" / "tmp"
    assert Path(mplconfigdir) == clone / ".cache" / "matplotlib"
    assert sorted(p.name for p in Path(tmpdir).iterdir()) == ["pytest-of-me"]
    assert (Path(tmpdir) / "pytest-of-me" / "failed0").is_dir()


def test_a_clone_too_deep_for_sockets_gets_a_temporary_directory_removed_at_the_end(tmp_path: Path) -> None:
    clone, _ = stand_in_clone(tmp_path)
    seen = tmp_path / "seen"
    command = f"""
source scripts/test_env.sh
TESTS_TMP_MAX_LEN=10
in_clone_tmp bash -c 'echo "$TMPDIR" > {seen}; touch "$TMPDIR/left"'
"""
    result = subprocess.run(["bash", "-c", command], cwd=clone, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    tmpdir = Path(seen.read_text(encoding="utf-8").strip())
    assert clone not in tmpdir.parents
    assert not tmpdir.exists()
    assert "longer than the 10 characters sockets allow" in result.stderr
    assert not (clone / ".cache" / "tmp").exists()


def test_the_cluster_tier_removes_its_temporary_directory_unless_its_tests_fail(tmp_path: Path) -> None:
    clone, log = stand_in_clone(tmp_path)
    assert run_tests_script(clone, "--cluster").returncode == 0
    used = Path((tmp_path / "calls.log.cluster-tmp").read_text(encoding="utf-8").strip())
    assert used.name.startswith("tacl-cluster.") and clone not in used.parents  # short, for slurmd's sockets
    assert not used.exists()

    (tmp_path / "fail-cluster").touch()
    result = run_tests_script(clone, "--cluster")
    kept = Path((tmp_path / "calls.log.cluster-tmp").read_text(encoding="utf-8").strip())
    try:
        assert result.returncode != 0 and (kept / "left").is_file()
        assert f"the cluster tier's temporary files are kept in {kept}" in result.stderr
    finally:
        shutil.rmtree(kept, ignore_errors=True)


COMMANDS = ("quickstart.sh", "test.sh", "setup.sh", "gpu_check.sh", "build_gpu_bundle.sh", "install_offline.sh")


def test_every_command_says_its_usage_for_help_and_does_nothing_else(tmp_path: Path) -> None:
    """``bash scripts/quickstart.sh --help`` ran the set-up (minutes of pip) and then
    the quickstart into a directory named ``--help``; test.sh and the GPU scripts
    installed before their own parsers saw the flag."""
    clone = tmp_path / "clone"
    shutil.copytree(ROOT / "scripts", clone / "scripts")
    commands = sorted(p.name for p in (clone / "scripts").glob("*.sh") if p.name not in ("test_env.sh", "usage.sh"))
    assert commands == sorted(COMMANDS)  # a new command gets its usage too
    before = sorted(clone.rglob("*"))
    for name in COMMANDS:
        for flag in ("--help", "-h"):
            done = subprocess.run(["bash", f"scripts/{name}", flag], cwd=clone, capture_output=True, text=True,
                                  timeout=60)
            assert done.returncode == 0 and done.stderr == "", (name, done.stderr)
            assert not done.stdout.startswith("#") and f"bash scripts/{name}" in done.stdout, (name, done.stdout)
    # What is neither an option nor an argument is refused, not taken for a directory.
    for name, args in (("quickstart.sh", ["--skip-setp"]), ("quickstart.sh", ["--skip-setup", "a", "b"]),
                       ("build_gpu_bundle.sh", ["--bundle"]), ("install_offline.sh", ["--venv", "x"])):
        done = subprocess.run(["bash", f"scripts/{name}", *args], cwd=clone, capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 2 and done.stderr.startswith(f"error: usage: bash scripts/{name} "), done.stderr
    assert sorted(clone.rglob("*")) == before
