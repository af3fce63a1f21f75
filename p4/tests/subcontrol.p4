/* subcontrol.p4 — controls instantiated and applied inside the ingress (two instances of the
 * same control get their own tables), header assignment, local header variables and
 * apply().hit on a sub-control's table, and `return` inside a sub-control (which only leaves the
 * sub-control). Written for tern. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> etherType;
}

struct metadata {
    bit<8> hits;
}

struct headers {
    ethernet_t eth;
    ethernet_t copy;
}

parser P(packet_in pkt, out headers hdr, inout metadata meta,
         inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition accept;
    }
}

control Rewrite(inout ethernet_t e, inout bit<8> hits, in bit<48> mac) {
    action set_src() {
        e.src = mac;
    }
    table t {
        key = { e.etherType : exact; }
        actions = { set_src; NoAction; }
        default_action = NoAction();
    }
    apply {
        if (e.etherType == 0xdead) {
            return;
        }
        if (t.apply().hit) {
            hits = hits + 1;
        }
    }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }

control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    Rewrite() first;
    Rewrite() second;
    apply {
        sm.egress_spec = 2;
        first.apply(hdr.eth, meta.hits, 48w0x111111111111);
        second.apply(hdr.eth, meta.hits, 48w0x222222222222);
        ethernet_t tmp = hdr.eth;
        tmp.dst = (bit<48>)meta.hits;
        hdr.copy = tmp;
    }
}

control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) {
    apply {
        pkt.emit(hdr.eth);
        pkt.emit(hdr.copy);
    }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
