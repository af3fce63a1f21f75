//! tern's own C-style preprocessor for P4: `#include` (quoted, angle, `-I` paths and the bundled
//! `core.p4`/`v1model.p4`), `#define` object- and function-like macros, `#undef`,
//! `#if/#ifdef/#ifndef/#elif/#else/#endif`, `#error`, `-D`; every output line keeps the file and
//! line it came from so diagnostics point into the original source.

use crate::diag::{Diagnostic, Pos, Sources};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// tern's bundled `core.p4`.
pub const CORE_P4: &str = include_str!("../../../p4/include/core.p4");
/// tern's bundled `v1model.p4`.
pub const V1MODEL_P4: &str = include_str!("../../../p4/include/v1model.p4");

/// One preprocessed line and where it starts in the sources.
#[derive(Clone, Debug)]
pub struct Line {
    pub text: String,
    pub pos: Pos,
}

#[derive(Clone, Debug)]
struct Macro {
    params: Option<Vec<String>>,
    body: String,
}

struct Cond {
    /// Some branch of this `#if` group was taken already.
    taken: bool,
    /// Lines are currently emitted.
    active: bool,
    /// The enclosing group was active.
    parent: bool,
    seen_else: bool,
    pos: Pos,
}

/// Preprocessor state for one compilation.
pub struct Preprocessor<'a> {
    include_dirs: &'a [PathBuf],
    macros: HashMap<String, Macro>,
    pub sources: Sources,
    pub out: Vec<Line>,
    pub errors: Vec<Diagnostic>,
    depth: usize,
}

const MAX_INCLUDE_DEPTH: usize = 40;
const MAX_EXPANSION: usize = 1 << 20;

