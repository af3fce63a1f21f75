//! Pure-Rust pcap files: a reader for classic libpcap files (both byte orders, microsecond and
//! nanosecond magic) and pcapng (what libpcap, and so simple_switch `--use-files`, accepts), and
//! a writer for classic pcap files.
//!
//! Errors name the byte offset where the file stopped making sense. The reader keeps one
//! internal buffer and reuses it for every record (no per-packet allocation).
//! [`PcapFileWriter`] writes the same files as [`PcapWriter`] through one large in-place
//! buffer (the file ports' outputs).

use std::fmt;
use std::io::{self, BufRead, Read, Write};

/// `LINKTYPE_NULL` (BSD loopback): the link type simple_switch writes in its output files.
pub const LINKTYPE_NULL: u32 = 0;
/// `LINKTYPE_ETHERNET`.
pub const LINKTYPE_ETHERNET: u32 = 1;

/// Classic pcap magic number for microsecond timestamps.
pub const MAGIC_MICROS: u32 = 0xa1b2_c3d4;
/// Classic pcap magic number for nanosecond timestamps.
pub const MAGIC_NANOS: u32 = 0xa1b2_3c4d;

const PCAPNG_SHB: u32 = 0x0A0D_0D0A;
const PCAPNG_BOM: u32 = 0x1A2B_3C4D;
const PCAPNG_IDB: u32 = 1;
const PCAPNG_OPB: u32 = 2;
const PCAPNG_SPB: u32 = 3;
const PCAPNG_EPB: u32 = 6;

/// Largest record or block accepted (larger lengths are taken as corruption).
pub const MAX_RECORD: u32 = 64 * 1024 * 1024;

/// Records up to this size are read straight into the caller's buffer (see
/// `PcapReader::read_record_into`).
const DIRECT_READ: usize = 64 * 1024;

/// Why a pcap file cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum PcapError {
    /// The underlying reader or writer failed.
    #[error("I/O error at byte offset {offset}: {error}")]
    Io {
        /// Byte offset where the operation started.
        offset: u64,
        /// The I/O error.
        error: io::Error,
    },
    /// The bytes are not a valid pcap / pcapng file.
    #[error("at byte offset {offset}: {msg}")]
    Format {
        /// Byte offset of the offending field or record.
        offset: u64,
        /// What is wrong.
        msg: String,
    },
}

impl PcapError {
    /// Byte offset the error refers to.
    pub fn offset(&self) -> u64 {
        match self {
            PcapError::Io { offset, .. } | PcapError::Format { offset, .. } => *offset,
        }
    }

    fn format(offset: u64, msg: impl Into<String>) -> PcapError {
        PcapError::Format {
            offset,
            msg: msg.into(),
        }
    }
}

/// Byte order of a file's multi-byte fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ByteOrder {
    /// Little endian (`d4 c3 b2 a1` magic on disk).
    Little,
    /// Big endian (`a1 b2 c3 d4` magic on disk).
    Big,
}

impl ByteOrder {
    /// The byte order of this machine (what libpcap writes).
    pub fn native() -> ByteOrder {
        if cfg!(target_endian = "big") {
            ByteOrder::Big
        } else {
            ByteOrder::Little
        }
    }

    fn u16(self, b: [u8; 2]) -> u16 {
        match self {
            ByteOrder::Little => u16::from_le_bytes(b),
            ByteOrder::Big => u16::from_be_bytes(b),
        }
    }

    fn u32(self, b: [u8; 4]) -> u32 {
        match self {
            ByteOrder::Little => u32::from_le_bytes(b),
            ByteOrder::Big => u32::from_be_bytes(b),
        }
    }

    fn put_u16(self, v: u16) -> [u8; 2] {
        match self {
            ByteOrder::Little => v.to_le_bytes(),
            ByteOrder::Big => v.to_be_bytes(),
        }
    }

    fn put_u32(self, v: u32) -> [u8; 4] {
        match self {
            ByteOrder::Little => v.to_le_bytes(),
            ByteOrder::Big => v.to_be_bytes(),
        }
    }

    /// A record header's two lengths (captured, original) as one word: one byte-order
    /// choice per record.
    #[inline]
    fn put_lengths(self, cap: u32, orig: u32) -> [u8; 8] {
        match self {
            ByteOrder::Little => (u64::from(cap) | u64::from(orig) << 32).to_le_bytes(),
            ByteOrder::Big => (u64::from(cap) << 32 | u64::from(orig)).to_be_bytes(),
        }
    }
}

/// Timestamp resolution of a classic pcap file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TsResolution {
    /// Microseconds (magic `a1b2c3d4`).
    Micro,
    /// Nanoseconds (magic `a1b23c4d`).
    Nano,
}

/// Container format detected by [`PcapReader::new`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Classic libpcap file.
    Classic {
        /// Byte order of the file.
        byte_order: ByteOrder,
        /// Timestamp resolution.
        resolution: TsResolution,
    },
    /// pcapng (the byte order may change per section).
    Ng,
}

