//! End-to-end tests: a tonic P4Runtime client talks to the tern-p4rt server over loopback.

use prost::Message;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tern_dataplane::{Switch, SwitchOptions};
use tern_p4rt::p4info::parse_p4info_text;
use tern_p4rt::proto::google::rpc;
use tern_p4rt::proto::p4::config::v1 as cfg;
use tern_p4rt::proto::p4::v1 as p4;
use tern_p4rt::proto::p4::v1::p4_runtime_client::P4RuntimeClient;
use tern_p4rt::{Handle, Options};
use tokio::sync::mpsc;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tokio_stream::StreamExt;
use tonic::transport::Channel;
use tonic::Code;

const TESTDATA: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/fixtures/bmv2/targets/simple_switch_grpc/tests/testdata"
);

fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!("{TESTDATA}/{name}")).expect("fixture")
}

fn p4info(name: &str) -> cfg::P4Info {
    parse_p4info_text(&fixture(&format!("{name}.proto.txt"))).expect("p4info")
}

struct Env {
    client: P4RuntimeClient<Channel>,
    handle: Handle,
    sw: Arc<Mutex<Switch>>,
}

async fn start(cpu_port: Option<u32>) -> Env {
    let json = fixture("ternary.json");
    let sw = Arc::new(Mutex::new(
        Switch::from_json(&json, SwitchOptions::default()).unwrap(),
    ));
    let handle = Handle::new(
        sw.clone(),
        Options {
            device_id: 0,
            cpu_port,
            initial: None,
            switch_options: SwitchOptions::default(),
        },
    )
    .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let svc = handle.service();
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(svc)
            .serve_with_incoming(TcpListenerStream::new(listener))
            .await
            .unwrap();
    });
    let client = P4RuntimeClient::connect(format!("http://{addr}"))
        .await
        .unwrap();
    Env { client, handle, sw }
}

fn eid(low: u64) -> Option<p4::Uint128> {
    Some(p4::Uint128 { high: 0, low })
}

struct Stream {
    tx: mpsc::Sender<p4::StreamMessageRequest>,
    rx: tonic::Streaming<p4::StreamMessageResponse>,
}

async fn next_list(s: &mut Stream) -> p4::DigestList {
    match s.next().await {
        p4::stream_message_response::Update::Digest(d) => d,
        other => panic!("expected digest list, got {other:?}"),
    }
}

impl Stream {
    async fn open(
        client: &mut P4RuntimeClient<Channel>,
        election: u64,
    ) -> (Stream, p4::MasterArbitrationUpdate) {
        let (tx, rx) = mpsc::channel(16);
        let resp = client
            .stream_channel(ReceiverStream::new(rx))
            .await
            .unwrap();
        let mut s = Stream {
            tx,
            rx: resp.into_inner(),
        };
        s.send(p4::stream_message_request::Update::Arbitration(
            p4::MasterArbitrationUpdate {
                device_id: 0,
                election_id: eid(election),
                ..Default::default()
            },
        ))
        .await;
        let a = s.arbitration().await;
        (s, a)
    }
    async fn send(&self, u: p4::stream_message_request::Update) {
        self.tx
            .send(p4::StreamMessageRequest { update: Some(u) })
            .await
            .unwrap();
    }
    async fn next(&mut self) -> p4::stream_message_response::Update {
        let m = tokio::time::timeout(Duration::from_secs(5), self.rx.next())
            .await
            .expect("stream message in time")
            .expect("stream open")
            .expect("stream ok");
        m.update.unwrap()
    }
    /// The next message if one comes within `wait`.
    async fn next_within(&mut self, wait: Duration) -> Option<p4::stream_message_response::Update> {
        let m = tokio::time::timeout(wait, self.rx.next()).await.ok()?;
        Some(m.expect("stream open").expect("stream ok").update.unwrap())
    }
    async fn arbitration(&mut self) -> p4::MasterArbitrationUpdate {
        match self.next().await {
            p4::stream_message_response::Update::Arbitration(a) => a,
            other => panic!("expected arbitration, got {other:?}"),
        }
    }
}

async fn set_pipeline(
    c: &mut P4RuntimeClient<Channel>,
    name: &str,
    election: u64,
) -> Result<(), tonic::Status> {
    c.set_forwarding_pipeline_config(p4::SetForwardingPipelineConfigRequest {
        device_id: 0,
        election_id: eid(election),
        action: p4::set_forwarding_pipeline_config_request::Action::VerifyAndCommit as i32,
        config: Some(p4::ForwardingPipelineConfig {
            p4info: Some(p4info(name)),
            p4_device_config: fixture(&format!("{name}.json")).into_bytes(),
            cookie: Some(p4::forwarding_pipeline_config::Cookie { cookie: 42 }),
        }),
        ..Default::default()
    })
    .await
    .map(|_| ())
}

/// VerifyAndCommit of `info` and `device_config` on device 0, with no cookie.
async fn commit(
    c: &mut P4RuntimeClient<Channel>,
    election_id: Option<p4::Uint128>,
    info: cfg::P4Info,
    device_config: String,
) {
    c.set_forwarding_pipeline_config(p4::SetForwardingPipelineConfigRequest {
        device_id: 0,
        election_id,
        action: p4::set_forwarding_pipeline_config_request::Action::VerifyAndCommit as i32,
        config: Some(p4::ForwardingPipelineConfig {
            p4info: Some(info),
            p4_device_config: device_config.into_bytes(),
            cookie: None,
        }),
        ..Default::default()
    })
    .await
    .unwrap();
}

fn te(
    table_id: u32,
    matches: Vec<p4::FieldMatch>,
    action_id: u32,
    params: Vec<(u32, Vec<u8>)>,
    priority: i32,
) -> p4::TableEntry {
    p4::TableEntry {
        table_id,
        r#match: matches,
        action: Some(p4::TableAction {
            r#type: Some(p4::table_action::Type::Action(p4::Action {
                action_id,
                params: params
                    .into_iter()
                    .map(|(param_id, value)| p4::action::Param { param_id, value })
                    .collect(),
            })),
        }),
        priority,
        ..Default::default()
    }
}

fn ternary(field_id: u32, value: &[u8], mask: &[u8]) -> p4::FieldMatch {
    p4::FieldMatch {
        field_id,
        field_match_type: Some(p4::field_match::FieldMatchType::Ternary(
            p4::field_match::Ternary {
                value: value.to_vec(),
                mask: mask.to_vec(),
            },
        )),
    }
}

fn exact(field_id: u32, value: &[u8]) -> p4::FieldMatch {
    p4::FieldMatch {
        field_id,
        field_match_type: Some(p4::field_match::FieldMatchType::Exact(
            p4::field_match::Exact {
                value: value.to_vec(),
            },
        )),
    }
}

fn lpm(field_id: u32, value: &[u8], prefix_len: i32) -> p4::FieldMatch {
    p4::FieldMatch {
        field_id,
        field_match_type: Some(p4::field_match::FieldMatchType::Lpm(p4::field_match::Lpm {
            value: value.to_vec(),
            prefix_len,
        })),
    }
}

fn upd(ty: p4::update::Type, e: p4::entity::Entity) -> p4::Update {
    p4::Update {
        r#type: ty as i32,
        entity: Some(p4::Entity { entity: Some(e) }),
    }
}

async fn write(
    c: &mut P4RuntimeClient<Channel>,
    election: u64,
    updates: Vec<p4::Update>,
) -> Result<(), tonic::Status> {
    c.write(p4::WriteRequest {
        device_id: 0,
        election_id: eid(election),
        updates,
        ..Default::default()
    })
    .await
    .map(|_| ())
}

async fn read(
    c: &mut P4RuntimeClient<Channel>,
    e: p4::entity::Entity,
) -> Result<Vec<p4::entity::Entity>, tonic::Status> {
    let mut s = c
        .read(p4::ReadRequest {
            device_id: 0,
            entities: vec![p4::Entity { entity: Some(e) }],
            ..Default::default()
        })
        .await?
        .into_inner();
    let mut out = Vec::new();
    while let Some(r) = s.next().await {
        out.extend(r?.entities.into_iter().filter_map(|e| e.entity));
    }
    Ok(out)
}

/// The per-update `p4.v1.Error` codes of a failed Write.
fn write_errors(st: &tonic::Status) -> Vec<i32> {
    assert_eq!(st.code(), Code::Unknown, "{st:?}");
    let s = rpc::Status::decode(st.details()).expect("google.rpc.Status in details");
    s.details
        .iter()
        .map(|a| {
            assert_eq!(a.type_url, "type.googleapis.com/p4.v1.Error");
            p4::Error::decode(a.value.as_slice())
                .unwrap()
                .canonical_code
        })
        .collect()
}

fn table_id(info: &cfg::P4Info, name: &str) -> u32 {
    info.tables
        .iter()
        .find(|t| t.preamble.as_ref().unwrap().name == name)
        .unwrap()
        .preamble
        .as_ref()
        .unwrap()
        .id
}

fn action_id(info: &cfg::P4Info, name: &str) -> u32 {
    info.actions
        .iter()
        .find(|t| t.preamble.as_ref().unwrap().name == name)
        .unwrap()
        .preamble
        .as_ref()
        .unwrap()
        .id
}

