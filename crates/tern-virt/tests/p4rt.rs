//! P4Runtime per device of a virtual switch, over gRPC on loopback: three devices (alice's,
//! bob's and an operator-only one) on one server, tenant tokens, per-device arbitration,
//! roles, packet-in/out and digests per device, cross-tenant refusal answered exactly like an
//! unknown device, and a live pipeline push on one device while another forwards checked
//! traffic.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc as smpsc, Arc, Mutex};
use std::time::Duration;

use prost::Message;
use tern_dataplane::{Switch, SwitchOptions};
use tern_p4rt::proto::google::rpc;
use tern_p4rt::proto::p4::config::v1 as cfg;
use tern_p4rt::proto::p4::v1 as p4;
use tern_p4rt::proto::p4::v1::p4_runtime_client::P4RuntimeClient;
use tern_p4rt::{RoleConfig, Roles};
use tern_runtime::OutputPacket;
use tern_virt::{DeviceSpec, Target, Topology, VirtP4rt, VirtSwitch};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;
use tonic::Code;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../");
const CPU: u32 = 100;

fn program(name: &str) -> String {
    tern_virt::config::load_program(std::path::Path::new(&format!("{ROOT}p4/virt/{name}"))).unwrap()
}

fn info_of(json: &str) -> cfg::P4Info {
    let sw = Switch::from_json(json, SwitchOptions::default()).unwrap();
    tern_p4rt::p4info::derive_p4info(sw.program())
}

/// (id, name) of the P4Info object whose name ends with `.{suffix}` or is `suffix`.
fn find<'a>(pre: impl Iterator<Item = &'a Option<cfg::Preamble>>, suffix: &str) -> (u32, String) {
    pre.flatten()
        .find(|p| p.name == suffix || p.name.ends_with(&format!(".{suffix}")))
        .map(|p| (p.id, p.name.clone()))
        .unwrap_or_else(|| panic!("no P4Info object {suffix}"))
}

fn table(info: &cfg::P4Info, t: &str) -> (u32, String) {
    find(info.tables.iter().map(|x| &x.preamble), t)
}

fn action(info: &cfg::P4Info, a: &str) -> u32 {
    find(info.actions.iter().map(|x| &x.preamble), a).0
}

