"""Throughput and peak-memory benchmark of ``python -m data_prep.build``.

Builds Wikimedia-style multistream dumps (with their index) of about
``--target-mb`` MB of uncompressed XML from the real English sample
``enwiki-sample.xml.bz2`` of the test data (its pages repeated, each copy with new
page ids and titles so the pipeline treats them as distinct documents), runs the
real CLI on them as a subprocess for each (runner, scale, workers) triple, and
prints wall time, throughput and the peak RSS of the whole process tree.

Runners: ``direct`` (Beam's DirectRunner, in-memory for 1 worker, multi-processing
for more) and ``dask`` (Beam's DaskRunner against a local Dask cluster of that many
single-threaded worker processes, started before the timed build and stopped after
it; their memory counts with the build's).

    .venv/bin/python benchmarks/bench_data_prep.py [--target-mb 50] [--workers 1 2]
        [--scales 1 4] [--runners direct dask] [--keep DIR]

See docs/benchmarks.md for what each column means.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.metadata
import json
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# The real English sample and the bert-base-uncased vocabulary, in the directory
# named by TACL_TEST_DATA (the README's Tests section says where they come from).
DATA = Path(os.environ.get("TACL_TEST_DATA") or "/nonexistent/TACL_TEST_DATA-is-unset")
SAMPLE = DATA / "enwiki-sample.xml.bz2"
VOCAB = DATA / "vocab" / "bert-base-uncased.txt"
TIME_BIN = "/usr/bin/time"
ID_STRIDE = 10_000_000  # copy k gets page ids id + k * ID_STRIDE
PAGES_PER_STREAM = 100
# Memory sampling period: psutil walks /proc for the process tree each time; at 0.2 s
# that took ~20% of a core, 10% of a 2-core machine the build should have.
POLL_S = 1.0
MB = 1e6  # throughput and sizes in decimal MB
TACL_MB_S = 0.06  # TaCL reference: ~2 GB of text in ~10 h

sys.path.insert(0, str(REPO))

_PAGE_ID = re.compile(rb"<id>(\d+)</id>")
_PAGE_TITLE = re.compile(rb"<title>(.*?)</title>", re.DOTALL)


# --------------------------------------------------------------------------- corpus


def corpus_settings(target_bytes: int) -> dict[str, Any]:
    """What a corpus of ``build_corpus`` is made from and of: recorded beside it, so
    ``--keep DIR`` reuses a corpus only when these are the same."""
    from tacl_scale.files import file_sha256

    return {"sample": str(SAMPLE.resolve()), "sample_sha256": file_sha256(SAMPLE), "target_bytes": target_bytes,
            "pages_per_stream": PAGES_PER_STREAM, "id_stride": ID_STRIDE}


def build_corpus(target_bytes: int, directory: Path, name: str) -> tuple[Path, int]:
    """Write ``directory/NAME-multistream.xml.bz2`` (+ index) holding the sample's
    pages repeated until the plain XML reaches ``target_bytes`` (one page at least);
    return the dump path and the size of its uncompressed XML. A corpus already there
    is reused when ``directory/NAME.json`` records the same ``corpus_settings``, else
    rebuilt."""
    from data_prep.multistream import iter_raw_pages, write_multistream

    dump = directory / f"{name}-multistream.xml.bz2"
    recorded = directory / f"{name}.json"  # written last: a corpus of an interrupted run is not reused
    settings = corpus_settings(target_bytes)
    if recorded.is_file() and dump.is_file():  # --keep DIR of an earlier run: the same corpus if the same settings
        with contextlib.suppress(ValueError, KeyError, TypeError):  # unreadable: rebuilt
            earlier = json.loads(recorded.read_text())
            if earlier["settings"] == settings:
                return dump, int(earlier["xml_bytes"])
    recorded.unlink(missing_ok=True)  # other settings: the corpus about to be replaced is no longer reusable
    raw = iter_raw_pages(str(SAMPLE))
    header = next(raw)
    pages = list(raw)
    footer = b"</mediawiki>\n"
    directory.mkdir(parents=True, exist_ok=True)
    plain = directory / f"{name}.xml"
    size = 0
    with open(plain, "wb") as out:
        out.write(header)
        size += len(header) + len(footer)
        copy = 0
        while size < target_bytes or copy == 0:
            for page in pages:
                page = _renumber(page, copy)
                out.write(page)
                size += len(page)
                if size >= target_bytes:
                    break
            copy += 1
        out.write(footer)
    assert size == plain.stat().st_size, (size, plain.stat().st_size)
    written, _index = write_multistream(str(plain), str(dump), PAGES_PER_STREAM)
    plain.unlink()
    recorded.write_text(json.dumps({"settings": settings, "xml_bytes": size}, indent=2))
    return Path(written), size


def _renumber(page: bytes, copy: int) -> bytes:
    """The page with its own ``<id>`` (the one before ``<revision>``, not the
    revision's or contributor's) moved by ``copy * ID_STRIDE`` and, for copies after
    the first, `` (copy N)`` appended to its title."""
    if copy == 0:
        return page
    cut = page.find(b"<revision")
    head, tail = (page, b"") if cut < 0 else (page[:cut], page[cut:])
    head, n = _PAGE_ID.subn(
        lambda m: b"<id>%d</id>" % (int(m.group(1)) + copy * ID_STRIDE), head, count=1
    )
    if n != 1:
        raise RuntimeError(f"a page of {SAMPLE} has no page <id>: {page[:200]!r}")
    head = _PAGE_TITLE.sub(lambda m: b"<title>%s (copy %d)</title>" % (m.group(1), copy), head, count=1)
    return head + tail


# --------------------------------------------------------------------------- runs


@dataclass
class Result:
    code: str  # "HEAD" (the working tree), or the --baseline revision
    runner: str
    scale: int
    xml_bytes: int
    bz2_bytes: int
    units: int
    workers: int
    wall_s: float
    documents: int
    instances: int
    tokens: int
    peak_tree_rss: int  # bytes, sampled sum over the process tree
    peak_single_rss: int  # bytes, largest single process (time -v, else sampled)
    # bytes, the largest single process's private memory (RSS less its file-backed and
    # shared pages: what the spill files it memory-maps add is page cache the kernel
    # reclaims, not memory the process holds), sampled
    peak_single_anon: int
    peak_anon_role: str  # what the process of peak_single_anon was: worker, driver, scheduler, other
    peak_worker_anon: int  # bytes, the largest private memory of a worker (a Beam SDK worker or a Dask worker)
    peak_processes: int  # most processes seen at once in the tree
    shards: int  # training shards the build wrote (fixed, or chosen by the build: --num-shards auto)
    cpu_percent: int | None  # (user + system CPU of the tree) / wall, from time -v
    cpu_s: float | None  # user + system CPU seconds of the tree, from time -v
    load_before: float  # 1-minute load average of the machine when the run started
    digest: str  # sha256 over the dataset's data files (not the manifest), to compare outputs
    worst_wall_s: float = 0.0  # the slowest of the --repeat runs (this Result is the fastest)


def _descendants(pid: int) -> list[int]:
    """``pid``'s descendants, from /proc/<pid>/task/*/children (no psutil)."""
    found: list[int] = []
    stack = [pid]
    while stack:
        p = stack.pop()
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                children = (task / "children").read_text().split()
            except OSError:
                continue
            for c in children:
                found.append(int(c))
                stack.append(int(c))
    return found


