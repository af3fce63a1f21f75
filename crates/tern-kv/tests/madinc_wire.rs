//! MADINC's store side and control messages on the wire: a real RocksDB storage server answers
//! tenants from key spaces of their own (two tenants' equal keys are two records, neither is a
//! FarReach record) and tells the controller of every write; hot reports and write notices are
//! acknowledged and retried, and a uniform burst of thousands of reports from 64 tenants through
//! links that drop a third of the reports and a third of the acknowledgements loses none and
//! delivers each once, also with every datagram sealed (forged and replayed ones refused).

use std::collections::HashSet;
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::Duration;
use tern_kv::client::Client;
use tern_kv::madinc::{MadBody, MadMessage, StoreOp};
use tern_kv::madinc_wire::{call, Inbox, Link, Loss};
use tern_kv::protocol::Key;
use tern_kv::router::Router;
use tern_kv::server::{start, ServerConfig};

fn msg(tenant: u16, key: Key, body: MadBody) -> MadMessage {
    MadMessage {
        tenant,
        tag: 0x1000 + tenant as u32,
        key,
        body,
    }
}

/// Keeps the inbox answering (retries whose acknowledgement was lost) until the link has
/// nothing pending; nothing new may arrive meanwhile.
fn settle(inbox: &mut Inbox, link: &Link) {
    let end = std::time::Instant::now() + Duration::from_secs(10);
    while link.pending() > 0 {
        assert!(std::time::Instant::now() < end, "link never settled");
        assert_eq!(inbox.recv(Duration::from_millis(10)).unwrap(), None);
    }
}

fn client() -> UdpSocket {
    UdpSocket::bind("127.0.0.1:0").unwrap()
}

fn read(sock: &UdpSocket, server: SocketAddr, tenant: u16, key: Key) -> Option<Vec<u8>> {
    let r = call(
        sock,
        server,
        &msg(tenant, key, MadBody::ReadRequest),
        Duration::from_millis(500),
        4,
    )
    .unwrap()
    .expect("the server answers");
    match r.body {
        MadBody::ReadReply {
            found: true,
            source: 0,
            value,
        } => Some(value),
        MadBody::ReadReply {
            found: false,
            source: 0,
            value,
        } => {
            assert!(value.is_empty());
            None
        }
        b => panic!("unexpected reply {b:?}"),
    }
}

fn write(sock: &UdpSocket, server: SocketAddr, tenant: u16, key: Key, value: &[u8]) {
    let r = call(
        sock,
        server,
        &msg(
            tenant,
            key,
            MadBody::WriteRequest {
                value: value.to_vec(),
            },
        ),
        Duration::from_millis(500),
        4,
    )
    .unwrap()
    .expect("the server answers");
    assert_eq!(
        r.body,
        MadBody::WriteReply {
            stored: true,
            source: 0
        }
    );
}

#[test]
fn tenants_have_key_spaces_of_their_own_in_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(&ServerConfig::new(dir.path(), 0)).unwrap();
    let s = client();
    let k = Key::from_id(7);
    assert_eq!(read(&s, server.addr(), 1, k), None);
    write(&s, server.addr(), 1, k, b"one's");
    write(&s, server.addr(), 2, k, b"two's");
    assert_eq!(read(&s, server.addr(), 1, k).unwrap(), b"one's");
    assert_eq!(read(&s, server.addr(), 2, k).unwrap(), b"two's");
    // A third tenant and FarReach's protocol see neither.
    assert_eq!(read(&s, server.addr(), 3, k), None);
    let mut fr = Client::new(
        Router::new(vec![server.addr()]).unwrap(),
        Duration::from_millis(500),
        4,
    )
    .unwrap();
    assert_eq!(fr.get(k).unwrap().value, None);
    fr.put(k, b"farreach's").unwrap();
    assert_eq!(read(&s, server.addr(), 1, k).unwrap(), b"one's");
    // Tenant records are not FarReach records: snapshots count only the latter.
    assert_eq!(server.store().snapshot_live_count().unwrap(), 1);
    // A malformed MADINC datagram (truncated header) and a control op are dropped and counted.
    let before = server.stats().snapshot()[4];
    s.send_to(&[0x0e, 0x00, 0, 1], server.addr()).unwrap();
    let ctl = msg(
        1,
        k,
        MadBody::Evict {
            id: 1,
            switch: 0,
            slot: 0,
        },
    );
    s.send_to(&ctl.encode().unwrap(), server.addr()).unwrap();
    let mut n = 0;
    while server.stats().snapshot()[4] < before + 2 && n < 200 {
        std::thread::sleep(Duration::from_millis(5));
        n += 1;
    }
    assert_eq!(server.stats().snapshot()[4], before + 2);
    assert_eq!(read(&s, server.addr(), 1, k).unwrap(), b"one's");
    server.shutdown().unwrap();
}