#[derive(Clone)]
struct Tok(Option<&'static str>);

impl tonic::service::Interceptor for Tok {
    fn call(&mut self, mut r: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(t) = self.0 {
            r.metadata_mut()
                .insert("authorization", format!("Bearer {t}").parse().unwrap());
        }
        Ok(r)
    }
}

type Client = P4RuntimeClient<InterceptedService<Channel, Tok>>;

struct Env {
    vs: Arc<Mutex<VirtSwitch>>,
    p4rt: Arc<VirtP4rt>,
    addr: std::net::SocketAddr,
    /// Packet-out traffic to physical ports.
    sink: smpsc::Receiver<Vec<OutputPacket>>,
    l2: String,
    info: cfg::P4Info,
}

impl Env {
    async fn client(&self, tok: Option<&'static str>) -> Client {
        let ch = Channel::from_shared(format!("http://{}", self.addr))
            .unwrap()
            .connect()
            .await
            .unwrap();
        P4RuntimeClient::with_interceptor(ch, Tok(tok))
    }

    /// Run one frame in on a physical port; physical outputs returned, CPU frames and
    /// digests handed to the controllers.
    fn send(&self, port: u32, frame: &[u8]) -> Vec<(u32, Vec<u8>)> {
        let mut out = Vec::new();
        let mut vs = self.vs.lock().unwrap();
        vs.process_batch(&[(port, frame)], &mut out);
        let r = out.iter().map(|o| (o.port, o.data.clone())).collect();
        vs.recycle_outputs(&mut out);
        drop(vs);
        self.p4rt.deliver();
        r
    }
}

/// Devices 1 (alice: l2_switch, ports 1-2, CPU on 100, role "learner" owning smac and the
/// learn digest), 2 (bob: l2_switch, ports 3-4, CPU on 100) and 3 (operator only: router,
/// port 5); tokens tok-alice, tok-bob, tok-op.
async fn start() -> Env {
    let l2 = program("l2_switch.p4");
    let info = info_of(&l2);
    let mut vs = VirtSwitch::new();
    for (id, owner, json) in [
        (1, Some("alice"), l2.clone()),
        (2, Some("bob"), l2.clone()),
        (3, None, program("router.p4")),
    ] {
        vs.add_device(
            id,
            DeviceSpec {
                json,
                owner: owner.map(str::to_string),
                quotas: Default::default(),
            },
        )
        .unwrap();
    }
    let mut topo = Topology::default();
    for (port, dev) in [(1, 1), (2, 1), (3, 2), (4, 2), (5, 3)] {
        topo.rules.push(tern_virt::Rule {
            priority: 0,
            port: Some(port),
            vlan: None,
            field: None,
            device: dev,
            vport: None,
        });
    }
    topo.port_maps.insert(
        1,
        BTreeMap::from([
            (1, Target::Phys(1)),
            (2, Target::Phys(2)),
            (CPU, Target::Cpu),
        ]),
    );
    topo.port_maps.insert(
        2,
        BTreeMap::from([
            (3, Target::Phys(3)),
            (4, Target::Phys(4)),
            (CPU, Target::Cpu),
        ]),
    );
    vs.set_topology(topo).unwrap();
    let learner = RoleConfig {
        entities: vec![
            table(&info, "smac").1,
            find(info.digests.iter().map(|d| &d.preamble), "learn_t").1,
        ],
        packet_in: true,
        pipeline: false,
    };
    let roles1: Roles = BTreeMap::from([("learner".to_string(), learner)]);
    let tokens = BTreeMap::from([
        ("alice".to_string(), "tok-alice".to_string()),
        ("bob".to_string(), "tok-bob".to_string()),
    ]);
    let access = tern_virt::tenant_access(&vs, &tokens, Some("tok-op")).unwrap();
    let vs = Arc::new(Mutex::new(vs));
    let p4rt = Arc::new(
        VirtP4rt::new(
            Arc::clone(&vs),
            &[(1, roles1), (2, Roles::new()), (3, Roles::new())],
        )
        .unwrap(),
    );
    let (tx, sink) = smpsc::channel();
    p4rt.set_output_sink(Arc::new(move |outs| {
        let _ = tx.send(outs);
    }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (handles, tick) = (p4rt.handles(), p4rt.tick());
    tokio::spawn(async move {
        tern_p4rt::serve_devices_async(listener, handles, access, Some(tick))
            .await
            .unwrap();
    });
    Env {
        vs,
        p4rt,
        addr,
        sink,
        l2,
        info,
    }
}

fn eid(low: u64) -> Option<p4::Uint128> {
    Some(p4::Uint128 { high: 0, low })
}

fn mac(last: u8) -> Vec<u8> {
    vec![0x0a, 0, 0, 0, 0, last]
}

fn frame(dst: u8, src: u8, seq: u32) -> Vec<u8> {
    let mut f = mac(dst);
    f.extend(mac(src));
    f.extend([0x08, 0x00]);
    f.extend(seq.to_be_bytes());
    f.extend([0u8; 40]);
    f
}

/// A dmac (or smac) entry: exact MAC → action with one parameter (the port) or none.
fn entry(info: &cfg::P4Info, t: &str, key: Vec<u8>, a: &str, port: Option<u8>) -> p4::Entity {
    p4::Entity {
        entity: Some(p4::entity::Entity::TableEntry(p4::TableEntry {
            table_id: table(info, t).0,
            r#match: vec![p4::FieldMatch {
                field_id: 1,
                field_match_type: Some(p4::field_match::FieldMatchType::Exact(
                    p4::field_match::Exact { value: key },
                )),
            }],
            action: Some(p4::TableAction {
                r#type: Some(p4::table_action::Type::Action(p4::Action {
                    action_id: action(info, a),
                    params: port
                        .map(|p| {
                            vec![p4::action::Param {
                                param_id: 1,
                                value: vec![p],
                            }]
                        })
                        .unwrap_or_default(),
                })),
            }),
            ..Default::default()
        })),
    }
}

fn insert(e: p4::Entity) -> p4::Update {
    p4::Update {
        r#type: p4::update::Type::Insert as i32,
        entity: Some(e),
    }
}

