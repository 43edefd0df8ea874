"""TaCL continual pre-training with DeepSpeed.

    deepspeed tacl_scale/train.py --ds ds_configs/zero2.json --data DIR --model PATH --output RUN_DIR
    deepspeed tacl_scale/train.py --recipe tacl-base-en [--data DIR --model PATH --output RUN_DIR]

The student (``BertForPreTraining``) is trained by a DeepSpeed engine built from
``--ds``; the frozen teacher encoder runs forward-only on the same rank, outside the
engine. Loss = TaCL + MLM + NSP by default; ``--objectives`` picks any subset of
those and the sentence-level ``mirror`` (Mirror-BERT/SimCSE). Every rank reads its own slice
of a deterministic global shuffle; checkpoints carry the data position and RNG
states, so ``--resume`` continues exactly.
"""

# This file is the command line: it parses the flags and the DeepSpeed JSON into a
# TrainConfig (tacl_scale/config.py) once, joins the process group
# (tacl_scale/distributed.py) and hands both to the Trainer (tacl_scale/trainer.py).

from __future__ import annotations

import argparse
import logging
import os
import shlex
import sys
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if __package__ in (None, ""):  # run as a script by the deepspeed launcher
    # Python put this file's folder on sys.path, which makes the package's own modules
    # importable under top-level names: its kernels/ would then stand in for Hugging
    # Face's `kernels`, which transformers imports. Import them as tacl_scale.* only.
    _here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]
    sys.path.insert(0, str(_here.parent))

# Only the standard library and these two above the functions: main() installs the
# preemption handler before torch is imported (seconds in which a signal would end
# the rank without a word). Everything else is imported where it is used.
from tacl_scale import EXIT_ERROR, EXIT_INTERRUPTED
from tacl_scale.preemption import CtrlC, StopRequest

if TYPE_CHECKING:
    from tacl_scale.config import EngineConfig, TrainConfig
    from tacl_scale.distributed import LaunchEnv

PROG = "deepspeed tacl_scale/train.py"


