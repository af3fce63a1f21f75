//! Port sets: the [`PortIo`] trait a switch loop drives (also implemented by the live
//! [`crate::afpacket::LivePorts`]), with [`FilePorts`] (pcap files exactly
//! as simple_switch `--use-files`), [`MemPorts`] (in memory, for tests) and [`Capture`]
//! (`--pcap DIR`: a copy of every port's traffic in `DIR/NAME_in.pcap` / `DIR/NAME_out.pcap`).

use crate::pcap::{PcapError, PcapFileWriter, PcapReader, PcapWriter, WriterConfig};
use crate::pcap_map::MappedPcap;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::{Path, PathBuf};
use tern_runtime::Port;

/// Why a port set cannot be opened or used.
#[derive(Debug, thiserror::Error)]
pub enum PortError {
    /// A `-i` argument is not `P@NAME`.
    #[error("bad interface '{arg}': {why}")]
    BadSpec {
        /// The argument as given.
        arg: String,
        /// What is wrong.
        why: String,
    },
    /// Two interfaces use the same port number.
    #[error("port {0} is attached twice")]
    DuplicatePort(Port),
    /// An input file does not exist.
    #[error("input file {} for port {port} does not exist", path.display())]
    MissingInput {
        /// The port.
        port: Port,
        /// The missing file.
        path: PathBuf,
    },
    /// A file cannot be opened, created or written.
    #[error("{}: {error}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        error: std::io::Error,
    },
    /// An input file is not a valid pcap / pcapng file.
    #[error("{}: {error}", path.display())]
    Pcap {
        /// The file.
        path: PathBuf,
        /// The error (with its byte offset).
        error: PcapError,
    },
    /// A live interface does not exist.
    #[error(
        "interface '{name}' (port {port}) does not exist: check `ip link`, or add --use-files \
         to use {name}_in.pcap / {name}_out.pcap"
    )]
    NoInterface {
        /// The port.
        port: Port,
        /// The interface name as given.
        name: String,
    },
    /// Opening a live interface needs privileges.
    #[error(
        "opening interface '{name}' needs root or CAP_NET_RAW: run as root, or grant the \
         binary `setcap cap_net_raw,cap_net_admin+ep <path to tern>`"
    )]
    NotPermitted {
        /// The interface.
        name: String,
    },
    /// A system call on a live interface failed.
    #[error("interface '{name}': {what}: {error}")]
    Os {
        /// The interface(s).
        name: String,
        /// What was being done.
        what: &'static str,
        /// The error.
        error: std::io::Error,
    },
    /// A capture file would overwrite one of the port files.
    #[error("--pcap would overwrite {}: choose another capture directory", path.display())]
    CaptureClobbers {
        /// The file that would be overwritten.
        path: PathBuf,
    },
}

/// One attached port: number and name (`-i P@NAME`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortSpec {
    /// Port number.
    pub port: Port,
    /// Interface or file-name stem.
    pub name: String,
}

impl PortSpec {
    /// Parse simple_switch's `-i P@NAME`: `@` is required, `P` must be an integer port number
    /// and `NAME` must not be empty.
    pub fn parse(arg: &str) -> Result<PortSpec, PortError> {
        let bad = |why: &str| PortError::BadSpec {
            arg: arg.to_string(),
            why: why.to_string(),
        };
        let (p, name) = arg
            .split_once('@')
            .ok_or_else(|| bad("expected PORT@NAME ('@' is missing)"))?;
        let port: Port = p
            .trim()
            .parse()
            .map_err(|_| bad(&format!("port number '{p}' is not a non-negative integer")))?;
        if name.is_empty() {
            return Err(bad("the name after '@' is empty"));
        }
        Ok(PortSpec {
            port,
            name: name.to_string(),
        })
    }
}

/// Sort specs by port number and reject duplicates.
fn sorted_specs(specs: &[PortSpec]) -> Result<Vec<PortSpec>, PortError> {
    let mut v = specs.to_vec();
    v.sort_by_key(|s| s.port);
    for w in v.windows(2) {
        if w[0].port == w[1].port {
            return Err(PortError::DuplicatePort(w[0].port));
        }
    }
    Ok(v)
}

