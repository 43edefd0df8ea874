"""End-to-end training throughput on one GPU: the real ``Trainer`` step (DeepSpeed
engine, fused AdamW, compiled encoders, frozen teacher, TaCL + MLM + NSP) at
BERT-base shape on real instances (length 256) and the paper's global batch of 256,
beside its peer in the same run: Hugging Face's ``BertForPreTraining`` doing MLM +
NSP alone on the same batches (SDPA, bf16 autocast, fused AdamW), compiled and eager.

    python benchmarks/bench_train_gpu.py --data DATASET [--micro 256 32] [--steps 8] [--out rows.jsonl]

The sweep (:func:`sweep_setups`): docs/training.md's command as typed
(``--ds ds_configs/zero2.json``, micro-batch and precision "auto"; its row is named
"README command", where that command once was), the compiled peer, ZeRO-1 and ZeRO-2
unpadded at each micro-batch size, ZeRO-2 padded at the first, the eager peer, and ``--cuda-graphs``
at the last size (warmed up until its graphs replay, :func:`warm_up_graphs`). Each row reports
real tokens/s, step time, the teacher's share of the step (its forward timed alone
on the same micro-batches), peak memory, and model FLOPs utilisation
(``tacl_scale.flops.mfu``: model FLOPs ÷ time ÷ the GPU's datasheet dense peak) of
the student's forward+backward and the teacher's forward, separately and together.
Only real tokens count as model FLOPs, so padding shows up as lower utilisation.
Configurations run one after the other in this process; each Trainer is closed (its
engine destroyed) before the next is built, so peak memory is each one's own, and
each row is printed and appended to ``--out`` as soon as it is measured. A failed
row keeps its error (its traceback on stderr); on CUDA, one whose compiled run failed
(not for lack of memory) is measured again with ``--no-compile`` next, except the
peers' and the CUDA-graph rows (:func:`sweep`).
``scripts/gpu_check.sh`` runs it on a GPU machine; ``--dry-run`` runs the same code
on the CPU at a tiny shape (for checking the benchmark, not for figures).
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from tacl_scale.flops import mfu, peak_flops  # noqa: E402

BERT_BASE = {"vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
             "intermediate_size": 3072, "max_position_embeddings": 512}
# The dry run's model: BERT-base's vocabulary and positions, a tiny encoder.
TINY_BERT = {**BERT_BASE, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
             "intermediate_size": 128}


@dataclass(frozen=True)
class Setup:
    """One configuration of the sweep: a tacl-scale TaCL run (``ds_config``, micro-batch,
    layout), or with ``peer`` Hugging Face's ``BertForPreTraining`` doing MLM + NSP
    alone on the same batches (no teacher), eager or compiled."""

    ds_config: str  # a file of ds_configs/
    micro_batch: int | None  # None: the config's "auto"
    unpad: bool | None  # None: the default (packed on CUDA)
    batch_size: int = 256
    peer: str | None = None
    readme: bool = False  # the README's command as typed: only --ds, --data, --model, --output
    cuda_graphs: bool = False  # --cuda-graphs
    # True: --no-compile, for a row whose compiled run failed (see sweep); the name says so.
    eager_fallback: bool = False

    @property
    def name(self) -> str:
        if self.peer is not None:
            return f"HF BertForPreTraining MLM+NSP {self.peer.split('-')[1]} micro {self.micro_batch}"
        fallback = "eager: its compiled run failed" if self.eager_fallback else None
        if self.readme:
            return f"README command ({self.ds_config}, auto{f', {fallback}' if fallback else ''})"
        zero = "ZeRO-1" if "zero1" in self.ds_config else "ZeRO-2"
        layout = {True: "unpadded", False: "padded", None: "default layout"}[self.unpad]
        graphs = " CUDA graphs" if self.cuda_graphs else ""
        name = f"{zero} {layout} micro {self.micro_batch if self.micro_batch else 'auto'}{graphs}"
        return f"{name} ({fallback})" if fallback else name

    def eager(self) -> Setup | None:
        """This setup with ``--no-compile``, to measure when its compiled run failed;
        None where that measures nothing new (a peer has its eager row; CUDA graphs
        need compile)."""
        if self.peer is not None or self.cuda_graphs or self.eager_fallback:
            return None
        return replace(self, eager_fallback=True)


def sweep_setups(micro_sizes: list[int], zero1: bool = True, batch_size: int = 256, peers: bool = True,
                 readme: bool = True) -> list[Setup]:
    """The sweep, most telling first (a sweep cut short by its time budget keeps
    those): docs/training.md's command as typed, the compiled Hugging Face peer, then
    for each micro-batch size ZeRO-1 and ZeRO-2 unpadded; then padded ZeRO-2 at the first
    size (unpadded over padded) and the eager peer."""
    first = micro_sizes[0]
    setups = [Setup("zero2.json", None, None, batch_size, readme=True)] if readme else []
    if peers:
        setups.append(Setup("zero1_bf16.json", first, False, batch_size, peer="hf-compiled"))
    for micro in micro_sizes:
        if zero1:
            setups.append(Setup("zero1_bf16.json", micro, True, batch_size))
        setups.append(Setup("zero2_bf16.json", micro, True, batch_size))
    setups.append(Setup("zero2_bf16.json", first, False, batch_size))
    if peers:
        setups.append(Setup("zero1_bf16.json", first, False, batch_size, peer="hf-eager"))
    # --cuda-graphs (experimental) where the host's launches weigh most: the smallest micro-batch.
    setups += [Setup(ds, micro_sizes[-1], True, batch_size, cuda_graphs=True)
               for ds in (["zero1_bf16.json"] if zero1 else []) + ["zero2_bf16.json"]]
    return setups


def dry_run_setups(zero1: bool = True, peers: bool = True) -> list[Setup]:
    """The sweep's kinds of row at a tiny shape on the CPU (a check of the code):
    docs/training.md's command, ZeRO-1/ZeRO-2 unpadded and padded, the eager peer
    (compiling the peer on the CPU would only add minutes)."""
    setups = [s for s in sweep_setups([2], zero1=zero1, batch_size=4, peers=peers)
              if s.peer != "hf-compiled" and not s.cuda_graphs]
    return [replace(s, micro_batch=None) if s.readme else s for s in setups]


def utilisation(per_step: dict[str, float], step_s: float, teacher_s: float, peak: float | None) -> dict:
    """MFU of the whole step, of the student (the step without the teacher's
    forward) and of the teacher (its forward alone); ``None`` on a device whose
    datasheet peak is unknown."""
    if peak is None:
        return {"mfu": None, "mfu_student": None, "mfu_teacher": None}
    return {"mfu": mfu(per_step["total"], step_s, peak),
            "mfu_student": mfu(per_step["student"], max(step_s - teacher_s, 1e-9), peak),
            "mfu_teacher": mfu(per_step["teacher"], teacher_s, peak) if teacher_s > 0 else None}


def measure_matmul_tflops(size: int = 8192, iters: int = 10) -> float:
    """A dense bf16 matmul's rate on this GPU (TFLOP/s): printed beside the MFU for
    reference, never its denominator."""
    a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(iters):
        a @ b
    torch.cuda.synchronize()
    return 2 * size**3 * iters / (time.perf_counter() - start) / 1e12


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def build_trainer(data: Path, model: Path, workdir: Path, setup: Setup, workers: int = 6):
    """The real ``Trainer`` for ``setup`` on one device (rank 0 of 1)."""
    from tacl_scale.config import (
        CheckpointConfig,
        DataConfig,
        EngineConfig,
        OptimConfig,
        PerformanceConfig,
        TrainConfig,
    )
    from tacl_scale.distributed import Distributed, LaunchEnv
    from tacl_scale.trainer import Trainer

    config = TrainConfig(
        model=str(model), output=str(workdir / setup.name.replace(" ", "-")),
        engine=EngineConfig.from_file(ROOT / "ds_configs" / setup.ds_config),
        data=DataConfig((str(data),), num_workers=workers),
        optim=OptimConfig(steps=10**6, batch_size=setup.batch_size, micro_batch_size=setup.micro_batch),
        checkpoint=CheckpointConfig(save_every=10**9),
        performance=PerformanceConfig(unpad=setup.unpad, cuda_graphs=setup.cuda_graphs,
                                      compile=False if setup.eager_fallback else None),
        eval_every=0, export=False, log_every=10**9,
    )
    # Standalone, as tacl-train in a shell: its port picked as it binds (again if taken).
    return Trainer.build(config, Distributed.setup(LaunchEnv.standalone_here()))


def run_config(data: Path, model: Path, workdir: Path, setup: Setup, steps: int, warmup: int,
               workers: int = 6) -> dict:
    """Build a Trainer for ``setup``, time ``steps`` steps after ``warmup`` (the
    steps queued back to back, their losses read after the last, as ``train()``
    reads them), then the teacher alone on the next micro-batches; close the Trainer."""
    from tacl_scale.model import teacher_states

    if setup.peer is not None:
        return run_peer(data, model, setup, steps, warmup, workers)
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    trainer = build_trainer(data, model, workdir, setup, workers)
    try:
        device = trainer.dist.device
        compile_started = time.perf_counter()
        for _ in range(warmup):
            trainer.train_step().read()
        calls = trainer.parts.engine.module.fast.calls_per_shape if trainer.cuda_graphs else None
        graph_warmup = warm_up_graphs(lambda: trainer.train_step().read(), calls, 4 * warmup) if calls else 0
        recorded = {shape for shape, n in calls.items() if n >= 2} if calls else set()
        warmup_s = time.perf_counter() - compile_started
        _sync(device)
        start = time.perf_counter()
        tokens, flops = 0, {"student": 0.0, "teacher": 0.0, "total": 0.0}
        results = []
        for _ in range(steps):
            result = trainer.train_step()
            results.append(result)
            tokens += result.tokens
            for key in flops:
                flops[key] += result.flops[key]
        losses = [r.read()["loss"] for r in results]
        _sync(device)
        step_s = (time.perf_counter() - start) / steps
        batches = [trainer.dist.move(next(trainer.parts.batches)) for _ in range(trainer.parts.engine.accumulation)]
        for batch in batches:  # warm
            teacher_states(trainer.parts.teacher, batch, fast=trainer.parts.teacher_fast)
        _sync(device)
        start = time.perf_counter()
        for batch in batches:
            teacher_states(trainer.parts.teacher, batch, fast=trainer.parts.teacher_fast)
        _sync(device)
        teacher_s = time.perf_counter() - start
        loss_s = tacl_loss_seconds(trainer, batches)
        peak = peak_flops(torch.cuda.get_device_name(device)) if device.type == "cuda" else None
        per_step = {k: v / steps for k, v in flops.items()}
        return {
            "name": setup.name, "ds_config": setup.ds_config, "zero_stage": trainer.engine.zero_optimization_stage(),
            "micro_batch": trainer.config.optim.micro_batch_size, "unpad": trainer.parts.performance.unpad,
            "accumulation": trainer.parts.engine.accumulation, "precision": trainer.parts.precision,
            "compiled": trainer.parts.teacher_fast is not None or trainer.parts.engine.module.fast is not None,
            "cuda_graphs": trainer.cuda_graphs,
            "readme": setup.readme, "eager_fallback": setup.eager_fallback, "warmup_s": warmup_s,
            # CUDA graphs: the extra warm-up steps, and the shapes whose graphs were first
            # run or recorded inside the timed steps (their cost is in the figures).
            "graph_warmup_steps": graph_warmup if calls else None,
            "graphs_recorded_while_timed": len(set(calls) - recorded) if calls else None,
            "step_ms": 1000 * step_s, "tokens_per_s": tokens / steps / step_s, "teacher_share": teacher_s / step_s,
            "tacl_loss_share": loss_s / step_s,
            **utilisation(per_step, step_s, teacher_s, peak),
            "peak_mem_gib": torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None,
            "loss_first": losses[0], "loss_last": losses[-1],
        }
    finally:
        trainer.close()


def warm_up_graphs(step: Callable[[], None], calls_per_shape: Counter[int], most_steps: int) -> int:
    """Warm-up steps of a ``--cuda-graphs`` row after the usual ones: a shape's graph is
    recorded at its second call, so step until a step runs only shapes called twice
    before it (their graphs replayed), ``most_steps`` at most; returns the steps run.
    ``calls_per_shape`` is the student encoder's count, which ``step`` advances."""
    for done in range(1, most_steps + 1):
        before = Counter(calls_per_shape)
        step()
        if all(before[shape] >= 2 for shape, n in calls_per_shape.items() if n > before[shape]):
            return done
    return most_steps


