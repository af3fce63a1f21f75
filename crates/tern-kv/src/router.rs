//! Key → server routing with FarReach's partition ranges: `crc32(key) mod 32768` picks a hash
//! partition and a table of contiguous partition ranges maps it to a server.

use crate::protocol::Key;
use crate::storage::PARTITION_COUNT;
use std::net::{SocketAddr, ToSocketAddrs};

/// The partition-range table over a list of servers.
#[derive(Clone, Debug)]
pub struct Router {
    servers: Vec<SocketAddr>,
    /// `ends[i]` = first hash partition *not* served by server i (ranges are contiguous).
    ends: Vec<u32>,
}

/// Bad router configuration.
#[derive(Debug, thiserror::Error)]
pub enum RouterError {
    /// No servers were given.
    #[error("no servers given")]
    Empty,
    /// More servers than hash partitions.
    #[error("{0} servers exceed the {PARTITION_COUNT} hash partitions")]
    TooMany(usize),
    /// A server address did not parse or resolve.
    #[error("server {index} ({text:?}): {reason}")]
    BadAddress {
        /// Position in the list.
        index: usize,
        /// The text.
        text: String,
        /// Why.
        reason: String,
    },
}

impl Router {
    /// Splits the 32768 hash partitions evenly into contiguous ranges, one per server.
    pub fn new(servers: Vec<SocketAddr>) -> Result<Router, RouterError> {
        let n = servers.len();
        if n == 0 {
            return Err(RouterError::Empty);
        }
        if n > PARTITION_COUNT as usize {
            return Err(RouterError::TooMany(n));
        }
        let ends = (1..=n as u32)
            .map(|i| i * PARTITION_COUNT / n as u32)
            .collect();
        Ok(Router { servers, ends })
    }

    /// Parses a comma-separated `host:port` list.
    pub fn parse(list: &str) -> Result<Router, RouterError> {
        let mut servers = Vec::new();
        for (index, text) in list.split(',').map(str::trim).enumerate() {
            let bad = |reason: String| RouterError::BadAddress {
                index,
                text: text.to_string(),
                reason,
            };
            let addr = text
                .to_socket_addrs()
                .map_err(|e| bad(e.to_string()))?
                .next()
                .ok_or_else(|| bad("resolves to no address".into()))?;
            servers.push(addr);
        }
        Router::new(servers)
    }

    /// The servers, by index.
    pub fn servers(&self) -> &[SocketAddr] {
        &self.servers
    }

    /// The hash partition of `key`.
    pub fn hash_partition(key: &Key) -> u32 {
        key.crc32() % PARTITION_COUNT
    }

    /// The index of the server that owns `key`.
    pub fn server_index(&self, key: &Key) -> usize {
        let p = Router::hash_partition(key);
        self.ends.partition_point(|&end| end <= p)
    }

    /// The `[start, end)` hash-partition range of server `i`.
    pub fn range(&self, i: usize) -> Option<(u32, u32)> {
        let end = *self.ends.get(i)?;
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        Some((start, end))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_cover_everything_once() {
        for n in [1usize, 2, 3, 7, 16, 128] {
            let servers = (0..n)
                .map(|i| SocketAddr::from(([127, 0, 0, 1], 1152 + i as u16)))
                .collect();
            let r = Router::new(servers).unwrap();
            let mut next = 0;
            for i in 0..n {
                let (s, e) = r.range(i).unwrap();
                assert_eq!(s, next);
                assert!(e > s);
                next = e;
            }
            assert_eq!(next, PARTITION_COUNT);
            assert!(r.range(n).is_none());
            let mut counts = vec![0u32; n];
            for id in 0..20_000u64 {
                let k = Key::from_id(id);
                let i = r.server_index(&k);
                let (s, e) = r.range(i).unwrap();
                let p = Router::hash_partition(&k);
                assert!(s <= p && p < e);
                counts[i] += 1;
            }
            let mean = 20_000.0 / n as f64;
            for c in counts {
                assert!(
                    (c as f64 - mean).abs() < mean * 0.35 + 20.0,
                    "{n} servers: {c} vs {mean}"
                );
            }
        }
    }

    #[test]
    fn parse_errors_name_the_entry() {
        assert!(matches!(
            Router::parse(""),
            Err(RouterError::BadAddress { index: 0, .. })
        ));
        let e = Router::parse("127.0.0.1:1,nonsense").unwrap_err();
        assert!(e.to_string().contains("server 1"), "{e}");
        assert_eq!(
            Router::parse("127.0.0.1:5,127.0.0.1:6")
                .unwrap()
                .servers()
                .len(),
            2
        );
        assert!(matches!(Router::new(vec![]), Err(RouterError::Empty)));
    }
}
