#!/usr/bin/env bash
# What a test run left behind: processes, network namespaces, network interfaces, temporary
# files. scripts/test.sh takes a snapshot before the tests and checks against it after them.
#
#   scripts/leftovers.sh snapshot STATE_DIR          record what exists now
#   scripts/leftovers.sh check STATE_DIR SCRATCH ROOT
#       lists what appeared since the snapshot: network namespaces, interfaces in this
#       namespace, processes running a program from ROOT (the checkout: its target/ binaries,
#       its virtual environments, its scripts) or from SCRATCH (the suite's TMPDIR), and
#       anything left in SCRATCH. Each leftover is printed, then removed (processes killed, namespaces and
#       interfaces deleted, SCRATCH emptied); exit status 1 if there was any, 0 otherwise.
set -uo pipefail

netns_names() { ip netns list 2>/dev/null | awk '{print $1}' | sort; }
link_names() { ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | sort; }

# PIDs (other than this script's own ancestry) whose executable or program name (argv[0], e.g. a
# virtual environment's python) lies in one of the given folders. Arguments do not count: a
# compiler building into the checkout's target/ is not something a test left behind.
procs_from() {
    local pid exe cmd arg0 dir
    local -A mine=()
    pid=$$
    while [ -n "$pid" ] && [ "$pid" != 0 ]; do
        mine[$pid]=1
        pid=$(awk '/^PPid:/ {print $2}' "/proc/$pid/status" 2>/dev/null)
    done
    for d in /proc/[0-9]*; do
        pid=${d#/proc/}
        [ -n "${mine[$pid]:-}" ] && continue
        exe=$(readlink "$d/exe" 2>/dev/null) || continue
        cmd=$(tr '\0' ' ' <"$d/cmdline" 2>/dev/null)
        arg0=$(tr '\0' '\n' <"$d/cmdline" 2>/dev/null | head -n 1)
        for dir in "$@"; do
            case "$exe $arg0" in
            *"$dir/"*)
                echo "$pid $cmd"
                break
                ;;
            esac
        done
    done
}

case "${1:-}" in
snapshot)
    state=$2
    mkdir -p "$state"
    netns_names >"$state/netns"
    link_names >"$state/links"
    ;;
check)
    state=$2 scratch=$3 root=$4
    found=0
    while read -r ns; do
        [ -z "$ns" ] && continue
        echo "leftover network namespace: $ns"
        ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
        ip netns del "$ns" 2>/dev/null
        found=1
    done < <(comm -13 "$state/netns" <(netns_names))
    while read -r link; do
        [ -z "$link" ] && continue
        echo "leftover network interface: $link"
        ip link del "$link" 2>/dev/null
        found=1
    done < <(comm -13 "$state/links" <(link_names))
    while read -r pid cmd; do
        [ -z "$pid" ] && continue
        echo "leftover process $pid: $cmd"
        kill -9 "$pid" 2>/dev/null
        found=1
    done < <(procs_from "$root" "$scratch")
    if [ -d "$scratch" ] && [ -n "$(ls -A "$scratch")" ]; then
        echo "leftover temporary files in the suite's TMPDIR:"
        ls -A "$scratch" | sed 's/^/  /'
        rm -rf "${scratch:?}"/* "${scratch:?}"/.[!.]* 2>/dev/null
        found=1
    fi
    if [ "$found" -eq 0 ]; then
        echo "leftovers: none (processes, namespaces, interfaces, temporary files)"
    fi
    exit "$found"
    ;;
*)
    echo "usage: $0 snapshot STATE_DIR | check STATE_DIR SCRATCH ROOT" >&2
    exit 2
    ;;
esac
