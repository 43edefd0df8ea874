#!/usr/bin/env bash
# Every GPU test and benchmark in one offline command, for any machine with a CUDA
# GPU and a python3 that has torch, triton, transformers, tensorboard, numpy and
# pytest (no network needed). What that python3 lacks (deepspeed and its pydantic,
# hjson) and a small real dataset come from the bundle that
# scripts/build_gpu_bundle.sh builds on a networked machine.
#   bash scripts/gpu_check.sh [RESULTS_DIR] [--quick]   (default RESULTS_DIR: $OUT if set, else runs/gpu_check)
# Environment: PYTHON (default python3), GPU_BUNDLE (default .gpu_bundle).
# Prints one table and writes RESULTS_DIR/gpu_check.json; exits 2 without CUDA.
set -euo pipefail
cd "$(dirname "$0")/.."
RESULTS=${OUT:-runs/gpu_check}
if [[ $# -gt 0 && "$1" != --* ]]; then RESULTS=$1; shift; fi
PY=${PYTHON:-python3}
BUNDLE=${GPU_BUNDLE:-.gpu_bundle}
if [[ ! -f "$BUNDLE/bundle.json" ]]; then
  echo "error: $BUNDLE/bundle.json not found: build the bundle with 'bash scripts/build_gpu_bundle.sh' on a" \
       "networked machine and copy it here (or set GPU_BUNDLE)" >&2
  exit 2
fi
SITE=$(mktemp -d "${TMPDIR:-/tmp}/tacl-gpu-site.XXXXXX")
trap 'rm -rf "$SITE"' EXIT
# By name from the bundle's folder: pip takes the wheel built for this Python.
mapfile -t PACKAGES < <("$PY" -c "import json, sys; print('\n'.join(json.load(open(sys.argv[1]))['packages']))" \
  "$BUNDLE/bundle.json")
"$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --disable-pip-version-check \
  --find-links "$BUNDLE/wheels" --target "$SITE" "${PACKAGES[@]}"
export PYTHONPATH="$SITE:$PWD${PYTHONPATH:+:$PYTHONPATH}"
export TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
# Installed packages must import before anything runs on the GPU.
"$PY" -c "import deepspeed, torch, triton, transformers; print('deepspeed', deepspeed.__version__, \
'from', deepspeed.__path__[0], '| torch', torch.__version__, '| triton', triton.__version__, \
'| transformers', transformers.__version__)"
if ! "$PY" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 2)"; then
  echo "no CUDA device: the GPU check needs one (the bundle installed and imported fine)" >&2
  exit 2
fi
mkdir -p "$RESULTS"
exec "$PY" benchmarks/gpu_check.py --bundle "$BUNDLE" --results "$RESULTS" "$@"
