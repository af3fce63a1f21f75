//! The commands of the runtime CLI (`runtime-cli.md` §2): argument checking, conversion to
//! [`Runtime`] calls and the exact printed output.

use std::fmt::Write as _;

use tern_model::{MatchKind, TableType};
use tern_runtime::*;

use crate::names::{kind_str, ActionInfo, Kind, ProfInfo, StatInfo, TableInfo};
use crate::value::{
    byte_width, center, colon_hex, hexstr, match_param_dump, match_param_echo, pad,
    parse_match_key, parse_param, py_float, py_int, py_int10,
};
use crate::{Cli, CmdError, PreType};

type R = Result<(), CmdError>;

/// Largest port / LAG number accepted in multicast port lists (keeps the printed maps small).
const MAX_PORT: i128 = 1 << 16;

macro_rules! outln {
    ($o:expr) => { $o.push('\n') };
    ($o:expr, $($t:tt)*) => {{ let _ = writeln!($o, $($t)*); }};
}

fn ui<T>(s: impl Into<String>) -> Result<T, CmdError> {
    Err(CmdError::Ui(s.into()))
}

fn exactly(a: &[&str], n: usize) -> R {
    if a.len() != n {
        return ui(format!(
            "Wrong number of args, expected {n} but got {}",
            a.len()
        ));
    }
    Ok(())
}

fn at_least(a: &[&str], n: usize) -> R {
    if a.len() < n {
        return ui("Insufficient number of args");
    }
    Ok(())
}

/// Python `int(s)`, else `Bad format for <what>`.
fn int_arg(s: &str, what: &str) -> Result<i128, CmdError> {
    py_int10(s).ok_or_else(|| CmdError::Ui(format!("Bad format for {what}")))
}

/// A parsed integer as a `u32` for the switch; out of range → the server's error `e`.
fn to_u32(v: i128, e: impl Into<RuntimeError>) -> Result<u32, CmdError> {
    u32::try_from(v).map_err(|_| CmdError::Rt(e.into()))
}

fn runtime_data(
    action: &ActionInfo,
    params: &[&str],
    label: &str,
) -> Result<Vec<Vec<u8>>, CmdError> {
    if params.len() != action.params.len() {
        return ui(format!(
            "Action {label} needs {} parameters",
            action.params.len()
        ));
    }
    params
        .iter()
        .zip(&action.params)
        .map(|(p, (_, bw))| {
            parse_param(p, *bw)
                .map_err(|e| CmdError::RuntimeData(format!("Error while parsing {p} - {e}")))
        })
        .collect()
}

fn has_priority(t: &TableInfo) -> bool {
    matches!(t.match_type, MatchKind::Ternary | MatchKind::Range)
}

fn pop_priority(t: &TableInfo, args: &mut Vec<&str>) -> Result<Option<i32>, CmdError> {
    if !has_priority(t) {
        return Ok(None);
    }
    args.pop()
        .and_then(py_int10)
        .and_then(|v| i32::try_from(v).ok())
        .map(Some)
        .ok_or_else(|| {
            CmdError::Ui(
                "Table is ternary, but could not extract a valid priority from args".into(),
            )
        })
}

fn check_indirect(t: &TableInfo) -> R {
    match t.table_type {
        TableType::Indirect | TableType::IndirectWs => Ok(()),
        TableType::Simple => ui("Cannot run this command on non-indirect table"),
    }
}

fn check_indirect_ws(t: &TableInfo) -> R {
    match t.table_type {
        TableType::IndirectWs => Ok(()),
        _ => ui(
            "Cannot run this command on non-indirect table, or on indirect table with no selector",
        ),
    }
}

fn check_ws(p: &ProfInfo) -> R {
    if !p.with_selection {
        return ui("Cannot run this command on an action profile without selector");
    }
    Ok(())
}

fn table_str(t: &TableInfo) -> String {
    let ap = t.action_prof.as_deref().unwrap_or("None");
    let keys: Vec<String> = t
        .keys
        .iter()
        .map(|(n, k, bw)| format!("{n}({}, {bw})", kind_str(*k)))
        .collect();
    format!(
        "{} [implementation={ap}, mk={}]",
        pad(&t.name, 30),
        keys.join(",\t")
    )
}

fn action_str(a: &ActionInfo) -> String {
    let ps: Vec<String> = a
        .params
        .iter()
        .map(|(n, bw)| format!("{n}({bw})"))
        .collect();
    format!("{} [{}]", pad(&a.name, 30), ps.join(",\t"))
}

fn action_and_data(o: &mut String, name: &str, data: &[Vec<u8>]) {
    // BMv2's server exports action data as minimal big-endian bytes (`Data::get_string`),
    // so `1` in a 9-bit parameter reads back as `01`, and zero as `00`.
    let ps: Vec<String> = data
        .iter()
        .map(|d| {
            let first = d.iter().position(|b| *b != 0).unwrap_or(d.len());
            let minimal = &d[first.min(d.len().saturating_sub(1))..];
            if minimal.is_empty() {
                "00".to_string()
            } else {
                hexstr(minimal)
            }
        })
        .collect();
    outln!(o, "Action entry: {name} - {}", ps.join(", "));
}

fn action_entry(o: &mut String, a: &ActionEntry) {
    match a {
        ActionEntry::None => outln!(o, "EMPTY"),
        ActionEntry::Action { name, data } => action_and_data(o, name, data),
        ActionEntry::Member(m) => outln!(o, "Index: member({m})"),
        ActionEntry::Group(g) => outln!(o, "Index: group({g})"),
    }
}

fn dump_member(o: &mut String, m: &ProfileMember) {
    outln!(o, "Dumping member {}", m.handle);
    action_and_data(o, &m.action, &m.data);
}

fn dump_group(o: &mut String, g: &ProfileGroup) {
    let ms: Vec<String> = g.members.iter().map(|m| m.to_string()).collect();
    outln!(o, "Dumping group {}", g.handle);
    outln!(o, "Members: [{}]", ms.join(", "));
}

fn dump_entry(o: &mut String, t: &TableInfo, e: &TableEntry) {
    let w = t
        .keys
        .iter()
        .map(|k| k.0.chars().count())
        .max()
        .unwrap_or(0)
        .max(20);
    outln!(o, "Dumping entry 0x{:x}", e.handle);
    outln!(o, "Match key:");
    for (p, k) in e.match_key.iter().zip(&t.keys) {
        let (kind, v) = match_param_dump(p);
        outln!(o, "* {}: {}{v}", pad(&k.0, w), pad(kind, 10));
    }
    if e.priority >= 0 {
        outln!(o, "Priority: {}", e.priority);
    }
    action_entry(o, &e.action);
    if let Some(l) = e.life {
        outln!(
            o,
            "Life: {}ms since hit, timeout is {}ms",
            l.time_since_hit_ms,
            l.timeout_ms
        );
    }
}

