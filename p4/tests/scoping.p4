/* scoping.p4 — names and argument forms: an extern instance declared outside any block
 * (shared by ingress and egress), a variable a parser state declares and passes to a
 * sub-parser, `extract<H>(_)`, a slice as an inout argument, a `varbit` variable, a table
 * action with a bound directional argument named by a `switch (…action_run)` label, and a
 * table without actions in a nested switch. Written for tern. */
#include <core.p4>
#include <v1model.p4>

header first_t {
    bit<8> kind;
    bit<8> idx;
    bit<8> val;
}

header skip_t {
    bit<16> junk;
}

header tail_t {
    bit<8> x;
}

header len_t {
    bit<8> bits;
}

header vb_t {
    varbit<16> data;
}

struct headers {
    first_t first;
    tail_t  tail;
    len_t   len;
    vb_t    v1;
    vb_t    v2;
}

struct metadata { }

register<bit<8>>(4) total;

/* Keeps the tail byte only when `keep` is true. */
parser Tail(packet_in pkt, out tail_t t, in bool keep) {
    state start {
        pkt.extract(t);
        transition select(keep) {
            true: accept;
            false: clear;
        }
    }
    state clear {
        t.x = 0;
        transition accept;
    }
}

parser P(packet_in pkt, out headers hdr, inout metadata meta,
         inout standard_metadata_t sm) {
    Tail() tail;
    state start {
        pkt.extract(hdr.first);
        pkt.extract<skip_t>(_);
        bool keep = hdr.first.kind == 1;
        tail.apply(pkt, hdr.tail, keep);
        transition parse_vb;
    }
    state parse_vb {
        pkt.extract(hdr.len);
        pkt.extract(hdr.v1, (bit<32>)hdr.len.bits);
        pkt.extract(hdr.v2, (bit<32>)hdr.len.bits);
        transition accept;
    }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }

control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action set_val(inout bit<8> v, bit<8> x) {
        v = x;
    }
    action set_high(inout bit<4> high) {
        high = 0xF;
    }
    table pick {
        key = { hdr.first.kind : exact; }
        actions = { set_val(hdr.first.val); NoAction; }
        const entries = {
            2 : set_val(hdr.first.val, 0x77);
        }
        default_action = NoAction;
    }
    table nothing {
        key = { }
        actions = { }
    }
    apply {
        switch (pick.apply().action_run) {
            set_val: {
                hdr.first.idx = 0xAA;
            }
            default: {
                switch (nothing.apply().action_run) {
                    default: {
                        hdr.first.idx = hdr.first.idx + 1;
                    }
                }
            }
        }
        set_high(hdr.first.kind[7:4]);
        varbit<16> tmp;
        tmp = hdr.v1.data;
        hdr.v1.data = hdr.v2.data;
        hdr.v2.data = tmp;
        bit<8> old;
        total.read(old, 0);
        total.write(0, old + hdr.first.val);
    }
}

control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        bit<8> t;
        total.read(t, 0);
        hdr.first.val = t;
    }
}

control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr); } }

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