/// Metadata of a received packet (the bytes go to the caller's buffer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxMeta {
    /// Port the packet arrived on.
    pub port: Port,
    /// Its timestamp (nanoseconds since the epoch).
    pub ts_ns: u64,
}

/// A received packet whose bytes the port set still holds (a mapped input file): its metadata
/// and where its bytes are; [`PortIo::held`] gives them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Held {
    /// Port and timestamp.
    pub meta: RxMeta,
    input: u32,
    len: u32,
    start: usize,
}

/// A set of ports a switch loop reads from and writes to.
pub trait PortIo {
    /// The attached ports, ascending by number.
    fn ports(&self) -> &[PortSpec];

    /// The next input packet of all ports merged in timestamp order (ties: lower port first),
    /// copied into `buf` (cleared first); `None` when every input is exhausted. Live ports
    /// ([`crate::afpacket::LivePorts`]) block until a frame arrives and return frames in
    /// arrival order (round robin across interfaces); for them `None` means "stopped".
    fn recv(&mut self, buf: &mut Vec<u8>) -> Result<Option<RxMeta>, PortError>;

    /// The next input packet as [`PortIo::recv`] gives it, but only if it is ready now:
    /// `None` when getting it would wait (an idle interface, a FIFO's feeder) or when the
    /// inputs are exhausted. A run loop calls it after a blocking `recv` to fill a batch of
    /// packets without ever waiting with packets in hand. The default never has one ready.
    fn try_recv(&mut self, _buf: &mut Vec<u8>) -> Result<Option<RxMeta>, PortError> {
        Ok(None)
    }

    /// Zero-copy receive: up to `max` next input packets, in [`PortIo::recv`]'s order, left
    /// where the port set holds them (replacing `out`'s contents; empty when every input is
    /// exhausted). Their bytes are [`PortIo::held`], valid until the next receive. `Ok(false)`
    /// (the default): this port set does not hold its inputs in memory; use `recv`. An input
    /// error met after some packets were gathered is returned by the next call, so the
    /// packets before it are still processed.
    fn recv_held(&mut self, _max: usize, _out: &mut Vec<Held>) -> Result<bool, PortError> {
        Ok(false)
    }

    /// The bytes of a packet [`PortIo::recv_held`] gave.
    fn held(&self, _h: &Held) -> &[u8] {
        &[]
    }

    /// Send frames out of their ports with record timestamp `ts_ns`: (sent, discarded
    /// because no such port is attached). The default calls [`PortIo::send`] per frame.
    fn send_all(
        &mut self,
        ts_ns: u64,
        frames: &[tern_runtime::OutputPacket],
    ) -> Result<(u64, u64), PortError> {
        let (mut sent, mut discarded) = (0, 0);
        for o in frames {
            if self.send(o.port, ts_ns, &o.data)? {
                sent += 1;
            } else {
                discarded += 1;
            }
        }
        Ok((sent, discarded))
    }

    /// Send a frame out of `port` with record timestamp `ts_ns`. Returns `false` (frame
    /// discarded, as simple_switch does) when no such port is attached.
    fn send(&mut self, port: Port, ts_ns: u64, data: &[u8]) -> Result<bool, PortError>;

    /// Flush every output.
    fn flush(&mut self) -> Result<(), PortError> {
        Ok(())
    }

    /// This port set as plain [`FilePorts`] (not wrapped), for loops that read and write
    /// files without going through the trait; `None` (the default) for anything else.
    fn as_files(&mut self) -> Option<&mut FilePorts> {
        None
    }
}

/// Where an input's packets come from.
enum Source {
    /// A regular classic pcap file, mapped: records are read in place.
    Map(MappedPcap),
    /// Anything else (FIFO, pcapng): the streaming reader, one copy per record.
    Stream(PcapReader<BufReader<File>>),
}

struct FileInput {
    port: Port,
    path: PathBuf,
    src: Source,
    /// Buffered next packet: its timestamp; its bytes are `head_at` (start, length) of the
    /// mapping, or `head_buf` for a stream.
    head: Option<u64>,
    head_at: (usize, usize),
    head_buf: Vec<u8>,
    done: bool,
}

