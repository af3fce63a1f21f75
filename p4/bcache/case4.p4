/* case4.p4 — B-Cache's case #4 rebuilt for tern (../shared/reference/bcache.md §4.2): an
 * L2/L3 switch (VLAN ingress processing, MAC learning by digest, routable check, IPv4 routing,
 * L2 switching with broadcast, VLAN egress stripping) with an ACL, NAT, source guard (SG),
 * storm control (SC: a per-port counter and a storm table) and virtual routing and
 * forwarding (VRF: the routing key includes a VRF id computed in the pipeline). Exercises
 * what the cache must replay exactly: direct counters (acl), an indirect counter (storm
 * control), ageing (switching), digests (MAC learning), header insertion and removal (VLAN),
 * multicast, drops. Written for tern; table contents and traffic: `tern bcache gen case4`
 * (p4/bcache/case4.txt), `tern bench --traffic case4`. */
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
    bit<8>  vrf;
    bit<1>  sg_ok;
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
    direct_counter(CounterType.packets_and_bytes) acl_hits;
    counter(64, CounterType.packets_and_bytes) storm_ctr;

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
    action sg_permit() {
        meta.sg_ok = 1;
    }
    action storm_count(bit<8> idx) {
        storm_ctr.count((bit<32>) idx);
    }
    action set_vrf(bit<8> vrf) {
        meta.vrf = vrf;
    }
    action route() {
        meta.route = 1;
    }
    action snat(bit<32> srcAddr, bit<16> srcPort) {
        hdr.ipv4.srcAddr = srcAddr;
        hdr.l4.srcPort = srcPort;
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
    action acl_permit() {
        acl_hits.count();
    }
    action acl_deny() {
        acl_hits.count();
        mark_to_drop(standard_metadata);
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
    table source_guard {
        key = {
            standard_metadata.ingress_port: exact;
            meta.vid: exact;
            hdr.ethernet.srcAddr: exact;
        }
        actions = { sg_permit; drop; }
        default_action = sg_permit();
        size = 4096;
    }
    table storm_control {
        key = {
            standard_metadata.ingress_port: exact;
            hdr.ethernet.dstAddr: ternary;
        }
        actions = { storm_count; drop; nop; }
        default_action = nop();
        size = 64;
    }
    table vrf {
        key = { meta.vid: exact; }
        actions = { set_vrf; }
        default_action = set_vrf(0);
        size = 256;
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
    table nat {
        key = {
            hdr.ipv4.srcAddr: exact;
            hdr.l4.srcPort: exact;
        }
        actions = { snat; nop; }
        default_action = nop();
        size = 4096;
    }
    table routing {
        key = {
            meta.vrf: exact;
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
    table acl {
        key = {
            hdr.ipv4.srcAddr: ternary;
            hdr.ipv4.dstAddr: ternary;
            hdr.ipv4.protocol: ternary;
            hdr.l4.srcPort: ternary;
            hdr.l4.dstPort: ternary;
        }
        actions = { acl_permit; acl_deny; }
        default_action = acl_permit();
        counters = acl_hits;
        size = 1024;
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
        source_guard.apply();
        storm_control.apply();
        if (meta.sg_ok == 1) {
            vrf.apply();
            routable.apply();
            if (meta.route == 1 && hdr.ipv4.isValid() && hdr.ipv4.ttl > 1) {
                if (hdr.l4.isValid()) {
                    nat.apply();
                }
                routing.apply();
            }
            // A routing miss dropped the packet: do not flood it (switching's default).
            if (standard_metadata.egress_spec != 511) {
                switching.apply();
            }
            if (hdr.ipv4.isValid() && hdr.l4.isValid()) {
                acl.apply();
            }
            vlan_egress.apply();
        }
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
