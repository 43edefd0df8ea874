"""The one owner of this rank's device and of the process group.

Launchers (``deepspeed``, ``torchrun``, ``slurm/_pretrain.sh``) show every task all
GPUs of its node and tell it its ``LOCAL_RANK``; :meth:`Distributed.setup` makes
``cuda:LOCAL_RANK`` the current device before any tensor or module exists, then
joins the process group (NCCL on CUDA, gloo on CPU). Everything that places a
tensor or runs a collective asks this object: batches, the teacher, held-out data
and the per-step metric reductions all live on ``device``, so NCCL (which only
moves CUDA tensors) and gloo are served by the same code.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import torch
import torch.distributed as dist

log = logging.getLogger("tacl_scale.distributed")

# A standalone process (no launcher) picks its rendezvous port, and picks again if
# another process bound it first: a kernel-chosen free port is free only until then.
STANDALONE_PORT_TRIES = 5
T = TypeVar("T")


class DistributedError(RuntimeError):
    """The launch environment or the accelerator is unusable; the message says why."""


@dataclass(frozen=True)
class LaunchEnv:
    """Where the launcher put this process, read once from its environment."""

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    master_addr: str = ""
    master_port: str = ""
    standalone: bool = False  # no launcher set the variables: one process, this machine

    @classmethod
    def standalone_here(cls) -> LaunchEnv:
        """One process on this machine (``tacl-train`` in a shell): a one-rank group
        whose port is picked as it binds (:meth:`Distributed.setup`)."""
        return cls(master_addr="127.0.0.1", standalone=True)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> LaunchEnv:
        """The launcher's variables; none at all (``tacl-train`` in a shell) is one
        process on this machine, its port chosen when it joins."""
        if not any(key in environ for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK")):
            return cls.standalone_here()
        try:
            env = cls(int(environ.get("RANK", 0)), int(environ.get("LOCAL_RANK", 0)),
                      int(environ.get("WORLD_SIZE", 1)), environ.get("MASTER_ADDR", ""),
                      environ.get("MASTER_PORT", ""))
        except ValueError as err:
            raise DistributedError(f"RANK/LOCAL_RANK/WORLD_SIZE must be integers: {err}") from err
        if not 0 <= env.rank < env.world_size or env.local_rank < 0:
            raise DistributedError(f"rank {env.rank} / local rank {env.local_rank} outside world size "
                                   f"{env.world_size}")
        return env


def free_port(host: str) -> int:
    """A TCP port of ``host`` that nothing holds now, chosen by the kernel."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def deepspeed_shm_buffer(env: LaunchEnv, rank: int) -> Path:
    """The shared-memory segment DeepSpeed's CPU all-reduce creates for ``rank``
    (``ops/csrc/cpu/comm/shm.cpp``): it never removes it, so each CPU job would
    leave one in /dev/shm."""
    return Path("/dev/shm") / f"deepspeed_allreduce_buffer_{os.getuid()}_{env.master_addr}_{env.master_port}_{rank}"


