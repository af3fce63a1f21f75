//! FarReach's crash-consistent snapshot on disk: the switch OS writes each completed snapshot
//! to a file so that it survives the switch (and switch OS) process, and a restarted switch OS
//! reads it back for recovery.
//!
//! The write is atomic: the bytes go to `<file>.tmp`, are synced, and the temporary file is
//! renamed over `<file>` (then the directory is synced), so a reader sees either the previous
//! snapshot or the new one, never a torn one, whenever the writer is killed. The format ends with
//! a CRC-32 of everything before it, so a damaged file is an error, never a wrong recovery.
//!
//! Format (big-endian): `TERNSNAP`, version u32 (1), snapshot id u32, record count u32, then per
//! record: key (16 bytes), server index u16, present u8 (1: value, 0: deleted), value length
//! u16, value, seq u32; then CRC-32 (u32) of all the preceding bytes.

use crate::protocol::{Key, MAX_VALUE_LEN};
use crate::switchos::{Snapshot, SnapshotRecord};
use std::io::Write;
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"TERNSNAP";
const VERSION: u32 = 1;

/// Errors reading or writing a snapshot file; each names the file and what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum SnapFileError {
    /// The file could not be read or written.
    #[error("snapshot file {0}: {1}")]
    Io(PathBuf, std::io::Error),
    /// The file is not a valid snapshot.
    #[error("snapshot file {0}: {1}")]
    Corrupt(PathBuf, String),
}

/// The file's bytes for `snap`.
pub fn encode(snap: &Snapshot) -> Vec<u8> {
    let mut b = Vec::with_capacity(24 + snap.records.len() * 40);
    b.extend_from_slice(MAGIC);
    b.extend_from_slice(&VERSION.to_be_bytes());
    b.extend_from_slice(&snap.id.to_be_bytes());
    b.extend_from_slice(&(snap.records.len() as u32).to_be_bytes());
    for r in &snap.records {
        b.extend_from_slice(&r.key.0);
        b.extend_from_slice(&r.server.to_be_bytes());
        let v = r.value.as_deref().unwrap_or(&[]);
        b.push(u8::from(r.value.is_some()));
        b.extend_from_slice(&(v.len() as u16).to_be_bytes());
        b.extend_from_slice(v);
        b.extend_from_slice(&r.seq.to_be_bytes());
    }
    let crc = crc32fast::hash(&b);
    b.extend_from_slice(&crc.to_be_bytes());
    b
}

/// Parses a snapshot file's bytes; the error says what is wrong and where.
pub fn decode(bytes: &[u8]) -> Result<Snapshot, String> {
    if bytes.len() < 24 {
        return Err(format!(
            "{} bytes: shorter than the 24-byte frame",
            bytes.len()
        ));
    }
    let (body, tail) = bytes.split_at(bytes.len() - 4);
    let want = u32::from_be_bytes([tail[0], tail[1], tail[2], tail[3]]);
    let got = crc32fast::hash(body);
    if want != got {
        return Err(format!(
            "checksum mismatch (stored {want:#010x}, computed {got:#010x})"
        ));
    }
    if &body[..8] != MAGIC {
        return Err("not a tern snapshot (bad magic)".into());
    }
    let mut pos = 8;
    let mut take = |n: usize, what: &str| -> Result<&[u8], String> {
        let s = body
            .get(pos..pos + n)
            .ok_or_else(|| format!("truncated at byte {pos} ({what})"))?;
        pos += n;
        Ok(s)
    };
    let u32_of = |s: &[u8]| u32::from_be_bytes([s[0], s[1], s[2], s[3]]);
    let version = u32_of(take(4, "version")?);
    if version != VERSION {
        return Err(format!("version {version}, expected {VERSION}"));
    }
    let id = u32_of(take(4, "snapshot id")?);
    let count = u32_of(take(4, "record count")?) as usize;
    let mut records = Vec::with_capacity(count.min(1 << 16));
    for i in 0..count {
        let what = format!("record {i}");
        let mut key = [0u8; 16];
        key.copy_from_slice(take(16, &what)?);
        let s = take(2, &what)?;
        let server = u16::from_be_bytes([s[0], s[1]]);
        let present = take(1, &what)?[0];
        let s = take(2, &what)?;
        let len = usize::from(u16::from_be_bytes([s[0], s[1]]));
        if present > 1 || (present == 0 && len != 0) || len > MAX_VALUE_LEN {
            return Err(format!(
                "{what}: bad value header (present {present}, length {len})"
            ));
        }
        let value = take(len, &what)?.to_vec();
        let seq = u32_of(take(4, &what)?);
        records.push(SnapshotRecord {
            key: Key(key),
            server,
            value: (present == 1).then_some(value),
            seq,
        });
    }
    if pos != body.len() {
        return Err(format!(
            "{} bytes after the {count} records",
            body.len() - pos
        ));
    }
    Ok(Snapshot { id, records })
}

