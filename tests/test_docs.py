"""The documents' commands name only options that exist: every ``--flag`` given to
the training or dataset-build command in a shell block of the README or docs/ is
one that command's ``--help`` lists (Beam's own ``--snake_case`` options pass
through to the runner and are not checked here). And every relative link of the
documents points at a file of the repository."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import ROOT

DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# The command, by the names a document calls it, and the module whose parser it is.
COMMANDS = {"tacl_scale/train.py": "tacl_scale.train", "tacl_scale.train": "tacl_scale.train",
            "tacl-train": "tacl_scale.train", "data_prep.build": "data_prep.build",
            "tacl-build-dataset": "data_prep.build"}


def shell_commands(document: Path) -> list[str]:
    """The commands of a document's ```bash / ```sh blocks, continuation lines joined."""
    text = document.read_text(encoding="utf-8")
    commands = []
    for block in re.findall(r"```(?:bash|sh)\n(.*?)```", text, flags=re.S):
        commands += [line for line in block.replace("\\\n", " ").splitlines() if not line.lstrip().startswith("#")]
    return commands


def help_text(module: str, capsys: pytest.CaptureFixture[str]) -> str:
    if module == "tacl_scale.train":
        from tacl_scale.train import parse_args
    else:
        from data_prep.build import parse_args
    with pytest.raises(SystemExit):
        parse_args(["--help"])
    return capsys.readouterr().out


def test_documented_options_exist(capsys: pytest.CaptureFixture[str]) -> None:
    helps = {module: help_text(module, capsys) for module in set(COMMANDS.values())}
    checked, unknown = 0, []
    for document in DOCUMENTS:
        for command in shell_commands(document):
            for name, module in COMMANDS.items():
                if name not in command:
                    continue
                arguments = command.split(name, 1)[1].split("#")[0]
                for flag in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*(?![\w])", arguments):
                    checked += 1
                    if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", helps[module]):
                        unknown.append(f"{document.relative_to(ROOT)}: {name} {flag}")
                break
    assert checked > 50 and not unknown, unknown


def test_relative_links_point_into_the_repository() -> None:
    broken = []
    for document in DOCUMENTS:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", document.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+://|mailto:", target):
                continue
            path = (document.parent / target).resolve()
            if not path.exists() or not path.is_relative_to(ROOT):
                broken.append(f"{document.relative_to(ROOT)}: {target}")
    assert not broken, broken


def test_the_design_code_layout_names_every_module() -> None:
    """docs/design.md's code layout is where the next engineer finds a module's job:
    every module, benchmark and script must have its line, under its own folder (two
    ``config.py`` are two entries)."""
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    layout = text.split("## Code layout", 1)[1].split("```")[1]
    # A folder's section: from its unindented line to the next one.
    sections = dict(re.findall(r"^(\S+/)[ \t]+(.*?)(?=^\S|\Z)", layout, flags=re.S | re.M))
    missing = []
    for folder in ("data_prep/", "tacl_scale/", "benchmarks/", "scripts/", "slurm/", "experiments/"):
        section = sections.get(folder, "")
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix not in (".py", ".sh", ".txt") or path.name in ("__init__.py", "__main__.py"):
                continue
            if "data" in path.relative_to(ROOT / folder).parts[:-1] and folder == "data_prep/":
                continue  # the sample corpus's word lists, named as data/*.json
            if not re.search(rf"(?<![\w.-]){re.escape(path.name)}(?![\w])", section):
                missing.append(str(path.relative_to(ROOT)))
    assert sections.keys() >= {"data_prep/", "tacl_scale/"} and not missing, missing
