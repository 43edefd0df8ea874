#!/usr/bin/env bash
# Stop the daemons started by start_slurm.sh, by PID: TERM, up to 10 s to exit, then KILL.
set -u
STATE=${1:-/tmp/tacl-slurm}
pids=()
for pidfile in "$STATE"/slurmd-*.pid "$STATE"/slurmctld.pid "$STATE"/munged.pid; do
  [[ -f $pidfile ]] && pids+=("$(cat "$pidfile")")
done
[[ ${#pids[@]} -eq 0 ]] && exit 0
kill "${pids[@]}" 2>/dev/null
for _ in $(seq 20); do
  alive=()
  for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive+=("$pid"); done
  [[ ${#alive[@]} -eq 0 ]] && exit 0
  sleep 0.5
done
kill -9 "${alive[@]}" 2>/dev/null
exit 0
