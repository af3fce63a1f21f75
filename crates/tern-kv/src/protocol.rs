//! The key-value wire protocol: FarReach's UDP payload layout and op-code space (shared by the
//! NoCache, NetCache and FarReach applications), encoded and decoded without panics.
//!
//! A message is `op_hdr → [vallen + value words] → [shadowtype] → [seq] → [inswitch] → [stat] →
//! [clone | frequency | validvalue]`, all big-endian. The low nibble of the op code says which
//! optional headers follow (bit0 value, bit1 seq, bit2 inswitch, bit3 stat); the shadow type (a
//! copy of the op code) is present whenever the nibble is non-zero. A few op codes carry one extra
//! trailing header, and the end-host control ops (never parsed by a switch) carry an opaque body.
//! See `crates/tern-kv/PROTOCOL.md` for the byte-level description.

use std::fmt;

/// Length of a key in bytes.
pub const KEY_LEN: usize = 16;
/// Largest value a switch stores and parses (16 value words of 8 bytes).
pub const SWITCH_MAX_VALUE_LEN: usize = 128;
/// Largest value the protocol carries at all; values above [`SWITCH_MAX_VALUE_LEN`] are relayed
/// by the switch without being parsed.
pub const MAX_VALUE_LEN: usize = 8192;
/// Largest opaque body of a control op.
pub const MAX_BODY_LEN: usize = 16384;
/// `stat_hdr.nodeidx_foreval` value meaning "served by the switch".
pub const NODEIDX_SWITCH: u16 = 0xFFFF;
/// First UDP port of the storage-server workers (FarReach: 1152 + server index).
pub const SERVER_BASE_PORT: u16 = 1152;

/// Bytes of `op_hdr`.
pub const OP_HDR_LEN: usize = 2 + KEY_LEN;
/// Bytes of `seq_hdr`.
pub const SEQ_HDR_LEN: usize = 8;
/// Bytes of `inswitch_hdr`.
pub const INSWITCH_HDR_LEN: usize = 20;
/// Bytes of `stat_hdr`.
pub const STAT_HDR_LEN: usize = 4;
/// Bytes of `clone_hdr`.
pub const CLONE_HDR_LEN: usize = 8;

/// A 16-byte key, stored on the wire as keylolo(32) keylohi(32) keyhilo(32) keyhihilo(16)
/// keyhihihi(16): that is, exactly these 16 bytes in order.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Key(pub [u8; KEY_LEN]);

impl Key {
    /// The key of a numeric record id (e.g. a YCSB key number after hashing): eight zero bytes,
    /// then the id big-endian, so keys sort like their ids.
    pub fn from_id(id: u64) -> Key {
        let mut k = [0u8; KEY_LEN];
        k[8..].copy_from_slice(&id.to_be_bytes());
        Key(k)
    }

    /// The id stored by [`Key::from_id`] (the last eight bytes).
    pub fn id(&self) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.0[8..]);
        u64::from_be_bytes(b)
    }

    /// CRC-32 (IEEE) of the 16 key bytes, as the switch's partition hash computes it.
    pub fn crc32(&self) -> u32 {
        crc32fast::hash(&self.0)
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Key(")?;
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        write!(f, ")")
    }
}

