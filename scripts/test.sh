#!/usr/bin/env bash
# Install (scripts/setup.sh) and run the whole test suite on CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export TOKENIZERS_PARALLELISM=false
.venv/bin/python -m ruff check .
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
