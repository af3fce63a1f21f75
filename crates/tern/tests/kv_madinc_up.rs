//! `tern kv up --mode sim|loopback --cache madinc --topology star --switches 3` (loopback: every
//! switch a `tern kv madinc-switch` process, gone after ctrl-c): an external client
//! reaches the MADINC network through the front socket; writes are stored in the tenant's own
//! key space, a hot key ends up answered by a switch, another tenant and a forged tag get
//! nothing of it; ctrl-c (SIGINT) stops it.

use std::net::{SocketAddr, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tern_kv::madinc::{MadBody, MadMessage, SOURCE_SWITCH};
use tern_kv::madinc_wire::call;
use tern_kv::protocol::Key;

struct Up(Child);

impl Drop for Up {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-INT", &self.0.id().to_string()])
            .status();
        let end = Instant::now() + Duration::from_secs(20);
        while Instant::now() < end {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn req(
    s: &UdpSocket,
    front: SocketAddr,
    tenant: u16,
    tag: u32,
    key: Key,
    body: MadBody,
) -> Option<MadMessage> {
    call(
        s,
        front,
        &MadMessage {
            tenant,
            tag,
            key,
            body,
        },
        Duration::from_millis(300),
        3,
    )
    .unwrap()
}

#[test]
fn a_client_uses_a_star_of_three_switches_through_kv_up() {
    client_through_kv_up("sim");
}

/// The same with every switch a `tern kv madinc-switch` process; they are gone after ctrl-c.
#[test]
fn a_client_uses_a_star_of_three_switch_processes_through_kv_up() {
    client_through_kv_up("loopback");
}

/// The same with every switch process in a network namespace of its own (veth, `tc netem`);
/// the namespaces are gone after ctrl-c. Needs root (skipped otherwise).
#[test]
fn a_client_uses_a_star_of_three_switch_namespaces_through_kv_up() {
    if !std::process::Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout.starts_with(b"0\n"))
        .unwrap_or(false)
    {
        eprintln!("skipped: netns mode needs root");
        return;
    }
    client_through_kv_up("netns");
}

/// The MADINC namespaces of `tern kv up` process `pid`.
fn namespaces_of(pid: u32) -> Vec<String> {
    let o = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&format!("tmad-{pid}-")))
        .map(str::to_string)
        .collect()
}

/// The child processes of `pid`.
fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            if let Ok(c) = std::fs::read_to_string(t.path().join("children")) {
                out.extend(c.split_whitespace().filter_map(|x| x.parse::<u32>().ok()));
            }
        }
    }
    out
}

fn client_through_kv_up(mode: &str) {
    let dir = tern_fixtures::scratch("madinc-up");
    let info = dir.join("front.json");
    let data = dir.join("data");
    let child = Command::new(env!("CARGO_BIN_EXE_tern"))
        .args([
            "kv",
            "up",
            "--mode",
            mode,
            "--cache",
            "madinc",
            "--topology",
            "star",
        ])
        .args(["--switches", "3", "--tenants", "2", "--hot-threshold", "2"])
        .arg("--front-file")
        .arg(&info)
        .arg("--dir")
        .arg(&data)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let up = Up(child);
    let end = Instant::now() + Duration::from_secs(60);
    let mut up = up;
    while !info.exists() {
        assert!(Instant::now() < end, "kv up never wrote its front file");
        if let Some(st) = up.0.try_wait().unwrap() {
            panic!("kv up --mode {mode} ended before it was up: {st}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&info).unwrap()).unwrap();
    let front: SocketAddr = v["front"].as_str().unwrap().parse().unwrap();
    let t: Vec<(u16, u32)> = v["tenants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p[0].as_u64().unwrap() as u16, p[1].as_u64().unwrap() as u32))
        .collect();
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    let k = Key::from_id(42);
    let w = req(
        &s,
        front,
        t[0].0,
        t[0].1,
        k,
        MadBody::WriteRequest {
            value: b"mine".to_vec(),
        },
    );
    assert!(matches!(
        w.unwrap().body,
        MadBody::WriteReply { stored: true, .. }
    ));
    // The other tenant: nothing under that key; a forged tag: no answer at all.
    let other = req(&s, front, t[1].0, t[1].1, k, MadBody::ReadRequest).unwrap();
    assert!(matches!(
        other.body,
        MadBody::ReadReply { found: false, .. }
    ));
    assert!(req(&s, front, t[0].0, t[1].1, k, MadBody::ReadRequest).is_none());
    // Reading it makes it hot; soon a switch answers.
    let mut from_switch = false;
    for _ in 0..100 {
        let r = req(&s, front, t[0].0, t[0].1, k, MadBody::ReadRequest).unwrap();
        match r.body {
            MadBody::ReadReply {
                found: true,
                source,
                value,
            } => {
                assert_eq!(value, b"mine");
                if source == SOURCE_SWITCH {
                    from_switch = true;
                    break;
                }
            }
            b => panic!("unexpected {b:?}"),
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(from_switch, "the hot key was never answered by a switch");
    let kids = children(up.0.id());
    let pid = up.0.id();
    if mode != "sim" {
        assert_eq!(kids.len(), 3, "one process per switch: {kids:?}");
    }
    if mode == "netns" {
        assert_eq!(namespaces_of(pid).len(), 3, "one namespace per switch");
    }
    // ctrl-c stops it: exit status 130.
    Command::new("kill")
        .args(["-INT", &up.0.id().to_string()])
        .status()
        .unwrap();
    let end = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(st) = up.0.try_wait().unwrap() {
            break st;
        }
        assert!(Instant::now() < end, "kv up did not stop on SIGINT");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(130));
    // Nothing left behind: the switch processes are gone (killed, or their stdin closed).
    let end = Instant::now() + Duration::from_secs(10);
    for k in kids {
        while std::path::Path::new(&format!("/proc/{k}")).exists()
            && std::fs::read_to_string(format!("/proc/{k}/stat"))
                .map(|st| !st.contains(") Z "))
                .unwrap_or(false)
        {
            assert!(Instant::now() < end, "switch process {k} outlived kv up");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    assert_eq!(namespaces_of(pid), Vec::<String>::new(), "namespaces left");
}