#[test]
fn every_tenant_write_is_told_to_the_controller_once_despite_loss() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(&ServerConfig::new(dir.path(), 0)).unwrap();
    let mut inbox = Inbox::bind(
        "127.0.0.1:0".parse().unwrap(),
        Loss {
            per_million: 300_000,
            seed: 5,
        },
    )
    .unwrap();
    let link = Arc::new(
        Link::start(
            inbox.addr().unwrap(),
            Duration::from_millis(5),
            10_000,
            Loss {
                per_million: 300_000,
                seed: 6,
            },
        )
        .unwrap(),
    );
    server.cache_ctl().set_madinc_controller(Some(link.clone()));
    let s = client();
    let mut expected = HashSet::new();
    for i in 0..200u16 {
        let (tenant, key) = (i % 8, Key::from_id(i as u64 / 8));
        let value = format!("v{i}").into_bytes();
        write(&s, server.addr(), tenant, key, &value);
        expected.insert((tenant, key, value));
    }
    let mut got = HashSet::new();
    while got.len() < expected.len() {
        let m = inbox
            .recv(Duration::from_secs(10))
            .unwrap()
            .expect("a notice within 10 s");
        match m.body {
            MadBody::Store {
                op: StoreOp::Update,
                switch: 0,
                slot: u32::MAX,
                value,
                ..
            } => assert!(got.insert((m.tenant, m.key, value)), "delivered twice"),
            b => panic!("unexpected {b:?}"),
        }
    }
    assert_eq!(got, expected);
    settle(&mut inbox, &link);
    let st = link.stats();
    assert_eq!(st.gave_up.load(std::sync::atomic::Ordering::Relaxed), 0);
    assert!(st.injected_drops.load(std::sync::atomic::Ordering::Relaxed) > 0);
    assert!(st.retried.load(std::sync::atomic::Ordering::Relaxed) > 0);
    server.cache_ctl().set_madinc_controller(None);
    server.shutdown().unwrap();
}

#[test]
fn a_uniform_burst_of_hot_reports_loses_none_under_loss() {
    let mut inbox = Inbox::bind(
        "127.0.0.1:0".parse().unwrap(),
        Loss {
            per_million: 330_000,
            seed: 1,
        },
    )
    .unwrap();
    let link = Link::start(
        inbox.addr().unwrap(),
        Duration::from_millis(5),
        10_000,
        Loss {
            per_million: 330_000,
            seed: 2,
        },
    )
    .unwrap();
    // 64 tenants × 64 keys, all hot at once (a uniform burst), from three switches.
    let mut sent = HashSet::new();
    for t in 0..64u16 {
        for k in 0..64u64 {
            let switch = ((t as u64 + k) % 3) as u16;
            let m = msg(
                t + 300,
                Key::from_id(k),
                MadBody::HotReport {
                    switch,
                    frequency: 8,
                    id: None,
                },
            );
            link.send(&m).unwrap();
            sent.insert((m.tenant, m.key, switch));
        }
    }
    let mut got = HashSet::new();
    while got.len() < sent.len() {
        let m = inbox
            .recv(Duration::from_secs(10))
            .unwrap()
            .expect("a report within 10 s");
        let MadBody::HotReport { switch, .. } = m.body else {
            panic!("unexpected {m:?}");
        };
        assert!(got.insert((m.tenant, m.key, switch)), "delivered twice");
    }
    assert_eq!(got, sent, "no hot report lost");
    // Retries whose acknowledgement was lost come in again and are skipped.
    settle(&mut inbox, &link);
    let st = link.stats();
    let ord = std::sync::atomic::Ordering::Relaxed;
    assert_eq!(st.gave_up.load(ord), 0);
    assert_eq!(st.acked.load(ord), sent.len() as u64);
    assert!(st.injected_drops.load(ord) > 1000);
    let is = inbox.stats();
    assert_eq!(is.delivered, sent.len() as u64);
    assert!(is.duplicates > 0 && is.injected_drops > 0);
    // A new detection period: the same report is new again.
    inbox.new_period();
    let again = msg(
        300,
        Key::from_id(0),
        MadBody::HotReport {
            switch: 0,
            frequency: 9,
            id: None,
        },
    );
    link.send(&again).unwrap();
    assert_eq!(
        inbox.recv(Duration::from_secs(10)).unwrap(),
        Some(again.clone())
    );
    // Garbage and non-control MADINC messages are dropped and counted, never delivered.
    let s = client();
    let to = inbox.addr().unwrap();
    s.send_to(b"\x0e\x04garbage", to).unwrap();
    s.send_to(
        &msg(1, Key::from_id(1), MadBody::ReadRequest)
            .encode()
            .unwrap(),
        to,
    )
    .unwrap();
    assert_eq!(inbox.recv(Duration::from_millis(200)).unwrap(), None);
    assert_eq!(inbox.stats().malformed, 1);
    assert_eq!(inbox.stats().not_control, 1);
}

