//! Per-tenant control with the devices on worker threads (`VirtWorkers`): BMv2 Thrift servers
//! driven in the `simple_switch_CLI` language and P4Runtime writes and reads against devices
//! on two workers while traffic runs (every packet checked, the devices moved between
//! workers meanwhile), and P4Runtime serving devices added and removed after start-up with
//! their tenants' tokens.

// tonic's Status is the error of every RPC helper here.
#![allow(clippy::result_large_err)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tern_p4rt::proto::p4::config::v1 as cfg;
use tern_p4rt::proto::p4::v1 as p4;
use tern_p4rt::proto::p4::v1::p4_runtime_client::P4RuntimeClient;
use tern_p4rt::Roles;
use tern_runtime::{OutputPacket, Runtime};
use tern_virt::{
    Caller, DeviceSpec, Shared, SharedDevice, Target, Topology, VirtP4rt, VirtSwitch, VirtWorkers,
    WorkerOptions,
};
use tokio_stream::StreamExt;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../");

fn l2() -> String {
    tern_virt::config::load_program(std::path::Path::new(&format!("{ROOT}p4/virt/l2_switch.p4")))
        .unwrap()
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

fn rule(port: u32, device: u32) -> tern_virt::Rule {
    tern_virt::Rule {
        priority: 0,
        port: Some(port),
        vlan: None,
        field: None,
        device,
        vport: None,
    }
}

/// Devices 1 (alice: l2_switch, ports 1-2) and 2 (bob: l2_switch, ports 3-4), each with a
/// dmac entry forwarding MAC 2 to port 2 (device 1) and MAC 4 to port 4 (device 2), and an
/// smac entry for the traffic's source so no digest piles up.
fn two_tenants() -> VirtSwitch {
    let json = l2();
    let mut vs = VirtSwitch::new();
    for (id, owner) in [(1, "alice"), (2, "bob")] {
        vs.add_device(
            id,
            DeviceSpec {
                json: json.clone(),
                owner: Some(owner.into()),
                quotas: Default::default(),
            },
        )
        .unwrap();
    }
    let mut t = Topology::default();
    for (port, dev) in [(1, 1), (2, 1), (3, 2), (4, 2)] {
        t.rules.push(rule(port, dev));
    }
    t.port_maps.insert(
        1,
        BTreeMap::from([(1, Target::Phys(1)), (2, Target::Phys(2))]),
    );
    t.port_maps.insert(
        2,
        BTreeMap::from([(3, Target::Phys(3)), (4, Target::Phys(4))]),
    );
    vs.set_topology(t).unwrap();
    let program = tern_model::load(&json).unwrap();
    for (id, dst, port, src) in [(1, 2u8, 2u8, 1u8), (2, 4, 4, 3)] {
        let mut rt = vs.runtime(Caller::Operator, id).unwrap();
        let mut cli = tern_control::Cli::new(&program);
        for cmd in [
            format!("table_add L2Ingress.dmac forward 0x0a00000000{dst:02x} => {port}"),
            format!("table_add L2Ingress.smac known 0x0a00000000{src:02x} =>"),
        ] {
            let out = cli.execute(&mut rt, &cmd);
            assert!(!cli.last_command_failed(), "{cmd}: {out}");
        }
    }
    vs
}

type Client = P4RuntimeClient<InterceptedService<Channel, Tok>>;

#[derive(Clone)]
struct Tok(&'static str);

impl tonic::service::Interceptor for Tok {
    fn call(&mut self, mut r: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        r.metadata_mut().insert(
            "authorization",
            format!("Bearer {}", self.0).parse().unwrap(),
        );
        Ok(r)
    }
}

async fn client(addr: std::net::SocketAddr, tok: &'static str) -> Client {
    let ch = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    P4RuntimeClient::with_interceptor(ch, Tok(tok))
}

fn find(pre: impl Iterator<Item = Option<cfg::Preamble>>, suffix: &str) -> u32 {
    pre.flatten()
        .find(|p| p.name.ends_with(&format!(".{suffix}")))
        .map(|p| p.id)
        .unwrap_or_else(|| panic!("no P4Info object {suffix}"))
}

/// A dmac entry MAC → forward(port), as a P4Runtime entity of `info`.
fn dmac(info: &cfg::P4Info, last: u8, port: u8) -> p4::Entity {
    p4::Entity {
        entity: Some(p4::entity::Entity::TableEntry(p4::TableEntry {
            table_id: find(info.tables.iter().map(|t| t.preamble.clone()), "dmac"),
            r#match: vec![p4::FieldMatch {
                field_id: 1,
                field_match_type: Some(p4::field_match::FieldMatchType::Exact(
                    p4::field_match::Exact { value: mac(last) },
                )),
            }],
            action: Some(p4::TableAction {
                r#type: Some(p4::table_action::Type::Action(p4::Action {
                    action_id: find(info.actions.iter().map(|a| a.preamble.clone()), "forward"),
                    params: vec![p4::action::Param {
                        param_id: 1,
                        value: vec![port],
                    }],
                })),
            }),
            ..Default::default()
        })),
    }
}

