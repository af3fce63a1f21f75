//! pcap reader/writer: round trips in every byte order and resolution, pcapng fixtures, and
//! corrupt or truncated input.

use tern_ports::pcap::{
    ByteOrder, Format, PcapError, PcapReader, PcapWriter, TsResolution, WriterConfig,
    LINKTYPE_ETHERNET, LINKTYPE_NULL,
};

const FIX: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/fixtures/bmv2/tests/testdata"
);

fn cfg(order: ByteOrder, res: TsResolution) -> WriterConfig {
    WriterConfig {
        byte_order: order,
        resolution: res,
        snaplen: 65535,
        linktype: LINKTYPE_ETHERNET,
        flush_each_packet: false,
    }
}

fn frames() -> Vec<(u64, Vec<u8>)> {
    vec![
        (1_700_000_000_123_456_789, (0u8..60).collect()),
        (1_700_000_000_123_456_790, vec![0xff; 1514]),
        (5, vec![]),
        (4_000_000_000_999_999_999, vec![1, 2, 3]),
    ]
}

fn write_all(c: WriterConfig, frames: &[(u64, Vec<u8>)]) -> Vec<u8> {
    let mut w = PcapWriter::new(Vec::new(), c).unwrap();
    for (ts, d) in frames {
        w.write_packet(*ts, d).unwrap();
    }
    assert_eq!(w.packets(), frames.len() as u64);
    w.get_ref().clone()
}

fn read_all(bytes: &[u8]) -> Result<Vec<(u64, u32, Vec<u8>)>, PcapError> {
    let mut r = PcapReader::new(bytes)?;
    let mut out = Vec::new();
    while let Some(p) = r.next_packet()? {
        out.push((p.ts_ns, p.orig_len, p.data.to_vec()));
    }
    Ok(out)
}

#[test]
fn round_trip_every_byte_order_and_resolution() {
    for order in [ByteOrder::Little, ByteOrder::Big] {
        for res in [TsResolution::Micro, TsResolution::Nano] {
            let bytes = write_all(cfg(order, res), &frames());
            let r = PcapReader::new(&bytes[..]).unwrap();
            assert_eq!(
                r.format(),
                Format::Classic {
                    byte_order: order,
                    resolution: res
                }
            );
            let h = r.header();
            assert_eq!((h.version_major, h.version_minor), (2, 4));
            assert_eq!((h.snaplen, h.linktype), (65535, LINKTYPE_ETHERNET));
            let got = read_all(&bytes).unwrap();
            assert_eq!(got.len(), frames().len());
            for ((ts, orig, data), (wts, wdata)) in got.iter().zip(frames()) {
                assert_eq!(data, &wdata);
                assert_eq!(*orig as usize, wdata.len());
                // Seconds are stored in 32 bits.
                let wts = wts % (1u64 << 32).saturating_mul(1_000_000_000);
                let want = match res {
                    TsResolution::Micro => wts / 1000 * 1000,
                    TsResolution::Nano => wts,
                };
                assert_eq!(*ts, want, "{order:?} {res:?}");
            }
        }
    }
}

#[test]
fn magic_bytes_on_disk() {
    let cases = [
        (
            ByteOrder::Little,
            TsResolution::Micro,
            [0xd4, 0xc3, 0xb2, 0xa1],
        ),
        (
            ByteOrder::Big,
            TsResolution::Micro,
            [0xa1, 0xb2, 0xc3, 0xd4],
        ),
        (
            ByteOrder::Little,
            TsResolution::Nano,
            [0x4d, 0x3c, 0xb2, 0xa1],
        ),
        (ByteOrder::Big, TsResolution::Nano, [0xa1, 0xb2, 0x3c, 0x4d]),
    ];
    for (o, r, magic) in cases {
        let b = write_all(cfg(o, r), &[]);
        assert_eq!(b.len(), 24);
        assert_eq!(b[..4], magic);
    }
}

