//! The STF runner (`stf.md` §5): executes a parsed script against a switch one command at a
//! time, each packet to completion, then applies p4c's per-port comparison rule.

use crate::ast::{CmpOp, Command, CounterCheck, CounterUnit, ExpectPattern, Pos, StfScript};
use crate::report::{Expectation, Issue, Outcome, StfReport, Unexpected};
use crate::translate::{cli_resolve, translate_add, translate_setdefault};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use tern_model::Program;
use tern_runtime::{OutputPacket, PacketPath, Runtime};

/// Upper-case hex of a byte string.
pub fn hex_upper(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02X}")).collect()
}

/// Compare one received frame with one expectation (§5.3 step 3).
pub fn compare(pattern: &ExpectPattern, frame: &[u8]) -> Outcome {
    let got = hex_upper(frame);
    let exp = pattern.nibbles.as_bytes();
    let g = got.as_bytes();
    for (i, (&e, &r)) in exp.iter().zip(g).enumerate() {
        if e != b'*' && e != r {
            return Outcome::Mismatch { nibble: i };
        }
    }
    if g.len() < exp.len() {
        Outcome::TooShort
    } else if pattern.exact_length && g.len() > exp.len() {
        Outcome::TooLong
    } else {
        Outcome::Met
    }
}

/// Runner options beyond p4c's behaviour.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunOptions {
    /// Evaluate `check_counter` lines (p4c's BMv2 runner ignores them). A failed check is an
    /// error; the counter is named like the runtime CLI names it, and the value in
    /// parentheses is an index (indexed counters) or an `= <id>` entry label or entry handle
    /// (direct counters).
    pub strict_counters: bool,
}

/// Run `script` against `sw`, whose loaded program is `program`, with p4c's semantics.
///
/// Control commands run in file order; every `packet` is processed to completion before the
/// next command. What `simple_switch_CLI` would reject (switch errors, values it cannot
/// parse) is recorded as a warning: p4c only prints those. Lines p4c's runner itself cannot
/// translate (unknown table/action/key/parameter names, a missing parameter or priority, a
/// decimal ternary value, a range table, `no_packet`) are errors and fail the test.
pub fn run<S>(script: &StfScript, sw: &mut S, program: &Program) -> StfReport
where
    S: Runtime + PacketPath,
{
    run_with_options(script, sw, program, RunOptions::default())
}

