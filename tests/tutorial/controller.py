"""A P4Runtime controller for the triangle of the p4lang tutorials, on plain gRPC stubs.

Like the tutorials' mycontroller.py: for each switch it opens the stream channel and becomes
primary, pushes the pipeline (P4Info + BMv2 JSON, VERIFY_AND_COMMIT), then
* `routes` (basic.p4): writes the IPv4 routes (MyIngress.ipv4_lpm -> MyIngress.ipv4_forward)
  and reads them back;
* `tunnels` (p4runtime.p4, the tutorials' "p4runtime" exercise): writes tunnel 100 (h1 -> h2)
  and 200 (h2 -> h1) over the s1-s2 link;
* `counters N` (no pipeline push): reads the tunnel counters and checks that tunnels 100 and
  200 carried at least N packets at the ingress and at the egress switch.

usage: controller.py MODE [N] P4INFO JSON ADDR1 ADDR2 ADDR3   (sN is device N-1 at ADDRN)
"""

import queue
import socket
import sys

import grpc
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

# Triangle: hN on port 1 of sN; s1-p2 <-> s2-p2, s1-p3 <-> s3-p2, s2-p3 <-> s3-p3.
HOSTS = {1: ("10.0.1.1", "08:00:00:00:01:11"), 2: ("10.0.2.2", "08:00:00:00:02:22"),
         3: ("10.0.3.3", "08:00:00:00:03:33")}
# Port of switch s towards switch t.
TOWARDS = {(1, 2): 2, (1, 3): 3, (2, 1): 2, (2, 3): 3, (3, 1): 2, (3, 2): 3}


def routes(s):
    """(prefix, next-hop MAC, port) of switch s, as in the tutorial's sN-runtime.json files."""
    out = []
    for h, (ip, mac) in HOSTS.items():
        if h == s:
            out.append((ip, mac, 1))
        else:
            # Toward another switch the destination MAC is that switch's (08:00:00:00:0h:00).
            out.append((ip, "08:00:00:00:%02x:00" % h, TOWARDS[(s, h)]))
    return out


def encode(value, bitwidth):
    """As the tutorials' helpers do: bitwidth-sized byte strings (zero-padded)."""
    return value.to_bytes((bitwidth + 7) // 8, "big")


class Switch:
    def __init__(self, addr, device_id, p4info, arbitrate=True):
        self.device_id = device_id
        self.p4info = p4info
        self.channel = grpc.insecure_channel(addr)
        grpc.channel_ready_future(self.channel).result(timeout=10)
        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(self.channel)
        self.requests = queue.Queue()
        if not arbitrate:
            return
        self.stream = self.stub.StreamChannel(iter(self.requests.get, None))
        req = p4runtime_pb2.StreamMessageRequest()
        req.arbitration.device_id = device_id
        req.arbitration.election_id.low = 1
        self.requests.put(req)
        resp = next(self.stream)
        if not resp.HasField("arbitration") or resp.arbitration.status.code != 0:
            raise RuntimeError(f"device {device_id}: not primary: {resp}")

    def set_pipeline(self, json_bytes):
        req = p4runtime_pb2.SetForwardingPipelineConfigRequest()
        req.device_id = self.device_id
        req.election_id.low = 1
        req.action = p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT
        req.config.p4info.CopyFrom(self.p4info)
        req.config.p4_device_config = json_bytes
        self.stub.SetForwardingPipelineConfig(req)

    def table(self, name):
        return next(t for t in self.p4info.tables if t.preamble.name == name)

    def action(self, name):
        return next(a for a in self.p4info.actions if a.preamble.name == name)

    def write(self, updates):
        """Insert table entries given as (table, {field: (kind, value, prefix_len)}, action,
        {param: int})."""
        req = p4runtime_pb2.WriteRequest()
        req.device_id = self.device_id
        req.election_id.low = 1
        for table_name, match, action_name, params in updates:
            table = self.table(table_name)
            action = self.action(action_name)
            u = req.updates.add()
            u.type = p4runtime_pb2.Update.INSERT
            te = u.entity.table_entry
            te.table_id = table.preamble.id
            for f in table.match_fields:
                if f.name not in match:
                    continue
                kind, value, plen = match[f.name]
                m = te.match.add()
                m.field_id = f.id
                if kind == "lpm":
                    m.lpm.value = encode(value, f.bitwidth)
                    m.lpm.prefix_len = plen
                else:
                    m.exact.value = encode(value, f.bitwidth)
            te.action.action.action_id = action.preamble.id
            for p in action.params:
                param = te.action.action.params.add()
                param.param_id = p.id
                param.value = encode(params[p.name], p.bitwidth)
        self.stub.Write(req)

    def counter(self, name, index):
        """(packets, bytes) of an indexed counter cell."""
        cid = next(c.preamble.id for c in self.p4info.counters if c.preamble.name == name)
        req = p4runtime_pb2.ReadRequest()
        req.device_id = self.device_id
        e = req.entities.add().counter_entry
        e.counter_id = cid
        e.index.index = index
        cells = [x.counter_entry for r in self.stub.Read(req) for x in r.entities]
        if len(cells) != 1:
            raise RuntimeError(f"{name}[{index}]: {len(cells)} cells read")
        return cells[0].data.packet_count, cells[0].data.byte_count

    def write_routes(self, entries):
        table = self.table("MyIngress.ipv4_lpm")
        action = self.action("MyIngress.ipv4_forward")
        field = table.match_fields[0]
        widths = {p.name: p.bitwidth for p in action.params}
        req = p4runtime_pb2.WriteRequest()
        req.device_id = self.device_id
        req.election_id.low = 1
        for ip, mac, port in entries:
            u = req.updates.add()
            u.type = p4runtime_pb2.Update.INSERT
            te = u.entity.table_entry
            te.table_id = table.preamble.id
            m = te.match.add()
            m.field_id = field.id
            m.lpm.value = socket.inet_aton(ip)
            m.lpm.prefix_len = 32
            te.action.action.action_id = action.preamble.id
            for p in action.params:
                v = int(mac.replace(":", ""), 16) if p.name == "dstAddr" else port
                param = te.action.action.params.add()
                param.param_id = p.id
                param.value = encode(v, widths[p.name])
        self.stub.Write(req)

    def read_routes(self):
        req = p4runtime_pb2.ReadRequest()
        req.device_id = self.device_id
        req.entities.add().table_entry.table_id = self.table("MyIngress.ipv4_lpm").preamble.id
        return [e.table_entry for r in self.stub.Read(req) for e in r.entities]

    def close(self):
        self.requests.put(None)
        self.channel.close()


def ip_int(ip):
    return int.from_bytes(socket.inet_aton(ip), "big")


def tunnel(ingress, egress, tunnel_id, dst_ip, dst_mac, port_out, port_host):
    """The tutorial's writeTunnelRules: encapsulate at `ingress`, decapsulate at `egress`."""
    lpm = ("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": ("lpm", ip_int(dst_ip), 32)},
           "MyIngress.myTunnel_ingress", {"dst_id": tunnel_id})
    fwd = ("MyIngress.myTunnel_exact", {"hdr.myTunnel.dst_id": ("exact", tunnel_id, 0)},
           "MyIngress.myTunnel_forward", {"port": port_out})
    dec = ("MyIngress.myTunnel_exact", {"hdr.myTunnel.dst_id": ("exact", tunnel_id, 0)},
           "MyIngress.myTunnel_egress",
           {"dstAddr": int(dst_mac.replace(":", ""), 16), "port": port_host})
    ingress.write([lpm, fwd])
    egress.write([dec])


