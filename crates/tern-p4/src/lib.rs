//! A P4-16 compiler for v1model: source to BMv2 JSON and P4Info.
