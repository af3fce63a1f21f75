//! The P4Runtime gRPC service: pipeline config, arbitration (per role), packet I/O, digests,
//! tenant tokens, and the Write/Read entity translation onto `tern_runtime::Runtime` calls of
//! a device (a [`P4rtTarget`]: a shared `Switch`, or one device of a virtual switch).

#![allow(clippy::result_large_err)]

use crate::entities;
use crate::roles::{self, Access, RoleConfig, Roles};
use crate::target::{P4rtTarget, SwitchTarget};

use crate::proto::google::rpc as grpc;
use crate::proto::p4::config::v1 as cfg;
use crate::proto::p4::v1 as p4;
use crate::proto::p4::v1::p4_runtime_server::{P4Runtime, P4RuntimeServer};
use prost::Message;
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use tern_dataplane::{Switch, SwitchOptions};
use tern_runtime::{Digest, OutputPacket};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt};
use tonic::{Code, Request, Response, Status};

/// The P4Runtime API version this server speaks.
pub const API_VERSION: &str = "1.4.1";
/// `p4.v1.Error.space` of errors reported by tern.
pub const ERROR_SPACE: &str = "ALL-tern-p4org";

/// Server options.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// The P4Runtime device id this switch answers to (requests for other ids are rejected).
    pub device_id: u64,
    /// The CPU port: packet-out is injected there, outputs to it become packet-in.
    pub cpu_port: Option<u32>,
    /// A pipeline known at start-up (P4Info + BMv2 JSON), so clients can connect without
    /// pushing one.
    pub initial: Option<(cfg::P4Info, String)>,
    /// Options for switches created by SetForwardingPipelineConfig.
    pub switch_options: SwitchOptions,
}

/// The committed forwarding pipeline.
#[derive(Clone, Debug)]
pub(crate) struct Pipeline {
    pub p4info: cfg::P4Info,
    pub json: Vec<u8>,
    pub cookie: Option<p4::forwarding_pipeline_config::Cookie>,
}

struct Client {
    id: u64,
    election: Option<u128>,
    /// The role the client named (echoed back; enforced when the device has roles).
    role: Option<p4::Role>,
    tx: mpsc::Sender<Result<p4::StreamMessageResponse, Status>>,
}

/// Entity state that BMv2 does not keep in P4Runtime terms (controller-chosen ids).
#[derive(Default)]
pub(crate) struct PreState {
    /// multicast group id → (BMv2 group handle, node handles, replicas).
    pub groups: HashMap<u32, (u32, Vec<u32>, Vec<p4::Replica>)>,
    /// clone session id → the entry as written (and the internal group it uses, if any).
    pub clones: HashMap<u32, (p4::CloneSessionEntry, Option<u32>)>,
    /// digest id → configuration.
    pub digests: HashMap<u32, p4::digest_entry::Config>,
    /// (action profile id, member id) → BMv2 member handle.
    pub members: HashMap<(u32, u32), u32>,
    /// (action profile id, group id) → (BMv2 group handle, members).
    pub groups_ap: HashMap<(u32, u32), (u32, Vec<u32>)>,
    /// (table name, BMv2 entry handle) → the one-shot action set installed for it.
    pub oneshots: HashMap<(String, u32), entities::Oneshot>,
}

pub(crate) struct Inner {
    pub target: Arc<dyn P4rtTarget>,
    /// The device's roles (empty: role names are echoed, not enforced).
    roles: Roles,
    pub pipeline: Option<Pipeline>,
    saved: Option<Pipeline>,
    clients: Vec<Client>,
    next_client: u64,
    next_list_id: u64,
    pub pre: PreState,
    /// Aged entries already notified (until they stop being aged).
    notified: std::collections::HashSet<(String, u32)>,
    /// digest id → samples sent and not yet acked: (fields, list id, when sent).
    unacked: HashMap<u32, Vec<DigestSample>>,
    /// Where packet-out traffic to non-CPU ports goes (a packet loop with real ports).
    output_sink: Option<OutputSink>,
    /// digest id → the list being filled.
    batches: HashMap<u32, PendingList>,
    /// digest id → when its current list got its first sample.
    batch_start: HashMap<u32, std::time::Instant>,
}

/// Receives packets that packet-out traffic sends to ports other than the CPU port.
pub type OutputSink = Arc<dyn Fn(Vec<OutputPacket>) + Send + Sync>;

type DigestSample = (Vec<Vec<u8>>, u64, std::time::Instant);
/// A digest list being built: (digest id, raw samples, samples as P4Data).
type PendingList = (u32, Vec<Vec<Vec<u8>>>, Vec<p4::P4Data>);