#[test]
fn bmv2_output_header_is_snaplen_0_dlt_null() {
    let b = write_all(WriterConfig::bmv2(), &[(2_000_000_000, vec![7; 100])]);
    let mut want = Vec::new();
    let o = ByteOrder::native();
    let u32b = |v: u32| match o {
        ByteOrder::Little => v.to_le_bytes(),
        ByteOrder::Big => v.to_be_bytes(),
    };
    want.extend_from_slice(&u32b(0xa1b2c3d4));
    // version 2.4 as two u16 in host order
    match o {
        ByteOrder::Little => want.extend_from_slice(&[2, 0, 4, 0]),
        ByteOrder::Big => want.extend_from_slice(&[0, 2, 0, 4]),
    }
    want.extend_from_slice(&[0; 8]); // thiszone, sigfigs
    want.extend_from_slice(&u32b(0)); // snaplen 0
    want.extend_from_slice(&u32b(0)); // DLT_NULL
    want.extend_from_slice(&u32b(2)); // 2 s
    want.extend_from_slice(&u32b(0)); // 0 µs
    want.extend_from_slice(&u32b(100));
    want.extend_from_slice(&u32b(100));
    want.extend_from_slice(&[7; 100]);
    assert_eq!(b, want);
    let r = PcapReader::new(&b[..]).unwrap();
    assert_eq!(r.header().linktype, LINKTYPE_NULL);
    // snaplen 0 does not truncate.
    assert_eq!(read_all(&b).unwrap()[0].2.len(), 100);
}

#[test]
fn snaplen_truncates_but_keeps_orig_len() {
    let mut c = cfg(ByteOrder::Little, TsResolution::Micro);
    c.snaplen = 4;
    let b = write_all(c, &[(0, vec![9, 8, 7, 6, 5, 4])]);
    let got = read_all(&b).unwrap();
    assert_eq!(got, vec![(0, 6, vec![9, 8, 7, 6])]);
}

fn format_err(bytes: &[u8]) -> (u64, String) {
    let e = read_all(bytes).expect_err("must be rejected");
    match &e {
        PcapError::Format { offset, msg } => (*offset, msg.clone()),
        other => panic!("expected a format error, got {other}"),
    }
}

#[test]
fn garbage_is_rejected_at_offset_0() {
    let (off, msg) = format_err(b"GIF89a this is not a capture file at all");
    assert_eq!(off, 0);
    assert!(msg.contains("not a pcap file"), "{msg}");
    let (off, msg) = format_err(b"");
    assert_eq!(off, 0);
    assert!(msg.contains("empty"), "{msg}");
    let (_, msg) = format_err(&[0xd4, 0xc3]);
    assert!(msg.contains("truncated"), "{msg}");
}

#[test]
fn truncated_file_header() {
    let b = write_all(cfg(ByteOrder::Little, TsResolution::Micro), &[]);
    let (off, msg) = format_err(&b[..15]);
    assert_eq!(off, 4);
    assert!(msg.contains("truncated pcap file header"), "{msg}");
}

#[test]
fn bad_version() {
    let mut b = write_all(cfg(ByteOrder::Big, TsResolution::Micro), &[]);
    b[5] = 3; // major 3
    let (off, msg) = format_err(&b);
    assert_eq!(off, 4);
    assert!(msg.contains("version 3.4"), "{msg}");
}

#[test]
fn truncated_trailing_record_header_and_data() {
    let fr = frames();
    let b = write_all(cfg(ByteOrder::Little, TsResolution::Nano), &fr[..2]);
    let second = 24 + 16 + fr[0].1.len();
    // Cut inside the second record's header.
    let (off, msg) = format_err(&b[..second + 7]);
    assert_eq!(off as usize, second);
    assert!(msg.contains("truncated record header"), "{msg}");
    assert!(msg.contains("after 7"), "{msg}");
    // Cut inside the second record's data: the first packet is still delivered.
    let cut = &b[..second + 16 + 100];
    let mut r = PcapReader::new(cut).unwrap();
    assert_eq!(r.next_packet().unwrap().unwrap().data, &fr[0].1[..]);
    let e = r.next_packet().unwrap_err();
    assert_eq!(e.offset() as usize, second + 16);
    let s = e.to_string();
    assert!(s.contains("truncated record data"), "{s}");
    assert!(s.contains("expected 1514 bytes"), "{s}");
}

#[test]
fn absurd_record_length_is_corruption() {
    let mut b = write_all(cfg(ByteOrder::Little, TsResolution::Micro), &[(0, vec![1])]);
    b[24 + 8..24 + 12].copy_from_slice(&0xfff0_0000u32.to_le_bytes());
    let (off, msg) = format_err(&b);
    assert_eq!(off, 24 + 8);
    assert!(msg.contains("corrupt"), "{msg}");
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!("{FIX}/{name}")).unwrap()
}