/// [`run`] with [`RunOptions`].
pub fn run_with_options<S>(
    script: &StfScript,
    sw: &mut S,
    program: &Program,
    options: RunOptions,
) -> StfReport
where
    S: Runtime + PacketPath,
{
    // Pass-through commands go through the runtime CLI interpreter, as p4c forwards them.
    let mut cli = tern_control::Cli::new(program);
    // `= <id>` labels of successful adds: label -> (table, handle).
    let mut labels: HashMap<String, (String, u32)> = HashMap::new();
    let mut report = StfReport {
        file: script.file.clone(),
        ..Default::default()
    };
    // Ports the runner attaches, and each port's expectations in file order.
    let mut attached = BTreeSet::new();
    let mut expects: BTreeMap<u32, Vec<(Pos, Option<&ExpectPattern>)>> = BTreeMap::new();
    for l in &script.commands {
        match &l.command {
            Command::Packet { port, .. } => {
                attached.insert(*port);
            }
            Command::Expect { port, pattern } => {
                attached.insert(*port);
                expects
                    .entry(*port)
                    .or_default()
                    .push((l.pos, pattern.as_ref()));
            }
            _ => {}
        }
    }
    let mut received: BTreeMap<u32, Vec<Vec<u8>>> = BTreeMap::new();
    let mut out: Vec<OutputPacket> = Vec::new();
    for l in &script.commands {
        let pos = l.pos;
        let kw = l.command.keyword();
        let error = |report: &mut StfReport, message: String| {
            report.errors.push(Issue {
                pos,
                command: kw,
                message,
            })
        };
        let note = |report: &mut StfReport, message: String| {
            let issue = Issue {
                pos,
                command: kw,
                message,
            };
            if issue.message.starts_with("rejected: ") {
                report.warnings.push(issue);
            } else {
                report.notes.push(issue);
            }
        };
        match &l.command {
            Command::Packet { port, data } => {
                out.clear();
                sw.process_packet(*port, data, &mut out);
                let digests = sw.take_digests().len();
                report.packets_sent += 1;
                let mut what: Vec<String> = Vec::new();
                for o in out.drain(..) {
                    report.frames_out += 1;
                    if attached.contains(&o.port) {
                        what.push(format!("port {}: {}", o.port, hex_upper(&o.data)));
                        received.entry(o.port).or_default().push(o.data);
                    } else {
                        what.push(format!("port {} (not attached, discarded)", o.port));
                        report.discarded += 1;
                    }
                }
                if what.is_empty() {
                    what.push("no frame out".to_string());
                }
                if digests > 0 {
                    what.push(format!("{digests} digest(s)"));
                }
                note(
                    &mut report,
                    format!(
                        "{} bytes in on port {port} -> {}",
                        data.len(),
                        what.join("; ")
                    ),
                );
            }
            Command::Expect { .. } => {}
            Command::Add {
                table,
                priority,
                keys,
                action,
                entry_id,
            } => match translate_add(program, table, *priority, keys, action) {
                Err(e) if e.cli_side => report.warnings.push(Issue {
                    pos: e.pos.unwrap_or(pos),
                    command: kw,
                    message: format!("rejected: {}", e.message),
                }),
                Err(e) => report.errors.push(Issue {
                    pos: e.pos.unwrap_or(pos),
                    command: kw,
                    message: e.message,
                }),
                Ok(e) => match sw.mt_add_entry(&e.table, &e.key, &e.action, &e.data, e.priority) {
                    Ok(h) => {
                        if let Some(id) = entry_id {
                            labels.insert(id.clone(), (e.table.clone(), h));
                        }
                        note(
                            &mut report,
                            format!("{} -> {}: entry handle {h}", e.table, e.action),
                        )
                    }
                    Err(err) => note(&mut report, format!("rejected: {err}")),
                },
            },
            Command::SetDefault { table, action } => {
                match translate_setdefault(program, table, action) {
                    Err(e) if !e.cli_side => report.errors.push(Issue {
                        pos: e.pos.unwrap_or(pos),
                        command: kw,
                        message: e.message,
                    }),
                    Err(e) => report.warnings.push(Issue {
                        pos: e.pos.unwrap_or(pos),
                        command: kw,
                        message: format!("rejected: {}", e.message),
                    }),
                    Ok((t, a, data)) => match sw.mt_set_default_action(&t, &a, &data) {
                        Ok(()) => note(&mut report, format!("default of {t} is {a}")),
                        Err(err) => note(&mut report, format!("rejected: {err}")),
                    },
                }
            }
            Command::NoPacket => error(
                &mut report,
                "no_packet cannot be executed (p4c's BMv2 runner fails on it)".to_string(),
            ),
            Command::Wait | Command::RemoveAll => note(&mut report, "ignored".to_string()),
            Command::CheckCounter { counter, id, check } if options.strict_counters => {
                match check_counter(sw, program, &labels, counter, id, check.as_ref()) {
                    Ok(msg) => note(&mut report, msg),
                    Err(e) => error(&mut report, e),
                }
            }
            Command::CheckCounter { counter, id, .. } => note(
                &mut report,
                format!("check_counter {counter}({id}) ignored, as in p4c's BMv2 runner"),
            ),
            Command::McNodeUpdate { node, .. } => note(
                &mut report,
                format!("mc_node_update {node} ignored (p4c's runner does not forward it)"),
            ),
            other => match cli_line(other) {
                Some(line) => {
                    let out = cli.execute(&mut *sw, &line);
                    let text = out.trim_end().replace('\n', " | ");
                    if cli.last_command_failed() {
                        note(&mut report, format!("rejected: {text}"));
                    } else if text.is_empty() {
                        note(&mut report, "done".to_string());
                    } else {
                        note(&mut report, text);
                    }
                }
                None => note(&mut report, "not executed".to_string()),
            },
        }
    }
    for port in attached {
        let frames = received.remove(&port).unwrap_or_default();
        let exps = expects.remove(&port).unwrap_or_default();
        for (i, frame) in frames.iter().enumerate() {
            if i >= exps.len() {
                report.unexpected.push(Unexpected {
                    port,
                    index: i,
                    data: frame.clone(),
                });
            }
        }
        for (i, (pos, pattern)) in exps.into_iter().enumerate() {
            let got = frames.get(i).cloned();
            let outcome = match (pattern, &got) {
                (None, _) => Outcome::Bare,
                (Some(_), None) => Outcome::Missing,
                (Some(p), Some(f)) => compare(p, f),
            };
            report.expectations.push(Expectation {
                port,
                index: i,
                pos,
                pattern: pattern.cloned(),
                got,
                outcome,
            });
        }
    }
    report
}