/// Handle on a running server's state: lets a packet loop that owns real ports deliver CPU-port
/// outputs and digests to the controller.
#[derive(Clone)]
pub struct Handle {
    inner: Arc<Mutex<Inner>>,
    opts: Arc<Options>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Handle {
    /// Create the service state around a shared switch.
    pub fn new(sw: Arc<Mutex<Switch>>, opts: Options) -> Result<Handle, String> {
        Handle::with_target(Arc::new(SwitchTarget(sw)), opts)
    }

    /// Create the service state around any [`P4rtTarget`] (for example one device of a
    /// virtual switch).
    pub fn with_target(target: Arc<dyn P4rtTarget>, opts: Options) -> Result<Handle, String> {
        let mut pipeline = None;
        if let Some((p4info, json)) = &opts.initial {
            entities::check_p4info_matches(p4info, target.lock().program())?;
            pipeline = Some(Pipeline {
                p4info: p4info.clone(),
                json: json.clone().into_bytes(),
                cookie: None,
            });
        }
        Ok(Handle {
            inner: Arc::new(Mutex::new(Inner {
                target,
                roles: Roles::new(),
                pipeline,
                saved: None,
                clients: Vec::new(),
                next_client: 1,
                next_list_id: 1,
                pre: PreState::default(),
                notified: Default::default(),
                unacked: HashMap::new(),
                output_sink: None,
                batches: HashMap::new(),
                batch_start: HashMap::new(),
            })),
            opts: Arc::new(opts),
        })
    }

    /// The device's P4Runtime id.
    pub fn device_id(&self) -> u64 {
        self.opts.device_id
    }

    /// Enforce these roles on the device (see [`crate::roles`]); an empty map turns
    /// enforcement off (role names are then only echoed, as in PI).
    pub fn set_roles(&self, roles: Roles) {
        lock(&self.inner).roles = roles;
    }

    /// The gRPC service to add to a tonic server.
    pub fn service(&self) -> P4RuntimeServer<Service> {
        P4RuntimeServer::new(Service {
            set: DeviceSet::new(vec![self.clone()], Access::default())
                .expect("one device id is distinct"),
        })
        .max_decoding_message_size(64 << 20)
        .max_encoding_message_size(64 << 20)
    }

    /// Deliver packets the switch produced: outputs to the CPU port become packet-in messages
    /// to the primary client; other outputs are returned.
    pub fn deliver_outputs(&self, outs: Vec<OutputPacket>) -> Vec<OutputPacket> {
        let mut rest = Vec::new();
        let mut pins = Vec::new();
        for o in outs {
            if Some(o.port) == self.opts.cpu_port {
                pins.push(o.data);
            } else {
                rest.push(o);
            }
        }
        self.deliver_packet_ins(pins);
        rest
    }

    /// Deliver frames the device sent to its CPU port as packet-in messages to the primary
    /// of the default role and of every role that receives packet-ins.
    pub fn deliver_packet_ins(&self, frames: Vec<Vec<u8>>) {
        if frames.is_empty() {
            return;
        }
        let inner = lock(&self.inner);
        let Some(p) = &inner.pipeline else { return };
        for f in frames {
            let pin = entities::packet_in(&p.p4info, &f);
            send_to(
                &inner,
                |r| r.is_none_or(|r| r.packet_in),
                |_| {
                    Some(p4::StreamMessageResponse {
                        update: Some(p4::stream_message_response::Update::Packet(pin.clone())),
                    })
                },
            );
        }
    }

    /// Deliver digests to the primary client as DigestList messages (only digests a controller
    /// configured with a DigestEntry are sent).
    pub fn deliver_digests(&self, digests: Vec<Digest>) {
        let mut guard = lock(&self.inner);
        // Borrow the fields apart: the pipeline is read while the digest state is updated.
        let inner = &mut *guard;
        if inner.pipeline.is_none() {
            return;
        }
        let now = std::time::Instant::now();
        for d in digests {
            let Some(info) = inner.pipeline.as_ref().and_then(|p| {
                p.p4info
                    .digests
                    .iter()
                    .find(|x| x.preamble.as_ref().map(|p| p.name.as_str()) == Some(&d.list_name))
            }) else {
                continue;
            };
            let id = info.preamble.as_ref().map(|p| p.id).unwrap_or(0);
            let Some(conf) = inner.pre.digests.get(&id).copied() else {
                continue;
            };
            // Samples sent (or batched) and not acked within ack_timeout_ns are not sent again.
            let ack_timeout = std::time::Duration::from_nanos(conf.ack_timeout_ns.max(0) as u64);
            let pending = inner.unacked.entry(id).or_default();
            pending.retain(|(_, _, sent)| now.duration_since(*sent) < ack_timeout);
            let batched = inner
                .batches
                .get(&id)
                .is_some_and(|b| b.1.contains(&d.fields));
            if conf.ack_timeout_ns > 0
                && (batched || pending.iter().any(|(f, _, _)| *f == d.fields))
            {
                continue;
            }
            let data = entities::digest_data(info, &d.fields);
            let b = inner
                .batches
                .entry(id)
                .or_insert_with(|| (id, Vec::new(), Vec::new()));
            if b.1.is_empty() {
                inner.batch_start.insert(id, now);
            }
            b.1.push(d.fields);
            b.2.push(data);
            let full = conf.max_list_size > 0 && b.1.len() >= conf.max_list_size as usize;
            if full || conf.max_timeout_ns <= 0 {
                flush_batch(inner, id, now);
            }
        }
    }

    /// Send the digest lists whose `max_timeout_ns` has elapsed since their first sample (the
    /// server calls this every 10 ms). Returns how many lists were sent.
    pub fn flush_digests(&self) -> usize {
        self.flush_digests_at(std::time::Instant::now())
    }

    /// [`Handle::flush_digests`] as if the time were `now` (tests decide what is due without
    /// depending on how fast the machine runs).
    pub fn flush_digests_at(&self, now: std::time::Instant) -> usize {
        let mut inner = lock(&self.inner);
        let due: Vec<u32> = inner
            .batches
            .iter()
            .filter(|(id, b)| {
                let timeout = inner
                    .pre
                    .digests
                    .get(id)
                    .map(|c| c.max_timeout_ns.max(0) as u64)
                    .unwrap_or(0);
                !b.1.is_empty()
                    && inner.batch_start.get(id).is_some_and(|t| {
                        now.duration_since(*t) >= std::time::Duration::from_nanos(timeout)
                    })
            })
            .map(|(id, _)| *id)
            .collect();
        for id in &due {
            flush_batch(&mut inner, *id, now);
        }
        due.len()
    }

    /// A controller acknowledged a digest list: its samples may be sent again.
    fn ack_digest(&self, digest_id: u32, list_id: u64) {
        let mut inner = lock(&self.inner);
        if let Some(p) = inner.unacked.get_mut(&digest_id) {
            p.retain(|(_, l, _)| *l != list_id);
        }
    }

    /// Send one IdleTimeoutNotification to the primary client for the entries whose idle
    /// timeout expired since the last sweep (each entry once, until it is hit again). The
    /// server runs this every second; returns how many entries were notified.
    pub fn sweep_idle(&self) -> usize {
        let mut inner = lock(&self.inner);
        let aged = entities::aged_entries(&inner);
        let keys: std::collections::HashSet<(String, u32)> =
            aged.iter().map(|(k, _)| k.clone()).collect();
        let fresh: Vec<p4::TableEntry> = aged
            .into_iter()
            .filter(|(k, _)| !inner.notified.contains(k))
            .map(|(_, e)| e)
            .collect();
        inner.notified = keys;
        if fresh.is_empty() {
            return 0;
        }
        let n = fresh.len();
        let info = inner.pipeline.as_ref().map(|p| p.p4info.clone());
        let ts = unix_ns();
        send_to(
            &inner,
            |_| true,
            |role| {
                // Each role hears about the entries of the tables it owns.
                let mine: Vec<p4::TableEntry> = fresh
                    .iter()
                    .filter(|e| {
                        info.as_ref()
                            .is_some_and(|i| roles::owns_table(i, role, e.table_id))
                    })
                    .cloned()
                    .collect();
                (!mine.is_empty()).then_some(p4::StreamMessageResponse {
                    update: Some(
                        p4::stream_message_response::Update::IdleTimeoutNotification(
                            p4::IdleTimeoutNotification {
                                table_entry: mine,
                                timestamp: ts,
                            },
                        ),
                    ),
                })
            },
        );
        n
    }

    /// Send packet-out traffic that leaves on non-CPU ports to `sink` (without a sink it is
    /// dropped, as the switch has no ports of its own).
    pub fn set_output_sink(&self, sink: OutputSink) {
        lock(&self.inner).output_sink = Some(sink);
    }

    /// Inject a packet into the switch on `port` and deliver what comes out (CPU port → packet-in,
    /// digests → digest lists). Returns outputs to other ports.
    pub fn inject(&self, port: u32, data: &[u8]) -> Vec<OutputPacket> {
        let target = lock(&self.inner).target.clone();
        let r = target.inject(port, data, self.cpu_port(&*target));
        self.deliver_packet_ins(r.packet_ins);
        self.deliver_digests(r.digests);
        r.outputs
    }

    /// Whether the device still exists.
    fn present(&self) -> bool {
        let target = lock(&self.inner).target.clone();
        target.present()
    }

    fn cpu_port(&self, target: &dyn P4rtTarget) -> Option<u32> {
        target.cpu_port().or(self.opts.cpu_port)
    }
}

/// The election domain of a client: its role's name when the device enforces roles, else
/// one domain for all (PI's behaviour).
fn role_key<'a>(inner: &Inner, c: &'a Client) -> &'a str {
    if inner.roles.is_empty() {
        ""
    } else {
        c.role.as_ref().map_or("", |r| r.name.as_str())
    }
}

