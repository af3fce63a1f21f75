/* stale_read.p4 — a B-Cache test program for headers invalid on arrival: a recycled packet
 * keeps the previous packet's bytes in them (as in BMv2), the cache masks those bytes out of
 * its key, and must refuse behaviours that read them. `tag` is pushed by `push_tag` (zeroed
 * by setValid first: no stale read), read by `read_tag` (the default: a read of stale bytes
 * when the packet came untagged) and keyed by `by_tag` (applied to every packet, tagged or
 * not). Written for tern. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

header tag_t {
    bit<16> v;
    bit<16> etherType;
}

struct metadata {
    bit<16> x;
}

struct headers {
    ethernet_t ethernet;
    tag_t      tag;
}

parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            0x88b5: parse_tag;
            default: accept;
        }
    }
    state parse_tag {
        pkt.extract(hdr.tag);
        transition accept;
    }
}

control VC(inout headers hdr, inout metadata meta) {
    apply { }
}

control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action push_tag(bit<16> v) {
        hdr.tag.setValid();
        hdr.tag.v = v;
        hdr.tag.etherType = hdr.ethernet.etherType;
        hdr.ethernet.etherType = 0x88b5;
        sm.egress_spec = 1;
    }
    action read_tag() {
        meta.x = hdr.tag.v;
        sm.egress_spec = (bit<9>) meta.x[2:0];
    }
    action fwd(bit<9> port) {
        sm.egress_spec = port;
    }
    action drop() {
        mark_to_drop(sm);
    }
    table edge {
        key = { sm.ingress_port: exact; }
        actions = { push_tag; read_tag; fwd; }
        default_action = read_tag();
    }
    table by_tag {
        key = { hdr.tag.v: exact; }
        actions = { fwd; drop; NoAction; }
        default_action = NoAction();
    }
    apply {
        edge.apply();
        by_tag.apply();
    }
}

control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply { }
}

control C(inout headers hdr, inout metadata meta) {
    apply { }
}

control D(packet_out pkt, in headers hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.tag);
    }
}

V1Switch(P(), VC(), I(), E(), C(), D()) main;
