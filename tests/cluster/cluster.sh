#!/usr/bin/env bash
# A test cluster on one machine: N hosts as network namespaces flh1..flhN,
# each joined by a veth pair to one bridge in the root namespace, each with its
# own address, host name and sshd (own host key, one client key authorised on
# all). Needs root; without it (or without the tools) it says so and exits 77,
# the skip code. Everything `up` makes, `down` removes, and `up` first removes
# what an earlier cluster left, crashed or not.
#
#   cluster.sh up N [--dir DIR] [--owner PID] [--wait SECONDS] [--slurm]
#                                     make the hosts; writes DIR/cluster.json
#                                     (--slurm: and a SLURM cluster on them)
#   cluster.sh down [--dir DIR] [--owner PID] [--force]
#                                     remove every host, the bridge and DIR
#   cluster.sh down-all [--force]     the same for whatever cluster is there
#   cluster.sh status                 the folder, the owner and the hosts
#   cluster.sh pids HOST              live pids inside HOST's namespace
#   cluster.sh link HOST up|down      HOST's veth (root side) up or down
#   cluster.sh drop HOST on|off [PEER]
#                                     silent loss: every packet to and from HOST
#                                     (only those to and from address PEER, if
#                                     given) dropped, the link left up (nftables)
#   cluster.sh rekey HOST [--dir DIR] new host key for HOST, its sshd restarted
#   cluster.sh slurmd HOST stop|start [--dir DIR]
#                                     HOST's slurmd killed (a node lost) or started
#
# DIR may also come as the argument after N (up) or first (down, rekey).
#
# Every host takes logins as root and as the unprivileged user flotilla-test
# (made once on the machine: the namespaces share /etc/passwd), each with a
# home of its own per host and the client key authorised. The hosts' "user"
# in cluster.json, which the tests log in as, is $FLOTILLA_CLUSTER_USER
# (flotilla-test or root; default flotilla-test, so that the tests show what
# Flotilla does without root on a node).
#
# The names (flh*, flv*, flbr0, 10.77.0.0/24) are machine-wide, so there is
# one cluster per machine, and several test runs may share the machine. A
# cluster made with --owner PID belongs to that process while it lives: `up`
# waits for it (at most --wait seconds, default $FLOTILLA_CLUSTER_WAIT or 300)
# and `down` leaves it alone unless --force. Once its owner is gone (a test
# that crashed or was killed) the next `up` or `down` tears it down. A cluster
# made without --owner (by hand) belongs to nobody. The lock and the owner's
# record live in /run/flotilla-cluster.
#
# With --slurm the hosts are also a SLURM cluster (Debian's slurm-wlm): one
# munged on the machine (the hosts share its file system, so its socket
# reaches them all), slurmctld on flh1, which is also the login node, and a
# slurmd on every host, each in its host's namespaces; partition `debug`
# holds them all. Every login has SLURM_CONF set to DIR/slurm/slurm.conf,
# as a site's /etc/slurm/slurm.conf would be. DIR is the shared file system.
set -euo pipefail

readonly BRIDGE=flbr0
readonly NET=10.77.0
readonly DEFAULT_DIR=/tmp/flotilla-cluster
readonly STATE_DIR=/run/flotilla-cluster
# Written into every folder `up` makes: `down` removes only folders holding it.
readonly MARKER=.flotilla-test-cluster
readonly SSHD=/usr/sbin/sshd
readonly MAX_HOSTS=200
# The unprivileged login of every host; its home in /etc/passwd is shared
# (one machine), HOME is each host's own (sshd's SetEnv).
readonly TEST_USER=flotilla-test
readonly TEST_USER_HOME=/var/lib/flotilla-test
readonly SLURM_PARTITION=debug
SLURM=''  # --slurm

PATH=$PATH:/usr/sbin:/sbin

die() {
  echo "cluster.sh: $*" >&2
  exit 1
}

