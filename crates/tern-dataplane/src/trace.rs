//! Per-packet trace: what the program did to one packet, in BMv2's log wording.
//!
//! `simple_switch --log-console` at debug/trace level narrates each packet: parser states,
//! extracted headers, tables applied with their keys and hit/miss, actions with their data,
//! conditions, pipelines and the deparser. tern records the same events when tracing is on
//! ([`crate::Switch::set_trace`]) and hands them to whoever logs them (`tern run`). Tracing
//! costs one predictable branch per event site when off: every formatting routine here is
//! `#[cold]` and reached only through `ExternState::trace` being `Some`.

use crate::compile::{CTable, ETarget, Engine};
use crate::exec::ExternState;
use crate::layout::Phv;
use crate::table::EntryAction;

/// Severity of a trace line, as BMv2 logs it (`[T]`, `[D]`, `[I]`, `[E]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TraceLevel {
    Trace,
    Debug,
    Info,
    Error,
}

/// One line of a packet's trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceLine {
    pub level: TraceLevel,
    pub text: String,
}

/// The lines recorded since the last [`crate::Switch::take_trace`] (bounded, like `log_msg`).
#[derive(Clone, Debug, Default)]
pub struct Trace {
    pub lines: Vec<TraceLine>,
}

/// Lines kept between two takes: a runaway packet (a recirculation loop) cannot exhaust memory.
const MAX_LINES: usize = 100_000;

impl Trace {
    pub fn push(&mut self, level: TraceLevel, text: String) {
        if self.lines.len() < MAX_LINES {
            self.lines.push(TraceLine { level, text });
        }
    }
}

/// Record a line if tracing is on. The text is built only then.
#[inline(always)]
pub(crate) fn emit(ext: &mut ExternState, level: TraceLevel, text: impl FnOnce() -> String) {
    if let Some(t) = ext.trace.as_deref_mut() {
        push_cold(t, level, text());
    }
}

#[cold]
fn push_cold(t: &mut Trace, level: TraceLevel, text: String) {
    t.push(level, text);
}

