//! The STF runner (`stf.md` §5): executes a parsed script against a switch one command at a
//! time, each packet to completion, then applies p4c's per-port comparison rule.

use crate::ast::{Command, ExpectPattern, Pos, StfScript};
use crate::report::{Expectation, Issue, Outcome, StfReport, Unexpected};
use crate::translate::{cli_resolve, translate_add, translate_setdefault};
use std::collections::{BTreeMap, BTreeSet};
use tern_model::Program;
use tern_runtime::{CounterValue, MeterRate, MirroringSession, OutputPacket, PacketPath, Runtime};

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

/// Run `script` against `sw`, whose loaded program is `program`.
///
/// Control commands run in file order; every `packet` is processed to completion before the
/// next command. Runtime errors of control commands are recorded as notes (p4c only prints
/// them); lines p4c's runner cannot translate (unknown names, missing parameters, …) are
/// errors and fail the test.
pub fn run<S>(script: &StfScript, sw: &mut S, program: &Program) -> StfReport
where
    S: Runtime + PacketPath + ?Sized,
{
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
                let _ = sw.take_digests();
                report.packets_sent += 1;
                for o in out.drain(..) {
                    report.frames_out += 1;
                    if attached.contains(&o.port) {
                        received.entry(o.port).or_default().push(o.data);
                    } else {
                        report.discarded += 1;
                    }
                }
            }
            Command::Expect { .. } => {}
            Command::Add {
                table,
                priority,
                keys,
                action,
                ..
            } => match translate_add(program, table, *priority, keys, action) {
                Err(e) => error(&mut report, e),
                Ok(e) => match sw.mt_add_entry(&e.table, &e.key, &e.action, &e.data, e.priority) {
                    Ok(h) => note(
                        &mut report,
                        format!("{} -> {}: entry handle {h}", e.table, e.action),
                    ),
                    Err(err) => note(&mut report, format!("rejected: {err}")),
                },
            },
            Command::SetDefault { table, action } => {
                match translate_setdefault(program, table, action) {
                    Err(e) => note(&mut report, format!("rejected: {e}")),
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
            Command::CheckCounter { counter, id, .. } => note(
                &mut report,
                format!("check_counter {counter}({id}) ignored, as in p4c's BMv2 runner"),
            ),
            Command::McNodeUpdate { node, .. } => note(
                &mut report,
                format!("mc_node_update {node} ignored (p4c's runner does not forward it)"),
            ),
            other => {
                let msg = match pass_through(other, sw, program) {
                    Ok(m) => m,
                    Err(e) => format!("rejected: {e}"),
                };
                note(&mut report, msg);
            }
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

fn rates(r: &[crate::ast::RatePair]) -> Vec<MeterRate> {
    r.iter()
        .map(|p| MeterRate {
            units_per_micros: p.rate,
            burst_size: p.burst,
        })
        .collect()
}

/// The BMv2 pass-through commands, as simple_switch_CLI would execute them.
fn pass_through<S>(cmd: &Command, sw: &mut S, program: &Program) -> Result<String, String>
where
    S: Runtime + PacketPath + ?Sized,
{
    let e = |e: tern_runtime::RuntimeError| e.to_string();
    let counters = || program.counter_arrays.iter().map(|c| c.name.as_str());
    let meters = || program.meter_arrays.iter().map(|c| c.name.as_str());
    let registers = || program.register_arrays.iter().map(|c| c.name.as_str());
    match cmd {
        Command::MirroringAdd { session, port } => {
            let s = MirroringSession {
                port: Some(*port),
                mgid: None,
            };
            sw.mirroring_session_add(*session, s).map_err(e)?;
            Ok(format!("session {session} -> port {port}"))
        }
        Command::MirroringAddMc { session, mgid } => {
            let s = MirroringSession {
                port: None,
                mgid: Some(*mgid),
            };
            sw.mirroring_session_add(*session, s).map_err(e)?;
            Ok(format!("session {session} -> multicast group {mgid}"))
        }
        Command::MirroringDelete { session } => {
            sw.mirroring_session_delete(*session).map_err(e)?;
            Ok(format!("session {session} deleted"))
        }
        Command::MirroringGet { session } => {
            let s = sw.mirroring_session_get(*session).map_err(e)?;
            Ok(format!("session {session}: {s:?}"))
        }
        Command::McMgrpCreate { mgid } => {
            sw.mc_mgrp_create(*mgid).map_err(e)?;
            Ok(format!("multicast group {mgid} created"))
        }
        Command::McNodeCreate { rid, ports } => {
            let h = sw.mc_node_create(*rid, ports, &[]).map_err(e)?;
            Ok(format!("node was created with handle {h}"))
        }
        Command::McNodeAssociate { mgid, node } => {
            sw.mc_node_associate(*mgid, *node).map_err(e)?;
            Ok(format!("node {node} associated to group {mgid}"))
        }
        Command::CounterRead { counter, index } => {
            let full = cli_resolve(counters(), counter, "counter")?;
            let c = program.counter_arrays.iter().find(|c| c.name == full);
            let v = match c.and_then(|c| c.binding.as_deref().filter(|_| c.is_direct)) {
                Some(table) => sw.mt_read_counter(table, *index).map_err(e)?,
                None => sw.counter_read(full, *index).map_err(e)?,
            };
            Ok(format!(
                "{counter}[{index}]= ({} bytes, {} packets)",
                v.bytes, v.packets
            ))
        }
        Command::CounterWrite {
            counter,
            index,
            packets,
            bytes,
        } => {
            let full = cli_resolve(counters(), counter, "counter")?;
            let c = program.counter_arrays.iter().find(|c| c.name == full);
            let v = CounterValue {
                bytes: *bytes,
                packets: *packets,
            };
            match c.and_then(|c| c.binding.as_deref().filter(|_| c.is_direct)) {
                Some(table) => sw.mt_write_counter(table, *index, v).map_err(e)?,
                None => sw.counter_write(full, *index, v).map_err(e)?,
            }
            Ok(format!("{counter}[{index}] has been updated"))
        }
        Command::RegisterRead { register, index } => {
            let full = cli_resolve(registers(), register, "register")?;
            match index {
                Some(i) => {
                    let v = sw.register_read(full, *i).map_err(e)?;
                    Ok(format!("{register}[{i}]= {v}"))
                }
                None => {
                    let v = sw.register_read_all(full).map_err(e)?;
                    let s: Vec<String> = v.iter().map(u64::to_string).collect();
                    Ok(format!("{register}= {}", s.join(", ")))
                }
            }
        }
        Command::RegisterWrite {
            register,
            index,
            value,
        } => {
            let full = cli_resolve(registers(), register, "register")?;
            sw.register_write(full, *index, *value).map_err(e)?;
            Ok(format!("{register}[{index}] := {value}"))
        }
        Command::RegisterReset { register } => {
            let full = cli_resolve(registers(), register, "register")?;
            sw.register_reset(full).map_err(e)?;
            Ok(format!("{register} reset"))
        }
        Command::MeterGetRates { meter, index } => {
            let full = cli_resolve(meters(), meter, "meter")?;
            let m = program.meter_arrays.iter().find(|m| m.name == full);
            let v = match m.and_then(|m| m.binding.as_deref().filter(|_| m.is_direct)) {
                Some(table) => sw.mt_get_meter_rates(table, *index).map_err(e)?,
                None => sw.meter_get_rates(full, *index).map_err(e)?,
            };
            let s: Vec<String> = v
                .iter()
                .enumerate()
                .map(|(k, r)| {
                    format!(
                        "{k}: info rate = {}, burst size = {}",
                        r.units_per_micros, r.burst_size
                    )
                })
                .collect();
            Ok(s.join("; "))
        }
        Command::MeterSetRates {
            meter,
            index,
            rates: r,
        } => {
            let full = cli_resolve(meters(), meter, "meter")?;
            let m = program.meter_arrays.iter().find(|m| m.name == full);
            match m.and_then(|m| m.binding.as_deref().filter(|_| m.is_direct)) {
                Some(table) => sw.mt_set_meter_rates(table, *index, &rates(r)).map_err(e)?,
                None => sw.meter_set_rates(full, *index, &rates(r)).map_err(e)?,
            }
            Ok(format!("{meter}[{index}] rates set"))
        }
        Command::MeterArraySetRates { meter, rates: r } => {
            let full = cli_resolve(meters(), meter, "meter")?;
            sw.meter_array_set_rates(full, &rates(r)).map_err(e)?;
            Ok(format!("{meter} rates set"))
        }
        other => Err(format!(
            "'{}' is not a pass-through command",
            other.keyword()
        )),
    }
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
