//! tern-p4rt: a P4Runtime v1 gRPC server over the tern data plane.
//!
//! [`serve`] runs the `p4.v1.P4Runtime` service for one shared [`tern_dataplane::Switch`];
//! [`Handle`] gives packet loops that own real ports a way to hand CPU-port packets and digests
//! to the controller.

mod entities;
pub mod p4info;
pub mod proto;
mod server;

pub use server::{
    multi_device_service, serve, serve_async, Handle, Options, Service, API_VERSION, ERROR_SPACE,
};