/// Read a counter cell for `check_counter` and apply its comparison.
fn check_counter<S>(
    sw: &mut S,
    program: &Program,
    labels: &HashMap<String, (String, u32)>,
    counter: &str,
    id: &str,
    check: Option<&CounterCheck>,
) -> Result<String, String>
where
    S: Runtime + PacketPath,
{
    let full = cli_resolve(
        program.counter_arrays.iter().map(|c| c.name.as_str()),
        counter,
        "counter",
    )?;
    let c = program
        .counter_arrays
        .iter()
        .find(|c| c.name == full)
        .ok_or_else(|| format!("Invalid counter name ({counter})"))?;
    let number = || int_literal(id);
    let value = match c.binding.as_deref().filter(|_| c.is_direct) {
        Some(table) => {
            let handle = match labels.get(id) {
                Some((t, h)) if t == table => *h,
                Some((t, _)) => {
                    return Err(format!(
                        "entry '{id}' belongs to table {t}, not to {table} (counter {full})"
                    ))
                }
                None => number().ok_or_else(|| {
                    format!("'{id}' is neither an entry label (= id) nor an entry handle")
                })?,
            };
            sw.mt_read_counter(table, handle)
                .map_err(|e| e.to_string())?
        }
        None => {
            let index = number().ok_or_else(|| format!("'{id}' is not a counter index"))?;
            sw.counter_read(full, index).map_err(|e| e.to_string())?
        }
    };
    let shown = format!(
        "{counter}({id}) = {} packets, {} bytes",
        value.packets, value.bytes
    );
    let Some(chk) = check else {
        return Ok(shown);
    };
    let got = match chk.unit {
        CounterUnit::Packets => value.packets,
        CounterUnit::Bytes => value.bytes,
    };
    let ok = match chk.op {
        CmpOp::Eq => got == chk.value,
        CmpOp::Ne => got != chk.value,
        CmpOp::Lt => got < chk.value,
        CmpOp::Le => got <= chk.value,
        CmpOp::Gt => got > chk.value,
        CmpOp::Ge => got >= chk.value,
    };
    let unit = match chk.unit {
        CounterUnit::Packets => "packets",
        CounterUnit::Bytes => "bytes",
    };
    let what = format!("{unit} {} {}", chk.op.as_str(), chk.value);
    if ok {
        Ok(format!("{shown}: {what} holds"))
    } else {
        Err(format!("counter check failed: {shown}; expected {what}"))
    }
}

/// A decimal, `0x` or `0b` integer that fits 32 bits.
fn int_literal(s: &str) -> Option<u32> {
    let l = s.to_ascii_lowercase();
    if let Some(h) = l.strip_prefix("0x") {
        u32::from_str_radix(h, 16).ok()
    } else if let Some(b) = l.strip_prefix("0b") {
        u32::from_str_radix(b, 2).ok()
    } else {
        l.parse().ok()
    }
}

