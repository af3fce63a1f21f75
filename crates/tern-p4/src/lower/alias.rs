//! Conservative syntactic alias analysis for calls: decides when an argument of an inlined
//! action or function must really be copied in and out (P4-16's calling convention) and
//! when binding it by reference gives the same result.
//!
//! Access paths are name chains cut at two components and at any component whose target
//! is not fixed at compile time (run-time index, `next`, `last`, slices), so two paths
//! that may denote overlapping storage always share a prefix (`hdr.u.a` and `hdr.u.b`
//! of a header union in a struct, `hdr.s[0]` and `hdr.s[i]`; a header union variable's
//! members are cut to the variable). Names that only look alike (a local
//! shadowing a global) make the analysis copy more, never less.

use super::*;
use std::collections::HashSet;

/// A cut access path, e.g. `["hdr", "ipv4"]`.
pub(super) type Path = Vec<String>;

/// Longest components kept in a path (root plus one member).
const MAX_PATH: usize = 2;

/// The access path of an l-value-like expression, or `None` if it is not one.
pub(super) fn path_of(e: &Expr) -> Option<Path> {
    let mut p = full_path(e)?;
    p.truncate(MAX_PATH);
    Some(p)
}

fn full_path(e: &Expr) -> Option<Path> {
    match &e.kind {
        ExprKind::Name(n) => Some(vec![n.clone()]),
        ExprKind::Member(b, f) => {
            let mut p = full_path(b)?;
            if !matches!(
                f.as_str(),
                "next" | "last" | "lastIndex" | "size" | "nextIndex"
            ) {
                p.push(f.clone());
            }
            Some(p)
        }
        // Any index stops the path at the stack: elements `[0]` and `[i]` may be equal.
        ExprKind::Index(b, _) | ExprKind::Slice(b, _, _) => full_path(b),
        _ => None,
    }
}

/// Whether two paths may overlap (one is a prefix of the other).
pub(super) fn overlap(a: &Path, b: &Path) -> bool {
    a.iter().zip(b.iter()).all(|(x, y)| x == y)
}

/// Paths a callee body touches outside its own parameters: everything it reads or writes
/// (`all`) and what it may write (`writes`: assignment targets, call arguments, objects
/// whose methods it calls), following the actions and functions it calls.
#[derive(Default)]
pub(super) struct Footprint {
    pub all: Vec<Path>,
    pub writes: Vec<Path>,
}

impl Footprint {
    pub(super) fn touches(&self, p: &Path) -> bool {
        self.all.iter().any(|q| overlap(p, q))
    }
    pub(super) fn writes_to(&self, p: &Path) -> bool {
        self.writes.iter().any(|q| overlap(p, q))
    }
}

impl Lower {
    /// A path cut further when its root is a header union variable: `u.a` and `u.b` share
    /// storage validity, so both become `u`.
    pub(super) fn union_cut(&self, mut p: Path) -> Path {
        if p.len() > 1 {
            if let Some(Val::Place(Place::Union(..))) = self.lookup(&p[0]) {
                p.truncate(1);
            }
        }
        p
    }

    /// The footprint of a callable declaration's body.
    pub(super) fn footprint(&self, d: &Decl) -> Footprint {
        let mut fp = Footprint::default();
        let mut seen = HashSet::new();
        self.fp_decl(d, &mut fp, &mut seen, 0);
        fp
    }

    /// What evaluating an argument expression may write (calls inside it, with their
    /// out/inout arguments and the storage their callees touch).
    pub(super) fn expr_writes(&self, e: &Expr) -> Vec<Path> {
        let mut fp = Footprint::default();
        let mut seen = HashSet::new();
        let mut w = Walk {
            lower: self,
            own: HashSet::new(),
            fp: &mut fp,
            seen: &mut seen,
            depth: 0,
        };
        w.expr(e, false);
        fp.writes
    }

    fn fp_decl(&self, d: &Decl, fp: &mut Footprint, seen: &mut HashSet<String>, depth: usize) {
        let (params, body) = match &d.kind {
            DeclKind::Action { params, body, .. } | DeclKind::Function { params, body, .. } => {
                (params, body)
            }
            _ => return,
        };
        if depth > 16 || !seen.insert(d.name().unwrap_or("").to_string()) {
            return;
        }
        let own: HashSet<&str> = params.iter().map(|p| p.name.as_str()).collect();
        let mut w = Walk {
            lower: self,
            own,
            fp,
            seen,
            depth,
        };
        for p in params {
            if let Some(e) = &p.default {
                w.expr(e, false);
            }
        }
        for s in body {
            w.stmt(s);
        }
    }
}

struct Walk<'a> {
    lower: &'a Lower,
    own: HashSet<&'a str>,
    fp: &'a mut Footprint,
    seen: &'a mut HashSet<String>,
    depth: usize,
}

