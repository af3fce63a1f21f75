/* copyinout.p4 — P4-16's calling convention for out/inout arguments: copy-in at the call
 * (arguments evaluated left to right), copy-out at return (left to right), also when
 * arguments alias each other or storage the callee touches. Written for tern.
 * Packet: a header (mode, a, b, c, d); out of port 1 with the results in a..d. */
#include <core.p4>
#include <v1model.p4>

header e_t {
    bit<8> mode;
    bit<8> a;
    bit<8> b;
    bit<8> c;
    bit<8> d;
}

header x_t {
    bit<8> v;
}

header_union xu_t {
    x_t p;
    x_t q;
}

struct headers {
    e_t e;
}

struct metadata {
    bit<8> m;
}

parser P(packet_in pkt, out headers h, inout metadata m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(h.e);
        transition accept;
    }
}

bit<8> bump(inout bit<8> x) {
    x = x + 1;
    return x;
}

bit<8> readThenSet(in e_t v, inout bit<8> x) {
    x = 99;
    return v.a;
}

control I(inout headers h, inout metadata m, inout standard_metadata_t sm) {
    // Both parameters alias h.e.a: copy-out of y (left to right, last) wins.
    action twoInout(inout bit<8> x, inout bit<8> y) {
        x = x + 1;
        y = y + 10;
    }
    // y reads its own copy, not x's new value.
    action sumInout(inout bit<8> x, inout bit<8> y) {
        x = 5;
        y = y + x;
    }
    // The parameter aliases h.e.c, which the action also writes: copy-out overwrites it.
    action writesGlobal(inout bit<8> x) {
        h.e.c = 7;
        x = x + 1;
    }
    // Reading the global after writing the parameter sees the old value.
    action readsGlobal(inout bit<8> x) {
        x = 9;
        h.e.d = h.e.c;
    }
    // An out parameter starts uninitialized (0 here, as in BMv2): not written, so the
    // caller's field is overwritten with it.
    action maybeSet(out bit<8> x, bit<8> w) {
        if (w == 1) {
            x = 3;
        }
    }
    // standard_metadata stays bound by reference (p4c's drop-bmv2 passes it `out`).
    action markDrop(out standard_metadata_t s) {
        mark_to_drop(s);
    }
    // A header-union variable: making xu.q valid invalidates xu.p, but hp is a copy, and
    // its copy-out makes xu.p valid again.
    xu_t xu;
    action viaUnion(inout x_t hp) {
        xu.q.setValid();
        xu.q.v = 1;
        hp.v = hp.v + 5;
    }
    // Copy-out still happens after `exit` (innermost call first).
    action exitAfter(out bit<8> x, inout bit<8> y) {
        x = 0x77;
        y = y + 1;
        exit;
    }
    action outer(inout bit<8> z) {
        z = z + 2;
        exitAfter(h.e.c, z);
    }
    action addTo(inout bit<8> x, in bit<8> v) {
        x = x + v;
    }
    // Bound in a table's actions list: the same calling convention.
    table tw {
        actions = {
            writesGlobal(h.e.c);
        }
        default_action = writesGlobal(h.e.c);
    }
    apply {
        sm.egress_spec = 1;
        if (h.e.mode == 0) {
            twoInout(h.e.a, h.e.a);
            sumInout(h.e.b, h.e.b);
        } else if (h.e.mode == 1) {
            writesGlobal(h.e.c);
            readsGlobal(h.e.b);
        } else if (h.e.mode == 2) {
            readsGlobal(h.e.c);
        } else if (h.e.mode == 3) {
            maybeSet(h.e.a, 0);
            maybeSet(h.e.b, 1);
            m.m = 4;
            maybeSet(m.m, 0);
            h.e.c = m.m;
        } else if (h.e.mode == 4) {
            // x is copied in before the second argument's call changes h.e.a.
            addTo(h.e.a, bump(h.e.a));
            // An `in` header is a copy: the inout write of h.e.b is not seen through it.
            h.e.c = readThenSet(h.e, h.e.a);
        } else if (h.e.mode == 5) {
            tw.apply();
        } else if (h.e.mode == 6) {
            markDrop(sm);
        } else if (h.e.mode == 7) {
            exitAfter(h.e.a, h.e.b);
        } else if (h.e.mode == 8) {
            outer(h.e.d);
        } else if (h.e.mode == 9) {
            xu.p.setValid();
            xu.p.v = h.e.a;
            viaUnion(xu.p);
            h.e.b = 0xEE;
            if (xu.p.isValid()) {
                h.e.b = xu.p.v;
            }
            if (xu.q.isValid()) {
                h.e.c = 0xEE;
            }
        }
        h.e.mode = h.e.mode + 0x10;
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
        pkt.emit(h.e);
    }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
