/* s2_merged.p4 — Example 1 phase C's s2 as one hand-merged native program (HyPer4's
 * `d1_C_s2_native` baseline, written for tern): the ARP proxy, firewall and router tables in
 * one ingress, the checksum in the deparser's compute step. The sliced tern runs the three
 * programs as a chain of devices instead (`tern virt bench` compares the two).
 *
 * ARP requests for a proxied address are answered out of the ingress port; other non-IPv4
 * frames are dropped (the chain's router drops them too); IPv4 meets the firewall's blocks
 * (TCP / UDP ports, addresses) and is then routed as in router.p4. */
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

header tcp_t {
    bit<16> srcPort;
    bit<16> dstPort;
    bit<32> seqNo;
    bit<32> ackNo;
    bit<4>  dataOffset;
    bit<4>  res;
    bit<8>  flags;
    bit<16> window;
    bit<16> checksum;
    bit<16> urgentPtr;
}

header udp_t {
    bit<16> srcPort;
    bit<16> dstPort;
    bit<16> length;
    bit<16> checksum;
}

struct metadata {
    bit<32> nhop;
    bit<32> tmp;
    bit<1>  denied;
}

struct headers {
    ethernet_t ethernet;
    arp_t      arp;
    ipv4_t     ipv4;
    tcp_t      tcp;
    udp_t      udp;
}

parser S2Parser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            0x0806: parse_arp;
            0x0800: parse_ipv4;
            default: accept;
        }
    }
    state parse_arp {
        packet.extract(hdr.arp);
        transition accept;
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition select(hdr.ipv4.fragOffset, hdr.ipv4.protocol) {
            (0, 6): parse_tcp;
            (0, 17): parse_udp;
            default: accept;
        }
    }
    state parse_tcp {
        packet.extract(hdr.tcp);
        transition accept;
    }
    state parse_udp {
        packet.extract(hdr.udp);
        transition accept;
    }
}

control S2Verify(inout headers hdr, inout metadata meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.totalLen,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}

control S2Ingress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    action drop() {
        mark_to_drop(standard_metadata);
    }
    action deny() {
        meta.denied = 1;
    }
    action allow() { }
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
    action set_nhop(bit<32> nhop, bit<9> port) {
        meta.nhop = nhop;
        standard_metadata.egress_spec = port;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }
    action set_dmac(bit<48> dmac) {
        hdr.ethernet.dstAddr = dmac;
    }

    table arp_proxy {
        key = { hdr.arp.tpa: exact; }
        actions = { reply; NoAction; }
        size = 256;
        default_action = NoAction();
    }
    table ipv4_block {
        key = { hdr.ipv4.srcAddr: ternary; hdr.ipv4.dstAddr: ternary; }
        actions = { deny; allow; }
        size = 256;
        default_action = allow();
    }
    table tcp_block {
        key = { hdr.tcp.srcPort: ternary; hdr.tcp.dstPort: ternary; }
        actions = { deny; allow; }
        size = 256;
        default_action = allow();
    }
    table udp_block {
        key = { hdr.udp.srcPort: ternary; hdr.udp.dstPort: ternary; }
        actions = { deny; allow; }
        size = 256;
        default_action = allow();
    }
    table ipv4_lpm {
        key = { hdr.ipv4.dstAddr: lpm; }
        actions = { set_nhop; drop; }
        size = 1024;
        default_action = drop();
    }
    table forward {
        key = { meta.nhop: exact; }
        actions = { set_dmac; drop; }
        size = 512;
        default_action = drop();
    }

    apply {
        if (hdr.arp.isValid() && hdr.arp.oper == 1 && arp_proxy.apply().hit) {
            return;
        }
        if (!hdr.ipv4.isValid() || standard_metadata.parser_error != error.NoError) {
            drop();
            return;
        }
        if (hdr.tcp.isValid()) {
            tcp_block.apply();
        } else if (hdr.udp.isValid()) {
            udp_block.apply();
        }
        ipv4_block.apply();
        if (meta.denied == 1 || standard_metadata.checksum_error == 1 || hdr.ipv4.ttl <= 1) {
            drop();
        } else {
            ipv4_lpm.apply();
            forward.apply();
        }
    }
}

control S2Egress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    action rewrite_mac(bit<48> smac) {
        hdr.ethernet.srcAddr = smac;
    }
    action drop() {
        mark_to_drop(standard_metadata);
    }
    table send_frame {
        key = { standard_metadata.egress_port: exact; }
        actions = { rewrite_mac; drop; }
        size = 256;
        default_action = drop();
    }
    apply {
        /* ARP replies leave as the proxy wrote them. */
        if (hdr.ipv4.isValid()) {
            send_frame.apply();
        }
    }
}

control S2Compute(inout headers hdr, inout metadata meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.totalLen,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}

control S2Deparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.arp);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.tcp);
        packet.emit(hdr.udp);
    }
}

V1Switch(S2Parser(), S2Verify(), S2Ingress(), S2Egress(), S2Compute(), S2Deparser()) main;