impl<'a> Preprocessor<'a> {
    /// A preprocessor with `-I` directories and `-D` definitions (`NAME` or `NAME=VALUE`).
    pub fn new(include_dirs: &'a [PathBuf], defines: &[String]) -> Preprocessor<'a> {
        let mut macros = HashMap::new();
        for d in defines {
            let (n, v) = match d.split_once('=') {
                Some((n, v)) => (n.trim().to_string(), v.to_string()),
                None => (d.trim().to_string(), "1".to_string()),
            };
            macros.insert(
                n,
                Macro {
                    params: None,
                    body: v,
                },
            );
        }
        Preprocessor {
            include_dirs,
            macros,
            sources: Sources::default(),
            out: Vec::new(),
            errors: Vec::new(),
            depth: 0,
        }
    }

    /// Preprocess a file's text (`dir` is where quoted includes are searched first).
    pub fn run_file(&mut self, name: &str, text: &str, dir: Option<&Path>) {
        let file = self.sources.add(name, text);
        let clean = strip_comments(text);
        let lines: Vec<&str> = clean.split('\n').collect();
        let mut conds: Vec<Cond> = Vec::new();
        let mut i = 0;
        while i < lines.len() {
            let start = i;
            let mut line = lines[i].trim_end_matches('\r').to_string();
            while line.ends_with('\\') && i + 1 < lines.len() {
                line.pop();
                i += 1;
                line.push_str(lines[i].trim_end_matches('\r'));
            }
            i += 1;
            let pos = Pos {
                file,
                line: start as u32 + 1,
                col: 1,
            };
            let active = conds.last().map(|c| c.active).unwrap_or(true);
            let trimmed = line.trim_start();
            if let Some(rest) = trimmed.strip_prefix('#') {
                let col = (line.len() - trimmed.len()) as u32 + 1;
                let dpos = Pos { col, ..pos };
                let rest = rest.trim_start();
                let (dir_name, arg) = split_word(rest);
                let arg = arg.trim();
                match dir_name {
                    "if" | "ifdef" | "ifndef" => {
                        let v = if !active {
                            false
                        } else if dir_name == "if" {
                            self.eval_cond(arg, dpos)
                        } else {
                            let (n, _) = split_word(arg);
                            if n.is_empty() {
                                self.err(dpos, format!("#{dir_name} needs a macro name"));
                            }
                            self.macros.contains_key(n) == (dir_name == "ifdef")
                        };
                        conds.push(Cond {
                            taken: v,
                            active: active && v,
                            parent: active,
                            seen_else: false,
                            pos: dpos,
                        });
                    }
                    "elif" => {
                        let Some(c) = conds.last() else {
                            self.err(dpos, "#elif without #if");
                            continue;
                        };
                        if c.seen_else {
                            self.err(dpos, "#elif after #else");
                        }
                        let (parent, taken) = (c.parent, c.taken);
                        let v = parent && !taken && self.eval_cond(arg, dpos);
                        let c = conds.last_mut().expect("checked above");
                        c.active = v;
                        c.taken |= v;
                    }
                    "else" => match conds.last_mut() {
                        Some(c) => {
                            if c.seen_else {
                                let p = dpos;
                                self.err(p, "#else after #else");
                                continue;
                            }
                            c.seen_else = true;
                            c.active = c.parent && !c.taken;
                            c.taken = true;
                        }
                        None => self.err(dpos, "#else without #if"),
                    },
                    "endif" => {
                        if conds.pop().is_none() {
                            self.err(dpos, "#endif without #if");
                        }
                    }
                    _ if !active => {}
                    "define" => self.define(arg, dpos),
                    "undef" => {
                        let (n, _) = split_word(arg);
                        self.macros.remove(n);
                    }
                    "include" => self.include(arg, dpos, dir),
                    "error" => self.err(dpos, format!("#error {arg}")),
                    "warning" | "pragma" | "line" | "" => {}
                    other => self.err(dpos, format!("unknown preprocessor directive `#{other}`")),
                }
                self.out.push(Line {
                    text: String::new(),
                    pos,
                });
                continue;
            }
            let text = if active {
                self.expand(&line, pos)
            } else {
                String::new()
            };
            self.out.push(Line { text, pos });
        }
        for c in conds {
            self.err(c.pos, "unterminated #if (missing #endif)");
        }
    }

    fn err(&mut self, pos: Pos, msg: impl Into<String>) {
        self.errors.push(Diagnostic::new(pos, msg));
    }

    fn define(&mut self, arg: &str, pos: Pos) {
        let name_len = arg
            .char_indices()
            .find(|(_, c)| !(c.is_ascii_alphanumeric() || *c == '_'))
            .map(|(i, _)| i)
            .unwrap_or(arg.len());
        let name = &arg[..name_len];
        if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
            self.err(pos, "#define needs a macro name");
            return;
        }
        let rest = &arg[name_len..];
        let m = if let Some(r) = rest.strip_prefix('(') {
            let Some(close) = r.find(')') else {
                self.err(
                    pos,
                    format!("missing `)` in parameter list of macro `{name}`"),
                );
                return;
            };
            let params: Vec<String> = r[..close]
                .split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect();
            Macro {
                params: Some(params),
                body: r[close + 1..].trim().to_string(),
            }
        } else {
            Macro {
                params: None,
                body: rest.trim().to_string(),
            }
        };
        self.macros.insert(name.to_string(), m);
    }

