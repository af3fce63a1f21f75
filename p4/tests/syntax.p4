/* syntax.p4 — a grab bag of declarations and statement forms (typedef/type, enums, serializable
 * enums, error/bool metadata, select tuples with wildcards and masks, @name/@hidden/@tableonly/
 * @defaultonly annotations, keys on slices and isValid(), non-const entries, empty keys,
 * functions with out parameters, directional action parameters, enum switches with fall-through,
 * action_run switches, stack push, return in apply). Written for tern. */
#include <core.p4>
#include <v1model.p4>
const bit<16> X = 16w0x800;
typedef bit<9> port_t;
type bit<32> NewT;
enum E { A, B, C }
enum bit<4> SE { P = 1, Q = 2 }
header h_t { bit<8> a; bit<8> b; int<8> s; bit<16> w; }
struct m_t { E e; error err; bool flag; SE se; bit<8> x; }
struct headers { h_t h; h_t[3] st; }
parser P(packet_in pkt, out headers hdr, inout m_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition select(hdr.h.a, hdr.h.b) { (1, _): s2; (_, 2 &&& 3): s2; default: accept; } }
    state s2 { pkt.extract(hdr.st.next); transition accept; }
}
control VC(inout headers hdr, inout m_t meta) { apply { } }
void fo(out bit<8> r, in bit<8> v) { r = v + 1; }
control I(inout headers hdr, inout m_t meta, inout standard_metadata_t sm) {
    @hidden action hid() { }
    action a1(in bit<8> x) { hdr.h.a = x; }
    @name(".global_b") action b1(bit<8> v) { hdr.h.b = v; exit; }
    action c1() { }
    @name("tt") table t {
        key = { hdr.h.a : exact @name("the_a"); hdr.h.b[3:0] : ternary; hdr.h.isValid() : exact; }
        actions = { @tableonly b1; @defaultonly c1; NoAction; }
        entries = { (1, 0x0f &&& 0x0f, true) : b1(3); (2, _, false) : NoAction(); }
        default_action = c1();
    }
    table t2 { key = { } actions = { c1; b1; } }
    apply {
        bool b = !true;
        int<8> s = -8s5;
        meta.e = E.A;
        meta.se = SE.Q;
        hdr.h.s = s |+| 8s100;
        hdr.h.w = (bit<8>)(8w255 |+| 8w1) ++ 8w0 ;
        hdr.h.w = hdr.h.w << 2w1;
        fo(meta.x, hdr.h.a);
        a1(meta.x);
        switch (meta.e) { E.A: { hdr.h.a = 1; } E.B: E.C: { hdr.h.a = 2; } }
        switch (t.apply().action_run) { b1: c1: { hdr.h.b = 9; } default: { } }
        t2.apply();
        hdr.st.push_front(2);
        if (meta.err == error.NoError && !b) { return; }
        hid();
    }
}
control E2(inout headers hdr, inout m_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout m_t meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr); } }
V1Switch(P(), VC(), I(), E2(), CC(), D()) main;
