/* loops.p4 — for loops inside actions (C-style and `in` ranges), nested loops, break and
 * continue, lowered to _jump/_jump_if_zero. Written for tern. The header carries n and
 * receives four results. */
#include <core.p4>
#include <v1model.p4>

header l_t {
    bit<8>  n;
    bit<16> sum;
    bit<16> square;
    bit<8>  firsts;
    bit<8>  odds;
}

struct metadata { }

struct headers {
    l_t l;
}

parser P(packet_in pkt, out headers hdr, inout metadata meta,
         inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.l);
        transition accept;
    }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }

control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action compute() {
        hdr.l.sum = 0;
        for (bit<8> i = 1; i <= hdr.l.n; i = i + 1) {
            hdr.l.sum = hdr.l.sum + (bit<16>)i;
        }
        hdr.l.square = 0;
        for (bit<8> i = 0; i < hdr.l.n; i = i + 1) {
            for (bit<8> j = 0; j < hdr.l.n; j = j + 1) {
                hdr.l.square = hdr.l.square + 1;
            }
        }
        hdr.l.firsts = 0;
        for (bit<8> i = 0; i < hdr.l.n; i = i + 1) {
            if (i == 3) {
                break;
            }
            hdr.l.firsts = hdr.l.firsts + 1;
        }
        hdr.l.odds = 0;
        for (bit<8> k in 0 .. 9) {
            if ((k & 1) == 0) {
                continue;
            }
            hdr.l.odds = hdr.l.odds + k;
        }
    }
    apply {
        sm.egress_spec = 1;
        compute();
    }
}

control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) {
    apply {
        pkt.emit(hdr.l);
    }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
