//! Input files read in place (`MappedPcap`, `FilePorts::recv_held`) and the large-buffer
//! writer (`PcapFileWriter`): the same records, errors and files as the streaming reader and
//! `PcapWriter`, on valid, truncated and corrupted files.

use std::path::Path;
use tern_ports::pcap::{ByteOrder, PcapReader, PcapWriter, TsResolution, WriterConfig};
use tern_ports::{FilePorts, Held, MappedPcap, PcapFileWriter, PortIo, PortSpec};

fn cfg(order: ByteOrder, res: TsResolution, snaplen: u32) -> WriterConfig {
    WriterConfig {
        byte_order: order,
        resolution: res,
        snaplen,
        linktype: 1,
        flush_each_packet: false,
    }
}

fn frames(n: usize) -> Vec<(u64, Vec<u8>)> {
    (0..n)
        .map(|k| {
            let len = [60, 0, 1514, 7, 128][k % 5];
            let ts = 1_700_000_000_000_000_000 + k as u64 * 1_234_567;
            (ts, (0..len).map(|b| (b + k) as u8).collect())
        })
        .collect()
}

fn classic(c: WriterConfig, frames: &[(u64, Vec<u8>)]) -> Vec<u8> {
    let mut w = PcapWriter::new(Vec::new(), c).unwrap();
    for (ts, d) in frames {
        w.write_packet(*ts, d).unwrap();
    }
    w.get_ref().clone()
}

/// Records of the streaming reader: (ts, bytes) until the end or the first error (offset and
/// message).
type Outcome = (Vec<(u64, Vec<u8>)>, Option<(u64, String)>);

fn stream_read(bytes: &[u8]) -> Outcome {
    let mut r = match PcapReader::new(bytes) {
        Ok(r) => r,
        Err(e) => return (Vec::new(), Some((e.offset(), e.to_string()))),
    };
    let mut v = Vec::new();
    loop {
        match r.next_packet() {
            Ok(Some(p)) => v.push((p.ts_ns, p.data.to_vec())),
            Ok(None) => return (v, None),
            Err(e) => return (v, Some((e.offset(), e.to_string()))),
        }
    }
}

/// The same file through `MappedPcap` (`None`: not mapped, a format for the stream reader).
fn mapped_read(path: &Path) -> Option<Outcome> {
    let f = std::fs::File::open(path).unwrap();
    let mut m = match MappedPcap::open(&f) {
        Ok(Some(m)) => m,
        Ok(None) => return None,
        Err(e) => return Some((Vec::new(), Some((e.offset(), e.to_string())))),
    };
    let mut v = Vec::new();
    loop {
        match m.next_record() {
            Ok(Some((ts, start, len))) => v.push((ts, m.bytes()[start..start + len].to_vec())),
            Ok(None) => return Some((v, None)),
            Err(e) => return Some((v, Some((e.offset(), e.to_string())))),
        }
    }
}

fn check_same(dir: &Path, bytes: &[u8], what: &str) {
    let p = dir.join("f.pcap");
    std::fs::write(&p, bytes).unwrap();
    let want = stream_read(bytes);
    match mapped_read(&p) {
        Some(got) => assert_eq!(got, want, "{what}"),
        // Only empty files, files shorter than a magic number and pcapng are left unmapped.
        None => assert!(
            bytes.len() < 4 || bytes[..4] == [0x0a, 0x0d, 0x0d, 0x0a],
            "{what}"
        ),
    }
}

#[test]
fn mapped_reads_what_the_stream_reader_reads() {
    let d = tern_fixtures::scratch("map-same");
    for order in [ByteOrder::Little, ByteOrder::Big] {
        for res in [TsResolution::Micro, TsResolution::Nano] {
            for snaplen in [0, 100] {
                let file = classic(cfg(order, res, snaplen), &frames(12));
                check_same(&d, &file, &format!("{order:?} {res:?} {snaplen}"));
                let (recs, err) = stream_read(&file);
                assert_eq!((recs.len(), err), (12, None));
            }
        }
    }
}

