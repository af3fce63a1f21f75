//! Classic pcap input files mapped into memory (`mmap`): record headers are decoded in place
//! and frames are handed out as slices of the mapping, so reading a packet costs no copy, no
//! system call and no clock read. [`crate::FilePorts`] uses it for regular files in classic
//! pcap format; FIFOs, stdin and pcapng files keep the streaming [`crate::PcapReader`].
//!
//! Errors are the streaming reader's, at the same byte offsets: a record header or record
//! data cut short by the end of the file, and a captured length over
//! [`crate::pcap::MAX_RECORD`], are format errors naming where the file stopped making sense.

use crate::pcap::{
    decode_record_header, ByteOrder, Format, PcapError, PcapReader, TsResolution, MAX_RECORD,
};
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::Arc;

/// A read-only private mapping of a whole file (never empty).
struct Mapping {
    ptr: *const u8,
    len: usize,
}

// SAFETY: the mapping is read-only and owned by this value (unmapped once, on drop); shared
// `&[u8]` views of it may be read from any thread.
unsafe impl Send for Mapping {}
// SAFETY: as above: nothing writes through the mapping.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Map the first `len` (> 0) bytes of `f` read-only.
    fn new(f: &File, len: usize) -> io::Result<Mapping> {
        // SAFETY: a fresh mapping (null hint, so the kernel picks an unused range) of an open
        // file descriptor; the result is checked against MAP_FAILED before use.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                f.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        // Read-ahead for a front-to-back scan; only advice, so its result does not matter.
        // SAFETY: `ptr..ptr + len` is the mapping just created.
        unsafe { libc::madvise(ptr, len, libc::MADV_SEQUENTIAL) };
        Ok(Mapping {
            ptr: ptr as *const u8,
            len,
        })
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr..ptr + len` is mapped readable for the life of `self`. The file is
        // mapped privately: pages already read keep their bytes; a file truncated by another
        // process while it is being read would fault (SIGBUS), as with any mapped reader: tern
        // reads its input files, it does not share them with writers.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the range mapped in `Mapping::new`; no slice of it outlives
        // `self` (they borrow it).
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
    }
}

/// The bytes of a mapped file, shared ([`MappedPcap::handle`]).
pub struct MappedBytes(Arc<Mapping>);

impl MappedBytes {
    /// The whole mapped file.
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        self.0.bytes()
    }
}

/// A classic pcap file read in place from a mapping of it.
pub struct MappedPcap {
    map: Arc<Mapping>,
    /// Offset of the next record header.
    pos: usize,
    order: ByteOrder,
    res: TsResolution,
    linktype: u32,
}

impl std::fmt::Debug for MappedPcap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedPcap")
            .field("len", &self.map.len)
            .field("pos", &self.pos)
            .finish_non_exhaustive()
    }
}

impl MappedPcap {
    /// Map `f` if it is a regular, non-empty classic pcap file. `Ok(None)`: it is something
    /// else (a FIFO, an empty file, pcapng: the streaming reader handles and reports those);
    /// `Err`: a classic file whose header is bad (the streaming reader's error).
    pub fn open(f: &File) -> Result<Option<MappedPcap>, PcapError> {
        let meta = f
            .metadata()
            .map_err(|error| PcapError::Io { offset: 0, error })?;
        if !meta.is_file() || meta.len() < 4 {
            return Ok(None);
        }
        let Ok(len) = usize::try_from(meta.len()) else {
            return Ok(None);
        };
        // A file that cannot be mapped is read as a stream.
        let Ok(map) = Mapping::new(f, len) else {
            return Ok(None);
        };
        // The header through the streaming reader: same checks, same errors.
        let rd = PcapReader::new(map.bytes())?;
        let Format::Classic {
            byte_order,
            resolution,
        } = rd.format()
        else {
            return Ok(None);
        };
        let (pos, linktype) = (rd.offset() as usize, rd.header().linktype);
        Ok(Some(MappedPcap {
            map: Arc::new(map),
            pos,
            order: byte_order,
            res: resolution,
            linktype,
        }))
    }

    /// The file's link type.
    pub fn linktype(&self) -> u32 {
        self.linktype
    }

    /// The whole mapped file: records are `bytes()[start..start + len]`.
    pub fn bytes(&self) -> &[u8] {
        self.map.bytes()
    }

    /// A handle on the mapped bytes that outlives this reader's borrows (it keeps the
    /// mapping alive): for threads that read frames while this reader goes on.
    pub fn handle(&self) -> MappedBytes {
        MappedBytes(Arc::clone(&self.map))
    }

    /// Byte offset of the next record header.
    pub fn offset(&self) -> u64 {
        self.pos as u64
    }

    /// [`MappedPcap::next_record`] for a well-formed record: `None` at the end of the file and
    /// for anything [`MappedPcap::next_record`] would report as an error (the caller asks it
    /// then, for the error or the end, which leaves the position where it was). No error
    /// value is built on this path: a record costs a bounds check, four loads and the
    /// timestamp arithmetic.
    #[inline(always)]
    pub fn next_ok(&mut self) -> Option<(u64, usize, usize)> {
        let b = self.map.bytes();
        let at = self.pos;
        let h: &[u8; 16] = b.get(at..at.wrapping_add(16))?.try_into().ok()?;
        let w = |k: usize| {
            let v = [h[k], h[k + 1], h[k + 2], h[k + 3]];
            match self.order {
                ByteOrder::Little => u32::from_le_bytes(v),
                ByteOrder::Big => u32::from_be_bytes(v),
            }
        };
        let (sec, frac, caplen) = (w(0) as u64, w(4) as u64, w(8));
        let start = at + 16;
        if caplen > MAX_RECORD || caplen as usize > b.len() - start {
            return None;
        }
        let ts_ns = sec * 1_000_000_000
            + match self.res {
                TsResolution::Micro => frac * 1_000,
                TsResolution::Nano => frac,
            };
        self.pos = start + caplen as usize;
        Some((ts_ns, start, caplen as usize))
    }

    /// The next record: (timestamp ns, start of its captured bytes in [`MappedPcap::bytes`],
    /// captured length); `None` at a clean end of file. A partial trailing record is an error.
    #[inline]
    pub fn next_record(&mut self) -> Result<Option<(u64, usize, usize)>, PcapError> {
        let b = self.map.bytes();
        let at = self.pos;
        let rest = b.len() - at;
        if rest == 0 {
            return Ok(None);
        }
        let Some(h) = b.get(at..at + 16) else {
            return Err(PcapError::Format {
                offset: at as u64,
                msg: format!("truncated record header: expected 16 bytes, file ends after {rest}"),
            });
        };
        let h: &[u8; 16] = h.try_into().expect("16 bytes");
        let (ts_ns, caplen, _) = decode_record_header(self.order, at as u64, h, self.res)?;
        let start = at + 16;
        let (caplen, avail) = (caplen as usize, b.len() - start);
        if caplen > avail {
            return Err(PcapError::Format {
                offset: start as u64,
                msg: format!(
                    "truncated record data: expected {caplen} bytes, file ends after {avail}"
                ),
            });
        }
        self.pos = start + caplen;
        Ok(Some((ts_ns, start, caplen)))
    }
}