/// The global header of a classic pcap file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileHeader {
    /// Major version (2).
    pub version_major: u16,
    /// Minor version (4).
    pub version_minor: u16,
    /// Snapshot length (0 in simple_switch output files).
    pub snaplen: u32,
    /// Link type of every record.
    pub linktype: u32,
}

/// One packet read from a file; `data` borrows the reader's buffer until the next read.
#[derive(Debug, PartialEq, Eq)]
pub struct Packet<'a> {
    /// Timestamp in nanoseconds since the Unix epoch.
    pub ts_ns: u64,
    /// Length of the packet on the wire (may exceed `data.len()` when it was truncated).
    pub orig_len: u32,
    /// Link type of the interface the packet was captured on.
    pub linktype: u32,
    /// Captured bytes.
    pub data: &'a [u8],
}

#[derive(Clone, Copy, Debug)]
struct NgIface {
    linktype: u32,
    snaplen: u32,
    /// Timestamp units per second.
    units_per_sec: u64,
}

/// Reads packets from a classic pcap or pcapng stream.
pub struct PcapReader<R> {
    r: R,
    offset: u64,
    format: Format,
    order: ByteOrder,
    header: FileHeader,
    ifaces: Vec<NgIface>,
    buf: Vec<u8>,
}

impl<R> fmt::Debug for PcapReader<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PcapReader")
            .field("format", &self.format)
            .field("offset", &self.offset)
            .finish_non_exhaustive()
    }
}

