"""Geometry of token representations (TaCL paper §3.2.2).

    python -m tacl_scale.analysis selfsim --model PATH [--model PATH2 ...] --sentences FILE --out DIR [--overwrite]

For every layer (embeddings + each transformer layer) and every sentence encoded
alone as ``[CLS] sentence [SEP]``, the self-similarity of its real tokens (Eq. 3):

    s(x) = 1/(n(n−1)) Σ_i Σ_{j≠i} cos(h_i, h_j)

reported as two aggregates, named apart: ``eq3`` — the mean over sentences of s(x)
(the paper's Eq. 3) — and ``pair_weighted`` — all off-diagonal pair cosines over the
number of pairs (what the public TaCL analysis code plots). Beside it, ``isotropy``:
the mean cosine between random tokens of *different* sentences (Ethayarajh 2019),
so self-similarity is not read alone.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import fnmatch
import json
import logging
import os
import sys
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from .cli import HelpFormatter, error_exit, make_parser
from .files import first_line, os_error_line, output_directory_problem, write_failed
from .preemption import ctrl_c_ends, uninterrupted
from .run_dir import EXPORT_DIR, RUN_FILE, RunDir
from .similarity import LayerStats, sentence_self_similarity

log = logging.getLogger("tacl_scale.analysis")

# What selfsim writes into --out: the only files an --out may already hold, and the
# ones --overwrite removes before the new report goes in, so that a folder never
# mixes two runs (an earlier run's heat map of a model no longer compared).
REPORT_FILES = ("selfsim.json", "selfsim.csv", "selfsim_by_layer.png")
HEATMAP_PATTERN = "heatmap_*.png"
# A report file being written into --out, under a name of its own until every file of
# the report is (publish_report): one a killed analysis left is removed by the next.
WRITING_PATTERNS = tuple(f".{name}.*.tmp" for name in (*REPORT_FILES, HEATMAP_PATTERN))


def isotropy(tokens: torch.Tensor, sentence_ids: torch.Tensor) -> float:
    """Mean cosine between token vectors of different sentences."""
    unit = F.normalize(tokens.double(), dim=-1)
    sims = unit @ unit.T
    different = sentence_ids[:, None] != sentence_ids[None, :]
    return float(sims[different].mean()) if different.any() else float("nan")


def resolve_model(path: str, workdir: Path) -> Path:
    """A HF directory as is; a training run or checkpoint directory exported first."""
    candidate = Path(path)
    if (candidate / "config.json").is_file():
        return candidate
    from .export import export_checkpoint, run_of_checkpoint

    if run_of_checkpoint(candidate) is None:
        raise ValueError(f"{path}: neither a Hugging Face model directory (no config.json) nor a training run "
                         "or checkpoint directory (no run.json)")

    return export_checkpoint(candidate, workdir / candidate.name.replace("/", "_"))


def require_vocabulary(model_dir: Path) -> None:
    """Refuse (ValueError naming it) a model directory without its tokenizer's
    vocabulary: transformers would build a tokenizer of its special tokens alone,
    every word [UNK], and figures that look like any others."""
    from .data.manifest import NO_VOCABULARY, holds_a_vocabulary

    if not holds_a_vocabulary(model_dir):
        raise ValueError(f"{model_dir}: {NO_VOCABULARY}: its figures would compare [UNK] tokens; copy the tokenizer "
                         "files of the model it was trained from into it")


def load_tokenizer(model_dir: Path) -> Any:
    """The tokenizer of a HF directory; a file of it that cannot be read as one (a
    vocab.txt that is not UTF-8, an HTML page saved as tokenizer.json) is a
    ValueError naming that file (:func:`tacl_scale.vocab.tokenizer_files_problem`,
    as training asks of ``--model``), not the library's traceback."""
    from transformers import AutoTokenizer

    from .pretrained import LOAD_ERRORS
    from .vocab import tokenizer_files_problem

    require_vocabulary(model_dir)
    try:
        return AutoTokenizer.from_pretrained(str(model_dir))
    except Exception as err:
        # The tokenizers library raises a bare Exception ("Error while initializing
        # WordPiece: stream did not contain valid UTF-8"); transformers a KeyError for
        # a tokenizer.json without "added_tokens". Of a file that is not what its name
        # says, any class; with every file sound, another class is a defect (its
        # traceback the report).
        problem = tokenizer_files_problem(model_dir)
        if problem is None and type(err) is not Exception and not isinstance(err, LOAD_ERRORS):
            raise
        raise ValueError(problem or f"{model_dir}: cannot load the tokenizer: {first_line(err)}") from err


