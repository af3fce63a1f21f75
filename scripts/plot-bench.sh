#!/usr/bin/env bash
# Plot `tern bench` JSON reports (bench/data/*.json) to bench/plot_*.png with matplotlib in a
# venv this script creates (.venv-plot at the repository root).
# Usage: scripts/plot-bench.sh   (after bench/run_scaling.sh has written bench/data/)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv-plot/bin/python ]; then
    python3 -m venv .venv-plot
    .venv-plot/bin/pip install --quiet matplotlib
fi
exec .venv-plot/bin/python scripts/plot_bench.py bench/data bench