async fn write(
    c: &mut Client,
    device_id: u64,
    election: Option<u64>,
    role: &str,
    updates: Vec<p4::Update>,
) -> Result<(), tonic::Status> {
    c.write(p4::WriteRequest {
        device_id,
        election_id: election.and_then(eid),
        role: role.into(),
        updates,
        ..Default::default()
    })
    .await
    .map(|_| ())
}

/// The canonical code of each update of a failed write.
fn write_errors(st: &tonic::Status) -> Vec<i32> {
    let s = rpc::Status::decode(st.details()).expect("write error details");
    s.details
        .iter()
        .map(|a| p4::Error::decode(&a.value[..]).unwrap().canonical_code)
        .collect()
}

async fn read(
    c: &mut Client,
    device_id: u64,
    role: &str,
    filter: p4::Entity,
) -> Result<Vec<p4::Entity>, tonic::Status> {
    let mut s = c
        .read(p4::ReadRequest {
            device_id,
            entities: vec![filter],
            role: role.into(),
        })
        .await?
        .into_inner();
    let mut v = Vec::new();
    while let Some(r) = s.next().await {
        v.extend(r?.entities);
    }
    Ok(v)
}

fn all_tables() -> p4::Entity {
    p4::Entity {
        entity: Some(p4::entity::Entity::TableEntry(p4::TableEntry::default())),
    }
}

fn table_ids(v: &[p4::Entity]) -> Vec<u32> {
    let mut ids: Vec<u32> = v
        .iter()
        .filter_map(|e| match &e.entity {
            Some(p4::entity::Entity::TableEntry(t)) => Some(t.table_id),
            _ => None,
        })
        .collect();
    ids.sort_unstable();
    ids
}

async fn set_pipeline(
    c: &mut Client,
    device_id: u64,
    role: &str,
    json: &str,
    action: p4::set_forwarding_pipeline_config_request::Action,
) -> Result<(), tonic::Status> {
    c.set_forwarding_pipeline_config(p4::SetForwardingPipelineConfigRequest {
        device_id,
        role: role.into(),
        action: action as i32,
        config: Some(p4::ForwardingPipelineConfig {
            p4info: Some(info_of(json)),
            p4_device_config: json.as_bytes().to_vec(),
            cookie: None,
        }),
        ..Default::default()
    })
    .await
    .map(|_| ())
}

async fn get_pipeline(c: &mut Client, device_id: u64) -> Result<cfg::P4Info, tonic::Status> {
    Ok(
        c.get_forwarding_pipeline_config(p4::GetForwardingPipelineConfigRequest {
            device_id,
            response_type: 0,
        })
        .await?
        .into_inner()
        .config
        .unwrap()
        .p4info
        .unwrap(),
    )
}

struct Stream {
    tx: mpsc::Sender<p4::StreamMessageRequest>,
    rx: tonic::Streaming<p4::StreamMessageResponse>,
}

type Update = p4::stream_message_response::Update;

impl Stream {
    /// Open a stream and send its arbitration.
    async fn open(c: &mut Client, device_id: u64, election: u64, role: &str) -> Stream {
        let (tx, rx) = mpsc::channel(16);
        let resp = c.stream_channel(ReceiverStream::new(rx)).await.unwrap();
        let s = Stream {
            tx,
            rx: resp.into_inner(),
        };
        s.send(p4::stream_message_request::Update::Arbitration(
            p4::MasterArbitrationUpdate {
                device_id,
                election_id: eid(election),
                role: (!role.is_empty()).then(|| p4::Role {
                    name: role.into(),
                    ..Default::default()
                }),
                status: None,
            },
        ))
        .await;
        s
    }

    async fn send(&self, u: p4::stream_message_request::Update) {
        self.tx
            .send(p4::StreamMessageRequest { update: Some(u) })
            .await
            .unwrap();
    }

    async fn next(&mut self) -> Result<Update, tonic::Status> {
        let m = tokio::time::timeout(Duration::from_secs(5), self.rx.next())
            .await
            .expect("a stream message in time")
            .expect("stream open")?;
        Ok(m.update.expect("an update"))
    }

