//! tern-p4rt: a P4Runtime v1 gRPC server over the tern data plane.

pub mod p4info;
pub mod proto;
