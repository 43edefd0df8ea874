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

# With -h or --help among the job's ARGS: the job script's header comment (its usage),
# then its command's own flags, and the job ends; nothing starts.
#   help_if_asked "COMMAND" ARGS...      (COMMAND: the words that run it, e.g. "-m data_prep.build")
help_if_asked() {
  local command=$1 arg
  shift
  for arg in "$@"; do
    if [[ $arg == -h || $arg == --help ]]; then
      sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"
      echo
      # shellcheck disable=SC2086  # COMMAND's words, split on purpose
      exec python $command --help
    fi
  done
}
