"""`tern run --grpc-addr` with pcap-file ports, driven by p4runtime-shell (no root needed).

The switch of the run is the one P4Runtime writes to: packets from the input files that reach the
CPU port arrive as packet-in, and packet-out traffic is written to the output files. The program is
P4 source compiled by tern, so the controller headers come from tern's own P4Info.
"""

import os
import socket
import struct
import subprocess
import time
from pathlib import Path

import pytest
import p4runtime_sh.shell as sh

ROOT = Path(__file__).resolve().parents[2]
FLOWCACHE = ROOT / "p4/tutorials/flowcache.p4"
CPU_PORT = 255  # flowcache.p4's CPU_PORT


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_pcap(path, frames):
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i, frame in enumerate(frames):
            f.write(struct.pack("<IIII", 1000 + i, 0, len(frame), len(frame)))
            f.write(frame)


def read_pcap(path):
    """Frames of a pcap file (either byte order, either timestamp resolution)."""
    data = Path(path).read_bytes() if Path(path).exists() else b""
    if len(data) < 24:
        return []
    endian = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    frames, off = [], 24
    while off + 16 <= len(data):
        _, _, incl, _ = struct.unpack(endian + "IIII", data[off:off + 16])
        frames.append(data[off + 16:off + 16 + incl])
        off += 16 + incl
    return frames


def start_run(tmp_path, args, drop_in=False):
    """`tern run` with P4Runtime on a free port, ports p1 and p2; with `drop_in`, the binary
    is invoked as simple_switch_grpc with the address and CPU port as target options."""
    port = free_port()
    addr = f"127.0.0.1:{port}"
    ports = ["-i", "1@p1", "-i", "2@p2", "--thrift-port", str(free_port())]
    if drop_in:
        link = tmp_path / "simple_switch_grpc"
        link.symlink_to(os.environ["TERN_BIN"])
        cmd = [str(link)] + ports + args + [
            "--", "--grpc-server-addr", addr, "--cpu-port", str(CPU_PORT)]
    else:
        cmd = [os.environ["TERN_BIN"], "run", "--grpc-addr", addr, "--cpu-port", str(CPU_PORT)]
        cmd += ports + args
    proc = subprocess.Popen(
        cmd,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.time() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, addr
        except OSError:
            if proc.poll() is not None or time.time() > deadline:
                proc.kill()
                raise RuntimeError("tern run did not start: " + proc.stderr.read().decode())
            time.sleep(0.05)


def stop(proc):
    assert proc.poll() is None, "tern run must still be serving"
    proc.terminate()
    proc.wait(timeout=10)


def checksum(data):
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def ipv4_frame(src, dst, payload=b"hello"):
    """An Ethernet + IPv4 frame with a valid header checksum (the program recomputes it)."""
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), 1, 0, 64, 17, 0,
                     bytes(src), bytes(dst))
    ip = ip[:10] + struct.pack("!H", checksum(ip)) + ip[12:]
    return b"\x00\x00\x00\x00\x00\x02" + b"\x00\x00\x00\x00\x00\x01" + b"\x08\x00" + ip + payload


def wait_for(pred, timeout=5.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.05)
    return pred()


def test_wire_to_packet_in_and_packet_out_to_file(tmp_path):
    miss = ipv4_frame([10, 0, 0, 1], [10, 0, 0, 2])
    write_pcap(tmp_path / "p1_in.pcap", [miss])
    write_pcap(tmp_path / "p2_in.pcap", [])
    # Inputs are replayed after 4 s: the controller connects first.
    proc, addr = start_run(tmp_path, ["--use-files", "4", str(FLOWCACHE)])
    try:
        sh.setup(device_id=0, grpc_addr=addr, election_id=(0, 1))
        try:
            # The flow-cache miss on port 1 reaches the controller with its ingress port.
            msg = sh.client.get_stream_packet("packet", timeout=10)
            assert msg is not None, "no packet-in"
            pin = msg.packet
            assert pin.payload == miss
            assert [(m.metadata_id, m.value) for m in pin.metadata] == [(1, b"\x01"), (2, b"\x00")]
            # The controller answers with packet-out to port 2: written to p2_out.pcap.
            sh.PacketOut(miss, egress_port="2").send()
            assert wait_for(lambda: read_pcap(tmp_path / "p2_out.pcap")) == [miss]
            # A cache entry written over P4Runtime is used by the run's switch.
            te = sh.TableEntry("MyIngress.flow_cache")(action="MyIngress.cached_action")
            te.match["hdr.ipv4.protocol"] = "17"
            te.match["hdr.ipv4.srcAddr"] = "10.0.0.1"
            te.match["hdr.ipv4.dstAddr"] = "10.0.0.2"
            te.action["port"] = "2"
            te.action["dmac"] = "00:00:00:00:00:bb"
            te.insert()
            assert len(list(sh.TableEntry("MyIngress.flow_cache").read())) == 1
        finally:
            sh.teardown()
    finally:
        stop(proc)
    assert read_pcap(tmp_path / "p1_out.pcap") == []


