#!/usr/bin/env bash
# Build what scripts/gpu_check.sh needs on a GPU machine that has no network: the
# Python packages its python3 lacks, as wheels, and a small real dataset. Run here
# (networked, project installed by scripts/setup.sh), then copy the repository with
# the bundle to the GPU machine.
#   bash scripts/build_gpu_bundle.sh [BUNDLE_DIR]        (default .gpu_bundle in the checkout,
#                                                        git-ignored; a BUNDLE_DIR is relative to
#                                                        the current directory)
# A BUNDLE_DIR that exists must be an earlier bundle (it has bundle.json): it is replaced
# once the new one is whole, so an interrupted build leaves the old one as it was.
# Environment:
#   GPU_PYTHON_VERSION   the GPU machine's Python (default 3.12): binary wheels are for it
#                        and for this machine's Python (so the CPU dry run installs them too)
#   EN_DUMP, EN_VOCAB    the English dump sample and bert-base-uncased vocabulary
#                        (default: enwiki-sample.xml.bz2 and vocab/bert-base-uncased.txt
#                        in the directory named by TACL_TEST_DATA, the real samples)
#   PY                   this machine's python with the project (default .venv/bin/python)
set -euo pipefail
source "$(dirname "$0")/usage.sh"
at_most_one_path "bash scripts/build_gpu_bundle.sh [BUNDLE_DIR]" "$@"
# Resolved before the cd below (a trailing slash dropped: the build folders sit beside it).
if [[ -n "${1:-}" ]]; then BUNDLE=$(realpath -m -- "$1"); else BUNDLE=$(realpath -m -- "$(dirname "$0")/../.gpu_bundle"); fi
cd "$(dirname "$0")/.."
if foreign_folder "$BUNDLE" bundle.json; then
  echo "error: $BUNDLE exists and is not a GPU bundle (no bundle.json): name another folder, or remove it yourself" >&2
  exit 2
fi
PY=${PY:-.venv/bin/python}
GPU_PY=${GPU_PYTHON_VERSION:-3.12}
DATA=${TACL_TEST_DATA:-/nonexistent/TACL_TEST_DATA-is-unset}
EN_DUMP=${EN_DUMP:-$DATA/enwiki-sample.xml.bz2}
EN_VOCAB=${EN_VOCAB:-$DATA/vocab/bert-base-uncased.txt}
for f in "$EN_DUMP" "$EN_VOCAB"; do
  [[ -f "$f" ]] || { echo "error: $f not found (set TACL_TEST_DATA to the real samples' directory, or EN_DUMP and EN_VOCAB)" >&2; exit 2; }
done
"$PY" -c "import deepspeed" 2>/dev/null || { echo "error: $PY cannot import deepspeed: run scripts/setup.sh first" >&2; exit 2; }
# deepspeed is built from its sdist without build isolation (its setup.py imports
# torch), so $PY's setuptools must build wheels itself (70.1 and later) or have the
# wheel package: python 3.11's venv brings setuptools 65.5, which has neither.
"$PY" -c "import setuptools.command.bdist_wheel" 2>/dev/null || "$PY" -c "import wheel.bdist_wheel" 2>/dev/null || {
  echo "error: $PY's setuptools cannot build the deepspeed wheel (no bdist_wheel): $PY -m pip install 'setuptools>=70.1'" \
       "(scripts/setup.sh installs it)" >&2; exit 2; }

version() { "$PY" -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$1"; }
# Everything is built in a folder of its own beside the bundle and takes its place at the end.
mkdir -p "$(dirname "$BUNDLE")"
BUILD=$(mktemp -d "$BUNDLE.building.XXXXXX")
chmod "$(umask -S)" "$BUILD"  # mktemp's folder is private; the bundle is not
OLD=""  # the earlier bundle while it is moved aside (below)
# A signal between the two moves below would leave no bundle: the old one goes back.
trap 'rm -rf "$BUILD"; if [[ -n $OLD && ! -e $BUNDLE ]]; then mv -T "$OLD" "$BUNDLE"; fi' EXIT
mkdir "$BUILD/wheels"
# deepspeed exactly as installed here (and xxhash, the dataset checksums); its runtime needs that the GPU image lacks
# (it has torch, numpy, ninja, psutil, py-cpuinfo, msgpack, einops, nvidia-ml-py, tqdm).
"$PY" -m pip wheel -q --no-deps --no-build-isolation "deepspeed==$(version deepspeed)" -w "$BUILD/wheels"
PURE=(hjson annotated-types typing-inspection typing-extensions pydantic)
for name in "${PURE[@]}"; do
  "$PY" -m pip download -q --no-deps --only-binary=:all: "$name==$(version "$name")" -d "$BUILD/wheels"
done
HERE_PY=$("$PY" -c "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')")
for pyver in $(printf '%s\n' "$GPU_PY" "$HERE_PY" | sort -u); do
  "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version "$pyver" --implementation cp \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 \
    "pydantic-core==$(version pydantic-core)" "xxhash==$(version xxhash)" -d "$BUILD/wheels"
done

# The real English sample with bert-base-uncased at the paper's length 256 (the
# dataset carries its tokenizer, so it works wherever the bundle lands).
"$PY" -m data_prep.build --input "$EN_DUMP" --tokenizer "$EN_VOCAB" \
  --output "$BUILD/data/enwiki-bert-base-uncased-256" --num-shards 2 --max-seq-len 256 --dupe-factor 5 \
  --quiet > /dev/null
SUMMARY=$("$PY" - "$BUILD" <<'PYCODE'
import json, pathlib, sys
from tacl_scale.data import Manifest
bundle = pathlib.Path(sys.argv[1])
wheels = sorted(p.name for p in (bundle / "wheels").glob("*.whl"))
manifest = Manifest.load(bundle / "data/enwiki-bert-base-uncased-256")
packages = ["deepspeed", "hjson", "annotated-types", "typing-inspection", "typing-extensions", "pydantic",
            "pydantic-core", "xxhash"]
info = {"packages": packages, "wheels": wheels, "dataset": "data/enwiki-bert-base-uncased-256",
        "instances": manifest.train.totals.instances}
(bundle / "bundle.json").write_text(json.dumps(info, indent=2))
size = sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file())
print(f"{len(wheels)} wheels, {info['instances']} instances, {size / 2**20:.1f} MiB")
PYCODE
)
# The whole new bundle takes the old one's place: the old one is moved aside, and back
# if the new one cannot take its place; it is removed only once the new one is there.
if [[ -e "$BUNDLE" ]]; then
  OLD="$BUNDLE.replaced.$$"
  mv -T "$BUNDLE" "$OLD"
fi
if ! mv -T "$BUILD" "$BUNDLE"; then  # the EXIT trap moves the old one back
  echo "error: $BUNDLE: the new bundle could not take the old one's place (the old one is kept)" >&2
  exit 1
fi
trap - EXIT
if [[ -n "$OLD" ]]; then rm -rf "$OLD"; fi
echo "GPU bundle in $BUNDLE: $SUMMARY"
