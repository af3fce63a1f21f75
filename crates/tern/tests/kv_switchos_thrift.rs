//! The caches' switch OS drives a switch it only reaches over BMv2's Thrift API: `tern run
//! farreach.json --thrift-port P` (pcap ports), the switch OS on a `ThriftRuntime` admits a
//! reported key, and the GETREQ replayed afterwards is turned into GETREQ_NLATEST by the entry
//! and registers the switch OS installed.

mod common;

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tern_kv::protocol::{Key, Message, Op};
use tern_kv::switchos::{CacheKind, SwitchOs, SwitchOsConfig};
use tern_ports::pcap::{PcapReader, PcapWriter, WriterConfig};
use tern_runtime::{MatchParam, Runtime};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// Kills the switch and removes the directory even when an assertion fails.
struct Guard(std::process::Child, std::path::PathBuf);
impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let _ = std::fs::remove_dir_all(&self.1);
    }
}

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
    let Ok(mut r) = PcapReader::new(&b[..]) else {
        return Vec::new();
    };
    let mut v = Vec::new();
    while let Ok(Some(p)) = r.next_packet() {
        v.push(p.data.to_vec());
    }
    v
}

/// GETREQ for `key` from 10.77.1.1:8888 to 10.77.2.1:1152.
fn getreq(key: Key) -> Vec<u8> {
    let mut payload = Op::GETREQ.code().to_be_bytes().to_vec();
    payload.extend_from_slice(&key.0);
    let mut f = vec![2, 0x77, 0, 0, 0, 2, 2, 0x77, 0, 0, 0, 1, 8, 0];
    let total = (28 + payload.len()) as u16;
    let mut ip = vec![
        0x45, 0, 0, 0, 0, 0, 0, 0, 64, 17, 0, 0, 10, 77, 1, 1, 10, 77, 2, 1,
    ];
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    let csum = tern_fixtures::ipv4_checksum(&ip);
    ip[10..12].copy_from_slice(&csum.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&8888u16.to_be_bytes());
    f.extend_from_slice(&1152u16.to_be_bytes());
    f.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(&payload);
    f
}

#[test]
fn switch_os_admits_a_key_over_thrift() {
    let d = std::env::temp_dir().join(format!("tern-kv-thrift-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    let json = d.join("farreach.json");
    let o = Command::new(env!("CARGO_BIN_EXE_tern"))
        .arg("compile")
        .arg(Path::new(ROOT).join("p4/kv/farreach.p4"))
        .arg("-o")
        .arg(&json)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let key = Key::from_id(42);
    write_pcap(&d.join("p1_in.pcap"), &[getreq(key)]);
    write_pcap(&d.join("p2_in.pcap"), &[]);
    let port = common::free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_tern"))
        .current_dir(&d)
        .arg("run")
        .arg(&json)
        .args(["-i", "1@p1", "-i", "2@p2", "--use-files", "4"])
        .args(["--thrift-port", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _guard = Guard(child, d.clone());
    let rt = common::thrift_client(port, 20);
    let rt = Mutex::new(rt);
    {
        let mut r = rt.lock().unwrap();
        for (ip, p) in [
            (Ipv4Addr::new(10, 77, 1, 1), 1u16),
            (Ipv4Addr::new(10, 77, 2, 1), 2),
        ] {
            r.mt_add_entry(
                "KvIngress.forward",
                &[MatchParam::Exact(ip.octets().to_vec())],
                "KvIngress.to_port",
                &[p.to_be_bytes().to_vec()],
                None,
            )
            .unwrap();
        }
    }
    // A stand-in storage server: answers TERN_MAXSEQ.
    let server = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    server
        .set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let server_addr: SocketAddr = server.local_addr().unwrap();
    let answer = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            if let Ok((n, from)) = server.recv_from(&mut buf) {
                let m = Message::decode(&buf[..n]).unwrap();
                if m.op == Op::TERN_MAXSEQ {
                    let a = Message::new(Op::TERN_MAXSEQ_ACK, m.key).with_body(77u32.to_be_bytes());
                    server.send_to(&a.encode().unwrap(), from).unwrap();
                    return;
                }
            }
        }
    });
    let mut cfg = SwitchOsConfig::new(CacheKind::FarReach, vec![server_addr]);
    cfg.snapshot_period = None;
    let os = SwitchOs::start(rt, cfg).unwrap();
    answer.join().unwrap();
    assert_eq!(os.seq_base(), 77);
    // The server's report of a hot key.
    let reporter = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    reporter
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let pop = Message::new(Op::CACHE_POP, key).with_body(0u16.to_be_bytes());
    reporter.send_to(&pop.encode().unwrap(), os.addr()).unwrap();
    let mut buf = [0u8; 2048];
    let (n, _) = reporter.recv_from(&mut buf).unwrap();
    assert_eq!(Message::decode(&buf[..n]).unwrap().op, Op::CACHE_POP_ACK);
    let deadline = Instant::now() + Duration::from_secs(5);
    while os.cached_count() == 0 {
        assert!(Instant::now() < deadline, "key never admitted");
        std::thread::sleep(Duration::from_millis(10));
    }
    let (mut entries, mut valid) = (0, 0);
    os.with_switch(&mut |rt| {
        entries = rt.mt_get_num_entries("KvIngress.cache_lookup")?;
        valid = rt.register_read("KvIngress.validvalue_reg", 0)?;
        Ok(())
    })
    .unwrap();
    assert_eq!((entries, valid), (1, 1));
    // The replayed GETREQ (after --use-files 4) meets the installed entry: latest = 0, so the
    // switch asks the server for the latest value.
    let deadline = Instant::now() + Duration::from_secs(20);
    let got = loop {
        let got = read_pcap(&d.join("p2_out.pcap"));
        if !got.is_empty() || Instant::now() > deadline {
            break got;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(got.len(), 1, "expected the request on port 2");
    let op = u16::from_be_bytes([got[0][42], got[0][43]]);
    assert_eq!(op, Op::GETREQ_NLATEST.code(), "{:02x?}", got[0]);
}
