/* pipeline20.p4 — tern's long-pipeline benchmark: Ethernet, IPv4, UDP/TCP ports, then 20
 * exact-match tables in sequence (keys cycle over destination address, source address,
 * destination port, source port; each hit adds to metadata), then LPM routing with TTL
 * decrement and the IPv4 checksum: 21 tables in all. Written for `tern bench`; entries are
 * installed by the bench from the traffic. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

header l4_t {
    bit<16> srcPort;
    bit<16> dstPort;
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

struct metadata {
    bit<32> acc;
    bit<8>  hits;
}

struct headers {
    ethernet_t ethernet;
    ipv4_t     ipv4;
    l4_t       l4;
}

parser PParser(packet_in packet, out headers hdr, inout metadata meta,
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

control PVerify(inout headers hdr, inout metadata meta) {
    apply { }
}

control PIngress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    action drop() {
        mark_to_drop(standard_metadata);
    }
    action nop() { }
    action a0(bit<32> v) {
        meta.acc = meta.acc + v;
        meta.hits = meta.hits + 1;
    }
    action a1(bit<32> v) {
        meta.acc = meta.acc + v;
        meta.hits = meta.hits + 1;
    }
    action a2(bit<32> v) {
        meta.acc = meta.acc + v;
        meta.hits = meta.hits + 1;
    }
    action a3(bit<32> v) {
        meta.acc = meta.acc + v;
        meta.hits = meta.hits + 1;
    }
    action a4(bit<32> v) {
        meta.acc = meta.acc + v;
        meta.hits = meta.hits + 1;
    }
    action a5(bit<32> v) {
        meta.acc = meta.acc + v;
        meta.hits = meta.hits + 1;
    }
    action a6(bit<32> v) {
        meta.acc = meta.acc + v;
        meta.hits = meta.hits + 1;
    }
    action a7(bit<32> v) {
        meta.acc = meta.acc + v;
        meta.hits = meta.hits + 1;
    }
    action a8(bit<32> v) {
        meta.acc = meta.acc + v;
        meta.hits = meta.hits + 1;
    }
    action a9(bit<32> v) {
        meta.acc = meta.acc + v;
        meta.hits = meta.hits + 1;
    }
    action a10(bit<32> v) {
        meta.acc = meta.acc + v;
        meta.hits = meta.hits + 1;
    }
    action a11(bit<32> v) {
        meta.acc = meta.acc + v;
        meta.hits = meta.hits + 1;
    }
    action a12(bit<32> v) {
        meta.acc = meta.acc + v;
        meta.hits = meta.hits + 1;
    }
    action a13(bit<32> v) {
        meta.acc = meta.acc + v;
        meta.hits = meta.hits + 1;
    }
    action a14(bit<32> v) {
        meta.acc = meta.acc + v;
        meta.hits = meta.hits + 1;
    }
    action a15(bit<32> v) {
        meta.acc = meta.acc + v;
        meta.hits = meta.hits + 1;
    }
    action a16(bit<32> v) {
        meta.acc = meta.acc + v;
        meta.hits = meta.hits + 1;
    }
    action a17(bit<32> v) {
        meta.acc = meta.acc + v;
        meta.hits = meta.hits + 1;
    }
    action a18(bit<32> v) {
        meta.acc = meta.acc + v;
        meta.hits = meta.hits + 1;
    }
    action a19(bit<32> v) {
        meta.acc = meta.acc + v;
        meta.hits = meta.hits + 1;
    }
    action set_nhop(bit<48> dmac, bit<9> port) {
        standard_metadata.egress_spec = port;
        hdr.ethernet.srcAddr = hdr.ethernet.dstAddr;
        hdr.ethernet.dstAddr = dmac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        hdr.ipv4.diffserv = meta.hits;
    }
    table t00 {
        key = { hdr.ipv4.dstAddr: exact; }
        actions = { a0; nop; }
        size = 65536;
        default_action = nop();
    }
    table t01 {
        key = { hdr.ipv4.srcAddr: exact; }
        actions = { a1; nop; }
        size = 65536;
        default_action = nop();
    }
    table t02 {
        key = { hdr.l4.dstPort: exact; }
        actions = { a2; nop; }
        size = 65536;
        default_action = nop();
    }
    table t03 {
        key = { hdr.l4.srcPort: exact; }
        actions = { a3; nop; }
        size = 65536;
        default_action = nop();
    }
    table t04 {
        key = { hdr.ipv4.dstAddr: exact; }
        actions = { a4; nop; }
        size = 65536;
        default_action = nop();
    }
    table t05 {
        key = { hdr.ipv4.srcAddr: exact; }
        actions = { a5; nop; }
        size = 65536;
        default_action = nop();
    }
    table t06 {
        key = { hdr.l4.dstPort: exact; }
        actions = { a6; nop; }
        size = 65536;
        default_action = nop();
    }
    table t07 {
        key = { hdr.l4.srcPort: exact; }
        actions = { a7; nop; }
        size = 65536;
        default_action = nop();
    }
    table t08 {
        key = { hdr.ipv4.dstAddr: exact; }
        actions = { a8; nop; }
        size = 65536;
        default_action = nop();
    }
    table t09 {
        key = { hdr.ipv4.srcAddr: exact; }
        actions = { a9; nop; }
        size = 65536;
        default_action = nop();
    }
    table t10 {
        key = { hdr.l4.dstPort: exact; }
        actions = { a10; nop; }
        size = 65536;
        default_action = nop();
    }
    table t11 {
        key = { hdr.l4.srcPort: exact; }
        actions = { a11; nop; }
        size = 65536;
        default_action = nop();
    }
    table t12 {
        key = { hdr.ipv4.dstAddr: exact; }
        actions = { a12; nop; }
        size = 65536;
        default_action = nop();
    }
    table t13 {
        key = { hdr.ipv4.srcAddr: exact; }
        actions = { a13; nop; }
        size = 65536;
        default_action = nop();
    }
    table t14 {
        key = { hdr.l4.dstPort: exact; }
        actions = { a14; nop; }
        size = 65536;
        default_action = nop();
    }
    table t15 {
        key = { hdr.l4.srcPort: exact; }
        actions = { a15; nop; }
        size = 65536;
        default_action = nop();
    }
    table t16 {
        key = { hdr.ipv4.dstAddr: exact; }
        actions = { a16; nop; }
        size = 65536;
        default_action = nop();
    }
    table t17 {
        key = { hdr.ipv4.srcAddr: exact; }
        actions = { a17; nop; }
        size = 65536;
        default_action = nop();
    }
    table t18 {
        key = { hdr.l4.dstPort: exact; }
        actions = { a18; nop; }
        size = 65536;
        default_action = nop();
    }
    table t19 {
        key = { hdr.l4.srcPort: exact; }
        actions = { a19; nop; }
        size = 65536;
        default_action = nop();
    }
    table ipv4_lpm {
        key = { hdr.ipv4.dstAddr: lpm; }
        actions = { set_nhop; drop; }
        size = 1048576;
        default_action = drop();
    }
    apply {
        if (hdr.ipv4.isValid() && hdr.l4.isValid()) {
            t00.apply();
            t01.apply();
            t02.apply();
            t03.apply();
            t04.apply();
            t05.apply();
            t06.apply();
            t07.apply();
            t08.apply();
            t09.apply();
            t10.apply();
            t11.apply();
            t12.apply();
            t13.apply();
            t14.apply();
            t15.apply();
            t16.apply();
            t17.apply();
            t18.apply();
            t19.apply();
            ipv4_lpm.apply();
        } else {
            drop();
        }
    }
}

control PEgress(inout headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    apply { }
}

control PCompute(inout headers hdr, inout metadata meta) {
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

control PDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.l4);
    }
}

V1Switch(PParser(), PVerify(), PIngress(), PEgress(), PCompute(), PDeparser()) main;
