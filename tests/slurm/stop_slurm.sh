#!/usr/bin/env bash
# Stop the daemons started by start_slurm.sh, by PID.
set -u
STATE=${1:-/tmp/tacl-slurm}
for pidfile in "$STATE"/slurmd-*.pid "$STATE"/slurmctld.pid "$STATE"/munged.pid; do
  [[ -f $pidfile ]] && kill "$(cat "$pidfile")" 2>/dev/null
done
sleep 1
exit 0
