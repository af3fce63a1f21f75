//! Durable record storage: a [`Store`] of N partitions, each its own RocksDB instance, holding
//! records with their sequence numbers. Writes are sequence-checked (an older seq never replaces
//! a newer record), deletes leave tombstones that keep their seq, and snapshots give a consistent
//! per-partition view.
//!
//! On-disk record: `seq u32 BE ‖ flag u8 (1 live, 0 tombstone) ‖ value`.
//!
//! MADINC's tenants have key spaces of their own in the same partitions: a tenant's record is
//! stored under `0xAD ‖ tenant u16 BE ‖ key` (19 bytes), which never equals a FarReach key (16
//! bytes), so two tenants' equal keys are two records and neither is one of FarReach's
//! ([`Store::tenant_get`], [`Store::tenant_write`]). Snapshots list FarReach's 16-byte keys only.

use crate::protocol::{Key, KEY_LEN};
use rocksdb::{BlockBasedOptions, Cache, Options, WriteOptions, DB};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

/// A stored record: its seq and its value (`None` = tombstone).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Sequence number of the write that produced it.
    pub seq: u32,
    /// The value, or `None` for a delete tombstone.
    pub value: Option<Vec<u8>>,
}

impl Record {
    fn encode(&self) -> Vec<u8> {
        let v = self.value.as_deref().unwrap_or(&[]);
        let mut out = Vec::with_capacity(5 + v.len());
        out.extend_from_slice(&self.seq.to_be_bytes());
        out.push(u8::from(self.value.is_some()));
        out.extend_from_slice(v);
        out
    }

    fn decode(b: &[u8], where_: &str) -> Result<Record, StoreError> {
        if b.len() < 5 || b[4] > 1 || (b[4] == 0 && b.len() != 5) {
            return Err(StoreError::Corrupt(format!(
                "{where_}: stored record of {} bytes is malformed",
                b.len()
            )));
        }
        Ok(Record {
            seq: u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
            value: (b[4] == 1).then(|| b[5..].to_vec()),
        })
    }
}

/// What a sequence-checked write did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WriteOutcome {
    /// The write was stored.
    Applied,
    /// The store already held a record with a larger seq; nothing changed.
    Stale {
        /// The seq of the record kept.
        current: u32,
    },
}

/// Storage errors.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// RocksDB failed.
    #[error("rocksdb ({path}): {source}")]
    Rocks {
        /// Partition directory.
        path: String,
        /// The RocksDB error.
        source: rocksdb::Error,
    },
    /// A stored record or key is not in tern's format.
    #[error("corrupt store: {0}")]
    Corrupt(String),
    /// Bad configuration.
    #[error("store configuration: {0}")]
    Config(String),
}

/// RocksDB settings, FarReach's scaled down for a small machine.
#[derive(Clone, Debug)]
pub struct StoreOptions {
    /// Memtable size in bytes (FarReach: 64 MiB).
    pub write_buffer_size: usize,
    /// Block cache in bytes, shared by all partitions (FarReach: 1 GiB).
    pub block_cache: usize,
    /// Background flush + compaction jobs (FarReach: 16).
    pub background_jobs: i32,
    /// Fsync the WAL on every write (FarReach: false).
    pub sync: bool,
}

impl Default for StoreOptions {
    fn default() -> StoreOptions {
        StoreOptions {
            write_buffer_size: 16 << 20,
            block_cache: 64 << 20,
            background_jobs: 2,
            sync: false,
        }
    }
}

const LOCK_STRIPES: usize = 64;

/// First byte of a MADINC tenant's stored key.
const TENANT_KEY_TAG: u8 = 0xAD;
/// Length of a MADINC tenant's stored key.
const TENANT_KEY_LEN: usize = 3 + KEY_LEN;

/// The stored key of tenant `tenant`'s `key`: `0xAD ‖ tenant ‖ key`.
fn tenant_key(tenant: u16, key: &Key) -> [u8; TENANT_KEY_LEN] {
    let mut k = [0u8; TENANT_KEY_LEN];
    k[0] = TENANT_KEY_TAG;
    k[1..3].copy_from_slice(&tenant.to_be_bytes());
    k[3..].copy_from_slice(&key.0);
    k
}

/// One partition: a RocksDB instance plus lock stripes that make read-check-write atomic.
pub struct Partition {
    db: DB,
    path: PathBuf,
    stripes: Vec<Mutex<()>>,
    write_opts: WriteOptions,
}

