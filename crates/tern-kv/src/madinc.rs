//! MADINC's multitenant cache protocol as an additive extension of tern's key-value wire format:
//! the `madinc_hdr` (op, 16-bit tenant id, 32-bit tenant secret tag, 16-byte key) and the bodies
//! of the read/write, hot-report, cache-control and page-allocation operations, with strict
//! encode/decode (truncated, oversized, trailing or unknown → an error naming the field and byte).
//!
//! The op codes live in `0x0e00..=0x0e24`, a block that FarReach's op space and tern's
//! `protocol::Op` never use, so one UDP port range carries both and a switch tells them apart by
//! the first two bytes. See `crates/tern-kv/PROTOCOL.md` ("MADINC extension").

use crate::protocol::{Key, Reader, Short, KEY_LEN, SWITCH_MAX_VALUE_LEN};

/// Bytes of `madinc_hdr`: op u16, tenant u16, tag u32, key 16.
pub const MADINC_HDR_LEN: usize = 2 + 2 + 4 + KEY_LEN;
/// Largest MADINC value: the thesis's fixed 128-byte value (16 words of 8 bytes).
pub const MADINC_MAX_VALUE_LEN: usize = SWITCH_MAX_VALUE_LEN;
/// `source` of a reply served by a switch cache.
pub const SOURCE_SWITCH: u16 = 0xFFFF;
/// Values per cache page (the thesis's page size).
pub const PAGE_VALUES: u32 = 128;

crate::protocol::op_enum! {
    /// The MADINC op codes.
    MadOp;
    /// client → store (a switch on the path may answer).
    READ_REQUEST = 0x0e00,
    /// answer to READ_REQUEST: stat, source, value.
    READ_REPLY = 0x0e01,
    /// client → store: value (a switch holding the item invalidates its copy).
    WRITE_REQUEST = 0x0e02,
    /// answer to WRITE_REQUEST: stat, source.
    WRITE_REPLY = 0x0e03,
    /// switch → controller: the (tenant, key) became hot on a switch.
    HOT_REPORT = 0x0e04,
    /// switch agent → controller: a switch's HOT_REPORT numbered by the agent (its id) for the
    /// acknowledged control link, so two reports of one item are never taken for one.
    HOT_REPORT_NUMBERED = 0x0e05,
    /// controller → switch: put an item in a slot.
    CONTROL_INSERT = 0x0e10,
    /// controller → switch: remove the item from its slot.
    CONTROL_EVICT = 0x0e11,
    /// controller → switch: a new item replaces the one in a slot.
    CONTROL_REPLACE = 0x0e12,
    /// controller → switch: a new value for a cached item.
    CONTROL_UPDATE = 0x0e13,
    /// switch/control plane → controller: the answer to a control message (by its id).
    CONTROL_REPLY = 0x0e14,
    /// controller → switch: prepare a slot for a value read after this point: the (tenant,
    /// key) → slot entry installed if absent, the copy invalid and the slot's write mark
    /// cleared (a later CONTROL_UPDATE applies only while no write has marked it since).
    CONTROL_ARM = 0x0e15,
    /// control plane → controller: a page joins a tenant's page table.
    PAGE_ALLOC = 0x0e20,
    /// control plane → controller: a page leaves a tenant's page table.
    PAGE_FREE = 0x0e21,
    /// controller → switch: a tenant arrives (the header's tag is its secret).
    TENANT_ADD = 0x0e22,
    /// controller → switch: a tenant leaves.
    TENANT_DEL = 0x0e23,
    /// controller → switch: clear the count-min sketch and Bloom filter (a new detection period).
    SKETCH_RESET = 0x0e24,
}

impl std::fmt::Display for MadOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (0x{:04x})", self.name(), self.code())
    }
}