def _rss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def process_role(cmdline: list[str]) -> str:
    """What a process of a build's tree does: ``worker`` (a Beam SDK worker process of
    the DirectRunner, a Dask worker process), ``driver`` (``data_prep.build``),
    ``scheduler`` (Dask's), or ``other`` (Dask's nanny, multiprocessing's resource
    tracker, /usr/bin/time)."""
    joined = " ".join(cmdline)
    if "sdk_worker_main" in joined or "spawn_main" in joined:  # Dask's worker processes are spawned
        return "worker"
    if "data_prep.build" in joined:
        return "driver"
    if joined.endswith("scheduler") or " scheduler " in joined:  # dask scheduler, dask-scheduler
        return "scheduler"
    return "other"


@dataclass
class TreeSample:
    """One look at a process tree's memory."""

    rss_sum: int = 0  # bytes, over the tree
    rss_max: int = 0  # bytes, its largest process
    processes: int = 0
    anon_max: int = 0  # bytes, the largest private memory (RSS less file-backed and shared pages)
    anon_max_role: str = "other"  # process_role of that process
    worker_anon_max: int = 0  # bytes, the largest private memory of a worker


def sample_tree(root: int, include_root: bool) -> TreeSample:
    """The memory of ``root``'s tree now (private memory and roles need psutil)."""
    try:
        import psutil
    except ImportError:
        psutil = None
    sample = TreeSample()
    if psutil is None:
        pids = ([root] if include_root else []) + _descendants(root)
        rss = [r for r in (_rss(p) for p in pids) if r]
        return TreeSample(sum(rss), max(rss, default=0), len(rss))
    try:
        proc = psutil.Process(root)
        procs = ([proc] if include_root else []) + proc.children(recursive=True)
    except psutil.NoSuchProcess:
        return sample
    for p in procs:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            info = p.memory_info()
            anon = info.rss - info.shared  # Linux: shared = file-backed + shmem pages
            role = process_role(p.cmdline())
            sample.rss_sum += info.rss
            sample.rss_max = max(sample.rss_max, info.rss)
            sample.processes += 1
            if anon > sample.anon_max:
                sample.anon_max, sample.anon_max_role = anon, role
            if role == "worker":
                sample.worker_anon_max = max(sample.worker_anon_max, anon)
    return sample


