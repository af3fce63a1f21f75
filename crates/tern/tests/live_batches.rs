//! `tern run` on live interfaces under bursts: the switch in its own network namespace joined
//! by two veth pairs to this test, which sends bursts of frames into port 1 through an
//! AF_PACKET socket and checks that every frame leaves port 2 once, in order, byte for byte
//! (the run loop's batches on receive, `sendmmsg` batches on transmit), with
//! `PACKET_QDISC_BYPASS` (the default) and without it (`--no-qdisc-bypass`), in both ring
//! modes. Needs root and `ip` (skipped with a message otherwise); the namespace, the veths and
//! the switch are removed when the test ends, also on failure.

use std::process::{Child, Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tern_ports::{LiveConfig, LivePorts, PortIo, PortSpec};

const BMV2: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/fixtures/bmv2");
const TERN: &str = env!("CARGO_BIN_EXE_tern");

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

fn ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The switch process and its namespace (which takes the veths with it), removed on drop.
struct Setup {
    ns: String,
    child: Option<Child>,
}

impl Drop for Setup {
    fn drop(&mut self) {
        if let Some(c) = &mut self.child {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = ip(&["netns", "del", &self.ns]);
    }
}

/// BMv2's loopback program with every packet sent to port 2.
fn to_port2() -> String {
    let j = std::fs::read_to_string(format!(
        "{BMV2}/targets/simple_switch_grpc/tests/testdata/loopback.json"
    ))
    .unwrap();
    let operand = r#""type" : "field",
              "value" : ["standard_metadata", "ingress_port"]"#;
    assert_eq!(j.matches(operand).count(), 1, "fixture layout changed");
    j.replacen(operand, r#""type" : "hexstr", "value" : "0x2""#, 1)
}

/// Test frame `k` of flow `k % flows` (the flow is in the source MAC address, which is what
/// `--workers` hashes for non-IP frames).
fn test_frame(k: u32, flows: u32) -> Vec<u8> {
    let src = 0xaa ^ (k % flows) as u8;
    let mut f = vec![0x02, 0, 0, 0, 0, 0xbb, 0x02, 0, 0, 0, 0, src, 0x88, 0xb5];
    f.extend_from_slice(&k.to_be_bytes());
    f.resize(60 + (k as usize * 7) % 200, (k % 251) as u8);
    f
}

/// Run the switch with `extra` options, send `bursts` x `burst` frames of `flows` flows into
/// port 1 and check that each one leaves port 2 once, byte for byte, every flow in order
/// (with one flow: all frames in order).
fn frames_cross(tag: &str, extra: &[&str], bursts: u32, burst: u32, flows: u32) {
    let id = std::process::id() % 100_000;
    let ns = format!("tlb{tag}{id}");
    let (a0, a1, b0, b1) = (
        format!("lb{tag}a{id}"),
        format!("lb{tag}A{id}"),
        format!("lb{tag}b{id}"),
        format!("lb{tag}B{id}"),
    );
    assert!(ip(&["netns", "add", &ns]), "ip netns add {ns}");
    let mut setup = Setup {
        ns: ns.clone(),
        child: None,
    };
    for (o, i) in [(&a0, &a1), (&b0, &b1)] {
        assert!(ip(&["link", "add", o, "type", "veth", "peer", "name", i]));
        assert!(ip(&["link", "set", i, "netns", &ns]));
        let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{o}/disable_ipv6"), "1");
        assert!(ip(&["link", "set", o, "up"]));
    }
    let _ = Command::new("ip")
        .args(["netns", "exec", &ns, "sysctl", "-qw"])
        .arg("net.ipv6.conf.all.disable_ipv6=1")
        .output();
    for i in [&a1, &b1] {
        assert!(ip(&["-n", &ns, "link", "set", i, "up"]));
    }
    let dir = tern_fixtures::scratch(&format!("live-batches-{tag}"));
    std::fs::write(dir.join("prog.json"), to_port2()).unwrap();
    let log = dir.join("stderr.txt");
    let p1 = format!("1@{a1}");
    let p2 = format!("2@{b1}");
    setup.child = Some(
        Command::new("ip")
            .args(["netns", "exec", &ns, TERN, "run", "-i", &p1, "-i", &p2])
            .args(extra)
            .arg(dir.join("prog.json"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    let t0 = Instant::now();
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("switching on")
    {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the switch did not start: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    let specs = [
        PortSpec {
            port: 1,
            name: a0.clone(),
        },
        PortSpec {
            port: 2,
            name: b0.clone(),
        },
    ];
    let cfg = LiveConfig {
        promisc: true,
        ..LiveConfig::default()
    };
    let mut ports = LivePorts::open(&specs, cfg, Arc::new(AtomicBool::new(false))).unwrap();
    let mut buf = Vec::new();
    // The last frame number seen of each flow.
    let mut last: Vec<Option<u32>> = vec![None; flows as usize];
    for b in 0..bursts {
        let first = b * burst;
        for k in first..first + burst {
            assert!(ports.send(1, 0, &test_frame(k, flows)).unwrap());
        }
        ports.flush().unwrap();
        // Every frame of the burst before the next burst (a veth queues ~1,000).
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut seen = 0;
        while seen < burst {
            assert!(
                Instant::now() < deadline,
                "{seen} of burst {b}'s {burst} frames arrived; switch: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            let Some(m) = ports.try_recv(&mut buf).unwrap() else {
                std::thread::sleep(Duration::from_micros(200));
                continue;
            };
            if buf.get(12..14) != Some(&[0x88, 0xb5][..]) {
                continue; // not ours
            }
            let k = u32::from_be_bytes(buf[14..18].try_into().unwrap());
            assert_eq!(m.port, 2, "frame {k} came back on port {}", m.port);
            assert!(
                (first..first + burst).contains(&k),
                "frame {k} in burst {b}"
            );
            assert!(buf == test_frame(k, flows), "frame {k}: other bytes");
            let flow = (k % flows) as usize;
            assert!(
                last[flow].is_none_or(|l| l < k),
                "frame {k} after {:?} of its flow (duplicate or out of order)",
                last[flow]
            );
            last[flow] = Some(k);
            seen += 1;
        }
    }
    // Nothing more of ours arrives (no duplicates).
    std::thread::sleep(Duration::from_millis(50));
    while ports.try_recv(&mut buf).unwrap().is_some() {
        assert_ne!(
            buf.get(12..14),
            Some(&[0x88, 0xb5][..]),
            "a duplicate frame"
        );
    }

    let mut child = setup.child.take().unwrap();
    let pid = child.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the switch did not stop on SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let err = std::fs::read_to_string(&log).unwrap();
    assert!(status.success(), "{err}");
    let n = bursts * burst;
    // Stray frames (none expected with IPv6 off) would add to both counts alike.
    let line = err
        .lines()
        .find(|l| l.contains("packets in,"))
        .unwrap_or_else(|| panic!("no summary: {err}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    let count = |what: &str| -> u32 {
        let i = words.iter().position(|w| w.starts_with(what)).unwrap();
        words[i - 1].parse().unwrap()
    };
    assert!(count("packets") >= n, "{line}");
    assert_eq!(count("packets"), count("out"), "{line}");
    assert!(err.contains(" 0 send errors"), "{err}");
}

#[test]
fn bursts_cross_the_switch_every_frame_in_order() {
    if !is_root() || !ip(&["netns", "list"]) {
        eprintln!("skipping: needs root and `ip` to create namespaces and veth pairs");
        return;
    }
    tern_fixtures::require!();
    frames_cross("d", &[], 20, 200, 1);
    frames_cross(
        "q",
        &["--no-qdisc-bypass", "--rx-ring", "blocks"],
        10,
        200,
        1,
    );
    // AF_XDP on the switch's interfaces (this kernel has it: the run must not fall back).
    frames_cross("x", &["--io", "xdp"], 10, 200, 1);
    // Two workers, eight flows: bursts split between the workers, each flow in order.
    frames_cross("w", &["--workers", "2"], 10, 200, 8);
}

/// Without the privileges AF_XDP needs (an unprivileged user with only CAP_NET_RAW, which
/// AF_PACKET needs), `--io auto` says why and runs on AF_PACKET, and `--io xdp` exits 1 with
/// the reason. In a namespace of its own (its loopback interface, its Thrift port).
#[test]
fn io_auto_falls_back_to_af_packet_with_the_reason() {
    let has_setpriv = Command::new("setpriv")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !is_root() || !has_setpriv || !ip(&["netns", "list"]) {
        eprintln!("skipping: needs root, setpriv and `ip`");
        return;
    }
    tern_fixtures::require!();
    let ns = format!("tlbf{}", std::process::id() % 100_000);
    assert!(ip(&["netns", "add", &ns]));
    let mut setup = Setup {
        ns: ns.clone(),
        child: None,
    };
    assert!(ip(&["-n", &ns, "link", "set", "lo", "up"]));
    // The unprivileged user must be able to read the program and write nothing: the folder
    // lives in /tmp itself, since the test's TMPDIR (the suite's own, mode 0700) is closed to
    // that user; removed when the test ends, also on failure.
    let tmp = tempfile::Builder::new()
        .prefix("tern-live-fallback-")
        .tempdir_in("/tmp")
        .unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("prog.json"), to_port2()).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let unprivileged = |io: &str, log: &std::path::Path| {
        Command::new("ip")
            .args([
                "netns",
                "exec",
                &ns,
                "setpriv",
                "--reuid=65534",
                "--regid=65534",
            ])
            .args([
                "--clear-groups",
                "--inh-caps=+net_raw",
                "--ambient-caps=+net_raw",
            ])
            .args([TERN, "run", "--io", io, "-i", "1@lo"])
            .arg(dir.join("prog.json"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap()
    };

    let log = dir.join("xdp.txt");
    let o = unprivileged("xdp", &log).wait().unwrap();
    let err = std::fs::read_to_string(&log).unwrap();
    assert_eq!(o.code(), Some(1), "{err}");
    assert!(err.contains("tern run: --io xdp: interface 'lo'"), "{err}");

    let log = dir.join("auto.txt");
    setup.child = Some(unprivileged("auto", &log));
    let t0 = Instant::now();
    let err = loop {
        let err = std::fs::read_to_string(&log).unwrap_or_default();
        if err.contains("switching on") {
            break err;
        }
        if let Some(s) = setup.child.as_mut().unwrap().try_wait().unwrap() {
            panic!("the switch exited ({s}): {err}");
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "no start: {err}");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(
        err.contains("tern run: AF_XDP is not available (interface 'lo': ")
            && err.contains("); using AF_PACKET"),
        "{err}"
    );
}
