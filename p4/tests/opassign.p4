/* opassign.p4 — compound assignments (P4-16: `+=` `-=` `*=` `/=` `%=` `&=` `|=` `^=` `<<=`
 * `>>=` `|+|=` `|-|=`), each `l = l op r` with the left side evaluated once: the run-time
 * stack index `bump(k) & 3` below runs bump once per statement. Written for tern. */
#include <core.p4>
#include <v1model.p4>

header ops_t {
    bit<8> a;   // +=
    bit<8> b;   // -=
    bit<8> c;   // *=
    bit<8> d;   // &=
    bit<8> e;   // |=
    bit<8> f;   // ^=
    bit<8> g;   // <<=
    bit<8> h;   // >>=
    bit<8> i;   // |+|=
    bit<8> j;   // |-|=
    bit<8> l;   // /=
    bit<8> m;   // %=
    int<8> s;   // >>= on a signed value (arithmetic)
    bit<8> k;   // index counter, then += a loop's sum
}

header word_t {
    bit<16> w;
}

struct headers {
    ops_t     ops;
    word_t[4] words;
}

struct metadata { }

parser P(packet_in pkt, out headers hdr, inout metadata meta,
         inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ops);
        pkt.extract(hdr.words.next);
        pkt.extract(hdr.words.next);
        pkt.extract(hdr.words.next);
        pkt.extract(hdr.words.next);
        transition accept;
    }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }

/* Returns x, then counts it up. */
bit<8> bump(inout bit<8> x) {
    bit<8> before = x;
    x += 1;
    return before;
}

control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action add_up() {
        bit<8> sum = 0;
        for (bit<8> x = 1; x <= 4; x += 1) {
            sum += x;
        }
        hdr.ops.k += sum;
    }
    apply {
        hdr.ops.a += 5;
        hdr.ops.b -= 3;
        hdr.ops.c *= 3;
        hdr.ops.d &= 0x0F;
        hdr.ops.e |= 0x80;
        hdr.ops.f ^= 0xFF;
        hdr.ops.g <<= 2;
        hdr.ops.h >>= 3;
        hdr.ops.i |+|= 0xF0;
        hdr.ops.j |-|= 0x20;
        hdr.ops.l /= 7;
        hdr.ops.m %= 7;
        hdr.ops.s >>= 1;
        hdr.words[bump(hdr.ops.k) & 3].w += 16w0x0101;
        hdr.words[bump(hdr.ops.k) & 3].w ^= 16w0xFFFF;
        add_up();
    }
}

control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr); } }

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