/// An op-code enum with its wire values: `code`, `from_code`, `name` and `ALL` (used for
/// FarReach's ops here and for MADINC's in [`crate::madinc`]).
macro_rules! op_enum {
    ($(#[$em:meta])* $enum:ident; $( $(#[$m:meta])* $name:ident = $code:literal, )*) => {
        $(#[$em])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
        #[allow(non_camel_case_types)]
        pub enum $enum { $( $(#[$m])* $name, )* }

        impl $enum {
            /// All op codes, in declaration order.
            pub const ALL: &'static [$enum] = &[ $( $enum::$name, )* ];

            /// The 16-bit wire value.
            pub fn code(self) -> u16 {
                match self { $( $enum::$name => $code, )* }
            }

            /// The op for a wire value, if it is one.
            pub fn from_code(code: u16) -> Option<$enum> {
                match code { $( $code => Some($enum::$name), )* _ => None }
            }

            /// The upper-case name (as in FarReach's sources for its ops).
            pub fn name(self) -> &'static str {
                match self { $( $enum::$name => stringify!($name), )* }
            }
        }
    };
}
pub(crate) use op_enum;

op_enum! {
    /// Every op code of the protocol (FarReach's `packet_format.h` space plus tern's own
    /// control ops in `0x0fX0`).
    Op;
    WARMUPREQ = 0x0000,
    PUTREQ = 0x0001,
    SCANREQ = 0x0010,
    GETREQ = 0x0030,
    DELREQ = 0x0040,
    LOADREQ = 0x0310,
    GETRES = 0x0009,
    PUTRES = 0x0008,
    DELRES = 0x0018,
    GETRES_SEQ = 0x006b,
    PUTRES_SEQ = 0x000a,
    DELRES_SEQ = 0x001a,
    WARMUPACK = 0x00d0,
    LOADACK = 0x00e0,
    GETREQ_INSWITCH = 0x0004,
    PUTREQ_INSWITCH = 0x0005,
    DELREQ_INSWITCH = 0x0014,
    PUTREQ_SEQ_INSWITCH = 0x0007,
    DELREQ_SEQ_INSWITCH = 0x0006,
    GETRES_LATEST_SEQ_INSWITCH = 0x000f,
    GETRES_DELETED_SEQ_INSWITCH = 0x001f,
    PUTREQ_LARGEVALUE_INSWITCH = 0x00a4,
    GETREQ_POP = 0x0050,
    GETREQ_NLATEST = 0x0060,
    GETREQ_BEINGEVICTED_RECORD = 0x007b,
    GETREQ_LARGEVALUEBLOCK_RECORD = 0x008b,
    PUTREQ_SEQ = 0x0003,
    PUTREQ_POP_SEQ = 0x0013,
    PUTREQ_SEQ_CASE3 = 0x0023,
    PUTREQ_POP_SEQ_CASE3 = 0x0033,
    PUTREQ_SEQ_BEINGEVICTED = 0x0053,
    PUTREQ_SEQ_CASE3_BEINGEVICTED = 0x0063,
    DELREQ_SEQ = 0x0002,
    DELREQ_SEQ_CASE3 = 0x0012,
    DELREQ_SEQ_BEINGEVICTED = 0x0062,
    DELREQ_SEQ_CASE3_BEINGEVICTED = 0x0072,
    GETRES_LATEST_SEQ = 0x000b,
    GETRES_DELETED_SEQ = 0x001b,
    GETRES_LATEST_SEQ_INSWITCH_CASE1 = 0x002f,
    GETRES_DELETED_SEQ_INSWITCH_CASE1 = 0x003f,
    PUTREQ_SEQ_INSWITCH_CASE1 = 0x004f,
    DELREQ_SEQ_INSWITCH_CASE1 = 0x005f,
    CACHE_POP_INSWITCH = 0x007f,
    CACHE_POP_INSWITCH_ACK = 0x0070,
    CACHE_EVICT_LOADFREQ_INSWITCH = 0x0024,
    CACHE_EVICT_LOADFREQ_INSWITCH_ACK = 0x0100,
    CACHE_EVICT_LOADDATA_INSWITCH = 0x0034,
    CACHE_EVICT_LOADDATA_INSWITCH_ACK = 0x002b,
    LOADSNAPSHOTDATA_INSWITCH = 0x0044,
    LOADSNAPSHOTDATA_INSWITCH_ACK = 0x006f,
    SETVALID_INSWITCH = 0x0054,
    SETVALID_INSWITCH_ACK = 0x0110,
    CACHE_POP = 0x0090,
    CACHE_POP_ACK = 0x00f0,
    CACHE_EVICT = 0x00a0,
    CACHE_EVICT_ACK = 0x00b0,
    CACHE_EVICT_CASE2 = 0x00c0,
    NETCACHE_PUTREQ_SEQ_CACHED = 0x0043,
    NETCACHE_DELREQ_SEQ_CACHED = 0x0022,
    NETCACHE_VALUEUPDATE = 0x003b,
    NETCACHE_VALUEUPDATE_INSWITCH = 0x008f,
    NETCACHE_VALUEUPDATE_ACK = 0x0190,
    NETCACHE_GETREQ_POP = 0x0120,
    NETCACHE_CACHE_POP = 0x0130,
    NETCACHE_CACHE_POP_ACK = 0x0140,
    NETCACHE_CACHE_POP_FINISH = 0x0150,
    NETCACHE_CACHE_POP_FINISH_ACK = 0x0160,
    NETCACHE_CACHE_EVICT = 0x0170,
    NETCACHE_CACHE_EVICT_ACK = 0x0180,
    NETCACHE_WARMUPREQ_INSWITCH = 0x0064,
    NETCACHE_WARMUPREQ_INSWITCH_POP = 0x0074,
    /// tern: ask a storage server to flush and stop (op_hdr only; key ignored).
    TERN_SHUTDOWN = 0x0f00,
    /// tern: the server's answer to TERN_SHUTDOWN, sent after flushing.
    TERN_SHUTDOWN_ACK = 0x0f10,
    /// tern: ask a storage server to take a snapshot of every partition.
    TERN_SNAPSHOT = 0x0f20,
    /// tern: answer to TERN_SNAPSHOT; body = u64 record count, big-endian.
    TERN_SNAPSHOT_ACK = 0x0f30,
    /// tern: ask a storage server for the largest seq it stores (a cache's switch OS sets its
    /// seq floor above it).
    TERN_MAXSEQ = 0x0f40,
    /// tern: answer to TERN_MAXSEQ; body = u32 seq, big-endian.
    TERN_MAXSEQ_ACK = 0x0f50,
    /// tern: a client's PUTREQ of a value larger than a switch stores, with the seq the cache
    /// switch assigned it. Layout: `op_hdr → seq_hdr → vallen + value → shadowtype` where the
    /// shadow type is the client's PUTREQ (0x0001): the switch inserts the seq header in front
    /// of the value it does not parse (see `PROTOCOL.md`).
    TERN_PUTREQ_LARGE_SEQ = 0x0f63,
}

/// Which optional headers an op carries, derived from its code.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Layout {
    /// `vallen_hdr` + value words.
    pub value: bool,
    /// `shadowtype_hdr`.
    pub shadow: bool,
    /// `seq_hdr`.
    pub seq: bool,
    /// `inswitch_hdr`.
    pub inswitch: bool,
    /// `stat_hdr`.
    pub stat: bool,
    /// The one trailing header, if any.
    pub extra: Option<ExtraKind>,
    /// An opaque body follows the op header (end-host control messages only).
    pub body: bool,
}

/// The kind of trailing header an op carries.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ExtraKind {
    /// `clone_hdr` (8 bytes): the CASE1 reports.
    Clone,
    /// `frequency_hdr` (4 bytes): CACHE_EVICT_LOADFREQ_INSWITCH_ACK.
    Frequency,
    /// `validvalue_hdr` (1 byte): SETVALID_INSWITCH.
    ValidValue,
}

impl Op {
    /// The headers this op carries.
    pub fn layout(self) -> Layout {
        let code = self.code();
        let body = matches!(
            self,
            Op::CACHE_POP
                | Op::CACHE_POP_ACK
                | Op::CACHE_EVICT
                | Op::CACHE_EVICT_ACK
                | Op::CACHE_EVICT_CASE2
                | Op::SETVALID_INSWITCH_ACK
                | Op::NETCACHE_CACHE_POP
                | Op::NETCACHE_CACHE_POP_ACK
                | Op::NETCACHE_CACHE_POP_FINISH
                | Op::NETCACHE_CACHE_POP_FINISH_ACK
                | Op::NETCACHE_CACHE_EVICT
                | Op::NETCACHE_CACHE_EVICT_ACK
                | Op::SCANREQ
                | Op::TERN_SNAPSHOT_ACK
                | Op::TERN_MAXSEQ_ACK
        );
        let extra = match self {
            Op::GETRES_LATEST_SEQ_INSWITCH_CASE1
            | Op::GETRES_DELETED_SEQ_INSWITCH_CASE1
            | Op::PUTREQ_SEQ_INSWITCH_CASE1
            | Op::DELREQ_SEQ_INSWITCH_CASE1 => Some(ExtraKind::Clone),
            Op::CACHE_EVICT_LOADFREQ_INSWITCH_ACK => Some(ExtraKind::Frequency),
            Op::SETVALID_INSWITCH => Some(ExtraKind::ValidValue),
            _ => None,
        };
        // LOADREQ (0x0310) has a zero nibble but, per FarReach's parser, carries a value like
        // PUTREQ.
        let nibble = if body {
            0
        } else if self == Op::LOADREQ {
            1
        } else {
            code & 0xF
        };
        Layout {
            value: nibble & 1 != 0,
            shadow: nibble != 0,
            seq: nibble & 2 != 0,
            inswitch: nibble & 4 != 0,
            stat: nibble & 8 != 0,
            extra,
            body,
        }
    }
}

impl Op {
    /// The shadow type this op carries: its own code, except TERN_PUTREQ_LARGE_SEQ, which keeps
    /// the client's PUTREQ (the switch does not rewrite what follows the value).
    pub fn shadow_code(self) -> u16 {
        match self {
            Op::TERN_PUTREQ_LARGE_SEQ => Op::PUTREQ.code(),
            op => op.code(),
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (0x{:04x})", self.name(), self.code())
    }
}

/// `seq_hdr`: the record's sequence number and the snapshot token of the write.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct SeqHdr {
    /// Sequence number (the switch wraps it 0x7FFFFFFF → 0).
    pub seq: u32,
    /// Snapshot id the write belongs to.
    pub snapshot_token: u32,
}

/// `inswitch_hdr`: metadata the switch carries between its pipelines and to its OS.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct InSwitchHdr {
    /// Snapshot in progress (1 bit).
    pub snapshot_flag: bool,
    /// The key hit `cache_lookup_tbl` (1 bit).
    pub is_cached: bool,
    /// The packet was sampled for the CM / frequency counters (1 bit).
    pub is_sampled: bool,
    /// Client session id (10 bits, ≤ 1023).
    pub client_sid: u16,
    /// Hot threshold for the count-min check.
    pub hot_threshold: u16,
    /// The four count-min hash values.
    pub hashval_for_cm: [u16; 4],
    /// Snapshot id.
    pub snapshot_token: u32,
    /// Hash selecting the per-bucket seq counter.
    pub hashval_for_seq: u16,
    /// Cache slot index.
    pub idx: u16,
}

/// Largest `client_sid` (10 bits).
pub const MAX_CLIENT_SID: u16 = 0x3FF;

/// `stat_hdr`: whether the record exists and who served it.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct StatHdr {
    /// `true` = the key exists, `false` = deleted / never written.
    pub exists: bool,
    /// Server index that served the request, or [`NODEIDX_SWITCH`].
    pub nodeidx: u16,
}

