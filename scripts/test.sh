#!/usr/bin/env bash
# Install and run the test suite on CPU, by tier:
#   bash scripts/test.sh [PYTEST_ARGS...]              default tier: lint, then every test not marked 'cluster', in .venv
#                                                      (the newest pinned versions: torch 2.13 CPU)
#   bash scripts/test.sh --quick [PYTEST_ARGS...]      the default tier's pure logic, in .venv: lint, then
#                                                      the tests not marked 'slow' (-m "not slow and not
#                                                      cluster"; marked by hand or by tests/conftest.py):
#                                                      no dataset build or Beam pipeline, no training or
#                                                      launcher run, no subprocess, no wheel build; under 2
#                                                      minutes on 2 cores once .venv exists
#   bash scripts/test.sh --gpu-image [PYTEST_ARGS...]  the GPU image's versions (scripts/gpu_image_versions.txt:
#                                                      torch 2.11, triton 3.6, transformers 5.17) in
#                                                      .venv-gpu-image, every test marked 'framework' (torch,
#                                                      DeepSpeed, Triton, transformers APIs), on CPU
#   bash scripts/test.sh --cluster [PYTEST_ARGS...]    the Slurm tests (marked 'cluster'), in .venv: needs root;
#                                                      installs munge and Slurm from Debian, writes
#                                                      /etc/munge/munge.key, /etc/slurm/slurm.conf and host
#                                                      lines in /etc/hosts, starts munged, slurmctld and slurmd
#                                                      and stops them by PID (tests/slurm/)
#   bash scripts/test.sh --all [PYTEST_ARGS...]        the default, cluster and GPU-image tiers, one after the
#                                                      other (.ci/run)
# The default, quick and GPU-image tiers change nothing outside the clone: what their tests
# write goes under .cache/ (scripts/test_env.sh says what and where).
set -euo pipefail
source "$(dirname "$0")/usage.sh"
cd "$(dirname "$0")/.."
export TOKENIZERS_PARALLELISM=false
source scripts/test_env.sh
TIER=default
case "${1:-}" in
  --quick) TIER=quick; shift ;;
  --gpu-image) TIER=gpu-image; shift ;;
  --cluster) TIER=cluster; shift ;;
  --all) TIER=all; shift ;;
esac

# Each step's failure ends its tier: under --all a tier runs on the left of `||`, where
# bash ignores `set -e`, so the steps are chained by hand.
default_tier() {
  bash scripts/setup.sh || return
  .venv/bin/python -m ruff check . || return
  # The slowest tests named at the end: the tier has a 12-minute budget on 2 cores.
  in_clone_tmp .venv/bin/python -m pytest -q -p no:cacheprovider --durations=20 -m "not cluster" "$@"
}

quick_tier() {
  bash scripts/setup.sh || return
  .venv/bin/python -m ruff check . || return
  in_clone_tmp .venv/bin/python -m pytest -q -p no:cacheprovider -m "not slow and not cluster" "$@"
}

daemon_pids() {  # the PIDs of the daemons the cluster tier starts, sorted
  local name
  for name in munged slurmctld slurmd; do pgrep -x "$name" || true; done | sort
}
# The cluster tier's temporary files go in a fresh directory of the system's, not in
# the clone: slurmd puts sockets under the tests' tmp_path, and a path inside a deep
# clone could pass the 107 bytes a socket's path may have. It is removed when the tests
# pass (with pytest's tmp_paths, Dask's scratch space ...) and kept, named, when not.
cluster_tier() {
  bash scripts/setup.sh || return
  local before status=0 left tmp
  before=$(daemon_pids)
  tmp=$(mktemp -d /tmp/tacl-cluster.XXXXXX)
  TMPDIR="$tmp" TACL_TIER=cluster .venv/bin/python -m pytest -q -p no:cacheprovider -m cluster "$@" || status=$?
  if (( status == 0 )); then
    rm -rf "$tmp"
  else
    echo "note: the cluster tier's temporary files are kept in $tmp" >&2
  fi
  # Whatever the tests did, the tier leaves no daemon of its own behind.
  left=$(comm -13 <(echo "$before") <(daemon_pids))
  if [[ -n "$left" ]]; then
    echo "error: the cluster tier left daemons running: $(ps -o pid=,comm= -p "$(echo $left | tr ' ' ',')" | xargs)" >&2
    status=1
  fi
  return "$status"
}

gpu_image_tier() {
  VENV=.venv-gpu-image CONSTRAINTS=scripts/gpu_image_versions.txt \
    TORCH_SPEC="$(grep '^torch==' scripts/gpu_image_versions.txt)" bash scripts/setup.sh || return
  .venv-gpu-image/bin/python -c "import torch, triton, transformers, deepspeed; \
print('GPU-image tier: torch', torch.__version__, '| triton', triton.__version__, '| transformers', \
transformers.__version__, '| deepspeed', deepspeed.__version__)" || return
  TACL_TIER=gpu-image in_clone_tmp .venv-gpu-image/bin/python -m pytest -q -p no:cacheprovider -m framework "$@"
}

case "$TIER" in
  default) default_tier "$@" ;;
  quick) quick_tier "$@" ;;
  gpu-image) gpu_image_tier "$@" ;;
  cluster) cluster_tier "$@" ;;
  all)
    status=0
    default_tier "$@" || status=$?
    cluster_tier "$@" || status=$?
    gpu_image_tier "$@" || status=$?
    exit "$status"
    ;;
esac
