/* unionstack.p4 — a stack of header unions: the parser extracts a different member into each
 * element (by kind bytes), ingress updates the valid member, makes a member valid (the
 * union's other members become invalid) and writes an element through a run-time index; the
 * deparser emits the stack (each union's valid member). Kind 5 extracts through
 * `us.next.a`, `us.next.b`, then shifts the stack with push_front/pop_front. Written for tern.
 * Out of port 1. */
#include <core.p4>
#include <v1model.p4>

header t_t {
    bit<8> k0;
    bit<8> k1;
}

header a_t {
    bit<8> x;
}

header b_t {
    bit<16> y;
}

header_union u_t {
    a_t a;
    b_t b;
}

struct headers {
    t_t    t;
    u_t[2] us;
}

struct metadata {
}

parser P(packet_in pkt, out headers h, inout metadata m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(h.t);
        transition select(h.t.k0) {
            1: a0;
            2: b0;
            5: nexts;
            default: accept;
        }
    }
    state nexts {
        pkt.extract(h.us.next.a);
        pkt.extract(h.us.next.b);
        transition accept;
    }
    state a0 {
        pkt.extract(h.us[0].a);
        transition second;
    }
    state b0 {
        pkt.extract(h.us[0].b);
        transition second;
    }
    state second {
        transition select(h.t.k1) {
            1: a1;
            2: b1;
            default: accept;
        }
    }
    state a1 {
        pkt.extract(h.us[1].a);
        transition accept;
    }
    state b1 {
        pkt.extract(h.us[1].b);
        transition accept;
    }
}

control I(inout headers h, inout metadata m, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        if (h.us[0].a.isValid()) {
            h.us[0].a.x = h.us[0].a.x + 1;
        }
        if (h.us[1].b.isValid()) {
            h.us[1].b.y = h.us[1].b.y + 1;
        }
        if (h.t.k0 == 3) {
            h.us[0].a.setValid();
            h.us[0].a.x = 0x55;
            h.us[0].b.setValid();
            h.us[0].b.y = 0xBEEF;
        }
        if (h.t.k0 == 4) {
            h.us[(bit<1>)h.t.k1].a.setValid();
            h.us[(bit<1>)h.t.k1].a.x = 7;
        }
        if (h.t.k0 == 5) {
            if (h.t.k1 == 1) {
                h.us.push_front(1);
            } else {
                h.us.pop_front(1);
            }
        }
        h.t.k1 = (bit<8>)h.us.size;
    }
}

control E(inout headers h, inout metadata m, inout standard_metadata_t sm) {
    apply { }
}

control VC(inout headers h, inout metadata m) {
    apply { }
}

control CC(inout headers h, inout metadata m) {
    apply { }
}

control D(packet_out pkt, in headers h) {
    apply {
        pkt.emit(h.t);
        pkt.emit(h.us);
    }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
