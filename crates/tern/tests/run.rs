//! `tern run` end to end: the built binary on real fixtures with pcap-file ports.

use std::path::Path;
use std::process::{Command, Output};
use tern_ports::pcap::PcapReader;

const BMV2: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/fixtures/bmv2");

fn loopback_json() -> String {
    std::fs::read_to_string(format!(
        "{BMV2}/targets/simple_switch_grpc/tests/testdata/loopback.json"
    ))
    .unwrap()
}

/// The loopback program's `egress_spec = ingress_port` source operand, as the fixture spells it.
const INGRESS_PORT_OPERAND: &str = r#""type" : "field",
              "value" : ["standard_metadata", "ingress_port"]"#;

/// loopback.json with its one action rewritten: send to `port` instead of the ingress port,
/// and optionally `log_msg` first.
fn loopback_variant(port: Option<u32>, log: bool) -> String {
    let mut j = loopback_json();
    if let Some(p) = port {
        assert_eq!(
            j.matches(INGRESS_PORT_OPERAND).count(),
            1,
            "fixture layout changed"
        );
        j = j.replacen(
            INGRESS_PORT_OPERAND,
            &format!(r#""type" : "hexstr", "value" : "{p:#x}""#),
            1,
        );
    }
    if log {
        let prim = r#""primitives" : ["#;
        assert_eq!(j.matches(prim).count(), 1, "fixture layout changed");
        j = j.replacen(
            prim,
            r#""primitives" : [{"op": "log_msg", "parameters": [{"type": "string", "value": "seen on port {} len {}"}, {"type": "parameters_vector", "value": [{"type": "field", "value": ["standard_metadata", "ingress_port"]}, {"type": "field", "value": ["standard_metadata", "packet_length"]}]}]}, "#,
            1,
        );
    }
    j
}

/// A scratch directory for one test, removed when it ends (also on failure).
fn tmpdir(name: &str) -> tern_fixtures::ScratchDir {
    tern_fixtures::scratch(&format!("run-{name}"))
}

fn u16n(v: u16) -> [u8; 2] {
    v.to_ne_bytes()
}
fn u32n(v: u32) -> [u8; 4] {
    v.to_ne_bytes()
}

/// Classic pcap, host byte order, microseconds, Ethernet; frames as (sec, usec, bytes).
fn pcap_bytes(snaplen: u32, linktype: u32, frames: &[(u32, u32, Vec<u8>)]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&u32n(0xa1b2_c3d4));
    b.extend_from_slice(&u16n(2));
    b.extend_from_slice(&u16n(4));
    b.extend_from_slice(&[0; 8]);
    b.extend_from_slice(&u32n(snaplen));
    b.extend_from_slice(&u32n(linktype));
    for (s, us, d) in frames {
        b.extend_from_slice(&u32n(*s));
        b.extend_from_slice(&u32n(*us));
        b.extend_from_slice(&u32n(d.len() as u32));
        b.extend_from_slice(&u32n(d.len() as u32));
        b.extend_from_slice(d);
    }
    b
}

fn frame(tag: u8, len: usize) -> Vec<u8> {
    let mut f = vec![0xffu8; 6];
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, tag]);
    f.extend_from_slice(&[0x08, 0x00]);
    while f.len() < len {
        f.push(tag.wrapping_add(f.len() as u8));
    }
    f
}

