# Shared by scripts/virt/scenario.sh, scripts/virt/bench.sh and scripts/virt/veth-bench.sh (sourced): hosts in network
# namespaces on veth pairs, and the teardown of everything a run made. The caller sets P (the
# prefix of its namespaces), SW (the switch's pid, or empty) and HELPERS (other pids).

# attach_host NS SWITCH_NS SWITCH_IF MAC ADDR/PLEN: namespace NS whose eth0 (MAC, ADDR) is
# paired with SWITCH_IF in SWITCH_NS; IPv6 off, everything up.
attach_host() {
  local ns=$1 swns=$2 swif=$3
  ip netns add "$ns"
  ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
  ip -n "$swns" link add "$swif" type veth peer name eth0 netns "$ns"
  ip -n "$ns" link set eth0 address "$4"
  ip -n "$ns" addr add "$5" dev eth0
  ip -n "$ns" link set lo up
  ip -n "$ns" link set eth0 up
  ip -n "$swns" link set "$swif" up
}

# stop_pid PID TENTHS: TERM, up to TENTHS tenths of a second to exit, then KILL; reaped.
stop_pid() {
  local p=$1 i
  kill -TERM "$p" 2>/dev/null
  for i in $(seq "$2"); do
    kill -0 "$p" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$p" 2>/dev/null
  wait "$p" 2>/dev/null
}

# delete_run_netns: kill what is left in the run's namespaces (prefix P) and delete them
# (their veths go with them).
delete_run_netns() {
  local ns
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$P-"); do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null
    ip netns del "$ns" 2>/dev/null
  done
}

# virt_teardown: stop the helpers and the switch (TERM, then KILL after 5 s), kill what is
# left in the run's namespaces and delete them (their veths go with them).
virt_teardown() {
  local p
  for p in "${HELPERS[@]}"; do kill -TERM "$p" 2>/dev/null; done
  if [[ -n $SW ]]; then
    stop_pid "$SW" 50
    SW=
  fi
  delete_run_netns
  HELPERS=()
}
