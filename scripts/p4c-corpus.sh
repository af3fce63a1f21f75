#!/usr/bin/env bash
# Measure tern's compiler on p4c's own v1model STF corpus.
#
# Usage: scripts/p4c-corpus.sh DIR [NAME-FILTER]
#   DIR          a p4c checkout (or any folder) holding testdata/p4_16_samples/, or that
#                samples folder itself; fetch it yourself (p4c's files are not part of tern)
#   NAME-FILTER  optional grep -E pattern on program names (e.g. 'gauntlet_|issue2')
#   TERN=path    the tern binary (default: target/release/tern, else target/debug/tern,
#                else `tern` on PATH)
#
# The programs are chosen the way p4c's BMv2 back end chooses its v1model suite
# (backends/bmv2/CMakeLists.txt): every `*-bmv2.p4` whose text matches `include.*v1model.p4`;
# of those, the ones with a `.stf` beside it (the packet tests). A `*-bmv2.p4` with an `.stf`
# that does not include v1model.p4 (its own package, e.g. gauntlet_optional-bmv2) is listed as
# `skipped` and not counted: p4c does not run it on simple_switch either.
# Each program is compiled with `tern compile` and, when it compiles, run with
# `tern test prog.json prog.stf`. Prints one row per program (passed / failed / refused, with
# the first line of the reason) and a closing count line. A program on p4c's own BMv2 XFAIL
# list (it fails on simple_switch as well) that does not pass is counted as `xfail`, not as
# failed/refused. Exit status 0 whatever the counts (it measures, it does not gate).
set -uo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
dir=${1:?usage: scripts/p4c-corpus.sh DIR [NAME-FILTER]}
filter=${2:-}

if [[ -d "$dir/testdata/p4_16_samples" ]]; then
    samples="$dir/testdata/p4_16_samples"
elif [[ -d "$dir/p4_16_samples" ]]; then
    samples="$dir/p4_16_samples"
elif [[ -d "$dir" ]]; then
    samples="$dir"
else
    echo "p4c-corpus: no folder $dir" >&2
    exit 2
fi

tern=${TERN:-}
if [[ -z "$tern" ]]; then
    for c in "$root/target/release/tern" "$root/target/debug/tern"; do
        if [[ -x "$c" ]]; then
            tern=$c
            break
        fi
    done
fi
tern=${tern:-tern}
if ! command -v "$tern" >/dev/null 2>&1; then
    echo "p4c-corpus: no tern binary (build it: cargo build -p tern, or set TERN=...)" >&2
    exit 2
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/p4c-corpus.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM

# The first line that says what went wrong: an `error:` line, else a failure line, else the
# first non-empty line.
reason() {
    local f=$1 line
    line=$(grep -m1 -E 'error|FAIL|fail|mismatch|expected|unexpected|missing' "$f" || true)
    [[ -z "$line" ]] && line=$(grep -m1 -v '^[[:space:]]*$' "$f" || true)
    line=${line//$samples\//}
    printf '%s' "${line:0:150}"
}

# p4c's XFAIL_TESTS for the bmv2 v1model suite (backends/bmv2/CMakeLists.txt): programs p4c
# expects to fail on simple_switch (unknown externs, stack.next reads, tables BMv2 cannot
# implement, error-typed keys, computations in checksum controls, non-tuple hash inputs).
p4c_xfail=" issue907-bmv2 issue986-bmv2 issue1062-bmv2 issue1193-bmv2 issue1205-bmv2 issue692-bmv2
 issue1765-bmv2 issue1765-1-bmv2 issue1882-bmv2 issue1882-1-bmv2 issue2664-bmv2
 hashing-non-tuple-bmv2 issue584-1-bmv2 "
p4c_xfail=${p4c_xfail//$'\n'/ }

# Counts a result: a program on p4c's XFAIL list that does not pass is `xfail`.
row() {
    local name=$1 result=$2 why=${3:-}
    if [[ $result != passed && $p4c_xfail == *" $name "* ]]; then
        xfail=$((xfail + 1))
        why="($result on tern; p4c's BMv2 suite expects it to fail too) $why"
        result=xfail
    elif [[ $result == passed ]]; then
        passed=$((passed + 1))
    elif [[ $result == failed ]]; then
        failed=$((failed + 1))
    else
        refused=$((refused + 1))
    fi
    printf '%-50s %-8s %s\n' "$name" "$result" "${why:0:170}"
}

passed=0 failed=0 refused=0 xfail=0 skipped=0 total=0
printf '%-50s %-8s %s\n' "program" "result" "reason"
while IFS= read -r p4; do
    name=$(basename "$p4" .p4)
    stf="${p4%.p4}.stf"
    [[ -f "$stf" ]] || continue
    if [[ -n "$filter" ]] && ! grep -qE "$filter" <<<"$name"; then
        continue
    fi
    if ! grep -qE 'include.*v1model\.p4' "$p4"; then
        skipped=$((skipped + 1))
        printf '%-50s %-8s %s\n' "$name" "skipped" "not a v1model program (no include of v1model.p4)"
        continue
    fi
    total=$((total + 1))
    json="$work/$name.json"
    if ! timeout 120 "$tern" compile "$p4" -o "$json" >"$work/out" 2>&1; then
        row "$name" refused "$(reason "$work/out")"
        continue
    fi
    if timeout 120 "$tern" test "$json" "$stf" >"$work/out" 2>&1; then
        row "$name" passed
    else
        row "$name" failed "$(reason "$work/out")"
    fi
done < <(find "$samples" -maxdepth 1 -name '*-bmv2.p4' | LC_ALL=C sort)

pct=0
if ((total > 0)); then
    pct=$(awk -v p="$passed" -v t="$total" 'BEGIN { printf "%.1f", 100 * p / t }')
fi
echo "total $total: $passed passed, $failed failed, $refused refused, $xfail xfail ($pct % passed); $skipped skipped (not v1model)"