/// Writes `snap` to `path` atomically (temporary file, sync, rename, directory sync).
pub fn write(path: &Path, snap: &Snapshot) -> Result<(), SnapFileError> {
    let io = |e| SnapFileError::Io(path.to_path_buf(), e);
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    {
        let mut f = std::fs::File::create(&tmp).map_err(io)?;
        f.write_all(&encode(snap)).map_err(io)?;
        f.sync_all().map_err(io)?;
    }
    std::fs::rename(&tmp, path).map_err(io)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}

/// Reads the snapshot at `path`: `Ok(None)` when there is none yet (no snapshot completed
/// before the crash), an error when the file is damaged.
pub fn read(path: &Path) -> Result<Option<Snapshot>, SnapFileError> {
    match std::fs::read(path) {
        Ok(b) => decode(&b)
            .map(Some)
            .map_err(|e| SnapFileError::Corrupt(path.to_path_buf(), e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(SnapFileError::Io(path.to_path_buf(), e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Snapshot {
        Snapshot {
            id: 7,
            records: vec![
                SnapshotRecord {
                    key: Key::from_id(1),
                    server: 0,
                    value: Some(vec![0xab; 128]),
                    seq: 41,
                },
                SnapshotRecord {
                    key: Key::from_id(2),
                    server: 1,
                    value: None,
                    seq: 9,
                },
                SnapshotRecord {
                    key: Key::from_id(3),
                    server: 1,
                    value: Some(Vec::new()),
                    seq: u32::MAX,
                },
            ],
        }
    }

    #[test]
    fn round_trip_through_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("snap.bin");
        assert!(read(&p).unwrap().is_none(), "no file yet: no snapshot");
        write(&p, &sample()).unwrap();
        let s = read(&p).unwrap().unwrap();
        assert_eq!(s.id, 7);
        assert_eq!(s.records, sample().records);
        assert!(!dir.path().join("snap.bin.tmp").exists());
        // A second write replaces the first.
        write(&p, &Snapshot::default()).unwrap();
        assert!(read(&p).unwrap().unwrap().records.is_empty());
    }

    #[test]
    fn every_flipped_bit_and_every_truncation_is_an_error() {
        let good = encode(&sample());
        for i in 0..good.len() {
            for bit in [0x01u8, 0x80] {
                let mut b = good.clone();
                b[i] ^= bit;
                assert!(
                    decode(&b).is_err(),
                    "byte {i} bit {bit:#x} flipped accepted"
                );
            }
        }
        for n in 0..good.len() {
            assert!(decode(&good[..n]).is_err(), "truncated to {n} accepted");
        }
        let e = decode(&good[..good.len() - 1]).unwrap_err();
        assert!(e.contains("checksum"), "{e}");
    }

    #[test]
    fn a_damaged_file_names_itself() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("snap.bin");
        std::fs::write(&p, b"TERNSNAP garbage that is long enough").unwrap();
        let e = read(&p).unwrap_err().to_string();
        assert!(e.contains("snap.bin") && e.contains("checksum"), "{e}");
    }
}