/// The same burst with every datagram sealed with a deployment key (each retry sealed afresh):
/// nothing lost, nothing refused; then an unsealed report and a replayed sealed one are
/// refused and counted, never delivered.
#[test]
fn a_sealed_burst_loses_none_and_forged_or_replayed_reports_are_refused() {
    use tern_kv::madinc_auth::{AuthKey, Sealer};
    let key = AuthKey::random();
    let ord = std::sync::atomic::Ordering::Relaxed;
    let mut inbox = Inbox::bind(
        "127.0.0.1:0".parse().unwrap(),
        Loss {
            per_million: 330_000,
            seed: 7,
        },
    )
    .unwrap()
    .with_auth(key);
    let link = Link::start_auth(
        inbox.addr().unwrap(),
        Duration::from_millis(5),
        10_000,
        Loss {
            per_million: 330_000,
            seed: 8,
        },
        Some(key),
    )
    .unwrap();
    let mut sent = HashSet::new();
    for t in 0..64u16 {
        for k in 0..32u64 {
            let m = msg(
                t + 500,
                Key::from_id(k),
                MadBody::HotReport {
                    switch: 1,
                    frequency: 8,
                    id: None,
                },
            );
            link.send(&m).unwrap();
            sent.insert((m.tenant, m.key));
        }
    }
    let mut got = HashSet::new();
    while got.len() < sent.len() {
        let m = inbox
            .recv(Duration::from_secs(10))
            .unwrap()
            .expect("a report within 10 s");
        assert!(got.insert((m.tenant, m.key)), "delivered twice");
    }
    settle(&mut inbox, &link);
    assert_eq!(link.stats().gave_up.load(ord), 0);
    assert_eq!(link.stats().forged_acks.load(ord), 0);
    assert!(link.stats().retried.load(ord) > 0);
    assert_eq!((inbox.stats().forged, inbox.stats().replayed), (0, 0));
    // Unsealed, and sealed once but sent twice.
    let s = client();
    let to = inbox.addr().unwrap();
    let fresh = msg(
        999,
        Key::from_id(1),
        MadBody::HotReport {
            switch: 2,
            frequency: 9,
            id: None,
        },
    );
    s.send_to(&fresh.encode().unwrap(), to).unwrap();
    assert_eq!(inbox.recv(Duration::from_millis(200)).unwrap(), None);
    assert_eq!(inbox.stats().forged, 1);
    let sealed = Sealer::new(key).seal(&fresh.encode().unwrap());
    s.send_to(&sealed, to).unwrap();
    assert_eq!(
        inbox.recv(Duration::from_secs(5)).unwrap(),
        Some(fresh.clone())
    );
    s.send_to(&sealed, to).unwrap();
    assert_eq!(inbox.recv(Duration::from_millis(200)).unwrap(), None);
    assert_eq!(inbox.stats().replayed, 1);
}

/// A switch agent with no switch behind it: these tests only relay reports.
struct NoSwitch;

impl tern_kv::switchos::SwitchAccess for NoSwitch {
    fn with(
        &self,
        _: &mut dyn FnMut(&mut dyn tern_runtime::Runtime) -> tern_runtime::RtResult<()>,
    ) -> tern_runtime::RtResult<()> {
        Ok(())
    }
}

