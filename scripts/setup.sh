#!/usr/bin/env bash
# Create a virtualenv and install tacl-scale with its test tools. Idempotent: a rerun
# installs what is missing, and a virtualenv left without pip by a run stopped part-way
# gets pip back (ensurepip) instead of failing with "No module named pip".
#   bash scripts/setup.sh        (no arguments; settings in the environment:)
#   VENV         virtualenv directory (default .venv)
#   TORCH_SPEC   torch requirement installed first (default torch==2.13.0: the CPU build where
#                pip's find-links offer it, else PyPI's Linux wheel, which brings CUDA libraries
#                and runs on the CPU too; on a GPU machine pick the CUDA build you want)
#   PYTHON       the interpreter that creates the virtualenv (default python3)
#   CONSTRAINTS  a pip constraints file applied to every install (scripts/test.sh
#                --gpu-image passes scripts/gpu_image_versions.txt)
set -euo pipefail
source "$(dirname "$0")/usage.sh"
no_arguments "bash scripts/setup.sh" "$@"
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
if [[ ! -x "$VENV/bin/python" ]]; then
  "$PYTHON" -m venv "$VENV"
fi
PIN=()
if [[ -n "${CONSTRAINTS:-}" ]]; then PIN=(-c "$CONSTRAINTS"); fi
# pip unpacks every wheel under TMPDIR and caches downloads in ~/.cache/pip; the GPU
# image's torch brings GBs of CUDA libraries. Both go on the clone's file system
# instead, where the virtualenvs are (a CI machine's /tmp or home may be small: CI
# once ran out of space there), and nothing is cached outside the clone.
PIP_TMP=$(mktemp -d "$PWD/.pip-tmp.XXXXXX")
trap 'rm -rf "$PIP_TMP"' EXIT
export TMPDIR="$PIP_TMP" PIP_NO_CACHE_DIR=1
# A run stopped between the venv's python and its pip leaves a venv without pip.
if ! "$VENV/bin/python" -m pip --version > /dev/null 2>&1; then
  echo "$VENV has no pip (an earlier run stopped part-way?): installing it with ensurepip"
  if ! "$VENV/bin/python" -m ensurepip --upgrade > /dev/null; then
    echo "error: $VENV has no pip and ensurepip could not install it: remove $VENV and run" \
         "scripts/setup.sh again" >&2
    exit 1
  fi
fi
"$VENV/bin/python" -m pip install -q --upgrade pip
# torch first and pinned: left to the resolver, deepspeed/transformers would pull
# the newest torch, a multi-GB CUDA build. setuptools 70.1+ (the newest torch allows)
# builds wheels itself: scripts/build_gpu_bundle.sh builds deepspeed's without build
# isolation, and python 3.11's venv brings setuptools 65.5, which cannot.
"$VENV/bin/python" -m pip install -q "${PIN[@]}" "${TORCH_SPEC:-torch==2.13.0}" "setuptools>=70.1"
"$VENV/bin/python" -m pip install -q "${PIN[@]}" -e '.[dev]'
echo "installed into $VENV"
