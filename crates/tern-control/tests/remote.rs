//! The local control transport on 127.0.0.1: sessions share one switch, replies are framed.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use tern_control::remote::{serve, Client};
use tern_dataplane::{Switch, SwitchOptions};
use tern_runtime::Runtime;

const ECMP: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/fixtures/bmv2/targets/simple_switch/tests/CLI_tests/testdata/ecmp.json"
);

fn start() -> (std::net::SocketAddr, Arc<Mutex<Switch>>) {
    let text = std::fs::read_to_string(ECMP).unwrap();
    let sw = Switch::from_json(&text, SwitchOptions::default()).unwrap();
    let program = sw.program().clone();
    let sw = Arc::new(Mutex::new(sw));
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let shared = Arc::clone(&sw);
    std::thread::spawn(move || serve(listener, shared, program));
    (addr, sw)
}

#[test]
fn clients_share_one_switch() {
    let (addr, sw) = start();
    let mut a = Client::connect(addr).unwrap();
    let mut b = Client::connect(addr).unwrap();
    assert_eq!(a.execute("table_num_entries forward").unwrap(), "0\n");
    let out = a
        .execute("table_add forward set_dmac 10.0.0.1 => 00:01:02:03:04:05")
        .unwrap();
    assert!(
        out.ends_with("Entry has been added with handle 0\n"),
        "{out}"
    );
    assert_eq!(b.execute("table_num_entries forward").unwrap(), "1\n");
    assert_eq!(sw.lock().unwrap().mt_get_num_entries("forward").unwrap(), 1);
    assert_eq!(b.execute("bogus").unwrap(), "*** Unknown syntax: bogus\n");
    assert_eq!(b.execute("").unwrap(), "");
    assert!(a.execute("two\nlines").is_err());
    // The session survives an invalid request.
    assert_eq!(a.execute("table_num_entries forward").unwrap(), "1\n");
}

#[test]
fn raw_protocol_framing_and_oversized_lines() {
    let (addr, _sw) = start();
    let mut s = TcpStream::connect(addr).unwrap();
    let read_reply = |s: &mut TcpStream| {
        let mut len = [0u8; 4];
        s.read_exact(&mut len).unwrap();
        let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
        s.read_exact(&mut body).unwrap();
        String::from_utf8(body).unwrap()
    };
    s.write_all(b"table_num_entries send_frame\n").unwrap();
    assert_eq!(read_reply(&mut s), "0\n");
    // Non-UTF-8 bytes are tolerated.
    s.write_all(b"\xff\xfe junk\n").unwrap();
    assert!(read_reply(&mut s).starts_with("*** Unknown syntax: "));
    // A line over the limit gets an error reply, then the session continues.
    let big = vec![b'a'; tern_control::remote::MAX_LINE + 10];
    s.write_all(&big).unwrap();
    s.write_all(b"\ngreet\n").unwrap();
    assert!(read_reply(&mut s).starts_with("Error: command line longer than"));
    assert_eq!(read_reply(&mut s), "hello\n");
}