/// `ports_to_port_map_str`: the `0`/`1` map (rightmost = 0) and the sorted numbers.
fn port_map(ports: &[&str], desc: &str) -> Result<(String, Vec<u32>), CmdError> {
    let mut ints = Vec::with_capacity(ports.len());
    for p in ports {
        match py_int10(p) {
            Some(v) if (0..MAX_PORT).contains(&v) => ints.push(v as u32),
            _ => return ui(format!("'{p}' is not a valid {desc} number")),
        }
    }
    ints.sort_unstable();
    let mut s = String::new();
    let mut last = 0u32;
    for p in &ints {
        if last > 0 && *p == last - 1 {
            return ui(format!("Found duplicate {desc} number '{p}'"));
        }
        s.push_str(&"0".repeat((*p - last) as usize));
        s.push('1');
        last = p + 1;
    }
    Ok((s.chars().rev().collect(), ints))
}

fn parse_rates(m: &StatInfo, rates: &[&str]) -> Result<Vec<MeterRate>, CmdError> {
    if rates.len() != m.rate_count as usize {
        return ui(format!(
            "Invalid number of rates, expected {} but got {}",
            m.rate_count,
            rates.len()
        ));
    }
    rates
        .iter()
        .map(|r| {
            let parts: Vec<&str> = r.split(':').collect();
            let parsed = if parts.len() == 2 {
                let rate = parts[0].trim().parse::<f64>().ok();
                let burst = py_int10(parts[1]).and_then(|b| u32::try_from(b).ok());
                rate.zip(burst)
            } else {
                None
            };
            parsed
                .map(|(units_per_micros, burst_size)| MeterRate {
                    units_per_micros,
                    burst_size,
                })
                .ok_or_else(|| CmdError::Ui("Error while parsing rates".into()))
        })
        .collect()
}

fn write_file(path: &str, text: &str) -> R {
    std::fs::write(path, text)
        .map_err(|e| CmdError::Ui(format!("Could not write to file '{path}': {e}")))
}

impl Cli {
    fn table(&self, typed: &str) -> Result<TableInfo, CmdError> {
        self.names
            .resolve(Kind::Table, typed)
            .and_then(|n| self.names.tables.get(n))
            .cloned()
            .ok_or_else(|| CmdError::Ui(format!("Invalid table name ({typed})")))
    }

    fn prof(&self, typed: &str) -> Result<ProfInfo, CmdError> {
        self.names
            .resolve(Kind::ActProf, typed)
            .and_then(|n| self.names.profs.get(n))
            .cloned()
            .ok_or_else(|| CmdError::Ui(format!("Invalid action profile name ({typed})")))
    }

    fn counter(&self, typed: &str) -> Result<StatInfo, CmdError> {
        self.names
            .resolve(Kind::Counter, typed)
            .and_then(|n| self.names.counters.get(n))
            .cloned()
            .ok_or_else(|| CmdError::Ui(format!("Invalid counter name ({typed})")))
    }

    fn meter(&self, typed: &str) -> Result<StatInfo, CmdError> {
        self.names
            .resolve(Kind::Meter, typed)
            .and_then(|n| self.names.meters.get(n))
            .cloned()
            .ok_or_else(|| CmdError::Ui(format!("Invalid meter name ({typed})")))
    }

    fn register(&self, typed: &str) -> Result<String, CmdError> {
        self.names
            .resolve(Kind::Register, typed)
            .and_then(|n| self.names.registers.get(n))
            .map(|r| r.name.clone())
            .ok_or_else(|| CmdError::Ui(format!("Invalid register name ({typed})")))
    }

    fn vset_width(&self, typed: &str) -> Result<u32, CmdError> {
        self.names
            .resolve(Kind::Vset, typed)
            .and_then(|n| self.names.vsets.get(n))
            .map(|v| v.bitwidth)
            .ok_or_else(|| CmdError::Ui(format!("Invalid parser value set name ({typed})")))
    }

    fn table_action(&self, t: &TableInfo, tn: &str, an: &str) -> Result<ActionInfo, CmdError> {
        self.names
            .action_in(an, &t.actions)
            .cloned()
            .ok_or_else(|| CmdError::Ui(format!("Table {tn} has no action {an}")))
    }

    fn prof_action(&self, p: &ProfInfo, pn: &str, an: &str) -> Result<ActionInfo, CmdError> {
        self.names
            .action_in(an, &p.actions)
            .cloned()
            .ok_or_else(|| CmdError::Ui(format!("Action profile '{pn}' has no action '{an}'")))
    }

    fn check_pre(&self) -> R {
        if self.pre == PreType::None {
            return ui("Cannot execute this command without packet replication engine");
        }
        Ok(())
    }