/// The race that lost a report in madinc-tenants: a switch reported an item, the report was
/// still in flight when a new detection period began, and the switch (its Bloom filter
/// cleared) reported the same item again. Both reports must reach the controller, each once:
/// the agent numbers every report, so the second is not taken for a copy of the first (a bare
/// HOT_REPORT's identity is (tenant, key, switch) only, and the second was acknowledged as a
/// duplicate and never handed over).
#[test]
fn an_item_reported_again_while_its_first_report_is_in_flight_is_delivered_twice() {
    use tern_kv::madinc_wire::SwitchAgent;
    let mut inbox = Inbox::bind("127.0.0.1:0".parse().unwrap(), Loss::default()).unwrap();
    let agent = SwitchAgent::start(
        Arc::new(NoSwitch),
        Some(inbox.addr().unwrap()),
        Duration::from_millis(5),
        Loss::default(),
    )
    .unwrap();
    let report = msg(
        7,
        Key::from_id(3),
        MadBody::HotReport {
            switch: 1,
            frequency: 4,
            id: None,
        },
    );
    // Made in the old period; the controller has not taken it yet.
    agent.report(&report).unwrap();
    inbox.new_period();
    // Made in the new period.
    agent.report(&report).unwrap();
    let mut got = Vec::new();
    while let Some(m) = inbox.recv(Duration::from_secs(2)).unwrap() {
        got.push(m);
    }
    assert_eq!(got.len(), 2, "both reports are delivered: {got:?}");
    let mut ids = HashSet::new();
    for m in got {
        let MadBody::HotReport {
            switch: 1,
            frequency: 4,
            id: Some(id),
        } = m.body
        else {
            panic!("not a numbered report of switch 1: {m:?}");
        };
        assert_eq!((m.tenant, m.key), (7, Key::from_id(3)));
        assert!(ids.insert(id), "report {id} delivered twice");
    }
    let link = agent.report_link().unwrap();
    settle(&mut inbox, link);
    assert_eq!(inbox.stats().delivered, 2);
    let ord = std::sync::atomic::Ordering::Relaxed;
    assert_eq!(link.stats().acked.load(ord), 2);
    // What the agent relayed before: bare HOT_REPORTs, one identity for both, so the second
    // was acknowledged as a copy of the first and never handed over (made 2, delivered 1).
    let bare = Link::start(
        inbox.addr().unwrap(),
        Duration::from_millis(5),
        u32::MAX,
        Loss::default(),
    )
    .unwrap();
    let mut r = report.clone();
    r.tenant = 9;
    bare.send(&r).unwrap();
    inbox.new_period();
    bare.send(&r).unwrap();
    assert_eq!(inbox.recv(Duration::from_secs(2)).unwrap(), Some(r));
    assert_eq!(inbox.recv(Duration::from_millis(300)).unwrap(), None);
}

/// The mirror race: a report was delivered but its acknowledgement was lost, and its retry
/// arrives after a new detection period began. It is the same report (same number): one
/// delivery, the retry acknowledged as a duplicate.
#[test]
fn a_late_retry_of_a_numbered_report_is_a_duplicate_in_any_period() {
    let mut inbox = Inbox::bind("127.0.0.1:0".parse().unwrap(), Loss::default()).unwrap();
    let s = client();
    let to = inbox.addr().unwrap();
    let report = msg(
        8,
        Key::from_id(4),
        MadBody::HotReport {
            switch: 2,
            frequency: 5,
            id: Some(41),
        },
    );
    let bytes = report.encode().unwrap();
    s.send_to(&bytes, to).unwrap();
    assert_eq!(
        inbox.recv(Duration::from_secs(5)).unwrap(),
        Some(report.clone())
    );
    inbox.new_period();
    s.send_to(&bytes, to).unwrap();
    assert_eq!(inbox.recv(Duration::from_millis(200)).unwrap(), None);
    assert_eq!(inbox.stats().delivered, 1);
    assert_eq!(inbox.stats().duplicates, 1);
    // What the agent relayed before, a bare HOT_REPORT: its late retry counted as a second
    // report (delivered more often than made).
    let mut bare = report.clone();
    bare.body = MadBody::HotReport {
        switch: 2,
        frequency: 5,
        id: None,
    };
    let b = bare.encode().unwrap();
    let other = client();
    other.send_to(&b, to).unwrap();
    assert_eq!(
        inbox.recv(Duration::from_secs(5)).unwrap(),
        Some(bare.clone())
    );
    inbox.new_period();
    other.send_to(&b, to).unwrap();
    assert_eq!(inbox.recv(Duration::from_secs(5)).unwrap(), Some(bare));
    // Both copies were acknowledged, with the report's number.
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut buf = [0u8; 256];
    for _ in 0..2 {
        let n = s.recv(&mut buf).unwrap();
        let a = MadMessage::decode(&buf[..n]).unwrap();
        assert!(
            matches!(
                a.body,
                MadBody::Reply {
                    id: 41,
                    switch: 2,
                    status: 0,
                    ..
                }
            ),
            "{a:?}"
        );
    }
}