def load_encoder(model_dir: Path, device: torch.device, tokenizer: Any = None) -> tuple[Any, Any]:
    """(tokenizer, encoder in eval mode) of a HF directory (its tokenizer loaded
    now unless given)."""
    from transformers import AutoModel

    from .pretrained import LOAD_ERRORS, cannot_load, mismatch_problem, own_load_report

    if tokenizer is None:
        tokenizer = load_tokenizer(model_dir)
    try:
        with own_load_report():
            model, info = AutoModel.from_pretrained(str(model_dir), output_loading_info=True,
                                                    ignore_mismatched_sizes=True)  # refused below, named
    except LOAD_ERRORS as err:
        raise cannot_load(model_dir, err) from err
    if problem := mismatch_problem(model_dir, info):
        raise ValueError(problem)
    # The heads of a pre-training checkpoint are not the encoder's (expected); a
    # missing pooler changes no hidden state; encoder weights initialised at random do.
    missing = sorted(key for key in info.get("missing_keys", ()) if not key.startswith("pooler."))
    if missing:
        log.warning("%s: %d encoder weights are not in the checkpoint and were initialised at random (e.g. %s): "
                    "its figures describe a partly random model", model_dir, len(missing), ", ".join(missing[:2]))
    return tokenizer, model.to(device).eval()


