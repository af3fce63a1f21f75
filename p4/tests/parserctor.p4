/* parserctor.p4 — constructor parameters of parsers: the top-level parser gets its tag
 * EtherType from `main` (`P(16w0x9999)`), and two instances of one sub-parser type with
 * different constructor arguments (`Tag(8w1)`, `Tag(8w100)`) each add their constant to a
 * running sum passed inout; ingress adds its own constructor argument (`I(8w0x10)`). Written
 * for tern. Out of port 1 with the sum in `eth.sum`. */
#include <core.p4>
#include <v1model.p4>

header eth_t {
    bit<16> etherType;
    bit<8>  sum;
}

header tag_t {
    bit<8> more;
    bit<8> val;
}

struct headers {
    eth_t eth;
    tag_t t0;
    tag_t t1;
}

struct metadata {
    bit<8> sum;
}

parser Tag(packet_in pkt, out tag_t t, inout bit<8> sum)(bit<8> add) {
    state start {
        pkt.extract(t);
        sum = sum + t.val + add;
        transition accept;
    }
}

parser P(packet_in pkt, out headers h, inout metadata m, inout standard_metadata_t sm)
        (bit<16> tagged) {
    Tag(8w1) plus1;
    Tag(8w100) plus100;
    state start {
        pkt.extract(h.eth);
        m.sum = 0;
        transition select(h.eth.etherType) {
            tagged: tags;
            default: accept;
        }
    }
    state tags {
        plus1.apply(pkt, h.t0, m.sum);
        plus100.apply(pkt, h.t1, m.sum);
        transition accept;
    }
}

control I(inout headers h, inout metadata m, inout standard_metadata_t sm)(bit<8> bonus) {
    apply {
        sm.egress_spec = 1;
        h.eth.sum = m.sum + bonus;
    }
}

control E(inout headers h, inout metadata m, inout standard_metadata_t sm) {
    apply { }
}

control VC(inout headers h, inout metadata m) {
    apply { }
}

control CC(inout headers h, inout metadata m) {
    apply { }
}

control D(packet_out pkt, in headers h) {
    apply {
        pkt.emit(h.eth);
        pkt.emit(h.t0);
        pkt.emit(h.t1);
    }
}

V1Switch(P(16w0x9999), VC(), I(8w0x10), E(), CC(), D()) main;
