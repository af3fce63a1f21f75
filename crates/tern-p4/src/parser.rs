//! The recursive-descent parser: tokens to [`crate::ast`] declarations. Errors are collected
//! (`file:line:col` + what was expected); after an error the parser skips to the next
//! declaration so several errors can be reported per run. Nesting depth is bounded so no input
//! can overflow the stack.

use crate::ast::*;
use crate::diag::{Diagnostic, Pos};
use crate::lexer::{Tok, Token};
use std::collections::HashSet;

type R<T> = Result<T, Diagnostic>;

const MAX_DEPTH: usize = 64;

/// Parser state.
pub struct Parser<'t> {
    toks: &'t [Token],
    i: usize,
    types: HashSet<String>,
    depth: usize,
    pub errors: Vec<Diagnostic>,
}

/// Parse a whole program.
pub fn parse(toks: &[Token]) -> (Vec<Decl>, Vec<Diagnostic>) {
    let mut p = Parser {
        toks,
        i: 0,
        types: HashSet::new(),
        depth: 0,
        errors: Vec::new(),
    };
    let mut decls = Vec::new();
    while !p.at_eof() {
        if p.eat_p(";") {
            continue;
        }
        let start = p.i;
        match p.decl(true) {
            Ok(d) => decls.push(d),
            Err(e) => {
                p.errors.push(e);
                p.recover(start);
            }
        }
        if p.errors.len() > 50 {
            break;
        }
    }
    (decls, p.errors)
}

fn describe(t: &Tok) -> String {
    match t {
        Tok::Ident(s) => format!("`{s}`"),
        Tok::Int(v, _) => format!("number `{v}`"),
        Tok::Str(s) => format!("string \"{s}\""),
        Tok::P(p) => format!("`{p}`"),
        Tok::Eof => "end of file".into(),
    }
}

impl<'t> Parser<'t> {
    fn tok(&self) -> &Tok {
        self.toks.get(self.i).map(|t| &t.tok).unwrap_or(&Tok::Eof)
    }
    fn tok_at(&self, k: usize) -> &Tok {
        self.toks
            .get(self.i + k)
            .map(|t| &t.tok)
            .unwrap_or(&Tok::Eof)
    }
    fn pos(&self) -> Pos {
        self.toks
            .get(self.i)
            .or(self.toks.last())
            .map(|t| t.pos)
            .unwrap_or_default()
    }
    fn at_eof(&self) -> bool {
        matches!(self.tok(), Tok::Eof)
    }
    fn is_p(&self, p: &str) -> bool {
        matches!(self.tok(), Tok::P(x) if *x == p)
    }
    fn is_p_at(&self, k: usize, p: &str) -> bool {
        matches!(self.tok_at(k), Tok::P(x) if *x == p)
    }
    fn is_kw(&self, k: &str) -> bool {
        matches!(self.tok(), Tok::Ident(x) if x == k)
    }
    fn eat_p(&mut self, p: &str) -> bool {
        if self.is_p(p) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn eat_kw(&mut self, k: &str) -> bool {
        if self.is_kw(k) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn err<T>(&self, what: &str) -> R<T> {
        Err(Diagnostic::new(
            self.pos(),
            format!("expected {what}, found {}", describe(self.tok())),
        ))
    }
    fn expect_p(&mut self, p: &str) -> R<()> {
        if self.eat_p(p) {
            Ok(())
        } else {
            self.err(&format!("`{p}`"))
        }
    }
    /// `>` that may be the first half of a glued `>>`.
    fn expect_close_angle(&mut self) -> R<()> {
        self.expect_p(">")
    }
    fn ident(&mut self) -> R<String> {
        match self.tok().clone() {
            Tok::Ident(s) => {
                self.i += 1;
                Ok(s)
            }
            _ => self.err("an identifier"),
        }
    }
    /// Names may also be some keywords used as identifiers (e.g. `apply`, `key`, `actions`).
    fn name(&mut self) -> R<String> {
        self.ident()
    }
    fn enter(&mut self) -> R<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(Diagnostic::new(self.pos(), "program nested too deeply"));
        }
        Ok(())
    }
    fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    /// Skip to the end of the broken declaration (brace depth counted from its start).
    fn recover(&mut self, start: usize) {
        let mut level: i32 = 0;
        for t in &self.toks[start..self.i.min(self.toks.len())] {
            match t.tok {
                Tok::P("{") => level += 1,
                Tok::P("}") => level -= 1,
                _ => {}
            }
        }
        if self.i == start {
            self.i += 1;
            if matches!(self.toks.get(start).map(|t| &t.tok), Some(Tok::P("{"))) {
                level += 1;
            }
        }
        while !self.at_eof() {
            if self.is_p("{") {
                level += 1;
            } else if self.is_p("}") {
                level -= 1;
                if level <= 0 {
                    self.i += 1;
                    self.depth = 0;
                    return;
                }
            } else if self.is_p(";") && level <= 0 {
                self.i += 1;
                self.depth = 0;
                return;
            }
            self.i += 1;
        }
        self.depth = 0;
    }

