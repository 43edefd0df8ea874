"""One-way layering, as Megatron keeps tools/ → core: data_prep may import
tacl_scale.data; nothing under tacl_scale/ (its Triton kernels included) imports data_prep, not even
inside a function."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT


def imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_training_never_imports_data_prep() -> None:
    offenders = {
        str(path.relative_to(ROOT)): sorted(m for m in imported_modules(path) if m.split(".")[0] == "data_prep")
        for path in sorted((ROOT / "tacl_scale").rglob("*.py"))
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_check_sees_imports_inside_functions(tmp_path: Path) -> None:
    sample = tmp_path / "x.py"
    sample.write_text("def f():\n    from data_prep.masking import mask_tokens\n    import data_prep.build\n")
    assert imported_modules(sample) == {"data_prep.masking", "data_prep.build"}


def test_no_top_level_package_shadows_an_installed_one() -> None:
    """A top-level package of ours named like another distribution's (a ``kernels/``
    beside Hugging Face's ``kernels``, which transformers ≥ 5.25 imports) would be
    imported in its place whenever the repository root is on sys.path."""
    import importlib.metadata

    ours = {p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file()}
    assert ours >= {"tacl_scale", "data_prep"}
    provided = importlib.metadata.packages_distributions()
    clashes = {name: provided[name] for name in ours
               if any(dist.lower().replace("_", "-") != "tacl-scale" for dist in provided.get(name, []))}
    assert clashes == {}


def manifest_reads_by_key(path: Path) -> list[int]:
    """Lines of ``manifest[...]`` and ``manifest.get(...)`` (on anything named
    ``manifest``) in a file: reads of the JSON by string key."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        target = None
        if isinstance(node, ast.Subscript):
            target = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            target = node.func.value
        name = target.id if isinstance(target, ast.Name) else target.attr if isinstance(target, ast.Attribute) else ""
        if "manifest" in name:
            lines.append(node.lineno)
    return lines


def test_the_manifest_is_read_through_its_dataclass_only() -> None:
    """Outside ``Manifest.from_json`` nothing reads a manifest by string key: the
    defaults of older versions live in one place."""
    sources = [p for folder in ("tacl_scale", "data_prep", "benchmarks", "experiments")
               for p in sorted((ROOT / folder).rglob("*.py")) if p != ROOT / "tacl_scale" / "data" / "manifest.py"]
    assert [f"{p.relative_to(ROOT)}:{line}" for p in sources for line in manifest_reads_by_key(p)] == []


def test_the_key_read_check_finds_them(tmp_path: Path) -> None:
    sample = tmp_path / "x.py"
    sample.write_text("a = ds.manifest['tokenizer']\nb = manifest.get('warnings', [])\nc = manifest.tokenizer\n")
    assert manifest_reads_by_key(sample) == [1, 2]
