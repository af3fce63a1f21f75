//! The operator's side of a running `tern virt run`: [`Front`] (the switch on one thread or
//! its workers, driven through `tern_virt::Operate`), [`Control`] (the front plus the
//! per-device control servers: Thrift listeners, the P4Runtime device set, and the
//! configuration in force), the command interpreter behind `--admin SOCKET` / `tern virt ctl`
//! (devices, rules, links, quotas, snapshots, `reload CONFIG` applying the difference live)
//! and the admin socket itself.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::Context;
use tern_virt::config::{self, Config};
use tern_virt::{
    Caller, DeviceId, DeviceSpec, Operate, Shared, Target, VirtP4rt, VirtSwitch, VirtWorkers,
};

/// The running switch, as the operator drives it.
#[derive(Clone)]
pub(super) enum Front {
    /// Every device on the receiving thread (each packet takes the lock).
    One(Arc<Mutex<VirtSwitch>>),
    /// Devices on worker threads; the receiving thread takes the lock per arriving frame to
    /// dispatch it, operator commands take it between two frames (tenants' control goes
    /// straight to the device's worker and never takes it). `None` once stopped.
    Workers(Arc<Mutex<Option<VirtWorkers>>>, tern_virt::WorkerControl),
}

impl Front {
    pub(super) fn workers(pool: VirtWorkers) -> Front {
        let ctl = pool.control();
        Front::Workers(Arc::new(Mutex::new(Some(pool))), ctl)
    }

    /// Where per-device control handles find the devices.
    pub(super) fn shared(&self) -> Shared {
        match self {
            Front::One(m) => Shared::Locked(Arc::clone(m)),
            Front::Workers(_, c) => Shared::Workers(c.clone()),
        }
    }

    /// Run `f` on the switch (between packets); `None` when the workers have stopped.
    pub(super) fn with<R>(&self, f: impl FnOnce(&mut dyn Operate) -> R) -> Option<R> {
        match self {
            Front::One(m) => {
                let mut g = m.lock().unwrap_or_else(|e| e.into_inner());
                Some(f(&mut *g))
            }
            Front::Workers(m, _) => {
                let mut g = m.lock().unwrap_or_else(|e| e.into_inner());
                g.as_mut().map(|p| f(p as &mut dyn Operate))
            }
        }
    }
}

/// The switch's and every device's counters, one line each.
pub(super) fn stats_text(op: &dyn Operate) -> anyhow::Result<String> {
    let mut t = String::new();
    let st = op.stats();
    writeln!(
        t,
        "unclassified {}, dangling links {}, dropped at quarantined ports {}",
        st.unclassified, st.dangling, st.quarantined_port
    )?;
    for id in op.device_ids() {
        let s = op.device_stats(id)?;
        let q = op.quarantine(id)?;
        writeln!(
            t,
            "device {id}: in {}, to ports {}, to links {}, to cpu {}, dropped {}, hop-cut {}, \
             panics {}, quarantine drops {}{}",
            s.packets_in,
            s.to_phys,
            s.to_links,
            s.to_cpu,
            s.dropped,
            s.hop_cut,
            s.panics,
            s.quarantine_drops,
            q.map(|w| format!(" (QUARANTINED: {w})"))
                .unwrap_or_default()
        )?;
    }
    Ok(t)
}

/// The front with its per-device control servers and the configuration in force.
pub(super) struct Control {
    pub(super) front: Front,
    pub(super) p4rt: Option<Arc<VirtP4rt>>,
    /// Thrift servers running (device, server); a device's server is stopped (its listener
    /// and connections closed) when the device is removed.
    thrift: Mutex<Vec<(DeviceId, tern_thrift::Server)>>,
    /// Connections each Thrift server started from here serves at once.
    thrift_max: usize,
    /// The configuration in force and the folder its paths are relative to.
    config: Mutex<(Config, PathBuf)>,
}

