/* l2l3_acl_nat.p4 — tern's L2/L3 + ACL + NAT benchmark: Ethernet, IPv4, UDP/TCP ports;
 * L2 source check and destination lookup (exact on MACs), IPv4 LPM routing, a ternary ACL on
 * the 5-tuple, source NAT (exact on source address and port), TTL decrement, IPv4 checksum.
 * Written for `tern bench`; entries are installed by the bench from the traffic. */
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

header l4_t {
    bit<16> srcPort;
    bit<16> dstPort;
}

struct metadata {
    bit<1> routed;
}

struct headers {
    ethernet_t ethernet;
    ipv4_t     ipv4;
    l4_t       l4;
}

parser NParser(packet_in packet, out headers hdr, inout metadata meta,
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
        transition select(hdr.ipv4.protocol) {
            6: parse_l4;
            17: parse_l4;
            default: accept;
        }
    }
    state parse_l4 {
        packet.extract(hdr.l4);
        transition accept;
    }
}

control NVerify(inout headers hdr, inout metadata meta) {
    apply { }
}

control NIngress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    action drop() {
        mark_to_drop(standard_metadata);
    }
    action nop() { }
    action l2_forward(bit<9> port) {
        standard_metadata.egress_spec = port;
    }
    action to_router() {
        meta.routed = 1;
    }
    action set_nhop(bit<48> dmac, bit<9> port) {
        standard_metadata.egress_spec = port;
        hdr.ethernet.srcAddr = hdr.ethernet.dstAddr;
        hdr.ethernet.dstAddr = dmac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }
    action permit() { }
    action deny() {
        mark_to_drop(standard_metadata);
    }
    action snat(bit<32> srcAddr, bit<16> srcPort) {
        hdr.ipv4.srcAddr = srcAddr;
        hdr.l4.srcPort = srcPort;
    }
    table smac {
        key = { hdr.ethernet.srcAddr: exact; }
        actions = { nop; drop; }
        size = 65536;
        default_action = nop();
    }
    table dmac {
        key = { hdr.ethernet.dstAddr: exact; }
        actions = { to_router; l2_forward; drop; }
        size = 65536;
        default_action = to_router();
    }
    table ipv4_lpm {
        key = { hdr.ipv4.dstAddr: lpm; }
        actions = { set_nhop; drop; }
        size = 1048576;
        default_action = drop();
    }
    table acl {
        key = {
            hdr.ipv4.srcAddr: ternary;
            hdr.ipv4.dstAddr: ternary;
            hdr.ipv4.protocol: ternary;
            hdr.l4.srcPort: ternary;
            hdr.l4.dstPort: ternary;
        }
        actions = { permit; deny; }
        size = 4096;
        default_action = permit();
    }
    table nat {
        key = {
            hdr.ipv4.srcAddr: exact;
            hdr.l4.srcPort: exact;
        }
        actions = { snat; nop; }
        size = 65536;
        default_action = nop();
    }
    apply {
        smac.apply();
        dmac.apply();
        if (meta.routed == 1 && hdr.ipv4.isValid() && hdr.ipv4.ttl > 1) {
            ipv4_lpm.apply();
            if (hdr.l4.isValid()) {
                acl.apply();
                nat.apply();
            }
        }
    }
}

control NEgress(inout headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    apply { }
}

control NCompute(inout headers hdr, inout metadata meta) {
    apply {
        update_checksum(
            hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.totalLen,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum,
            HashAlgorithm.csum16);
    }
}

control NDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.l4);
    }
}

V1Switch(NParser(), NVerify(), NIngress(), NEgress(), NCompute(), NDeparser()) main;
