//! The result of one STF run: every expectation with what arrived, unexpected frames,
//! command errors and notes, the pass/fail verdict and a readable per-port diff.

use crate::ast::{ExpectPattern, Pos};
use crate::run::hex_upper;
use std::fmt;

/// How one expectation fared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Met,
    /// The first nibble (0-based) where expected and received differ.
    Mismatch {
        nibble: usize,
    },
    /// The frame is shorter than the expected data.
    TooShort,
    /// `$` was given and the frame is longer.
    TooLong,
    /// No frame arrived for this expectation.
    Missing,
    /// A bare `expect <port>` line: p4c's runner always fails such a port.
    Bare,
}

/// One `expect` line and the frame it was compared with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expectation {
    pub port: u32,
    /// 0-based position in the port's list.
    pub index: usize,
    /// The `expect` line.
    pub pos: Pos,
    /// `None` for a bare `expect <port>`.
    pub pattern: Option<ExpectPattern>,
    /// The frame that came out in this position, if any.
    pub got: Option<Vec<u8>>,
    pub outcome: Outcome,
}

impl Expectation {
    pub fn met(&self) -> bool {
        self.outcome == Outcome::Met
    }

    fn expected_text(&self) -> String {
        match &self.pattern {
            None => "(any frame: bare expect)".to_string(),
            Some(p) => format!("{}{}", p.nibbles, if p.exact_length { "$" } else { "" }),
        }
    }
}

/// A frame on an attached port beyond the port's expectations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unexpected {
    pub port: u32,
    /// 0-based position among the frames of that port.
    pub index: usize,
    pub data: Vec<u8>,
}

/// Something a command did or could not do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Issue {
    pub pos: Pos,
    pub command: &'static str,
    pub message: String,
}

/// The outcome of running one STF script.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StfReport {
    pub file: String,
    /// All expectations, by port (ascending), in file order within a port.
    pub expectations: Vec<Expectation>,
    /// Frames on attached ports that no expectation accounts for.
    pub unexpected: Vec<Unexpected>,
    /// Commands the runner could not translate or execute: these fail the test.
    pub errors: Vec<Issue>,
    /// Commands the switch rejected (printed by the CLI in p4c; not failures).
    pub warnings: Vec<Issue>,
    /// What other commands did (entry handles, ignored commands, CLI outputs).
    pub notes: Vec<Issue>,
    pub packets_sent: usize,
    pub frames_out: usize,
    /// Frames sent to ports that appear in no `packet`/`expect` line (not failures).
    pub discarded: usize,
}

impl StfReport {
    /// p4c's verdict: no command error, every expectation met, no extra frame.
    pub fn passed(&self) -> bool {
        self.errors.is_empty()
            && self.unexpected.is_empty()
            && self.expectations.iter().all(Expectation::met)
    }

    /// Number of expectations met.
    pub fn met_count(&self) -> usize {
        self.expectations.iter().filter(|e| e.met()).count()
    }

    /// The report as text; with `verbose`, also met expectations, warnings and notes.
    pub fn render(&self, verbose: bool) -> String {
        use fmt::Write;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{} {}: {}/{} expectations met, {} unexpected frame(s), {} error(s); {} packet(s) in, {} frame(s) out, {} on unattached ports",
            if self.passed() { "PASS" } else { "FAIL" },
            self.file,
            self.met_count(),
            self.expectations.len(),
            self.unexpected.len(),
            self.errors.len(),
            self.packets_sent,
            self.frames_out,
            self.discarded,
        );
        for e in &self.errors {
            let _ = writeln!(
                s,
                "  error {}:{}: {}: {}",
                self.file, e.pos, e.command, e.message
            );
        }
        for x in &self.expectations {
            if x.met() && !verbose {
                continue;
            }
            let head = format!(
                "  port {} frame #{} (expect at {}:{})",
                x.port,
                x.index + 1,
                self.file,
                x.pos.line
            );
            let got = x
                .got
                .as_deref()
                .map(hex_upper)
                .unwrap_or_else(|| "nothing".to_string());
            match x.outcome {
                Outcome::Met => {
                    let _ = writeln!(
                        s,
                        "{head}: met\n      expected {}\n      got      {got}",
                        x.expected_text()
                    );
                }
                Outcome::Mismatch { nibble } => {
                    let _ = writeln!(
                        s,
                        "{head}: MISMATCH at nibble {nibble} (byte {})\n      expected {}\n      got      {got}\n               {}^",
                        nibble / 2,
                        x.expected_text(),
                        " ".repeat(nibble)
                    );
                }
                Outcome::TooShort => {
                    let _ = writeln!(
                        s,
                        "{head}: frame too short ({} nibbles, expected at least {})\n      expected {}\n      got      {got}",
                        got.len(),
                        x.pattern.as_ref().map_or(0, |p| p.nibbles.len()),
                        x.expected_text()
                    );
                }
                Outcome::TooLong => {
                    let _ = writeln!(
                        s,
                        "{head}: frame too long ({} nibbles, '$' requires exactly {})\n      expected {}\n      got      {got}",
                        got.len(),
                        x.pattern.as_ref().map_or(0, |p| p.nibbles.len()),
                        x.expected_text()
                    );
                }
                Outcome::Missing => {
                    let _ = writeln!(
                        s,
                        "{head}: expected packet not received\n      expected {}",
                        x.expected_text()
                    );
                }
                Outcome::Bare => {
                    let _ = writeln!(
                        s,
                        "{head}: bare `expect {}` is not supported (p4c's runner fails the port); got {got}",
                        x.port
                    );
                }
            }
        }
        for u in &self.unexpected {
            let _ = writeln!(
                s,
                "  port {} frame #{}: UNEXPECTED (no expect line left for this port)\n      got      {}",
                u.port,
                u.index + 1,
                hex_upper(&u.data)
            );
        }
        if verbose || !self.passed() {
            for w in &self.warnings {
                let _ = writeln!(
                    s,
                    "  warning {}:{}: {}: {}",
                    self.file, w.pos, w.command, w.message
                );
            }
        }
        if verbose {
            for n in &self.notes {
                let _ = writeln!(
                    s,
                    "  note {}:{}: {}: {}",
                    self.file, n.pos, n.command, n.message
                );
            }
        }
        s
    }
}

impl fmt::Display for StfReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render(true))
    }
}