    fn annotations(&mut self) -> R<Vec<Annotation>> {
        let mut out = Vec::new();
        while self.is_p("@") {
            let pos = self.pos();
            self.i += 1;
            let name_pos = self.pos();
            let name = self.ident()?;
            let mut args = Vec::new();
            if name == "pragma" {
                // `@pragma NAME tokens...` runs to the end of its line (P4-16 §18: the
                // same as `@NAME(tokens...)`); the tokens are kept only when they are literals.
                let same_line =
                    |t: &Token| t.pos.file == name_pos.file && t.pos.line == name_pos.line;
                let mut body = Vec::new();
                while !self.at_eof() && same_line(&self.toks[self.i]) {
                    body.push(self.toks[self.i].clone());
                    self.i += 1;
                }
                let Some(Tok::Ident(pname)) = body.first().map(|t| t.tok.clone()) else {
                    return Err(Diagnostic::new(
                        name_pos,
                        "`@pragma` needs a name on its line",
                    ));
                };
                let args = body[1..]
                    .iter()
                    .filter_map(|t| match &t.tok {
                        Tok::Int(v, w) => Some(Expr {
                            kind: ExprKind::Int(*v, *w),
                            pos: t.pos,
                        }),
                        Tok::Str(v) => Some(Expr {
                            kind: ExprKind::Str(v.clone()),
                            pos: t.pos,
                        }),
                        _ => None,
                    })
                    .collect();
                out.push(Annotation {
                    name: pname,
                    args,
                    pos,
                });
                continue;
            }
            if self.is_p("(") && self.toks.get(self.i).map(|t| t.glued).unwrap_or(false)
                || self.is_p("(")
                    && matches!(
                        name.as_str(),
                        "name"
                            | "id"
                            | "field_list"
                            | "priority"
                            | "controller_header"
                            | "alias"
                            | "noWarn"
                            | "pkginfo"
                            | "brief"
                            | "description"
                    )
            {
                self.i += 1;
                // Parse a comma list of expressions; tolerate anything by skipping balanced.
                let save = self.i;
                let parsed: R<Vec<Expr>> = (|| {
                    let mut v = Vec::new();
                    if !self.is_p(")") {
                        loop {
                            v.push(self.expr()?);
                            if !self.eat_p(",") {
                                break;
                            }
                        }
                    }
                    if !self.is_p(")") {
                        return self.err("`)`");
                    }
                    Ok(v)
                })();
                match parsed {
                    Ok(v) => {
                        args = v;
                        self.i += 1;
                    }
                    Err(_) => {
                        self.i = save;
                        let mut level = 1;
                        while !self.at_eof() && level > 0 {
                            if self.is_p("(") {
                                level += 1;
                            } else if self.is_p(")") {
                                level -= 1;
                            }
                            self.i += 1;
                        }
                    }
                }
            } else if self.is_p("[") {
                let mut level = 0;
                loop {
                    if self.at_eof() {
                        break;
                    }
                    if self.is_p("[") {
                        level += 1;
                    } else if self.is_p("]") {
                        level -= 1;
                        if level == 0 {
                            self.i += 1;
                            break;
                        }
                    }
                    self.i += 1;
                }
            }
            out.push(Annotation { name, args, pos });
        }
        Ok(out)
    }

    fn type_params(&mut self) -> R<Vec<String>> {
        let mut v = Vec::new();
        if self.eat_p("<") {
            loop {
                let n = self.ident()?;
                self.types.insert(n.clone());
                v.push(n);
                if !self.eat_p(",") {
                    break;
                }
            }
            self.expect_close_angle()?;
        }
        Ok(v)
    }

    fn is_type_start(&self) -> bool {
        match self.tok() {
            Tok::Ident(s) => {
                matches!(
                    s.as_str(),
                    "bit" | "int" | "varbit" | "bool" | "error" | "string" | "void" | "tuple"
                ) || self.types.contains(s)
            }
            _ => false,
        }
    }

    /// Parse a type.
    pub fn ty(&mut self) -> R<TypeRef> {
        self.enter()?;
        let r = self.ty_inner();
        self.leave();
        r
    }

    fn ty_inner(&mut self) -> R<TypeRef> {
        let pos = self.pos();
        let name = self.ident().or_else(|_| self.err("a type"))?;
        let mut t = match name.as_str() {
            "bit" | "int" | "varbit" => {
                let w = if self.eat_p("<") {
                    let w = if self.eat_p("(") {
                        let e = self.expr()?;
                        self.expect_p(")")?;
                        e
                    } else {
                        self.primary()?
                    };
                    self.expect_close_angle()?;
                    Some(w)
                } else {
                    None
                };
                match (name.as_str(), w) {
                    ("bit", w) => TypeRef::Bit(Box::new(w.unwrap_or(Expr {
                        kind: ExprKind::Int(1, None),
                        pos,
                    }))),
                    ("int", Some(w)) => TypeRef::Int(Box::new(w)),
                    ("int", None) => TypeRef::InfInt,
                    (_, Some(w)) => TypeRef::Varbit(Box::new(w)),
                    _ => return Err(Diagnostic::new(pos, "varbit needs a width `varbit<N>`")),
                }
            }
            "bool" => TypeRef::Bool,
            "error" => TypeRef::Error,
            "string" => TypeRef::Str,
            "void" => TypeRef::Void,
            "tuple" => {
                self.expect_p("<")?;
                let mut v = Vec::new();
                loop {
                    v.push(self.ty()?);
                    if !self.eat_p(",") {
                        break;
                    }
                }
                self.expect_close_angle()?;
                TypeRef::Tuple(v)
            }
            _ => {
                let mut args = Vec::new();
                if self.is_p("<") {
                    self.i += 1;
                    loop {
                        args.push(self.ty()?);
                        if !self.eat_p(",") {
                            break;
                        }
                    }
                    self.expect_close_angle()?;
                }
                TypeRef::Named(name, args, pos)
            }
        };
        while self.is_p("[") {
            self.i += 1;
            let n = self.expr()?;
            self.expect_p("]")?;
            t = TypeRef::Stack(Box::new(t), Box::new(n));
        }
        Ok(t)
    }

    fn params(&mut self) -> R<Vec<Param>> {
        self.expect_p("(")?;
        let mut v = Vec::new();
        if self.eat_p(")") {
            return Ok(v);
        }
        loop {
            let annotations = self.annotations()?;
            let pos = self.pos();
            let dir = match self.tok() {
                Tok::Ident(s) if s == "in" => Some("in"),
                Tok::Ident(s) if s == "out" => Some("out"),
                Tok::Ident(s) if s == "inout" => Some("inout"),
                _ => None,
            };
            if dir.is_some() {
                self.i += 1;
            }
            let ty = self.ty()?;
            let name = self.name()?;
            let default = if self.eat_p("=") {
                Some(self.expr()?)
            } else {
                None
            };
            v.push(Param {
                annotations,
                dir,
                ty,
                name,
                default,
                pos,
            });
            if !self.eat_p(",") {
                break;
            }
        }
        self.expect_p(")")?;
        Ok(v)
    }

