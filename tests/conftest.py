"""Shared test fixtures: paths to the real samples (Wikipedia text, BERT
vocabularies) in the directory named by ``TACL_TEST_DATA``, project-made corpora,
and a helper that runs the dataset build in-process.

Without ``TACL_TEST_DATA`` every test of a module that reads the real samples is
skipped, with one reason (``pytest -rs`` lists them)."""

from __future__ import annotations

import os
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
TEST_DATA_VARIABLE = "TACL_TEST_DATA"
# Read once, here at the edge of the test suite; unset, the paths below name nothing.
DATA = Path(os.environ.get(TEST_DATA_VARIABLE) or "/nonexistent/TACL_TEST_DATA-is-unset").resolve()
EN_DUMP = DATA / "enwiki-sample.xml.bz2"
ZH_TEXT = DATA / "zhwiki-sample.txt"
ZH_SEGMENTED = DATA / "zhwiki-sample-segmented.txt"
EN_VOCAB = DATA / "vocab" / "bert-base-uncased.txt"
ZH_VOCAB = DATA / "vocab" / "bert-base-chinese.txt"

# Keep HF tokenizers from spawning threads that fight pytest for 2 cores.
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


# Without a GPU, the Triton kernels run under Triton's interpreter on CPU tensors;
# it must be chosen before any kernel is defined. DeepSpeed likewise picks its
# accelerator when first imported.
if not _has_cuda():
    os.environ.setdefault("TRITON_INTERPRET", "1")
    os.environ.setdefault("DS_ACCELERATOR", "cpu")


# The names through which a test module reads the real samples.
_READS_REAL_DATA = re.compile(r"\b(EN_DUMP|EN_VOCAB|ZH_TEXT|ZH_VOCAB|ZH_SEGMENTED|ENWIKI_SAMPLE|ZHWIKI_SAMPLE|"
                              r"ZHWIKI_SEGMENTED|VOCAB_EN|VOCAB_ZH|enwiki_raw_xml|enwiki_pages|enwiki_articles)\b")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without the real samples, skip the modules that read them, saying why."""
    if (DATA / "enwiki-sample.xml.bz2").is_file():
        return
    reason = (f"needs the real samples (Wikipedia text, BERT vocabularies): set {TEST_DATA_VARIABLE} to their "
              f"directory (see the README's Tests section); now {'unset' if TEST_DATA_VARIABLE not in os.environ else DATA}")
    reads: dict[str, bool] = {}
    for item in items:
        module = item.path
        if str(module) not in reads:
            reads[str(module)] = bool(_READS_REAL_DATA.search(module.read_text(encoding="utf-8")))
        if reads[str(module)]:
            item.add_marker(pytest.mark.skip(reason=reason))


@dataclass(frozen=True)
class Corpus:
    """A project-made corpus: a generated MediaWiki dump (``data_prep.sample_corpus``;
    no Wikipedia text) and a WordPiece vocabulary trained on it."""

    dump: Path
    vocab: Path


def make_corpus(directory: Path, language: str, articles: int, vocab_size: int = 4000) -> Corpus:
    from data_prep.sample_corpus import write_sample_dump
    from data_prep.train_vocab import iter_sentences, train_wordpiece

    dump = write_sample_dump(directory / f"{language}wiki-generated-pages-articles.xml.bz2", articles,
                             language=language)
    vocab = train_wordpiece(iter_sentences([str(dump)], "wiki-xml", language), vocab_size, True,
                            directory / "vocab.txt")
    return Corpus(dump, vocab)


@pytest.fixture(scope="session")
def made_en(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    """An English generated dump of 200 articles and its 4k WordPiece vocabulary."""
    return make_corpus(tmp_path_factory.mktemp("made_en"), "en", 200)


def build_dataset(output: Path, *args: str) -> Path:
    """Run ``data_prep.build`` in-process with CLI arguments; return the dataset dir."""
    from data_prep.build import parse_args, run_build

    command = parse_args(["--output", str(output), "--quiet", *args])
    run_build(command.config, command.beam_args)
    return output


@pytest.fixture
def join() -> Iterator[Callable[[], Any]]:
    """Joins a one-rank process group in this process as a launcher would set it up
    (gloo on CPU, NCCL on CUDA) and returns the ``Distributed``. Each Trainer leaves
    its group in ``close()``, so a test that builds two trainers joins twice."""
    from tacl_scale.distributed import Distributed, LaunchEnv

    saved = {k: os.environ.get(k) for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1")
    joined: list[Distributed] = []

    def setup() -> Distributed:
        os.environ["MASTER_PORT"] = str(random.randint(20000, 40000))
        joined.append(Distributed.setup(LaunchEnv.from_environ(os.environ)))
        return joined[-1]

    try:
        yield setup
    finally:
        for dist in joined:
            dist.close()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def segment_windows(dataset: Any, n: int = 12) -> tuple[dict[bytes, set[int]], set[bytes]]:
    """The ``n``-token windows inside the segments of a split's instances: those
    of each document's own text (segment A, and B when it follows A), by
    document; and all of them, random B segments included."""
    import numpy as np

    own: dict[bytes, set[int]] = {}
    everything: set[bytes] = set()
    documents = dataset.source_documents()
    for i in range(len(dataset)):
        item = dataset[i]
        ids = item["original_ids"].astype(np.int32)
        len_a = int((item["token_type_ids"] == 0).sum()) - 2
        segments = [(ids[1 : 1 + len_a], True), (ids[2 + len_a : -1], item["nsp_label"] == 0)]
        for segment, is_own in segments:
            raw = segment.tobytes()
            for k in range(len(segment) - n + 1):
                window = raw[4 * k : 4 * (k + n)]
                everything.add(window)
                if is_own:
                    own.setdefault(window, set()).add(int(documents[i]))
    return own, everything