    /// The arbitration answer: (is primary, the primary's election id).
    async fn arbitration(&mut self) -> (bool, u64) {
        match self.next().await.unwrap() {
            Update::Arbitration(a) => (
                a.status.unwrap().code == 0,
                a.election_id.map_or(0, |e| e.low),
            ),
            other => panic!("expected arbitration, got {other:?}"),
        }
    }

    /// The next message that is not an arbitration update.
    async fn next_event(&mut self) -> Update {
        loop {
            match self.next().await.unwrap() {
                Update::Arbitration(_) => continue,
                u => return u,
            }
        }
    }
}

/// A tenant's token reaches only its own devices; a foreign device answers exactly like one
/// that does not exist, for every RPC; no token or a wrong one is UNAUTHENTICATED; the
/// operator's token reaches every device.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_reach_only_their_own_device() {
    use p4::set_forwarding_pipeline_config_request::Action as A;
    let env = start().await;
    let mut alice = env.client(Some("tok-alice")).await;
    let mut op = env.client(Some("tok-op")).await;
    assert_eq!(get_pipeline(&mut alice, 1).await.unwrap(), env.info);
    for id in [1, 2, 3] {
        get_pipeline(&mut op, id).await.unwrap();
    }
    // The same answer, up to the id asked for (which names nothing else).
    let same = |a: tonic::Status, b: tonic::Status, id: u64| {
        assert_eq!(a.code(), Code::NotFound, "{a:?}");
        assert_eq!(a.message(), format!("Invalid device id {id}"));
        assert_eq!(
            (b.code(), b.message()),
            (Code::NotFound, "Invalid device id 9")
        );
    };
    // Bob's device 2 and the operator's device 3 look exactly like device 9, which does
    // not exist.
    for foreign in [2, 3] {
        same(
            get_pipeline(&mut alice, foreign).await.unwrap_err(),
            get_pipeline(&mut alice, 9).await.unwrap_err(),
            foreign,
        );
        let e = entry(&env.info, "dmac", mac(7), "forward", Some(2));
        same(
            write(&mut alice, foreign, None, "", vec![insert(e.clone())])
                .await
                .unwrap_err(),
            write(&mut alice, 9, None, "", vec![insert(e)])
                .await
                .unwrap_err(),
            foreign,
        );
        same(
            read(&mut alice, foreign, "", all_tables())
                .await
                .unwrap_err(),
            read(&mut alice, 9, "", all_tables()).await.unwrap_err(),
            foreign,
        );
        same(
            set_pipeline(&mut alice, foreign, "", &env.l2, A::VerifyAndCommit)
                .await
                .unwrap_err(),
            set_pipeline(&mut alice, 9, "", &env.l2, A::VerifyAndCommit)
                .await
                .unwrap_err(),
            foreign,
        );
        // A stream arbitrating for a foreign device ends like one for a missing device.
        let mut s1 = Stream::open(&mut alice, foreign, 1, "").await;
        let mut s2 = Stream::open(&mut alice, 9, 1, "").await;
        same(
            s1.next().await.unwrap_err(),
            s2.next().await.unwrap_err(),
            foreign,
        );
    }
    // Nothing of the above reached bob's device.
    let mut bob = env.client(Some("tok-bob")).await;
    assert!(read(&mut bob, 2, "", all_tables())
        .await
        .unwrap()
        .is_empty());
    assert_eq!(get_pipeline(&mut bob, 2).await.unwrap(), env.info);
    // The operator reaches device 3, which has no CPU port: a packet-out is a clear error.
    let mut s = Stream::open(&mut op, 3, 1, "").await;
    assert_eq!(s.arbitration().await, (true, 1));
    s.send(p4::stream_message_request::Update::Packet(p4::PacketOut {
        payload: frame(1, 2, 3),
        metadata: vec![],
    }))
    .await;
    match s.next_event().await {
        Update::Error(e) => assert!(e.message.contains("No CPU port"), "{e:?}"),
        other => panic!("expected a stream error, got {other:?}"),
    }
    // Once the operator removes bob's device, its id answers like one that never existed.
    env.vs.lock().unwrap().remove_device(2).unwrap();
    let e = get_pipeline(&mut bob, 2).await.unwrap_err();
    assert_eq!(
        (e.code(), e.message()),
        (Code::NotFound, "Invalid device id 2")
    );
    // No token, or an unknown one: refused before any device is looked at.
    for tok in [None, Some("tok-mallory")] {
        let mut c = env.client(tok).await;
        let e = get_pipeline(&mut c, 1).await.unwrap_err();
        assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");
        let (tx, rx) = mpsc::channel::<p4::StreamMessageRequest>(1);
        let e = c.stream_channel(ReceiverStream::new(rx)).await.unwrap_err();
        assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");
        drop(tx);
    }
}

