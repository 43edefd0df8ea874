"""The DeepSpeed config the engine gets: the ``--ds`` JSON (:class:`~tacl_scale.config.EngineConfig`)
resolved against the run's typed settings (:class:`~tacl_scale.config.TrainConfig`) for a
number of ranks and a device, with the settings tacl-scale cannot train with refused in
one line each, and the settings DeepSpeed would silently ignore found.

DeepSpeed itself is imported only inside the functions that ask it (its dtype names,
its config parser), as before: importing this module loads none of the training stack.
"""

from __future__ import annotations

import difflib
import json
from typing import TYPE_CHECKING, Any

from .data.shuffle import BatchLayout, BatchShapeError
from .errors import TrainError

if TYPE_CHECKING:
    from .config import TrainConfig


def deepspeed_config(config: TrainConfig, world_size: int, device_type: str,
                     load_universal: bool = False, precision: str | None = None) -> dict[str, Any]:
    """The DeepSpeed JSON with batch sizes, clipping and precision settled for
    ``world_size`` ranks on ``device_type`` (a pure function of the config; the
    micro-batch must be settled, see :func:`tacl_scale.parts.resolve_micro_batch`);
    ``precision`` as :func:`tacl_scale.parts.resolve_precision` settled it (default:
    ``--precision`` or else the config's, as :meth:`EngineConfig.precision_on` reads
    them for a GPU with bf16); ``load_universal`` when this job resumes from a
    universal checkpoint."""
    engine = config.engine
    ds = json.loads(json.dumps(engine.settings))  # a deep copy
    stage = _supported_zero_stage(ds, engine.path)
    _take_out_optimizer(ds, engine.path)
    _set_optimizer_step(ds, config, world_size)
    if load_universal:  # resuming at another number of ranks, from a universal conversion
        ds.setdefault("checkpoint", {})["load_universal"] = True
    _quiet_own_progress(ds)
    precision = precision or engine.precision_on(device_type, asked=config.performance.precision)
    _set_precision(ds, precision)
    _apply_cuda_graph_rules(ds, config, device_type, stage, precision)
    _single_rank_settings(ds, world_size)
    return ds


def _supported_zero_stage(ds: dict[str, Any], path: str) -> int:
    """The ZeRO stage of ``ds`` (the file ``path``), refused unless it is one
    tacl-scale trains with: a stage 0, 1 or 2 section, nothing offloaded."""
    if "zero_optimization" not in ds:
        raise TrainError(f"{path}: no zero_optimization section (ZeRO stage)")
    stage = ds["zero_optimization"].get("stage", 0)
    if stage not in (0, 1, 2):
        # ZeRO-3 was accepted: one rank trained, two hung at the run's end (the export's gather)
        raise TrainError(f"{path}: zero_optimization.stage {stage!r}: tacl-scale trains with ZeRO stage 0, 1 "
                         "or 2 (stage 2 already partitions gradients and optimizer states, and BERT-large's weights "
                         "fit on one GPU); ds_configs/zero2.json is the default")
    offloaded = [key for key in ("offload_optimizer", "offload_param")
                 if str((ds["zero_optimization"].get(key) or {}).get("device", "none")).lower() != "none"]
    if offloaded:
        # DeepSpeed refused it in a traceback: ZeRO-Offload wants its own CPU Adam, and the trainer builds AdamW
        raise TrainError(f"{path}: zero_optimization.{offloaded[0]}: ZeRO-Offload is not supported (the trainer "
                         "builds torch's AdamW, which DeepSpeed refuses to offload; BERT-large trains without it); "
                         "remove the section")
    return stage


def _take_out_optimizer(ds: dict[str, Any], path: str) -> None:
    """Remove ``ds``'s optimizer section, which the trainer's own AdamW and
    schedule replace: a scheduler section or another optimizer is refused."""
    if "scheduler" in ds:
        raise TrainError(f"{path}: remove 'scheduler': train.py builds the warm-up/decay "
                         "schedule from --steps and --warmup-ratio")
    optimizer = ds.pop("optimizer", None)
    if optimizer is not None and str(optimizer.get("type", "")).lower() not in ("adam", "adamw"):
        raise TrainError(f"{path}: optimizer {optimizer.get('type')!r}; TaCL trains with "
                         "AdamW (an older config's AdamW params are used as your --lr, --weight-decay, ...)")


def _set_optimizer_step(ds: dict[str, Any], config: TrainConfig, world_size: int) -> None:
    """Each optimizer step as the flags make it: the global batch, its micro-batches
    on ``world_size`` ranks, and the gradient clipping."""
    layout = batch_layout(config, world_size)
    ds["train_batch_size"] = layout.batch_size
    ds["train_micro_batch_size_per_gpu"] = layout.micro_batch_size
    ds["gradient_accumulation_steps"] = layout.accumulation
    ds["gradient_clipping"] = config.optim.grad_clip


def _quiet_own_progress(ds: dict[str, Any]) -> None:
    """Turn off DeepSpeed's own progress lines and throughput timer (unless the
    config sets them): train.py prints and measures its own."""
    ds.setdefault("steps_per_print", 10**9)  # train.py prints its own progress
    if "throughput" not in ds.get("timers", {}):
        # DeepSpeed's throughput timer (on by default when it does not own the data
        # loader) waits for the whole device at every micro-batch's forward and every
        # step, for a figure printed every steps_per_print: train.py measures its own.
        ds.setdefault("timers", {})["throughput"] = {"enabled": False}


