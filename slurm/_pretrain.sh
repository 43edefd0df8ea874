#!/usr/bin/env bash
# Shared body of slurm/pretrain_{base,large}.sh: TaCL pre-training on the Slurm
# allocation, one task per GPU (or per CPU rank), resuming from the run's latest
# checkpoint, requeuing itself when train.py checkpoints on SIGUSR1/SIGTERM.
#
# Arguments are train.py flags; each one given replaces the recipe's value.
# Environment (all optional):
#   TACL_HOME   checkout to run from (default: the directory sbatch was called in)
#   VENV        virtualenv to activate (default $TACL_HOME/.venv); CONDA_ENV: a conda env instead
#   LAUNCHER    srun (default: one task per GPU through srun) | deepspeed (DeepSpeed's
#               multi-node runner with a hostfile generated from the allocation; needs
#               passwordless ssh/pdsh between the nodes)
#   SIZE        base | large (set by the wrapper scripts); LANG_CODE en | zh (base only)
#   MASTER_PORT rendezvous port (default 20000 + job id mod 10000)
set -euo pipefail
# shellcheck disable=SC1091
source "${TACL_HOME:-${SLURM_SUBMIT_DIR:-$(pwd)}}/slurm/_env.sh"

# --- environment, each piece overridable
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-${SLURM_CPUS_PER_TASK:-1}}
export NCCL_ASYNC_ERROR_HANDLING=${NCCL_ASYNC_ERROR_HANDLING:-1}
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
export HF_HOME=${HF_HOME:-$TACL_HOME/.cache/huggingface}
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-$TACL_HOME/.cache/triton}
export TORCH_EXTENSIONS_DIR=${TORCH_EXTENSIONS_DIR:-$TACL_HOME/.cache/torch_extensions}

# --- the paper's recipe (TaCL, Su et al. 2022): max len 256, batch 256, lr 1e-4,
# 10% warm-up, 150k steps, ZeRO-2 (bf16 where the GPUs have it; the paper trained in fp16:
# add --precision fp16). Those numbers are train.py's defaults (its
# config dataclasses), so the recipe names only the model, data, run and micro-batch.
case ${SIZE:-large} in
  large) MODEL=${MODEL:-models/bert-large-uncased}; DATA=${DATA:-data/enwiki-bert-uncased-256}
         RUN_DIR=${RUN_DIR:-runs/tacl-large-en}; MICRO=${MICRO:-8} ;;
  base)  if [[ ${LANG_CODE:-en} == zh ]]; then
           MODEL=${MODEL:-models/bert-base-chinese}; DATA=${DATA:-data/zhwiki-bert-chinese-256}
           RUN_DIR=${RUN_DIR:-runs/tacl-base-zh}
         else
           MODEL=${MODEL:-models/bert-base-uncased}; DATA=${DATA:-data/enwiki-bert-uncased-256}
           RUN_DIR=${RUN_DIR:-runs/tacl-base-en}
         fi
         MICRO=${MICRO:-32} ;;
  *) echo "error: SIZE must be base or large, not '${SIZE}'" >&2; exit 2 ;;
esac
declare -A RECIPE=(
  [--ds]=ds_configs/zero2.json [--model]=$MODEL [--data]=$DATA [--output]=$RUN_DIR [--micro-batch-size]=$MICRO
)
# A flag given on the command line replaces the recipe's (argparse would otherwise
# see both, and --data accumulates).
for arg in "$@"; do
  [[ $arg == --* ]] && unset "RECIPE[$arg]"
done
ARGS=()
for flag in "${!RECIPE[@]}"; do ARGS+=("$flag" "${RECIPE[$flag]}"); done
ARGS+=("$@" --resume)

# What the checks below need, resolved by train.py's own parser (defaults included).
read -r RUN_DIR BATCH MICRO MARKER < <(python - "${ARGS[@]}" <<'PYCODE'
import sys
from tacl_scale.train import parse_args
from tacl_scale.trainer import PREEMPTED_MARKER
config = parse_args(sys.argv[1:])
print(config.output, config.optim.batch_size, config.optim.micro_batch_size, PREEMPTED_MARKER)
PYCODE
) || true
if [[ -z "${MARKER:-}" ]]; then
  echo "error: train.py refuses these flags (above): ${ARGS[*]}" >&2
  exit 2
fi
WORLD=${SLURM_NTASKS:-1}
if (( BATCH % (MICRO * WORLD) != 0 )); then
  echo "error: global batch $BATCH is not micro-batch $MICRO x $WORLD tasks x an integer accumulation;" \
       "choose --micro-batch-size or the task count so that it divides" >&2
  exit 2
fi
mkdir -p "$RUN_DIR"
exec > >(tee -a "$RUN_DIR/slurm-${SLURM_JOB_ID:-local}.log") 2>&1
echo "job ${SLURM_JOB_ID:-?} (restart ${SLURM_RESTART_COUNT:-0}): $WORLD task(s) on ${SLURM_JOB_NODELIST:-localhost}," \
     "global batch $BATCH = micro $MICRO x $WORLD x accumulation $((BATCH / (MICRO * WORLD)))"

MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
export MASTER_ADDR
export MASTER_PORT=${MASTER_PORT:-$((20000 + ${SLURM_JOB_ID:-0} % 10000))}

status=0
if [[ ${LAUNCHER:-srun} == deepspeed ]]; then
  HOSTFILE="$RUN_DIR/hostfile-${SLURM_JOB_ID}"
  scontrol show hostnames "$SLURM_JOB_NODELIST" | sed "s/\$/ slots=${SLURM_NTASKS_PER_NODE:-1}/" > "$HOSTFILE"
  deepspeed --hostfile "$HOSTFILE" --master_addr "$MASTER_ADDR" --master_port "$MASTER_PORT" \
    tacl_scale/train.py "${ARGS[@]}" || status=$?
else
  # One task per GPU/rank; rank, world size and local rank come from Slurm.
  srun --kill-on-bad-exit=1 bash -c \
    'export RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS LOCAL_RANK=$SLURM_LOCALID; exec python tacl_scale/train.py "$@"' \
    train "${ARGS[@]}" || status=$?
fi

if [[ -f "$RUN_DIR/$MARKER" ]]; then
  echo "train.py checkpointed on a signal ($(cat "$RUN_DIR/$MARKER")): requeuing job $SLURM_JOB_ID"
  scontrol requeue "$SLURM_JOB_ID"
  exit 0
fi
exit "$status"
