//! In-network key-value caching suite: wire protocol, storage servers, clients, workloads.