/// Every truncation and thousands of random corruptions of a file: the mapped reader gives the
/// same records and then the same error (offset and message) as the streaming reader, and
/// never panics.
#[test]
fn truncated_and_corrupted_files_fail_alike() {
    let d = tern_fixtures::scratch("map-fuzz");
    let file = classic(cfg(ByteOrder::Big, TsResolution::Nano, 0), &frames(4));
    for cut in 0..file.len() {
        check_same(&d, &file[..cut], &format!("cut at {cut}"));
    }
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for k in 0..2000 {
        let mut f = file.clone();
        for _ in 0..1 + rnd() % 3 {
            let i = (rnd() as usize) % f.len();
            f[i] = rnd() as u8;
        }
        // Corrupt record lengths more often than chance would.
        if k % 3 == 0 {
            let rec = 24 + 8 + (rnd() as usize % 2) * (16 + 60);
            f[rec + (rnd() as usize % 4)] = rnd() as u8;
        }
        check_same(&d, &f, &format!("mutation {k}"));
    }
    // Garbage, an empty file, a lone magic number.
    check_same(&d, b"definitely not a pcap file at all", "garbage");
    check_same(&d, b"", "empty");
    check_same(&d, &file[..4], "magic only");
}

/// The captured length of a `len`-byte frame under `snaplen` (0: no limit).
fn snaplen_or(snaplen: u32, len: usize) -> usize {
    if snaplen == 0 {
        len
    } else {
        snaplen as usize
    }
}

fn spec(p: u32, n: &str) -> PortSpec {
    PortSpec {
        port: p,
        name: n.to_string(),
    }
}

/// Inputs of three ports (ties between ports, an empty input, mixed formats): `recv_held`
/// gives the packets, ports and timestamps `recv` gives, in the same order.
#[test]
fn recv_held_merges_like_recv() {
    let d = tern_fixtures::scratch("map-merge");
    let write = |name: &str, c: WriterConfig, f: &[(u64, Vec<u8>)]| {
        std::fs::write(d.join(format!("{name}_in.pcap")), classic(c, f)).unwrap();
    };
    let a: Vec<_> = (0..50u64).map(|k| (k * 1000, vec![k as u8; 60])).collect();
    let b: Vec<_> = (0..50u64)
        .map(|k| (k * 3000, vec![100 + k as u8; 61]))
        .collect();
    write("a", cfg(ByteOrder::Little, TsResolution::Nano, 0), &a);
    write("b", cfg(ByteOrder::Big, TsResolution::Micro, 0), &b);
    write("c", cfg(ByteOrder::Little, TsResolution::Micro, 0), &[]);
    let specs = [spec(2, "c"), spec(0, "a"), spec(1, "b")];

    let mut one = FilePorts::open(&d, &specs).unwrap();
    let mut want = Vec::new();
    let mut buf = Vec::new();
    while let Some(m) = one.recv(&mut buf).unwrap() {
        want.push((m, buf.clone()));
    }
    assert_eq!(want.len(), 100);

    let mut held = FilePorts::open(&d, &specs).unwrap();
    assert!(held.mapped());
    let mut got = Vec::new();
    let mut hs: Vec<Held> = Vec::new();
    loop {
        assert!(held.recv_held(7, &mut hs).unwrap());
        if hs.is_empty() {
            break;
        }
        assert!(hs.len() <= 7);
        got.extend(hs.iter().map(|h| (h.meta, held.held(h).to_vec())));
    }
    assert_eq!(got, want);
}