impl Partition {
    /// Opens (or creates) the partition at `path`.
    pub fn open(path: &Path, opts: &StoreOptions, cache: &Cache) -> Result<Partition, StoreError> {
        let mut o = Options::default();
        o.create_if_missing(true);
        o.set_write_buffer_size(opts.write_buffer_size);
        o.set_max_write_buffer_number(4);
        o.set_level_zero_file_num_compaction_trigger(10);
        o.set_target_file_size_base(64 << 20);
        o.set_max_bytes_for_level_base(512 << 20);
        o.set_max_bytes_for_level_multiplier(10.0);
        o.set_num_levels(7);
        o.set_max_background_jobs(opts.background_jobs);
        o.set_max_open_files(-1);
        o.set_wal_bytes_per_sync(2 << 20);
        let mut bb = BlockBasedOptions::default();
        bb.set_bloom_filter(10.0, false);
        bb.set_block_cache(cache);
        bb.set_block_size(4096);
        o.set_block_based_table_factory(&bb);
        let db = DB::open(&o, path).map_err(|e| StoreError::Rocks {
            path: path.display().to_string(),
            source: e,
        })?;
        let mut write_opts = WriteOptions::default();
        write_opts.set_sync(opts.sync);
        Ok(Partition {
            db,
            path: path.to_path_buf(),
            stripes: (0..LOCK_STRIPES).map(|_| Mutex::new(())).collect(),
            write_opts,
        })
    }

    fn rocks(&self, e: rocksdb::Error) -> StoreError {
        StoreError::Rocks {
            path: self.path.display().to_string(),
            source: e,
        }
    }

    fn lock(&self, key: &Key) -> MutexGuard<'_, ()> {
        let i = key.crc32() as usize % LOCK_STRIPES;
        // A poisoned stripe only means another thread panicked while holding it; the data is
        // in RocksDB, so continue.
        self.stripes[i].lock().unwrap_or_else(|p| p.into_inner())
    }

    fn get_locked(&self, key: &Key) -> Result<Option<Record>, StoreError> {
        self.get_raw(&key.0, key)
    }

    fn get_raw(&self, raw: &[u8], key: &Key) -> Result<Option<Record>, StoreError> {
        match self.db.get_pinned(raw).map_err(|e| self.rocks(e))? {
            None => Ok(None),
            Some(b) => {
                Record::decode(&b, &format!("{} key {key:?}", self.path.display())).map(Some)
            }
        }
    }

    /// Tenant `tenant`'s record of `key` (its own key space; see the module docs).
    pub fn tenant_get(&self, tenant: u16, key: &Key) -> Result<Option<Record>, StoreError> {
        self.get_raw(&tenant_key(tenant, key), key)
    }

    /// Stores tenant `tenant`'s `value` (or a tombstone) of `key` with the next seq of that
    /// tenant's record and returns the seq.
    pub fn tenant_write(
        &self,
        tenant: u16,
        key: &Key,
        value: Option<&[u8]>,
    ) -> Result<u32, StoreError> {
        let _g = self.lock(key);
        let raw = tenant_key(tenant, key);
        let seq = match self.get_raw(&raw, key)? {
            Some(cur) => cur.seq.checked_add(1).ok_or_else(|| {
                StoreError::Corrupt(format!(
                    "seq of tenant {tenant} key {key:?} would overflow u32"
                ))
            })?,
            None => 1,
        };
        let rec = Record {
            seq,
            value: value.map(<[u8]>::to_vec),
        };
        self.db
            .put_opt(raw, rec.encode(), &self.write_opts)
            .map_err(|e| self.rocks(e))?;
        Ok(seq)
    }

    /// The stored record of `key` (a tombstone is `Some` with `value: None`).
    pub fn get(&self, key: &Key) -> Result<Option<Record>, StoreError> {
        self.get_locked(key)
    }

    fn write_locked(&self, key: &Key, rec: &Record) -> Result<(), StoreError> {
        self.db
            .put_opt(key.0, rec.encode(), &self.write_opts)
            .map_err(|e| self.rocks(e))
    }

    /// Stores `value` (or a tombstone for `None`) with `seq` unless a record with a larger seq is
    /// already stored. Equal seqs re-apply (idempotent retransmissions).
    pub fn write_checked(
        &self,
        key: &Key,
        value: Option<&[u8]>,
        seq: u32,
    ) -> Result<WriteOutcome, StoreError> {
        let _g = self.lock(key);
        if let Some(cur) = self.get_locked(key)? {
            if cur.seq > seq {
                return Ok(WriteOutcome::Stale { current: cur.seq });
            }
        }
        self.write_locked(
            key,
            &Record {
                seq,
                value: value.map(<[u8]>::to_vec),
            },
        )?;
        Ok(WriteOutcome::Applied)
    }

    /// Stores `value` (or a tombstone) with the next seq of this key (stored seq + 1, or 1) and
    /// returns that seq: the server-side sequencing used when no switch assigns seqs.
    pub fn write_next(&self, key: &Key, value: Option<&[u8]>) -> Result<u32, StoreError> {
        let _g = self.lock(key);
        let seq = match self.get_locked(key)? {
            Some(cur) => cur.seq.checked_add(1).ok_or_else(|| {
                StoreError::Corrupt(format!("seq of key {key:?} would overflow u32"))
            })?,
            None => 1,
        };
        self.write_locked(
            key,
            &Record {
                seq,
                value: value.map(<[u8]>::to_vec),
            },
        )?;
        Ok(seq)
    }

    /// Every record (tombstones included) as of one consistent RocksDB snapshot, in key order.
    pub fn snapshot(&self) -> Result<Vec<(Key, Record)>, StoreError> {
        let snap = self.db.snapshot();
        let mut out = Vec::new();
        for item in snap.iterator(rocksdb::IteratorMode::Start) {
            let (k, v) = item.map_err(|e| self.rocks(e))?;
            if k.len() == TENANT_KEY_LEN && k[0] == TENANT_KEY_TAG {
                continue;
            }
            let key: [u8; KEY_LEN] = k.as_ref().try_into().map_err(|_| {
                StoreError::Corrupt(format!(
                    "{}: stored key of {} bytes (expected {KEY_LEN})",
                    self.path.display(),
                    k.len()
                ))
            })?;
            let rec = Record::decode(&v, &format!("{} snapshot", self.path.display()))?;
            out.push((Key(key), rec));
        }
        Ok(out)
    }

    /// Flushes memtables and the WAL to disk.
    pub fn flush(&self) -> Result<(), StoreError> {
        self.db.flush_wal(true).map_err(|e| self.rocks(e))?;
        self.db.flush().map_err(|e| self.rocks(e))
    }
}

