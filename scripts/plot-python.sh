#!/usr/bin/env bash
# Run a plotting script with matplotlib: scripts/plot-python.sh SCRIPT.py [ARGS...]
# Creates (or reuses) the virtualenv .venv-plot at the repository root and installs matplotlib
# into it when missing; the plot wrappers (kv-plot.sh, bcache-plot.sh, plot-bench.sh,
# virt/isolation-plot.sh) all go through here.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV="$ROOT/.venv-plot"
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import matplotlib" 2>/dev/null; then
    "$VENV/bin/pip" install -q matplotlib
fi
exec "$VENV/bin/python" "$@"