/// Arbitration per device and per role, role ownership on writes, reads and pipeline pushes,
/// packet-in / packet-out and digests per device.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arbitration_roles_packet_io_and_digests_per_device() {
    use p4::set_forwarding_pipeline_config_request::Action as A;
    let env = start().await;
    let info = &env.info;
    let mut alice = env.client(Some("tok-alice")).await;
    let mut bob = env.client(Some("tok-bob")).await;
    // Election 2 wins alice's default role; 1 is backup. Bob's device has its own election.
    let mut a2 = Stream::open(&mut alice, 1, 2, "").await;
    assert_eq!(a2.arbitration().await, (true, 2));
    let mut a1 = Stream::open(&mut alice, 1, 1, "").await;
    assert_eq!(a1.arbitration().await, (false, 2));
    let mut b1 = Stream::open(&mut bob, 2, 1, "").await;
    assert_eq!(b1.arbitration().await, (true, 1));
    // The learner role elects its own primary (election 1 is free in that role).
    let mut l1 = Stream::open(&mut alice, 1, 1, "learner").await;
    assert_eq!(l1.arbitration().await, (true, 1));
    // An unknown role is refused.
    let mut bad = Stream::open(&mut alice, 1, 5, "admin").await;
    assert_eq!(bad.next().await.unwrap_err().code(), Code::PermissionDenied);

    // Only the primary of the role writes.
    let to_cpu = entry(info, "dmac", mac(1), "forward", Some(CPU as u8));
    let to_2 = entry(info, "dmac", mac(2), "forward", Some(2));
    let e = write(&mut alice, 1, Some(1), "", vec![insert(to_cpu.clone())])
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    write(
        &mut alice,
        1,
        Some(2),
        "",
        vec![insert(to_cpu), insert(to_2)],
    )
    .await
    .unwrap();
    // The learner owns smac (writes pass) but not dmac (refused per update).
    let known = entry(info, "smac", mac(9), "known", None);
    let e = write(
        &mut alice,
        1,
        Some(1),
        "learner",
        vec![
            insert(known.clone()),
            insert(entry(info, "dmac", mac(3), "forward", Some(1))),
        ],
    )
    .await
    .unwrap_err();
    assert_eq!(
        write_errors(&e),
        vec![Code::Ok as i32, Code::PermissionDenied as i32]
    );
    // Reads are filtered by role: the learner sees smac only, the default role both tables.
    let (smac, dmac) = (table(info, "smac").0, table(info, "dmac").0);
    let mine = read(&mut alice, 1, "learner", all_tables()).await.unwrap();
    assert_eq!(table_ids(&mine), vec![smac]);
    let all = read(&mut alice, 1, "", all_tables()).await.unwrap();
    let mut want = vec![smac, dmac, dmac];
    want.sort_unstable();
    assert_eq!(table_ids(&all), want);
    // The learner may not push a pipeline.
    let e = set_pipeline(&mut alice, 1, "learner", &env.l2, A::VerifyAndCommit)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");

    // Packet-in: a frame alice's device sends to its CPU port reaches her default primary
    // and the learner (packet_in: true); not the backup, not bob.
    let f = frame(1, 9, 1);
    assert!(env.send(1, &f).is_empty());
    for s in [&mut a2, &mut l1] {
        match s.next_event().await {
            Update::Packet(p) => assert_eq!(p.payload, f),
            other => panic!("expected packet-in, got {other:?}"),
        }
    }
    // Bob's own packet-in is the first thing bob hears: none of alice's reached him.
    write(
        &mut bob,
        2,
        Some(1),
        "",
        vec![insert(entry(
            info,
            "dmac",
            mac(1),
            "forward",
            Some(CPU as u8),
        ))],
    )
    .await
    .unwrap();
    let fb = frame(1, 9, 2);
    assert!(env.send(3, &fb).is_empty());
    match b1.next_event().await {
        Update::Packet(p) => assert_eq!(p.payload, fb),
        other => panic!("expected bob's packet-in, got {other:?}"),
    }

    // Packet-out enters alice's device on its CPU port and leaves by her dmac entry (port 2).
    let po = frame(2, 9, 3);
    a2.send(p4::stream_message_request::Update::Packet(p4::PacketOut {
        payload: po.clone(),
        metadata: vec![],
    }))
    .await;
    let outs = env.sink.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(
        outs.iter()
            .map(|o| (o.port, o.data.clone()))
            .collect::<Vec<_>>(),
        vec![(2, po)]
    );
    // A backup's packet-out is refused.
    a1.send(p4::stream_message_request::Update::Packet(p4::PacketOut {
        payload: frame(2, 9, 4),
        metadata: vec![],
    }))
    .await;
    match a1.next_event().await {
        Update::Error(e) => assert_eq!(e.canonical_code, Code::InvalidArgument as i32),
        other => panic!("expected a stream error, got {other:?}"),
    }

    // Digests: the learner configures the learn digest; an unknown source MAC on alice's
    // device raises it to alice's primaries, never to bob.
    let (digest_id, _) = find(info.digests.iter().map(|d| &d.preamble), "learn_t");
    let conf = p4::Entity {
        entity: Some(p4::entity::Entity::DigestEntry(p4::DigestEntry {
            digest_id,
            config: Some(p4::digest_entry::Config {
                max_timeout_ns: 0,
                max_list_size: 1,
                ack_timeout_ns: 0,
            }),
        })),
    };
    write(
        &mut alice,
        1,
        Some(1),
        "learner",
        vec![insert(conf.clone())],
    )
    .await
    .unwrap();
    write(&mut bob, 2, Some(1), "", vec![insert(conf)])
        .await
        .unwrap();
    // Source 0x0a..05 is unknown to smac: a digest; dst 2 forwards to port 2.
    let fd = frame(2, 5, 5);
    assert_eq!(env.send(1, &fd), vec![(2, fd.clone())]);
    for s in [&mut l1, &mut a2] {
        match s.next_event().await {
            Update::Digest(d) => {
                assert_eq!(d.digest_id, digest_id);
                assert_eq!(d.data.len(), 1);
            }
            other => panic!("expected a digest list, got {other:?}"),
        }
    }
    // Bob hears his own packet-in (dst 1 goes to his CPU port) and digest, not alice's.
    let fbd = frame(1, 6, 6);
    env.send(3, &fbd);
    match b1.next_event().await {
        Update::Packet(p) => assert_eq!(p.payload, fbd),
        other => panic!("expected bob's packet-in, got {other:?}"),
    }
    match b1.next_event().await {
        Update::Digest(d) => {
            let p4::p4_data::Data::Struct(s) = d.data[0].data.as_ref().unwrap() else {
                panic!("{d:?}")
            };
            let Some(p4::p4_data::Data::Bitstring(src)) = &s.members[0].data else {
                panic!("{s:?}")
            };
            assert_eq!(*src.last().unwrap(), 6, "bob's own source MAC");
        }
        other => panic!("expected bob's digest, got {other:?}"),
    }
    // When alice's primary leaves, the backup takes over.
    drop(a2);
    assert_eq!(a1.arbitration().await, (true, 1));
}

