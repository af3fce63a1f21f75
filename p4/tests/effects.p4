/* effects.p4 — evaluation order and side effects inside expressions. Written for tern.
 * Packet: a 4-byte `e_t` header (mode, idx, a, b) followed by a 3-element stack of 1-byte
 * `v_t` headers. The ingress picks a case by `mode`, rewrites the bytes and sends the packet
 * out of port 1. Covers: `t.apply().hit` inside larger expressions (`||`, `&&`, `?:`, function
 * arguments, initializers, conditions) applied only when the expression evaluates it;
 * short-circuit `&&`/`||` and `?:` with side-effecting calls (constant and run-time
 * conditions); run-time stack indices in out/inout arguments (index evaluated once); nested
 * slices as l-values; directional action parameters bound in a table's actions list; `out`
 * header arguments come back invalid; `@priority` after an entry's action;
 * the empty parameter list of `table t()`; p4c's `_CORE_P4_` guard. */
#include <core.p4>
#include <v1model.p4>

#ifndef _CORE_P4_
#error "core.p4 must define _CORE_P4_ like p4c's"
#endif
#ifndef _V1_MODEL_P4_
#error "v1model.p4 must define _V1_MODEL_P4_ like p4c's"
#endif

header e_t {
    bit<8> mode;
    bit<8> idx;
    bit<8> a;
    bit<8> b;
}

header v_t {
    bit<8> v;
}

struct headers {
    e_t    e;
    v_t[3] s;
}

struct metadata {
    bit<8> calls;
}

parser P(packet_in pkt, out headers h, inout metadata m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(h.e);
        pkt.extract(h.s.next);
        pkt.extract(h.s.next);
        pkt.extract(h.s.next);
        transition accept;
    }
}

/* Counts its calls in `n` (a side effect) and returns `r`. */
bool effect(inout bit<8> n, in bool r) {
    n = n + 1;
    return r;
}

bit<8> bump(inout bit<8> x) {
    x = x + 10;
    return x;
}

/* Leaves its `out` header untouched: the caller's header comes back invalid. */
void forget(out v_t x) {
}

bit<8> pass8(in bool b) {
    return b ? 8w1 : 8w0;
}

control I(inout headers h, inout metadata m, inout standard_metadata_t sm) {
    action count_hit() {
        m.calls = m.calls + 1;
    }
    /* Hits when `a` is 7 (const entry); every application adds 1 to m.calls. BMv2 applies
     * a table at one place only, so each case has its own copy. */
#define COUNTING_TABLE(NAME) \
    table NAME() { \
        key = { h.e.a : exact; } \
        actions = { count_hit; } \
        const entries = { 7 : count_hit(); } \
        default_action = count_hit(); \
    }
    COUNTING_TABLE(t1)
    COUNTING_TABLE(t2)
    COUNTING_TABLE(t3)

    /* A directional parameter bound in the actions list; entries and the default action
     * repeat the binding and give the action data. */
    action add_to(inout bit<8> x, bit<8> d) {
        x = x + d;
    }
    action set_b(bit<8> v) {
        h.e.b = v;
    }
    /* `@priority(N)` after an entry's action: BMv2's priority as p4c passes it (smallest
     * wins); an entry without one keeps its position. */
    table t5 {
        key = { h.e.a : ternary; }
        actions = { set_b; }
        const entries = {
            0x11 &&& 0x0f : set_b(1) @priority(3);
            0x11          : set_b(2);
            0x11 &&& 0xf0 : set_b(3) @priority(1);
        }
    }
    table t4 {
        key = { h.e.a : exact; }
        actions = { add_to(h.e.b); }
        const entries = { 8 : add_to(h.e.b, 5); }
        default_action = add_to(h.e.b, 1);
    }
    apply {
        m.calls = 0;
        sm.egress_spec = 1;
        if (h.e.mode == 1) {
            // `||` with a table application on the right: applied only when b == 0.
            h.e.b = (h.e.b != 0 || t1.apply().hit) ? 8w0xaa : 8w0xbb;
            h.s[0].v = m.calls;
        } else if (h.e.mode == 2) {
            // `&&`, inside a function argument and a local initializer.
            bool both = h.e.b == 1 && t2.apply().hit;
            h.e.b = pass8(both);
            h.s[0].v = m.calls;
        } else if (h.e.mode == 3) {
            // `?:` whose arms apply the table: only the chosen arm runs.
            h.e.b = h.e.b == 0 ? (t3.apply().miss ? 8w0x10 : 8w0x11) : 8w0x20;
            h.s[0].v = m.calls;
        } else if (h.e.mode == 4) {
            // Constant conditions decide without evaluating the other side.
            bool x = true || effect(m.calls, false);
            bool y = false && effect(m.calls, true);
            bit<8> z = false ? bump(h.e.a) : h.e.b;
            h.s[0].v = m.calls;
            h.s[1].v = (bit<8>)(x ? 8w1 : 8w0) + (y ? 8w2 : 8w0);
            h.s[2].v = z;
        } else if (h.e.mode == 5) {
            // Run-time conditions: the call runs only when needed.
            bool x = h.e.a == 0 || effect(m.calls, true);
            bit<8> z = h.e.b == 0 ? bump(h.e.a) : 8w0x77;
            h.s[0].v = m.calls;
            h.s[1].v = x ? 8w1 : 8w0;
            h.s[2].v = z;
        } else if (h.e.mode == 6) {
            // Run-time stack index in an inout argument: copied in and out once.
            bump(h.s[h.e.idx].v);
        } else if (h.e.mode == 10) {
            t5.apply();
        } else if (h.e.mode == 9) {
            forget(h.s[2]);
        } else if (h.e.mode == 8) {
            t4.apply();
        } else if (h.e.mode == 7) {
            // Nested slices as l-values: a[7:4][2:1] is a[6:5].
            bit<8> x = 8w0xff;
            x[7:4][2:1] = 2w0;
            h.e.b = x;
            h.e.a[3:0][3:2] = 2w1;
        }
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
        pkt.emit(h.s);
    }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