/// The body of a MADINC message, one variant per op.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MadBody {
    /// READ_REQUEST (no body).
    ReadRequest,
    /// READ_REPLY: `found` (stat 1) or not (stat 0, empty value), who answered.
    ReadReply {
        /// The item exists.
        found: bool,
        /// [`SOURCE_SWITCH`] or the server index.
        source: u16,
        /// The value (≤ 128 bytes).
        value: Vec<u8>,
    },
    /// WRITE_REQUEST.
    WriteRequest {
        /// The value (≤ 128 bytes).
        value: Vec<u8>,
    },
    /// WRITE_REPLY.
    WriteReply {
        /// The write was stored.
        stored: bool,
        /// The server index.
        source: u16,
    },
    /// HOT_REPORT (`id` = `None`: as the switch's clone carries it) or HOT_REPORT_NUMBERED
    /// (`id` = the agent's report number, unique per agent: acknowledged and deduplicated by it).
    HotReport {
        /// The reporting switch.
        switch: u16,
        /// Its count-min estimate when the report was made.
        frequency: u16,
        /// The switch agent's number for this report on its control link.
        id: Option<u32>,
    },
    /// CONTROL_INSERT / CONTROL_REPLACE / CONTROL_UPDATE (same layout, told apart by the op).
    Store {
        /// Which of the three.
        op: StoreOp,
        /// The control message id (echoed in CONTROL_REPLY; a retry reuses it).
        id: u32,
        /// The target switch.
        switch: u16,
        /// The global value slot on that switch (page × 128 + offset).
        slot: u32,
        /// The value.
        value: Vec<u8>,
    },
    /// CONTROL_EVICT.
    Evict {
        /// The control message id.
        id: u32,
        /// The switch.
        switch: u16,
        /// The slot.
        slot: u32,
    },
    /// CONTROL_ARM.
    Arm {
        /// The control message id.
        id: u32,
        /// The switch.
        switch: u16,
        /// The slot.
        slot: u32,
    },
    /// CONTROL_REPLY.
    Reply {
        /// The id of the message answered.
        id: u32,
        /// The switch (or control plane) answering.
        switch: u16,
        /// The op answered.
        acked: MadOp,
        /// 0 = done; anything else is an error code ([`ReplyStatus`]).
        status: u8,
    },
    /// PAGE_ALLOC / PAGE_FREE.
    Page {
        /// Alloc (true) or free.
        alloc: bool,
        /// The control message id.
        id: u32,
        /// The switch holding the page.
        switch: u16,
        /// The page index on that switch.
        page: u32,
    },
    /// TENANT_ADD / TENANT_DEL (the tenant's secret is the header's tag).
    Tenant {
        /// Add (true) or remove.
        add: bool,
        /// The control message id.
        id: u32,
        /// The switch.
        switch: u16,
        /// The tenant's hot threshold (0 for TENANT_DEL).
        hot_threshold: u16,
    },
    /// SKETCH_RESET.
    Reset {
        /// The control message id.
        id: u32,
        /// The switch.
        switch: u16,
    },
}

/// Which value-carrying control op a [`MadBody::Store`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreOp {
    /// CONTROL_INSERT.
    Insert,
    /// CONTROL_REPLACE.
    Replace,
    /// CONTROL_UPDATE.
    Update,
}

/// CONTROL_REPLY status codes.
pub struct ReplyStatus;

impl ReplyStatus {
    /// Done.
    pub const OK: u8 = 0;
    /// The tenant is over its quota.
    pub const QUOTA: u8 = 1;
    /// Unknown tenant or forged tag.
    pub const TENANT: u8 = 2;
    /// The slot is not in one of the tenant's pages.
    pub const SLOT: u8 = 3;
    /// The item is already cached on another switch.
    pub const DUPLICATE: u8 = 4;
    /// The switch could not apply it (a runtime call failed).
    pub const FAILED: u8 = 5;
    /// A CONTROL_UPDATE came too late: a write passed the switch (request or reply) since the
    /// slot was armed, so the value may be older than the store's; the copy stays invalid.
    pub const STALE: u8 = 6;
}

/// One MADINC message: the header fields and the op's body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MadMessage {
    /// Tenant id (65,536 tenants).
    pub tenant: u16,
    /// The tenant's secret tag; a switch drops a packet whose tag is not its tenant's.
    pub tag: u32,
    /// The key.
    pub key: Key,
    /// The op and its body.
    pub body: MadBody,
}