/// The command list (`help`, and `tern virt ctl --help`).
pub(super) const HELP: &str = include_str!("cmd_virt_ctl_help.txt");

fn parse_id(s: &str) -> Result<DeviceId, String> {
    s.parse()
        .map_err(|_| format!("'{s}' is not a device id (a number)"))
}

impl Control {
    pub(super) fn new(
        front: Front,
        p4rt: Option<Arc<VirtP4rt>>,
        thrift: Vec<(DeviceId, tern_thrift::Server)>,
        cfg: Config,
        base: PathBuf,
    ) -> Control {
        Control {
            front,
            p4rt,
            thrift: Mutex::new(thrift),
            thrift_max: tern_thrift::DEFAULT_MAX_CONNECTIONS,
            config: Mutex::new((cfg, base)),
        }
    }

    /// The Thrift servers of devices added or moved from here serve at most `n` connections
    /// at once (`--thrift-max-connections`).
    pub(super) fn with_thrift_max(mut self, n: usize) -> Control {
        self.thrift_max = n;
        self
    }

    /// The Thrift listeners (device, address) open now.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(super) fn thrift_addrs(&self) -> Vec<(DeviceId, std::net::SocketAddr)> {
        self.thrift
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(id, s)| (*id, s.addr()))
            .collect()
    }

    /// Stop device `id`'s Thrift server (the device is gone): its listener and connections
    /// close. The servers are taken out under the lock and stopped outside it.
    fn stop_thrift(&self, id: DeviceId) {
        let gone: Vec<tern_thrift::Server> = {
            let mut v = self.thrift.lock().unwrap_or_else(|e| e.into_inner());
            let (gone, keep) = std::mem::take(&mut *v)
                .into_iter()
                .partition(|(d, _)| *d == id);
            *v = keep;
            gone.into_iter().map(|(_, s)| s).collect()
        };
        for mut s in gone {
            s.stop();
        }
    }

    fn op<R>(&self, f: impl FnOnce(&mut dyn Operate) -> R) -> Result<R, String> {
        self.front
            .with(f)
            .ok_or_else(|| "the switch has stopped".to_string())
    }

    /// One operator command; the answer starts with `ok` or `error` (possibly several
    /// lines, always ending with a newline).
    pub(super) fn command(&self, line: &str) -> String {
        let words: Vec<&str> = line.split_whitespace().collect();
        match self.run(&words) {
            Ok(a) if a.ends_with('\n') => a,
            Ok(a) => format!("{a}\n"),
            Err(e) => format!("error: {e}\n"),
        }
    }

    fn run(&self, words: &[&str]) -> Result<String, String> {
        match words {
            ["help"] => Ok(format!("ok\n{HELP}")),
            ["snapshot", name] => {
                let t = std::time::Instant::now();
                let pause = self
                    .op(|op| op.activate_snapshot(name).map(|()| op.last_pause()))?
                    .map_err(|e| format!("snapshot {name}: {e}"))?;
                Ok(format!(
                    "ok snapshot {name} active (switched in {} us{})",
                    t.elapsed().as_micros(),
                    pause
                        .map(|d| format!("; the longest worker stop {} us", d.as_micros()))
                        .unwrap_or_default()
                ))
            }
            ["snapshots"] => Ok(format!(
                "ok {}",
                self.op(|op| op.snapshot_names())?.join(" ")
            )),
            ["stats"] => match self.op(|op| stats_text(op))? {
                Ok(t) => Ok(format!("ok\n{t}")),
                Err(e) => Err(format!("{e:#}")),
            },
            ["devices"] => {
                let ids = self.op(|op| op.device_ids())?;
                Ok(format!(
                    "ok {}",
                    ids.iter()
                        .map(|d| d.to_string())
                        .collect::<Vec<_>>()
                        .join(" ")
                ))
            }
            ["add", id, program, opts @ ..] => self.add(parse_id(id)?, program, opts),
            ["remove", id] => {
                let id = parse_id(id)?;
                let st = self
                    .op(|op| op.remove_device(id))?
                    .map_err(|e| e.to_string())?;
                if let Some(p) = &self.p4rt {
                    p.remove_device(id);
                }
                self.stop_thrift(id);
                Ok(format!(
                    "ok device {id} removed (it had {} packets in, {} to ports)",
                    st.packets_in, st.to_phys
                ))
            }
            ["replace", id, program] => self.replace(parse_id(id)?, program),
            ["rules"] => {
                let t = self.op(|op| op.topology())?;
                let mut a = String::from("ok\n");
                for (i, r) in t.rules.iter().enumerate() {
                    let _ = writeln!(a, "{i}: {r:?}");
                }
                Ok(a)
            }
            ["rule", "add", kv @ ..] => {
                // Several rules separated by `;` go in as one change (one classifier compile).
                let rules = kv
                    .split(|w| *w == ";")
                    .map(config::parse_rule_words)
                    .collect::<Result<Vec<_>, _>>()?;
                self.op(|op| op.update_rules(&[], &rules))?
                    .map_err(|e| e.to_string())?;
                Ok(match rules.len() {
                    1 => "ok rule added".into(),
                    n => format!("ok {n} rules added"),
                })
            }
            ["rule", "del", ns @ ..] if !ns.is_empty() => {
                let ns = ns
                    .iter()
                    .map(|n| {
                        n.parse::<usize>()
                            .map_err(|_| format!("'{n}' is not a rule number (see `rules`)"))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                self.op(|op| op.update_rules(&ns, &[]))?
                    .map_err(|e| e.to_string())?;
                Ok(match ns.as_slice() {
                    [n] => format!("ok rule {n} removed"),
                    _ => format!("ok {} rules removed", ns.len()),
                })
            }
            ["link", id, vport, target] => {
                let id = parse_id(id)?;
                let vport: u32 = vport
                    .parse()
                    .ok()
                    .filter(|p| *p <= 4095)
                    .ok_or_else(|| format!("'{vport}' is not a virtual port (0..4095)"))?;
                let target = match *target {
                    "none" => None,
                    t => Some(config::parse_target(t)?),
                };
                self.op(|op| {
                    if !op.device_ids().contains(&id) {
                        return Err(format!("device {id} not found"));
                    }
                    let mut t = op.topology();
                    let map = t.port_maps.entry(id).or_default();
                    match target {
                        Some(tg) => {
                            map.insert(vport, tg);
                        }
                        None => {
                            map.remove(&vport);
                        }
                    }
                    op.set_topology(t).map_err(|e| e.to_string())
                })??;
                Ok(format!(
                    "ok device {id} port {vport} -> {}",
                    target.map(target_text).unwrap_or_else(|| "none".into())
                ))
            }
            ["quota", id, kv @ ..] => {
                let id = parse_id(id)?;
                let q = self.op(|op| {
                    let (_, q) = op.device_config(id).map_err(|e| e.to_string())?;
                    let q = config::parse_quota_words(kv, q)?;
                    op.configure(id, None, q).map_err(|e| e.to_string())?;
                    Ok::<_, String>(q)
                })??;
                Ok(format!(
                    "ok device {id}: max_entries {}, max_passes {}, max_register_bytes {}, \
                     max_parser_states {}, max_buffers {}",
                    q.max_entries.map_or("none".into(), |n| n.to_string()),
                    q.max_passes,
                    q.max_register_bytes
                        .map_or("none".into(), |n| n.to_string()),
                    q.max_parser_states,
                    q.max_buffers.map_or("none".into(), |n| n.to_string())
                ))
            }
            ["release", id] => {
                let id = parse_id(id)?;
                self.op(|op| op.release(id))?.map_err(|e| e.to_string())?;
                Ok(format!("ok device {id} released"))
            }
            ["reload", path] => self.reload(Path::new(path)),
            [] => Err("empty command (try `help`)".into()),
            _ => Err(format!(
                "unknown command or wrong arguments '{}' (try `help`)",
                words.join(" ")
            )),
        }
    }

    /// Load a program file and compile it off the packet path; the handle keeps the
    /// compiled program cached until the device is built.
    fn load(&self, program: &str) -> Result<(String, tern_dataplane::CompiledProgram), String> {
        let json = config::load_program(Path::new(program))?;
        let cp = self.front.shared().precompile(&json)?;
        Ok((json, cp))
    }

    fn add(&self, id: DeviceId, program: &str, opts: &[&str]) -> Result<String, String> {
        let mut owner = None;
        let mut thrift_port = None;
        let mut quota_words = Vec::new();
        for w in opts {
            match w.split_once('=') {
                Some(("owner", o)) if !o.is_empty() => owner = Some(o.to_string()),
                Some(("thrift_port", p)) => {
                    thrift_port = Some(
                        p.parse::<u16>()
                            .map_err(|_| format!("thrift_port: '{p}' is not a port"))?,
                    )
                }
                Some(_) => quota_words.push(*w),
                None => return Err(format!("'{w}' is not KEY=VALUE")),
            }
        }
        let quotas = if quota_words.is_empty() {
            tern_virt::Quotas::default()
        } else {
            config::parse_quota_words(&quota_words, tern_virt::Quotas::default())?
        };
        let (json, cp) = self.load(program)?;
        let spec = DeviceSpec {
            json,
            owner: owner.clone(),
            quotas,
        };
        let pause = self
            .op(|op| op.add_device(id, spec).map(|()| op.last_pause()))?
            .map_err(|e| e.to_string())?;
        drop(cp);
        let mut a = format!("ok device {id} added{}", pause_text(pause));
        self.serve_new(
            id,
            owner.as_deref(),
            thrift_port,
            &Default::default(),
            &mut a,
        )?;
        Ok(a)
    }

    /// Thrift and P4Runtime for a device added live.
    fn serve_new(
        &self,
        id: DeviceId,
        owner: Option<&str>,
        thrift_port: Option<u16>,
        roles: &tern_p4rt::Roles,
        answer: &mut String,
    ) -> Result<(), String> {
        if let Some(port) = thrift_port {
            let caller = owner.map_or(Caller::Operator, Caller::Tenant);
            let server = start_thrift(&self.front.shared(), caller, id, port, self.thrift_max)
                .map_err(|e| format!("{e:#}"))?;
            let addr = server.addr();
            self.thrift
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((id, server));
            let _ = write!(answer, "; Thrift on {addr}");
        }
        if let Some(p) = &self.p4rt {
            p.add_device(id, roles).map_err(|e| e.to_string())?;
            let _ = write!(answer, "; P4Runtime device id {id}");
        }
        Ok(())
    }

    fn replace(&self, id: DeviceId, program: &str) -> Result<String, String> {
        let (json, cp) = self.load(program)?;
        let (r, pause) = self
            .op(|op| {
                let (owner, quotas) = op.device_config(id)?;
                let spec = DeviceSpec {
                    json,
                    owner,
                    quotas,
                };
                op.replace_device(id, spec).map(|r| (r, op.last_pause()))
            })?
            .map_err(|e| e.to_string())?;
        drop(cp);
        if let Some(p) = &self.p4rt {
            p.refresh_device(id).map_err(|e| e.to_string())?;
        }
        Ok(format!(
            "ok device {id} replaced{}: {} entries carried in {} table(s){}",
            pause_text(pause),
            r.entries,
            r.tables.len(),
            if r.skipped.is_empty() {
                String::new()
            } else {
                format!("; not carried: {}", r.skipped.join("; "))
            }
        ))
    }

    /// Apply the difference between the configuration at `path` and the running switch:
    /// devices added, removed, replaced (program changed; entries carried) or reconfigured
    /// (owner, quotas), the topology, the snapshots and the hop budget; P4Runtime and
    /// Thrift follow. Everything is read, compiled and checked before anything changes.
    fn reload(&self, path: &Path) -> Result<String, String> {
        let cfg = Config::load(path).map_err(|e| e.to_string())?;
        let base = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        // Read and compile every program first (off the packet path).
        let mut jsons = BTreeMap::new();
        let mut keep = Vec::new();
        for (i, d) in cfg.devices.iter().enumerate() {
            let p = base.join(&d.program);
            let json = config::load_program(&p)
                .map_err(|e| format!("{}: devices[{i}].program: {e}", cfg.file))?;
            keep.push(
                self.front
                    .shared()
                    .precompile(&json)
                    .map_err(|e| format!("{}: devices[{i}].program: {e}", cfg.file))?,
            );
            jsons.insert(d.id, json);
        }
        let new_ids: BTreeSet<DeviceId> = cfg.devices.iter().map(|d| d.id).collect();
        tern_virt::validate_topology(&cfg.topology, |d| new_ids.contains(&d))
            .map_err(|e| format!("{}: rules/ports: {e}", cfg.file))?;
        for (name, t) in &cfg.snapshots {
            tern_virt::validate_topology(t, |d| new_ids.contains(&d))
                .map_err(|e| format!("{}: snapshots.\"{name}\": {e}", cfg.file))?;
        }
        // Apply, between two packets.
        let (old_cfg, _) = self
            .config
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let summary = self.op(|op| -> Result<Summary, String> {
            let mut s = Summary::default();
            let old: BTreeSet<DeviceId> = op.device_ids().into_iter().collect();
            for d in &cfg.devices {
                let spec = DeviceSpec {
                    json: jsons[&d.id].clone(),
                    owner: d.owner.clone(),
                    quotas: d.quotas,
                };
                if !old.contains(&d.id) {
                    op.add_device(d.id, spec)
                        .map_err(|e| format!("adding device {}: {e}", d.id))?;
                    s.added.push(d.id);
                    continue;
                }
                if op.program_json(d.id).map_err(|e| e.to_string())? != spec.json {
                    let r = op
                        .replace_device(d.id, spec)
                        .map_err(|e| format!("replacing device {}: {e}", d.id))?;
                    s.carried += r.entries;
                    s.replaced.push(d.id);
                } else if op.device_config(d.id).map_err(|e| e.to_string())?
                    != (d.owner.clone(), d.quotas)
                {
                    op.configure(d.id, d.owner.clone(), d.quotas)
                        .map_err(|e| format!("device {}: {e}", d.id))?;
                    s.reconfigured.push(d.id);
                }
            }
            op.set_max_hops(cfg.max_hops);
            op.set_topology(cfg.topology.clone())
                .map_err(|e| format!("rules/ports: {e}"))?;
            op.clear_snapshots();
            for (name, t) in &cfg.snapshots {
                op.store_snapshot(name, t.clone());
            }
            for id in old.difference(&new_ids) {
                op.remove_device(*id)
                    .map_err(|e| format!("removing device {id}: {e}"))?;
                s.removed.push(*id);
            }
            s.rules = cfg.topology.rules.len();
            s.pause = op.last_pause();
            Ok(s)
        })??;
        drop(keep);
        let mut answer = format!(
            "ok reload {}: added {:?}, removed {:?}, replaced {:?} ({} entries carried), \
             reconfigured {:?}, {} rule(s), {} snapshot(s)",
            path.display(),
            summary.added,
            summary.removed,
            summary.replaced,
            summary.carried,
            summary.reconfigured,
            summary.rules,
            cfg.snapshots.len()
        );
        // Command files of the new devices, then their control servers.
        let shared = self.front.shared();
        for d in cfg.devices.iter().filter(|d| summary.added.contains(&d.id)) {
            if let Some(cmds) = &d.commands {
                let p = base.join(cmds);
                run_commands(&shared, d.id, &p).map_err(|e| format!("{answer}; but {e}"))?;
            }
        }
        for id in &summary.removed {
            self.stop_thrift(*id);
        }
        if let Some(p) = &self.p4rt {
            for id in &summary.removed {
                p.remove_device(*id);
            }
            for id in &summary.replaced {
                let _ = p.refresh_device(*id);
            }
            let pc = cfg.p4runtime.clone().unwrap_or_default();
            p.set_tokens(pc.tokens, pc.operator_token)
                .map_err(|e| format!("{answer}; but p4runtime: {e}"))?;
        }
        for d in cfg.devices.iter().filter(|d| summary.added.contains(&d.id)) {
            self.serve_new(
                d.id,
                d.owner.as_deref(),
                d.thrift_port,
                &d.roles,
                &mut answer,
            )?;
        }
        // A device kept whose thrift_port changed: its server closes and, with a port, opens
        // on the new one.
        for d in cfg.devices.iter().filter(|d| {
            !summary.added.contains(&d.id)
                && old_cfg
                    .devices
                    .iter()
                    .find(|o| o.id == d.id)
                    .is_some_and(|o| o.thrift_port != d.thrift_port)
        }) {
            self.stop_thrift(d.id);
            match d.thrift_port {
                Some(port) => {
                    let caller = d.owner.as_deref().map_or(Caller::Operator, Caller::Tenant);
                    let server = start_thrift(&shared, caller, d.id, port, self.thrift_max)
                        .map_err(|e| format!("{answer}; but {e:#}"))?;
                    let _ = write!(answer, "; device {} Thrift on {}", d.id, server.addr());
                    self.thrift
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((d.id, server));
                }
                None => {
                    let _ = write!(answer, "; device {} Thrift closed", d.id);
                }
            }
        }
        answer.push_str(&pause_text(summary.pause));
        *self.config.lock().unwrap_or_else(|e| e.into_inner()) = (cfg, base);
        Ok(answer)
    }
}

#[derive(Default)]
struct Summary {
    added: Vec<DeviceId>,
    removed: Vec<DeviceId>,
    replaced: Vec<DeviceId>,
    reconfigured: Vec<DeviceId>,
    carried: usize,
    rules: usize,
    pause: Option<std::time::Duration>,
}

fn pause_text(p: Option<std::time::Duration>) -> String {
    p.map(|d| format!(" (workers paused {} us)", d.as_micros()))
        .unwrap_or_default()
}

fn target_text(t: Target) -> String {
    match t {
        Target::Phys(p) => format!("phys:{p}"),
        Target::Link { device, vport } => format!("link:{device}:{vport}"),
        Target::Cpu => "cpu".into(),
        Target::Drop => "drop".into(),
    }
}

/// A Thrift server for one device, acting as `caller` (stopped when the device is removed).
pub(super) fn start_thrift(
    shared: &Shared,
    caller: Caller,
    id: DeviceId,
    port: u16,
    max_connections: usize,
) -> anyhow::Result<tern_thrift::Server> {
    let handle = tern_virt::SharedDevice::new(shared.clone(), caller, id)?;
    let server = tern_thrift::spawn_stoppable_with(
        ("0.0.0.0", port),
        Arc::new(Mutex::new(handle)),
        max_connections,
    )
    .with_context(|| format!("device {id}: cannot start the Thrift server on port {port}"))?;
    println!("device {id}: Thrift server on {}", server.addr());
    Ok(server)
}

/// Run a command file (the runtime CLI language) against one device; the first failing
/// line stops it, named with its file and line.
pub(super) fn run_commands(shared: &Shared, id: DeviceId, path: &Path) -> Result<String, String> {
    use tern_runtime::Runtime;
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut rt = tern_virt::SharedDevice::new(shared.clone(), Caller::Operator, id)
        .map_err(|e| e.to_string())?;
    let json = rt.get_config();
    let program = tern_model::load(&json).map_err(|e| format!("device {id}: its program: {e}"))?;
    let mut cli = tern_control::Cli::new(&program);
    let mut log = String::new();
    for (n, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let out = cli.execute(&mut rt, t);
        log.push_str(&out);
        if cli.last_command_failed() {
            return Err(format!(
                "{}:{}: '{t}' failed: {}",
                path.display(),
                n + 1,
                out.trim()
            ));
        }
    }
    Ok(log)
}

/// The operator's line interface of a running `tern virt run`: a Unix socket; each line is a
/// command, each answer ends with an empty line. Commands run between packets, so switching
/// a snapshot loses nothing. The socket file goes with the value.
pub(super) struct AdminSocket {
    path: PathBuf,
}

impl AdminSocket {
    pub(super) fn start(path: &Path, control: Arc<Control>) -> anyhow::Result<AdminSocket> {
        use std::os::unix::fs::FileTypeExt;
        // A socket file left by a run that was killed is replaced; anything else is an error.
        if let Ok(m) = std::fs::symlink_metadata(path) {
            if m.file_type().is_socket() {
                std::fs::remove_file(path).with_context(|| {
                    format!("removing the stale admin socket {}", path.display())
                })?;
            } else {
                anyhow::bail!(
                    "--admin {}: the file exists and is not a socket",
                    path.display()
                );
            }
        }
        let listener = std::os::unix::net::UnixListener::bind(path)
            .with_context(|| format!("--admin: cannot listen on {}", path.display()))?;
        std::thread::Builder::new()
            .name("virt-admin".into())
            .spawn(move || {
                for conn in listener.incoming().flatten() {
                    let c = Arc::clone(&control);
                    std::thread::spawn(move || admin_session(conn, &c));
                }
            })
            .context("starting the admin thread")?;
        println!("admin socket on {}", path.display());
        Ok(AdminSocket {
            path: path.to_path_buf(),
        })
    }
}

impl Drop for AdminSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn admin_session(conn: std::os::unix::net::UnixStream, control: &Control) {
    use std::io::{BufRead, Write};
    let Ok(read) = conn.try_clone() else { return };
    let mut w = conn;
    for line in std::io::BufReader::new(read).lines() {
        let Ok(line) = line else { return };
        let answer = control.command(line.trim());
        if w.write_all(format!("{answer}\n").as_bytes()).is_err() {
            return;
        }
    }
}

/// `tern virt ctl`: send one command line, return the answer (up to its empty line). Program
/// and configuration paths (`add ID PATH`, `replace ID PATH`, `reload PATH`) are made
/// absolute first, since the switch may run in another folder.
pub(super) fn ctl(socket: &Path, words: &[String]) -> anyhow::Result<String> {
    use std::io::{BufRead, Write};
    let mut words = words.to_vec();
    let path_at = match words.first().map(String::as_str) {
        Some("add") | Some("replace") => Some(2),
        Some("reload") => Some(1),
        _ => None,
    };
    if let Some(i) = path_at {
        if let Some(p) = words.get_mut(i) {
            if let Ok(abs) = std::path::absolute(&*p) {
                *p = abs.display().to_string();
            }
        }
    }
    let line = words.join(" ");
    let mut s = std::os::unix::net::UnixStream::connect(socket).with_context(|| {
        format!(
            "cannot connect to the admin socket {} (is `tern virt run --admin` running?)",
            socket.display()
        )
    })?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(120)))?;
    s.write_all(format!("{line}\n").as_bytes())?;
    let mut answer = String::new();
    for l in std::io::BufReader::new(s).lines() {
        let l = l.context("reading the answer")?;
        if l.is_empty() {
            break;
        }
        answer.push_str(&l);
        answer.push('\n');
    }
    Ok(answer)
}
