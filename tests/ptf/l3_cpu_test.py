"""PTF tests: `tern run --no-p4 --grpc-addr` on veth ports, programmed over P4Runtime.

run.sh creates the namespace, the veth pairs and the switch; each test pushes l3_cpu.p4 (compiled
by tern) with p4runtime-shell, installs entries, sends frames with PTF and checks what comes out
on the wire or reaches the controller. Test parameters: grpc_addr, p4info, json, cpu_port.
"""

import ptf
import ptf.testutils as tu
from ptf.base_tests import BaseTest
from ptf.packet import ARP, Ether

import p4runtime_sh.shell as sh

SWITCH_MAC = "00:00:00:00:aa:00"


class P4RuntimeTest(BaseTest):
    """Connects as primary and pushes the pipeline (which clears every table) before each test."""

    def setUp(self):
        BaseTest.setUp(self)
        self.dataplane = ptf.dataplane_instance
        self.dataplane.flush()
        params = tu.test_params_get()
        sh.setup(
            device_id=0,
            grpc_addr=params["grpc_addr"],
            election_id=(0, 1),
            config=sh.FwdPipeConfig(params["p4info"], params["json"]),
        )

    def tearDown(self):
        sh.teardown()
        BaseTest.tearDown(self)

    def route(self, prefix, port, dmac):
        te = sh.TableEntry("MyIngress.ipv4_lpm")(action="MyIngress.ipv4_forward")
        te.match["hdr.ipv4.dstAddr"] = prefix
        te.action["dstAddr"] = dmac
        te.action["port"] = str(port)
        te.insert()
        return te

    def packet_in(self, timeout=3):
        msg = sh.client.get_stream_packet("packet", timeout=timeout)
        return msg.packet if msg is not None else None


def routed(pkt, dmac):
    """What the switch makes of `pkt`: MACs rewritten, TTL decremented (checksum recomputed)."""
    exp = pkt.copy()
    exp[Ether].src = exp[Ether].dst
    exp[Ether].dst = dmac
    exp["IP"].ttl -= 1
    del exp["IP"].chksum
    return Ether(bytes(exp))


class L3LongestPrefixMatch(P4RuntimeTest):
    def runTest(self):
        self.route("10.0.1.0/24", 1, "00:00:00:00:01:01")
        self.route("10.0.2.0/24", 2, "00:00:00:00:02:02")
        self.route("10.0.2.128/25", 3, "00:00:00:00:03:03")
        for dst, port, dmac in [
            ("10.0.1.7", 1, "00:00:00:00:01:01"),
            ("10.0.2.5", 2, "00:00:00:00:02:02"),
            ("10.0.2.200", 3, "00:00:00:00:03:03"),
        ]:
            pkt = tu.simple_tcp_packet(eth_dst=SWITCH_MAC, eth_src="00:00:00:00:09:09",
                                       ip_src="10.0.9.1", ip_dst=dst, ip_ttl=64)
            ingress = 1 if port != 1 else 2
            tu.send_packet(self, ingress, pkt)
            tu.verify_packet(self, routed(pkt, dmac), port)
        tu.verify_no_other_packets(self)


class L3NoRouteDrops(P4RuntimeTest):
    def runTest(self):
        self.route("10.0.1.0/24", 1, "00:00:00:00:01:01")
        pkt = tu.simple_udp_packet(eth_dst=SWITCH_MAC, ip_dst="192.168.0.1", ip_ttl=64)
        tu.send_packet(self, 2, pkt)
        tu.verify_no_other_packets(self)
        # The entry is read back as written, and once deleted the prefix is no longer routed.
        got = [e.msg() for e in sh.TableEntry("MyIngress.ipv4_lpm").read()]
        self.assertEqual(len(got), 1)
        self.assertEqual(got[0].match[0].lpm.prefix_len, 24)
        sh.TableEntry("MyIngress.ipv4_lpm").read(function=lambda e: e.delete())
        pkt = tu.simple_udp_packet(eth_dst=SWITCH_MAC, ip_dst="10.0.1.1", ip_ttl=64)
        tu.send_packet(self, 2, pkt)
        tu.verify_no_other_packets(self)


class PacketOutToWire(P4RuntimeTest):
    def runTest(self):
        for port in (1, 3):
            pkt = tu.simple_udp_packet(eth_dst="00:00:00:00:00:%02x" % port, ip_dst="10.1.1.1")
            sh.PacketOut(bytes(pkt), egress_port=str(port)).send()
            tu.verify_packet(self, pkt, port)
        tu.verify_no_other_packets(self)


class WireToPacketIn(P4RuntimeTest):
    def runTest(self):
        # ARP is punted by the program; so is an IPv4 packet whose route says send_to_cpu.
        arp = Ether(dst="ff:ff:ff:ff:ff:ff", src="00:00:00:00:00:02") / ARP(
            op=1, psrc="10.0.2.2", pdst="10.0.2.1", hwsrc="00:00:00:00:00:02")
        tu.send_packet(self, 2, arp)
        pin = self.packet_in()
        self.assertIsNotNone(pin, "no packet-in for ARP")
        self.assertEqual(bytes(pin.payload)[:len(bytes(arp))], bytes(arp))
        self.assertEqual([(m.metadata_id, m.value) for m in pin.metadata], [(1, b"\x02"), (2, b"\x00")])

        te = sh.TableEntry("MyIngress.ipv4_lpm")(action="MyIngress.send_to_cpu")
        te.match["hdr.ipv4.dstAddr"] = "10.0.0.1/32"
        te.insert()
        ip = tu.simple_tcp_packet(eth_dst=SWITCH_MAC, ip_dst="10.0.0.1", ip_ttl=64)
        tu.send_packet(self, 3, ip)
        pin = self.packet_in()
        self.assertIsNotNone(pin, "no packet-in for the punted route")
        self.assertEqual(bytes(pin.payload), bytes(ip))
        self.assertEqual(pin.metadata[0].value, b"\x03")
        tu.verify_no_other_packets(self)


class HostLearningDigests(P4RuntimeTest):
    def runTest(self):
        d = sh.DigestEntry("learn_t")
        d.max_list_size = 1
        d.max_timeout_ns = 0
        d.ack_timeout_ns = 10 ** 9
        d.insert()
        self.route("10.0.1.0/24", 1, "00:00:00:00:01:01")
        pkt = tu.simple_tcp_packet(eth_dst=SWITCH_MAC, eth_src="00:00:00:00:07:07",
                                   ip_dst="10.0.1.9", ip_ttl=64)
        tu.send_packet(self, 3, pkt)
        tu.verify_packet(self, routed(pkt, "00:00:00:00:01:01"), 1)
        msg = sh.client.get_stream_packet("digest", timeout=3)
        self.assertIsNotNone(msg, "no digest list")
        members = msg.digest.data[0].struct.members
        self.assertEqual([m.bitstring for m in members], [b"\x07\x07", b"\x03"])
        # Within ack_timeout_ns (not acked) the same sample is not sent again.
        tu.send_packet(self, 3, pkt)
        tu.verify_packet(self, routed(pkt, "00:00:00:00:01:01"), 1)
        self.assertIsNone(sh.client.get_stream_packet("digest", timeout=0.5))
        tu.verify_no_other_packets(self)
