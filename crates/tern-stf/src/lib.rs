//! p4c's STF packet-test format (`shared/reference/stf.md`): a parser ([`parse`]) that turns
//! STF text into typed commands with positions, and a runner ([`run`]) that executes them
//! against any [`tern_runtime::Runtime`] + [`tern_runtime::PacketPath`] and applies p4c's
//! per-port comparison rule, producing an [`StfReport`]. `add` and `setdefault` are translated
//! here (p4c's name and key rules, [`translate`]); the BMv2 pass-through commands
//! (`mirroring_*`, `mc_*`, `counter_*`, `register_*`, `meter_*`) go through `tern-control`'s
//! runtime CLI interpreter, as p4c forwards them to `simple_switch_CLI`.
//!
//! ```
//! # fn main() {
//! # tern_fixtures::require!(); // the example reads a shared BMv2 fixture
//! let json = std::fs::read_to_string(tern_fixtures::bmv2(
//!     "targets/simple_switch/tests/testdata/recirc.json",
//! ))
//! .unwrap();
//! let mut sw = tern_dataplane::Switch::from_json(&json, Default::default()).unwrap();
//! let program = sw.program().clone();
//! let script = tern_stf::parse("expect 1 01 ab $\npacket 1 00\n", "recirc.stf").unwrap();
//! let report = tern_stf::run(&script, &mut sw, &program);
//! assert!(report.passed(), "{report}");
//! # }
//! ```

pub mod ast;
mod parse;
mod report;
mod run;
pub mod translate;

pub use ast::*;
pub use parse::{number_to_u64, parse};
pub use report::{Expectation, Issue, Outcome, StfReport, Unexpected};
pub use run::{compare, hex_upper, run, run_with_options, RunOptions};

use std::fmt;

/// A syntax error in an STF file, with its position.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StfError {
    pub file: String,
    pub line: u32,
    pub column: u32,
    pub message: String,
}

impl fmt::Display for StfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.line, self.column, self.message
        )
    }
}

impl std::error::Error for StfError {}