    fn include(&mut self, arg: &str, pos: Pos, dir: Option<&Path>) {
        let arg = self.expand(arg, pos);
        let arg = arg.trim();
        let (name, quoted) = if let Some(r) = arg.strip_prefix('"') {
            match r.find('"') {
                Some(e) => (&r[..e], true),
                None => {
                    self.err(pos, "missing closing `\"` in #include");
                    return;
                }
            }
        } else if let Some(r) = arg.strip_prefix('<') {
            match r.find('>') {
                Some(e) => (&r[..e], false),
                None => {
                    self.err(pos, "missing closing `>` in #include");
                    return;
                }
            }
        } else {
            self.err(pos, "#include expects \"FILE\" or <FILE>");
            return;
        };
        if self.depth >= MAX_INCLUDE_DEPTH {
            self.err(
                pos,
                format!("#include nested too deeply (including `{name}`)"),
            );
            return;
        }
        let mut candidates: Vec<PathBuf> = Vec::new();
        if quoted {
            if let Some(d) = dir {
                candidates.push(d.join(name));
            }
        }
        candidates.extend(self.include_dirs.iter().map(|d| d.join(name)));
        for c in &candidates {
            if c.is_file() {
                match std::fs::read_to_string(c) {
                    Ok(text) => {
                        let parent = c.parent().map(|p| p.to_path_buf());
                        self.depth += 1;
                        self.run_file(&c.display().to_string(), &text, parent.as_deref());
                        self.depth -= 1;
                    }
                    Err(e) => self.err(pos, format!("cannot read `{}`: {e}", c.display())),
                }
                return;
            }
        }
        let builtin = match name {
            "core.p4" => Some(CORE_P4),
            "v1model.p4" => Some(V1MODEL_P4),
            _ => None,
        };
        match builtin {
            Some(text) => {
                // Bundled files are included once (they carry no include guard of their own
                // semantics beyond this).
                let key = format!("__TERN_INCLUDED_{}", name.replace('.', "_"));
                if self.macros.contains_key(&key) {
                    return;
                }
                self.macros.insert(
                    key,
                    Macro {
                        params: None,
                        body: "1".into(),
                    },
                );
                self.depth += 1;
                self.run_file(&format!("<tern>/{name}"), text, None);
                self.depth -= 1;
            }
            None => self.err(pos, format!("cannot find include file `{name}`")),
        }
    }

    /// Expand macros in one line.
    pub fn expand(&mut self, line: &str, pos: Pos) -> String {
        let mut active = HashSet::new();
        let mut budget = MAX_EXPANSION;
        match expand_text(line, &self.macros, &mut active, &mut budget, 0) {
            Ok(s) => s,
            Err(m) => {
                self.err(pos, m);
                String::new()
            }
        }
    }

    fn eval_cond(&mut self, expr: &str, pos: Pos) -> bool {
        // Replace defined(X) / defined X before expansion.
        let mut s = String::new();
        let toks = pp_tokens(expr);
        let mut i = 0;
        while i < toks.len() {
            if toks[i] == "defined" {
                let mut j = i + 1;
                let paren = toks.get(j).map(|t| t == "(").unwrap_or(false);
                if paren {
                    j += 1;
                }
                let name = toks.get(j).cloned().unwrap_or_default();
                j += 1;
                if paren {
                    j += 1;
                }
                s.push_str(if self.macros.contains_key(&name) {
                    " 1 "
                } else {
                    " 0 "
                });
                i = j;
            } else {
                s.push_str(&toks[i]);
                s.push(' ');
                i += 1;
            }
        }
        let exp = self.expand(&s, pos);
        let toks = pp_tokens(&exp);
        let mut p = CondParser { toks: &toks, i: 0 };
        match p.expr(0) {
            Ok(v) if p.i == toks.len() => v != 0,
            Ok(_) => {
                self.err(pos, format!("unexpected `{}` in #if expression", toks[p.i]));
                false
            }
            Err(m) => {
                self.err(pos, m);
                false
            }
        }
    }
}

fn split_word(s: &str) -> (&str, &str) {
    let end = s
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_alphanumeric() || *c == '_'))
        .map(|(i, _)| i)
        .unwrap_or(s.len());
    (&s[..end], &s[end..])
}