fn tern(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tern"))
        .current_dir(dir)
        .arg("run")
        .args(args)
        .output()
        .expect("run tern")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn read_frames(path: &Path) -> Vec<(u64, Vec<u8>)> {
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut r = PcapReader::new(&b[..]).unwrap();
    let mut v = Vec::new();
    while let Some(p) = r.next_packet().unwrap() {
        v.push((p.ts_ns, p.data.to_vec()));
    }
    v
}

#[test]
fn loopback_sends_every_packet_back_byte_exact() {
    tern_fixtures::require!();
    let d = tmpdir("loopback");
    std::fs::write(d.join("prog.json"), loopback_json()).unwrap();
    let in0 = vec![
        (100, 5, frame(1, 64)),
        (100, 9, frame(2, 60)),
        (102, 0, frame(3, 1500)),
    ];
    let in1 = vec![(100, 7, frame(4, 80)), (101, 0, frame(5, 14))];
    std::fs::write(d.join("pcap0_in.pcap"), pcap_bytes(65535, 1, &in0)).unwrap();
    std::fs::write(d.join("pcap1_in.pcap"), pcap_bytes(65535, 1, &in1)).unwrap();
    let o = tern(
        &d,
        &[
            "--use-files",
            "0",
            "--deterministic",
            "-i",
            "0@pcap0",
            "-i",
            "1@pcap1",
            "prog.json",
        ],
    );
    let err = text(&o.stderr);
    assert!(o.status.success(), "stderr: {err}");
    assert!(
        err.contains("5 packets in, 5 out, 0 dropped, 0 discarded"),
        "{err}"
    );
    // simple_switch's output format: snaplen 0, DLT_NULL; with --deterministic the record
    // timestamps are the input packets' timestamps.
    assert_eq!(
        std::fs::read(d.join("pcap0_out.pcap")).unwrap(),
        pcap_bytes(0, 0, &in0)
    );
    assert_eq!(
        std::fs::read(d.join("pcap1_out.pcap")).unwrap(),
        pcap_bytes(0, 0, &in1)
    );
}

#[test]
fn logs_follow_timestamp_merge_order_with_log_msg() {
    tern_fixtures::require!();
    let d = tmpdir("log");
    std::fs::write(d.join("prog.json"), loopback_variant(None, true)).unwrap();
    // Port 1's packet is earlier; the tie at t=5 goes to port 0 first.
    let in0 = vec![(5, 0, frame(1, 70)), (9, 0, frame(2, 71))];
    let in1 = vec![(3, 0, frame(3, 72)), (5, 0, frame(4, 73))];
    std::fs::write(d.join("a_in.pcap"), pcap_bytes(65535, 1, &in0)).unwrap();
    std::fs::write(d.join("b_in.pcap"), pcap_bytes(65535, 1, &in1)).unwrap();
    let o = tern(
        &d,
        &[
            "prog.json",
            "-i",
            "1@b",
            "-i",
            "0@a",
            "--use-files",
            "--deterministic",
            "--log-file",
            "switch.log",
            "--log-flush",
            "-L",
            "info",
        ],
    );
    assert!(o.status.success(), "stderr: {}", text(&o.stderr));
    let log = std::fs::read_to_string(d.join("switch.log")).unwrap();
    let msgs: Vec<&str> = log.lines().filter(|l| l.contains("seen on port")).collect();
    assert_eq!(msgs.len(), 4, "{log}");
    let want = [
        "[00:00:03.000] [bmv2] [I] [0.0] [cxt 0] seen on port 1 len 72",
        "[00:00:05.000] [bmv2] [I] [1.0] [cxt 0] seen on port 0 len 70",
        "[00:00:05.000] [bmv2] [I] [2.0] [cxt 0] seen on port 1 len 73",
        "[00:00:09.000] [bmv2] [I] [3.0] [cxt 0] seen on port 0 len 71",
    ];
    assert_eq!(msgs, want);
    // -L info hides the debug lines.
    assert!(!log.contains("Processing packet"), "{log}");
    assert!(
        log.contains("Adding interface a as port 0 (files)"),
        "{log}"
    );
}

#[test]
fn console_log_at_debug_shows_packet_progress() {
    tern_fixtures::require!();
    let d = tmpdir("console");
    std::fs::write(d.join("prog.json"), loopback_json()).unwrap();
    std::fs::write(
        d.join("p_in.pcap"),
        pcap_bytes(0, 1, &[(1, 0, frame(9, 42))]),
    )
    .unwrap();
    let o = tern(
        &d,
        &[
            "--use-files",
            "0",
            "-i",
            "3@p",
            "--log-console",
            "prog.json",
        ],
    );
    assert!(o.status.success(), "stderr: {}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.contains("[0.0] [cxt 0] Processing packet received on port 3"),
        "{out}"
    );
    assert!(
        out.contains("[0.0] [cxt 0] Transmitting packet of size 42 out of port 3"),
        "{out}"
    );
    assert!(out.contains("[bmv2] [D] [thread "), "{out}");
}

#[test]
fn frames_to_unattached_or_drop_ports_do_not_appear() {
    tern_fixtures::require!();
    let d = tmpdir("discard");
    let inputs = vec![(1, 0, frame(1, 60)), (2, 0, frame(2, 60))];
    std::fs::write(d.join("p_in.pcap"), pcap_bytes(65535, 1, &inputs)).unwrap();
    // To port 7, which has no file: discarded.
    std::fs::write(d.join("to7.json"), loopback_variant(Some(7), false)).unwrap();
    let o = tern(&d, &["--use-files", "0", "-i", "0@p", "to7.json"]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("2 packets in, 0 out, 0 dropped, 2 discarded"),
        "{err}"
    );
    assert!(read_frames(&d.join("p_out.pcap")).is_empty());
    // To port 5, made the drop port with a target option after `--`: dropped.
    std::fs::write(d.join("to5.json"), loopback_variant(Some(5), false)).unwrap();
    let o = tern(
        &d,
        &[
            "--use-files",
            "0",
            "-i",
            "0@p",
            "-i",
            "5@q",
            "to5.json",
            "--",
            "--drop-port",
            "5",
        ],
    );
    let err = text(&o.stderr);
    // q_in.pcap is missing: the run refuses to start.
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("q_in.pcap"), "{err}");
    assert!(!d.join("q_out.pcap").exists());
    std::fs::write(d.join("q_in.pcap"), pcap_bytes(65535, 1, &[])).unwrap();
    let o = tern(
        &d,
        &[
            "--use-files",
            "0",
            "-i",
            "0@p",
            "-i",
            "5@q",
            "to5.json",
            "--",
            "--drop-port",
            "5",
        ],
    );
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("2 packets in, 0 out, 2 dropped, 0 discarded"),
        "{err}"
    );
    // Without the target option port 5 is an ordinary port.
    let o = tern(
        &d,
        &["--use-files", "0", "-i", "0@p", "-i", "5@q", "to5.json"],
    );
    assert!(o.status.success());
    let got: Vec<Vec<u8>> = read_frames(&d.join("q_out.pcap"))
        .into_iter()
        .map(|(_, f)| f)
        .collect();
    assert_eq!(got, vec![inputs[0].2.clone(), inputs[1].2.clone()]);
}

