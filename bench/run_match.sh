#!/bin/sh
# Match-engine benchmarks (bench/RESULTS.md, "Match engines"): run from the repository root.
#   bench/run_match.sh [base-commit]
# Builds the examples of this tree and of <base-commit> (default: 0545ed3, the last commit
# before tern-match; extracted with `git archive` under /tmp/tern-bench, with this tree's
# router_routes.rs copied in — it uses only the public Runtime/PacketPath API), then runs
# before/after pairs alternately, three times, and the engine micro-benchmark once.
set -eu
BASE=${1:-0545ed3}
ROOT=$(pwd)
WORK=/tmp/tern-bench
mkdir -p "$WORK/base"
ln -sfn "$ROOT/../shared" "$WORK/shared"
git archive "$BASE" | tar -x -C "$WORK/base"
cp crates/tern-dataplane/examples/router_routes.rs "$WORK/base/crates/tern-dataplane/examples/"
(cd "$WORK/base" && CARGO_TARGET_DIR="$WORK/target" cargo build -q --release -p tern-dataplane \
    --example router_pps --example router_routes)
cargo build -q --release -p tern-dataplane --example router_pps --example router_routes
cargo build -q --release -p tern-match --example match_bench
OLD="$WORK/target/release/examples"
NEW="$ROOT/target/release/examples"
echo "## machine"; echo "nproc $(nproc); $(grep -m1 'model name' /proc/cpuinfo)"; date -u
echo "commit $(git rev-parse --short HEAD) vs base $BASE"
for rep in 1 2 3; do
    echo "## rep $rep router_pps (3 entries, 200k packets)"
    printf 'before: '; "$OLD/router_pps"
    printf 'after:  '; "$NEW/router_pps"
    echo "## rep $rep router_routes before"; "$OLD/router_routes" 1 1000 10000
    echo "## rep $rep router_routes after"; "$NEW/router_routes" 1 1000 10000
done
echo "## router_routes after, large"; "$NEW/router_routes" 100000 1000000
echo "## match_bench"; "$NEW/match_bench"