/// `clone_hdr`, carried by the CASE1 reports.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct CloneHdr {
    /// Remaining extra clones against loss.
    pub clonenum_for_pktloss: u16,
    /// UDP port of the client that sent the write.
    pub client_udpport: u16,
    /// The seq the switch assigned to the write.
    pub assignedseq: u32,
}

/// The one trailing header of a few op codes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Extra {
    /// `clone_hdr`.
    Clone(CloneHdr),
    /// `frequency_hdr`.
    Frequency(u32),
    /// `validvalue_hdr` (0 unusable, 1 valid, 3 being evicted; 2 reserved).
    ValidValue(u8),
}

impl Extra {
    fn kind(&self) -> ExtraKind {
        match self {
            Extra::Clone(_) => ExtraKind::Clone,
            Extra::Frequency(_) => ExtraKind::Frequency,
            Extra::ValidValue(_) => ExtraKind::ValidValue,
        }
    }
}

/// One protocol message (the UDP payload).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Message {
    /// Op code.
    pub op: Op,
    /// Key (ignored by tern's control ops but always on the wire).
    pub key: Key,
    /// Value, present iff the op's layout has one (≤ [`MAX_VALUE_LEN`] bytes).
    pub value: Option<Vec<u8>>,
    /// Sequence header, present iff the layout has one.
    pub seq: Option<SeqHdr>,
    /// In-switch header, present iff the layout has one.
    pub inswitch: Option<InSwitchHdr>,
    /// Stat header, present iff the layout has one.
    pub stat: Option<StatHdr>,
    /// Trailing header, present iff the layout names one.
    pub extra: Option<Extra>,
    /// Opaque body of a control op (empty otherwise).
    pub body: Vec<u8>,
}

