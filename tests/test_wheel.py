"""The distribution works outside the checkout: ``python -m build`` makes the sdist
and, from it, the wheel; the wheel installs into a fresh virtualenv (its
dependencies seen from this test environment, so no network) and its console
scripts run from another directory, importing the installed package, not this
checkout: a tiny dataset build from a generated corpus, the training, export and
analysis commands' help."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest
from conftest import ROOT

pytestmark = pytest.mark.slow

SCRIPTS = ["tacl-build-dataset", "tacl-inspect-dataset", "tacl-sample-corpus", "tacl-train-vocab",
           "tacl-sentence-list", "tacl-multistream", "tacl-train", "tacl-export", "tacl-analyze"]


def checkout_files() -> list[str]:
    """The checkout's files as a clone has them: tracked, and new ones git does not ignore."""
    if not (ROOT / ".git").exists():
        pytest.skip(f"{ROOT} is not a git checkout: the sdist is built from a copy of its files, which git lists")
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True, timeout=60).stdout.decode()
    return [name for name in listed.split("\0") if name and (ROOT / name).is_file()]


def build_outputs(directory: Path) -> dict[str, int]:
    """What a build of ``directory`` writes into it (``*.egg-info/``, ``build/``,
    ``dist/`` and what they hold), with modification times. (Not the whole checkout:
    the tests' own temporary directory and caches may lie in it, under ``.cache/``.)"""
    made = [*directory.glob("*.egg-info"), directory / "build", directory / "dist"]
    found = [path for top in made if top.exists() for path in (top, *top.rglob("*"))]
    return {str(path.relative_to(directory)): path.lstat().st_mtime_ns for path in found}


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist and the wheel, built from a copy of the checkout: setuptools' sdist
    rewrites ``<source>/*.egg-info`` whatever ``--outdir`` says, and the tests change
    nothing outside their temporary directory."""
    source, out = tmp_path_factory.mktemp("source"), tmp_path_factory.mktemp("dist")
    for name in checkout_files():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, source / name)
    before = build_outputs(ROOT)
    built = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(source)],
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    changed = {name for name, mtime in build_outputs(ROOT).items() if before.get(name) != mtime}
    assert not changed, f"the build wrote into the checkout: {sorted(changed)}"
    return out


@pytest.fixture(scope="module")
def venv(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel installed; this environment's site-packages on
    its path after its own (plain path entries: the checkout's editable install
    there is not picked up)."""
    venv = tmp_path_factory.mktemp("venv") / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    ours = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    Path(site, "_test_env.pth").write_text("".join(p + "\n" for p in sorted(ours)), encoding="utf-8")
    wheel = next(dist.glob("*.whl"))
    installed = subprocess.run([str(python), "-m", "pip", "install", "--no-deps", "--no-index", "--no-compile",
                                "--disable-pip-version-check", str(wheel)], capture_output=True, text=True,
                               timeout=300)
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    return venv


def run(venv: Path, command: list[str], cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def test_the_sdist_and_the_wheel_hold_the_package(dist: Path) -> None:
    sdist = next(dist.glob("*.tar.gz"))
    with tarfile.open(sdist) as tar:
        names = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    assert {"LICENSE", "README.md", "pyproject.toml", "tacl_scale/trainer.py", "data_prep/build.py",
            "data_prep/sample_corpus/data/en.json"} <= names
    with zipfile.ZipFile(next(dist.glob("*.whl"))) as wheel:
        files = set(wheel.namelist())
        metadata = wheel.read(next(n for n in files if n.endswith(".dist-info/METADATA"))).decode()
        entry_points = wheel.read(next(n for n in files if n.endswith(".dist-info/entry_points.txt"))).decode()
    assert {"tacl_scale/kernels/tacl_triton.py", "data_prep/sample_corpus/data/zh.json"} <= files
    assert not any(name.startswith("tests/") for name in files)
    assert "License-Expression: Apache-2.0" in metadata or "License: Apache-2.0" in metadata
    assert any(name.endswith("licenses/LICENSE") or name.endswith(".dist-info/LICENSE") for name in files)
    for script in SCRIPTS:
        assert f"{script} = " in entry_points


def test_the_installed_commands_run_outside_the_checkout(venv: Path, tmp_path: Path) -> None:
    python = str(venv / "bin" / "python")
    where = run(venv, [python, "-c", "import data_prep, tacl_scale; print(tacl_scale.__file__, data_prep.__file__)"],
                tmp_path)
    assert where.returncode == 0, where.stderr[-2000:]
    imported = [Path(file) for file in where.stdout.split()]
    # the venv's copies, not the checkout's sources (the venv may lie inside the
    # checkout: scripts/test.sh keeps the tests' temporary directory there)
    assert len(imported) == 2 and all(file.is_relative_to(venv) for file in imported), where.stdout
    assert not any(file.is_relative_to(ROOT / package) for file in imported for package in ("tacl_scale", "data_prep"))
    for script in SCRIPTS:
        helped = run(venv, [script, "--help"], tmp_path)
        assert helped.returncode == 0 and "usage:" in helped.stdout, (script, helped.stderr[-2000:])
    for module in ("tacl_scale.train", "tacl_scale.export"):
        helped = run(venv, [python, "-m", module, "--help"], tmp_path)
        assert helped.returncode == 0 and "usage:" in helped.stdout, (module, helped.stderr[-2000:])
    steps = [["tacl-sample-corpus", "corpus/en.xml.bz2", "--articles", "20"],
             ["tacl-train-vocab", "--input", "corpus/*.xml.bz2", "--vocab-size", "2000", "--output", "vocab.txt"],
             ["tacl-build-dataset", "--input", "corpus/*.xml.bz2", "--tokenizer", "vocab.txt", "--output", "ds",
              "--max-seq-len", "64", "--num-shards", "1", "--quiet"],
             ["tacl-inspect-dataset", "ds"]]
    for step in steps:
        done = run(venv, step, tmp_path)
        assert done.returncode == 0, (step, done.stdout[-2000:], done.stderr[-2000:])
    assert (tmp_path / "ds" / "manifest.json").is_file() and list((tmp_path / "ds").glob("shard-00000.bin"))
    assert "instances" in done.stdout