#[test]
fn pcapng_fixtures_read_like_libpcap() {
    tern_fixtures::require!();
    // MANIFEST: en0.pcap is pcapng, Ethernet, 27 frames of 60–873 bytes.
    let b = fixture("en0.pcap");
    let mut r = PcapReader::new(&b[..]).unwrap();
    assert_eq!(r.format(), Format::Ng);
    let mut n = 0;
    let (mut lo, mut hi) = (usize::MAX, 0);
    let mut last_ts = 0;
    while let Some(p) = r.next_packet().unwrap() {
        assert_eq!(p.linktype, LINKTYPE_ETHERNET);
        assert_eq!(p.data.len(), p.orig_len as usize);
        lo = lo.min(p.data.len());
        hi = hi.max(p.data.len());
        // 2015 capture: timestamps are plausible and non-decreasing.
        assert!(p.ts_ns > 1_400_000_000_000_000_000 && p.ts_ns < 1_500_000_000_000_000_000);
        assert!(p.ts_ns >= last_ts);
        last_ts = p.ts_ns;
        n += 1;
    }
    assert_eq!((n, lo, hi), (27, 60, 873));
    assert_eq!(r.offset() as usize, b.len());

    // lo0.pcap: DLT_NULL, 16 frames of 56–5594 bytes.
    let got: Vec<_> = {
        let b = fixture("lo0.pcap");
        let mut r = PcapReader::new(&b[..]).unwrap();
        let mut v = Vec::new();
        while let Some(p) = r.next_packet().unwrap() {
            assert_eq!(p.linktype, LINKTYPE_NULL);
            v.push(p.data.len());
        }
        v
    };
    assert_eq!(got.len(), 16);
    assert_eq!(*got.iter().min().unwrap(), 56);
    assert_eq!(*got.iter().max().unwrap(), 5594);
}

#[test]
fn pcapng_truncated_fixture_is_an_error() {
    tern_fixtures::require!();
    let b = fixture("en0.pcap");
    let cut = &b[..b.len() - 10];
    let mut r = PcapReader::new(cut).unwrap();
    let mut n = 0;
    let err = loop {
        match r.next_packet() {
            Ok(Some(_)) => n += 1,
            Ok(None) => panic!("truncated file read to the end without error"),
            Err(e) => break e,
        }
    };
    // The file ends with an interface statistics block: all 27 packets come first.
    assert_eq!(n, 27);
    assert!(err.to_string().contains("truncated pcapng block"), "{err}");
}

/// A big-endian pcapng: SHB, IDB (ns resolution), an unknown block, EPB, SPB.
fn ng_big_endian() -> Vec<u8> {
    fn block(t: u32, body: &[u8]) -> Vec<u8> {
        let mut body = body.to_vec();
        while !body.len().is_multiple_of(4) {
            body.push(0);
        }
        let total = (body.len() + 12) as u32;
        let mut v = t.to_be_bytes().to_vec();
        v.extend_from_slice(&total.to_be_bytes());
        v.extend_from_slice(&body);
        v.extend_from_slice(&total.to_be_bytes());
        v
    }
    let mut shb = 0x1A2B3C4Du32.to_be_bytes().to_vec();
    shb.extend_from_slice(&[0, 1, 0, 0]); // version 1.0
    shb.extend_from_slice(&[0xff; 8]); // section length unknown
    let mut idb = vec![0, 1, 0, 0]; // Ethernet
    idb.extend_from_slice(&1500u32.to_be_bytes());
    idb.extend_from_slice(&[0, 9, 0, 1, 9, 0, 0, 0]); // if_tsresol = 10^-9
    idb.extend_from_slice(&[0, 0, 0, 0]); // opt_endofopt
    let mut epb = 0u32.to_be_bytes().to_vec();
    let ts: u64 = 1_600_000_000_000_000_123;
    epb.extend_from_slice(&((ts >> 32) as u32).to_be_bytes());
    epb.extend_from_slice(&(ts as u32).to_be_bytes());
    epb.extend_from_slice(&5u32.to_be_bytes());
    epb.extend_from_slice(&9u32.to_be_bytes());
    epb.extend_from_slice(&[1, 2, 3, 4, 5]);
    let mut spb = 3u32.to_be_bytes().to_vec();
    spb.extend_from_slice(&[7, 7, 7]);
    let mut v = block(0x0A0D0D0A, &shb);
    v.extend(block(1, &idb));
    v.extend(block(0x0BAD, &[1, 2, 3, 4]));
    v.extend(block(6, &epb));
    v.extend(block(3, &spb));
    v
}

