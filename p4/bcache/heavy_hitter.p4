/* heavy_hitter.p4 — a stateful B-Cache test program (../shared/reference/bcache.md §2.7): a
 * per-source packet count in a register (read, +1, write back); sources over a threshold are
 * dropped, the others routed by an exact table. Each packet changes the register, so the
 * paper's value-in-key caching misses on every packet of a flow; tern's symbolic mode replays
 * the increment and re-checks the threshold as a guard. Written for tern. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  diffserv;
    bit<16> totalLen;
    bit<16> identification;
    bit<3>  flags;
    bit<13> fragOffset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdrChecksum;
    bit<32> srcAddr;
    bit<32> dstAddr;
}

struct metadata {
    bit<32> idx;
    bit<32> count;
}

struct headers {
    ethernet_t ethernet;
    ipv4_t     ipv4;
}

parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            0x0800: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition accept;
    }
}

control VC(inout headers hdr, inout metadata meta) {
    apply { }
}

control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    register<bit<32>>(256) counts;

    action drop() {
        mark_to_drop(sm);
    }
    action forward(bit<9> port) {
        sm.egress_spec = port;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }
    table route {
        key = { hdr.ipv4.dstAddr: exact; }
        actions = { forward; drop; }
        default_action = drop();
    }
    apply {
        if (hdr.ipv4.isValid()) {
            meta.idx = hdr.ipv4.srcAddr & 0xff;
            counts.read(meta.count, meta.idx);
            meta.count = meta.count + 1;
            counts.write(meta.idx, meta.count);
            if (meta.count > 100) {
                drop();
            } else {
                route.apply();
            }
        } else {
            drop();
        }
    }
}

control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply { }
}

control C(inout headers hdr, inout metadata meta) {
    apply { }
}

control D(packet_out pkt, in headers hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
    }
}

V1Switch(P(), VC(), I(), E(), C(), D()) main;
