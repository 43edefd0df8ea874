#!/usr/bin/env bash
# The batch data preprocessing job (data_prep.build).
#   One node:      the Beam DirectRunner with one worker process per CPU of the task (a --runner,
#                  --direct_num_workers or --direct_running_mode of yours is used instead)
#     sbatch --cpus-per-task=32 slurm/prep_wiki.sh --input 'dumps/enwiki-*-multistream.xml.bz2' \
#         --tokenizer models/bert-base-uncased/vocab.txt --output data/enwiki-bert-uncased-256 --num-shards 256
#   Several nodes: a Dask cluster over the allocation (scheduler on the first node, one
#                  worker process per allotted CPU on every node) and Beam's DaskRunner
#     sbatch --nodes=4 --cpus-per-task=32 slurm/prep_wiki.sh --input ... --output ...
# Arguments are data_prep.build flags (--help: this, then those). With several nodes the --output directory must
# be on a filesystem every node sees (checked before anything starts; its missing parent folders
# are made, as on one node); the Dask processes are stopped when the job ends, fails or is
# cancelled. Memory per Dask worker: --mem shared among a node's workers, or --mem-per-cpu.
# Logs of the scheduler and the workers go to dask-JOBID-*.log beside the output.
#SBATCH --job-name=tacl-prep
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=16
#SBATCH --time=24:00:00
#SBATCH --output=%x-%j.out
set -euo pipefail
# The checkout: TACL_HOME, else where sbatch was called (sbatch runs a copy of this
# script, whose own path names no checkout), else, run with bash outside Slurm, this
# script's own; this script's path for its --help, before _env.sh moves into the checkout.
TACL_HOME=${TACL_HOME:-${SLURM_SUBMIT_DIR:-$(cd "$(dirname "$0")/.." && pwd)}}
if [[ ! -f $TACL_HOME/slurm/_env.sh ]]; then
  echo "error: $TACL_HOME is not a tacl-scale checkout (no slurm/_env.sh): submit the job from the checkout," \
       "or set TACL_HOME to it" >&2
  exit 2
fi
TACL_JOB_SCRIPT=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
# shellcheck disable=SC1091
source "$TACL_HOME/slurm/_env.sh"
help_if_asked "-m data_prep.build" "$@"
WORKERS=${SLURM_CPUS_PER_TASK:-1}
NODES=${SLURM_JOB_NUM_NODES:-1}
JOB=${SLURM_JOB_ID:-local}

# The value of the build's flag $1 among the job's arguments (--flag VALUE or --flag=VALUE; the
# last one, as the build's parser takes it), or "" when it is not there.
flag_value() {
  local flag=$1 value="" i
  shift
  local args=("$@")
  for i in "${!args[@]}"; do
    case "${args[$i]}" in
      "$flag") value=${args[$((i + 1))]:-} ;;
      "$flag"=*) value=${args[$i]#"$flag"=} ;;
    esac
  done
  printf '%s\n' "$value"  # not echo: a value may be -n or -e
}

if [[ $NODES -le 1 ]]; then
  # The DirectRunner's flags are only defaults: a runner or worker count the user gave is kept
  # (an appended flag would replace it, the build's parser taking the last), and another
  # runner gets none (they would be recorded in its manifest beside it).
  RUNNER=$(flag_value --runner "$@")
  if [[ -n $RUNNER && $RUNNER != DirectRunner && $RUNNER != direct ]]; then
    echo "job $JOB: data_prep.build on $RUNNER (--runner given; no DirectRunner flags added) from $(hostname)"
    exec python -m data_prep.build "$@"
  fi
  ADDED=()
  NUM=$(flag_value --direct_num_workers "$@")
  [[ -n $NUM ]] || { NUM=$WORKERS; ADDED+=(--direct_num_workers "$NUM"); }
  MODE=$(flag_value --direct_running_mode "$@")
  if [[ -z $MODE ]]; then
    MODE=$([[ $NUM != 1 ]] && echo multi_processing || echo in_memory)
    ADDED+=(--direct_running_mode "$MODE")
  fi
  case "$NUM/$MODE" in  # what the DirectRunner makes of them (0: one worker per CPU it sees)
    0/multi_processing) USED="one worker process per CPU of $(hostname)" ;;
    */multi_processing) USED="$NUM worker process(es) on $(hostname)" ;;
    0/multi_threading) USED="one worker thread per CPU of $(hostname), in one process" ;;
    */multi_threading) USED="$NUM worker thread(s) in one process on $(hostname)" ;;
    *) USED="one in-process worker ($MODE) on $(hostname)" ;;
  esac
  echo "job $JOB: data_prep.build with $USED"
  exec python -m data_prep.build "$@" "${ADDED[@]}"
