"""A shard build's gathering of its documents out of the spill parts
(:class:`data_prep.spill.ShardDocuments`): this version, which reads a shard's own
lines of each part's document list by the part's shard offsets, and side by side in
the same run the same parts in the earlier format (``[doc_id, shard]`` lines in
document order, no offsets: every line of every list read by every shard).

Every part holds documents of nearly every shard (a document's shard is a hash of its
id), so the earlier format's work per shard grows with the corpus's documents and the
shard stage's with shards × documents; it prints the milliseconds per shard of both,
and that work for a whole build of ``--dump-parts`` parts and ``--dump-documents``
documents (the English dump: about 2,600 parts of 6.5 million articles) at 310 and
2,048 shards, scaled from the measured rates.

    python benchmarks/bench_shard_gather.py [--parts 200] [--docs-per-part 2400] [--shards 310]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from arguments import count  # noqa: E402  (this folder is on the path of a script run from it)

from data_prep.documents import TokenizedDocument, shard_of  # noqa: E402
from data_prep.spill import (  # noqa: E402
    ShardDocuments,
    SpillWriter,
    documents_path,
    earlier_documents_path,
    shard_offsets_path,
)
from data_prep.tokenization import EncodedSentence  # noqa: E402


def write_parts(root: Path, parts: int, docs_per_part: int, shards: int) -> list[str]:
    """``parts`` spill parts of ``docs_per_part`` one-sentence documents each, with
    ids like Wikipedia's page ids, spread over ``shards`` by the build's own hash."""
    sentence = [EncodedSentence(np.arange(8, dtype=np.uint16), np.ones(8, dtype=bool))]
    prefixes = []
    for part in range(parts):
        writer = SpillWriter(root, np.dtype(np.uint16), root / f"part-{part:05d}")
        for k in range(docs_per_part):
            doc_id = str(part * docs_per_part + k)
            writer.add(shard_of(doc_id, shards), TokenizedDocument(doc_id, sentence, 40))
        prefixes.append(writer.close())
    return prefixes


def to_earlier_format(prefixes: list[str]) -> None:
    """Rewrite each part's document list as versions before the shard offsets wrote it."""
    for prefix in prefixes:
        entries = [json.loads(line) for line in documents_path(prefix).read_bytes().split(b"\n")[:-1]]
        entries.sort(key=lambda entry: entry[2])
        earlier_documents_path(prefix).write_text(
            "".join(json.dumps([doc_id, shard]) + "\n" for doc_id, shard, _ in entries))
        documents_path(prefix).unlink()
        shard_offsets_path(prefix).unlink()


def ms_per_shard(prefixes: list[str], shards: list[int], scratch: Path) -> tuple[float, int]:
    """Mean milliseconds to gather one of ``shards``, and the documents gathered."""
    documents = 0
    began = time.perf_counter()
    for shard in shards:
        documents += len(ShardDocuments(shard, prefixes, scratch, word_starts=False))
    return (time.perf_counter() - began) * 1e3 / len(shards), documents


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--parts", type=count(1), default=200)
    p.add_argument("--docs-per-part", type=count(1), default=2400)
    p.add_argument("--shards", type=count(1), default=310)
    p.add_argument("--measured-shards", type=count(1), default=8, help="shards gathered in each format")
    p.add_argument("--dump-parts", type=count(1), default=2600)
    p.add_argument("--dump-documents", type=count(1), default=6_500_000)
    args = p.parse_args(argv)
    if args.measured_shards > args.shards:
        p.error(f"--measured-shards {args.measured_shards} is more than --shards {args.shards}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        began = time.perf_counter()
        prefixes = write_parts(root / "spill", args.parts, args.docs_per_part, args.shards)
        print(f"{args.parts} parts of {args.docs_per_part} documents over {args.shards} shards written in "
              f"{time.perf_counter() - began:.1f} s")
        (root / "scratch").mkdir()
        measured = list(range(args.measured_shards))
        ms_per_shard(prefixes, measured[:1], root / "scratch")  # warm: imports, page cache
        offsets_ms, documents = ms_per_shard(prefixes, measured, root / "scratch")
        to_earlier_format(prefixes)
        ms_per_shard(prefixes, measured[:1], root / "scratch")
        whole_ms, whole_documents = ms_per_shard(prefixes, measured, root / "scratch")
    if whole_documents != documents:
        print(f"error: the formats gathered {documents} and {whole_documents} documents", file=sys.stderr)
        return 1
    corpus = args.parts * args.docs_per_part
    print(f"ms per shard ({documents / len(measured):.0f} documents each): offsets {offsets_ms:.1f}, "
          f"whole lists {whole_ms:.1f} ({whole_ms / offsets_ms:.1f}x)")
    # Whole lists: a cost per part opened plus one per line read; offsets: per part and per own document.
    # Both scaled to the dump linearly in parts and in documents (read, or gathered).
    per_part = offsets_ms / args.parts  # an upper bound: it includes the shard's own documents
    per_line = max(whole_ms - offsets_ms, 0.0) / corpus
    print(f"{'dump shards':>12} {'offsets CPU-min':>16} {'whole lists CPU-min':>20}")
    for shards in (310, 2048):
        offsets_min = shards * per_part * args.dump_parts / 6e4
        whole_min = offsets_min + shards * per_line * args.dump_documents / 6e4
        print(f"{shards:>12} {offsets_min:>16.1f} {whole_min:>20.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
