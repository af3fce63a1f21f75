"""p4runtime-shell (PyPI) against `tern virt run --grpc-addr`: each device of a virtual switch
is its own P4Runtime device id; the shell drives one without touching the other."""

import collections
import contextlib
import os
import socket
import struct
import subprocess
import time
from pathlib import Path

import grpc
import pytest
import p4runtime_sh.shell as sh
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

ROOT = Path(__file__).resolve().parents[2]
L2 = ROOT / "p4/virt/l2_switch.p4"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(d, tokens="", extra=()):
    (d / "virt.json").write_text(
        '{ "devices": ['
        f' {{ "id": 1, "program": "{L2}", "owner": "alice", "ports": {{ "1": "phys:1", "100": "cpu" }} }},'
        f' {{ "id": 2, "program": "{L2}", "owner": "bob", "ports": {{ "4": "phys:4" }} }} ],'
        f' "rules": [ {{ "port": 1, "device": 1 }} ] {tokens} }}'
    )
    # An empty pcap input: the run serves P4Runtime during --wait, then reads it and ends.
    (d / "p1_in.pcap").write_bytes(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
    port = free_port()
    addr = f"127.0.0.1:{port}"
    proc = subprocess.Popen(
        [os.environ["TERN_BIN"], "virt", "run", str(d / "virt.json"), "-i", "1@p1",
         "--pcap-dir", str(d), "--wait", "600", "--grpc-addr", addr, *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.time() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            if proc.poll() is not None or time.time() > deadline:
                proc.kill()
                raise RuntimeError("tern virt run did not start: " + proc.stderr.read().decode())
            time.sleep(0.1)
    return proc, addr


def stop(proc):
    alive = proc.poll() is None
    proc.terminate()
    proc.wait(timeout=10)
    assert alive, "the switch must still be running after all tests"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    proc, addr = start(tmp_path_factory.mktemp("virt-p4rt"))
    try:
        yield addr
    finally:
        stop(proc)


@pytest.fixture(scope="module")
def server_with_tokens(tmp_path_factory):
    tokens = ', "p4runtime": { "tokens": { "alice": "tok-a", "bob": "tok-b" } }'
    proc, addr = start(tmp_path_factory.mktemp("virt-p4rt-tok"), tokens)
    try:
        yield addr
    finally:
        stop(proc)


@pytest.fixture(scope="module")
def server_on_workers(tmp_path_factory):
    """Tokens, and the devices on two worker threads (`--workers 2`)."""
    tokens = ', "p4runtime": { "tokens": { "alice": "tok-a", "bob": "tok-b" } }'
    proc, addr = start(tmp_path_factory.mktemp("virt-p4rt-w"), tokens, ("--workers", "2"))
    try:
        yield addr
    finally:
        stop(proc)


class _Details(
    collections.namedtuple(
        "_Details",
        ("method", "timeout", "metadata", "credentials", "wait_for_ready", "compression"),
    ),
    grpc.ClientCallDetails,
):
    pass


class BearerToken(
    grpc.UnaryUnaryClientInterceptor,
    grpc.UnaryStreamClientInterceptor,
    grpc.StreamUnaryClientInterceptor,
    grpc.StreamStreamClientInterceptor,
):
    """Adds `authorization: Bearer TOKEN` to every call of a channel (how a p4runtime-shell
    user presents a tenant's token; see crates/tern-virt/README.md)."""

    def __init__(self, token):
        self.md = ("authorization", f"Bearer {token}")

    def _d(self, d):
        return _Details(d.method, d.timeout, list(d.metadata or []) + [self.md],
                        d.credentials, d.wait_for_ready, d.compression)

    def intercept_unary_unary(self, cont, d, req):
        return cont(self._d(d), req)

    def intercept_unary_stream(self, cont, d, req):
        return cont(self._d(d), req)

    def intercept_stream_unary(self, cont, d, it):
        return cont(self._d(d), it)

    def intercept_stream_stream(self, cont, d, it):
        return cont(self._d(d), it)


@contextlib.contextmanager
def shell_token(token):
    """p4runtime-shell opens its channel with grpc.insecure_channel: wrap it with the token."""
    plain = grpc.insecure_channel
    grpc.insecure_channel = lambda addr, *a, **k: grpc.intercept_channel(
        plain(addr, *a, **k), BearerToken(token))
    try:
        yield
    finally:
        grpc.insecure_channel = plain


def dmac_entries():
    return list(sh.TableEntry("L2Ingress.dmac").read())


def test_shell_drives_one_device_of_a_virtual_switch(server):
    # Device 2 (bob's): the shell fetches the device's own P4Info and installs an entry.
    sh.setup(device_id=2, grpc_addr=server, election_id=(0, 1))
    try:
        te = sh.TableEntry("L2Ingress.dmac")(action="L2Ingress.forward")
        te.match["hdr.ethernet.dstAddr"] = "0a:00:00:00:00:02"
        te.action["port"] = "4"
        te.insert()
        got = dmac_entries()
        assert len(got) == 1
        assert got[0].action["port"] == te.action["port"]
    finally:
        sh.teardown()
    # Device 1 (alice's) is another device: nothing of bob's is there.
    sh.setup(device_id=1, grpc_addr=server, election_id=(0, 1))
    try:
        assert dmac_entries() == []
    finally:
        sh.teardown()


def test_unknown_device_id_is_not_found(server):
    with grpc.insecure_channel(server) as ch:
        stub = p4runtime_pb2_grpc.P4RuntimeStub(ch)
        req = p4runtime_pb2.GetForwardingPipelineConfigRequest(device_id=9)
        with pytest.raises(grpc.RpcError) as e:
            stub.GetForwardingPipelineConfig(req)
        assert e.value.code() == grpc.StatusCode.NOT_FOUND
        req = p4runtime_pb2.GetForwardingPipelineConfigRequest(device_id=1)
        assert stub.GetForwardingPipelineConfig(req).config.p4info.tables


def test_tokens_reach_only_the_tenants_device(server_with_tokens):
    """Any gRPC client (here Python's grpc with call metadata): alice's token reaches device 1;
    bob's device 2 answers exactly like device 9, which does not exist."""
    def get(stub, device_id, token):
        req = p4runtime_pb2.GetForwardingPipelineConfigRequest(device_id=device_id)
        return stub.GetForwardingPipelineConfig(req, metadata=[("authorization", f"Bearer {token}")])

    with grpc.insecure_channel(server_with_tokens) as ch:
        stub = p4runtime_pb2_grpc.P4RuntimeStub(ch)
        assert get(stub, 1, "tok-a").config.p4info.tables
        answers = []
        for device_id in (2, 9):
            with pytest.raises(grpc.RpcError) as e:
                get(stub, device_id, "tok-a")
            answers.append((e.value.code(), e.value.details().replace(str(device_id), "N")))
        assert answers[0] == answers[1] == (grpc.StatusCode.NOT_FOUND, "Invalid device id N")
        with pytest.raises(grpc.RpcError) as e:
            get(stub, 1, "tok-wrong")
        assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_shell_with_a_token_on_workers(server_on_workers, caplog):
    """p4runtime-shell with alice's token (gRPC metadata through a channel interceptor)
    drives her device on a switch whose devices run on two workers; bob's token does not
    reach it (the shell's arbitration is refused like for a missing device)."""
    with shell_token("tok-a"):
        sh.setup(device_id=1, grpc_addr=server_on_workers, election_id=(0, 1))
        try:
            te = sh.TableEntry("L2Ingress.dmac")(action="L2Ingress.forward")
            te.match["hdr.ethernet.dstAddr"] = "0a:00:00:00:00:07"
            te.action["port"] = "1"
            te.insert()
            got = dmac_entries()
            assert len(got) == 1 and got[0].action["port"] == te.action["port"]
        finally:
            sh.teardown()
    with shell_token("tok-b"):
        with pytest.raises(BaseException):
            sh.setup(device_id=1, grpc_addr=server_on_workers, election_id=(0, 1))
    assert "P4Runtime RPC error (NOT_FOUND): Invalid device id 1" in caplog.text, caplog.text
