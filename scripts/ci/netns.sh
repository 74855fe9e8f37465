#!/usr/bin/env bash
# Network namespaces for emulated hosts, by name, idempotent. Needs root and iproute2.
#
#   netns.sh bridge-up BRIDGE CIDR      # bridge in the root namespace with address CIDR (10.213.0.254/24)
#   netns.sh add NAME BRIDGE CIDR       # namespace NAME, lo up, veth "eth0" with CIDR, on BRIDGE,
#                                       # default route via the bridge address (if given as GW=...)
#   netns.sh del NAME                   # deletes the namespace (its veth pair goes with it)
#   netns.sh bridge-down BRIDGE         # deletes the bridge
#   netns.sh tidy                       # unmounts and removes /run/netns when no namespace is left
#   netns.sh exec NAME CMD...           # runs CMD in NAME's network namespace only (nsenter --net;
#                                       # not `ip netns exec`, which remounts /sys and breaks slurmd)
#
# Processes inside a namespace are not tracked here: stop them by pid before `del`.
set -euo pipefail
CI_NAME=netns
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

[[ $(id -u) -eq 0 ]] || ci_die "needs root"

link_exists() { ip link show "$1" >/dev/null 2>&1; }

# Root-side veth name for namespace NAME: at most 15 characters (IFNAMSIZ - 1), unique per name.
veth_name() {
  local name=$1
  if (( ${#name} <= 13 )); then echo "v-$name"; else echo "v$(echo -n "$name" | md5sum | head -c 12)"; fi
}

cmd_bridge_up() {
  local br=$1 cidr=$2
  link_exists "$br" || ip link add "$br" type bridge
  ip addr replace "$cidr" dev "$br"
  ip link set "$br" up
}

cmd_add() {
  local name=$1 br=$2 cidr=$3 veth
  veth=$(veth_name "$name")
  [[ -e "/run/netns/$name" ]] || ip netns add "$name"
  ip -n "$name" link set lo up
  if ! ip -n "$name" link show eth0 >/dev/null 2>&1; then
    link_exists "$veth" && ip link del "$veth"
    ip link add "$veth" type veth peer name eth0 netns "$name"
  fi
  ip link set "$veth" master "$br"
  ip link set "$veth" up
  ip -n "$name" addr replace "$cidr" dev eth0
  ip -n "$name" link set eth0 up
  if [[ -n "${GW:-}" ]]; then
    ip -n "$name" route replace default via "$GW" dev eth0
  fi
}

cmd_del() {
  local name=$1 veth
  veth=$(veth_name "$name")
  [[ -e "/run/netns/$name" ]] && ip netns del "$name"
  # Deleting the namespace removes the pair asynchronously: the link may vanish under us.
  link_exists "$veth" && { ip link del "$veth" 2>/dev/null || true; }
  return 0
}

cmd_bridge_down() {
  link_exists "$1" && ip link del "$1"
  return 0
}

cmd_tidy() {
  if [[ -d /run/netns ]] && [[ -z "$(ls -A /run/netns)" ]]; then
    umount /run/netns 2>/dev/null || true
    rmdir /run/netns 2>/dev/null || true
  fi
  return 0
}

cmd_exec() {
  local name=$1
  shift
  exec nsenter --net="/run/netns/$name" "$@"
}

op=${1:-}
shift || true
case "$op" in
  bridge-up) [[ $# -eq 2 ]] || ci_die "usage: bridge-up BRIDGE CIDR"; cmd_bridge_up "$@" ;;
  add) [[ $# -eq 3 ]] || ci_die "usage: add NAME BRIDGE CIDR"; cmd_add "$@" ;;
  del) [[ $# -eq 1 ]] || ci_die "usage: del NAME"; cmd_del "$@" ;;
  bridge-down) [[ $# -eq 1 ]] || ci_die "usage: bridge-down BRIDGE"; cmd_bridge_down "$@" ;;
  tidy) cmd_tidy ;;
  exec) [[ $# -ge 2 ]] || ci_die "usage: exec NAME CMD..."; cmd_exec "$@" ;;
  *) ci_die "usage: netns.sh bridge-up|add|del|bridge-down|tidy|exec ..." ;;
esac