/// The primary client of election domain `role`.
fn primary<'a>(inner: &'a Inner, role: &str) -> Option<&'a Client> {
    inner
        .clients
        .iter()
        .filter(|c| c.election.is_some() && role_key(inner, c) == role)
        .max_by_key(|c| c.election)
}

/// Send to the primary of every role `wants` (the default role as `None`), the message
/// `msg` builds for that role (`None`: nothing for it).
fn send_to(
    inner: &Inner,
    wants: impl Fn(Option<&RoleConfig>) -> bool,
    msg: impl Fn(Option<&RoleConfig>) -> Option<p4::StreamMessageResponse>,
) {
    let mut keys: Vec<&str> = inner.clients.iter().map(|c| role_key(inner, c)).collect();
    keys.sort_unstable();
    keys.dedup();
    for k in keys {
        let role = if k.is_empty() {
            None
        } else {
            match inner.roles.get(k) {
                Some(r) => Some(r),
                None => continue,
            }
        };
        if !wants(role) {
            continue;
        }
        if let (Some(c), Some(m)) = (primary(inner, k), msg(role)) {
            let _ = c.tx.try_send(Ok(m));
        }
    }
}

/// Send the batched samples of digest `id` as one DigestList and remember them until acked.
fn flush_batch(inner: &mut Inner, id: u32, now: std::time::Instant) {
    let Some((digest_id, fields, data)) = inner.batches.remove(&id) else {
        return;
    };
    inner.batch_start.remove(&id);
    if data.is_empty() {
        return;
    }
    let list_id = inner.next_list_id;
    inner.next_list_id += 1;
    inner
        .unacked
        .entry(digest_id)
        .or_default()
        .extend(fields.into_iter().map(|f| (f, list_id, now)));
    let info = inner.pipeline.as_ref().map(|p| p.p4info.clone());
    let digest = p4::Entity {
        entity: Some(p4::entity::Entity::DigestEntry(p4::DigestEntry {
            digest_id,
            config: None,
        })),
    };
    let ts = unix_ns();
    send_to(
        inner,
        |role| info.as_ref().is_some_and(|i| roles::owns(i, role, &digest)),
        |_| {
            Some(p4::StreamMessageResponse {
                update: Some(p4::stream_message_response::Update::Digest(
                    p4::DigestList {
                        digest_id,
                        list_id,
                        data: data.clone(),
                        timestamp: ts,
                    },
                )),
            })
        },
    );
}

/// Wall-clock time in nanoseconds since the Unix epoch (0 if the clock is before it), the
/// timestamp of digest lists and idle-timeout notifications.
fn unix_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

fn u128_of(e: &Option<p4::Uint128>) -> Option<u128> {
    e.as_ref()
        .map(|e| (u128::from(e.high) << 64) | u128::from(e.low))
}

fn to_uint128(v: u128) -> p4::Uint128 {
    p4::Uint128 {
        high: (v >> 64) as u64,
        low: v as u64,
    }
}

