//! Authentication of MADINC control datagrams: a deployment's shared key (128 bits) seals every
//! control message, acknowledgement, hot report and write notice with a sender id, a sequence
//! number and a SipHash-2-4 MAC over all three and the message; a receiver opens a datagram only
//! when its MAC verifies (else *forged*) and its sequence number is new for its sender within a
//! sliding window of [`WINDOW`] numbers (else *replayed*). A sender seals every send afresh (a
//! retry carries a new sequence number), so a byte-for-byte copy of an earlier datagram is always
//! a replay. The per-tenant secret travels inside the sealed message (its tag) and is checked by
//! the switch agent against the tenant's entry.
//!
//! Trailer after the encoded message: sender u64 ‖ seq u64 ‖ mac u64 (big endian).

use std::collections::HashMap;

/// Bytes a seal adds to a message.
pub const TRAILER: usize = 24;

/// Sequence numbers a receiver remembers behind the newest one of a sender.
pub const WINDOW: u64 = 64;

/// A deployment's shared key.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct AuthKey(pub [u8; 16]);

impl std::fmt::Debug for AuthKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key itself never goes to a log.
        f.write_str("AuthKey(..)")
    }
}

impl AuthKey {
    /// A fresh key from the operating system's randomness (`/dev/urandom`), or, where that cannot
    /// be read, from the time and process id mixed by SipHash.
    pub fn random() -> AuthKey {
        let mut k = [0u8; 16];
        let read = std::fs::File::open("/dev/urandom")
            .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut k));
        if read.is_err() {
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0);
            let seed = [t.to_le_bytes(), (std::process::id() as u128).to_le_bytes()].concat();
            let a = siphash24(&[7u8; 16], &seed);
            let b = siphash24(&[9u8; 16], &seed);
            k[..8].copy_from_slice(&a.to_le_bytes());
            k[8..].copy_from_slice(&b.to_le_bytes());
        }
        AuthKey(k)
    }

    /// Parses 32 hex digits.
    pub fn from_hex(s: &str) -> Result<AuthKey, String> {
        let s = s.trim();
        if s.len() != 32 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!(
                "a MADINC control key is 32 hex digits, got {} characters",
                s.len()
            ));
        }
        let mut k = [0u8; 16];
        for (i, b) in k.iter_mut().enumerate() {
            *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|e| e.to_string())?;
        }
        Ok(AuthKey(k))
    }

    /// 32 hex digits.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// SipHash-2-4 of `msg` under `key` (Aumasson and Bernstein's keyed PRF for short inputs).
pub fn siphash24(key: &[u8; 16], msg: &[u8]) -> u64 {
    let k0 = u64::from_le_bytes(key[..8].try_into().unwrap_or_default());
    let k1 = u64::from_le_bytes(key[8..].try_into().unwrap_or_default());
    let mut v = [
        k0 ^ 0x736f_6d65_7073_6575,
        k1 ^ 0x646f_7261_6e64_6f6d,
        k0 ^ 0x6c79_6765_6e65_7261,
        k1 ^ 0x7465_6462_7974_6573,
    ];
    fn round(v: &mut [u64; 4]) {
        v[0] = v[0].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(13) ^ v[0];
        v[0] = v[0].rotate_left(32);
        v[2] = v[2].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(16) ^ v[2];
        v[0] = v[0].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(21) ^ v[0];
        v[2] = v[2].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(17) ^ v[2];
        v[2] = v[2].rotate_left(32);
    }
    let compress = |v: &mut [u64; 4], m: u64| {
        v[3] ^= m;
        round(v);
        round(v);
        v[0] ^= m;
    };
    let mut chunks = msg.chunks_exact(8);
    for c in &mut chunks {
        compress(&mut v, u64::from_le_bytes(c.try_into().unwrap_or_default()));
    }
    let rest = chunks.remainder();
    let mut last = [0u8; 8];
    last[..rest.len()].copy_from_slice(rest);
    last[7] = msg.len() as u8;
    compress(&mut v, u64::from_le_bytes(last));
    v[2] ^= 0xff;
    for _ in 0..4 {
        round(&mut v);
    }
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

fn mac(key: &AuthKey, body: &[u8], sender: u64, seq: u64) -> u64 {
    let mut m = Vec::with_capacity(body.len() + 24);
    m.extend_from_slice(b"MADINC-CTL/1");
    m.extend_from_slice(body);
    m.extend_from_slice(&sender.to_be_bytes());
    m.extend_from_slice(&seq.to_be_bytes());
    siphash24(&key.0, &m)
}

/// A sender: its id and next sequence number.
#[derive(Debug)]
pub struct Sealer {
    key: AuthKey,
    sender: u64,
    seq: u64,
}

impl Sealer {
    /// A sender with a random id (so two senders of a deployment do not share a window).
    pub fn new(key: AuthKey) -> Sealer {
        let id = AuthKey::random().0;
        Sealer {
            key,
            sender: u64::from_le_bytes(id[..8].try_into().unwrap_or_default()),
            seq: 0,
        }
    }

    /// `body` with a fresh trailer.
    pub fn seal(&mut self, body: &[u8]) -> Vec<u8> {
        self.seq += 1;
        let mut out = Vec::with_capacity(body.len() + TRAILER);
        out.extend_from_slice(body);
        out.extend_from_slice(&self.sender.to_be_bytes());
        out.extend_from_slice(&self.seq.to_be_bytes());
        out.extend_from_slice(&mac(&self.key, body, self.sender, self.seq).to_be_bytes());
        out
    }
}

/// Why a sealed datagram was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// Too short for a trailer, or the MAC does not verify (wrong key, altered bytes).
    Forged,
    /// A sequence number this receiver has seen from the sender, or older than its window.
    Replayed,
}

