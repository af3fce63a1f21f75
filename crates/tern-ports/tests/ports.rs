//! Port sets: `-i` parsing, `--use-files` file ports (merge order, outputs, missing inputs),
//! in-memory ports and `--pcap` capture.

use std::path::Path;
use tern_ports::pcap::{ByteOrder, PcapReader, PcapWriter, TsResolution, WriterConfig};
use tern_ports::{Capture, FilePorts, MemPorts, PortError, PortIo, PortSpec};

/// A scratch directory for one test, removed when it ends (also on failure).
fn tmpdir(name: &str) -> tern_fixtures::ScratchDir {
    tern_fixtures::scratch(&format!("ports-{name}"))
}

fn spec(p: u32, n: &str) -> PortSpec {
    PortSpec {
        port: p,
        name: n.to_string(),
    }
}

fn write_pcap(path: &Path, order: ByteOrder, res: TsResolution, frames: &[(u64, &[u8])]) {
    let f = std::fs::File::create(path).unwrap();
    let mut w = PcapWriter::new(
        f,
        WriterConfig {
            byte_order: order,
            resolution: res,
            snaplen: 0,
            linktype: 1,
            flush_each_packet: true,
        },
    )
    .unwrap();
    for (ts, d) in frames {
        w.write_packet(*ts, d).unwrap();
    }
}

fn read_pcap(path: &Path) -> Vec<(u64, Vec<u8>)> {
    let b = std::fs::read(path).unwrap();
    let mut r = PcapReader::new(&b[..]).unwrap();
    let mut v = Vec::new();
    while let Some(p) = r.next_packet().unwrap() {
        v.push((p.ts_ns, p.data.to_vec()));
    }
    v
}

#[test]
fn interface_spec_parsing() {
    assert_eq!(PortSpec::parse("3@veth0").unwrap(), spec(3, "veth0"));
    assert_eq!(PortSpec::parse("0@a@b").unwrap(), spec(0, "a@b"));
    for (bad, why) in [
        ("veth0", "'@' is missing"),
        ("x@veth0", "'x' is not"),
        ("-1@veth0", "'-1' is not"),
        ("1@", "empty"),
    ] {
        let e = PortSpec::parse(bad).unwrap_err().to_string();
        assert!(e.contains(bad) && e.contains(why), "{bad}: {e}");
    }
}

#[test]
fn file_ports_merge_by_timestamp_then_port() {
    let d = tmpdir("merge");
    // Port 1's file is microseconds big-endian, port 0's nanoseconds little-endian.
    write_pcap(
        &d.join("p0_in.pcap"),
        ByteOrder::Little,
        TsResolution::Nano,
        &[(1_000, b"a0"), (3_000, b"a1"), (3_000, b"a2")],
    );
    write_pcap(
        &d.join("p1_in.pcap"),
        ByteOrder::Big,
        TsResolution::Micro,
        &[(0, b"b0"), (3_000, b"b1"), (9_000, b"b2")],
    );
    // Given in reverse order: the port set sorts by port number.
    let mut ports = FilePorts::open(&d, &[spec(1, "p1"), spec(0, "p0")]).unwrap();
    assert_eq!(ports.ports(), &[spec(0, "p0"), spec(1, "p1")]);
    let mut buf = Vec::new();
    let mut got = Vec::new();
    while let Some(m) = ports.recv(&mut buf).unwrap() {
        got.push((m.port, m.ts_ns, String::from_utf8(buf.clone()).unwrap()));
    }
    let want = [
        (1, 0, "b0"),
        (0, 1_000, "a0"),
        (0, 3_000, "a1"),
        (0, 3_000, "a2"),
        (1, 3_000, "b1"),
        (1, 9_000, "b2"),
    ];
    let want: Vec<_> = want
        .iter()
        .map(|(p, t, s)| (*p, *t, s.to_string()))
        .collect();
    assert_eq!(got, want);
    assert!(ports.recv(&mut buf).unwrap().is_none());

    // Outputs: created with simple_switch's header, frames appended per port.
    assert!(ports.send(1, 2_000_000_000, b"out-1").unwrap());
    assert!(ports.send(0, 3_000_000_000, b"out-0").unwrap());
    assert!(!ports.send(7, 0, b"nowhere").unwrap());
    ports.flush().unwrap();
    assert_eq!(
        read_pcap(&d.join("p1_out.pcap")),
        vec![(2_000_000_000, b"out-1".to_vec())]
    );
    assert_eq!(
        read_pcap(&d.join("p0_out.pcap")),
        vec![(3_000_000_000, b"out-0".to_vec())]
    );
    let hdr = std::fs::read(d.join("p0_out.pcap")).unwrap();
    let r = PcapReader::new(&hdr[..]).unwrap();
    assert_eq!((r.header().snaplen, r.header().linktype), (0, 0));
    assert_eq!(ports.files().len(), 4);
}