/// Why a MADINC payload could not be decoded or encoded; every decode error names the field and
/// its byte offset.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MadError {
    /// The payload ends inside a field.
    #[error("truncated {what} at byte {offset}: need {need} bytes, have {have}")]
    Truncated {
        /// The field.
        what: &'static str,
        /// Its offset.
        offset: usize,
        /// Bytes needed.
        need: usize,
        /// Bytes left.
        have: usize,
    },
    /// Not a MADINC op code.
    #[error("unknown MADINC op code 0x{code:04x} at byte 0")]
    UnknownOp {
        /// The code read.
        code: u16,
    },
    /// A value longer than 128 bytes.
    #[error("value length {len} at byte {offset} exceeds the MADINC maximum of {MADINC_MAX_VALUE_LEN} bytes")]
    ValueTooLong {
        /// The length.
        len: usize,
        /// Offset of `vallen` (0 when encoding).
        offset: usize,
    },
    /// A flag byte that is neither 0 nor 1.
    #[error("{what} at byte {offset} is {value}, expected 0 or 1")]
    BadFlag {
        /// The field.
        what: &'static str,
        /// Its offset.
        offset: usize,
        /// The value read.
        value: u8,
    },
    /// Bytes after the op's last field.
    #[error("{count} trailing bytes at byte {offset} after the last field of {op}")]
    TrailingBytes {
        /// The op.
        op: MadOp,
        /// Where they start.
        offset: usize,
        /// How many.
        count: usize,
    },
    /// A READ_REPLY that says "not found" but carries a value.
    #[error("READ_REPLY at byte {offset}: stat 0 (not found) with a {len}-byte value")]
    ValueWithoutItem {
        /// Offset of `vallen`.
        offset: usize,
        /// The value length.
        len: usize,
    },
    /// CONTROL_REPLY names an op that is not a MADINC op.
    #[error("CONTROL_REPLY acked op 0x{code:04x} at byte {offset} is not a MADINC op")]
    UnknownAcked {
        /// The code.
        code: u16,
        /// Its offset.
        offset: usize,
    },
}

/// Whether the first two bytes of a payload are a MADINC op code (a switch or server uses this to
/// choose between this decoder and `protocol::Message::decode`).
pub fn is_madinc(buf: &[u8]) -> bool {
    buf.len() >= 2 && MadOp::from_code(u16::from_be_bytes([buf[0], buf[1]])).is_some()
}

impl MadBody {
    /// The op of this body.
    pub fn op(&self) -> MadOp {
        match self {
            MadBody::ReadRequest => MadOp::READ_REQUEST,
            MadBody::ReadReply { .. } => MadOp::READ_REPLY,
            MadBody::WriteRequest { .. } => MadOp::WRITE_REQUEST,
            MadBody::WriteReply { .. } => MadOp::WRITE_REPLY,
            MadBody::HotReport { id: None, .. } => MadOp::HOT_REPORT,
            MadBody::HotReport { id: Some(_), .. } => MadOp::HOT_REPORT_NUMBERED,
            MadBody::Store { op, .. } => match op {
                StoreOp::Insert => MadOp::CONTROL_INSERT,
                StoreOp::Replace => MadOp::CONTROL_REPLACE,
                StoreOp::Update => MadOp::CONTROL_UPDATE,
            },
            MadBody::Evict { .. } => MadOp::CONTROL_EVICT,
            MadBody::Arm { .. } => MadOp::CONTROL_ARM,
            MadBody::Reply { .. } => MadOp::CONTROL_REPLY,
            MadBody::Page { alloc: true, .. } => MadOp::PAGE_ALLOC,
            MadBody::Page { alloc: false, .. } => MadOp::PAGE_FREE,
            MadBody::Tenant { add: true, .. } => MadOp::TENANT_ADD,
            MadBody::Tenant { add: false, .. } => MadOp::TENANT_DEL,
            MadBody::Reset { .. } => MadOp::SKETCH_RESET,
        }
    }
}

fn put_value(out: &mut Vec<u8>, v: &[u8]) -> Result<(), MadError> {
    if v.len() > MADINC_MAX_VALUE_LEN {
        return Err(MadError::ValueTooLong {
            len: v.len(),
            offset: 0,
        });
    }
    out.extend_from_slice(&(v.len() as u16).to_be_bytes());
    out.extend_from_slice(v);
    out.resize(out.len() + (v.len().div_ceil(8) * 8 - v.len()), 0);
    Ok(())
}

