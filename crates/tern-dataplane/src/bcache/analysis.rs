//! B-Cache analysis over the program model: for one pipeline, which fields decide its
//! behaviour (control reads: table keys, conditions, selector inputs; data reads: operands of
//! actions, hash inputs), which it writes (fields, validity, whole headers), which side
//! effects a cached behaviour must replay (direct and indirect counters, ageing, digests,
//! clone/resubmit/recirculate requests, truncation, drops) and which nodes make it
//! uncacheable (registers, meters, random numbers, logging, volatile metadata, payload or
//! stateful hashes, extern calls). `tern bcache explain` prints [`PipelineAnalysis`].
//!
//! The walk follows the pipeline's control graph from its first node; a table contributes
//! its key, its selector and every action it can run (entries, default, const entries).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt::Write as _;

use tern_model::{
    Arg, CalcInput, Expr, FieldRef, KeyTarget, Node, Op, Pipeline, Primitive, Program, VALID_FIELD,
};

/// What one pipeline reads, writes and does, for the behaviour cache.
#[derive(Clone, Debug, Default)]
pub struct PipelineAnalysis {
    pub name: String,
    /// Index of the pipeline in the program.
    pub pipeline: usize,
    /// Reachable nodes, in walk order (names).
    pub nodes: Vec<String>,
    /// Fields read by table keys, conditions and action selectors.
    pub control_reads: BTreeSet<FieldRef>,
    /// Fields read by actions (operands, indexes, hash inputs) and not by control.
    pub data_reads: BTreeSet<FieldRef>,
    /// Fields an action may write.
    pub writes: BTreeSet<FieldRef>,
    /// Headers whose validity a table key or condition reads.
    pub validity_reads: BTreeSet<u32>,
    /// Headers whose validity an action may change.
    pub validity_writes: BTreeSet<u32>,
    /// Headers used as a whole (copied, added with zeroing, stack and union operations):
    /// every field of them is read and written.
    pub whole_headers: BTreeSet<u32>,
    /// Some action may remove a header (the packet-length register goes down).
    pub removes_headers: bool,
    /// Effects replayed on a hit besides field writes: `(what, where)`.
    pub effects: BTreeSet<(String, String)>,
    /// Why a node cannot be cached: `(node, reason)`.
    pub uncacheable: Vec<(String, String)>,
    /// Register accesses (`register_read` / `register_write` primitives): `(node, what)`.
    /// They do not make the pipeline uncacheable; the cache handles them by guards on the
    /// state ([`super::Stateful`]).
    pub stateful: Vec<(String, String)>,
    /// Nodes reachable from the start without crossing an uncacheable node (the longest
    /// cacheable prefix of the control graph).
    pub cacheable_prefix: Vec<String>,
    /// The uncacheable nodes (where a cached prefix stops and the pipeline resumes natively).
    pub stop_nodes: Vec<Node>,
    /// The facts of the cacheable prefix alone (set when the pipeline is not cacheable as a
    /// whole but its prefix is not empty): what a prefix cache keys and replays.
    pub prefix: Option<Box<PipelineAnalysis>>,
}

impl PipelineAnalysis {
    /// True when the whole pipeline can be cached.
    pub fn cacheable(&self) -> bool {
        self.uncacheable.is_empty()
    }

    /// Every field the cache key covers: read or written (a field written on one path and
    /// not on another keeps its input value there, so its input decides the output too).
    pub fn key_fields(&self, p: &Program) -> BTreeSet<FieldRef> {
        let mut out: BTreeSet<FieldRef> = self
            .control_reads
            .iter()
            .chain(&self.data_reads)
            .chain(&self.writes)
            .copied()
            .filter(|f| f.field != VALID_FIELD)
            .collect();
        for &h in &self.whole_headers {
            out.extend(header_fields(p, h));
        }
        out
    }
}

fn header_fields(p: &Program, h: u32) -> impl Iterator<Item = FieldRef> {
    let n = p.header_types[p.headers[h as usize].header_type as usize]
        .fields
        .len() as u32;
    (0..n).map(move |field| FieldRef { header: h, field })
}

/// Per-node facts gathered by the walk.
#[derive(Default)]
struct Acc {
    control: BTreeSet<FieldRef>,
    data: BTreeSet<FieldRef>,
    writes: BTreeSet<FieldRef>,
    vreads: BTreeSet<u32>,
    vwrites: BTreeSet<u32>,
    whole: BTreeSet<u32>,
    removes: bool,
    effects: BTreeSet<(String, String)>,
    bad: Vec<String>,
    state: Vec<String>,
}

struct Walker<'a> {
    p: &'a Program,
    pl: &'a Pipeline,
}

/// Volatile standard metadata: a read of one of these makes the pipeline uncacheable.
const VOLATILE: [&str; 6] = [
    "ingress_global_timestamp",
    "egress_global_timestamp",
    "enq_timestamp",
    "deq_timedelta",
    "enq_qdepth",
    "deq_qdepth",
];

