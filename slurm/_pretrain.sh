#!/usr/bin/env bash
# Shared body of slurm/pretrain_{base,large}.sh: TaCL pre-training on the Slurm
# allocation, one task per GPU (or per CPU rank), resuming from the run's latest
# checkpoint, requeuing itself when train.py checkpoints on SIGUSR1/SIGTERM.
#
# Arguments are train.py flags; each one given replaces the recipe's value (--help: this,
# then train.py's flags; nothing starts).
# Environment (all optional):
#   TACL_HOME   checkout to run from (default: the directory sbatch was called in; run
#               with bash outside sbatch, the script's own checkout)
#   VENV        virtualenv to activate (default $TACL_HOME/.venv); CONDA_ENV: a conda env instead
#   LAUNCHER    srun (default: one task per GPU through srun) | deepspeed (DeepSpeed's
#               multi-node runner with a hostfile generated from the allocation; needs
#               passwordless ssh/pdsh between the nodes); any other value is refused
#   SIZE        base | large (set by the wrapper scripts); LANG_CODE en | zh (base only:
#               the large recipe is English only, and refuses LANG_CODE=zh; with a RECIPE
#               or a --recipe argument, which names the recipe, LANG_CODE is not used)
#   RECIPE      the train.py --recipe (default: tacl-large-en; tacl-base-en or tacl-base-zh
#               by LANG_CODE); `python -m tacl_scale.recipes` lists them
#   MASTER_PORT rendezvous port (default 20000 + job id mod 10000)
# A VENV, CONDA_ENV, LAUNCHER, SIZE, LANG_CODE or RECIPE it cannot use, a train.py flag
# train.py refuses, or a run outside a Slurm job stops it (status 2) before anything is
# written, with one line naming it.
set -euo pipefail
# shellcheck disable=SC1091
source "${TACL_HOME:-${SLURM_SUBMIT_DIR:-$(pwd)}}/slurm/_env.sh"
help_if_asked "tacl_scale/train.py" "$@"

# --- environment, each piece overridable
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-${SLURM_CPUS_PER_TASK:-1}}
export NCCL_ASYNC_ERROR_HANDLING=${NCCL_ASYNC_ERROR_HANDLING:-1}
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
export HF_HOME=${HF_HOME:-$TACL_HOME/.cache/huggingface}
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-$TACL_HOME/.cache/triton}
export TORCH_EXTENSIONS_DIR=${TORCH_EXTENSIONS_DIR:-$TACL_HOME/.cache/torch_extensions}

# --- the recipe: the paper's settings by name (tacl_scale/recipes.py), given to train.py
# first, so every flag given here replaces the recipe's value (a --ds config of the
# user's too), and a --recipe given here replaces the script's.
RECIPE_GIVEN=${RECIPE:+yes}  # a RECIPE or a --recipe argument chooses the recipe; LANG_CODE then does not
for arg in "$@"; do [[ $arg == --recipe || $arg == --recipe=* ]] && RECIPE_GIVEN=yes; done
case ${SIZE:-large} in
  large)
    if [[ ${LANG_CODE:-en} != en && -z $RECIPE_GIVEN ]]; then
      echo "error: LANG_CODE=$LANG_CODE: the large recipe (pretrain_large.sh, tacl-large-en) is English only;" \
           "LANG_CODE=zh is for pretrain_base.sh (tacl-base-zh)" >&2
      exit 2
    fi
    RECIPE=${RECIPE:-tacl-large-en} ;;
  base)
    case ${LANG_CODE:-en} in
      en | zh) RECIPE=${RECIPE:-tacl-base-${LANG_CODE:-en}} ;;
      *)
        if [[ -z $RECIPE_GIVEN ]]; then
          echo "error: LANG_CODE must be en or zh (the base recipes: tacl-base-en, tacl-base-zh), not '$LANG_CODE'" >&2
          exit 2
        fi
        RECIPE=${RECIPE:-tacl-base-en} ;;  # a --recipe argument, after it, replaces it
    esac ;;
  *) echo "error: SIZE must be base or large, not '${SIZE}'" >&2; exit 2 ;;
esac
case ${LAUNCHER:-srun} in
  srun | deepspeed) ;;
  *) echo "error: LAUNCHER must be srun (the default) or deepspeed, not '$LAUNCHER'" >&2; exit 2 ;;
esac
ARGS=(--recipe "$RECIPE" "$@" --resume)