async fn pipeline(c: &mut Client, device_id: u64) -> Result<cfg::P4Info, tonic::Status> {
    c.get_forwarding_pipeline_config(p4::GetForwardingPipelineConfigRequest {
        device_id,
        response_type: 0,
    })
    .await
    .map(|r| r.into_inner().config.unwrap().p4info.unwrap())
}

/// SetForwardingPipelineConfig (VERIFY_AND_COMMIT) of a BMv2 JSON with its derived P4Info.
async fn push(c: &mut Client, device_id: u64, json: &str) -> Result<(), tonic::Status> {
    let sw = tern_dataplane::Switch::from_json(json, Default::default()).unwrap();
    c.set_forwarding_pipeline_config(p4::SetForwardingPipelineConfigRequest {
        device_id,
        action: p4::set_forwarding_pipeline_config_request::Action::VerifyAndCommit as i32,
        config: Some(p4::ForwardingPipelineConfig {
            p4info: Some(tern_p4rt::p4info::derive_p4info(sw.program())),
            p4_device_config: json.as_bytes().to_vec(),
            cookie: None,
        }),
        ..Default::default()
    })
    .await
    .map(|_| ())
}

async fn insert(c: &mut Client, device_id: u64, e: p4::Entity) -> Result<(), tonic::Status> {
    c.write(p4::WriteRequest {
        device_id,
        updates: vec![p4::Update {
            r#type: p4::update::Type::Insert as i32,
            entity: Some(e),
        }],
        ..Default::default()
    })
    .await
    .map(|_| ())
}

async fn read_all(c: &mut Client, device_id: u64) -> Result<Vec<p4::Entity>, tonic::Status> {
    let mut s = c
        .read(p4::ReadRequest {
            device_id,
            entities: vec![p4::Entity {
                entity: Some(p4::entity::Entity::TableEntry(p4::TableEntry::default())),
            }],
            role: String::new(),
        })
        .await?
        .into_inner();
    let mut v = Vec::new();
    while let Some(r) = s.next().await {
        v.extend(r?.entities);
    }
    Ok(v)
}

/// A P4Runtime server over the workers' control, on loopback (tokens tok-a, tok-b).
fn serve(
    rt: &tokio::runtime::Runtime,
    shared: Shared,
    devices: &[u32],
) -> (Arc<VirtP4rt>, std::net::SocketAddr) {
    let list: Vec<(u32, Roles)> = devices.iter().map(|&d| (d, Roles::new())).collect();
    let p4rt = Arc::new(VirtP4rt::new(shared, &list).unwrap());
    p4rt.set_tokens(
        BTreeMap::from([
            ("alice".to_string(), "tok-a".to_string()),
            ("bob".to_string(), "tok-b".to_string()),
        ]),
        None,
    )
    .unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    listener.set_nonblocking(true).unwrap();
    let (set, tick) = (p4rt.set(), p4rt.tick());
    rt.spawn(async move {
        let l = tokio::net::TcpListener::from_std(listener).unwrap();
        let _ = tern_p4rt::serve_set_async(l, set, Some(tick), None).await;
    });
    (p4rt, addr)
}

