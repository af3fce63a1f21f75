/* equality.p4 — equality of fields, varbit fields, headers and header stacks, local header
 * stacks and header initializers. Written for tern. Input: three (s, 32-bit varbit v)
 * records; output: a flags header appended (bit 0: s equal, bit 1: v equal, bit 2: header
 * equal, bit 3: stack equal) plus a header built from an initializer list. */
#include <core.p4>
#include <v1model.p4>

header rec_t {
    bit<8>     s;
    varbit<32> v;
}

header flags_t {
    bit<8> f;
}

header init_t {
    bit<8>  a;
    bit<16> b;
}

struct metadata { }

struct headers {
    rec_t    r;
    rec_t[2] st;
    flags_t  flags;
    init_t   init;
}

parser P(packet_in pkt, out headers hdr, inout metadata meta,
         inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.r, 32);
        pkt.extract(hdr.st.next, 32);
        pkt.extract(hdr.st.next, 32);
        transition accept;
    }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }

control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    init_t scratch;
    apply {
        sm.egress_spec = 1;
        hdr.flags.setValid();
        hdr.flags.f = 0;
        if (hdr.r.s == hdr.st[0].s) {
            hdr.flags.f = hdr.flags.f | 1;
        }
        if (hdr.r.v == hdr.st[0].v) {
            hdr.flags.f = hdr.flags.f | 2;
        }
        if (hdr.r == hdr.st[0]) {
            hdr.flags.f = hdr.flags.f | 4;
        }
        rec_t[2] tmp;
        tmp[0] = hdr.r;
        tmp[1] = hdr.st[0];
        if (tmp == hdr.st) {
            hdr.flags.f = hdr.flags.f | 8;
        }
        scratch = { 8w0x61, 16w0x6263 };
        hdr.init = scratch;
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
