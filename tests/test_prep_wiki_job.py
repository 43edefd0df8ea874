"""slurm/prep_wiki.sh as a job, with stand-ins for the Slurm and Dask commands: the
flags it adds to the build on one node, and on several nodes the memory limit of the
Dask workers, workers that cannot start, and an --output whose parent folders are
missing. ``srun`` runs its command on this machine (once, whatever the node count),
``scontrol`` names this machine; the build's ``python`` is a stand-in recording its
arguments, except where a real Dask scheduler is started."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import ROOT
from test_shell_inputs import VENV, job_env, stand_in

SCRIPT = ROOT / "slurm" / "prep_wiki.sh"


def run_job(args: list[str], cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    """The job, in a session of its own: whatever it started is killed if it outlives ``timeout``
    (the test then fails), and the test fails too if anything of it is left after it ended."""
    job = subprocess.Popen(["bash", str(SCRIPT), *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = job.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)
        out, err = job.communicate()
        pytest.fail(f"the job still ran after {timeout} s; stdout: {out!r}; stderr: {err!r}")
    for _ in range(50):  # what the job stopped may take a moment to go
        try:
            os.killpg(job.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.killpg(job.pid, signal.SIGKILL)
        pytest.fail("the job left processes running")
    return subprocess.CompletedProcess(job.args, job.returncode, out, err)


def recording_venv(tmp_path: Path) -> Path:
    """A virtualenv whose python records each call's arguments (python-N.args, one a line)
    and reads a script from stdin as ``python -`` does; it does nothing else."""
    venv = tmp_path / "venv"
    stand_in(venv / "bin", "python", f'n=$(ls "{tmp_path}" | grep -c "^python-.*args$" || true)\n'
                                     f'printf "%s\\n" "$@" > "{tmp_path}/python-$n.args"\n'
                                     '[[ ${1:-} == - ]] && cat > /dev/null\nexit 0\n')
    (venv / "bin" / "activate").write_text(f'export PATH="{venv}/bin:$PATH"\n', encoding="utf-8")
    return venv


def calls(tmp_path: Path) -> list[list[str]]:
    """The recording python's calls, in order."""
    found = sorted(tmp_path.glob("python-*.args"), key=lambda p: int(p.name.split("-")[1].split(".")[0]))
    return [p.read_text(encoding="utf-8").splitlines() for p in found]


def slurm_stand_ins(bin_dir: Path, tmp_path: Path, probe_fails: bool = False) -> None:
    """srun (its options logged to srun.log, then its command run here), scontrol, and a dask
    whose scheduler writes its scheduler file and whose worker records its arguments."""
    probe = 'if [[ $1 == bash ]]; then exit 1; fi\n' if probe_fails else ""
    stand_in(bin_dir, "srun", f'echo "$*" >> "{tmp_path}/srun.log"\nwhile [[ $1 == --* ]]; do shift; done\n'
                              f'{probe}exec "$@"\n')
    stand_in(bin_dir, "scontrol", "[[ $1 == show ]] && echo localhost\nexit 0\n")
    stand_in(bin_dir, "dask", 'if [[ $1 == scheduler ]]; then\n'
                              '  while [[ $1 != --scheduler-file ]]; do shift; done\n  echo "{}" > "$2"\n'
                              f'else\n  echo "$*" > "{tmp_path}/dask-worker.args"\nfi\n')


