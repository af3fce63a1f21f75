//! The `simple_switch` drop-in: the tern binary invoked through a symlink of that name parses
//! simple_switch's command line (exit 1 on bad options, like BMv2) and runs as `tern run`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BMV2: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/fixtures/bmv2");

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A fresh directory holding a `simple_switch` symlink to the built tern binary.
fn drop_in(name: &str) -> (tern_fixtures::ScratchDir, PathBuf) {
    let d = tern_fixtures::scratch(&format!("ss-{name}"));
    let link = d.join("simple_switch");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_tern"), &link).unwrap();
    (d, link)
}

fn ss(dir: &Path, link: &Path, args: &[&str]) -> Output {
    Command::new(link)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

/// A classic pcap (µs, Ethernet) with the given frames.
fn pcap(frames: &[Vec<u8>]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&0xa1b2c3d4u32.to_le_bytes());
    b.extend_from_slice(&2u16.to_le_bytes());
    b.extend_from_slice(&4u16.to_le_bytes());
    for v in [0u32, 0, 65535, 1] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    for (i, f) in frames.iter().enumerate() {
        for v in [1u32, i as u32, f.len() as u32, f.len() as u32] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(f);
    }
    b
}

#[test]
fn invoked_as_simple_switch_runs_use_files_like_tern_run() {
    tern_fixtures::require!();
    let (d, link) = drop_in("files");
    std::fs::copy(
        format!("{BMV2}/targets/simple_switch_grpc/tests/testdata/loopback.json"),
        d.join("prog.json"),
    )
    .unwrap();
    let frames: Vec<Vec<u8>> = (0..3u8)
        .map(|k| {
            let mut f = vec![k; 60];
            f[12] = 0x88;
            f[13] = 0xb5;
            f
        })
        .collect();
    std::fs::write(d.join("p0_in.pcap"), pcap(&frames)).unwrap();
    // simple_switch's own syntax, as p4c's STF runner writes it (JSON last, -i repeated; no
    // --thrift-port, so the run ends with its inputs).
    let o = ss(
        &d,
        &link,
        &[
            "--log-file",
            "switch.log",
            "--log-flush",
            "--use-files",
            "0",
            "--device-id",
            "3",
            // Mininet's P4Switch always passes an event-log address: accepted with a warning.
            "--nanolog",
            "ipc:///tmp/bm-3-log.ipc",
            "-i",
            "0@p0",
            "prog.json",
            "--",
            "--drop-port",
            "64",
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = std::fs::read(d.join("p0_out.pcap")).unwrap();
    // Every frame comes back (loopback), bytes intact.
    for f in &frames {
        assert!(
            out.windows(f.len()).any(|w| w == f.as_slice()),
            "frame missing from p0_out.pcap"
        );
    }
    let err = text(&o.stderr);
    assert!(err.contains("3 packets in, 3 out"), "{err}");
    assert!(
        err.contains("--nanolog ipc:///tmp/bm-3-log.ipc: the nanomsg event log is not supported"),
        "{err}"
    );
}

#[test]
fn simple_switch_versions_and_help() {
    let (d, link) = drop_in("version");
    let o = ss(&d, &link, &["--json-version"]);
    assert!(o.status.success());
    assert_eq!(text(&o.stdout).trim(), "2.24");
    let o = ss(&d, &link, &["-v"]);
    assert!(o.status.success());
    assert!(text(&o.stdout).contains("tern"), "{}", text(&o.stdout));
    let o = ss(&d, &link, &["--help"]);
    assert!(o.status.success());
    let help = text(&o.stdout);
    assert!(
        help.contains("simple_switch") && help.contains("--use-files") && help.contains("ln -s"),
        "{help}"
    );
}

#[test]
fn simple_switch_bad_options_exit_1_with_its_message() {
    let (d, link) = drop_in("bad");
    for (args, want) in [
        (
            vec!["--bogus", "x.json"],
            "Error while parsing command line arguments",
        ),
        (vec!["--no-p4"], "--no-p4 needs --grpc-addr"),
        (
            vec!["--notifications-addr=ipc:///tmp/x", "x.json"],
            "option --notifications-addr is not supported",
        ),
        (
            vec!["--thrift-port", "http", "x.json"],
            "Error while parsing",
        ),
        (vec![], "please specify an input JSON configuration file"),
    ] {
        let o = ss(&d, &link, &args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", text(&o.stderr));
        let err = text(&o.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
    }
    // `tern run` refuses the same options by name too.
    let o = Command::new(env!("CARGO_BIN_EXE_tern"))
        .args(["run", "--restore-state", "s.txt", "x.json"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("--restore-state is not supported"),
        "{}",
        text(&o.stderr)
    );
}
