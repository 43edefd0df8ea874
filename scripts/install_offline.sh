#!/usr/bin/env bash
# Install tacl-scale on a machine without network access (a GPU node) into a
# virtualenv that reuses the machine's own torch, triton and transformers, so that
# `VENV/bin/deepspeed tacl_scale/train.py ...` runs there. What the machine lacks
# (deepspeed and its pydantic, pydantic-core, annotated-types, typing-inspection,
# typing-extensions, hjson; xxhash for the dataset checksums) comes as wheels from the bundle that
# scripts/build_gpu_bundle.sh builds on a networked machine; the project itself is
# this checkout, put on the venv's path (as `pip install -e` would). Data preparation
# (Apache Beam and its parsers) is not installed: build datasets elsewhere.
#   bash scripts/install_offline.sh [VENV]     (default .venv-offline; idempotent)
# A bundle whose bundle.json is not JSON with its "packages" (a truncated copy) is
# refused, naming the file, before the venv is made.
# Environment:
#   PYTHON       the interpreter that holds the node's torch (default python3)
#   GPU_BUNDLE   the bundle directory (default .gpu_bundle)
set -euo pipefail
source "$(dirname "$0")/usage.sh"
at_most_one_path "bash scripts/install_offline.sh [VENV]" "$@"
cd "$(dirname "$0")/.."
VENV=${1:-.venv-offline}
PY=${PYTHON:-python3}
BUNDLE=${GPU_BUNDLE:-.gpu_bundle}
if [[ ! -f "$BUNDLE/bundle.json" ]]; then
  echo "error: $BUNDLE/bundle.json not found: build the bundle with 'bash scripts/build_gpu_bundle.sh' on a" \
       "networked machine and copy it here (or set GPU_BUNDLE)" >&2
  exit 2
fi
if ! "$PY" -c "import torch" 2>/dev/null; then
  echo "error: $PY cannot import torch: set PYTHON to the interpreter that has this machine's torch" >&2
  exit 2
fi
# The bundle's package list, read (and a truncated or foreign bundle.json refused) before
# anything is made.
LIST=$("$PY" - "$BUNDLE/bundle.json" <<'PYCODE'
import json, sys
path = sys.argv[1]
fix = "rebuild the bundle with 'bash scripts/build_gpu_bundle.sh' on a networked machine and copy it here"
try:
    with open(path, encoding="utf-8") as file:
        info = json.load(file)
except (OSError, UnicodeDecodeError, ValueError) as err:
    sys.exit(f"error: {path}: not a readable JSON file ({err}): {fix}")
packages = info.get("packages") if isinstance(info, dict) else None
if not (isinstance(packages, list) and packages and all(isinstance(p, str) and p.strip() for p in packages)):
    sys.exit(f'error: {path}: no "packages" list of package names in it: {fix}')
print("\n".join(packages))
PYCODE
) || exit 2
mapfile -t PACKAGES <<< "$LIST"
if [[ ! -x "$VENV/bin/python" ]]; then
  "$PY" -m venv --without-pip "$VENV"
fi
# The venv sees $PY's packages after its own. (--system-site-packages would expose
# the *base* interpreter's instead when $PY is itself a virtualenv, as on the GPU
# image, whose torch lives in /opt/torch/.venv.) addsitedir also reads their .pth files.
SITE=$("$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_path('purelib'))")
"$PY" - "$SITE/_tacl_scale_offline.pth" "$PWD" <<'PYCODE'
import site, sys
parents = [p for p in site.getsitepackages() if p]
line = f"import site; list(map(site.addsitedir, {parents!r}))"
with open(sys.argv[1], "w", encoding="utf-8") as pth:
    pth.write(sys.argv[2] + "\n" + line + "\n")  # this checkout first, then the machine's packages
PYCODE
# --ignore-installed: into the venv even where the machine has a package already.
"$VENV/bin/python" -m pip install -q --no-index --no-deps --ignore-installed --no-compile --no-cache-dir \
  --disable-pip-version-check --find-links "$BUNDLE/wheels" "${PACKAGES[@]}"
"$VENV/bin/python" -c "import deepspeed, torch, triton, transformers, tacl_scale.trainer; \
print('installed into $VENV: deepspeed', deepspeed.__version__, 'from', deepspeed.__path__[0], '| torch', \
torch.__version__, '| triton', triton.__version__, '| transformers', transformers.__version__, \
'| tacl_scale from', tacl_scale.__path__[0])"
