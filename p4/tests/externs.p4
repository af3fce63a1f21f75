/* externs.p4 — tern's test program for v1model externs and table features. Written for tern.
 * Ethernet followed by a test header (kind, key, val). Covers indexed and direct counters,
 * a meter, registers, digest, clone to a mirror session, resubmit with a preserved field list,
 * ternary const entries with priorities, range keys, switch on action_run, apply().miss,
 * parser value sets, lookahead, verify with parser_error, and an action selector. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> etherType;
}

header t_t {
    bit<8>  kind;
    bit<8>  key;
    bit<16> val;
}

struct digest_t {
    bit<48> src;
    bit<9>  port;
}

struct metadata {
    @field_list(1) bit<8> resubmitted;
    bit<8> tag;
    bit<32> color;
    bit<16> hash_out;
}

struct headers {
    ethernet_t eth;
    t_t        t;
}

error { BadKind }

parser P(packet_in pkt, out headers hdr, inout metadata meta,
         inout standard_metadata_t sm) {
    value_set<bit<16>>(4) types;
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.etherType) {
            types: check;
            default: accept;
        }
    }
    state check {
        verify(pkt.lookahead<bit<8>>() != 0xff, error.BadKind);
        pkt.extract(hdr.t);
        transition accept;
    }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }

control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    counter(8, CounterType.packets_and_bytes) kinds;
    direct_counter(CounterType.packets) hits;
    meter(4, MeterType.packets) m;
    register<bit<16>>(16) last_val;
    action_selector(HashAlgorithm.crc16, 32w64, 32w16) sel;
    direct_meter<bit<32>>(MeterType.packets) dm;

    action set_tag(bit<8> tag) {
        meta.tag = tag;
    }
    action count_hit() {
    }
    action read_color() {
        dm.read(meta.color);
    }
    table metered {
        key = { hdr.t.key : exact; }
        actions = { read_color; NoAction; }
        meters = dm;
        default_action = NoAction();
    }
    action port_out(bit<9> p) {
        sm.egress_spec = p;
    }
    table prio {
        key = { hdr.t.key : ternary; }
        actions = { set_tag; NoAction; }
        const entries = {
            priority = 100 : 0x13 &&& 0xff : set_tag(3);
            priority = 50 : 0x10 &&& 0xf0 : set_tag(1);
            priority = 40 : 0x12 &&& 0xff : set_tag(2);
            priority = 1 : _ : set_tag(9);
        }
    }
    table ranges {
        key = { hdr.t.val : range; }
        actions = { set_tag; }
        default_action = set_tag(0);
        const entries = {
            0 .. 99 : set_tag(10);
            100 .. 199 : set_tag(11);
        }
    }
    table direct {
        key = { hdr.t.key : exact; }
        actions = { count_hit; NoAction; }
        counters = hits;
        default_action = NoAction();
    }
    table ecmp {
        key = {
            hdr.t.key : exact;
            hdr.eth.src : selector;
        }
        actions = { port_out; }
        implementation = sel;
    }
    apply {
        sm.egress_spec = 1;
        if (sm.parser_error == error.BadKind) {
            hdr.eth.etherType = 0xbad0;
            exit;
        }
        if (!hdr.t.isValid()) {
            exit;
        }
        kinds.count((bit<32>)hdr.t.kind);
        switch (hdr.t.kind) {
            1: {
                prio.apply();
                hdr.t.val = (bit<16>)meta.tag;
            }
            2: {
                switch (ranges.apply().action_run) {
                    set_tag: { hdr.t.val = hdr.t.val + (bit<16>)meta.tag; }
                }
            }
            3: {
                if (direct.apply().miss) {
                    hdr.t.val = 0xdead;
                }
            }
            4: {
                last_val.write((bit<32>)hdr.t.key, hdr.t.val);
                digest<digest_t>(1, { hdr.eth.src, sm.ingress_port });
            }
            5: {
                bit<16> old;
                last_val.read(old, (bit<32>)hdr.t.key);
                hdr.t.val = old;
            }
            6: {
                clone(CloneType.I2E, 5);
            }
            7: {
                if (meta.resubmitted == 0) {
                    meta.resubmitted = 1;
                    resubmit_preserving_field_list(1);
                } else {
                    hdr.t.val = 0x5e5e;
                }
            }
            8: {
                m.execute_meter((bit<32>)0, meta.color);
                hdr.t.val = (bit<16>)meta.color;
            }
            9: {
                ecmp.apply();
            }
            10: {
                hash(meta.hash_out, HashAlgorithm.crc16, 16w0, { hdr.t.key }, 16w0xffff);
                hdr.t.val = meta.hash_out;
            }
            11: {
                meta.color = 7;
                metered.apply();
                hdr.t.val = (bit<16>)meta.color;
            }
        }
    }
}

control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        if (sm.instance_type == 1) {
            hdr.t.val = 0xc10e;
        }
    }
}
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) {
    apply {
        pkt.emit(hdr.eth);
        pkt.emit(hdr.t);
    }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
