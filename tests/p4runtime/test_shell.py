"""p4runtime-shell (PyPI) against `tern p4runtime`: the way controller authors use the switch."""

import os
import socket
import subprocess
import time
from pathlib import Path

import pytest
import p4runtime_sh.shell as sh
from p4runtime_sh.p4runtime import P4RuntimeWriteException

ROOT = Path(__file__).resolve().parents[2]
TESTDATA = ROOT.parent / "shared/fixtures/bmv2/targets/simple_switch_grpc/tests/testdata"
if not TESTDATA.is_dir():
    pytest.skip(f"skipping: {TESTDATA} not found (the shared fixtures are not beside this checkout)",
                allow_module_level=True)
CPU_PORT = 64

# Controller headers added to fixtures that lack them (p4c would emit these for
# @controller_header("packet_in"/"packet_out") headers with a 9-bit port and 7 bits of padding).
CPU_HEADERS = """
controller_packet_metadata {
  preamble { id: 67146229 name: "packet_in" alias: "packet_in" }
  metadata { id: 1 name: "ingress_port" bitwidth: 9 }
  metadata { id: 2 name: "_pad" bitwidth: 7 }
}
controller_packet_metadata {
  preamble { id: 67121543 name: "packet_out" alias: "packet_out" }
  metadata { id: 1 name: "egress_port" bitwidth: 9 }
  metadata { id: 2 name: "_pad" bitwidth: 7 }
}
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    port = free_port()
    addr = f"127.0.0.1:{port}"
    proc = subprocess.Popen(
        [os.environ["TERN_BIN"], "p4runtime", "--grpc-addr", addr, "--cpu-port", str(CPU_PORT)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.time() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            if proc.poll() is not None or time.time() > deadline:
                proc.kill()
                raise RuntimeError("tern p4runtime did not start: " + proc.stderr.read().decode())
            time.sleep(0.1)
    yield addr
    assert proc.poll() is None, "the server must still be running after all tests"
    proc.terminate()
    proc.wait(timeout=10)


def connect(addr, name, p4info=None):
    sh.setup(
        device_id=0,
        grpc_addr=addr,
        election_id=(0, 1),
        config=sh.FwdPipeConfig(str(p4info or TESTDATA / f"{name}.proto.txt"), str(TESTDATA / f"{name}.json")),
    )


@pytest.fixture
def shell():
    yield
    sh.teardown()


def entries(table):
    return [e.msg() for e in sh.TableEntry(table).read()]


def test_exact_and_lpm_insert_modify_read_delete(server, shell):
    connect(server, "simple_router")
    te = sh.TableEntry("ipv4_lpm")(action="set_nhop")
    te.match["ipv4.dstAddr"] = "10.0.0.0/8"
    te.action["nhop_ipv4"] = "10.0.0.1"
    te.action["port"] = "3"
    te.insert()
    fw = sh.TableEntry("forward")(action="set_dmac")
    fw.match["routing_metadata.nhop_ipv4"] = "10.0.0.1"
    fw.action["dmac"] = "00:00:00:00:00:aa"
    fw.insert()
    got = entries("ipv4_lpm")
    assert len(got) == 1
    assert got[0].match[0].lpm.value == b"\x0a\x00\x00\x00"
    assert got[0].match[0].lpm.prefix_len == 8
    assert [p.value for p in got[0].action.action.params] == [b"\x0a\x00\x00\x01", b"\x03"]
    # Canonical byte string for the MAC (leading zeros stripped).
    assert entries("forward")[0].action.action.params[0].value == b"\xaa"
    with pytest.raises(P4RuntimeWriteException) as e:
        te.insert()
    assert "ALREADY_EXISTS" in str(e.value)
    te.action["port"] = "5"
    te.modify()
    assert entries("ipv4_lpm")[0].action.action.params[1].value == b"\x05"
    te.delete()
    fw.delete()
    assert entries("ipv4_lpm") == []
    with pytest.raises(P4RuntimeWriteException) as e:
        te.delete()
    assert "NOT_FOUND" in str(e.value)


def test_ternary_with_priority_and_default_action(server, shell):
    connect(server, "ternary")
    te = sh.TableEntry("ingress.ter")(action="ingress.send_1")
    te.match["h.hdr.f1"] = "0x1100&&&0xff00"
    te.priority = 10
    te.insert()
    got = entries("ingress.ter")
    assert len(got) == 1 and got[0].priority == 10
    assert got[0].match[0].ternary.value == b"\x11\x00"
    assert got[0].match[0].ternary.mask == b"\xff\x00"
    bad = sh.TableEntry("ingress.ter")(action="ingress.send_2")
    bad.match["h.hdr.f1"] = "0x2200&&&0xff00"
    with pytest.raises(P4RuntimeWriteException) as e:
        bad.insert()  # no priority on a ternary table
    assert "INVALID_ARGUMENT" in str(e.value)
    d = sh.TableEntry("ingress.ter")(is_default=True, action="ingress.send_2")
    d.modify()
    defaults = [e.msg() for e in sh.TableEntry("ingress.ter")(is_default=True).read()]
    assert len(defaults) == 1 and defaults[0].is_default_action
    assert defaults[0].action.action.action_id == sh.Action("ingress.send_2").msg().action_id
    te.delete()


def test_direct_counter(server, shell):
    connect(server, "counter")
    te = sh.TableEntry("t_redirect")(action="port_redirect")
    te.match["sm.packet_length"] = "60"
    te.insert()
    c = sh.DirectCounterEntry("cntr")
    c.table_entry = te
    c.packet_count = 7
    c.byte_count = 420
    c.modify()
    got = [x.msg() for x in sh.DirectCounterEntry("cntr").read()]
    assert len(got) == 1
    assert (got[0].data.packet_count, got[0].data.byte_count) == (7, 420)
    te.delete()


def test_multicast_group_and_clone_session(server, shell):
    connect(server, "simple_router")
    sh.MulticastGroupEntry(1).add(1, 1).add(2, 1).add(3, 2).insert()
    got = [g.msg() for g in sh.MulticastGroupEntry(1).read()]
    assert len(got) == 1
    reps = sorted((r.egress_port, r.instance) for r in got[0].multicast_group_entry.replicas)
    assert reps == [(1, 1), (2, 1), (3, 2)]
    with pytest.raises(P4RuntimeWriteException):
        sh.MulticastGroupEntry(1).add(4, 1).insert()
    sh.MulticastGroupEntry(1).add(4, 1).modify()
    sh.MulticastGroupEntry(1).delete()
    sh.CloneSessionEntry(5).add(7).insert()
    got = [s.msg() for s in sh.CloneSessionEntry(5).read()]
    assert len(got) == 1
    sh.CloneSessionEntry(5).delete()


def test_packet_out_packet_in(server, shell, tmp_path):
    p4info = tmp_path / "packet_io.p4info.txt"
    p4info.write_text((TESTDATA / "packet_io.proto.txt").read_text() + CPU_HEADERS)
    connect(server, "packet_io", p4info)
    # packet_io.p4 sends every packet to the CPU port: the packet_out header comes back as packet_in.
    sh.PacketOut(b"\xde\xad\xbe\xef", egress_port="427").send()
    got = list(sh.PacketIn().sniff(timeout=1))
    assert len(got) == 1
    pin = got[0].packet
    assert pin.payload == b"\xde\xad\xbe\xef"
    assert [(m.metadata_id, m.value) for m in pin.metadata] == [(1, b"\x01\xab"), (2, b"\x00")]


def test_digest(server, shell, tmp_path):
    p4info = tmp_path / "digest.p4info.txt"
    # A packet_out header without fields, so the shell can inject frames unchanged.
    no_fields = 'controller_packet_metadata {\n  preamble { id: 67121543 name: "packet_out" }\n}\n'
    p4info.write_text(no_fields + (TESTDATA / "digest.proto.txt").read_text())
    connect(server, "digest", p4info)
    d = sh.DigestEntry("L2_digest")
    d.max_list_size = 1
    d.max_timeout_ns = 0
    d.ack_timeout_ns = 1000000
    d.insert()
    frame = b"\xff" * 6 + b"\x00\x11\x22\x33\x44\x55" + b"\x08\x00" + b"\x00" * 50
    sh.PacketOut(frame).send()
    lists = list(sh.DigestList().sniff(timeout=1))
    assert len(lists) == 1
    members = lists[0].digest.data[0].struct.members
    assert [m.bitstring for m in members] == [b"\x11\x22\x33\x44\x55", bytes([CPU_PORT])]


def start_with_program(program):
    port = free_port()
    proc = subprocess.Popen(
        [os.environ["TERN_BIN"], "p4runtime", "--grpc-addr", f"127.0.0.1:{port}", str(program)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.time() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, f"127.0.0.1:{port}"
        except OSError:
            if proc.poll() is not None or time.time() > deadline:
                proc.kill()
                raise RuntimeError("tern p4runtime did not start: " + proc.stderr.read().decode())
            time.sleep(0.1)


@pytest.mark.parametrize("program", [
    TESTDATA / "simple_router.json",  # P4Info derived from the JSON (p4c's id scheme)
    ROOT / "p4/tutorials/basic.p4",  # compiled by tern, with tern's P4Info
])
def test_connect_without_config(program):
    proc, addr = start_with_program(program)
    try:
        sh.setup(device_id=0, grpc_addr=addr, election_id=(0, 1))
        try:
            if program.suffix == ".json":
                table, action, field, params = "ipv4_lpm", "set_nhop", "ipv4.dstAddr", {"nhop_ipv4": "10.0.0.1", "port": "2"}
            else:
                table, action, field, params = "MyIngress.ipv4_lpm", "MyIngress.ipv4_forward", "hdr.ipv4.dstAddr", {"dstAddr": "08:00:00:00:02:22", "port": "2"}
            te = sh.TableEntry(table)(action=action)
            te.match[field] = "10.0.2.0/24"
            for k, v in params.items():
                te.action[k] = v
            te.insert()
            got = entries(table)
            assert len(got) == 1 and got[0].match[0].lpm.prefix_len == 24
        finally:
            sh.teardown()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_optional_match_and_modify(server, shell):
    connect(server, "optional")
    te = sh.TableEntry("ingress.opt")(action="ingress.send_1")
    te.match["h.hdr.f1"] = "0x0a0b"
    te.priority = 5
    te.insert()
    wild = sh.TableEntry("ingress.opt")(action="ingress.send_2")
    wild.priority = 1
    wild.insert()
    got = sorted(entries("ingress.opt"), key=lambda e: e.priority)
    assert [e.priority for e in got] == [1, 5]
    assert len(got[0].match) == 0, "a wildcard optional field is omitted"
    assert got[1].match[0].optional.value == b"\x0a\x0b"
    te.action = sh.Action("ingress.send_2")
    te.modify()
    got = sorted(entries("ingress.opt"), key=lambda e: e.priority)
    assert got[1].action.action.action_id == sh.Action("ingress.send_2").msg().action_id
    te.delete()
    wild.delete()
    assert entries("ingress.opt") == []


def test_clone_session_fields(server, shell):
    connect(server, "simple_router")
    sh.CloneSessionEntry(9).add(2, 1).add(3, 1).insert()
    got = [s.msg() for s in sh.CloneSessionEntry(9).read()]
    assert len(got) == 1
    entry = got[0].clone_session_entry
    assert entry.session_id == 9
    assert sorted((r.egress_port, r.instance) for r in entry.replicas) == [(2, 1), (3, 1)]
    with pytest.raises(P4RuntimeWriteException) as e:
        sh.CloneSessionEntry(9).add(4).insert()
    assert "ALREADY_EXISTS" in str(e.value)
    sh.CloneSessionEntry(9).delete()
    assert list(sh.CloneSessionEntry(9).read()) == []
