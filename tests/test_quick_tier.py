"""The quick tier's promise: ``scripts/test.sh --quick`` runs ``-m "not slow and not
cluster"``, and no test it runs builds a dataset, runs a Beam pipeline, trains,
starts a process or builds the wheel. conftest marks such tests ``slow`` by what they
use (``why_slow``); these tests check that the check sees what it must, and that
every test it flags among those collected beside them (the whole suite in every
tier) carries the mark."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, slow_names, why_slow


def test_probe_that_starts_a_process() -> None:
    """Marked ``slow`` by nothing but conftest (it starts a process): the test below
    checks that the quick tier's selection leaves it out."""
    assert subprocess.run(["true"], check=False).returncode == 0


def test_the_quick_tiers_selection_leaves_out_what_conftest_finds_slow() -> None:
    """Collected as ``scripts/test.sh --quick`` selects (``-m "not slow and not
    cluster"``), in a pytest of its own: the probe above (starts a process) and a test
    on the built dataset (fixture ``zh_dataset``), neither marked by hand, are
    deselected; the pure tests beside them are kept. This fails if conftest's marks
    came after ``-m`` deselects, or missed a kind of slow test."""
    quick = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                            "-m", "not slow and not cluster", "tests/test_quick_tier.py", "tests/test_cli.py"],
                           cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert quick.returncode == 0, quick.stdout[-3000:] + quick.stderr[-3000:]
    selected = set(quick.stdout.split())
    # The tests named below exist (a renamed one would make "not in" pass for nothing).
    assert "def test_inspect_refuses_instances_the_dataset_does_not_hold(" in (ROOT / "tests" / "test_cli.py").read_text()
    assert "tests/test_quick_tier.py::test_probe_that_starts_a_process" not in selected
    assert "tests/test_cli.py::test_inspect_refuses_instances_the_dataset_does_not_hold" not in selected
    assert "tests/test_quick_tier.py::test_the_quick_tier_deselects_the_slow_tests" in selected
    assert "tests/test_cli.py::test_every_console_script_is_a_command_with_help_and_in_the_readme" in selected


def test_the_quick_tier_deselects_the_slow_tests() -> None:
    script = (ROOT / "scripts" / "test.sh").read_text(encoding="utf-8")
    assert "--quick) TIER=quick" in script
    assert '-m "not slow and not cluster"' in script.split("quick_tier() {", 1)[1].split("}", 1)[0]


# The check itself, on functions written for it (this module's tests name the slow
# calls without making them; the check above passes over them).

def _builds(tmp_path: Path) -> None:
    from conftest import build_dataset

    build_dataset(tmp_path)


def _calls_a_helper_that_builds(tmp_path: Path) -> None:
    _builds(tmp_path)


def _starts_a_process() -> None:
    import subprocess

    subprocess.run(["true"], check=True)


def _pure(values: list[int]) -> int:
    return sum(values)


def test_the_check_sees_calls_through_helpers_and_inside_functions() -> None:
    assert slow_names(_builds) == {"build_dataset"}
    assert slow_names(_calls_a_helper_that_builds) == {"build_dataset"}
    assert slow_names(_starts_a_process) == {"subprocess"}
    assert slow_names(_pure) == set()

    def spawns() -> None:
        import torch.multiprocessing as mp

        mp.spawn(print, nprocs=2)

    assert {"spawn", "torch.multiprocessing"} <= slow_names(spawns)


def test_a_test_on_the_built_dataset_is_slow_and_a_pure_one_beside_it_is_not(
        request: pytest.FixtureRequest) -> None:
    this = next(item for item in request.session.items if item.name == request.node.name)
    assert why_slow(this) == [] and this.get_closest_marker("slow") is None
    on_the_dataset = [item for item in request.session.items if "zh_dataset" in getattr(item, "fixturenames", ())]
    if not on_the_dataset:  # --quick deselected them, or this file ran alone
        pytest.skip("no test on the built dataset (fixture zh_dataset) collected beside this one to check")
    for item in on_the_dataset:
        assert "fixture zh_dataset" in why_slow(item) and item.get_closest_marker("slow") is not None