def tacl_loss_seconds(trainer, batches: list[dict]) -> float:
    """The TaCL loss's forward + backward alone on a step's micro-batches (states of
    the model's width and precision, the batches' real masked rows): its share of
    the step says whether its speed matters."""
    from tacl_scale.kernels import tacl_loss, tacl_loss_packed

    device, objective = trainer.dist.device, trainer.config.objective
    if "tacl" not in objective.objectives:
        return 0.0
    width = trainer.parts.student.config.hidden_size
    dtype = next(trainer.engine.module.parameters()).dtype
    calls = []
    for batch in batches:
        shape = (*batch["input_ids"].shape, width)
        student = torch.randn(shape, device=device, dtype=dtype, requires_grad=True)
        teacher = torch.randn(shape, device=device, dtype=next(trainer.parts.teacher.parameters()).dtype)
        if "cu_seqlens" in batch:
            calls.append(lambda s=student, t=teacher, b=batch: tacl_loss_packed(
                s, t, b["masked"], b["cu_seqlens"], objective.temperature, objective.tacl_impl, b["tacl_rows"]))
        else:
            calls.append(lambda s=student, t=teacher, b=batch: tacl_loss(
                s, t, b["masked"], b["attention_mask"], objective.temperature, objective.tacl_impl, b["tacl_rows"]))
    for call in calls:  # warm
        call()[0].backward()
    _sync(device)
    start = time.perf_counter()
    for call in calls:
        call()[0].backward()
    _sync(device)
    return time.perf_counter() - start