/// Read until `buf` is full or end of input; returns how many bytes were read.
fn read_full<R: Read>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Decode a classic record header read at offset `at`: (timestamp ns, captured length,
/// original length); a captured length over [`MAX_RECORD`] is corruption.
pub(crate) fn decode_record_header(
    o: ByteOrder,
    at: u64,
    h: &[u8; 16],
    res: TsResolution,
) -> Result<(u64, u32, u32), PcapError> {
    let sec = o.u32(arr4(h, 0)) as u64;
    let frac = o.u32(arr4(h, 4)) as u64;
    let caplen = o.u32(arr4(h, 8));
    let orig_len = o.u32(arr4(h, 12));
    if caplen > MAX_RECORD {
        return Err(PcapError::format(
            at + 8,
            format!("record length {caplen} is larger than {MAX_RECORD}: file is corrupt"),
        ));
    }
    let ts_ns = match res {
        TsResolution::Micro => sec * 1_000_000_000 + frac * 1_000,
        TsResolution::Nano => sec * 1_000_000_000 + frac,
    };
    Ok((ts_ns, caplen, orig_len))
}

fn arr4(b: &[u8], at: usize) -> [u8; 4] {
    [b[at], b[at + 1], b[at + 2], b[at + 3]]
}

impl<R: Read> PcapReader<R> {
    /// Read the file header (classic pcap) or first section header (pcapng).
    pub fn new(mut r: R) -> Result<PcapReader<R>, PcapError> {
        let mut magic = [0u8; 4];
        let n =
            read_full(&mut r, &mut magic).map_err(|error| PcapError::Io { offset: 0, error })?;
        if n == 0 {
            return Err(PcapError::format(
                0,
                "empty file: expected a pcap or pcapng header",
            ));
        }
        if n < 4 {
            return Err(PcapError::format(
                0,
                format!("truncated file header: {n} of 4 magic bytes"),
            ));
        }
        let mut rd = PcapReader {
            r,
            offset: 4,
            format: Format::Ng,
            order: ByteOrder::Little,
            header: FileHeader {
                version_major: 0,
                version_minor: 0,
                snaplen: 0,
                linktype: 0,
            },
            ifaces: Vec::new(),
            buf: Vec::new(),
        };
        let le = u32::from_le_bytes(magic);
        let be = u32::from_be_bytes(magic);
        let classic = [
            (MAGIC_MICROS, TsResolution::Micro),
            (MAGIC_NANOS, TsResolution::Nano),
        ];
        for (m, res) in classic {
            for (v, order) in [(le, ByteOrder::Little), (be, ByteOrder::Big)] {
                if v == m {
                    rd.order = order;
                    rd.format = Format::Classic {
                        byte_order: order,
                        resolution: res,
                    };
                    rd.read_classic_header()?;
                    return Ok(rd);
                }
            }
        }
        if le == PCAPNG_SHB {
            let mut len = [0u8; 4];
            rd.read_exact_at(&mut len, "pcapng section header")?;
            rd.read_shb(0, len)?;
            return Ok(rd);
        }
        Err(PcapError::format(
            0,
            format!(
                "not a pcap file: magic {:02x} {:02x} {:02x} {:02x} is neither classic pcap \
                 (a1b2c3d4 / a1b23c4d, either byte order) nor pcapng (0a0d0d0a)",
                magic[0], magic[1], magic[2], magic[3]
            ),
        ))
    }

    /// Container format of the file.
    pub fn format(&self) -> Format {
        self.format
    }

    /// The classic pcap global header (for pcapng: the first interface's link type and
    /// snaplen, version 1.0, once an interface block has been read).
    pub fn header(&self) -> FileHeader {
        self.header
    }

    /// Bytes consumed so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    fn io(&self, error: io::Error) -> PcapError {
        PcapError::Io {
            offset: self.offset,
            error,
        }
    }

    /// Read exactly `buf.len()` bytes; a short read is a truncation error about `what`.
    fn read_exact_at(&mut self, buf: &mut [u8], what: &str) -> Result<(), PcapError> {
        let at = self.offset;
        let n = read_full(&mut self.r, buf).map_err(|e| self.io(e))?;
        self.offset += n as u64;
        if n < buf.len() {
            return Err(PcapError::format(
                at,
                format!(
                    "truncated {what}: expected {} bytes, file ends after {n}",
                    buf.len()
                ),
            ));
        }
        Ok(())
    }

    /// Fill the internal buffer with `len` bytes.
    /// The buffer grows only as bytes arrive, so a corrupt length cannot make the reader
    /// allocate more than the file holds.
    fn read_into_buf(&mut self, len: usize, what: &str) -> Result<(), PcapError> {
        let mut buf = std::mem::take(&mut self.buf);
        let res = self.read_record_into(&mut buf, len, what);
        self.buf = buf;
        res
    }

    /// Read `len` bytes into `buf` (replacing its contents). Records up to
    /// [`DIRECT_READ`] bytes are read straight into the buffer's memory; longer ones grow the
    /// buffer only as bytes arrive, so a corrupt length cannot make the reader allocate more
    /// than the file holds.
    fn read_record_into(
        &mut self,
        buf: &mut Vec<u8>,
        len: usize,
        what: &str,
    ) -> Result<(), PcapError> {
        let at = self.offset;
        let (n, res) = if len <= DIRECT_READ {
            // Only the growth (if any) is zero-filled; the bytes are overwritten right away.
            buf.resize(len, 0);
            let res = read_full(&mut self.r, buf);
            let n = *res.as_ref().unwrap_or(&0);
            buf.truncate(n);
            (n, res.map(|_| ()))
        } else {
            buf.clear();
            let res = (&mut self.r).take(len as u64).read_to_end(buf);
            (buf.len(), res.map(|_| ()))
        };
        self.offset += n as u64;
        res.map_err(|error| PcapError::Io { offset: at, error })?;
        if n < len {
            return Err(PcapError::format(
                at,
                format!("truncated {what}: expected {len} bytes, file ends after {n}"),
            ));
        }
        Ok(())
    }

    fn read_classic_header(&mut self) -> Result<(), PcapError> {
        let mut h = [0u8; 20];
        self.read_exact_at(&mut h, "pcap file header")?;
        let o = self.order;
        let version_major = o.u16([h[0], h[1]]);
        let version_minor = o.u16([h[2], h[3]]);
        if version_major != 2 {
            return Err(PcapError::format(
                4,
                format!("unsupported pcap version {version_major}.{version_minor} (expected 2.x)"),
            ));
        }
        self.header = FileHeader {
            version_major,
            version_minor,
            snaplen: o.u32(arr4(&h, 12)),
            linktype: o.u32(arr4(&h, 16)) & 0x03ff_ffff,
        };
        Ok(())
    }

    /// Rest of a section header block whose type field started at `at` and whose length
    /// field (byte order not known yet) is `len_bytes`.
    fn read_shb(&mut self, at: u64, len_bytes: [u8; 4]) -> Result<(), PcapError> {
        let mut bom = [0u8; 4];
        self.read_exact_at(&mut bom, "pcapng section header")?;
        self.order = if u32::from_le_bytes(bom) == PCAPNG_BOM {
            ByteOrder::Little
        } else if u32::from_be_bytes(bom) == PCAPNG_BOM {
            ByteOrder::Big
        } else {
            return Err(PcapError::format(
                at + 8,
                format!(
                    "bad pcapng byte-order magic {:02x} {:02x} {:02x} {:02x} (expected 1a2b3c4d)",
                    bom[0], bom[1], bom[2], bom[3]
                ),
            ));
        };
        let total = self.order.u32(len_bytes);
        if !(28..=MAX_RECORD).contains(&total) || !total.is_multiple_of(4) {
            return Err(PcapError::format(
                at + 4,
                format!("bad pcapng section header length {total}"),
            ));
        }
        // Body after type, length and byte-order magic.
        self.read_into_buf(total as usize - 12, "pcapng section header")?;
        let major = self.order.u16([self.buf[0], self.buf[1]]);
        if major != 1 {
            return Err(PcapError::format(
                at + 12,
                format!("unsupported pcapng version {major} (expected 1)"),
            ));
        }
        self.check_trailer(at, total)?;
        self.ifaces.clear();
        Ok(())
    }

    /// The trailing copy of the block length must match the leading one.
    fn check_trailer(&self, at: u64, total: u32) -> Result<(), PcapError> {
        let n = self.buf.len();
        let trailer = self.order.u32(arr4(&self.buf, n - 4));
        if trailer != total {
            return Err(PcapError::format(
                at + total as u64 - 4,
                format!("pcapng block trailer length {trailer} differs from header length {total}"),
            ));
        }
        Ok(())
    }

    /// Next packet, or `None` at a clean end of file. A partial trailing record is an error.
    pub fn next_packet(&mut self) -> Result<Option<Packet<'_>>, PcapError> {
        match self.format {
            Format::Classic { resolution, .. } => self.next_classic(resolution),
            Format::Ng => self.next_ng(),
        }
    }

    /// Next packet's bytes into `buf` (its contents replaced) and its timestamp in ns, or
    /// `None` at a clean end of file: [`PcapReader::next_packet`] without the copy out of the
    /// reader's own buffer for classic pcap files.
    pub fn next_packet_into(&mut self, buf: &mut Vec<u8>) -> Result<Option<u64>, PcapError> {
        match self.format {
            Format::Classic { resolution, .. } => {
                let Some((ts_ns, caplen, _)) = self.classic_record_header(resolution)? else {
                    return Ok(None);
                };
                self.read_record_into(buf, caplen as usize, "record data")?;
                Ok(Some(ts_ns))
            }
            Format::Ng => Ok(self.next_ng()?.map(|p| {
                buf.clear();
                buf.extend_from_slice(p.data);
                p.ts_ns
            })),
        }
    }

    fn next_classic(&mut self, res: TsResolution) -> Result<Option<Packet<'_>>, PcapError> {
        let Some((ts_ns, caplen, orig_len)) = self.classic_record_header(res)? else {
            return Ok(None);
        };
        self.read_into_buf(caplen as usize, "record data")?;
        Ok(Some(Packet {
            ts_ns,
            orig_len,
            linktype: self.header.linktype,
            data: &self.buf,
        }))
    }

    /// A classic record header: (timestamp ns, captured length, original length).
    fn classic_record_header(
        &mut self,
        res: TsResolution,
    ) -> Result<Option<(u64, u32, u32)>, PcapError> {
        let at = self.offset;
        let mut h = [0u8; 16];
        let n = read_full(&mut self.r, &mut h).map_err(|e| self.io(e))?;
        self.offset += n as u64;
        if n == 0 {
            return Ok(None);
        }
        if n < 16 {
            return Err(PcapError::format(
                at,
                format!("truncated record header: expected 16 bytes, file ends after {n}"),
            ));
        }
        decode_record_header(self.order, at, &h, res).map(Some)
    }

    fn next_ng(&mut self) -> Result<Option<Packet<'_>>, PcapError> {
        loop {
            let at = self.offset;
            let mut h = [0u8; 8];
            let n = read_full(&mut self.r, &mut h).map_err(|e| self.io(e))?;
            self.offset += n as u64;
            if n == 0 {
                return Ok(None);
            }
            if n < 8 {
                return Err(PcapError::format(
                    at,
                    format!("truncated pcapng block header: expected 8 bytes, file ends after {n}"),
                ));
            }
            if u32::from_le_bytes(arr4(&h, 0)) == PCAPNG_SHB {
                self.read_shb(at, arr4(&h, 4))?;
                continue;
            }
            let btype = self.order.u32(arr4(&h, 0));
            let total = self.order.u32(arr4(&h, 4));
            if !(12..=MAX_RECORD).contains(&total) || !total.is_multiple_of(4) {
                return Err(PcapError::format(
                    at + 4,
                    format!("bad pcapng block length {total} (block type {btype:#x})"),
                ));
            }
            self.read_into_buf(total as usize - 8, "pcapng block")?;
            self.check_trailer(at, total)?;
            let body_len = total as usize - 12;
            match btype {
                PCAPNG_IDB => {
                    if body_len < 8 {
                        return Err(PcapError::format(
                            at,
                            "pcapng interface description block is too short",
                        ));
                    }
                    let linktype = self.order.u16([self.buf[0], self.buf[1]]) as u32;
                    let snaplen = self.order.u32(arr4(&self.buf, 4));
                    let units_per_sec = self.if_tsresol(at, body_len)?;
                    if self.ifaces.is_empty() {
                        self.header = FileHeader {
                            version_major: 1,
                            version_minor: 0,
                            snaplen,
                            linktype,
                        };
                    }
                    self.ifaces.push(NgIface {
                        linktype,
                        snaplen,
                        units_per_sec,
                    });
                }
                PCAPNG_EPB | PCAPNG_OPB => {
                    if body_len < 20 {
                        return Err(PcapError::format(at, "pcapng packet block is too short"));
                    }
                    let o = self.order;
                    let iface = if btype == PCAPNG_EPB {
                        o.u32(arr4(&self.buf, 0))
                    } else {
                        o.u16([self.buf[0], self.buf[1]]) as u32
                    };
                    let hi = o.u32(arr4(&self.buf, 4)) as u64;
                    let lo = o.u32(arr4(&self.buf, 8)) as u64;
                    let caplen = o.u32(arr4(&self.buf, 12));
                    let orig_len = o.u32(arr4(&self.buf, 16));
                    let Some(ifc) = self.ifaces.get(iface as usize).copied() else {
                        return Err(PcapError::format(
                            at + 8,
                            format!(
                                "packet block refers to interface {iface}, but only {} are described",
                                self.ifaces.len()
                            ),
                        ));
                    };
                    if caplen as usize > body_len - 20 {
                        return Err(PcapError::format(
                            at + 20,
                            format!(
                                "captured length {caplen} overruns its block ({} bytes of data)",
                                body_len - 20
                            ),
                        ));
                    }
                    let units = (hi << 32) | lo;
                    let ts_ns = to_ns(units, ifc.units_per_sec);
                    return Ok(Some(Packet {
                        ts_ns,
                        orig_len,
                        linktype: ifc.linktype,
                        data: &self.buf[20..20 + caplen as usize],
                    }));
                }
                PCAPNG_SPB => {
                    if body_len < 4 {
                        return Err(PcapError::format(
                            at,
                            "pcapng simple packet block is too short",
                        ));
                    }
                    let Some(ifc) = self.ifaces.first().copied() else {
                        return Err(PcapError::format(
                            at,
                            "simple packet block before any interface description block",
                        ));
                    };
                    let orig_len = self.order.u32(arr4(&self.buf, 0));
                    let mut caplen = (orig_len as usize).min(body_len - 4);
                    if ifc.snaplen != 0 {
                        caplen = caplen.min(ifc.snaplen as usize);
                    }
                    return Ok(Some(Packet {
                        ts_ns: 0,
                        orig_len,
                        linktype: ifc.linktype,
                        data: &self.buf[4..4 + caplen],
                    }));
                }
                _ => {} // statistics, name resolution, custom blocks: skipped
            }
        }
    }

    /// The `if_tsresol` option of the interface block in `self.buf` (default: microseconds).
    fn if_tsresol(&self, at: u64, body_len: usize) -> Result<u64, PcapError> {
        let mut p = 8;
        while p + 4 <= body_len {
            let code = self.order.u16([self.buf[p], self.buf[p + 1]]);
            let len = self.order.u16([self.buf[p + 2], self.buf[p + 3]]) as usize;
            if code == 0 {
                break;
            }
            let v = p + 4;
            if v + len > body_len {
                return Err(PcapError::format(
                    at + 8 + p as u64,
                    format!("interface option {code} overruns its block"),
                ));
            }
            if code == 9 && len >= 1 {
                let r = self.buf[v];
                let exp = (r & 0x7f) as u32;
                let units = if r & 0x80 == 0 {
                    10u64.checked_pow(exp)
                } else {
                    2u64.checked_pow(exp)
                };
                return units.filter(|u| *u > 0).ok_or_else(|| {
                    PcapError::format(
                        at + 8 + v as u64,
                        format!("unsupported timestamp resolution {r:#04x}"),
                    )
                });
            }
            p = v + len.div_ceil(4) * 4;
        }
        Ok(1_000_000)
    }
}