    fn fields(&mut self) -> R<Vec<Field>> {
        self.expect_p("{")?;
        let mut v = Vec::new();
        while !self.eat_p("}") {
            if self.at_eof() {
                return self.err("`}`");
            }
            let annotations = self.annotations()?;
            let pos = self.pos();
            let ty = self.ty()?;
            let name = self.name()?;
            self.expect_p(";")?;
            v.push(Field {
                annotations,
                ty,
                name,
                pos,
            });
        }
        Ok(v)
    }

    fn ident_list_block(&mut self) -> R<Vec<String>> {
        self.expect_p("{")?;
        let mut v = Vec::new();
        if self.eat_p("}") {
            return Ok(v);
        }
        loop {
            v.push(self.ident()?);
            if !self.eat_p(",") {
                break;
            }
            if self.is_p("}") {
                break;
            }
        }
        self.expect_p("}")?;
        Ok(v)
    }

    /// A declaration; `top` = at program level.
    fn decl(&mut self, top: bool) -> R<Decl> {
        let annotations = self.annotations()?;
        let pos = self.pos();
        let kw = match self.tok() {
            Tok::Ident(s) => s.clone(),
            _ => return self.err("a declaration"),
        };
        let kind = match kw.as_str() {
            "header" | "struct" | "header_union" => {
                self.i += 1;
                let name = self.ident()?;
                self.types.insert(name.clone());
                let _ = self.type_params()?;
                let fields = self.fields()?;
                match kw.as_str() {
                    "header" => DeclKind::Header { name, fields },
                    "struct" => DeclKind::Struct { name, fields },
                    _ => DeclKind::HeaderUnion { name, fields },
                }
            }
            "typedef" | "type" => {
                self.i += 1;
                let ty = self.ty()?;
                let name = self.ident()?;
                self.types.insert(name.clone());
                self.expect_p(";")?;
                DeclKind::Typedef { name, ty }
            }
            "enum" => {
                self.i += 1;
                let underlying = if self.is_kw("bit") || self.is_kw("int") {
                    Some(self.ty()?)
                } else {
                    None
                };
                let name = self.ident()?;
                self.types.insert(name.clone());
                self.expect_p("{")?;
                let mut members = Vec::new();
                while !self.is_p("}") {
                    let mpos = self.pos();
                    let m = self.ident()?;
                    let v = if self.eat_p("=") {
                        Some(self.expr()?)
                    } else {
                        None
                    };
                    members.push((m, v, mpos));
                    if !self.eat_p(",") {
                        break;
                    }
                }
                self.expect_p("}")?;
                DeclKind::Enum {
                    name,
                    underlying,
                    members,
                }
            }
            "error" if self.is_p_at(1, "{") => {
                self.i += 1;
                DeclKind::Error(self.ident_list_block()?)
            }
            "match_kind" => {
                self.i += 1;
                DeclKind::MatchKind(self.ident_list_block()?)
            }
            "const" => {
                self.i += 1;
                let ty = self.ty()?;
                let name = self.ident()?;
                self.expect_p("=")?;
                let value = self.expr()?;
                self.expect_p(";")?;
                DeclKind::Const { ty, name, value }
            }
            "extern" => {
                self.i += 1;
                // extern function or extern object
                let is_obj = matches!(self.tok_at(0), Tok::Ident(_))
                    && (self.is_p_at(1, "{") || self.is_p_at(1, "<"))
                    && !self.is_type_start_fn();
                if is_obj {
                    let name = self.ident()?;
                    self.types.insert(name.clone());
                    let _ = self.type_params()?;
                    self.expect_p("{")?;
                    let mut methods = Vec::new();
                    while !self.eat_p("}") {
                        if self.at_eof() {
                            return self.err("`}`");
                        }
                        let _ = self.annotations()?;
                        self.eat_kw("abstract");
                        // constructor: Name(params);
                        if self.is_kw(&name) && self.is_p_at(1, "(") {
                            self.i += 1;
                            let _ = self.params()?;
                            self.expect_p(";")?;
                            continue;
                        }
                        let _ret = self.ty()?;
                        let m = self.ident()?;
                        let _ = self.type_params()?;
                        let _ = self.params()?;
                        self.expect_p(";")?;
                        methods.push(m);
                    }
                    DeclKind::Extern { name, methods }
                } else {
                    let _ret = self.ty()?;
                    let name = self.ident()?;
                    let _ = self.type_params()?;
                    let _ = self.params()?;
                    self.expect_p(";")?;
                    DeclKind::ExternFunction { name }
                }
            }
            "action" => {
                self.i += 1;
                let name = self.name()?;
                let params = self.params()?;
                let body = self.block()?;
                DeclKind::Action { name, params, body }
            }
            "parser" | "control" | "package" => {
                self.i += 1;
                let name = self.ident()?;
                self.types.insert(name.clone());
                let _ = self.type_params()?;
                let params = self.params()?;
                if self.eat_p(";") {
                    DeclKind::TypeDecl { name }
                } else if kw == "package" {
                    return self.err("`;`");
                } else {
                    let ctor_params = if self.is_p("(") {
                        self.params()?
                    } else {
                        Vec::new()
                    };
                    self.expect_p("{")?;
                    let mut locals = Vec::new();
                    let mut states = Vec::new();
                    let mut apply = Vec::new();
                    let mut saw_apply = false;
                    while !self.eat_p("}") {
                        if self.at_eof() {
                            return self.err("`}`");
                        }
                        if self.eat_p(";") {
                            continue;
                        }
                        let save = self.i;
                        let anns = self.annotations()?;
                        if kw == "parser" && self.is_kw("state") {
                            states.push(self.state(anns)?);
                        } else if kw == "control" && self.is_kw("apply") {
                            self.i += 1;
                            apply = self.block()?;
                            saw_apply = true;
                        } else {
                            self.i = save;
                            locals.push(self.decl(false)?);
                        }
                    }
                    if kw == "parser" {
                        DeclKind::Parser {
                            name,
                            params,
                            ctor_params,
                            locals,
                            states,
                        }
                    } else {
                        if !saw_apply {
                            return Err(Diagnostic::new(
                                pos,
                                format!("control `{name}` has no apply block"),
                            ));
                        }
                        DeclKind::Control {
                            name,
                            params,
                            ctor_params,
                            locals,
                            apply,
                        }
                    }
                }
            }
            "table" if !top => {
                self.i += 1;
                let name = self.name()?;
                // An empty parameter list (`table t() { … }`) is accepted, as p4c does.
                if self.eat_p("(") {
                    self.expect_p(")")?;
                }
                let props = self.table_props()?;
                DeclKind::Table { name, props }
            }
            "value_set" => {
                self.i += 1;
                self.expect_p("<")?;
                let ty = self.ty()?;
                self.expect_close_angle()?;
                self.expect_p("(")?;
                let size = self.expr()?;
                self.expect_p(")")?;
                let name = self.ident()?;
                self.expect_p(";")?;
                DeclKind::ValueSet { ty, size, name }
            }
            _ => {
                // function, instantiation or variable
                let ty = self.ty()?;
                if self.is_p("(") {
                    let args = self.args()?;
                    let name = self.name()?;
                    if self.is_p("{") {
                        return Err(Diagnostic::new(
                            self.pos(),
                            "instantiations with initializer blocks are not supported",
                        ));
                    }
                    self.expect_p(";")?;
                    DeclKind::Instance { ty, args, name }
                } else {
                    let name = self.name()?;
                    if self.is_p("(") || self.is_p("<") {
                        let _ = self.type_params()?;
                        let params = self.params()?;
                        let body = self.block()?;
                        DeclKind::Function {
                            ret: ty,
                            name,
                            params,
                            body,
                        }
                    } else {
                        let init = if self.eat_p("=") {
                            Some(self.expr()?)
                        } else {
                            None
                        };
                        self.expect_p(";")?;
                        DeclKind::Var { ty, name, init }
                    }
                }
            }
        };
        Ok(Decl {
            annotations,
            kind,
            pos,
        })
    }

