#!/usr/bin/env bash
# Installs the Debian 12 packages tern needs, only those missing.
#   scripts/setup.sh          build packages: Debian's RocksDB and libclang (tern-kv links the
#                             system librocksdb instead of building the bundled copy, 17-34 min)
#   scripts/setup.sh --test   also what the test suite uses: iputils-ping, ethtool and mininet
#                             (live-interface tests in network namespaces), python3-venv (the
#                             p4runtime-shell/PTF and plot virtual environments)
set -euo pipefail
pkgs=(librocksdb-dev clang libclang-dev pkg-config)
if [ "${1:-}" = "--test" ]; then
    pkgs+=(iputils-ping ethtool mininet python3-venv)
fi
need=()
for p in "${pkgs[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ "${#need[@]}" -gt 0 ]; then
    printf '\n==> installing system packages: %s\n' "${need[*]}"
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