impl Message {
    /// A message with only the op header; add the other headers with the builder methods.
    pub fn new(op: Op, key: Key) -> Message {
        Message {
            op,
            key,
            value: None,
            seq: None,
            inswitch: None,
            stat: None,
            extra: None,
            body: Vec::new(),
        }
    }

    /// Sets the value.
    pub fn with_value(mut self, value: impl Into<Vec<u8>>) -> Message {
        self.value = Some(value.into());
        self
    }

    /// Sets the sequence header.
    pub fn with_seq(mut self, seq: u32, snapshot_token: u32) -> Message {
        self.seq = Some(SeqHdr {
            seq,
            snapshot_token,
        });
        self
    }

    /// Sets the stat header.
    pub fn with_stat(mut self, exists: bool, nodeidx: u16) -> Message {
        self.stat = Some(StatHdr { exists, nodeidx });
        self
    }

    /// Sets the in-switch header.
    pub fn with_inswitch(mut self, h: InSwitchHdr) -> Message {
        self.inswitch = Some(h);
        self
    }

    /// Sets the trailing header.
    pub fn with_extra(mut self, e: Extra) -> Message {
        self.extra = Some(e);
        self
    }

    /// Sets the control body.
    pub fn with_body(mut self, body: impl Into<Vec<u8>>) -> Message {
        self.body = body.into();
        self
    }

