#!/usr/bin/env bash
# The README's first command: install the build packages if missing, build tern (release) and
# run it. With no arguments tern runs its built-in demo; arguments are passed to tern.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec cargo run --release -q -p tern -- "$@"