/// Replace `//` and `/* */` comments by spaces, keeping newlines and string literals.
fn strip_comments(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == '"' {
            out.push(c);
            i += 1;
            while i < b.len() && b[i] != '"' && b[i] != '\n' {
                if b[i] == '\\' && i + 1 < b.len() && b[i + 1] != '\n' {
                    out.push(b[i]);
                    i += 1;
                }
                out.push(b[i]);
                i += 1;
            }
            if i < b.len() && b[i] == '"' {
                out.push('"');
                i += 1;
            }
        } else if c == '/' && b.get(i + 1) == Some(&'/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && b.get(i + 1) == Some(&'*') {
            out.push_str("  ");
            i += 2;
            while i < b.len() && !(b[i] == '*' && b.get(i + 1) == Some(&'/')) {
                out.push(if b[i] == '\n' { '\n' } else { ' ' });
                i += 1;
            }
            if i < b.len() {
                out.push_str("  ");
                i += 2;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Split text into preprocessor tokens: identifiers, numbers, strings, single other chars
/// (whitespace kept as its own tokens so expansion preserves layout).
fn pp_tokens(s: &str) -> Vec<String> {
    let b: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let start = i;
        if c.is_ascii_alphanumeric() || c == '_' {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == '_') {
                i += 1;
            }
        } else if c == '"' {
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i = (i + 1).min(b.len());
        } else if c.is_whitespace() {
            while i < b.len() && b[i].is_whitespace() {
                i += 1;
            }
        } else if (c == '#' && b.get(i + 1) == Some(&'#'))
            || (matches!(c, '&' | '|' | '=' | '!' | '<' | '>')
                && matches!(b.get(i + 1), Some('&' | '|' | '=' | '<' | '>')))
        {
            i += 2;
        } else {
            i += 1;
        }
        out.push(b[start..i].iter().collect());
    }
    out
}

fn is_ident(t: &str) -> bool {
    t.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
}

fn expand_text(
    text: &str,
    macros: &HashMap<String, Macro>,
    active: &mut HashSet<String>,
    budget: &mut usize,
    depth: usize,
) -> Result<String, String> {
    if depth > 64 {
        return Err("macro expansion nested too deeply".into());
    }
    let toks = pp_tokens(text);
    let mut out = String::new();
    let mut i = 0;
    while i < toks.len() {
        let t = &toks[i];
        *budget = budget.saturating_sub(t.len() + 1);
        if *budget == 0 {
            return Err("macro expansion too large".into());
        }
        let m = if is_ident(t) && !active.contains(t) {
            macros.get(t)
        } else {
            None
        };
        let Some(m) = m else {
            out.push_str(t);
            i += 1;
            continue;
        };
        match &m.params {
            None => {
                active.insert(t.clone());
                let e = expand_text(&m.body, macros, active, budget, depth + 1)?;
                active.remove(t);
                out.push_str(&e);
                i += 1;
            }
            Some(params) => {
                // Look for `(` after optional whitespace.
                let mut j = i + 1;
                while j < toks.len() && toks[j].trim().is_empty() {
                    j += 1;
                }
                if toks.get(j).map(|s| s.as_str()) != Some("(") {
                    out.push_str(t);
                    i += 1;
                    continue;
                }
                let mut args: Vec<String> = vec![String::new()];
                let mut level = 0;
                j += 1;
                let mut closed = false;
                while j < toks.len() {
                    let a = toks[j].as_str();
                    if a == "(" {
                        level += 1;
                    } else if a == ")" {
                        if level == 0 {
                            closed = true;
                            break;
                        }
                        level -= 1;
                    } else if a == "," && level == 0 {
                        args.push(String::new());
                        j += 1;
                        continue;
                    }
                    args.last_mut().expect("non-empty").push_str(a);
                    j += 1;
                }
                if !closed {
                    return Err(format!(
                        "unterminated argument list of macro `{t}` (arguments must be on one line)"
                    ));
                }
                if params.is_empty() && args.len() == 1 && args[0].trim().is_empty() {
                    args.clear();
                }
                if args.len() != params.len() {
                    return Err(format!(
                        "macro `{t}` expects {} argument(s) but got {}",
                        params.len(),
                        args.len()
                    ));
                }
                let mut exp_args = Vec::new();
                for a in &args {
                    exp_args.push(expand_text(a.trim(), macros, active, budget, depth + 1)?);
                }
                // Substitute parameters (with `#` stringify and `##` paste).
                let body = pp_tokens(&m.body);
                let mut sub = String::new();
                let mut k = 0;
                while k < body.len() {
                    let b = &body[k];
                    if b == "#" {
                        if let Some(p) = body
                            .get(k + 1)
                            .and_then(|n| params.iter().position(|p| p == n))
                        {
                            sub.push('"');
                            sub.push_str(&args[p].trim().replace('"', "\\\""));
                            sub.push('"');
                            k += 2;
                            continue;
                        }
                    }
                    if b == "##" {
                        while sub.ends_with(char::is_whitespace) {
                            sub.pop();
                        }
                        k += 1;
                        while k < body.len() && body[k].trim().is_empty() {
                            k += 1;
                        }
                        if let Some(n) = body.get(k) {
                            match params.iter().position(|p| p == n) {
                                Some(p) => sub.push_str(args[p].trim()),
                                None => sub.push_str(n),
                            }
                            k += 1;
                        }
                        continue;
                    }
                    match params.iter().position(|p| p == b) {
                        Some(p) => {
                            let pasted_next = body[k + 1..]
                                .iter()
                                .find(|x| !x.trim().is_empty())
                                .map(|x| x == "##")
                                .unwrap_or(false);
                            if pasted_next {
                                sub.push_str(args[p].trim());
                            } else {
                                sub.push_str(&exp_args[p]);
                            }
                        }
                        None => sub.push_str(b),
                    }
                    k += 1;
                }
                active.insert(t.clone());
                let e = expand_text(&sub, macros, active, budget, depth + 1)?;
                active.remove(t);
                out.push_str(&e);
                i = j + 1;
            }
        }
    }
    Ok(out)
}

struct CondParser<'t> {
    toks: &'t [String],
    i: usize,
}