impl FileInput {
    #[inline]
    fn load_head(&mut self) -> Result<(), PortError> {
        if self.head.is_some() || self.done {
            return Ok(());
        }
        let res = match &mut self.src {
            Source::Map(m) => m.next_record().map(|r| {
                r.map(|(ts, start, len)| {
                    self.head_at = (start, len);
                    ts
                })
            }),
            Source::Stream(r) => r.next_packet_buffered(&mut self.head_buf),
        };
        match res {
            Ok(Some(ts_ns)) => self.head = Some(ts_ns),
            Ok(None) => self.done = true,
            Err(error) => {
                return Err(PortError::Pcap {
                    path: self.path.clone(),
                    error,
                })
            }
        }
        Ok(())
    }
}

/// simple_switch `--use-files`: port P named NAME reads `NAME_in.pcap` and writes
/// `NAME_out.pcap` (paths relative to the base directory, normally the working directory).
pub struct FilePorts {
    specs: Vec<PortSpec>,
    inputs: Vec<FileInput>,
    /// Indices of the inputs not yet exhausted, ascending (so ties go to the lower port).
    active: Vec<usize>,
    /// One output per spec, in the specs' (ascending port) order: found by binary search.
    outputs: Vec<(PathBuf, PcapFileWriter<File>)>,
    /// Output index by port number, for ports below [`PORT_TABLE`] (`u32::MAX`: none).
    out_index: Vec<u32>,
    /// Some input is a FIFO: its next packet may have to wait for a feeder, so
    /// [`PortIo::try_recv`] never reads ahead.
    fifo: bool,
    /// Every input is mapped: [`PortIo::recv_held`] works.
    all_mapped: bool,
    /// An input error met while gathering packets for `recv_held`, returned by its next call.
    pending_err: Option<PortError>,
}

/// Ports below this number find their output by a table lookup (above: binary search).
const PORT_TABLE: usize = 1024;

impl std::fmt::Debug for FilePorts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FilePorts")
            .field("specs", &self.specs)
            .finish_non_exhaustive()
    }
}

/// `NAME_in.pcap` / `NAME_out.pcap` of a port, relative to `base`.
pub fn port_file(base: &Path, name: &str, dir: &str) -> PathBuf {
    base.join(format!("{name}_{dir}.pcap"))
}

/// Whether any port's input file is a FIFO: someone is feeding packets while reading the
/// outputs (as p4c's STF runner does), so outputs should reach the files packet by packet.
/// With regular input files nobody waits on a partial output and per-batch writes suffice.
pub fn any_fifo_input(base: &Path, specs: &[PortSpec]) -> bool {
    use std::os::unix::fs::FileTypeExt;
    specs.iter().any(|s| {
        std::fs::metadata(port_file(base, &s.name, "in")).is_ok_and(|m| m.file_type().is_fifo())
    })
}

impl FilePorts {
    /// Open the ports: every input must exist (checked before anything is created); each
    /// output is created (header only, simple_switch's format: [`WriterConfig::bmv2`]); then
    /// the inputs are opened in ascending port order (they may be FIFOs).
    pub fn open(base: &Path, specs: &[PortSpec]) -> Result<FilePorts, PortError> {
        Self::open_with(base, specs, WriterConfig::bmv2())
    }

    /// [`FilePorts::open`] with another output format.
    pub fn open_with(
        base: &Path,
        specs: &[PortSpec],
        out_cfg: WriterConfig,
    ) -> Result<FilePorts, PortError> {
        let specs = sorted_specs(specs)?;
        for s in &specs {
            let path = port_file(base, &s.name, "in");
            if !path.exists() {
                return Err(PortError::MissingInput { port: s.port, path });
            }
        }
        let mut outputs = Vec::with_capacity(specs.len());
        for s in &specs {
            let path = port_file(base, &s.name, "out");
            let w = create_file_writer(&path, out_cfg)?;
            outputs.push((path, w));
        }
        let table = specs
            .last()
            .map_or(0, |s| (s.port as usize + 1).min(PORT_TABLE));
        let mut out_index = vec![u32::MAX; table];
        for (i, s) in specs.iter().enumerate() {
            if (s.port as usize) < table {
                out_index[s.port as usize] = i as u32;
            }
        }
        // Open every input before reading any header: with FIFOs the writer may open them all
        // (in ascending port order) before it writes anything.
        let mut opened = Vec::new();
        for s in &specs {
            let path = port_file(base, &s.name, "in");
            let f = File::open(&path).map_err(|error| PortError::Io {
                path: path.clone(),
                error,
            })?;
            opened.push((s.port, path, f));
        }
        let mut inputs = Vec::new();
        for (port, path, f) in opened {
            let pcap_err = |error| PortError::Pcap {
                path: path.clone(),
                error,
            };
            let src = match MappedPcap::open(&f).map_err(pcap_err)? {
                Some(m) => Source::Map(m),
                None => Source::Stream(
                    PcapReader::new(BufReader::with_capacity(1 << 16, f)).map_err(pcap_err)?,
                ),
            };
            inputs.push(FileInput {
                port,
                path,
                src,
                head: None,
                head_at: (0, 0),
                head_buf: Vec::new(),
                done: false,
            });
        }
        Ok(FilePorts {
            fifo: any_fifo_input(base, &specs),
            all_mapped: inputs.iter().all(|i| matches!(i.src, Source::Map(_))),
            specs,
            active: (0..inputs.len()).collect(),
            inputs,
            outputs,
            out_index,
            pending_err: None,
        })
    }