usage() {
  sed -n '/^#   cluster.sh/,/^# DIR/p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

need_root() {
  if [[ $(id -u) -ne 0 ]]; then
    echo "cluster.sh: needs root (network namespaces, veth pairs, a bridge, sshd on port 22)" >&2
    exit 77
  fi
  local tool
  for tool in ip ssh-keygen unshare flock timeout useradd; do
    command -v "$tool" >/dev/null || {
      echo "cluster.sh: $tool is missing (iproute2, openssh-client, util-linux, coreutils, passwd)" >&2
      exit 77
    }
  done
  [[ -x $SSHD ]] || {
    echo "cluster.sh: $SSHD is missing (openssh-server)" >&2
    exit 77
  }
}

# --- processes --------------------------------------------------------------

# Field 22 of /proc/PID/stat (start time in clock ticks since boot): with the
# pid it names one process, even after the pid is reused.
start_time() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  # shellcheck disable=SC2086 # split into the fields after the command name
  set -- $stat
  [[ $1 != Z ]] || return 1  # a zombie is gone for our purposes
  echo "${20}"
}

alive() { start_time "$1" >/dev/null; }

# Live (not zombie) pids in a namespace. This machine's init may never reap
# what it inherits, so zombies are left out rather than waited for.
namespace_pids() {
  local pid
  for pid in $(ip netns pids "$1" 2>/dev/null); do
    if alive "$pid"; then echo "$pid"; fi
  done
}

# --- the lock and the owner -------------------------------------------------

lock() {
  mkdir -p "$STATE_DIR"
  exec 9>"$STATE_DIR/lock"
  flock 9
}

unlock() { flock -u 9; }

# The owner's pid if it is still the same live process, else nothing.
live_owner() {
  local pid start
  [[ -f $STATE_DIR/owner ]] || return 0
  read -r pid start <"$STATE_DIR/owner" || return 0
  [[ -n ${pid:-} && -n ${start:-} && $(start_time "$pid" 2>/dev/null || true) == "$start" ]] && echo "$pid"
  return 0
}

describe() {
  local cmdline
  cmdline=$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null || true)
  echo "pid $1 (${cmdline% })"
}

# Holds the lock and returns once no live process other than $1 owns the
# cluster; gives up after $2 seconds with exit status 75 (EX_TEMPFAIL).
acquire() {
  local me=$1 wait=$2 owner deadline=$((SECONDS + $2)) said=''
  while true; do
    lock
    owner=$(live_owner)
    if [[ -z $owner || $owner == "$me" ]]; then return 0; fi
    unlock
    if ((SECONDS >= deadline)); then
      echo "cluster.sh: the test cluster still belongs to $(describe "$owner") after ${wait} s" >&2
      exit 75
    fi
    if [[ -z $said ]]; then
      echo "cluster.sh: waiting for the test cluster of $(describe "$owner")" >&2
      said=1
    fi
    sleep 1
  done
}

record_owner() {  # PID DIR
  local start
  if [[ -n $1 ]] && start=$(start_time "$1"); then
    echo "$1 $start" >"$STATE_DIR/owner"
  else
    rm -f "$STATE_DIR/owner"
  fi
  echo "$2" >"$STATE_DIR/dir"
}

recorded_dir() { cat "$STATE_DIR/dir" 2>/dev/null || true; }

# --- making and removing ------------------------------------------------------