def run_peer(data: Path, model: Path, setup: Setup, steps: int, warmup: int, workers: int = 6) -> dict:
    """Hugging Face's ``BertForPreTraining`` (SDPA attention) doing MLM + NSP alone,
    no teacher, on the batches the trainer reads (the same global order, padded to
    a multiple of 8, global batch ``setup.batch_size``): bf16 autocast over fp32
    weights, fused AdamW, clipping at 1.0, ``torch.compile`` for ``hf-compiled``.
    Model FLOPs are counted as for tacl-scale's MLM + NSP, so the MFUs compare."""
    from functools import partial

    from transformers import BertConfig, BertForPreTraining

    from tacl_scale.data import PretrainDataset
    from tacl_scale.data.loader import CollateConfig, MicroBatchSampler, TrainingInstances, collate
    from tacl_scale.data.shuffle import BatchLayout, GlobalOrder
    from tacl_scale.flops import step_flops

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    dataset = PretrainDataset(data)
    micro = setup.micro_batch or setup.batch_size
    accumulation = setup.batch_size // micro
    loader = torch.utils.data.DataLoader(
        TrainingInstances(dataset), batch_sampler=MicroBatchSampler(GlobalOrder(len(dataset), 1234),
                                                                    BatchLayout(setup.batch_size, micro, 1, 0)),
        collate_fn=partial(collate, config=CollateConfig(pad_id=dataset.manifest.tokenizer.special_ids.pad)),
        num_workers=workers, pin_memory=device.type == "cuda")
    batches = iter(loader)
    config = BertConfig(**json.loads(Path(model).read_text()), attn_implementation="sdpa")
    torch.manual_seed(0)
    bert = BertForPreTraining(config).to(device).train()
    forward = torch.compile(bert) if setup.peer == "hf-compiled" else bert
    optimizer = torch.optim.AdamW(bert.parameters(), lr=1e-4, weight_decay=0.01, fused=device.type == "cuda")
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda")

    def step() -> tuple[int, dict[str, float], torch.Tensor]:
        tokens, flops, total = 0, {"student": 0.0, "teacher": 0.0, "total": 0.0}, None
        for _ in range(accumulation):
            cpu = next(batches)
            lengths = cpu["attention_mask"].sum(dim=1).tolist()
            tokens += sum(lengths)
            counted = step_flops(config, lengths, int(cpu["masked"].sum()), ("mlm", "nsp"))
            flops = {k: flops[k] + counted[k] for k in flops}
            batch = {k: v.to(device, non_blocking=True) for k, v in cpu.items() if hasattr(v, "to")}
            labels = torch.where(batch["masked"], batch["original_ids"], -100)
            with autocast:
                out = forward(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                              token_type_ids=batch["token_type_ids"], labels=labels,
                              next_sentence_label=batch["nsp_label"])
            (out.loss / accumulation).backward()
            total = out.loss.detach() if total is None else total + out.loss.detach()
        torch.nn.utils.clip_grad_norm_(bert.parameters(), 1.0, foreach=True)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return tokens, flops, total / accumulation

    started = time.perf_counter()
    for _ in range(warmup):
        step()
    _sync(device)
    warmup_s = time.perf_counter() - started
    start = time.perf_counter()
    tokens, flops, losses = 0, {"student": 0.0, "teacher": 0.0, "total": 0.0}, []
    for _ in range(steps):
        step_tokens, step_flops_, loss = step()
        tokens += step_tokens
        flops = {k: flops[k] + step_flops_[k] for k in flops}
        losses.append(loss)
    _sync(device)
    step_s = (time.perf_counter() - start) / steps
    peak = peak_flops(torch.cuda.get_device_name(device)) if device.type == "cuda" else None
    per_step = {k: v / steps for k, v in flops.items()}
    return {"name": setup.name, "peer": setup.peer, "ds_config": None, "micro_batch": micro, "unpad": False,
            "accumulation": accumulation, "precision": "bf16 autocast" if device.type == "cuda" else "fp32",
            "compiled": setup.peer == "hf-compiled", "readme": False, "warmup_s": warmup_s,
            "step_ms": 1000 * step_s, "tokens_per_s": tokens / steps / step_s, "teacher_share": 0.0,
            "tacl_loss_share": 0.0,
            **utilisation(per_step, step_s, 0.0, peak),
            "peak_mem_gib": torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None,
            "loss_first": float(losses[0]), "loss_last": float(losses[-1])}


