/* storm_control.p4 — a stateful B-Cache test program with a meter (../shared/reference/
 * bcache.md §6.H E8, "metered storm control"): flooded frames (broadcast and unknown
 * destinations) are metered per ingress port and dropped when red; frames to known
 * destinations are switched. The meter is not a guard
 * yet, so the cache keeps the part of the pipeline before it (the switching table) and the
 * metered part runs natively. Written for tern. */
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
    bit<2>  color;
    bit<1>  flooded;
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
    meter(64, MeterType.packets) storm;

    action drop() {
        mark_to_drop(sm);
    }
    action forward(bit<9> port) {
        sm.egress_spec = port;
    }
    action flood() {
        sm.mcast_grp = 1;
        meta.flooded = 1;
    }
    table switching {
        key = { hdr.ethernet.dstAddr: exact; }
        actions = { forward; flood; drop; }
        default_action = flood();
    }
    apply {
        switching.apply();
        if (meta.flooded == 1) {
            storm.execute_meter((bit<32>) sm.ingress_port, meta.color);
            if (meta.color == 2) {
                drop();
            }
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