@contextlib.contextmanager
def dask_cluster(workers: int, work: Path, tuned: bool = True):
    """A local Dask scheduler and ``workers`` single-threaded worker processes, with
    the settings of ``data_prep.dask_runner.WORKER_ENV`` unless not ``tuned``; yields
    (address, their root PIDs)."""
    import random

    from distributed import Client

    from data_prep.dask_runner import WORKER_ENV

    dask = str(Path(sys.executable).parent / "dask")
    address = f"tcp://127.0.0.1:{random.randint(20000, 40000)}"
    port = address.rsplit(":", 1)[1]
    logs = open(work / "dask.log", "ab")
    env = os.environ | (WORKER_ENV if tuned else {})
    procs = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", port, "--dashboard-address",
                               ":0"], stdout=logs, stderr=subprocess.STDOUT, start_new_session=True, env=env),
             subprocess.Popen([dask, "worker", address, "--nworkers", str(workers), "--nthreads", "1",
                               "--dashboard-address", ":0"], stdout=logs, stderr=subprocess.STDOUT,
                              start_new_session=True, env=env)]
    try:
        with Client(address, timeout=60) as client:
            client.wait_for_workers(workers, timeout=120)
        yield address, [p.pid for p in procs]
    finally:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, 9)
            proc.wait()
        logs.close()


def run_build(corpus: Path, xml_bytes: int, scale: int, units: int, workers: int,
              work: Path, unit_mb: float | None, runner: str = "direct",
              code: tuple[str, Path] = ("HEAD", REPO), num_shards: str = "8") -> Result:
    """Time one build; ``code`` is (label, checkout) of the code that builds (the
    build imports ``data_prep`` from its working directory)."""
    if runner == "dask":
        with dask_cluster(workers, work) as (address, cluster_pids):
            return _run_build(corpus, xml_bytes, scale, units, workers, work, unit_mb, runner,
                              ["--runner", "DaskRunner", "--dask_client_address", address], cluster_pids,
                              code, num_shards)
    mode = "in_memory" if workers == 1 else "multi_processing"
    return _run_build(corpus, xml_bytes, scale, units, workers, work, unit_mb, runner,
                      ["--direct_num_workers", str(workers), "--direct_running_mode", mode], [], code, num_shards)


def dataset_digest(directory: Path) -> str:
    """One digest of a dataset's data files (their names and sha256s; the manifest,
    which records paths and times, left out)."""
    from tacl_scale.files import file_sha256

    digest = hashlib.sha256()
    for path in sorted(p for p in directory.iterdir() if p.is_file() and p.name != "manifest.json"):
        digest.update(f"{path.name}\0{file_sha256(path)}\n".encode())
    return digest.hexdigest()