hosts_present() { ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^flh[0-9]+$' || true; }
veths_present() {
  ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E '^flv[0-9]+$' || true
}

# A folder this script may delete: one it made (marker), one an older version
# made (cluster.json), or an empty one.
removable() {
  [[ -e $1/$MARKER || -e $1/cluster.json ]] || [[ -d $1 && -z $(ls -A "$1") ]]
}

# Removes every host, veth and the bridge, whoever made them, and the folders
# named (when removable). Never fails on what is already gone.
teardown() {
  local host dir pids
  for host in $(hosts_present); do
    # Kill until nothing is left: a supervisor may start a rank between rounds.
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      pids=$(namespace_pids "$host")
      [[ -n $pids ]] || break
      # shellcheck disable=SC2086 # one pid per word
      kill -9 $pids 2>/dev/null || true
      sleep 0.05
    done
    ip netns del "$host" 2>/dev/null || true
  done
  # A namespace still held open (an fd, a process) keeps its veth: remove it here.
  for host in $(veths_present); do ip link del "$host" 2>/dev/null || true; done
  ip link del "$BRIDGE" 2>/dev/null || true
  for dir in "$@"; do
    if [[ -n $dir && -e $dir ]]; then
      stop_munged "$dir"
      if removable "$dir"; then rm -rf "$dir"; else echo "cluster.sh: left $dir (not a cluster folder)" >&2; fi
    fi
  done
  rm -f "$STATE_DIR/owner" "$STATE_DIR/dir"
}

start_sshd() {  # HOST DIR
  local host=$1 dir=$2
  # Its own UTS namespace so that `hostname` on the host answers flhI. fd 9
  # (the lock) is closed so the daemon does not hold it for its whole life.
  # shellcheck disable=SC2016 # expanded by that sh, from its arguments
  ip netns exec "$host" unshare --uts sh -c 'hostname "$1" && exec "$2" -f "$3" -E "$4"' \
    sh "$host" "$SSHD" "$dir/$host/sshd_config" "$dir/$host/sshd.log" 9>&-
}

wait_for_port() {  # HOST ADDRESS DIR
  local i
  for i in $(seq 200); do
    if timeout 1 bash -c "exec 3<>/dev/tcp/$2/22" 2>/dev/null; then return 0; fi
    sleep 0.05
  done
  echo "cluster.sh: the sshd of $1 does not answer on $2:22; its log:" >&2
  tail -n 20 "$3/$1/sshd.log" >&2 2>/dev/null || true
  return 1
}

# The unprivileged login, made once per machine. Its password is '*' (no
# password can match) rather than useradd's '!', which sshd without PAM
# takes for a locked account and refuses even with a key.
ensure_test_user() {
  if ! id "$TEST_USER" >/dev/null 2>&1; then
    useradd --system --user-group --shell /bin/bash --home-dir "$TEST_USER_HOME" --create-home \
      --comment "Flotilla test cluster login" "$TEST_USER" ||
      id "$TEST_USER" >/dev/null 2>&1 || die "up: cannot create the user $TEST_USER"
  fi
  usermod -p '*' "$TEST_USER"
  mkdir -p "$TEST_USER_HOME"
  chown "$TEST_USER:" "$TEST_USER_HOME"
  chmod 0700 "$TEST_USER_HOME"
}

write_sshd_config() {  # HOST ADDRESS DIR
  local host=$1 address=$2 dir=$3
  cat >"$dir/$host/sshd_config" <<CONFIG
ListenAddress $address
Port 22
HostKey $dir/$host/host_key
PidFile $dir/$host/sshd.pid
AuthorizedKeysFile $dir/client_key.pub
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
UseDNS no
PrintMotd no
PrintLastLog no
X11Forwarding no
MaxAuthTries 20
MaxStartups 200:30:400
MaxSessions 200
LogLevel VERBOSE
Subsystem sftp internal-sftp
# Each host has a home of its own, as separate machines do; the machine's
# /root/.bashrc (which bash reads for every command sshd runs) stays out of
# the nodes' logins: one such rc ran pyenv for seconds per remote command.
SetEnv HOME=$dir/$host/home${SLURM:+ SLURM_CONF=$dir/slurm/slurm.conf}
CONFIG
}

# Last in the file: a Match block runs to its end.
write_sshd_match() {  # HOST DIR
  printf 'Match User %s\n  SetEnv HOME=%s%s\n' "$TEST_USER" "$2/$1/user-home" \
    "${SLURM:+ SLURM_CONF=$2/slurm/slurm.conf}" >>"$2/$1/sshd_config"
}

# --- SLURM --------------------------------------------------------------------

slurm_tools() {
  local tool
  for tool in munged munge slurmctld slurmd sinfo; do
    command -v "$tool" >/dev/null || {
      echo "cluster.sh: $tool is missing (slurmctld, slurmd, slurm-client, munge)" >&2
      exit 77
    }
  done
}

# munged runs in the root namespaces: its pid file names it; the pid is
# checked to still be a munged before it is killed.
stop_munged() {  # DIR
  local pid
  pid=$(cat "$1/munge/munged.pid" 2>/dev/null) || return 0
  [[ $pid =~ ^[0-9]+$ && $(cat "/proc/$pid/comm" 2>/dev/null) == munged ]] || return 0
  # It writes its seed file as it exits: wait, so that the folder can go.
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 100); do
    alive "$pid" || return 0
    sleep 0.05
  done
  kill -9 "$pid" 2>/dev/null || true
}

