"""Checkpoint details that only matter on GPUs, emulated on CPU: the RNG state of
the rank's own CUDA device (resuming where a rank sees fewer GPUs than at save
time), and optimizer state put back on its parameters' device after DeepSpeed's
universal load (resuming on another number of GPUs with the fused AdamW)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import FakeSavingEngine, OneRank

from tacl_scale import checkpoint
from tacl_scale.run_dir import CHECKPOINT_STATE

pytestmark = pytest.mark.framework  # also run on the GPU image's versions (scripts/test.sh --gpu-image)


class FakeCuda:
    """``torch.cuda`` as a rank pinned to ``cuda:device`` of a node with ``count``
    GPUs sees it: one generator state per device, and an error for any other index
    (what torch raises for a device that is not there)."""

    def __init__(self, device: int, count: int) -> None:
        self.device, self.count = device, count
        self.states = {k: torch.tensor([k], dtype=torch.uint8) for k in range(count)}

    def _check(self, index: int) -> int:
        if not 0 <= index < self.count:
            raise RuntimeError(f"CUDA error: invalid device ordinal {index}")
        return index

    def _index(self, device: Any) -> int:
        """The ordinal ``device`` names, as torch.cuda reads it ("cuda": the current one)."""
        if isinstance(device, int):
            return self._check(device)
        device = torch.device(device)
        return self._check(self.device if device.index is None else device.index)

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "current_device", lambda: self.device)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: self.count)
        monkeypatch.setattr(torch.cuda, "get_rng_state", lambda device="cuda": self.states[self._index(device)].clone())
        monkeypatch.setattr(torch.cuda, "get_rng_state_all", lambda: [self.states[k] for k in range(self.count)])

        def set_rng_state(state: torch.Tensor, device: Any = "cuda") -> None:
            self.states[self._index(device)] = state.clone()

        def set_rng_state_all(states: list[torch.Tensor]) -> None:
            for index, state in enumerate(states):
                self.states[self._check(index)] = state.clone()

        monkeypatch.setattr(torch.cuda, "set_rng_state", set_rng_state)
        monkeypatch.setattr(torch.cuda, "set_rng_state_all", set_rng_state_all)


def test_a_rank_saves_and_restores_its_own_device_only(monkeypatch: pytest.MonkeyPatch) -> None:
    saver = FakeCuda(device=5, count=8)  # rank 5 of a 1×8 job
    saver.install(monkeypatch)
    saved = checkpoint.rng_states()
    assert torch.equal(saved["cuda"], torch.tensor([5], dtype=torch.uint8))  # one state, not eight
    loader = FakeCuda(device=1, count=4)  # the same rank in a 2×4 job: local rank 1 of 4 GPUs
    loader.install(monkeypatch)
    checkpoint.restore_rng_states(saved)
    assert torch.equal(loader.states[1], torch.tensor([5], dtype=torch.uint8))


def test_old_all_devices_states_load_on_a_node_with_fewer_gpus(monkeypatch: pytest.MonkeyPatch,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    old = {**checkpoint.rng_states(), "cuda": [torch.tensor([k], dtype=torch.uint8) for k in range(8)]}
    fewer = FakeCuda(device=2, count=4)
    fewer.install(monkeypatch)
    checkpoint.restore_rng_states(old)  # set_rng_state_all would index cuda:4..7
    assert torch.equal(fewer.states[2], torch.tensor([2], dtype=torch.uint8))
    short = {**old, "cuda": old["cuda"][:2]}  # saved on a 2-GPU node, restored on cuda:2
    with caplog.at_level(logging.WARNING, logger="tacl_scale.checkpoint"):
        checkpoint.restore_rng_states(short)
    assert "cover 2 device(s)" in caplog.text and torch.equal(fewer.states[2], torch.tensor([2], dtype=torch.uint8))


def _adamw_on(device: str) -> tuple[torch.optim.AdamW, torch.nn.Parameter]:
    param = torch.nn.Parameter(torch.zeros(4, device=device))
    optim = torch.optim.AdamW([param], lr=1e-3)
    optim.state[param] = {"step": torch.tensor(7.0), "exp_avg": torch.zeros(4, device=device),
                          "exp_avg_sq": torch.zeros(4, device=device)}
    return optim, param


def test_optimizer_state_is_moved_to_its_parameters_device() -> None:
    """The ``meta`` device stands in for ``cuda``: DeepSpeed's universal load leaves
    ``step`` on the CPU beside parameters elsewhere."""
    optim, param = _adamw_on("meta")
    assert optim.state[param]["step"].device.type == "cpu"
    assert checkpoint.place_optimizer_state(optim) == 1
    assert {v.device.type for v in optim.state[param].values()} == {"meta"}
    assert checkpoint.place_optimizer_state(optim) == 0


class FakeZeroEngine:
    """What ``checkpoint.load`` touches of a DeepSpeed engine whose ZeRO optimizer
    wraps a torch AdamW, loading the way the universal load does (``step`` as the
    CPU tensor that ``torch.load`` returned)."""

    global_rank = 0

    def __init__(self) -> None:
        inner, self.param = _adamw_on("meta")
        inner.state.clear()
        self.optimizer = type("ZeroOptimizer", (), {"optimizer": inner})()

    def load_checkpoint(self, root: str, tag: str) -> tuple[str, dict[str, Any]]:
        self.optimizer.optimizer.state[self.param] = {"step": torch.tensor(3.0),
                                                      "exp_avg": torch.zeros(4, device="meta")}
        return f"{root}/{tag}", {"step": 3}


def test_load_puts_the_optimizer_step_on_the_parameters_device(tmp_path: Path) -> None:
    engine = FakeZeroEngine()
    client = checkpoint.load(engine, tmp_path, "step00000003")
    assert client == {"step": 3}
    assert engine.optimizer.optimizer.state[engine.param]["step"].device.type == "meta"


def test_rotation_keeps_the_newest_steps_and_always_the_one_just_written(tmp_path: Path) -> None:
    root = tmp_path / "checkpoints"
    for step in (2, 4, 6):
        checkpoint.save(FakeSavingEngine(), root, step, {"step": step}, keep_last=2, group=OneRank())
    assert checkpoint.tags(root) == ["step00000004", "step00000006"]
    # A save below newer steps (from another job in this directory) is kept, not rotated away at once.
    checkpoint.save(FakeSavingEngine(), root, 3, {"step": 3}, keep_last=1, group=OneRank())
    assert checkpoint.tags(root) == ["step00000003", "step00000006"]
    assert checkpoint.latest_tag(root) == "step00000003"


def test_a_step_saved_again_holds_only_this_saves_files(tmp_path: Path) -> None:
    """A save killed midway leaves its step's directory; the requeued job, on another
    number of ranks, saved that step again into it: the dead job's ZeRO partitions
    stayed, were recorded, and a universal conversion counted both jobs' ranks. Rank 0
    now removes the leftover (and its universal copy) before any rank writes."""
    root = tmp_path / "checkpoints"
    leftover = root / "step00000006"
    leftover.mkdir(parents=True)
    (leftover / "zero_pp_rank_3_mp_rank_00_optim_states.pt").write_bytes(b"a dead job's partition")
    (root / f"step00000006{checkpoint.UNIVERSAL}" / "zero").mkdir(parents=True)
    events: list[str] = []

    class Engine(FakeSavingEngine):
        def save_checkpoint(self, root: str, tag: str, client_state: dict, save_latest: bool) -> None:
            events.append("save, leftover " + ("present" if (leftover / "zero_pp_rank_3_mp_rank_00_optim_states.pt").exists()
                                               else "gone"))
            super().save_checkpoint(root, tag, client_state, save_latest)

    def barrier() -> None:
        events.append("barrier, leftover " + ("present" if (leftover / "zero_pp_rank_3_mp_rank_00_optim_states.pt").exists()
                                              else "gone"))

    checkpoint.save(Engine(), root, 6, {"step": 6}, keep_last=0, group=OneRank(barrier))
    assert events[:2] == ["barrier, leftover gone", "save, leftover gone"]
    assert sorted(json.loads((leftover / checkpoint.CHECKPOINT_RECORD).read_text())) == [
        "mp_rank_00_model_states.pt", "rng_rank00000.pt", checkpoint.CHECKPOINT_STATE]
    assert checkpoint.record_problem(leftover) is None and not (root / f"step00000006{checkpoint.UNIVERSAL}").exists()
    assert sorted(p.name for p in root.iterdir()) == ["latest", "step00000006"]
    # A universal copy whose step is gone (a rotation killed between its removals) goes too.
    (root / f"step00000008{checkpoint.UNIVERSAL}" / "zero").mkdir(parents=True)
    checkpoint.save(FakeSavingEngine(), root, 8, {"step": 8}, keep_last=0, group=OneRank())
    assert sorted(p.name for p in root.iterdir()) == ["latest", "step00000006", "step00000008"]


def test_files_are_shared_out_for_checksums_by_size() -> None:
    """Largest first, each to the rank with the fewest bytes so far: every file once,
    and no rank reads much more than the largest file above an even share."""
    sizes = {"model_states": 700, **{f"zero_{r}": 130 for r in range(32)}, **{f"rng_{r}": 1 for r in range(32)},
             "trainer_state.json": 1}
    shares = checkpoint.share_out(sizes, 8)
    assert sorted(name for share in shares for name in share) == sorted(sizes)
    loads = [sum(sizes[name] for name in share) for share in shares]
    assert max(loads) <= sum(sizes.values()) / 8 + max(sizes.values()) and shares[0][0] == "model_states"
    assert checkpoint.share_out(sizes, 8) == shares  # every rank computes the same
    assert checkpoint.share_out({"a": 5}, 3) == [["a"], [], []]


class _RankSavingEngine(FakeSavingEngine):
    """A rank of a 2-rank engine: rank 0 writes the model states, each rank its partition."""

    dp_world_size = 2

    def __init__(self, rank: int) -> None:
        self.global_rank = rank

    def save_checkpoint(self, root: str, tag: str, client_state: dict, save_latest: bool) -> None:
        Path(root, tag).mkdir(parents=True, exist_ok=True)
        if self.global_rank == 0:
            Path(root, tag, "mp_rank_00_model_states.pt").write_bytes(b"m" * 1_000_000)
        Path(root, tag, f"zero_pp_rank_{self.global_rank}_mp_rank_00_optim_states.pt").write_bytes(b"o" * 600_000)


def _rank_saving(rank: int, port: int, root: str, out: str) -> None:
    import torch.distributed as dist

    from tacl_scale import checkpoint
    from tacl_scale.distributed import Distributed

    read: list[str] = []
    checksum = checkpoint.file_checksum
    checkpoint.file_checksum = lambda path: read.append(Path(path).name) or checksum(path)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        checkpoint.save(_RankSavingEngine(rank), Path(root), 8, {"step": 8}, keep_last=0,
                        group=Distributed(rank, rank, 2, torch.device("cpu")))
        Path(f"{out}.{rank}").write_text(json.dumps(read))
    finally:
        dist.destroy_process_group()


def _rank_failing_to_read_back(rank: int, port: int, root: str, out: str) -> None:
    import torch.distributed as dist

    from tacl_scale import checkpoint
    from tacl_scale.distributed import Distributed

    def unreadable(path: Path) -> str:
        raise OSError(5, "Input/output error", str(path))

    if rank == 1:
        checkpoint.file_checksum = unreadable
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        checkpoint.save(_RankSavingEngine(rank), Path(root), 8, {"step": 8}, keep_last=0,
                        group=Distributed(rank, rank, 2, torch.device("cpu")))
    except RuntimeError as err:
        Path(f"{out}.{rank}").write_text(str(err))
    finally:
        dist.destroy_process_group()


def test_a_file_one_rank_cannot_read_back_fails_the_save_on_every_rank(tmp_path: Path) -> None:
    """Each rank reads its share: one that fails says so to all, instead of leaving
    rank 0 waiting for its checksums."""
    import torch.multiprocessing as mp
    from conftest import free_port

    root, out = tmp_path / "checkpoints", tmp_path / "error"
    mp.start_processes(_rank_failing_to_read_back, args=(free_port(), str(root), str(out)), nprocs=2,
                       start_method="spawn")
    errors = [Path(f"{out}.{rank}").read_text() for rank in (0, 1)]
    assert errors[0] == errors[1] and errors[0].startswith(
        f"a file of the checkpoint could not be read back for its record: {root / 'step00000008'}/")
    assert "Input/output error" in errors[0]
    assert not (root / "step00000008" / checkpoint.CHECKPOINT_RECORD).exists() and checkpoint.latest_tag(root) is None


def test_every_rank_checksums_a_share_of_the_checkpoint(tmp_path: Path) -> None:
    """Rank 0 read every file of every save alone while all GPUs waited (4.7 GB for
    BERT-large); the ranks now share the reading and rank 0 writes the record."""
    import torch.multiprocessing as mp
    from conftest import free_port

    root, out = tmp_path / "checkpoints", tmp_path / "read"
    mp.start_processes(_rank_saving, args=(free_port(), str(root), str(out)), nprocs=2, start_method="spawn")
    read = [json.loads(Path(f"{out}.{rank}").read_text()) for rank in (0, 1)]
    recorded = json.loads((root / "step00000008" / checkpoint.CHECKPOINT_RECORD).read_text())
    assert sorted(read[0] + read[1]) == sorted(recorded) and read[0] and read[1]
    assert "mp_rank_00_model_states.pt" in read[0] and "zero_pp_rank_0_mp_rank_00_optim_states.pt" in read[1]
    assert checkpoint.record_problem(root / "step00000008") is None and checkpoint.latest_tag(root) == "step00000008"


def test_the_newest_verified_checkpoint_is_found_whatever_latest_says(tmp_path: Path) -> None:
    """A lost, empty or stale ``latest`` must not restart a run from an older step."""
    root = tmp_path / "checkpoints"
    for step in (2, 4):
        checkpoint.save(FakeSavingEngine(), root, step, {"step": step}, keep_last=3, group=OneRank())
    assert checkpoint.newest_verified_tag(root) == ("step00000004", [])
    for pointer in ("", "step00000002", None):
        if pointer is None:
            (root / checkpoint.LATEST).unlink()
        else:
            (root / checkpoint.LATEST).write_text(pointer)
        assert checkpoint.newest_verified_tag(root)[0] == "step00000004", pointer
    # a save that died before its record: skipped, said why
    (root / "step00000006").mkdir()
    tag, problems = checkpoint.newest_verified_tag(root)
    assert tag == "step00000004" and "step00000006/files.json: missing" in problems[0]


def test_a_record_holds_xxh3_checksums_and_an_earlier_sha256_record_still_verifies(tmp_path: Path) -> None:
    """The record's checksum is xxh3-128 (sha256 took four times as long at the end
    of every save and at every resume); a checkpoint recorded with sha256 by an
    earlier version verifies as it did, and a changed byte is found either way."""
    import hashlib

    from tacl_scale.data.integrity import file_checksum

    root = tmp_path / "checkpoints"
    checkpoint.save(FakeSavingEngine(), root, 2, {"step": 2}, keep_last=3, group=OneRank())
    directory = root / "step00000002"
    record = json.loads((directory / checkpoint.CHECKPOINT_RECORD).read_text())
    assert record and all(entry["checksum"] == file_checksum(directory / name) and "sha256" not in entry
                          for name, entry in record.items())
    assert all(entry["checksum"].startswith("xxh3_128:") for entry in record.values())
    legacy = {name: {"bytes": entry["bytes"], "sha256": hashlib.sha256((directory / name).read_bytes()).hexdigest()}
              for name, entry in record.items()}
    (directory / checkpoint.CHECKPOINT_RECORD).write_text(json.dumps(legacy))
    assert checkpoint.record_problem(directory) is None
    for saved in (legacy, record):
        (directory / checkpoint.CHECKPOINT_RECORD).write_text(json.dumps(saved))
        name = next(iter(saved))
        data = bytearray((directory / name).read_bytes())
        data[len(data) // 2] ^= 1
        (directory / name).write_bytes(bytes(data))
        assert checkpoint.record_problem(directory) == f"{directory / name}: contents differ from when it was saved " \
                                               "(checksum mismatch)"
        data[len(data) // 2] ^= 1
        (directory / name).write_bytes(bytes(data))
        assert checkpoint.record_problem(directory) is None


def test_a_checkpoint_without_a_record_is_checked_as_far_as_it_can_be(tmp_path: Path) -> None:
    """A checkpoint saved before records were kept (no files.json) and named by
    ``latest`` loads unchecked only while its torch files are whole: a truncated or
    bit-flipped one falls back to the older verified checkpoint, naming the file."""
    root = tmp_path / "checkpoints"
    checkpoint.save(FakeSavingEngine(), root, 2, {"step": 2}, keep_last=3, group=OneRank())
    legacy = root / "step00000004"
    legacy.mkdir()
    torch.save({"weight": torch.arange(1000.0)}, legacy / "mp_rank_00_model_states.pt")
    (root / checkpoint.LATEST).write_text("step00000004")
    assert checkpoint.newest_verified_tag(root) == ("step00000004", [])

    whole = (legacy / "mp_rank_00_model_states.pt").read_bytes()
    flipped = bytearray(whole)
    flipped[len(whole) // 2] ^= 1
    for broken, says in ((bytes(flipped), "fails its CRC-32 check"), (whole[: len(whole) // 2], "truncated")):
        (legacy / "mp_rank_00_model_states.pt").write_bytes(broken)
        tag, problems = checkpoint.newest_verified_tag(root)
        assert tag == "step00000002", says
        assert len(problems) == 1 and "step00000004/mp_rank_00_model_states.pt" in problems[0]
        assert says in problems[0]


def test_damaged_pointers_records_and_states_are_named_not_tracebacks(tmp_path: Path,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    """Bytes that are not a tag in ``latest`` are said and ignored (it is a hint: the
    checkpoints are searched); a files.json that is JSON but no record, and an
    unrecorded checkpoint's unreadable trainer_state.json, are problems naming the
    file (the checkpoint is skipped), never an AttributeError or a JSONDecodeError."""
    root = tmp_path / "checkpoints"
    for step in (2, 4):
        checkpoint.save(FakeSavingEngine(), root, step, {"step": step, "world_size": 1}, keep_last=3,
                        group=OneRank())
    latest = root / checkpoint.LATEST
    latest.write_bytes(bytes(range(256)) * 4)  # not UTF-8
    with caplog.at_level(logging.WARNING, logger="tacl_scale.checkpoint"):
        assert checkpoint.latest_tag(root) is None
        latest.write_text("../../etc")
        assert checkpoint.latest_tag(root) is None
    assert f"{latest}: unreadable" in caplog.text and f"{latest}: '../../etc' is not a checkpoint tag" in caplog.text
    assert checkpoint.newest_verified_tag(root) == ("step00000004", [])

    record = root / "step00000004" / checkpoint.CHECKPOINT_RECORD
    for damaged in ("[]", "null", '{"a.pt": {"checksum": "00"}}', '{"a.pt": {"bytes": 3}}'):
        record.write_text(damaged)
        tag, problems = checkpoint.newest_verified_tag(root)
        assert tag == "step00000002" and problems == [
            f"{record}: not a checkpoint record (an object of file -> its bytes and checksum)"], damaged

    unrecorded = root / "step00000006"  # saved before records were kept, and named by latest
    unrecorded.mkdir()
    torch.save({"weight": torch.arange(10.0)}, unrecorded / "mp_rank_00_model_states.pt")
    state = unrecorded / CHECKPOINT_STATE
    state.write_text('{"step": 6, "world_si')
    latest.write_text("step00000006")
    tag, problems = checkpoint.newest_verified_tag(root)
    assert tag == "step00000002" and len(problems) == 2 and problems[0].startswith(f"{state}: unreadable (truncated?)")
    with pytest.raises(ValueError, match=f"{state}: unreadable"):
        checkpoint.saved_world_size(unrecorded)


def test_the_train_state_reads_back_what_a_checkpoint_records_of_it() -> None:
    """``TrainState.client_state`` writes the keys and ``from_client_state`` reads
    them: one round trip, whatever the keys; a checkpoint from before the global
    data order (no ``consumed_samples``) is placed at step × batch."""
    from tacl_scale.resume import TrainState

    state = TrainState(step=7, consumed_samples=1800, skipped=2)
    assert TrainState.from_client_state(state.client_state(256), 256) == state
    assert TrainState.from_client_state({"step": 7}, 256) == TrainState(7, 7 * 256, 0)
