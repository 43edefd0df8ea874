"""TaCL continual pre-training with DeepSpeed.

    deepspeed tacl_scale/train.py --ds ds_configs/zero2.json --data DIR --model PATH --output RUN_DIR

The student (``BertForPreTraining``) is trained by a DeepSpeed engine built from
``--ds``; the frozen teacher encoder runs forward-only on the same rank, outside the
engine. Loss = TaCL + MLM + NSP (``--objectives``). Every rank reads its own slice
of a deterministic global shuffle; checkpoints carry the data position and RNG
states, so ``--resume`` continues exactly.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script by the deepspeed launcher
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from tacl_scale import checkpoint
from tacl_scale.config import CheckpointConfig, DataConfig, OptimConfig, TrainConfig
from tacl_scale.data import PretrainDataset
from tacl_scale.data.loader import (
    BlendedDatasets,
    CollateConfig,
    DynamicMasking,
    MicroBatches,
    RankSlicedShuffle,
    ShuffleConfig,
    TrainingInstances,
    collate,
)
from tacl_scale.evaluation import evaluate, layer_self_similarity
from tacl_scale.export import RUN_FILE, export_student, tokenizer_source
from tacl_scale.flops import peak_flops, step_flops
from tacl_scale.model import (
    OBJECTIVES,
    TEACHER_DTYPES,
    ObjectiveConfig,
    PretrainingModule,
    default_teacher_dtype,
    load_student,
    make_teacher,
    teacher_states,
)

log = logging.getLogger("tacl_scale.train")


class TrainError(RuntimeError):
    """Training refused to start; the message says why."""


PREEMPTED_MARKER = "PREEMPTED"


class StopRequest:
    """SIGUSR1 (Slurm's --signal before the time limit) or SIGTERM (preemption,
    scancel) asks for a checkpoint at the next step boundary and a clean exit; the
    job script then requeues the job, which resumes. Ranks agree on the step with an
    all-reduce, since the signal can reach them at different moments."""

    def __init__(self) -> None:
        self.signal_name: str | None = None
        for sig in (signal.SIGUSR1, signal.SIGTERM):
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, _frame: Any) -> None:
        self.signal_name = signal.Signals(signum).name

    def agreed(self) -> bool:
        import torch.distributed as dist

        flag = torch.tensor([1 if self.signal_name else 0], dtype=torch.int32)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag.item())


def parse_args(argv: list[str] | None = None) -> TrainConfig:
    p = argparse.ArgumentParser(prog="deepspeed tacl_scale/train.py", description=__doc__,
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--ds", required=True, metavar="CONFIG.json", help="DeepSpeed config (ds_configs/zero2.json)")
    p.add_argument("--data", required=True, action="append", metavar="DIR",
                   help="dataset directory built by data_prep.build; repeat to blend several")
    p.add_argument("--data-weights", type=float, nargs="+", default=None, metavar="W",
                   help="one weight per --data: each dataset's share of an epoch (default: their sizes)")
    p.add_argument("--model", required=True, metavar="PATH",
                   help="HF BERT directory (student and teacher init) or a BertConfig JSON (random init)")
    p.add_argument("--output", required=True, metavar="RUN_DIR", help="run directory")
    p.add_argument("--steps", type=int, default=150_000, help="optimizer steps")
    p.add_argument("--objectives", default="tacl,mlm,nsp",
                   help="comma-separated subset of tacl,mlm,nsp (mlm,nsp = BERT+MT baseline; tacl = model-2)")
    p.add_argument("--temperature", type=float, default=0.01, help="TaCL temperature τ")
    p.add_argument("--tacl-impl", choices=("auto", "torch", "triton"), default="auto")
    p.add_argument("--teacher-dtype", choices=sorted(TEACHER_DTYPES), default=None,
                   help="teacher precision (default fp16 on CUDA, fp32 on CPU)")
    p.add_argument("--lr", type=float, default=None, help="default: the config's optimizer lr, else 1e-4")
    p.add_argument("--weight-decay", type=float, default=None,
                   help="default: the config's optimizer weight_decay, else 0.01")
    p.add_argument("--warmup-ratio", type=float, default=0.1, help="share of steps of linear warm-up")
    p.add_argument("--batch-size", type=int, default=None,
                   help="global batch per optimizer step (default: the config's train_batch_size, else 256)")
    p.add_argument("--micro-batch-size", type=int, default=None,
                   help="per-rank micro-batch (default: the config's, else 32)")
    p.add_argument("--grad-clip", type=float, default=None, help="default: the config's, else 1.0")
    p.add_argument("--pad-to-max-length", action="store_true", help="pad every batch to the dataset's max length")
    p.add_argument("--num-workers", type=int, default=2, help="DataLoader workers per rank")
    p.add_argument("--dynamic-masking", action="store_true",
                   help="re-mask every epoch from the unmasked ids instead of the static masks")
    p.add_argument("--save-every", type=int, default=1000, help="checkpoint every N steps")
    p.add_argument("--keep-last", type=int, default=3, help="checkpoints kept")
    p.add_argument("--resume", action="store_true", help="continue from the latest checkpoint in RUN_DIR")
    p.add_argument("--stop-after-steps", type=int, default=None, metavar="N",
                   help="end this job after N steps with a checkpoint (for jobs shorter than the run; "
                   "--resume continues)")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--log-every", type=int, default=10, help="progress line every N steps")
    p.add_argument("--no-export", action="store_true", help="skip the HF export at the end")
    p.add_argument("--eval-every", type=int, default=1000,
                   help="every N steps, held-out losses and per-layer self-similarity to TensorBoard (0: off)")
    p.add_argument("--eval-instances", type=int, default=256,
                   help="instances held out of training for --eval-every")
    p.add_argument("--local_rank", type=int, default=-1, help=argparse.SUPPRESS)  # set by the launcher
    args = p.parse_args(argv)
    if args.data_weights is not None and len(args.data_weights) != len(args.data):
        p.error(f"--data-weights has {len(args.data_weights)} values for {len(args.data)} --data")
    try:
        objective = ObjectiveConfig(tuple(o.strip() for o in args.objectives.split(",") if o.strip()),
                                    args.temperature, args.tacl_impl)
    except ValueError as err:
        p.error(str(err))
    ds_defaults = _read_json(args.ds)
    adam = ds_defaults.get("optimizer", {}).get("params", {})
    micro = args.micro_batch_size or ds_defaults.get("train_micro_batch_size_per_gpu") or 32
    return TrainConfig(
        model=args.model,
        output=os.path.abspath(args.output),
        deepspeed_config=args.ds,
        data=DataConfig(tuple(args.data), weights=tuple(args.data_weights) if args.data_weights else None,
                        pad_to_max_length=args.pad_to_max_length,
                        num_workers=args.num_workers, dynamic_masking=args.dynamic_masking),
        objective=objective,
        optim=OptimConfig(
            steps=args.steps,
            lr=args.lr if args.lr is not None else adam.get("lr", 1e-4),
            weight_decay=args.weight_decay if args.weight_decay is not None else adam.get("weight_decay", 0.01),
            betas=tuple(adam.get("betas", (0.9, 0.999))),
            eps=adam.get("eps", 1e-6),
            warmup_ratio=args.warmup_ratio,
            grad_clip=args.grad_clip if args.grad_clip is not None else ds_defaults.get("gradient_clipping", 1.0),
            batch_size=args.batch_size or ds_defaults.get("train_batch_size") or 256,
            micro_batch_size=int(micro),
        ),
        checkpoint=CheckpointConfig(args.save_every, args.keep_last, args.resume, args.stop_after_steps),
        teacher_dtype=args.teacher_dtype,
        seed=args.seed,
        log_every=args.log_every,
        export=not args.no_export,
        eval_every=args.eval_every,
        eval_instances=args.eval_instances,
    )


def _read_json(path: str) -> dict[str, Any]:
    try:
        value = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise SystemExit(f"error: {path}: unreadable DeepSpeed config: {err}") from err
    if not isinstance(value, dict):
        raise SystemExit(f"error: {path}: a DeepSpeed config must be a JSON object")
    return value


def deepspeed_config(config: TrainConfig, world_size: int, on_cpu: bool, rank: int = 0) -> dict[str, Any]:
    """The ``--ds`` JSON with batch sizes, clipping and precision settled."""
    ds = _read_json(config.deepspeed_config)
    if "zero_optimization" not in ds:
        raise TrainError(f"{config.deepspeed_config}: no zero_optimization section (ZeRO stage)")
    if "scheduler" in ds:
        raise TrainError(f"{config.deepspeed_config}: remove 'scheduler': train.py builds the warm-up/decay "
                         "schedule from --steps and --warmup-ratio")
    optimizer = ds.pop("optimizer", None)
    if optimizer is not None and str(optimizer.get("type", "")).lower() not in ("adam", "adamw"):
        raise TrainError(f"{config.deepspeed_config}: optimizer {optimizer.get('type')!r}; TaCL trains with "
                         "AdamW (its params are read as defaults of --lr/--weight-decay)")
    optim = config.optim
    per_step = optim.micro_batch_size * world_size
    if optim.batch_size % per_step:
        raise TrainError(
            f"batch size {optim.batch_size} is not a multiple of micro-batch {optim.micro_batch_size} × "
            f"{world_size} rank(s)"
        )
    ds["train_batch_size"] = optim.batch_size
    ds["train_micro_batch_size_per_gpu"] = optim.micro_batch_size
    ds["gradient_accumulation_steps"] = optim.batch_size // per_step
    ds["gradient_clipping"] = optim.grad_clip
    ds.setdefault("steps_per_print", 10**9)  # train.py prints its own progress
    if on_cpu and ds.get("fp16", {}).get("enabled"):
        ds["fp16"]["enabled"] = False
        if rank == 0:
            log.warning("%s asks for fp16, which the CPU accelerator cannot do: training in fp32 instead",
                        config.deepspeed_config)
    return ds


def check_data_and_model(datasets: list[PretrainDataset], student: Any, model_path: str) -> None:
    """Refuse a dataset whose tokenizer does not match the model, or whose
    sequences are longer than the model's positions."""
    from data_prep.tokenization import file_sha256

    first = datasets[0].manifest["tokenizer"]
    for ds in datasets[1:]:
        if ds.manifest["tokenizer"]["sha256"] != first["sha256"]:
            raise TrainError(f"{ds.path}: tokenizer differs from {datasets[0].path}'s")
    vocab_file = Path(model_path) / "vocab.txt"
    if vocab_file.is_file() and file_sha256(vocab_file) != first["sha256"]:
        raise TrainError(
            f"{datasets[0].path} was tokenized with {first['file']} (sha256 {first['sha256'][:12]}…) but "
            f"the model's {vocab_file} differs: rebuild the dataset with --tokenizer {vocab_file}"
        )
    config = student.config
    if first["vocab_size"] > config.vocab_size:
        raise TrainError(f"{datasets[0].path}: vocabulary of {first['vocab_size']} tokens, the model has "
                         f"{config.vocab_size} embeddings ({model_path})")
    for ds in datasets:
        if ds.manifest["max_seq_len"] > config.max_position_embeddings:
            raise TrainError(f"{ds.path}: sequences up to {ds.manifest['max_seq_len']} tokens, the model "
                             f"has {config.max_position_embeddings} positions ({model_path})")