/// SetForwardingPipelineConfig on alice's device, repeated, while bob's device forwards
/// 3,000 numbered frames: every one of bob's frames comes out once, in order, unchanged, on
/// the right port. VERIFY_AND_COMMIT starts alice's device fresh; RECONCILE_AND_COMMIT keeps
/// its entries; the device keeps its ports throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_pipeline_push_on_one_device_while_another_forwards() {
    use p4::set_forwarding_pipeline_config_request::Action as A;
    let env = start().await;
    let info = env.info.clone();
    let mut alice = env.client(Some("tok-alice")).await;
    let mut bob = env.client(Some("tok-bob")).await;
    write(
        &mut bob,
        2,
        None,
        "",
        vec![insert(entry(&info, "dmac", mac(4), "forward", Some(4)))],
    )
    .await
    .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let traffic = {
        let (vs, stop) = (Arc::clone(&env.vs), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut bad = Vec::new();
            let mut out = Vec::new();
            let mut n = 0u32;
            while n < 3_000 || !stop.load(Ordering::Relaxed) {
                let f = frame(4, 3, n);
                let mut g = vs.lock().unwrap();
                g.process_batch(&[(3, &f)], &mut out);
                if out.len() != 1 || out[0].port != 4 || out[0].data != f {
                    bad.push((n, out.iter().map(|o| o.port).collect::<Vec<_>>()));
                }
                g.recycle_outputs(&mut out);
                drop(g);
                n += 1;
                if n.is_multiple_of(64) {
                    std::thread::yield_now();
                }
            }
            (n, bad)
        })
    };
    let fw = program("firewall.p4");
    for i in 0..6 {
        let json = if i % 2 == 0 { &fw } else { &env.l2 };
        set_pipeline(&mut alice, 1, "", json, A::VerifyAndCommit)
            .await
            .unwrap();
        assert_eq!(get_pipeline(&mut alice, 1).await.unwrap(), info_of(json));
    }
    // Alice's device now runs l2_switch with fresh state; an entry, then a reconcile to an
    // equivalent JSON (other bytes) carries it over.
    assert!(read(&mut alice, 1, "", all_tables())
        .await
        .unwrap()
        .is_empty());
    write(
        &mut alice,
        1,
        None,
        "",
        vec![insert(entry(&info, "dmac", mac(2), "forward", Some(2)))],
    )
    .await
    .unwrap();
    let l2b = format!("{} ", env.l2);
    set_pipeline(&mut alice, 1, "", &l2b, A::ReconcileAndCommit)
        .await
        .unwrap();
    assert_eq!(
        table_ids(&read(&mut alice, 1, "", all_tables()).await.unwrap()),
        vec![table(&info, "dmac").0]
    );
    let f = frame(2, 1, 7);
    assert_eq!(env.send(1, &f), vec![(2, f.clone())]);
    // VERIFY_AND_COMMIT clears it again.
    set_pipeline(&mut alice, 1, "", &env.l2, A::VerifyAndCommit)
        .await
        .unwrap();
    assert!(read(&mut alice, 1, "", all_tables())
        .await
        .unwrap()
        .is_empty());
    stop.store(true, Ordering::Relaxed);
    let (n, bad) = traffic.join().unwrap();
    assert!(n >= 3_000);
    assert!(
        bad.is_empty(),
        "{} of {n} frames misforwarded: {:?}",
        bad.len(),
        &bad[..bad.len().min(5)]
    );
    // Bob's device was never touched: its entry and counters are intact.
    assert_eq!(
        table_ids(&read(&mut bob, 2, "", all_tables()).await.unwrap()),
        vec![table(&info, "dmac").0]
    );
    let st = env
        .vs
        .lock()
        .unwrap()
        .device_stats(tern_virt::Caller::Operator, 2)
        .unwrap();
    assert_eq!((st.packets_in, st.to_phys), (u64::from(n), u64::from(n)));
}

/// A role naming something the program does not have is refused when the server is built.
#[test]
fn a_role_naming_an_unknown_object_is_refused() {
    let mut vs = VirtSwitch::new();
    vs.add_device(
        1,
        DeviceSpec {
            json: program("l2_switch.p4"),
            owner: None,
            quotas: Default::default(),
        },
    )
    .unwrap();
    let roles: Roles = BTreeMap::from([(
        "r".to_string(),
        RoleConfig {
            entities: vec!["L2Ingress.nope".into()],
            ..Default::default()
        },
    )]);
    let e = VirtP4rt::new(Arc::new(Mutex::new(vs)), &[(1, roles)])
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("device 1") && e.contains("role 'r'") && e.contains("'L2Ingress.nope'"),
        "{e}"
    );
}