write_slurm_conf() {  # DIR COUNT
  local dir=$1 count=$2 i cpus
  cpus=$(nproc)
  {
    cat <<CONF
# The test cluster's slurm.conf (tests/cluster/cluster.sh --slurm).
ClusterName=flotilla-test
SlurmctldHost=flh1($NET.11)
SlurmUser=root
AuthType=auth/munge
# cred_expire: how long a requeued job waits before it runs again (120 s by default).
AuthInfo=socket=$dir/munge/munge.socket,cred_expire=10
CredType=cred/munge
StateSaveLocation=$dir/slurm/state
SlurmdSpoolDir=$dir/slurm/spool-%n
SlurmctldPidFile=$dir/slurm/slurmctld.pid
SlurmdPidFile=$dir/slurm/slurmd-%n.pid
SlurmctldLogFile=$dir/slurm/slurmctld.log
SlurmdLogFile=$dir/slurm/slurmd-%n.log
# No cgroup hierarchy of its own per job: processes are tracked by their
# parentage, as on a site without cgroup support.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SlurmdTimeout=10
KillWait=5
CONF
    for ((i = 1; i <= count; i++)); do
      echo "NodeName=flh$i NodeAddr=$NET.$((10 + i)) CPUs=$cpus State=UNKNOWN"
    done
    echo "PartitionName=$SLURM_PARTITION Nodes=flh[1-$count] Default=YES MaxTime=INFINITE State=UP"
  } >"$dir/slurm/slurm.conf"
}

start_slurmd() {  # HOST DIR
  local host=$1 dir=$2
  mkdir -p "$dir/slurm/spool-$host"
  # `ip netns exec` mounts a fresh /sys, without the machine's cgroup
  # hierarchies, and slurmd will not start without them: mount them again
  # (v1, as the machine has them) in that mount namespace.
  # shellcheck disable=SC2016 # expanded by that sh, from its arguments
  ip netns exec "$host" unshare --uts sh -c '
    mount -t tmpfs -o mode=755 cgroup_root /sys/fs/cgroup || exit 1
    for c in freezer cpuset memory devices systemd; do
      o=$c; [ $c = systemd ] && o=none,name=systemd
      mkdir -p /sys/fs/cgroup/$c && mount -t cgroup -o $o cgroup /sys/fs/cgroup/$c 2>/dev/null
    done
    hostname "$1" && exec slurmd -D -N "$1" -f "$2"' \
    sh "$host" "$dir/slurm/slurm.conf" </dev/null >>"$dir/slurm/slurmd-$host.out" 2>&1 9>&- &
}

stop_slurmd() {  # HOST DIR
  local pid
  pid=$(cat "$2/slurm/slurmd-$1.pid" 2>/dev/null) || die "slurmd: $1 has no slurmd pid file"
  [[ $(cat "/proc/$pid/comm" 2>/dev/null) == slurmd ]] || die "slurmd: $1's slurmd (pid $pid) is not running"
  kill -9 "$pid"
}

# Nodes idle in sinfo: the count.
idle_nodes() {  # DIR
  SLURM_CONF=$1/slurm/slurm.conf ip netns exec flh1 sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | grep -c . || true
}

start_slurm() {  # DIR COUNT
  local dir=$1 count=$2 i
  mkdir -p "$dir/munge" "$dir/munge-key" "$dir/slurm/state"
  chmod 0755 "$dir/munge" "$dir/slurm"
  chmod 0700 "$dir/munge-key"
  dd if=/dev/urandom of="$dir/munge-key/munge.key" bs=1024 count=1 status=none
  chmod 0400 "$dir/munge-key/munge.key"
  munged --force --socket="$dir/munge/munge.socket" --key-file="$dir/munge-key/munge.key" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" \
    --seed-file="$dir/munge-key/seed" </dev/null >>"$dir/munge/munged.out" 2>&1 9>&- || die "up: munged does not start; see $dir/munge/munged.log"
  write_slurm_conf "$dir" "$count"
  # shellcheck disable=SC2016 # expanded by that sh, from its arguments
  ip netns exec flh1 unshare --uts sh -c 'hostname flh1 && exec slurmctld -D -f "$1"' \
    sh "$dir/slurm/slurm.conf" </dev/null >>"$dir/slurm/slurmctld.out" 2>&1 9>&- &
  for ((i = 1; i <= count; i++)); do start_slurmd "flh$i" "$dir"; done
  for i in $(seq 300); do
    (($(idle_nodes "$dir") == count)) && return 0
    sleep 0.1
  done
  echo "cluster.sh: SLURM has $(idle_nodes "$dir") of $count nodes idle after 30 s; its logs:" >&2
  tail -n 20 "$dir/slurm/slurmctld.log" "$dir/slurm/slurmd-flh1.log" >&2 2>/dev/null || true
  return 1
}

