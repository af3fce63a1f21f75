/* subparser.p4 — a parser that calls a sub-parser (instantiated in its locals) twice-deep in
 * the state graph: the sub-parser extracts up to two tags and reports how many it saw through
 * an out parameter. Written for tern. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> etherType;
}

header tag_t {
    bit<8> more;
    bit<8> val;
}

struct metadata {
    bit<8> tags;
}

struct headers {
    ethernet_t eth;
    tag_t      t0;
    tag_t      t1;
}

parser Tags(packet_in pkt, inout headers hdr, out bit<8> count) {
    state start {
        pkt.extract(hdr.t0);
        count = 1;
        transition select(hdr.t0.more) {
            1: second;
            default: accept;
        }
    }
    state second {
        pkt.extract(hdr.t1);
        count = 2;
        transition accept;
    }
}

parser P(packet_in pkt, out headers hdr, inout metadata meta,
         inout standard_metadata_t sm) {
    Tags() tags;
    state start {
        pkt.extract(hdr.eth);
        meta.tags = 0;
        transition select(hdr.eth.etherType) {
            0x9999: parse_tags;
            default: accept;
        }
    }
    state parse_tags {
        tags.apply(pkt, hdr, meta.tags);
        hdr.eth.etherType = 0x8888;
        transition accept;
    }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }

control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        hdr.eth.dst[7:0] = meta.tags;
    }
}

control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) {
    apply {
        pkt.emit(hdr);
    }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
