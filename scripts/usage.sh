# Sourced first by each command in scripts/, with its arguments: -h or --help prints
# the command's header comment (what it does, its arguments and environment) and
# exits, before anything is installed, built or run. slurm/_env.sh sources it too, for
# print_header only, with an argument of its own ("--") so that a job's --help is
# left to the job.

# print_header FILE: FILE's header comment (the comment lines after its first line, up
# to the first line that is not a comment or is a job script's #SBATCH directive),
# without the leading "# ".
print_header() {
  sed -n '2,/^\([^#]\|#SBATCH\)/{/^#SBATCH/d;/^#/s/^# \{0,1\}//p}' "$1"
}

if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then
  print_header "$0"
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

# no_arguments "USAGE" "$@": a command whose settings all come from the environment
# refuses any argument (it was ignored, and a mistyped setting went unnoticed).
no_arguments() {
  if [[ $# -gt 1 ]]; then
    echo "error: usage: $1 takes no arguments, got '$2' (its settings come from the environment;" \
         "--help says more)" >&2
    exit 2
  fi
}

# foreign_folder DIR MARKER: whether DIR exists and is not for this command to replace:
# neither empty nor holding MARKER, the file the command leaves in what it writes.
foreign_folder() {
  [[ -e "$1" && ! -f "$1/$2" ]] && [[ ! -d "$1" || -n "$(ls -A -- "$1")" ]]
}
