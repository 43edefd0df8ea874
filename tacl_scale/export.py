"""``python -m tacl_scale.export CKPT OUT``: the student of a training checkpoint as
a HF model directory (weights, config, tokenizer files) that ``AutoModel`` and
``BertForPreTraining.from_pretrained`` load, for fine-tuning with standard scripts.

``CKPT`` is a run directory (its latest checkpoint) or one checkpoint directory
(``RUN_DIR/checkpoints/stepNNNNNNNN``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import torch
from transformers import BertForPreTraining

from .checkpoint import latest_tag

RUN_FILE = "run.json"
TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def tokenizer_source(model_path: str, manifest: dict[str, Any]) -> dict[str, Any]:
    """Where the exported model's tokenizer comes from: the model directory's own
    files, or else the dataset's vocabulary."""
    model_dir = Path(model_path)
    if model_dir.is_dir() and any((model_dir / name).is_file() for name in TOKENIZER_FILES):
        return {"directory": str(model_dir.resolve())}
    tok = manifest["tokenizer"]
    return {"vocab_file": str(Path(tok["path"]).resolve()), "lowercase": tok.get("lowercase"), "kind": tok["kind"]}


def write_tokenizer(source: dict[str, Any], out: Path) -> None:
    if "directory" in source:
        for name in TOKENIZER_FILES:
            path = Path(source["directory"]) / name
            if path.is_file():
                shutil.copy2(path, out / name)
        return
    if source.get("kind") == "sentencepiece":
        shutil.copy2(source["vocab_file"], out / Path(source["vocab_file"]).name)
        return
    from transformers import BertTokenizerFast

    # from_pretrained on a directory holding vocab.txt reads it the same way in
    # every transformers version (constructor arguments changed in v5).
    shutil.copy2(source["vocab_file"], out / "vocab.txt")
    lowercase = source.get("lowercase")
    tokenizer = BertTokenizerFast.from_pretrained(str(out), do_lower_case=True if lowercase is None else lowercase)
    tokenizer.save_pretrained(out)


def export_student(student: BertForPreTraining, out: Path, source: dict[str, Any]) -> Path:
    """Save the student (fp32 weights) and its tokenizer to ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    student_fp32 = student if next(student.parameters()).dtype == torch.float32 else _fp32_copy(student)
    student_fp32.save_pretrained(out)
    write_tokenizer(source, out)
    return out


def _fp32_copy(student: BertForPreTraining) -> BertForPreTraining:
    import copy

    return copy.deepcopy(student).float()


def _resolve(ckpt: Path) -> tuple[Path, Path]:
    """(run directory, checkpoint directory) of a CKPT argument."""
    if (ckpt / RUN_FILE).is_file():
        root = ckpt / "checkpoints"
        tag = latest_tag(root)
        if tag is None:
            raise ValueError(f"{ckpt}: no complete checkpoint under {root}")
        return ckpt, root / tag
    run_dir = ckpt.parent.parent
    if not (run_dir / RUN_FILE).is_file():
        raise ValueError(f"{ckpt}: neither a run directory nor a checkpoint inside one ({RUN_FILE} not found)")
    return run_dir, ckpt


def export_checkpoint(ckpt: Path, out: Path) -> Path:
    from .model import load_student

    run_dir, ckpt_dir = _resolve(ckpt)
    run = json.loads((run_dir / RUN_FILE).read_text(encoding="utf-8"))
    states = sorted(ckpt_dir.glob("mp_rank_*_model_states.pt"))
    if not states:
        raise ValueError(f"{ckpt_dir}: no mp_rank_*_model_states.pt")
    module_state = torch.load(states[0], map_location="cpu", weights_only=False)["module"]
    student = load_student(run["config"]["model"])
    prefix = "student."
    student.load_state_dict({k[len(prefix):]: v.float() for k, v in module_state.items() if k.startswith(prefix)})
    return export_student(student, out, run["tokenizer_source"])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tacl_scale.export", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("checkpoint", type=Path, help="run directory or checkpoint directory")
    p.add_argument("output", type=Path, help="HF model directory to write")
    args = p.parse_args(argv)
    try:
        out = export_checkpoint(args.checkpoint, args.output)
    except (ValueError, OSError, KeyError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(f"exported {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
