# Sourced by scripts/test.sh, from the clone's root: where the tests' files go, so that
# a test tier changes nothing outside the clone.
#
# Caches kept between runs, under .cache/ (else in the home directory or /tmp):
#   TORCH_EXTENSIONS_DIR     DeepSpeed's JIT-compiled CPU ops (else ~/.cache/torch_extensions)
#   TRITON_CACHE_DIR         Triton's compiled kernels (else ~/.triton)
#   TORCHINDUCTOR_CACHE_DIR  inductor's compiled graphs (else /tmp/torchinductor_$USER)
#   MPLCONFIGDIR             matplotlib's font cache and configuration (else ~/.cache/matplotlib
#                            and ~/.config/matplotlib)
export TORCH_EXTENSIONS_DIR="$PWD/.cache/torch_extensions" TRITON_CACHE_DIR="$PWD/.cache/triton" \
  TORCHINDUCTOR_CACHE_DIR="$PWD/.cache/inductor" MPLCONFIGDIR="$PWD/.cache/matplotlib"

# The temporary directory, .cache/tmp (TESTS_TMP_MAX_LEN: see below). It receives pytest's
# tmp_path and what the processes the tests start leave in TMPDIR: Beam's pipeline
# scratch, Dask's worker space, multiprocessing's listener sockets, torchelastic's
# run directories (left by launchers a test kills), jieba's dictionary cache.
TESTS_TMP="$PWD/.cache/tmp"
# multiprocessing listens on $TMPDIR/pymp-XXXXXXXX/listener-XXXXXXXX (32 bytes more), and
# a socket's path has at most 107 bytes on Linux.
TESTS_TMP_MAX_LEN=75

# in_clone_tmp COMMAND [ARGS...]: run COMMAND with TMPDIR in the clone, then remove what
# it left there except pytest's own directories (pytest keeps the tmp_path of failed
# tests, and rotates them). Returns COMMAND's status. In a clone whose path is too deep
# for the sockets, COMMAND gets a fresh directory of the system's instead, removed
# whole when it ends.
in_clone_tmp() {
  local dir=$TESTS_TMP owned="" status=0
  if (( ${#dir} > TESTS_TMP_MAX_LEN )); then
    dir=$(mktemp -d)
    owned=1
    echo "note: $TESTS_TMP is longer than the $TESTS_TMP_MAX_LEN characters sockets allow under it;" \
      "the tests' temporary files go in $dir, removed at the end" >&2
  fi
  mkdir -p "$dir"
  TMPDIR="$dir" "$@" || status=$?
  if [[ -n "$owned" ]]; then
    rm -rf "$dir"
  else
    find "$dir" -mindepth 1 -maxdepth 1 ! -name 'pytest-of-*' -exec rm -rf {} +
  fi
  return "$status"
}
