"""What every tacl-scale command's ``--help`` looks like, shared by data preparation,
training and their tools: the module docstring as the description, in plain text
with its line breaks kept, and each option's default shown once.

argparse's own ``ArgumentDefaultsHelpFormatter`` appends "(default: None)" to options
whose default is decided later (by the recipe, the GPU, the dataset) and a second
default to options whose help already explains theirs, and it reflows the
description into one paragraph. :class:`HelpFormatter` does neither.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import Any, NoReturn

from tacl_scale import EXIT_ERROR, __version__

# :class:`~pkg.mod.Name`, :mod:`pkg.mod`, :func:`label <target>` (Sphinx roles)
_ROLE = re.compile(r":[a-z]+:`(~?)([^`<]*?)\s*(?:<[^>`]*>)?`")
_LITERAL = re.compile(r"``(.+?)``", re.S)


def error_exit(message: str) -> int:
    """Say ``error: MESSAGE`` on stderr and return the exit status of a command that
    failed or refused its input (:data:`tacl_scale.EXIT_ERROR`)."""
    print(f"error: {message}", file=sys.stderr)
    return EXIT_ERROR


def plain_text(docstring: str) -> str:
    """A reST docstring as a terminal shows it: Sphinx roles become their name (the
    last component after ``~``) and literals lose their double backquotes."""

    def role(match: re.Match[str]) -> str:
        name = match.group(2)
        return name.rsplit(".", 1)[-1] if match.group(1) else name

    return _LITERAL.sub(r"\1", _ROLE.sub(role, docstring)).strip()


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the description's line breaks and appends "(default: X)" to an option's
    help only where X is a value (not ``None`` or ``False``, which mean "decided
    later" and "off"), the option takes one (a flag's default is its absence) and
    the help does not already say what the default is."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help
        is_flag = action.nargs == 0 and not isinstance(action, argparse.BooleanOptionalAction)
        if (not text or not action.option_strings or is_flag or "default" in text or action.default is None
                or action.default is False or action.default is argparse.SUPPRESS):
            return text
        return f"{text} (default: %(default)s)"


class UsageError(Exception):
    """A command line the parser refused, with argparse's message (``argument --steps:
    invalid int value: 'x'``), raised for the command to report instead of printed."""


class RaisingParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose refusals raise :class:`UsageError`. For
    ``tacl-train``: every rank of a launch parses the same flags, and argparse's
    usage block (35 lines there) would be printed by each; its ``main`` says the
    error once, in one line, as every other refusal."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def command_name(module_form: str, argv0: str) -> str:
    """The name a usage line shows: the console script the user typed
    (``tacl-export``, argv0 ``.../bin/tacl-export``), else ``module_form``
    (``python -m tacl_scale.export``), which argparse would show as ``export.py``."""
    script = os.path.basename(argv0)
    return script if script.startswith("tacl-") else module_form


def make_parser(prog: str, docstring: str | None, raise_errors: bool = False,
                **kwargs: Any) -> argparse.ArgumentParser:
    """An ``ArgumentParser`` for a tacl-scale command: ``docstring`` (the module's) as
    its plain-text description, :class:`HelpFormatter` for its options, and
    ``--version``; with ``raise_errors``, a :class:`RaisingParser`. ``prog`` is how
    the module is run without its console script; the usage line names the console
    script instead when that is what ran."""
    parser_class = RaisingParser if raise_errors else argparse.ArgumentParser
    parser = parser_class(prog=command_name(prog, sys.argv[0]), description=plain_text(docstring or ""),
                          formatter_class=HelpFormatter, **kwargs)
    parser.add_argument("--version", action="version", version=f"tacl-scale {__version__}")
    return parser
