"""The student's fp32 master weights, which an export writes: gathered from the
DeepSpeed engine's ZeRO partitions in memory (the end of a run), or consolidated
from a checkpoint on disk by DeepSpeed (``zero_to_fp32``, or its universal
conversion for ZeRO-1's bf16 optimizer). Either way the optimizer's fp32 copy, not
the half-precision weights the forward pass used."""

from __future__ import annotations

import contextlib
import io
import logging
from pathlib import Path
from typing import Any

import torch

log = logging.getLogger("tacl_scale.export")

MODULE_PREFIX = "student."  # the student's parameters inside the engine's PretrainingModule


def engine_master_weights(engine: Any, keep: bool = True) -> dict[str, torch.Tensor]:
    """The student's fp32 master weights as the DeepSpeed ``engine`` holds them now
    (on the CPU), gathered from every rank's ZeRO partition: a collective, so every
    rank calls it. What :func:`master_weights` reads back from a checkpoint of this
    moment, without reading it: the end of a run exports from memory. Without
    ``keep`` (the ranks that do not write the export) each is gathered, as the
    collective needs, and dropped: ``{}``, not a host copy of the model per rank."""
    from deepspeed.utils import safe_get_full_fp32_param

    weights: dict[str, torch.Tensor] = {}
    masters: dict[int, torch.Tensor | None] = {}
    # Every name of a tied parameter (the MLM decoder's weight and bias are the
    # embeddings' and the head's own bias), each gathered once.
    for name, param in engine.module.named_parameters(remove_duplicate=False):
        if id(param) not in masters:
            master = safe_get_full_fp32_param(param)  # None: not mixed precision, the parameter is the master
            masters[id(param)] = (param if master is None else master).detach().float().cpu() if keep else None
        if keep and name.startswith(MODULE_PREFIX):
            weights[name[len(MODULE_PREFIX):]] = masters[id(param)]
    return weights


def master_weights(ckpt_dir: Path) -> dict[str, torch.Tensor]:
    """The student's fp32 master weights of a checkpoint, consolidated across the
    ZeRO partitions of every rank by DeepSpeed: ``zero_to_fp32`` for ZeRO-2 (and
    ZeRO-1 without fp32 accumulation); the universal conversion for the bf16
    optimizer of ZeRO-1 with fp32 gradient accumulation (``bf16_zero_*`` files),
    which ``zero_to_fp32`` does not read."""
    if any(ckpt_dir.glob("bf16_zero_pp_rank_*_optim_states.pt")):
        state = _universal_master_weights(ckpt_dir)
    else:
        # DeepSpeed's accelerator notice, zero_to_fp32's prints ("Processing zero
        # checkpoint", parameter counts) and its progress bar were most of the
        # command's output: logged at DEBUG instead.
        said = io.StringIO()
        try:
            with contextlib.redirect_stdout(said), contextlib.redirect_stderr(said):
                from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint

                state = get_fp32_state_dict_from_zero_checkpoint(str(ckpt_dir.parent), tag=ckpt_dir.name)
        finally:
            log.debug("zero_to_fp32 said:\n%s", said.getvalue())
    student = {k[len(MODULE_PREFIX):]: v for k, v in state.items() if k.startswith(MODULE_PREFIX)}
    if not student:
        raise ValueError(f"{ckpt_dir}: no {MODULE_PREFIX}* weights in the checkpoint")
    return student


def _universal_master_weights(ckpt_dir: Path) -> dict[str, torch.Tensor]:
    """Every parameter's fp32 master weight, through a universal conversion in a
    temporary directory (the run directory is only read)."""
    import tempfile

    from .checkpoint import convert_to_universal

    with tempfile.TemporaryDirectory(prefix="tacl-export-") as tmp:
        target, log_file = Path(tmp) / "universal", Path(tmp) / "conversion.log"
        try:
            convert_to_universal(ckpt_dir, target, log_file)
        except RuntimeError as err:  # its log goes with the temporary directory: show its end
            raise ValueError(f"{err}:\n{log_file.read_text(encoding='utf-8', errors='replace')[-2000:]}") from err
        weights = {path.parent.name: torch.load(path, map_location="cpu", weights_only=False)["param"]
                   for path in sorted((target / "zero").glob("*/fp32.pt"))}
    # A tied weight (the MLM decoder is the word embeddings) is one parameter: the
    # converter writes its alias from the half-precision module, so take the master.
    model_states = sorted(ckpt_dir.glob("mp_rank_*_model_states.pt"))[0]
    shared = torch.load(model_states, map_location="cpu", weights_only=False).get("shared_params") or {}
    for alias, source in shared.items():
        weights[alias] = weights[source]
    return weights