/// Alice drives device 1 over BMv2 Thrift in the simple_switch_CLI language and Bob drives
/// device 2 over P4Runtime, each on its own thread, while 6,000 frames run through both
/// devices on two workers and the front moves the devices between the workers: every frame
/// comes out once, on its port, unchanged and in order; every control change took effect
/// (read back over the wire, and the new entries forward).
#[test]
fn thrift_and_p4runtime_reach_devices_on_two_workers_under_traffic() {
    let mut pool = VirtWorkers::new(
        two_tenants(),
        WorkerOptions {
            workers: 2,
            rebalance_every: 0,
            ..WorkerOptions::default()
        },
    );
    assert_ne!(
        pool.worker_of(1),
        pool.worker_of(2),
        "one device per worker"
    );
    let shared = Shared::Workers(pool.control());
    // Thrift: alice's server reaches device 1 only.
    let alice = SharedDevice::new(shared.clone(), Caller::Tenant("alice"), 1).unwrap();
    assert_eq!(
        SharedDevice::new(shared.clone(), Caller::Tenant("alice"), 2).unwrap_err(),
        tern_virt::VirtError::NoSuchDevice(2)
    );
    let (thrift_addr, _) =
        tern_thrift::spawn(("127.0.0.1", 0), Arc::new(Mutex::new(alice))).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (_p4rt, grpc_addr) = serve(&rt, shared.clone(), &[1, 2]);

    let program = tern_model::load(&l2()).unwrap();
    let cli_thread = std::thread::spawn(move || {
        let mut c = tern_thrift::ThriftRuntime::connect(thrift_addr).unwrap();
        let mut cli = tern_control::Cli::new(&program);
        let mut run = |cmd: &str| {
            let out = cli.execute(&mut c, cmd);
            assert!(!cli.last_command_failed(), "{cmd}: {out}");
            out
        };
        for n in 0..40u8 {
            run(&format!(
                "table_add L2Ingress.dmac forward 0x0a0000001{:03x} => 7",
                n
            ));
        }
        // The first twenty go again (handles 2.. as BMv2 numbers them after the set-up's).
        for h in 1..21 {
            run(&format!("table_delete L2Ingress.dmac {h}"));
        }
        let n = run("table_num_entries L2Ingress.dmac");
        let dump = run("table_dump L2Ingress.dmac");
        (n, dump)
    });
    let grpc_thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut bob = client(grpc_addr, "tok-b").await;
            let info = pipeline(&mut bob, 2).await.unwrap();
            for n in 0..30u8 {
                insert(&mut bob, 2, dmac(&info, 100 + n, 9)).await.unwrap();
            }
            // Bob's token does not reach alice's device: answered like a missing one.
            let e = pipeline(&mut bob, 1).await.unwrap_err();
            assert_eq!(
                (e.code(), e.message()),
                (tonic::Code::NotFound, "Invalid device id 1")
            );
            read_all(&mut bob, 2).await.unwrap()
        })
    });

    // Traffic: device 1 (port 1 → 2) and device 2 (port 3 → 4), alternating, until both
    // control threads are done (at least 6,000 rounds); the devices change workers every
    // 1,500 rounds.
    let mut out: Vec<OutputPacket> = Vec::new();
    let mut total = 0u32;
    let mut during = 0u32;
    while total < 6_000 || !(cli_thread.is_finished() && grpc_thread.is_finished()) {
        assert!(total < 2_000_000, "the control threads never finished");
        let seq = total;
        total += 1;
        if !(cli_thread.is_finished() && grpc_thread.is_finished()) {
            during += 1;
        }
        let f1 = frame(2, 1, seq);
        let f2 = frame(4, 3, seq);
        pool.dispatch(&[(1, &f1), (3, &f2)]);
        if seq % 1_500 == 750 {
            let to = 1 - pool.worker_of(1).unwrap();
            pool.move_group(1, to).unwrap();
            let to = 1 - pool.worker_of(2).unwrap();
            pool.move_group(2, to).unwrap();
        }
        pool.take_outputs(&mut out);
        if seq.is_multiple_of(64) {
            // Let the control threads in as the traffic goes on.
            std::thread::yield_now();
        }
    }
    let (n, dump) = cli_thread.join().unwrap();
    let entries = grpc_thread.join().unwrap();
    pool.wait_idle();
    pool.take_outputs(&mut out);
    assert!(pool.moves() >= 6, "moved {} times", pool.moves());
    assert!(
        during > 100,
        "only {during} rounds ran while the control threads worked"
    );
    eprintln!(
        "{total} rounds, {during} while control ran, {} moves",
        pool.moves()
    );

    // Every frame once, on its port, unchanged, in order per device.
    let on = |port: u32| -> Vec<Vec<u8>> {
        out.iter()
            .filter(|o| o.port == port)
            .map(|o| o.data.clone())
            .collect()
    };
    let want1: Vec<Vec<u8>> = (0..total).map(|s| frame(2, 1, s)).collect();
    let want2: Vec<Vec<u8>> = (0..total).map(|s| frame(4, 3, s)).collect();
    assert_eq!(on(2), want1, "device 1's frames");
    assert_eq!(on(4), want2, "device 2's frames");
    assert_eq!(out.len(), 2 * total as usize, "nothing else came out");

    // Thrift: 1 + 40 - 20 dmac entries, the deleted ones gone from the dump.
    assert!(n.trim().ends_with("21"), "{n}");
    let keyed = |k: &str| dump.lines().any(|l| l.trim_end().ends_with(k));
    assert!(keyed("0a0000001027") && keyed("0a0000001014"), "{dump}");
    assert!(!keyed("0a0000001000") && !keyed("0a0000001013"), "{dump}");
    // P4Runtime: the set-up's entry + 30 dmac entries + the smac entry, read back.
    assert_eq!(entries.len(), 32, "{entries:?}");
    // The new entries forward: device 1's MAC 0x..1027 → port 7 (unmapped: dropped and
    // counted), device 2's MAC 100 → port 9 (mapped now through the front).
    pool.map_port(2, 9, Target::Phys(9)).unwrap();
    let mut o = Vec::new();
    let mut f = vec![0x0a, 0, 0, 0, 0x10, 0x27];
    f.extend(mac(1));
    f.extend([0x08, 0, 1, 2]);
    pool.process_batch(&[(1, &f), (3, &frame(100, 3, 0))], &mut o);
    assert_eq!(o.len(), 1);
    assert_eq!((o[0].port, &o[0].data), (9, &frame(100, 3, 0)));
    assert_eq!(pool.device_stats(1).unwrap().dropped, 1);
    // The devices keep their state when the workers stop.
    let mut vs = pool.shutdown(&mut o);
    assert_eq!(
        vs.runtime(Caller::Operator, 2)
            .unwrap()
            .mt_get_num_entries("L2Ingress.dmac")
            .unwrap(),
        31
    );
    drop(rt);
}

