#!/usr/bin/env bash
# The batch data preprocessing job (data_prep.build).
#   One node:      the Beam DirectRunner with one worker process per CPU of the task
#     sbatch --cpus-per-task=32 slurm/prep_wiki.sh --input 'dumps/enwiki-*-multistream.xml.bz2' \
#         --tokenizer models/bert-base-uncased/vocab.txt --output data/enwiki-bert-uncased-256 --num-shards 256
#   Several nodes: a Dask cluster over the allocation (scheduler on the first node, one
#                  worker process per allotted CPU on every node) and Beam's DaskRunner
#     sbatch --nodes=4 --cpus-per-task=32 slurm/prep_wiki.sh --input ... --output ...
# Arguments are data_prep.build flags (--help: this, then those). With several nodes the --output directory must
# be on a filesystem every node sees (checked before anything starts); the Dask
# processes are stopped when the job ends, fails or is cancelled. Logs of the scheduler
# and the workers go to dask-JOBID-*.log beside the output.
#SBATCH --job-name=tacl-prep
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=16
#SBATCH --time=24:00:00
#SBATCH --output=%x-%j.out
set -euo pipefail
# shellcheck disable=SC1091
source "${TACL_HOME:-${SLURM_SUBMIT_DIR:-$(pwd)}}/slurm/_env.sh"
help_if_asked "-m data_prep.build" "$@"
WORKERS=${SLURM_CPUS_PER_TASK:-1}
NODES=${SLURM_JOB_NUM_NODES:-1}
JOB=${SLURM_JOB_ID:-local}

if [[ $NODES -le 1 ]]; then
  echo "job $JOB: data_prep.build with $WORKERS worker process(es) on $(hostname)"
  exec python -m data_prep.build "$@" --direct_num_workers "$WORKERS" \
    --direct_running_mode "$([[ $WORKERS -gt 1 ]] && echo multi_processing || echo in_memory)"
fi

# --- several nodes: a Dask cluster for the length of this job -------------------------
OUTPUT=""
ARGS=("$@")
for i in "${!ARGS[@]}"; do
  case "${ARGS[$i]}" in
    --output) OUTPUT=${ARGS[$((i + 1))]:-} ;;
    --output=*) OUTPUT=${ARGS[$i]#--output=} ;;
  esac
done
[[ -n $OUTPUT ]] || { echo "error: prep_wiki.sh needs --output" >&2; exit 2; }
SHARED=$(cd "$(dirname "$OUTPUT")" 2>/dev/null && pwd) \
  || { echo "error: $(dirname "$OUTPUT"): the --output folder's parent does not exist" >&2; exit 2; }

# The output (and the build's _tmp/ spill parts) must be visible from every node.
PROBE="$SHARED/.tacl-fs-probe-$JOB"
TOKEN="$JOB-$RANDOM$RANDOM"
echo "$TOKEN" > "$PROBE"
# The token and path are bash's arguments, not part of its script: a path may hold a quote.
if ! srun --overlap --ntasks-per-node=1 --ntasks="$NODES" bash -c 'grep -qx -- "$1" "$2"' probe "$TOKEN" "$PROBE"; then
  rm -f "$PROBE"
  echo "error: $SHARED is not visible from every node of the allocation: put --output on a filesystem" \
       "all nodes share" >&2
  exit 2
fi
rm -f "$PROBE"

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
MEMORY=auto
if [[ -n ${SLURM_MEM_PER_NODE:-} ]]; then MEMORY="$((SLURM_MEM_PER_NODE / WORKERS))MiB"; fi
srun --overlap --nodes=1 --ntasks=1 --nodelist="$HEAD" \
  dask scheduler --scheduler-file "$SCHEDULER_FILE" --port 0 --dashboard-address :0 \
  > "$SHARED/dask-$JOB-scheduler.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 600); do [[ -s $SCHEDULER_FILE ]] && break; sleep 0.1; done
[[ -s $SCHEDULER_FILE ]] || { echo "error: the Dask scheduler did not start; see $SHARED/dask-$JOB-scheduler.log" >&2; exit 1; }
srun --overlap --ntasks-per-node=1 --ntasks="$NODES" \
  dask worker --scheduler-file "$SCHEDULER_FILE" --nworkers "$WORKERS" --nthreads 1 \
  --memory-limit "$MEMORY" --dashboard-address :0 > "$SHARED/dask-$JOB-workers.log" 2>&1 &
PIDS+=($!)
python - "$SCHEDULER_FILE" "$((NODES * WORKERS))" <<'PYCODE'
import sys
from distributed import Client
with Client(scheduler_file=sys.argv[1], timeout=120) as client:
    client.wait_for_workers(int(sys.argv[2]), timeout=300)
PYCODE
echo "job $JOB: data_prep.build on a Dask cluster of $NODES node(s) × $WORKERS worker(s), scheduler on $HEAD"
python -m data_prep.build "$@" --runner DaskRunner --dask_scheduler_file "$SCHEDULER_FILE"
