#!/usr/bin/env bash
# Draw a `tern bcache experiment` JSON (e1..e9) as a PNG: scripts/bcache-plot.sh -o OUT.png E.json
# matplotlib from .venv-plot at the repository root (scripts/plot-python.sh).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
exec "$HERE/plot-python.sh" "$HERE/bcache-plot.py" "$@"
