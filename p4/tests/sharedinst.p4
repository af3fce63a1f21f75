/* sharedinst.p4 — a control instance is one object: `Seq() s;` passed to two controls as a
 * constructor argument (and applied twice by one of them) keeps one register, so every
 * apply sees the previous one's write. Written for tern. Packet: a header (a, b, c); each
 * apply stores the next sequence number; out of port 1. */
#include <core.p4>
#include <v1model.p4>

header e_t {
    bit<8> a;
    bit<8> b;
    bit<8> c;
}

struct headers {
    e_t e;
}

struct metadata {
}

parser P(packet_in pkt, out headers h, inout metadata m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(h.e);
        transition accept;
    }
}

control seq_t(out bit<8> x);

// Each apply returns the next value of one register cell.
control Seq(out bit<8> x) {
    register<bit<8>>(1) r;
    apply {
        bit<8> v;
        r.read(v, 0);
        v = v + 1;
        r.write(0, v);
        x = v;
    }
}

control Once(out bit<8> x)(seq_t s) {
    apply {
        s.apply(x);
    }
}

control TwiceLast(out bit<8> x)(seq_t s) {
    apply {
        s.apply(x);
        s.apply(x);
    }
}

control I(inout headers h, inout metadata m, inout standard_metadata_t sm) {
    Seq() s;
    Once(s) first;
    TwiceLast(s) second;
    apply {
        sm.egress_spec = 1;
        first.apply(h.e.a);
        second.apply(h.e.b);
        s.apply(h.e.c);
    }
}

control E(inout headers h, inout metadata m, inout standard_metadata_t sm) {
    apply { }
}

control VC(inout headers h, inout metadata m) {
    apply { }
}

control CC(inout headers h, inout metadata m) {
    apply { }
}

control D(packet_out pkt, in headers h) {
    apply {
        pkt.emit(h.e);
    }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
