/* multicast.p4 — layer-2 forwarding with multicast, in the style of the p4lang tutorial
 * "multicast". Written for tern. An exact match on the destination MAC either forwards to a
 * port or sets a multicast group; replicas are not sent back to the ingress port, and each
 * replica carries its replication id in the source MAC's low byte. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

struct metadata { }

struct headers {
    ethernet_t ethernet;
}

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    action drop() {
        mark_to_drop(standard_metadata);
    }
    action multicast(bit<16> group) {
        standard_metadata.mcast_grp = group;
    }
    action mac_forward(bit<9> port) {
        standard_metadata.egress_spec = port;
    }
    table mac_lookup {
        key = { hdr.ethernet.dstAddr : exact; }
        actions = { multicast; mac_forward; drop; }
        size = 1024;
        default_action = multicast(1);
    }
    apply {
        mac_lookup.apply();
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    action drop() {
        mark_to_drop(standard_metadata);
    }
    apply {
        if (standard_metadata.egress_port == standard_metadata.ingress_port) {
            drop();
        } else if (standard_metadata.mcast_grp != 0) {
            hdr.ethernet.srcAddr[7:0] = standard_metadata.egress_rid[7:0];
        }
    }
}

control MyComputeChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ethernet);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