/// Convert a timestamp in `units_per_sec` units to nanoseconds.
fn to_ns(units: u64, units_per_sec: u64) -> u64 {
    if units_per_sec == 1_000_000_000 {
        return units;
    }
    let secs = units / units_per_sec;
    let rem = units % units_per_sec;
    let frac = (rem as u128 * 1_000_000_000 / units_per_sec as u128) as u64;
    secs.saturating_mul(1_000_000_000).saturating_add(frac)
}

/// How a [`PcapWriter`] lays out its file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriterConfig {
    /// Byte order of every field.
    pub byte_order: ByteOrder,
    /// Timestamp resolution (selects the magic number).
    pub resolution: TsResolution,
    /// Snapshot length in the header; when non-zero, longer frames are truncated to it.
    pub snaplen: u32,
    /// Link type in the header.
    pub linktype: u32,
    /// Flush the underlying writer after every packet.
    pub flush_each_packet: bool,
}

impl WriterConfig {
    /// A record's (original, captured) lengths for a frame of `len` bytes: captured is cut to
    /// the snapshot length when there is one; a frame over 4 GiB is an error.
    #[inline]
    fn record_lengths(&self, len: usize) -> io::Result<(u32, u32)> {
        let orig = u32::try_from(len).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("packet of {len} bytes is too large for pcap"),
            )
        })?;
        let cap = if self.snaplen != 0 {
            orig.min(self.snaplen)
        } else {
            orig
        };
        Ok((orig, cap))
    }

    /// A record's timestamp fields (seconds, then micro- or nanoseconds) for `ts_ns`.
    #[inline]
    fn record_ts(&self, ts_ns: u64) -> [u8; 8] {
        let sec = (ts_ns / 1_000_000_000) as u32;
        let sub = ts_ns % 1_000_000_000;
        let frac = match self.resolution {
            TsResolution::Micro => sub / 1_000,
            TsResolution::Nano => sub,
        } as u32;
        let mut enc = [0u8; 8];
        enc[..4].copy_from_slice(&self.byte_order.put_u32(sec));
        enc[4..].copy_from_slice(&self.byte_order.put_u32(frac));
        enc
    }

    /// Append one whole record (header and captured bytes) for `data` at `ts_ns` to `buf`,
    /// byte for byte what a writer with this configuration writes for it: for threads that
    /// prepare records apart and hand them to [`PcapFileWriter::append_records`].
    #[inline]
    pub fn encode_record(&self, buf: &mut Vec<u8>, ts_ns: u64, data: &[u8]) -> io::Result<()> {
        self.encode_record_at(buf, self.encode_ts(ts_ns), data)
    }

    /// A record's encoded timestamp fields for `ts_ns`, for [`WriterConfig::encode_record_at`]
    /// (records sharing a timestamp encode it once).
    #[inline]
    pub fn encode_ts(&self, ts_ns: u64) -> [u8; 8] {
        self.record_ts(ts_ns)
    }

    /// [`WriterConfig::encode_record`] with the timestamp fields already encoded
    /// ([`WriterConfig::encode_ts`]).
    #[inline]
    pub fn encode_record_at(&self, buf: &mut Vec<u8>, ts: [u8; 8], data: &[u8]) -> io::Result<()> {
        let (orig, cap) = self.record_lengths(data.len())?;
        let mut h = [0u8; 16];
        h[..8].copy_from_slice(&ts);
        h[8..].copy_from_slice(&self.byte_order.put_lengths(cap, orig));
        let data = &data[..cap as usize];
        buf.reserve(16 + data.len());
        buf.extend_from_slice(&h);
        buf.extend_from_slice(data);
        Ok(())
    }

    /// What simple_switch writes for `--use-files` outputs: host byte order, microseconds,
    /// version 2.4, snaplen 0, link type 0 (DLT_NULL), flushed after every packet.
    pub fn bmv2() -> WriterConfig {
        WriterConfig {
            byte_order: ByteOrder::native(),
            resolution: TsResolution::Micro,
            snaplen: 0,
            linktype: LINKTYPE_NULL,
            flush_each_packet: true,
        }
    }

    /// A conventional Ethernet capture: host byte order, microseconds, snaplen 65535.
    pub fn ethernet() -> WriterConfig {
        WriterConfig {
            byte_order: ByteOrder::native(),
            resolution: TsResolution::Micro,
            snaplen: 65535,
            linktype: LINKTYPE_ETHERNET,
            flush_each_packet: true,
        }
    }
}

