#!/usr/bin/env bash
# TaCL-base, English (default) or Chinese (LANG_CODE=zh): bert-base-uncased or
# bert-base-chinese init, otherwise the same recipe as pretrain_large.sh.
#   sbatch slurm/pretrain_base.sh [train.py flags]
#   LANG_CODE=zh sbatch slurm/pretrain_base.sh
#SBATCH --job-name=tacl-base
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=8
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=8
#SBATCH --time=48:00:00
#SBATCH --signal=USR1@300
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --output=%x-%j.out
set -euo pipefail
# The checkout: TACL_HOME, else where sbatch was called (sbatch runs a copy of this
# script, whose own path names no checkout), else, run with bash outside Slurm, this
# script's own. Exported, with this script for its --help, to what runs next.
TACL_HOME=${TACL_HOME:-${SLURM_SUBMIT_DIR:-$(cd "$(dirname "$0")/.." && pwd)}}
[[ -f $TACL_HOME/slurm/_pretrain.sh ]] || { echo "error: $TACL_HOME is not a tacl-scale checkout (no slurm/_pretrain.sh): submit the job from the checkout, or set TACL_HOME to it" >&2; exit 2; }
export TACL_HOME TACL_JOB_SCRIPT="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"  # absolute: the job moves
SIZE=base exec bash "$TACL_HOME/slurm/_pretrain.sh" "$@"