def main():
    args = sys.argv[1:]
    mode = args.pop(0) if args else ""
    min_packets = int(args.pop(0)) if mode == "counters" and args else 0
    if mode not in ("routes", "tunnels", "counters") or len(args) != 5:
        sys.exit(__doc__)
    p4info = p4info_pb2.P4Info()
    with open(args[0]) as f:
        text_format.Merge(f.read(), p4info)
    with open(args[1], "rb") as f:
        json_bytes = f.read()
    push = mode != "counters"
    switches = [Switch(addr, i, p4info, arbitrate=push) for i, addr in enumerate(args[2:])]
    try:
        if push:
            for sw in switches:
                sw.set_pipeline(json_bytes)
        if mode == "routes":
            for n, sw in enumerate(switches, start=1):
                sw.write_routes(routes(n))
                got = sw.read_routes()
                want = sorted(socket.inet_aton(ip) for ip, _, _ in routes(n))
                have = sorted(e.match[0].lpm.value for e in got)
                if have != want:
                    raise RuntimeError(f"s{n}: read back {have}, wrote {want}")
                print(f"s{n}: pipeline set, {len(got)} routes installed and read back")
        elif mode == "tunnels":
            s1, s2 = switches[0], switches[1]
            tunnel(s1, s2, 100, "10.0.2.2", "08:00:00:00:02:22", TOWARDS[(1, 2)], 1)
            tunnel(s2, s1, 200, "10.0.1.1", "08:00:00:00:01:11", TOWARDS[(2, 1)], 1)
            print("tunnels 100 (h1 -> h2) and 200 (h2 -> h1) installed on s1 and s2")
        else:
            s1, s2 = switches[0], switches[1]
            for sw, name, t in [(s1, "ingressTunnelCounter", 100), (s2, "egressTunnelCounter", 100),
                                (s2, "ingressTunnelCounter", 200), (s1, "egressTunnelCounter", 200)]:
                packets, nbytes = sw.counter("MyIngress." + name, t)
                print(f"s{sw.device_id + 1} {name}[{t}]: {packets} packets, {nbytes} bytes")
                if packets < min_packets or nbytes < packets * 60:
                    raise RuntimeError(f"{name}[{t}]: expected at least {min_packets} packets")
    finally:
        for sw in switches:
            sw.close()


if __name__ == "__main__":
    main()
