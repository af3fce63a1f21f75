/* evalorder.p4 — operands are evaluated left to right (P4-16 §8.1): what an operand read
 * keeps its value when a later operand's call writes the same storage (`x + put(x)`,
 * `d == swap_in(d, 9)`, `{ f, swap_in(f, 0x33) }`), also in control-local initializers
 * with calls (their inlined returns jump inside one primitive list). Written for tern. */
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> b;
    bit<8> c;
    bit<8> d;
    bit<8> e;
    bit<8> f;
    bit<8> g;
}

struct headers {
    h_t h;
}

struct metadata { }

parser P(packet_in pkt, out headers hdr, inout metadata meta,
         inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        transition accept;
    }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }

/* Sets x to 100 and returns 1. */
bit<8> put(inout bit<8> x) {
    x = 100;
    return 1;
}

/* Replaces x by nv and returns the value x had. */
bit<8> swap_in(inout bit<8> x, in bit<8> nv) {
    bit<8> old = x;
    x = nv;
    return old;
}

control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    bit<8> v = 8w3;
    bit<8> w = v + put(v);
    apply {
        hdr.h.a = w;
        hdr.h.b = v;
        bit<8> x = hdr.h.c;
        hdr.h.c = x + put(x);
        if (hdr.h.d == swap_in(hdr.h.d, 9)) {
            hdr.h.e = 0xEE;
        }
        tuple<bit<8>, bit<8>> t = { hdr.h.f, swap_in(hdr.h.f, 0x33) };
        hdr.h.g = t[0] + t[1];
    }
}

control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr); } }

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