fi

# --- several nodes: a Dask cluster for the length of this job -------------------------
# The job's own DaskRunner and scheduler would follow a runner or cluster flag of the user's (the
# build's parser takes the last --runner; Dask's client prefers the scheduler file to an address):
# refused, not silently replaced (or recorded in the manifest unused). A Dask runner name, and
# --dask_npartitions or --dask_partition_size, are the user's to give.
for flag in --runner --dask_scheduler_file --dask_client_address --direct_num_workers --direct_running_mode; do
  GIVEN=$(flag_value "$flag" "$@")
  if [[ $flag == --runner ]]; then
    case $GIVEN in DaskRunner | dask | apache_beam.runners.dask.dask_runner.DaskRunner) GIVEN="" ;; esac
  fi
  if [[ -n $GIVEN ]]; then
    echo "error: $flag $GIVEN with $NODES nodes: this job runs the build on a Dask cluster of its own over" \
         "the allocation (--runner DaskRunner, its scheduler file); drop $flag, or submit with --nodes=1 to" \
         "choose the runner" >&2
    exit 2
  fi
done
OUTPUT=$(flag_value --output "$@")
[[ -n $OUTPUT ]] || { echo "error: prep_wiki.sh needs --output" >&2; exit 2; }
PARENT=$(dirname "$OUTPUT")
# The build creates the --output folder's missing parents, on one node as on several: the
# same command with --nodes=N must not be refused for them. The probe goes in the nearest
# folder that exists (the missing ones would be made on its file system), so that a refusal
# leaves nothing behind; the parents are made once it passed.
EXISTING=$PARENT
while [[ ! -d $EXISTING ]]; do EXISTING=$(dirname "$EXISTING"); done
EXISTING=$(cd "$EXISTING" && pwd)

# The output (and the build's _tmp/ spill parts) must be visible from every node.
PROBE="$EXISTING/.tacl-fs-probe-$JOB"
TOKEN="$JOB-$RANDOM$RANDOM"
echo "$TOKEN" 2>/dev/null > "$PROBE" \
  || { echo "error: $EXISTING: cannot write there (--output $OUTPUT): choose an --output you may write to" >&2; exit 2; }
# The token and path are bash's arguments, not part of its script: a path may hold a quote.
if ! srun --overlap --ntasks-per-node=1 --ntasks="$NODES" bash -c 'grep -qx -- "$1" "$2"' probe "$TOKEN" "$PROBE"; then
  rm -f "$PROBE"
  echo "error: $EXISTING is not visible from every node of the allocation: put --output on a filesystem" \
       "all nodes share" >&2
  exit 2
fi
rm -f "$PROBE"
SHARED=$(mkdir -p "$PARENT" 2>/dev/null && cd "$PARENT" && pwd) \
  || { echo "error: $PARENT: cannot make this folder for --output $OUTPUT (a file in its way?): choose another --output" >&2; exit 2; }

SCHEDULER_FILE="$SHARED/.dask-scheduler-$JOB.json"
PIDS=()
stop_cluster() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -f "$SCHEDULER_FILE"
}
trap stop_cluster EXIT
trap 'exit 143' TERM INT

# Dask's workers without their profiler, with slower health checks and without tokenizers' threads
# (data_prep.dask_runner.WORKER_ENV, which says why; the build warns when its workers lack them).
export DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED=False DASK_DISTRIBUTED__ADMIN__TICK__INTERVAL=1s \
  DASK_DISTRIBUTED__WORKER__MEMORY__MONITOR_INTERVAL=1s TOKENIZERS_PARALLELISM=false
