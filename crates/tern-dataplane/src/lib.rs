//! The packet engine: turns a program model into an executable program and runs packets
//! through it with simple_switch's exact semantics.
//!
//! Entry point: [`Switch::from_json`] loads a BMv2 JSON (accepting and rejecting exactly what
//! `simple_switch` does) and returns a value implementing [`tern_runtime::Runtime`] (the
//! control API) and [`tern_runtime::PacketPath`] (deterministic packet processing).
//!
//! Stages: [`layout`] (PHV layout), [`expr`] (expressions), [`compile`] (model → engine),
//! [`exec`] (parser, actions, tables, pipelines, deparser), [`table`] (entries and lookup),
//! [`externs`] (meters, multicast PRE), [`hash`] (hash algorithms), [`switch`] (packet flow
//! and control plane).

pub mod compile;
pub mod exec;
pub mod expr;
pub mod externs;
pub mod hash;
pub mod layout;
pub mod switch;
pub mod table;

pub use switch::{Switch, SwitchError, SwitchOptions};
