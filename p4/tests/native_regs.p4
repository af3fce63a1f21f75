// Register reads and writes the native pipeline code does in place (cells of 1, 2, 3, 5, 7
// and 8 bytes), with indexes from the packet so that some are in range and some are not
// (out of range: nothing read, nothing written), every value read written into an emitted
// header and every write masked to the register's width. Used by the native-vs-interpreter
// test (crates/tern/src/cmd_bench.rs, `native_code_matches_the_interpreter`): its frames'
// 18 bytes after the UDP header are random and parse as `res`.
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
struct metadata { bit<64> v64; bit<56> v56; bit<40> v40; bit<24> v24; bit<12> v12; bit<1> v1; }

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

register<bit<64>>(4000) r64;
register<bit<56>>(200) r56;
register<bit<40>>(3000) r40;
register<bit<24>>(256) r24;
register<bit<12>>(100) r12;
register<bit<1>>(16) r1;

control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action drop() { mark_to_drop(sm); }
    action fwd(bit<9> port) { sm.egress_spec = port; }
    // 12-bit index against 4,000 cells: mostly in range; the write lands 7 cells away.
    action wide() {
        r64.read(meta.v64, (bit<32>) hdr.res.f);
        hdr.res.e = (bit<56>) meta.v64;
        r64.write((bit<32>) (hdr.res.f ^ 12w7), meta.v64 + (bit<64>) hdr.res.a);
        r40.read(meta.v40, (bit<32>) hdr.res.f);
        hdr.res.a = (bit<32>) meta.v40;
        r40.write((bit<32>) hdr.res.f + 32w1, (bit<40>) hdr.res.e ^ 40w0xff00ff00ff);
    }
    // 8-bit indexes against 200, 256, 100 and 16 cells: in and out of range.
    action narrow() {
        r56.read(meta.v56, (bit<32>) hdr.res.c);
        hdr.res.e = hdr.res.e ^ meta.v56;
        r56.write((bit<32>) hdr.res.d, meta.v56 + 56w0xfedcba98765432);
        r24.read(meta.v24, (bit<32>) hdr.res.d);
        hdr.res.b = (bit<16>) meta.v24;
        r24.write((bit<32>) hdr.res.c, (bit<24>) hdr.res.a);
        r12.read(meta.v12, (bit<32>) hdr.res.h);
        hdr.res.f = meta.v12;
        r12.write((bit<32>) hdr.res.c, (bit<12>) hdr.ipv4.srcAddr);
        r1.read(meta.v1, (bit<32>) hdr.res.g);
        hdr.res.g = (bit<4>) meta.v1;
        r1.write((bit<32>) hdr.res.h, (bit<1>) hdr.res.b);
    }
    table route {
        key = { hdr.ipv4.dstAddr: lpm; }
        actions = { fwd; drop; }
        default_action = drop();
    }
    apply {
        if (hdr.res.isValid()) {
            wide();
            narrow();
            if (meta.v12 > 2000) { hdr.res.h = hdr.res.h + 1; }
        }
        route.apply();
    }
}

control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        // The egress pipeline's own access to the same array.
        if (hdr.res.isValid()) {
            r64.read(meta.v64, (bit<32>) hdr.res.b);
            hdr.res.d = (bit<8>) meta.v64;
            r64.write((bit<32>) hdr.res.b, meta.v64 + 1);
        }
    }
}
control C(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pk, in headers hdr) {
    apply { pk.emit(hdr.ethernet); pk.emit(hdr.ipv4); pk.emit(hdr.udp); pk.emit(hdr.res); }
}
V1Switch(P(), V(), I(), E(), C(), D()) main;
