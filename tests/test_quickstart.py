"""The README's main job (scripts/quickstart.sh) in its fast form, and the small
commands it uses."""

from __future__ import annotations

import bz2
import contextlib
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import EN_DUMP, ROOT, free_port

from data_prep.inputs import plan_work_units
from data_prep.multistream import main as multistream_main
from data_prep.sources import read_wiki_pages
from data_prep.train_vocab import main as train_vocab_main
from tacl_scale.data import PretrainDataset

pytestmark = pytest.mark.framework  # also run on the GPU image's versions (scripts/test.sh --gpu-image)


@pytest.mark.slow
def test_quickstart_runs_end_to_end(tmp_path: Path) -> None:
    # Its own port: the launcher's default (29500) may be held by another job on the host, as it is
    # here (held by this test, unless something else already holds it).
    env = dict(os.environ, PY=sys.executable, MASTER_PORT=str(free_port()))
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as default_port:
        with contextlib.suppress(OSError):
            default_port.bind(("127.0.0.1", 29500))
            default_port.listen()
        res = subprocess.run(["bash", "scripts/quickstart.sh", "--skip-setup", str(tmp_path / "qs")],
                             cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "instances" in res.stdout and "[CLS]" in res.stdout
    ds = PretrainDataset(tmp_path / "qs" / "dataset")
    # The small-shard warnings are shown once (in the summary), not again by the build.
    shown = (res.stdout + res.stderr).count("random B segments come from these only")
    assert shown == len(ds.manifest.warnings) > 0
    assert ds.manifest.train.num_shards == 2 and len(ds) > 500
    assert len(PretrainDataset(tmp_path / "qs" / "dataset", split="validation")) > 0  # evaluated at step 30
    # The generated dump exercises the filters.
    skips = ds.manifest.skips
    assert skips["redirect"] > 0 and skips["not_article_namespace"] > 0 and skips["empty_page"] == 1
    # ... then trained through the deepspeed launcher and exported.
    assert "step 30/30" in res.stdout and "TensorBoard:" in res.stdout
    from transformers import BertForPreTraining

    model = BertForPreTraining.from_pretrained(tmp_path / "qs" / "run" / "export")
    assert model.config.vocab_size == ds.manifest.tokenizer.vocab_size
    # ... and analysed against the initial model.
    analysis = tmp_path / "qs" / "analysis"
    report = json.loads((analysis / "selfsim.json").read_text())
    assert list(report["models"]) == ["initial", "run"] and len(report["models"]["run"]) == 3
    assert (analysis / "selfsim_by_layer.png").stat().st_size > 1000 and list(analysis.glob("heatmap_*.png"))
    assert (tmp_path / "qs" / ".tacl-quickstart").is_file()  # a run again replaces it
    # Without its marker (a quickstart's folder from before there was one) the folder, as this run left it,
    # is still the quickstart's own: past the check, the stand-in python is what stops the run again.
    (tmp_path / "qs" / ".tacl-quickstart").unlink()
    again = subprocess.run(["bash", "scripts/quickstart.sh", "--skip-setup", str(tmp_path / "qs")], cwd=ROOT,
                           env=dict(env, PY=str(tmp_path / "no-python")), capture_output=True, text=True, timeout=60)
    assert "no-python" in again.stderr and "did not write" not in again.stderr, again.stderr


def test_quickstart_replaces_only_its_own_output(tmp_path: Path) -> None:
    """It removed ``OUT_DIR/run`` and overwrote the dataset, vocabulary and analysis in
    whatever folder it was given (``~/experiments/run`` would have gone), and a
    relative OUT_DIR was taken from the checkout, not from where it was typed."""
    work = tmp_path / "experiments"
    (work / "run").mkdir(parents=True)
    (work / "run" / "mine.txt").write_text("kept")
    env = dict(os.environ, PY=str(tmp_path / "no-python"))  # nothing past the check may run
    res = subprocess.run(["bash", str(ROOT / "scripts/quickstart.sh"), "--skip-setup", "experiments"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and (work / "run" / "mine.txt").read_text() == "kept"
    assert res.stderr == (f"error: {work} holds files the quickstart did not write (no .tacl-quickstart): name an "
                          "empty or new folder\n")
    assert sorted(p.name for p in work.iterdir()) == ["run"]
    # A quickstart's output from before the marker is its own still (its config file and only its names):
    # past the check, the stand-in python is what stops it.
    earlier = tmp_path / "earlier"
    for name in ("corpus", "dataset", "run", "analysis"):
        (earlier / name).mkdir(parents=True)
    for name in ("bert-tiny.json", "vocab.txt", "build.log", "dataset.build.log", "sentences.txt"):
        (earlier / name).write_text("{}")
    before = sorted(p.name for p in earlier.iterdir())
    res = subprocess.run(["bash", str(ROOT / "scripts/quickstart.sh"), "--skip-setup", str(earlier)], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and res.stderr.startswith(f"error: PY={tmp_path / 'no-python'}: "), res.stderr
    assert sorted(p.name for p in earlier.iterdir()) == before  # refused before anything is written


def test_without_a_python_it_stops_before_writing_anything(tmp_path: Path) -> None:
    """``--skip-setup`` in a checkout without .venv failed at step 1 with ".venv/bin/python:
    No such file or directory" (exit 127), its marker already written; with a virtualenv
    active and no .venv, that virtualenv's python is the default."""
    checkout = tmp_path / "checkout"
    (checkout / "scripts").mkdir(parents=True)
    for name in ("quickstart.sh", "usage.sh"):
        (checkout / "scripts" / name).write_text((ROOT / "scripts" / name).read_text(encoding="utf-8"))
    env = {k: v for k, v in os.environ.items() if k not in ("PY", "VIRTUAL_ENV")}
    out = tmp_path / "out"
    res = subprocess.run(["bash", str(checkout / "scripts" / "quickstart.sh"), "--skip-setup", str(out)],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert (res.returncode, res.stderr) == (2, "error: PY=.venv/bin/python: not a python with tacl-scale installed: "
                                               "run without --skip-setup (scripts/setup.sh makes .venv), or set PY "
                                               "to one\n")
    assert not out.exists()
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text('#!/bin/sh\necho "venv python $*" >&2\nexit 3\n')
    (venv / "bin" / "python").chmod(0o755)
    res = subprocess.run(["bash", str(checkout / "scripts" / "quickstart.sh"), "--skip-setup", str(out)],
                         cwd=tmp_path, env=env | {"VIRTUAL_ENV": str(venv)}, capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 2 and res.stderr.startswith(f"error: PY={venv}/bin/python: "), res.stderr


def test_a_rerun_replaces_the_analysis_report() -> None:
    """The analysis refuses an --out holding a report without --overwrite, and the
    quickstart analyses into OUT/analysis on every run: its second run failed at
    its last step (the end-to-end test runs it once)."""
    script = (ROOT / "scripts" / "quickstart.sh").read_text(encoding="utf-8").replace("\\\n", " ")
    command = next(line for line in script.splitlines() if "tacl_scale.analysis selfsim" in line)
    assert '--out "$OUT/analysis"' in command and "--overwrite" in command.split(), command


def test_train_vocab_writes_a_bert_vocabulary(tmp_path: Path) -> None:
    from data_prep.sample_corpus import write_sample_dump

    dump = write_sample_dump(tmp_path / "c.xml.bz2", num_articles=20)
    vocab = tmp_path / "vocab.txt"
    assert train_vocab_main(["--input", str(dump), "--vocab-size", "1500", "--output", str(vocab)]) == 0
    tokens = vocab.read_text(encoding="utf-8").split("\n")
    assert tokens[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert 500 < len(tokens) <= 1501 and any(t.startswith("##") for t in tokens)
    # markup never becomes vocabulary: the generator's template names and parameters,
    # frequent in its wikitext, are not words of its text
    assert not set(tokens) & {"infobox", "reflist", "efn", "sqmi", "cuft", "abbr", "km2"}


def test_multistream_cli_round_trips_pages(tmp_path: Path) -> None:
    target = tmp_path / "x-multistream.xml.bz2"
    assert multistream_main([str(EN_DUMP), str(target), "--pages-per-stream", "25"]) == 0
    assert (tmp_path / "x-multistream-index.txt.bz2").exists()
    units = plan_work_units([str(target)], "wiki-xml", True, unit_bytes=100_000)
    assert len(units) > 3
    from data_prep.inputs import WorkUnit

    whole = [(p.doc_id, p.text) for p in read_wiki_pages(WorkUnit(str(EN_DUMP), "wiki-xml"))]
    split = [(p.doc_id, p.text) for u in units for p in read_wiki_pages(u)]
    assert split == whole and len(whole) == bz2.decompress(EN_DUMP.read_bytes()).count(b"<page>") > 100
    assert multistream_main([str(EN_DUMP), str(tmp_path / "bad-name.xml.bz2")]) == 2