def several_nodes_env(bin_dir: Path, venv: Path, **extra: str) -> dict[str, str]:
    return job_env(VENV=str(venv), SLURM_JOB_NUM_NODES="2", SLURM_JOB_ID="7", SLURM_JOB_NODELIST="n[1-2]",
                   PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", **extra)


# --- one node: the DirectRunner's flags --------------------------------------------------


@pytest.mark.slow  # starts bash
@pytest.mark.parametrize(("given", "added", "said"), [
    (["--direct_num_workers", "1"], ["--direct_running_mode", "in_memory"], "one in-process worker (in_memory)"),
    (["--direct_running_mode=multi_threading"], ["--direct_num_workers", "2"], "2 worker thread(s) in one process"),
    (["--runner", "DaskRunner", "--dask_scheduler_file", "s.json"], [], "on DaskRunner (--runner given; no "
                                                                        "DirectRunner flags added)"),
])
def test_one_node_adds_no_runner_flag_the_user_gave(given: list[str], added: list[str], said: str,
                                                    tmp_path: Path) -> None:
    """``--direct_num_workers 1`` was replaced by the 2 appended after it (the build's parser
    takes the last), and ``--runner DaskRunner`` got the DirectRunner's flags too (recorded
    in its manifest) while the job said "2 worker process(es)"."""
    args = ["--input", "x", "--output", str(tmp_path / "out"), *given]
    done = run_job(args, tmp_path, job_env(VENV=str(recording_venv(tmp_path)), SLURM_CPUS_PER_TASK="2"), 60)
    assert done.returncode == 0, done.stderr
    assert calls(tmp_path) == [["-m", "data_prep.build", *args, *added]]
    [line] = done.stdout.splitlines()
    assert line.startswith("job local: data_prep.build ") and said in line, line
    assert "worker process(es)" not in line


# --- several nodes: the Dask cluster -------------------------------------------------------


@pytest.mark.slow  # starts bash
def test_dask_workers_memory_limit_comes_from_mem_per_cpu(tmp_path: Path) -> None:
    """``--mem-per-cpu=1G`` (what docs/data-prep.md recommends) left the workers at
    ``--memory-limit auto``: only SLURM_MEM_PER_NODE was read. A worker process has one CPU."""
    bin_dir, shared = tmp_path / "bin", tmp_path / "shared"
    slurm_stand_ins(bin_dir, tmp_path)
    shared.mkdir()
    done = run_job(["--input", "x", "--output", str(shared / "out")], tmp_path,
                   several_nodes_env(bin_dir, recording_venv(tmp_path), SLURM_CPUS_PER_TASK="4",
                                     SLURM_MEM_PER_CPU="1024"), 60)
    assert done.returncode == 0, done.stderr
    worker = (tmp_path / "dask-worker.args").read_text(encoding="utf-8").split()
    assert worker[worker.index("--memory-limit") + 1] == "1024MiB"
    assert worker[worker.index("--nworkers") + 1] == "4"
    # From Slurm 22.05 a step no longer inherits the job's --cpus-per-task: the workers had one CPU a node.
    workers_srun = [line for line in (tmp_path / "srun.log").read_text(encoding="utf-8").splitlines()
                    if "dask worker" in line]
    assert len(workers_srun) == 1 and "--cpus-per-task=4" in workers_srun[0].split()


@pytest.mark.slow  # starts bash
@pytest.mark.parametrize("given", [["--runner", "FlinkRunner"], ["--direct_num_workers=8"],
                                   ["--dask_scheduler_file", "mine.json"],
                                   ["--dask_client_address", "tcp://elsewhere:8786"]])
def test_several_nodes_refuse_a_runner_flag_their_dask_cluster_would_override(given: list[str],
                                                                               tmp_path: Path) -> None:
    """``--runner FlinkRunner`` with --nodes=4 ran on the job's Dask cluster instead (its
    appended --runner DaskRunner the last), and a DirectRunner's flags copied from a
    one-node command were recorded in the manifest unused."""
    bin_dir, shared = tmp_path / "bin", tmp_path / "shared"
    slurm_stand_ins(bin_dir, tmp_path)
    shared.mkdir()
    done = run_job(["--input", "x", "--output", str(shared / "out"), *given], tmp_path,
                   several_nodes_env(bin_dir, recording_venv(tmp_path), SLURM_CPUS_PER_TASK="1"), 60)
    flag, value = given[0].split("=") if "=" in given[0] else given
    assert (done.returncode, done.stderr.splitlines()) == (2, [
        f"error: {flag} {value} with 2 nodes: this job runs the build on a Dask cluster of its own over the "
        f"allocation (--runner DaskRunner, its scheduler file); drop {flag}, or submit with --nodes=1 to choose "
        "the runner"]), done.stderr
    assert calls(tmp_path) == [] and not (tmp_path / "srun.log").exists() and not list(shared.iterdir())
    for dask in ("DaskRunner", "apache_beam.runners.dask.dask_runner.DaskRunner"):  # the runner it uses anyway
        said_dask = run_job(["--input", "x", "--output", str(shared / "out"), "--runner", dask,
                             "--dask_npartitions", "64"], tmp_path,
                            several_nodes_env(bin_dir, recording_venv(tmp_path), SLURM_CPUS_PER_TASK="1"), 60)
        assert said_dask.returncode == 0, said_dask.stderr


@pytest.mark.slow  # starts bash
def test_several_nodes_make_the_outputs_missing_parents_as_one_node_does(tmp_path: Path) -> None:
    """The build makes them (one node); on several the job refused "the --output folder's
    parent does not exist" for the same command. The shared-filesystem probe still runs,
    in the nearest folder that exists."""
    bin_dir, shared = tmp_path / "bin", tmp_path / "shared"
    slurm_stand_ins(bin_dir, tmp_path)
    shared.mkdir()
    output = shared / "a" / "b" / "out"
    done = run_job(["--input", "x", "--output", str(output)], tmp_path,
                   several_nodes_env(bin_dir, recording_venv(tmp_path), SLURM_CPUS_PER_TASK="1"), 60)
    assert done.returncode == 0, done.stderr
    assert "bash -c" in (tmp_path / "srun.log").read_text(encoding="utf-8")  # the probe ran
    assert sorted(p.name for p in output.parent.iterdir()) == ["dask-7-scheduler.log", "dask-7-workers.log"]
    build = calls(tmp_path)[-1]
    assert build[:2] == ["-m", "data_prep.build"] and build[build.index("--output") + 1] == str(output)
    assert build[-4:] == ["--runner", "DaskRunner", "--dask_scheduler_file", f"{output.parent}/.dask-scheduler-7.json"]


@pytest.mark.slow  # starts bash
def test_several_nodes_refuse_missing_parents_off_the_shared_filesystem_making_nothing(tmp_path: Path) -> None:
    """Where the nearest existing folder is not seen from every node, the job says so (it
    said "the --output folder's parent does not exist") and makes no folder."""
    bin_dir, shared = tmp_path / "bin", tmp_path / "shared"
    slurm_stand_ins(bin_dir, tmp_path, probe_fails=True)
    shared.mkdir()
    done = run_job(["--input", "x", "--output", str(shared / "a" / "b" / "out")], tmp_path,
                   several_nodes_env(bin_dir, recording_venv(tmp_path), SLURM_CPUS_PER_TASK="1"), 60)
    assert (done.returncode, done.stderr.splitlines()) == (2, [
        f"error: {shared} is not visible from every node of the allocation: put --output on a filesystem all "
        "nodes share"]), done.stderr
    assert not list(shared.iterdir()) and calls(tmp_path) == []


@pytest.mark.slow  # starts bash, python and a Dask scheduler
def test_dask_workers_that_cannot_start_end_the_job_at_once_with_one_line(tmp_path: Path) -> None:
    """A worker that cannot start (here: a dask whose ``worker`` exits 1) left the job
    waiting 5 minutes in silence, then a WorkerStartTimeoutError traceback. Now the wait
    ends when the workers' srun does, with one line naming their log, and the (real)
    scheduler is stopped."""
    bin_dir, shared = tmp_path / "bin", tmp_path / "shared"
    # The stand-in dask ahead of the virtualenv's, which the job puts first on PATH.
    stand_in(bin_dir, "srun", f'while [[ $1 == --* ]]; do shift; done\nPATH="{bin_dir}:$PATH" exec "$@"\n')
    stand_in(bin_dir, "scontrol", "[[ $1 == show ]] && echo localhost\nexit 0\n")
    stand_in(bin_dir, "dask", f'[[ $1 == scheduler ]] && exec "{VENV}/bin/dask" "$@"\n'
                              'echo "worker stand-in: cannot start" >&2\nexit 1\n')
    shared.mkdir()
    done = run_job(["--input", "x", "--output", str(shared / "out")], tmp_path,
                   several_nodes_env(bin_dir, VENV, SLURM_CPUS_PER_TASK="1"), 60)  # not Dask's 5 minutes
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: the Dask workers did not start (0 of 2 arrived before their srun exited); see "
                      f"{shared}/dask-7-workers.log"], done.stderr
    assert "worker stand-in: cannot start" in (shared / "dask-7-workers.log").read_text(encoding="utf-8")
    assert not list(shared.glob(".dask-scheduler-*")) and not (shared / "out").exists()
    assert "data_prep.build on a Dask cluster" not in done.stdout