/// A truncated input: the packets before the cut are given, then the error (file and offset);
/// it is not lost when it is met in the middle of a batch.
#[test]
fn recv_held_gives_the_packets_before_an_error() {
    let d = tern_fixtures::scratch("map-err");
    let f: Vec<_> = (0..5u64).map(|k| (k, vec![k as u8; 60])).collect();
    let bytes = classic(cfg(ByteOrder::Little, TsResolution::Micro, 0), &f);
    std::fs::write(d.join("t_in.pcap"), &bytes[..bytes.len() - 10]).unwrap();
    let mut p = FilePorts::open(&d, &[spec(0, "t")]).unwrap();
    let mut hs = Vec::new();
    assert!(p.recv_held(32, &mut hs).unwrap());
    assert_eq!(hs.len(), 4);
    let e = p.recv_held(32, &mut hs).unwrap_err().to_string();
    let at = 24 + 4 * (16 + 60) + 16;
    assert!(
        e.contains("t_in.pcap") && e.contains(&format!("byte offset {at}")),
        "{e}"
    );
}

/// Empty input files and pcapng inputs are not mapped: the port set reads them as streams
/// (`recv_held` says so) and reports an empty file as before.
#[test]
fn empty_and_pcapng_inputs_are_streamed() {
    let d = tern_fixtures::scratch("map-empty");
    std::fs::write(d.join("e_in.pcap"), b"").unwrap();
    let e = FilePorts::open(&d, &[spec(0, "e")])
        .unwrap_err()
        .to_string();
    assert!(e.contains("e_in.pcap") && e.contains("empty file"), "{e}");

    // A minimal pcapng file: a section header block and nothing else.
    let mut ng = Vec::new();
    ng.extend_from_slice(&0x0A0D_0D0Au32.to_le_bytes());
    ng.extend_from_slice(&28u32.to_le_bytes());
    ng.extend_from_slice(&0x1A2B_3C4Du32.to_le_bytes());
    ng.extend_from_slice(&1u16.to_le_bytes());
    ng.extend_from_slice(&0u16.to_le_bytes());
    ng.extend_from_slice(&u64::MAX.to_le_bytes());
    ng.extend_from_slice(&28u32.to_le_bytes());
    std::fs::write(d.join("n_in.pcap"), &ng).unwrap();
    let mut p = FilePorts::open(&d, &[spec(0, "n")]).unwrap();
    assert!(!p.mapped());
    assert!(!p.recv_held(32, &mut Vec::new()).unwrap());
    assert!(p.recv(&mut Vec::new()).unwrap().is_none());
}

/// `PcapFileWriter` writes exactly what `PcapWriter` writes, in every layout, across its
/// 1 MiB write boundary and with per-packet flushing.
#[test]
fn file_writer_is_byte_identical() {
    let many = frames(2000);
    for order in [ByteOrder::Little, ByteOrder::Big] {
        for res in [TsResolution::Micro, TsResolution::Nano] {
            for snaplen in [0, 100] {
                for flush in [false, true] {
                    let c = WriterConfig {
                        flush_each_packet: flush,
                        ..cfg(order, res, snaplen)
                    };
                    let want = classic(c, &many);
                    let mut w = PcapFileWriter::new(Vec::new(), c).unwrap();
                    for (ts, d) in &many {
                        let before = w.get_ref().len();
                        w.write_packet(*ts, d).unwrap();
                        if flush {
                            // The record reached the underlying writer at once.
                            assert_eq!(
                                w.get_ref().len(),
                                before + 16 + d.len().min(snaplen_or(snaplen, d.len()))
                            );
                        }
                    }
                    w.flush().unwrap();
                    assert_eq!(w.packets(), many.len() as u64);
                    assert_eq!(w.get_ref(), &want, "{order:?} {res:?} {snaplen} {flush}");
                }
            }
        }
    }
    // Outputs of one batch share a timestamp; then the clock moves on.
    let c = cfg(ByteOrder::Little, TsResolution::Micro, 0);
    let batch = [
        (7_000_001_000, vec![1u8; 3]),
        (7_000_001_000, vec![2u8; 4]),
        (9, vec![3]),
    ];
    let mut w = PcapFileWriter::new(Vec::new(), c).unwrap();
    for (ts, d) in &batch {
        w.write_packet(*ts, d).unwrap();
    }
    w.flush().unwrap();
    assert_eq!(w.get_ref(), &classic(c, &batch));
}