/// P4Runtime follows the devices: one added after start-up (on the workers) is served under
/// its id at once and its tenant's token reaches it (the other tenant's does not), its
/// tenant writes entries and pushes pipelines to it there; once removed it answers NOT_FOUND
/// like an id that never existed.
#[test]
fn p4runtime_serves_devices_added_and_removed_live() {
    let mut pool = VirtWorkers::new(
        two_tenants(),
        WorkerOptions {
            workers: 2,
            rebalance_every: 0,
            ..WorkerOptions::default()
        },
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (p4rt, addr) = serve(&rt, Shared::Workers(pool.control()), &[1, 2]);
    let get = |tok: &'static str, id: u64| {
        rt.block_on(async {
            let mut c = client(addr, tok).await;
            pipeline(&mut c, id).await
        })
    };
    let not_found = |e: tonic::Status, id: u64| {
        assert_eq!(
            (e.code(), e.message().to_string()),
            (tonic::Code::NotFound, format!("Invalid device id {id}"))
        );
    };
    not_found(get("tok-a", 3).unwrap_err(), 3);
    // Device 3 for alice, added live and served at once.
    pool.add_device(
        3,
        DeviceSpec {
            json: l2(),
            owner: Some("alice".into()),
            quotas: Default::default(),
        },
    )
    .unwrap();
    pool.add_rule(rule(5, 3)).unwrap();
    pool.map_port(3, 6, Target::Phys(6)).unwrap();
    p4rt.add_device(3, &Roles::new()).unwrap();
    let info = get("tok-a", 3).unwrap();
    not_found(get("tok-b", 3).unwrap_err(), 3);
    // Alice programs it over P4Runtime and its traffic follows.
    rt.block_on(async {
        let mut c = client(addr, "tok-a").await;
        insert(&mut c, 3, dmac(&info, 2, 6)).await.unwrap();
        assert_eq!(read_all(&mut c, 3).await.unwrap().len(), 1);
    });
    let mut o = Vec::new();
    pool.process_batch(&[(5, &frame(2, 1, 7))], &mut o);
    assert_eq!(o.len(), 1);
    assert_eq!((o[0].port, &o[0].data), (6, &frame(2, 1, 7)));
    // Pipeline pushes on a device of the workers: the router (its tables now, the frame
    // dropped: a route miss), then the L2 switch again with fresh state, programmed anew.
    let router =
        tern_virt::config::load_program(std::path::Path::new(&format!("{ROOT}p4/virt/router.p4")))
            .unwrap();
    rt.block_on(async {
        let mut c = client(addr, "tok-a").await;
        push(&mut c, 3, &router).await.unwrap();
    });
    let tables = get("tok-a", 3).unwrap().tables;
    assert!(tables
        .iter()
        .any(|t| t.preamble.as_ref().unwrap().name.ends_with(".ipv4_lpm")));
    o.clear();
    pool.process_batch(&[(5, &frame(2, 1, 8)), (1, &frame(2, 1, 8))], &mut o);
    assert_eq!(o.len(), 1, "device 3 drops, device 1 forwards");
    assert_eq!((o[0].port, &o[0].data), (2, &frame(2, 1, 8)));
    rt.block_on(async {
        let mut c = client(addr, "tok-a").await;
        push(&mut c, 3, &l2()).await.unwrap();
        assert!(read_all(&mut c, 3).await.unwrap().is_empty(), "fresh state");
        insert(&mut c, 3, dmac(&info, 2, 6)).await.unwrap();
    });
    o.clear();
    pool.process_batch(&[(5, &frame(2, 1, 9))], &mut o);
    assert_eq!(o.len(), 1);
    assert_eq!((o[0].port, &o[0].data), (6, &frame(2, 1, 9)));
    // Removed: NOT_FOUND for every client, also before the server is told.
    pool.remove_device(3).unwrap();
    not_found(get("tok-a", 3).unwrap_err(), 3);
    p4rt.remove_device(3);
    not_found(get("tok-a", 3).unwrap_err(), 3);
    // The others are untouched.
    assert!(get("tok-a", 1).is_ok() && get("tok-b", 2).is_ok());
    not_found(get("tok-a", 2).unwrap_err(), 2);
    drop(pool);
    // With the workers gone, every device answers like a missing one.
    not_found(get("tok-a", 1).unwrap_err(), 1);
}

