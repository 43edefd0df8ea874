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
