"""Shared test fixtures: the corpora the tests read, project-made or real, and a
helper that runs the dataset build in-process.

Two kinds of input, chosen by name:

* ``EN_DUMP``, ``EN_VOCAB``, ``ZH_TEXT``, ``ZH_SEGMENTED``, ``ZH_VOCAB``: project-made
  stand-ins in the real samples' formats (a generated English dump, generated Chinese
  text one sentence a line with characters, or words, separated by spaces, and
  WordPiece vocabularies trained on them). They are written once per session into a
  temporary directory, when a collected test module names them, and removed at the
  end. No download, nothing beside the clone.
* ``REAL_EN_DUMP``, ``REAL_EN_VOCAB``, ``REAL_ZH_TEXT``, ``REAL_ZH_SEGMENTED``,
  ``REAL_ZH_VOCAB`` (and the readers of ``conftest_sources_helpers``): the real samples
  (Wikipedia text, the BERT vocabularies) in the directory named by
  ``TACL_TEST_DATA`` (``.ci/run`` points it at the samples). A test whose own source
  or whose fixtures' source names one of them, or that is marked ``real_data``, is
  skipped without it, with one reason (``pytest -rs``)."""

from __future__ import annotations

import inspect
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import types
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
TEST_DATA_VARIABLE = "TACL_TEST_DATA"
# Read once, here at the edge of the test suite; unset, the paths below name nothing.
DATA = Path(os.environ.get(TEST_DATA_VARIABLE) or "/nonexistent/TACL_TEST_DATA-is-unset").resolve()
REAL_EN_DUMP = DATA / "enwiki-sample.xml.bz2"
REAL_ZH_TEXT = DATA / "zhwiki-sample.txt"
REAL_ZH_SEGMENTED = DATA / "zhwiki-sample-segmented.txt"
REAL_EN_VOCAB = DATA / "vocab" / "bert-base-uncased.txt"
REAL_ZH_VOCAB = DATA / "vocab" / "bert-base-chinese.txt"

# The project-made stand-ins (see the module docstring), one directory per session.
MADE = Path(tempfile.gettempdir()) / f"tacl-made-data-{os.getpid()}"
EN_DUMP = MADE / "enwiki-generated.xml.bz2"
EN_VOCAB = MADE / "vocab" / "en-wordpiece.txt"
ZH_TEXT = MADE / "zhwiki-generated.txt"
ZH_SEGMENTED = MADE / "zhwiki-generated-segmented.txt"
ZH_VOCAB = MADE / "vocab" / "zh-wordpiece.txt"
# Enough text for 3 shards plus a validation split; vocabularies trained to about the
# size a build sees in practice (the English one keeps every word of the corpus).
MADE_ARTICLES = {"en": 300, "zh": 16}

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


_NAMES_MADE = re.compile(r"(?<!REAL_)\b(EN_DUMP|EN_VOCAB|ZH_TEXT|ZH_VOCAB|ZH_SEGMENTED)\b")
# The names that reach the real samples: this module's REAL_* and the readers of
# conftest_sources_helpers.
_NAMES_REAL = re.compile(r"\b(REAL_(EN_DUMP|EN_VOCAB|ZH_TEXT|ZH_VOCAB|ZH_SEGMENTED)|ENWIKI_SAMPLE|ZHWIKI_SAMPLE|"
                         r"ZHWIKI_SEGMENTED|VOCAB_EN|VOCAB_ZH|enwiki_raw_xml|enwiki_pages|enwiki_articles)\b")


def _source(obj: Any) -> str:
    try:
        return inspect.getsource(obj)
    except (OSError, TypeError):
        return ""


def reads_real_data(item: pytest.Item) -> bool:
    """Marked ``real_data``, or its own source or that of a fixture it uses names a
    real sample."""
    if item.get_closest_marker("real_data"):
        return True
    sources = [_source(getattr(item, "function", None))]
    info = getattr(item, "_fixtureinfo", None)
    for name in getattr(item, "fixturenames", ()):
        for definition in (info.name2fixturedefs.get(name, ()) if info is not None else ()):
            sources.append(_source(definition.func))
    return any(_NAMES_REAL.search(source) for source in sources)