#[tokio::test]
async fn pipeline_config_set_get_and_capabilities() {
    tern_fixtures::require!();
    let mut env = start(None).await;
    let c = &mut env.client;
    let caps = c
        .capabilities(p4::CapabilitiesRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(caps.p4runtime_api_version, "1.4.1");
    let err = c
        .get_forwarding_pipeline_config(p4::GetForwardingPipelineConfigRequest {
            device_id: 0,
            response_type: 0,
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    let (_s, a) = Stream::open(c, 1).await;
    assert_eq!(a.status.unwrap().code, 0, "single client is primary");
    set_pipeline(c, "ternary", 1).await.unwrap();
    let got = c
        .get_forwarding_pipeline_config(p4::GetForwardingPipelineConfigRequest {
            device_id: 0,
            response_type: p4::get_forwarding_pipeline_config_request::ResponseType::P4infoAndCookie
                as i32,
        })
        .await
        .unwrap()
        .into_inner()
        .config
        .unwrap();
    assert_eq!(got.p4info.unwrap(), p4info("ternary"));
    assert!(got.p4_device_config.is_empty());
    assert_eq!(got.cookie.unwrap().cookie, 42);
    // A JSON that does not parse, and a P4Info naming tables the JSON lacks, are rejected.
    let bad = c
        .set_forwarding_pipeline_config(p4::SetForwardingPipelineConfigRequest {
            device_id: 0,
            election_id: eid(1),
            action: p4::set_forwarding_pipeline_config_request::Action::Verify as i32,
            config: Some(p4::ForwardingPipelineConfig {
                p4info: Some(p4info("ternary")),
                p4_device_config: b"{not json".to_vec(),
                cookie: None,
            }),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(bad.code(), Code::InvalidArgument);
    let bad = c
        .set_forwarding_pipeline_config(p4::SetForwardingPipelineConfigRequest {
            device_id: 0,
            election_id: eid(1),
            action: p4::set_forwarding_pipeline_config_request::Action::VerifyAndCommit as i32,
            config: Some(p4::ForwardingPipelineConfig {
                p4info: Some(p4info("simple_router")),
                p4_device_config: fixture("ternary.json").into_bytes(),
                cookie: None,
            }),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(bad.code(), Code::InvalidArgument);
    assert!(
        bad.message().contains("not in the BMv2 JSON"),
        "{}",
        bad.message()
    );
    // VERIFY_AND_SAVE + COMMIT switches the program.
    let mut req = p4::SetForwardingPipelineConfigRequest {
        device_id: 0,
        election_id: eid(1),
        action: p4::set_forwarding_pipeline_config_request::Action::VerifyAndSave as i32,
        config: Some(p4::ForwardingPipelineConfig {
            p4info: Some(p4info("simple_router")),
            p4_device_config: fixture("simple_router.json").into_bytes(),
            cookie: None,
        }),
        ..Default::default()
    };
    c.set_forwarding_pipeline_config(req.clone()).await.unwrap();
    req.action = p4::set_forwarding_pipeline_config_request::Action::Commit as i32;
    req.config = None;
    c.set_forwarding_pipeline_config(req).await.unwrap();
    let got = c
        .get_forwarding_pipeline_config(p4::GetForwardingPipelineConfigRequest {
            device_id: 0,
            response_type: 0,
        })
        .await
        .unwrap()
        .into_inner()
        .config
        .unwrap();
    assert_eq!(
        got.p4_device_config,
        fixture("simple_router.json").into_bytes()
    );
    // Wrong device id.
    let err = c
        .get_forwarding_pipeline_config(p4::GetForwardingPipelineConfigRequest {
            device_id: 7,
            response_type: 0,
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
}

#[tokio::test]
async fn ternary_entries_priorities_and_errors() {
    tern_fixtures::require!();
    use p4::entity::Entity as E;
    use p4::update::Type as T;
    let mut env = start(None).await;
    let c = &mut env.client;
    let (_s, _) = Stream::open(c, 1).await;
    set_pipeline(c, "ternary", 1).await.unwrap();
    let info = p4info("ternary");
    let t = table_id(&info, "ingress.ter");
    let (s1, s2) = (
        action_id(&info, "ingress.send_1"),
        action_id(&info, "ingress.send_2"),
    );
    // Zero-padded value (4 bytes for a 16-bit field? the field width decides; use 2 bytes padded to 3).
    let low = te(
        t,
        vec![ternary(1, &[0, 0x11, 0x00], &[0xff, 0x00])],
        s1,
        vec![],
        10,
    );
    let high = te(
        t,
        vec![ternary(1, &[0x11, 0x22], &[0xff, 0xff])],
        s2,
        vec![],
        20,
    );
    write(
        c,
        1,
        vec![
            upd(T::Insert, E::TableEntry(low.clone())),
            upd(T::Insert, E::TableEntry(high.clone())),
        ],
    )
    .await
    .unwrap();
    // The data plane honours P4Runtime priorities (larger wins): 0x1122 → send_2 (port 2).
    let pkt = [0x11u8, 0x22, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    let outs = env.handle.inject(0, &pkt);
    assert_eq!(outs.iter().map(|o| o.port).collect::<Vec<_>>(), vec![2]);
    let outs = env
        .handle
        .inject(0, &[0x11u8, 0x33, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(outs.iter().map(|o| o.port).collect::<Vec<_>>(), vec![1]);
    // Read back: canonical byte strings, P4Runtime priorities.
    let mut got = read(
        c,
        E::TableEntry(p4::TableEntry {
            table_id: t,
            ..Default::default()
        }),
    )
    .await
    .unwrap();
    got.sort_by_key(|e| match e {
        E::TableEntry(t) => t.priority,
        _ => 0,
    });
    let want_low = te(
        t,
        vec![ternary(1, &[0x11, 0x00], &[0xff, 0x00])],
        s1,
        vec![],
        10,
    );
    assert_eq!(
        got,
        vec![E::TableEntry(want_low.clone()), E::TableEntry(high.clone())]
    );
    // Duplicate insert + missing priority in one batch: one p4.v1.Error per update, in order.
    let mut nop = high.clone();
    nop.priority = 0;
    let other = te(
        t,
        vec![ternary(1, &[0x01, 0x00], &[0xff, 0x00])],
        s1,
        vec![],
        5,
    );
    let err = write(
        c,
        1,
        vec![
            upd(T::Insert, E::TableEntry(high.clone())),
            upd(T::Insert, E::TableEntry(nop)),
            upd(T::Insert, E::TableEntry(other.clone())),
        ],
    )
    .await
    .unwrap_err();
    assert_eq!(
        write_errors(&err),
        vec![Code::AlreadyExists as i32, Code::InvalidArgument as i32, 0]
    );
    // Value bits outside the mask, value too wide, unknown table, unknown action.
    let bad = vec![
        upd(
            T::Insert,
            E::TableEntry(te(
                t,
                vec![ternary(1, &[0x11, 0x11], &[0xff, 0x00])],
                s1,
                vec![],
                3,
            )),
        ),
        upd(
            T::Insert,
            E::TableEntry(te(
                t,
                vec![ternary(1, &[1, 0, 0], &[0xff, 0xff])],
                s1,
                vec![],
                3,
            )),
        ),
        upd(T::Insert, E::TableEntry(te(12345, vec![], s1, vec![], 3))),
        upd(
            T::Insert,
            E::TableEntry(te(t, vec![ternary(1, &[2, 0], &[0xff, 0])], 999, vec![], 3)),
        ),
    ];
    let err = write(c, 1, bad).await.unwrap_err();
    assert_eq!(write_errors(&err), vec![Code::InvalidArgument as i32; 4]);
    // Modify changes the action; delete removes; deleting again is NOT_FOUND.
    let mut m = want_low.clone();
    m.action = high.action.clone();
    write(c, 1, vec![upd(T::Modify, E::TableEntry(m))])
        .await
        .unwrap();
    let outs = env
        .handle
        .inject(0, &[0x11u8, 0x33, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(outs.iter().map(|o| o.port).collect::<Vec<_>>(), vec![2]);
    write(
        c,
        1,
        vec![
            upd(T::Delete, E::TableEntry(want_low.clone())),
            upd(T::Delete, E::TableEntry(other)),
        ],
    )
    .await
    .unwrap();
    let err = write(c, 1, vec![upd(T::Delete, E::TableEntry(want_low))])
        .await
        .unwrap_err();
    assert_eq!(write_errors(&err), vec![Code::NotFound as i32]);
    let got = read(
        c,
        E::TableEntry(p4::TableEntry {
            table_id: 0,
            ..Default::default()
        }),
    )
    .await
    .unwrap();
    assert_eq!(got, vec![E::TableEntry(high)]);
    // Default action: modify then read back.
    let mut d = te(t, vec![], s2, vec![], 0);
    d.is_default_action = true;
    write(c, 1, vec![upd(T::Modify, E::TableEntry(d.clone()))])
        .await
        .unwrap();
    let got = read(
        c,
        E::TableEntry(p4::TableEntry {
            table_id: t,
            is_default_action: true,
            ..Default::default()
        }),
    )
    .await
    .unwrap();
    assert_eq!(got, vec![E::TableEntry(d.clone())]);
    let outs = env
        .handle
        .inject(0, &[0x99u8, 0x99, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(outs.iter().map(|o| o.port).collect::<Vec<_>>(), vec![2]);
    let err = write(c, 1, vec![upd(T::Insert, E::TableEntry(d))])
        .await
        .unwrap_err();
    assert_eq!(write_errors(&err), vec![Code::InvalidArgument as i32]);
}

#[tokio::test]
async fn exact_and_lpm_entries_simple_router() {
    tern_fixtures::require!();
    use p4::entity::Entity as E;
    use p4::update::Type as T;
    let mut env = start(None).await;
    let c = &mut env.client;
    // No stream and no election id: accepted (PI's leniency for PTF runners).
    set_pipeline(c, "simple_router", 0).await.unwrap();
    let info = p4info("simple_router");
    let lpm_t = table_id(&info, "ipv4_lpm");
    let set_nhop = action_id(&info, "set_nhop");
    let fwd = table_id(&info, "forward");
    let set_dmac = action_id(&info, "set_dmac");
    let e1 = te(
        lpm_t,
        vec![lpm(1, &[10, 0, 0, 0], 8)],
        set_nhop,
        vec![(1, vec![10, 0, 0, 1]), (2, vec![0, 3])],
        0,
    );
    let e2 = te(
        fwd,
        vec![exact(1, &[10, 0, 0, 1])],
        set_dmac,
        vec![(1, vec![0, 0, 0, 0, 0, 0, 0xaa])],
        0,
    );
    write(
        c,
        0,
        vec![
            upd(T::Insert, E::TableEntry(e1)),
            upd(T::Insert, E::TableEntry(e2)),
        ],
    )
    .await
    .unwrap();
    let got = read(
        c,
        E::TableEntry(p4::TableEntry {
            table_id: lpm_t,
            ..Default::default()
        }),
    )
    .await
    .unwrap();
    let want = te(
        lpm_t,
        vec![lpm(1, &[10, 0, 0, 0], 8)],
        set_nhop,
        vec![(1, vec![10, 0, 0, 1]), (2, vec![3])],
        0,
    );
    assert_eq!(got, vec![E::TableEntry(want)]);
    let got = read(
        c,
        E::TableEntry(p4::TableEntry {
            table_id: fwd,
            ..Default::default()
        }),
    )
    .await
    .unwrap();
    let want = te(
        fwd,
        vec![exact(1, &[10, 0, 0, 1])],
        set_dmac,
        vec![(1, vec![0xaa])],
        0,
    );
    assert_eq!(got, vec![E::TableEntry(want)]);
    // LPM value with bits beyond the prefix, non-zero priority on an exact table, missing param.
    let bad = vec![
        upd(
            T::Insert,
            E::TableEntry(te(
                lpm_t,
                vec![lpm(1, &[10, 0, 0, 1], 8)],
                set_nhop,
                vec![(1, vec![1]), (2, vec![1])],
                0,
            )),
        ),
        upd(
            T::Insert,
            E::TableEntry(te(
                fwd,
                vec![exact(1, &[1])],
                set_dmac,
                vec![(1, vec![1])],
                7,
            )),
        ),
        upd(
            T::Insert,
            E::TableEntry(te(fwd, vec![exact(1, &[2])], set_dmac, vec![], 0)),
        ),
    ];
    let err = write(c, 0, bad).await.unwrap_err();
    assert_eq!(write_errors(&err), vec![Code::InvalidArgument as i32; 3]);
    // Once a client arbitrates, requests without its election id are refused.
    let (_s, _) = Stream::open(c, 5).await;
    let err = write(c, 0, vec![]).await.unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied);
}

#[tokio::test]
async fn direct_counter_counts_packets() {
    tern_fixtures::require!();
    use p4::entity::Entity as E;
    use p4::update::Type as T;
    let mut env = start(None).await;
    let c = &mut env.client;
    set_pipeline(c, "counter", 0).await.unwrap();
    let info = p4info("counter");
    let t = table_id(&info, "t_redirect");
    let a = action_id(&info, "port_redirect");
    let pkt = vec![0u8; 60];
    let e = te(t, vec![exact(1, &[60])], a, vec![], 0);
    write(c, 0, vec![upd(T::Insert, E::TableEntry(e.clone()))])
        .await
        .unwrap();
    for _ in 0..3 {
        let outs = env.handle.inject(4, &pkt);
        assert_eq!(outs.len(), 1);
        assert_eq!(outs[0].port, 4);
    }
    let got = read(
        c,
        E::DirectCounterEntry(p4::DirectCounterEntry {
            table_entry: Some(p4::TableEntry {
                table_id: t,
                ..Default::default()
            }),
            data: None,
        }),
    )
    .await
    .unwrap();
    let E::DirectCounterEntry(d) = &got[0] else {
        panic!("{got:?}")
    };
    assert_eq!(got.len(), 1);
    assert_eq!(
        d.data,
        Some(p4::CounterData {
            byte_count: 180,
            packet_count: 3
        })
    );
    // counter_data on a table-entry read, then MODIFY resets it.
    let mut f = p4::TableEntry {
        table_id: t,
        ..Default::default()
    };
    f.counter_data = Some(p4::CounterData::default());
    let got = read(c, E::TableEntry(f.clone())).await.unwrap();
    let E::TableEntry(r) = &got[0] else { panic!() };
    assert_eq!(r.counter_data.unwrap().packet_count, 3);
    write(
        c,
        0,
        vec![upd(
            T::Modify,
            E::DirectCounterEntry(p4::DirectCounterEntry {
                table_entry: Some(e),
                data: Some(p4::CounterData::default()),
            }),
        )],
    )
    .await
    .unwrap();
    let got = read(c, E::TableEntry(f)).await.unwrap();
    let E::TableEntry(r) = &got[0] else { panic!() };
    assert_eq!(r.counter_data.unwrap(), p4::CounterData::default());
}

#[tokio::test]
async fn multicast_groups_and_clone_sessions() {
    tern_fixtures::require!();
    use p4::entity::Entity as E;
    use p4::packet_replication_engine_entry::Type as P;
    use p4::update::Type as T;
    let mut env = start(None).await;
    let c = &mut env.client;
    set_pipeline(c, "ternary", 0).await.unwrap();
    let rep = |port: u32, instance: u32| p4::Replica {
        port_kind: Some(p4::replica::PortKind::EgressPort(port)),
        instance,
    };
    let mg = |id: u32, r: Vec<p4::Replica>| {
        E::PacketReplicationEngineEntry(p4::PacketReplicationEngineEntry {
            r#type: Some(P::MulticastGroupEntry(p4::MulticastGroupEntry {
                multicast_group_id: id,
                replicas: r,
                metadata: vec![],
            })),
        })
    };
    write(
        c,
        0,
        vec![upd(T::Insert, mg(1, vec![rep(1, 1), rep(2, 1), rep(3, 2)]))],
    )
    .await
    .unwrap();
    let err = write(c, 0, vec![upd(T::Insert, mg(1, vec![rep(1, 1)]))])
        .await
        .unwrap_err();
    assert_eq!(write_errors(&err), vec![Code::AlreadyExists as i32]);
    write(c, 0, vec![upd(T::Modify, mg(1, vec![rep(5, 1)]))])
        .await
        .unwrap();
    write(c, 0, vec![upd(T::Insert, mg(2, vec![rep(6, 0)]))])
        .await
        .unwrap();
    let got = read(c, mg(0, vec![])).await.unwrap();
    assert_eq!(got, vec![mg(1, vec![rep(5, 1)]), mg(2, vec![rep(6, 0)])]);
    write(c, 0, vec![upd(T::Delete, mg(2, vec![]))])
        .await
        .unwrap();
    let err = write(c, 0, vec![upd(T::Delete, mg(2, vec![]))])
        .await
        .unwrap_err();
    assert_eq!(write_errors(&err), vec![Code::NotFound as i32]);
    let cs = |id: u32, r: Vec<p4::Replica>| {
        E::PacketReplicationEngineEntry(p4::PacketReplicationEngineEntry {
            r#type: Some(P::CloneSessionEntry(p4::CloneSessionEntry {
                session_id: id,
                replicas: r,
                class_of_service: 0,
                packet_length_bytes: 0,
            })),
        })
    };
    write(
        c,
        0,
        vec![
            upd(T::Insert, cs(5, vec![rep(7, 1)])),
            upd(T::Insert, cs(6, vec![rep(1, 1), rep(2, 1)])),
        ],
    )
    .await
    .unwrap();
    let got = read(c, cs(0, vec![])).await.unwrap();
    assert_eq!(
        got,
        vec![cs(5, vec![rep(7, 1)]), cs(6, vec![rep(1, 1), rep(2, 1)])]
    );
    // Clone-session groups are internal: not listed as multicast groups.
    let got = read(c, mg(0, vec![])).await.unwrap();
    assert_eq!(got, vec![mg(1, vec![rep(5, 1)])]);
    let err = write(c, 0, vec![upd(T::Insert, cs(40000, vec![rep(1, 1)]))])
        .await
        .unwrap_err();
    assert_eq!(write_errors(&err), vec![Code::InvalidArgument as i32]);
    write(c, 0, vec![upd(T::Delete, cs(6, vec![]))])
        .await
        .unwrap();
    assert_eq!(
        read(c, cs(0, vec![])).await.unwrap(),
        vec![cs(5, vec![rep(7, 1)])]
    );
}

#[tokio::test]
async fn packet_out_becomes_packet_in() {
    tern_fixtures::require!();
    let mut env = start(Some(64)).await;
    let c = &mut env.client;
    let (mut s, _) = Stream::open(c, 1).await;
    set_pipeline(c, "packet_io", 1).await.unwrap();
    let payload = b"\x01\x02\x03\x04\x05\x06\x0a\x0b\x0c\x0d\x0e\x0f\x08\x00hello".to_vec();
    s.send(p4::stream_message_request::Update::Packet(p4::PacketOut {
        payload: payload.clone(),
        metadata: vec![],
    }))
    .await;
    match s.next().await {
        p4::stream_message_response::Update::Packet(p) => assert_eq!(p.payload, payload),
        other => panic!("expected packet-in, got {other:?}"),
    }
}

#[tokio::test]
async fn controller_headers_are_packed_and_unpacked() {
    tern_fixtures::require!();
    // A P4Info with packet_in {ingress_port:9, _pad:7} and packet_out {egress_port:9, _pad:7}.
    let mut info = p4info("packet_io");
    let md = |id: u32, name: &str, w: i32| cfg::controller_packet_metadata::Metadata {
        id,
        name: name.into(),
        bitwidth: w,
        ..Default::default()
    };
    for (n, f) in [("packet_in", "ingress_port"), ("packet_out", "egress_port")] {
        info.controller_packet_metadata
            .push(cfg::ControllerPacketMetadata {
                preamble: Some(cfg::Preamble {
                    id: 0x0400_0001,
                    name: n.into(),
                    ..Default::default()
                }),
                metadata: vec![md(1, f, 9), md(2, "_pad", 7)],
            });
    }
    let mut env = start(Some(64)).await;
    let c = &mut env.client;
    let (mut s, _) = Stream::open(c, 1).await;
    commit(c, eid(1), info, fixture("packet_io.json")).await;
    // egress_port = 0x1ab (zero-padded to 4 bytes, as the tutorials send it): header bytes d5 80.
    let meta = vec![p4::PacketMetadata {
        metadata_id: 1,
        value: vec![0, 0, 1, 0xab],
    }];
    s.send(p4::stream_message_request::Update::Packet(p4::PacketOut {
        payload: b"abc".to_vec(),
        metadata: meta,
    }))
    .await;
    match s.next().await {
        p4::stream_message_response::Update::Packet(p) => {
            // The program echoes the frame to the CPU: the same 2 header bytes come back as packet_in.
            assert_eq!(p.payload, b"abc".to_vec());
            assert_eq!(
                p.metadata,
                vec![
                    p4::PacketMetadata {
                        metadata_id: 1,
                        value: vec![1, 0xab]
                    },
                    p4::PacketMetadata {
                        metadata_id: 2,
                        value: vec![0]
                    },
                ]
            );
        }
        other => panic!("expected packet-in, got {other:?}"),
    }
    // A value too wide for its field is reported on the stream, and the stream keeps working.
    let meta = vec![p4::PacketMetadata {
        metadata_id: 1,
        value: vec![2, 0],
    }];
    s.send(p4::stream_message_request::Update::Packet(p4::PacketOut {
        payload: b"x".to_vec(),
        metadata: meta,
    }))
    .await;
    match s.next().await {
        p4::stream_message_response::Update::Error(e) => {
            assert_eq!(e.canonical_code, Code::InvalidArgument as i32)
        }
        other => panic!("expected stream error, got {other:?}"),
    }
    // Packet-out traffic to other ports goes to the output sink (ternary.json: send_1 → port 1).
    let sunk = Arc::new(Mutex::new(Vec::new()));
    let sink_store = sunk.clone();
    env.handle.set_output_sink(Arc::new(move |outs| {
        sink_store.lock().unwrap().extend(outs)
    }));
    set_pipeline(c, "ternary", 1).await.unwrap();
    let info = p4info("ternary");
    let t = table_id(&info, "ingress.ter");
    let e = te(
        t,
        vec![ternary(1, &[0xab, 0xcd], &[0xff, 0xff])],
        action_id(&info, "ingress.send_1"),
        vec![],
        1,
    );
    write(
        c,
        1,
        vec![upd(
            p4::update::Type::Insert,
            p4::entity::Entity::TableEntry(e),
        )],
    )
    .await
    .unwrap();
    let frame = vec![0xab, 0xcd, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14];
    s.send(p4::stream_message_request::Update::Packet(p4::PacketOut {
        payload: frame.clone(),
        metadata: vec![],
    }))
    .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while sunk.lock().unwrap().is_empty() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        *sunk.lock().unwrap(),
        vec![tern_runtime::OutputPacket {
            port: 1,
            data: frame
        }]
    );
}

#[tokio::test]
async fn digests_are_streamed_after_configuration() {
    tern_fixtures::require!();
    use p4::entity::Entity as E;
    use p4::update::Type as T;
    let mut env = start(None).await;
    let c = &mut env.client;
    let (mut s, _) = Stream::open(c, 1).await;
    set_pipeline(c, "digest", 1).await.unwrap();
    let info = p4info("digest");
    let did = info.digests[0].preamble.as_ref().unwrap().id;
    let frame = [
        vec![0xffu8; 6],
        vec![0x00, 0x11, 0x22, 0x33, 0x44, 0x55],
        vec![0x08, 0x00],
        vec![0; 50],
    ]
    .concat();
    // Not configured yet: nothing is streamed.
    env.handle.inject(3, &frame);
    let entry = |cfg: Option<p4::digest_entry::Config>| {
        E::DigestEntry(p4::DigestEntry {
            digest_id: did,
            config: cfg,
        })
    };
    let conf = p4::digest_entry::Config {
        max_timeout_ns: 0,
        max_list_size: 1,
        ack_timeout_ns: 60_000_000_000,
    };
    let err = write(c, 1, vec![upd(T::Modify, entry(Some(conf)))])
        .await
        .unwrap_err();
    assert_eq!(write_errors(&err), vec![Code::NotFound as i32]);
    write(c, 1, vec![upd(T::Insert, entry(Some(conf)))])
        .await
        .unwrap();
    let err = write(c, 1, vec![upd(T::Insert, entry(Some(conf)))])
        .await
        .unwrap_err();
    assert_eq!(write_errors(&err), vec![Code::AlreadyExists as i32]);
    assert_eq!(read(c, entry(None)).await.unwrap(), vec![entry(Some(conf))]);
    env.handle.inject(3, &frame);
    // The same sample again before the ack is suppressed; another source MAC is not.
    env.handle.inject(3, &frame);
    let mut frame2 = frame.clone();
    frame2[11] = 0x66;
    env.handle.inject(3, &frame2);
    let bits = |v: &[u8]| p4::P4Data {
        data: Some(p4::p4_data::Data::Bitstring(v.to_vec())),
    };
    let sample = |mac: &[u8]| p4::P4Data {
        data: Some(p4::p4_data::Data::Struct(p4::P4StructLike {
            members: vec![bits(mac), bits(&[3])],
        })),
    };
    let d1 = next_list(&mut s).await;
    assert_eq!(d1.digest_id, did);
    assert_eq!(d1.data, vec![sample(&[0x11, 0x22, 0x33, 0x44, 0x55])]);
    let d2 = next_list(&mut s).await;
    assert_eq!(d2.data, vec![sample(&[0x11, 0x22, 0x33, 0x44, 0x66])]);
    assert_ne!(d1.list_id, d2.list_id);
    // After the ack, the first sample is reported again.
    s.send(p4::stream_message_request::Update::DigestAck(
        p4::DigestListAck {
            digest_id: did,
            list_id: d1.list_id,
        },
    ))
    .await;
    // The ack travels on the stream: until the server has read it, the sample stays suppressed,
    // so the packet is sent again until its digest comes (however slow the machine is).
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let d3 = loop {
        env.handle.inject(3, &frame);
        match s.next_within(Duration::from_millis(200)).await {
            Some(p4::stream_message_response::Update::Digest(d)) => break d,
            Some(other) => panic!("expected digest list, got {other:?}"),
            None => assert!(
                std::time::Instant::now() < deadline,
                "no digest after the ack"
            ),
        }
    };
    assert_eq!(d3.data, vec![sample(&[0x11, 0x22, 0x33, 0x44, 0x55])]);
    // Batching: samples wait up to max_timeout_ns for a list of max_list_size.
    let batching = p4::digest_entry::Config {
        max_timeout_ns: 500_000_000,
        max_list_size: 10,
        ack_timeout_ns: 0,
    };
    write(c, 1, vec![upd(T::Modify, entry(Some(batching)))])
        .await
        .unwrap();
    // Times are given to the flush, not slept, so a slow machine cannot make the list due early.
    let before = std::time::Instant::now();
    for last in [0x01u8, 0x02] {
        let mut f = frame.clone();
        f[11] = last;
        env.handle.inject(3, &f);
    }
    let soon = before + Duration::from_millis(499);
    assert_eq!(
        env.handle.flush_digests_at(soon),
        0,
        "the list is not due yet"
    );
    let later = std::time::Instant::now() + Duration::from_millis(500);
    assert_eq!(env.handle.flush_digests_at(later), 1);
    let d4 = next_list(&mut s).await;
    assert_eq!(
        d4.data,
        vec![
            sample(&[0x11, 0x22, 0x33, 0x44, 0x01]),
            sample(&[0x11, 0x22, 0x33, 0x44, 0x02])
        ]
    );
}

#[tokio::test]
async fn arbitration_primary_and_backup() {
    tern_fixtures::require!();
    let mut env = start(None).await;
    let c = &mut env.client;
    set_pipeline(c, "ternary", 0).await.unwrap();
    let (mut s1, a1) = Stream::open(c, 1).await;
    assert_eq!(a1.status.unwrap().code, 0);
    let (mut s2, a2) = Stream::open(c, 2).await;
    assert_eq!(
        a2.status.unwrap().code,
        0,
        "higher election id becomes primary"
    );
    let a1 = s1.arbitration().await;
    assert_eq!(
        a1.status.unwrap().code,
        Code::AlreadyExists as i32,
        "the old primary is told it is a backup"
    );
    assert_eq!(a1.election_id, eid(2));
    // Backup writes are refused; primary writes work.
    assert_eq!(
        write(c, 1, vec![]).await.unwrap_err().code(),
        Code::PermissionDenied
    );
    write(c, 2, vec![]).await.unwrap();
    // A duplicate election id ends that stream with INVALID_ARGUMENT.
    let (tx, rx) = mpsc::channel(4);
    let mut dup = c
        .stream_channel(ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    tx.send(p4::StreamMessageRequest {
        update: Some(p4::stream_message_request::Update::Arbitration(
            p4::MasterArbitrationUpdate {
                device_id: 0,
                election_id: eid(2),
                ..Default::default()
            },
        )),
    })
    .await
    .unwrap();
    let err = tokio::time::timeout(Duration::from_secs(5), dup.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    // Closing the primary's stream promotes the backup.
    drop(s2.tx);
    let _ = &mut s2.rx;
    let a1 = s1.arbitration().await;
    assert_eq!(a1.status.unwrap().code, 0);
    write(c, 1, vec![]).await.unwrap();
}

#[tokio::test]
async fn malformed_requests_get_errors_and_server_keeps_serving() {
    tern_fixtures::require!();
    use p4::entity::Entity as E;
    use p4::update::Type as T;
    let mut env = start(None).await;
    let c = &mut env.client;
    // Before any pipeline: Write/Read fail with FAILED_PRECONDITION.
    assert_eq!(
        write(c, 0, vec![]).await.unwrap_err().code(),
        Code::FailedPrecondition
    );
    set_pipeline(c, "ternary", 0).await.unwrap();
    let err = c
        .write(p4::WriteRequest {
            device_id: 0,
            atomicity: 1,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unimplemented);
    let err = write(
        c,
        0,
        vec![
            p4::Update {
                r#type: T::Insert as i32,
                entity: None,
            },
            upd(T::Unspecified, E::TableEntry(p4::TableEntry::default())),
        ],
    )
    .await
    .unwrap_err();
    assert_eq!(write_errors(&err), vec![Code::InvalidArgument as i32; 2]);
    assert_eq!(
        read(
            c,
            E::TableEntry(p4::TableEntry {
                table_id: 77,
                ..Default::default()
            })
        )
        .await
        .unwrap_err()
        .code(),
        Code::InvalidArgument
    );
    assert_eq!(
        read(
            c,
            E::CounterEntry(p4::CounterEntry {
                counter_id: 77,
                ..Default::default()
            })
        )
        .await
        .unwrap_err()
        .code(),
        Code::InvalidArgument
    );
    let caps = c
        .capabilities(p4::CapabilitiesRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(caps.p4runtime_api_version, "1.4.1");
}

#[tokio::test]
async fn p4_source_compiled_by_tern_with_its_p4info() {
    tern_fixtures::require!();
    use p4::entity::Entity as E;
    use p4::update::Type as T;
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../p4/tutorials/basic.p4");
    let compiled = tern_p4::compile_file(std::path::Path::new(path), &tern_p4::Options::default())
        .expect("basic.p4 compiles");
    let info = parse_p4info_text(&compiled.p4info).expect("tern-p4's P4Info parses");
    let mut env = start(None).await;
    let c = &mut env.client;
    commit(c, None, info.clone(), compiled.json).await;
    let t = table_id(&info, "MyIngress.ipv4_lpm");
    let a = action_id(&info, "MyIngress.ipv4_forward");
    let e = te(
        t,
        vec![lpm(1, &[10, 0, 2, 2], 32)],
        a,
        vec![(1, vec![0x08, 0, 0, 0, 0x02, 0x22]), (2, vec![2])],
        0,
    );
    write(c, 0, vec![upd(T::Insert, E::TableEntry(e.clone()))])
        .await
        .unwrap();
    assert_eq!(
        read(
            c,
            E::TableEntry(p4::TableEntry {
                table_id: t,
                ..Default::default()
            })
        )
        .await
        .unwrap(),
        vec![E::TableEntry(e)]
    );
    // An IPv4 packet to 10.0.2.2 leaves on port 2 with the new destination MAC.
    let mut ip = vec![
        0x45, 0, 0, 20, 0, 0, 0, 0, 64, 6, 0, 0, 10, 0, 1, 1, 10, 0, 2, 2,
    ];
    let cks = tern_fixtures::ipv4_checksum(&ip);
    ip[10..12].copy_from_slice(&cks.to_be_bytes());
    let frame = [
        vec![0, 0, 0, 0, 1, 1],
        vec![0, 0, 0, 0, 0, 9],
        vec![0x08, 0x00],
        ip,
    ]
    .concat();
    let outs = env.handle.inject(1, &frame);
    assert_eq!(outs.len(), 1);
    assert_eq!(outs[0].port, 2);
    assert_eq!(&outs[0].data[0..6], &[0x08, 0, 0, 0, 0x02, 0x22]);
}

#[tokio::test]
async fn action_profile_members_groups_and_entries() {
    tern_fixtures::require!();
    use p4::entity::Entity as E;
    use p4::update::Type as T;
    let mut env = start(None).await;
    let c = &mut env.client;
    set_pipeline(c, "action_profile", 0).await.unwrap();
    let info = p4info("action_profile");
    let t = table_id(&info, "IndirectWS");
    let send = action_id(&info, "send");
    let prof = info.action_profiles[0].preamble.as_ref().unwrap().id;
    let member = |id: u32, port: u8| {
        E::ActionProfileMember(p4::ActionProfileMember {
            action_profile_id: prof,
            member_id: id,
            action: Some(p4::Action {
                action_id: send,
                params: vec![p4::action::Param {
                    param_id: 1,
                    value: vec![port],
                }],
            }),
        })
    };
    let group = |id: u32, members: Vec<u32>| {
        E::ActionProfileGroup(p4::ActionProfileGroup {
            action_profile_id: prof,
            group_id: id,
            members: members
                .into_iter()
                .map(|m| p4::action_profile_group::Member {
                    member_id: m,
                    weight: 1,
                    watch_kind: None,
                })
                .collect(),
            max_size: 0,
        })
    };
    write(
        c,
        0,
        vec![
            upd(T::Insert, member(1, 3)),
            upd(T::Insert, member(2, 4)),
            upd(T::Insert, group(10, vec![1])),
        ],
    )
    .await
    .unwrap();
    let err = write(
        c,
        0,
        vec![
            upd(T::Insert, member(1, 3)),
            upd(T::Insert, group(11, vec![99])),
        ],
    )
    .await
    .unwrap_err();
    assert_eq!(
        write_errors(&err),
        vec![Code::AlreadyExists as i32, Code::NotFound as i32]
    );
    let entry = |key: u8, ty: p4::table_action::Type| p4::TableEntry {
        table_id: t,
        r#match: vec![exact(1, &[key])],
        action: Some(p4::TableAction { r#type: Some(ty) }),
        ..Default::default()
    };
    write(
        c,
        0,
        vec![
            upd(
                T::Insert,
                E::TableEntry(entry(1, p4::table_action::Type::ActionProfileGroupId(10))),
            ),
            upd(
                T::Insert,
                E::TableEntry(entry(2, p4::table_action::Type::ActionProfileMemberId(2))),
            ),
        ],
    )
    .await
    .unwrap();
    let port_of = |h: &Handle, key: u8| {
        let outs = h.inject(0, &[key, 1, 2, 3, 4, 0, 0, 0, 0, 0]);
        outs.iter().map(|o| o.port).collect::<Vec<_>>()
    };
    assert_eq!(port_of(&env.handle, 1), vec![3]);
    assert_eq!(port_of(&env.handle, 2), vec![4]);
    // Moving the group to member 2 changes where key 1 goes.
    write(c, 0, vec![upd(T::Modify, group(10, vec![2]))])
        .await
        .unwrap();
    assert_eq!(port_of(&env.handle, 1), vec![4]);
    let mut got = read(
        c,
        E::TableEntry(p4::TableEntry {
            table_id: t,
            ..Default::default()
        }),
    )
    .await
    .unwrap();
    got.sort_by_key(|e| format!("{e:?}"));
    let mut want = vec![
        E::TableEntry(entry(1, p4::table_action::Type::ActionProfileGroupId(10))),
        E::TableEntry(entry(2, p4::table_action::Type::ActionProfileMemberId(2))),
    ];
    want.sort_by_key(|e| format!("{e:?}"));
    assert_eq!(got, want);
    let got = read(
        c,
        E::ActionProfileMember(p4::ActionProfileMember {
            action_profile_id: prof,
            ..Default::default()
        }),
    )
    .await
    .unwrap();
    assert_eq!(got, vec![member(1, 3), member(2, 4)]);
    let got = read(
        c,
        E::ActionProfileGroup(p4::ActionProfileGroup {
            action_profile_id: prof,
            ..Default::default()
        }),
    )
    .await
    .unwrap();
    assert_eq!(got, vec![group(10, vec![2])]);
    // One-shot action set: the server creates the members and the group itself.
    let oneshot = |ports: &[u8]| {
        p4::table_action::Type::ActionProfileActionSet(p4::ActionProfileActionSet {
            action_profile_actions: ports
                .iter()
                .map(|p| p4::ActionProfileAction {
                    action: Some(p4::Action {
                        action_id: send,
                        params: vec![p4::action::Param {
                            param_id: 1,
                            value: vec![*p],
                        }],
                    }),
                    weight: 1,
                    watch_kind: None,
                })
                .collect(),
        })
    };
    write(
        c,
        0,
        vec![upd(T::Insert, E::TableEntry(entry(5, oneshot(&[6]))))],
    )
    .await
    .unwrap();
    assert_eq!(port_of(&env.handle, 5), vec![6]);
    write(
        c,
        0,
        vec![upd(T::Modify, E::TableEntry(entry(5, oneshot(&[7]))))],
    )
    .await
    .unwrap();
    assert_eq!(port_of(&env.handle, 5), vec![7]);
    let got = read(
        c,
        E::TableEntry(p4::TableEntry {
            table_id: t,
            r#match: vec![exact(1, &[5])],
            ..Default::default()
        }),
    )
    .await
    .unwrap();
    assert_eq!(got, vec![E::TableEntry(entry(5, oneshot(&[7])))]);
    // Controller-visible members are unchanged by one-shot bookkeeping.
    let got = read(
        c,
        E::ActionProfileMember(p4::ActionProfileMember {
            action_profile_id: prof,
            ..Default::default()
        }),
    )
    .await
    .unwrap();
    assert_eq!(got.len(), 2);
    write(
        c,
        0,
        vec![upd(T::Delete, E::TableEntry(entry(5, oneshot(&[7]))))],
    )
    .await
    .unwrap();
    assert_eq!(
        port_of(&env.handle, 5),
        vec![0],
        "a miss runs NoAction: egress_spec stays 0"
    );
    let err = write(
        c,
        0,
        vec![upd(T::Insert, E::TableEntry(entry(5, oneshot(&[]))))],
    )
    .await
    .unwrap_err();
    assert_eq!(write_errors(&err), vec![Code::InvalidArgument as i32]);
}

#[tokio::test]
async fn direct_meter_config_round_trips() {
    tern_fixtures::require!();
    use p4::entity::Entity as E;
    use p4::update::Type as T;
    let mut env = start(None).await;
    let c = &mut env.client;
    set_pipeline(c, "meter", 0).await.unwrap();
    let info = p4info("meter");
    let t = table_id(&info, "ingress.t_redirect");
    let a = action_id(&info, "ingress.port_redirect");
    let e = te(t, vec![exact(1, &[1])], a, vec![], 0);
    write(c, 0, vec![upd(T::Insert, E::TableEntry(e.clone()))])
        .await
        .unwrap();
    let config = p4::MeterConfig {
        cir: 1000,
        cburst: 10,
        pir: 2000,
        pburst: 20,
        eburst: 0,
    };
    write(
        c,
        0,
        vec![upd(
            T::Modify,
            E::DirectMeterEntry(p4::DirectMeterEntry {
                table_entry: Some(e.clone()),
                config: Some(config),
                counter_data: None,
            }),
        )],
    )
    .await
    .unwrap();
    let got = read(
        c,
        E::DirectMeterEntry(p4::DirectMeterEntry {
            table_entry: Some(p4::TableEntry {
                table_id: t,
                ..Default::default()
            }),
            ..Default::default()
        }),
    )
    .await
    .unwrap();
    assert_eq!(
        got,
        vec![E::DirectMeterEntry(p4::DirectMeterEntry {
            table_entry: Some(e.clone()),
            config: Some(config),
            counter_data: None
        })]
    );
    // CIR above PIR is rejected.
    let bad = p4::MeterConfig {
        cir: 3000,
        ..config
    };
    let err = write(
        c,
        0,
        vec![upd(
            T::Modify,
            E::DirectMeterEntry(p4::DirectMeterEntry {
                table_entry: Some(e),
                config: Some(bad),
                counter_data: None,
            }),
        )],
    )
    .await
    .unwrap_err();
    assert_eq!(write_errors(&err), vec![Code::InvalidArgument as i32]);
}

#[test]
fn derived_p4info_matches_p4c_output() {
    tern_fixtures::require!();
    for name in ["simple_router", "ternary", "digest", "counter", "meter"] {
        let sw =
            Switch::from_json(&fixture(&format!("{name}.json")), SwitchOptions::default()).unwrap();
        let derived = tern_p4rt::p4info::derive_p4info(sw.program());
        let want = p4info(name);
        // The fixtures come from an older p4c that masked ids to 16 bits: compare the low 16
        // bits and the prefix byte.
        let same_id = |a: u32, b: u32| a >> 24 == b >> 24 && a & 0xffff == b & 0xffff;
        for t in &want.tables {
            let tp = t.preamble.as_ref().unwrap();
            let d = derived
                .tables
                .iter()
                .find(|x| x.preamble.as_ref().unwrap().name == tp.name)
                .unwrap_or_else(|| panic!("{name}: table {}", tp.name));
            assert!(
                same_id(d.preamble.as_ref().unwrap().id, tp.id),
                "{name}: table id of {}",
                tp.name
            );
            assert_eq!(d.match_fields.len(), t.match_fields.len());
            for (a, b) in d.match_fields.iter().zip(&t.match_fields) {
                assert_eq!(
                    (a.id, a.bitwidth, &a.r#match),
                    (b.id, b.bitwidth, &b.r#match),
                    "{name}: {}",
                    b.name
                );
            }
            let mut da: Vec<u32> = d.action_refs.iter().map(|r| r.id & 0xffff).collect();
            let mut wa: Vec<u32> = t.action_refs.iter().map(|r| r.id & 0xffff).collect();
            da.sort();
            wa.sort();
            assert_eq!(da, wa, "{name}: actions of {}", tp.name);
        }
        for a in &want.actions {
            let ap = a.preamble.as_ref().unwrap();
            let d = derived
                .actions
                .iter()
                .find(|x| x.preamble.as_ref().unwrap().name == ap.name)
                .unwrap();
            assert!(
                same_id(d.preamble.as_ref().unwrap().id, ap.id),
                "{name}: action id of {}",
                ap.name
            );
            let dp: Vec<(u32, &str, i32)> = d
                .params
                .iter()
                .map(|p| (p.id, p.name.as_str(), p.bitwidth))
                .collect();
            let wp: Vec<(u32, &str, i32)> = a
                .params
                .iter()
                .map(|p| (p.id, p.name.as_str(), p.bitwidth))
                .collect();
            assert_eq!(dp, wp);
        }
        for dg in &want.digests {
            let dp = dg.preamble.as_ref().unwrap();
            let d = derived
                .digests
                .iter()
                .find(|x| x.preamble.as_ref().unwrap().name == dp.name)
                .unwrap();
            assert!(same_id(d.preamble.as_ref().unwrap().id, dp.id));
        }
    }
}

#[tokio::test]
async fn idle_timeout_notifications() {
    tern_fixtures::require!();
    use p4::entity::Entity as E;
    use p4::update::Type as T;
    let mut env = start(None).await;
    let c = &mut env.client;
    let (mut s, _) = Stream::open(c, 1).await;
    set_pipeline(c, "digest", 1).await.unwrap();
    let info = p4info("digest");
    let t = table_id(&info, "ingress.smac");
    let nop = action_id(&info, "NoAction");
    env.sw.lock().unwrap().set_clock_us(Some(1_000_000));
    let mut e = te(
        t,
        vec![exact(1, &[0x11, 0x22, 0x33, 0x44, 0x55])],
        nop,
        vec![],
        0,
    );
    e.idle_timeout_ns = 2_000_000_000;
    write(c, 1, vec![upd(T::Insert, E::TableEntry(e.clone()))])
        .await
        .unwrap();
    let got = read(
        c,
        E::TableEntry(p4::TableEntry {
            table_id: t,
            ..Default::default()
        }),
    )
    .await
    .unwrap();
    assert_eq!(got, vec![E::TableEntry(e.clone())]);
    env.sw.lock().unwrap().set_clock_us(Some(2_000_000));
    assert_eq!(env.handle.sweep_idle(), 0, "not expired yet");
    env.sw.lock().unwrap().set_clock_us(Some(3_500_000));
    assert_eq!(env.handle.sweep_idle(), 1);
    assert_eq!(env.handle.sweep_idle(), 0, "notified once");
    match s.next().await {
        p4::stream_message_response::Update::IdleTimeoutNotification(n) => {
            assert_eq!(n.table_entry, vec![e])
        }
        other => panic!("expected an idle timeout notification, got {other:?}"),
    }
}

const REG_PROGRAM: &str = r#"
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> f; bit<8> g; }
struct headers { h_t h; }
struct meta_t { }
parser P(packet_in pkt, out headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control VC(inout headers hdr, inout meta_t m) { apply { } }
control I(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    register<bit<32>>(8) regs;
    counter(8, CounterType.packets_and_bytes) ctr;
    apply {
        ctr.count((bit<32>)hdr.h.f);
        regs.write((bit<32>)hdr.h.f, (bit<32>)hdr.h.g);
        sm.egress_spec = 1;
    }
}
control E(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"#;

#[tokio::test]
async fn indexed_counters_and_registers() {
    tern_fixtures::require!();
    use p4::entity::Entity as E;
    use p4::update::Type as T;
    let compiled = tern_p4::compile_str(REG_PROGRAM, "regs.p4", &tern_p4::Options::default())
        .expect("compiles");
    let info = parse_p4info_text(&compiled.p4info).unwrap();
    let mut env = start(None).await;
    let c = &mut env.client;
    commit(c, None, info.clone(), compiled.json).await;
    let ctr = info.counters[0].preamble.as_ref().unwrap().id;
    let reg = info.registers[0].preamble.as_ref().unwrap().id;
    env.handle.inject(0, &[3, 0x77, 0, 0]);
    env.handle.inject(0, &[3, 0x78, 0, 0, 0, 0]);
    // Wildcard read over all indexes of one counter, and a read of all counters (id 0).
    let got = read(
        c,
        E::CounterEntry(p4::CounterEntry {
            counter_id: ctr,
            ..Default::default()
        }),
    )
    .await
    .unwrap();
    assert_eq!(got.len(), 8);
    let E::CounterEntry(c3) = &got[3] else {
        panic!()
    };
    assert_eq!(
        c3.data,
        Some(p4::CounterData {
            byte_count: 10,
            packet_count: 2
        })
    );
    assert_eq!(
        read(c, E::CounterEntry(p4::CounterEntry::default()))
            .await
            .unwrap(),
        got
    );
    let one = |idx: i64, d: Option<p4::CounterData>| {
        E::CounterEntry(p4::CounterEntry {
            counter_id: ctr,
            index: Some(p4::Index { index: idx }),
            data: d,
        })
    };
    write(
        c,
        0,
        vec![upd(
            T::Modify,
            one(
                3,
                Some(p4::CounterData {
                    byte_count: 1,
                    packet_count: 1,
                }),
            ),
        )],
    )
    .await
    .unwrap();
    assert_eq!(
        read(c, one(3, None)).await.unwrap(),
        vec![one(
            3,
            Some(p4::CounterData {
                byte_count: 1,
                packet_count: 1
            })
        )]
    );
    assert_eq!(
        read(c, one(8, None)).await.unwrap_err().code(),
        Code::OutOfRange
    );
    let err = write(c, 0, vec![upd(T::Insert, one(3, None))])
        .await
        .unwrap_err();
    assert_eq!(write_errors(&err), vec![Code::InvalidArgument as i32]);
    // Registers: the data plane wrote 0x78 at index 3; the controller writes index 5.
    let r = |idx: i64, v: Option<&[u8]>| {
        E::RegisterEntry(p4::RegisterEntry {
            register_id: reg,
            index: Some(p4::Index { index: idx }),
            data: v.map(|v| p4::P4Data {
                data: Some(p4::p4_data::Data::Bitstring(v.to_vec())),
            }),
        })
    };
    assert_eq!(
        read(c, r(3, None)).await.unwrap(),
        vec![r(3, Some(&[0x78]))]
    );
    write(c, 0, vec![upd(T::Modify, r(5, Some(&[0, 0, 1, 2])))])
        .await
        .unwrap();
    assert_eq!(
        read(c, r(5, None)).await.unwrap(),
        vec![r(5, Some(&[1, 2]))]
    );
    let all = read(
        c,
        E::RegisterEntry(p4::RegisterEntry {
            register_id: reg,
            ..Default::default()
        }),
    )
    .await
    .unwrap();
    assert_eq!(all.len(), 8);
    let err = write(c, 0, vec![upd(T::Modify, r(5, Some(&[1, 0, 0, 0, 0])))])
        .await
        .unwrap_err();
    assert_eq!(write_errors(&err), vec![Code::InvalidArgument as i32]);
}

const VSET_PROGRAM: &str = r#"
#include <core.p4>
#include <v1model.p4>
header h_t { bit<16> t; bit<8> v; }
struct headers { h_t h; }
struct meta_t { bit<1> hit; }
parser P(packet_in pkt, out headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    value_set<bit<16>>(4) pvs;
    state start {
        pkt.extract(hdr.h);
        transition select(hdr.h.t) {
            pvs: matched;
            default: accept;
        }
    }
    state matched { m.hit = 1; transition accept; }
}
control VC(inout headers hdr, inout meta_t m) { apply { } }
control I(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    meter(4, MeterType.packets) mtr;
    apply {
        bit<2> color;
        mtr.execute_meter((bit<32>)hdr.h.v, color);
        if (m.hit == 1) { sm.egress_spec = 2; } else { sm.egress_spec = 1; }
    }
}
control E(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"#;

#[tokio::test]
async fn value_sets_and_indexed_meters() {
    tern_fixtures::require!();
    use p4::entity::Entity as E;
    use p4::update::Type as T;
    let compiled = tern_p4::compile_str(VSET_PROGRAM, "vset.p4", &tern_p4::Options::default())
        .expect("compiles");
    let info = parse_p4info_text(&compiled.p4info).unwrap();
    let mut env = start(None).await;
    let c = &mut env.client;
    commit(c, None, info.clone(), compiled.json).await;
    let vs = info.value_sets[0].preamble.as_ref().unwrap().id;
    let ports = |h: &Handle, t: [u8; 2]| {
        h.inject(0, &[t[0], t[1], 0, 0])
            .iter()
            .map(|o| o.port)
            .collect::<Vec<_>>()
    };
    assert_eq!(ports(&env.handle, [0x12, 0x34]), vec![1]);
    let member = |v: &[u8]| p4::ValueSetMember {
        r#match: vec![exact(1, v)],
    };
    let entry = |m: Vec<p4::ValueSetMember>| {
        E::ValueSetEntry(p4::ValueSetEntry {
            value_set_id: vs,
            members: m,
        })
    };
    write(
        c,
        0,
        vec![upd(
            T::Modify,
            entry(vec![member(&[0x12, 0x34]), member(&[0, 0, 0x56])]),
        )],
    )
    .await
    .unwrap();
    assert_eq!(ports(&env.handle, [0x12, 0x34]), vec![2]);
    assert_eq!(ports(&env.handle, [0x00, 0x56]), vec![2]);
    assert_eq!(ports(&env.handle, [0x00, 0x57]), vec![1]);
    let mut got = read(c, entry(vec![])).await.unwrap();
    if let E::ValueSetEntry(v) = &mut got[0] {
        v.members.sort_by_key(|m| format!("{m:?}"));
    }
    let mut want = vec![member(&[0x12, 0x34]), member(&[0x56])];
    want.sort_by_key(|m| format!("{m:?}"));
    assert_eq!(got, vec![entry(want)]);
    let err = write(c, 0, vec![upd(T::Insert, entry(vec![]))])
        .await
        .unwrap_err();
    assert_eq!(write_errors(&err), vec![Code::InvalidArgument as i32]);
    // Indexed meter: write one cell, read it back; other cells have no config.
    let mid = info.meters[0].preamble.as_ref().unwrap().id;
    let config = p4::MeterConfig {
        cir: 100,
        cburst: 5,
        pir: 200,
        pburst: 10,
        eburst: 0,
    };
    let m = |i: i64, cfg: Option<p4::MeterConfig>| {
        E::MeterEntry(p4::MeterEntry {
            meter_id: mid,
            index: Some(p4::Index { index: i }),
            config: cfg,
            counter_data: None,
        })
    };
    write(c, 0, vec![upd(T::Modify, m(2, Some(config)))])
        .await
        .unwrap();
    assert_eq!(read(c, m(2, None)).await.unwrap(), vec![m(2, Some(config))]);
    let all = read(
        c,
        E::MeterEntry(p4::MeterEntry {
            meter_id: mid,
            ..Default::default()
        }),
    )
    .await
    .unwrap();
    assert_eq!(all.len(), 4);
    let err = write(c, 0, vec![upd(T::Modify, m(9, Some(config)))])
        .await
        .unwrap_err();
    assert_eq!(write_errors(&err), vec![Code::OutOfRange as i32]);
}

#[tokio::test]
async fn arbitration_echoes_role_and_checks_device() {
    tern_fixtures::require!();
    let mut env = start(None).await;
    let c = &mut env.client;
    let (tx, rx) = mpsc::channel(4);
    let mut s = c
        .stream_channel(ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    let role = p4::Role {
        name: "sdn".into(),
        ..Default::default()
    };
    let arb = |device_id: u64| p4::StreamMessageRequest {
        update: Some(p4::stream_message_request::Update::Arbitration(
            p4::MasterArbitrationUpdate {
                device_id,
                role: Some(role.clone()),
                election_id: eid(3),
                status: None,
            },
        )),
    };
    tx.send(arb(0)).await.unwrap();
    let m = tokio::time::timeout(Duration::from_secs(5), s.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let Some(p4::stream_message_response::Update::Arbitration(a)) = m.update else {
        panic!("{m:?}")
    };
    assert_eq!(a.role, Some(role.clone()));
    assert_eq!(a.election_id, eid(3));
    // An arbitration for another device ends the stream with NOT_FOUND.
    tx.send(arb(9)).await.unwrap();
    let err = tokio::time::timeout(Duration::from_secs(5), s.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
}

#[tokio::test]
async fn optional_match_entries() {
    tern_fixtures::require!();
    use p4::entity::Entity as E;
    use p4::update::Type as T;
    let mut env = start(None).await;
    let c = &mut env.client;
    set_pipeline(c, "optional", 0).await.unwrap();
    let info = p4info("optional");
    let t = table_id(&info, "ingress.opt");
    let (s1, s2) = (
        action_id(&info, "ingress.send_1"),
        action_id(&info, "ingress.send_2"),
    );
    let opt = |v: &[u8]| p4::FieldMatch {
        field_id: 1,
        field_match_type: Some(p4::field_match::FieldMatchType::Optional(
            p4::field_match::Optional { value: v.to_vec() },
        )),
    };
    // A wildcard (field omitted) at low priority and an exact value at high priority.
    let wild = te(t, vec![], s1, vec![], 1);
    let one = te(t, vec![opt(&[0x0a, 0x0b])], s2, vec![], 2);
    write(
        c,
        0,
        vec![
            upd(T::Insert, E::TableEntry(wild.clone())),
            upd(T::Insert, E::TableEntry(one.clone())),
        ],
    )
    .await
    .unwrap();
    let port = |h: &Handle, v: [u8; 2]| h.inject(0, &v).iter().map(|o| o.port).collect::<Vec<_>>();
    assert_eq!(port(&env.handle, [0x0a, 0x0b]), vec![2]);
    assert_eq!(port(&env.handle, [0x0a, 0x0c]), vec![1]);
    let mut got = read(
        c,
        E::TableEntry(p4::TableEntry {
            table_id: t,
            ..Default::default()
        }),
    )
    .await
    .unwrap();
    got.sort_by_key(|e| match e {
        E::TableEntry(t) => t.priority,
        _ => 0,
    });
    assert_eq!(got, vec![E::TableEntry(wild), E::TableEntry(one)]);
    // A ternary match on an optional field is rejected.
    let bad = te(t, vec![ternary(1, &[1, 0], &[0xff, 0])], s1, vec![], 3);
    let err = write(c, 0, vec![upd(T::Insert, E::TableEntry(bad))])
        .await
        .unwrap_err();
    assert_eq!(write_errors(&err), vec![Code::InvalidArgument as i32]);
}

#[tokio::test]
async fn several_devices_on_one_server() {
    tern_fixtures::require!();
    use p4::entity::Entity as E;
    use p4::update::Type as T;
    let mk = |device_id: u64, name: &str| {
        let sw = Arc::new(Mutex::new(
            Switch::from_json(&fixture(&format!("{name}.json")), SwitchOptions::default()).unwrap(),
        ));
        let opts = Options {
            device_id,
            cpu_port: None,
            initial: Some((p4info(name), fixture(&format!("{name}.json")))),
            switch_options: SwitchOptions::default(),
        };
        Handle::new(sw, opts).unwrap()
    };
    let (d0, d1) = (mk(0, "ternary"), mk(1, "simple_router"));
    assert!(tern_p4rt::multi_device_service(vec![mk(0, "ternary"), mk(0, "ternary")]).is_err());
    let svc = tern_p4rt::multi_device_service(vec![d0.clone(), d1.clone()]).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(svc)
            .serve_with_incoming(TcpListenerStream::new(listener))
            .await
            .unwrap();
    });
    let mut c = P4RuntimeClient::connect(format!("http://{addr}"))
        .await
        .unwrap();
    // Each device has its own program (known at start-up, so no SetForwardingPipelineConfig).
    let get = |id: u64| p4::GetForwardingPipelineConfigRequest {
        device_id: id,
        response_type: 2,
    };
    let i0 = c
        .get_forwarding_pipeline_config(get(0))
        .await
        .unwrap()
        .into_inner()
        .config
        .unwrap()
        .p4info
        .unwrap();
    let i1 = c
        .get_forwarding_pipeline_config(get(1))
        .await
        .unwrap()
        .into_inner()
        .config
        .unwrap()
        .p4info
        .unwrap();
    assert_eq!(
        (i0, i1.clone()),
        (p4info("ternary"), p4info("simple_router"))
    );
    assert_eq!(
        c.get_forwarding_pipeline_config(get(2))
            .await
            .unwrap_err()
            .code(),
        Code::NotFound
    );
    // A stream joins the device of its first arbitration; primaries are per device.
    let (tx, rx) = mpsc::channel(4);
    let mut s = c
        .stream_channel(ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    tx.send(p4::StreamMessageRequest {
        update: Some(p4::stream_message_request::Update::Arbitration(
            p4::MasterArbitrationUpdate {
                device_id: 1,
                election_id: eid(4),
                ..Default::default()
            },
        )),
    })
    .await
    .unwrap();
    let m = tokio::time::timeout(Duration::from_secs(5), s.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let Some(p4::stream_message_response::Update::Arbitration(a)) = m.update else {
        panic!("{m:?}")
    };
    assert_eq!((a.device_id, a.status.unwrap().code), (1, 0));
    let t = table_id(&i1, "forward");
    let e = te(
        t,
        vec![exact(1, &[1, 2, 3, 4])],
        action_id(&i1, "set_dmac"),
        vec![(1, vec![9])],
        0,
    );
    let w = |device_id: u64, election: u64| p4::WriteRequest {
        device_id,
        election_id: eid(election),
        updates: vec![upd(T::Insert, E::TableEntry(e.clone()))],
        ..Default::default()
    };
    c.write(w(1, 4)).await.unwrap();
    // Device 0 has no stream: election id 4 is refused there, and the table does not exist.
    assert_eq!(
        c.write(w(0, 4)).await.unwrap_err().code(),
        Code::PermissionDenied
    );
    let err = c.write(w(0, 0)).await.unwrap_err();
    assert_eq!(write_errors(&err), vec![Code::InvalidArgument as i32]);
    let mut r = c
        .read(p4::ReadRequest {
            device_id: 1,
            entities: vec![p4::Entity {
                entity: Some(E::TableEntry(p4::TableEntry::default())),
            }],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let got = r.next().await.unwrap().unwrap().entities;
    assert_eq!(
        got,
        vec![p4::Entity {
            entity: Some(E::TableEntry(e.clone()))
        }]
    );
    let mut r = c
        .read(p4::ReadRequest {
            device_id: 0,
            entities: vec![p4::Entity {
                entity: Some(E::TableEntry(p4::TableEntry::default())),
            }],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(r.next().await.unwrap().unwrap().entities.is_empty());
}

#[tokio::test]
async fn reconcile_and_commit_keeps_state_or_rolls_back() {
    tern_fixtures::require!();
    use p4::entity::Entity as E;
    use p4::set_forwarding_pipeline_config_request::Action as A;
    use p4::update::Type as T;
    let mut env = start(None).await;
    let c = &mut env.client;
    set_pipeline(c, "simple_router", 0).await.unwrap();
    let info = p4info("simple_router");
    let t = table_id(&info, "ipv4_lpm");
    let e = te(
        t,
        vec![lpm(1, &[10, 0, 0, 0], 8)],
        action_id(&info, "set_nhop"),
        vec![(1, vec![1]), (2, vec![2])],
        0,
    );
    let mg = E::PacketReplicationEngineEntry(p4::PacketReplicationEngineEntry {
        r#type: Some(
            p4::packet_replication_engine_entry::Type::MulticastGroupEntry(
                p4::MulticastGroupEntry {
                    multicast_group_id: 3,
                    replicas: vec![p4::Replica {
                        port_kind: Some(p4::replica::PortKind::EgressPort(4)),
                        instance: 1,
                    }],
                    metadata: vec![],
                },
            ),
        ),
    });
    write(
        c,
        0,
        vec![
            upd(T::Insert, E::TableEntry(e.clone())),
            upd(T::Insert, mg.clone()),
        ],
    )
    .await
    .unwrap();
    let push = |name: &str, json: Vec<u8>| p4::SetForwardingPipelineConfigRequest {
        device_id: 0,
        action: A::ReconcileAndCommit as i32,
        config: Some(p4::ForwardingPipelineConfig {
            p4info: Some(p4info(name)),
            p4_device_config: json,
            cookie: None,
        }),
        ..Default::default()
    };
    // The same program serialized differently: a real swap, and the state is carried over.
    let v: serde_json::Value = serde_json::from_str(&fixture("simple_router.json")).unwrap();
    let compact = serde_json::to_vec(&v).unwrap();
    c.set_forwarding_pipeline_config(push("simple_router", compact.clone()))
        .await
        .unwrap();
    let all_tables = E::TableEntry(p4::TableEntry::default());
    assert_eq!(
        read(c, all_tables.clone()).await.unwrap(),
        vec![E::TableEntry(e.clone())]
    );
    let mg_filter = E::PacketReplicationEngineEntry(p4::PacketReplicationEngineEntry {
        r#type: Some(
            p4::packet_replication_engine_entry::Type::MulticastGroupEntry(
                p4::MulticastGroupEntry::default(),
            ),
        ),
    });
    assert_eq!(read(c, mg_filter.clone()).await.unwrap(), vec![mg.clone()]);
    let got = c
        .get_forwarding_pipeline_config(p4::GetForwardingPipelineConfigRequest {
            device_id: 0,
            response_type: 3,
        })
        .await
        .unwrap();
    assert_eq!(got.into_inner().config.unwrap().p4_device_config, compact);
    // A program the state does not fit: refused, and nothing changes.
    let err = c
        .set_forwarding_pipeline_config(push("ternary", fixture("ternary.json").into_bytes()))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message().contains("RECONCILE_AND_COMMIT"),
        "{}",
        err.message()
    );
    assert_eq!(read(c, all_tables).await.unwrap(), vec![E::TableEntry(e)]);
    assert_eq!(read(c, mg_filter).await.unwrap(), vec![mg]);
}