#[test]
fn pcapng_big_endian_with_ns_resolution_and_simple_blocks() {
    let b = ng_big_endian();
    let got = read_all(&b).unwrap();
    assert_eq!(
        got,
        vec![
            (1_600_000_000_000_000_123, 9, vec![1, 2, 3, 4, 5]),
            (0, 3, vec![7, 7, 7]),
        ]
    );
    let r = PcapReader::new(&b[..]).unwrap();
    assert_eq!(r.format(), Format::Ng);
}

#[test]
fn pcapng_bad_trailer_and_unknown_interface() {
    let mut b = ng_big_endian();
    let n = b.len();
    b[n - 1] ^= 0x40; // SPB trailer length
    let e = read_all(&b).unwrap_err();
    assert!(e.to_string().contains("trailer length"), "{e}");
    assert_eq!(e.offset() as usize, n - 4);

    let mut b = ng_big_endian();
    // EPB interface id: find the EPB (type 6) and set its interface to 3.
    let pos = b
        .windows(4)
        .position(|w| w == [0, 0, 0, 6])
        .expect("EPB present");
    b[pos + 8..pos + 12].copy_from_slice(&3u32.to_be_bytes());
    let e = read_all(&b).unwrap_err();
    assert!(e.to_string().contains("interface 3"), "{e}");
    assert_eq!(e.offset() as usize, pos + 8);
}

/// Every truncation and many single-byte corruptions of valid files give a packet sequence
/// or an error, never a panic; corruptions of a length field are reported.
#[test]
fn mutations_never_panic() {
    tern_fixtures::require!();
    let classic = write_all(cfg(ByteOrder::Big, TsResolution::Nano), &frames()[..2]);
    let ng = ng_big_endian();
    let en0 = fixture("en0.pcap")[..600].to_vec();
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for file in [&classic, &ng, &en0] {
        for cut in 0..file.len() {
            let _ = read_all(&file[..cut]);
        }
        for _ in 0..3000 {
            let mut f = file.clone();
            let i = (rnd() as usize) % f.len();
            f[i] = rnd() as u8;
            if rnd() % 4 == 0 {
                let j = (rnd() as usize) % f.len();
                f[j] ^= 0x80;
            }
            let _ = read_all(&f);
        }
    }
    // A corrupted record length in the classic file is caught.
    let mut f = classic.clone();
    f[24 + 8] = 0x7f;
    assert!(read_all(&f).is_err());
}

