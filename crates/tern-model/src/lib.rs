//! The program model: BMv2 JSON (format 2.0–2.24 and the legacy shapes) as typed Rust, its
//! loader and validator.
//!
//! [`load`] reads the JSON text that `p4c-bm2-ss` (or the older `p4c-bm`) emits and returns a
//! [`Program`] in which **every name is already resolved to an index** into the program's own
//! vectors (`headers[i]`, `actions[i]`, `pipelines[p].tables[t]`, …). A back end never has to
//! look a name up. The checks and error messages follow BMv2's `P4Objects::init_objects`
//! (see `shared/reference/bmv2-json.md`); every error carries the JSON pointer of the offending
//! object, e.g. `/pipelines/0/tables/3/key/1`.
//!
//! [`to_json`] writes a program back out (format 2.23); `load(&to_json(&p))` gives `p` back
//! (apart from `version`).
//!
//! What the loader does **not** check: the target-specific required fields of simple_switch
//! (`standard_metadata.egress_port` …). That is the target's business
//! ([`Program::missing_required_field`] helps).

mod hex;
pub mod jsoncpp;
mod load;
mod write;

pub use hex::{parse_byte_string, parse_value, Int};
pub use load::{known_hash_algorithm, load, MAX_WIDTH};
pub use write::to_json;

use std::fmt;

/// A load failure: where (a JSON pointer) and what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadError {
    /// JSON pointer of the offending value, e.g. `/pipelines/0/tables/3/key/1` (empty = root).
    pub path: String,
    /// BMv2's message for the problem.
    pub message: String,
}

impl fmt::Display for LoadError {
    /// `path: message`, or just the message when the problem is the document itself.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

impl std::error::Error for LoadError {}

/// Index of the hidden `$valid$` field in [`FieldRef::field`].
pub const VALID_FIELD: u32 = u32::MAX;

/// A field of a header instance: `headers[header]`, field `field` of its type
/// (or [`VALID_FIELD`] for the hidden validity bit).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FieldRef {
    pub header: u32,
    pub field: u32,
}

/// Width of a header field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldWidth {
    Fixed(u32),
    /// A variable-length field (`"*"`).
    Variable,
}

/// One field of a header type.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldDef {
    pub name: String,
    pub width: FieldWidth,
    pub signed: bool,
    pub saturating: bool,
}

/// `header_types[]`.
#[derive(Clone, Debug, PartialEq)]
pub struct HeaderType {
    pub name: String,
    pub id: i64,
    pub fields: Vec<FieldDef>,
    /// `length_exp`: total header length in bits, for plain `extract` of a VL header.
    pub length_exp: Option<Expr>,
    /// `max_length` in bytes (0 = no limit).
    pub max_length: u32,
}

impl HeaderType {
    /// Sum of the fixed field widths in bits.
    pub fn fixed_bits(&self) -> u32 {
        self.fields
            .iter()
            .map(|f| match f.width {
                FieldWidth::Fixed(w) => w,
                FieldWidth::Variable => 0,
            })
            .sum()
    }
    /// Index of the variable-length field, if any.
    pub fn vl_field(&self) -> Option<usize> {
        self.fields
            .iter()
            .position(|f| f.width == FieldWidth::Variable)
    }
}

/// `headers[]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Header {
    pub name: String,
    pub id: i64,
    pub header_type: u32,
    pub metadata: bool,
}

/// `header_stacks[]`.
#[derive(Clone, Debug, PartialEq)]
pub struct HeaderStack {
    pub name: String,
    pub id: i64,
    pub header_type: u32,
    /// Header indices, in stack index order.
    pub headers: Vec<u32>,
}

/// `header_union_types[]`.
#[derive(Clone, Debug, PartialEq)]
pub struct UnionType {
    pub name: String,
    pub id: i64,
    /// `(member name, header type)`.
    pub members: Vec<(String, u32)>,
}

/// `header_unions[]`.
#[derive(Clone, Debug, PartialEq)]
pub struct HeaderUnion {
    pub name: String,
    pub id: i64,
    pub union_type: u32,
    /// Header indices, in member order.
    pub headers: Vec<u32>,
}

