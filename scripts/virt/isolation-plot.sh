#!/usr/bin/env bash
# Draw `tern virt bench --isolation` output: scripts/virt/isolation-plot.sh DIR
# (DIR/isolation.json -> DIR/isolation.png). matplotlib from .venv-plot at the repository root
# (scripts/plot-python.sh).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
exec "$HERE/../plot-python.sh" "$HERE/isolation-plot.py" "$@"