def parse_args(argv: list[str] | None = None) -> TrainConfig:
    """The command line as one TrainConfig; a refused one raises
    :class:`~tacl_scale.cli.UsageError` (``--help`` prints and exits)."""
    from tacl_scale.cli import make_parser
    from tacl_scale.config import (
        EVAL_EVERY_WITH_SPLIT,
        LR_SCHEDULES,
        POOLINGS,
        PRECISIONS,
        TEACHER_DTYPE_NAMES,
        CheckpointConfig,
        DataConfig,
        MirrorConfig,
        ObjectiveConfig,
        OptimConfig,
        PerformanceConfig,
        TrainConfig,
    )
    from tacl_scale.kernels.tacl_loss import IMPLEMENTATIONS
    from tacl_scale.recipes import RECIPES
    from tacl_scale.recipes import describe as describe_recipes

    p = make_parser(PROG, __doc__, raise_errors=True,
                    epilog="Settings: a flag > a trainer setting in the --ds config (older configs) > the\n"
                    "--recipe > the defaults shown (tacl_scale/config.py).\n\nRecipes (python -m tacl_scale.recipes "
                    "lists what each sets):\n" + describe_recipes())
    p.add_argument("--recipe", choices=sorted(RECIPES), default=None,
                   help="a named recipe: fills what the flags leave out (tacl_scale/recipes.py)")
    p.add_argument("--ds", default=None, metavar="CONFIG.json",
                   help="DeepSpeed config: ZeRO stage, precision, buckets (ds_configs/zero2.json; required without "
                   "--recipe)")
    p.add_argument("--data", action="append", default=None, metavar="DIR",
                   help="dataset directory built by data_prep.build; repeat to blend several, each once "
                   "(required without --recipe)")
    p.add_argument("--data-weights", type=float, nargs="+", default=None, metavar="W",
                   help="one weight per --data: each dataset's share of an epoch (default: their sizes)")
    p.add_argument("--model", default=None, metavar="PATH",
                   help="HF BERT directory (student and teacher init) or a BertConfig JSON (random init)")
    p.add_argument("--output", default=None, metavar="RUN_DIR", help="run directory")
    p.add_argument("--steps", type=int, default=None, help=f"optimizer steps (default: {OptimConfig.steps})")
    p.add_argument("--objectives", default=",".join(ObjectiveConfig.objectives),
                   help="comma-separated subset of tacl,mlm,nsp,mirror: tacl,mlm,nsp = TaCL; mlm,nsp = BERT+MT; "
                   "mlm,nsp,mirror = model-1; tacl = model-2; mirror = Mirror-BERT (SimCSE with --mirror-span 0)")
    p.add_argument("--temperature", type=float, default=ObjectiveConfig.temperature, help="TaCL temperature τ")
    p.add_argument("--mirror-temperature", type=float, default=MirrorConfig.temperature,
                   help="mirror: InfoNCE temperature (Mirror-BERT 0.04, SimCSE 0.05)")
    p.add_argument("--mirror-pooling", choices=POOLINGS, default=MirrorConfig.pooling,
                   help="mirror: sentence vector, the last layer's [CLS] or the mean of the real tokens")
    p.add_argument("--mirror-span", type=int, default=MirrorConfig.span_tokens, metavar="TOKENS",
                   help="mirror: tokens of the random span of the second view replaced by [MASK] "
                   "(Mirror-BERT's 5 characters ≈ 2 WordPiece tokens; 0: dropout only, SimCSE)")
    p.add_argument("--tacl-impl", choices=IMPLEMENTATIONS, default=ObjectiveConfig.tacl_impl,
                   help="the TaCL loss: triton is the fused kernel (CUDA), torch the plain PyTorch one it is "
                   "tested against; auto picks triton where it runs")
    p.add_argument("--reference-compat", action="store_true",
                   help="behave as the paper's released code, not Eq. 1 as written: padding columns are TaCL "
                   "negatives, the teacher's dropout is on while training, the teacher in fp32; batches padded "
                   "to the dataset's max length (docs/design.md)")
    p.add_argument("--teacher-dtype", choices=TEACHER_DTYPE_NAMES, default=None,
                   help="teacher precision (default: fp16 on CUDA, fp32 on the CPU)")
    p.add_argument("--lr", type=float, default=None, help=f"peak learning rate (default: {OptimConfig.lr})")
    p.add_argument("--weight-decay", type=float, default=None,
                   help=f"AdamW weight decay (default: {OptimConfig.weight_decay})")
    p.add_argument("--warmup-ratio", type=float, default=None,
                   help=f"share of steps of linear warm-up (default: {OptimConfig.warmup_ratio})")
    p.add_argument("--lr-schedule", choices=LR_SCHEDULES, default=None,
                   help=f"after the warm-up: linear decay to 0 at --steps, or constant (Mirror-BERT, SimCSE); "
                   f"default: {OptimConfig.schedule}")
    p.add_argument("--batch-size", type=int, default=None,
                   help=f"global batch per optimizer step (default: {OptimConfig.batch_size})")
    p.add_argument("--micro-batch-size", type=int, default=None,
                   help="per-rank micro-batch (default: the largest divisor of the per-rank batch that fits the "
                   "GPU at the data's longest sequence, up to 32 on the CPU; the log says which)")
    p.add_argument("--precision", choices=PRECISIONS, default=None,
                   help="the student's precision, over the config's fp16/bf16 sections: auto = bf16 where the GPU "
                   "has it, else fp16 (fp32 on the CPU); fp16 is the paper's")
    p.add_argument("--grad-clip", type=float, default=None,
                   help=f"gradient clipping norm, 0: none (default: {OptimConfig.grad_clip})")
    p.add_argument("--pad-to-max-length", action="store_true", help="pad every batch to the dataset's max length")
    p.add_argument("--unpad", action=argparse.BooleanOptionalAction, default=None,
                   help="pack the real tokens of a micro-batch and run student, teacher and TaCL loss without "
                   "padding (FlashAttention varlen); default: on CUDA. --no-unpad pads to the longest instance")
    p.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None,
                   help="run the student's and teacher's encoders through torch.compile (fused element-wise work, "
                   "one QKV product, packed batches in a few token buckets; the first steps compile for about a "
                   "minute); default: on CUDA")
    p.add_argument("--cuda-graphs", action="store_true",
                   help="with --compile on CUDA: capture each token bucket's encoder forward and backward as CUDA "
                   "graphs and replay them (torch.compile's reduce-overhead), so small micro-batches cost the host "
                   "little; experimental: not measured on a GPU yet")
    p.add_argument("--fused-optimizer", action=argparse.BooleanOptionalAction, default=None,
                   help="torch.optim.AdamW(fused=True), same update and checkpoint state; default: on CUDA")
    p.add_argument("--num-workers", type=int, default=DataConfig.num_workers, help="DataLoader workers per rank")
    p.add_argument("--verify-data", action=argparse.BooleanOptionalAction, default=None,
                   help="check every byte of the --data shards against their manifest's checksums before training "
                   "(each rank reads its share); default: on when the datasets hold at most 20 GB. The tokenizer "
                   "copy is checked always, token ids as batches are read")
    p.add_argument("--dynamic-masking", action="store_true",
                   help="re-mask every epoch from the unmasked ids instead of the static masks")
    p.add_argument("--save-every", type=int, default=CheckpointConfig.save_every, help="checkpoint every N steps")
    p.add_argument("--keep-last", type=int, default=CheckpointConfig.keep_last,
                   help="checkpoints kept, the newest (0: all)")
    p.add_argument("--resume", action="store_true", help="continue from the latest checkpoint in RUN_DIR")
    p.add_argument("--allow-changes", action="store_true",
                   help="with --resume: continue with other data, objectives, model or optimizer settings than the "
                   "run's (refused otherwise; the changes are recorded in run.json's history)")
    p.add_argument("--stop-after-steps", type=int, default=None, metavar="N",
                   help="end this job after N steps with a checkpoint (for jobs shorter than the run; "
                   "--resume continues)")
    p.add_argument("--seed", type=int, default=TrainConfig.seed,
                   help="seeds the data order, dropout, a random initialisation (a BertConfig --model), dynamic masks "
                   "and mirror views")
    p.add_argument("--log-every", type=int, default=TrainConfig.log_every, help="progress line every N steps")
    p.add_argument("--no-export", action="store_true", help="skip the HF export at the end")
    p.add_argument("--eval-every", type=int, default=None,
                   help="every N steps, validation losses and per-layer self-similarity to TensorBoard, on the "
                   "validation split of the --data directories (data_prep.build --validation-fraction); "
                   f"default: {EVAL_EVERY_WITH_SPLIT} when there is one, else off; 0: off")
    p.add_argument("--eval-instances", type=int, default=TrainConfig.eval_instances,
                   help="validation instances evaluated, spread evenly over the split(s)")
    p.add_argument("--local_rank", type=int, default=-1, help=argparse.SUPPRESS)  # set by the launcher
    args = p.parse_args(argv)
    try:
        objective = ObjectiveConfig(tuple(o.strip() for o in args.objectives.split(",") if o.strip()),
                                    args.temperature, args.tacl_impl,
                                    MirrorConfig(args.mirror_temperature, args.mirror_pooling, args.mirror_span),
                                    reference_compat=args.reference_compat)
    except ValueError as err:
        p.error(str(err))
    chosen = resolve_settings(args, p)
    # Absolute from here on: run.json records them, and a resume from another
    # working directory (a requeued job) compares them with its own.
    return TrainConfig(
        model=os.path.abspath(chosen.model),
        output=os.path.abspath(chosen.output),
        engine=chosen.engine,
        data=DataConfig(tuple(os.path.abspath(path) for path in chosen.data),
                        weights=tuple(args.data_weights) if args.data_weights else None,
                        pad_to_max_length=args.pad_to_max_length,
                        num_workers=args.num_workers, dynamic_masking=args.dynamic_masking,
                        verify=args.verify_data),
        objective=objective,
        optim=OptimConfig(**chosen.optim),
        checkpoint=CheckpointConfig(args.save_every, args.keep_last, args.resume, args.stop_after_steps,
                                    args.allow_changes),
        performance=PerformanceConfig(unpad=args.unpad, fused_optimizer=args.fused_optimizer,
                                      teacher_dtype=args.teacher_dtype, compile=args.compile,
                                      cuda_graphs=args.cuda_graphs, precision=args.precision),
        seed=args.seed,
        log_every=args.log_every,
        export=not args.no_export,
        eval_every=args.eval_every,
        eval_instances=args.eval_instances,
        recipe=args.recipe,
    )


