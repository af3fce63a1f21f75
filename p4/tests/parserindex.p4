/* parserindex.p4 — run-time header stack indices written in a parser: a count byte, then
 * `pkt.extract(h.s[m.i])`, `h.s[m.i].v = …` and an inout argument `addTo(h.s[m.i].v, …)`
 * in a loop state with `m.i` counting up; an
 * index past the stack's 3 elements rejects with error.StackOutOfBounds. Written for tern.
 * Ingress reports the parser error in `n.err` (1 = StackOutOfBounds) and the number of
 * elements extracted in `n.got`; out of port 1. */
#include <core.p4>
#include <v1model.p4>

header n_t {
    bit<8> cnt;
    bit<8> err;
    bit<8> got;
}

header e_t {
    bit<8> v;
}

struct headers {
    n_t    n;
    e_t[3] s;
}

struct metadata {
    bit<8> i;
}

void addTo(inout bit<8> x, in bit<8> k) {
    x = x + k;
}

parser P(packet_in pkt, out headers h, inout metadata m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(h.n);
        m.i = 0;
        transition select(h.n.cnt) {
            0: accept;
            default: loop;
        }
    }
    state loop {
        pkt.extract(h.s[m.i]);
        h.s[m.i].v = h.s[m.i].v + (m.i + 1);
        addTo(h.s[m.i].v, 0x10);
        m.i = m.i + 1;
        transition select(h.n.cnt - m.i) {
            0: accept;
            default: loop;
        }
    }
}

control I(inout headers h, inout metadata m, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        h.n.err = 0;
        if (sm.parser_error == error.StackOutOfBounds) {
            h.n.err = 1;
        }
        h.n.got = m.i;
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
        pkt.emit(h.n);
        pkt.emit(h.s);
    }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