/// The simple_switch_CLI line p4c's runner forwards for a pass-through command.
fn cli_line(cmd: &Command) -> Option<String> {
    let rates = |r: &[crate::ast::RatePair]| {
        r.iter()
            .map(|p| format!("{}:{}", p.rate, p.burst))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let ports = |p: &[u32]| p.iter().map(u32::to_string).collect::<Vec<_>>().join(" ");
    Some(match cmd {
        Command::MirroringAdd { session, port } => format!("mirroring_add {session} {port}"),
        Command::MirroringAddMc { session, mgid } => {
            format!("mirroring_add_mc {session} {mgid}")
        }
        Command::MirroringDelete { session } => format!("mirroring_delete {session}"),
        Command::MirroringGet { session } => format!("mirroring_get {session}"),
        Command::McMgrpCreate { mgid } => format!("mc_mgrp_create {mgid}"),
        Command::McNodeCreate { rid, ports: p } => format!("mc_node_create {rid} {}", ports(p)),
        Command::McNodeAssociate { mgid, node } => format!("mc_node_associate {mgid} {node}"),
        Command::CounterRead { counter, index } => format!("counter_read {counter} {index}"),
        Command::CounterWrite {
            counter,
            index,
            packets,
            bytes,
        } => format!("counter_write {counter} {index} {packets} {bytes}"),
        Command::RegisterRead {
            register,
            index: Some(i),
        } => format!("register_read {register} {i}"),
        Command::RegisterRead {
            register,
            index: None,
        } => format!("register_read {register}"),
        Command::RegisterWrite {
            register,
            index,
            value,
        } => format!("register_write {register} {index} {value}"),
        Command::RegisterReset { register } => format!("register_reset {register}"),
        Command::MeterGetRates { meter, index } => format!("meter_get_rates {meter} {index}"),
        Command::MeterSetRates {
            meter,
            index,
            rates: r,
        } => format!("meter_set_rates {meter} {index} {}", rates(r)),
        Command::MeterArraySetRates { meter, rates: r } => {
            format!("meter_array_set_rates {meter} {}", rates(r))
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pat(n: &str, exact: bool) -> ExpectPattern {
        ExpectPattern {
            nibbles: n.to_string(),
            exact_length: exact,
        }
    }

    #[test]
    fn prefix_match_without_dollar() {
        assert_eq!(compare(&pat("0102", false), &[1, 2, 3]), Outcome::Met);
        assert_eq!(compare(&pat("0102", false), &[1, 2]), Outcome::Met);
        assert_eq!(compare(&pat("", false), &[9]), Outcome::Met);
    }

    #[test]
    fn dollar_requires_exact_length() {
        assert_eq!(compare(&pat("0102", true), &[1, 2]), Outcome::Met);
        assert_eq!(compare(&pat("0102", true), &[1, 2, 3]), Outcome::TooLong);
        assert_eq!(compare(&pat("", true), &[]), Outcome::Met);
    }

    #[test]
    fn shorter_frame_fails() {
        assert_eq!(compare(&pat("010203", false), &[1, 2]), Outcome::TooShort);
        // Odd-length patterns compare nibble by nibble.
        assert_eq!(compare(&pat("010", false), &[1]), Outcome::TooShort);
        assert_eq!(compare(&pat("010", false), &[1, 0x0f]), Outcome::Met);
        assert_eq!(compare(&pat("010", true), &[1, 0x0f]), Outcome::TooLong);
    }

    #[test]
    fn wildcards_and_first_difference() {
        assert_eq!(compare(&pat("0*0*", true), &[0x0a, 0x0b]), Outcome::Met);
        assert_eq!(compare(&pat("****", true), &[0xff, 0xee]), Outcome::Met);
        assert_eq!(
            compare(&pat("0*0C", true), &[0x0a, 0x0b]),
            Outcome::Mismatch { nibble: 3 }
        );
        assert_eq!(
            compare(&pat("AB", false), &[0xab]),
            Outcome::Met,
            "received hex is upper-cased like the pattern"
        );
        assert_eq!(
            compare(&pat("1B", false), &[0xab]),
            Outcome::Mismatch { nibble: 0 }
        );
    }

    #[test]
    fn hex_is_upper_case() {
        assert_eq!(hex_upper(&[0xab, 0x01]), "AB01");
        assert_eq!(hex_upper(&[]), "");
    }
}