class Distributed:
    """This rank's device and its view of the process group."""

    # How often ranks waiting for rank 0's long work meet in a collective (wait_for_main):
    # far inside any process-group timeout.
    wait_poll_s: float = 5.0

    def __init__(self, rank: int, local_rank: int, world_size: int, device: torch.device) -> None:
        self.rank = rank
        self.local_rank = local_rank
        self.world_size = world_size
        self.device = device

    @classmethod
    def setup(cls, env: LaunchEnv) -> Distributed:
        """Pin this process to its device, then join the process group."""
        from deepspeed.accelerator import get_accelerator

        kind = get_accelerator().device_name()
        if kind == "cuda":
            visible = torch.cuda.device_count()
            if env.local_rank >= visible:
                # Which of several tasks to a GPU, or a task bound to its own GPU, cannot be told
                # apart here; either way DeepSpeed would place its engine on cuda:LOCAL_RANK.
                raise DistributedError(
                    f"LOCAL_RANK {env.local_rank}, but this task sees {visible} GPU(s): run one task per GPU, each "
                    "seeing every GPU of its node (Slurm: --gpus-per-node, not --gpus-per-task or --gpu-bind)")
            torch.cuda.set_device(env.local_rank)  # before anything is placed
            device, backend = torch.device("cuda", env.local_rank), "nccl"
        elif kind == "cpu":
            device, backend = torch.device("cpu"), "gloo"
        else:
            raise DistributedError(f"DeepSpeed accelerator {kind!r}: tacl-scale trains on cuda or cpu")
        env = cls._join(env, backend)
        rank = dist.get_rank()
        if kind == "cpu":
            # Every rank maps every rank's all-reduce segment while DeepSpeed initialises
            # (once per process); after the barrier the names are no longer needed, and
            # removing this rank's now means even a killed rank leaves nothing in /dev/shm.
            dist.barrier()
            deepspeed_shm_buffer(env, rank).unlink(missing_ok=True)
        return cls(rank, env.local_rank, dist.get_world_size(), device)

    @staticmethod
    def _join(env: LaunchEnv, backend: str) -> LaunchEnv:
        """Join the launcher's process group; standalone, a one-rank group on a port
        the kernel picks, picked again when another process bound it between the
        probe and the bind (a free port is only free until someone takes it)."""
        import deepspeed

        if not env.standalone:
            deepspeed.init_distributed(dist_backend=backend)
            return env
        for attempt in range(1, STANDALONE_PORT_TRIES + 1):
            # DeepSpeed reads the rendezvous from the environment (without it, it looks for MPI).
            env = replace(env, master_port=str(free_port(env.master_addr)))
            os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR=env.master_addr,
                              MASTER_PORT=env.master_port)
            try:
                deepspeed.init_distributed(dist_backend=backend)
                break
            except dist.DistNetworkError as err:
                if "EADDRINUSE" not in str(err) or attempt == STANDALONE_PORT_TRIES:
                    raise
                log.info("port %s was taken before this process bound it: trying another", env.master_port)
        return env

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def move(self, batch: dict[str, Any]) -> dict[str, Any]:
        """A batch's tensors (and its ``tacl_rows``) on this rank's device (other
        values unchanged)."""
        from .data.loader import to_device

        return to_device(batch, self.device, non_blocking=True)

    def sum(self, values: torch.Tensor) -> torch.Tensor:
        """Element-wise sum over ranks of a 1-D tensor (returned on this device)."""
        total = values.to(self.device, torch.float64)
        if self.world_size > 1:
            dist.all_reduce(total)
        return total

    def tensor(self, values: list[float] | list[int], dtype: torch.dtype) -> torch.Tensor:
        """Host numbers as a tensor on this device without waiting for it: copied
        from page-locked memory (from pageable memory CUDA first waits for the
        stream, and ``torch.tensor(..., device=cuda)`` for the copy)."""
        host = torch.tensor(values, dtype=dtype)
        if self.device.type != "cuda":
            return host
        return host.pin_memory().to(self.device, non_blocking=True)

    def sum_exact_tensor(self, value: int) -> torch.Tensor:
        """An integer summed over ranks exactly (int64), left on this device: the
        all-reduce is queued, nothing waits for it."""
        total = self.tensor([value], torch.int64)
        if self.world_size > 1:
            dist.all_reduce(total)
        return total

    def any(self, flag: bool) -> bool:
        """Whether ``flag`` is set on at least one rank (one rank: no device work)."""
        if self.world_size == 1:
            return flag
        value = torch.tensor([1 if flag else 0], dtype=torch.int32, device=self.device)
        dist.all_reduce(value, op=dist.ReduceOp.MAX)
        return bool(value.item())

    def gather_rows(self, rows: torch.Tensor) -> tuple[torch.Tensor, int]:
        """Every rank's ``rows`` (same shape on all ranks) stacked in rank order, and
        where this rank's start. Differentiable: the backward hands each rank the sum,
        over ranks, of the gradients of its own rows (a reduce-scatter)."""
        if self.world_size == 1:
            return rows, 0
        # The public autograd all-gather (the same in every torch we support; the
        # private _functional_collectives API changes names between releases). Its
        # backward is a reduce-scatter on NCCL and an all-to-all plus sum on gloo.
        from torch.distributed.nn.functional import all_gather

        return torch.cat(all_gather(rows.contiguous())), self.rank * rows.shape[0]

    def wait_for_main(self, work: Callable[[], T]) -> T:
        """``work()`` on rank 0 and its result on every rank, the other ranks waiting
        for it in one small collective every :attr:`wait_poll_s` seconds rather than in
        one collective for all of it: minutes of rank-0 work (a checkpoint's checksums
        and its universal conversion at resume) would pass the process group's timeout
        (DeepSpeed's default: 10 minutes), and NCCL would abort the waiting ranks. If
        ``work`` raises, rank 0 raises it and every other rank a :class:`DistributedError`
        saying so, instead of waiting on. Ctrl-C stops rank 0 at once (the work runs in
        a daemon thread, abandoned)."""
        if self.world_size == 1:
            return work()
        if not self.is_main:
            while not self.any(False):
                pass
            finished, value = self.broadcast_object(None)
            if not finished:
                raise DistributedError(f"rank 0 failed while this rank waited for it ({value}); its own error "
                                       "line says more")
            return value
        outcome: list[tuple[bool, Any]] = []

        def run() -> None:
            try:
                outcome.append((True, work()))
            except BaseException as err:  # raised again below, on this rank's main thread
                outcome.append((False, err))

        thread = threading.Thread(target=run, name="rank0-work", daemon=True)
        thread.start()
        while True:
            thread.join(self.wait_poll_s)
            if self.any(not thread.is_alive()):
                break
        finished, value = outcome[0]
        self.broadcast_object((finished, value if finished else f"{type(value).__name__}: {value}"))
        if not finished:
            raise value
        return value

    def broadcast_object(self, value: Any) -> Any:
        """Rank 0's ``value`` on every rank (a picklable object)."""
        if self.world_size == 1:
            return value
        box = [value]
        dist.broadcast_object_list(box, src=0, device=self.device)
        return box[0]

    def gather_objects(self, value: Any) -> list[Any]:
        """Every rank's ``value`` (a picklable object), in rank order, on every rank."""
        if self.world_size == 1:
            return [value]
        box: list[Any] = [None] * self.world_size
        dist.all_gather_object(box, value)
        return box

    def barrier(self) -> None:
        if not dist.is_initialized():
            return
        if self.device.type == "cuda":
            dist.barrier(device_ids=[self.local_rank])
        else:
            dist.barrier()

    def close(self) -> None:
        """Leave the process group (idempotent), through DeepSpeed so that it
        also drops the groups it derived from it."""
        if dist.is_initialized():
            import deepspeed.comm

            deepspeed.comm.destroy_process_group()