/// Writes a classic pcap file. The header is written by [`PcapWriter::new`]; the writer is
/// flushed after every packet (if configured) and when dropped.
pub struct PcapWriter<W: Write> {
    w: W,
    cfg: WriterConfig,
    packets: u64,
}

impl<R: BufRead> PcapReader<R> {
    /// [`PcapReader::next_packet_into`] for a buffered source: a classic record lying whole in
    /// the reader's buffer (the common case: records are small, the buffer is 64 KiB) is
    /// decoded and copied straight out of it, one copy and no read call; a record that
    /// straddles the buffer's end, and pcapng, take the general path.
    pub fn next_packet_buffered(&mut self, buf: &mut Vec<u8>) -> Result<Option<u64>, PcapError> {
        let Format::Classic { resolution, .. } = self.format else {
            return self.next_packet_into(buf);
        };
        let (at, order) = (self.offset, self.order);
        let avail = self
            .r
            .fill_buf()
            .map_err(|error| PcapError::Io { offset: at, error })?;
        if avail.len() < 16 {
            return self.next_packet_into(buf);
        }
        let h: &[u8; 16] = avail[..16].try_into().expect("16 bytes");
        let (ts_ns, caplen, _) = decode_record_header(order, at, h, resolution)?;
        let end = 16 + caplen as usize;
        if avail.len() < end {
            return self.next_packet_into(buf);
        }
        buf.clear();
        buf.extend_from_slice(&avail[16..end]);
        self.r.consume(end);
        self.offset += end as u64;
        Ok(Some(ts_ns))
    }
}