    /// `extern T name(...)` where the first token is a known return type.
    fn is_type_start_fn(&self) -> bool {
        // `extern Name {` is an object; `extern bit<8> f(` / `extern void f` is a function.
        match self.tok() {
            Tok::Ident(s) => matches!(s.as_str(), "bit" | "int" | "varbit" | "bool" | "void"),
            _ => false,
        }
    }

    fn table_props(&mut self) -> R<Vec<(TableProp, Pos)>> {
        self.expect_p("{")?;
        let mut props = Vec::new();
        while !self.eat_p("}") {
            if self.at_eof() {
                return self.err("`}`");
            }
            let _ = self.annotations()?;
            let pos = self.pos();
            let is_const = self.eat_kw("const");
            let name = self.name()?;
            match name.as_str() {
                "key" => {
                    self.expect_p("=")?;
                    self.expect_p("{")?;
                    let mut keys = Vec::new();
                    while !self.eat_p("}") {
                        if self.at_eof() {
                            return self.err("`}`");
                        }
                        let kpos = self.pos();
                        let expr = self.expr()?;
                        self.expect_p(":")?;
                        let kind = self.ident()?;
                        let annotations = self.annotations()?;
                        self.expect_p(";")?;
                        keys.push(KeyElement {
                            expr,
                            kind,
                            annotations,
                            pos: kpos,
                        });
                    }
                    props.push((TableProp::Key(keys), pos));
                }
                "actions" => {
                    self.expect_p("=")?;
                    self.expect_p("{")?;
                    let mut acts = Vec::new();
                    while !self.eat_p("}") {
                        if self.at_eof() {
                            return self.err("`}`");
                        }
                        let anns = self.annotations()?;
                        let e = self.expr()?;
                        self.expect_p(";")?;
                        acts.push((anns, e));
                    }
                    props.push((TableProp::Actions(acts), pos));
                }
                "entries" => {
                    self.expect_p("=")?;
                    self.expect_p("{")?;
                    let mut entries = Vec::new();
                    while !self.eat_p("}") {
                        if self.at_eof() {
                            return self.err("`}`");
                        }
                        let mut annotations = self.annotations()?;
                        let epos = self.pos();
                        let priority = if self.eat_kw("priority") {
                            self.expect_p("=")?;
                            let p = self.expr()?;
                            self.expect_p(":")?;
                            Some(p)
                        } else {
                            None
                        };
                        let keys = self.keyset()?;
                        self.expect_p(":")?;
                        let action = self.expr()?;
                        // Annotations may also follow the action (`k : a() @priority(3);`).
                        annotations.extend(self.annotations()?);
                        self.expect_p(";")?;
                        entries.push(TableEntry {
                            annotations,
                            priority,
                            keys,
                            action,
                            pos: epos,
                        });
                    }
                    props.push((TableProp::Entries { is_const, entries }, pos));
                }
                _ => {
                    self.expect_p("=")?;
                    let value = self.expr()?;
                    self.expect_p(";")?;
                    props.push((
                        TableProp::Value {
                            name,
                            is_const,
                            value,
                        },
                        pos,
                    ));
                }
            }
        }
        Ok(props)
    }