def analyse_model(
    tokenizer: Any,
    model: Any,
    name: str,
    sentences: list[str],
    batch_size: int,
    device: torch.device,
    exclude_special: bool,
    isotropy_tokens: int = 2000,
    seed: int = 0,
) -> list[dict[str, float]]:
    """Per-layer statistics of one model over the sentences."""
    from tqdm import tqdm

    layers: list[LayerStats] = []
    samples: list[list[torch.Tensor]] = []
    sample_ids: list[torch.Tensor] = []
    generator = torch.Generator().manual_seed(seed)
    per_batch = max(1, isotropy_tokens * batch_size // max(len(sentences), 1))
    positions = model.config.max_position_embeddings
    too_long = sum(len(ids) > positions for ids in tokenizer(sentences)["input_ids"])
    if too_long:
        log.warning("%s: %d of the %d sentences are longer than its %d positions: only their first %d tokens are "
                    "compared", name, too_long, len(sentences), positions, positions)
    for start in tqdm(range(0, len(sentences), batch_size), desc=name, unit="batch", leave=False, disable=None):
        chunk = sentences[start : start + batch_size]
        enc = tokenizer(chunk, padding=True, truncation=True, max_length=positions,
                        return_tensors="pt", return_special_tokens_mask=True)
        mask = enc["attention_mask"].bool()
        if exclude_special:
            mask &= ~enc["special_tokens_mask"].bool()
        with torch.no_grad():
            out = model(input_ids=enc["input_ids"].to(device), attention_mask=enc["attention_mask"].to(device),
                        token_type_ids=enc.get("token_type_ids", torch.zeros_like(enc["input_ids"])).to(device),
                        output_hidden_states=True)
        if not layers:
            layers = [LayerStats([]) for _ in out.hidden_states]
            samples = [[] for _ in out.hidden_states]
        rows, cols = mask.nonzero(as_tuple=True)
        pick = torch.randperm(len(rows), generator=generator)[:per_batch]
        sample_ids.append(rows[pick] + start)
        for k, hidden in enumerate(out.hidden_states):
            hidden = hidden.cpu()
            layers[k].add(*sentence_self_similarity(hidden, mask))
            samples[k].append(hidden[rows[pick], cols[pick]])
    ids = torch.cat(sample_ids)
    results = []
    for k, stats in enumerate(layers):
        results.append({"layer": k, **stats.summary(), "isotropy": isotropy(torch.cat(samples[k]), ids)})
    return results


HEATMAP_MAX_INCHES = 40.0
HEATMAP_MAX_LABELS = 110  # the tokens a 40-inch axis labels legibly at 8 points


def heatmap(tokenizer: Any, model: Any, sentence: str, layer: int, device: torch.device, out: Path,
            title: str) -> Path:
    """The token × token cosine matrix of one sentence, as a labelled PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    positions = model.config.max_position_embeddings
    if len(tokenizer(sentence)["input_ids"]) > positions:
        log.warning("%s: the heat-map sentence is longer than its %d positions: only its first %d tokens are drawn",
                    title, positions, positions)
    enc = tokenizer(sentence, truncation=True, max_length=positions, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**{k: v.to(device) for k, v in enc.items()}, output_hidden_states=True).hidden_states[layer]
    unit = F.normalize(hidden[0].float().cpu(), dim=-1)
    sims = (unit @ unit.T).numpy()
    labels = tokenizer.convert_ids_to_tokens(enc["input_ids"][0])
    # A readable cell per token up to MAX_LABELS tokens; past that the figure stops
    # growing (512 tokens made a 181-inch, 21,000-pixel PNG in a minute) and every
    # k-th token is labelled.
    size = min(HEATMAP_MAX_INCHES, max(4.0, 0.35 * len(labels) + 2))
    every = -(-len(labels) // HEATMAP_MAX_LABELS)
    fig, ax = plt.subplots(figsize=(size, size))
    image = ax.imshow(sims, vmin=-1, vmax=1, cmap="viridis")
    ticks = range(0, len(labels), every)
    ax.set_xticks(ticks, [labels[k] for k in ticks], rotation=90, fontsize=8)
    ax.set_yticks(ticks, [labels[k] for k in ticks], fontsize=8)
    ax.set_title(title)
    fig.colorbar(image, ax=ax, fraction=0.046)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def plot_by_layer(results: dict[str, list[dict[str, float]]], out: Path) -> Path:
    """Self-similarity (Eq. 3) by layer, one line per model (paper Figure 2)."""
    import matplotlib.pyplot as plt

    fig = layer_figure(results)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def layer_figure(results: dict[str, list[dict[str, float]]]) -> Any:
    """The figure of :func:`plot_by_layer` (a matplotlib Figure)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for name, layers in results.items():
        ax.plot([r["layer"] for r in layers], [r["eq3_mean"] for r in layers], marker="o", label=name)
    layer_count = max(len(layers) for layers in results.values())
    ax.set_xticks(range(layer_count))  # layers are integers: no ticks at 0.25, 0.5, ...
    ax.set_xlabel("layer (0 = embeddings)")
    ax.set_ylabel("self-similarity (Eq. 3)")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def read_sentences(path: Path, limit: int | None) -> list[str]:
    """The non-blank lines of ``path`` (UTF-8 text, one sentence a line), the first
    ``limit`` of them if given; errors name the file."""
    if path.is_dir():
        raise ValueError(f"{path}: is a directory; --sentences takes a text file, one sentence a line")
    if not path.exists():
        raise ValueError(f"{path}: no such file; --sentences takes a text file, one sentence a line "
                         "(tacl-sentence-list writes one from a corpus)")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: not UTF-8 text (byte {err.start}): --sentences takes a text file, one sentence "
                         "a line (tacl-sentence-list writes one from a corpus)") from err
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        raise ValueError(f"{path}: no sentences")
    if len(lines) < 2:  # Eq. 3's spread and isotropy were nan, printed as figures
        raise ValueError(f"{path}: one sentence: the analysis compares sentences (isotropy: tokens of different "
                         "ones); give at least 2, one a line")
    return lines[:limit] if limit else lines


def analysis_device(asked: str | None) -> torch.device:
    """``--device`` as a torch device (default: CUDA where there is one, else the
    CPU); one that is not a device, or a GPU this machine lacks, is a ValueError."""
    if asked is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(asked)
    except RuntimeError:
        raise ValueError(f"--device {asked}: not a device (cpu, cuda, cuda:1, ...)") from None
    if device.type == "cuda" and (not torch.cuda.is_available() or (device.index or 0) >= torch.cuda.device_count()):
        raise ValueError(f"--device {asked}: this machine's torch sees {torch.cuda.device_count()} CUDA device(s)")
    return device