    /// Whether every input is read in place from a mapping (regular classic pcap files).
    pub fn mapped(&self) -> bool {
        self.all_mapped
    }

    /// The input side on its own: [`PortIo::recv_held`] while the outputs are used elsewhere
    /// (e.g. by other threads, through [`FileOutputs`]).
    pub fn split_reader(&mut self) -> (HeldReader<'_>, FileOutputs<'_>) {
        (
            HeldReader {
                inputs: &mut self.inputs,
                active: &mut self.active,
                pending_err: &mut self.pending_err,
                all_mapped: self.all_mapped,
            },
            FileOutputs {
                index: PortIndex {
                    specs: &self.specs,
                    out_index: &self.out_index,
                },
                outputs: &mut self.outputs,
            },
        )
    }

    /// The bytes of the mapped inputs, as a handle of their own (it keeps the mappings alive):
    /// [`Frames::held`] gives what [`PortIo::held`] gives, from any thread, while this port
    /// set goes on reading.
    pub fn frames(&self) -> Frames {
        Frames {
            maps: self
                .inputs
                .iter()
                .map(|i| match &i.src {
                    Source::Map(m) => Some(m.handle()),
                    Source::Stream(_) => None,
                })
                .collect(),
        }
    }

    #[inline]
    fn reader(&mut self) -> HeldReader<'_> {
        HeldReader {
            inputs: &mut self.inputs,
            active: &mut self.active,
            pending_err: &mut self.pending_err,
            all_mapped: self.all_mapped,
        }
    }

    /// The output of `port`, if attached.
    #[inline]
    fn output(&mut self, port: Port) -> Option<&mut (PathBuf, PcapFileWriter<File>)> {
        let i = match self.out_index.get(port as usize) {
            Some(&i) if i != u32::MAX => i as usize,
            Some(_) => return None,
            None => self.specs.binary_search_by_key(&port, |s| s.port).ok()?,
        };
        Some(&mut self.outputs[i])
    }

    /// Every file this port set reads or writes.
    pub fn files(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = self.inputs.iter().map(|i| i.path.clone()).collect();
        v.extend(self.outputs.iter().map(|(p, _)| p.clone()));
        v
    }
}

/// The reading side of a [`FilePorts`] ([`FilePorts::split_reader`]).
pub struct HeldReader<'a> {
    inputs: &'a mut Vec<FileInput>,
    active: &'a mut Vec<usize>,
    pending_err: &'a mut Option<PortError>,
    all_mapped: bool,
}