/// `header_union_stacks[]`.
#[derive(Clone, Debug, PartialEq)]
pub struct UnionStack {
    pub name: String,
    pub id: i64,
    pub union_type: u32,
    /// Union indices, in stack index order.
    pub unions: Vec<u32>,
}

/// `enums[]`.
#[derive(Clone, Debug, PartialEq)]
pub struct EnumDef {
    pub name: String,
    pub entries: Vec<(String, i64)>,
}

/// Expression operators (`bmv2-json.md` §3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Shl,
    Shr,
    And,
    Or,
    Xor,
    Not,
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
    LAnd,
    LOr,
    LNot,
    Valid,
    ValidUnion,
    Ternary,
    TwoCompMod,
    SatCast,
    USatCast,
    D2B,
    B2D,
    DerefStack,
    DerefUnionStack,
    LastStackIndex,
    SizeStack,
    /// `access_field` with the field offset.
    AccessField(u32),
    /// `access_union_header` with the member offset.
    AccessUnionHeader(u32),
}

/// An expression tree (`{"op", "left", "right"}` and its leaves).
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    Field(FieldRef),
    Const(Int),
    Bool(bool),
    /// Action parameter `i` (`local` inside an expression).
    Local(u32),
    /// A register cell; the index is an expression (constant for `hexstr`).
    Register {
        array: u32,
        index: Box<Expr>,
    },
    Header(u32),
    HeaderStack(u32),
    /// Field of the last valid element of a stack.
    StackField {
        stack: u32,
        field: u32,
    },
    Union(u32),
    UnionStack(u32),
    /// Parser only: `[bit offset, bit width]` from the current parse position.
    Lookahead {
        offset: u32,
        width: u32,
    },
    Op {
        op: Op,
        left: Option<Box<Expr>>,
        right: Option<Box<Expr>>,
        cond: Option<Box<Expr>>,
    },
}

/// A primitive argument (`bmv2-json.md` §2).
#[derive(Clone, Debug, PartialEq)]
pub enum Arg {
    Field(FieldRef),
    Const(Int),
    Bool(bool),
    RuntimeData(u32),
    Header(u32),
    HeaderStack(u32),
    HeaderUnion(u32),
    HeaderUnionStack(u32),
    Calculation(u32),
    CounterArray(u32),
    MeterArray(u32),
    RegisterArray(u32),
    Extern(u32),
    String(String),
    Register { array: u32, index: Expr },
    StackField { stack: u32, field: u32 },
    ParametersVector(Vec<Arg>),
    FieldList(Vec<FieldRef>),
    Expr(Expr),
}

/// `source_info` of an action call, conditional or action (for log/assert messages).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SourceInfo {
    pub filename: String,
    pub line: i64,
    pub column: i64,
    pub source_fragment: String,
}

/// One primitive call.
#[derive(Clone, Debug, PartialEq)]
pub struct Primitive {
    pub op: String,
    pub params: Vec<Arg>,
    pub source_info: Option<SourceInfo>,
}

/// `actions[]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Action {
    pub name: String,
    pub id: i64,
    /// `(name, bitwidth)` of each parameter.
    pub runtime_data: Vec<(String, u32)>,
    pub primitives: Vec<Primitive>,
}

/// Target of `extract` / `extract_VL`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExtractTarget {
    Regular(u32),
    Stack(u32),
    /// `(union stack, member index)`.
    UnionStack(u32, u32),
}

/// A parser operation.
#[derive(Clone, Debug, PartialEq)]
pub enum ParserOp {
    Extract(ExtractTarget),
    ExtractVl(ExtractTarget, Expr),
    Set(FieldRef, Expr),
    Verify(Expr, Expr),
    Shift(u32),
    Advance(Expr),
    Primitive(Primitive),
}

/// One element of a parse state's transition key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyElem {
    Field(FieldRef),
    StackField { stack: u32, field: u32 },
    UnionStackField { stack: u32, member: u32, field: u32 },
    Lookahead { offset: u32, width: u32 },
}

