//! End-to-end tests of the UDP server and the client over loopback, including a hard crash
//! (SIGKILL of a server process) and restart.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use tern_kv::client::Client;
use tern_kv::protocol::{Key, Message, Op};
use tern_kv::router::Router;
use tern_kv::server::{handle, start, Action, ServerConfig, ServerStats};
use tern_kv::storage::{Store, StoreOptions};

fn client_for(addrs: Vec<SocketAddr>) -> Client {
    Client::new(Router::new(addrs).unwrap(), Duration::from_millis(500), 4).unwrap()
}

#[test]
fn get_put_delete_over_two_servers() {
    let d0 = tempfile::tempdir().unwrap();
    let d1 = tempfile::tempdir().unwrap();
    let mut c0 = ServerConfig::new(d0.path(), 0);
    c0.partitions = 2;
    c0.workers = 2;
    let mut c1 = ServerConfig::new(d1.path(), 0);
    c1.index = 1;
    let s0 = start(&c0).unwrap();
    let s1 = start(&c1).unwrap();
    let mut c = client_for(vec![s0.addr(), s1.addr()]);
    for id in 0..100u64 {
        let k = Key::from_id(id);
        assert_eq!(c.get(k).unwrap().value, None);
        assert_eq!(c.put(k, format!("v{id}").as_bytes()).unwrap(), 1);
        assert_eq!(c.put(k, format!("w{id}").as_bytes()).unwrap(), 2);
    }
    for id in 0..100u64 {
        let k = Key::from_id(id);
        let r = c.get(k).unwrap();
        assert_eq!(r.value.unwrap(), format!("w{id}").as_bytes());
        assert_eq!(r.seq, 2);
        assert_eq!(usize::from(r.served_by), c.router().server_index(&k));
    }
    assert_eq!(c.delete(Key::from_id(5)).unwrap(), 3);
    let r = c.get(Key::from_id(5)).unwrap();
    assert_eq!((r.value, r.seq), (None, 3));
    // Both servers got traffic, and their stores hold exactly their keys.
    assert!(c.sent.iter().all(|&n| n > 50), "{:?}", c.sent);
    let live = c.snapshot_server(0).unwrap() + c.snapshot_server(1).unwrap();
    assert_eq!(live, 99);
    c.shutdown_server(0).unwrap();
    c.shutdown_server(1).unwrap();
    assert!(s0.stopping());
    s0.wait().unwrap();
    s1.wait().unwrap();
}

#[test]
fn switch_assigned_seqs_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), 1, &StoreOptions::default()).unwrap();
    let stats = ServerStats::default();
    let k = Key::from_id(9);
    let put = |seq: u32, v: &[u8]| {
        Message::new(Op::PUTREQ_SEQ, k)
            .with_value(v)
            .with_seq(seq, 0)
    };
    let reply = |m: &Message| match handle(&store, 3, m, &stats).unwrap() {
        Action::Reply(r) => r,
        other => panic!("{other:?}"),
    };
    let r = reply(&put(20, b"new"));
    assert_eq!(r.op, Op::PUTRES_SEQ);
    assert_eq!(r.stat.unwrap().nodeidx, 3);
    reply(&put(19, b"old"));
    reply(&Message::new(Op::DELREQ_SEQ_CASE3, k).with_seq(18, 1));
    let g = reply(&Message::new(Op::GETREQ_NLATEST, k));
    assert_eq!(g.op, Op::GETRES_LATEST_SEQ);
    assert_eq!(g.value.as_deref(), Some(&b"new"[..]));
    assert_eq!(g.seq.unwrap().seq, 20);
    assert_eq!(stats.snapshot()[3], 2, "two stale writes");
    reply(&Message::new(Op::DELREQ_SEQ, k).with_seq(21, 0));
    let g = reply(&Message::new(Op::GETREQ_NLATEST, k));
    assert_eq!(g.op, Op::GETRES_DELETED_SEQ);
    assert_eq!(g.seq.unwrap().seq, 21);
    // Responses and unknown requests are ignored, not answered.
    let ignored = handle(
        &store,
        3,
        &Message::new(Op::PUTRES, k).with_stat(true, 0),
        &stats,
    );
    assert_eq!(ignored.unwrap(), Action::Ignore);
}

