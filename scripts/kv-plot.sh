#!/usr/bin/env bash
# Draw tern kv JSON reports as PNGs: scripts/kv-plot.sh -o OUT.png REPORT.json
# (a `tern kv bench` report, a rotation report, or an experiment summary.json).
# matplotlib from .venv-plot at the repository root (scripts/plot-python.sh).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
exec "$HERE/plot-python.sh" "$HERE/kv-plot.py" "$@"
