//! BMv2's Thrift runtime API for tern: the wire server and the wire client.
//!
//! * [`serve`] / [`spawn`] run a threaded Thrift server (strict TBinaryProtocol over
//!   TBufferedTransport, multiplexed services `standard`, `simple_pre`, `simple_pre_lag`,
//!   `simple_switch`) in front of any [`tern_runtime::Runtime`], so `simple_switch_CLI`,
//!   p4c's test runner and Thrift controllers drive tern exactly as they drive BMv2.
//! * [`ThriftRuntime`] connects to such a server (tern's or BMv2's) and implements
//!   [`tern_runtime::Runtime`] by making the wire calls, so the text CLI drives a remote switch.
//!
//! The wire types come from the IDL files in `idl/`, compiled by Apache Thrift 0.17's Rust
//! generator into [`gen`] (see the crate README for how to regenerate them).

mod client;
mod convert;
pub mod gen;
mod guard;
mod server;

pub use client::{PreService, ThriftRuntime};
pub use server::{
    serve, serve_with, spawn, spawn_stoppable, spawn_stoppable_with, Server,
    DEFAULT_MAX_CONNECTIONS,
};