    /// Whether a switch can parse the whole message (its value, if any, is ≤ 128 bytes).
    pub fn fits_switch(&self) -> bool {
        match &self.value {
            Some(v) => v.len() <= SWITCH_MAX_VALUE_LEN,
            None => true,
        }
    }

    /// Checks that the headers present match the op's layout and that every field is in range.
    pub fn validate(&self) -> Result<(), EncodeError> {
        let l = self.op.layout();
        let check = |present: bool, want: bool, header: &'static str| {
            if present == want {
                Ok(())
            } else {
                Err(EncodeError::Layout {
                    op: self.op,
                    header,
                    expected: want,
                })
            }
        };
        check(self.value.is_some(), l.value, "value")?;
        check(self.seq.is_some(), l.seq, "seq_hdr")?;
        check(self.inswitch.is_some(), l.inswitch, "inswitch_hdr")?;
        check(self.stat.is_some(), l.stat, "stat_hdr")?;
        check(!self.body.is_empty() && !l.body, false, "body")?;
        match (self.extra.as_ref().map(Extra::kind), l.extra) {
            (a, b) if a == b => {}
            (a, _) => {
                return Err(EncodeError::Layout {
                    op: self.op,
                    header: "trailing header",
                    expected: a.is_none(),
                })
            }
        }
        if let Some(v) = &self.value {
            if v.len() > MAX_VALUE_LEN {
                return Err(EncodeError::ValueTooLong { len: v.len() });
            }
        }
        if self.body.len() > MAX_BODY_LEN {
            return Err(EncodeError::BodyTooLong {
                len: self.body.len(),
            });
        }
        if let Some(h) = &self.inswitch {
            if h.client_sid > MAX_CLIENT_SID {
                return Err(EncodeError::ClientSid { sid: h.client_sid });
            }
        }
        Ok(())
    }

    /// Encoded length in bytes (assuming [`Message::validate`] passes).
    pub fn encoded_len(&self) -> usize {
        let l = self.op.layout();
        let mut n = OP_HDR_LEN;
        if let Some(v) = &self.value {
            n += 2 + v.len().div_ceil(8) * 8;
        }
        if l.shadow {
            n += 2;
        }
        n += self.seq.map_or(0, |_| SEQ_HDR_LEN);
        n += self.inswitch.map_or(0, |_| INSWITCH_HDR_LEN);
        n += self.stat.map_or(0, |_| STAT_HDR_LEN);
        n += match self.extra {
            None => 0,
            Some(Extra::Clone(_)) => CLONE_HDR_LEN,
            Some(Extra::Frequency(_)) => 4,
            Some(Extra::ValidValue(_)) => 1,
        };
        n + self.body.len()
    }

    /// Appends the encoded message to `out`.
    pub fn encode_into(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        self.validate()?;
        let l = self.op.layout();
        out.reserve(self.encoded_len());
        out.extend_from_slice(&self.op.code().to_be_bytes());
        out.extend_from_slice(&self.key.0);
        let large = self.op == Op::TERN_PUTREQ_LARGE_SEQ;
        if large {
            if let Some(s) = &self.seq {
                out.extend_from_slice(&s.seq.to_be_bytes());
                out.extend_from_slice(&s.snapshot_token.to_be_bytes());
            }
        }
        if let Some(v) = &self.value {
            // Bounded by MAX_VALUE_LEN (checked by validate), so this fits in u16.
            out.extend_from_slice(&(v.len() as u16).to_be_bytes());
            out.extend_from_slice(v);
            let padded = out.len() + v.len().div_ceil(8) * 8 - v.len();
            out.resize(padded, 0);
        }
        if l.shadow {
            out.extend_from_slice(&self.op.shadow_code().to_be_bytes());
        }
        if let Some(s) = self.seq.as_ref().filter(|_| !large) {
            out.extend_from_slice(&s.seq.to_be_bytes());
            out.extend_from_slice(&s.snapshot_token.to_be_bytes());
        }
        if let Some(h) = &self.inswitch {
            let bits: u16 = (u16::from(h.snapshot_flag) << 15)
                | (u16::from(h.is_cached) << 14)
                | (u16::from(h.is_sampled) << 13)
                | ((h.client_sid & MAX_CLIENT_SID) << 3);
            out.extend_from_slice(&bits.to_be_bytes());
            out.extend_from_slice(&h.hot_threshold.to_be_bytes());
            for v in h.hashval_for_cm {
                out.extend_from_slice(&v.to_be_bytes());
            }
            out.extend_from_slice(&h.snapshot_token.to_be_bytes());
            out.extend_from_slice(&h.hashval_for_seq.to_be_bytes());
            out.extend_from_slice(&h.idx.to_be_bytes());
        }
        if let Some(s) = &self.stat {
            out.push(u8::from(s.exists));
            out.extend_from_slice(&s.nodeidx.to_be_bytes());
            out.push(0);
        }
        match &self.extra {
            None => {}
            Some(Extra::Clone(c)) => {
                out.extend_from_slice(&c.clonenum_for_pktloss.to_be_bytes());
                out.extend_from_slice(&c.client_udpport.to_be_bytes());
                out.extend_from_slice(&c.assignedseq.to_be_bytes());
            }
            Some(Extra::Frequency(f)) => out.extend_from_slice(&f.to_be_bytes()),
            Some(Extra::ValidValue(v)) => out.push(*v),
        }
        out.extend_from_slice(&self.body);
        Ok(())
    }

    /// The encoded message.
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        let mut out = Vec::with_capacity(self.encoded_len());
        self.encode_into(&mut out)?;
        Ok(out)
    }

    /// Decodes one whole UDP payload. Trailing bytes after the last header are an error.
    pub fn decode(buf: &[u8]) -> Result<Message, DecodeError> {
        let mut r = Reader { buf, pos: 0 };
        let code = r.u16("op_hdr.optype")?;
        let op = Op::from_code(code).ok_or(DecodeError::UnknownOp { code, offset: 0 })?;
        let mut key = [0u8; KEY_LEN];
        key.copy_from_slice(r.take(KEY_LEN, "op_hdr.key")?);
        let l = op.layout();
        let mut m = Message::new(op, Key(key));
        let large = op == Op::TERN_PUTREQ_LARGE_SEQ;
        if large {
            m.seq = Some(SeqHdr {
                seq: r.u32("seq_hdr.seq")?,
                snapshot_token: r.u32("seq_hdr.snapshot_token")?,
            });
        }
        if l.value {
            let at = r.pos;
            let len = usize::from(r.u16("vallen_hdr")?);
            if len > MAX_VALUE_LEN {
                return Err(DecodeError::ValueTooLong {
                    len,
                    max: MAX_VALUE_LEN,
                    offset: at,
                });
            }
            let words = r.take(len.div_ceil(8) * 8, "value words")?;
            m.value = Some(words[..len].to_vec());
        }
        if l.shadow {
            let at = r.pos;
            let shadow = r.u16("shadowtype_hdr")?;
            if shadow != op.shadow_code() {
                return Err(DecodeError::ShadowMismatch {
                    op: code,
                    shadow,
                    offset: at,
                });
            }
        }
        if l.seq && !large {
            m.seq = Some(SeqHdr {
                seq: r.u32("seq_hdr.seq")?,
                snapshot_token: r.u32("seq_hdr.snapshot_token")?,
            });
        }
        if l.inswitch {
            let at = r.pos;
            let b = r.take(INSWITCH_HDR_LEN, "inswitch_hdr")?;
            let be16 = |i: usize| u16::from_be_bytes([b[i], b[i + 1]]);
            let bits = be16(0);
            if bits & 0x7 != 0 {
                return Err(DecodeError::NonZeroPadding {
                    what: "inswitch_hdr.padding",
                    offset: at + 1,
                });
            }
            m.inswitch = Some(InSwitchHdr {
                snapshot_flag: bits & 0x8000 != 0,
                is_cached: bits & 0x4000 != 0,
                is_sampled: bits & 0x2000 != 0,
                client_sid: (bits >> 3) & MAX_CLIENT_SID,
                hot_threshold: be16(2),
                hashval_for_cm: [be16(4), be16(6), be16(8), be16(10)],
                snapshot_token: u32::from_be_bytes([b[12], b[13], b[14], b[15]]),
                hashval_for_seq: be16(16),
                idx: be16(18),
            });
        }
        if l.stat {
            let at = r.pos;
            let b = r.take(STAT_HDR_LEN, "stat_hdr")?;
            let exists = match b[0] {
                0 => false,
                1 => true,
                v => {
                    return Err(DecodeError::BadStat {
                        value: v,
                        offset: at,
                    })
                }
            };
            if b[3] != 0 {
                return Err(DecodeError::NonZeroPadding {
                    what: "stat_hdr.padding",
                    offset: at + 3,
                });
            }
            m.stat = Some(StatHdr {
                exists,
                nodeidx: u16::from_be_bytes([b[1], b[2]]),
            });
        }
        m.extra = match l.extra {
            None => None,
            Some(ExtraKind::Clone) => Some(Extra::Clone(CloneHdr {
                clonenum_for_pktloss: r.u16("clone_hdr.clonenum_for_pktloss")?,
                client_udpport: r.u16("clone_hdr.client_udpport")?,
                assignedseq: r.u32("clone_hdr.assignedseq_for_farreach")?,
            })),
            Some(ExtraKind::Frequency) => Some(Extra::Frequency(r.u32("frequency_hdr")?)),
            Some(ExtraKind::ValidValue) => Some(Extra::ValidValue(r.take(1, "validvalue_hdr")?[0])),
        };
        let rest = &buf[r.pos..];
        if l.body {
            if rest.len() > MAX_BODY_LEN {
                return Err(DecodeError::BodyTooLong {
                    len: rest.len(),
                    offset: r.pos,
                });
            }
            m.body = rest.to_vec();
        } else if !rest.is_empty() {
            return Err(DecodeError::TrailingBytes {
                op: code,
                offset: r.pos,
                count: rest.len(),
            });
        }
        Ok(m)
    }
}

