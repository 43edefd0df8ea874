#!/usr/bin/env bash
# TaCL-large (paper recipe): bert-large-uncased init, max len 256, global batch 256,
# lr 1e-4, 10% warm-up, 150k steps, ZeRO-2 (bf16 on GPUs that have it; --precision fp16 for
# the paper's fp16). Submit from the repository root:
#   sbatch slurm/pretrain_large.sh [--model DIR --data DIR --output RUN_DIR --steps N ...]
# Arguments are train.py flags and replace the recipe's. The job resumes from the
# run's latest checkpoint, and requeues itself after checkpointing on the time-limit
# signal (USR1, 5 min before) or on preemption (TERM). See slurm/_pretrain.sh for
# the environment variables (VENV, CONDA_ENV, LAUNCHER, ...).
#SBATCH --job-name=tacl-large
#SBATCH --nodes=4
#SBATCH --ntasks-per-node=8
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=8
#SBATCH --time=48:00:00
#SBATCH --signal=USR1@300
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --output=%x-%j.out
set -euo pipefail
# The checkout and this script, for the shared body (as in pretrain_base.sh).
TACL_HOME=${TACL_HOME:-${SLURM_SUBMIT_DIR:-$(cd "$(dirname "$0")/.." && pwd)}}
[[ -f $TACL_HOME/slurm/_pretrain.sh ]] || { echo "error: $TACL_HOME is not a tacl-scale checkout (no slurm/_pretrain.sh): submit the job from the checkout, or set TACL_HOME to it" >&2; exit 2; }
export TACL_HOME TACL_JOB_SCRIPT="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"  # absolute: the job moves
SIZE=large exec bash "$TACL_HOME/slurm/_pretrain.sh" "$@"
