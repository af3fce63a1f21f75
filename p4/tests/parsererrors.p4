/* parsererrors.p4 — what simple_switch does on a parser error and when a header stack shifts
 * (BMv2's parser.cpp, headers.cpp and stacks.cpp). Written for tern.
 * Byte 0 picks the case:
 *   1: a length byte (in bits) then `extract(h.opt, len)` into a varbit<16>: a length that is
 *      not a multiple of 8 is ParserInvalidArgument; a header that does not fit in the packet
 *      is PacketTooShort, checked before HeaderTooShort (longer than varbit<16> allows);
 *   2: select on a 16-bit lookahead: fewer than 2 bytes left is PacketTooShort;
 *   3, 4: three 1-byte stack elements, then pop_front(1) (3) or push_front(1) (4) in ingress.
 * Ingress adds header r: r.err = the parser error (0 NoError, 1 PacketTooShort,
 * 4 HeaderTooShort, 6 ParserInvalidArgument, 9 other) and r.x0..x2 = s[0..2].v after the
 * shift, read even when the element is invalid (BMv2 keeps the values an invalid header holds,
 * and moves them with the element when a stack shifts). The deparser emits r, k, len, w and
 * the valid stack elements; the opt bytes are not emitted, so the payload shows where the
 * parser stopped. Out of port 1. */
#include <core.p4>
#include <v1model.p4>

header r_t {
    bit<8> err;
    bit<8> x0;
    bit<8> x1;
    bit<8> x2;
}

header k_t {
    bit<8> k;
}

header len_t {
    bit<8> bits;
}

header opt_t {
    varbit<16> opt;
}

header w_t {
    bit<16> w;
}

header e_t {
    bit<8> v;
}

struct headers {
    r_t    r;
    k_t    k;
    len_t  len;
    opt_t  opt;
    w_t    w;
    e_t[3] s;
}

struct metadata {
}

parser P(packet_in pkt, out headers h, inout metadata m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(h.k);
        transition select(h.k.k) {
            1: vl;
            2: la;
            3: stack;
            4: stack;
            default: accept;
        }
    }
    state vl {
        pkt.extract(h.len);
        pkt.extract(h.opt, (bit<32>)h.len.bits);
        transition accept;
    }
    state la {
        transition select(pkt.lookahead<bit<16>>()) {
            0xabcd: la_hit;
            default: accept;
        }
    }
    state la_hit {
        pkt.extract(h.w);
        transition accept;
    }
    state stack {
        pkt.extract(h.s.next);
        pkt.extract(h.s.next);
        pkt.extract(h.s.next);
        transition accept;
    }
}

control VC(inout headers h, inout metadata m) {
    apply { }
}

control I(inout headers h, inout metadata m, inout standard_metadata_t sm) {
    apply {
        h.r.setValid();
        h.r.x0 = 0;
        h.r.x1 = 0;
        h.r.x2 = 0;
        if (sm.parser_error == error.NoError) {
            h.r.err = 0;
        } else if (sm.parser_error == error.PacketTooShort) {
            h.r.err = 1;
        } else if (sm.parser_error == error.HeaderTooShort) {
            h.r.err = 4;
        } else if (sm.parser_error == error.ParserInvalidArgument) {
            h.r.err = 6;
        } else {
            h.r.err = 9;
        }
        if (h.k.k == 3) {
            h.s.pop_front(1);
        } else if (h.k.k == 4) {
            h.s.push_front(1);
        }
        if (h.k.k == 3 || h.k.k == 4) {
            h.r.x0 = h.s[0].v;
            h.r.x1 = h.s[1].v;
            h.r.x2 = h.s[2].v;
        }
        sm.egress_spec = 1;
    }
}

control E(inout headers h, inout metadata m, inout standard_metadata_t sm) {
    apply { }
}

control CC(inout headers h, inout metadata m) {
    apply { }
}

control D(packet_out pkt, in headers h) {
    apply {
        pkt.emit(h.r);
        pkt.emit(h.k);
        pkt.emit(h.len);
        pkt.emit(h.w);
        pkt.emit(h.s);
    }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