impl<W: Write> fmt::Debug for PcapWriter<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PcapWriter")
            .field("cfg", &self.cfg)
            .field("packets", &self.packets)
            .finish_non_exhaustive()
    }
}

impl<W: Write> PcapWriter<W> {
    /// Write the 24-byte global header (version 2.4, thiszone 0, sigfigs 0).
    pub fn new(mut w: W, cfg: WriterConfig) -> io::Result<PcapWriter<W>> {
        let o = cfg.byte_order;
        let magic = match cfg.resolution {
            TsResolution::Micro => MAGIC_MICROS,
            TsResolution::Nano => MAGIC_NANOS,
        };
        let mut h = [0u8; 24];
        h[0..4].copy_from_slice(&o.put_u32(magic));
        h[4..6].copy_from_slice(&o.put_u16(2));
        h[6..8].copy_from_slice(&o.put_u16(4));
        // thiszone and sigfigs stay 0.
        h[16..20].copy_from_slice(&o.put_u32(cfg.snaplen));
        h[20..24].copy_from_slice(&o.put_u32(cfg.linktype));
        w.write_all(&h)?;
        if cfg.flush_each_packet {
            w.flush()?;
        }
        Ok(PcapWriter { w, cfg, packets: 0 })
    }

    /// Append one record with timestamp `ts_ns` (nanoseconds since the epoch; seconds are
    /// stored modulo 2^32 as the format requires).
    pub fn write_packet(&mut self, ts_ns: u64, data: &[u8]) -> io::Result<()> {
        let o = self.cfg.byte_order;
        let (orig, cap) = self.cfg.record_lengths(data.len())?;
        let mut h = [0u8; 16];
        h[..8].copy_from_slice(&self.cfg.record_ts(ts_ns));
        h[8..12].copy_from_slice(&o.put_u32(cap));
        h[12..16].copy_from_slice(&o.put_u32(orig));
        self.w.write_all(&h)?;
        self.w.write_all(&data[..cap as usize])?;
        self.packets += 1;
        if self.cfg.flush_each_packet {
            self.w.flush()?;
        }
        Ok(())
    }

