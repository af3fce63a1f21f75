/* lookahead.p4 — a bare `lookahead<T>();` (value unused) still needs T's bits in the packet:
 * too short gives error.PacketTooShort (P4-16 packet_in.lookahead). tern checks it where the
 * state's offset is fixed: in `start` (offset 0) and after a fixed-size extract. The ingress
 * sends parser errors to port 7. Written for tern. */
#include <core.p4>
#include <v1model.p4>

header b_t {
    bit<8> v;
}

struct two_t {
    bit<8> a;
    bit<8> b;
}

typedef bit<32> word_t;

struct headers {
    b_t first;
    b_t second;
}

struct metadata { }

parser P(packet_in pkt, out headers hdr, inout metadata meta,
         inout standard_metadata_t sm) {
    state start {
        pkt.lookahead<two_t>();
        pkt.extract(hdr.first);
        transition select(hdr.first.v) {
            1: deeper;
            default: accept;
        }
    }
    state deeper {
        pkt.lookahead<word_t>();
        pkt.extract(hdr.second);
        transition accept;
    }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }

control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        if (sm.parser_error == error.PacketTooShort) {
            sm.egress_spec = 7;
        } else {
            sm.egress_spec = 1;
        }
    }
}

control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr); } }

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
