/* forward.p4 — the NoCache switch of tern's key-value topologies (`tern kv up`).
 * Written for tern. Forwards IPv4 packets and ARP messages to the port of the host that owns
 * the destination (for ARP: target) address; a miss is dropped. MAC addresses are left alone:
 * the switch is transparent, hosts resolve each other with ARP through it. Key-value packets
 * (UDP to or from FarReach's server ports 1152..1279) are counted per egress port so a run can
 * check that its traffic really crossed the switch (`counter_read kv_packets <port>`). */
#include <core.p4>
#include <v1model.p4>

const bit<16> TYPE_IPV4 = 0x0800;
const bit<16> TYPE_ARP  = 0x0806;
const bit<8>  PROTO_UDP = 17;

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

header arp_t {
    bit<16> htype;
    bit<16> ptype;
    bit<8>  hlen;
    bit<8>  plen;
    bit<16> oper;
    bit<48> sha;
    bit<32> spa;
    bit<48> tha;
    bit<32> tpa;
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  diffserv;
    bit<16> totalLen;
    bit<16> identification;
    bit<3>  flags;
    bit<13> fragOffset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdrChecksum;
    bit<32> srcAddr;
    bit<32> dstAddr;
}

header udp_t {
    bit<16> srcPort;
    bit<16> dstPort;
    bit<16> length;
    bit<16> checksum;
}

struct metadata {
    bit<32> dst;
}

struct headers {
    ethernet_t ethernet;
    arp_t      arp;
    ipv4_t     ipv4;
    udp_t      udp;
}

parser KvParser(packet_in packet,
                out headers hdr,
                inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            TYPE_IPV4: parse_ipv4;
            TYPE_ARP: parse_arp;
            default: accept;
        }
    }

    state parse_arp {
        packet.extract(hdr.arp);
        transition accept;
    }

    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition select(hdr.ipv4.protocol) {
            PROTO_UDP: parse_udp;
            default: accept;
        }
    }

    state parse_udp {
        packet.extract(hdr.udp);
        transition accept;
    }
}

control KvVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control KvIngress(inout headers hdr,
                  inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    counter(512, CounterType.packets_and_bytes) kv_packets;

    action drop() {
        mark_to_drop(standard_metadata);
    }

    action to_port(bit<9> port) {
        standard_metadata.egress_spec = port;
    }

    table forward {
        key = {
            meta.dst: exact;
        }
        actions = {
            to_port;
            drop;
        }
        size = 1024;
        default_action = drop();
    }

    apply {
        if (hdr.ipv4.isValid()) {
            meta.dst = hdr.ipv4.dstAddr;
        } else if (hdr.arp.isValid()) {
            meta.dst = hdr.arp.tpa;
        } else {
            drop();
            return;
        }
        forward.apply();
        if (hdr.udp.isValid()) {
            if ((hdr.udp.dstPort >= 1152 && hdr.udp.dstPort < 1280) ||
                (hdr.udp.srcPort >= 1152 && hdr.udp.srcPort < 1280)) {
                kv_packets.count((bit<32>) standard_metadata.egress_spec);
            }
        }
    }
}

control KvEgress(inout headers hdr,
                 inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control KvComputeChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control KvDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.arp);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.udp);
    }
}

V1Switch(KvParser(), KvVerifyChecksum(), KvIngress(), KvEgress(), KvComputeChecksum(),
         KvDeparser()) main;