/// Tell every arbitrated client who is primary (of its role).
fn announce(inner: &Inner, device_id: u64) {
    for c in &inner.clients {
        if c.election.is_none() {
            continue;
        }
        let prim = primary(inner, role_key(inner, c)).map(|c| (c.id, c.election));
        let is_primary = prim.map(|p| p.0) == Some(c.id);
        let status = grpc::Status {
            code: if is_primary {
                Code::Ok as i32
            } else {
                Code::AlreadyExists as i32
            },
            message: if is_primary {
                "Is primary".into()
            } else {
                "Is backup".into()
            },
            details: vec![],
        };
        let msg = p4::StreamMessageResponse {
            update: Some(p4::stream_message_response::Update::Arbitration(
                p4::MasterArbitrationUpdate {
                    device_id,
                    role: c.role.clone(),
                    election_id: prim.and_then(|p| p.1).map(to_uint128),
                    status: Some(status),
                },
            )),
        };
        let _ = c.tx.try_send(Ok(msg));
    }
}

/// The tonic service: one or more devices (switches), addressed by P4Runtime device id.
pub struct Service {
    set: DeviceSet,
}

/// The devices a server serves and who reaches them; shared with the server, so devices
/// and tokens can be added and removed while it runs (a virtual switch's devices added or
/// removed live). Cloning gives another handle on the same set.
#[derive(Clone, Default)]
pub struct DeviceSet {
    devices: Arc<std::sync::RwLock<HashMap<u64, Handle>>>,
    access: Arc<std::sync::RwLock<Arc<Access>>>,
}

impl DeviceSet {
    /// A set of `handles` (distinct device ids) reached as `access` says.
    pub fn new(handles: Vec<Handle>, access: Access) -> Result<DeviceSet, String> {
        let mut devices = HashMap::new();
        for h in handles {
            let id = h.opts.device_id;
            if devices.insert(id, h).is_some() {
                return Err(format!("device id {id} is used twice"));
            }
        }
        Ok(DeviceSet {
            devices: Arc::new(std::sync::RwLock::new(devices)),
            access: Arc::new(std::sync::RwLock::new(Arc::new(access))),
        })
    }

    /// Serve `h` under its device id from now on (replacing a handle of the same id).
    pub fn insert(&self, h: Handle) {
        let id = h.opts.device_id;
        self.devices
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, h);
    }

    /// Stop serving `device_id` (it answers `NOT_FOUND` from now on); its handle, if any.
    pub fn remove(&self, device_id: u64) -> Option<Handle> {
        self.devices
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&device_id)
    }

    /// The handle of `device_id`.
    pub fn get(&self, device_id: u64) -> Option<Handle> {
        self.devices
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&device_id)
            .cloned()
    }

    /// Every handle (in no particular order).
    pub fn handles(&self) -> Vec<Handle> {
        self.devices
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// The served device ids, ascending.
    pub fn ids(&self) -> Vec<u64> {
        let mut ids: Vec<u64> = self
            .devices
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .copied()
            .collect();
        ids.sort_unstable();
        ids
    }

    /// Who reaches which device from now on (streams already joined keep their device).
    pub fn set_access(&self, access: Access) {
        *self.access.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(access);
    }

    /// The tokens in force.
    pub fn access(&self) -> Arc<Access> {
        Arc::clone(&self.access.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// The device a request names, if the request's token reaches it. With tokens, an
    /// unknown and an unreachable device get the same answer, which names no other device.
    fn reach(&self, md: &tonic::metadata::MetadataMap, device_id: u64) -> Result<Handle, Status> {
        let access = self.access();
        let found = if access.reaches(md, device_id)? {
            self.get(device_id).filter(|h| h.present())
        } else {
            None
        };
        found.ok_or_else(|| {
            if !access.tokens.is_empty() {
                return Status::not_found(format!("Invalid device id {device_id}"));
            }
            Status::not_found(format!(
                "Invalid device id {device_id} (this server has devices {:?})",
                self.ids()
            ))
        })
    }

    /// The gRPC service serving this set.
    pub fn service(&self) -> P4RuntimeServer<Service> {
        P4RuntimeServer::new(Service { set: self.clone() })
            .max_decoding_message_size(64 << 20)
            .max_encoding_message_size(64 << 20)
    }
}

/// A service serving several devices, each its own program instance; the device ids come
/// from each handle's [`Options::device_id`] and must be distinct.
pub fn multi_device_service(handles: Vec<Handle>) -> Result<P4RuntimeServer<Service>, String> {
    multi_device_service_with_access(handles, Access::default())
}

/// [`multi_device_service`] where requests must carry a token of `access` (gRPC metadata
/// `authorization: Bearer TOKEN`), and reach only the devices of that token: a device the
/// token does not reach is answered exactly like one that does not exist (`NOT_FOUND`,
/// `Invalid device id N`). Empty `access`: no token needed.
pub fn multi_device_service_with_access(
    handles: Vec<Handle>,
    access: Access,
) -> Result<P4RuntimeServer<Service>, String> {
    Ok(DeviceSet::new(handles, access)?.service())
}

impl Service {
    /// The device a request names, if the request's token reaches it. With tokens, an
    /// unknown and an unreachable device get the same answer, which names no other device.
    fn device(&self, md: &tonic::metadata::MetadataMap, device_id: u64) -> Result<Handle, Status> {
        self.set.reach(md, device_id)
    }

    /// PI's rule: with arbitrated streams, the request's election id must be the primary's
    /// (of the request's role, when the device has roles); with none, only requests without
    /// an election id are accepted.
    fn check_primary(
        inner: &Inner,
        election: &Option<p4::Uint128>,
        role: &str,
    ) -> Result<(), Status> {
        role_config(inner, role)?;
        let key = if inner.roles.is_empty() { "" } else { role };
        let req = u128_of(election).filter(|v| *v != 0);
        match primary(inner, key) {
            Some(p) if p.election == Some(req.unwrap_or(0)) => Ok(()),
            None if req.is_none() => Ok(()),
            _ => Err(Status::permission_denied("Not primary")),
        }
    }
}

/// The configuration of role `name` (`None`: the default role, or roles not enforced).
fn role_config<'a>(inner: &'a Inner, name: &str) -> Result<Option<&'a RoleConfig>, Status> {
    if inner.roles.is_empty() || name.is_empty() {
        return Ok(None);
    }
    inner
        .roles
        .get(name)
        .map(Some)
        .ok_or_else(|| Status::permission_denied(format!("Unknown role '{name}'")))
}

