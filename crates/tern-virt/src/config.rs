//! The `tern virt` configuration file: devices (programs, owners, quotas, runtime command
//! files, port maps), classifier rules and named snapshots, parsed with errors that name the
//! offending place, and built into a [`VirtSwitch`].
//!
//! ```json
//! {
//!   "max_hops": 8,
//!   "devices": [
//!     { "id": 1, "program": "firewall.p4", "owner": "alice",
//!       "quotas": { "max_entries": 100, "max_passes": 64, "max_register_bytes": 65536,
//!                   "max_parser_states": 1000, "max_buffers": 256 },
//!       "commands": "firewall.txt", "thrift_port": 9091,
//!       "ports": { "1": "phys:1", "2": "link:2:1", "3": "cpu", "4": "drop" },
//!       "vlans": { "1": 100 } }
//!   ],
//!   "rules": [
//!     { "priority": 10, "port": 1, "vlan": 5, "field": "ipv4.dst",
//!       "value": "10.0.0.1", "mask": "255.255.255.255", "device": 1, "vport": 1 }
//!   ],
//!   "snapshots": { "maintenance": { "rules": [ ... ], "ports": { "1": { "1": "drop" } } } },
//!   "p4runtime": { "addr": "127.0.0.1:9559", "tokens": { "alice": "alice-secret" },
//!                  "operator_token": "op-secret" },
//!   "worker_slice_us": 100
//! }
//! ```
//!
//! A device may also name P4Runtime roles (see `tern_p4rt::roles`):
//!
//! ```json
//! "roles": { "acl": { "entities": ["MyIngress.acl"], "packet_in": false, "pipeline": false } }
//! ```
//! `vlans` makes virtual ports tagged (virtual port → VLAN id, `Topology::vlans`: the tag is
//! stripped on the way in and pushed on the way out); snapshots keep the devices' `vlans`.
//!
//! `worker_slice_us` is the time slice (µs) the worker threads of `tern virt run --workers N`
//! ask the kernel for ([`crate::ThreadSlice`]; 0 or absent: the kernel's default).
//!
//! Paths are relative to the configuration file's folder; `.p4` programs are compiled with
//! tern's compiler, anything else is read as BMv2 JSON.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use tern_runtime::Port;

use crate::{
    Caller, DeviceId, DeviceSpec, Field, FieldMatch, Quotas, Rule, Target, Topology, VirtSwitch,
    MAX_BUFFERS, MAX_PARSER_STATES,
};

/// A configuration error: where (a JSON path such as `devices[1].ports."3"`) and what.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {place}: {message}")]
pub struct ConfigError {
    pub file: String,
    pub place: String,
    pub message: String,
}

/// One device of the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceConfig {
    pub id: DeviceId,
    pub program: PathBuf,
    pub owner: Option<String>,
    pub quotas: Quotas,
    pub commands: Option<PathBuf>,
    /// Serve BMv2's Thrift API for this device (as its owner) on this TCP port.
    pub thrift_port: Option<u16>,
    /// P4Runtime roles of the device (empty: role names are not enforced).
    pub roles: tern_p4rt::Roles,
}

/// The P4Runtime server of the file (`"p4runtime"`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct P4rtConfig {
    /// Listen address (`--grpc-addr` overrides it).
    pub addr: Option<String>,
    /// Tenant → bearer token; with any token (or an operator token) every request needs one.
    pub tokens: BTreeMap<String, String>,
    /// The operator's token: reaches every device.
    pub operator_token: Option<String>,
    /// TLS: (PEM certificate chain, PEM private key) files, relative to the config's folder;
    /// `None`: plain text.
    pub tls: Option<(PathBuf, PathBuf)>,
}

/// A parsed configuration file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub file: String,
    pub max_hops: u32,
    pub devices: Vec<DeviceConfig>,
    /// The rules and every device's port map.
    pub topology: Topology,
    pub snapshots: BTreeMap<String, Topology>,
    /// The P4Runtime server, if the file configures one.
    pub p4runtime: Option<P4rtConfig>,
    /// `"worker_slice_us"`: the time slice the worker threads of `tern virt run --workers N`
    /// ask the kernel for, in µs (0 or absent: the kernel's default; `--worker-slice-us`
    /// overrides it; see `crate::sched` for what it does and does not do).
    pub worker_slice_us: Option<u64>,
}

