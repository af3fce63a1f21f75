/* stateful_firewall.p4 — a stateful B-Cache test program (../shared/reference/bcache.md §2.7):
 * packets from the inside port class open a pinhole (a register bit at a hash of the address
 * pair); packets from outside pass only through an open pinhole (the reversed pair). Written
 * for tern. */
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
    bit<1>  outside;
    bit<10> idx;
    bit<1>  open;
    bit<1>  blocked;
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
    register<bit<1>>(1024) pinholes;

    action drop() {
        mark_to_drop(sm);
    }
    action set_side(bit<1> outside) {
        meta.outside = outside;
    }
    action forward(bit<9> port) {
        sm.egress_spec = port;
    }
    table side {
        key = { sm.ingress_port: exact; }
        actions = { set_side; NoAction; }
        default_action = NoAction();
    }
    table route {
        key = { hdr.ipv4.dstAddr: lpm; }
        actions = { forward; drop; }
        default_action = drop();
    }
    apply {
        if (hdr.ipv4.isValid()) {
            side.apply();
            if (meta.outside == 0) {
                hash(meta.idx, HashAlgorithm.crc16, (bit<10>)0,
                     { hdr.ipv4.srcAddr, hdr.ipv4.dstAddr }, (bit<10>)1023);
                pinholes.write((bit<32>)meta.idx, 1);
            } else {
                hash(meta.idx, HashAlgorithm.crc16, (bit<10>)0,
                     { hdr.ipv4.dstAddr, hdr.ipv4.srcAddr }, (bit<10>)1023);
                pinholes.read(meta.open, (bit<32>)meta.idx);
                if (meta.open == 0) {
                    meta.blocked = 1;
                }
            }
            if (meta.blocked == 0) {
                route.apply();
            } else {
                drop();
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