    /// A keyset: a tuple `(a, b)` or a single element; elements may be masks/ranges/default.
    fn keyset(&mut self) -> R<Vec<Expr>> {
        if self.is_p("(") {
            // Could be a parenthesized single expression or a tuple.
            let save = self.i;
            self.i += 1;
            let mut v = Vec::new();
            loop {
                v.push(self.keyset_elem()?);
                if !self.eat_p(",") {
                    break;
                }
            }
            if self.eat_p(")") && (self.is_p(":") || v.len() > 1) {
                return Ok(v);
            }
            self.i = save;
        }
        Ok(vec![self.keyset_elem()?])
    }

    fn keyset_elem(&mut self) -> R<Expr> {
        let pos = self.pos();
        if self.eat_kw("default") || self.eat_kw("_") {
            return Ok(Expr {
                kind: ExprKind::Default,
                pos,
            });
        }
        let e = self.expr()?;
        if self.eat_p("&&&") {
            let m = self.expr()?;
            return Ok(Expr {
                kind: ExprKind::Mask(Box::new(e), Box::new(m)),
                pos,
            });
        }
        if self.eat_p("..") {
            let m = self.expr()?;
            return Ok(Expr {
                kind: ExprKind::Range(Box::new(e), Box::new(m)),
                pos,
            });
        }
        Ok(e)
    }

    fn state(&mut self, annotations: Vec<Annotation>) -> R<State> {
        let pos = self.pos();
        self.i += 1; // state
        let name = self.name()?;
        self.expect_p("{")?;
        let mut body = Vec::new();
        let mut transition = None;
        while !self.eat_p("}") {
            if self.at_eof() {
                return self.err("`}`");
            }
            if self.is_kw("transition") {
                self.i += 1;
                let tpos = self.pos();
                if self.eat_kw("select") {
                    self.expect_p("(")?;
                    let mut keys = Vec::new();
                    loop {
                        keys.push(self.expr()?);
                        if !self.eat_p(",") {
                            break;
                        }
                    }
                    self.expect_p(")")?;
                    self.expect_p("{")?;
                    let mut cases = Vec::new();
                    while !self.eat_p("}") {
                        if self.at_eof() {
                            return self.err("`}`");
                        }
                        let cpos = self.pos();
                        let ks = self.keyset()?;
                        let k = if ks.len() == 1 {
                            ks.into_iter().next().expect("one")
                        } else {
                            Expr {
                                kind: ExprKind::List(ks),
                                pos: cpos,
                            }
                        };
                        self.expect_p(":")?;
                        let spos = self.pos();
                        let s = self.ident()?;
                        self.expect_p(";")?;
                        cases.push((k, s, spos));
                    }
                    transition = Some(Transition::Select(keys, cases));
                } else {
                    let s = self.ident()?;
                    self.expect_p(";")?;
                    transition = Some(Transition::Direct(s, tpos));
                }
                continue;
            }
            if transition.is_some() {
                return self.err("`}` after the transition statement");
            }
            body.push(self.stmt()?);
        }
        Ok(State {
            annotations,
            name,
            body,
            transition,
            pos,
        })
    }

    fn block(&mut self) -> R<Vec<Stmt>> {
        self.expect_p("{")?;
        self.enter()?;
        let mut v = Vec::new();
        while !self.eat_p("}") {
            if self.at_eof() {
                self.leave();
                return self.err("`}`");
            }
            v.push(self.stmt()?);
        }
        self.leave();
        Ok(v)
    }

    fn stmt(&mut self) -> R<Stmt> {
        self.enter()?;
        let r = self.stmt_inner();
        self.leave();
        r
    }

