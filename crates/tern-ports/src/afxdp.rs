//! AF_XDP ports (`tern run --io xdp`): per interface, an XDP program (six hand-assembled eBPF
//! instructions loaded with the raw `bpf()` system call: redirect every frame of the receive
//! queue into an XSKMAP, falling back to the kernel stack when no socket is in the map)
//! attached through a BPF link (native driver mode where the driver supports it, else generic
//! mode; detached when the link's descriptor closes, so nothing outlives the process), an
//! AF_XDP socket bound to queue 0 with its UMEM (4,096 frames of 2 KiB: half for receiving
//! through the fill ring, half for transmitting) and its four rings. Receiving copies a frame
//! out of the UMEM and gives the frame back to the fill ring; transmitting copies into a free
//! TX frame, and a batch is handed to the kernel with one `sendto` kick (completions give the
//! frames back). [`AnyLive`] is what `tern run` drives: AF_PACKET or AF_XDP behind one
//! [`PortIo`].
//!
//! Limits: queue 0 only (set multi-queue NICs to one combined channel, `ethtool -L IFACE
//! combined 1`); frames up to 2 KiB (longer ones are counted as errors); the kernel picks copy
//! or zero-copy mode at bind (veth: copy); no receive timestamps from the kernel (the wall
//! clock at receipt is used).

use crate::afpacket::{ifindex, os_err, setsockopt, stop_requested, LivePorts, LiveStats};
use crate::ports::{PortError, PortIo, PortSpec, RxMeta};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use tern_runtime::Port;

/// Bytes per UMEM frame.
const FRAME: u64 = 2048;
/// Frames per ring (and per half of the UMEM).
const RING: u32 = 2048;

/// Why AF_XDP cannot be used on an interface: the caller may fall back to AF_PACKET.
fn unavailable(name: &str, what: &'static str, error: io::Error) -> PortError {
    PortError::Os {
        name: name.to_string(),
        what,
        error,
    }
}

// ------------------------------------------------------------------------ bpf() calls

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// `union bpf_attr`, as 16 words written field by field (every command used here fits).
#[repr(C, align(8))]
#[derive(Default)]
struct BpfAttr([u32; 32]);

impl BpfAttr {
    fn u32(&mut self, off: usize, v: u32) -> &mut Self {
        self.0[off / 4] = v;
        self
    }
    fn u64(&mut self, off: usize, v: u64) -> &mut Self {
        self.0[off / 4] = v as u32;
        self.0[off / 4 + 1] = (v >> 32) as u32;
        self
    }
}

/// One `bpf()` call; a returned descriptor is owned.
fn bpf(cmd: libc::c_long, attr: &BpfAttr) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a live, zero-padded `union bpf_attr` image of the size passed.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *const BpfAttr,
            std::mem::size_of::<BpfAttr>() as libc::c_uint,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn bpf_fd(cmd: libc::c_long, attr: &BpfAttr) -> io::Result<OwnedFd> {
    let fd = bpf(cmd, attr)?;
    // SAFETY: these commands return a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}

/// One eBPF instruction: opcode, dst and src registers, offset, immediate.
fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> u64 {
    u64::from(code)
        | u64::from(dst & 0xf) << 8
        | u64::from(src & 0xf) << 12
        | u64::from(off as u16) << 16
        | u64::from(imm as u32) << 32
}

/// `return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);`
fn redirect_program(map_fd: i32) -> [u64; 6] {
    const XDP_PASS: i32 = 2;
    const BPF_FUNC_REDIRECT_MAP: i32 = 51;
    const BPF_PSEUDO_MAP_FD: u8 = 1;
    [
        insn(0x61, 2, 1, 16, 0), // r2 = *(u32 *)(r1 + 16): rx_queue_index
        insn(0x18, 1, BPF_PSEUDO_MAP_FD, 0, map_fd), // r1 = the map (ld_imm64, two slots)
        insn(0, 0, 0, 0, 0),
        insn(0xb7, 3, 0, 0, XDP_PASS), // r3 = XDP_PASS (the action without a socket)
        insn(0x85, 0, 0, 0, BPF_FUNC_REDIRECT_MAP), // call bpf_redirect_map
        insn(0x95, 0, 0, 0, 0),        // exit
    ]
}

// ------------------------------------------------------------------------ mappings and rings

/// A memory mapping, unmapped on drop.
struct Map {
    base: *mut u8,
    len: usize,
}

impl Map {
    fn new(fd: Option<&OwnedFd>, len: usize, pgoff: u64) -> io::Result<Map> {
        let (flags, raw) = match fd {
            Some(f) => (libc::MAP_SHARED | libc::MAP_POPULATE, f.as_raw_fd()),
            None => (
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
            ),
        };
        // SAFETY: a fresh mapping (anonymous, or of the socket's ring at the kernel-defined
        // page offset); the result is checked for MAP_FAILED.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                raw,
                pgoff as libc::off_t,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Map {
            base: p.cast(),
            len,
        })
    }
}

