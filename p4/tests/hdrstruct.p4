/* hdrstruct.p4 — struct-typed header fields (nested structs too) read, written and matched
 * on; lookahead of a struct and of a typedef'd type; annotations with free-form bodies:
 * `@pragma NAME tokens` to the end of the line, unstructured `@name(tokens)` and structured
 * `@name[...]`. Written for tern. */
#include <core.p4>
#include <v1model.p4>

typedef bit<8> byte_t;
typedef bit<16> port_t;

struct pair_t {
    bit<8> lo;
    bit<8> hi;
}

struct rec_t {
    bit<4> kind;
    bit<4> flags;
    pair_t p;
}

header rec_h {
    rec_t  r;
    port_t dst;
}

struct headers {
    @pragma pa_no_overlay ingress rec.dst
    rec_h rec;
}

struct metadata {
    byte_t first;
}

parser P(packet_in pkt, out headers hdr, inout metadata meta,
         inout standard_metadata_t sm) {
    state start {
        meta.first = pkt.lookahead<byte_t>();
        transition select(pkt.lookahead<rec_t>().kind) {
            1: parse_rec;
            default: accept;
        }
    }
    state parse_rec {
        pkt.extract(hdr.rec);
        transition accept;
    }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }

control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    @structured[kind = "forward", weight = 2]
    action fwd(bit<9> port) {
        sm.egress_spec = port;
    }
    @pragma stage 0
    @pragma doc "the low byte picks the port"
    @free_form(1 + ; ] [ tokens, "any" (nested (parens)))
    table by_lo {
        key = { hdr.rec.r.p.lo : exact; }
        actions = { fwd; NoAction; }
        const entries = {
            7 : fwd(2);
        }
        default_action = NoAction;
    }
    apply {
        if (hdr.rec.isValid()) {
            by_lo.apply();
            hdr.rec.r.flags = meta.first[7:4];
            hdr.rec.r.p.hi = hdr.rec.r.p.lo + 1;
            pair_t q = hdr.rec.r.p;
            hdr.rec.r.p = { q.hi, q.lo };
        } else {
            sm.egress_spec = 3;
        }
    }
}

control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr); } }

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