/// N partitions under one directory (`DIR/p0`, `DIR/p1`, …); a key's partition is
/// `(crc32(key) mod 32768) mod N`.
pub struct Store {
    parts: Vec<Partition>,
}

/// FarReach's partition-hash space.
pub const PARTITION_COUNT: u32 = 32768;

impl Store {
    /// Opens or creates `n` partitions under `dir`.
    pub fn open(dir: &Path, n: usize, opts: &StoreOptions) -> Result<Store, StoreError> {
        if n == 0 || n > 1024 {
            return Err(StoreError::Config(format!(
                "partition count {n} must be between 1 and 1024"
            )));
        }
        std::fs::create_dir_all(dir).map_err(|e| {
            StoreError::Config(format!(
                "cannot create store directory {}: {e}",
                dir.display()
            ))
        })?;
        let cache = Cache::new_lru_cache(opts.block_cache).map_err(|e| StoreError::Rocks {
            path: dir.display().to_string(),
            source: e,
        })?;
        let parts = (0..n)
            .map(|i| Partition::open(&dir.join(format!("p{i}")), opts, &cache))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Store { parts })
    }

    /// Number of partitions.
    pub fn partitions(&self) -> usize {
        self.parts.len()
    }

    /// The partition holding `key`.
    pub fn partition(&self, key: &Key) -> &Partition {
        &self.parts[(key.crc32() % PARTITION_COUNT) as usize % self.parts.len()]
    }

    /// All partitions.
    pub fn all(&self) -> &[Partition] {
        &self.parts
    }

    /// See [`Partition::get`].
    pub fn get(&self, key: &Key) -> Result<Option<Record>, StoreError> {
        self.partition(key).get(key)
    }

    /// See [`Partition::write_checked`].
    pub fn write_checked(
        &self,
        key: &Key,
        value: Option<&[u8]>,
        seq: u32,
    ) -> Result<WriteOutcome, StoreError> {
        self.partition(key).write_checked(key, value, seq)
    }

    /// See [`Partition::write_next`].
    pub fn write_next(&self, key: &Key, value: Option<&[u8]>) -> Result<u32, StoreError> {
        self.partition(key).write_next(key, value)
    }

    /// See [`Partition::tenant_get`].
    pub fn tenant_get(&self, tenant: u16, key: &Key) -> Result<Option<Record>, StoreError> {
        self.partition(key).tenant_get(tenant, key)
    }

    /// See [`Partition::tenant_write`].
    pub fn tenant_write(
        &self,
        tenant: u16,
        key: &Key,
        value: Option<&[u8]>,
    ) -> Result<u32, StoreError> {
        self.partition(key).tenant_write(tenant, key, value)
    }

    /// Number of live (non-tombstone) records over a snapshot of every partition.
    pub fn snapshot_live_count(&self) -> Result<u64, StoreError> {
        let mut n = 0u64;
        for p in &self.parts {
            n += p
                .snapshot()?
                .iter()
                .filter(|(_, r)| r.value.is_some())
                .count() as u64;
        }
        Ok(n)
    }

    /// The largest seq stored (records and tombstones) over a snapshot of every partition.
    pub fn max_seq(&self) -> Result<u32, StoreError> {
        let mut m = 0u32;
        for p in &self.parts {
            m = p.snapshot()?.iter().map(|(_, r)| r.seq).fold(m, u32::max);
        }
        Ok(m)
    }

    /// Flushes every partition.
    pub fn flush(&self) -> Result<(), StoreError> {
        self.parts.iter().try_for_each(Partition::flush)
    }
}
