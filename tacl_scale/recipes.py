"""Named training recipes: ``train.py --recipe NAME`` and the Slurm scripts.

A recipe fills the settings the command line leaves out; it is one layer of the
precedence every setting follows::

    a flag on the command line
    > a trainer setting in the DeepSpeed config the user named with --ds (old configs:
      train_batch_size, train_micro_batch_size_per_gpu, gradient_clipping, optimizer
      params; said once in the log)
    > the recipe (--recipe)
    > the typed config's default (tacl_scale.config: the paper's numbers, written once)

So ``sbatch slurm/pretrain_large.sh --ds ds_configs/cpu.json --micro-batch-size 4``
trains with the user's config and micro-batch, and the recipe's model, data, run
directory and global batch.

The TaCL recipes (Su et al., 2022, §4): BERT initialised from the released checkpoint,
Wikipedia, max length 256, global batch 256, AdamW lr 1e-4, 10% linear warm-up, 150k
steps: those numbers are :class:`~tacl_scale.config.OptimConfig`'s defaults, so a
recipe names only what is its own: the DeepSpeed config, the model, the data and
where the run goes. The micro-batch is left to the trainer (the largest that fits
each GPU at the data's length and divides its share of the global batch: 32 on
each GPU of an 8-GPU node when it fits, as the paper's setup).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path

# The checkout this code runs from: a recipe's DeepSpeed config is found there when
# the job runs from another directory.
_CHECKOUT = Path(__file__).resolve().parent.parent


class RecipeError(ValueError):
    """An unknown recipe name; the message lists the known ones."""


@dataclass(frozen=True)
class Recipe:
    """What a recipe sets; None leaves a setting to the typed config's default.
    Paths are relative to where the job runs (the repository root for Slurm)."""

    name: str
    summary: str
    ds: str = "ds_configs/zero2.json"  # DeepSpeed's own settings (ZeRO stage, precision, buckets)
    model: str | None = None
    data: str | None = None
    output: str | None = None
    batch_size: int | None = None
    micro_batch_size: int | None = None  # per rank; None: "auto", the largest that fits

    def ds_path(self) -> str:
        """The recipe's DeepSpeed config: relative to the working directory, or else
        to the checkout this code runs from."""
        if Path(self.ds).exists() or Path(self.ds).is_absolute():
            return self.ds
        in_checkout = _CHECKOUT / self.ds
        return str(in_checkout) if in_checkout.exists() else self.ds

    def flag_values(self) -> dict[str, object]:
        """The recipe as ``train.py`` argument destinations (None: not set)."""
        return {"ds": self.ds_path(), "model": self.model, "data": [self.data] if self.data else None,
                "output": self.output, "batch_size": self.batch_size, "micro_batch_size": self.micro_batch_size}


RECIPES: dict[str, Recipe] = {recipe.name: recipe for recipe in (
    Recipe("tacl-base-en", "TaCL-base, English: bert-base-uncased on English Wikipedia (paper §4)",
           model="models/bert-base-uncased", data="data/enwiki-bert-uncased-256", output="runs/tacl-base-en"),
    Recipe("tacl-base-zh", "TaCL-base, Chinese: bert-base-chinese on Chinese Wikipedia (paper §4)",
           model="models/bert-base-chinese", data="data/zhwiki-bert-chinese-256", output="runs/tacl-base-zh"),
    Recipe("tacl-large-en", "TaCL-large, English: bert-large-uncased on English Wikipedia (paper §4)",
           model="models/bert-large-uncased", data="data/enwiki-bert-uncased-256", output="runs/tacl-large-en"),
    Recipe("tiny-cpu", "a few CPU ranks in fp32, global batch 8 of micro-batches of 4: the README's tour and "
           "the tests (give --data, --model and --output)",
           ds="ds_configs/cpu.json", batch_size=8, micro_batch_size=4),
)}


def recipe(name: str) -> Recipe:
    """The recipe called ``name``."""
    try:
        return RECIPES[name]
    except KeyError:
        raise RecipeError(f"--recipe {name!r}: no such recipe; known: {', '.join(sorted(RECIPES))}") from None


def describe() -> str:
    """Every recipe, one indented line each (``train.py --help``)."""
    return "\n".join(textwrap.fill(f"{r.name}: {r.summary}", 80, initial_indent="  ", subsequent_indent="    ")
                     for r in RECIPES.values())


def main(argv: list[str] | None = None) -> int:
    """``python -m tacl_scale.recipes``: each recipe and what it sets (it takes no
    arguments: an unknown one is refused, as every command refuses one)."""
    from .cli import make_parser

    make_parser("python -m tacl_scale.recipes", "Each training recipe (train.py --recipe NAME) and the flags it "
                "sets; a flag given on the command line replaces the recipe's.").parse_args(argv)
    for r in RECIPES.values():
        set_here = {k: v for k, v in r.flag_values().items() if v is not None}
        print(f"{r.name}: {r.summary}")
        print("    " + " ".join(f"--{k.replace('_', '-')} {v[0] if isinstance(v, list) else v}"
                                for k, v in set_here.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