# What the checks below need, resolved by train.py's own parser and the batch shape's
# owner (tacl_scale.data.shuffle.BatchLayout), for this job's task count.
WORLD=${SLURM_NTASKS:-1}
# NUL-separated: the run directory is a path, which may hold spaces (read one by one:
# `mapfile -d` needs bash 4.4, and clusters still run 4.2).
# Through a file, not a pipe: the check's exit status says whether it refused (its own
# one line above) or not.
VALUES_FILE=$(mktemp)
trap 'rm -f "$VALUES_FILE"' EXIT
if ! python - "$WORLD" "${ARGS[@]}" > "$VALUES_FILE" <<'PYCODE'
import sys
values, sys.stdout = sys.stdout, sys.stderr  # only the values go to the file; anything else is said
from tacl_scale.cli import UsageError
from tacl_scale.config import ConfigError
from tacl_scale.data.shuffle import BatchLayout, BatchShapeError
from tacl_scale.recipes import RECIPES
from tacl_scale.run_dir import PREEMPTED_MARKER, missing_input
from tacl_scale.train import parse_args
if sys.argv[3] not in RECIPES:  # the script's own names are recipes: this one is the RECIPE variable's
    sys.exit(f"error: RECIPE={sys.argv[3]}: no such recipe; known: {', '.join(sorted(RECIPES))}")
try:
    world, config = int(sys.argv[1]), parse_args(sys.argv[2:])
except (UsageError, ConfigError) as err:  # a bad flag, an unreadable --ds config: train.py's own line
    sys.exit(f"error: {err}")
optim = config.optim
try:  # an "auto" micro-batch is chosen by train.py among the sizes that fit; 1 always does
    layout = BatchLayout(optim.batch_size, optim.micro_batch_size or 1, world)
except BatchShapeError as err:
    sys.exit(f"error: {err} ({world} Slurm task(s))")
if problem := missing_input(config):  # a recipe's data or model not where the job runs
    sys.exit(f"error: {problem}")
fields = (config.output, optim.batch_size, optim.micro_batch_size or "auto",
          layout.accumulation if optim.micro_batch_size else "auto", PREEMPTED_MARKER, config.recipe)
values.write("".join(f"{field}\0" for field in fields))
PYCODE
then
  exit 2  # the check's one line (or, for a defect, its traceback) is above
fi
VALUES=()
while IFS= read -r -d '' value; do VALUES+=("$value"); done < "$VALUES_FILE"
if [[ -z ${SLURM_JOB_NODELIST:-} ]]; then  # before the run directory and its log are made
  echo "error: not inside a Slurm job (SLURM_JOB_NODELIST is unset): submit it with sbatch, or train without" \
       "Slurm with deepspeed --module tacl_scale.train ${ARGS[*]} (docs/training.md)" >&2
  exit 2
fi
RUN_DIR=${VALUES[0]} BATCH=${VALUES[1]} MICRO=${VALUES[2]} ACCUMULATION=${VALUES[3]} MARKER=${VALUES[4]}
RECIPE=${VALUES[5]}  # the one train.py uses: a --recipe argument replaces the script's
mkdir -p "$RUN_DIR"
exec > >(tee -a "$RUN_DIR/slurm-${SLURM_JOB_ID:-local}.log") 2>&1
echo "job ${SLURM_JOB_ID:-?} (restart ${SLURM_RESTART_COUNT:-0}): $WORLD task(s) on ${SLURM_JOB_NODELIST:-localhost}," \
     "recipe $RECIPE, global batch $BATCH = micro $MICRO x $WORLD x accumulation $ACCUMULATION"

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
  # One task per GPU/rank; rank, world size and local rank come from Slurm. The job's
  # --cpus-per-task is passed on: from Slurm 22.05 a step no longer inherits it, and each rank
  # (its DataLoader workers, OMP_NUM_THREADS threads) would get one CPU.
  srun --kill-on-bad-exit=1 ${SLURM_CPUS_PER_TASK:+"--cpus-per-task=$SLURM_CPUS_PER_TASK"} bash -c \
    'export RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS LOCAL_RANK=$SLURM_LOCALID; exec python tacl_scale/train.py "$@"' \
    train "${ARGS[@]}" || status=$?
fi

if [[ -f "$RUN_DIR/$MARKER" ]]; then
  echo "train.py checkpointed on a signal ($(cat "$RUN_DIR/$MARKER")): requeuing job $SLURM_JOB_ID"
  scontrol requeue "$SLURM_JOB_ID"
  exit 0
fi
exit "$status"