impl Walker<'_> {
    fn stack_headers(&self, s: u32) -> Vec<u32> {
        self.p
            .header_stacks
            .get(s as usize)
            .map(|s| s.headers.clone())
            .unwrap_or_default()
    }

    fn union_headers(&self, u: u32) -> Vec<u32> {
        self.p
            .header_unions
            .get(u as usize)
            .map(|u| u.headers.clone())
            .unwrap_or_default()
    }

    fn union_stack_headers(&self, s: u32) -> Vec<u32> {
        self.p
            .header_union_stacks
            .get(s as usize)
            .map(|s| {
                s.unions
                    .iter()
                    .flat_map(|u| self.union_headers(*u))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Reads of an expression: into `reads` (fields) and `a` (validity, whole headers,
    /// uncacheable reasons).
    fn expr(&self, e: &Expr, control: bool, a: &mut Acc) {
        let reads = |a: &mut Acc, f: FieldRef| {
            if f.field == VALID_FIELD {
                a.vreads.insert(f.header);
            } else if control {
                a.control.insert(f);
            } else {
                a.data.insert(f);
            }
        };
        match e {
            Expr::Field(f) => reads(a, *f),
            Expr::Header(h) => {
                // A header as a value: its validity (`valid(h)`) or all of it.
                a.vreads.insert(*h);
                a.whole.insert(*h);
            }
            Expr::HeaderStack(s) => a.whole.extend(self.stack_headers(*s)),
            Expr::StackField { stack, field } => {
                for h in self.stack_headers(*stack) {
                    reads(
                        a,
                        FieldRef {
                            header: h,
                            field: *field,
                        },
                    );
                }
            }
            Expr::Union(u) => a.whole.extend(self.union_headers(*u)),
            Expr::UnionStack(s) => a.whole.extend(self.union_stack_headers(*s)),
            Expr::Register { array, index } => {
                self.expr(index, control, a);
                let name = self
                    .p
                    .register_arrays
                    .get(*array as usize)
                    .map_or("?", |r| r.name.as_str());
                a.bad.push(format!("reads register {name}"));
            }
            Expr::Lookahead { .. } => a.bad.push("reads the packet (lookahead)".into()),
            Expr::Op {
                op,
                left,
                right,
                cond,
            } => {
                if matches!(op, Op::Valid) {
                    // `valid(h)` reads h's validity only (the header may be either operand).
                    if let Some(Expr::Header(h)) = left.as_deref().or(right.as_deref()) {
                        a.vreads.insert(*h);
                        return;
                    }
                }
                for x in [left, right, cond].into_iter().flatten() {
                    self.expr(x, control, a);
                }
            }
            Expr::Const(_) | Expr::Bool(_) | Expr::Local(_) => {}
        }
    }

    fn calc(&self, c: u32, a: &mut Acc) {
        let Some(calc) = self.p.calculations.get(c as usize) else {
            return;
        };
        if calc.algo.starts_with("round_robin") {
            a.bad
                .push(format!("stateful hash {} ({})", calc.name, calc.algo));
        }
        for i in &calc.input {
            match i {
                CalcInput::Field(f) => {
                    a.data.insert(*f);
                }
                CalcInput::Header(h) => {
                    a.whole.insert(*h);
                }
                CalcInput::Payload => a.bad.push(format!("hash {} reads the payload", calc.name)),
                CalcInput::Const { .. } => {}
            }
        }
    }

    /// A primitive argument that is read.
    fn arg_read(&self, x: &Arg, a: &mut Acc) {
        match x {
            Arg::Field(f) => self.expr(&Expr::Field(*f), false, a),
            Arg::Header(h) => {
                a.whole.insert(*h);
            }
            Arg::HeaderStack(s) => a.whole.extend(self.stack_headers(*s)),
            Arg::HeaderUnion(u) => a.whole.extend(self.union_headers(*u)),
            Arg::HeaderUnionStack(s) => a.whole.extend(self.union_stack_headers(*s)),
            Arg::StackField { stack, field } => self.expr(
                &Expr::StackField {
                    stack: *stack,
                    field: *field,
                },
                false,
                a,
            ),
            Arg::Register { array, index } => self.expr(
                &Expr::Register {
                    array: *array,
                    index: Box::new(index.clone()),
                },
                false,
                a,
            ),
            Arg::ParametersVector(v) => {
                for y in v {
                    self.arg_read(y, a);
                }
            }
            Arg::FieldList(v) => a.data.extend(v.iter().copied()),
            Arg::Expr(e) => self.expr(e, false, a),
            Arg::Calculation(c) => self.calc(*c, a),
            Arg::MeterArray(_) => a.bad.push("executes a meter".into()),
            Arg::RegisterArray(_) => a.bad.push("accesses a register".into()),
            Arg::Extern(_) => a.bad.push("calls an extern".into()),
            Arg::Const(_)
            | Arg::Bool(_)
            | Arg::RuntimeData(_)
            | Arg::CounterArray(_)
            | Arg::String(_) => {}
        }
    }

    /// A primitive argument that is written (an l-value).
    fn arg_write(&self, x: &Arg, a: &mut Acc) {
        match x {
            Arg::Field(f) | Arg::Expr(Expr::Field(f)) => {
                if f.field == VALID_FIELD {
                    a.vwrites.insert(f.header);
                } else {
                    a.writes.insert(*f);
                }
            }
            Arg::StackField { stack, field } => {
                for h in self.stack_headers(*stack) {
                    a.writes.insert(FieldRef {
                        header: h,
                        field: *field,
                    });
                }
            }
            Arg::Register { .. } => a.bad.push("writes a register".into()),
            // Computed l-values (stack elements by index, union members): all of them.
            other => {
                self.arg_read(other, a);
                let mut tmp = Acc::default();
                self.arg_read(other, &mut tmp);
                for f in tmp.data.iter().chain(&tmp.control) {
                    a.writes.insert(*f);
                }
                a.whole.extend(tmp.whole);
            }
        }
    }

    fn whole_write(&self, x: &Arg, a: &mut Acc) {
        let mut tmp = Acc::default();
        self.arg_read(x, &mut tmp);
        let mut hs: Vec<u32> = tmp.whole.iter().copied().collect();
        hs.extend(tmp.vreads.iter().copied());
        if let Arg::Expr(e) = x {
            let mut t2 = Acc::default();
            self.expr(e, false, &mut t2);
            hs.extend(t2.whole.iter().copied());
            hs.extend(t2.vreads.iter().copied());
        }
        for h in hs {
            a.whole.insert(h);
            a.vwrites.insert(h);
        }
        a.bad.extend(tmp.bad);
    }

    fn primitive(&self, pr: &Primitive, action: &str, a: &mut Acc) {
        let args = &pr.params;
        let rd = |i: usize, a: &mut Acc| {
            if let Some(x) = args.get(i) {
                self.arg_read(x, a);
            }
        };
        let wr = |i: usize, a: &mut Acc| {
            if let Some(x) = args.get(i) {
                self.arg_write(x, a);
            }
        };
        let eff = |a: &mut Acc, what: &str| {
            a.effects.insert((what.to_string(), action.to_string()));
        };
        match pr.op.as_str() {
            "assign" | "modify_field" | "assign_VL" => {
                wr(0, a);
                rd(1, a);
            }
            "add_to_field" | "subtract_from_field" => {
                rd(0, a);
                wr(0, a);
                rd(1, a);
            }
            "add" | "subtract" | "bit_xor" | "bit_or" | "bit_and" | "shift_left"
            | "shift_right" => {
                wr(0, a);
                rd(1, a);
                rd(2, a);
            }
            "assign_header"
            | "copy_header"
            | "assign_union"
            | "assign_header_stack"
            | "assign_union_stack" => {
                if let Some(x) = args.first() {
                    self.whole_write(x, a);
                }
                rd(1, a);
            }
            "push" | "pop" => {
                if let Some(x) = args.first() {
                    self.whole_write(x, a);
                }
                rd(1, a);
            }
            "add_header" | "add_header_fast" | "remove_header" => {
                if let Some(x) = args.first() {
                    self.whole_write(x, a);
                }
                if pr.op == "remove_header" {
                    a.removes = true;
                }
                eff(a, "validity / packet length");
            }
            "drop" | "mark_to_drop" => {
                for (h, f) in [
                    ("standard_metadata", "egress_spec"),
                    ("standard_metadata", "mcast_grp"),
                    ("intrinsic_metadata", "mcast_grp"),
                ] {
                    if let Some(f) = self.p.field_by_name(h, f) {
                        a.writes.insert(f);
                    }
                }
                if let Some(Arg::Header(h)) = args.first() {
                    for (i, fd) in self.p.header_types
                        [self.p.headers[*h as usize].header_type as usize]
                        .fields
                        .iter()
                        .enumerate()
                    {
                        if fd.name == "egress_spec" || fd.name == "mcast_grp" {
                            a.writes.insert(FieldRef {
                                header: *h,
                                field: i as u32,
                            });
                        }
                    }
                }
                eff(a, "drop");
            }
            "generate_digest" => {
                rd(0, a);
                eff(a, "digest");
            }
            "clone_ingress_pkt_to_egress" | "clone_egress_pkt_to_egress" => {
                rd(0, a);
                eff(a, "clone");
            }
            "resubmit" => eff(a, "resubmit"),
            "recirculate" => eff(a, "recirculate"),
            "truncate" => {
                rd(0, a);
                eff(a, "truncate");
            }
            "modify_field_with_hash_based_offset" => {
                wr(0, a);
                rd(1, a);
                rd(2, a);
                rd(3, a);
            }
            "count" => {
                rd(1, a);
                let name = match args.first() {
                    Some(Arg::CounterArray(c)) => self
                        .p
                        .counter_arrays
                        .get(*c as usize)
                        .map_or("?".to_string(), |c| c.name.clone()),
                    _ => "?".into(),
                };
                a.effects
                    .insert((format!("count {name}"), action.to_string()));
            }
            "modify_field_rng_uniform" => a.bad.push("draws a random number".into()),
            "execute_meter" => a.bad.push("executes a meter".into()),
            "register_read" | "register_write" => {
                let reg = if pr.op == "register_read" { 1 } else { 0 };
                let name = match args.get(reg) {
                    Some(Arg::RegisterArray(r)) => self
                        .p
                        .register_arrays
                        .get(*r as usize)
                        .map_or("?".to_string(), |r| r.name.clone()),
                    _ => {
                        a.bad.push("accesses a register".into());
                        return;
                    }
                };
                if pr.op == "register_read" {
                    wr(0, a);
                    rd(2, a);
                    a.state.push(format!("reads register {name}"));
                } else {
                    rd(1, a);
                    rd(2, a);
                    a.state.push(format!("writes register {name}"));
                }
            }
            "log_msg" => a.bad.push("logs a message (log_msg)".into()),
            "exit" => eff(a, "exit"),
            "_jump" | "_jump_if_zero" | "assert" | "assume" | "no_op" => {
                for i in 0..args.len() {
                    rd(i, a);
                }
            }
            other => {
                for x in args {
                    self.arg_read(x, a);
                    self.arg_write(x, a);
                }
                a.bad.push(format!("primitive {other} is not modelled"));
            }
        }
    }

    fn action(&self, ai: u32, a: &mut Acc) {
        let Some(act) = self.p.actions.get(ai as usize) else {
            return;
        };
        for pr in &act.primitives {
            self.primitive(pr, &act.name, a);
        }
    }

    /// The facts of one node, and its successors.
    fn node(&self, n: Node) -> (String, Acc, Vec<Node>) {
        let mut a = Acc::default();
        let mut next = Vec::new();
        match n {
            Node::Table(t) => {
                let t = &self.pl.tables[t as usize];
                for k in &t.key {
                    match k.target {
                        KeyTarget::Field(f) => self.expr(&Expr::Field(f), true, &mut a),
                        KeyTarget::Valid(h) => {
                            a.vreads.insert(h);
                        }
                    }
                }
                if let Some(ap) = t
                    .action_profile
                    .and_then(|p| self.pl.action_profiles.get(p as usize))
                {
                    if let Some(s) = &ap.selector {
                        a.control.extend(s.input.iter().copied());
                        if s.algo.starts_with("round_robin") {
                            a.bad.push(format!("stateful selector hash {}", s.algo));
                        }
                    }
                }
                let mut acts: BTreeSet<u32> = t.actions.iter().copied().collect();
                if let Some(d) = &t.default_entry {
                    acts.insert(d.action);
                }
                for e in t.entries.iter().flatten() {
                    acts.insert(e.action);
                }
                for ai in acts {
                    self.action(ai, &mut a);
                }
                if t.with_counters {
                    a.effects.insert(("direct counter".into(), t.name.clone()));
                }
                if t.support_timeout {
                    a.effects.insert(("ageing".into(), t.name.clone()));
                }
                if t.direct_meter.is_some() {
                    a.bad.push("direct meter".into());
                }
                match &t.next_tables {
                    tern_model::NextTables::HitMiss { hit, miss } => {
                        next.extend(hit.iter().chain(miss.iter()).copied())
                    }
                    tern_model::NextTables::PerAction(v) => next.extend(v.iter().flatten()),
                }
                next.extend(t.base_default_next);
                (format!("table {}", t.name), a, next)
            }
            Node::Conditional(c) => {
                let c = &self.pl.conditionals[c as usize];
                self.expr(&c.expr, true, &mut a);
                next.extend(c.true_next.iter().chain(c.false_next.iter()).copied());
                (format!("condition {}", c.name), a, next)
            }
            Node::ActionCall(c) => {
                let c = &self.pl.action_calls[c as usize];
                self.action(c.action, &mut a);
                next.extend(c.next);
                (format!("action {}", c.name), a, next)
            }
        }
    }
}

/// Analyse pipeline `pi` of `p`.
pub fn analyse(p: &Program, pi: usize) -> PipelineAnalysis {
    let pl = &p.pipelines[pi];
    let w = Walker { p, pl };
    let mut out = PipelineAnalysis {
        name: pl.name.clone(),
        pipeline: pi,
        ..Default::default()
    };
    let volatile: HashSet<FieldRef> = VOLATILE
        .iter()
        .flat_map(|f| {
            [
                "standard_metadata",
                "intrinsic_metadata",
                "queueing_metadata",
            ]
            .iter()
            .filter_map(move |h| p.field_by_name(h, f))
        })
        .collect();
    // Depth-first over the graph, remembering each node's facts.
    let mut seen: HashMap<Node, usize> = HashMap::new();
    let mut facts: Vec<(String, Acc, Vec<Node>)> = Vec::new();
    let mut stack: Vec<Node> = pl.init.into_iter().collect();
    while let Some(n) = stack.pop() {
        if seen.contains_key(&n) {
            continue;
        }
        seen.insert(n, facts.len());
        let (name, mut a, next) = w.node(n);
        for f in a.control.iter().chain(&a.data).chain(&a.writes) {
            if volatile.contains(f) {
                a.bad.push(format!("reads volatile {}", p.field_name(*f)));
            }
        }
        for nx in next.iter().rev() {
            stack.push(*nx);
        }
        facts.push((name, a, next));
    }
    for (name, a, _) in &facts {
        out.nodes.push(name.clone());
        out.control_reads.extend(a.control.iter().copied());
        out.data_reads.extend(a.data.iter().copied());
        out.writes.extend(a.writes.iter().copied());
        out.validity_reads.extend(a.vreads.iter().copied());
        out.validity_writes.extend(a.vwrites.iter().copied());
        out.whole_headers.extend(a.whole.iter().copied());
        out.removes_headers |= a.removes;
        out.effects.extend(a.effects.iter().cloned());
        let mut bad: Vec<&String> = a.bad.iter().collect();
        bad.dedup();
        for b in bad {
            out.uncacheable.push((name.clone(), b.clone()));
        }
        let mut st: Vec<&String> = a.state.iter().collect();
        st.dedup();
        for b in st {
            out.stateful.push((name.clone(), b.clone()));
        }
    }
    let data: BTreeSet<FieldRef> = out
        .data_reads
        .difference(&out.control_reads)
        .copied()
        .collect();
    out.data_reads = data;
    // The longest cacheable prefix: reachable from the start through cacheable nodes.
    let mut prefix_facts: Vec<usize> = Vec::new();
    let mut pre_seen = HashSet::new();
    let mut stack: Vec<Node> = pl.init.into_iter().collect();
    while let Some(n) = stack.pop() {
        if !pre_seen.insert(n) {
            continue;
        }
        let (name, a, next) = &facts[seen[&n]];
        if !a.bad.is_empty() {
            out.stop_nodes.push(n);
            continue;
        }
        prefix_facts.push(seen[&n]);
        out.cacheable_prefix.push(name.clone());
        for nx in next.iter().rev() {
            stack.push(*nx);
        }
    }
    if !out.uncacheable.is_empty() && !prefix_facts.is_empty() {
        let mut pa = PipelineAnalysis {
            name: out.name.clone(),
            pipeline: pi,
            cacheable_prefix: out.cacheable_prefix.clone(),
            stop_nodes: out.stop_nodes.clone(),
            ..Default::default()
        };
        for i in prefix_facts {
            let (name, a, _) = &facts[i];
            pa.nodes.push(name.clone());
            pa.control_reads.extend(a.control.iter().copied());
            pa.data_reads.extend(a.data.iter().copied());
            pa.writes.extend(a.writes.iter().copied());
            pa.validity_reads.extend(a.vreads.iter().copied());
            pa.validity_writes.extend(a.vwrites.iter().copied());
            pa.whole_headers.extend(a.whole.iter().copied());
            pa.removes_headers |= a.removes;
            pa.effects.extend(a.effects.iter().cloned());
            for b in &a.state {
                pa.stateful.push((name.clone(), b.clone()));
            }
        }
        let data: BTreeSet<FieldRef> = pa
            .data_reads
            .difference(&pa.control_reads)
            .copied()
            .collect();
        pa.data_reads = data;
        out.prefix = Some(Box::new(pa));
    }
    out
}

/// The analyses of every pipeline of `p`.
pub fn analyse_all(p: &Program) -> Vec<PipelineAnalysis> {
    (0..p.pipelines.len()).map(|i| analyse(p, i)).collect()
}

fn bits(p: &Program, fs: &BTreeSet<FieldRef>) -> u32 {
    fs.iter().map(|f| p.field_width(*f)).sum()
}

fn names(p: &Program, fs: &BTreeSet<FieldRef>) -> String {
    if fs.is_empty() {
        return "(none)".into();
    }
    fs.iter()
        .map(|f| format!("{}:{}", p.field_name(*f), p.field_width(*f)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn headers(p: &Program, hs: &BTreeSet<u32>) -> String {
    if hs.is_empty() {
        return "(none)".into();
    }
    hs.iter()
        .map(|h| p.headers[*h as usize].name.clone())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The analyses as text: per pipeline the key bits (control reads, data reads, written
/// fields, validity), the effects, and the guards / uncacheable nodes.
pub fn explain(p: &Program) -> String {
    let mut s = String::new();
    let all_bits: u32 = p
        .headers
        .iter()
        .map(|h| p.header_types[h.header_type as usize].fixed_bits())
        .sum();
    for a in analyse_all(p) {
        let key = a.key_fields(p);
        let _ = writeln!(s, "pipeline {} ({} nodes reachable)", a.name, a.nodes.len());
        let _ = writeln!(
            s,
            "  cacheable: {}",
            if a.cacheable() {
                "yes (whole pipeline)".to_string()
            } else {
                format!(
                    "no; longest cacheable prefix: {} of {} nodes{}",
                    a.cacheable_prefix.len(),
                    a.nodes.len(),
                    if a.cacheable_prefix.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", a.cacheable_prefix.join(", "))
                    }
                )
            }
        );
        if !a.cacheable() && a.prefix.is_some() {
            let _ = writeln!(
                s,
                "  cached: the prefix (replayed, then the pipeline resumes natively at the first uncacheable node)"
            );
        }
        let _ = writeln!(
            s,
            "  control reads ({} bits): {}",
            bits(p, &a.control_reads),
            names(p, &a.control_reads)
        );
        let _ = writeln!(
            s,
            "  data reads ({} bits): {}",
            bits(p, &a.data_reads),
            names(p, &a.data_reads)
        );
        let _ = writeln!(
            s,
            "  writes ({} bits): {}",
            bits(p, &a.writes),
            names(p, &a.writes)
        );
        let _ = writeln!(s, "  validity read: {}", headers(p, &a.validity_reads));
        let _ = writeln!(s, "  validity written: {}", headers(p, &a.validity_writes));
        let _ = writeln!(s, "  whole headers: {}", headers(p, &a.whole_headers));
        let _ = writeln!(
            s,
            "  key: {} field bits (of {} in the program) + validity of {} headers{}",
            bits(p, &key),
            all_bits,
            p.headers.len(),
            if p.header_stacks.is_empty() {
                ""
            } else {
                " + stack fill levels"
            }
        );
        if a.effects.is_empty() {
            let _ = writeln!(s, "  effects: field writes only");
        } else {
            let _ = writeln!(s, "  effects: field writes, and:");
            for (what, at) in &a.effects {
                let _ = writeln!(s, "    {what} ({at})");
            }
        }
        if !a.stateful.is_empty() {
            let _ = writeln!(s, "  state (guards on register values at hit time):");
            for (node, what) in &a.stateful {
                let _ = writeln!(s, "    {node}: {what}");
            }
            let _ = writeln!(
                s,
                "  symbolic register updates: {}",
                match symbolic_state(p, a.pipeline) {
                    Ok(fs) => format!(
                        "yes (state fields: {})",
                        fs.iter()
                            .map(|f| p.field_name(*f))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    Err(why) => format!("no, values in the key instead: {why}"),
                }
            );
        }
        if a.uncacheable.is_empty() && !a.stateful.is_empty() {
            let _ = writeln!(
                s,
                "  guards: the register state (conditions on state fields, or the cells read)"
            );
        } else if a.uncacheable.is_empty() {
            let _ = writeln!(s, "  guards: none");
        } else {
            let _ = writeln!(s, "  uncacheable:");
            for (node, why) in &a.uncacheable {
                let _ = writeln!(s, "    {node}: {why}");
            }
        }
    }
    s
}

/// Whether pipeline `pi` qualifies for symbolic register updates ([`super::Stateful::Symbolic`]):
/// the fields its `register_read`s write (the *state fields*) are used only as
/// `register_read` destinations, incremented by constants (`m = m + c`, also masked to m's
/// width), written back by `register_write`, and read by conditions that read nothing but
/// state fields (re-evaluated as guards on a hit); no table key, selector, hash, field list,
/// other action or other pipeline reads them; all are unsigned and at most 64 bits wide, as
/// are the register arrays. `Ok(state fields)`, or why not.
pub fn symbolic_state(p: &Program, pi: usize) -> Result<Vec<FieldRef>, String> {
    let pl = &p.pipelines[pi];
    let w = Walker { p, pl };
    let fname = |f: FieldRef| p.field_name(f);
    // Reachable nodes.
    let mut seen = HashSet::new();
    let mut order = Vec::new();
    let mut stack: Vec<Node> = pl.init.into_iter().collect();
    while let Some(n) = stack.pop() {
        if !seen.insert(n) {
            continue;
        }
        order.push(n);
        let (_, _, next) = w.node(n);
        stack.extend(next.iter().rev());
    }
    let mut actions: BTreeSet<u32> = BTreeSet::new();
    for n in &order {
        match *n {
            Node::Table(t) => {
                let t = &pl.tables[t as usize];
                actions.extend(t.actions.iter().copied());
                if let Some(d) = &t.default_entry {
                    actions.insert(d.action);
                }
                for e in t.entries.iter().flatten() {
                    actions.insert(e.action);
                }
            }
            Node::ActionCall(c) => {
                actions.insert(pl.action_calls[c as usize].action);
            }
            Node::Conditional(_) => {}
        }
    }
    let prims = || {
        actions
            .iter()
            .filter_map(|a| p.actions.get(*a as usize))
            .flat_map(|a| a.primitives.iter())
    };
    // The state fields.
    let mut state: BTreeSet<FieldRef> = BTreeSet::new();
    for pr in prims() {
        if pr.op == "register_read" {
            match pr.params.first() {
                Some(Arg::Field(f)) | Some(Arg::Expr(Expr::Field(f))) => {
                    state.insert(*f);
                }
                _ => return Err("a register_read writes something other than a field".into()),
            }
            if let Some(Arg::RegisterArray(r)) = pr.params.get(1) {
                if p.register_arrays
                    .get(*r as usize)
                    .map_or(65, |r| r.bitwidth)
                    > 64
                {
                    return Err("a register array is wider than 64 bits".into());
                }
            }
        }
    }
    if state.is_empty() {
        return Err("no register_read".into());
    }
    for f in &state {
        let fd = &p.header_types[p.headers[f.header as usize].header_type as usize].fields
            [f.field as usize];
        if p.field_width(*f) > 64 || fd.signed || fd.saturating {
            return Err(format!(
                "{} is signed, saturating or wider than 64 bits",
                fname(*f)
            ));
        }
    }
    let is_state = |e: &Expr| matches!(e, Expr::Field(f) if state.contains(f));
    let is_const = |e: &Option<Box<Expr>>| matches!(e.as_deref(), Some(Expr::Const(_)));
    // `m + c`, or `(m + c) & all-ones(width m)`, for the state field m being assigned.
    let increment = |m: FieldRef, e: &Expr| -> bool {
        let plus = |e: &Expr| match e {
            Expr::Op {
                op: Op::Add,
                left: Some(l),
                right,
                cond: None,
            } => matches!(**l, Expr::Field(f) if f == m) && is_const(right),
            _ => false,
        };
        match e {
            Expr::Op {
                op: Op::And,
                left: Some(l),
                right: Some(r),
                cond: None,
            } => {
                let ones = match &**r {
                    Expr::Const(c) if !c.negative => {
                        let bits: u32 = c
                            .magnitude
                            .iter()
                            .skip_while(|b| **b == 0)
                            .map(|b| b.count_ones())
                            .sum();
                        let all = c
                            .magnitude
                            .iter()
                            .skip_while(|b| **b == 0)
                            .all(|b| b.count_ones() == 8 || (b + 1).is_power_of_two());
                        all && bits == p.field_width(m)
                    }
                    _ => false,
                };
                ones && plus(l)
            }
            other => plus(other),
        }
    };
    for a in actions.iter().filter_map(|a| p.actions.get(*a as usize)) {
        for pr in &a.primitives {
            let mut acc = Acc::default();
            w.primitive(pr, &a.name, &mut acc);
            let reads: Vec<FieldRef> = acc
                .control
                .iter()
                .chain(&acc.data)
                .filter(|f| state.contains(f))
                .copied()
                .collect();
            let writes: Vec<FieldRef> = acc
                .writes
                .iter()
                .filter(|f| state.contains(f))
                .copied()
                .collect();
            if reads.is_empty() && writes.is_empty() {
                continue;
            }
            let arg = |i: usize| match pr.params.get(i) {
                Some(Arg::Field(f)) => Some(Expr::Field(*f)),
                Some(Arg::Expr(e)) => Some(e.clone()),
                _ => None,
            };
            let ok = match pr.op.as_str() {
                "register_read" => reads.is_empty(),
                "register_write" => {
                    arg(2).is_some_and(|e| is_state(&e)) && {
                        let mut ix = Acc::default();
                        if let Some(x) = pr.params.get(1) {
                            w.arg_read(x, &mut ix);
                        }
                        !ix.control.iter().chain(&ix.data).any(|f| state.contains(f))
                    }
                }
                "assign" | "modify_field" => match (arg(0), arg(1)) {
                    (Some(Expr::Field(m)), Some(e)) if state.contains(&m) => increment(m, &e),
                    _ => false,
                },
                _ => false,
            };
            if !ok {
                return Err(format!(
                    "action {} uses state field {} in {}",
                    a.name,
                    fname(*reads.first().or(writes.first()).unwrap_or(&FieldRef {
                        header: 0,
                        field: 0
                    })),
                    pr.op
                ));
            }
        }
    }
    for n in &order {
        match *n {
            Node::Table(t) => {
                let t = &pl.tables[t as usize];
                let mut acc = Acc::default();
                for k in &t.key {
                    if let KeyTarget::Field(f) = k.target {
                        acc.control.insert(f);
                    }
                }
                if let Some(ap) = t
                    .action_profile
                    .and_then(|x| pl.action_profiles.get(x as usize))
                {
                    if let Some(sel) = &ap.selector {
                        acc.control.extend(sel.input.iter().copied());
                    }
                }
                if acc.control.iter().any(|f| state.contains(f)) {
                    return Err(format!("table {} matches on a state field", t.name));
                }
            }
            Node::Conditional(c) => {
                let c = &pl.conditionals[c as usize];
                let mut acc = Acc::default();
                w.expr(&c.expr, true, &mut acc);
                let reads_state = acc.control.iter().any(|f| state.contains(f));
                let only_state = acc.control.iter().all(|f| state.contains(f))
                    && acc.vreads.is_empty()
                    && acc.whole.is_empty()
                    && acc.bad.is_empty();
                if reads_state && !only_state {
                    return Err(format!(
                        "condition {} reads a state field and other fields",
                        c.name
                    ));
                }
            }
            Node::ActionCall(_) => {}
        }
    }
    // Nothing else in the program reads the state fields.
    for (qi, _) in p.pipelines.iter().enumerate().filter(|(q, _)| *q != pi) {
        let o = analyse(p, qi);
        if let Some(f) = o
            .control_reads
            .iter()
            .chain(&o.data_reads)
            .chain(&o.writes)
            .find(|f| state.contains(f))
        {
            return Err(format!(
                "pipeline {} uses state field {}",
                o.name,
                fname(*f)
            ));
        }
    }
    for fl in &p.field_lists {
        if fl
            .elements
            .iter()
            .any(|e| matches!(e, tern_model::FieldListElem::Field(f) if state.contains(f)))
        {
            return Err(format!("field list {} holds a state field", fl.name));
        }
    }
    for l in &p.learn_lists {
        if l.elements.iter().any(|f| state.contains(f)) {
            return Err(format!("learn list {} holds a state field", l.name));
        }
    }
    Ok(state.into_iter().collect())
}

/// Stale bytes of headers invalid on arrival. A recycled packet keeps the previous packet's
/// bytes in the slots of headers it does not carry (as BMv2's PHV pool does: `PHV::reset`
/// only marks headers invalid), so keying those bytes makes one flow many behaviours. The
/// cache masks them out of its key for the *candidate* headers below, and inserts a recorded
/// behaviour only when its path never looked at a candidate's stale bytes: a table key or an
/// action reading (or writing, or validating without zeroing) one of its fields before an
/// `add_header` zeroed it. Conditions and direct action calls are not on the recorded path,
/// so a header they touch is no candidate.
#[derive(Clone, Debug, Default)]
pub struct StaleFacts {
    /// Candidate headers (at most 64; bit `i` of the masks below is `headers[i]`).
    pub headers: Vec<u32>,
    /// Per table of the pipeline (local index): candidates its key or selector reads.
    pub table_reads: Vec<u64>,
    /// Per program action: `(zeroes, stale)` — candidates the action zeroes (`add_header`)
    /// before anything else touches them, and candidates it touches first otherwise.
    pub actions: Vec<(u64, u64)>,
}

/// The [`StaleFacts`] of pipeline `pi` of `p`.
pub fn stale_facts(p: &Program, pi: usize) -> StaleFacts {
    let pl = &p.pipelines[pi];
    let w = Walker { p, pl };
    // Headers of stacks and unions move or invalidate each other: never candidates.
    let grouped: HashSet<u32> = p
        .header_stacks
        .iter()
        .flat_map(|s| s.headers.iter().copied())
        .chain(
            p.header_unions
                .iter()
                .flat_map(|u| u.headers.iter().copied()),
        )
        .collect();
    // Headers touched (fields, whole, validity written) by `a`.
    let touched = |a: &Acc| -> BTreeSet<u32> {
        a.control
            .iter()
            .chain(&a.data)
            .chain(&a.writes)
            .map(|f| f.header)
            .chain(a.whole.iter().copied())
            .chain(a.vwrites.iter().copied())
            .collect()
    };
    let mut excluded: HashSet<u32> = grouped;
    for c in &pl.conditionals {
        let mut a = Acc::default();
        w.expr(&c.expr, true, &mut a);
        excluded.extend(touched(&a));
    }
    for c in &pl.action_calls {
        let mut a = Acc::default();
        w.action(c.action, &mut a);
        excluded.extend(touched(&a));
    }
    let headers: Vec<u32> = (0..p.headers.len() as u32)
        .filter(|h| !p.headers[*h as usize].metadata && !excluded.contains(h))
        .filter(|h| {
            p.header_types
                .get(p.headers[*h as usize].header_type as usize)
                .is_some_and(|t| t.vl_field().is_none())
        })
        .take(64)
        .collect();
    let bit = |set: &BTreeSet<u32>| -> u64 {
        headers
            .iter()
            .enumerate()
            .filter(|(_, h)| set.contains(h))
            .fold(0, |m, (i, _)| m | 1 << i)
    };
    let table_reads = pl
        .tables
        .iter()
        .map(|t| {
            let mut a = Acc::default();
            for k in &t.key {
                if let KeyTarget::Field(f) = k.target {
                    w.expr(&Expr::Field(f), true, &mut a);
                }
            }
            if let Some(s) = t
                .action_profile
                .and_then(|i| pl.action_profiles.get(i as usize))
                .and_then(|ap| ap.selector.as_ref())
            {
                a.control.extend(s.input.iter().copied());
            }
            bit(&touched(&a))
        })
        .collect();
    let actions = p
        .actions
        .iter()
        .map(|act| {
            let (mut zeroes, mut stale, mut jumped) = (0u64, 0u64, false);
            for pr in &act.primitives {
                jumped |= pr.op.starts_with("_jump");
                if pr.op == "add_header" && !jumped {
                    if let Some(Arg::Header(h)) = pr.params.first() {
                        let b = bit(&BTreeSet::from([*h]));
                        zeroes |= b & !stale;
                        continue;
                    }
                }
                if pr.op == "remove_header" {
                    if let Some(Arg::Header(_)) = pr.params.first() {
                        // Validity only (keyed); the bytes stay as they are.
                        continue;
                    }
                }
                let mut a = Acc::default();
                w.primitive(pr, &act.name, &mut a);
                stale |= bit(&touched(&a)) & !zeroes;
            }
            (zeroes, stale)
        })
        .collect();
    StaleFacts {
        headers,
        table_reads,
        actions,
    }
}