def _run_build(corpus: Path, xml_bytes: int, scale: int, units: int, workers: int, work: Path,
               unit_mb: float | None, runner: str, runner_args: list[str], cluster_pids: list[int],
               code: tuple[str, Path], num_shards: str = "8") -> Result:
    label, checkout = code
    name = f"{runner}-x{scale}-w{workers}-{label}"
    out = work / f"out-{name}"
    shutil.rmtree(out, ignore_errors=True)
    log_path = work / f"build-{name}.log"
    time_path = work / f"time-{name}.txt"
    cmd = [
        sys.executable, "-m", "data_prep.build",
        "--input", str(corpus),
        "--tokenizer", str(VOCAB),
        "--output", str(out),
        *(["--num-shards", num_shards] if num_shards != "auto" else []),
        "--quiet",
        *runner_args,
    ]
    if unit_mb is not None:
        cmd += ["--unit-mb", str(unit_mb)]
    use_time = os.access(TIME_BIN, os.X_OK)
    if use_time:
        cmd = [TIME_BIN, "-v", "-o", str(time_path)] + cmd
    peak_sum = peak_single = peak_procs = peak_anon = peak_worker_anon = 0
    peak_anon_role = "other"
    load_before = os.getloadavg()[0]
    with open(log_path, "wb") as log:
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=checkout, stdout=log, stderr=subprocess.STDOUT)
        while proc.poll() is None:
            # The /usr/bin/time wrapper itself is not counted; a Dask cluster's processes are.
            samples = [sample_tree(proc.pid, include_root=not use_time),
                       *(sample_tree(pid, include_root=True) for pid in cluster_pids)]
            peak_sum = max(peak_sum, sum(t.rss_sum for t in samples))
            peak_single = max(peak_single, *(t.rss_max for t in samples))
            peak_procs = max(peak_procs, sum(t.processes for t in samples))
            largest = max(samples, key=lambda t: t.anon_max)
            if largest.anon_max > peak_anon:
                peak_anon, peak_anon_role = largest.anon_max, largest.anon_max_role
            peak_worker_anon = max(peak_worker_anon, *(t.worker_anon_max for t in samples))
            time.sleep(POLL_S)
        wall = time.perf_counter() - started
    rc = proc.returncode
    manifest_path = out / "manifest.json"
    if rc != 0 or not manifest_path.is_file():
        tail = log_path.read_text(errors="replace")[-4000:]
        raise SystemExit(
            f"build failed (exit {rc}, manifest {'present' if manifest_path.is_file() else 'missing'})"
            f"\ncommand: {' '.join(cmd)}\nlog {log_path}:\n{tail}"
        )
    cpu_percent = cpu_s = None
    if use_time and time_path.is_file():
        report = time_path.read_text()
        m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", report)
        if m:
            peak_single = max(peak_single, int(m.group(1)) * 1024)
        m = re.search(r"Percent of CPU this job got: (\d+)%", report)
        if m:
            cpu_percent = int(m.group(1))
        user = re.search(r"User time \(seconds\): ([\d.]+)", report)
        system = re.search(r"System time \(seconds\): ([\d.]+)", report)
        if user and system and runner == "direct":  # a Dask cluster's workers are not children
            cpu_s = float(user.group(1)) + float(system.group(1))
    from tacl_scale.data.manifest import Manifest

    train = Manifest.load(manifest_path.parent).train
    totals = train.totals
    result = Result(
        code=label, runner=runner, scale=scale, xml_bytes=xml_bytes, bz2_bytes=corpus.stat().st_size, units=units,
        workers=workers, wall_s=wall, documents=totals.documents, instances=totals.instances, tokens=totals.tokens,
        peak_tree_rss=peak_sum, peak_single_rss=peak_single, peak_processes=peak_procs, shards=train.num_shards,
        peak_single_anon=peak_anon, peak_anon_role=peak_anon_role, peak_worker_anon=peak_worker_anon,
        cpu_percent=cpu_percent, cpu_s=cpu_s, load_before=load_before, digest=dataset_digest(out),
    )
    shutil.rmtree(out, ignore_errors=True)  # datasets are large; the log stays
    return result


# --------------------------------------------------------------------------- stages