struct Ctx<'a> {
    file: &'a str,
}

impl Ctx<'_> {
    fn err(&self, place: &str, message: impl Into<String>) -> ConfigError {
        ConfigError {
            file: self.file.to_string(),
            place: place.to_string(),
            message: message.into(),
        }
    }

    fn uint(&self, v: &Value, place: &str, max: u64) -> Result<u64, ConfigError> {
        let n = match v {
            Value::Number(n) => n.as_u64(),
            Value::String(s) => parse_uint(s),
            _ => None,
        };
        match n {
            Some(n) if n <= max => Ok(n),
            Some(n) => Err(self.err(place, format!("{n} is above {max}"))),
            None => Err(self.err(place, format!("expected a number, found {v}"))),
        }
    }

    fn obj<'v>(
        &self,
        v: &'v Value,
        place: &str,
        allowed: &[&str],
    ) -> Result<&'v serde_json::Map<String, Value>, ConfigError> {
        let o = v
            .as_object()
            .ok_or_else(|| self.err(place, "expected an object"))?;
        if let Some(k) = o.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(self.err(
                place,
                format!("unknown key '{k}' (known: {})", allowed.join(", ")),
            ));
        }
        Ok(o)
    }

    fn rule(&self, v: &Value, place: &str) -> Result<Rule, ConfigError> {
        let o = self.obj(
            v,
            place,
            &[
                "priority", "port", "vlan", "field", "value", "mask", "device", "vport",
            ],
        )?;
        let sub = |k: &str| format!("{place}.{k}");
        let opt_u = |k: &str, max: u64| -> Result<Option<u64>, ConfigError> {
            o.get(k).map(|v| self.uint(v, &sub(k), max)).transpose()
        };
        let priority = match o.get("priority") {
            None => 0,
            Some(v) => v
                .as_i64()
                .and_then(|p| i32::try_from(p).ok())
                .ok_or_else(|| self.err(&sub("priority"), "expected a 32-bit integer"))?,
        };
        let device = o
            .get("device")
            .ok_or_else(|| self.err(place, "missing 'device'"))?;
        let device = self.uint(device, &sub("device"), u32::MAX as u64)? as DeviceId;
        let field = match o.get("field") {
            None => {
                if o.contains_key("value") || o.contains_key("mask") {
                    return Err(self.err(place, "'value'/'mask' without 'field'"));
                }
                None
            }
            Some(f) => {
                let name = f
                    .as_str()
                    .ok_or_else(|| self.err(&sub("field"), "expected a field name"))?;
                let field = Field::parse(name).ok_or_else(|| {
                    self.err(
                        &sub("field"),
                        format!(
                            "unknown field '{name}' (known: eth.dst, eth.src, eth.type, \
                             ipv4.src, ipv4.dst, ipv4.proto)"
                        ),
                    )
                })?;
                let full = if field.width() == 64 {
                    u64::MAX
                } else {
                    (1u64 << field.width()) - 1
                };
                let value = o
                    .get("value")
                    .ok_or_else(|| self.err(place, "'field' needs a 'value'"))?;
                let value = self.value(value, &sub("value"), full)?;
                let mask = match o.get("mask") {
                    None => full,
                    Some(m) => self.value(m, &sub("mask"), full)?,
                };
                Some(FieldMatch { field, value, mask })
            }
        };
        Ok(Rule {
            priority,
            port: opt_u("port", u32::MAX as u64)?.map(|p| p as Port),
            vlan: opt_u("vlan", 4095)?.map(|v| v as u16),
            field,
            device,
            vport: opt_u("vport", crate::MAX_VPORT as u64)?.map(|p| p as Port),
        })
    }

    /// A field value: a number, `0x..`, a dotted IPv4 address or a colon MAC address.
    fn value(&self, v: &Value, place: &str, max: u64) -> Result<u64, ConfigError> {
        if let Value::String(s) = v {
            if let Some(x) = parse_addr(s) {
                if x > max {
                    return Err(self.err(place, format!("'{s}' is wider than the field")));
                }
                return Ok(x);
            }
        }
        self.uint(v, place, max)
    }

    fn ports(&self, v: &Value, place: &str) -> Result<BTreeMap<Port, Target>, ConfigError> {
        let o = v
            .as_object()
            .ok_or_else(|| self.err(place, "expected an object of virtual port → target"))?;
        let mut m = BTreeMap::new();
        for (k, t) in o {
            let p = format!("{place}.\"{k}\"");
            let vp = parse_uint(k)
                .filter(|&n| n <= crate::MAX_VPORT as u64)
                .ok_or_else(|| {
                    self.err(&p, format!("virtual port must be 0..={}", crate::MAX_VPORT))
                })? as Port;
            let s = t.as_str().ok_or_else(|| {
                self.err(
                    &p,
                    "expected \"phys:P\", \"link:DEVICE:VPORT\", \"cpu\" or \"drop\"",
                )
            })?;
            m.insert(vp, parse_target(s).map_err(|e| self.err(&p, e))?);
        }
        Ok(m)
    }

    fn string(&self, v: &Value, place: &str) -> Result<String, ConfigError> {
        match v.as_str() {
            Some(s) if !s.is_empty() => Ok(s.to_string()),
            _ => Err(self.err(place, "expected a non-empty string")),
        }
    }

    fn p4runtime(&self, v: &Value) -> Result<P4rtConfig, ConfigError> {
        let o = self.obj(v, "p4runtime", &["addr", "tokens", "operator_token", "tls"])?;
        let mut c = P4rtConfig::default();
        if let Some(a) = o.get("addr") {
            c.addr = Some(self.string(a, "p4runtime.addr")?);
        }
        if let Some(t) = o.get("tokens") {
            let to = t.as_object().ok_or_else(|| {
                self.err("p4runtime.tokens", "expected an object of tenant → token")
            })?;
            for (tenant, tok) in to {
                let tok = self.string(tok, &format!("p4runtime.tokens.\"{tenant}\""))?;
                c.tokens.insert(tenant.clone(), tok);
            }
        }
        if let Some(t) = o.get("operator_token") {
            c.operator_token = Some(self.string(t, "p4runtime.operator_token")?);
        }
        if let Some(t) = o.get("tls") {
            let to = self.obj(t, "p4runtime.tls", &["cert", "key"])?;
            let file = |k: &str| -> Result<PathBuf, ConfigError> {
                let v = to.get(k).ok_or_else(|| {
                    self.err("p4runtime.tls", format!("missing '{k}' (a PEM file)"))
                })?;
                Ok(PathBuf::from(
                    self.string(v, &format!("p4runtime.tls.{k}"))?,
                ))
            };
            c.tls = Some((file("cert")?, file("key")?));
        }
        Ok(c)
    }

    fn roles(&self, v: &Value, place: &str) -> Result<tern_p4rt::Roles, ConfigError> {
        let o = v
            .as_object()
            .ok_or_else(|| self.err(place, "expected an object of role name → role"))?;
        let mut roles = tern_p4rt::Roles::new();
        for (name, r) in o {
            let rp = format!("{place}.\"{name}\"");
            if name.is_empty() {
                return Err(self.err(&rp, "the default role (empty name) owns everything"));
            }
            let ro = self.obj(r, &rp, &["entities", "packet_in", "pipeline"])?;
            let mut rc = tern_p4rt::RoleConfig::default();
            if let Some(e) = ro.get("entities") {
                let arr = e.as_array().ok_or_else(|| {
                    self.err(
                        &format!("{rp}.entities"),
                        "expected an array of P4Info names",
                    )
                })?;
                for (i, n) in arr.iter().enumerate() {
                    rc.entities
                        .push(self.string(n, &format!("{rp}.entities[{i}]"))?);
                }
            }
            for (k, slot) in [
                ("packet_in", &mut rc.packet_in),
                ("pipeline", &mut rc.pipeline),
            ] {
                if let Some(b) = ro.get(k) {
                    *slot = b
                        .as_bool()
                        .ok_or_else(|| self.err(&format!("{rp}.{k}"), "expected true or false"))?;
                }
            }
            roles.insert(name.clone(), rc);
        }
        Ok(roles)
    }

    fn vlans(&self, v: &Value, place: &str) -> Result<BTreeMap<Port, u16>, ConfigError> {
        let o = v
            .as_object()
            .ok_or_else(|| self.err(place, "expected an object of virtual port → VLAN id"))?;
        let mut m = BTreeMap::new();
        for (k, vid) in o {
            let p = format!("{place}.\"{k}\"");
            let vp = parse_uint(k)
                .filter(|&n| n <= crate::MAX_VPORT as u64)
                .ok_or_else(|| {
                    self.err(&p, format!("virtual port must be 0..={}", crate::MAX_VPORT))
                })? as Port;
            let vid = self.uint(vid, &p, 4094)?;
            if vid == 0 {
                return Err(self.err(&p, "VLAN id must be 1..=4094"));
            }
            m.insert(vp, vid as u16);
        }
        Ok(m)
    }

    fn topology(
        &self,
        rules: Option<&Value>,
        ports: Vec<(DeviceId, BTreeMap<Port, Target>)>,
        place: &str,
    ) -> Result<Topology, ConfigError> {
        let mut t = Topology::default();
        if let Some(r) = rules {
            let arr = r
                .as_array()
                .ok_or_else(|| self.err(&format!("{place}rules"), "expected an array"))?;
            for (i, r) in arr.iter().enumerate() {
                t.rules.push(self.rule(r, &format!("{place}rules[{i}]"))?);
            }
        }
        t.port_maps.extend(ports);
        Ok(t)
    }
}

