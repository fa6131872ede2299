#!/usr/bin/env bash
# A test cluster on one machine: N hosts as network namespaces flh1..flhN on
# a bridge, each with its own address and its own sshd (own host key, one
# client key authorised for all). Needs root. Everything it makes it removes
# again with `down`, and `up` first removes what a crashed run left.
#
#   cluster.sh up N [DIR]      make the hosts; writes DIR/cluster.json
#   cluster.sh down [DIR]      remove every host, the bridge and DIR
#   cluster.sh down-all        the same for every cluster folder in /tmp
#   cluster.sh pids HOST       pids running inside HOST's namespace
#   cluster.sh link HOST up|down
#   cluster.sh rekey HOST [DIR]  new host key, sshd restarted
set -euo pipefail

BRIDGE=flbr0
NET=10.77.0
DEFAULT_DIR=/tmp/flotilla-cluster

need_root() {
  if [[ $(id -u) -ne 0 ]]; then
    echo "cluster.sh: needs root (network namespaces, veth pairs, sshd)" >&2
    exit 77
  fi
}

hosts_present() { ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^flh[0-9]+$' || true; }

start_sshd() {  # HOST DIR
  local host=$1 dir=$2
  ip netns exec "$host" /usr/sbin/sshd -f "$dir/$host/sshd_config" -E "$dir/$host/sshd.log"
}

down() {
  local dir=${1:-$DEFAULT_DIR} host
  for host in $(hosts_present); do
    ip netns pids "$host" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$host" 2>/dev/null || true
  done
  for link in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E '^flv[0-9]+$' || true); do
    ip link del "$link" 2>/dev/null || true
  done
  ip link del "$BRIDGE" 2>/dev/null || true
  rm -rf "$dir"
}

up() {
  local count=$1 dir=${2:-$DEFAULT_DIR} i host address
  down "$dir"
  mkdir -p "$dir" /run/sshd
  ssh-keygen -q -t ed25519 -N '' -C flotilla-test-client -f "$dir/client_key"
  ip link add "$BRIDGE" type bridge
  ip addr add "$NET.1/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  local json_hosts=()
  for ((i = 1; i <= count; i++)); do
    host=flh$i
    address=$NET.$((10 + i))
    mkdir -p "$dir/$host/remote"
    ip netns add "$host"
    ip link add "flv$i" type veth peer name eth0 netns "$host"
    ip link set "flv$i" master "$BRIDGE" up
    ip -n "$host" addr add "$address/24" dev eth0
    ip -n "$host" link set eth0 up
    ip -n "$host" link set lo up
    ssh-keygen -q -t ed25519 -N '' -C "$host" -f "$dir/$host/host_key"
    cat >"$dir/$host/sshd_config" <<CONFIG
ListenAddress $address
Port 22
HostKey $dir/$host/host_key
PidFile $dir/$host/sshd.pid
AuthorizedKeysFile $dir/client_key.pub
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
MaxStartups 100:30:200
MaxSessions 100
LogLevel VERBOSE
Subsystem sftp internal-sftp
CONFIG
    start_sshd "$host" "$dir"
    json_hosts+=("{\"name\":\"$host\",\"address\":\"$address\",\"port\":22,\"user\":\"root\",\"remote_dir\":\"$dir/$host/remote\",\"host_key_pub\":\"$dir/$host/host_key.pub\",\"netns\":\"$host\"}")
  done
  for ((i = 1; i <= count; i++)); do
    address=$NET.$((10 + i))
    for _ in $(seq 100); do
      if timeout 1 bash -c "exec 3<>/dev/tcp/$address/22" 2>/dev/null; then continue 2; fi
      sleep 0.1
    done
    echo "cluster.sh: sshd of flh$i does not answer on $address:22" >&2
    exit 1
  done
  local joined
  joined=$(IFS=,; echo "${json_hosts[*]}")
  printf '{"hosts":[%s],"key_file":"%s","bridge":"%s"}\n' "$joined" "$dir/client_key" "$BRIDGE" \
    >"$dir/cluster.json"
}

rekey() {
  local host=$1 dir=${2:-$DEFAULT_DIR}
  kill "$(cat "$dir/$host/sshd.pid")" 2>/dev/null || true
  rm -f "$dir/$host/host_key" "$dir/$host/host_key.pub"
  ssh-keygen -q -t ed25519 -N '' -C "$host-rekeyed" -f "$dir/$host/host_key"
  sleep 0.2
  start_sshd "$host" "$dir"
}

need_root
command=${1:-}
shift || true
case $command in
  up) up "$@" ;;
  down) down "$@" ;;
  down-all)  # every cluster of this script, whatever its folder
    down
    rm -rf /tmp/flotilla-cluster-*
    ;;
  pids) ip netns pids "$1" ;;
  link) ip link set "flv${1#flh}" "$2" ;;
  rekey) rekey "$@" ;;
  *)
    echo "usage: cluster.sh up N [DIR] | down [DIR] | pids HOST | link HOST up|down | rekey HOST [DIR]" >&2
    exit 2
    ;;
esac
