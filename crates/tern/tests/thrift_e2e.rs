//! One control path, end to end: `tern run --thrift-port P` serves BMv2's Thrift API while it
//! waits (`--use-files 2`), `tern cli --thrift-port P` installs simple_router's routes through
//! it (downloading the program with `bm_get_config`, as simple_switch_CLI does), and the
//! packets replayed after the wait are forwarded by those routes.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tern_ports::pcap::{PcapReader, PcapWriter, WriterConfig};

const BMV2: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/fixtures/bmv2");

fn write_pcap(path: &Path, frames: &[Vec<u8>]) {
    let f = std::fs::File::create(path).unwrap();
    let mut w = PcapWriter::new(f, WriterConfig::ethernet()).unwrap();
    for (i, fr) in frames.iter().enumerate() {
        w.write_packet(1_000_000_000 + i as u64 * 1000, fr).unwrap();
    }
}

fn read_pcap(path: &Path) -> Vec<Vec<u8>> {
    let b = std::fs::read(path).unwrap_or_default();
    if b.is_empty() {
        return Vec::new();
    }
    let mut r = PcapReader::new(&b[..]).unwrap();
    let mut v = Vec::new();
    while let Some(p) = r.next_packet().unwrap() {
        v.push(p.data.to_vec());
    }
    v
}

/// Kills the switch even when an assertion fails.
struct Child(std::process::Child);
impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn cli_over_thrift_configures_a_running_switch() {
    tern_fixtures::require!();
    let d = tern_fixtures::scratch("thrift-e2e");
    let json = format!("{BMV2}/targets/simple_router/simple_router.json");
    let mut frame = vec![0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 8, 0];
    frame.extend_from_slice(&[
        0x45, 0, 0, 50, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 1, 10,
    ]);
    frame.resize(64, 0);
    write_pcap(&d.join("p1_in.pcap"), &[frame]);
    write_pcap(&d.join("p2_in.pcap"), &[]);

    let port = common::free_port();
    let switch = Child(
        Command::new(env!("CARGO_BIN_EXE_tern"))
            .current_dir(&d)
            .args(["run", &json, "-i", "1@p1", "-i", "2@p2", "--use-files", "3"])
            .args(["--thrift-port", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // Wait for the server, then configure through it.
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "Thrift server never came up"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let cli = Command::new(env!("CARGO_BIN_EXE_tern"))
        .args(["cli", "--thrift-port", &port.to_string(), "--commands"])
        .arg(format!("{BMV2}/targets/simple_router/commands.txt"))
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&cli.stdout);
    assert!(cli.status.success(), "{out}");
    assert_eq!(
        out.matches("Entry has been added with handle").count(),
        6,
        "{out}"
    );
    // The replay starts after the 3 s wait; the frame must leave on port 2, rewritten.
    let deadline = Instant::now() + Duration::from_secs(20);
    let got = loop {
        let got = read_pcap(&d.join("p2_out.pcap"));
        if !got.is_empty() || Instant::now() > deadline {
            break got;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    drop(switch);
    assert_eq!(got.len(), 1, "expected one frame on port 2");
    assert_eq!(&got[0][0..6], &[0, 4, 0, 0, 0, 1]);
    assert_eq!(&got[0][6..12], &[0, 0xaa, 0xbb, 0, 0, 1]);
    assert_eq!(got[0][22], 63);
}

/// `--thrift-max-connections N` bounds the Thrift connections `tern run` serves at once: with
/// 1, a held client is served; a second connection is closed as soon as it is accepted (the
/// client reads the end of the stream) and the refusal is said on standard error; the held
/// client still answers; when it leaves, a new client is served.
#[test]
fn thrift_max_connections_bounds_the_connections_served() {
    use std::io::Read;
    use tern_runtime::Runtime;
    tern_fixtures::require!();
    let d = tern_fixtures::scratch("thrift-max-conn");
    let json = format!("{BMV2}/targets/simple_router/simple_router.json");
    write_pcap(&d.join("p1_in.pcap"), &[]);
    let port = common::free_port();
    let mut switch = Child(
        Command::new(env!("CARGO_BIN_EXE_tern"))
            .current_dir(&d)
            .args(["run", &json, "-i", "1@p1", "--use-files", "0"])
            .args(["--thrift-port", &port.to_string()])
            .args(["--thrift-max-connections", "1"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let held = common::thrift_client(port, 20);
    let config = std::fs::read_to_string(&json).unwrap();
    // Answered: the server has taken this connection (its one).
    assert_eq!(held.get_config(), config);

    let mut extra = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    extra
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut b = [0u8; 1];
    match extra.read(&mut b) {
        Ok(0) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        r => panic!("the connection past the bound is not closed at once: {r:?}"),
    }
    assert_eq!(held.get_config(), config, "the held client still answers");
    assert!(held.last_error().is_none());

    drop(held);
    let start = Instant::now();
    let again = loop {
        // The held connection's end reaches the server a moment after the client closes it.
        let rt = tern_thrift::ThriftRuntime::connect(("127.0.0.1", port)).unwrap();
        if rt.get_config() == config {
            break rt;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no client served after the held one left"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(again.last_error().is_none());
    drop(again);

    let _ = switch.0.kill();
    let _ = switch.0.wait();
    let mut err = String::new();
    switch
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(
        err.contains("1 connections open, the most served at once"),
        "the refusal is said on standard error: {err}"
    );
}

/// `--thrift-max-connections 0` is refused with a clear error (a server that serves nobody).
#[test]
fn thrift_max_connections_zero_is_refused() {
    let out = Command::new(env!("CARGO_BIN_EXE_tern"))
        .args(["run", "x.json", "--thrift-max-connections", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--thrift-max-connections"), "{err}");
}