def sweep(data: Path, setups: list[Setup], steps: int, warmup: int, out: Path | None = None,
          model_config: dict | None = None, workers: int = 6, eager_fallback: bool | None = None) -> list[dict]:
    """Every setup in turn; a failed one (out of memory, an error) is a row with
    its error (its traceback goes to stderr), and the sweep goes on. With
    ``eager_fallback`` (default: on CUDA, where the encoders are compiled) a
    tacl-scale row that failed other than for memory is measured again with
    ``--no-compile`` (:meth:`Setup.eager`) in the next row, so a defect of the
    compiled encoder still leaves figures. Rows are appended to ``out`` (JSON
    lines) as they come."""
    if eager_fallback is None:
        eager_fallback = torch.cuda.is_available()
    rows = []
    pending = list(setups)
    with tempfile.TemporaryDirectory(prefix="tacl-bench-") as tmp:
        workdir = Path(tmp)
        model = workdir / "bert.json"
        model.write_text(json.dumps(model_config or BERT_BASE))
        while pending:
            setup = pending.pop(0)
            try:
                row = run_config(data, model, workdir, setup, steps, warmup, workers)
            except Exception as err:  # one configuration's failure must not hide the others
                traceback.print_exc()  # the phase's log keeps it: the report of a GPU-only failure
                row = {"name": setup.name, "ds_config": setup.ds_config, "micro_batch": setup.micro_batch,
                       "unpad": setup.unpad, "peer": setup.peer, "readme": setup.readme,
                       "eager_fallback": setup.eager_fallback, "error": f"{type(err).__name__}: {err}"[:300]}
                eager = setup.eager() if eager_fallback else None
                if eager is not None and not isinstance(err, torch.OutOfMemoryError):
                    pending.insert(0, eager)
            gc.collect()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            rows.append(row)
            print(json.dumps(row), flush=True)
            if out is not None:
                with open(out, "a", encoding="utf-8") as f:
                    f.write(json.dumps(row) + "\n")
    return rows


