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
SIZE=base exec bash "${TACL_HOME:-${SLURM_SUBMIT_DIR:-.}}/slurm/_pretrain.sh" "$@"