# The settings --recipe and an older --ds config may hold, by OptimConfig field.
_LAYERED_OPTIM = ("batch_size", "micro_batch_size", "grad_clip", "lr", "weight_decay", "betas", "eps")


@dataclass(frozen=True)
class ResolvedSettings:
    """The settings a flag, an older --ds config or a --recipe may give, each from
    its first source (:func:`resolve_settings`); paths as given."""

    engine: EngineConfig  # the DeepSpeed config, read once
    model: str
    output: str
    data: list[str]
    optim: dict[str, Any]  # OptimConfig's fields that have a value; the rest take its defaults


def resolve_settings(args: argparse.Namespace, parser: argparse.ArgumentParser) -> ResolvedSettings:
    """Each setting from its first source: the flag, else a trainer setting of the
    --ds config the user named (older configs), else the recipe, else (left out)
    the typed config's default."""
    from tacl_scale.config import EngineConfig
    from tacl_scale.recipes import recipe

    from_recipe = recipe(args.recipe).flag_values() if args.recipe else {}
    for name in ("ds", "data", "model", "output"):
        if getattr(args, name) is None and from_recipe.get(name) is None:
            parser.error(f"--{name} is required (or a --recipe that sets it)")
    engine = EngineConfig.from_file(args.ds or from_recipe["ds"])  # a ConfigError names the file
    in_config = engine.trainer_settings if args.ds else {}
    data = args.data or from_recipe["data"]
    if args.data_weights is not None and len(args.data_weights) != len(data):
        parser.error(f"--data-weights has {len(args.data_weights)} values for {len(data)} --data")
    optim = {"steps": args.steps, "warmup_ratio": args.warmup_ratio, "schedule": args.lr_schedule,
             **{name: _first(getattr(args, name, None), in_config.get(name), from_recipe.get(name))
                for name in _LAYERED_OPTIM}}
    return ResolvedSettings(engine, args.model or from_recipe["model"], args.output or from_recipe["output"],
                            list(data), {k: v for k, v in optim.items() if v is not None})


