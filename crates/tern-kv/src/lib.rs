//! In-network key-value caching suite: wire protocol, storage servers, clients, workloads.
//!
//! * [`protocol`]: FarReach's UDP message layout and op codes (encode/decode).
//! * [`storage`]: RocksDB partitions with sequence-checked records.
//! * [`router`]: crc32 partition ranges mapping keys to servers.
//! * [`server`]: the UDP storage server.
//! * [`client`]: get / put / delete with timeout and retry.
//! * [`history`]: the history checker (no stale or foreign value is ever read).
//! * [`ycsb`]: YCSB's generators and core workloads.
//! * [`bench`]: the closed-loop benchmark driver and its report.
//! * [`switchos`]: the caches' control plane (admission, eviction, snapshots) on the runtime
//!   interface.
//! * [`snapfile`]: FarReach's snapshot on disk (atomic, checksummed) for switch recovery.
//! * [`rotation`]: FarReach's server rotation (N emulated servers on two physical ones).
//! * [`madinc`]: MADINC's multitenant cache ops (tenant id + secret tag) on the same wire.
//! * [`madinc_ctl`]: MADINC's control plane (tenants, pages, policies, quotas) on the runtime
//!   interface.
//! * [`madinc_wire`]: MADINC's control messages on UDP, acknowledged, retried, deduplicated,
//!   with loss injection.
//! * [`rng`]: the deterministic PRNG used by workloads and tests.

pub mod bench;
pub mod client;
pub mod history;
pub mod madinc;
pub mod madinc_auth;
pub mod madinc_ctl;
pub mod madinc_wire;
pub mod protocol;
pub mod rng;
pub mod rotation;
pub mod router;
pub mod server;
pub mod snapfile;
pub mod storage;
pub mod switchos;
pub mod ycsb;