def judged(row: dict) -> bool:
    """Whether a target may be judged on ``row``: it was measured, and not as the
    eager fallback of a failed compiled run."""
    return "error" not in row and not row.get("eager_fallback")


def best(rows: list[dict], unpad: bool | None = None, ds_config: str | None = "zero2_bf16.json",
         micro_batch: int | None = None) -> dict | None:
    """The fastest judged tacl-scale row (no peer) of those matching the given settings."""
    done = [r for r in rows if judged(r) and not r.get("peer") and not r.get("readme")
            and (unpad is None or r.get("unpad") is unpad) and (ds_config is None or r.get("ds_config") == ds_config)
            and (micro_batch is None or r.get("micro_batch") == micro_batch)]
    return max(done, key=lambda r: r["tokens_per_s"]) if done else None


def peer(rows: list[dict], name: str = "hf-compiled") -> dict | None:
    return next((r for r in rows if r.get("peer") == name and judged(r)), None)


def readme_row(rows: list[dict]) -> dict | None:
    return next((r for r in rows if r.get("readme") and judged(r)), None)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, required=True, help="dataset directory (max length 256, BERT vocabulary)")
    p.add_argument("--micro", type=int, nargs="+", default=[256, 32])
    p.add_argument("--no-peers", action="store_true", help="no Hugging Face rows")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--no-zero1", action="store_true", help="ZeRO-2 only")
    p.add_argument("--out", type=Path, default=None, help="append each row to this JSON-lines file")
    p.add_argument("--dry-run", action="store_true", help="on the CPU at a tiny shape: checks the code, no figures")
    args = p.parse_args()
    if args.dry_run:
        setups = dry_run_setups(zero1=not args.no_zero1, peers=not args.no_peers)
        sweep(args.data, setups, 2, 1, args.out, TINY_BERT, workers=0)
        return 0
    if not torch.cuda.is_available():
        print("no CUDA device: this benchmark measures GPU training; run it on a GPU machine", file=sys.stderr)
        return 2
    name = torch.cuda.get_device_name()
    datasheet = peak_flops(name)
    print(f"{name}: MFU against the datasheet dense bf16 peak "
          f"{'unknown' if datasheet is None else f'{datasheet / 1e12:.0f} TFLOP/s'}; "
          f"a bf16 matmul measures {measure_matmul_tflops():.0f} TFLOP/s (reference)")
    rows = sweep(args.data, sweep_setups(args.micro, zero1=not args.no_zero1, peers=not args.no_peers), args.steps,
                 args.warmup, args.out)
    for row in rows:
        if "error" not in row:
            mfu_text = "n/a" if row["mfu"] is None else f"{row['mfu']:.1%}"
            print(f"{row['name']:>32}: {row['tokens_per_s']:,.0f} tokens/s, MFU {mfu_text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