    /// Number of packets written.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Flush the underlying writer.
    pub fn flush(&mut self) -> io::Result<()> {
        self.w.flush()
    }

    /// The underlying writer.
    pub fn get_ref(&self) -> &W {
        &self.w
    }
}

impl<W: Write> Drop for PcapWriter<W> {
    fn drop(&mut self) {
        let _ = self.w.flush();
    }
}

/// Bytes a [`PcapFileWriter`] gathers before writing them out (one system call per 1 MiB).
pub const FILE_WRITE_CHUNK: usize = 1 << 20;

/// A classic pcap writer for files at memory speed: records (header and bytes) are appended
/// in place to one large buffer, written out in [`FILE_WRITE_CHUNK`] pieces (or after every
/// packet when [`WriterConfig::flush_each_packet`] is set), so a packet costs two copies into
/// the buffer and no system call. Its files are byte-identical to [`PcapWriter`]'s.
pub struct PcapFileWriter<W: Write> {
    w: W,
    cfg: WriterConfig,
    buf: Vec<u8>,
    packets: u64,
    /// Last timestamp seen and its encoded (seconds, fraction) fields.
    last_ts: Option<(u64, [u8; 8])>,
}

impl<W: Write> fmt::Debug for PcapFileWriter<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PcapFileWriter")
            .field("cfg", &self.cfg)
            .field("packets", &self.packets)
            .field("buffered", &self.buf.len())
            .finish_non_exhaustive()
    }
}

impl<W: Write> PcapFileWriter<W> {
    /// Write the 24-byte global header, as [`PcapWriter::new`] does.
    pub fn new(w: W, cfg: WriterConfig) -> io::Result<PcapFileWriter<W>> {
        let mut hw = PcapWriter::new(Vec::with_capacity(24), cfg)?;
        let header = std::mem::take(&mut hw.w);
        let mut pw = PcapFileWriter {
            w,
            cfg,
            buf: Vec::with_capacity(FILE_WRITE_CHUNK + 2048),
            packets: 0,
            last_ts: None,
        };
        pw.buf.extend_from_slice(&header);
        if cfg.flush_each_packet {
            pw.flush()?;
        }
        Ok(pw)
    }

    /// Append one record, as [`PcapWriter::write_packet`] does.
    #[inline]
    pub fn write_packet(&mut self, ts_ns: u64, data: &[u8]) -> io::Result<()> {
        let o = self.cfg.byte_order;
        let (orig, cap) = self.cfg.record_lengths(data.len())?;
        // Outputs of a batch share their timestamp: its fields are encoded once.
        let ts = match self.last_ts {
            Some((t, enc)) if t == ts_ns => enc,
            _ => {
                let enc = self.cfg.record_ts(ts_ns);
                self.last_ts = Some((ts_ns, enc));
                enc
            }
        };
        let mut h = [0u8; 16];
        h[..8].copy_from_slice(&ts);
        h[8..].copy_from_slice(&o.put_lengths(cap, orig));
        let data = &data[..cap as usize];
        self.buf.reserve(16 + data.len());
        self.buf.extend_from_slice(&h);
        self.buf.extend_from_slice(data);
        self.packets += 1;
        if self.cfg.flush_each_packet || self.buf.len() >= FILE_WRITE_CHUNK {
            self.flush()?;
        }
        Ok(())
    }

