//! Packet I/O: pcap files (simple_switch `--use-files` compatible) and in-memory ports.
//!
//! [`pcap`] reads classic pcap (both byte orders, µs and ns) and pcapng, and writes classic
//! pcap; [`pcap_map`] reads classic pcap files in place from a mapping; [`ports`] defines the [`PortIo`] port-set abstraction with [`FilePorts`],
//! [`MemPorts`] and the `--pcap` [`Capture`] wrapper; [`afpacket`] attaches live interfaces
//! (AF_PACKET, per-frame TPACKET_V2 or block TPACKET_V3 RX ring) as [`afpacket::LivePorts`];
//! [`afxdp`] attaches them through AF_XDP sockets ([`afxdp::XdpPorts`]).

pub mod afpacket;
pub mod afxdp;
pub mod pcap;
pub mod pcap_map;
pub mod ports;

pub use afpacket::{LiveConfig, LivePorts, LiveStats, RxRing};
pub use afxdp::{AnyLive, XdpPorts};
pub use pcap::{PcapError, PcapFileWriter, PcapReader, PcapWriter, WriterConfig};
pub use pcap_map::{MappedBytes, MappedPcap};
pub use ports::{
    any_fifo_input, Capture, FileOutputs, FilePorts, Frames, Held, HeldReader, MemPorts, PortError,
    PortIndex, PortIo, PortSpec, PortWriter, RxMeta,
};
