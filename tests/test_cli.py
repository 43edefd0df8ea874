"""Every command refuses bad input the same way: one ``error:`` line naming what is
wrong, and exit status 2 (``tacl_scale.EXIT_ERROR``, argparse's for a usage error)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tacl_scale import EXIT_ERROR


def _commands(tmp_path: Path) -> dict[str, tuple[Callable[[list[str]], int], list[str], str]]:
    from data_prep.build import main as build
    from data_prep.inspect import main as inspect
    from data_prep.multistream import main as multistream
    from data_prep.sentence_list import main as sentence_list
    from data_prep.train_vocab import main as train_vocab
    from tacl_scale.export import main as export

    missing = str(tmp_path / "missing.xml")
    return {
        "build": (build, ["--input", missing, "--tokenizer", missing, "--output", str(tmp_path / "out")], missing),
        "inspect": (inspect, [str(tmp_path)], "manifest.json"),
        "multistream": (multistream, [missing, str(tmp_path / "x-multistream.xml.bz2")], missing),
        "sentence_list": (sentence_list, ["--input", missing, "--output", str(tmp_path / "s.txt")], missing),
        "train_vocab": (train_vocab, ["--input", missing, "--output", str(tmp_path / "vocab.txt")], missing),
        "export": (export, [str(tmp_path), str(tmp_path / "export")], "run.json"),
    }


@pytest.mark.parametrize("name", ["build", "inspect", "multistream", "sentence_list", "train_vocab", "export"])
def test_a_refusal_is_one_error_line_and_exit_status_2(name: str, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    main, argv, named = _commands(tmp_path)[name]
    assert main(argv) == EXIT_ERROR == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and named in errors[0], errors


def test_every_console_script_is_a_command_with_help_and_in_the_readme(capsys: pytest.CaptureFixture[str]) -> None:
    """pyproject's console scripts name real ``main(argv)`` functions that answer
    ``--help``, and the README's table of commands lists each one."""
    import importlib

    from conftest import pyproject

    root = Path(__file__).resolve().parents[1]
    scripts = pyproject()["project"]["scripts"]
    readme = (root / "README.md").read_text(encoding="utf-8")
    assert {"tacl-build-dataset", "tacl-train", "tacl-export", "tacl-analyze"} <= scripts.keys()
    for name, target in scripts.items():
        module, function = target.split(":")
        main = getattr(importlib.import_module(module), function)
        with pytest.raises(SystemExit) as exit_:
            main(["--help"])
        assert exit_.value.code == 0, name
        assert "usage:" in capsys.readouterr().out, name
        assert f"`{name}`" in readme, name


@pytest.mark.parametrize("given", [None, "true"])
def test_the_build_turns_off_tokenizers_threads_unless_the_user_chose(given: str | None, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Its runner's workers are a process per core, which inherit the build's
    environment: Hugging Face tokenizers' thread per core in each would oversubscribe
    them. A value the user set stays."""
    from data_prep.build import main as build

    if given is None:
        monkeypatch.delenv("TOKENIZERS_PARALLELISM", raising=False)
    else:
        monkeypatch.setenv("TOKENIZERS_PARALLELISM", given)
    build(_commands(tmp_path)["build"][1])  # refused (missing input) after the environment is set
    assert os.environ["TOKENIZERS_PARALLELISM"] == (given or "false")
