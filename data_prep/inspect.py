"""``python -m data_prep.inspect DIR``: a dataset's manifest summary and a few decoded
instances, ``[CLS] A [SEP] B [SEP]`` with the masked tokens marked.

``--verify`` checks every shard file and the tokenizer copy against the manifest's
sizes and checksums (:mod:`tacl_scale.data.integrity`), names each bad file and
exits 2 if there is one; it reads the whole dataset, at the disk's speed."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tacl_scale import EXIT_ERROR
from tacl_scale.cli import error_exit, make_parser
from tacl_scale.data import DatasetError, Manifest, PretrainDataset
from tacl_scale.data.integrity import all_shards, shard_bytes, unchecked_files, verify_dataset
from tacl_scale.data.manifest import FORMAT_NAME
from tacl_scale.preemption import ctrl_c_ends
from tacl_scale.vocab import VocabularyError, first_difference, vocabulary

from .config import SHARD_INPUT_BYTES
from .tokenization import TokenizerConfig, TokenizerError, load_tokenizer


def format_summary(manifest: Manifest, path: str) -> str:
    """Human-readable summary of a manifest: counts, token stats, masking, skips."""
    t, tok, masking = manifest.train.totals, manifest.tokenizer, manifest.masking
    instances = max(t.instances, 1)
    masked = max(t.masked, 1)
    carried = f"carried in {tok.path}" if tok.portable else f"read from {tok.path}"
    chosen = f" (one per {SHARD_INPUT_BYTES / 1e6:.0f} MB of input: --num-shards to choose)" if manifest.build_config.get(
        "output", {}).get("auto_shards") else ""
    lines = [
        f"dataset {path}",
        f"  format {FORMAT_NAME} v{manifest.format_version}, language {manifest.language}, "
        f"{manifest.train.num_shards} shard(s){chosen}, {manifest.token_dtype} tokens",
        f"  tokenizer {tok.kind} {tok.file} (vocab {tok.vocab_size}, sha256 {tok.sha256[:12]}…, lowercase "
        f"{tok.lowercase}; {carried})",
        f"  documents {t.documents:,}  instances {t.instances:,}  tokens {t.tokens:,}  "
        f"mean length {t.tokens / instances:.1f} / max {manifest.max_seq_len}",
        *([f"  NSP random next {t.random_next / instances:.1%}",
           f"  masked {t.masked:,} = {t.masked / max(t.maskable, 1):.2%} of maskable tokens "
           f"(target {masking.masked_lm_prob:.0%}, at most {masking.max_predictions_per_seq}"
           f"{', whole words' if masking.whole_word_masking else ''}); "
           f"[MASK] {t.mask_token / masked:.1%}  random {t.random_token / masked:.1%}  "
           f"kept {t.kept_token / masked:.1%}"]
          if manifest.static_masks else
          ["  single-segment instances ([CLS] sentence [SEP]): no NSP pairs, no static masks "
           "(train with --objectives mirror, or --dynamic-masking for mlm/tacl)"]),
        f"  dupe factor {manifest.dupe_factor}, seed {manifest.seed}, {len(manifest.sources)} source file(s), "
        f"{sum(s.bytes for s in manifest.sources) / 1e6:.1f} MB",
        # what a run records of its --data: equal fingerprints, the same instances
        f"  content fingerprint {manifest.content_fingerprint()}",
    ]
    if t.length_histogram:
        peak = max(t.length_histogram.values())
        lines.append("  instance lengths:")
        for start, count in t.length_histogram.items():
            bar = "#" * max(1, round(30 * count / peak))
            lines.append(f"    {start + 1:4d}-{start + 32:<4d} {count:8,d} {bar}")
    validation = manifest.validation
    if validation is not None:
        v = validation.totals
        lines.append(f"  validation split: {validation.fraction:.2%} of documents by hash: {v.documents:,} "
                     f"documents, {v.instances:,} instances in {validation.num_shards} shard(s)")
    for warning in manifest.warnings:
        lines.append(f"  warning: {warning}")
    skipped = {k: v for k, v in manifest.skips.items() if v}
    lines.append("  skipped: " + (", ".join(f"{k} {v:,}" for k, v in skipped.items()) or "none"))
    return "\n".join(lines)


def format_instance(dataset: PretrainDataset, index: int, id_to_token: Any) -> str:
    """One instance decoded; a masked token shows as ``[original→placed]``."""
    item = dataset[index]
    masked = set(item["masked_positions"].tolist())
    pieces = []
    for pos, (orig, shown) in enumerate(zip(item["original_ids"], item["input_ids"], strict=True)):
        token = id_to_token(int(orig))
        if pos in masked:
            placed = id_to_token(int(shown))
            token = f"[{token}]" if placed == token else f"[{token}→{placed}]"
        pieces.append(token)
    label = "random B" if item["nsp_label"] else "B follows A"
    return f"#{index} ({label}, {len(pieces)} tokens, {len(masked)} masked):\n  " + " ".join(pieces)


def verify(directory: str) -> int:
    """``--verify``: every problem on its own ``error:`` line, or one line saying
    what was checked; exit 2 when a file is bad."""
    try:
        manifest = Manifest.load(directory)
    except DatasetError as err:
        return error_exit(str(err))
    started = time.monotonic()
    problems = verify_dataset(directory, manifest)
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    if problems:
        return EXIT_ERROR
    files = sum(len(s.files) for s in all_shards(manifest))
    unchecked = unchecked_files(manifest)
    print(f"{directory}: verified {files} shard files ({shard_bytes(manifest) / 1e9:.2f} GB) and the tokenizer "
          f"copy against the manifest in {time.monotonic() - started:.1f} s: all match"
          + (f" (format {manifest.format_version}: no checksums recorded, so {unchecked} file(s) were checked by "
             "size only; rebuild to have every byte verified)" if unchecked else ""))
    return 0


@ctrl_c_ends
def main(argv: list[str] | None = None) -> int:
    p = make_parser("python -m data_prep.inspect", __doc__)
    p.add_argument("directory", help="dataset directory")
    p.add_argument("-n", "--num-instances", type=int, default=3, help="instances to decode")
    p.add_argument("--start", type=int, default=0, help="first instance to decode")
    p.add_argument("--tokenizer", default=None,
                   help="tokenizer to decode with, an error if missing or unusable (default: the dataset's own "
                   "copy, or the path its manifest records for datasets built before format 3; ids only if that "
                   "is gone)")
    p.add_argument("--verify", action="store_true",
                   help="check every shard file and the tokenizer copy against the manifest's sizes and checksums "
                   "(reads the whole dataset) and name each bad file; exit 2 if there is one")
    args = p.parse_args(argv)
    if args.num_instances < 0 or args.start < 0:
        p.error(f"-n and --start count instances from 0, not {args.num_instances} and {args.start}")
    if args.verify:
        return verify(args.directory)
    try:
        dataset = PretrainDataset(args.directory)
    except DatasetError as err:
        return error_exit(str(err))
    if args.num_instances and args.start >= len(dataset):
        return error_exit(f"{args.directory}: --start {args.start} is past its last instance, {len(dataset) - 1} "
                          f"(it holds {len(dataset):,})")
    manifest = dataset.manifest
    recorded = manifest.tokenizer
    own = recorded.location(dataset.path)
    given = None
    if args.tokenizer:
        # Named on the command line, it is what the user asked to decode with: one
        # that is missing or unusable is their error (it printed a note, decoded ids
        # and exited 0), before anything is printed.
        try:
            given = load_tokenizer(TokenizerConfig(args.tokenizer))
        except TokenizerError as err:
            return error_exit(f"--tokenizer {err}")
    print(format_summary(manifest, args.directory))
    if args.num_instances <= 0 or len(dataset) == 0:
        return 0
    if given is not None:
        id_to_token = given.id_to_token
        if mismatch := other_ids(args.tokenizer, own):
            print(f"(note: {mismatch}; the tokens below are decoded with it all the same)")
    else:
        try:  # the dataset's own copy (or, before format 3, the file its manifest names), which may be gone
            id_to_token = load_tokenizer(TokenizerConfig(str(own), recorded.lowercase)).id_to_token
        except TokenizerError as err:
            print(f"(decoding with ids only: {err})")
            id_to_token = str
    print()
    decode = within_vocabulary(id_to_token, manifest.tokenizer.vocab_size)
    for index in range(args.start, min(args.start + args.num_instances, len(dataset))):
        try:
            shown = format_instance(dataset, index, decode)
        except DatasetError as err:  # a damaged instance, named by the reader (shard file, instance)
            return error_exit(str(err))
        print(shown)
    return 0


def other_ids(given: str, own: Path) -> str | None:
    """How ``--tokenizer`` ``given`` gives other ids than the dataset's own tokenizer
    ``own`` (a token and its two ids), or None when they agree or ``own`` is gone;
    when one of them cannot be read as a vocabulary, why not."""
    try:
        ours = vocabulary(own) if own.exists() else None
        theirs = vocabulary(given)
    except (VocabularyError, OSError) as err:  # the dataset's copy damaged: a note, not a traceback
        why = err if isinstance(err, VocabularyError) else f"{err.filename or own}: {err.strerror or err}"
        return f"{given} could not be compared with the dataset's tokenizer: {why}"
    if ours is None or theirs is None:
        return None
    difference = first_difference(ours, theirs)
    if difference is None:
        return None
    token, in_data, in_given = difference
    return (f"{given} is not the tokenizer the dataset was built with ({own}): {token!r} is {in_data} in the "
            f"dataset and {in_given} in {given}")


def within_vocabulary(id_to_token: Callable[[int], str], vocab_size: int) -> Callable[[int], str]:
    """``id_to_token`` that shows an id outside the vocabulary (a corrupt shard) as
    such, not as the empty string a tokenizer returns for it."""
    def decode(token_id: int) -> str:
        if 0 <= token_id < vocab_size:
            return id_to_token(token_id)
        return f"<id {token_id} outside the vocabulary of {vocab_size}: run --verify>"
    return decode


if __name__ == "__main__":
    sys.exit(main())