/// A field that runs past the end of a payload: converted into each decoder's own error
/// (`DecodeError::Truncated`, `madinc::MadError::Truncated`).
pub(crate) struct Short {
    pub(crate) what: &'static str,
    pub(crate) offset: usize,
    pub(crate) need: usize,
    pub(crate) have: usize,
}

impl From<Short> for DecodeError {
    fn from(s: Short) -> Self {
        DecodeError::Truncated {
            what: s.what,
            offset: s.offset,
            need: s.need,
            have: s.have,
        }
    }
}

/// A cursor over a payload's big-endian fields (this protocol's and MADINC's decoders).
pub(crate) struct Reader<'a> {
    pub(crate) buf: &'a [u8],
    pub(crate) pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], Short> {
        let have = self.buf.len() - self.pos;
        if have < n {
            return Err(Short {
                what,
                offset: self.pos,
                need: n,
                have,
            });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    pub(crate) fn u16(&mut self, what: &'static str) -> Result<u16, Short> {
        let b = self.take(2, what)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }
    pub(crate) fn u32(&mut self, what: &'static str) -> Result<u32, Short> {
        let b = self.take(4, what)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
}

/// Why a payload could not be decoded; every variant names the byte offset.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The payload ends inside a header.
    #[error("truncated {what} at byte {offset}: need {need} bytes, have {have}")]
    Truncated {
        /// The header or field being read.
        what: &'static str,
        /// Byte offset where it starts.
        offset: usize,
        /// Bytes needed.
        need: usize,
        /// Bytes left.
        have: usize,
    },
    /// The op code is not in the protocol.
    #[error("unknown op code 0x{code:04x} at byte {offset}")]
    UnknownOp {
        /// The code read.
        code: u16,
        /// Its offset (always 0).
        offset: usize,
    },
    /// `vallen` exceeds [`MAX_VALUE_LEN`].
    #[error("value length {len} at byte {offset} exceeds the maximum of {max} bytes")]
    ValueTooLong {
        /// Declared length.
        len: usize,
        /// The maximum.
        max: usize,
        /// Offset of `vallen_hdr`.
        offset: usize,
    },
    /// The shadow type differs from the op code.
    #[error("shadowtype 0x{shadow:04x} at byte {offset} does not match op code 0x{op:04x}")]
    ShadowMismatch {
        /// The op code.
        op: u16,
        /// The shadow type read.
        shadow: u16,
        /// Offset of `shadowtype_hdr`.
        offset: usize,
    },
    /// `stat` is neither 0 nor 1.
    #[error("stat_hdr.stat at byte {offset} is {value}, expected 0 (deleted) or 1 (exists)")]
    BadStat {
        /// The value read.
        value: u8,
        /// Offset of `stat_hdr`.
        offset: usize,
    },
    /// Padding bits are not zero.
    #[error("{what} at byte {offset} is not zero")]
    NonZeroPadding {
        /// Which padding.
        what: &'static str,
        /// Its offset.
        offset: usize,
    },
    /// Bytes follow the last header of an op that has no body.
    #[error("{count} trailing bytes at byte {offset} after the last header of op 0x{op:04x}")]
    TrailingBytes {
        /// The op code.
        op: u16,
        /// Where the extra bytes start.
        offset: usize,
        /// How many.
        count: usize,
    },
    /// A control body is longer than [`MAX_BODY_LEN`].
    #[error("control body of {len} bytes at byte {offset} exceeds the maximum of {MAX_BODY_LEN}")]
    BodyTooLong {
        /// Its length.
        len: usize,
        /// Where it starts.
        offset: usize,
    },
}

/// Why a message could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// A header is present that the op does not carry, or missing when it does.
    #[error("op {op}: {header} must be {}", if *expected { "present" } else { "absent" })]
    Layout {
        /// The op.
        op: Op,
        /// The header.
        header: &'static str,
        /// Whether it must be present.
        expected: bool,
    },
    /// The value exceeds [`MAX_VALUE_LEN`].
    #[error("value of {len} bytes exceeds the maximum of {MAX_VALUE_LEN}")]
    ValueTooLong {
        /// Its length.
        len: usize,
    },
    /// The body exceeds [`MAX_BODY_LEN`].
    #[error("control body of {len} bytes exceeds the maximum of {MAX_BODY_LEN}")]
    BodyTooLong {
        /// Its length.
        len: usize,
    },
    /// `client_sid` does not fit in 10 bits.
    #[error("inswitch_hdr.client_sid {sid} does not fit in 10 bits (max {MAX_CLIENT_SID})")]
    ClientSid {
        /// The value.
        sid: u16,
    },
}