    pub(crate) fn dispatch(
        &mut self,
        rt: &mut dyn Runtime,
        cmd: &str,
        a: &[&str],
        o: &mut String,
    ) -> R {
        match cmd {
            "help" => {
                o.push_str(&Cli::help_text(a.first().copied()));
                Ok(())
            }
            "greet" => {
                outln!(o, "hello");
                Ok(())
            }
            "show_tables" => {
                exactly(a, 0)?;
                for t in self.names.tables.values() {
                    outln!(o, "{}", table_str(t));
                }
                Ok(())
            }
            "show_actions" => {
                exactly(a, 0)?;
                for a in self.names.actions.values() {
                    outln!(o, "{}", action_str(a));
                }
                Ok(())
            }
            "show_pvs" => {
                exactly(a, 0)?;
                for v in self.names.vsets.values() {
                    outln!(
                        o,
                        "{} [compressed bitwidth:{}]",
                        pad(&v.name, 30),
                        v.bitwidth
                    );
                }
                Ok(())
            }
            "table_info" | "table_show_actions" => {
                exactly(a, 1)?;
                let t = self.table(a[0])?;
                if cmd == "table_info" {
                    outln!(o, "{}", table_str(&t));
                    outln!(o, "{}", "*".repeat(80));
                }
                for an in &t.actions {
                    if let Some(ai) = self.names.actions.get(an) {
                        outln!(o, "{}", action_str(ai));
                    }
                }
                Ok(())
            }
            "table_num_entries" => {
                exactly(a, 1)?;
                let t = self.table(a[0])?;
                outln!(o, "{}", rt.mt_get_num_entries(&t.name)?);
                Ok(())
            }
            "table_clear" => {
                exactly(a, 1)?;
                let t = self.table(a[0])?;
                rt.mt_clear_entries(&t.name, false)?;
                Ok(())
            }
            "table_add" => self.table_add(rt, a, o),
            "table_set_default" => {
                at_least(a, 2)?;
                let (tn, an) = (a[0], a[1]);
                let t = self.table(tn)?;
                let act = self.table_action(&t, tn, an)?;
                if a.len() - 2 != act.params.len() {
                    return ui(format!("Action {an} needs {} parameters", act.params.len()));
                }
                let data = runtime_data(&act, &a[2..], &act.name)?;
                outln!(o, "Setting default action of {tn}");
                outln!(o, "{} {an}", pad("action:", 20));
                let ds: Vec<String> = data.iter().map(|d| colon_hex(d)).collect();
                outln!(o, "{} {}", pad("runtime data:", 20), ds.join("\t"));
                rt.mt_set_default_action(&t.name, &act.name, &data)?;
                Ok(())
            }
            "table_reset_default" => {
                exactly(a, 1)?;
                let t = self.table(a[0])?;
                rt.mt_reset_default_entry(&t.name)?;
                Ok(())
            }
            "table_modify" => {
                at_least(a, 3)?;
                let (tn, an) = (a[0], a[1]);
                let t = self.table(tn)?;
                let act = self.table_action(&t, tn, an)?;
                let h = int_arg(a[2], "entry handle")?;
                let params = if a.get(3) == Some(&"=>") {
                    &a[4..]
                } else {
                    &a[3..]
                };
                let data = runtime_data(&act, params, &act.name)?;
                outln!(
                    o,
                    "Modifying entry {h} for {} match table {tn}",
                    kind_str(t.match_type)
                );
                let h = to_u32(h, TableError::INVALID_HANDLE)?;
                rt.mt_modify_entry(&t.name, h, &act.name, &data)?;
                Ok(())
            }
            "table_delete" => {
                exactly(a, 2)?;
                let t = self.table(a[0])?;
                let h = int_arg(a[1], "entry handle")?;
                outln!(o, "Deleting entry {h} from {}", a[0]);
                let h = to_u32(h, TableError::INVALID_HANDLE)?;
                rt.mt_delete_entry(&t.name, h)?;
                Ok(())
            }
            "table_set_timeout" => {
                exactly(a, 3)?;
                let t = self.table(a[0])?;
                if !t.support_timeout {
                    return ui(format!("Table {} does not support entry timeouts", a[0]));
                }
                let h = int_arg(a[1], "entry handle")?;
                let ms = int_arg(a[2], "timeout")?;
                let ms_u =
                    u32::try_from(ms).map_err(|_| CmdError::Ui("Bad format for timeout".into()))?;
                outln!(o, "Setting a {ms} ms timeout for entry {h}");
                let h = to_u32(h, TableError::INVALID_HANDLE)?;
                rt.mt_set_entry_ttl(&t.name, h, ms_u)?;
                Ok(())
            }
            "table_dump" => {
                exactly(a, 1)?;
                let t = self.table(a[0])?;
                let entries = rt.mt_get_entries(&t.name)?;
                outln!(o, "==========");
                outln!(o, "TABLE ENTRIES");
                for e in &entries {
                    outln!(o, "**********");
                    dump_entry(o, &t, e);
                }
                if t.table_type != TableType::Simple {
                    if let Some(pn) = &t.action_prof {
                        let p = self.prof(pn)?;
                        self.dump_prof(rt, &p, o)?;
                    }
                }
                let d = rt.mt_get_default_entry(&t.name)?;
                outln!(o, "==========");
                outln!(o, "Dumping default entry");
                action_entry(o, &d);
                outln!(o, "==========");
                Ok(())
            }
            "table_dump_entry" => {
                exactly(a, 2)?;
                let t = self.table(a[0])?;
                let h = int_arg(a[1], "entry handle")?;
                let h = to_u32(h, TableError::INVALID_HANDLE)?;
                let e = rt.mt_get_entry(&t.name, h)?;
                dump_entry(o, &t, &e);
                Ok(())
            }
            "table_dump_entry_from_key" => {
                at_least(a, 1)?;
                let t = self.table(a[0])?;
                let mut args = a.to_vec();
                let prio = pop_priority(&t, &mut args)?;
                let mk = args.get(1..).unwrap_or(&[]);
                if mk.len() != t.keys.len() {
                    return ui(format!("Table {} needs {} key fields", a[0], t.keys.len()));
                }
                let key = parse_match_key(&t.keys, mk).map_err(CmdError::MatchKey)?;
                let e = rt.mt_get_entry_from_key(&t.name, &key, prio)?;
                dump_entry(o, &t, &e);
                Ok(())
            }
            "act_prof_create_member" => {
                at_least(a, 2)?;
                let p = self.prof(a[0])?;
                let act = self.prof_action(&p, a[0], a[1])?;
                let data = runtime_data(&act, &a[2..], &act.name)?;
                let m = rt.act_prof_add_member(&p.name, &act.name, &data)?;
                outln!(o, "Member has been created with handle {m}");
                Ok(())
            }
            "act_prof_delete_member" => {
                exactly(a, 2)?;
                let p = self.prof(a[0])?;
                let m = int_arg(a[1], "member handle")?;
                let m = to_u32(m, TableError::INVALID_MBR_HANDLE)?;
                rt.act_prof_delete_member(&p.name, m)?;
                Ok(())
            }
            "act_prof_modify_member" => {
                at_least(a, 3)?;
                let p = self.prof(a[0])?;
                let act = self.prof_action(&p, a[0], a[1])?;
                let m = int_arg(a[2], "member handle")?;
                let params = if a.get(3) == Some(&"=>") {
                    &a[4..]
                } else {
                    &a[3..]
                };
                let data = runtime_data(&act, params, &act.name)?;
                let m = to_u32(m, TableError::INVALID_MBR_HANDLE)?;
                rt.act_prof_modify_member(&p.name, m, &act.name, &data)?;
                Ok(())
            }
            "act_prof_create_group" => {
                exactly(a, 1)?;
                let p = self.prof(a[0])?;
                check_ws(&p)?;
                let g = rt.act_prof_create_group(&p.name)?;
                outln!(o, "Group has been created with handle {g}");
                Ok(())
            }
            "act_prof_delete_group" => {
                exactly(a, 2)?;
                let p = self.prof(a[0])?;
                check_ws(&p)?;
                let g = int_arg(a[1], "group handle")?;
                let g = to_u32(g, TableError::INVALID_GRP_HANDLE)?;
                rt.act_prof_delete_group(&p.name, g)?;
                Ok(())
            }
            "act_prof_add_member_to_group" | "act_prof_remove_member_from_group" => {
                exactly(a, 3)?;
                let p = self.prof(a[0])?;
                check_ws(&p)?;
                let m = int_arg(a[1], "member handle")?;
                let g = int_arg(a[2], "group handle")?;
                let m = to_u32(m, TableError::INVALID_MBR_HANDLE)?;
                let g = to_u32(g, TableError::INVALID_GRP_HANDLE)?;
                if cmd == "act_prof_add_member_to_group" {
                    rt.act_prof_add_member_to_group(&p.name, m, g)?;
                } else {
                    rt.act_prof_remove_member_from_group(&p.name, m, g)?;
                }
                Ok(())
            }
            "act_prof_dump" => {
                exactly(a, 1)?;
                let p = self.prof(a[0])?;
                self.dump_prof(rt, &p, o)
            }
            "act_prof_dump_member" => {
                exactly(a, 2)?;
                let p = self.prof(a[0])?;
                let m = int_arg(a[1], "member handle")?;
                let m = to_u32(m, TableError::INVALID_MBR_HANDLE)?;
                let mbr = rt.act_prof_get_member(&p.name, m)?;
                dump_member(o, &mbr);
                Ok(())
            }
            "act_prof_dump_group" => {
                exactly(a, 2)?;
                let p = self.prof(a[0])?;
                let g = int_arg(a[1], "group handle")?;
                let g = to_u32(g, TableError::INVALID_GRP_HANDLE)?;
                let grp = rt.act_prof_get_group(&p.name, g)?;
                dump_group(o, &grp);
                Ok(())
            }
            "table_indirect_create_member" => {
                self.deprecated(rt, a, o, "act_prof_create_member", false, true)
            }
            "table_indirect_delete_member" => {
                self.deprecated(rt, a, o, "act_prof_delete_member", false, true)
            }
            "table_indirect_modify_member" => {
                self.deprecated(rt, a, o, "act_prof_modify_member", false, true)
            }
            "table_indirect_create_group" => {
                self.deprecated(rt, a, o, "act_prof_create_group", true, true)
            }
            "table_indirect_delete_group" => {
                self.deprecated(rt, a, o, "act_prof_delete_group", true, true)
            }
            "table_indirect_add_member_to_group" => {
                self.deprecated(rt, a, o, "act_prof_add_member_to_group", true, true)
            }
            "table_indirect_remove_member_from_group" => {
                self.deprecated(rt, a, o, "act_prof_remove_member_from_group", true, true)
            }
            "table_dump_member" => self.deprecated(rt, a, o, "act_prof_dump_member", false, false),
            "table_dump_group" => self.deprecated(rt, a, o, "act_prof_dump_group", true, false),
            "table_indirect_add" | "table_indirect_add_with_group" => {
                let ws = cmd == "table_indirect_add_with_group";
                at_least(a, 2)?;
                let t = self.table(a[0])?;
                if ws {
                    check_indirect_ws(&t)?;
                } else {
                    check_indirect(&t)?;
                }
                let mut args = a.to_vec();
                let prio = pop_priority(&t, &mut args)?;
                let rest = args.get(1..).unwrap_or(&[]);
                let idx = rest
                    .iter()
                    .position(|x| *x == "=>")
                    .unwrap_or(rest.len().saturating_sub(1))
                    + 1;
                if args.len() != idx + 2 {
                    return ui("Invalid arguments, could not find handle");
                }
                let mk = &args[1..idx];
                let h = int_arg(args[idx + 1], "handle")?;
                if mk.len() != t.keys.len() {
                    return ui(format!("Table {} needs {} key fields", a[0], t.keys.len()));
                }
                let key = parse_match_key(&t.keys, mk).map_err(CmdError::MatchKey)?;
                outln!(o, "Adding entry to indirect match table {}", t.name);
                let e = if ws {
                    let g = to_u32(h, TableError::INVALID_GRP_HANDLE)?;
                    rt.mt_indirect_ws_add_entry(&t.name, &key, g, prio)?
                } else {
                    let m = to_u32(h, TableError::INVALID_MBR_HANDLE)?;
                    rt.mt_indirect_add_entry(&t.name, &key, m, prio)?
                };
                outln!(o, "Entry has been added with handle {e}");
                Ok(())
            }
            "table_indirect_delete" => {
                exactly(a, 2)?;
                let t = self.table(a[0])?;
                check_indirect(&t)?;
                let h = int_arg(a[1], "entry handle")?;
                outln!(o, "Deleting entry {h} from {}", a[0]);
                let h = to_u32(h, TableError::INVALID_HANDLE)?;
                rt.mt_indirect_delete_entry(&t.name, h)?;
                Ok(())
            }
            "table_indirect_set_default" | "table_indirect_set_default_with_group" => {
                exactly(a, 2)?;
                let t = self.table(a[0])?;
                let h = if cmd == "table_indirect_set_default" {
                    check_indirect(&t)?;
                    let h = int_arg(a[1], "handle")?;
                    let m = to_u32(h, TableError::INVALID_MBR_HANDLE)?;
                    rt.mt_indirect_set_default_member(&t.name, m)
                } else {
                    check_indirect_ws(&t)?;
                    let h = int_arg(a[1], "handle")?;
                    let g = to_u32(h, TableError::INVALID_GRP_HANDLE)?;
                    rt.mt_indirect_ws_set_default_group(&t.name, g)
                };
                h?;
                Ok(())
            }
            "table_indirect_reset_default" => {
                exactly(a, 1)?;
                let t = self.table(a[0])?;
                check_indirect(&t)?;
                rt.mt_indirect_reset_default_entry(&t.name)?;
                Ok(())
            }
            "counter_read" => {
                exactly(a, 2)?;
                let c = self.counter(a[0])?;
                let i = int_arg(a[1], "index")?;
                let v = match &c.binding {
                    Some(t) => {
                        outln!(o, "this is the direct counter for table {t}");
                        let h = to_u32(i, TableError::INVALID_HANDLE)?;
                        rt.mt_read_counter(t, h)?
                    }
                    None => {
                        let idx = to_u32(i, CounterError::INVALID_INDEX)?;
                        rt.counter_read(&c.name, idx)?
                    }
                };
                outln!(
                    o,
                    "{}[{i}]= ({} bytes, {} packets)",
                    a[0],
                    v.bytes,
                    v.packets
                );
                Ok(())
            }
            "counter_write" => {
                exactly(a, 4)?;
                let c = self.counter(a[0])?;
                let i = int_arg(a[1], "index")?;
                let pkts = int_arg(a[2], "packets")?;
                let bytes = int_arg(a[3], "bytes")?;
                let value = CounterValue {
                    packets: u64::try_from(pkts)
                        .map_err(|_| CmdError::Ui("Bad format for packets".into()))?,
                    bytes: u64::try_from(bytes)
                        .map_err(|_| CmdError::Ui("Bad format for bytes".into()))?,
                };
                match &c.binding {
                    Some(t) => {
                        outln!(o, "writing to direct counter for table {t}");
                        let h = to_u32(i, TableError::INVALID_HANDLE)?;
                        rt.mt_write_counter(t, h, value)?;
                    }
                    None => {
                        let idx = to_u32(i, CounterError::INVALID_INDEX)?;
                        rt.counter_write(&c.name, idx, value)?;
                    }
                }
                outln!(o, "{}[{i}] has been updated", a[0]);
                Ok(())
            }
            "counter_reset" => {
                exactly(a, 1)?;
                let c = self.counter(a[0])?;
                match &c.binding {
                    Some(t) => {
                        outln!(o, "this is the direct counter for table {t}");
                        rt.mt_reset_counters(t)?;
                    }
                    None => rt.counter_reset_all(&c.name)?,
                }
                Ok(())
            }
            "meter_array_set_rates" => {
                at_least(a, 1)?;
                let m = self.meter(a[0])?;
                let rates = parse_rates(&m, &a[1..])?;
                rt.meter_array_set_rates(&m.name, &rates)?;
                Ok(())
            }
            "meter_set_rates" => {
                at_least(a, 2)?;
                let m = self.meter(a[0])?;
                let i = int_arg(a[1], "index")?;
                let rates = parse_rates(&m, &a[2..])?;
                match &m.binding {
                    Some(t) => {
                        let h = to_u32(i, TableError::INVALID_HANDLE)?;
                        rt.mt_set_meter_rates(t, h, &rates)?;
                    }
                    None => {
                        let idx = to_u32(i, MeterError::INVALID_INDEX)?;
                        rt.meter_set_rates(&m.name, idx, &rates)?;
                    }
                }
                Ok(())
            }
            "meter_get_rates" => {
                exactly(a, 2)?;
                let m = self.meter(a[0])?;
                let i = int_arg(a[1], "index")?;
                let rates = match &m.binding {
                    Some(t) => {
                        let h = to_u32(i, TableError::INVALID_HANDLE)?;
                        rt.mt_get_meter_rates(t, h)?
                    }
                    None => {
                        let idx = to_u32(i, MeterError::INVALID_INDEX)?;
                        rt.meter_get_rates(&m.name, idx)?
                    }
                };
                if rates.len() != m.rate_count as usize {
                    outln!(
                        o,
                        "WARNING: expected {} rates but only received {}",
                        m.rate_count,
                        rates.len()
                    );
                }
                for (k, r) in rates.iter().enumerate() {
                    outln!(
                        o,
                        "{k}: info rate = {}, burst size = {}",
                        py_float(r.units_per_micros),
                        r.burst_size
                    );
                }
                Ok(())
            }
            "register_read" => {
                at_least(a, 1)?;
                let r = self.register(a[0])?;
                if a.len() > 1 {
                    exactly(a, 2)?;
                    let i = int_arg(a[1], "index")?;
                    let idx = to_u32(i, RegisterError::INVALID_INDEX)?;
                    // The Thrift value is an i64: print it the way the stock CLI sees it.
                    let v = rt.register_read(&r, idx)? as i64;
                    outln!(o, "{}[{i}]= {v}", a[0]);
                } else {
                    self.stderr
                        .push_str("register index omitted, reading entire array\n");
                    let vs = rt.register_read_all(&r)?;
                    let vs: Vec<String> = vs.iter().map(|v| (*v as i64).to_string()).collect();
                    outln!(o, "{}= {}", a[0], vs.join(", "));
                }
                Ok(())
            }
            "register_write" => {
                exactly(a, 3)?;
                let r = self.register(a[0])?;
                let i = int_arg(a[1], "index")?;
                let v = py_int10(a[2])
                    .and_then(|v| {
                        u64::try_from(v)
                            .ok()
                            .or_else(|| i64::try_from(v).ok().map(|v| v as u64))
                    })
                    .ok_or_else(|| {
                        CmdError::Ui("Bad format for value, must be an integer".into())
                    })?;
                let idx = to_u32(i, RegisterError::INVALID_INDEX)?;
                rt.register_write(&r, idx, v)?;
                Ok(())
            }
            "register_reset" => {
                exactly(a, 1)?;
                let r = self.register(a[0])?;
                rt.register_reset(&r)?;
                Ok(())
            }
            "pvs_add" | "pvs_remove" => {
                exactly(a, 2)?;
                let bw = self.vset_width(a[0])?;
                let v = py_int(a[1], true).ok_or_else(|| {
                    CmdError::Ui(
                        "Invalid input, could not cast to integer, try in hex with 0x prefix"
                            .into(),
                    )
                })?;
                let fits = !v.huge && (v.magnitude.len() * 8) <= bw as usize + 8 && {
                    let bits = v
                        .magnitude
                        .first()
                        .map(|b| (v.magnitude.len() - 1) * 8 + (8 - b.leading_zeros() as usize))
                        .unwrap_or(0);
                    v.negative || bits <= bw as usize
                };
                if !fits {
                    return ui(format!(
                        "Input is too large, it should fit within {bw} bits"
                    ));
                }
                let bytes = v.to_bytes(byte_width(bw)).unwrap_or_default();
                if cmd == "pvs_add" {
                    rt.parse_vset_add(a[0], &bytes)?;
                } else {
                    rt.parse_vset_remove(a[0], &bytes)?;
                }
                Ok(())
            }
            "pvs_get" => {
                exactly(a, 1)?;
                self.vset_width(a[0])?;
                for v in rt.parse_vset_get(a[0])? {
                    outln!(o, "{}", hexstr(&v));
                }
                Ok(())
            }
            "pvs_clear" => {
                exactly(a, 1)?;
                self.vset_width(a[0])?;
                rt.parse_vset_clear(a[0])?;
                Ok(())
            }
            "mc_mgrp_create" | "mc_mgrp_destroy" => {
                self.check_pre()?;
                exactly(a, 1)?;
                let g = int_arg(a[0], "multicast group id")?;
                if cmd == "mc_mgrp_create" {
                    outln!(o, "Creating multicast group {g}");
                    rt.mc_mgrp_create(to_u32(g, McError::INVALID_MGID)?)?;
                } else {
                    outln!(o, "Destroying multicast group {g}");
                    rt.mc_mgrp_destroy(to_u32(g, McError::INVALID_MGRP_HANDLE)?)?;
                }
                Ok(())
            }
            "mc_node_create" | "mc_node_update" => {
                self.check_pre()?;
                let create = cmd == "mc_node_create";
                at_least(a, if create { 1 } else { 2 })?;
                let first = if create {
                    int_arg(a[0], "rid")?
                } else {
                    int_arg(a[0], "node handle")?
                };
                let split = a[1..].iter().position(|x| *x == "|").map(|p| p + 1);
                let ports = &a[1..split.unwrap_or(a.len())];
                let (pm, pl) = port_map(ports, "port")?;
                let (lm, ll) = if self.pre == PreType::SimplePreLag {
                    let lags = split.map(|s| &a[s + 1..]).unwrap_or(&[]);
                    let (lm, ll) = port_map(lags, "lag")?;
                    (Some(lm), ll)
                } else {
                    (None, Vec::new())
                };
                let lags: Vec<u16> = ll.iter().map(|l| *l as u16).collect();
                if create {
                    match &lm {
                        Some(lm) => outln!(
                            o,
                            "Creating node with rid {first} , port map {pm} and lag map {lm}"
                        ),
                        None => outln!(o, "Creating node with rid {first} and with port map {pm}"),
                    }
                    let rid = to_u32(first, McError::ERROR)?;
                    let h = rt.mc_node_create(rid, &pl, &lags)?;
                    outln!(o, "node was created with handle {h}");
                } else {
                    match &lm {
                        Some(lm) => outln!(
                            o,
                            "Updating node {first} with port map {pm} and lag map {lm}"
                        ),
                        None => outln!(o, "Updating node {first} with port map {pm}"),
                    }
                    let h = to_u32(first, McError::INVALID_L1_HANDLE)?;
                    rt.mc_node_update(h, &pl, &lags)?;
                }
                Ok(())
            }
            "mc_node_associate" | "mc_node_dissociate" => {
                self.check_pre()?;
                exactly(a, 2)?;
                let g = int_arg(a[0], "multicast group id")?;
                let n = int_arg(a[1], "node handle")?;
                if cmd == "mc_node_associate" {
                    outln!(o, "Associating node {n} to multicast group {g}");
                } else {
                    outln!(o, "Dissociating node {n} from multicast group {g}");
                }
                let g = to_u32(g, McError::INVALID_MGRP_HANDLE)?;
                let n = to_u32(n, McError::INVALID_L1_HANDLE)?;
                if cmd == "mc_node_associate" {
                    rt.mc_node_associate(g, n)?;
                } else {
                    rt.mc_node_dissociate(g, n)?;
                }
                Ok(())
            }
            "mc_node_destroy" => {
                self.check_pre()?;
                exactly(a, 1)?;
                let n = int_arg(a[0], "node handle")?;
                outln!(o, "Destroying node {n}");
                rt.mc_node_destroy(to_u32(n, McError::INVALID_L1_HANDLE)?)?;
                Ok(())
            }
            "mc_set_lag_membership" => {
                self.check_pre()?;
                if self.pre != PreType::SimplePreLag {
                    return ui("Cannot execute this command with this type of PRE, SimplePreLAG is required");
                }
                at_least(a, 2)?;
                let lag = int_arg(a[0], "lag index")?;
                let (pm, pl) = port_map(&a[1..], "lag")?;
                outln!(o, "Setting lag membership: {lag} <- {pm}");
                let lag = u16::try_from(lag).map_err(|_| CmdError::Rt(McError::ERROR.into()))?;
                rt.mc_set_lag_membership(lag, &pl)?;
                Ok(())
            }
            "mc_dump" => {
                self.check_pre()?;
                let text = rt.mc_get_entries()?;
                self.mc_dump(&text, o);
                Ok(())
            }
            "mirroring_add" | "mirroring_add_mc" => {
                exactly(a, 2)?;
                let id = parse_int(a[0], "mirror_id")?;
                let session = if cmd == "mirroring_add" {
                    let p = parse_int(a[1], "egress_port")?;
                    MirroringSession {
                        port: Some(to_u32(p, MirroringError::SESSION_NOT_FOUND)?),
                        mgid: None,
                    }
                } else {
                    let g = parse_int(a[1], "mgrp")?;
                    MirroringSession {
                        port: None,
                        mgid: Some(to_u32(g, MirroringError::SESSION_NOT_FOUND)?),
                    }
                };
                rt.mirroring_session_add(to_u32(id, MirroringError::SESSION_NOT_FOUND)?, session)?;
                Ok(())
            }
            "mirroring_delete" => {
                exactly(a, 1)?;
                let id = parse_int(a[0], "mirror_id")?;
                rt.mirroring_session_delete(to_u32(id, MirroringError::SESSION_NOT_FOUND)?)?;
                Ok(())
            }
            "mirroring_get" => {
                exactly(a, 1)?;
                let id = parse_int(a[0], "mirror_id")?;
                let s = rt.mirroring_session_get(to_u32(id, MirroringError::SESSION_NOT_FOUND)?)?;
                let opt = |v: Option<u32>| v.map_or("None".to_string(), |v| v.to_string());
                outln!(
                    o,
                    "MirroringSessionConfig(port={}, mgid={})",
                    opt(s.port),
                    opt(s.mgid)
                );
                Ok(())
            }
            "set_queue_depth" | "set_queue_rate" => {
                // Extra arguments after the priority are ignored, as in BMv2.
                at_least(a, 1)?;
                let depth = cmd == "set_queue_depth";
                let v = parse_int(a[0], if depth { "nb_pkts" } else { "rate_pps" })?;
                let port = match a.get(1) {
                    Some(p) => Some(parse_int(p, "egress_port")?),
                    None => None,
                };
                let prio = match a.get(2) {
                    Some(p) => Some(parse_int(p, "priority")?),
                    None => None,
                };
                let bad =
                    |what: &str| CmdError::Ui(format!("Bad format for {what}, expected integer"));
                let port = port
                    .map(|p| u32::try_from(p).map_err(|_| bad("egress_port")))
                    .transpose()?;
                let prio = prio
                    .map(|p| u32::try_from(p).map_err(|_| bad("priority")))
                    .transpose()?;
                if depth {
                    let d = u32::try_from(v).map_err(|_| bad("nb_pkts"))?;
                    rt.set_egress_queue_depth(port, prio, d)?;
                } else {
                    let r = u64::try_from(v).map_err(|_| bad("rate_pps"))?;
                    rt.set_egress_queue_rate(port, prio, r)?;
                }
                Ok(())
            }
            "get_time_elapsed" => {
                outln!(o, "{}", rt.get_time_elapsed_us());
                Ok(())
            }
            "get_time_since_epoch" => {
                outln!(o, "{}", rt.get_time_since_epoch_us());
                Ok(())
            }
            "switch_info" => {
                exactly(a, 0)?;
                let info = rt.switch_info();
                let opt = |v: &Option<String>| v.clone().unwrap_or_else(|| "None".into());
                let rows = [
                    ("device_id", info.device_id.to_string()),
                    ("thrift_port", info.thrift_port.to_string()),
                    ("notifications_socket", opt(&info.notifications_socket)),
                    ("elogger_socket", opt(&info.elogger_socket)),
                    ("debugger_socket", opt(&info.debugger_socket)),
                ];
                for (k, v) in rows {
                    outln!(o, "{}: {v}", pad(k, 25));
                }
                Ok(())
            }
            "show_ports" => {
                exactly(a, 0)?;
                let ports = rt.dev_mgr_show_ports()?;
                outln!(
                    o,
                    "{}{}{}extra info",
                    center("port #", 10),
                    center("iface name", 20),
                    center("status", 10)
                );
                outln!(o, "{}", "=".repeat(50));
                for p in ports {
                    let extra: Vec<String> =
                        p.extra.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    outln!(
                        o,
                        "{}{}{}{}",
                        center(&p.port.to_string(), 10),
                        center(&p.iface_name, 20),
                        center(if p.is_up { "UP" } else { "DOWN" }, 10),
                        extra.join("; ")
                    );
                }
                Ok(())
            }
            "port_add" => {
                at_least(a, 2)?;
                let p = py_int10(a[1])
                    .and_then(|p| u32::try_from(p).ok())
                    .ok_or_else(|| {
                        CmdError::Ui("Bad format for port_num, must be an integer".into())
                    })?;
                rt.dev_mgr_add_port(a[0], p, a.get(2).copied())?;
                Ok(())
            }
            "port_remove" => {
                exactly(a, 1)?;
                let p = py_int10(a[0])
                    .and_then(|p| u32::try_from(p).ok())
                    .ok_or_else(|| {
                        CmdError::Ui("Bad format for port_num, must be an integer".into())
                    })?;
                rt.dev_mgr_remove_port(p)?;
                Ok(())
            }
            "set_crc16_parameters" | "set_crc32_parameters" => {
                let width = if cmd == "set_crc16_parameters" {
                    16
                } else {
                    32
                };
                exactly(a, 6)?;
                if self.names.custom_crcs.get(a[0]) != Some(&width) {
                    return ui(format!("Invalid crc{width}_custom name ({})", a[0]));
                }
                let mut nums = [0u32; 3];
                for (slot, text) in nums.iter_mut().zip(&a[1..4]) {
                    let v = py_int(text, true)
                        .and_then(|v| v.to_i128())
                        .ok_or_else(|| CmdError::Ui(format!("Bad format for integer '{text}'")))?;
                    if v >= 1i128 << width {
                        return ui(format!("Integer cannot fit within {width} bits"));
                    }
                    let mask = (1i128 << width) - 1;
                    *slot = (v & mask) as u32;
                }
                let parse_bool = |s: &str| -> Result<bool, CmdError> {
                    match s {
                        "true" | "True" => Ok(true),
                        "false" | "False" => Ok(false),
                        _ => py_int(s, true)
                            .map(|v| !v.magnitude.is_empty() || v.huge)
                            .ok_or_else(|| CmdError::Ui("Invalid bool parameter".into())),
                    }
                };
                let config = CrcConfig {
                    polynomial: nums[0],
                    initial_remainder: nums[1],
                    final_xor_value: nums[2],
                    data_reflected: parse_bool(a[4])?,
                    remainder_reflected: parse_bool(a[5])?,
                };
                if width == 16 {
                    rt.set_crc16_custom_parameters(a[0], config)?;
                } else {
                    rt.set_crc32_custom_parameters(a[0], config)?;
                }
                Ok(())
            }
            "set_toeplitz_hash_key" => {
                exactly(a, 2)?;
                let hex = a[1].strip_prefix("0x").unwrap_or(a[1]);
                if hex.len() & 1 == 1 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
                    return ui("Key must be a hexadecimal string");
                }
                let key: Vec<u8> = (0..hex.len())
                    .step_by(2)
                    .filter_map(|i| u8::from_str_radix(&hex[i..i + 2], 16).ok())
                    .collect();
                if key.is_empty() || key.len() & 3 != 0 {
                    return ui("Key length must be a multiple of 4 bytes");
                }
                rt.set_toeplitz_hash_key(a[0], &key)?;
                Ok(())
            }
            "load_new_config_file" => {
                exactly(a, 1)?;
                let path = std::path::Path::new(a[0]);
                if !path.is_file() {
                    return ui("Not a valid filename");
                }
                outln!(o, "Loading new Json config");
                let text = std::fs::read_to_string(path)
                    .map_err(|e| CmdError::Ui(format!("Cannot read '{}': {e}", a[0])))?;
                if serde_json::from_str::<serde_json::Value>(&text).is_err() {
                    return ui("Not a valid JSON file");
                }
                rt.load_new_config(&text)?;
                match tern_model::load(&text) {
                    Ok(p) => self.names = crate::names::Names::new(&p),
                    Err(e) => return ui(format!("Cannot read the new JSON locally: {e}")),
                }
                Ok(())
            }
            "swap_configs" => {
                outln!(o, "Swapping configs");
                rt.swap_configs()?;
                Ok(())
            }
            "write_config_to_file" => {
                exactly(a, 1)?;
                write_file(a[0], &rt.get_config())
            }
            "serialize_state" => {
                exactly(a, 1)?;
                write_file(a[0], &rt.serialize_state())
            }
            "reset_state" => {
                exactly(a, 0)?;
                rt.reset_state();
                Ok(())
            }
            _ => {
                outln!(o, "*** Unknown syntax: {cmd}");
                Ok(())
            }
        }
    }

    fn table_add(&mut self, rt: &mut dyn Runtime, a: &[&str], o: &mut String) -> R {
        at_least(a, 3)?;
        let (tn, an) = (a[0], a[1]);
        let t = self.table(tn)?;
        let act = self.table_action(&t, tn, an)?;
        let mut args = a.to_vec();
        let prio = pop_priority(&t, &mut args)?;
        let rest = args.get(2..).unwrap_or(&[]);
        let idx = rest
            .iter()
            .position(|x| *x == "=>")
            .unwrap_or(rest.len().saturating_sub(1))
            + 2;
        let idx = idx.min(args.len());
        let mk = &args[2.min(idx)..idx];
        let params = args.get(idx + 1..).unwrap_or(&[]);
        if mk.len() != t.keys.len() {
            return ui(format!("Table {tn} needs {} key fields", t.keys.len()));
        }
        let data = runtime_data(&act, params, &act.name)?;
        let key = parse_match_key(&t.keys, mk).map_err(CmdError::MatchKey)?;
        outln!(
            o,
            "Adding entry to {} match table {tn}",
            kind_str(t.match_type)
        );
        let ks: Vec<String> = key.iter().map(match_param_echo).collect();
        outln!(o, "{} {}", pad("match key:", 20), ks.join("\t"));
        outln!(o, "{} {an}", pad("action:", 20));
        let ds: Vec<String> = data.iter().map(|d| colon_hex(d)).collect();
        outln!(o, "{} {}", pad("runtime data:", 20), ds.join("\t"));
        let h = rt.mt_add_entry(&t.name, &key, &act.name, &data, prio)?;
        outln!(o, "Entry has been added with handle {h}");
        Ok(())
    }

    fn dump_prof(&self, rt: &mut dyn Runtime, p: &ProfInfo, o: &mut String) -> R {
        let members = rt.act_prof_get_members(&p.name)?;
        outln!(o, "==========");
        outln!(o, "MEMBERS");
        for m in &members {
            outln!(o, "**********");
            dump_member(o, m);
        }
        if p.with_selection {
            let groups = rt.act_prof_get_groups(&p.name)?;
            outln!(o, "==========");
            outln!(o, "GROUPS");
            for g in &groups {
                outln!(o, "**********");
                dump_group(o, g);
            }
        }
        Ok(())
    }

    /// The legacy `table_indirect_*` / `table_dump_member|group` forms: name a table, act on
    /// its action profile.
    fn deprecated(
        &mut self,
        rt: &mut dyn Runtime,
        a: &[&str],
        o: &mut String,
        substitute: &str,
        with_selection: bool,
        strict: bool,
    ) -> R {
        at_least(a, 1)?;
        let t = self.table(a[0])?;
        if with_selection {
            check_indirect_ws(&t)?;
        } else {
            check_indirect(&t)?;
        }
        let Some(pn) = t.action_prof.clone() else {
            return ui("Cannot run this command on non-indirect table");
        };
        let refs = self.names.profs.get(&pn).map_or(0, |p| p.ref_cnt);
        if strict && refs > 1 {
            return ui("Legacy command does not work with shared action profiles");
        }
        if strict {
            let _ = writeln!(
                self.stderr,
                "This is a deprecated command, use '{substitute}' instead"
            );
        }
        let mut args: Vec<&str> = a.to_vec();
        args[0] = &pn;
        self.dispatch(rt, substitute, &args, o)
    }

    fn mc_dump(&self, text: &str, o: &mut String) {
        let Ok(j) = serde_json::from_str::<serde_json::Value>(text) else {
            outln!(o, "Exception when retrieving MC entries");
            return;
        };
        let arr = |v: &serde_json::Value, k: &str| -> Vec<serde_json::Value> {
            v.get(k)
                .and_then(|x| x.as_array())
                .cloned()
                .unwrap_or_default()
        };
        let num = |v: &serde_json::Value, k: &str| v.get(k).and_then(|x| x.as_i64());
        let list = |v: &serde_json::Value, k: &str| -> Vec<String> {
            arr(v, k).iter().map(|x| x.to_string()).collect()
        };
        let l1: Vec<(i64, i64, i64)> = arr(&j, "l1_handles")
            .iter()
            .filter_map(|h| Some((num(h, "handle")?, num(h, "rid")?, num(h, "l2_handle")?)))
            .collect();
        let l2: Vec<(i64, Vec<String>, Vec<String>)> = arr(&j, "l2_handles")
            .iter()
            .filter_map(|h| Some((num(h, "handle")?, list(h, "ports"), list(h, "lags"))))
            .collect();
        outln!(o, "==========");
        outln!(o, "MC ENTRIES");
        let mut last_ports: Option<Vec<String>> = None;
        for g in arr(&j, "mgrps") {
            outln!(o, "**********");
            outln!(
                o,
                "mgrp({})",
                g.get("id").map(|x| x.to_string()).unwrap_or_default()
            );
            for h in arr(&g, "l1_handles") {
                let Some(h) = h.as_i64() else { continue };
                let Some((_, rid, l2h)) = l1.iter().find(|x| x.0 == h) else {
                    continue;
                };
                let (ports, lags) = l2
                    .iter()
                    .find(|x| x.0 == *l2h)
                    .map(|x| (x.1.clone(), x.2.clone()))
                    .unwrap_or_default();
                outln!(
                    o,
                    "  -> (L1h={h}, rid={rid}) -> (ports=[{}], lags=[{}])",
                    ports.join(", "),
                    lags.join(", ")
                );
                last_ports = Some(ports);
            }
        }
        outln!(o, "==========");
        outln!(o, "LAGS");
        if self.pre == PreType::SimplePreLag && j.get("lags").is_some() {
            for lag in arr(&j, "lags") {
                // Quirk of the stock client: it prints the ports of the last node above.
                let ports = last_ports.clone().unwrap_or_else(|| list(&lag, "ports"));
                outln!(
                    o,
                    "lag({}) -> ports=[{}]",
                    lag.get("id").map(|x| x.to_string()).unwrap_or_default(),
                    ports.join(", ")
                );
            }
        } else {
            outln!(o, "None for this PRE type");
        }
        outln!(o, "==========");
    }
}

/// `parse_int(arg, name)` of the simple_switch CLI.
fn parse_int(s: &str, what: &str) -> Result<i128, CmdError> {
    py_int10(s).ok_or_else(|| CmdError::Ui(format!("Bad format for {what}, expected integer")))
}