    /// Room for `n` more records of at most `max` bytes each written in place (a deparser
    /// writing a frame straight into the file buffer): where the next record's bytes go,
    /// after the 16 bytes of its header, which [`PcapFileWriter::commit_in_place`] fills. The
    /// position stays valid (and so do the ones `commit_in_place` returns, for `n` records in
    /// all) until the writer is used otherwise.
    pub fn room_in_place(&mut self, n: usize, max: usize) -> *mut u8 {
        self.buf.reserve(n.saturating_mul(16 + max).max(16));
        // SAFETY: `len + 16 <= capacity` (reserved just above).
        unsafe { self.buf.as_mut_ptr().add(self.buf.len() + 16) }
    }

    /// The record whose `len` bytes were written in place (at the position the last
    /// [`PcapFileWriter::room_in_place`] or `commit_in_place` gave) becomes one at `ts_ns`:
    /// its header filled, the bytes cut to the snap length, counted. Returns where the next
    /// record's bytes go. Not flushed (see [`PcapFileWriter::flush_if_full`]).
    ///
    /// # Safety
    /// `len` bytes were written at that position, within the room `room_in_place` gave (of
    /// which this is one of its `n` records), and the writer was not used otherwise since.
    pub unsafe fn commit_in_place(&mut self, ts_ns: u64, len: usize) -> io::Result<*mut u8> {
        let o = self.cfg.byte_order;
        let (orig, cap) = self.cfg.record_lengths(len)?;
        let ts = match self.last_ts {
            Some((t, enc)) if t == ts_ns => enc,
            _ => {
                let enc = self.cfg.record_ts(ts_ns);
                self.last_ts = Some((ts_ns, enc));
                enc
            }
        };
        let at = self.buf.len();
        let mut h = [0u8; 16];
        h[..8].copy_from_slice(&ts);
        h[8..].copy_from_slice(&o.put_lengths(cap, orig));
        // SAFETY: the header's 16 bytes and the record's `cap <= len` bytes after it lie within
        // the room reserved by `room_in_place` (the caller's contract); those bytes were
        // written (the caller's contract), the header just now; the next position is within
        // the room while records remain (else it is only returned, not written).
        unsafe {
            let base = self.buf.as_mut_ptr();
            std::ptr::copy_nonoverlapping(h.as_ptr(), base.add(at), 16);
            let end = at + 16 + cap as usize;
            self.buf.set_len(end);
            self.packets += 1;
            Ok(base.wrapping_add(end + 16))
        }
    }

    /// Write the buffer out if it holds [`FILE_WRITE_CHUNK`] bytes or more (or anything,
    /// with [`WriterConfig::flush_each_packet`]): after records written in place.
    pub fn flush_if_full(&mut self) -> io::Result<()> {
        if self.cfg.flush_each_packet || self.buf.len() >= FILE_WRITE_CHUNK {
            self.flush()?;
        }
        Ok(())
    }

    /// Number of packets written.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// The configuration the records are written with.
    pub fn config(&self) -> WriterConfig {
        self.cfg
    }

    /// Append `packets` whole records already encoded with this writer's configuration
    /// ([`WriterConfig::encode_record`]), copied as one run.
    pub fn append_records(&mut self, records: &[u8], packets: u64) -> io::Result<()> {
        self.buf.extend_from_slice(records);
        self.packets += packets;
        if self.cfg.flush_each_packet || self.buf.len() >= FILE_WRITE_CHUNK {
            self.flush()?;
        }
        Ok(())
    }

    /// Write `packets` whole records already encoded with this writer's configuration, lying
    /// in `runs` in file order, straight from there with vectored writes (what is buffered
    /// goes first): for threads that encoded records apart, without copying them again.
    pub fn write_records_vectored(
        &mut self,
        mut runs: &mut [io::IoSlice<'_>],
        packets: u64,
    ) -> io::Result<()> {
        if !self.buf.is_empty() {
            let res = self.w.write_all(&self.buf);
            self.buf.clear();
            res?;
        }
        io::IoSlice::advance_slices(&mut runs, 0);
        while !runs.is_empty() {
            match self.w.write_vectored(runs) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::WriteZero,
                        "failed to write whole records",
                    ))
                }
                Ok(n) => io::IoSlice::advance_slices(&mut runs, n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.packets += packets;
        if self.cfg.flush_each_packet {
            self.w.flush()?;
        }
        Ok(())
    }

    /// Write out what is buffered and flush the underlying writer.
    pub fn flush(&mut self) -> io::Result<()> {
        if !self.buf.is_empty() {
            // Cleared even on failure: the caller reports the error and stops writing.
            let res = self.w.write_all(&self.buf);
            self.buf.clear();
            res?;
        }
        self.w.flush()
    }

    /// The underlying writer.
    pub fn get_ref(&self) -> &W {
        &self.w
    }
}

impl<W: Write> Drop for PcapFileWriter<W> {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}