impl HeldReader<'_> {
    /// [`PortIo::recv_held`]: up to `max` next packets in merge order, left in the mappings.
    pub fn recv_held(&mut self, max: usize, out: &mut Vec<Held>) -> Result<bool, PortError> {
        if !self.all_mapped {
            return Ok(false);
        }
        out.clear();
        if let Some(e) = self.pending_err.take() {
            return Err(e);
        }
        self.held_one_input(max, out);
        while out.len() < max {
            let (ts_ns, i) = match self.next_input() {
                Ok(Some(x)) => x,
                Ok(None) => break,
                Err(e) if out.is_empty() => return Err(e),
                Err(e) => {
                    *self.pending_err = Some(e);
                    break;
                }
            };
            let inp = &self.inputs[i];
            let (start, len) = inp.head_at;
            out.push(Held {
                meta: RxMeta {
                    port: inp.port,
                    ts_ns,
                },
                input: i as u32,
                // Records are at most `MAX_RECORD` (64 MiB) long.
                len: len as u32,
                start,
            });
        }
        Ok(true)
    }

    /// The next packet in merge order: (timestamp, input index), its head taken; `None` when
    /// every input is exhausted.
    #[inline]
    fn next_input(&mut self) -> Result<Option<(u64, usize)>, PortError> {
        let mut best: Option<(u64, usize)> = None;
        let mut k = 0;
        while k < self.active.len() {
            let i = self.active[k];
            let inp = &mut self.inputs[i];
            inp.load_head()?;
            match inp.head {
                Some(ts) => {
                    // Inputs are in ascending port order, so `<` keeps the lower port on ties.
                    if best.is_none_or(|(b, _)| ts < b) {
                        best = Some((ts, i));
                    }
                    k += 1;
                }
                // Exhausted: never looked at again.
                None => {
                    self.active.remove(k);
                }
            }
        }
        if let Some((_, i)) = best {
            self.inputs[i].head = None;
        }
        Ok(best)
    }

    /// [`PortIo::recv_held`]'s fast path while one input is left (no merge by timestamp):
    /// its well-formed records are gathered in a tight loop. Stops, leaving the rest to the
    /// merging loop, at anything else (several inputs, the end of the input, a record that
    /// is an error).
    #[inline]
    fn held_one_input(&mut self, max: usize, out: &mut Vec<Held>) {
        let [i] = self.active[..] else {
            return;
        };
        let inp = &mut self.inputs[i];
        if inp.done {
            return;
        }
        let Source::Map(m) = &mut inp.src else {
            return;
        };
        let port = inp.port;
        let held = |ts_ns: u64, start: usize, len: usize| Held {
            meta: RxMeta { port, ts_ns },
            input: i as u32,
            // Records are at most `MAX_RECORD` (64 MiB) long.
            len: len as u32,
            start,
        };
        if let Some(ts) = inp.head.take() {
            out.push(held(ts, inp.head_at.0, inp.head_at.1));
        }
        while out.len() < max {
            match m.next_ok() {
                Some((ts, start, len)) => out.push(held(ts, start, len)),
                None => break,
            }
        }
    }
}

/// The bytes of a [`FilePorts`]' mapped inputs ([`FilePorts::frames`]).
pub struct Frames {
    maps: Vec<Option<crate::pcap_map::MappedBytes>>,
}

impl Frames {
    /// The bytes of a packet [`PortIo::recv_held`] gave (empty for a streamed input).
    #[inline]
    pub fn held(&self, h: &Held) -> &[u8] {
        match &self.maps[h.input as usize] {
            Some(m) => &m.bytes()[h.start..h.start + h.len as usize],
            None => &[],
        }
    }
}

/// The outputs of a [`FilePorts`] ([`FilePorts::split_reader`]).
pub struct FileOutputs<'a> {
    index: PortIndex<'a>,
    outputs: &'a mut [(PathBuf, PcapFileWriter<File>)],
}

impl<'a> FileOutputs<'a> {
    /// The port-to-output map and one writer per output (in the map's index order), to be
    /// used from different threads.
    pub fn into_parts(self) -> (PortIndex<'a>, Vec<PortWriter<'a>>) {
        let ws = self
            .outputs
            .iter_mut()
            .map(|(path, w)| PortWriter { path, w })
            .collect();
        (self.index, ws)
    }
}

/// Which output (index into [`FileOutputs::into_parts`]' writers) a port number writes to.
#[derive(Clone, Copy)]
pub struct PortIndex<'a> {
    specs: &'a [PortSpec],
    out_index: &'a [u32],
}

impl PortIndex<'_> {
    /// The output of `port`; `None`: no file is attached to it.
    #[inline]
    pub fn get(&self, port: Port) -> Option<usize> {
        match self.out_index.get(port as usize) {
            Some(&i) if i != u32::MAX => Some(i as usize),
            Some(_) => None,
            None => self.specs.binary_search_by_key(&port, |s| s.port).ok(),
        }
    }

    /// The number of outputs.
    pub fn len(&self) -> usize {
        self.specs.len()
    }

    /// Each output's port and index (as [`PortIndex::get`] gives it), in port order.
    pub fn ports(&self) -> impl Iterator<Item = (Port, usize)> + '_ {
        self.specs.iter().enumerate().map(|(i, s)| (s.port, i))
    }

    /// No outputs at all.
    pub fn is_empty(&self) -> bool {
        self.specs.is_empty()
    }
}

