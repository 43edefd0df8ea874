"""One-way layering, as Megatron keeps tools/ → core: data_prep may import
tacl_scale.data and a few shared helpers; nothing under tacl_scale/ (its Triton kernels included) imports data_prep, not even
inside a function."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Callable
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


# What data_prep may import of tacl_scale beside tacl_scale.data: helpers that need
# nothing of the training stack (docs/design.md, "Layering").
SHARED_WITH_DATA_PREP = {"tacl_scale", "tacl_scale.cli", "tacl_scale.files", "tacl_scale.locking",
                         "tacl_scale.markers", "tacl_scale.preemption", "tacl_scale.vocab"}


def test_data_prep_imports_only_the_data_layer_and_the_shared_helpers() -> None:
    offenders = {
        str(path.relative_to(ROOT)): sorted(m for m in imported_modules(path)
                                            if m.split(".")[0] == "tacl_scale" and m not in SHARED_WITH_DATA_PREP
                                            and not (m == "tacl_scale.data" or m.startswith("tacl_scale.data.")))
        for path in sorted((ROOT / "data_prep").rglob("*.py"))
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_data_prep_and_the_shared_helpers_load_nothing_of_the_training_stack() -> None:
    """Imported in a fresh interpreter, every data_prep module and shared helper
    leaves torch, deepspeed and transformers unloaded (a Beam worker would pay
    seconds for each). Checked by what Python loads, not by reading the sources: a
    helper's relative import of the training stack (``from .model import ...``) is
    reached through the package, which a per-file reading of absolute imports missed."""
    modules = sorted(SHARED_WITH_DATA_PREP | {"tacl_scale.data"}
                     | {".".join(path.relative_to(ROOT).with_suffix("").parts)
                        for path in (ROOT / "data_prep").rglob("*.py") if path.name != "__main__.py"})
    probe = ("import importlib, json, sys\n"
             "for name in sys.argv[1:]:\n"
             "    importlib.import_module(name.removesuffix('.__init__'))\n"
             "print(json.dumps(sorted(m for m in ('torch', 'deepspeed', 'transformers') if m in sys.modules)))\n")
    done = subprocess.run([sys.executable, "-c", probe, *modules], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.splitlines()[-1]) == [], modules


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


def key_reads(tree: ast.AST, is_record: Callable[[str], bool]) -> list[int]:
    """Lines of ``x[...]`` and ``x.get(...)`` in a syntax tree where ``x`` is a
    name or attribute for which ``is_record(name)``: reads of a JSON record by key."""
    lines = []
    for node in ast.walk(tree):
        target = None
        if isinstance(node, ast.Subscript):
            target = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            target = node.func.value
        name = target.id if isinstance(target, ast.Name) else target.attr if isinstance(target, ast.Attribute) else ""
        if name and is_record(name):
            lines.append(node.lineno)
    return sorted(lines)


def manifest_reads_by_key(path: Path) -> list[int]:
    """Reads by key of anything named ``manifest``."""
    return key_reads(ast.parse(path.read_text(encoding="utf-8"), str(path)), lambda name: "manifest" in name)


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


def run_record_reads(path: Path) -> list[int]:
    """Lines that name ``run.json`` in code (a string constant, not a docstring's
    mention) or read a run record by key (on a name ``run``, ``record``,
    ``run_info``, ...): what only tacl_scale/run_dir.py may do."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    named = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Constant) and node.value == "run.json"]
    records = ("run", "record", "run_info", "run_record", "saved_run")
    return sorted(named + key_reads(tree, lambda name: name in records))


def test_run_json_is_read_through_its_record_only() -> None:
    """Outside ``tacl_scale/run_dir.py`` no code names ``run.json`` or reads a run
    record by key: its versions' defaults live in ``RunRecord.from_json``. (The name
    itself is ``tacl_scale/markers.py``'s, which data_prep may import.)"""
    owners = {ROOT / "tacl_scale" / "run_dir.py", ROOT / "tacl_scale" / "markers.py"}
    sources = [p for folder in ("tacl_scale", "benchmarks", "experiments")
               for p in sorted((ROOT / folder).rglob("*.py")) if p not in owners]
    assert [f"{p.relative_to(ROOT)}:{line}" for p in sources for line in run_record_reads(p)] == []


def test_the_run_record_check_finds_them(tmp_path: Path) -> None:
    sample = tmp_path / "x.py"
    sample.write_text('"""run.json is mentioned here."""\npath = run_dir / "run.json"\nm = run["config"]\n'
                      'n = record.get("history")\nk = record.history\n')
    assert sorted(run_record_reads(sample)) == [2, 3, 4]


def qualified_imports(path: Path, package: str) -> set[str]:
    """Every module ``path`` (a module of ``package``) imports, relative imports
    resolved, and each name taken from a module as that module's attribute (``from .
    import analysis`` gives ``tacl_scale.analysis``): a superset, which is what a
    check of what must never be imported wants."""
    parts = package.split(".")
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = parts[: len(parts) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            names |= {module} | {f"{module}.{alias.name}" for alias in node.names}
    return names


def test_training_never_imports_the_analysis_command() -> None:
    """Training's evaluation needs Eq. 3 (tacl_scale.similarity), not the command."""
    for path in sorted((ROOT / "tacl_scale").rglob("*.py")):
        package = ".".join(path.relative_to(ROOT).parent.parts)
        if path.name != "analysis.py":
            assert "tacl_scale.analysis" not in qualified_imports(path, package), path


def test_the_analysis_check_sees_every_form_of_import(tmp_path: Path) -> None:
    forms = {"from . import analysis": "tacl_scale", "from tacl_scale import analysis": "tacl_scale",
             "from .analysis import main": "tacl_scale", "from ..analysis import main": "tacl_scale.data",
             "import tacl_scale.analysis": "tacl_scale"}
    for line, package in forms.items():
        sample = tmp_path / "x.py"
        sample.write_text(f"def f():\n    {line}\n")
        assert "tacl_scale.analysis" in qualified_imports(sample, package), line
