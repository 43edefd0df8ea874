"""One-way layering, as Megatron keeps tools/ → core: data_prep may import
tacl_scale.data; nothing under tacl_scale/ (or kernels/) imports data_prep, not even
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
        for folder in ("tacl_scale", "kernels") for path in sorted((ROOT / folder).rglob("*.py"))
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_check_sees_imports_inside_functions(tmp_path: Path) -> None:
    sample = tmp_path / "x.py"
    sample.write_text("def f():\n    from data_prep.masking import mask_tokens\n    import data_prep.build\n")
    assert imported_modules(sample) == {"data_prep.masking", "data_prep.build"}
