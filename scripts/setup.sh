#!/usr/bin/env bash
# Create .venv and install tacl-scale with its test tools. Idempotent.
#   TORCH_SPEC   torch requirement to install first (default torch==2.13.0; on a GPU
#                machine pick the CUDA build you want, e.g. "torch==2.13.0")
#   VENV         virtualenv directory (default .venv)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
if [[ ! -x "$VENV/bin/python" ]]; then
  "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --upgrade pip
# torch first and pinned: left to the resolver, deepspeed/transformers would pull
# the newest torch, a multi-GB CUDA build.
"$VENV/bin/python" -m pip install -q "${TORCH_SPEC:-torch==2.13.0}"
"$VENV/bin/python" -m pip install -q -e '.[dev]'
echo "installed into $VENV"
