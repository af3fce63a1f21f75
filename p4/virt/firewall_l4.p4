/* firewall_l4.p4 — HyPer4's firewall function with its transport-port rules, written for tern
 * (HyPer4 scenarios, p4/virt/scenarios).
 *
 * A two-port bump in the wire: `fwd` (ingress port -> egress port; no entry drops) sends every
 * frame on; IPv4 packets then meet `ipv4_block` (ternary source and destination address), TCP
 * segments `tcp_block` and UDP datagrams `udp_block` (ternary source and destination port);
 * a `deny` hit drops the packet. The tables follow HyPer4's native firewall (is_ipv4_valid ->
 * ipv4_block; is_tcp_or_udp_valid -> tcp_block or udp_block). Only the fixed TCP header is
 * extracted (options stay in the payload); a packet too short for its transport header is
 * dropped by the parser error check. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
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

header tcp_t {
    bit<16> srcPort;
    bit<16> dstPort;
    bit<32> seqNo;
    bit<32> ackNo;
    bit<4>  dataOffset;
    bit<4>  res;
    bit<8>  flags;
    bit<16> window;
    bit<16> checksum;
    bit<16> urgentPtr;
}

header udp_t {
    bit<16> srcPort;
    bit<16> dstPort;
    bit<16> length;
    bit<16> checksum;
}

struct metadata { }

struct headers {
    ethernet_t ethernet;
    ipv4_t     ipv4;
    tcp_t      tcp;
    udp_t      udp;
}

parser FwParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            0x0800: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        /* Only first fragments carry the transport header. */
        transition select(hdr.ipv4.fragOffset, hdr.ipv4.protocol) {
            (0, 6): parse_tcp;
            (0, 17): parse_udp;
            default: accept;
        }
    }
    state parse_tcp {
        packet.extract(hdr.tcp);
        transition accept;
    }
    state parse_udp {
        packet.extract(hdr.udp);
        transition accept;
    }
}

control FwVerify(inout headers hdr, inout metadata meta) {
    apply { }
}

control FwIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    action deny() {
        mark_to_drop(standard_metadata);
    }
    action allow() { }
    action set_egress(bit<9> port) {
        standard_metadata.egress_spec = port;
    }

    table fwd {
        key = { standard_metadata.ingress_port: exact; }
        actions = { set_egress; deny; }
        size = 64;
        default_action = deny();
    }

    table ipv4_block {
        key = {
            hdr.ipv4.srcAddr: ternary;
            hdr.ipv4.dstAddr: ternary;
        }
        actions = { deny; allow; }
        size = 256;
        default_action = allow();
    }

    table tcp_block {
        key = {
            hdr.tcp.srcPort: ternary;
            hdr.tcp.dstPort: ternary;
        }
        actions = { deny; allow; }
        size = 256;
        default_action = allow();
    }

    table udp_block {
        key = {
            hdr.udp.srcPort: ternary;
            hdr.udp.dstPort: ternary;
        }
        actions = { deny; allow; }
        size = 256;
        default_action = allow();
    }

    apply {
        if (standard_metadata.parser_error != error.NoError) {
            deny();
            return;
        }
        fwd.apply();
        if (hdr.tcp.isValid()) {
            tcp_block.apply();
        } else if (hdr.udp.isValid()) {
            udp_block.apply();
        }
        if (hdr.ipv4.isValid()) {
            ipv4_block.apply();
        }
    }
}

control FwEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control FwCompute(inout headers hdr, inout metadata meta) {
    apply { }
}

control FwDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.tcp);
        packet.emit(hdr.udp);
    }
}

V1Switch(FwParser(), FwVerify(), FwIngress(), FwEgress(), FwCompute(), FwDeparser()) main;
