/* lane.p4 — tern's test program for the fast lane (one path per packet, issue 21). Written
 * for tern. Ethernet + IPv4 with a verified and updated checksum; the IPv4 diffserv byte picks
 * what the packet does: plain unicast, or a divergence from the common case in the middle of
 * its life (I2E clone, digest, multicast, drop, resubmit, E2E clone, recirculate, exit,
 * a priority with no queue, truncate). Every packet first bumps a counter and a register
 * cell in ingress and in egress (read-modify-write), so a stage that ran twice shows. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dst;
    bit<48> src;
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

struct learn_t {
    bit<48> src;
    bit<9>  port;
}

struct metadata {
    @field_list(1) bit<8> resubmitted;
    @field_list(2) bit<8> recirculated;
    bit<32> old;
}

struct headers {
    ethernet_t eth;
    ipv4_t     ipv4;
}

parser P(packet_in pkt, out headers hdr, inout metadata meta,
         inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.etherType) {
            0x0800: ipv4;
            default: accept;
        }
    }
    state ipv4 {
        pkt.extract(hdr.ipv4);
        transition accept;
    }
}

control VC(inout headers hdr, inout metadata meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.totalLen,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}

control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    counter(16, CounterType.packets_and_bytes) seen;
    register<bit<32>>(16) hits;

    action fwd(bit<9> port, bit<48> dmac) {
        sm.egress_spec = port;
        hdr.eth.src = hdr.eth.dst;
        hdr.eth.dst = dmac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }
    action miss() {
        mark_to_drop(sm);
    }
    table route {
        key = { hdr.ipv4.dstAddr : exact; }
        actions = { fwd; miss; }
        default_action = miss();
    }
    apply {
        if (!hdr.ipv4.isValid()) {
            sm.egress_spec = 1;
            exit;
        }
        bit<4> k = (bit<4>)hdr.ipv4.diffserv;
        seen.count((bit<32>)k);
        hits.read(meta.old, (bit<32>)k);
        hits.write((bit<32>)k, meta.old + 1);
        if (sm.checksum_error == 1) {
            hdr.ipv4.protocol = 0xee;
        }
        route.apply();
        hdr.ipv4.identification = (bit<16>)meta.old;
        if (k == 1) {
            clone(CloneType.I2E, 5);
        } else if (k == 2) {
            digest<learn_t>(1, { hdr.eth.src, sm.ingress_port });
        } else if (k == 3) {
            sm.mcast_grp = 1;
        } else if (k == 4) {
            mark_to_drop(sm);
        } else if (k == 5) {
            if (meta.resubmitted == 0) {
                meta.resubmitted = 1;
                resubmit_preserving_field_list(1);
            } else {
                hdr.ipv4.srcAddr = 0x5e5e5e5e;
            }
        } else if (k == 8) {
            sm.egress_spec = 3;
            exit;
        } else if (k == 9) {
            sm.priority = 7;
        } else if (k == 10) {
            truncate(20);
        }
    }
}

control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    counter(16, CounterType.packets_and_bytes) eseen;
    register<bit<32>>(16) ehits;
    apply {
        if (!hdr.ipv4.isValid()) {
            exit;
        }
        bit<4> k = (bit<4>)hdr.ipv4.diffserv;
        eseen.count((bit<32>)k);
        bit<32> old;
        ehits.read(old, (bit<32>)k);
        ehits.write((bit<32>)k, old + 1);
        hdr.ipv4.fragOffset = (bit<13>)old;
        hdr.ipv4.flags = (bit<3>)sm.instance_type;
        hdr.ipv4.srcAddr = hdr.ipv4.srcAddr + (bit<32>)sm.egress_rid
            + (bit<32>)sm.enq_qdepth + (bit<32>)sm.deq_timedelta;
        hdr.eth.src = sm.egress_global_timestamp + (bit<48>)sm.egress_port
            + (bit<48>)sm.packet_length;
        if (k == 6 && sm.instance_type == 0) {
            clone(CloneType.E2E, 6);
        } else if (k == 7 && meta.recirculated == 0) {
            meta.recirculated = 1;
            recirculate_preserving_field_list(2);
        } else if (k == 11) {
            mark_to_drop(sm);
        }
    }
}

control CC(inout headers hdr, inout metadata meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.totalLen,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}

control D(packet_out pkt, in headers hdr) {
    apply {
        pkt.emit(hdr.eth);
        pkt.emit(hdr.ipv4);
    }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
