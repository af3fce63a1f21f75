# Sourced by the Python test scripts (tests/p4runtime, tests/ptf, tests/tutorial) with ROOT set
# to the repository root: makes sure the virtualenv $ROOT/.venv-p4rt holds the pinned client
# packages they use (p4runtime-shell, which brings grpc; pytest; ptf; scapy) and sets VENV.
VENV="$ROOT/.venv-p4rt"
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import p4runtime_sh, grpc, pytest, ptf, scapy" 2>/dev/null; then
    "$VENV/bin/pip" install -q "p4runtime-shell==0.0.6" pytest "ptf==0.12.0" "scapy==2.8.0"
fi