#[test]
fn output_is_flushed_per_packet() {
    let d = tmpdir("flush");
    write_pcap(
        &d.join("x_in.pcap"),
        ByteOrder::Little,
        TsResolution::Micro,
        &[],
    );
    let mut ports = FilePorts::open(&d, &[spec(0, "x")]).unwrap();
    assert_eq!(std::fs::read(d.join("x_out.pcap")).unwrap().len(), 24);
    ports.send(0, 0, &[1; 10]).unwrap();
    // Visible on disk without an explicit flush or drop.
    assert_eq!(
        std::fs::read(d.join("x_out.pcap")).unwrap().len(),
        24 + 16 + 10
    );
}

#[test]
fn missing_input_creates_nothing() {
    let d = tmpdir("missing");
    write_pcap(
        &d.join("a_in.pcap"),
        ByteOrder::Little,
        TsResolution::Micro,
        &[],
    );
    let e = FilePorts::open(&d, &[spec(0, "a"), spec(1, "b")]).unwrap_err();
    assert!(matches!(e, PortError::MissingInput { port: 1, .. }), "{e}");
    assert!(e.to_string().contains("b_in.pcap"), "{e}");
    assert!(!d.join("a_out.pcap").exists());
}

#[test]
fn corrupt_input_names_file_and_offset() {
    let d = tmpdir("corrupt");
    std::fs::write(d.join("c_in.pcap"), b"definitely not pcap").unwrap();
    let e = FilePorts::open(&d, &[spec(0, "c")])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("c_in.pcap") && e.contains("byte offset 0"),
        "{e}"
    );

    // A truncated record surfaces from recv with the file name.
    write_pcap(
        &d.join("t_in.pcap"),
        ByteOrder::Little,
        TsResolution::Micro,
        &[(0, &[5; 50])],
    );
    let b = std::fs::read(d.join("t_in.pcap")).unwrap();
    std::fs::write(d.join("t_in.pcap"), &b[..b.len() - 1]).unwrap();
    let mut p = FilePorts::open(&d, &[spec(0, "t")]).unwrap();
    let e = p.recv(&mut Vec::new()).unwrap_err().to_string();
    assert!(
        e.contains("t_in.pcap") && e.contains("byte offset 40"),
        "{e}"
    );
}

#[test]
fn duplicate_ports_are_rejected() {
    let e = MemPorts::new(&[spec(2, "a"), spec(2, "b")]).unwrap_err();
    assert_eq!(e.to_string(), "port 2 is attached twice");
}

#[test]
fn mem_ports_order_and_discard() {
    let mut m = MemPorts::new(&[spec(0, "a"), spec(5, "b")]).unwrap();
    assert!(m.push_input(5, 10, b"x"));
    assert!(m.push_input(0, 10, b"y"));
    assert!(m.push_input(0, 2, b"z"));
    assert!(m.push_input(5, 10, b"w"));
    assert!(!m.push_input(9, 0, b"nope"));
    let mut buf = Vec::new();
    let mut got = Vec::new();
    while let Some(r) = m.recv(&mut buf).unwrap() {
        got.push((r.port, r.ts_ns, buf.clone()));
    }
    assert_eq!(
        got,
        vec![
            (0, 2, b"z".to_vec()),
            (0, 10, b"y".to_vec()),
            (5, 10, b"x".to_vec()),
            (5, 10, b"w".to_vec()),
        ]
    );
    assert!(m.send(5, 1, b"o").unwrap());
    assert!(!m.send(1, 1, b"o").unwrap());
    assert_eq!(m.sent(), &[(5, 1, b"o".to_vec())]);
}

#[test]
fn capture_copies_traffic_and_refuses_to_clobber() {
    let d = tmpdir("capture");
    let mut mem = MemPorts::new(&[spec(0, "eth0"), spec(1, "eth1")]).unwrap();
    mem.push_input(1, 1_000, b"in1");
    let mut c = Capture::new(mem, &d, &[]).unwrap();
    let mut buf = Vec::new();
    let m = c.recv(&mut buf).unwrap().unwrap();
    assert_eq!((m.port, buf.as_slice()), (1, &b"in1"[..]));
    assert!(c.send(0, 2_000, b"out0").unwrap());
    assert!(!c.send(3, 2_000, b"lost").unwrap());
    c.flush().unwrap();
    assert_eq!(
        read_pcap(&d.join("eth1_in.pcap")),
        vec![(1_000, b"in1".to_vec())]
    );
    assert_eq!(
        read_pcap(&d.join("eth0_out.pcap")),
        vec![(2_000, b"out0".to_vec())]
    );
    assert!(read_pcap(&d.join("eth0_in.pcap")).is_empty());
    assert_eq!(c.inner().sent().len(), 1);

    // --use-files in DIR with --pcap DIR would overwrite the inputs.
    let fd = tmpdir("clobber");
    write_pcap(
        &fd.join("q_in.pcap"),
        ByteOrder::Little,
        TsResolution::Micro,
        &[],
    );
    let fp = FilePorts::open(&fd, &[spec(0, "q")]).unwrap();
    let files = fp.files();
    let e = Capture::new(fp, &fd.join("."), &files).unwrap_err();
    assert!(matches!(e, PortError::CaptureClobbers { .. }), "{e}");
}