/// What a transition matches.
#[derive(Clone, Debug, PartialEq)]
pub enum TransitionMatch {
    /// Byte string value of the key's padded width, with an optional mask of the same width.
    Value {
        value: Vec<u8>,
        mask: Option<Vec<u8>>,
    },
    Default,
    Vset {
        vset: u32,
        mask: Option<Vec<u8>>,
    },
}

/// One transition; `next` = `None` means accept.
#[derive(Clone, Debug, PartialEq)]
pub struct Transition {
    pub matcher: TransitionMatch,
    pub next: Option<u32>,
}

/// A parse state.
#[derive(Clone, Debug, PartialEq)]
pub struct ParseState {
    pub name: String,
    pub id: i64,
    pub ops: Vec<ParserOp>,
    pub key: Vec<KeyElem>,
    /// Byte width of the padded key.
    pub key_bytes: u32,
    pub transitions: Vec<Transition>,
}

/// `parsers[]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Parser {
    pub name: String,
    pub id: i64,
    /// `None` = accept at once (also for an unknown name, as BMv2).
    pub init_state: Option<u32>,
    pub states: Vec<ParseState>,
}

/// `parse_vsets[]`.
#[derive(Clone, Debug, PartialEq)]
pub struct ParseVset {
    pub name: String,
    pub id: i64,
    pub compressed_bitwidth: u32,
}

/// `deparsers[]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Deparser {
    pub name: String,
    pub id: i64,
    pub order: Vec<u32>,
    pub primitives: Vec<Primitive>,
}

/// `counter_arrays[]`.
#[derive(Clone, Debug, PartialEq)]
pub struct CounterArray {
    pub name: String,
    pub id: i64,
    pub size: u32,
    pub is_direct: bool,
    pub binding: Option<String>,
}

/// Meter units.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MeterType {
    Bytes,
    Packets,
}

/// `meter_arrays[]`.
#[derive(Clone, Debug, PartialEq)]
pub struct MeterArray {
    pub name: String,
    pub id: i64,
    pub meter_type: MeterType,
    pub rate_count: u32,
    pub size: u32,
    pub is_direct: bool,
    pub binding: Option<String>,
    pub result_target: Option<FieldRef>,
}

/// `register_arrays[]`.
#[derive(Clone, Debug, PartialEq)]
pub struct RegisterArray {
    pub name: String,
    pub id: i64,
    pub size: u32,
    pub bitwidth: u32,
}

/// An input of a calculation.
#[derive(Clone, Debug, PartialEq)]
pub enum CalcInput {
    Field(FieldRef),
    Const { value: Vec<u8>, bitwidth: u32 },
    Header(u32),
    Payload,
}

/// `calculations[]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Calculation {
    pub name: String,
    pub id: i64,
    pub algo: String,
    pub input: Vec<CalcInput>,
}

/// `learn_lists[]`.
#[derive(Clone, Debug, PartialEq)]
pub struct LearnList {
    pub name: String,
    pub id: i64,
    pub elements: Vec<FieldRef>,
}

/// An element of a field list.
#[derive(Clone, Debug, PartialEq)]
pub enum FieldListElem {
    Field(FieldRef),
    Const { value: Vec<u8>, bitwidth: u32 },
}

/// `field_lists[]`.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldList {
    pub name: String,
    pub id: i64,
    pub elements: Vec<FieldListElem>,
}

/// Selector of an action profile.
#[derive(Clone, Debug, PartialEq)]
pub struct Selector {
    pub algo: String,
    pub input: Vec<FieldRef>,
}

/// An action profile (per pipeline).
#[derive(Clone, Debug, PartialEq)]
pub struct ActionProfile {
    pub name: String,
    pub id: i64,
    pub max_size: u32,
    pub selector: Option<Selector>,
}

/// Match kinds (table level and key level).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatchKind {
    Exact,
    Lpm,
    Ternary,
    Range,
    Valid,
}

impl MatchKind {
    /// The JSON spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            MatchKind::Exact => "exact",
            MatchKind::Lpm => "lpm",
            MatchKind::Ternary => "ternary",
            MatchKind::Range => "range",
            MatchKind::Valid => "valid",
        }
    }
}

/// Table implementation type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TableType {
    Simple,
    Indirect,
    IndirectWs,
}