def _first(*values: object) -> object:
    """The first value that is not None (or None)."""
    return next((v for v in values if v is not None), None)


def main(argv: list[str] | None = None) -> int:
    """Every refusal (dataset, model, config, checkpoint) and every fault inside
    training (a full disk, a corrupt shard) is one ``error:`` line and exit code 2
    (:data:`tacl_scale.EXIT_ERROR`): said once, by rank 0, when all ranks refuse
    alike; by the rank concerned when it is about that rank alone. Ctrl-C is one
    line naming the newest checkpoint and how to resume, exit code 130."""
    stop_request = StopRequest.install()  # first: a signal from here on is a request to checkpoint
    env: LaunchEnv | None = None
    config: TrainConfig | None = None
    building = False  # from Trainer.build on: the run directory may hold what this job wrote
    with CtrlC() as ctrl_c:  # Ctrl-C: Interrupted, not the interpreter's KeyboardInterrupt
        try:
            logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
            from tacl_scale.cli import UsageError, error_exit
            from tacl_scale.config import ConfigError
            from tacl_scale.distributed import Distributed, DistributedError, LaunchEnv
            from tacl_scale.errors import RankError, TrainError
            from tacl_scale.files import describe_os_error, first_line

            env = LaunchEnv()
            trainer = None
            try:
                env = LaunchEnv.from_environ(os.environ)
                quiet_other_ranks(env.rank)
                config = parse_args(argv)
                # The training stack (transformers' models, DeepSpeed) only now: --help and a
                # refused flag did not wait the seconds it takes to import.
                from transformers.utils import logging as transformers_logging

                from tacl_scale.trainer import Trainer

                # Its "Loading weights" / "Writing model shards" bars, one per rank, are
                # carriage-return noise in a job's log; the trainer logs what it loads.
                transformers_logging.disable_progress_bar()
                route_transformers_logs(transformers_logging)
                note = config.engine.trainer_settings_note()
                if note and env.rank == 0:
                    logging.getLogger("tacl_scale.train").warning("%s", note)
                dist = Distributed.setup(env)
                building = True
                try:
                    trainer = Trainer.build(config, dist, stop_request)
                    trainer.train()
                except BaseException as err:
                    # The error's frames hold the data loader's iterator (the generator that
                    # read the batch, its locals), so dropping it in close() stopped no worker;
                    # at exit multiprocessing then SIGTERMs the workers, which ignore it
                    # (preemption.ignore_in_worker), and waits: the process hung. Their locals
                    # go now (the traceback keeps its lines).
                    traceback.clear_frames(err.__traceback__)
                    raise
                finally:
                    if trainer is not None:
                        trainer.close()
                    else:
                        dist.close()
            except DistributedError as err:
                return error_exit(f"rank {env.rank}: {err}")
            except RankError as err:
                return error_exit(f"{_rank_prefix(env)}{err}")
            except UsageError as err:
                if env.rank == 0:
                    print(f"error: {err} ({PROG} --help lists the options)", file=sys.stderr)
                return EXIT_ERROR
            except (ConfigError, TrainError) as err:
                if env.rank == 0:
                    print(f"error: {err}", file=sys.stderr)
                return EXIT_ERROR
            except OSError as err:  # writing the run directory (a full disk, a permission)
                if not building:
                    raise  # importing the training stack (a broken library): the traceback is the report
                where = err.filename or (config.output if config is not None else "the run directory")
                return error_exit(f"{_rank_prefix(env)}{where}: {describe_os_error(err)}")
            except RuntimeError as err:
                if _compile_failed(err):
                    # A defect too (ours or torch's, often of one GPU or version), so the
                    # traceback is the report; the run itself can go on without compile.
                    traceback.print_exc()
                    print(f"error: {_rank_prefix(env)}torch.compile failed on the encoder (traceback above); "
                          "--no-compile trains the same model without it (Hugging Face's BertModel, slower). "
                          "Please report the traceback.", file=sys.stderr)
                    return EXIT_ERROR
                if not _in_a_collective(err):
                    raise  # a defect: its traceback is the report
                # Another rank stopped (it prints why); this one's collective lost it.
                first = first_line(err)
                return error_exit(f"{_rank_prefix(env)}another rank stopped, so this one stops too (its own error "
                                  f"line says why; here: {first[:200]})")
        except KeyboardInterrupt:
            ctrl_c.ignore()  # the run has stopped: its one line, uninterrupted
            if env is None or env.rank == 0:
                # Before the run is built nothing was written: the newest checkpoint of
                # whatever --output names may be another run's.
                print(_interrupted(config if building else None, argv, env), file=sys.stderr, flush=True)
            return EXIT_INTERRUPTED
    return 0