impl MadMessage {
    /// Encodes the message (values are zero-padded to whole 8-byte words, as the switch stores
    /// them). Fails only for a value longer than 128 bytes.
    pub fn encode(&self) -> Result<Vec<u8>, MadError> {
        let mut out = Vec::with_capacity(MADINC_HDR_LEN + 2 + MADINC_MAX_VALUE_LEN + 16);
        out.extend_from_slice(&self.body.op().code().to_be_bytes());
        out.extend_from_slice(&self.tenant.to_be_bytes());
        out.extend_from_slice(&self.tag.to_be_bytes());
        out.extend_from_slice(&self.key.0);
        match &self.body {
            MadBody::ReadRequest => {}
            MadBody::ReadReply {
                found,
                source,
                value,
            } => {
                if !found && !value.is_empty() {
                    return Err(MadError::ValueWithoutItem {
                        offset: 0,
                        len: value.len(),
                    });
                }
                out.push(u8::from(*found));
                out.extend_from_slice(&source.to_be_bytes());
                put_value(&mut out, value)?;
            }
            MadBody::WriteRequest { value } => put_value(&mut out, value)?,
            MadBody::WriteReply { stored, source } => {
                out.push(u8::from(*stored));
                out.extend_from_slice(&source.to_be_bytes());
            }
            MadBody::HotReport {
                switch,
                frequency,
                id,
            } => {
                out.extend_from_slice(&switch.to_be_bytes());
                out.extend_from_slice(&frequency.to_be_bytes());
                if let Some(id) = id {
                    out.extend_from_slice(&id.to_be_bytes());
                }
            }
            MadBody::Store {
                id,
                switch,
                slot,
                value,
                ..
            } => {
                out.extend_from_slice(&id.to_be_bytes());
                out.extend_from_slice(&switch.to_be_bytes());
                out.extend_from_slice(&slot.to_be_bytes());
                put_value(&mut out, value)?;
            }
            MadBody::Evict { id, switch, slot } | MadBody::Arm { id, switch, slot } => {
                out.extend_from_slice(&id.to_be_bytes());
                out.extend_from_slice(&switch.to_be_bytes());
                out.extend_from_slice(&slot.to_be_bytes());
            }
            MadBody::Reply {
                id,
                switch,
                acked,
                status,
            } => {
                out.extend_from_slice(&id.to_be_bytes());
                out.extend_from_slice(&switch.to_be_bytes());
                out.extend_from_slice(&acked.code().to_be_bytes());
                out.push(*status);
            }
            MadBody::Page {
                id, switch, page, ..
            } => {
                out.extend_from_slice(&id.to_be_bytes());
                out.extend_from_slice(&switch.to_be_bytes());
                out.extend_from_slice(&page.to_be_bytes());
            }
            MadBody::Tenant {
                id,
                switch,
                hot_threshold,
                ..
            } => {
                out.extend_from_slice(&id.to_be_bytes());
                out.extend_from_slice(&switch.to_be_bytes());
                out.extend_from_slice(&hot_threshold.to_be_bytes());
            }
            MadBody::Reset { id, switch } => {
                out.extend_from_slice(&id.to_be_bytes());
                out.extend_from_slice(&switch.to_be_bytes());
            }
        }
        Ok(out)
    }

