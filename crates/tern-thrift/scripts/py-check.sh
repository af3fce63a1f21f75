#!/bin/sh
# Optional interop check: Apache Thrift's Python library (PyPI `thrift`, the stack BMv2's
# simple_switch_CLI uses) against tern's server, with Python code generated from idl/.
# Everything lives under the workspace's target/ directory.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
target=$(cd "$here/../.." && pwd)/target
[ -x "$target/pyenv/bin/python" ] || python3 -m venv "$target/pyenv"
"$target/pyenv/bin/python" -c 'import thrift' 2>/dev/null || "$target/pyenv/bin/pip" install -q 'thrift==0.16.0'
rm -rf "$target/pygen" && mkdir -p "$target/pygen"
for f in "$here"/idl/*.thrift; do thrift --gen py -out "$target/pygen" "$f"; done
cd "$here" && cargo test -p tern-thrift --test python_client -- --ignored --nocapture
