//! Helpers shared by the tests that run tern as a process: privilege and tool checks, `ip`,
//! free ports, bounded waits (for a child, for its Thrift server), and a network-namespace
//! topology removed on drop.
#![allow(dead_code)] // each test binary uses a subset

use std::path::Path;
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}

pub fn on_path(prog: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| {
        std::env::split_paths(&p).any(|d| d.join(prog).is_file())
            || ["/usr/sbin", "/sbin", "/usr/bin", "/bin"]
                .iter()
                .any(|d| Path::new(d).join(prog).is_file())
    })
}

/// Run `ip ARGS`, panicking with its stderr on failure.
pub fn ip(args: &[&str]) {
    let o = Command::new("ip").args(args).output().expect("running ip");
    assert!(
        o.status.success(),
        "ip {}: {}",
        args.join(" "),
        text(&o.stderr)
    );
}

/// A TCP port that was free a moment ago (for the switch's Thrift server).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A Thrift client of the switch serving on 127.0.0.1:`port`, retried every 50 ms while the
/// server comes up; fails the test after `secs` seconds.
pub fn thrift_client(port: u16, secs: u64) -> tern_thrift::ThriftRuntime {
    let start = Instant::now();
    loop {
        if let Ok(rt) = tern_thrift::ThriftRuntime::connect(("127.0.0.1", port)) {
            return rt;
        }
        assert!(
            start.elapsed() < Duration::from_secs(secs),
            "the Thrift server on port {port} never came up"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Wait for a child, killing it after `secs` seconds.
pub fn wait_with_timeout(mut child: Child, secs: u64) -> Output {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// The namespaces, veths and switch process of one test; all removed on drop (even on panic).
pub struct Topo {
    pub ns: Vec<String>,
    pub links: Vec<String>,
    pub switch: Option<Child>,
}

impl Drop for Topo {
    fn drop(&mut self) {
        if let Some(mut c) = self.switch.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        for l in &self.links {
            let _ = Command::new("ip").args(["link", "del", l]).output();
        }
        for n in &self.ns {
            let _ = Command::new("ip").args(["netns", "del", n]).output();
        }
    }
}

/// A scratch directory `<tmp>/tern-<prefix>-<name>-<random>`, removed when the test ends (also
/// on failure).
pub fn tmpdir(prefix: &str, name: &str) -> tern_fixtures::ScratchDir {
    tern_fixtures::scratch(&format!("{prefix}-{name}"))
}

impl Topo {
    /// An empty topology.
    pub fn new() -> Topo {
        Topo {
            ns: Vec::new(),
            links: Vec::new(),
            switch: None,
        }
    }

    /// Host `ns` with interface eth0 (`mac`, the addresses `addrs`, each /24), default route
    /// via `gw` whose MAC is `gw_mac` (a static neighbour: no ARP needed), joined to root-side
    /// veth `root_if`.
    pub fn add_host(
        &mut self,
        ns: &str,
        root_if: &str,
        mac: &str,
        addrs: &[&str],
        gw: &str,
        gw_mac: &str,
    ) {
        let tmp_if = format!("{root_if}x");
        ip(&["netns", "add", ns]);
        self.ns.push(ns.to_string());
        ip(&[
            "link", "add", root_if, "type", "veth", "peer", "name", &tmp_if,
        ]);
        self.links.push(root_if.to_string());
        ip(&["link", "set", &tmp_if, "netns", ns]);
        let x = |args: &[&str]| {
            let mut v = vec!["netns", "exec", ns, "ip"];
            v.extend_from_slice(args);
            ip(&v);
        };
        x(&["link", "set", &tmp_if, "name", "eth0"]);
        x(&["link", "set", "eth0", "address", mac]);
        let _ = Command::new("ip")
            .args(["netns", "exec", ns, "sysctl", "-qw"])
            .arg("net.ipv6.conf.all.disable_ipv6=1")
            .output();
        for a in addrs {
            x(&["addr", "add", &format!("{a}/24"), "dev", "eth0"]);
        }
        x(&["link", "set", "lo", "up"]);
        x(&["link", "set", "eth0", "up"]);
        x(&["route", "add", "default", "via", gw, "dev", "eth0"]);
        x(&[
            "neigh",
            "replace",
            gw,
            "lladdr",
            gw_mac,
            "dev",
            "eth0",
            "nud",
            "permanent",
        ]);
        let _ = std::fs::write(
            format!("/proc/sys/net/ipv6/conf/{root_if}/disable_ipv6"),
            "1",
        );
        ip(&["link", "set", root_if, "up"]);
    }

    /// Wait (at most `secs`) until the switch started in `self.switch` writes "switching on"
    /// to `log`; panics with the log if it exits or does not get there in time.
    pub fn wait_switching(&mut self, log: &Path, secs: u64) {
        let deadline = Instant::now() + Duration::from_secs(secs);
        while !std::fs::read_to_string(log)
            .unwrap_or_default()
            .contains("switching on")
        {
            assert!(
                Instant::now() < deadline,
                "switch did not start: {}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
            assert!(
                self.switch.as_mut().unwrap().try_wait().unwrap().is_none(),
                "switch exited: {}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
