/* semantics.p4 — evaluation-order and control-flow corner cases. Written for tern.
 * Covers run-time header stack indices (read and write), short-circuit && / || whose right
 * side has side effects, exit inside an action called from the apply block (the rest of the
 * action and of the pipeline is skipped), apply().hit stored in a variable, struct equality
 * functions with inout parameters and header size methods, tuple variables and named struct initializers. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> etherType;
}

header sel_t {
    bit<8> mode;
    bit<8> idx;
    bit<8> out;
    bit<8> calls;
}

header item_t {
    bit<8> v;
}

struct pair_t {
    bit<8> a;
    bit<8> b;
}

struct metadata {
    pair_t p;
    pair_t q;
}

struct headers {
    ethernet_t eth;
    sel_t      sel;
    item_t[4]  items;
}

bool bump(inout bit<8> calls, in bool result) {
    calls = calls + 1;
    return result;
}

parser P(packet_in pkt, out headers hdr, inout metadata meta,
         inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        pkt.extract(hdr.sel);
        pkt.extract(hdr.items.next);
        pkt.extract(hdr.items.next);
        pkt.extract(hdr.items.next);
        pkt.extract(hdr.items.next);
        transition accept;
    }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }

control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action stop_here() {
        hdr.sel.out = 0x51;
        exit;
        hdr.sel.out = 0x52;
    }
    action noop() { }
    table t {
        key = { hdr.sel.idx : exact; }
        actions = { noop; NoAction; }
        default_action = NoAction();
    }
    apply {
        sm.egress_spec = 1;
        if (hdr.sel.mode == 1) {
            hdr.sel.out = hdr.items[hdr.sel.idx].v;
            hdr.items[hdr.sel.idx + 1].v = 0xaa;
        } else if (hdr.sel.mode == 2) {
            if (hdr.sel.idx == 0 && bump(hdr.sel.calls, true)) {
                hdr.sel.out = 1;
            }
            if (hdr.sel.idx == 0 || bump(hdr.sel.calls, false)) {
                hdr.sel.out = hdr.sel.out + 2;
            }
        } else if (hdr.sel.mode == 3) {
            stop_here();
            hdr.sel.calls = 0x99;
        } else if (hdr.sel.mode == 4) {
            bool h = t.apply().hit;
            if (h) {
                hdr.sel.out = 0x77;
            } else {
                hdr.sel.out = 0x88;
            }
        } else if (hdr.sel.mode == 7) {
            tuple<bit<8>, bit<8>> tp = { hdr.sel.idx, 8w5 };
            hdr.sel.out = tp[0] + tp[1];
        } else if (hdr.sel.mode == 6) {
            hdr.sel.out = (bit<8>)hdr.sel.minSizeInBytes() + (bit<8>)hdr.items[0].minSizeInBits();
        } else if (hdr.sel.mode == 5) {
            meta.p = { b = 8w0, a = hdr.sel.idx };
            meta.q.a = hdr.items[0].v;
            if (meta.p == meta.q) {
                hdr.sel.out = 0xee;
            }
        }
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
