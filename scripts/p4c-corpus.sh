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
# Every `*-bmv2.p4` with a `.stf` beside it (p4c's v1model programs with packet tests) is
# compiled with `tern compile` and, when it compiles, run with `tern test prog.json prog.stf`.
# Prints one row per program (passed / failed / refused, with the first line of the reason)
# and a closing count line. Exit status 0 whatever the counts (it measures, it does not gate).
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

passed=0 failed=0 refused=0 total=0
printf '%-50s %-8s %s\n' "program" "result" "reason"
while IFS= read -r p4; do
    name=$(basename "$p4" .p4)
    stf="${p4%.p4}.stf"
    [[ -f "$stf" ]] || continue
    if [[ -n "$filter" ]] && ! grep -qE "$filter" <<<"$name"; then
        continue
    fi
    total=$((total + 1))
    json="$work/$name.json"
    if ! timeout 120 "$tern" compile "$p4" -o "$json" >"$work/out" 2>&1; then
        refused=$((refused + 1))
        printf '%-50s %-8s %s\n' "$name" "refused" "$(reason "$work/out")"
        continue
    fi
    if timeout 120 "$tern" test "$json" "$stf" >"$work/out" 2>&1; then
        passed=$((passed + 1))
        printf '%-50s %-8s\n' "$name" "passed"
    else
        failed=$((failed + 1))
        printf '%-50s %-8s %s\n' "$name" "failed" "$(reason "$work/out")"
    fi
done < <(find "$samples" -maxdepth 1 -name '*-bmv2.p4' | LC_ALL=C sort)

pct=0
if ((total > 0)); then
    pct=$(awk -v p="$passed" -v t="$total" 'BEGIN { printf "%.1f", 100 * p / t }')
fi
echo "total $total: $passed passed, $failed failed, $refused refused ($pct % passed)"