/// What a table key field reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyTarget {
    Field(FieldRef),
    /// A `valid` match on a header.
    Valid(u32),
}

/// One table key field.
#[derive(Clone, Debug, PartialEq)]
pub struct TableKey {
    pub match_kind: MatchKind,
    pub target: KeyTarget,
    pub mask: Option<Vec<u8>>,
    pub name: String,
}

/// A control-flow node of a pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Node {
    Table(u32),
    Conditional(u32),
    ActionCall(u32),
}

/// `next_tables` in one of its two legal shapes.
#[derive(Clone, Debug, PartialEq)]
pub enum NextTables {
    HitMiss {
        hit: Option<Node>,
        miss: Option<Node>,
    },
    /// One next node per table action, aligned with [`Table::actions`].
    PerAction(Vec<Option<Node>>),
}

/// `default_entry`.
#[derive(Clone, Debug, PartialEq)]
pub struct DefaultEntry {
    pub action: u32,
    pub action_const: bool,
    pub action_data: Vec<Int>,
    pub action_entry_const: bool,
}

/// A key param of a const entry.
#[derive(Clone, Debug, PartialEq)]
pub enum ConstKey {
    Exact(Vec<u8>),
    Lpm(Vec<u8>, u32),
    Ternary(Vec<u8>, Vec<u8>),
    Range(Vec<u8>, Vec<u8>),
    Valid(bool),
}

/// A const entry (`entries`).
#[derive(Clone, Debug, PartialEq)]
pub struct ConstEntry {
    pub key: Vec<ConstKey>,
    pub action: u32,
    pub action_data: Vec<Int>,
    pub priority: i32,
}

/// A table.
#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    pub name: String,
    pub id: i64,
    pub match_type: MatchKind,
    pub table_type: TableType,
    pub key: Vec<TableKey>,
    /// Action indices (into [`Program::actions`]).
    pub actions: Vec<u32>,
    pub next_tables: NextTables,
    pub base_default_next: Option<Node>,
    pub max_size: u32,
    pub with_counters: bool,
    pub support_timeout: bool,
    /// Index into [`Program::meter_arrays`].
    pub direct_meter: Option<u32>,
    pub default_entry: Option<DefaultEntry>,
    /// Index into the pipeline's action profiles.
    pub action_profile: Option<u32>,
    /// Const entries (`None` = no `entries` key).
    pub entries: Option<Vec<ConstEntry>>,
}

/// A conditional node.
#[derive(Clone, Debug, PartialEq)]
pub struct Conditional {
    pub name: String,
    pub id: i64,
    pub expr: Expr,
    pub true_next: Option<Node>,
    pub false_next: Option<Node>,
}

/// An `action_calls[]` node.
#[derive(Clone, Debug, PartialEq)]
pub struct ActionCall {
    pub name: String,
    pub id: i64,
    pub action: u32,
    pub next: Option<Node>,
}

/// `pipelines[]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Pipeline {
    pub name: String,
    pub id: i64,
    pub init: Option<Node>,
    pub action_profiles: Vec<ActionProfile>,
    pub tables: Vec<Table>,
    pub conditionals: Vec<Conditional>,
    pub action_calls: Vec<ActionCall>,
}

/// Checksum kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChecksumType {
    Generic,
    /// Legacy IPv4 header checksum.
    Ipv4,
}

/// `checksums[]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Checksum {
    pub name: String,
    pub id: i64,
    pub target: FieldRef,
    pub checksum_type: ChecksumType,
    pub calculation: Option<u32>,
    pub update: bool,
    pub verify: bool,
    pub if_cond: Option<Expr>,
}

/// `extern_instances[]` (no extern type is registered by simple_switch; kept for completeness).
#[derive(Clone, Debug, PartialEq)]
pub struct ExternInstance {
    pub name: String,
    pub id: i64,
    pub extern_type: String,
}