/// A FIFO among the inputs means a feeder is waiting on outputs (per-packet flushes); regular
/// files do not.
#[test]
fn fifo_inputs_are_detected() {
    use tern_ports::{any_fifo_input, PortSpec};
    let dir = tern_fixtures::scratch("fifo");
    std::fs::write(dir.join("a_in.pcap"), b"").unwrap();
    let a = PortSpec {
        port: 1,
        name: "a".into(),
    };
    let b = PortSpec {
        port: 2,
        name: "b".into(),
    };
    assert!(!any_fifo_input(&dir, std::slice::from_ref(&a)));
    // A missing input is not a FIFO (opening the ports reports it).
    assert!(!any_fifo_input(&dir, &[a.clone(), b.clone()]));
    let made = std::process::Command::new("mkfifo")
        .arg(dir.join("b_in.pcap"))
        .status()
        .is_ok_and(|s| s.success());
    if made {
        assert!(any_fifo_input(&dir, &[a, b]));
    } else {
        println!("skipping the FIFO half: mkfifo not available");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn next_packet_into_reads_what_next_packet_reads() {
    let fr = frames();
    for c in [
        cfg(ByteOrder::Little, TsResolution::Nano),
        cfg(ByteOrder::Big, TsResolution::Micro),
    ] {
        let b = write_all(c, &fr);
        let mut a = PcapReader::new(&b[..]).unwrap();
        let mut d = PcapReader::new(&b[..]).unwrap();
        // A reused buffer, longer than some records: its old bytes must not leak through.
        let mut buf = vec![0xee; 4000];
        let mut n = 0;
        while let Some(p) = a.next_packet().unwrap() {
            let ts = d.next_packet_into(&mut buf).unwrap().unwrap();
            assert_eq!((ts, &buf[..]), (p.ts_ns, p.data));
            n += 1;
        }
        assert_eq!(n, fr.len());
        assert_eq!(d.next_packet_into(&mut buf).unwrap(), None);
        assert_eq!(a.offset(), d.offset());
    }
    // Truncated record data: the same error, at the same offset.
    let b = write_all(cfg(ByteOrder::Little, TsResolution::Nano), &fr[..2]);
    let cut = &b[..24 + 16 + fr[0].1.len() + 16 + 100];
    let mut r = PcapReader::new(cut).unwrap();
    let mut buf = Vec::new();
    r.next_packet_into(&mut buf).unwrap().unwrap();
    let e = r.next_packet_into(&mut buf).unwrap_err();
    assert_eq!(e.offset() as usize, 24 + 16 + fr[0].1.len() + 16);
    assert!(
        e.to_string()
            .contains("expected 1514 bytes, file ends after 100"),
        "{e}"
    );
    // pcapng goes through the general path.
    if let Ok(b) = std::fs::read(format!("{FIX}/en0.pcap")) {
        let mut r = PcapReader::new(&b[..]).unwrap();
        let mut k = 0;
        while r.next_packet_into(&mut buf).unwrap().is_some() {
            k += 1;
        }
        assert_eq!(k, 27);
    }
}

/// The buffered fast path (records decoded straight from the reader's buffer) reads exactly
/// what the general path reads, whatever the buffer size: records whole in the buffer, records
/// straddling its end, buffers smaller than one record header; errors at the same offsets.
#[test]
fn next_packet_buffered_reads_what_next_packet_reads() {
    use std::io::BufReader;
    let mut fr = frames();
    // Many small frames too, so most records lie whole in a buffer of a few hundred bytes.
    fr.extend((0..200u64).map(|k| (k * 7, vec![k as u8; 40 + (k as usize % 50)])));
    for c in [
        cfg(ByteOrder::Little, TsResolution::Nano),
        cfg(ByteOrder::Big, TsResolution::Micro),
    ] {
        let b = write_all(c, &fr);
        for cap in [1, 7, 16, 17, 100, 300, 4096, 1 << 16] {
            let mut a = PcapReader::new(&b[..]).unwrap();
            let mut d = PcapReader::new(BufReader::with_capacity(cap, &b[..])).unwrap();
            let mut buf = vec![0xee; 4000];
            let mut n = 0;
            while let Some(p) = a.next_packet().unwrap() {
                let ts = d.next_packet_buffered(&mut buf).unwrap().unwrap();
                assert_eq!(
                    (ts, &buf[..]),
                    (p.ts_ns, p.data),
                    "capacity {cap}, record {n}"
                );
                assert_eq!(a.offset(), d.offset(), "capacity {cap}, record {n}");
                n += 1;
            }
            assert_eq!(n, fr.len());
            assert_eq!(d.next_packet_buffered(&mut buf).unwrap(), None);
        }
    }
    // Truncated data and a corrupt length: the general path's errors, at its offsets.
    let b = write_all(cfg(ByteOrder::Little, TsResolution::Nano), &fr[..2]);
    let cut = &b[..24 + 16 + fr[0].1.len() + 16 + 100];
    for cap in [16, 4096] {
        let mut r = PcapReader::new(BufReader::with_capacity(cap, cut)).unwrap();
        let mut buf = Vec::new();
        r.next_packet_buffered(&mut buf).unwrap().unwrap();
        let e = r.next_packet_buffered(&mut buf).unwrap_err();
        assert_eq!(
            e.offset() as usize,
            24 + 16 + fr[0].1.len() + 16,
            "capacity {cap}"
        );
        assert!(e.to_string().contains("file ends after 100"), "{e}");
        let mut f = b.clone();
        f[24 + 8 + 3] = 0x7f;
        let mut r = PcapReader::new(BufReader::with_capacity(cap, &f[..])).unwrap();
        let e = r.next_packet_buffered(&mut buf).unwrap_err();
        assert_eq!(e.offset(), 24 + 8, "capacity {cap}");
    }
}