# The quick tier (scripts/test.sh --quick: -m "not slow and not cluster") runs no test
# that builds a dataset, runs a Beam pipeline, trains, starts a process or builds the
# wheel. Such a test is marked ``slow`` by hand, or at collection when it uses one of
# these fixtures, or one of these names in its own code, its fixtures' code or the
# test-module and conftest functions they call (tests/test_quick_tier.py).
SLOW_FIXTURES = frozenset({"zh_dataset", "pytester"})  # the shared built dataset; pytest in subprocesses
SLOW_NAMES = frozenset({"build_dataset", "run_build",  # a dataset build
                        "Trainer",  # DeepSpeed engines, the teacher and the student
                        "subprocess", "Popen", "runpytest_subprocess",  # a CLI, a launcher, a wheel build
                        "spawn", "multiprocessing", "torch.multiprocessing"})  # ranks in processes of their own


def slow_names(function: Any, seen: set[Any] | None = None) -> set[str]:
    """The names of :data:`SLOW_NAMES` that ``function`` uses (in its nested functions
    too) or that the test-module and conftest functions it names use."""
    function = getattr(function, "__wrapped__", function)
    seen = set() if seen is None else seen
    if not isinstance(function, types.FunctionType) or function in seen:
        return set()
    seen.add(function)
    found: set[str] = set()
    codes = [function.__code__]
    for code in codes:
        codes += [c for c in code.co_consts if isinstance(c, types.CodeType)]
        found |= SLOW_NAMES & set(code.co_names)
        for name in code.co_names:
            called = function.__globals__.get(name)
            if (getattr(called, "__module__", None) or "").startswith(("test_", "conftest")):
                found |= slow_names(called, seen)
    return found


def why_slow(item: pytest.Item) -> list[str]:
    """What makes a collected test slow (see :data:`SLOW_NAMES`); empty where nothing does."""
    names = getattr(item, "fixturenames", ())
    info = getattr(item, "_fixtureinfo", None)
    functions = [getattr(item, "function", None)]
    for name in names:
        functions += [d.func for d in (info.name2fixturedefs.get(name, ()) if info is not None else ())]
    return [f"fixture {name}" for name in sorted(SLOW_FIXTURES & set(names))] + [
        f"{name} in {function.__name__}" for function in functions for name in sorted(slow_names(function))]


def pytest_configure(config: pytest.Config) -> None:
    """Hear Ctrl-C as a terminal's Python does. A suite started in the background by a
    script (``cmd &`` without job control, as CI may) runs with SIGINT ignored, and the
    Ctrl-C tests, which send SIGINT to this process, then waited for an interruption
    that never came. The processes the tests start inherit the default disposition
    (exec resets a handled signal's), so their Ctrl-C is heard too."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(tryfirst=True)  # before -m deselects by the marks added here
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``slow`` the tests that build, train or start a process (:func:`why_slow`;
    ``scripts/test.sh --quick`` runs the others); write the made stand-ins if a
    collected module names them; without the real samples, skip the tests that read
    them, saying why."""
    for item in items:
        if item.get_closest_marker("slow") is None and why_slow(item):
            item.add_marker(pytest.mark.slow)
    modules = {str(item.path): item.path for item in items}
    if any(_NAMES_MADE.search(path.read_text(encoding="utf-8")) for path in modules.values()):
        write_made_data(MADE)
    if REAL_EN_DUMP.is_file():
        return
    reason = (f"needs the real samples (Wikipedia text, BERT vocabularies): set {TEST_DATA_VARIABLE} to their "
              f"directory (see the README's Tests section); now {'unset' if TEST_DATA_VARIABLE not in os.environ else DATA}")
    for item in items:
        if reads_real_data(item):
            item.add_marker(pytest.mark.skip(reason=reason))


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(MADE, ignore_errors=True)