/// A whole BMv2 JSON program, names resolved to indices.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Program {
    /// `__meta__.version`, if present.
    pub version: Option<(u32, u32)>,
    pub header_types: Vec<HeaderType>,
    pub headers: Vec<Header>,
    pub header_stacks: Vec<HeaderStack>,
    pub header_union_types: Vec<UnionType>,
    pub header_unions: Vec<HeaderUnion>,
    pub header_union_stacks: Vec<UnionStack>,
    /// `(alias, field)`.
    pub field_aliases: Vec<(String, FieldRef)>,
    /// `(name, value)`, including the core errors added after loading.
    pub errors: Vec<(String, i64)>,
    pub enums: Vec<EnumDef>,
    pub extern_instances: Vec<ExternInstance>,
    pub parse_vsets: Vec<ParseVset>,
    pub parsers: Vec<Parser>,
    pub deparsers: Vec<Deparser>,
    pub calculations: Vec<Calculation>,
    pub counter_arrays: Vec<CounterArray>,
    pub meter_arrays: Vec<MeterArray>,
    pub register_arrays: Vec<RegisterArray>,
    pub actions: Vec<Action>,
    pub pipelines: Vec<Pipeline>,
    pub checksums: Vec<Checksum>,
    pub learn_lists: Vec<LearnList>,
    pub field_lists: Vec<FieldList>,
    pub config_options: Vec<(String, String)>,
}

impl Program {
    /// Resolve `header.field` (or a field alias) to a field reference.
    pub fn field_by_name(&self, header: &str, field: &str) -> Option<FieldRef> {
        let dotted = format!("{header}.{field}");
        if let Some((_, f)) = self.field_aliases.iter().find(|(a, _)| *a == dotted) {
            return Some(*f);
        }
        let h = self.headers.iter().position(|h| h.name == header)?;
        let ht = &self.header_types[self.headers[h].header_type as usize];
        if field == "$valid$" {
            return Some(FieldRef {
                header: h as u32,
                field: VALID_FIELD,
            });
        }
        let f = ht.fields.iter().position(|f| f.name == field)?;
        Some(FieldRef {
            header: h as u32,
            field: f as u32,
        })
    }

    /// Width in bits of a field (`$valid$` = 1, variable-length = 0).
    pub fn field_width(&self, f: FieldRef) -> u32 {
        if f.field == VALID_FIELD {
            return 1;
        }
        let ht = &self.header_types[self.headers[f.header as usize].header_type as usize];
        match ht.fields[f.field as usize].width {
            FieldWidth::Fixed(w) => w,
            FieldWidth::Variable => 0,
        }
    }

    /// The field definition (`None` for `$valid$`).
    pub fn field_def(&self, f: FieldRef) -> Option<&FieldDef> {
        if f.field == VALID_FIELD {
            return None;
        }
        let ht = &self.header_types[self.headers[f.header as usize].header_type as usize];
        ht.fields.get(f.field as usize)
    }

    /// `header.field` display name of a field.
    pub fn field_name(&self, f: FieldRef) -> String {
        let h = &self.headers[f.header as usize];
        match self.field_def(f) {
            Some(d) => format!("{}.{}", h.name, d.name),
            None => format!("{}.$valid$", h.name),
        }
    }

    /// simple_switch's required-field check (`bmv2-json.md` §1.5): the first missing field in
    /// sorted order, as `header.field`.
    pub fn missing_required_field(&self) -> Option<&'static str> {
        const REQUIRED: [(&str, &str); 5] = [
            ("standard_metadata", "egress_port"),
            ("standard_metadata", "egress_spec"),
            ("standard_metadata", "ingress_port"),
            ("standard_metadata", "instance_type"),
            ("standard_metadata", "packet_length"),
        ];
        const NAMES: [&str; 5] = [
            "standard_metadata.egress_port",
            "standard_metadata.egress_spec",
            "standard_metadata.ingress_port",
            "standard_metadata.instance_type",
            "standard_metadata.packet_length",
        ];
        REQUIRED
            .iter()
            .zip(NAMES)
            .find(|((h, f), _)| self.field_by_name(h, f).is_none())
            .map(|(_, n)| n)
    }

    /// The value of a named error (`errors`), if declared.
    pub fn error_value(&self, name: &str) -> Option<i64> {
        self.errors.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
    }
}

impl fmt::Display for MatchKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