    fn stmt_inner(&mut self) -> R<Stmt> {
        let _ = self.annotations()?;
        let pos = self.pos();
        let kind = if self.is_p("{") {
            StmtKind::Block(self.block()?)
        } else if self.eat_p(";") {
            StmtKind::Empty
        } else if self.eat_kw("if") {
            self.expect_p("(")?;
            let c = self.expr()?;
            self.expect_p(")")?;
            let t = self.stmt()?;
            let e = if self.eat_kw("else") {
                Some(Box::new(self.stmt()?))
            } else {
                None
            };
            StmtKind::If(c, Box::new(t), e)
        } else if self.eat_kw("switch") {
            self.expect_p("(")?;
            let e = self.expr()?;
            self.expect_p(")")?;
            self.expect_p("{")?;
            let mut cases = Vec::new();
            while !self.eat_p("}") {
                if self.at_eof() {
                    return self.err("`}`");
                }
                let cpos = self.pos();
                let label = if self.eat_kw("default") {
                    None
                } else {
                    Some(self.expr()?)
                };
                self.expect_p(":")?;
                let body = if self.is_p("{") {
                    Some(self.block()?)
                } else {
                    None
                };
                cases.push(SwitchCase {
                    label,
                    body,
                    pos: cpos,
                });
            }
            StmtKind::Switch(e, cases)
        } else if self.eat_kw("for") {
            self.expect_p("(")?;
            // `for (T x in lo .. hi)` or `for (x in lo .. hi)`
            let save = self.i;
            let mut ty = None;
            if self.is_type_start()
                && (matches!(self.tok_at(1), Tok::Ident(_)) || self.is_p_at(1, "<"))
            {
                match self.ty() {
                    Ok(t)
                        if matches!(self.tok(), Tok::Ident(_))
                            && matches!(self.tok_at(1), Tok::Ident(k) if k == "in") =>
                    {
                        ty = Some(t)
                    }
                    _ => self.i = save,
                }
            }
            if matches!(self.tok(), Tok::Ident(_))
                && matches!(self.tok_at(1), Tok::Ident(k) if k == "in")
            {
                let vpos = self.pos();
                let var = self.ident()?;
                self.i += 1; // in
                let lo = self.binary(0)?;
                self.expect_p("..")?;
                let hi = self.binary(0)?;
                self.expect_p(")")?;
                let body = self.stmt()?;
                let name = |n: &str| Expr {
                    kind: ExprKind::Name(n.to_string()),
                    pos: vpos,
                };
                let init = match ty {
                    Some(t) => Stmt {
                        kind: StmtKind::Var(Decl {
                            annotations: vec![],
                            kind: DeclKind::Var {
                                ty: t,
                                name: var.clone(),
                                init: Some(lo),
                            },
                            pos: vpos,
                        }),
                        pos: vpos,
                    },
                    None => Stmt {
                        kind: StmtKind::Assign(name(&var), lo),
                        pos: vpos,
                    },
                };
                let cond = Expr {
                    kind: ExprKind::Binary("<=", Box::new(name(&var)), Box::new(hi)),
                    pos: vpos,
                };
                let one = Expr {
                    kind: ExprKind::Int(1, None),
                    pos: vpos,
                };
                let update = Stmt {
                    kind: StmtKind::Assign(
                        name(&var),
                        Expr {
                            kind: ExprKind::Binary("+", Box::new(name(&var)), Box::new(one)),
                            pos: vpos,
                        },
                    ),
                    pos: vpos,
                };
                StmtKind::For {
                    init: vec![init],
                    cond: Some(cond),
                    update: vec![update],
                    body: Box::new(body),
                }
            } else {
                self.i = save;
                let mut init = Vec::new();
                while !self.is_p(";") {
                    init.push(self.simple_stmt()?);
                    if !self.eat_p(",") {
                        break;
                    }
                }
                self.expect_p(";")?;
                let cond = if self.is_p(";") {
                    None
                } else {
                    Some(self.expr()?)
                };
                self.expect_p(";")?;
                let mut update = Vec::new();
                while !self.is_p(")") {
                    update.push(self.simple_stmt()?);
                    if !self.eat_p(",") {
                        break;
                    }
                }
                self.expect_p(")")?;
                let body = self.stmt()?;
                StmtKind::For {
                    init,
                    cond,
                    update,
                    body: Box::new(body),
                }
            }
        } else if self.eat_kw("break") {
            self.expect_p(";")?;
            StmtKind::Break
        } else if self.eat_kw("continue") {
            self.expect_p(";")?;
            StmtKind::Continue
        } else if self.eat_kw("exit") {
            self.expect_p(";")?;
            StmtKind::Exit
        } else if self.eat_kw("return") {
            let v = if self.is_p(";") {
                None
            } else {
                Some(self.expr()?)
            };
            self.expect_p(";")?;
            StmtKind::Return(v)
        } else if self.is_kw("const")
            || (self.is_type_start()
                && (matches!(self.tok_at(1), Tok::Ident(_))
                    || self.is_p_at(1, "<")
                    || self.is_p_at(1, "[")))
        {
            let d = self.decl(false)?;
            StmtKind::Var(d)
        } else {
            let lhs = self.expr()?;
            if self.eat_p("=") {
                let rhs = self.expr()?;
                self.expect_p(";")?;
                StmtKind::Assign(lhs, rhs)
            } else if let Some(op) = self.eat_compound_assign() {
                let rhs = self.expr()?;
                self.expect_p(";")?;
                compound_assign(op, lhs, rhs)
            } else {
                if !matches!(lhs.kind, ExprKind::Call(..)) {
                    return Err(Diagnostic::new(
                        self.pos(),
                        format!(
                            "expected `=` or `;` after an expression statement, found {}",
                            describe(self.tok())
                        ),
                    ));
                }
                self.expect_p(";")?;
                StmtKind::Call(lhs)
            }
        };
        Ok(Stmt { kind, pos })
    }

    /// A declaration with initializer or an assignment/call, without the trailing `;`
    /// (the clauses of a `for`).
    fn simple_stmt(&mut self) -> R<Stmt> {
        let pos = self.pos();
        if self.is_type_start() && (matches!(self.tok_at(1), Tok::Ident(_)) || self.is_p_at(1, "<"))
        {
            let ty = self.ty()?;
            let name = self.name()?;
            self.expect_p("=")?;
            let init = self.expr()?;
            return Ok(Stmt {
                kind: StmtKind::Var(Decl {
                    annotations: vec![],
                    kind: DeclKind::Var {
                        ty,
                        name,
                        init: Some(init),
                    },
                    pos,
                }),
                pos,
            });
        }
        let lhs = self.expr()?;
        let kind = if self.eat_p("=") {
            StmtKind::Assign(lhs, self.expr()?)
        } else if let Some(op) = self.eat_compound_assign() {
            let rhs = self.expr()?;
            compound_assign(op, lhs, rhs)
        } else {
            StmtKind::Call(lhs)
        };
        Ok(Stmt { kind, pos })
    }