fn write_error(results: &[Result<(), Status>]) -> Status {
    let details = results
        .iter()
        .map(|r| {
            let e = match r {
                Ok(()) => p4::Error {
                    canonical_code: 0,
                    ..Default::default()
                },
                Err(s) => p4::Error {
                    canonical_code: s.code() as i32,
                    message: s.message().to_string(),
                    space: ERROR_SPACE.into(),
                    code: 0,
                    details: None,
                },
            };
            prost_types::Any {
                type_url: "type.googleapis.com/p4.v1.Error".into(),
                value: e.encode_to_vec(),
            }
        })
        .collect();
    let failed = results.iter().filter(|r| r.is_err()).count();
    let msg = format!(
        "Write failure: {failed} of {} updates failed",
        results.len()
    );
    let st = grpc::Status {
        code: Code::Unknown as i32,
        message: msg.clone(),
        details,
    };
    Status::with_details(Code::Unknown, msg, st.encode_to_vec().into())
}

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

#[tonic::async_trait]
impl P4Runtime for Service {
    async fn write(
        &self,
        req: Request<p4::WriteRequest>,
    ) -> Result<Response<p4::WriteResponse>, Status> {
        let (md, _, req) = req.into_parts();
        let h = self.device(&md, req.device_id)?;
        if req.atomicity != p4::write_request::Atomicity::ContinueOnError as i32 {
            return Err(Status::unimplemented(
                "Only CONTINUE_ON_ERROR atomicity is supported",
            ));
        }
        let mut inner = lock(&h.inner);
        Self::check_primary(&inner, &req.election_id, &req.role)?;
        let Some(info) = inner.pipeline.as_ref().map(|p| p.p4info.clone()) else {
            return Err(no_pipeline());
        };
        let role = role_config(&inner, &req.role)?.cloned();
        let mut results = Vec::with_capacity(req.updates.len());
        for u in &req.updates {
            let mine = u
                .entity
                .as_ref()
                .is_some_and(|e| roles::owns(&info, role.as_ref(), e));
            results.push(if mine || role.is_none() {
                entities::apply_update(&mut inner, u)
            } else {
                Err(Status::permission_denied(format!(
                    "Role '{}' does not own this entity",
                    req.role
                )))
            });
        }
        if results.iter().any(|r| r.is_err()) {
            return Err(write_error(&results));
        }
        Ok(Response::new(p4::WriteResponse {}))
    }

    type ReadStream = BoxStream<p4::ReadResponse>;

    async fn read(
        &self,
        req: Request<p4::ReadRequest>,
    ) -> Result<Response<Self::ReadStream>, Status> {
        let (md, _, req) = req.into_parts();
        let h = self.device(&md, req.device_id)?;
        let inner = lock(&h.inner);
        let Some(info) = inner.pipeline.as_ref().map(|p| p.p4info.clone()) else {
            return Err(no_pipeline());
        };
        let role = role_config(&inner, &req.role)?;
        let mut out = Vec::new();
        for e in &req.entities {
            entities::read_entity(&inner, e, &mut out)?;
        }
        // A role reads only what it owns.
        out.retain(|e| roles::owns(&info, role, e));
        let resp = p4::ReadResponse { entities: out };
        Ok(Response::new(Box::pin(tokio_stream::once(Ok(resp)))))
    }

    async fn set_forwarding_pipeline_config(
        &self,
        req: Request<p4::SetForwardingPipelineConfigRequest>,
    ) -> Result<Response<p4::SetForwardingPipelineConfigResponse>, Status> {
        use p4::set_forwarding_pipeline_config_request::Action as A;
        let (md, _, req) = req.into_parts();
        let h = self.device(&md, req.device_id)?;
        let action = A::try_from(req.action).unwrap_or(A::Unspecified);
        let mut inner = lock(&h.inner);
        Self::check_primary(&inner, &req.election_id, &req.role)?;
        if role_config(&inner, &req.role)?.is_some_and(|r| !r.pipeline) {
            return Err(Status::permission_denied(format!(
                "Role '{}' may not set the forwarding pipeline",
                req.role
            )));
        }
        let target = inner.target.clone();
        let verify =
            |config: &Option<p4::ForwardingPipelineConfig>| -> Result<(Pipeline, Switch), Status> {
                let c = config
                    .as_ref()
                    .ok_or_else(|| Status::invalid_argument("Missing config"))?;
                let p4info = c
                    .p4info
                    .clone()
                    .ok_or_else(|| Status::invalid_argument("Missing P4Info in config"))?;
                let json = std::str::from_utf8(&c.p4_device_config).map_err(|_| {
                    Status::invalid_argument("p4_device_config is not a UTF-8 BMv2 JSON")
                })?;
                let sw = target.build(json, &h.opts.switch_options).map_err(|e| {
                    Status::invalid_argument(format!("Invalid BMv2 JSON in p4_device_config: {e}"))
                })?;
                entities::check_p4info_matches(&p4info, sw.program())
                    .map_err(Status::invalid_argument)?;
                Ok((
                    Pipeline {
                        p4info,
                        json: c.p4_device_config.clone(),
                        cookie: c.cookie,
                    },
                    sw,
                ))
            };
        match action {
            A::Verify => {
                verify(&req.config)?;
            }
            A::VerifyAndSave => {
                let (p, _) = verify(&req.config)?;
                inner.saved = Some(p);
            }
            A::VerifyAndCommit => {
                let (p, sw) = verify(&req.config)?;
                install(&*target, sw)?;
                inner.pre = PreState::default();
                inner.pipeline = Some(p);
            }
            A::ReconcileAndCommit => {
                let (p, sw) = verify(&req.config)?;
                let same = inner.pipeline.as_ref().map(|c| &c.json) == Some(&p.json);
                if same || inner.pipeline.is_none() {
                    if !same {
                        install(&*target, sw)?;
                    }
                    inner.pipeline = Some(p);
                } else {
                    reconcile(&mut inner, p, sw)?;
                }
            }
            A::Commit => {
                let p = inner.saved.take().ok_or_else(|| {
                    Status::failed_precondition("COMMIT without a saved config (VERIFY_AND_SAVE)")
                })?;
                let json = String::from_utf8_lossy(&p.json).into_owned();
                let sw = target
                    .build(&json, &h.opts.switch_options)
                    .map_err(Status::invalid_argument)?;
                install(&*target, sw)?;
                inner.pre = PreState::default();
                inner.pipeline = Some(p);
            }
            A::Unspecified => {
                return Err(Status::invalid_argument(
                    "Unspecified pipeline config action",
                ))
            }
        }
        Ok(Response::new(p4::SetForwardingPipelineConfigResponse {}))
    }

