/* ops.p4 — tern's expression and statement test program. Written for tern.
 * Ethernet (type 0x88b5) followed by an ops header: op, a, b and result slots. The ingress
 * computes the result selected by `op` and sends the packet back out of port 1. Covers
 * arithmetic with wrap-around, saturating ops, signed int<8>, slices, concatenation, casts,
 * shifts, functions with return values, if/else inside actions, switch on values, the
 * ternary operator, exit, local variables and nested metadata structs. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> etherType;
}

header ops_t {
    bit<8>  op;
    bit<8>  a;
    bit<8>  b;
    bit<8>  r8;
    bit<16> r16;
    int<8>  s;
}

struct inner_t {
    bit<8> x;
    bool   flag;
}

struct metadata {
    inner_t inner;
    bit<8>  count;
}

struct headers {
    ethernet_t eth;
    ops_t      ops;
}

enum bit<8> Op {
    ADD  = 1,
    SUB  = 2,
    SATA = 3,
    SATS = 4,
    SLICE = 5,
    CONCAT = 6,
    SHIFT = 7,
    SIGNED = 8,
    FUNC = 9,
    IFACT = 10,
    TERN = 11,
    EXIT = 12,
    MUL = 13,
    NEG = 14
}

bit<8> max8(in bit<8> x, in bit<8> y) {
    if (x > y) {
        return x;
    }
    return y;
}

parser P(packet_in pkt, out headers hdr, inout metadata meta,
         inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.etherType) {
            0x88b5: ops;
            default: accept;
        }
    }
    state ops {
        pkt.extract(hdr.ops);
        transition accept;
    }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }

control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action classify(bit<8> v) {
        if (v < 16) {
            hdr.ops.r8 = 1;
        } else if (v < 128) {
            hdr.ops.r8 = 2;
        } else {
            hdr.ops.r8 = 3;
        }
        meta.inner.flag = v[0:0] == 1;
    }
    apply {
        sm.egress_spec = 1;
        if (!hdr.ops.isValid()) {
            exit;
        }
        meta.inner.x = hdr.ops.a;
        switch (hdr.ops.op) {
            Op.ADD: { hdr.ops.r8 = hdr.ops.a + hdr.ops.b; }
            Op.SUB: { hdr.ops.r8 = hdr.ops.a - hdr.ops.b; }
            Op.SATA: { hdr.ops.r8 = hdr.ops.a |+| hdr.ops.b; }
            Op.SATS: { hdr.ops.r8 = hdr.ops.a |-| hdr.ops.b; }
            Op.SLICE: { hdr.ops.r8 = 4w0 ++ hdr.ops.a[7:4]; hdr.ops.r16[11:4] = hdr.ops.b; }
            Op.CONCAT: { hdr.ops.r16 = hdr.ops.a ++ hdr.ops.b; }
            Op.SHIFT: { hdr.ops.r8 = hdr.ops.a << 3; hdr.ops.r16 = (bit<16>)hdr.ops.a << 4; }
            Op.SIGNED: {
                int<8> t = (int<8>)hdr.ops.a;
                hdr.ops.s = t + (int<8>)hdr.ops.b;
                hdr.ops.r8 = (bit<8>)(t >> 1);
            }
            Op.FUNC: { hdr.ops.r8 = max8(hdr.ops.a, hdr.ops.b); }
            Op.IFACT: {
                classify(hdr.ops.a);
                if (meta.inner.flag) {
                    hdr.ops.r16 = 0xffff;
                }
            }
            Op.TERN: { hdr.ops.r8 = hdr.ops.a > hdr.ops.b ? hdr.ops.a - hdr.ops.b : 8w0; }
            Op.EXIT: {
                hdr.ops.r8 = 0xee;
                exit;
            }
            Op.MUL: { hdr.ops.r16 = (bit<16>)hdr.ops.a * (bit<16>)hdr.ops.b; hdr.ops.r8 = hdr.ops.a * hdr.ops.b; }
            Op.NEG: { hdr.ops.r8 = -hdr.ops.a; hdr.ops.r16 = (bit<16>)(~hdr.ops.a); }
            default: { hdr.ops.r8 = 0xdd; }
        }
        meta.count = meta.count + 1;
        hdr.ops.b = meta.count + meta.inner.x;
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