impl Drop for Map {
    fn drop(&mut self) {
        // SAFETY: exactly the mapping made in `Map::new`, unmapped once.
        unsafe {
            libc::munmap(self.base.cast(), self.len);
        }
    }
}

/// One of the socket's four rings: producer and consumer indices shared with the kernel
/// (atomics), descriptors of `size` bytes each, `RING` of them.
struct XRing {
    map: Map,
    producer: usize,
    consumer: usize,
    desc: usize,
    size: usize,
    /// Our side's index (producer for fill/TX, consumer for RX/completion), kept locally.
    head: u32,
}

impl XRing {
    fn open(
        fd: &OwnedFd,
        off: &libc::xdp_ring_offset,
        size: usize,
        pgoff: u64,
    ) -> io::Result<Self> {
        let len = off.desc as usize + RING as usize * size;
        Ok(XRing {
            map: Map::new(Some(fd), len, pgoff)?,
            producer: off.producer as usize,
            consumer: off.consumer as usize,
            desc: off.desc as usize,
            size,
            head: 0,
        })
    }

    fn index(&self, off: usize) -> &AtomicU32 {
        debug_assert!(off + 4 <= self.map.len && off.is_multiple_of(4));
        // SAFETY: the kernel's offsets lie in the mapping and are 4-byte aligned; the word
        // is shared with the kernel, so it is only accessed atomically.
        unsafe { &*self.map.base.add(off).cast::<AtomicU32>() }
    }

    fn producer(&self) -> &AtomicU32 {
        self.index(self.producer)
    }

    fn consumer(&self) -> &AtomicU32 {
        self.index(self.consumer)
    }

    /// Pointer to descriptor `i` (taken modulo the ring size).
    fn slot(&self, i: u32) -> *mut u8 {
        let off = self.desc + (i & (RING - 1)) as usize * self.size;
        debug_assert!(off + self.size <= self.map.len);
        // SAFETY: `off` is within the mapping: desc + RING * size is its length.
        unsafe { self.map.base.add(off) }
    }
}

/// One interface's AF_XDP socket, UMEM, rings, program, map and link.
struct Xsk {
    port: Port,
    name: String,
    fd: OwnedFd,
    umem: Map,
    rx: XRing,
    tx: XRing,
    fill: XRing,
    comp: XRing,
    /// TX frames (UMEM addresses) free for the next send.
    free_tx: Vec<u64>,
    /// Descriptors written to the TX ring but not yet published.
    pending: u32,
    /// Kept open: closing the link detaches the program.
    _link: OwnedFd,
    _prog: OwnedFd,
    _map: OwnedFd,
    /// "native" or "generic" XDP.
    mode: &'static str,
}