def _param_groups(module: torch.nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    decay, no_decay = [], []
    for name, param in module.named_parameters():
        if param.requires_grad:
            (no_decay if param.ndim < 2 or "LayerNorm" in name else decay).append(param)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def _prepare_run_dir(config: TrainConfig) -> Path:
    run_dir = Path(config.output)
    run_file = run_dir / RUN_FILE
    if run_file.exists() and not config.checkpoint.resume:
        raise TrainError(f"{run_dir}: holds another run ({RUN_FILE}); pass --resume to continue it "
                         "or choose another --output")
    return run_dir


def train(config: TrainConfig) -> list[dict[str, float]]:
    """Run training; return rank 0's per-step metrics."""
    import deepspeed
    import torch.distributed as dist
    from deepspeed.accelerator import get_accelerator

    accelerator = get_accelerator()
    on_cpu = accelerator.device_name() == "cpu"
    deepspeed.init_distributed(dist_backend="gloo" if on_cpu else None)
    rank, world = dist.get_rank(), dist.get_world_size()
    run_dir = _prepare_run_dir(config)

    datasets = [PretrainDataset(path) for path in config.data.paths]
    tokenizer_files = tokenizer_source(config.model, datasets[0].manifest)
    torch.manual_seed(config.seed)  # a BertConfig init is the same on every rank and at resume
    student = load_student(config.model)
    check_data_and_model(datasets, student, config.model)
    device = torch.device(accelerator.device_name(), accelerator.current_device()) if not on_cpu \
        else torch.device("cpu")
    teacher = None
    if "tacl" in config.objective.objectives:
        teacher = make_teacher(student, config.teacher_dtype or default_teacher_dtype(device), device)

    if rank == 0 and Path(config.model).is_file() and not (run_dir / "initial").exists():
        # A random init has no directory of its own: keep it, the reference for analyses.
        export_student(student, run_dir / "initial", tokenizer_files)
    module = PretrainingModule(student, config.objective)
    optim = config.optim
    optimizer = torch.optim.AdamW(_param_groups(module, optim.weight_decay), lr=optim.lr,
                                  betas=optim.betas, eps=optim.eps)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, optim.lr_factor)
    ds_config = deepspeed_config(config, world, on_cpu, rank)
    engine, _, _, _ = deepspeed.initialize(model=module, optimizer=optimizer, lr_scheduler=scheduler,
                                           config=ds_config)

    ckpt_root = run_dir / "checkpoints"
    step, consumed = 0, 0
    if rank == 0:
        run_dir.mkdir(parents=True, exist_ok=True)
        ckpt_root.mkdir(exist_ok=True)
    tag = checkpoint.latest_tag(ckpt_root) if config.checkpoint.resume else None
    torch.manual_seed(config.seed + rank)  # dropout differs across ranks, restored at resume
    if tag is not None:
        state = checkpoint.load(engine, ckpt_root, tag)
        step, consumed = int(state["step"]), int(state["consumed"])
        log.info("resumed from %s at step %d", ckpt_root / tag, step)
    if rank == 0:
        run_info = {"config": config.to_dict(), "world_size": world,
                    "tokenizer_source": tokenizer_files,
                    "deepspeed_config": ds_config}
        (run_dir / RUN_FILE).write_text(json.dumps(run_info, indent=2), encoding="utf-8")
    dist.barrier()

    data = BlendedDatasets(datasets, config.data.weights, config.seed)
    # --eval-every holds the last instances of the index space out of training.
    held_out = min(config.eval_instances, len(data) // 10) if config.eval_every > 0 else 0
    shuffle = RankSlicedShuffle(len(data) - held_out, ShuffleConfig(config.seed, rank, world))
    masking = DynamicMasking.from_manifest(datasets[0].manifest, config.seed) if config.data.dynamic_masking else None
    max_len = max(d.manifest["max_seq_len"] for d in datasets)
    collate_config = CollateConfig(pad_id=datasets[0].manifest["tokenizer"]["special_ids"]["pad"],
                                   pad_to_multiple_of=config.data.pad_to_multiple_of,
                                   pad_to_length=max_len if config.data.pad_to_max_length else None)
    loader = torch.utils.data.DataLoader(
        TrainingInstances(data, masking),
        batch_sampler=MicroBatches(shuffle, optim.micro_batch_size, consumed),
        collate_fn=partial(collate, config=collate_config),
        num_workers=config.data.num_workers,
        pin_memory=not on_cpu,
        # Its own generator: starting an iterator must not draw from the global RNG,
        # or a resumed run's dropout would differ from an uninterrupted one's.
        generator=torch.Generator().manual_seed(config.seed),
    )
    batches = iter(loader)
    accumulation = ds_config["gradient_accumulation_steps"]
    eval_batches: list[dict[str, torch.Tensor]] = []
    if held_out and rank == 0:
        instances = TrainingInstances(data)
        keys = [(0, i) for i in range(len(data) - held_out, len(data))]
        eval_batches = [
            {k: v.to(device) for k, v in collate([instances[key] for key in keys[i : i + optim.micro_batch_size]],
                                                 collate_config).items()}
            for i in range(0, len(keys), optim.micro_batch_size)
        ]

    writer = None
    if rank == 0:
        from torch.utils.tensorboard import SummaryWriter

        writer = SummaryWriter(str(run_dir / "tensorboard"))
    metrics_file = open(run_dir / "metrics.jsonl", "a", encoding="utf-8") if rank == 0 else None
    history: list[dict[str, float]] = []
    peak = peak_flops(torch.cuda.get_device_name()) if not on_cpu and torch.cuda.is_available() else None
    started = time.monotonic()
    first_step = step
    engine.train()
    stop_request = StopRequest()
    if rank == 0:
        (run_dir / PREEMPTED_MARKER).unlink(missing_ok=True)
    preempted = False
    last_step = optim.steps
    if config.checkpoint.stop_after_steps is not None:
        last_step = min(last_step, step + config.checkpoint.stop_after_steps)
    while step < last_step:
        step_start = time.monotonic()
        sums: dict[str, float] = {}
        tokens = 0
        for _ in range(accumulation):
            batch = {k: v.to(device, non_blocking=True) for k, v in next(batches).items()}
            consumed += optim.micro_batch_size
            tokens += int(batch["attention_mask"].sum())
            hidden = teacher_states(teacher, batch) if teacher is not None else None
            parts = engine(batch, hidden)
            engine.backward(parts["loss"])
            engine.step()
            for key, value in parts.items():
                sums[key] = sums.get(key, 0.0) + float(value.detach()) / accumulation
        step += 1
        # Mean over ranks, so the logged loss is the global batch's.
        keys = sorted(sums)
        packed = torch.tensor([sums[k] for k in keys] + [tokens], dtype=torch.float64)
        dist.all_reduce(packed)
        values = {k: float(v) / world for k, v in zip(keys, packed[:-1].tolist(), strict=True)}
        values["lr"] = scheduler.get_last_lr()[0]
        grad_norm = engine.get_global_grad_norm()
        if grad_norm is not None:
            values["grad_norm"] = float(grad_norm)
        if ds_config.get("fp16", {}).get("enabled"):
            values["loss_scale"] = float(getattr(engine.optimizer, "cur_scale", 0.0))
        elapsed = time.monotonic() - step_start
        values["samples_per_s"] = optim.batch_size / elapsed
        values["tokens_per_s"] = float(packed[-1]) / elapsed
        if peak is not None:  # GPUs only: model FLOPs utilisation of this step
            flops = step_flops(student.config, optim.micro_batch_size, int(batch["input_ids"].shape[1]),
                               int(batch["masked"].sum()), config.objective.objectives)
            values["mfu"] = flops * accumulation / elapsed / peak
        if rank == 0:
            record = {"step": step, **values}
            history.append(record)
            assert metrics_file is not None and writer is not None
            metrics_file.write(json.dumps(record) + "\n")
            metrics_file.flush()
            for key, value in values.items():
                writer.add_scalar(f"train/{key}", value, step)
            if step % config.log_every == 0 or step == optim.steps:
                rate = (step - first_step) / (time.monotonic() - started)
                eta = (optim.steps - step) / max(rate, 1e-9)
                shown = "  ".join(f"{k} {values[k]:.4f}" for k in ("loss", *OBJECTIVES) if k in values)
                print(f"step {step}/{optim.steps}  {shown}  lr {values['lr']:.2e}  "
                      f"{values['samples_per_s']:.1f} samples/s  ETA {eta:.0f}s", flush=True)
        preempted = stop_request.agreed() and step < optim.steps
        if config.eval_every > 0 and (step % config.eval_every == 0 or step == optim.steps):
            if rank == 0 and writer is not None:
                if teacher is not None and step - first_step <= config.eval_every:
                    # The initial model (= the teacher), once per job, as the reference line.
                    for k, value in enumerate(layer_self_similarity(teacher, eval_batches)):
                        writer.add_scalar(f"eval_initial/selfsim_layer{k}", value, step)
                for key, value in evaluate(engine.module.student, teacher, eval_batches, config.objective).items():
                    writer.add_scalar(f"eval/{key}", value, step)
            dist.barrier()
        if step % config.checkpoint.save_every == 0 or step == last_step or preempted:
            checkpoint.save(engine, ckpt_root, step, {"step": step, "consumed": consumed},
                            config.checkpoint.keep_last)
        if preempted:
            if rank == 0:
                (run_dir / PREEMPTED_MARKER).write_text(f"{stop_request.signal_name} at step {step}\n")
                print(f"{stop_request.signal_name}: checkpointed step {step}, exiting for a requeue", flush=True)
            break
    if rank == 0:
        assert writer is not None and metrics_file is not None
        writer.close()
        metrics_file.close()
        if config.export and step == optim.steps and not preempted:
            out = export_student(engine.module.student, run_dir / "export",
                                 tokenizer_files)
            print(f"exported the student to {out}", flush=True)
    dist.barrier()
    return history


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = parse_args(argv)
    try:
        train(config)
    except TrainError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    finally:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
