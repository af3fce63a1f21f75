/* l2_switch.p4 — HyPer4's "L2 switch" function, written for tern (virtualization tests).
 *
 * Forwards by destination MAC (`dmac`: exact dstAddr -> forward(port)); an unknown or
 * broadcast destination floods through multicast group 1, and egress drops any copy that
 * would go back out of the ingress port. Learning is left to the control plane (`smac`
 * misses raise a digest of (srcAddr, ingress_port)). */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

struct learn_t {
    bit<48> srcAddr;
    bit<9>  port;
}

struct metadata { }

struct headers {
    ethernet_t ethernet;
}

parser L2Parser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition accept;
    }
}

control L2Verify(inout headers hdr, inout metadata meta) {
    apply { }
}

control L2Ingress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    action learn() {
        digest<learn_t>(1, { hdr.ethernet.srcAddr, standard_metadata.ingress_port });
    }
    action known() { }
    action forward(bit<9> port) {
        standard_metadata.egress_spec = port;
    }
    action flood() {
        standard_metadata.mcast_grp = 1;
    }

    table smac {
        key = { hdr.ethernet.srcAddr: exact; }
        actions = { learn; known; }
        size = 512;
        default_action = learn();
    }

    table dmac {
        key = { hdr.ethernet.dstAddr: exact; }
        actions = { forward; flood; }
        size = 512;
        default_action = flood();
    }

    apply {
        smac.apply();
        dmac.apply();
    }
}

control L2Egress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        // Never back out of the port the frame came in on (flood copies or a stale entry).
        if (standard_metadata.egress_port == standard_metadata.ingress_port) {
            mark_to_drop(standard_metadata);
        }
    }
}

control L2Compute(inout headers hdr, inout metadata meta) {
    apply { }
}

control L2Deparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ethernet);
    }
}

V1Switch(L2Parser(), L2Verify(), L2Ingress(), L2Egress(), L2Compute(), L2Deparser()) main;
