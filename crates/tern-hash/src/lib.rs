//! Hash algorithms and checksums as simple_switch registers them.