    /// A compound assignment operator (`+=`, `|+|=`, `>>=`, ...): the binary operator it applies.
    fn eat_compound_assign(&mut self) -> Option<&'static str> {
        if self.is_p(">")
            && self.is_p_at(1, ">=")
            && self.toks.get(self.i + 1).is_some_and(|t| t.glued)
        {
            self.i += 2;
            return Some(">>");
        }
        let op = match self.tok() {
            Tok::P("+=") => "+",
            Tok::P("-=") => "-",
            Tok::P("*=") => "*",
            Tok::P("/=") => "/",
            Tok::P("%=") => "%",
            Tok::P("<<=") => "<<",
            Tok::P("&=") => "&",
            Tok::P("|=") => "|",
            Tok::P("^=") => "^",
            Tok::P("|+|=") => "|+|",
            Tok::P("|-|=") => "|-|",
            _ => return None,
        };
        self.i += 1;
        Some(op)
    }

    fn args(&mut self) -> R<Vec<Expr>> {
        self.expect_p("(")?;
        let mut v = Vec::new();
        if self.eat_p(")") {
            return Ok(v);
        }
        loop {
            // named arguments `name = expr` are accepted positionally
            if matches!(self.tok(), Tok::Ident(_)) && self.is_p_at(1, "=") && !self.is_p_at(2, "=")
            {
                self.i += 2;
            }
            let pos = self.pos();
            if self.eat_kw("_") {
                v.push(Expr {
                    kind: ExprKind::Default,
                    pos,
                });
            } else {
                v.push(self.expr()?);
            }
            if !self.eat_p(",") {
                break;
            }
        }
        self.expect_p(")")?;
        Ok(v)
    }

    /// Parse an expression.
    pub fn expr(&mut self) -> R<Expr> {
        self.enter()?;
        let r = self.ternary();
        self.leave();
        r
    }

    fn ternary(&mut self) -> R<Expr> {
        let c = self.binary(0)?;
        if self.eat_p("?") {
            let a = self.expr()?;
            self.expect_p(":")?;
            let b = self.expr()?;
            let pos = c.pos;
            return Ok(Expr {
                kind: ExprKind::Ternary(Box::new(c), Box::new(a), Box::new(b)),
                pos,
            });
        }
        Ok(c)
    }

    fn binop(&self) -> Option<(&'static str, u8, usize)> {
        let t = match self.tok() {
            Tok::P(p) => *p,
            _ => return None,
        };
        // `>` `>` glued is a shift; `>` `>=` glued is the compound assignment `>>=`.
        if t == ">" {
            if let Some(n) = self.toks.get(self.i + 1) {
                if matches!(n.tok, Tok::P(">")) && n.glued {
                    return Some((">>", 9, 2));
                }
                if matches!(n.tok, Tok::P(">=")) && n.glued {
                    return None;
                }
            }
        }
        let p = match t {
            "||" => 1,
            "&&" => 2,
            "|" => 3,
            "^" => 4,
            "&" => 5,
            "==" | "!=" => 6,
            "<" | ">" | "<=" | ">=" => 7,
            "<<" => 9,
            "++" | "+" | "-" | "|+|" | "|-|" => 10,
            "*" | "/" | "%" => 11,
            _ => return None,
        };
        Some((t, p, 1))
    }

    fn binary(&mut self, min: u8) -> R<Expr> {
        let mut l = self.unary()?;
        while let Some((op, p, n)) = self.binop() {
            if p <= min {
                break;
            }
            self.i += n;
            self.enter()?;
            let r = self.binary(p);
            self.leave();
            let r = r?;
            let pos = l.pos;
            l = Expr {
                kind: ExprKind::Binary(op, Box::new(l), Box::new(r)),
                pos,
            };
        }
        Ok(l)
    }

    fn unary(&mut self) -> R<Expr> {
        let pos = self.pos();
        for op in ["!", "~", "-", "+"] {
            if self.eat_p(op) {
                self.enter()?;
                let e = self.unary();
                self.leave();
                let e = e?;
                if op == "+" {
                    return Ok(e);
                }
                return Ok(Expr {
                    kind: ExprKind::Unary(op, Box::new(e)),
                    pos,
                });
            }
        }
        // cast
        if self.is_p("(") {
            let save = self.i;
            self.i += 1;
            if self.is_type_start()
                && !(matches!(self.tok(), Tok::Ident(s) if s == "error") && self.is_p_at(1, "."))
            {
                if let Ok(t) = self.ty() {
                    if self.eat_p(")") {
                        self.enter()?;
                        let e = self.unary();
                        self.leave();
                        return Ok(Expr {
                            kind: ExprKind::Cast(t, Box::new(e?)),
                            pos,
                        });
                    }
                }
            }
            self.i = save;
        }
        self.postfix()
    }

    fn postfix(&mut self) -> R<Expr> {
        let mut e = self.primary()?;
        loop {
            let pos = e.pos;
            if self.eat_p(".") {
                let m = self.name()?;
                e = Expr {
                    kind: ExprKind::Member(Box::new(e), m),
                    pos,
                };
            } else if self.eat_p("[") {
                let a = self.expr()?;
                if self.eat_p(":") {
                    let b = self.expr()?;
                    self.expect_p("]")?;
                    e = Expr {
                        kind: ExprKind::Slice(Box::new(e), Box::new(a), Box::new(b)),
                        pos,
                    };
                } else {
                    self.expect_p("]")?;
                    e = Expr {
                        kind: ExprKind::Index(Box::new(e), Box::new(a)),
                        pos,
                    };
                }
            } else if self.is_p("(") {
                let args = self.args()?;
                e = Expr {
                    kind: ExprKind::Call(Box::new(e), Vec::new(), args),
                    pos,
                };
            } else if self.is_p("<") && self.looks_like_type_args() {
                self.i += 1;
                let mut targs = Vec::new();
                loop {
                    targs.push(self.ty()?);
                    if !self.eat_p(",") {
                        break;
                    }
                }
                self.expect_close_angle()?;
                let args = self.args()?;
                e = Expr {
                    kind: ExprKind::Call(Box::new(e), targs, args),
                    pos,
                };
            } else {
                break;
            }
        }
        Ok(e)
    }

    /// After a name: `<` types `>` `(` — speculatively checked.
    fn looks_like_type_args(&mut self) -> bool {
        let save = (self.i, self.errors.len(), self.depth);
        self.i += 1;
        let mut ok = false;
        if self.is_type_start() {
            let mut good = true;
            loop {
                if self.ty().is_err() {
                    good = false;
                    break;
                }
                if !self.eat_p(",") {
                    break;
                }
            }
            ok = good && self.eat_p(">") && self.is_p("(");
        }
        self.i = save.0;
        self.errors.truncate(save.1);
        self.depth = save.2;
        ok
    }

    fn primary(&mut self) -> R<Expr> {
        let pos = self.pos();
        let kind = match self.tok().clone() {
            Tok::Int(v, w) => {
                self.i += 1;
                ExprKind::Int(v, w)
            }
            Tok::Str(s) => {
                self.i += 1;
                ExprKind::Str(s)
            }
            Tok::Ident(s) => {
                self.i += 1;
                match s.as_str() {
                    "true" => ExprKind::Bool(true),
                    "false" => ExprKind::Bool(false),
                    "bit" | "int" | "varbit" | "bool" if self.is_p("<") || s == "bool" => {
                        self.i -= 1;
                        ExprKind::Type(self.ty()?)
                    }
                    _ => ExprKind::Name(s),
                }
            }
            Tok::P(".") => {
                self.i += 1;
                ExprKind::Name(self.ident()?)
            }
            Tok::P("(") => {
                self.i += 1;
                let e = self.expr()?;
                self.expect_p(")")?;
                return Ok(e);
            }
            Tok::P("{") => {
                self.i += 1;
                let mut v = Vec::new();
                let mut names = Vec::new();
                while !self.is_p("}") {
                    // struct initializers `{ f = e, ... }` keep their field names
                    if let (Tok::Ident(n), true) = (self.tok().clone(), self.is_p_at(1, "=")) {
                        self.i += 2;
                        names.push(n);
                    }
                    v.push(self.expr()?);
                    if !self.eat_p(",") {
                        break;
                    }
                }
                self.expect_p("}")?;
                if !names.is_empty() && names.len() == v.len() {
                    ExprKind::NamedList(names.into_iter().zip(v).collect())
                } else {
                    ExprKind::List(v)
                }
            }
            _ => return self.err("an expression"),
        };
        Ok(Expr { kind, pos })
    }
}