#[test]
fn client_times_out_with_a_clear_error() {
    // A bound socket that never answers.
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut c = Client::new(
        Router::new(vec![silent.local_addr().unwrap()]).unwrap(),
        Duration::from_millis(30),
        2,
    )
    .unwrap();
    let e = c.get(Key::from_id(1)).unwrap_err().to_string();
    assert!(e.contains("GETREQ") && e.contains("3 attempts"), "{e}");
    assert_eq!(c.retried, 2);
    let e = c.shutdown_server(7).unwrap_err().to_string();
    assert!(e.contains("server index 7 out of range"), "{e}");
    // All three attempts reached the socket.
    let mut buf = [0u8; 64];
    silent
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    for _ in 0..3 {
        let (n, _) = silent.recv_from(&mut buf).unwrap();
        assert_eq!(Message::decode(&buf[..n]).unwrap().op, Op::GETREQ);
    }
}

#[test]
fn malformed_datagrams_do_not_stop_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(&ServerConfig::new(dir.path(), 0)).unwrap();
    let raw = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    for junk in [&[][..], &[0xff, 0xff, 1], &[0x00, 0x01, 0, 0, 0]] {
        raw.send_to(junk, s.addr()).unwrap();
    }
    let mut c = client_for(vec![s.addr()]);
    c.put(Key::from_id(1), b"ok").unwrap();
    assert_eq!(c.get(Key::from_id(1)).unwrap().value.unwrap(), b"ok");
    assert!(
        s.stats().snapshot()[4] >= 2,
        "rejected count {:?}",
        s.stats().snapshot()
    );
    s.shutdown().unwrap();
}

/// A server process that is killed when the test ends, also when it fails.
struct ServerProcess(Child);

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_server(dir: &std::path::Path, port: u16) -> (ServerProcess, SocketAddr) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tern-kv-server"))
        .args(["--dir", dir.to_str().unwrap(), "--port", &port.to_string()])
        .args(["--partitions", "2", "--workers", "2"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening ")
        .expect(&line)
        .parse()
        .unwrap();
    (ServerProcess(child), addr)
}

#[test]
fn crash_and_restart_keeps_every_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, addr) = spawn_server(dir.path(), 0);
    let mut c = client_for(vec![addr]);
    let mut acked = Vec::new();
    for id in 0..300u64 {
        let k = Key::from_id(id);
        let seq = c.put(k, &id.to_be_bytes()).unwrap();
        acked.push((k, seq, Some(id.to_be_bytes().to_vec())));
    }
    for id in (0..300u64).step_by(3) {
        let seq = c.delete(Key::from_id(id)).unwrap();
        acked[id as usize] = (Key::from_id(id), seq, None);
    }
    // SIGKILL: no flush, no clean shutdown.
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    let port = addr.port();
    let (mut child, addr2) = spawn_server(dir.path(), port);
    assert_eq!(addr, addr2);
    let mut c = client_for(vec![addr2]);
    for (k, seq, value) in &acked {
        let r = c.get(*k).unwrap();
        assert_eq!(&r.value, value, "{k:?}");
        assert_eq!(r.seq, *seq, "{k:?}");
    }
    // Seqs continue from where they were, never backwards.
    assert_eq!(c.put(Key::from_id(1), b"again").unwrap(), 2);
    c.shutdown_server(0).unwrap();
    assert!(child.0.wait().unwrap().success());
}

