//! tern-p4rt: a P4Runtime v1 gRPC server over the tern data plane.
//!
//! [`serve`] runs the `p4.v1.P4Runtime` service (wire format of P4Runtime 1.4.1, protos in
//! `proto/`) for one shared [`tern_dataplane::Switch`]; [`multi_device_service`] serves several
//! switches, one per device id. [`Handle`] is the server state: a packet loop that owns real
//! ports passes CPU-port outputs and digests through it ([`Handle::deliver_outputs`],
//! [`Handle::deliver_digests`]), or injects packets with [`Handle::inject`].
//!
//! Entities are mapped to BMv2-style runtime calls by P4Info name and declaration order (match
//! fields = JSON key order, params = `runtime_data` order), as `simple_switch_grpc` does.
//! P4Runtime priorities (larger wins) become BMv2 priorities as `i32::MAX - priority`.
//! [`p4info`] parses text P4Info, derives a P4Info from a BMv2 JSON with p4c's id scheme, and
//! holds the byte-string rules (zero-padded input accepted, canonical output).

mod entities;
pub mod p4info;
pub mod proto;
mod server;

pub use server::{
    multi_device_service, serve, serve_async, Handle, Options, OutputSink, Service, API_VERSION,
    ERROR_SPACE,
};
