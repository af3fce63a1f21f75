/* firewall.p4 — a stateless IPv4 firewall for tern's virtualization tests and examples
 * (HyPer4's "firewall" function). Written for tern.
 *
 * An ACL (ternary on source, destination and protocol, with priorities) denies or allows
 * IPv4 packets; what is not denied, including non-IPv4 frames, is forwarded unchanged by the
 * ingress port (`fwd`: ingress port -> egress port); a port without a `fwd` entry drops. */
#include <core.p4>
#include <v1model.p4>

const bit<16> TYPE_IPV4 = 0x800;

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

struct metadata { }

struct headers {
    ethernet_t ethernet;
    ipv4_t     ipv4;
}

parser FwParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            TYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition accept;
    }
}

control FwVerify(inout headers hdr, inout metadata meta) {
    apply { }
}

control FwIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    action deny() {
        mark_to_drop(standard_metadata);
    }
    action allow() { }
    action set_egress(bit<9> port) {
        standard_metadata.egress_spec = port;
    }

    table acl {
        key = {
            hdr.ipv4.srcAddr: ternary;
            hdr.ipv4.dstAddr: ternary;
            hdr.ipv4.protocol: ternary;
        }
        actions = { deny; allow; }
        size = 256;
        default_action = allow();
    }

    table fwd {
        key = { standard_metadata.ingress_port: exact; }
        actions = { set_egress; deny; }
        size = 64;
        default_action = deny();
    }

    apply {
        fwd.apply();
        if (hdr.ipv4.isValid()) {
            acl.apply();
        }
    }
}

control FwEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control FwCompute(inout headers hdr, inout metadata meta) {
    apply { }
}

control FwDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
    }
}

V1Switch(FwParser(), FwVerify(), FwIngress(), FwEgress(), FwCompute(), FwDeparser()) main;
