#!/usr/bin/env bash
# Plot `tern bench` JSON reports (bench/data/*.json) to bench/plot_*.png with matplotlib from
# .venv-plot at the repository root (scripts/plot-python.sh).
# Usage: scripts/plot-bench.sh   (after bench/run_scaling.sh has written bench/data/)
set -euo pipefail
cd "$(dirname "$0")/.."
exec scripts/plot-python.sh scripts/plot_bench.py bench/data bench