/// `KEY=VALUE` words as a JSON object (numbers where the value is an integer).
fn words_object(words: &[&str]) -> Result<Value, String> {
    let mut o = serde_json::Map::new();
    for w in words {
        let (k, v) = w
            .split_once('=')
            .ok_or_else(|| format!("'{w}' is not KEY=VALUE"))?;
        if k.is_empty() {
            return Err(format!("'{w}' has no key"));
        }
        let v = match v.parse::<i64>() {
            Ok(n) => Value::from(n),
            Err(_) => Value::from(v),
        };
        if o.insert(k.to_string(), v).is_some() {
            return Err(format!("'{k}' given twice"));
        }
    }
    Ok(Value::Object(o))
}

/// A classifier rule from the operator's words (`tern virt ctl SOCKET rule add ...`): the
/// keys of a config rule as `KEY=VALUE` (`priority=10 port=1 vlan=5 field=ipv4.dst
/// value=10.0.3.0 mask=255.255.255.0 device=2 vport=1`).
pub fn parse_rule_words(words: &[&str]) -> Result<Rule, String> {
    let v = words_object(words)?;
    Ctx { file: "rule" }.rule(&v, "rule").map_err(|e| e.message)
}

/// Quotas changed by the operator's words (`max_entries=N|none`, `max_passes=N`,
/// `max_register_bytes=N|none`, `max_parser_states=N`, `max_buffers=N|none`), starting from
/// `base`.
pub fn parse_quota_words(words: &[&str], base: Quotas) -> Result<Quotas, String> {
    let mut q = base;
    if words.is_empty() {
        return Err(
            "no quota given (max_entries=N|none max_passes=N max_register_bytes=N|none \
             max_parser_states=N max_buffers=N|none)"
                .into(),
        );
    }
    for w in words {
        let (k, v) = w
            .split_once('=')
            .ok_or_else(|| format!("'{w}' is not KEY=VALUE"))?;
        let num = || parse_uint(v).ok_or_else(|| format!("{k}: '{v}' is not a number"));
        match k {
            "max_entries" if v == "none" => q.max_entries = None,
            "max_entries" => q.max_entries = Some(num()?),
            "max_register_bytes" if v == "none" => q.max_register_bytes = None,
            "max_register_bytes" => q.max_register_bytes = Some(num()?),
            "max_passes" => {
                let n = num()?;
                if n == 0 || n > 1_000_000 {
                    return Err(format!("max_passes: {n} is not in 1..=1000000"));
                }
                q.max_passes = n as usize;
            }
            "max_parser_states" => {
                let n = num()?;
                if n == 0 || n > MAX_PARSER_STATES {
                    return Err(format!(
                        "max_parser_states: {n} is not in 1..={MAX_PARSER_STATES}"
                    ));
                }
                q.max_parser_states = n;
            }
            "max_buffers" if v == "none" => q.max_buffers = None,
            "max_buffers" => {
                let n = num()?;
                if n == 0 || n > MAX_BUFFERS as u64 {
                    return Err(format!("max_buffers: {n} is not in 1..={MAX_BUFFERS}"));
                }
                q.max_buffers = Some(n as usize);
            }
            _ => {
                return Err(format!(
                    "unknown quota '{k}' (max_entries, max_passes, max_register_bytes, \
                     max_parser_states, max_buffers)"
                ))
            }
        }
    }
    Ok(q)
}