impl Xsk {
    fn open(spec: &PortSpec) -> Result<Xsk, PortError> {
        let idx = ifindex(spec)? as u32;
        let name = spec.name.as_str();
        let na = |what, e| unavailable(name, what, e);
        // SAFETY: plain socket(2) call; the result is checked.
        let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EPERM) {
                return Err(PortError::NotPermitted {
                    name: name.to_string(),
                });
            }
            return Err(na(
                "opening an AF_XDP socket (kernel without CONFIG_XDP_SOCKETS?)",
                e,
            ));
        }
        // SAFETY: a new descriptor owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let umem = Map::new(None, (FRAME * u64::from(RING) * 2) as usize, 0)
            .map_err(|e| na("allocating the UMEM", e))?;
        let reg = libc::xdp_umem_reg {
            addr: umem.base as u64,
            len: umem.len as u64,
            chunk_size: FRAME as u32,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        setsockopt(&fd, libc::SOL_XDP, libc::XDP_UMEM_REG, &reg)
            .map_err(|e| na("registering the UMEM", e))?;
        for opt in [
            libc::XDP_UMEM_FILL_RING,
            libc::XDP_UMEM_COMPLETION_RING,
            libc::XDP_RX_RING,
            libc::XDP_TX_RING,
        ] {
            setsockopt(&fd, libc::SOL_XDP, opt, &RING).map_err(|e| na("sizing the rings", e))?;
        }
        // SAFETY: all-zero is a valid `xdp_mmap_offsets`; the kernel fills it.
        let mut off: libc::xdp_mmap_offsets = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::xdp_mmap_offsets>() as libc::socklen_t;
        // SAFETY: `off` is writable for `len` bytes; `len` is updated by the kernel.
        let rc = unsafe {
            libc::getsockopt(
                fd.as_raw_fd(),
                libc::SOL_XDP,
                libc::XDP_MMAP_OFFSETS,
                (&mut off as *mut libc::xdp_mmap_offsets).cast(),
                &mut len,
            )
        };
        if rc != 0 {
            return Err(na("reading the ring offsets", io::Error::last_os_error()));
        }
        let desc = std::mem::size_of::<libc::xdp_desc>();
        let ring = |o, size, pg| XRing::open(&fd, o, size, pg).map_err(|e| na("mapping a ring", e));
        let rx = ring(&off.rx, desc, libc::XDP_PGOFF_RX_RING as u64)?;
        let tx = ring(&off.tx, desc, libc::XDP_PGOFF_TX_RING as u64)?;
        let mut fill = ring(&off.fr, 8, libc::XDP_UMEM_PGOFF_FILL_RING)?;
        let comp = ring(&off.cr, 8, libc::XDP_UMEM_PGOFF_COMPLETION_RING)?;
        // The first half of the UMEM receives: every frame goes to the fill ring.
        for i in 0..RING {
            // SAFETY: fill slots are 8-byte descriptors inside the mapping (`slot`).
            unsafe {
                fill.slot(i)
                    .cast::<u64>()
                    .write_unaligned(u64::from(i) * FRAME)
            };
        }
        fill.head = RING;
        fill.producer().store(RING, Ordering::Release);

        let sxdp = libc::sockaddr_xdp {
            sxdp_family: libc::AF_XDP as u16,
            sxdp_flags: 0,
            sxdp_ifindex: idx,
            sxdp_queue_id: 0,
            sxdp_shared_umem_fd: 0,
        };
        // SAFETY: `sxdp` is a valid sockaddr_xdp and the length passed is its size.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sxdp as *const libc::sockaddr_xdp).cast(),
                std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(na(
                "binding the AF_XDP socket to queue 0",
                io::Error::last_os_error(),
            ));
        }

        let mut a = BpfAttr::default();
        a.u32(0, BPF_MAP_TYPE_XSKMAP).u32(4, 4).u32(8, 4).u32(12, 1);
        let map = bpf_fd(BPF_MAP_CREATE, &a).map_err(|e| na("creating the XSKMAP (bpf)", e))?;
        let (key, val) = (0u32, fd.as_raw_fd() as u32);
        let mut a = BpfAttr::default();
        a.u32(0, map.as_raw_fd() as u32)
            .u64(8, &key as *const u32 as u64)
            .u64(16, &val as *const u32 as u64);
        bpf(BPF_MAP_UPDATE_ELEM, &a).map_err(|e| na("putting the socket in the XSKMAP", e))?;
        let prog = redirect_program(map.as_raw_fd());
        let license = c"GPL";
        let mut a = BpfAttr::default();
        a.u32(0, BPF_PROG_TYPE_XDP)
            .u32(4, prog.len() as u32)
            .u64(8, prog.as_ptr() as u64)
            .u64(16, license.as_ptr() as u64)
            .u32(68, BPF_XDP); // expected_attach_type
        let prog = bpf_fd(BPF_PROG_LOAD, &a).map_err(|e| na("loading the XDP program", e))?;
        let link = |flags| {
            let mut a = BpfAttr::default();
            a.u32(0, prog.as_raw_fd() as u32)
                .u32(4, idx)
                .u32(8, BPF_XDP)
                .u32(12, flags);
            bpf_fd(BPF_LINK_CREATE, &a)
        };
        let (link, mode) = match link(XDP_FLAGS_DRV_MODE) {
            Ok(l) => (l, "native"),
            Err(_) => (
                link(XDP_FLAGS_SKB_MODE)
                    .map_err(|e| na("attaching the XDP program (native and generic)", e))?,
                "generic",
            ),
        };
        let free_tx = (RING..2 * RING).map(|i| u64::from(i) * FRAME).collect();
        Ok(Xsk {
            port: spec.port,
            name: name.to_string(),
            fd,
            umem,
            rx,
            tx,
            fill,
            comp,
            free_tx,
            pending: 0,
            _link: link,
            _prog: prog,
            _map: map,
            mode,
        })
    }

    /// The next received frame, if the RX ring holds one (never blocks).
    fn next_frame(&mut self, buf: &mut Vec<u8>, st: &mut LiveStats) -> Option<RxMeta> {
        loop {
            if self.rx.head == self.rx.producer().load(Ordering::Acquire) {
                return None;
            }
            // SAFETY: RX slots are `xdp_desc`s inside the mapping; the kernel published this
            // one (producer index read with acquire above).
            let d = unsafe {
                self.rx
                    .slot(self.rx.head)
                    .cast::<libc::xdp_desc>()
                    .read_unaligned()
            };
            self.rx.head = self.rx.head.wrapping_add(1);
            self.rx.consumer().store(self.rx.head, Ordering::Release);
            let (addr, len) = (d.addr, d.len as u64);
            let ok = addr
                .checked_add(len)
                .is_some_and(|e| e <= self.umem.len as u64);
            if ok {
                buf.clear();
                // SAFETY: `addr..addr + len` lies in the UMEM (checked) and the frame is ours
                // until it goes back to the fill ring below.
                buf.extend_from_slice(unsafe {
                    std::slice::from_raw_parts(self.umem.base.add(addr as usize), len as usize)
                });
            }
            // The frame goes back to the fill ring (its chunk's start).
            // SAFETY: fill slots are 8-byte descriptors inside the mapping.
            unsafe {
                self.fill
                    .slot(self.fill.head)
                    .cast::<u64>()
                    .write_unaligned(addr & !(FRAME - 1))
            };
            self.fill.head = self.fill.head.wrapping_add(1);
            self.fill
                .producer()
                .store(self.fill.head, Ordering::Release);
            if !ok {
                st.iface_errors += 1;
                continue;
            }
            st.rx += 1;
            let ts_ns = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            return Some(RxMeta {
                port: self.port,
                ts_ns,
            });
        }
    }

    /// Completed transmissions give their frames back.
    fn reap(&mut self) {
        let prod = self.comp.producer().load(Ordering::Acquire);
        while self.comp.head != prod {
            // SAFETY: completion slots are 8-byte addresses inside the mapping, published by
            // the kernel (acquire above).
            let addr = unsafe {
                self.comp
                    .slot(self.comp.head)
                    .cast::<u64>()
                    .read_unaligned()
            };
            self.free_tx.push(addr & !(FRAME - 1));
            self.comp.head = self.comp.head.wrapping_add(1);
        }
        self.comp
            .consumer()
            .store(self.comp.head, Ordering::Release);
    }

    /// Publish the written TX descriptors and kick the kernel until it has taken them all (in
    /// copy mode one kick sends at most 32 frames).
    fn flush(&mut self) {
        if self.pending > 0 {
            self.tx.producer().store(self.tx.head, Ordering::Release);
            self.pending = 0;
        }
        for _ in 0..100_000 {
            if self.tx.consumer().load(Ordering::Acquire) == self.tx.head {
                break;
            }
            // SAFETY: a zero-length sendto on our socket only kicks transmission.
            let rc = unsafe {
                libc::sendto(
                    self.fd.as_raw_fd(),
                    std::ptr::null(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null(),
                    0,
                )
            };
            if rc < 0 {
                match io::Error::last_os_error().raw_os_error() {
                    Some(libc::EAGAIN | libc::EINTR) => {}
                    // The device is busy or out of buffers: let it drain.
                    Some(libc::EBUSY | libc::ENOBUFS) => std::thread::yield_now(),
                    _ => break,
                }
            }
        }
    }

    /// Queue one frame for transmission (a batch is kicked when `batch` are queued).
    fn send(&mut self, data: &[u8], batch: u32, st: &mut LiveStats) {
        if data.len() as u64 > FRAME {
            st.tx_errors += 1;
            return;
        }
        if self.free_tx.is_empty() {
            self.reap();
        }
        // Every TX frame in flight: kick and wait (briefly) for completions.
        let mut tries = 0;
        while self.free_tx.is_empty() && tries < 1000 {
            self.flush();
            std::thread::yield_now();
            self.reap();
            tries += 1;
        }
        let Some(addr) = self.free_tx.pop() else {
            st.tx_errors += 1;
            return;
        };
        // SAFETY: `addr` is the start of a free TX frame (2 KiB, inside the UMEM) and
        // `data.len() <= FRAME` (checked above).
        unsafe {
            std::ptr::copy_nonoverlapping(
                data.as_ptr(),
                self.umem.base.add(addr as usize),
                data.len(),
            );
        }
        let d = libc::xdp_desc {
            addr,
            len: data.len() as u32,
            options: 0,
        };
        // SAFETY: TX slots are `xdp_desc`s inside the mapping; the ring has RING slots and at
        // most RING TX frames exist, so this slot is not in the kernel's hands.
        unsafe {
            self.tx
                .slot(self.tx.head)
                .cast::<libc::xdp_desc>()
                .write_unaligned(d)
        };
        self.tx.head = self.tx.head.wrapping_add(1);
        self.pending += 1;
        st.tx += 1;
        if self.pending >= batch {
            self.flush();
        }
    }
}

