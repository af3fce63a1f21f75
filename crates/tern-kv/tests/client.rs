//! The client library against a stand-in server that answers by hand: replies carry no request
//! id, so a late reply to an earlier send must never answer a later request of the same key.

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::time::Duration;
use tern_kv::client::Client;
use tern_kv::protocol::{Key, Message, Op};
use tern_kv::router::Router;

/// GETRES_SEQ of `key` with `seq` and a value naming it, from server 0.
fn getres(key: Key, seq: u32) -> Vec<u8> {
    Message::new(Op::GETRES_SEQ, key)
        .with_value(format!("value of seq {seq}").into_bytes())
        .with_seq(seq, 0)
        .with_stat(true, 0)
        .encode()
        .unwrap()
}

/// A stand-in server on loopback (closed when the test ends, even on failure).
fn stand_in() -> (UdpSocket, SocketAddr) {
    let s = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let a = s.local_addr().unwrap();
    (s, a)
}

/// A read sent twice (the first send's answer late, after the retry's) gets both answers; the
/// second must not become the answer to the next read of the key, sent after a write of seq 35
/// was acknowledged (the answer to that read carries seq 35). Before the client moved to a
/// fresh socket after a retried request, the next read returned the left-over seq 34: a stale
/// read the history checker reports although every server and switch answered correctly.
#[test]
fn a_late_reply_to_a_retried_read_never_answers_the_next_read() {
    let (server, addr) = stand_in();
    let key = Key::from_id(19);
    let mut c = Client::new(
        Router::new(vec![addr]).unwrap(),
        Duration::from_millis(100),
        3,
    )
    .unwrap();
    let fake = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        let (_, first) = server.recv_from(&mut buf).unwrap();
        let (_, retry) = server.recv_from(&mut buf).unwrap();
        // The retry's answer, then the first send's (late): both seq 34.
        server.send_to(&getres(key, 34), retry).unwrap();
        server.send_to(&getres(key, 34), first).unwrap();
        // The next read comes after a write of seq 35 was acknowledged.
        let (n, next) = server.recv_from(&mut buf).unwrap();
        assert_eq!(Message::decode(&buf[..n]).unwrap().op, Op::GETREQ);
        server.send_to(&getres(key, 35), next).unwrap();
    });
    let g = c.get(key).unwrap();
    assert_eq!(g.seq, 34);
    assert!(c.retried >= 1);
    let g = c.get(key).unwrap();
    fake.join().unwrap();
    assert_eq!(
        (g.seq, g.value.as_deref()),
        (35, Some(&b"value of seq 35"[..])),
        "the late answer to the first read answered the second"
    );
    assert_eq!(c.rebound, 1);
}

/// A request that got no answer at all may get it after the client gave up: the next request
/// of the key (here a read after a failed one) must not take it.
#[test]
fn an_answer_after_the_client_gave_up_never_answers_the_next_request() {
    let (server, addr) = stand_in();
    let key = Key::from_id(7);
    let mut c = Client::new(
        Router::new(vec![addr]).unwrap(),
        Duration::from_millis(50),
        0,
    )
    .unwrap();
    let mut buf = [0u8; 2048];
    assert!(c.get(key).is_err(), "nobody answered yet");
    let (_, first) = server.recv_from(&mut buf).unwrap();
    // Too late: the client gave up.
    server.send_to(&getres(key, 1), first).unwrap();
    let fake = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        let (_, next) = server.recv_from(&mut buf).unwrap();
        server.send_to(&getres(key, 2), next).unwrap();
    });
    let g = c.get(key).unwrap();
    fake.join().unwrap();
    assert_eq!(
        g.seq, 2,
        "the answer to the failed read answered the next one"
    );
    assert_eq!(c.rebound, 1);
}

/// A request answered at its first send keeps the socket (no stray answer can follow).
#[test]
fn a_request_answered_at_once_keeps_its_socket() {
    let (server, addr) = stand_in();
    let key = Key::from_id(3);
    let mut c = Client::new(
        Router::new(vec![addr]).unwrap(),
        Duration::from_millis(2000),
        3,
    )
    .unwrap();
    let fake = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        let mut ports = Vec::new();
        for seq in 1..=3 {
            let (_, from) = server.recv_from(&mut buf).unwrap();
            ports.push(from.port());
            server.send_to(&getres(key, seq), from).unwrap();
        }
        ports
    });
    for seq in 1..=3 {
        assert_eq!(c.get(key).unwrap().seq, seq);
    }
    let ports = fake.join().unwrap();
    assert!(ports.iter().all(|p| *p == ports[0]), "{ports:?}");
    assert_eq!((c.retried, c.rebound), (0, 0));
}
