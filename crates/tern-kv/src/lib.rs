//! In-network key-value caching suite: wire protocol, storage servers, clients, workloads.
//!
//! * [`protocol`]: FarReach's UDP message layout and op codes (encode/decode).
//! * [`rng`]: the deterministic PRNG used by workloads and tests.

pub mod protocol;
pub mod rng;