def is_report_file(path: Path) -> bool:
    """Whether ``path`` is a file selfsim writes into --out (:data:`REPORT_FILES`,
    :data:`HEATMAP_PATTERN`)."""
    return path.is_file() and (path.name in REPORT_FILES or fnmatch.fnmatchcase(path.name, HEATMAP_PATTERN))


def is_left_unfinished(path: Path) -> bool:
    """Whether ``path`` is a report file an analysis killed while it published its
    report left under its temporary name (:data:`WRITING_PATTERNS`)."""
    return path.is_file() and any(fnmatch.fnmatchcase(path.name, pattern) for pattern in WRITING_PATTERNS)


def report_directory_problem(out: Path, overwrite: bool) -> str | None:
    """Why the report may not be written into ``out``, in words naming it, or None.
    ``out`` may be new, empty, or, with ``overwrite``, an earlier report (its own
    files alone). Refused: an export or a place inside one (the next export there
    replaces it whole), a training run's own folders (training replaces them), a
    run or a dataset directory itself, and a folder holding any other file, which
    the report would be mixed with."""
    from .data.manifest import MANIFEST_NAME
    from .markers import EXPORT_MARKER, container_problem, marked_as

    if problem := (output_directory_problem(out, "a directory for the report (--out)")
                   or container_problem(out, runs_and_datasets=False) or _run_part_problem(out)):
        return problem
    if not out.is_dir():
        return None
    if marked := marked_as(out, (EXPORT_MARKER, RUN_FILE, MANIFEST_NAME)):
        marker, what = marked
        what = f"{what}, which the next export there replaces whole" if marker == EXPORT_MARKER else f"{what} directory"
        return f"{out}: is {what} (it has {marker}): choose a new or empty directory for the report (--out)"
    entries = [path for path in sorted(out.iterdir()) if not is_left_unfinished(path)]  # publish_report removes them
    if stray := next((path for path in entries if not is_report_file(path)), None):
        return (f"{out}: holds {stray.name}, which the analysis does not write: choose a new or empty directory for "
                "the report (--out), so that it is not mixed with other files")
    if entries and not overwrite:
        return (f"{out}: already holds an analysis report ({entries[0].name}); pass --overwrite to replace it (its "
                "selfsim.* and heatmap_*.png files all go), or choose another --out")
    return None


def _run_part_problem(out: Path) -> str | None:
    """Why ``out`` may not be (or be inside) one of a training run's own folders
    (checkpoints/, export/, initial/, tokenizer/, tensorboard/), which training
    writes and replaces, or None; a report beside them (``RUN/analysis``) is fine.
    Asked even when the folder is not there yet: the run's end writes export/."""
    absolute = Path(os.path.abspath(out))
    for above in absolute.parents:
        run = RunDir(above)
        if not run.has_record():
            continue
        part = above / absolute.relative_to(above).parts[0]
        if part in (run.checkpoints, run.export, run.initial, run.tokenizer, run.tensorboard):
            return (f"{out}: inside the training run {above}'s own {part.name}/, which training writes and replaces: "
                    f"choose a place outside it, such as {above / 'analysis'}")
    return None


def encoder_layers(model_dir: Path) -> int:
    """The layers of the model in ``model_dir`` (its transformer layers and the
    embeddings, layer 0), from its config alone: asked of every model before the
    first is analysed."""
    from transformers import AutoConfig

    from .pretrained import LOAD_ERRORS, cannot_load

    try:
        return AutoConfig.from_pretrained(str(model_dir)).num_hidden_layers + 1
    except LOAD_ERRORS as err:
        raise cannot_load(model_dir, err) from err


@dataclass(frozen=True)
class SelfsimConfig:
    """What the ``selfsim`` command analyses, parsed once from its command line."""

    models: tuple[str, ...]  # HF model directories, or training run/checkpoint directories
    sentences: str  # text file, one sentence a line
    out: str  # the report directory: new, empty, or an earlier report's (with overwrite)
    overwrite: bool = False  # replace the report already in out, once the new one is written
    max_sentences: int | None = None  # read at most this many (None: all)
    batch_size: int = 64  # sentences encoded at once
    device: str | None = None  # None: cuda if available, else cpu
    exclude_special: bool = False  # drop [CLS]/[SEP] from the statistics
    heatmap_sentence: str | None = None  # also draw this sentence's cosine matrix
    heatmap_layer: int | None = None  # the heat map's layer (None: the top one)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> SelfsimConfig:
        return cls(tuple(args.model), args.sentences, args.out, args.overwrite, args.max_sentences, args.batch_size,
                   args.device, args.exclude_special, args.heatmap_sentence, args.heatmap_layer)


