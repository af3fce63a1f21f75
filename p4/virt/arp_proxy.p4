/* arp_proxy.p4 — HyPer4's "ARP proxy" function, written for tern (virtualization tests).
 *
 * An ARP request for an address in `arp_proxy` (exact target protocol address -> MAC) is
 * answered by the switch: the frame becomes the ARP reply and goes back out of its ingress
 * port. Everything else (other requests, replies, non-ARP frames) is forwarded unchanged by
 * the ingress port (`fwd`: ingress port -> egress port); a port without an entry drops. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

header arp_t {
    bit<16> htype;
    bit<16> ptype;
    bit<8>  hlen;
    bit<8>  plen;
    bit<16> oper;
    bit<48> sha;
    bit<32> spa;
    bit<48> tha;
    bit<32> tpa;
}

struct metadata {
    bit<32> tmp;
}

struct headers {
    ethernet_t ethernet;
    arp_t      arp;
}

parser ApParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            0x0806: parse_arp;
            default: accept;
        }
    }
    state parse_arp {
        packet.extract(hdr.arp);
        transition accept;
    }
}

control ApVerify(inout headers hdr, inout metadata meta) {
    apply { }
}

control ApIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    action drop() {
        mark_to_drop(standard_metadata);
    }
    action set_egress(bit<9> port) {
        standard_metadata.egress_spec = port;
    }
    action reply(bit<48> mac) {
        hdr.ethernet.dstAddr = hdr.ethernet.srcAddr;
        hdr.ethernet.srcAddr = mac;
        hdr.arp.oper = 2;
        hdr.arp.tha = hdr.arp.sha;
        hdr.arp.sha = mac;
        meta.tmp = hdr.arp.spa;
        hdr.arp.spa = hdr.arp.tpa;
        hdr.arp.tpa = meta.tmp;
        standard_metadata.egress_spec = standard_metadata.ingress_port;
    }

    table arp_proxy {
        key = { hdr.arp.tpa: exact; }
        actions = { reply; NoAction; }
        size = 256;
        default_action = NoAction();
    }

    table fwd {
        key = { standard_metadata.ingress_port: exact; }
        actions = { set_egress; drop; }
        size = 64;
        default_action = drop();
    }

    apply {
        if (hdr.arp.isValid() && hdr.arp.oper == 1 && arp_proxy.apply().hit) {
            return;
        }
        fwd.apply();
    }
}

control ApEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control ApCompute(inout headers hdr, inout metadata meta) {
    apply { }
}

control ApDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.arp);
    }
}

V1Switch(ApParser(), ApVerify(), ApIngress(), ApEgress(), ApCompute(), ApDeparser()) main;