/// AF_XDP port set (see the module documentation).
pub struct XdpPorts {
    specs: Vec<PortSpec>,
    xsks: Vec<Xsk>,
    stop: Arc<AtomicBool>,
    next: usize,
    stats: LiveStats,
    poll_ms: i32,
    tx_batch: u32,
}

impl std::fmt::Debug for XdpPorts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdpPorts")
            .field("specs", &self.specs)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl XdpPorts {
    /// Open every interface (all must exist; needs root or CAP_NET_ADMIN + CAP_BPF +
    /// CAP_NET_RAW). Errors say which interface and which step failed, so a caller can fall
    /// back to AF_PACKET with that reason.
    pub fn open(specs: &[PortSpec], stop: Arc<AtomicBool>) -> Result<XdpPorts, PortError> {
        let mut specs = specs.to_vec();
        specs.sort_by_key(|s| s.port);
        for w in specs.windows(2) {
            if w[0].port == w[1].port {
                return Err(PortError::DuplicatePort(w[0].port));
            }
        }
        for s in &specs {
            ifindex(s)?;
        }
        let xsks = specs.iter().map(Xsk::open).collect::<Result<Vec<_>, _>>()?;
        Ok(XdpPorts {
            specs,
            xsks,
            stop,
            next: 0,
            stats: LiveStats::default(),
            poll_ms: 100,
            tx_batch: 64,
        })
    }

    /// Counters so far.
    pub fn stats(&self) -> LiveStats {
        self.stats
    }

    /// `(interface, "native" | "generic")`: how each program is attached.
    pub fn modes(&self) -> Vec<(String, &'static str)> {
        self.xsks.iter().map(|x| (x.name.clone(), x.mode)).collect()
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || stop_requested()
    }

    fn flush_all(&mut self) {
        for x in &mut self.xsks {
            x.flush();
            x.reap();
        }
    }

    fn ready(&mut self, buf: &mut Vec<u8>) -> Option<RxMeta> {
        let n = self.xsks.len();
        for k in 0..n {
            let i = (self.next + k) % n;
            if let Some(m) = self.xsks[i].next_frame(buf, &mut self.stats) {
                self.next = (i + 1) % n;
                return Some(m);
            }
        }
        None
    }
}

