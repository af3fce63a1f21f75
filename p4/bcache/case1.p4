/* case1.p4 — B-Cache's case #1 rebuilt for tern (../shared/reference/bcache.md §4.2): the
 * L2/L3 switch of the public l2l3 shape — VLAN ingress processing (tag untagged frames), MAC
 * learning by digest, routable check (router MAC on a VLAN), IPv4 routing (LPM, next hop
 * rewrites the MACs and the VLAN, TTL - 1), L2 switching with broadcast for unknown
 * destinations (multicast group), VLAN egress stripping. The base of the family: case2 adds
 * an ACL, case3 NAT, case4 source guard, storm control and VRF. Table contents and traffic:
 * `tern bcache gen case1` (p4/bcache/case1.txt). Written for tern. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

header vlan_t {
    bit<3>  pcp;
    bit<1>  cfi;
    bit<12> vid;
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

struct learn_t {
    bit<9>  port;
    bit<48> mac;
    bit<12> vid;
}

struct metadata {
    bit<12> vid;
    bit<1>  route;
}

struct headers {
    ethernet_t ethernet;
    vlan_t     vlan;
    ipv4_t     ipv4;
    l4_t       l4;
}

parser CParser(packet_in packet, out headers hdr, inout metadata meta,
               inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            0x8100: parse_vlan;
            0x0800: parse_ipv4;
            default: accept;
        }
    }
    state parse_vlan {
        packet.extract(hdr.vlan);
        transition select(hdr.vlan.etherType) {
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

control CVerify(inout headers hdr, inout metadata meta) {
    apply { }
}

control CIngress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    action drop() {
        mark_to_drop(standard_metadata);
    }
    action nop() { }
    action add_vlan(bit<12> vid) {
        hdr.vlan.setValid();
        hdr.vlan.vid = vid;
        hdr.vlan.etherType = hdr.ethernet.etherType;
        hdr.ethernet.etherType = 0x8100;
        meta.vid = vid;
    }
    action use_vlan() {
        meta.vid = hdr.vlan.vid;
    }
    action mac_learn() {
        digest<learn_t>(1, { standard_metadata.ingress_port, hdr.ethernet.srcAddr, meta.vid });
    }
    action route() {
        meta.route = 1;
    }
    action set_nhop(bit<48> smac, bit<48> dmac, bit<12> vid) {
        hdr.ethernet.srcAddr = smac;
        hdr.ethernet.dstAddr = dmac;
        meta.vid = vid;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }
    action forward(bit<9> port) {
        standard_metadata.egress_spec = port;
    }
    action broadcast(bit<16> grp) {
        standard_metadata.mcast_grp = grp;
    }
    action strip_vlan() {
        hdr.ethernet.etherType = hdr.vlan.etherType;
        hdr.vlan.setInvalid();
    }

    table vlan_ingress {
        key = {
            standard_metadata.ingress_port: exact;
            hdr.vlan.isValid(): exact;
        }
        actions = { add_vlan; use_vlan; drop; }
        default_action = use_vlan();
        size = 64;
    }

    table mac_learning {
        key = { hdr.ethernet.srcAddr: exact; }
        actions = { mac_learn; nop; }
        default_action = mac_learn();
        size = 4096;
    }

    table routable {
        key = {
            hdr.ethernet.dstAddr: exact;
            meta.vid: exact;
        }
        actions = { route; nop; }
        default_action = nop();
        size = 64;
    }

    table routing {
        key = {
            hdr.ipv4.dstAddr: lpm;
        }
        actions = { set_nhop; drop; }
        default_action = drop();
        size = 2048;
    }

    table switching {
        key = {
            hdr.ethernet.dstAddr: exact;
            meta.vid: exact;
        }
        actions = { forward; broadcast; drop; }
        default_action = broadcast(1);
        support_timeout = true;
        size = 4096;
    }

    table vlan_egress {
        key = { standard_metadata.egress_spec: exact; }
        actions = { strip_vlan; nop; }
        default_action = nop();
        size = 64;
    }

    apply {
        vlan_ingress.apply();
        mac_learning.apply();
        routable.apply();
        if (meta.route == 1 && hdr.ipv4.isValid() && hdr.ipv4.ttl > 1) {
            routing.apply();
        }
        // A routing miss dropped the packet: do not flood it (switching's default).
        if (standard_metadata.egress_spec != 511) {
            switching.apply();
        }
        vlan_egress.apply();
    }
}

control CEgress(inout headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    apply { }
}

control CCompute(inout headers hdr, inout metadata meta) {
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

control CDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.vlan);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.l4);
    }
}

V1Switch(CParser(), CVerify(), CIngress(), CEgress(), CCompute(), CDeparser()) main;
