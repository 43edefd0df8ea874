#!/usr/bin/env bash
# Install and start a local Slurm (22.05 from Debian) for the tests: one machine
# hosting NODES nodes (n1..nN) through multiple slurmd daemons, no systemd, no
# cgroups. Prints the state directory; stop it with tests/slurm/stop_slurm.sh DIR.
#   NODES=2 bash tests/slurm/start_slurm.sh [STATE_DIR]
set -euo pipefail
NODES=${NODES:-2}
STATE=${1:-/tmp/tacl-slurm}
export DEBIAN_FRONTEND=noninteractive
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  apt-get update -qq >/dev/null
  apt-get install -y -qq munge slurmctld slurmd slurm-client >/dev/null
fi
mkdir -p "$STATE"/{spool,ctld,log} /etc/slurm /run/munge /var/log/munge /var/lib/munge
if [[ ! -f /etc/munge/munge.key ]]; then
  mkdir -p /etc/munge
  dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
fi
chown -R munge:munge /etc/munge /run/munge /var/log/munge /var/lib/munge 2>/dev/null || true
chmod 0700 /etc/munge; chmod 0400 /etc/munge/munge.key
# A munged already running is the machine's own and is left alone; one started here
# writes its PID to the state directory, and stop_slurm.sh stops it by that PID.
if ! pgrep -x munged >/dev/null; then
  if id munge >/dev/null 2>&1; then
    su -s /bin/sh munge -c "munged --pid-file=$STATE/munged.pid" || munged --force --pid-file="$STATE/munged.pid"
  else
    munged --force --pid-file="$STATE/munged.pid"
  fi
fi
HOST=$(hostname -s)
CPUS=$(nproc)
# RealMemory below what slurmd detects, per node (the nodes share this machine).
MEM=$(( $(awk '/MemTotal/ {print int($2/1024)}' /proc/meminfo) / (NODES + 1) ))
for i in $(seq 1 "$NODES"); do
  grep -q " n$i\$" /etc/hosts || echo "127.0.0.1 n$i" >> /etc/hosts
done
# cred_expire: a requeued job waits this long before it may start again (default 120 s,
# which made the preemption test sit idle for two minutes); 30 s still covers a
# step launch on a loaded 2-core machine.
cat > /etc/slurm/slurm.conf <<CONF
ClusterName=tacl
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=16817
SlurmdPort=17001
AuthType=auth/munge
AuthInfo=cred_expire=30
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
ReturnToService=2
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/spool/slurmd-%n
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd-%n.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd-%n.log
JobRequeue=1
MpiDefault=none
InactiveLimit=0
KillWait=10
MinJobAge=600
SlurmctldTimeout=30
SlurmdTimeout=30
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName=n[1-$NODES] NodeHostname=$HOST NodeAddr=127.0.0.1 Port=17001-$((17000 + NODES)) CPUs=$CPUS RealMemory=$MEM State=UNKNOWN
PartitionName=debug Nodes=n[1-$NODES] Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
slurmctld -i
for i in $(seq 1 "$NODES"); do slurmd -N "n$i"; done
for _ in $(seq 1 100); do
  if sinfo -h -o '%T' 2>/dev/null | grep -qE '^(idle|mixed)'; then
    [[ $(sinfo -h -N -o '%T' | grep -cE 'idle|mixed') -ge $NODES ]] && break
  fi
  sleep 0.2
done
sinfo -N >&2
echo "$STATE"