class _TimedTokenizer:
    """Stands in for a ``tokenizers.Tokenizer`` and adds up the seconds spent in its
    ``encode_batch`` (the word cache calls it for new words and for the sentences
    it leaves to the tokenizer)."""

    def __init__(self, backend: Any) -> None:
        self._backend = backend
        self.seconds = 0.0

    def encode_batch(self, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return self._backend.encode_batch(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)


def stage_profile(dump: Path) -> tuple[list[tuple[str, float, float | None, str]], list[str]]:
    """Seconds of each stage of the build, run in this process (no Beam, one core)
    on ``dump`` with the benchmark's settings, and the part of it spent in the
    library the stage calls: (stage, seconds, library seconds or None, library),
    and notes on the tokenizer's word cache."""
    import bz2

    from data_prep.build import parse_args
    from data_prep.documents import DocumentProcessor, TokenizedDocument, shard_key
    from data_prep.inputs import plan_work_units
    from data_prep.sentences import BlingFireBreaker
    from data_prep.shards import TokenizerFacts, build_shard
    from data_prep.sources import WikiPage, read_records
    from data_prep.spill import SpillWriter
    from data_prep.wikitext import clean_wikitext, pre_parse, render_wikitext, tokenize_wikitext
    from data_prep.workspace import TMP_DIR_NAME

    out = Path(tempfile.mkdtemp(prefix="bench_stages-")) / "ds"
    config = parse_args(["--input", str(dump), "--tokenizer", str(VOCAB), "--output", str(out),
                         "--num-shards", "8"]).config
    processor = DocumentProcessor(config)
    tokenizer = processor.tokenizer
    facts = TokenizerFacts(tokenizer.vocab_size, tokenizer.special_ids, tokenizer.replacement_ids())
    skip = lambda kind: None  # noqa: E731

    def timed(function, *args):
        t = time.perf_counter()
        value = function(*args)
        return value, time.perf_counter() - t

    records, read_s = timed(lambda: [r for u in plan_work_units([str(dump)], "wiki-xml")
                                      for r in read_records(u, skip)])
    _, bz2_s = timed(lambda: bz2.decompress(dump.read_bytes()))
    articles = [r for r in records if isinstance(r, WikiPage) and r.namespace == 0 and not r.redirect]
    paragraphs, clean_s = timed(lambda: [clean_wikitext(r.text) for r in articles])
    sources = [pre_parse(r.text) for r in articles]
    _, parse_s = timed(lambda: [tokenize_wikitext(s) for s in sources])
    _, tokens_s = timed(lambda: [render_wikitext(s) for s in sources])
    _, tree_s = timed(lambda: [render_wikitext(s, tree=True) for s in sources])
    texts = [p for ps in paragraphs for p in ps]
    _, split_s = timed(lambda: [processor.splitter(p) for p in texts])
    breaker = BlingFireBreaker()
    _, blingfire_s = timed(lambda: [breaker(p) for p in texts])
    sentences, _ = timed(lambda: [processor.sentences_of(r, skip) for r in records])
    kept = [(r, s) for r, s in zip(records, sentences, strict=True) if s is not None]
    # Time the HF tokenizer inside the stage.
    backend = tokenizer.backend
    timed_backend = _TimedTokenizer(backend)
    tokenizer.route_backend(timed_backend)
    words = tokenizer.word_cache
    encoded, encode_s = timed(lambda: [tokenizer.encode(s) for _, s in kept])
    _, whole_s = timed(lambda: [backend.encode_batch(s, add_special_tokens=False) for _, s in kept])
    spill = SpillWriter(out / TMP_DIR_NAME, facts.token_dtype)

    def spill_all() -> None:
        for (record, s), e in zip(kept, encoded, strict=True):
            spill.add(shard_key(record.doc_id, config.output),
                      TokenizedDocument(record.doc_id, e, sum(map(len, s))))

    _, spill_s = timed(spill_all)
    prefix = spill.close()
    _, shards_s = timed(lambda: [build_shard(k, [prefix], config, facts) for k in config.output.shard_keys])
    shutil.rmtree(out.parent, ignore_errors=True)
    stages = [
        ("read (bz2 + XML)", read_s, bz2_s, "bz2"),
        ("clean wikitext", clean_s, parse_s, "mwparserfromhell's tokenizer"),
        ("split sentences", split_s, blingfire_s, "BlingFire"),
        ("tokenize", encode_s, timed_backend.seconds, "HF encode_batch"),
        ("spill", spill_s, None, ""),
        ("instances + masks + shard files", shards_s, None, ""),
    ]
    notes = [f"the HF tokenizer on whole sentences instead would take {whole_s:.2f} s "
             f"(the stage tokenizes only words it has not seen)",
             f"rendering the parsed wikitext from mwparserfromhell's node tree instead of its tokens: "
             f"{tree_s:.2f} s instead of {tokens_s:.2f} s (tokenizing included)"]
    # The corpus repeats the sample; on the sample itself every word is new once.
    fresh = DocumentProcessor(config)
    sample = [s for u in plan_work_units([str(SAMPLE)], "wiki-xml") for r in read_records(u, skip)
              if (s := fresh.sentences_of(r, skip)) is not None]
    _, fresh_s = timed(lambda: [fresh.tokenizer.encode(s) for s in sample])
    _, fresh_whole_s = timed(lambda: [backend.encode_batch(s, add_special_tokens=False) for s in sample])
    notes.append(f"on the sample itself ({SAMPLE.name}, no repeats) with an empty cache: {fresh_s:.2f} s, "
                 f"the HF tokenizer on whole sentences {fresh_whole_s:.2f} s")
    if words is not None:
        notes.append(f"word cache: {words.looked_up:,} words looked up, {words.tokenized:,} "
                     f"({words.tokenized / max(words.looked_up, 1):.1%}) new and tokenized; this corpus "
                     "repeats the sample, so words are new only in its first copy")
    return stages, notes


def print_stage_profile(dump: Path, xml_bytes: int) -> None:
    stages, notes = stage_profile(dump)
    total = sum(s for _, s, _, _ in stages)
    library = sum(lib for _, _, lib, _ in stages if lib is not None)
    mb = xml_bytes / MB
    print(f"\nstages, one process, no Beam, on {dump.name} ({mb:.1f} MB XML):")
    print(f"  {'stage':33s} {'s':>6s} {'s/MB':>6s} {'in library':>11s}")
    for name, seconds, lib, lib_name in stages:
        lib_text = "-" if lib is None else f"{lib:.2f} ({lib_name})"
        print(f"  {name:33s} {seconds:6.2f} {seconds / mb:6.3f} {lib_text:>11s}")
    print(f"  {'total':33s} {total:6.2f} {total / mb:6.3f} {library:11.2f}")
    print(f"  -> {mb / total:.2f} MB/s per core without start-up; {library / total:.0%} of it in the "
          "four libraries")
    for note in notes:
        print(f"  {note}")


# --------------------------------------------------------------------------- report


def machine_lines() -> list[str]:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count() or 0
    mem = ""
    try:
        kb = int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text()).group(1))
        mem = f", {kb / 1024 / 1024:.1f} GiB RAM"
    except (OSError, AttributeError):
        pass

    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True,
                                  check=True).stdout
        except (OSError, subprocess.CalledProcessError):
            return ""

    commit = git("rev-parse", "--short", "HEAD").strip() or "unknown"
    changed = [line[3:] for line in git("status", "--porcelain", "--untracked-files=no",
                                        "--", "data_prep", "tacl_scale").splitlines()]
    if changed:
        commit += f" + uncommitted changes to {', '.join(changed)}"
    try:
        beam = importlib.metadata.version("apache-beam")
    except importlib.metadata.PackageNotFoundError:
        beam = "?"
    return [
        f"machine: nproc {usable} (cpu_count {os.cpu_count()}), {model}{mem}",
        f"python {platform.python_version()}, apache-beam {beam}, git {commit}",
        f"load average now {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
        "(other processes on the machine slow the runs)",
    ]