/// `l op= r` is `l = l op r` with `l` evaluated once: the copy of `l` on the right keeps the
/// positions of the left side, so a run-time stack index in it is recognised as the same index
/// (evaluated once, see `lower::replace_index_everywhere`).
fn compound_assign(op: &'static str, lhs: Expr, rhs: Expr) -> StmtKind {
    let pos = lhs.pos;
    let value = Expr {
        kind: ExprKind::Binary(op, Box::new(lhs.clone()), Box::new(rhs)),
        pos,
    };
    StmtKind::Assign(lhs, value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lexer::lex;
    use crate::preproc::Line;

    fn parse_src(s: &str) -> (Vec<Decl>, Vec<Diagnostic>) {
        let lines: Vec<Line> = s
            .lines()
            .enumerate()
            .map(|(i, l)| Line {
                text: l.into(),
                pos: Pos {
                    file: 0,
                    line: i as u32 + 1,
                    col: 1,
                },
            })
            .collect();
        let mut e = Vec::new();
        let t = lex(&lines, &mut e);
        parse(&t)
    }

    #[test]
    fn parses_declarations() {
        let (d, e) = parse_src(
            "header h_t { bit<8> a; bit<16> b; }\nstruct s { h_t h; }\ncontrol C(inout s x) {\n action a(bit<8> v) { x.h.a = v + 8w1; x.h.b = x.h.b[15:8] ++ (bit<8>)v; }\n table t { key = { x.h.a : exact; } actions = { a; NoAction; } default_action = NoAction(); size = 4; }\n apply { if (t.apply().hit) { x.h.a = x.h.a >> 1; } } }",
        );
        assert!(e.is_empty(), "{e:?}");
        assert_eq!(d.len(), 3);
    }

    /// The statements of the first control's apply block.
    fn apply_of(d: &[Decl]) -> Vec<Stmt> {
        d.iter()
            .find_map(|d| match &d.kind {
                DeclKind::Control { apply, .. } => Some(apply.clone()),
                _ => None,
            })
            .expect("a control")
    }

    #[test]
    fn compound_assignments_are_assignments_of_binary_operations() {
        let (d, e) = parse_src(
            "control C(inout bit<8> x, inout bit<8> y) { apply {\n x += 1; x -= 1; x *= 2; x /= 2; x %= 3;\n x <<= 1; x >>= y; x &= 1; x |= 1; x ^= 1; x |+|= 1; x |-|= 1;\n y = x >> 2; y = x >= 2 ? 8w1 : 8w0; } }",
        );
        assert!(e.is_empty(), "{e:?}");
        let ops: Vec<&str> = apply_of(&d)
            .iter()
            .filter_map(|s| match &s.kind {
                StmtKind::Assign(l, r) => match &r.kind {
                    ExprKind::Binary(o, a, _) if **a == *l => Some(*o),
                    _ => None,
                },
                _ => None,
            })
            .collect();
        assert_eq!(
            ops,
            ["+", "-", "*", "/", "%", "<<", ">>", "&", "|", "^", "|+|", "|-|"]
        );
    }

    #[test]
    fn free_form_annotations() {
        let (d, e) = parse_src(
            "@pragma stage 0 \"x\"\n@free(a + ; ] [ (b)) @kv[k = 1, s = \"v\"]\nheader h_t { bit<8> a; }",
        );
        assert!(e.is_empty(), "{e:?}");
        let names: Vec<&str> = d[0].annotations.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["stage", "free", "kv"]);
        assert_eq!(d[0].annotations[0].args.len(), 2);
        let (_, e) = parse_src("@pragma\nheader h_t { bit<8> a; }");
        assert!(e[0].message.contains("`@pragma` needs a name"), "{e:?}");
    }

    #[test]
    fn error_location() {
        let (_, e) = parse_src("header h_t {\n  bit<8> a\n}\n");
        assert_eq!(e.len(), 1);
        assert_eq!((e[0].pos.line, e[0].pos.col), (3, 1));
        assert!(e[0].message.contains("expected `;`"), "{}", e[0].message);
    }

    #[test]
    fn deep_nesting_does_not_overflow() {
        let s = format!(
            "const bit<8> x = {}1{};",
            "(".repeat(5000),
            ")".repeat(5000)
        );
        let (_, e) = parse_src(&s);
        assert!(!e.is_empty());
    }
}