#[test]
fn pcapng_input_and_pcap_capture_dir() {
    tern_fixtures::require!();
    let d = tmpdir("pcapng");
    std::fs::write(d.join("prog.json"), loopback_json()).unwrap();
    std::fs::copy(
        format!("{BMV2}/tests/testdata/en0.pcap"),
        d.join("en0_in.pcap"),
    )
    .unwrap();
    std::fs::create_dir_all(d.join("cap")).unwrap();
    let o = tern(
        &d,
        &[
            "--use-files",
            "0",
            "-i",
            "2@en0",
            "--pcap",
            "cap",
            "--deterministic",
            "prog.json",
        ],
    );
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("27 packets in, 27 out"), "{err}");
    let input = read_frames(&d.join("en0_in.pcap"));
    assert_eq!(input.len(), 27);
    // Every frame comes back unchanged, with its own timestamp (µs resolution).
    let out = read_frames(&d.join("en0_out.pcap"));
    let want: Vec<_> = input
        .iter()
        .map(|(t, f)| (t / 1000 * 1000, f.clone()))
        .collect();
    assert_eq!(out, want);
    // --pcap DIR: copies of the port's traffic.
    assert_eq!(read_frames(&d.join("cap/en0_in.pcap")), want);
    assert_eq!(read_frames(&d.join("cap/en0_out.pcap")), want);
    // --pcap into the directory holding the port files would overwrite the input.
    let o = tern(
        &d,
        &[
            "--use-files",
            "0",
            "-i",
            "2@en0",
            "--pcap",
            ".",
            "prog.json",
        ],
    );
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("--pcap would overwrite"),
        "{}",
        text(&o.stderr)
    );
    assert_eq!(read_frames(&d.join("en0_in.pcap")).len(), 27);
}

