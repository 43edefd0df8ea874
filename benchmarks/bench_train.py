"""Training-step throughput of tacl-scale's student + teacher + objective, with the
step-time split.

    python benchmarks/bench_train.py                     # the shape below, CPU, 2 threads
    python benchmarks/bench_train.py --hidden 768 --layers 12 --heads 12 --intermediate 3072 --device cuda

Default shape: where the paper's public code was measured on this kind of machine
(BERT hidden 256, 4 layers, 4 heads, intermediate 1024, vocab 30,522, length 128,
micro-batch 16, one process with 2 threads, 5 warm-up + 30 timed steps): the public
code trains TaCL there at 7.5 sequences/s (MLM+NSP alone at 9.7).

It runs the same modules train.py runs (``make_teacher``, ``teacher_states``,
``PretrainingModule``, AdamW) in one process without the DeepSpeed engine, on random
token batches with 15% of positions masked, once per objective set.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from arguments import count  # noqa: E402  (this folder is on the path of a script run from it)
from transformers import BertConfig, BertForPreTraining  # noqa: E402

from tacl_scale.data.loader import CollateConfig, collate, to_device  # noqa: E402
from tacl_scale.data.views import MirrorViews  # noqa: E402
from tacl_scale.model import (  # noqa: E402
    ObjectiveConfig,
    PretrainingModule,
    default_teacher_dtype,
    make_teacher,
    teacher_states,
)

PUBLIC_CODE = {"tacl,mlm,nsp": 7.5, "mlm,nsp": 9.7}
# What the public code's figures were measured at (the default shape above): a run at
# any other setting measures something else, and gets no figure or ratio beside it.
PUBLIC_SETTINGS = {"hidden": 256, "layers": 4, "heads": 4, "intermediate": 1024, "vocab": 30522, "length": 128,
                   "batch": 16, "threads": 2, "device": "cpu"}
PUBLIC_TEACHER_DTYPE = "fp32"  # the teacher's, for the objectives with one
PUBLIC_STEPS = {"warmup": 5, "steps": 30}  # at least these: fewer measure start-up or noise
FIRST_TOKEN_ID = 1000  # random_items draws token ids from [FIRST_TOKEN_ID, --vocab)


def random_items(count: int, length: int, vocab: int, generator: torch.Generator) -> list[dict]:
    items = []
    for _ in range(count):
        ids = torch.randint(FIRST_TOKEN_ID, vocab, (length,), generator=generator)
        ids[0], ids[length // 2], ids[-1] = 101, 102, 102
        positions = torch.randperm(length - 2, generator=generator)[: round(0.15 * length)] + 1
        positions = positions.sort().values
        masked = ids.clone()
        masked[positions] = 103
        types = torch.zeros(length, dtype=torch.long)
        types[length // 2 + 1 :] = 1
        items.append({"original_ids": ids.numpy(), "input_ids": masked.numpy(),
                      "token_type_ids": types.numpy(), "masked_positions": positions.numpy(),
                      "nsp_label": int(torch.randint(0, 2, (1,), generator=generator))})
    return items


def teacher_dtype(args: argparse.Namespace, device: torch.device) -> str:
    """The teacher's dtype: --teacher-dtype, else the trainer's default on ``device``."""
    return args.teacher_dtype or default_teacher_dtype(device)


def public_figure(objectives: str, args: argparse.Namespace) -> float | None:
    """The public code's seq/s for ``objectives`` when this run measures at every
    setting it was measured at (PUBLIC_SETTINGS, the teacher's dtype where there is a
    teacher, at least PUBLIC_STEPS' warm-up and timed steps), else None."""
    public = PUBLIC_CODE.get(objectives)
    if public is None:
        return None
    device = torch.device(args.device)
    settings = {key: getattr(args, key) for key in PUBLIC_SETTINGS} | {"device": device.type}
    if settings != PUBLIC_SETTINGS or any(getattr(args, key) < least for key, least in PUBLIC_STEPS.items()):
        return None
    if "tacl" in objectives.split(",") and teacher_dtype(args, device) != PUBLIC_TEACHER_DTYPE:
        return None
    return public


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def run(objectives: str, args: argparse.Namespace, device: torch.device) -> dict[str, float]:
    torch.manual_seed(0)
    config = BertConfig(vocab_size=args.vocab, hidden_size=args.hidden, num_hidden_layers=args.layers,
                        num_attention_heads=args.heads, intermediate_size=args.intermediate,
                        max_position_embeddings=max(512, args.length))
    config._attn_implementation = "sdpa"
    student = BertForPreTraining(config).to(device).train()
    objective = ObjectiveConfig(tuple(objectives.split(",")))
    teacher = make_teacher(student, teacher_dtype(args, device), device) if "tacl" in objective.objectives else None
    module = PretrainingModule(student, objective)
    optimizer = torch.optim.AdamW(module.parameters(), lr=1e-4, weight_decay=0.01)
    generator = torch.Generator().manual_seed(0)
    pool = random_items(args.batch * 4, args.length, args.vocab, generator)
    if "mirror" in objective.objectives:  # the two views, made on the data side as in training
        views = MirrorViews(0, objective.mirror.span_tokens, 103, (0, 101, 102, 103))
        pool = [views.apply(item, 0, k) for k, item in enumerate(pool)]
    split = {"data": 0.0, "teacher": 0.0, "student_fwd_loss": 0.0, "backward": 0.0, "optimizer": 0.0}
    timed_start = 0.0
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            split = dict.fromkeys(split, 0.0)
            sync(device)
            timed_start = time.perf_counter()
        t0 = time.perf_counter()
        items = [pool[(step * args.batch + k) % len(pool)] for k in range(args.batch)]
        batch = to_device(collate(items, CollateConfig()), device)
        sync(device)
        t1 = time.perf_counter()
        hidden = teacher_states(teacher, batch) if teacher is not None else None
        sync(device)
        t2 = time.perf_counter()
        parts = module(batch, hidden)
        sync(device)
        t3 = time.perf_counter()
        parts["loss"].backward()
        torch.nn.utils.clip_grad_norm_(module.parameters(), 1.0)
        sync(device)
        t4 = time.perf_counter()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        sync(device)
        t5 = time.perf_counter()
        for key, (a, b) in zip(split, ((t0, t1), (t1, t2), (t2, t3), (t3, t4), (t4, t5)), strict=True):
            split[key] += b - a
    total = time.perf_counter() - timed_start
    result = {"seq_per_s": args.steps * args.batch / total,
              "tokens_per_s": args.steps * args.batch * args.length / total,
              "step_ms": 1000 * total / args.steps}
    result.update({f"{k}_ms": 1000 * v / args.steps for k, v in split.items()})
    return result


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hidden", type=count(1), default=256)
    p.add_argument("--layers", type=count(1), default=4)
    p.add_argument("--heads", type=count(1), default=4)
    p.add_argument("--intermediate", type=count(1), default=1024)
    p.add_argument("--vocab", type=count(FIRST_TOKEN_ID + 1), default=30522,
                   help=f"vocabulary size (random token ids are drawn from {FIRST_TOKEN_ID} up)")
    p.add_argument("--length", type=count(4), default=128)
    p.add_argument("--batch", type=count(1), default=16)
    p.add_argument("--threads", type=count(1), default=2)
    p.add_argument("--warmup", type=count(0), default=5, help="untimed steps first (0 or more)")
    p.add_argument("--steps", type=count(1), default=30, help="timed steps (1 or more)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--teacher-dtype", choices=("fp16", "bf16", "fp32"), default=None)
    p.add_argument("--objectives", nargs="+", default=["tacl,mlm,nsp", "mlm,nsp"])
    args = p.parse_args(argv)
    if args.hidden % args.heads:
        p.error(f"--hidden {args.hidden} is not a multiple of --heads {args.heads}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    print(f"shape: hidden {args.hidden}, {args.layers} layers, {args.heads} heads, intermediate "
          f"{args.intermediate}, vocab {args.vocab}, length {args.length}, micro-batch {args.batch}; "
          f"{args.device}, {torch.get_num_threads()} threads, torch {torch.__version__}; "
          f"{args.warmup} warm-up + {args.steps} timed steps")
    header = ("objectives", "seq/s", "tokens/s", "step ms", "data", "teacher", "fwd+loss", "backward",
              "optimizer", "public code seq/s", "ratio")
    rows = []
    for objectives in args.objectives:
        r = run(objectives, args, device)
        public = public_figure(objectives, args)
        rows.append((objectives, f"{r['seq_per_s']:.1f}", f"{r['tokens_per_s']:,.0f}", f"{r['step_ms']:.0f}",
                     f"{r['data_ms']:.0f}", f"{r['teacher_ms']:.0f}", f"{r['student_fwd_loss_ms']:.0f}",
                     f"{r['backward_ms']:.0f}", f"{r['optimizer_ms']:.0f}",
                     f"{public}" if public else "-", f"{r['seq_per_s'] / public:.1f}x" if public else "-"))
    widths = [max(len(str(row[i])) for row in (header, *rows)) for i in range(len(header))]
    print("  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True)))
    for row in rows:
        print("  ".join(str(c).rjust(w) for c, w in zip(row, widths, strict=True)))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {peak:.0f} MB" + (f", peak CUDA memory {torch.cuda.max_memory_allocated() / 2**20:.0f} MB"
                                       if device.type == "cuda" else ""))
    print("(step split columns are ms per step; target for TaCL at the default shape: >= 22 seq/s = 3x 7.5)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