    /// Decodes one whole UDP payload; never panics. Bytes after the op's last field are an
    /// error, as are values over 128 bytes and flags other than 0/1. The padding of the last
    /// value word is not checked (a switch replies with whatever its register word holds).
    pub fn decode(buf: &[u8]) -> Result<MadMessage, MadError> {
        let mut r = Reader { buf, pos: 0 };
        let code = r.u16("madinc_hdr.op")?;
        let op = MadOp::from_code(code).ok_or(MadError::UnknownOp { code })?;
        let tenant = r.u16("madinc_hdr.tenant")?;
        let tag = r.u32("madinc_hdr.tag")?;
        let mut key = [0u8; KEY_LEN];
        key.copy_from_slice(r.take(KEY_LEN, "madinc_hdr.key")?);
        let body = match op {
            MadOp::READ_REQUEST => MadBody::ReadRequest,
            MadOp::READ_REPLY => {
                let found = r.flag("read_reply.stat")?;
                let source = r.u16("read_reply.source")?;
                let at = r.pos;
                let value = r.value()?;
                if !found && !value.is_empty() {
                    return Err(MadError::ValueWithoutItem {
                        offset: at,
                        len: value.len(),
                    });
                }
                MadBody::ReadReply {
                    found,
                    source,
                    value,
                }
            }
            MadOp::WRITE_REQUEST => MadBody::WriteRequest { value: r.value()? },
            MadOp::WRITE_REPLY => MadBody::WriteReply {
                stored: r.flag("write_reply.stat")?,
                source: r.u16("write_reply.source")?,
            },
            MadOp::HOT_REPORT => MadBody::HotReport {
                switch: r.u16("hot_report.switch")?,
                frequency: r.u16("hot_report.frequency")?,
                id: None,
            },
            MadOp::HOT_REPORT_NUMBERED => MadBody::HotReport {
                switch: r.u16("hot_report.switch")?,
                frequency: r.u16("hot_report.frequency")?,
                id: Some(r.u32("hot_report.id")?),
            },
            MadOp::CONTROL_INSERT | MadOp::CONTROL_REPLACE | MadOp::CONTROL_UPDATE => {
                let id = r.u32("control.id")?;
                let switch = r.u16("control.switch")?;
                let slot = r.u32("control.slot")?;
                let value = r.value()?;
                let op = match op {
                    MadOp::CONTROL_INSERT => StoreOp::Insert,
                    MadOp::CONTROL_REPLACE => StoreOp::Replace,
                    _ => StoreOp::Update,
                };
                MadBody::Store {
                    op,
                    id,
                    switch,
                    slot,
                    value,
                }
            }
            MadOp::CONTROL_EVICT => MadBody::Evict {
                id: r.u32("control.id")?,
                switch: r.u16("control.switch")?,
                slot: r.u32("control.slot")?,
            },
            MadOp::CONTROL_ARM => MadBody::Arm {
                id: r.u32("control.id")?,
                switch: r.u16("control.switch")?,
                slot: r.u32("control.slot")?,
            },
            MadOp::CONTROL_REPLY => {
                let id = r.u32("control.id")?;
                let switch = r.u16("control.switch")?;
                let at = r.pos;
                let c = r.u16("control_reply.acked")?;
                let acked = MadOp::from_code(c).ok_or(MadError::UnknownAcked {
                    code: c,
                    offset: at,
                })?;
                let status = r.take(1, "control_reply.status")?[0];
                MadBody::Reply {
                    id,
                    switch,
                    acked,
                    status,
                }
            }
            MadOp::PAGE_ALLOC | MadOp::PAGE_FREE => MadBody::Page {
                alloc: op == MadOp::PAGE_ALLOC,
                id: r.u32("control.id")?,
                switch: r.u16("control.switch")?,
                page: r.u32("page.index")?,
            },
            MadOp::TENANT_ADD | MadOp::TENANT_DEL => MadBody::Tenant {
                add: op == MadOp::TENANT_ADD,
                id: r.u32("control.id")?,
                switch: r.u16("control.switch")?,
                hot_threshold: r.u16("tenant.hot_threshold")?,
            },
            MadOp::SKETCH_RESET => MadBody::Reset {
                id: r.u32("control.id")?,
                switch: r.u16("control.switch")?,
            },
        };
        if r.pos != buf.len() {
            return Err(MadError::TrailingBytes {
                op,
                offset: r.pos,
                count: buf.len() - r.pos,
            });
        }
        Ok(MadMessage {
            tenant,
            tag,
            key: Key(key),
            body,
        })
    }
}

impl From<Short> for MadError {
    fn from(s: Short) -> Self {
        let Short {
            what,
            offset,
            need,
            have,
        } = s;
        MadError::Truncated {
            what,
            offset,
            need,
            have,
        }
    }
}

/// MADINC's own field kinds on the shared payload cursor.
impl Reader<'_> {
    fn flag(&mut self, what: &'static str) -> Result<bool, MadError> {
        let offset = self.pos;
        match self.take(1, what)?[0] {
            0 => Ok(false),
            1 => Ok(true),
            value => Err(MadError::BadFlag {
                what,
                offset,
                value,
            }),
        }
    }
    fn value(&mut self) -> Result<Vec<u8>, MadError> {
        let offset = self.pos;
        let len = self.u16("vallen")? as usize;
        if len > MADINC_MAX_VALUE_LEN {
            return Err(MadError::ValueTooLong { len, offset });
        }
        let words = self.take(len.div_ceil(8) * 8, "value words")?;
        Ok(words[..len].to_vec())
    }
}
