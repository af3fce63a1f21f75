// Tables whose hits update their entry, looked up and run natively: a direct counter
// (packets and bytes), a direct meter whose colour the action reads, and ageing
// (`support_timeout`). Used by the native-vs-interpreter test (crates/tern/src/cmd_bench.rs,
// `native_code_matches_the_interpreter`), which also compares every entry's counter; its
// frames' 18 bytes after the UDP header are random and parse as `res`.
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dstAddr; bit<48> srcAddr; bit<16> etherType; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> diffserv; bit<16> totalLen; bit<16> identification;
    bit<3> flags; bit<13> fragOffset; bit<8> ttl; bit<8> protocol; bit<16> hdrChecksum;
    bit<32> srcAddr; bit<32> dstAddr;
}
header udp_t { bit<16> srcPort; bit<16> dstPort; bit<16> len; bit<16> csum; }
header res_t {
    bit<32> a; bit<16> b; bit<8> c; bit<8> d; bit<56> e; bit<12> f; bit<4> g; bit<8> h;
}

struct headers { ethernet_t ethernet; ipv4_t ipv4; udp_t udp; res_t res; }
struct metadata { bit<2> color; }

parser P(packet_in pk, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        pk.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) { 0x0800: ipv4; default: accept; }
    }
    state ipv4 {
        pk.extract(hdr.ipv4);
        transition select(hdr.ipv4.protocol) { 17: udp; default: accept; }
    }
    state udp { pk.extract(hdr.udp); pk.extract(hdr.res); transition accept; }
}

control V(inout headers hdr, inout metadata meta) { apply { } }

control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    direct_counter(CounterType.packets_and_bytes) dst_count;
    direct_meter<bit<2>>(MeterType.bytes) src_meter;
    action drop() { mark_to_drop(sm); }
    action fwd(bit<9> port, bit<8> v) {
        sm.egress_spec = port;
        hdr.res.h = hdr.res.h + v;
    }
    action counted(bit<8> v) { hdr.res.c = hdr.res.c ^ v; dst_count.count(); }
    action metered(bit<8> v) {
        src_meter.read(meta.color);
        hdr.res.g = (bit<4>) meta.color;
        hdr.res.d = hdr.res.d + v;
    }
    action aged(bit<16> v) { hdr.res.b = hdr.res.b ^ v; }
    table by_dst {
        key = { hdr.ipv4.dstAddr: exact; }
        actions = { counted; drop; }
        counters = dst_count;
        default_action = drop();
    }
    table by_src {
        key = { hdr.ipv4.srcAddr: exact; }
        actions = { metered; NoAction; }
        meters = src_meter;
        default_action = NoAction();
    }
    table by_port {
        key = { hdr.udp.dstPort: exact; }
        actions = { aged; NoAction; }
        support_timeout = true;
        default_action = NoAction();
    }
    table route {
        key = { hdr.ipv4.dstAddr: lpm; }
        actions = { fwd; drop; }
        default_action = drop();
    }
    apply {
        if (hdr.res.isValid()) {
            if (by_dst.apply().hit) { hdr.res.a = hdr.res.a + 1; }
            by_src.apply();
            by_port.apply();
        }
        route.apply();
    }
}

control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pk, in headers hdr) {
    apply { pk.emit(hdr.ethernet); pk.emit(hdr.ipv4); pk.emit(hdr.udp); pk.emit(hdr.res); }
}
V1Switch(P(), V(), I(), E(), C(), D()) main;
