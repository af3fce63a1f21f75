//! The STF script model: one typed command per source line, each with its position.

use std::fmt;

/// A 1-based source position (line, column in characters).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pos {
    pub line: u32,
    pub column: u32,
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// How a number was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Radix {
    Dec,
    Hex,
    Bin,
}

/// A number as written in STF. Hex and binary digits may include `*` (don't care).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StfNumber {
    pub radix: Radix,
    /// The digits without prefix, as written (hex digits keep their case).
    pub digits: String,
    /// Where the number starts.
    pub pos: Pos,
}

impl StfNumber {
    /// Whether any digit is a `*`.
    pub fn has_wildcards(&self) -> bool {
        self.digits.contains('*')
    }

    /// The number as the STF text spelled it (`0x…`, `0b…` or decimal).
    pub fn text(&self) -> String {
        match self.radix {
            Radix::Dec => self.digits.clone(),
            Radix::Hex => format!("0x{}", self.digits),
            Radix::Bin => format!("0b{}", self.digits),
        }
    }
}

/// `<name>:<value>[/<len>]` of an `add` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyValue {
    pub name: String,
    pub value: StfNumber,
    /// An explicit `/<len>` after the value (lpm keys only).
    pub prefix_len: Option<u32>,
    pub pos: Pos,
}

/// `<param>:<value>` inside an action call; the value is kept verbatim (CLI syntax).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamValue {
    pub name: String,
    pub value: String,
    pub pos: Pos,
}

/// `<action>(<param>:<value>, ...)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActionCall {
    pub name: String,
    pub params: Vec<ParamValue>,
    pub pos: Pos,
}

/// The expected frame of an `expect` line: upper-case hex nibbles and `*`, and the `$` flag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpectPattern {
    /// Upper-case hex digits and `*`, whitespace removed.
    pub nibbles: String,
    /// A trailing `$` was written: the frame must have exactly this length.
    pub exact_length: bool,
}

/// Comparison operators of `check_counter`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CmpOp {
    /// The operator as written.
    pub fn as_str(self) -> &'static str {
        match self {
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
        }
    }
}

/// Which counter value `check_counter` compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CounterUnit {
    Packets,
    Bytes,
}

/// The optional comparison of `check_counter`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CounterCheck {
    pub unit: CounterUnit,
    pub op: CmpOp,
    pub value: u64,
}

/// One meter rate pair `<rate>:<burst>` (rate in units per microsecond).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RatePair {
    pub rate: f64,
    pub burst: u32,
}

/// Every STF command of `stf.md` §3.
#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    Add {
        table: String,
        priority: Option<u32>,
        keys: Vec<KeyValue>,
        action: ActionCall,
        /// `= <id>`: an entry label (ignored, as in p4c).
        entry_id: Option<String>,
    },
    SetDefault {
        table: String,
        action: ActionCall,
    },
    Packet {
        port: u32,
        data: Vec<u8>,
    },
    /// `expect <port> [pattern]`; `pattern` is `None` for the bare form.
    Expect {
        port: u32,
        pattern: Option<ExpectPattern>,
    },
    NoPacket,
    Wait,
    RemoveAll,
    CheckCounter {
        counter: String,
        /// The entry label or index inside the parentheses, as written.
        id: String,
        check: Option<CounterCheck>,
    },
    MirroringAdd {
        session: u32,
        port: u32,
    },
    MirroringAddMc {
        session: u32,
        mgid: u32,
    },
    MirroringDelete {
        session: u32,
    },
    MirroringGet {
        session: u32,
    },
    McMgrpCreate {
        mgid: u32,
    },
    McNodeCreate {
        rid: u32,
        ports: Vec<u32>,
    },
    McNodeUpdate {
        node: u32,
        ports: Vec<u32>,
    },
    McNodeAssociate {
        mgid: u32,
        node: u32,
    },
    CounterRead {
        counter: String,
        index: u32,
    },
    CounterWrite {
        counter: String,
        index: u32,
        packets: u64,
        bytes: u64,
    },
    RegisterRead {
        register: String,
        index: Option<u32>,
    },
    RegisterWrite {
        register: String,
        index: u32,
        value: u64,
    },
    RegisterReset {
        register: String,
    },
    MeterGetRates {
        meter: String,
        index: u32,
    },
    MeterSetRates {
        meter: String,
        index: u32,
        rates: Vec<RatePair>,
    },
    MeterArraySetRates {
        meter: String,
        rates: Vec<RatePair>,
    },
}

impl Command {
    /// The command keyword (lower case).
    pub fn keyword(&self) -> &'static str {
        match self {
            Command::Add { .. } => "add",
            Command::SetDefault { .. } => "setdefault",
            Command::Packet { .. } => "packet",
            Command::Expect { .. } => "expect",
            Command::NoPacket => "no_packet",
            Command::Wait => "wait",
            Command::RemoveAll => "remove",
            Command::CheckCounter { .. } => "check_counter",
            Command::MirroringAdd { .. } => "mirroring_add",
            Command::MirroringAddMc { .. } => "mirroring_add_mc",
            Command::MirroringDelete { .. } => "mirroring_delete",
            Command::MirroringGet { .. } => "mirroring_get",
            Command::McMgrpCreate { .. } => "mc_mgrp_create",
            Command::McNodeCreate { .. } => "mc_node_create",
            Command::McNodeUpdate { .. } => "mc_node_update",
            Command::McNodeAssociate { .. } => "mc_node_associate",
            Command::CounterRead { .. } => "counter_read",
            Command::CounterWrite { .. } => "counter_write",
            Command::RegisterRead { .. } => "register_read",
            Command::RegisterWrite { .. } => "register_write",
            Command::RegisterReset { .. } => "register_reset",
            Command::MeterGetRates { .. } => "meter_get_rates",
            Command::MeterSetRates { .. } => "meter_set_rates",
            Command::MeterArraySetRates { .. } => "meter_array_set_rates",
        }
    }
}

/// A command with the position of its keyword.
#[derive(Clone, Debug, PartialEq)]
pub struct Located {
    pub pos: Pos,
    pub command: Command,
}

/// A parsed STF file.
#[derive(Clone, Debug, PartialEq)]
pub struct StfScript {
    /// The file name used in messages.
    pub file: String,
    pub commands: Vec<Located>,
}
