# Sourced first by each command in scripts/, with its arguments: -h or --help prints
# the command's header comment (what it does, its arguments and environment) and
# exits, before anything is installed, built or run.
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then
  sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"
  exit 0
fi
