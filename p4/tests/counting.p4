// Every packet increments register cell 0 (read, then write, in one action) and counter
// cell 1, and leaves on port 2. Used by the worker tests (crates/tern/src/run_workers.rs,
// cmd_bench_workers.rs): shared registers must lose no increment, counters are summed.
#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> d; bit<48> s; bit<16> t; }
struct headers { eth_t eth; }
struct metadata { }
parser P(packet_in p, out headers h, inout metadata m, inout standard_metadata_t sm) {
    state start { p.extract(h.eth); transition accept; }
}
control V(inout headers h, inout metadata m) { apply { } }
control I(inout headers h, inout metadata m, inout standard_metadata_t sm) {
    register<bit<32>>(4) total;
    counter(4, CounterType.packets_and_bytes) seen;
    action bump() {
        bit<32> v;
        total.read(v, 0);
        total.write(0, v + 1);
        seen.count(1);
        sm.egress_spec = 2;
    }
    apply { bump(); }
}
control E(inout headers h, inout metadata m, inout standard_metadata_t sm) { apply { } }
control C(inout headers h, inout metadata m) { apply { } }
control D(packet_out p, in headers h) { apply { p.emit(h.eth); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