up() {
  local count=$1 dir=$2 owner=$3 wait=$4 user=$5 i host address hosts_json=''
  if ! [[ $count =~ ^[1-9][0-9]*$ ]] || ((count < 1 || count > MAX_HOSTS)); then
    die "up: the number of hosts must be 1..$MAX_HOSTS, not '$count'"
  fi
  # Paths go unquoted into sshd_config and JSON: keep them plain.
  [[ $dir =~ ^/[A-Za-z0-9_./-]+$ ]] || die "up: DIR must be an absolute path of [A-Za-z0-9_./-], not '$dir'"
  if [[ -n $owner ]]; then alive "$owner" || die "up: owner pid $owner is not running"; fi
  [[ $user == root || $user == "$TEST_USER" ]] ||
    die "up: FLOTILLA_CLUSTER_USER must be root or $TEST_USER, not '$user'"

  [[ -z $SLURM ]] || slurm_tools  # before anything is made
  acquire "$owner" "$wait"
  teardown "$(recorded_dir)" "$dir"
  [[ ! -e $dir ]] || die "up: $dir exists and is not a test cluster folder; not touching it"
  mkdir -p "$dir" /run/sshd  # sshd wants /run/sshd (privilege separation)
  chmod 0755 "$dir"          # the test user's logins reach their folders through it
  touch "$dir/$MARKER"
  record_owner "$owner" "$dir"
  # Half a cluster is no cluster: whatever fails from here removes it again.
  # shellcheck disable=SC2064 # $dir now: it is a local, gone when the trap runs
  trap "teardown '$dir'" EXIT

  ensure_test_user
  ssh-keygen -q -t ed25519 -N '' -C flotilla-test-client -f "$dir/client_key"
  ip link add "$BRIDGE" type bridge
  ip addr add "$NET.1/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  local penalties=''
  for ((i = 1; i <= count; i++)); do
    host=flh$i
    address=$NET.$((10 + i))
    mkdir -p "$dir/$host/remote" "$dir/$host/home" "$dir/$host/user-home"
    chmod 0755 "$dir/$host"
    chown "$TEST_USER:" "$dir/$host/user-home"
    chmod 0700 "$dir/$host/user-home"
    # The node's folder for Flotilla belongs to whoever the tests log in as.
    chown "$user:" "$dir/$host/remote"
    ip netns add "$host"
    ip link add "flv$i" type veth peer name eth0 netns "$host"
    ip link set "flv$i" master "$BRIDGE" up
    ip -n "$host" addr add "$address/24" dev eth0
    ip -n "$host" link set eth0 up
    ip -n "$host" link set lo up
    ssh-keygen -q -t ed25519 -N '' -C "$host" -f "$dir/$host/host_key"
    write_sshd_config "$host" "$address" "$dir"
    # OpenSSH 9.8+ penalises a source address after failed logins; every test
    # connects from 10.77.0.1, and some fail on purpose.
    if [[ -z $penalties ]]; then
      penalties=no
      if "$SSHD" -t -f "$dir/$host/sshd_config" -o PerSourcePenalties=no 2>/dev/null; then penalties=yes; fi
    fi
    if [[ $penalties == yes ]]; then echo "PerSourcePenalties no" >>"$dir/$host/sshd_config"; fi
    write_sshd_match "$host" "$dir"
    start_sshd "$host" "$dir"
    hosts_json+="${hosts_json:+,}{\"name\":\"$host\",\"address\":\"$address\",\"port\":22,\"user\":\"$user\""
    hosts_json+=",\"remote_dir\":\"$dir/$host/remote\",\"host_key_pub\":\"$dir/$host/host_key.pub\""
    hosts_json+=",\"netns\":\"$host\"}"
  done
  for ((i = 1; i <= count; i++)); do wait_for_port "flh$i" "$NET.$((10 + i))" "$dir"; done
  # The hosts reach each other over the bridge alone (no forwarding). A machine
  # whose bridge traffic goes through a dropping iptables FORWARD chain
  # (br_netfilter) breaks that; say so here rather than in some later test.
  if ((count >= 2)); then
    ip netns exec flh1 timeout 3 bash -c "exec 3<>/dev/tcp/$NET.$((10 + count))/22" 2>/dev/null ||
      die "up: flh1 cannot reach flh$count over $BRIDGE (is net.bridge.bridge-nf-call-iptables=1 with a FORWARD chain that drops?)"
  fi
  local slurm_json=''
  if [[ -n $SLURM ]]; then
    start_slurm "$dir" "$count"
    slurm_json=",\"slurm\":{\"conf\":\"$dir/slurm/slurm.conf\",\"login\":\"flh1\",\"partition\":\"$SLURM_PARTITION\"}"
  fi
  printf '{"hosts":[%s],"key_file":"%s","bridge":"%s"%s}\n' "$hosts_json" "$dir/client_key" "$BRIDGE" \
    "$slurm_json" >"$dir/cluster.json.tmp"
  mv "$dir/cluster.json.tmp" "$dir/cluster.json"
  trap - EXIT
}

