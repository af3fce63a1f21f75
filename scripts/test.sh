#!/usr/bin/env bash
# tern's whole test suite, from a fresh Debian 12 machine with the Rust toolchain.
# Installs what the suite needs (system packages), then runs format, lint and all tests.
# Usage: scripts/test.sh            (CI calls this through .ci/run)
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\n==> %s\n' "$*"; }

# --- system packages -------------------------------------------------------------------
# librocksdb-dev + libclang: tern-kv links Debian's RocksDB (the bundled build takes 30 min).
need=()
for p in librocksdb-dev clang libclang-dev pkg-config; do
    dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ "${#need[@]}" -gt 0 ]; then
    log "installing system packages: ${need[*]}"
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

# --- Rust components ----------------------------------------------------------------------
if command -v rustup >/dev/null 2>&1; then
    rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt
    rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy
fi

log "cargo fmt --check"
cargo fmt --all -- --check

log "cargo clippy (warnings are errors)"
cargo clippy --workspace --all-targets --quiet -- -D warnings

log "cargo test"
mkdir -p target
set +e
cargo test --workspace --no-fail-fast 2>&1 | tee target/test-output.txt
status=${PIPESTATUS[0]}
set -e

# One closing line for the whole suite, summed over every test binary.
passed=$(grep -Eo '[0-9]+ passed;' target/test-output.txt | awk '{s+=$1} END {print s+0}')
failed=$(grep -Eo '[0-9]+ failed;' target/test-output.txt | awk '{s+=$1} END {print s+0}')
ignored=$(grep -Eo '[0-9]+ ignored;' target/test-output.txt | awk '{s+=$1} END {print s+0}')
echo
echo "tern: ${passed} passed, ${failed} failed, ${ignored} skipped"
exit "$status"
