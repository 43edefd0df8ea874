"""The install extras match the two kinds of node: ``tacl-scale[prep]`` builds
datasets (Apache Beam and the parsers; no torch, DeepSpeed or Triton) and
``tacl-scale[train]`` trains (torch, DeepSpeed, Triton; no Beam), over a base both
share (the dataset format, the tokenizers). The extras are checked against what the
code imports: every third-party module that ``data_prep`` reaches, through the
``tacl_scale`` modules it imports too, comes with the base or ``[prep]``, and every
one that ``tacl_scale`` imports comes with the base or ``[train]``; imports inside
functions count, since they run on the node as well."""

from __future__ import annotations

import ast
import importlib.metadata
import sys
from pathlib import Path

from conftest import ROOT, pyproject
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

OURS = ("data_prep", "tacl_scale")
PREP_ONLY = {"apache-beam", "mwparserfromhell", "blingfire", "jieba", "opencc"}
TRAIN_ONLY = {"torch", "deepspeed", "triton", "tensorboard", "matplotlib"}


def requirements(*extras: str, base: bool = True) -> set[str]:
    """The distributions ``pip install tacl-scale[EXTRAS]`` asks for, by canonical
    name (``base=False``: without the base); an extra that names ``tacl-scale[...]``
    brings those extras' too."""
    project = pyproject()["project"]
    lines = [*(project["dependencies"] if base else []),
             *(line for extra in extras for line in project["optional-dependencies"][extra])]
    names = set()
    for line in lines:
        requirement = Requirement(line)
        if canonicalize_name(requirement.name) == canonicalize_name(project["name"]):
            names |= requirements(*sorted(requirement.extras), base=False)
        else:
            names.add(canonicalize_name(requirement.name))
    return names


def test_prep_and_train_extras_hold_their_node_kind_only() -> None:
    extras = pyproject()["project"]["optional-dependencies"]
    assert {"prep", "train", "dev"} <= set(extras)
    prep, train = requirements("prep"), requirements("train")
    assert not prep & TRAIN_ONLY, f"[prep] pulls training's {sorted(prep & TRAIN_ONLY)}"
    assert not train & PREP_ONLY, f"[train] pulls data preparation's {sorted(train & PREP_ONLY)}"
    assert prep >= PREP_ONLY and train >= TRAIN_ONLY
    base = requirements()
    assert not base & (PREP_ONLY | TRAIN_ONLY), "the base holds what both kinds of node share, only"
    # dev (what scripts/setup.sh installs) is everything: both kinds and the test tools.
    assert prep | train | requirements("test") <= requirements("dev")
    assert {"pytest", "ruff"} <= requirements("dev")


def test_the_requirement_reader_follows_self_references() -> None:
    assert requirements("dev", base=False) >= requirements("test", base=False) >= {"pytest"}
    assert "tacl-scale" not in requirements("dev")


def module_file(name: str) -> Path | None:
    """The file of one of our modules (a package's ``__init__.py``), or None."""
    path = ROOT.joinpath(*name.split("."))
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    return path.with_suffix(".py") if path.with_suffix(".py").is_file() else None


def imports_of(path: Path) -> set[str]:
    """Every module ``path`` imports, at module level or inside a function, as an
    absolute dotted name (``from . import x`` resolved against the module's package)."""
    package = list(path.relative_to(ROOT).parts[:-1])  # a module's package; an __init__.py's own
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                stem = ".".join([*base, node.module] if node.module else base)
            else:
                stem = node.module or ""
            names.add(stem)
            names |= {f"{stem}.{alias.name}" for alias in node.names}  # ``from pkg import module``
    return names


def third_party_reached(*roots: str) -> dict[str, set[str]]:
    """The top-level third-party modules imported by every module under ``roots``
    and by each of our modules they import (and its packages' ``__init__``), by the
    file that imports them."""
    todo = [p for root in roots for p in sorted((ROOT / root).rglob("*.py"))]
    seen: set[Path] = set()
    found: dict[str, set[str]] = {}
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for name in imports_of(path):
            top = name.split(".")[0]
            if top in OURS:
                parts = name.split(".")
                for k in range(1, len(parts) + 1):  # the package's __init__ runs first
                    file = module_file(".".join(parts[:k]))
                    if file is not None:
                        todo.append(file)
            elif top and top not in sys.stdlib_module_names:
                found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


def distribution_of(module: str) -> str:
    """The distribution that installs a top-level module (its own name where none
    here does)."""
    provided = importlib.metadata.packages_distributions().get(module, [])
    return canonicalize_name(provided[0] if provided else module)


def unlisted(reached: dict[str, set[str]], listed: set[str]) -> dict[str, list[str]]:
    return {f"{module} ({distribution_of(module)})": sorted(files) for module, files in reached.items()
            if distribution_of(module) not in listed}


def test_data_prep_needs_the_base_and_prep_only() -> None:
    reached = third_party_reached("data_prep")
    assert "apache_beam" in reached and "numpy" in reached  # the walk sees both kinds of import
    assert not {"torch", "deepspeed", "triton"} & set(reached), {m: reached[m] for m in
                                                                 {"torch", "deepspeed", "triton"} & set(reached)}
    assert unlisted(reached, requirements("prep", "dask")) == {}


def test_training_needs_the_base_and_train_only() -> None:
    reached = third_party_reached("tacl_scale")
    assert {"torch", "deepspeed", "triton"} <= set(reached)
    assert "apache_beam" not in reached, reached.get("apache_beam")
    assert unlisted(reached, requirements("train")) == {}


def test_the_import_walk_follows_our_modules_and_resolves_relative_imports() -> None:
    # data_prep/inspect.py imports tacl_scale.data, whose __init__ imports .dataset (numpy)
    assert "tacl_scale.data.dataset" in imports_of(ROOT / "tacl_scale" / "data" / "__init__.py")
    reached = third_party_reached("data_prep")
    assert any(f.startswith("tacl_scale/data/") for f in reached["numpy"])
    assert "tacl_scale/data/integrity.py" in reached["xxhash"]  # imported inside a function


def test_a_module_is_named_by_the_distribution_that_installs_it() -> None:
    assert distribution_of("apache_beam") == "apache-beam"
    assert distribution_of("yaml") == "pyyaml"  # transformers' dependency: installed here
    assert distribution_of("not_installed_here") == "not-installed-here"
    assert unlisted({"apache_beam": {"tacl_scale/x.py"}}, requirements("train")) == {
        "apache_beam (apache-beam)": ["tacl_scale/x.py"]}