impl PortIo for XdpPorts {
    fn ports(&self) -> &[PortSpec] {
        &self.specs
    }

    fn recv(&mut self, buf: &mut Vec<u8>) -> Result<Option<RxMeta>, PortError> {
        loop {
            if self.stopping() {
                self.flush_all();
                return Ok(None);
            }
            if let Some(m) = self.ready(buf) {
                return Ok(Some(m));
            }
            self.flush_all();
            let mut fds: Vec<libc::pollfd> = self
                .xsks
                .iter()
                .map(|x| libc::pollfd {
                    fd: x.fd.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                })
                .collect();
            // SAFETY: `fds` is a valid array of `fds.len()` pollfds for the call's duration.
            let rc =
                unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, self.poll_ms) };
            if rc < 0 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EINTR) {
                    return Err(os_err(&self.specs[0].name, "waiting for packets (poll)"));
                }
            }
        }
    }

    fn try_recv(&mut self, buf: &mut Vec<u8>) -> Result<Option<RxMeta>, PortError> {
        if self.stopping() {
            return Ok(None);
        }
        Ok(self.ready(buf))
    }

    fn send(&mut self, port: Port, _ts_ns: u64, data: &[u8]) -> Result<bool, PortError> {
        let Ok(i) = self.specs.binary_search_by_key(&port, |s| s.port) else {
            return Ok(false);
        };
        self.xsks[i].send(data, self.tx_batch, &mut self.stats);
        Ok(true)
    }

    fn flush(&mut self) -> Result<(), PortError> {
        self.flush_all();
        Ok(())
    }
}

