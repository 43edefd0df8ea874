# Sourced by the job scripts: go to the checkout and activate its environment.
#   TACL_HOME  checkout to run from (default: the directory sbatch was called in)
#   CONDA_ENV  a conda environment to activate, or else
#   VENV       a virtualenv (default $TACL_HOME/.venv, if present)
TACL_HOME=${TACL_HOME:-${SLURM_SUBMIT_DIR:-$(pwd)}}
cd "$TACL_HOME"
if [[ -n ${CONDA_ENV:-} ]]; then
  # shellcheck disable=SC1091
  source "$(conda info --base)/etc/profile.d/conda.sh" && conda activate "$CONDA_ENV"
elif [[ -f ${VENV:-$TACL_HOME/.venv}/bin/activate ]]; then
  # shellcheck disable=SC1091
  source "${VENV:-$TACL_HOME/.venv}/bin/activate"
fi
export TOKENIZERS_PARALLELISM=${TOKENIZERS_PARALLELISM:-false}
