//! tern-p4rt: a P4Runtime v1 gRPC server over the tern data plane.
//!
//! [`serve`] runs the `p4.v1.P4Runtime` service (wire format of P4Runtime 1.4.1, protos in
//! `proto/`) for one shared [`tern_dataplane::Switch`]; [`multi_device_service`] serves several
//! switches, one per device id, each a [`P4rtTarget`] (a `Switch`, or one device of a virtual
//! switch), with [`roles`] and per-tenant tokens ([`multi_device_service_with_access`]). [`Handle`] is the server state: a packet loop that owns real
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
pub mod roles;
mod server;
pub mod target;

pub use roles::{Access, Reach, RoleConfig, Roles};
pub use server::{
    multi_device_service, multi_device_service_with_access, serve, serve_async, serve_devices,
    serve_devices_async, serve_set, serve_set_async, DeviceSet, Handle, Options, OutputSink,
    Service, Tick, TlsPem, API_VERSION, ERROR_SPACE,
};
pub use target::{DeviceState, Injected, Locked, P4rtTarget, SwitchTarget};
