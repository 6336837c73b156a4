#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, for CI (scripts/slurm/ci_check.sh) and for trying the
# sbatch scripts without a real cluster. Debian/Ubuntu only; run as root.
#
#   scripts/slurm/local_cluster.sh start    # install slurm-wlm + munge with apt if missing, write
#                                           # a slurm.conf, start munged, slurmctld and slurmd
#   eval "$(scripts/slurm/local_cluster.sh env)"   # SLURM_CONF for sbatch/srun/squeue here
#   sbatch --wait scripts/slurm/moe_train.sbatch    # the scripts' default shape fits a 2-CPU node
#   scripts/slurm/local_cluster.sh status
#   scripts/slurm/local_cluster.sh stop     # cancel its jobs, stop the daemons it started
#
# The cluster: one node named after this host with its CPU count, partition `ci`, no cgroups
# (proctrack/linuxproc, task/none), no accounting, MpiDefault=none (our scripts pass --mpi), all
# daemons as root (SlurmUser=root). Its files live in SKEW_SLURM_DIR (default /tmp/skew-slurm):
# etc/slurm.conf, log/slurm{ctld,d}.log, state, spool. It never writes /etc/slurm, so it does not
# disturb a Slurm already configured there; munged is shared: an already running one is used and
# left running, one this script starts is stopped by `stop`. Ports: SKEW_SLURM_PORT (default
# 6817) for slurmctld, the next one for slurmd.
set -euo pipefail

dir=${SKEW_SLURM_DIR:-/tmp/skew-slurm}
port=${SKEW_SLURM_PORT:-6817}
conf=$dir/etc/slurm.conf
munge_pidfile=/run/munge/munged.pid

say() { echo "local_cluster: $*" >&2; }
die() {
  say "error: $*"
  exit 1
}
alive() { [[ -f $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

install_missing() {
  local missing=()
  command -v slurmctld >/dev/null || missing+=(slurmctld)
  command -v slurmd >/dev/null || missing+=(slurmd)
  command -v sbatch >/dev/null || missing+=(slurm-client)
  command -v munged >/dev/null || missing+=(munge)
  [[ ${#missing[@]} -eq 0 ]] && return 0
  command -v apt-get >/dev/null || die "missing ${missing[*]} and no apt-get: install Slurm and munge yourself"
  say "installing slurm-wlm munge (missing: ${missing[*]})"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
}

munge_works() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }

start_munge() {
  if munge_works; then
    say "munged already running: using it"
    return 0
  fi
  [[ -s /etc/munge/munge.key ]] || {
    say "creating /etc/munge/munge.key"
    mkdir -p /etc/munge
    if command -v mungekey >/dev/null; then mungekey --create --keyfile=/etc/munge/munge.key --force; else
      dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
    fi
  }
  local user=root
  id munge >/dev/null 2>&1 && user=munge
  mkdir -p /run/munge /var/lib/munge /var/log/munge
  chown "$user:" /etc/munge/munge.key /run/munge /var/lib/munge /var/log/munge
  chmod 0400 /etc/munge/munge.key
  chmod 0755 /run/munge
  if [[ $user == munge ]]; then runuser -u munge -- munged; else munged --force; fi
  touch "$dir/munged.ours"
  for _ in $(seq 50); do
    munge_works && return 0
    sleep 0.1
  done
  die "munged did not come up (see /var/log/munge/munged.log)"
}

write_conf() {
  local host node
  host=$(hostname -s)
  # slurmd -C: this machine's CPU layout as slurmd will report it (a node configured with more
  # CPUs than it has is drained). RealMemory is left out: memory is not scheduled here.
  node=$(slurmd -C | head -n 1 | sed -e 's/ RealMemory=[0-9]*//' -e "s/^NodeName=[^ ]*/NodeName=$host/")
  mkdir -p "$dir/etc" "$dir/state" "$dir/spool" "$dir/log"
  cat >"$conf" <<EOF
# Written by scripts/slurm/local_cluster.sh: a one-node cluster for CI.
ClusterName=skewci
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
MpiDefault=none
ReturnToService=2
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
# finished jobs stay visible to scontrol for 10 minutes (there is no accounting database)
MinJobAge=600
KillWait=5
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=30
$node NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=ci Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
}

node_state() { SLURM_CONF=$conf sinfo -h -N -o %T 2>/dev/null | head -n 1; }

start() {
  [[ $(id -u) -eq 0 ]] || die "run as root (the daemons run as root: SlurmUser=root)"
  install_missing
  if alive "$dir/slurmctld.pid" || alive "$dir/slurmd.pid"; then
    say "already running ($dir); restarting it"
    stop
  fi
  rm -rf "$dir/state" "$dir/spool"
  mkdir -p "$dir"
  start_munge
  write_conf
  slurmctld -c -f "$conf" || die "slurmctld did not start; see $dir/log/slurmctld.log"
  slurmd -f "$conf" || die "slurmd did not start; see $dir/log/slurmd.log"
  local state=""
  for _ in $(seq 100); do
    state=$(node_state)
    case $state in
      idle* | mixed* | allocated*) break ;;
      down* | drain*) SLURM_CONF=$conf scontrol update nodename="$(hostname -s)" state=resume 2>/dev/null || true ;;
    esac
    sleep 0.2
  done
  case $state in
    idle* | mixed* | allocated*) ;;
    *)
      tail -n 20 "$dir/log/slurmctld.log" "$dir/log/slurmd.log" >&2 || true
      die "node $(hostname -s) is '${state:-unknown}', not idle, 20 s after start"
      ;;
  esac
  say "up: node $(hostname -s), $(SLURM_CONF=$conf sinfo -h -o %c) CPUs, partition ci; export SLURM_CONF=$conf"
}

stop_pid() {  # pidfile name
  local pidfile=$1 name=$2 pid
  alive "$pidfile" || return 0
  pid=$(cat "$pidfile")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 50); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.2
  done
  say "$name (pid $pid) ignored SIGTERM for 10 s: SIGKILL"
  kill -9 "$pid" 2>/dev/null || true
}

stop() {
  if alive "$dir/slurmctld.pid"; then
    local jobs
    jobs=$(SLURM_CONF=$conf squeue -h -o %i 2>/dev/null || true)
    if [[ -n $jobs ]]; then
      # shellcheck disable=SC2086
      SLURM_CONF=$conf scancel $jobs 2>/dev/null || true
      for _ in $(seq 50); do
        [[ -z $(SLURM_CONF=$conf squeue -h -o %i 2>/dev/null) ]] && break
        sleep 0.2
      done
    fi
  fi
  stop_pid "$dir/slurmd.pid" slurmd
  stop_pid "$dir/slurmctld.pid" slurmctld
  if [[ -f $dir/munged.ours ]]; then
    stop_pid "$munge_pidfile" munged
    rm -f "$dir/munged.ours"
  fi
  say "stopped"
}

case ${1:-} in
  start) start ;;
  stop) stop ;;
  env) echo "export SLURM_CONF=$conf" ;;
  status)
    if alive "$dir/slurmctld.pid"; then
      SLURM_CONF=$conf sinfo
      SLURM_CONF=$conf squeue
    else
      echo "not running ($dir)"
      exit 1
    fi
    ;;
  *)
    echo "usage: $0 start|stop|status|env" >&2
    exit 2
    ;;
esac
