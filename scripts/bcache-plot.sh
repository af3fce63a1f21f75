#!/usr/bin/env bash
# Draw a `tern bcache experiment` JSON (e1..e9) as a PNG: scripts/bcache-plot.sh -o OUT.png E.json
# Creates (or reuses) the virtualenv .venv-plot at the repository root with matplotlib.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
VENV="$ROOT/.venv-plot"
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import matplotlib" 2>/dev/null; then
    "$VENV/bin/pip" install -q matplotlib
fi
exec "$VENV/bin/python" "$HERE/bcache-plot.py" "$@"