def selfsim(args: SelfsimConfig) -> dict[str, Any]:
    """The ``selfsim`` command: every model analysed over the sentences, the report
    (JSON, CSV, plot, heat maps) written to ``args.out`` and returned.

    Everything that can be refused is refused before the first model is analysed,
    and the report directory is made (or its earlier report removed) only once the
    whole report is ready: a failed analysis leaves it as it was."""
    out = Path(args.out)
    sentences = read_sentences(Path(args.sentences), args.max_sentences)
    if problem := report_directory_problem(out, args.overwrite):
        raise ValueError(problem)
    device = analysis_device(args.device)
    results: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="tacl-analysis-") as tmp:
        staged = Path(tmp) / "report"
        staged.mkdir()
        # A folder each: two runs of the same name must not export to one place.
        model_dirs = [resolve_model(path, Path(tmp) / f"model-{k}") for k, path in enumerate(args.models)]
        tokenizers = []
        for path, model_dir in zip(args.models, model_dirs, strict=True):  # the next model's fault, before minutes
            tokenizers.append(load_tokenizer(model_dir))
            layers = encoder_layers(model_dir)
            if args.heatmap_sentence and args.heatmap_layer is not None and not 0 <= args.heatmap_layer < layers:
                raise ValueError(f"--heatmap-layer {args.heatmap_layer}: {path} has layers 0 (the embeddings) to "
                                 f"{layers - 1}")
        for path, model_dir, tokenizer in zip(args.models, model_dirs, tokenizers, strict=True):
            tokenizer, model = load_encoder(model_dir, device, tokenizer)
            name = _unique_name(Path(path), results)
            results[name] = analyse_model(tokenizer, model, name, sentences, args.batch_size, device,
                                          args.exclude_special)
            if results[name][0]["n_sentences"] == 0:
                raise ValueError(f"{args.sentences}: no sentence has two {'real ' if args.exclude_special else ''}"
                                 f"tokens for {path}'s tokenizer: self-similarity compares a sentence's tokens")
            if args.heatmap_sentence:
                layer = args.heatmap_layer if args.heatmap_layer is not None else len(results[name]) - 1
                heatmap(tokenizer, model, args.heatmap_sentence, layer, device, staged / f"heatmap_{name}.png",
                        f"{name}, layer {layer}")
        report = {"settings": {"sentences": str(args.sentences), "n_sentences": len(sentences),
                               "exclude_special": args.exclude_special, "models": list(args.models)},
                  "models": results}
        (staged / "selfsim.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
        write_csv(results, staged / "selfsim.csv")
        plot_by_layer(results, staged / "selfsim_by_layer.png")
        publish_report(staged, out, args.overwrite)
    return report


def write_csv(results: dict[str, list[dict[str, float]]], path: Path) -> None:
    """The report's table as CSV: one row per model and layer."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["model", "layer", "eq3_mean", "eq3_std", "n_sentences", "pair_weighted_mean", "n_pairs",
                         "isotropy"])
        for name, layers in results.items():
            for r in layers:
                writer.writerow([name, r["layer"], f"{r['eq3_mean']:.6f}", f"{r['eq3_std']:.6f}", r["n_sentences"],
                                 f"{r['pair_weighted_mean']:.6f}", r["n_pairs"], f"{r['isotropy']:.6f}"])


def publish_report(staged: Path, out: Path, overwrite: bool) -> None:
    """Put the report files of ``staged`` into ``out`` (made now) in place of an
    earlier report's (``overwrite``), so that none of its files is left beside the
    new ones. Every new file is first written whole into ``out`` under a temporary
    name; only once all of them are do the earlier report's files go and the new
    ones take their names (selfsim.json, which names the models compared, last). A
    write that fails (a full disk) leaves an earlier report as it was and no
    temporary file, and is an OSError naming ``out`` (:func:`tacl_scale.files.write_failed`)."""
    if problem := report_directory_problem(out, overwrite):  # something put there while the models were analysed
        raise ValueError(problem)
    made = not out.exists()
    names = sorted((path.name for path in staged.iterdir()), key=lambda name: (name == "selfsim.json", name))
    writing: dict[str, Path] = {}
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name in names:
            writing[name] = out / f".{name}.{uuid.uuid4().hex}.tmp"
            with open(writing[name], "wb") as f:
                f.write((staged / name).read_bytes())
        # A few renames: Ctrl-C once the earlier report's files are going would leave half of each report.
        with uninterrupted():
            ours = set(writing.values())
            for earlier in sorted(set(out.iterdir()) - ours):
                if (is_report_file(earlier) and earlier.name not in writing) or is_left_unfinished(earlier):
                    earlier.unlink()
            for name, temporary in writing.items():
                os.replace(temporary, out / name)
    except OSError as err:
        raise write_failed(err, out, "the report") from err
    finally:
        for temporary in writing.values():
            temporary.unlink(missing_ok=True)
        if made and out.is_dir() and not any(out.iterdir()):
            with contextlib.suppress(OSError):
                out.rmdir()  # no --out left behind, as with any other failed analysis


def _unique_name(path: Path, taken: dict[str, Any]) -> str:
    name = path.name if path.name != EXPORT_DIR else path.parent.name  # a run's export by the run's name
    base, k = name, 2
    while name in taken:
        name, k = f"{base}-{k}", k + 1
    return name


def format_table(report: dict[str, Any]) -> str:
    """The report as the table the command prints: one line per model and layer."""
    lines = []
    for name, layers in report["models"].items():
        lines.append(f"{name}: layer  eq3 (mean±std)   pair-weighted  isotropy")
        for r in layers:
            lines.append(f"  {r['layer']:>12}  {r['eq3_mean']:.4f}±{r['eq3_std']:.4f}  "
                         f"{r['pair_weighted_mean']:.4f}         {r['isotropy']:.4f}")
    return "\n".join(lines)


@ctrl_c_ends
def main(argv: list[str] | None = None) -> int:
    p = make_parser("python -m tacl_scale.analysis", __doc__)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND",
                           help="the analysis to run; COMMAND --help shows its options")
    s = sub.add_parser("selfsim", help="layer-wise self-similarity, isotropy and heat maps",
                       description="Layer-wise self-similarity (Eq. 3), isotropy and heat maps of one or more models "
                       "on a sentence list.", formatter_class=HelpFormatter)
    s.add_argument("--model", action="append", required=True, metavar="PATH",
                   help="HF model directory, or a training run/checkpoint directory; repeatable")
    s.add_argument("--sentences", required=True, metavar="FILE", help="text file, one sentence a line")
    s.add_argument("--out", required=True, metavar="DIR",
                   help="output directory: new, empty, or an earlier report's (with --overwrite)")
    s.add_argument("--overwrite", action="store_true",
                   help="replace the report already in --out (its selfsim.* and heatmap_*.png files all go, "
                   "once the new report is written)")
    s.add_argument("--max-sentences", type=int, default=None, help="read at most this many (default: all)")
    s.add_argument("--batch-size", type=int, default=64, help="sentences encoded at once")
    s.add_argument("--device", default=None, help="default: cuda if available, else cpu")
    s.add_argument("--exclude-special", action="store_true", help="drop [CLS]/[SEP] (default: keep them)")
    s.add_argument("--heatmap-sentence", default=None, help="also draw this sentence's cosine matrix")
    s.add_argument("--heatmap-layer", type=int, default=None, help="layer of the heat map (default: top)")
    args = p.parse_args(argv)
    for flag, value, least in (("--batch-size", args.batch_size, 1), ("--max-sentences", args.max_sentences, 2)):
        if value is not None and value < least:
            p.error(f"{flag} must be >= {least}, got {value}")
    logging.basicConfig(level=logging.INFO, format="%(levelname)s: %(message)s")
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # "Loading weights" bars, one a model, in a job's log
    try:
        report = selfsim(SelfsimConfig.from_args(args))
    except ValueError as err:
        return error_exit(str(err))
    except OSError as err:
        return error_exit(os_error_line(err, args.out))
    print(format_table(report))
    print(f"wrote {Path(args.out) / 'selfsim.json'}, selfsim.csv, selfsim_by_layer.png"
          + (", heatmap_*.png" if args.heatmap_sentence else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