fn numbered(id: u32, tenant: u16) -> MadMessage {
    msg(
        tenant,
        Key::from_id(id as u64),
        MadBody::Store {
            op: StoreOp::Update,
            id,
            switch: 4,
            slot: u32::MAX,
            value: b"v".to_vec(),
        },
    )
}

/// The duplicate sets are bounded: a receiver remembers each sender's numbered messages within
/// a window of ids (at most 2 × WINDOW), a retry inside it is still a duplicate, a copy older
/// than it is dropped unanswered, and another sender's ids are its own.
#[test]
fn duplicate_windows_are_bounded_per_sender() {
    use tern_kv::madinc_wire::WINDOW;
    let mut inbox = Inbox::bind("127.0.0.1:0".parse().unwrap(), Loss::default()).unwrap();
    let to = inbox.addr().unwrap();
    let s = client();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 256];
    let total = 2 * WINDOW + 500;
    for id in 1..=total {
        s.send_to(&numbered(id, 1).encode().unwrap(), to).unwrap();
        let m = inbox
            .recv(Duration::from_secs(5))
            .unwrap()
            .expect("delivered");
        assert!(matches!(m.body, MadBody::Store { id: i, .. } if i == id));
        let n = s.recv(&mut buf).unwrap();
        let a = MadMessage::decode(&buf[..n]).unwrap();
        assert!(matches!(a.body, MadBody::Reply { id: i, .. } if i == id));
    }
    assert!(
        inbox.remembered() <= 2 * WINDOW as usize,
        "{} remembered",
        inbox.remembered()
    );
    assert_eq!(inbox.stats().delivered, total as u64);
    // A retry inside the window: a duplicate, acknowledged again.
    s.send_to(&numbered(total - 10, 1).encode().unwrap(), to)
        .unwrap();
    assert_eq!(inbox.recv(Duration::from_millis(200)).unwrap(), None);
    assert_eq!(inbox.stats().duplicates, 1);
    // A copy older than the window: acknowledged long ago, dropped unanswered.
    s.send_to(&numbered(1, 1).encode().unwrap(), to).unwrap();
    assert_eq!(inbox.recv(Duration::from_millis(200)).unwrap(), None);
    assert_eq!(inbox.stats().old_copies, 1);
    // Another sender's id 1 is new.
    let other = client();
    other
        .send_to(&numbered(1, 2).encode().unwrap(), to)
        .unwrap();
    assert_eq!(
        inbox.recv(Duration::from_secs(5)).unwrap(),
        Some(numbered(1, 2))
    );
    // The duplicate was acknowledged again, the old copy not at all.
    s.set_nonblocking(true).unwrap();
    let mut acks = Vec::new();
    while let Ok(n) = s.recv(&mut buf) {
        acks.push(MadMessage::decode(&buf[..n]).unwrap());
    }
    assert_eq!(acks.len(), 1, "{acks:?}");
    assert!(matches!(acks[0].body, MadBody::Reply { id, .. } if id == total - 10));
}

/// A link keeps its unacknowledged numbered messages within the window: a message WINDOW ids
/// newer than one still pending waits for that one's acknowledgement, and one WINDOW ids older
/// than the newest sent is refused with an error.
#[test]
fn a_link_waits_rather_than_outrun_the_receivers_window() {
    use tern_kv::madinc_wire::{ack_for, WireError, WINDOW};
    let rx = client();
    let link = Link::start(
        rx.local_addr().unwrap(),
        Duration::from_millis(50),
        u32::MAX,
        Loss::default(),
    )
    .unwrap();
    let first = numbered(1, 1);
    link.send(&first).unwrap();
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|sc| {
        sc.spawn(|| {
            link.send(&numbered(1 + WINDOW, 1)).unwrap();
            done.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        std::thread::sleep(Duration::from_millis(300));
        assert!(
            !done.load(std::sync::atomic::Ordering::SeqCst),
            "sent past the window"
        );
        let ack = ack_for(&first, 0).unwrap().encode().unwrap();
        let (_, from) = rx.recv_from(&mut [0u8; 256]).unwrap();
        rx.send_to(&ack, from).unwrap();
    });
    assert!(done.load(std::sync::atomic::Ordering::SeqCst));
    let ord = std::sync::atomic::Ordering::Relaxed;
    assert!(link.stats().window_waits.load(ord) > 0);
    assert_eq!(link.pending(), 1);
    let e = link.send(&numbered(1, 3)).unwrap_err();
    assert!(matches!(e, WireError::Window { id: 1, .. }), "{e}");
}