/// A writer that takes at most 7 bytes per call and is interrupted every third call: partial
/// and interrupted vectored writes must still write every byte, in order.
struct Trickle {
    bytes: Vec<u8>,
    calls: usize,
}

impl std::io::Write for Trickle {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.calls += 1;
        if self.calls.is_multiple_of(3) {
            return Err(std::io::ErrorKind::Interrupted.into());
        }
        let n = b.len().min(7);
        self.bytes.extend_from_slice(&b[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Records encoded apart (`WriterConfig::encode_record`) and written in runs with
/// `write_records_vectored` (after records written the ordinary way, still buffered) give
/// exactly `PcapWriter`'s file, also through partial and interrupted writes.
#[test]
fn vectored_records_are_byte_identical() {
    let many = frames(300);
    for snaplen in [0, 100] {
        let c = cfg(ByteOrder::Big, TsResolution::Nano, snaplen);
        let want = classic(c, &many);
        // The first 10 through write_packet (buffered), the rest encoded into one buffer and
        // written as runs of 1, 2, 3, ... records.
        let mut enc = Vec::new();
        let mut ends = vec![0];
        for (ts, d) in &many[10..] {
            c.encode_record(&mut enc, *ts, d).unwrap();
            ends.push(enc.len());
        }
        let mut runs = Vec::new();
        let (mut i, mut step) = (0, 1);
        while i + 1 < ends.len() {
            let j = (i + step).min(ends.len() - 1);
            runs.push(std::io::IoSlice::new(&enc[ends[i]..ends[j]]));
            runs.push(std::io::IoSlice::new(&[])); // empty runs are skipped
            (i, step) = (j, step % 4 + 1);
        }
        let mut w = PcapFileWriter::new(
            Trickle {
                bytes: Vec::new(),
                calls: 1,
            },
            c,
        )
        .unwrap();
        for (ts, d) in &many[..10] {
            w.write_packet(*ts, d).unwrap();
        }
        w.write_records_vectored(&mut runs, (many.len() - 10) as u64)
            .unwrap();
        w.flush().unwrap();
        assert_eq!(w.packets(), many.len() as u64);
        assert!(w.get_ref().bytes == want, "snaplen {snaplen}");
    }
}

/// Records written in place (`room_in_place`, the bytes written at the position, then
/// `commit_in_place`), in bursts of 1 to 5 with copied records (`write_packet`) between them,
/// flushed when full: `PcapWriter`'s file byte for byte, in both byte orders, both
/// resolutions, with and without a snap length (the record cut, the next one written over the
/// rest).
#[test]
fn records_written_in_place_are_byte_identical() {
    let many = frames(2000);
    for order in [ByteOrder::Little, ByteOrder::Big] {
        for res in [TsResolution::Micro, TsResolution::Nano] {
            for snaplen in [0, 100] {
                let c = cfg(order, res, snaplen);
                let want = classic(c, &many);
                let mut w = PcapFileWriter::new(Vec::new(), c).unwrap();
                let (mut k, mut burst) = (0, 1);
                while k < many.len() {
                    let room = many[k..]
                        .iter()
                        .take(burst)
                        .map(|f| f.1.len())
                        .max()
                        .unwrap();
                    let mut at = w.room_in_place(burst, room);
                    for (ts, d) in many[k..].iter().take(burst) {
                        // SAFETY: `d.len() <= room`, one of the `burst` records asked for.
                        unsafe {
                            std::ptr::copy_nonoverlapping(d.as_ptr(), at, d.len());
                            at = w.commit_in_place(*ts, d.len()).unwrap();
                        }
                    }
                    k += burst.min(many.len() - k);
                    if let Some((ts, d)) = many.get(k) {
                        w.write_packet(*ts, d).unwrap();
                        k += 1;
                    }
                    w.flush_if_full().unwrap();
                    burst = burst % 5 + 1;
                }
                w.flush().unwrap();
                assert_eq!(w.packets(), many.len() as u64);
                assert_eq!(w.get_ref(), &want, "{order:?} {res:?} {snaplen}");
            }
        }
    }
}
