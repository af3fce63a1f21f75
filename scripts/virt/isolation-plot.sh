#!/usr/bin/env bash
# Draw `tern virt bench --isolation` output: scripts/virt/isolation-plot.sh DIR
# (DIR/isolation.json -> DIR/isolation.png). Creates (or reuses) the virtualenv .venv-plot at
# the repository root with matplotlib, as scripts/kv-plot.sh does.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
VENV="$ROOT/.venv-plot"
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import matplotlib" 2>/dev/null; then
    "$VENV/bin/pip" install -q matplotlib
fi
exec "$VENV/bin/python" "$HERE/isolation-plot.py" "$@"