/// One output file of a [`FileOutputs`], on its own.
pub struct PortWriter<'a> {
    path: &'a Path,
    w: &'a mut PcapFileWriter<File>,
}

impl PortWriter<'_> {
    /// The configuration records are written with ([`WriterConfig::encode_record`]).
    pub fn config(&self) -> WriterConfig {
        self.w.config()
    }

    /// Append one record for `data` at `ts_ns` ([`PcapFileWriter::write_packet`]): for a
    /// loop writing a batch's outputs without going through [`PortIo`].
    #[inline]
    pub fn write_packet(&mut self, ts_ns: u64, data: &[u8]) -> Result<(), PortError> {
        self.w
            .write_packet(ts_ns, data)
            .map_err(|error| PortError::Io {
                path: self.path.to_path_buf(),
                error,
            })
    }

    /// [`PcapFileWriter::room_in_place`]: where the next record's bytes go, with room for `n`
    /// records of at most `max` bytes.
    #[inline]
    pub fn room_in_place(&mut self, n: usize, max: usize) -> *mut u8 {
        self.w.room_in_place(n, max)
    }

    /// [`PcapFileWriter::commit_in_place`].
    ///
    /// # Safety
    /// As [`PcapFileWriter::commit_in_place`]'s.
    #[inline]
    pub unsafe fn commit_in_place(&mut self, ts_ns: u64, len: usize) -> Result<*mut u8, PortError> {
        // SAFETY: the caller's contract is the callee's.
        unsafe { self.w.commit_in_place(ts_ns, len) }.map_err(|error| PortError::Io {
            path: self.path.to_path_buf(),
            error,
        })
    }

    /// [`PcapFileWriter::flush_if_full`].
    pub fn flush_if_full(&mut self) -> Result<(), PortError> {
        self.w.flush_if_full().map_err(|error| PortError::Io {
            path: self.path.to_path_buf(),
            error,
        })
    }

    /// Write `packets` records encoded with [`PortWriter::config`], lying in `runs` in file
    /// order, without copying them ([`PcapFileWriter::write_records_vectored`]).
    pub fn write_records_vectored(
        &mut self,
        runs: &mut [std::io::IoSlice<'_>],
        packets: u64,
    ) -> Result<(), PortError> {
        self.w
            .write_records_vectored(runs, packets)
            .map_err(|error| PortError::Io {
                path: self.path.to_path_buf(),
                error,
            })
    }

    /// Append `packets` records encoded with [`PortWriter::config`], as one run.
    pub fn append_records(&mut self, records: &[u8], packets: u64) -> Result<(), PortError> {
        self.w
            .append_records(records, packets)
            .map_err(|error| PortError::Io {
                path: self.path.to_path_buf(),
                error,
            })
    }
}

fn create_file_writer(path: &Path, cfg: WriterConfig) -> Result<PcapFileWriter<File>, PortError> {
    let io = |error| PortError::Io {
        path: path.to_path_buf(),
        error,
    };
    let f = File::create(path).map_err(io)?;
    PcapFileWriter::new(f, cfg).map_err(io)
}

fn create_writer(path: &Path, cfg: WriterConfig) -> Result<PcapWriter<BufWriter<File>>, PortError> {
    let io = |error| PortError::Io {
        path: path.to_path_buf(),
        error,
    };
    let f = File::create(path).map_err(io)?;
    // Large writes: one system call per 256 KiB of records (the default 8 KiB would be one
    // per ~100 small frames). Writers that must show each packet at once flush per packet.
    PcapWriter::new(BufWriter::with_capacity(1 << 18, f), cfg).map_err(io)
}

impl PortIo for FilePorts {
    fn ports(&self) -> &[PortSpec] {
        &self.specs
    }