def table(results: list[Result]) -> str:
    head = ["code", "runner", "scale", "XML MB", "bz2 MB", "units", "shards", "workers", "wall s", "worst s", "XML MB/s",
            "MB/s/worker", "MB/CPU-s", "tokens/s", "documents", "instances", "RSS tree MB",
            "RSS max proc MB", "private max proc MB", "private max worker MB", "procs", "CPU%", "load"]
    rows = []
    for r in results:
        rate = r.xml_bytes / MB / r.wall_s
        rows.append([
            r.code, r.runner, f"{r.scale}x", f"{r.xml_bytes / MB:.1f}", f"{r.bz2_bytes / MB:.1f}", str(r.units),
            str(r.shards),
            str(r.workers), f"{r.wall_s:.1f}", f"{r.worst_wall_s:.1f}", f"{rate:.2f}", f"{rate / r.workers:.2f}",
            "-" if r.cpu_s is None else f"{r.xml_bytes / MB / r.cpu_s:.2f}",
            f"{r.tokens / r.wall_s:,.0f}", f"{r.documents:,}", f"{r.instances:,}",
            f"{r.peak_tree_rss / MB:,.0f}", f"{r.peak_single_rss / MB:,.0f}", f"{r.peak_single_anon / MB:,.0f}",
            f"{r.peak_worker_anon / MB:,.0f}", str(r.peak_processes), "-" if r.cpu_percent is None else str(r.cpu_percent),
            f"{r.load_before:.1f}",
        ])
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(head)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(head, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    return "\n".join(lines)


def megabytes(zero: bool) -> Callable[[str], float]:
    """An argparse ``type``: a finite number of MB, above 0 (or 0 too, if ``zero``),
    else a clear error."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: not a number") from None
        if not math.isfinite(value) or value < 0 or (value == 0 and not zero):
            raise argparse.ArgumentTypeError(f"{text}: must be a finite number {'>= 0' if zero else 'above 0'}")
        return value

    return parse


def planned_builds(runners: list[str], workers: list[int]) -> list[tuple[str, int]]:
    """The (runner, workers) pairs that are built, in order: the DaskRunner only for 2
    workers and more (its comparison is with DirectRunner's multi-processing)."""
    return [(runner, w) for runner in runners for w in workers if not (runner == "dask" and w < 2)]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target-mb", type=megabytes(zero=False), default=50,
                   help="uncompressed XML MB of the largest corpus (default 50)")
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2],
                   help="--direct_num_workers values (default 1 2)")
    p.add_argument("--scales", type=int, nargs="+", default=[1, 4],
                   help="corpus scales; scale s is target*s/max(scales) MB (default 1 4)")
    p.add_argument("--unit-mb", type=megabytes(zero=True), default=1.0,
                   help="--unit-mb passed to the build: compressed MB per unit of parallel "
                        "work (default 1, so a 50 MB corpus is ~14 units; 0 = the CLI's "
                        "own default)")
    p.add_argument("--num-shards", default="8", metavar="N|auto",
                   help="shards of every build (default 8: a fixed count); auto: the build's own choice, one per "
                   "256 MB of XML, so shards scale with the corpus")
    p.add_argument("--runners", nargs="*", choices=("direct", "dask"), default=["direct", "dask"],
                   help="direct: DirectRunner; dask: DaskRunner on a local cluster of --workers processes "
                   "(only for 2 workers and more); none: no build (with --stages)")
    p.add_argument("--baseline", metavar="REV",
                   help="also build each DirectRunner configuration with the code of git revision REV "
                        "(a temporary worktree), alternating with HEAD's, and print the side-by-side "
                        "ratio and whether the datasets are byte-identical")
    p.add_argument("--repeat", type=int, default=1,
                   help="run each build N times (alternating codes with --baseline) and report the "
                        "fastest, with the slowest beside it: this machine's speed varies")
    p.add_argument("--stages", action="store_true",
                   help="also time each stage in one process (no Beam) on the smallest corpus, "
                        "with the part spent in the libraries it calls")
    p.add_argument("--keep", metavar="DIR",
                   help="build corpora and logs in DIR and keep them (default: a temporary "
                        "directory, removed at the end); corpora already there are reused when "
                        "built from the same sample at the same size (recorded beside each), else rebuilt")
    args = p.parse_args(argv)
    if any(s <= 0 for s in args.scales) or any(w <= 0 for w in args.workers) or args.repeat < 1:
        p.error("--scales, --workers and --repeat must be positive")
    if args.num_shards != "auto" and not (args.num_shards.isdigit() and int(args.num_shards) > 0):
        p.error(f"--num-shards {args.num_shards}: a positive number or auto")
    if not args.runners and not args.stages:
        p.error("--runners with no runner builds nothing: name a runner, or add --stages for the stage times alone")
    if args.runners and not planned_builds(args.runners, args.workers):
        p.error(f"--runners {' '.join(args.runners)} with --workers {' '.join(map(str, args.workers))} builds "
                "nothing: the dask runner runs for 2 workers and more only")
    for path in (SAMPLE, VOCAB):
        if not path.is_file():
            p.error(f"{path}: missing (set TACL_TEST_DATA to the directory of the real samples: "
                    "enwiki-sample.xml.bz2 and vocab/bert-base-uncased.txt)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    unit_mb = args.unit_mb if args.unit_mb > 0 else None  # 0: the CLI's default
    builds = planned_builds(args.runners, args.workers)

    for line in machine_lines():
        print(line)
    print(f"corpus: {SAMPLE.name} repeated, multistream {PAGES_PER_STREAM} pages/stream; "
          f"build: --num-shards {args.num_shards}, bert-base-uncased vocab, defaults otherwise; "
          f"--unit-mb {unit_mb if unit_mb is not None else 'CLI default'}", flush=True)
    if "dask" in args.runners and any(w < 2 for w in args.workers):
        print(f"dask runner: for 2 workers and more only; not run for --workers "
              f"{' '.join(str(w) for w in args.workers if w < 2)}", flush=True)

    if args.keep:
        work = Path(args.keep).resolve()
        work.mkdir(parents=True, exist_ok=True)
    else:
        work = Path(tempfile.mkdtemp(prefix="bench_data_prep-"))
    from data_prep.config import InputConfig
    from data_prep.inputs import plan_work_units

    results: list[Result] = []
    started = time.perf_counter()
    codes = [("HEAD", REPO)]
    if args.baseline:
        checkout = work / f"baseline-{args.baseline}"
        subprocess.run(["git", "worktree", "add", "--detach", "--force", str(checkout), args.baseline],
                       cwd=REPO, check=True, capture_output=True)
        codes.insert(0, (args.baseline, checkout))
    try:
        biggest = max(args.scales)
        smallest: tuple[Path, int] | None = None
        for scale in sorted(set(args.scales)):
            target = int(args.target_mb * MB * scale / biggest)
            t0 = time.perf_counter()
            corpus, xml_bytes = build_corpus(target, work / f"corpus-x{scale}", f"bench{scale}x")
            smallest = smallest or (corpus, xml_bytes)
            units = len(plan_work_units(
                [str(corpus)], "wiki-xml",
                unit_bytes=int(unit_mb * (1 << 20)) if unit_mb is not None else InputConfig.unit_bytes))
            print(f"[{scale}x] corpus {xml_bytes / MB:.1f} MB XML -> {corpus.stat().st_size / MB:.1f} "
                  f"MB multistream, {units} work unit(s) ({time.perf_counter() - t0:.1f} s)",
                  flush=True)
            for runner, workers in builds:
                # A Dask cluster's workers import the code of this checkout only.
                runs: dict[str, list[Result]] = {}
                for _ in range(args.repeat):  # alternating, so a slow spell hits both codes
                    for code in codes if runner == "direct" else codes[-1:]:
                        r = run_build(corpus, xml_bytes, scale, units, workers, work, unit_mb, runner,
                                      code, args.num_shards)
                        print(f"[{code[0]}, {runner}, {scale}x, {workers} worker(s)] {r.wall_s:.1f} s, "
                              f"{r.xml_bytes / MB / r.wall_s:.2f} MB/s, peak RSS tree "
                              f"{r.peak_tree_rss / MB:,.0f} MB", flush=True)
                        runs.setdefault(code[0], []).append(r)
                for same in runs.values():
                    best = min(same, key=lambda r: r.wall_s)
                    best.worst_wall_s = max(r.wall_s for r in same)
                    results.append(best)
        if args.stages and smallest is not None:
            print_stage_profile(*smallest)
    finally:
        if args.baseline:
            subprocess.run(["git", "worktree", "remove", "--force", str(codes[0][1])], cwd=REPO,
                           capture_output=True)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    if not results:
        print(f"total benchmark time {time.perf_counter() - started:.0f} s")
        return 0
    print()
    print(table(results))
    print()
    print(f"TaCL reference: ~2 GB text in ~10 h ≈ {TACL_MB_S} MB/s; "
          "target ≥ 2 MB/s of dump XML per core")
    for r in results:
        per_worker = r.xml_bytes / MB / r.wall_s / r.workers
        print(f"  {r.code} {r.runner}, {r.scale}x, {r.workers} worker(s): {per_worker:.2f} MB/s/worker = "
              f"{per_worker / TACL_MB_S:.1f}x the TaCL reference")
    if args.baseline:
        for r in results:
            base = next((b for b in results if b.code == args.baseline and
                         (b.runner, b.scale, b.workers) == (r.runner, r.scale, r.workers)), None)
            if r.code == "HEAD" and base is not None:
                print(f"  HEAD / {args.baseline}, {r.runner} {r.scale}x {r.workers} worker(s): "
                      f"{base.wall_s / r.wall_s:.2f}x the throughput, datasets "
                      f"{'byte-identical' if base.digest == r.digest else 'DIFFERENT'}")
    for code in dict.fromkeys(r.code for r in results):
        for runner, workers in dict.fromkeys((r.runner, r.workers) for r in results if r.code == code):
            same = sorted((r for r in results if (r.code, r.runner, r.workers) == (code, runner, workers)),
                          key=lambda r: r.xml_bytes)
            if len(same) > 1:
                growth = ", ".join(f"{r.xml_bytes / MB:,.0f} MB: RSS {r.peak_single_rss / same[0].peak_single_rss:.2f}, "
                                   f"private {r.peak_single_anon / max(same[0].peak_single_anon, 1):.2f}, "
                                   f"largest worker's private {r.peak_worker_anon / max(same[0].peak_worker_anon, 1):.2f}"
                                   for r in same[1:])
                print(f"  {code} {runner}, {workers} worker(s): largest process against the "
                      f"{same[0].xml_bytes / MB:,.0f} MB corpus's: {growth} (target ≤ 1.20)")
    for r in results:
        print(f"  {r.code} {r.runner}, {r.scale}x: the largest private memory was the {r.peak_anon_role}'s "
              f"({r.peak_single_anon / MB:,.0f} MB); the largest worker's {r.peak_worker_anon / MB:,.0f} MB")
    by_key = {(r.runner, r.scale, r.workers): r for r in results if r.code == "HEAD"}
    for (runner, scale, workers), r in sorted(by_key.items()):
        direct = by_key.get(("direct", scale, workers))
        if runner == "dask" and direct is not None:
            print(f"  DaskRunner / DirectRunner multi-processing, {scale}x, {workers} workers: "
                  f"{direct.wall_s / r.wall_s:.2f} of its per-worker throughput (target ≥ 0.80)")
    print(f"total benchmark time {time.perf_counter() - started:.0f} s"
          + (f"; corpora and logs kept in {work}" if args.keep else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