/// Live ports through AF_PACKET or AF_XDP, as `tern run --io` chose.
#[derive(Debug)]
pub enum AnyLive {
    /// AF_PACKET rings ([`LivePorts`]).
    Packet(LivePorts),
    /// AF_XDP sockets ([`XdpPorts`]).
    Xdp(XdpPorts),
}

impl AnyLive {
    /// Counters so far.
    pub fn stats(&self) -> LiveStats {
        match self {
            AnyLive::Packet(p) => p.stats(),
            AnyLive::Xdp(p) => p.stats(),
        }
    }

    /// Interfaces that are administratively down (they receive nothing), for a warning.
    pub fn down_interfaces(&self) -> Vec<String> {
        let specs = match self {
            AnyLive::Packet(p) => p.ports(),
            AnyLive::Xdp(p) => p.ports(),
        };
        crate::afpacket::down(specs)
    }

    fn io(&mut self) -> &mut dyn PortIo {
        match self {
            AnyLive::Packet(p) => p,
            AnyLive::Xdp(p) => p,
        }
    }
}

impl PortIo for AnyLive {
    fn ports(&self) -> &[PortSpec] {
        match self {
            AnyLive::Packet(p) => p.ports(),
            AnyLive::Xdp(p) => p.ports(),
        }
    }
    fn recv(&mut self, buf: &mut Vec<u8>) -> Result<Option<RxMeta>, PortError> {
        self.io().recv(buf)
    }
    fn try_recv(&mut self, buf: &mut Vec<u8>) -> Result<Option<RxMeta>, PortError> {
        self.io().try_recv(buf)
    }
    fn send(&mut self, port: Port, ts_ns: u64, data: &[u8]) -> Result<bool, PortError> {
        self.io().send(port, ts_ns, data)
    }
    fn flush(&mut self) -> Result<(), PortError> {
        self.io().flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::afpacket::LiveConfig;

    fn ip(args: &[&str]) -> bool {
        std::process::Command::new("ip")
            .args(args)
            .output()
            .is_ok_and(|o| o.status.success())
    }

    /// Deletes a veth pair on drop (even on panic).
    struct Del(String);
    impl Drop for Del {
        fn drop(&mut self) {
            let _ = ip(&["link", "del", &self.0]);
        }
    }

    fn is_root() -> bool {
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("Uid:"))
                    .map(|l| l.split_whitespace().nth(1) == Some("0"))
            })
            .unwrap_or(false)
    }

    /// Whether this kernel has AF_XDP sockets at all.
    fn kernel_has_af_xdp() -> bool {
        // SAFETY: plain socket(2); a descriptor returned is closed at once.
        let fd = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if fd >= 0 {
            // SAFETY: `fd` is ours.
            unsafe { libc::close(fd) };
        }
        fd >= 0
    }

    fn frame(k: u32) -> Vec<u8> {
        let mut f = vec![0x02, 0, 0, 0, 0, 0xbb, 0x02, 0, 0, 0, 0, 0xaa, 0x88, 0xb5];
        f.extend_from_slice(&k.to_be_bytes());
        f.resize(60 + (k as usize * 13) % 1400, k as u8);
        f
    }

    /// Collect `n` test frames (ethertype 0x88b5) from `p`, waiting at most 5 s.
    fn collect(p: &mut dyn PortIo, n: usize) -> Vec<(Port, Vec<u8>)> {
        let mut got = Vec::new();
        let mut buf = Vec::new();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while got.len() < n && std::time::Instant::now() < deadline {
            match p.try_recv(&mut buf).unwrap() {
                Some(m) if buf.get(12..14) == Some(&[0x88, 0xb5][..]) => {
                    got.push((m.port, buf.clone()))
                }
                Some(_) => {}
                None => std::thread::sleep(std::time::Duration::from_micros(200)),
            }
        }
        got
    }

    /// Frames cross a veth pair in both directions between an AF_PACKET end and an AF_XDP
    /// end, every one checked, in bursts larger than the TX batch; the program and sockets
    /// go when the port set is dropped (root; skipped without root or AF_XDP).
    #[test]
    fn xdp_end_of_a_veth_pair_receives_and_sends_every_frame() {
        if !is_root() || !kernel_has_af_xdp() {
            eprintln!("skipping: needs root and a kernel with AF_XDP sockets");
            return;
        }
        let id = std::process::id() % 100_000;
        let (a, b) = (format!("txa{id}"), format!("txb{id}"));
        assert!(ip(&["link", "add", &a, "type", "veth", "peer", "name", &b]));
        let _del = Del(a.clone());
        for n in [&a, &b] {
            let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{n}/disable_ipv6"), "1");
            assert!(ip(&["link", "set", n, "up"]));
        }
        let stop = Arc::new(AtomicBool::new(false));
        let mut pa = LivePorts::open(
            &[PortSpec {
                port: 1,
                name: a.clone(),
            }],
            LiveConfig::default(),
            stop.clone(),
        )
        .unwrap();
        let mut pb = XdpPorts::open(
            &[PortSpec {
                port: 2,
                name: b.clone(),
            }],
            stop,
        )
        .unwrap_or_else(|e| panic!("AF_XDP on veth: {e}"));
        assert_eq!(pb.modes().len(), 1);
        for burst in 0..5u32 {
            // AF_PACKET -> veth -> XDP program -> AF_XDP socket.
            let sent: Vec<Vec<u8>> = (0..500).map(|k| frame(burst * 1000 + k)).collect();
            for f in &sent {
                assert!(pa.send(1, 0, f).unwrap());
            }
            pa.flush().unwrap();
            let got = collect(&mut pb, sent.len());
            assert_eq!(got.len(), sent.len(), "burst {burst}: AF_XDP received");
            for ((port, g), s) in got.iter().zip(&sent) {
                assert_eq!(*port, 2);
                assert!(g == s, "burst {burst}: a frame differs");
            }
            // AF_XDP socket -> veth -> AF_PACKET ring.
            let back: Vec<Vec<u8>> = (0..500).map(|k| frame(burst * 1000 + 500 + k)).collect();
            for f in &back {
                assert!(pb.send(2, 0, f).unwrap());
            }
            pb.flush().unwrap();
            let got = collect(&mut pa, back.len());
            assert_eq!(got.len(), back.len(), "burst {burst}: AF_XDP sent");
            for ((port, g), s) in got.iter().zip(&back) {
                assert_eq!(*port, 1);
                assert!(g == s, "burst {burst}: a frame differs");
            }
        }
        assert_eq!(pb.stats().rx, 2500);
        assert_eq!(pb.stats().tx, 2500);
        assert_eq!(pb.stats().tx_errors, 0);
        assert!(!pb.send(9, 0, &frame(0)).unwrap());
        drop(pb);
        // The program went with the link: the interface has no XDP program left.
        let out = std::process::Command::new("ip")
            .args(["link", "show", &b])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(!text.contains("xdp"), "{text}");
    }
}
