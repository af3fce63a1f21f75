/* ctor.p4 — controls with constructor parameters and controls applied by type. Written for
 * tern. Packet: a 2-byte header (a, b). `Twice(add3)` applies the `Add(3)` instance it is
 * given twice (a + 6); `Inc.apply(…)` applies a control type directly (b + 1); `Add(k)` takes a
 * compile-time constant. Out of port 1. */
#include <core.p4>
#include <v1model.p4>

header e_t {
    bit<8> a;
    bit<8> b;
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

control adder_t(inout bit<8> x);

control Add(inout bit<8> x)(bit<8> k) {
    apply {
        x = x + k;
    }
}

control Twice(inout bit<8> x)(adder_t step) {
    apply {
        step.apply(x);
        step.apply(x);
    }
}

control Inc(inout bit<8> x) {
    apply {
        x = x + 1;
    }
}

control I(inout headers h, inout metadata m, inout standard_metadata_t sm) {
    Add(8w3) add3;
    Twice(add3) twice;
    apply {
        sm.egress_spec = 1;
        twice.apply(h.e.a);
        Inc.apply(h.e.b);
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