#[test]
fn rejected_json_exits_1_with_simple_switch_message_on_stdout() {
    tern_fixtures::require!();
    let d = tmpdir("reject");
    for (file, msg) in [
        (
            "tests/testdata/empty_config.json",
            "Field standard_metadata.egress_port is required by switch target but is not defined",
        ),
        (
            "tests/testdata/one_extern.json",
            "Invalid reference to extern type 'DummyExtern'",
        ),
    ] {
        let path = format!("{BMV2}/{file}");
        let o = tern(&d, &[&path]);
        assert_eq!(o.status.code(), Some(1), "{file}");
        assert!(text(&o.stdout).contains(msg), "{file}: {}", text(&o.stdout));
    }
    let o = tern(&d, &["--json-version"]);
    assert!(o.status.success());
    assert_eq!(text(&o.stdout), "2.24\n");
    // Missing JSON argument.
    let o = tern(&d, &["--use-files", "0"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("please specify an input JSON configuration file"));
}

#[test]
fn corrupt_input_and_bad_options_are_clear_errors() {
    tern_fixtures::require!();
    let d = tmpdir("corrupt");
    std::fs::write(d.join("prog.json"), loopback_json()).unwrap();
    let mut b = pcap_bytes(65535, 1, &[(1, 0, frame(1, 60))]);
    b.truncate(b.len() - 3);
    std::fs::write(d.join("x_in.pcap"), &b).unwrap();
    let o = tern(&d, &["--use-files", "0", "-i", "0@x", "prog.json"]);
    assert!(!o.status.success());
    let err = text(&o.stderr);
    assert!(
        err.contains("x_in.pcap") && err.contains("byte offset 40"),
        "{err}"
    );

    for (args, want) in [
        (
            vec!["--use-files", "0", "-i", "zero@x", "prog.json"],
            "bad interface 'zero@x'",
        ),
        (
            vec!["-i", "0@x", "prog.json"],
            "interface 'x' (port 0) does not exist",
        ),
        (
            vec!["--use-files", "0", "prog.json", "--", "--bogus"],
            "unknown target option '--bogus'",
        ),
        (
            vec!["--use-files", "soon", "prog.json"],
            "--use-files: 'soon'",
        ),
        (
            vec!["--use-files", "0", "--commands", "nope.txt", "prog.json"],
            "--commands: cannot open nope.txt",
        ),
    ] {
        let o = tern(&d, &args);
        assert!(!o.status.success(), "{args:?}");
        let err = text(&o.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

/// Wait for a child, killing it after `secs` seconds (a hung run fails instead of hanging).
fn wait_with_timeout(mut child: std::process::Child, secs: u64) -> Output {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let o = child.wait_with_output().unwrap();
            panic!("tern run did not finish: stderr {}", text(&o.stderr));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn fifo_inputs_opened_in_port_order_like_p4c_stf_runner() {
    tern_fixtures::require!();
    use std::io::Write;
    let d = tmpdir("fifo");
    std::fs::write(d.join("prog.json"), loopback_json()).unwrap();
    for n in ["pcap0_in.pcap", "pcap1_in.pcap"] {
        let st = Command::new("mkfifo").arg(d.join(n)).status().unwrap();
        assert!(st.success(), "mkfifo");
    }
    let child = Command::new(env!("CARGO_BIN_EXE_tern"))
        .current_dir(&d)
        .args([
            "run",
            "--use-files",
            "0",
            "--deterministic",
            "-i",
            "0@pcap0",
        ])
        .args(["-i", "1@pcap1", "prog.json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Open both writers first (ascending port order), then write, then close.
    let mut f0 = std::fs::OpenOptions::new()
        .write(true)
        .open(d.join("pcap0_in.pcap"))
        .unwrap();
    let mut f1 = std::fs::OpenOptions::new()
        .write(true)
        .open(d.join("pcap1_in.pcap"))
        .unwrap();
    let in0 = vec![(7, 0, frame(1, 64)), (9, 0, frame(2, 65))];
    let in1 = vec![(8, 0, frame(3, 66))];
    f0.write_all(&pcap_bytes(65535, 1, &in0)).unwrap();
    f1.write_all(&pcap_bytes(65535, 1, &in1)).unwrap();
    drop(f0);
    drop(f1);
    let o = wait_with_timeout(child, 60);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("3 packets in, 3 out"), "{err}");
    assert_eq!(
        std::fs::read(d.join("pcap0_out.pcap")).unwrap(),
        pcap_bytes(0, 0, &in0)
    );
    assert_eq!(
        std::fs::read(d.join("pcap1_out.pcap")).unwrap(),
        pcap_bytes(0, 0, &in1)
    );
}

#[test]
fn use_files_n_waits_n_seconds_before_replay() {
    tern_fixtures::require!();
    let d = tmpdir("wait");
    std::fs::write(d.join("prog.json"), loopback_json()).unwrap();
    std::fs::write(
        d.join("w_in.pcap"),
        pcap_bytes(0, 1, &[(1, 0, frame(1, 60))]),
    )
    .unwrap();
    let t = std::time::Instant::now();
    let o = tern(&d, &["--use-files", "1", "-i", "0@w", "prog.json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(t.elapsed() >= std::time::Duration::from_secs(1));
    // Output file exists from the start; the packet is written after the wait with a
    // wall-clock timestamp (no --deterministic).
    let out = read_frames(&d.join("w_out.pcap"));
    assert_eq!(out.len(), 1);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    assert!(
        out[0].0 <= now && now - out[0].0 < 120_000_000_000,
        "{}",
        out[0].0
    );
}

/// `--commands` applies simple_switch_CLI commands before traffic: simple_router with BMv2's
/// own commands.txt forwards 10.0.1.10 to port 2 with the MACs rewritten and TTL decremented.
#[test]
fn commands_file_installs_routes_before_traffic() {
    tern_fixtures::require!();
    let d = tmpdir("commands");
    std::fs::copy(
        format!("{BMV2}/targets/simple_router/simple_router.json"),
        d.join("prog.json"),
    )
    .unwrap();
    std::fs::copy(
        format!("{BMV2}/targets/simple_router/commands.txt"),
        d.join("cmds.txt"),
    )
    .unwrap();
    let mut frame = vec![0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 8, 0];
    frame.extend_from_slice(&[
        0x45, 0, 0, 50, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 1, 10,
    ]);
    frame.resize(64, 0);
    std::fs::write(
        d.join("p1_in.pcap"),
        pcap_bytes(65535, 1, &[(1, 0, frame.clone())]),
    )
    .unwrap();
    std::fs::write(d.join("p2_in.pcap"), pcap_bytes(65535, 1, &[])).unwrap();
    let o = tern(
        &d,
        &[
            "--use-files",
            "0",
            "-i",
            "1@p1",
            "-i",
            "2@p2",
            "--commands",
            "cmds.txt",
            "prog.json",
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.contains("Entry has been added with handle 0"),
        "CLI output missing: {out}"
    );
    let got = read_frames(&d.join("p2_out.pcap"));
    assert_eq!(got.len(), 1, "one frame on port 2");
    let f = &got[0].1;
    assert_eq!(&f[0..6], &[0, 4, 0, 0, 0, 1], "dst MAC from forward");
    assert_eq!(
        &f[6..12],
        &[0, 0xaa, 0xbb, 0, 0, 1],
        "src MAC from send_frame"
    );
    assert_eq!(f[22], 63, "TTL decremented");
    assert!(read_frames(&d.join("p1_out.pcap")).is_empty());
}

/// More packets than one batch of the run loop (32), two inputs interleaved by timestamp:
/// outputs byte-exact with `--deterministic`, in input order with wall-clock timestamps
/// (non-decreasing, taken during the run) without it, and drops and discards counted per
/// packet across batch boundaries.
#[test]
fn batched_run_keeps_order_bytes_and_counts() {
    tern_fixtures::require!();
    let d = tmpdir("batched");
    let in0: Vec<(u32, u32, Vec<u8>)> = (0..230u32)
        .map(|k| (200, 2 * k, frame(k as u8, 60 + (k as usize % 40))))
        .collect();
    let in1: Vec<(u32, u32, Vec<u8>)> = (0..170u32)
        .map(|k| (200, 3 * k + 1, frame(0x80 | k as u8, 64 + (k as usize % 7))))
        .collect();
    std::fs::write(d.join("pcap0_in.pcap"), pcap_bytes(65535, 1, &in0)).unwrap();
    std::fs::write(d.join("pcap1_in.pcap"), pcap_bytes(65535, 1, &in1)).unwrap();
    let ports = ["-i", "0@pcap0", "-i", "1@pcap1", "prog.json"];
    let run = |json: String, det: bool| {
        std::fs::write(d.join("prog.json"), json).unwrap();
        let mut args = vec!["--use-files", "0"];
        if det {
            args.push("--deterministic");
        }
        args.extend(ports);
        let o = tern(&d, &args);
        let err = text(&o.stderr);
        assert!(o.status.success(), "stderr: {err}");
        err
    };

    let err = run(loopback_json(), true);
    assert!(
        err.contains("400 packets in, 400 out, 0 dropped, 0 discarded"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(d.join("pcap0_out.pcap")).unwrap(),
        pcap_bytes(0, 0, &in0)
    );
    assert_eq!(
        std::fs::read(d.join("pcap1_out.pcap")).unwrap(),
        pcap_bytes(0, 0, &in1)
    );

    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let err = run(loopback_json(), false);
    let after = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    assert!(
        err.contains("400 packets in, 400 out, 0 dropped, 0 discarded"),
        "{err}"
    );
    for (name, input) in [("pcap0_out.pcap", &in0), ("pcap1_out.pcap", &in1)] {
        let got = read_frames(&d.join(name));
        let frames: Vec<&Vec<u8>> = got.iter().map(|(_, f)| f).collect();
        let want: Vec<&Vec<u8>> = input.iter().map(|(_, _, f)| f).collect();
        assert_eq!(frames, want, "{name}");
        let mut last = 0;
        for (ts, _) in &got {
            // Microsecond records: compare at that resolution.
            assert!(*ts >= last, "{name}: timestamps go back");
            assert!(
                *ts + 1_000 >= before / 1_000 * 1_000 && *ts <= after,
                "{name}: {ts}"
            );
            last = *ts;
        }
    }

    // Every packet to the drop port (511): no outputs, each one counted as dropped.
    let err = run(loopback_variant(Some(511), false), false);
    assert!(
        err.contains("400 packets in, 0 out, 400 dropped, 0 discarded"),
        "{err}"
    );
    assert!(read_frames(&d.join("pcap0_out.pcap")).is_empty());
    // Every packet to port 7, which has no file: discarded, not dropped.
    let err = run(loopback_variant(Some(7), false), false);
    assert!(
        err.contains("400 packets in, 0 out, 0 dropped, 400 discarded"),
        "{err}"
    );
}
