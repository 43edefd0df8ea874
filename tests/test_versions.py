"""The versions the project claims are the versions it tests: pyproject.toml's
lower bounds of torch, triton, transformers and deepspeed are the pins of the GPU
image's tier (scripts/gpu_image_versions.txt), and that tier really runs them."""

from __future__ import annotations

import importlib.metadata
import os

import pytest
from conftest import ROOT, pyproject
from packaging.requirements import Requirement
from packaging.version import Version

pytestmark = pytest.mark.framework  # also run on the GPU image's versions (scripts/test.sh --gpu-image)


def gpu_image_pins() -> dict[str, Version]:
    pins = {}
    for line in (ROOT / "scripts" / "gpu_image_versions.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#")[0].strip()
        if line:
            requirement = Requirement(line)
            (spec,) = requirement.specifier
            assert spec.operator == "==", line
            pins[requirement.name] = Version(spec.version)
    return pins


def test_pyproject_lower_bounds_are_the_tested_gpu_image_versions() -> None:
    project = pyproject()["project"]
    lower = {}
    # the base and the extras (torch, triton and deepspeed come with [train])
    for line in [*project["dependencies"], *(x for extra in project["optional-dependencies"].values() for x in extra)]:
        requirement = Requirement(line)
        bounds = [Version(s.version) for s in requirement.specifier if s.operator == ">="]
        if bounds:
            lower[requirement.name] = bounds[0]
    pins = gpu_image_pins()
    assert set(pins) == {"torch", "triton", "transformers", "deepspeed"}
    for name, version in pins.items():
        assert lower[name] == version, f"pyproject.toml: {name}>={lower[name]}, the GPU-image tier tests {version}"


@pytest.mark.skipif(os.environ.get("TACL_TIER") != "gpu-image", reason="only in scripts/test.sh --gpu-image")
def test_the_gpu_image_tier_runs_the_pinned_versions() -> None:
    for name, version in gpu_image_pins().items():
        installed = Version(importlib.metadata.version(name))
        assert installed.release == version.release, f"{name} {installed} installed, {version} pinned"