    fn recv(&mut self, buf: &mut Vec<u8>) -> Result<Option<RxMeta>, PortError> {
        if let Some(e) = self.pending_err.take() {
            return Err(e);
        }
        let Some((ts_ns, i)) = self.reader().next_input()? else {
            return Ok(None);
        };
        let inp = &mut self.inputs[i];
        match &inp.src {
            Source::Map(m) => {
                let (start, len) = inp.head_at;
                buf.clear();
                buf.extend_from_slice(&m.bytes()[start..start + len]);
            }
            // Hand the bytes over by swapping buffers: both are reused, nothing is allocated.
            Source::Stream(_) => std::mem::swap(buf, &mut inp.head_buf),
        }
        Ok(Some(RxMeta {
            port: inp.port,
            ts_ns,
        }))
    }

    fn recv_held(&mut self, max: usize, out: &mut Vec<Held>) -> Result<bool, PortError> {
        self.reader().recv_held(max, out)
    }

    #[inline]
    fn held(&self, h: &Held) -> &[u8] {
        match &self.inputs[h.input as usize].src {
            Source::Map(m) => &m.bytes()[h.start..h.start + h.len as usize],
            Source::Stream(_) => &[],
        }
    }

    /// Regular files never make the reader wait: the next packet, as `recv` gives it.
    fn try_recv(&mut self, buf: &mut Vec<u8>) -> Result<Option<RxMeta>, PortError> {
        if self.fifo {
            return Ok(None);
        }
        self.recv(buf)
    }

    // `send_all` is the trait's loop over this (statically dispatched, inlined).
    #[inline]
    fn send(&mut self, port: Port, ts_ns: u64, data: &[u8]) -> Result<bool, PortError> {
        let Some((path, w)) = self.output(port) else {
            return Ok(false);
        };
        w.write_packet(ts_ns, data).map_err(|error| PortError::Io {
            path: path.clone(),
            error,
        })?;
        Ok(true)
    }

    fn as_files(&mut self) -> Option<&mut FilePorts> {
        Some(self)
    }

    fn flush(&mut self) -> Result<(), PortError> {
        for (path, w) in &mut self.outputs {
            w.flush().map_err(|error| PortError::Io {
                path: path.clone(),
                error,
            })?;
        }
        Ok(())
    }
}

/// A frame in a [`MemPorts`] queue: port, timestamp (ns), bytes.
pub type MemFrame = (Port, u64, Vec<u8>);

/// A queued [`MemPorts`] input: timestamp, port, push order, bytes.
type Queued = (u64, Port, u64, Vec<u8>);

/// In-memory ports for tests: inputs are queued with [`MemPorts::push_input`], outputs are
/// collected in [`MemPorts::sent`].
#[derive(Debug, Default)]
pub struct MemPorts {
    specs: Vec<PortSpec>,
    /// Min-heap on (timestamp, port, push order).
    input: BinaryHeap<Reverse<Queued>>,
    seq: u64,
    sent: Vec<MemFrame>,
}

impl MemPorts {
    /// Ports with these numbers and names.
    pub fn new(specs: &[PortSpec]) -> Result<MemPorts, PortError> {
        Ok(MemPorts {
            specs: sorted_specs(specs)?,
            ..MemPorts::default()
        })
    }

    /// Queue an input frame (delivered in timestamp order, then port order, then push order).
    /// Frames for ports that are not attached are refused (`false`).
    pub fn push_input(&mut self, port: Port, ts_ns: u64, data: &[u8]) -> bool {
        if !self.specs.iter().any(|s| s.port == port) {
            return false;
        }
        self.input
            .push(Reverse((ts_ns, port, self.seq, data.to_vec())));
        self.seq += 1;
        true
    }

    /// Frames sent so far, in order.
    pub fn sent(&self) -> &[MemFrame] {
        &self.sent
    }
}

impl PortIo for MemPorts {
    fn ports(&self) -> &[PortSpec] {
        &self.specs
    }

    fn recv(&mut self, buf: &mut Vec<u8>) -> Result<Option<RxMeta>, PortError> {
        let Some(Reverse((ts_ns, port, _, data))) = self.input.pop() else {
            return Ok(None);
        };
        buf.clear();
        buf.extend_from_slice(&data);
        Ok(Some(RxMeta { port, ts_ns }))
    }

    fn try_recv(&mut self, buf: &mut Vec<u8>) -> Result<Option<RxMeta>, PortError> {
        self.recv(buf)
    }

