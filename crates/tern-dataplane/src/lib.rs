//! The packet engine: turns a program model into an executable program and runs packets
//! through it with simple_switch's exact semantics.
//!
//! Entry point: [`Switch::from_json`] loads a BMv2 JSON (accepting and rejecting exactly what
//! `simple_switch` does) and returns a value implementing [`tern_runtime::Runtime`] (the
//! control API) and [`tern_runtime::PacketPath`] (deterministic packet processing).
//!
//! Stages: [`layout`] (PHV layout), [`expr`] (expressions), [`compile`] (model → engine),
//! [`exec`] (parser, actions, tables, pipelines, deparser), [`csum`] (checksums over emitted
//! bytes), [`jit`] (parser and emit loop as native code), [`uses`] (fields the program refers to), [`table`] (entries and lookup), [`lpm`] (multibit LPM index),
//! [`externs`] (meters, multicast PRE), [`hash`] (hash algorithms, from `tern-hash`), [`switch`] (packet flow
//! and control plane), [`bcache`] (behaviour-level cache of the ingress pipeline), [`trace`] (per-packet trace in BMv2's log wording), [`workers`] (run-to-completion worker threads with updates published
//! between batches).

pub mod bcache;
pub mod compile;
pub mod csum;
pub mod exec;
pub mod expr;
pub mod externs;
pub mod jit;
pub mod layout;
pub mod lpm;
pub mod switch;
pub mod table;
pub mod trace;
pub mod uses;
pub mod workers;

/// The hash algorithms (re-exported from `tern-hash`).
pub use tern_hash as hash;

pub use switch::{
    BurstOut, CompiledProgram, EmitSink, NativeSummary, OutDesc, Switch, SwitchError, SwitchOptions,
};
