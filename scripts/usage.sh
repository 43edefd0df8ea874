# Sourced first by each command in scripts/, with its arguments: -h or --help prints
# the command's header comment (what it does, its arguments and environment) and
# exits, before anything is installed, built or run.
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then
  sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"
  exit 0
fi

# at_most_one_path "USAGE" "$@": a command that takes one optional path refuses a
# flag it does not know (a mistyped flag is not a directory name) or a second argument.
at_most_one_path() {
  if [[ "${2:-}" == -* || $# -gt 2 ]]; then
    echo "error: usage: $1 (--help says more)" >&2
    exit 2
  fi
}