fn parse_uint(s: &str) -> Option<u64> {
    let s = s.trim();
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

fn parse_addr(s: &str) -> Option<u64> {
    if s.contains('.') {
        let parts: Vec<&str> = s.split('.').collect();
        if parts.len() != 4 {
            return None;
        }
        parts
            .iter()
            .try_fold(0u64, |a, p| Some((a << 8) | p.parse::<u8>().ok()? as u64))
    } else if s.contains(':') {
        let parts: Vec<&str> = s.split(':').collect();
        if parts.len() != 6 {
            return None;
        }
        parts.iter().try_fold(0u64, |a, p| {
            Some((a << 8) | u8::from_str_radix(p, 16).ok()? as u64)
        })
    } else {
        None
    }
}

/// `phys:P`, `link:DEVICE:VPORT`, `cpu`, `drop`.
pub fn parse_target(s: &str) -> Result<Target, String> {
    let bad = || format!("bad target '{s}': expected phys:P, link:DEVICE:VPORT, cpu or drop");
    let parts: Vec<&str> = s.split(':').collect();
    match parts.as_slice() {
        ["cpu"] => Ok(Target::Cpu),
        ["drop"] => Ok(Target::Drop),
        ["phys", p] => Ok(Target::Phys(
            parse_uint(p)
                .and_then(|p| u32::try_from(p).ok())
                .ok_or_else(bad)?,
        )),
        ["link", d, v] => Ok(Target::Link {
            device: parse_uint(d)
                .and_then(|p| u32::try_from(p).ok())
                .ok_or_else(bad)?,
            vport: parse_uint(v)
                .filter(|&p| p <= crate::MAX_VPORT as u64)
                .ok_or_else(bad)? as Port,
        }),
        _ => Err(bad()),
    }
}

impl Config {
    /// Parse the text of a configuration file named `file` (for messages).
    pub fn parse(text: &str, file: &str) -> Result<Config, ConfigError> {
        let cx = Ctx { file };
        let root: Value = serde_json::from_str(text).map_err(|e| {
            cx.err(
                &format!("line {} column {}", e.line(), e.column()),
                format!("not JSON: {e}"),
            )
        })?;
        let o = cx.obj(
            &root,
            "top level",
            &[
                "max_hops",
                "devices",
                "rules",
                "snapshots",
                "p4runtime",
                "worker_slice_us",
            ],
        )?;
        let max_hops = match o.get("max_hops") {
            None => crate::DEFAULT_MAX_HOPS,
            Some(v) => cx.uint(v, "max_hops", 1024)? as u32,
        };
        let devs = o
            .get("devices")
            .and_then(Value::as_array)
            .ok_or_else(|| cx.err("devices", "expected an array of devices"))?;
        let mut devices = Vec::new();
        let mut ports = Vec::new();
        let mut vlans = BTreeMap::new();
        for (i, d) in devs.iter().enumerate() {
            let place = format!("devices[{i}]");
            let dobj = cx.obj(
                d,
                &place,
                &[
                    "id",
                    "program",
                    "owner",
                    "quotas",
                    "commands",
                    "ports",
                    "vlans",
                    "thrift_port",
                    "roles",
                ],
            )?;
            let id = dobj
                .get("id")
                .ok_or_else(|| cx.err(&place, "missing 'id'"))?;
            let id = cx.uint(id, &format!("{place}.id"), u32::MAX as u64)? as DeviceId;
            if devices.iter().any(|x: &DeviceConfig| x.id == id) {
                return Err(cx.err(&format!("{place}.id"), format!("device {id} twice")));
            }
            let program = dobj
                .get("program")
                .and_then(Value::as_str)
                .ok_or_else(|| cx.err(&place, "missing 'program' (a .json or .p4 path)"))?;
            let owner = match dobj.get("owner") {
                None => None,
                Some(v) => Some(
                    v.as_str()
                        .ok_or_else(|| cx.err(&format!("{place}.owner"), "expected a string"))?
                        .to_string(),
                ),
            };
            let mut quotas = Quotas::default();
            if let Some(q) = dobj.get("quotas") {
                let qp = format!("{place}.quotas");
                let qo = cx.obj(
                    q,
                    &qp,
                    &[
                        "max_entries",
                        "max_passes",
                        "max_register_bytes",
                        "max_parser_states",
                        "max_buffers",
                    ],
                )?;
                if let Some(v) = qo.get("max_entries") {
                    quotas.max_entries =
                        Some(cx.uint(v, &format!("{qp}.max_entries"), u64::MAX)?);
                }
                if let Some(v) = qo.get("max_register_bytes") {
                    quotas.max_register_bytes =
                        Some(cx.uint(v, &format!("{qp}.max_register_bytes"), u64::MAX)?);
                }
                if let Some(v) = qo.get("max_passes") {
                    let n = cx.uint(v, &format!("{qp}.max_passes"), 1_000_000)?;
                    if n == 0 {
                        return Err(cx.err(&format!("{qp}.max_passes"), "must be at least 1"));
                    }
                    quotas.max_passes = n as usize;
                }
                if let Some(v) = qo.get("max_parser_states") {
                    let place = format!("{qp}.max_parser_states");
                    let n = cx.uint(v, &place, MAX_PARSER_STATES)?;
                    if n == 0 {
                        return Err(cx.err(&place, "must be at least 1"));
                    }
                    quotas.max_parser_states = n;
                }
                if let Some(v) = qo.get("max_buffers") {
                    let place = format!("{qp}.max_buffers");
                    let n = cx.uint(v, &place, MAX_BUFFERS as u64)?;
                    if n == 0 {
                        return Err(cx.err(&place, "must be at least 1"));
                    }
                    quotas.max_buffers = Some(n as usize);
                }
            }
            let commands = match dobj.get("commands") {
                None => None,
                Some(v) => Some(PathBuf::from(v.as_str().ok_or_else(|| {
                    cx.err(&format!("{place}.commands"), "expected a path")
                })?)),
            };
            let thrift_port = match dobj.get("thrift_port") {
                None => None,
                Some(v) => Some(cx.uint(v, &format!("{place}.thrift_port"), 65535)? as u16),
            };
            if let Some(p) = dobj.get("ports") {
                ports.push((id, cx.ports(p, &format!("{place}.ports"))?));
            }
            let roles = match dobj.get("roles") {
                None => tern_p4rt::Roles::new(),
                Some(r) => cx.roles(r, &format!("{place}.roles"))?,
            };
            if let Some(v) = dobj.get("vlans") {
                let m = cx.vlans(v, &format!("{place}.vlans"))?;
                if !m.is_empty() {
                    vlans.insert(id, m);
                }
            }
            devices.push(DeviceConfig {
                id,
                program: PathBuf::from(program),
                owner,
                quotas,
                commands,
                thrift_port,
                roles,
            });
        }
        let mut topology = cx.topology(o.get("rules"), ports, "")?;
        topology.vlans = vlans.clone();
        let mut snapshots = BTreeMap::new();
        if let Some(s) = o.get("snapshots") {
            let so = s
                .as_object()
                .ok_or_else(|| cx.err("snapshots", "expected an object of name → snapshot"))?;
            for (name, snap) in so {
                let place = format!("snapshots.\"{name}\"");
                let sobj = cx.obj(snap, &place, &["rules", "ports"])?;
                let mut sports = Vec::new();
                if let Some(p) = sobj.get("ports") {
                    let po = p.as_object().ok_or_else(|| {
                        cx.err(&format!("{place}.ports"), "expected device → port map")
                    })?;
                    for (d, m) in po {
                        let dp = format!("{place}.ports.\"{d}\"");
                        let id = parse_uint(d)
                            .and_then(|x| u32::try_from(x).ok())
                            .ok_or_else(|| cx.err(&dp, "expected a device id"))?;
                        sports.push((id, cx.ports(m, &dp)?));
                    }
                }
                let mut t = cx.topology(sobj.get("rules"), sports, &format!("{place}."))?;
                t.vlans = vlans.clone();
                snapshots.insert(name.clone(), t);
            }
        }
        Ok(Config {
            file: file.to_string(),
            max_hops,
            devices,
            topology,
            snapshots,
            p4runtime: o.get("p4runtime").map(|v| cx.p4runtime(v)).transpose()?,
            // The kernel takes 0.1–100 ms.
            worker_slice_us: o
                .get("worker_slice_us")
                .map(|v| cx.uint(v, "worker_slice_us", 100_000))
                .transpose()?,
        })
    }

    /// Read and parse a configuration file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: path.display().to_string(),
            place: "file".into(),
            message: e.to_string(),
        })?;
        Config::parse(&text, &path.display().to_string())
    }

    /// Build the switch: load (or compile) every program, run each device's command file
    /// through the runtime CLI language, install the topology and store the snapshots.
    /// Relative paths are resolved against `base`. Returns the switch and the command output.
    pub fn build(&self, base: &Path) -> Result<(VirtSwitch, String), ConfigError> {
        let cx = Ctx { file: &self.file };
        let mut vs = VirtSwitch::new();
        vs.set_max_hops(self.max_hops);
        let mut log = String::new();
        for (i, d) in self.devices.iter().enumerate() {
            let place = format!("devices[{i}]");
            let path = base.join(&d.program);
            let json = load_program(&path).map_err(|e| cx.err(&format!("{place}.program"), e))?;
            vs.add_device(
                d.id,
                DeviceSpec {
                    json,
                    owner: d.owner.clone(),
                    quotas: d.quotas,
                },
            )
            .map_err(|e| cx.err(&place, e.to_string()))?;
        }
        vs.set_topology(self.topology.clone())
            .map_err(|e| cx.err("rules/ports", e.to_string()))?;
        for (name, t) in &self.snapshots {
            // Validated now so that a bad snapshot fails at start-up, not when activated.
            vs.validate(t)
                .map_err(|e| cx.err(&format!("snapshots.\"{name}\""), e.to_string()))?;
            vs.store_snapshot(name, t.clone());
        }
        for (i, d) in self.devices.iter().enumerate() {
            let Some(cmds) = &d.commands else { continue };
            let place = format!("devices[{i}].commands");
            let path = base.join(cmds);
            let text = std::fs::read_to_string(&path)
                .map_err(|e| cx.err(&place, format!("{}: {e}", path.display())))?;
            let mut rt = vs
                .runtime(Caller::Operator, d.id)
                .map_err(|e| cx.err(&place, e.to_string()))?;
            let program = rt.program().clone();
            let mut cli = tern_control::Cli::new(&program);
            for (n, line) in text.lines().enumerate() {
                let t = line.trim();
                if t.is_empty() || t.starts_with('#') {
                    continue;
                }
                let out = cli.execute(&mut rt, t);
                log.push_str(&out);
                if cli.last_command_failed() {
                    return Err(cx.err(
                        &place,
                        format!("{}:{}: '{t}' failed: {}", path.display(), n + 1, out.trim()),
                    ));
                }
            }
        }
        Ok((vs, log))
    }
}

/// A program file as BMv2 JSON: `.p4` is compiled by tern's compiler.
pub fn load_program(path: &Path) -> Result<String, String> {
    if path.extension().is_some_and(|e| e == "p4") {
        tern_p4::compile_file(path, &tern_p4::Options::default())
            .map(|c| c.json)
            .map_err(|d| format!("{} does not compile:\n{d}", path.display()))
    } else {
        std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
    }
}
