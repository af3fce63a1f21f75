#!/usr/bin/env bash
# Run the p4runtime-shell tests against a tern binary: tests/p4runtime/run.sh path/to/tern
# Creates (or reuses) the virtualenv .venv-p4rt at the repository root.
set -euo pipefail
if [ $# -lt 1 ]; then
    echo "usage: $0 TERN_BINARY [pytest args...]" >&2
    exit 2
fi
TERN_BIN=$(realpath "$1")
shift
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
. "$ROOT/tests/venv-p4rt.sh"   # sets VENV
export TERN_BIN
# pytest's temporary folders (tmp_path) and cache stay out of /tmp and the tree, and go at exit.
BASETEMP=$(mktemp -d)
trap 'rm -rf "$BASETEMP"' EXIT
trap 'exit 143' INT TERM HUP
"$VENV/bin/python" -m pytest -q -p no:cacheprovider --basetemp "$BASETEMP" "$HERE" "$@"