/// A P4Runtime stream of one controller: its requests' sender and its responses.
struct Stream {
    tx: tokio::sync::mpsc::Sender<p4::StreamMessageRequest>,
    rx: tonic::Streaming<p4::StreamMessageResponse>,
}

type Update = p4::stream_message_response::Update;

impl Stream {
    /// Open a stream on `device_id` and win its arbitration (election 1, default role).
    async fn primary(c: &mut Client, device_id: u64) -> Stream {
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        let resp = c
            .stream_channel(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await
            .unwrap();
        let mut s = Stream {
            tx,
            rx: resp.into_inner(),
        };
        s.send(p4::stream_message_request::Update::Arbitration(
            p4::MasterArbitrationUpdate {
                device_id,
                election_id: Some(p4::Uint128 { high: 0, low: 1 }),
                role: None,
                status: None,
            },
        ))
        .await;
        match s.next().await {
            Update::Arbitration(a) => assert_eq!(a.status.unwrap().code, 0, "primary"),
            other => panic!("expected arbitration, got {other:?}"),
        }
        s
    }

    async fn send(&self, u: p4::stream_message_request::Update) {
        self.tx
            .send(p4::StreamMessageRequest { update: Some(u) })
            .await
            .unwrap();
    }

    async fn packet_out(&self, payload: Vec<u8>) {
        self.send(p4::stream_message_request::Update::Packet(p4::PacketOut {
            payload,
            metadata: vec![],
        }))
        .await;
    }

    async fn next(&mut self) -> Update {
        let m = tokio::time::timeout(std::time::Duration::from_secs(5), self.rx.next())
            .await
            .expect("a stream message in time")
            .expect("stream open")
            .unwrap();
        m.update.expect("an update")
    }

    /// The next packet-in's payload (anything else fails the test).
    async fn packet_in(&mut self) -> Vec<u8> {
        match self.next().await {
            Update::Packet(p) => p.payload,
            other => panic!("expected a packet-in, got {other:?}"),
        }
    }
}

/// Packet-out to devices that live on workers (one device per worker, `--workers 2`): each
/// tenant's packet-out enters its own device's pipeline on the device's CPU port (leased from
/// the device's worker); a frame the pipeline sends back to the CPU port comes back as a
/// packet-in on that tenant's stream only, and a frame it sends to a physical port reaches the
/// output sink on that port. Still so after the front moved alice's device to bob's worker.
#[test]
fn packet_out_reaches_a_device_on_a_worker_and_packet_in_returns_to_its_tenant() {
    const CPU: u32 = 100;
    let mut vs = two_tenants();
    let program = tern_model::load(&l2()).unwrap();
    for id in [1, 2] {
        // Packet-outs enter on virtual port 100 (the lowest mapped to cpu); the L2 switch
        // never sends a frame back out of its ingress port, so MAC 9 goes to virtual port
        // 101, also mapped to cpu: back to the controller as a packet-in.
        vs.map_port(id, CPU, Target::Cpu).unwrap();
        vs.map_port(id, CPU + 1, Target::Cpu).unwrap();
        let mut rt = vs.runtime(Caller::Operator, id).unwrap();
        let mut cli = tern_control::Cli::new(&program);
        let out = cli.execute(
            &mut rt,
            &format!(
                "table_add L2Ingress.dmac forward 0x0a0000000009 => {}",
                CPU + 1
            ),
        );
        assert!(!cli.last_command_failed(), "{out}");
    }
    let mut pool = VirtWorkers::new(
        vs,
        WorkerOptions {
            workers: 2,
            rebalance_every: 0,
            ..WorkerOptions::default()
        },
    );
    assert_ne!(
        pool.worker_of(1),
        pool.worker_of(2),
        "one device per worker"
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (p4rt, addr) = serve(&rt, Shared::Workers(pool.control()), &[1, 2]);
    let (tx, sink) = std::sync::mpsc::channel::<Vec<OutputPacket>>();
    p4rt.set_output_sink(Arc::new(move |outs| {
        let _ = tx.send(outs);
    }));
    let sunk = || -> Vec<(u32, Vec<u8>)> {
        sink.recv_timeout(std::time::Duration::from_secs(5))
            .expect("packet-out output in time")
            .into_iter()
            .map(|o| (o.port, o.data))
            .collect()
    };
    let (mut a, mut b) = rt.block_on(async {
        let mut ca = client(addr, "tok-a").await;
        let mut cb = client(addr, "tok-b").await;
        (
            Stream::primary(&mut ca, 1).await,
            Stream::primary(&mut cb, 2).await,
        )
    });
    let round = |a: &mut Stream, b: &mut Stream, seq: u32| {
        rt.block_on(async {
            // Alice's packet-out to MAC 9 comes back to alice.
            let fa = frame(9, 1, seq);
            a.packet_out(fa.clone()).await;
            assert_eq!(a.packet_in().await, fa);
            // Bob's comes back to bob, and it is the first thing bob hears: none of alice's
            // reached him.
            let fb = frame(9, 3, seq + 1);
            b.packet_out(fb.clone()).await;
            assert_eq!(b.packet_in().await, fb);
            // And the other way round: alice hears her next one, not bob's.
            let fa2 = frame(9, 1, seq + 2);
            a.packet_out(fa2.clone()).await;
            assert_eq!(a.packet_in().await, fa2);
        });
        // Packet-outs through the devices' dmac entries to physical ports.
        let pa = frame(2, 1, seq + 3);
        rt.block_on(a.packet_out(pa.clone()));
        assert_eq!(sunk(), vec![(2, pa)]);
        let pb = frame(4, 3, seq + 4);
        rt.block_on(b.packet_out(pb.clone()));
        assert_eq!(sunk(), vec![(4, pb)]);
    };
    round(&mut a, &mut b, 0);
    // The front moves alice's device onto bob's worker: packet-out follows it.
    let to = pool.worker_of(2).unwrap();
    pool.move_group(1, to).unwrap();
    assert_eq!(pool.worker_of(1), Some(to));
    round(&mut a, &mut b, 10);
    // The devices' own counters saw the packet-outs (alice 3 per round, bob 2).
    let (sa, sb) = (pool.device_stats(1).unwrap(), pool.device_stats(2).unwrap());
    assert_eq!((sa.packets_in, sa.to_cpu, sa.to_phys), (6, 4, 2));
    assert_eq!((sb.packets_in, sb.to_cpu, sb.to_phys), (4, 2, 2));
    drop((a, b));
    drop(pool);
}
