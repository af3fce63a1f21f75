// Every operation the native pipeline code inlines, with every result written into a header
// that is emitted, so a wrong result shows in the output bytes. Used by the native-vs-
// interpreter test (crates/tern/src/cmd_bench.rs, `native_code_matches_the_interpreter`),
// whose traffic is `tern bench`'s Ethernet/IPv4/UDP frames (the 18 bytes after the UDP
// header parse as `res`) and whose entries come from `tern bench`'s installer (first action
// of each table whose name has no "drop").
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dstAddr; bit<48> srcAddr; bit<16> etherType; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> diffserv; bit<16> totalLen; bit<16> identification;
    bit<3> flags; bit<13> fragOffset; bit<8> ttl; bit<8> protocol; bit<16> hdrChecksum;
    bit<32> srcAddr; bit<32> dstAddr;
}
header udp_t { bit<16> srcPort; bit<16> dstPort; bit<16> len; bit<16> csum; }
// Results: odd widths on purpose (masking of stores narrower than their slot).
header res_t {
    bit<32> a; bit<16> b; bit<8> c; bit<8> d; bit<56> e; bit<12> f; bit<4> g; bit<8> h;
}

struct headers { ethernet_t ethernet; ipv4_t ipv4; udp_t udp; res_t res; }
struct metadata { bit<32> m32; bit<7> m7; }

parser P(packet_in pk, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        pk.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) { 0x0800: ipv4; default: accept; }
    }
    state ipv4 {
        pk.extract(hdr.ipv4);
        transition select(hdr.ipv4.protocol) { 17: udp; default: accept; }
    }
    state udp { pk.extract(hdr.udp); pk.extract(hdr.res); transition accept; }
}

control V(inout headers hdr, inout metadata meta) { apply { } }

control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action drop() { mark_to_drop(sm); }
    action arith(bit<32> p, bit<16> q, bit<8> r) {
        hdr.res.a = hdr.ipv4.srcAddr + p;
        hdr.res.b = q - hdr.udp.srcPort;
        hdr.res.c = hdr.res.c * r;
        hdr.res.e = (hdr.res.e << 3) ^ ((bit<56>) p | 56w0x500);
        hdr.res.d = hdr.res.d & 0xf0 | r;
        hdr.res.f = hdr.res.f + (bit<12>) q;
        meta.m32 = p;
        meta.m7 = (bit<7>) r + 7w100;
    }
    action other(bit<8> r) { hdr.res.h = r; }
    action fwd(bit<9> port) {
        sm.egress_spec = port;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }
    action leave() { hdr.res.g = 0xe; exit; }
    action mark(bit<4> g) { hdr.res.g = g; }
    action setf(bit<8> v) { hdr.res.h = hdr.res.h + v; }
    table by_dst {
        key = { hdr.ipv4.dstAddr: exact; }
        actions = { arith; other; drop; }
        default_action = other(0x5a);
    }
    table by_port {
        key = { hdr.udp.dstPort: exact; }
        actions = { mark; leave; NoAction; }
        default_action = leave();
    }
    // Keyless with a constant default that has a parameter: run inline with the constant,
    // and every apply is a miss.
    table fixed {
        actions = { setf; }
        const default_action = setf(0x3c);
    }
    table route {
        key = { hdr.ipv4.dstAddr: lpm; }
        actions = { fwd; drop; }
        default_action = drop();
    }
    apply {
        if (!hdr.udp.isValid()) {
            if (hdr.ipv4.isValid()) { sm.egress_spec = 3; } else { drop(); }
            exit;
        }
        switch (by_dst.apply().action_run) {
            arith: { hdr.res.h = hdr.res.h ^ 0x81; }
            other: { hdr.res.h = hdr.res.h + 1; }
        }
        // Every comparison, on fields, metadata and constants.
        // Boundaries sit on flows whose frames the test leaves intact (k % 4 == 0: srcPort
        // 1024 + k, dstPort 5000 + k).
        if (hdr.udp.srcPort > 1032 && hdr.udp.srcPort <= 1100) { hdr.res.b = hdr.res.b + 0x100; }
        if (hdr.udp.dstPort >= 5040 || hdr.udp.dstPort < 5012) { hdr.res.b = hdr.res.b + 0x2000; }
        if (meta.m32 != 0 && !(meta.m7 == 7w101)) { hdr.res.a = hdr.res.a ^ meta.m32; }
        // m7 = r + 100 wraps at 7 bits for r >= 28: a store that is not masked shows here.
        if (meta.m7 < 50) { hdr.res.c = hdr.res.c ^ 0x40; }
        if (hdr.ipv4.ttl == 64) { hdr.res.c = hdr.res.c + hdr.ipv4.ttl; }
        if (by_port.apply().hit) {
            hdr.res.d = hdr.res.d + 8;
        } else {
            hdr.res.d = hdr.res.d - 8;
        }
        if (hdr.udp.srcPort == 1077) { exit; }
        if (fixed.apply().hit) {
            hdr.res.f = hdr.res.f + 1;
        } else {
            hdr.res.f = hdr.res.f + 2;
        }
        route.apply();
        hdr.res.f = hdr.res.f << 2;
    }
}

control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        if (sm.egress_port == 2) { hdr.res.e = hdr.res.e + 56w0xffffff00000001; }
    }
}
control C(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pk, in headers hdr) {
    apply { pk.emit(hdr.ethernet); pk.emit(hdr.ipv4); pk.emit(hdr.udp); pk.emit(hdr.res); }
}
V1Switch(P(), V(), I(), E(), C(), D()) main;
