/* parser.p4 — parser features: if statements inside states, select on ranges and masks,
 * variable-length extraction, advance, a header union and a validity-guarded emit. Written for tern.
 * Layout after Ethernet: v (kind, len), then `len` bytes of options, then depending on kind:
 * 0..9 a 16-bit `a` member, 10..19 a 32-bit `b` member of the union, 0xf? skips 2 bytes. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> etherType;
}

header v_t {
    bit<8> kind;
    bit<8> len;
}

header opt_t {
    varbit<64> data;
}

header a_t {
    bit<16> x;
}

header b_t {
    bit<32> y;
}

header_union ab_t {
    a_t a;
    b_t b;
}

struct metadata {
    bit<8> seen;
}

struct headers {
    ethernet_t eth;
    v_t        v;
    opt_t      opt;
    ab_t       u;
}

parser P(packet_in pkt, out headers hdr, inout metadata meta,
         inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        pkt.extract(hdr.v);
        if (hdr.v.len > 0) {
            pkt.extract(hdr.opt, (bit<32>)hdr.v.len * 8);
            meta.seen = 1;
        } else {
            meta.seen = 2;
        }
        transition select(hdr.v.kind) {
            0 .. 9: parse_a;
            10 .. 19: parse_b;
            0xf0 &&& 0xf0: skip;
            default: accept;
        }
    }
    state parse_a {
        pkt.extract(hdr.u.a);
        transition accept;
    }
    state parse_b {
        pkt.extract(hdr.u.b);
        transition accept;
    }
    state skip {
        pkt.advance(16);
        transition accept;
    }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }

control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        hdr.eth.etherType = (bit<16>)meta.seen;
        if (hdr.u.isValid()) {
            hdr.eth.src[7:0] = 0x55;
        }
        if (hdr.u.a.isValid()) {
            hdr.u.a.x = hdr.u.a.x + 1;
        }
    }
}

control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) {
    apply {
        pkt.emit(hdr.eth);
        pkt.emit(hdr.v);
        if (hdr.opt.isValid()) {
            pkt.emit(hdr.opt);
        }
        pkt.emit(hdr.u);
    }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