def quiet_other_ranks(rank: int) -> None:
    """Rank 0 logs everything; the other ranks their warnings and errors, each line
    naming its rank. On a node of 8 GPUs every rank's INFO lines (the model each
    loaded, the checkpoint each resumed) said each thing 8 times over."""
    # DeepSpeed's ZeRO calls torch.distributed.all_gather_into_tensor, which torch
    # 2.13 deprecates with a FutureWarning from every rank: nothing a user can change.
    warnings.filterwarnings("ignore", message=r"`torch\.distributed\.all_gather_into_tensor` is deprecated",
                            category=FutureWarning)
    if rank == 0:
        return
    root = logging.getLogger()
    root.setLevel(logging.WARNING)
    for handler in root.handlers:
        handler.setFormatter(logging.Formatter(f"%(asctime)s %(levelname)s rank {rank} %(name)s: %(message)s"))


def route_transformers_logs(transformers_logging: Any) -> None:
    """transformers' warnings through the root logger's handler, as this command's
    own lines are (each naming its rank on ranks >= 1, :func:`quiet_other_ranks`):
    its own handler printed them bare, so a node's 8 copies of one could not be told
    apart. Its level (warnings and errors) stays its own."""
    transformers_logging.disable_default_handler()
    transformers_logging.enable_propagation()


def _in_a_collective(err: BaseException) -> bool:
    """Whether ``err`` came out of a torch.distributed call (a collective whose peer
    is gone), not out of our own code."""
    import torch.distributed

    if isinstance(err, getattr(torch.distributed, "DistError", ())):
        return True
    frames = traceback.extract_tb(err.__traceback__)
    return bool(frames) and f"torch{os.sep}distributed{os.sep}" in frames[-1].filename


def _compile_failed(err: BaseException) -> bool:
    """Whether ``err`` is torch.compile failing (dynamo tracing or inductor's code
    generation): on the first run of a compiled encoder, a new GPU or torch version."""
    import torch._dynamo.exc

    return isinstance(err, torch._dynamo.exc.TorchDynamoException)


def _rank_prefix(env: LaunchEnv | None) -> str:
    return f"rank {env.rank}: " if env is not None and env.world_size > 1 else ""


def _interrupted(config: TrainConfig | None, argv: list[str] | None, env: LaunchEnv | None) -> str:
    """Ctrl-C's one line: where the run can continue from, and the command."""
    if config is None:
        return "interrupted before training started; nothing was written"
    from tacl_scale import checkpoint
    from tacl_scale.run_dir import RunDir

    root = RunDir(config.output).checkpoints
    newest, _ = checkpoint.newest_verified_tag(root) if root.is_dir() else (None, [])
    args = [a for a in (sys.argv[1:] if argv is None else argv) if a != "--resume" and not a.startswith("--local_rank")]
    # The module form runs from any directory (the script form from the checkout alone).
    launcher = ["tacl-train"] if env is not None and env.standalone else ["deepspeed", "--module", "tacl_scale.train"]
    # --resume either way: the run directory may hold this run's run.json already, which a
    # command without it refuses; with no checkpoint, --resume starts at step 0.
    command = shlex.join([*launcher, *args, "--resume"])
    # A rank sees its launcher's result, not its options (--num_gpus, --hostfile, ...).
    ranks = ("" if env is None or env.standalone or env.world_size == 1 else
             f" (with this job's launcher options: it ran on {env.world_size} ranks)")
    if newest is None:
        return f"interrupted; {config.output} has no checkpoint yet: start it again from step 0 with {command}{ranks}"
    return f"interrupted; the newest checkpoint is {root / newest}: continue with {command}{ranks}"


if __name__ == "__main__":
    sys.exit(main())