    fn send(&mut self, port: Port, ts_ns: u64, data: &[u8]) -> Result<bool, PortError> {
        if !self.specs.iter().any(|s| s.port == port) {
            return Ok(false);
        }
        self.sent.push((port, ts_ns, data.to_vec()));
        Ok(true)
    }
}

type CaptureWriter = (PathBuf, PcapWriter<BufWriter<File>>);

/// `--pcap DIR`: wraps a port set and writes a copy of every received frame to
/// `DIR/NAME_in.pcap` and of every sent frame to `DIR/NAME_out.pcap` (Ethernet link type).
pub struct Capture<P> {
    inner: P,
    writers: BTreeMap<Port, (CaptureWriter, CaptureWriter)>,
}

impl<P> std::fmt::Debug for Capture<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capture")
            .field("ports", &self.writers.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// The absolute form of `p` (its directory canonicalized), for clobber checks.
fn resolve(p: &Path) -> PathBuf {
    let parent = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let dir = parent
        .canonicalize()
        .unwrap_or_else(|_| parent.to_path_buf());
    match p.file_name() {
        Some(n) => dir.join(n),
        None => dir,
    }
}

impl<P: PortIo> Capture<P> {
    /// Create the capture files in `dir` for every port of `inner`. `avoid` lists files the
    /// port set itself uses: a capture file that is one of them is refused.
    pub fn new(inner: P, dir: &Path, avoid: &[PathBuf]) -> Result<Capture<P>, PortError> {
        let avoid: Vec<PathBuf> = avoid.iter().map(|p| resolve(p)).collect();
        let mut writers = BTreeMap::new();
        let specs = inner.ports().to_vec();
        for s in &specs {
            let mut pair = Vec::with_capacity(2);
            for d in ["in", "out"] {
                let path = port_file(dir, &s.name, d);
                if avoid.contains(&resolve(&path)) {
                    return Err(PortError::CaptureClobbers { path });
                }
                let w = create_writer(&path, WriterConfig::ethernet())?;
                pair.push((path, w));
            }
            let out = pair.pop().expect("two writers");
            let inp = pair.pop().expect("two writers");
            writers.insert(s.port, (inp, out));
        }
        Ok(Capture { inner, writers })
    }

    /// The wrapped port set.
    pub fn inner(&self) -> &P {
        &self.inner
    }

    /// Copy a received frame to its port's capture file.
    fn captured(&mut self, m: Option<RxMeta>, buf: &[u8]) -> Result<Option<RxMeta>, PortError> {
        if let Some(m) = m {
            if let Some((inp, _)) = self.writers.get_mut(&m.port) {
                cap_write(inp, m.ts_ns, buf)?;
            }
        }
        Ok(m)
    }
}

fn cap_write(w: &mut CaptureWriter, ts_ns: u64, data: &[u8]) -> Result<(), PortError> {
    w.1.write_packet(ts_ns, data)
        .map_err(|error| PortError::Io {
            path: w.0.clone(),
            error,
        })
}

impl<P: PortIo> PortIo for Capture<P> {
    fn ports(&self) -> &[PortSpec] {
        self.inner.ports()
    }

    fn recv(&mut self, buf: &mut Vec<u8>) -> Result<Option<RxMeta>, PortError> {
        let m = self.inner.recv(buf)?;
        self.captured(m, buf)
    }

    fn try_recv(&mut self, buf: &mut Vec<u8>) -> Result<Option<RxMeta>, PortError> {
        let m = self.inner.try_recv(buf)?;
        self.captured(m, buf)
    }

    fn send(&mut self, port: Port, ts_ns: u64, data: &[u8]) -> Result<bool, PortError> {
        let sent = self.inner.send(port, ts_ns, data)?;
        if sent {
            if let Some((_, out)) = self.writers.get_mut(&port) {
                cap_write(out, ts_ns, data)?;
            }
        }
        Ok(sent)
    }

    fn flush(&mut self) -> Result<(), PortError> {
        self.inner.flush()?;
        for (a, b) in self.writers.values_mut() {
            for w in [a, b] {
                w.1.flush().map_err(|error| PortError::Io {
                    path: w.0.clone(),
                    error,
                })?;
            }
        }
        Ok(())
    }
}
