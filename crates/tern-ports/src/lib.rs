//! Packet I/O: pcap files (simple_switch --use-files compatible) and in-memory ports.
