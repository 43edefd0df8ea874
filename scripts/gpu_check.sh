#!/usr/bin/env bash
# Every GPU test and benchmark in one offline command, for any machine with a CUDA
# GPU and a python3 that has torch, triton, transformers, tensorboard, numpy, pytest
# and pytest-timeout (no network needed). What that python3 lacks (deepspeed and its
# pydantic, hjson; xxhash) and a small real dataset come from the bundle that scripts/build_gpu_bundle.sh
# builds on a networked machine; scripts/install_offline.sh installs it.
#   bash scripts/gpu_check.sh [RESULTS_DIR] [--quick] [--dry-run] [--budget PHASE=SECONDS]
#   (default RESULTS_DIR: $OUT if set, else runs/gpu_check)
# Environment: PYTHON (default python3), GPU_BUNDLE (default .gpu_bundle), GPU_VENV
# (default .venv-offline). Phases run with their own time budgets and the report is
# written after each one (benchmarks/gpu_check.py): a default run ends within 6
# minutes of the install's start and --quick within 3 (the budgets' sum), whatever
# hangs. Exits 2 for a bad argument (checked before the install), when the install
# fails, and without CUDA (found after the install; --dry-run: the phases on the CPU).
set -euo pipefail
source "$(dirname "$0")/usage.sh"
cd "$(dirname "$0")/.."
RESULTS=${OUT:-runs/gpu_check}
if [[ $# -gt 0 && "$1" != --* ]]; then RESULTS=$1; shift; fi
VENV=${GPU_VENV:-.venv-offline}
INSTALL_BUDGET=60  # benchmarks/gpu_check.py's INSTALL_BUDGET (fresh H200 machines took 25 s and over 30 s)
# The arguments are checked before the install's minute, not after it (a --help among
# them prints this and the check's flags, and runs nothing).
for arg in "$@"; do
  if [[ $arg == -h || $arg == --help ]]; then print_header "$0"; echo; exec "${PYTHON:-python3}" benchmarks/gpu_check.py --help; fi
done
"${PYTHON:-python3}" benchmarks/gpu_check.py --check-args "$@" || exit 2
mkdir -p "$RESULTS"
started=$(date +%s)
status=passed
timeout "$INSTALL_BUDGET" bash scripts/install_offline.sh "$VENV" > "$RESULTS/install.log" 2>&1 || status=$?
seconds=$(( $(date +%s) - started ))
case "$status" in
  passed) ;;
  124) status=timeout ;;
  *) status=failed ;;
esac
printf '{"status": "%s", "seconds": %s, "budget": %s}\n' "$status" "$seconds" "$INSTALL_BUDGET" \
  > "$RESULTS/install.json"
if [[ "$status" != passed ]]; then
  cat "$RESULTS/install.log" >&2
  echo "error: the offline install $status (log: $RESULTS/install.log)" >&2
  exit 2
fi
cat "$RESULTS/install.log"
export TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
exec "$VENV/bin/python" benchmarks/gpu_check.py --bundle "${GPU_BUNDLE:-.gpu_bundle}" --results "$RESULTS" \
  --started "$started" "$@"
