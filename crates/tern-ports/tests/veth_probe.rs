//! The veth probe example (examples/veth_probe.rs) on a bare veth pair, as root: what it sends
//! out of one end arrives at the other, its delays are positive and plausible, and a path that
//! delivers nothing is measured as delivering nothing. Skipped when not root, or when the
//! example was not built (`cargo test -p tern-ports` builds it).

use std::path::PathBuf;
use std::process::Command;

fn probe_bin() -> Option<PathBuf> {
    // target/<profile>/deps/veth_probe-HASH -> target/<profile>/examples/veth_probe
    let exe = std::env::current_exe().ok()?;
    let p = exe.parent()?.parent()?.join("examples").join("veth_probe");
    p.exists().then_some(p)
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn ip(args: &[&str]) {
    let st = Command::new("ip").args(args).status().expect("ip");
    assert!(st.success(), "ip {args:?} failed");
}

/// A network namespace with two veth pairs (pa0-pa1, pc0-pc1), deleted on drop.
struct Ns(String);

impl Ns {
    fn new() -> Ns {
        let ns = Ns(format!("tvp{}", std::process::id()));
        let _ = Command::new("ip")
            .args(["netns", "del", &ns.0])
            .stderr(std::process::Stdio::null())
            .status();
        ip(&["netns", "add", &ns.0]);
        // No IPv6: its neighbour discovery would put frames on the path that delivers nothing.
        let st = Command::new("ip")
            .args(["netns", "exec", &ns.0, "sysctl", "-qw"])
            .args([
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
            ])
            .status()
            .expect("sysctl");
        assert!(st.success(), "sysctl in {}", ns.0);
        for (a, b) in [("pa0", "pa1"), ("pc0", "pc1")] {
            ip(&[
                "-n", &ns.0, "link", "add", a, "type", "veth", "peer", "name", b,
            ]);
            ip(&["-n", &ns.0, "link", "set", a, "up"]);
            ip(&["-n", &ns.0, "link", "set", b, "up"]);
        }
        ns
    }

    fn probe(&self, bin: &PathBuf, args: &[&str]) -> String {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.0])
            .arg(bin)
            .args(args)
            .output()
            .expect("veth_probe");
        assert!(
            out.status.success(),
            "veth_probe {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }
}

impl Drop for Ns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// The number after `"key": ` in the probe's one-line JSON.
fn field(json: &str, key: &str) -> f64 {
    let pat = format!("\"{key}\": ");
    let at = json.find(&pat).unwrap_or_else(|| panic!("{key} in {json}")) + pat.len();
    json[at..]
        .split([',', '}'])
        .next()
        .unwrap()
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{key} in {json}"))
}

fn latency_on_a_bare_pair(ns: &Ns, bin: &PathBuf, mode: &str) {
    let (mac, dip) = ("00:00:00:00:00:02", "10.0.0.2");
    let j = ns.probe(bin, &[mode, "pa0", "pa1", "0.3", "5000", mac, dip, "0.05"]);
    let (sent, got) = (field(&j, "sent"), field(&j, "received"));
    let skipped = field(&j, "skipped_sends");
    assert!(sent + skipped >= 1400.0 && sent <= 1600.0, "{j}");
    assert!(got >= 0.95 * sent && got <= sent, "{j}");
    let (p50, p99, max) = (
        field(&j, "p50_ns"),
        field(&j, "p99_ns"),
        field(&j, "max_ns"),
    );
    // A bare veth hop takes microseconds, not nothing and not seconds.
    assert!(p50 > 100.0 && p50 < 5e6, "{j}");
    assert!(p50 <= p99 && p99 <= max, "{j}");
    // The histogram holds every delay once.
    let hist = &j[j.find("\"hist\": ").expect("hist") + 8..];
    let hist = &hist[..hist.find("]]").map_or(0, |e| e + 2)];
    let counted: f64 = hist
        .trim_matches(|c| c == '[' || c == ']')
        .split("], [")
        .map(|pair| pair.split(", ").nth(1).unwrap().parse::<f64>().unwrap())
        .sum();
    assert_eq!(counted, got, "{j}");
}

#[test]
fn probe_measures_a_bare_veth_pair() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let Some(bin) = probe_bin() else {
        eprintln!("skipped: examples/veth_probe not built (cargo test -p tern-ports builds it)");
        return;
    };
    let ns = Ns::new();
    let (mac, dip) = ("00:00:00:00:00:02", "10.0.0.2");

    // Latency, pa0 -> pa1: 0.3 s at 5000 frames/s after 0.05 s of warm-up, both probes.
    for mode in ["latency", "latency-spin"] {
        latency_on_a_bare_pair(&ns, &bin, mode);
    }

    // Rate, pa0 -> pa1: pa1's kernel counts what arrives.
    let j = ns.probe(&bin, &["rate", "pa0", "pa1", "0.3", "0", mac, dip, "0.05"]);
    let (sent, got) = (field(&j, "sent"), field(&j, "received"));
    assert!(sent > 1000.0 && got > 0.5 * sent && got <= sent, "{j}");
    assert!(field(&j, "rx_pps") > 1000.0, "{j}");

    // A path that delivers nothing: sent out of pa0, watched on pc1.
    for mode in ["latency", "latency-spin"] {
        let j = ns.probe(&bin, &[mode, "pa0", "pc1", "0.2", "5000", mac, dip, "0.05"]);
        assert!(field(&j, "sent") > 100.0, "{j}");
        assert_eq!(field(&j, "received"), 0.0, "{j}");
    }
    let j = ns.probe(&bin, &["rate", "pa0", "pc1", "0.2", "0", mac, dip, "0.05"]);
    assert!(field(&j, "sent") > 1000.0, "{j}");
    assert_eq!(field(&j, "received"), 0.0, "{j}");
    assert_eq!(field(&j, "loss"), 1.0, "{j}");
}