    async fn get_forwarding_pipeline_config(
        &self,
        req: Request<p4::GetForwardingPipelineConfigRequest>,
    ) -> Result<Response<p4::GetForwardingPipelineConfigResponse>, Status> {
        use p4::get_forwarding_pipeline_config_request::ResponseType as R;
        let (md, _, req) = req.into_parts();
        let h = self.device(&md, req.device_id)?;
        let inner = lock(&h.inner);
        let p = inner.pipeline.as_ref().ok_or_else(no_pipeline)?;
        let rt = R::try_from(req.response_type)
            .map_err(|_| Status::invalid_argument("Invalid response_type"))?;
        let config = p4::ForwardingPipelineConfig {
            p4info: matches!(rt, R::All | R::P4infoAndCookie).then(|| p.p4info.clone()),
            p4_device_config: if matches!(rt, R::All | R::DeviceConfigAndCookie) {
                p.json.clone()
            } else {
                Vec::new()
            },
            cookie: p.cookie,
        };
        Ok(Response::new(p4::GetForwardingPipelineConfigResponse {
            config: Some(config),
        }))
    }

    type StreamChannelStream = ReceiverStream<Result<p4::StreamMessageResponse, Status>>;

    async fn stream_channel(
        &self,
        req: Request<tonic::Streaming<p4::StreamMessageRequest>>,
    ) -> Result<Response<Self::StreamChannelStream>, Status> {
        let (md, _, mut inbound) = req.into_parts();
        // A missing or unknown token is refused now; reach is checked at arbitration.
        self.set.access().reaches(&md, 0)?;
        let set = self.set.clone();
        let (tx, rx) = mpsc::channel(1024);
        tokio::spawn(async move {
            // The stream belongs to the device named by its first arbitration message.
            let mut joined: Option<(Handle, u64)> = None;
            while let Some(msg) = inbound.next().await {
                let Ok(msg) = msg else { break };
                if joined.is_none() {
                    let Some(p4::stream_message_request::Update::Arbitration(a)) = &msg.update
                    else {
                        let _ = tx.try_send(Ok(stream_error(
                            Code::FailedPrecondition,
                            "Send a MasterArbitrationUpdate first".into(),
                            p4::stream_error::Details::Other(p4::StreamOtherError { other: None }),
                        )));
                        continue;
                    };
                    let Ok(h) = set.reach(&md, a.device_id) else {
                        let _ = tx
                            .send(Err(Status::not_found(format!(
                                "Invalid device id {}",
                                a.device_id
                            ))))
                            .await;
                        break;
                    };
                    let mut inner = lock(&h.inner);
                    let id = inner.next_client;
                    inner.next_client += 1;
                    inner.clients.push(Client {
                        id,
                        election: None,
                        role: None,
                        tx: tx.clone(),
                    });
                    drop(inner);
                    joined = Some((h.clone(), id));
                }
                let Some((h, id)) = &joined else { break };
                if let Err(st) = handle_stream_msg(h, *id, msg, &tx) {
                    let _ = tx.send(Err(st)).await;
                    break;
                }
            }
            if let Some((h, id)) = joined {
                let mut inner = lock(&h.inner);
                let was_primary = inner.clients.iter().find(|c| c.id == id).is_some_and(|c| {
                    primary(&inner, role_key(&inner, c)).map(|p| p.id) == Some(id)
                });
                inner.clients.retain(|c| c.id != id);
                if was_primary {
                    announce(&inner, h.opts.device_id);
                }
            }
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn capabilities(
        &self,
        _req: Request<p4::CapabilitiesRequest>,
    ) -> Result<Response<p4::CapabilitiesResponse>, Status> {
        Ok(Response::new(p4::CapabilitiesResponse {
            p4runtime_api_version: API_VERSION.into(),
        }))
    }
}

/// RECONCILE_AND_COMMIT to a different program: read the forwarding state in P4Runtime terms,
/// switch programs, and insert it again (PI's "naive" reconcile: members, groups, table
/// entries, multicast groups, clone sessions, digest configs). On any failure the old program
/// and state are restored and the request fails.
fn reconcile(inner: &mut Inner, p: Pipeline, sw: Switch) -> Result<(), Status> {
    use p4::entity::Entity as E;
    use p4::packet_replication_engine_entry::Type as P;
    let filters = [
        E::ActionProfileMember(p4::ActionProfileMember::default()),
        E::ActionProfileGroup(p4::ActionProfileGroup::default()),
        E::TableEntry(p4::TableEntry::default()),
        E::PacketReplicationEngineEntry(p4::PacketReplicationEngineEntry {
            r#type: Some(P::MulticastGroupEntry(p4::MulticastGroupEntry::default())),
        }),
        E::PacketReplicationEngineEntry(p4::PacketReplicationEngineEntry {
            r#type: Some(P::CloneSessionEntry(p4::CloneSessionEntry::default())),
        }),
        E::DigestEntry(p4::DigestEntry::default()),
    ];
    let mut state = Vec::new();
    for f in filters {
        entities::read_entity(inner, &p4::Entity { entity: Some(f) }, &mut state)?;
    }
    let target = inner.target.clone();
    let old_sw = install(&*target, sw)?;
    let old_pre = std::mem::take(&mut inner.pre);
    let old_p = inner.pipeline.replace(p);
    for e in state {
        let u = p4::Update {
            r#type: p4::update::Type::Insert as i32,
            entity: Some(e),
        };
        if let Err(st) = entities::apply_update(inner, &u) {
            let _ = target.install(old_sw);
            inner.pre = old_pre;
            inner.pipeline = old_p;
            return Err(Status::invalid_argument(format!(
                "RECONCILE_AND_COMMIT cannot carry the current state over: {}",
                st.message()
            )));
        }
    }
    Ok(())
}

/// Install a built switch as the device (a device that went away meanwhile fails).
fn install(target: &dyn P4rtTarget, sw: Switch) -> Result<Switch, Status> {
    target.install(sw).map_err(Status::not_found)
}

fn no_pipeline() -> Status {
    Status::failed_precondition("No forwarding pipeline config set for this device")
}

fn stream_error(
    code: Code,
    message: String,
    details: p4::stream_error::Details,
) -> p4::StreamMessageResponse {
    p4::StreamMessageResponse {
        update: Some(p4::stream_message_response::Update::Error(
            p4::StreamError {
                canonical_code: code as i32,
                message,
                space: ERROR_SPACE.into(),
                code: 0,
                details: Some(details),
            },
        )),
    }
}

fn handle_stream_msg(
    h: &Handle,
    id: u64,
    msg: p4::StreamMessageRequest,
    tx: &mpsc::Sender<Result<p4::StreamMessageResponse, Status>>,
) -> Result<(), Status> {
    use p4::stream_message_request::Update as U;
    match msg.update {
        Some(U::Arbitration(a)) => {
            if a.device_id != h.opts.device_id {
                return Err(Status::not_found(format!(
                    "Invalid device id {} (this switch is device {})",
                    a.device_id, h.opts.device_id
                )));
            }
            let election = u128_of(&a.election_id).unwrap_or(0);
            let mut inner = lock(&h.inner);
            let name = a.role.as_ref().map_or("", |r| r.name.as_str());
            role_config(&inner, name)?;
            let key = if inner.roles.is_empty() { "" } else { name };
            if inner
                .clients
                .iter()
                .any(|c| c.id != id && role_key(&inner, c) == key && c.election == Some(election))
            {
                return Err(Status::invalid_argument(format!(
                    "Election id {election} is already used by another client"
                )));
            }
            if let Some(c) = inner.clients.iter_mut().find(|c| c.id == id) {
                c.election = Some(election);
                c.role = a.role.clone();
            }
            announce(&inner, h.opts.device_id);
        }
        Some(U::Packet(po)) => {
            let target = lock(&h.inner).target.clone();
            let cpu_port = h.cpu_port(&*target);
            let frame = {
                let inner = lock(&h.inner);
                let me = inner.clients.iter().find(|c| c.id == id);
                let not_primary = me
                    .is_none_or(|c| primary(&inner, role_key(&inner, c)).map(|p| p.id) != Some(id));
                let no_io = me.is_some_and(|c| {
                    let name = role_key(&inner, c);
                    role_config(&inner, name).is_ok_and(|r| r.is_some_and(|r| !r.packet_in))
                });
                match (&inner.pipeline, cpu_port) {
                    (None, _) => {
                        Err("No forwarding pipeline config set for this device".to_string())
                    }
                    (_, None) => Err("No CPU port configured (--cpu-port; in a virtual switch, \
                                      a virtual port mapped to cpu)"
                        .to_string()),
                    (Some(_), Some(_)) if not_primary => Err("Not primary".to_string()),
                    (Some(_), Some(_)) if no_io => {
                        Err("This role may not send packet-outs".to_string())
                    }
                    (Some(p), Some(_)) => entities::packet_out_frame(&p.p4info, &po),
                }
            };
            match frame {
                Ok(frame) => {
                    let port = cpu_port.unwrap_or(0);
                    let rest = h.inject(port, &frame);
                    let sink = lock(&h.inner).output_sink.clone();
                    if let (Some(sink), false) = (sink, rest.is_empty()) {
                        sink(rest);
                    }
                }
                Err(m) => {
                    let _ = tx.try_send(Ok(stream_error(
                        Code::InvalidArgument,
                        m,
                        p4::stream_error::Details::PacketOut(p4::PacketOutError {
                            packet_out: Some(po),
                        }),
                    )));
                }
            }
        }
        Some(U::DigestAck(a)) => h.ack_digest(a.digest_id, a.list_id),
        Some(U::Other(_)) | None => {
            let _ = tx.try_send(Ok(stream_error(
                Code::Unimplemented,
                "Unsupported stream message".into(),
                p4::stream_error::Details::Other(p4::StreamOtherError { other: None }),
            )));
        }
    }
    Ok(())
}

/// Serve P4Runtime on `addr` until the future is dropped or the listener fails.
pub async fn serve_async(
    addr: std::net::SocketAddr,
    sw: Arc<Mutex<Switch>>,
    opts: Options,
) -> Result<(), String> {
    Handle::new(sw, opts)?.serve_async(addr).await
}

/// Blocking wrapper around [`serve_async`] (builds its own tokio runtime).
pub fn serve(
    addr: std::net::SocketAddr,
    sw: Arc<Mutex<Switch>>,
    opts: Options,
) -> Result<(), String> {
    Handle::new(sw, opts)?.serve(addr)
}

impl Handle {
    /// Serve this handle's state on `addr` (with the 1-second idle-timeout sweep) until the
    /// future is dropped or the listener fails. Keep a clone of the handle to feed packets.
    pub async fn serve_async(&self, addr: std::net::SocketAddr) -> Result<(), String> {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
        self.serve_tokio_listener(listener).await
    }

    async fn serve_tokio_listener(&self, listener: tokio::net::TcpListener) -> Result<(), String> {
        let addr = listener
            .local_addr()
            .map_or_else(|_| "?".to_string(), |a| a.to_string());
        let sweeper = self.clone();
        let sweep = tokio::spawn(async move {
            let mut tick = tokio::time::interval(std::time::Duration::from_millis(10));
            for n in 0u64.. {
                tick.tick().await;
                sweeper.flush_digests();
                if n % 100 == 0 {
                    sweeper.sweep_idle();
                }
            }
        });
        let r = tonic::transport::Server::builder()
            .add_service(self.service())
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
            .await
            .map_err(|e| format!("gRPC server on {addr}: {e}"));
        sweep.abort();
        r
    }

    /// Serve on an already bound listener (so a caller can report a busy address before
    /// starting a thread), blocking on its own 2-thread tokio runtime.
    pub fn serve_listener(&self, listener: std::net::TcpListener) -> Result<(), String> {
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("gRPC listener: {e}"))?;
        let rt = runtime()?;
        rt.block_on(async {
            let l = tokio::net::TcpListener::from_std(listener)
                .map_err(|e| format!("gRPC listener: {e}"))?;
            self.serve_tokio_listener(l).await
        })
    }

    /// Blocking [`Handle::serve_async`] on its own 2-thread tokio runtime.
    pub fn serve(&self, addr: std::net::SocketAddr) -> Result<(), String> {
        runtime()?.block_on(self.serve_async(addr))
    }
}

/// Called every 10 ms while [`serve_devices`] runs (for example to move a virtual switch's
/// CPU-port frames and digests to the devices' handles).
pub type Tick = Arc<dyn Fn() + Send + Sync>;

/// Serve several devices (see [`multi_device_service_with_access`]) on an already bound
/// listener, with every handle's digest flush and idle-timeout sweep and `tick`, until the
/// future is dropped or the listener fails.
pub async fn serve_devices_async(
    listener: tokio::net::TcpListener,
    handles: Vec<Handle>,
    access: Access,
    tick: Option<Tick>,
) -> Result<(), String> {
    serve_set_async(listener, DeviceSet::new(handles, access)?, tick, None).await
}

/// TLS for a P4Runtime server: its certificate chain and private key, PEM.
#[derive(Clone, Debug)]
pub struct TlsPem {
    pub cert: Vec<u8>,
    pub key: Vec<u8>,
}

impl TlsPem {
    /// Whether the certificate and key parse and belong together (what serving them needs).
    pub fn check(&self) -> Result<(), String> {
        tonic::transport::Server::builder()
            .tls_config(
                tonic::transport::ServerTlsConfig::new()
                    .identity(tonic::transport::Identity::from_pem(&self.cert, &self.key)),
            )
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

/// [`serve_devices_async`] for a [`DeviceSet`] that may change while it is served (devices
/// added and removed, tokens changed), in plain text or over TLS (`tls`).
pub async fn serve_set_async(
    listener: tokio::net::TcpListener,
    set: DeviceSet,
    tick: Option<Tick>,
    tls: Option<TlsPem>,
) -> Result<(), String> {
    let mut builder = tonic::transport::Server::builder();
    if let Some(t) = tls {
        builder = builder
            .tls_config(
                tonic::transport::ServerTlsConfig::new()
                    .identity(tonic::transport::Identity::from_pem(t.cert, t.key)),
            )
            .map_err(|e| format!("P4Runtime TLS: {e}"))?;
    }
    let addr = listener
        .local_addr()
        .map_or_else(|_| "?".to_string(), |a| a.to_string());
    let svc = set.service();
    let sweep = tokio::spawn(async move {
        let mut every = tokio::time::interval(std::time::Duration::from_millis(10));
        for n in 0u64.. {
            every.tick().await;
            if let Some(t) = &tick {
                t();
            }
            for h in &set.handles() {
                h.flush_digests();
                if n % 100 == 0 {
                    h.sweep_idle();
                }
            }
        }
    });
    let r = builder
        .add_service(svc)
        .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
        .await
        .map_err(|e| format!("gRPC server on {addr}: {e}"));
    sweep.abort();
    r
}

/// Blocking [`serve_devices_async`] on a bound std listener, on its own 2-thread runtime.
pub fn serve_devices(
    listener: std::net::TcpListener,
    handles: Vec<Handle>,
    access: Access,
    tick: Option<Tick>,
) -> Result<(), String> {
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("gRPC listener: {e}"))?;
    runtime()?.block_on(async {
        let l = tokio::net::TcpListener::from_std(listener)
            .map_err(|e| format!("gRPC listener: {e}"))?;
        serve_devices_async(l, handles, access, tick).await
    })
}

/// Blocking [`serve_set_async`] on a bound std listener, on its own 2-thread runtime.
pub fn serve_set(
    listener: std::net::TcpListener,
    set: DeviceSet,
    tick: Option<Tick>,
    tls: Option<TlsPem>,
) -> Result<(), String> {
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("gRPC listener: {e}"))?;
    runtime()?.block_on(async {
        let l = tokio::net::TcpListener::from_std(listener)
            .map_err(|e| format!("gRPC listener: {e}"))?;
        serve_set_async(l, set, tick, tls).await
    })
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))
}