/// The cache duties of a server: seq-checked evictions, record embedding, malformed eviction
/// bodies logged and ignored, hot-key reports queued for the switch OS and cleared by its ACK.
#[test]
fn cache_duties_check_seqs_and_reject_bad_bodies() {
    use tern_kv::server::{evict_body, handle_from, parse_evict_body, CacheCtl};
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), 1, &StoreOptions::default()).unwrap();
    let stats = ServerStats::default();
    let ctl = CacheCtl::default();
    let k = Key::from_id(5);
    let run = |m: &Message| handle_from(&store, 2, m, &stats, &ctl, None).unwrap();
    let evict =
        |v: Option<&[u8]>, seq| Message::new(Op::CACHE_EVICT, k).with_body(evict_body(v, seq));
    assert_eq!(
        run(&evict(Some(b"switch value"), 30)),
        Action::Reply(Message::new(Op::CACHE_EVICT_ACK, k))
    );
    // An older record never overwrites a newer one; a retransmission is harmless.
    run(&evict(Some(b"older"), 29));
    run(&evict(Some(b"switch value"), 30));
    let rec = store.get(&k).unwrap().unwrap();
    assert_eq!(
        (rec.seq, rec.value.as_deref()),
        (30, Some(&b"switch value"[..]))
    );
    // Record embedding: the newer of the switch's and the stored record is answered.
    let embedded = |seq: u32| {
        Message::new(Op::GETREQ_BEINGEVICTED_RECORD, k)
            .with_value(&b"embedded"[..])
            .with_seq(seq, 0)
            .with_stat(true, 0xFFFF)
    };
    let Action::Reply(r) = run(&embedded(31)) else {
        panic!()
    };
    assert_eq!(
        (r.op, r.value.as_deref()),
        (Op::GETRES_SEQ, Some(&b"embedded"[..]))
    );
    let Action::Reply(r) = run(&embedded(12)) else {
        panic!()
    };
    assert_eq!(r.value.as_deref(), Some(&b"switch value"[..]));
    // A deleted record evicts as a tombstone.
    run(&evict(None, 40));
    assert_eq!(store.get(&k).unwrap().unwrap().value, None);
    // Malformed bodies: clear errors, ignored, counted.
    assert!(parse_evict_body(&[1, 0, 0])
        .unwrap_err()
        .contains("need at least 7"));
    assert!(parse_evict_body(&[1, 0, 0, 0, 1, 0, 5, b'x'])
        .unwrap_err()
        .contains("value length 5"));
    assert!(parse_evict_body(&[7, 0, 0, 0, 1, 0, 0])
        .unwrap_err()
        .contains("stat 7"));
    assert!(parse_evict_body(&[0, 0, 0, 0, 1, 0, 1, b'x'])
        .unwrap_err()
        .contains("deleted"));
    let before = stats.snapshot()[4];
    let bad = Message::new(Op::CACHE_EVICT, k).with_body(vec![9; 3]);
    assert_eq!(run(&bad), Action::Ignore);
    assert_eq!(stats.snapshot()[4], before + 1);
    assert_eq!(store.get(&k).unwrap().unwrap().seq, 40);
    // A POP request is answered as a GET and queues a report once a switch OS is known.
    let Action::Reply(r) = run(&Message::new(Op::GETREQ_POP, k)) else {
        panic!()
    };
    assert_eq!(r.op, Op::GETRES_SEQ);
    assert_eq!(
        ctl.pending_count(),
        0,
        "no switch OS configured: nothing to report"
    );
    ctl.set_switchos(Some("127.0.0.1:9".parse().unwrap()));
    run(&Message::new(Op::GETREQ_POP, k));
    assert_eq!(ctl.pending_count(), 1);
    assert_eq!(run(&Message::new(Op::CACHE_POP_ACK, k)), Action::Ignore);
    assert_eq!(ctl.pending_count(), 0);
    // TERN_MAXSEQ answers the largest stored seq.
    let Action::Reply(r) = run(&Message::new(Op::TERN_MAXSEQ, k)) else {
        panic!()
    };
    assert_eq!(r.op, Op::TERN_MAXSEQ_ACK);
    assert_eq!(r.body, 40u32.to_be_bytes());
}

#[test]
fn preserved_records_round_trip_and_bad_lines_are_named() {
    use tern_kv::history::{read_preserved, write_preserved};
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("preserved.txt");
    let recs = vec![
        (Key::from_id(1), Some(b"abc".to_vec()), 7),
        (Key::from_id(2), None, 9),
        (Key::from_id(3), Some(Vec::new()), 1),
    ];
    write_preserved(&p, &recs).unwrap();
    assert_eq!(read_preserved(&p).unwrap(), recs);
    std::fs::write(&p, "00 1 1 aa\n").unwrap();
    assert!(read_preserved(&p).unwrap_err().contains("line 1"));
    std::fs::write(&p, format!("{} x 1\n", "00".repeat(16))).unwrap();
    assert!(read_preserved(&p).unwrap_err().contains("line 1"));
}