@pytest.mark.parametrize("drop_in", [False, True], ids=["tern-run", "simple_switch_grpc"])
def test_no_p4_then_controller_pushes_the_program(tmp_path, drop_in):
    subprocess.run(
        [os.environ["TERN_BIN"], "compile", str(FLOWCACHE), "-o", str(tmp_path / "fc.json"),
         "--p4runtime-files", str(tmp_path / "fc.p4info.txt")],
        check=True,
    )
    write_pcap(tmp_path / "p1_in.pcap", [])
    write_pcap(tmp_path / "p2_in.pcap", [])
    proc, addr = start_run(tmp_path, ["--use-files", "0", "--no-p4"], drop_in)
    try:
        sh.setup(
            device_id=0,
            grpc_addr=addr,
            election_id=(0, 1),
            config=sh.FwdPipeConfig(str(tmp_path / "fc.p4info.txt"), str(tmp_path / "fc.json")),
        )
        try:
            frame = b"\xff" * 6 + b"\x00\x11\x22\x33\x44\x55" + b"\x88\xb5" + b"x" * 46
            sh.PacketOut(frame, egress_port="1").send()
            assert wait_for(lambda: read_pcap(tmp_path / "p1_out.pcap")) == [frame]
            assert read_pcap(tmp_path / "p2_out.pcap") == []
        finally:
            sh.teardown()
    finally:
        stop(proc)


def test_busy_grpc_address_is_an_error(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        addr = "127.0.0.1:%d" % s.getsockname()[1]
        write_pcap(tmp_path / "p1_in.pcap", [])
        r = subprocess.run(
            [os.environ["TERN_BIN"], "run", "--use-files", "--grpc-addr", addr, "-i", "1@p1",
             str(FLOWCACHE)],
            cwd=tmp_path, capture_output=True, timeout=30,
        )
    assert r.returncode != 0
    assert b"cannot start the P4Runtime server" in r.stderr, r.stderr


def test_digests_from_the_wire_with_a_given_p4info(tmp_path):
    testdata = ROOT.parent / "shared/fixtures/bmv2/targets/simple_switch_grpc/tests/testdata"
    if not testdata.is_dir():
        pytest.skip(f"skipping: {testdata} not found (the shared fixtures are not beside this checkout)")
    frame = b"\xff" * 6 + b"\x00\x11\x22\x33\x44\x55" + b"\x08\x00" + b"\x00" * 50
    write_pcap(tmp_path / "p1_in.pcap", [frame])
    write_pcap(tmp_path / "p2_in.pcap", [])
    proc, addr = start_run(tmp_path, [
        "--use-files", "4", "--p4info", str(testdata / "digest.proto.txt"),
        str(testdata / "digest.json")])
    try:
        sh.setup(device_id=0, grpc_addr=addr, election_id=(0, 1))
        try:
            d = sh.DigestEntry("L2_digest")
            d.max_list_size = 1
            d.max_timeout_ns = 0
            d.ack_timeout_ns = 1000000
            d.insert()
            # The input frame (replayed after the wait) is learnt: source MAC, ingress port 1.
            msg = sh.client.get_stream_packet("digest", timeout=10)
            assert msg is not None, "no digest list"
            members = msg.digest.data[0].struct.members
            assert [m.bitstring for m in members] == [b"\x11\x22\x33\x44\x55", b"\x01"]
        finally:
            sh.teardown()
    finally:
        stop(proc)
