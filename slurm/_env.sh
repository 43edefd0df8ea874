# Sourced by the job scripts: go to the checkout and activate its environment.
#   TACL_HOME  checkout to run from (default: the directory sbatch was called in)
#   CONDA_ENV  a conda environment to activate, or else
#   VENV       a virtualenv (default $TACL_HOME/.venv, if present; else the python on PATH)
# A CONDA_ENV that conda cannot activate (or without conda on PATH), or a VENV without
# bin/activate, stops the job (status 2) with one line saying which; neither falls back
# to another python.
TACL_HOME=${TACL_HOME:-${SLURM_SUBMIT_DIR:-$(pwd)}}
cd "$TACL_HOME"
TACL_HOME=$PWD  # absolute: a relative one would now be looked for inside itself
if [[ -n ${CONDA_ENV:-} ]]; then
  if ! command -v conda > /dev/null; then
    echo "error: CONDA_ENV=$CONDA_ENV: conda not found on PATH (load or initialise conda in the job's" \
         "environment, or unset CONDA_ENV)" >&2
    exit 2
  fi
  # shellcheck disable=SC1091
  if ! CONDA_BASE=$(conda info --base) || ! source "$CONDA_BASE/etc/profile.d/conda.sh" \
      || ! conda activate "$CONDA_ENV"; then
    echo "error: CONDA_ENV=$CONDA_ENV: conda cannot activate this environment (\`conda env list\` names" \
         "those there are)" >&2
    exit 2
  fi
elif [[ -n ${VENV:-} ]]; then
  if [[ ! -f $VENV/bin/activate ]]; then
    echo "error: VENV=$VENV: not a virtualenv (no bin/activate in it, seen from $TACL_HOME): set VENV to one," \
         "or unset it for $TACL_HOME/.venv" >&2
    exit 2
  fi
  # shellcheck disable=SC1091
  source "$VENV/bin/activate"
elif [[ -f $TACL_HOME/.venv/bin/activate ]]; then
  # shellcheck disable=SC1091
  source "$TACL_HOME/.venv/bin/activate"
fi
export TOKENIZERS_PARALLELISM=${TOKENIZERS_PARALLELISM:-false}

# print_header, from scripts/usage.sh; given an argument ("--") of its own: sourced
# without one, it would see the job's and take a --help among them for its own.
# shellcheck disable=SC1091
source "$TACL_HOME/scripts/usage.sh" --

# With -h or --help among the job's ARGS: the job script's header comment (its usage),
# then its command's own flags, and the job ends; nothing starts.
#   help_if_asked "COMMAND" ARGS...      (COMMAND: the words that run it, e.g. "-m data_prep.build")
help_if_asked() {
  local command=$1 arg
  shift
  for arg in "$@"; do
    if [[ $arg == -h || $arg == --help ]]; then
      # A wrapper (pretrain_base.sh) names itself: its usage, then the shared body's variables.
      # The body by its place in the checkout: $0 may be relative to where the job started.
      print_header "${TACL_JOB_SCRIPT:-$0}"
      if [[ -n ${TACL_JOB_SCRIPT:-} && $(basename "$TACL_JOB_SCRIPT") != "$(basename "$0")" ]]; then
        echo
        print_header "$TACL_HOME/slurm/$(basename "$0")"
      fi
      echo
      # shellcheck disable=SC2086  # COMMAND's words, split on purpose
      exec python $command --help
    fi
  done
}