impl Walk<'_> {
    fn record(&mut self, p: Path, write: bool) {
        if p.first().is_some_and(|r| self.own.contains(r.as_str())) {
            return;
        }
        let p = self.lower.union_cut(p);
        if write {
            self.fp.writes.push(p.clone());
        }
        self.fp.all.push(p);
    }

    fn stmt(&mut self, s: &Stmt) {
        match &s.kind {
            StmtKind::Assign(l, r) => {
                self.expr(l, true);
                self.expr(r, false);
            }
            StmtKind::Call(e) => self.expr(e, false),
            StmtKind::If(c, a, b) => {
                self.expr(c, false);
                self.stmt(a);
                if let Some(b) = b {
                    self.stmt(b);
                }
            }
            StmtKind::Switch(e, cases) => {
                self.expr(e, false);
                for c in cases {
                    if let Some(l) = &c.label {
                        self.expr(l, false);
                    }
                    for s in c.body.iter().flatten() {
                        self.stmt(s);
                    }
                }
            }
            StmtKind::Block(ss) => ss.iter().for_each(|s| self.stmt(s)),
            StmtKind::Var(d) => match &d.kind {
                DeclKind::Var { init: Some(e), .. } | DeclKind::Const { value: e, .. } => {
                    self.expr(e, false)
                }
                _ => {}
            },
            StmtKind::Return(Some(e)) => self.expr(e, false),
            StmtKind::For {
                init,
                cond,
                update,
                body,
            } => {
                init.iter().chain(update.iter()).for_each(|s| self.stmt(s));
                if let Some(c) = cond {
                    self.expr(c, false);
                }
                self.stmt(body);
            }
            StmtKind::Exit
            | StmtKind::Return(None)
            | StmtKind::Empty
            | StmtKind::Break
            | StmtKind::Continue => {}
        }
    }

    /// Index and slice-bound expressions inside an l-value chain (read, never written).
    fn chain_sides(&mut self, e: &Expr) {
        match &e.kind {
            ExprKind::Member(b, _) => self.chain_sides(b),
            ExprKind::Index(b, i) => {
                self.chain_sides(b);
                self.expr(i, false);
            }
            ExprKind::Slice(b, h, l) => {
                self.chain_sides(b);
                self.expr(h, false);
                self.expr(l, false);
            }
            _ => {}
        }
    }

    fn expr(&mut self, e: &Expr, write: bool) {
        if let Some(p) = path_of(e) {
            self.record(p, write);
            self.chain_sides(e);
            return;
        }
        match &e.kind {
            ExprKind::Call(callee, _, args) => {
                match &callee.kind {
                    // A method may change its object (`setValid`, `push_front`, `read`).
                    ExprKind::Member(obj, _) => self.expr(obj, true),
                    ExprKind::Name(f) => {
                        let d = self
                            .lower
                            .local_actions
                            .get(f)
                            .or(self.lower.global_actions.get(f))
                            .or(self.lower.global_funcs.get(f));
                        if let Some(d) = d {
                            let d = d.clone();
                            self.lower.fp_decl(&d, self.fp, self.seen, self.depth + 1);
                        }
                    }
                    _ => self.expr(callee, false),
                }
                // Arguments may be out/inout (also of externs): count them as written.
                for a in args {
                    self.expr(a, true);
                }
            }
            ExprKind::Member(b, _) => self.expr(b, false),
            ExprKind::Unary(_, a) | ExprKind::Cast(_, a) => self.expr(a, false),
            ExprKind::Binary(_, a, b) | ExprKind::Mask(a, b) | ExprKind::Range(a, b) => {
                self.expr(a, false);
                self.expr(b, false);
            }
            ExprKind::Ternary(a, b, c) => {
                self.expr(a, false);
                self.expr(b, write);
                self.expr(c, write);
            }
            ExprKind::Index(b, i) => {
                self.expr(b, write);
                self.expr(i, false);
            }
            ExprKind::Slice(b, h, l) => {
                self.expr(b, write);
                self.expr(h, false);
                self.expr(l, false);
            }
            ExprKind::List(es) => es.iter().for_each(|x| self.expr(x, write)),
            ExprKind::NamedList(es) => es.iter().for_each(|(_, x)| self.expr(x, write)),
            ExprKind::Int(..)
            | ExprKind::Bool(_)
            | ExprKind::Str(_)
            | ExprKind::Name(_)
            | ExprKind::Default
            | ExprKind::Type(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(kind: ExprKind) -> Expr {
        Expr {
            kind,
            pos: Pos::default(),
        }
    }
    fn name(n: &str) -> Expr {
        e(ExprKind::Name(n.into()))
    }
    fn mem(b: Expr, f: &str) -> Expr {
        e(ExprKind::Member(Box::new(b), f.into()))
    }

    #[test]
    fn paths_are_cut_and_overlap_by_prefix() {
        let a = path_of(&mem(mem(name("hdr"), "u"), "a")).unwrap();
        let b = path_of(&mem(mem(name("hdr"), "u"), "b")).unwrap();
        assert_eq!(a, vec!["hdr".to_string(), "u".to_string()]);
        assert!(overlap(&a, &b));
        let c = path_of(&mem(name("hdr"), "v")).unwrap();
        assert!(!overlap(&a, &c));
        let s0 = path_of(&e(ExprKind::Index(
            Box::new(name("s")),
            Box::new(e(ExprKind::Int(0, None))),
        )))
        .unwrap();
        let sn = path_of(&mem(name("s"), "next")).unwrap();
        assert!(overlap(&s0, &sn));
        assert!(path_of(&e(ExprKind::Int(1, None))).is_none());
    }
}