/// A receiver: the newest sequence number of each sender and which of the [`WINDOW`] before it
/// were seen.
#[derive(Debug)]
pub struct Opener {
    key: AuthKey,
    senders: HashMap<u64, (u64, u64)>,
}

impl Opener {
    /// A receiver for the deployment's key.
    pub fn new(key: AuthKey) -> Opener {
        Opener {
            key,
            senders: HashMap::new(),
        }
    }

    /// The message inside `datagram`, when it is authentic and new.
    pub fn open<'a>(&mut self, datagram: &'a [u8]) -> Result<&'a [u8], Refused> {
        if datagram.len() < TRAILER {
            return Err(Refused::Forged);
        }
        let (body, t) = datagram.split_at(datagram.len() - TRAILER);
        let word = |i: usize| u64::from_be_bytes(t[i..i + 8].try_into().unwrap_or_default());
        let (sender, seq, tag) = (word(0), word(8), word(16));
        // Constant-time enough for a 64-bit compare of a value the sender cannot observe.
        if mac(&self.key, body, sender, seq) != tag {
            return Err(Refused::Forged);
        }
        let (top, seen) = self.senders.entry(sender).or_insert((0, 0));
        if seq > *top {
            let shift = seq - *top;
            *seen = if shift >= WINDOW { 0 } else { *seen << shift };
            *seen |= 1;
            *top = seq;
            return Ok(body);
        }
        let back = *top - seq;
        if back >= WINDOW || *seen & (1u64 << back) != 0 {
            return Err(Refused::Replayed);
        }
        *seen |= 1u64 << back;
        Ok(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn siphash_matches_the_reference_vector() {
        // The SipHash paper's appendix: key 00..0f, message 00..0e.
        let key: [u8; 16] = std::array::from_fn(|i| i as u8);
        let msg: Vec<u8> = (0..15).collect();
        assert_eq!(siphash24(&key, &msg), 0xa129_ca61_49be_45e5);
    }

    #[test]
    fn forged_and_replayed_datagrams_are_refused() {
        let key = AuthKey::random();
        let mut s = Sealer::new(key);
        let mut o = Opener::new(key);
        let a = s.seal(b"first");
        let b = s.seal(b"second");
        assert_eq!(o.open(&b), Ok(&b"second"[..]));
        // Out of order inside the window is fine once.
        assert_eq!(o.open(&a), Ok(&b"first"[..]));
        assert_eq!(o.open(&a), Err(Refused::Replayed));
        assert_eq!(o.open(&b), Err(Refused::Replayed));
        let mut bad = s.seal(b"third");
        bad[0] ^= 1;
        assert_eq!(o.open(&bad), Err(Refused::Forged));
        let other = Sealer::new(AuthKey::random()).seal(b"third");
        assert_eq!(o.open(&other), Err(Refused::Forged));
        assert_eq!(o.open(b"short"), Err(Refused::Forged));
        // Older than the window.
        let old = s.seal(b"old");
        for _ in 0..WINDOW + 1 {
            let n = s.seal(b"n");
            assert!(o.open(&n).is_ok());
        }
        assert_eq!(o.open(&old), Err(Refused::Replayed));
        assert_eq!(AuthKey::from_hex(&key.to_hex()), Ok(key));
        assert!(AuthKey::from_hex("12").is_err());
    }
}
