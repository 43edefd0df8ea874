"""Every command's ``--help`` reads the same way (``tacl_scale.cli``): its description
in plain text, a help line for every option, and each option's default stated once,
never "(default: None)"."""

from __future__ import annotations

import argparse
import importlib
import re
import subprocess
import sys

import pytest
from conftest import ROOT

from tacl_scale.cli import HelpFormatter, make_parser, plain_text


def _parsers_of_every_command(monkeypatch: pytest.MonkeyPatch) -> dict[str, argparse.ArgumentParser]:
    """Each console script's parser (and its subcommands'), caught as ``main(["--help"])``
    parses: the parsers are built inside ``main``, so this is the one way to reach them."""
    from conftest import pyproject

    caught: list[argparse.ArgumentParser] = []

    def catch(self: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        caught.append(self)
        raise SystemExit(0)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", catch)
    parsers = {}
    for name, target in pyproject()["project"]["scripts"].items():
        module, function = target.split(":")
        with pytest.raises(SystemExit):
            getattr(importlib.import_module(module), function)(["--help"])
        parser = caught.pop()
        parsers[name] = parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                parsers.update({f"{name} {sub}": p for sub, p in action.choices.items()})
    return parsers


def _rendered(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """One option's entry in ``--help``, as the parser's formatter writes it."""
    formatter = parser._get_formatter()
    formatter.add_argument(action)
    return formatter.format_help()


def test_every_command_states_each_default_once_in_plain_text(monkeypatch: pytest.MonkeyPatch) -> None:
    parsers = _parsers_of_every_command(monkeypatch)
    assert {"tacl-train", "tacl-build-dataset", "tacl-analyze selfsim"} <= parsers.keys()
    problems = []
    for name, parser in parsers.items():
        if parser.formatter_class is not HelpFormatter:
            problems.append(f"{name}: formatter {parser.formatter_class.__name__}, not tacl_scale.cli.HelpFormatter")
        whole = parser.format_help()
        for markup in ("``", ":class:`", ":func:`", ":mod:`", ":meth:`", "(default: None)", "(default: False)"):
            if markup in whole:
                problems.append(f"{name}: --help shows {markup!r}")
        for action in parser._actions:
            if action.help == argparse.SUPPRESS or isinstance(action, argparse._HelpAction):
                continue
            flag = "/".join(action.option_strings) or action.dest
            if not action.help:
                problems.append(f"{name} {flag}: no help")
            entry = _rendered(parser, action)
            mentions = len(re.findall(r"\bdefault\b", entry))
            has_value = (action.option_strings and action.nargs != 0
                         and action.default not in (None, argparse.SUPPRESS) and action.default is not False)
            if mentions > 1 or (has_value and mentions == 0):
                problems.append(f"{name} {flag}: default stated {mentions} times: {entry.strip()!r}")
    assert not problems, "\n".join(problems)


def test_the_train_help_shows_the_real_defaults_and_the_recipes(monkeypatch: pytest.MonkeyPatch) -> None:
    from tacl_scale.config import OptimConfig, TrainConfig

    parser = _parsers_of_every_command(monkeypatch)["tacl-train"]
    text = re.sub(r"\s+", " ", parser.format_help())
    assert f"optimizer steps (default: {OptimConfig.steps})" in text
    assert f"(default: {TrainConfig.seed})" in text
    assert "tiny-cpu: a few CPU ranks" in text
    assert "deepspeed tacl_scale/train.py --ds ds_configs/zero2.json" in text


def test_the_formatter_appends_a_default_only_where_there_is_a_value_to_state() -> None:
    parser = make_parser("tool", "A tool.\n\nIts second paragraph, ``kept`` apart.")
    parser.add_argument("--zero", type=int, default=0, help="a falsy value is still a value")
    parser.add_argument("--later", default=None, help="decided later")
    parser.add_argument("--explained", type=int, default=3, help="three (default: 3, or 1 with --flag)")
    parser.add_argument("--flag", action="store_true", help="a switch")
    parser.add_argument("--off", action="store_false", help="a switch the other way")
    parser.add_argument("--both", action=argparse.BooleanOptionalAction, default=True, help="on or off")
    text = parser.format_help()
    assert "A tool.\n\nIts second paragraph, kept apart." in text
    assert "a falsy value is still a value (default: 0)" in text
    assert "decided later\n" in text
    assert "three (default: 3, or 1 with --flag)\n" in text
    assert "a switch\n" in text and "a switch the other way\n" in text
    assert text.count("(default: True)") == 1  # --both; --off's True is its absence


@pytest.mark.parametrize(("docstring", "shown"), [
    ("a :class:`~tacl_scale.config.TrainConfig` once", "a TrainConfig once"),
    ("by :mod:`tacl_scale.distributed`", "by tacl_scale.distributed"),
    ("see :func:`the loss <tacl_scale.kernels.tacl_loss.tacl_loss>`", "see the loss"),
    ("``--resume`` continues, ``[CLS] A [SEP]``", "--resume continues, [CLS] A [SEP]"),
    ("  a glob 'runs/*.xml.bz2' stays  ", "a glob 'runs/*.xml.bz2' stays"),
])
def test_plain_text_unwraps_sphinx_markup(docstring: str, shown: str) -> None:
    assert plain_text(docstring) == shown


def test_every_command_says_its_version(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from tacl_scale import __version__

    parsers = _parsers_of_every_command(monkeypatch)
    monkeypatch.undo()  # parse for real
    for name, parser in parsers.items():
        if " " in name:
            continue  # a subcommand: the command says it
        with pytest.raises(SystemExit) as done:
            parser.parse_args(["--version"])
        assert done.value.code == 0 and capsys.readouterr().out == f"tacl-scale {__version__}\n", name


def test_a_usage_line_names_the_console_script_that_ran(monkeypatch: pytest.MonkeyPatch) -> None:
    """``tacl-export`` with a missing argument said "usage: python -m tacl_scale.export";
    a console script's usage names it, and the module form stays for ``python -m``."""
    from conftest import pyproject

    wrong = {}
    for name in pyproject()["project"]["scripts"]:
        monkeypatch.setattr("sys.argv", [f"/venv/bin/{name}"])
        prog = _parsers_of_every_command(monkeypatch)[name].prog
        if prog != name:
            wrong[name] = prog
    assert not wrong, wrong
    monkeypatch.setattr("sys.argv", ["/repo/tacl_scale/export.py"])
    parsers = _parsers_of_every_command(monkeypatch)
    assert parsers["tacl-export"].prog == "python -m tacl_scale.export"
    assert parsers["tacl-train"].prog == "deepspeed tacl_scale/train.py"
    assert parsers["tacl-analyze selfsim"].prog.startswith("python -m tacl_scale.analysis selfsim")


@pytest.mark.parametrize("args", [["--help"], ["--bogus"], ["--ds", "ds_configs/cpu.json", "--lr", "nan"]])
def test_train_settles_its_command_line_before_it_imports_the_training_stack(args: list[str]) -> None:
    """``--help`` and a refused flag took 4 s on 2 cores, importing transformers' models
    and DeepSpeed first: the command line is settled before them (torch alone is
    left, for the launch environment)."""
    probe = ("import sys\n"
             "from tacl_scale.train import main\n"
             "try:\n"
             "    code = main(sys.argv[1:])\n"
             "except SystemExit as done:\n"
             "    code = done.code\n"
             "heavy = sorted(m for m in ('transformers.modeling_utils', 'deepspeed') if m in sys.modules)\n"
             "print('RESULT', code, *heavy, file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", probe, *args], cwd=ROOT, capture_output=True, text=True, timeout=120)
    result = done.stderr.strip().splitlines()[-1]
    assert result == f"RESULT {0 if args == ['--help'] else 2}", done.stderr[-2000:]