/// Hexadecimal without leading zeros (BMv2's action-data form; `0` for zero).
fn hex_trimmed(bytes: &[u8]) -> String {
    let s: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let t = s.trim_start_matches('0');
    if t.is_empty() {
        "0".to_string()
    } else {
        t.to_string()
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Engine {
    fn parser_name(&self) -> &str {
        self.prog
            .parsers
            .iter()
            .find(|p| p.name == "parser")
            .map_or("parser", |p| p.name.as_str())
    }

    fn state_name(&self, s: u32) -> &str {
        self.prog
            .parsers
            .iter()
            .find(|p| p.name == "parser")
            .and_then(|p| p.states.get(s as usize))
            .map_or("?", |st| st.name.as_str())
    }

    #[cold]
    pub(crate) fn trace_parser_start(&self, ext: &mut ExternState) {
        let name = self.parser_name();
        emit(ext, TraceLevel::Debug, || format!("Parser '{name}': start"));
    }

    #[cold]
    pub(crate) fn trace_parser_end(&self, ext: &mut ExternState, err: i64) {
        if err != self.errors.no_error {
            let e = self
                .prog
                .errors
                .iter()
                .find(|(_, v)| *v == err)
                .map_or_else(|| err.to_string(), |(n, _)| n.clone());
            emit(ext, TraceLevel::Error, || {
                format!("Exception while parsing: {e}")
            });
        }
        let name = self.parser_name();
        emit(ext, TraceLevel::Debug, || format!("Parser '{name}': end"));
    }

    #[cold]
    pub(crate) fn trace_state(&self, ext: &mut ExternState, s: u32) {
        let (p, st) = (self.parser_name(), self.state_name(s));
        emit(ext, TraceLevel::Debug, || {
            format!("Parser '{p}' entering state '{st}'")
        });
    }

    /// After a successful extract of `t`: the instance that received the bytes.
    #[cold]
    pub(crate) fn trace_extract(&self, ext: &mut ExternState, phv: &Phv, t: ETarget) {
        let h = match t {
            ETarget::Header(h) => Some(h),
            ETarget::Stack(s) => (phv.stack_next[s as usize] as usize)
                .checked_sub(1)
                .and_then(|i| self.layout.stacks[s as usize].get(i).copied()),
            ETarget::UnionStack(s, m) => (phv.union_stack_next[s as usize] as usize)
                .checked_sub(1)
                .and_then(|i| self.layout.union_stacks[s as usize].get(i))
                .and_then(|&u| self.layout.unions[u as usize].get(m as usize).copied()),
        };
        let name = h.map_or("?", |h| self.layout.headers[h as usize].name.as_str());
        emit(ext, TraceLevel::Debug, || {
            format!("Extracting header '{name}'")
        });
    }

    #[cold]
    pub(crate) fn trace_state_key(&self, ext: &mut ExternState, s: u32, key: &[u8], cursor: usize) {
        let st = self.state_name(s);
        if !key.is_empty() {
            emit(ext, TraceLevel::Debug, || {
                format!("Parser state '{st}': key is {}", hex(key))
            });
        }
        emit(ext, TraceLevel::Trace, || format!("Bytes parsed: {cursor}"));
    }

    #[cold]
    pub(crate) fn trace_table(
        &self,
        ext: &mut ExternState,
        t: &CTable,
        key: &[u8],
        hit: Option<u64>,
    ) {
        emit(ext, TraceLevel::Trace, || {
            format!("Applying table '{}'", t.name)
        });
        if !t.spec.fields.is_empty() {
            // The key's names as the JSON gives them (p4c: the P4 expression).
            let names: Vec<&str> = self
                .prog
                .pipelines
                .iter()
                .flat_map(|p| p.tables.iter())
                .find(|m| m.name == t.name)
                .map(|m| m.key.iter().map(|k| k.name.as_str()).collect())
                .unwrap_or_default();
            emit(ext, TraceLevel::Debug, || {
                let mut s = String::from("Looking up key:\n");
                let mut off = 0usize;
                for (i, f) in t.spec.fields.iter().enumerate() {
                    let n = f.nbytes as usize;
                    let bytes = key.get(off..off + n).unwrap_or(&[]);
                    off += n;
                    let name = match names.get(i) {
                        Some(n) if !n.is_empty() => n,
                        _ => t.key_names.get(i).map_or("?", |s| s.as_str()),
                    };
                    s.push_str(&format!("* {name:<20}: {}\n", hex(bytes)));
                }
                s
            });
        }
        match hit {
            Some(h) => emit(ext, TraceLevel::Debug, || {
                format!("Table '{}': hit with handle {h}", t.name)
            }),
            None => emit(ext, TraceLevel::Debug, || {
                format!("Table '{}': miss", t.name)
            }),
        }
    }

    /// The action an entry resolved to, with its data (`Action entry is NAME - d1,d2,`).
    #[cold]
    pub(crate) fn trace_action_entry(&self, ext: &mut ExternState, action: u32, data: &[Vec<u8>]) {
        let name = self
            .actions
            .get(action as usize)
            .map_or("?", |a| a.name.as_str());
        emit(ext, TraceLevel::Debug, || {
            let mut s = format!("Action entry is {name} - ");
            for d in data {
                s.push_str(&hex_trimmed(d));
                s.push(',');
            }
            s
        });
        emit(ext, TraceLevel::Trace, || format!("Action {name}"));
    }

    /// An entry that resolves to no action (an empty group, a deleted member).
    #[cold]
    pub(crate) fn trace_no_action(&self, ext: &mut ExternState, ea: &EntryAction) {
        emit(ext, TraceLevel::Debug, || match ea {
            EntryAction::Member(m) => format!("Action entry is member {m}: no such member"),
            EntryAction::Group(g) => format!("Action entry is group {g}: empty or no such group"),
            EntryAction::Action { .. } => "Action entry has no action".to_string(),
        });
    }

    /// Condition `c` (global index) evaluated to `v`.
    #[cold]
    pub(crate) fn trace_cond(&self, ext: &mut ExternState, c: u32, v: bool) {
        let name = self
            .prog
            .pipelines
            .iter()
            .flat_map(|p| p.conditionals.iter())
            .nth(c as usize)
            .map_or("?", |c| c.name.as_str());
        emit(ext, TraceLevel::Trace, || {
            format!("Condition \"{name}\" ({name}) is {v}")
        });
    }

    #[cold]
    pub(crate) fn trace_pipeline(&self, ext: &mut ExternState, name: &str, start: bool) {
        let what = if start { "start" } else { "end" };
        emit(ext, TraceLevel::Debug, || {
            format!("Pipeline '{name}': {what}")
        });
    }

    #[cold]
    pub(crate) fn trace_deparser(&self, ext: &mut ExternState, start: bool) {
        let what = if start { "start" } else { "end" };
        emit(ext, TraceLevel::Debug, || {
            format!("Deparser 'deparser': {what}")
        });
    }

    #[cold]
    pub(crate) fn trace_checksum(&self, ext: &mut ExternState, i: usize) {
        let name = self.prog.checksums.get(i).map_or("?", |c| c.name.as_str());
        emit(ext, TraceLevel::Debug, || {
            format!("Updating checksum '{name}'")
        });
    }

    #[cold]
    pub(crate) fn trace_deparse_header(&self, ext: &mut ExternState, h: u32) {
        let name = self.layout.headers[h as usize].name.as_str();
        emit(ext, TraceLevel::Debug, || {
            format!("Deparsing header '{name}'")
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn action_data_is_hex_without_leading_zeros() {
        assert_eq!(hex_trimmed(&[0x08, 0, 0, 0, 0x02, 0x02]), "80000000202");
        assert_eq!(hex_trimmed(&[0, 0]), "0");
        assert_eq!(hex_trimmed(&[0, 2]), "2");
    }

    #[test]
    fn lines_are_bounded() {
        let mut t = Trace::default();
        for _ in 0..MAX_LINES + 10 {
            t.push(TraceLevel::Debug, String::new());
        }
        assert_eq!(t.lines.len(), MAX_LINES);
    }
}