impl CondParser<'_> {
    fn peek(&mut self) -> Option<&str> {
        while self.i < self.toks.len() && self.toks[self.i].trim().is_empty() {
            self.i += 1;
        }
        self.toks.get(self.i).map(|s| s.as_str())
    }
    fn prec(op: &str) -> Option<u8> {
        Some(match op {
            "||" => 1,
            "&&" => 2,
            "|" => 3,
            "^" => 4,
            "&" => 5,
            "==" | "!=" => 6,
            "<" | ">" | "<=" | ">=" => 7,
            "<<" | ">>" => 8,
            "+" | "-" => 9,
            "*" | "/" | "%" => 10,
            _ => return None,
        })
    }
    fn expr(&mut self, min: u8) -> Result<i64, String> {
        let mut l = self.unary()?;
        while let Some(op) = self.peek().map(|s| s.to_string()) {
            if op == "?" && min == 0 {
                self.i += 1;
                let a = self.expr(0)?;
                if self.peek() != Some(":") {
                    return Err("expected `:` in #if expression".into());
                }
                self.i += 1;
                let b = self.expr(0)?;
                l = if l != 0 { a } else { b };
                continue;
            }
            let Some(p) = Self::prec(&op) else { break };
            if p <= min && min != 0 || p < min {
                break;
            }
            self.i += 1;
            let r = self.expr(p)?;
            l = match op.as_str() {
                "||" => ((l != 0) || (r != 0)) as i64,
                "&&" => ((l != 0) && (r != 0)) as i64,
                "|" => l | r,
                "^" => l ^ r,
                "&" => l & r,
                "==" => (l == r) as i64,
                "!=" => (l != r) as i64,
                "<" => (l < r) as i64,
                ">" => (l > r) as i64,
                "<=" => (l <= r) as i64,
                ">=" => (l >= r) as i64,
                "<<" => l.wrapping_shl(r as u32),
                ">>" => l.wrapping_shr(r as u32),
                "+" => l.wrapping_add(r),
                "-" => l.wrapping_sub(r),
                "*" => l.wrapping_mul(r),
                "/" | "%" => {
                    if r == 0 {
                        return Err("division by zero in #if expression".into());
                    }
                    if op == "/" {
                        l.wrapping_div(r)
                    } else {
                        l.wrapping_rem(r)
                    }
                }
                _ => l,
            };
        }
        Ok(l)
    }
    fn unary(&mut self) -> Result<i64, String> {
        let Some(t) = self.peek().map(|s| s.to_string()) else {
            return Err("missing value in #if expression".into());
        };
        self.i += 1;
        match t.as_str() {
            "!" => Ok((self.unary()? == 0) as i64),
            "-" => Ok(self.unary()?.wrapping_neg()),
            "+" => self.unary(),
            "~" => Ok(!self.unary()?),
            "(" => {
                let v = self.expr(0)?;
                if self.peek() != Some(")") {
                    return Err("expected `)` in #if expression".into());
                }
                self.i += 1;
                Ok(v)
            }
            t if t.starts_with(|c: char| c.is_ascii_digit()) => {
                let s = t.trim_end_matches(['u', 'U', 'l', 'L']);
                let v = if let Some(h) = s.strip_prefix("0x").or(s.strip_prefix("0X")) {
                    i64::from_str_radix(h, 16)
                } else {
                    s.parse::<i64>()
                };
                v.map_err(|_| format!("bad number `{t}` in #if expression"))
            }
            t if is_ident(t) => Ok(0),
            t => Err(format!("unexpected `{t}` in #if expression")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pp(src: &str, defs: &[&str]) -> (String, usize) {
        let defs: Vec<String> = defs.iter().map(|s| s.to_string()).collect();
        let mut p = Preprocessor::new(&[], &defs);
        p.run_file("t.p4", src, None);
        let text: Vec<String> = p.out.iter().map(|l| l.text.trim().to_string()).collect();
        (text.join("\n"), p.errors.len())
    }

    #[test]
    fn conditionals_and_macros() {
        let src = "#define A 3\n#define F(x, y) ((x) + (y))\n#if A > 2 && defined(A)\nyes F(1, A)\n#elif 1\nno\n#else\nno2\n#endif\n#ifndef B\nnb\n#endif\n";
        let (t, e) = pp(src, &[]);
        assert_eq!(e, 0);
        assert!(t.contains("yes ((1) + (3))"), "{t}");
        assert!(!t.contains("no"));
        assert!(t.contains("nb"));
        let (t, _) = pp("#ifdef B\nb\n#else\nnotb\n#endif", &["B"]);
        assert!(t.contains('b') && !t.contains("notb"));
    }

    #[test]
    fn lines_map_back_and_comments_go() {
        let defs: Vec<String> = vec![];
        let mut p = Preprocessor::new(&[], &defs);
        p.run_file(
            "m.p4",
            "/* a\n b */ x\n// c\n#include <core.p4>\ny // z\n",
            None,
        );
        let y = p.out.iter().find(|l| l.text.trim() == "y").unwrap();
        assert_eq!((y.pos.file, y.pos.line), (0, 5));
        let x = p.out.iter().find(|l| l.text.trim() == "x").unwrap();
        assert_eq!(x.pos.line, 2);
        assert!(p.out.iter().any(|l| l.pos.file == 1));
    }

    #[test]
    fn errors_are_reported() {
        assert_eq!(pp("#if 1\n", &[]).1, 1);
        assert_eq!(pp("#endif\n", &[]).1, 1);
        assert_eq!(pp("#include \"nope.p4\"\n", &[]).1, 1);
        assert_eq!(pp("#define F(a) a\nF(1, 2)\n", &[]).1, 1);
        // Recursive macros stop.
        assert_eq!(pp("#define A A B\n#define B A\nA\n", &[]).1, 0);
    }
}
