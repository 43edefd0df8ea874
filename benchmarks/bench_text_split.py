"""One large uncompressed text file, built as one work unit (as every version before
the split did) and as ranges of whole documents of ``--unit-mb`` (the default now),
side by side in one run: the planning pass over the file, the build's wall time and
whether the datasets are byte-identical.

The corpus is the real Chinese sample of the test data (``zhwiki-sample.txt``, the
``text`` format: a sentence a line, a blank line between documents) repeated to
``--target-mb``, read with its bert-base-chinese vocabulary.

    TACL_TEST_DATA=... python benchmarks/bench_text_split.py [--target-mb 40] [--workers 2]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from arguments import count, positive  # noqa: E402  (this folder is on the path of a script run from it)
from bench_data_prep import dataset_digest  # noqa: E402

from data_prep.inputs import plan_work_units  # noqa: E402

DATA = Path(os.environ.get("TACL_TEST_DATA") or "/nonexistent/TACL_TEST_DATA-is-unset")
SAMPLE = DATA / "zhwiki-sample.txt"
VOCAB = DATA / "vocab" / "bert-base-chinese.txt"
LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")
STAGE_ONE_DONE = re.compile(r"progress: work units (\d+)/\1 done")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target-mb", type=positive, default=40.0, help="the corpus's size, MB")
    p.add_argument("--unit-mb", type=positive, default=8.0, help="the split build's --unit-mb")
    p.add_argument("--workers", type=count(1), default=2, help="the DirectRunner's worker processes")
    return p.parse_args(argv)


def write_corpus(path: Path, target_bytes: int) -> None:
    """The sample repeated until the file holds ``target_bytes`` (documents of a
    ``text`` file are numbered, so each copy's are distinct documents)."""
    sample = SAMPLE.read_bytes().rstrip(b"\n") + b"\n\n"
    with open(path, "wb") as f:
        for _ in range(max(1, -(-target_bytes // len(sample)))):
            f.write(sample)


def build(corpus: Path, output: Path, unit_mb: float, workers: int) -> tuple[float, float]:
    """Wall seconds of the build (a subprocess, as a user runs it), and of its first
    stage: from the start to the log line that says every work unit is done."""
    command = [sys.executable, "-m", "data_prep.build", "--input", str(corpus), "--format", "text",
               "--language", "zh", "--tokenizer", str(VOCAB), "--output", str(output), "--num-shards", "4",
               "--min-doc-chars", "10", "--unit-mb", str(unit_mb), "--direct_num_workers", str(workers),
               "--direct_running_mode", "multi_processing"]
    started = time.time()
    done = subprocess.run(command, check=True, cwd=REPO, env={**os.environ, "TOKENIZERS_PARALLELISM": "false"},
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.time() - started
    for line in done.stderr.splitlines():
        if (stamp := LOG_TIME.match(line)) and STAGE_ONE_DONE.search(line):
            logged = datetime.strptime(stamp.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
            return wall, logged - started
    raise RuntimeError(f"no 'work units N/N done' line in the build's log:\n{done.stderr[-2000:]}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not SAMPLE.is_file() or not VOCAB.is_file():
        print(f"error: {SAMPLE} and {VOCAB} are needed: set TACL_TEST_DATA (see the README's Tests section)",
              file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        corpus = work / "corpus.txt"
        write_corpus(corpus, int(args.target_mb * 1e6))
        size = corpus.stat().st_size
        unit_bytes = int(args.unit_mb * (1 << 20))
        began = time.perf_counter()
        units = plan_work_units([str(corpus)], "text", unit_bytes=unit_bytes, split_text=True)
        plan_s = time.perf_counter() - began
        began = time.perf_counter()
        plan_work_units([str(corpus)], "lines", unit_bytes=unit_bytes, split_text=True)
        lines_s = time.perf_counter() - began
        print(f"corpus: {SAMPLE.name} repeated, {size / 1e6:.1f} MB; planning {len(units)} units of about "
              f"{args.unit_mb:g} MiB: {plan_s:.2f} s ({size / 1e6 / plan_s:.0f} MB/s; the same file as "
              f"--format lines {lines_s:.2f} s, {size / 1e6 / lines_s:.0f} MB/s)")
        whole_s, whole_read_s = build(corpus, work / "whole", 1e6, args.workers)  # one unit, as before the split
        split_s, split_read_s = build(corpus, work / "split", args.unit_mb, args.workers)
        same = dataset_digest(work / "whole") == dataset_digest(work / "split")
    print(f"{args.workers} worker(s), build wall: one unit {whole_s:.1f} s, {len(units)} units {split_s:.1f} s "
          f"({whole_s / split_s:.2f}x)")
    print(f"  its first stage (reading, to every unit done): {whole_read_s:.1f} s and {split_read_s:.1f} s "
          f"({whole_read_s / split_read_s:.2f}x); datasets {'byte-identical' if same else 'DIFFERENT'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