down() {  # DIR OWNER FORCE ALL
  local dir=$1 owner=$2 force=$3 all=$4 current
  lock
  current=$(live_owner)
  if [[ -n $current && $current != "$owner" && -z $force ]]; then
    echo "cluster.sh: not torn down: the test cluster belongs to $(describe "$current") (--force to take it)" >&2
    return 0
  fi
  local dirs=("$(recorded_dir)" "$dir")
  if [[ -n $all ]]; then
    # Also the per-process folders of earlier versions, which recorded none.
    for current in /tmp/flotilla-cluster-*; do
      if [[ -e $current ]]; then dirs+=("$current"); fi
    done
  fi
  teardown "${dirs[@]}"
}

# A switch port that drops every frame without a reset or a carrier change:
# nftables' netdev ingress and egress hooks on the host's own interface, in
# its namespace. Its TCP peers see no error, only silence (link down is a
# different fault: the carrier goes). With PEER, only the path between the
# host and that address goes quiet (e.g. the controller's, 10.77.0.1), while
# the host's other traffic, its ranks' among them, flows. Needs nft (Debian's
# nftables).
drop() {  # HOST on|off [PEER]
  local host=$1 peer=${3:-} ingress egress
  command -v nft >/dev/null || die "drop: nft is missing (Debian's nftables)"
  ip netns exec "$host" nft delete table netdev flotilla_drop 2>/dev/null || true
  [[ $2 == on ]] || return 0
  if [[ -n $peer ]]; then
    [[ $peer =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "drop: PEER is an IPv4 address, not '$peer'"
    ingress="ip saddr $peer drop;"
    egress="ip daddr $peer drop;"
  else
    ingress="policy drop;"
    egress="policy drop;"
  fi
  ip netns exec "$host" nft -f - <<RULES
table netdev flotilla_drop {
  chain ingress { type filter hook ingress device eth0 priority 0; $ingress }
  chain egress { type filter hook egress device eth0 priority 0; $egress }
}
RULES
}

rekey() {  # HOST DIR
  local host=$1 dir=$2 pid i
  [[ -d $dir/$host ]] || die "rekey: no host $host in $dir"
  lock
  pid=$(cat "$dir/$host/sshd.pid" 2>/dev/null || true)
  if [[ -n $pid ]]; then
    kill "$pid" 2>/dev/null || true
    # The new sshd binds the same address: start it once the old one is gone.
    for i in $(seq 100); do
      alive "$pid" || break
      sleep 0.05
    done
    ! alive "$pid" || die "rekey: the sshd of $host (pid $pid) does not stop"
  fi
  rm -f "$dir/$host/host_key" "$dir/$host/host_key.pub"
  ssh-keygen -q -t ed25519 -N '' -C "$host-rekeyed" -f "$dir/$host/host_key"
  start_sshd "$host" "$dir"
  wait_for_port "$host" "$(awk '/^ListenAddress/ {print $2}' "$dir/$host/sshd_config")" "$dir"
}

status() {
  local owner
  owner=$(live_owner)
  echo "dir: $(recorded_dir)"
  if [[ -n $owner ]]; then echo "owner: $(describe "$owner")"; else echo "owner: none (anyone may take it)"; fi
  echo "hosts: $(hosts_present | sort -V | tr '\n' ' ')"
}

host_index() {
  [[ $1 =~ ^flh([0-9]+)$ ]] || die "no such host: '$1' (hosts are flh1..flhN)"
  ip netns list 2>/dev/null | awk '{print $1}' | grep -qx "$1" || die "no such host: $1 (is the cluster up?)"
  echo "${BASH_REMATCH[1]}"
}

main() {
  local command=${1:-} index='' dir='' owner='' wait=${FLOTILLA_CLUSTER_WAIT:-300} force='' args=()
  [[ -n $command ]] || usage
  shift
  while (($#)); do
    case $1 in
      --dir) dir=${2:?--dir needs a folder}; shift 2 ;;
      --owner) owner=${2:?--owner needs a pid}; shift 2 ;;
      --wait) wait=${2:?--wait needs seconds}; shift 2 ;;
      --force) force=1; shift ;;
      --slurm) SLURM=1; shift ;;
      -h | --help) usage ;;
      --*) die "unknown option $1" ;;
      *) args+=("$1"); shift ;;
    esac
  done
  [[ -z $owner || $owner =~ ^[0-9]+$ ]] || die "--owner takes a pid, not '$owner'"
  [[ $wait =~ ^[0-9]+$ ]] || die "--wait takes whole seconds, not '$wait'"
  need_root
  case $command in
    up)
      ((${#args[@]} >= 1 && ${#args[@]} <= 2)) || usage
      dir=${dir:-${args[1]:-$DEFAULT_DIR}}
      up "${args[0]}" "$(realpath -m "$dir")" "$owner" "$wait" "${FLOTILLA_CLUSTER_USER:-$TEST_USER}"
      ;;
    down)
      ((${#args[@]} <= 1)) || usage
      dir=${dir:-${args[0]:-$DEFAULT_DIR}}
      down "$(realpath -m "$dir")" "$owner" "$force" ""
      ;;
    down-all)
      ((${#args[@]} == 0)) || usage
      down "$DEFAULT_DIR" "$owner" "$force" all
      ;;
    status) status ;;
    pids)
      ((${#args[@]} == 1)) || usage
      host_index "${args[0]}" >/dev/null
      namespace_pids "${args[0]}"
      ;;
    link)
      ((${#args[@]} == 2)) || usage
      [[ ${args[1]} == up || ${args[1]} == down ]] || die "link: up or down, not '${args[1]}'"
      index=$(host_index "${args[0]}")
      ip link set "flv$index" "${args[1]}"
      ;;
    drop)
      ((${#args[@]} == 2 || ${#args[@]} == 3)) || usage
      [[ ${args[1]} == on || ${args[1]} == off ]] || die "drop: on or off, not '${args[1]}'"
      host_index "${args[0]}" >/dev/null
      drop "${args[0]}" "${args[1]}" "${args[2]:-}"
      ;;
    rekey)
      ((${#args[@]} >= 1 && ${#args[@]} <= 2)) || usage
      dir=${dir:-${args[1]:-$(recorded_dir)}}
      rekey "${args[0]}" "$(realpath -m "${dir:-$DEFAULT_DIR}")"
      ;;
    slurmd)
      ((${#args[@]} == 2)) || usage
      host_index "${args[0]}" >/dev/null
      dir=$(realpath -m "${dir:-$(recorded_dir)}")
      case ${args[1]} in
        stop) stop_slurmd "${args[0]}" "$dir" ;;
        start) start_slurmd "${args[0]}" "$dir" ;;
        *) die "slurmd: stop or start, not '${args[1]}'" ;;
      esac
      ;;
    *) usage ;;
  esac
}

main "$@"
