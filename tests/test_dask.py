"""The dataset build on Beam's DaskRunner against a real Dask cluster (a scheduler
and two worker processes on 127.0.0.1, started and stopped here): the same data
files, byte for byte, as the DirectRunner's build of the same input."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import EN_DUMP, EN_VOCAB, ROOT, ZH_TEXT, ZH_VOCAB, build_dataset, free_port

pytestmark = pytest.mark.slow
DASK = Path(sys.executable).parent / "dask"


@pytest.fixture(scope="module")
def dask_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from distributed import Client

    from data_prep.dask_runner import WORKER_ENV

    logs = tmp_path_factory.mktemp("dask")
    env = os.environ | WORKER_ENV  # as slurm/prep_wiki.sh starts them
    address = f"tcp://127.0.0.1:{free_port()}"
    port = address.rsplit(":", 1)[1]
    processes = [subprocess.Popen([str(DASK), "scheduler", "--host", "127.0.0.1", "--port", port,
                                   "--dashboard-address", ":0"], stdout=open(logs / "scheduler.log", "w"),
                                  stderr=subprocess.STDOUT, start_new_session=True, env=env)]
    processes.append(subprocess.Popen([str(DASK), "worker", address, "--nworkers", "2", "--nthreads", "1",
                                       "--memory-limit", "3GiB", "--dashboard-address", ":0"],
                                      stdout=open(logs / "workers.log", "w"), stderr=subprocess.STDOUT,
                                      start_new_session=True, env=env))
    try:
        with Client(address, timeout=60) as client:
            client.wait_for_workers(2, timeout=120)
        yield address
    finally:
        # Stopped by PID, their whole process group: TERM first, so that the workers'
        # nannies release their multiprocessing semaphores (a KILL left 12 in /dev/shm),
        # then KILL whatever has not exited within 20 s.
        for proc in reversed(processes):
            os.killpg(proc.pid, signal.SIGTERM)
        for proc in reversed(processes):
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=20)
            with contextlib.suppress(ProcessLookupError):  # anything of the group still there
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def data_digests(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir())
            if p.is_file() and p.name != "manifest.json"}


def same_build_both_ways(output: Path, address: str, *args: str) -> None:
    """Build with the DirectRunner, then with the DaskRunner into the same path:
    identical data files; manifests equal but for the recorded pipeline options."""
    build_dataset(output, *args)
    output.rename(output.with_name("direct"))
    build_dataset(output, *args, "--runner", "DaskRunner", "--dask_client_address", address)
    direct = output.with_name("direct")
    assert data_digests(output) == data_digests(direct) and len(data_digests(output)) >= 7
    a, b = (json.loads((d / "manifest.json").read_text()) for d in (output, direct))
    assert a.pop("pipeline_options")["runner"] == "DaskRunner" and "runner" not in b.pop("pipeline_options")
    assert a == b


def executed_tasks(address: str) -> dict[str, int]:
    from distributed import Client

    with Client(address) as client:
        return client.run(lambda dask_worker: dask_worker.state.executed_count)


def test_english_multistream_dump_on_dask(dask_cluster: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from data_prep.multistream import main as multistream_main

    dump = tmp_path / "enwiki-multistream.xml.bz2"
    assert multistream_main([str(EN_DUMP), str(dump), "--pages-per-stream", "10"]) == 0
    before = executed_tasks(dask_cluster)
    with caplog.at_level(logging.INFO, logger="data_prep.build"):
        same_build_both_ways(tmp_path / "en" / "ds", dask_cluster, "--input", str(dump), "--tokenizer",
                             str(EN_VOCAB), "--num-shards", "2", "--dupe-factor", "2", "--max-seq-len", "128",
                             "--unit-mb", "0.03", "--validation-fraction", "0.1")
    executed = {worker: count - before[worker] for worker, count in executed_tasks(dask_cluster).items()}
    assert len(executed) == 2 and all(count > 0 for count in executed.values()), executed  # both workers did work
    # The GroupByKey as data_prep.dask_runner translates it: a few tasks per work unit
    # (Dask's own groupby would have run about 50 per unit).
    units = int(re.findall(r"(\d+) work unit\(s\)", caplog.text)[-1])
    assert units >= 12 and sum(executed.values()) <= 6 * units, (units, executed)


def test_chinese_sample_on_dask(dask_cluster: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    same_build_both_ways(tmp_path / "zh" / "ds", dask_cluster, "--input", str(ZH_TEXT), "--format", "text",
                         "--language", "zh", "--tokenizer", str(ZH_VOCAB), "--min-doc-chars", "10",
                         "--num-shards", "2", "--whole-word-masking")
    assert "Dask worker(s) run with" not in caplog.text  # its workers were started with WORKER_ENV


@pytest.mark.parametrize("tuned", [False, True])
def test_workers_with_dasks_defaults_are_named_with_the_settings_to_use(tuned: bool) -> None:
    """Dask's defaults (as in this process) get one line naming every variable;
    the settings of WORKER_ENV, read from the environment as a worker reads
    them, none."""
    import dask

    from data_prep.dask_runner import WORKER_ENV, worker_advice, worker_settings

    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("TOKENIZERS_PARALLELISM", raising=False)  # as a worker started without the settings
        for key, value in (WORKER_ENV.items() if tuned else ()):
            patch.setenv(key, value)
        dask.config.refresh()
        here = worker_settings()
    dask.config.refresh()  # this process's own settings again
    advice = worker_advice({"tcp://a:1": here, "tcp://b:2": dict(here, profile=False, tick_s=1, monitor_s=1,
                                                                 tokenizer_threads=False)})
    if tuned:
        assert here == {"profile": False, "tick_s": 1, "monitor_s": 1, "tokenizer_threads": False}
        assert advice is None
    else:
        assert advice is not None and advice.startswith("1 of 2 Dask worker(s)")
        assert all(f"{key}={value}" in advice for key, value in WORKER_ENV.items())


def test_the_slurm_job_starts_its_dask_workers_with_the_settings() -> None:
    from data_prep.dask_runner import WORKER_ENV

    script = (ROOT / "slurm" / "prep_wiki.sh").read_text()
    for key, value in WORKER_ENV.items():
        assert f"{key}={value}" in script, key