_CALL_PASSED = pytest.StashKey[bool]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Remember whether a test's call passed, for :func:`tmp_path`'s clean-up."""
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        item.stash[_CALL_PASSED] = report.passed


@pytest.fixture
def tmp_path(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """pytest's ``tmp_path``, named ``t0``, ``t1``, ... instead of after the test.
    pytest names it after the test (``test_bad_magic0``), so a test that looks for a
    word in an error message naming a file under it found the word in the path and
    passed whatever the message said. Removed when the test passes, kept when it
    fails (``tmp_path_retention_policy = "failed"``, as pytest's own)."""
    path = tmp_path_factory.mktemp("t", numbered=True)
    yield path
    try:
        policy = request.config.getini("tmp_path_retention_policy")
    except ValueError:  # a pytest before the setting: keep everything, as it did
        policy = "all"
    if policy == "failed" and request.node.stash.get(_CALL_PASSED, False):
        shutil.rmtree(path, ignore_errors=True)


def write_made_data(directory: Path) -> None:
    """The stand-ins of the module docstring, written once into ``directory``."""
    if (directory / "done").is_file():
        return
    from data_prep.sample_corpus import write_sample_dump
    from data_prep.train_vocab import iter_sentences, train_wordpiece

    directory.mkdir(parents=True, exist_ok=True)
    dump = write_sample_dump(EN_DUMP, MADE_ARTICLES["en"], language="en")
    train_wordpiece(iter_sentences([str(dump)], "wiki-xml", "en"), 30522, True, EN_VOCAB)
    bert_layout(EN_VOCAB, 30522)
    zh_dump = write_sample_dump(directory / "zhwiki-generated.xml", MADE_ARTICLES["zh"], language="zh")
    documents = zh_documents(zh_dump)
    ZH_TEXT.write_text(_lines(documents, list), encoding="utf-8")
    ZH_SEGMENTED.write_text(_lines(documents, _words), encoding="utf-8")
    train_wordpiece(iter_sentences([str(ZH_TEXT)], "text", "zh"), 21128, True, ZH_VOCAB)
    # Like bert-base-chinese, every CJK character (not only those of the generated text).
    bert_layout(ZH_VOCAB, 21128, map(chr, range(0x4E00, 0xA000)))
    (directory / "done").write_text("")


def bert_layout(vocab: Path, size: int, fill: Iterable[str] = ()) -> None:
    """Rewrite a trained vocab.txt in the layout of Google's BERT vocabularies:
    [PAD] 0, [unused0..98] 1–99, [UNK] [CLS] [SEP] [MASK] 100–103, the trained
    tokens, then tokens of ``fill`` not yet present and [unusedN] up to ``size``
    tokens; so ids and sizes are those of bert-base-uncased (30,522) and
    bert-base-chinese (21,128)."""
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokens = [t for t in vocab.read_text(encoding="utf-8").split("\n") if t and t not in specials]
    tokens = ["[PAD]", *(f"[unused{i}]" for i in range(99)), *specials[1:], *tokens]
    present = set(tokens)
    tokens += [t for t in fill if t not in present][: max(0, size - len(tokens))]
    tokens += [f"[unused{i}]" for i in range(99, 99 + size - len(tokens))]
    vocab.write_text("".join(t + "\n" for t in tokens), encoding="utf-8")


def zh_documents(dump: Path) -> list[list[str]]:
    """The sentences of each article of a generated Chinese dump, as the build cleans them."""
    from data_prep.documents import extract_sentences
    from data_prep.inputs import expand_inputs, plan_work_units
    from data_prep.sentences import SentenceConfig, SentenceSplitter
    from data_prep.sources import read_records

    splitter = SentenceSplitter(SentenceConfig("zh"))
    documents = []
    for unit in plan_work_units(expand_inputs([str(dump)]), "wiki-xml", use_index=False):
        for record in read_records(unit, lambda kind: None):
            sentences = extract_sentences(record, splitter, 0, lambda kind: None)
            if sentences:
                documents.append(sentences)
    return documents


def _words(sentence: str) -> list[str]:
    import jieba

    return [w for w in jieba.lcut(sentence) if w.strip()]


def _lines(documents: list[list[str]], split: Callable[[str], list[str]]) -> str:
    """One sentence a line, its pieces separated by spaces, a blank line between
    documents: the real Chinese samples' layout."""
    return "\n".join("".join(" ".join(p for p in split(s) if not p.isspace()) + "\n" for s in doc)
                     for doc in documents)


@dataclass(frozen=True)
class Corpus:
    """A project-made corpus: a generated MediaWiki dump (``data_prep.sample_corpus``;
    no Wikipedia text) and a WordPiece vocabulary trained on it."""

    dump: Path
    vocab: Path


@pytest.fixture(scope="session")
def made_en() -> Corpus:
    """The English stand-ins (``EN_DUMP``, ``EN_VOCAB``) as one corpus."""
    write_made_data(MADE)
    return Corpus(EN_DUMP, EN_VOCAB)


def build_dataset(output: Path, *args: str) -> Path:
    """Run ``data_prep.build`` in-process with CLI arguments; return the dataset dir."""
    from data_prep.build import parse_args, run_build

    command = parse_args(["--output", str(output), "--quiet", *args])
    run_build(command.config, command.beam_args)
    return output


# A BERT small enough for CPU tests, over the made Chinese vocabulary's 21,128 ids.
TINY_BERT = {"vocab_size": 21128, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
             "intermediate_size": 64, "max_position_embeddings": 128}


@pytest.fixture(scope="session")
def zh_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small Chinese dataset at length 64 (one shard, dupe factor 1), shared by the
    training tests; a test that damages it works on a copy."""
    return build_dataset(tmp_path_factory.mktemp("zh-dataset") / "ds", "--input", str(ZH_TEXT), "--format",
                         "text", "--language", "zh", "--tokenizer", str(ZH_VOCAB), "--min-doc-chars", "10",
                         "--dupe-factor", "1", "--max-seq-len", "64")


@pytest.fixture(scope="session")
def tiny_bert_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """:data:`TINY_BERT` as a BertConfig JSON (a random init)."""
    path = tmp_path_factory.mktemp("model") / "bert.json"
    path.write_text(json.dumps(TINY_BERT))
    return path


class FakeSavingEngine:
    """What ``checkpoint.save`` touches of an engine: it writes one file per tag."""

    global_rank = 0
    dp_world_size = 1

    def save_checkpoint(self, root: str, tag: str, client_state: dict, save_latest: bool) -> None:
        Path(root, tag).mkdir(parents=True, exist_ok=True)
        Path(root, tag, "mp_rank_00_model_states.pt").write_bytes(tag.encode())


class OneRank:
    """A process group of one rank as ``checkpoint.save`` uses it (what
    :class:`tacl_scale.distributed.Distributed` does with one rank), for tests
    without one; ``on_barrier`` is called at each barrier."""

    rank, world_size = 0, 1

    def __init__(self, on_barrier: Any = None) -> None:
        self.on_barrier = on_barrier

    def barrier(self) -> None:
        if self.on_barrier is not None:
            self.on_barrier()

    def broadcast_object(self, value: Any) -> Any:
        return value

    def gather_objects(self, value: Any) -> list[Any]:
        return [value]


LAUNCHER_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def plain_env() -> dict[str, str]:
    """A shell's environment: no launcher variables (training runs as one process)."""
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARIABLES}
    return env | {"OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}


def ctrl_c_in_exec(tmp_path: Path, module: str, function: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m MODULE ARGS`` whose ``MODULE.FUNCTION`` (a step its ``main`` calls)
    gets Ctrl-C while code compiled from a string runs, as a dataclass or namedtuple
    being defined does in the imports of Beam, torch and DeepSpeed. CPython took that
    KeyboardInterrupt for an unhandled one even though ``main`` caught it, and ``python
    -m`` then killed itself with SIGINT (status -2, not 130)."""
    script = tmp_path / "ctrl_c_in_exec.py"
    script.write_text(f"""import sys

import {module}


def interrupted(*args, **kwargs):
    exec("import os, signal\\nos.kill(os.getpid(), signal.SIGINT)\\nfor _ in range(10**8): pass\\n")
    raise AssertionError("Ctrl-C did not stop {module}")


{module}.{function} = interrupted
sys.exit({module}.main(sys.argv[1:]))
""", encoding="utf-8")
    env = plain_env() | {"PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "ctrl_c_in_exec", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)


def pyproject() -> dict[str, Any]:
    """pyproject.toml, parsed (Python 3.10 has no tomllib: the test extra installs
    tomli, the same parser, there)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def shipped_ds_configs() -> list[Path]:
    """The DeepSpeed configs in ``ds_configs/``; at least the recipes' (a test looping
    over them passed over nothing when the glob found none)."""
    paths = sorted((ROOT / "ds_configs").glob("*.json"))
    assert {"cpu.json", "zero2.json", "zero2_bf16.json", "zero1_bf16.json"} <= {path.name for path in paths}, paths
    return paths


def free_port() -> int:
    """A TCP port below the kernel's ephemeral range that nothing holds now, for a
    launcher's ``--master_port``. A port the kernel picks (a bind to port 0) comes
    from the ephemeral range, from which it also gives outgoing connections their
    local ports: between this probe and the launcher's bind, a rank's own gloo
    connection could take it. Below the range only an explicit bind can. The draw
    has its own generator: resuming a checkpoint restores the global ``random``
    state, so a draw from it repeated the port a trainer had just used."""
    import random
    import socket

    from tacl_scale.distributed import free_port as kernel_port

    ephemeral = Path("/proc/sys/net/ipv4/ip_local_port_range")
    first_ephemeral = int(ephemeral.read_text().split()[0]) if ephemeral.exists() else 32768
    if first_ephemeral <= 2048:  # a host whose ephemeral range is (nearly) every port: the kernel's pick
        return kernel_port("127.0.0.1")
    draw = random.SystemRandom()
    for _ in range(100):
        port = draw.randrange(max(1024, min(20000, first_ephemeral - 1000)), first_ephemeral)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:  # held, or in TIME_WAIT after an earlier test's rendezvous
                continue
        return port
    raise RuntimeError(f"no free port below {first_ephemeral} in 100 draws")


def main_in_this_process(args: list[str], capsys: pytest.CaptureFixture[str],
                         launcher: dict[str, str] | None = None) -> tuple[int, str]:
    """``train.main(ARGS)`` here, as ``tacl-train ARGS`` (one rank, no launcher) would
    run it, or as the rank a launcher's ``launcher`` variables (RANK, WORLD_SIZE)
    describe: its exit code and what it wrote to stderr. For refusals, which need
    none of a process's start-up (about 6 s on the tier's 2 cores). The signal
    handlers it installs, the environment it sets and the logging and warning
    settings it changes are put back."""
    import logging
    import signal
    import warnings
    from unittest import mock

    from transformers.utils import logging as transformers_logging

    from tacl_scale.preemption import SIGNALS
    from tacl_scale.train import main

    handlers = {sig: signal.getsignal(sig) for sig in SIGNALS}
    root = logging.getLogger()
    level, formatters = root.level, {handler: handler.formatter for handler in root.handlers}
    library = transformers_logging.get_logger("transformers")  # main() routes its lines through the root logger
    library_handlers, library_propagates = list(library.handlers), library.propagate
    progress_bars = transformers_logging.is_progress_bar_enabled()  # main() turns them off
    launcher_keys = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
    try:
        with mock.patch.dict(os.environ, {"DS_ACCELERATOR": "cpu"}), warnings.catch_warnings():
            for key in launcher_keys:
                os.environ.pop(key, None)
            os.environ.update(launcher or {})
            code = main(args)
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        root.setLevel(level)
        for log_handler, formatter in formatters.items():
            log_handler.setFormatter(formatter)
        library.handlers[:] = library_handlers
        library.propagate = library_propagates
        if progress_bars:
            transformers_logging.enable_progress_bar()
    import torch.distributed

    assert not torch.distributed.is_initialized(), "main() left its process group behind"
    return code, capsys.readouterr().err


@pytest.fixture
def join() -> Iterator[Callable[[], Any]]:
    """Joins a one-rank process group in this process as ``tacl-train`` in a shell
    does (gloo on CPU, NCCL on CUDA; no launcher, so the port is chosen as it binds,
    and chosen again if another process took it first) and returns the
    ``Distributed``. Each Trainer leaves its group in ``close()``, so a test that
    builds two trainers joins twice."""
    from tacl_scale.distributed import Distributed, LaunchEnv

    saved = {k: os.environ.get(k) for k in LAUNCHER_VARIABLES}
    joined: list[Distributed] = []

    def setup() -> Distributed:
        joined.append(Distributed.setup(LaunchEnv.standalone_here()))  # it sets the variables as it joins
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