HEAD=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)
# Dask's --memory-limit is per worker process, and each has one CPU of the task (--nthreads 1,
# $WORKERS of them a node): --mem shares the node's among them, --mem-per-cpu gives each one
# CPU's worth (both in MiB in Slurm's variables). Without either, Dask's own share of the node.
MEMORY=auto CPUS_PER_WORKER=1
if [[ -n ${SLURM_MEM_PER_NODE:-} ]]; then MEMORY="$((SLURM_MEM_PER_NODE / WORKERS))MiB"
elif [[ -n ${SLURM_MEM_PER_CPU:-} ]]; then MEMORY="$((SLURM_MEM_PER_CPU * CPUS_PER_WORKER))MiB"; fi
srun --overlap --nodes=1 --ntasks=1 --nodelist="$HEAD" \
  dask scheduler --scheduler-file "$SCHEDULER_FILE" --port 0 --dashboard-address :0 \
  > "$SHARED/dask-$JOB-scheduler.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 600); do [[ -s $SCHEDULER_FILE ]] && break; sleep 0.1; done
[[ -s $SCHEDULER_FILE ]] || { echo "error: the Dask scheduler did not start; see $SHARED/dask-$JOB-scheduler.log" >&2; exit 1; }
# --cpus-per-task again: from Slurm 22.05 a step no longer inherits the job's, and the workers'
# step would get one CPU of each node's $WORKERS (all of them on one core where cgroups bind).
srun --overlap --ntasks-per-node=1 --ntasks="$NODES" --cpus-per-task="$WORKERS" \
  dask worker --scheduler-file "$SCHEDULER_FILE" --nworkers "$WORKERS" --nthreads 1 \
  --memory-limit "$MEMORY" --dashboard-address :0 > "$SHARED/dask-$JOB-workers.log" 2>&1 &
WORKERS_SRUN=$!
PIDS+=("$WORKERS_SRUN")
# Wait for every worker, but only while their srun runs: a worker that cannot start ends it,
# and waiting on would only end in Dask's timeout (a traceback) minutes later. Either way one
# line points to the workers' log; the EXIT trap stops the scheduler (and the srun, if alive).
python - "$SCHEDULER_FILE" "$((NODES * WORKERS))" "$WORKERS_SRUN" "$SHARED/dask-$JOB-workers.log" \
  "$SHARED/dask-$JOB-scheduler.log" <<'PYCODE'
import os
import sys
import time

from distributed import Client

scheduler_file, wanted, srun, workers_log, scheduler_log = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), *sys.argv[4:]


def srun_running() -> bool:
    try:
        os.kill(srun, 0)  # bash reaps its background jobs: an ended srun's PID is gone
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def fail(problem: str) -> None:
    print(f"error: {problem}", file=sys.stderr, flush=True)
    sys.exit(1)


deadline = time.monotonic() + 300
try:
    with Client(scheduler_file=scheduler_file, timeout=120) as client:
        while True:
            try:
                client.wait_for_workers(wanted, timeout=1)
                break
            except TimeoutError as timeout:
                arrived = getattr(timeout, "available_workers", "not all")
            if not srun_running():
                fail(f"the Dask workers did not start ({arrived} of {wanted} arrived before their srun exited); "
                     f"see {workers_log}")
            if time.monotonic() > deadline:
                fail(f"the Dask workers did not start ({arrived} of {wanted} arrived in 5 minutes); see {workers_log}")
except OSError as problem:  # the scheduler gone, or never reached
    fail(f"the Dask scheduler could not be reached ({problem}); see {scheduler_log}")
PYCODE
echo "job $JOB: data_prep.build on a Dask cluster of $NODES node(s) × $WORKERS worker(s), scheduler on $HEAD"
python -m data_prep.build "$@" --runner DaskRunner --dask_scheduler_file "$SCHEDULER_FILE"
