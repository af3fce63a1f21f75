//! Generated P4Runtime protobuf types and the gRPC service (from `proto/`, built by `build.rs`).
#![allow(clippy::all, missing_docs)]

/// `google.rpc` (Status, Code).
pub mod google {
    pub mod rpc {
        tonic::include_proto!("google.rpc");
    }
}

/// `p4.v1` and `p4.config.v1`.
pub mod p4 {
    pub mod v1 {
        tonic::include_proto!("p4.v1");
    }
    pub mod config {
        pub mod v1 {
            tonic::include_proto!("p4.config.v1");
        }
    }
}

/// The encoded `FileDescriptorSet` of every proto file (used to check the wire format).
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/p4rt_descriptor.bin"));