def _set_precision(ds: dict[str, Any], precision: str) -> None:
    """Enable ``precision``'s section of ``ds`` (fp16 or bf16) and disable the
    other where the config has one."""
    bf16 = {**ds.pop("bfloat16", {}), **ds.get("bf16", {})}  # DeepSpeed reads either name
    for section, settings in (("fp16", ds.get("fp16", {})), ("bf16", bf16)):
        if settings or section == precision:
            ds[section] = {**settings, "enabled": precision == section}


def _apply_cuda_graph_rules(ds: dict[str, Any], config: TrainConfig, device_type: str, stage: int,
                            precision: str) -> None:
    """Refuse the ZeRO and precision settings that keep a gradient past the
    micro-batch whose CUDA graph made it (``--cuda-graphs``), and have bf16
    consume each gradient in its own backward."""
    path = config.engine.path
    accumulation = accumulation_dtype(ds, precision)
    if (config.performance.cuda_graphs and device_type == "cuda"
            and (stage == 0 or (stage == 1 and accumulation == precision))):
        # Without ZeRO, and with ZeRO-1 accumulating in the model's own dtype, DeepSpeed
        # keeps each micro-batch's gradients in param.grad until the optimizer step,
        # where the next replay of a CUDA graph overwrites them (on the CPU the flag
        # records no graph: said when the run is built).
        raise TrainError(f"{path}: zero_optimization.stage {stage} with {accumulation} gradient accumulation "
                         "keeps each gradient in param.grad past its micro-batch, where --cuda-graphs overwrites "
                         "it: use stage 2, or stage 1 with \"data_types\": {\"grad_accum_dtype\": \"fp32\"} in "
                         "half precision, or drop --cuda-graphs")
    if config.performance.cuda_graphs and precision == "bf16":
        # A replayed CUDA graph reuses its memory from the next micro-batch on, so each
        # gradient must be consumed by the backward that made it. DeepSpeed's
        # BF16_Optimizer (ZeRO-1, bf16, fp32 accumulation) otherwise keeps it in
        # param.grad until the next backward zeroes it; immediate_grad_update adds it to
        # the fp32 gradient in the backward's hooks and drops it. (ZeRO-2's hooks and
        # the fp16 path's always do.)
        if ds["bf16"].get("immediate_grad_update") is False:
            raise TrainError(f"{path}: bf16.immediate_grad_update false keeps each gradient in param.grad "
                             "past its micro-batch, where --cuda-graphs overwrites it: remove the setting or drop "
                             "--cuda-graphs")
        ds["bf16"]["immediate_grad_update"] = True


def _single_rank_settings(ds: dict[str, Any], world_size: int) -> None:
    """Drop what only costs on one rank: ZeRO's overlapped communication."""
    zero = ds["zero_optimization"]
    if world_size == 1 and zero.get("overlap_comm"):
        # overlap_comm makes ZeRO wait for the whole device after every micro-batch's
        # backward and every gradient bucket, to overlap a reduction that one rank
        # does not have: nothing to gain, the host stalls each micro-batch.
        zero["overlap_comm"] = False


def accumulation_dtype(ds: dict[str, Any], precision: str) -> str:
    """The dtype DeepSpeed accumulates gradients in, as ``fp16``, ``bf16`` or
    ``fp32``: the config's ``data_types.grad_accum_dtype`` by any name DeepSpeed
    takes (``bfloat16``, ``half``, ``float``, ...), else the model's ``precision``."""
    from deepspeed.runtime.config import DtypeEnum

    value = ds.get("data_types", {}).get("grad_accum_dtype")
    if value is None:
        return precision
    try:
        return DtypeEnum(value).name
    except ValueError:  # DeepSpeed refuses it when the engine is built, in its own words
        return str(value)


def batch_layout(config: TrainConfig, world_size: int, rank: int = 0) -> BatchLayout:
    """The batch shape of ``config`` on ``world_size`` ranks (an unsettled
    ``"auto"`` micro-batch checked as 1: every per-rank batch has that divisor),
    refused in one line that says which micro-batch sizes would fit."""
    optim = config.optim
    try:
        return BatchLayout(optim.batch_size, optim.micro_batch_size or 1, world_size, rank)
    except BatchShapeError as err:
        raise TrainError(str(err)) from err


def settings_deepspeed_ignores(ds: dict[str, Any], path: str) -> list[str]:
    """A line for each top-level key of the resolved DeepSpeed config ``ds`` (from
    the file ``path``) that DeepSpeed's config parser never reads: DeepSpeed ignores
    it without a word, so a misspelt ``train_batch_sise`` trained with the default.
    Found by letting ``DeepSpeedConfig`` parse it while the keys it asks for are
    recorded; none when it cannot parse it (its own refusal comes with the engine)."""
    from deepspeed.runtime.config import DeepSpeedConfig

    asked: set[str] = set()

    class Recording(dict):  # the top level only: each section is parsed as a whole
        def get(self, key: Any, default: Any = None) -> Any:
            asked.add(key)
            return super().get(key, default)

        def __getitem__(self, key: Any) -> Any:
            asked.add(key)
            return super().__getitem__(key)

        def __contains__(self, key: object) -> bool:
            asked.add(str(key))
            return super().__contains__(key)

        def __copy__(self) -> Recording:  # the parser reads a copy
            return self

    try:
        DeepSpeedConfig(Recording(json.loads(json.dumps(ds))))
    except Exception:  # noqa: BLE001 - DeepSpeed says what is wrong when the engine is built
        return []
    lines = []
    for key in sorted(set(ds) - asked):
        close = difflib.get_close_matches(key, sorted(asked), n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        lines.append(f"{path}: {key!r} is no setting of DeepSpeed's, which ignores it{hint}")
    return lines
