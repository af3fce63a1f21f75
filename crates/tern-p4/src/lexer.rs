//! The P4-16 lexer: preprocessed lines to tokens (identifiers, integer literals with optional
//! width/signedness prefix `8w`/`16s`, strings, punctuation), each with its source position.

use crate::diag::{Diagnostic, Pos};
use crate::preproc::Line;

/// A token kind.
#[derive(Clone, Debug, PartialEq)]
pub enum Tok {
    Ident(String),
    /// Integer literal: value and optional `(width, signed)`.
    Int(u128, Option<(u32, bool)>),
    Str(String),
    /// Punctuation / operator, e.g. `{`, `==`, `&&&`, `|+|`.
    P(&'static str),
    Eof,
}

/// A token with its position; `glued` = no whitespace before it (to join `>` `>` into `>>`).
#[derive(Clone, Debug)]
pub struct Token {
    pub tok: Tok,
    pub pos: Pos,
    pub glued: bool,
}

const PUNCT: [&str; 52] = [
    "|+|=", "|-|=", "&&&", "|+|", "|-|", "...", "<<=", "*=", "/=", "%=", "&=", "|=", "^=", "==",
    "!=", "<=", ">=", "&&", "||", "<<", "++", "..", "+=", "-=", "{", "}", "(", ")", "[", "]", ";",
    ":", ",", ".", "=", "<", ">", "!", "~", "&", "|", "^", "+", "-", "*", "/", "%", "?", "@", "#",
    "$", "\\",
];

/// Lex all preprocessed lines.
pub fn lex(lines: &[Line], errors: &mut Vec<Diagnostic>) -> Vec<Token> {
    let mut out = Vec::new();
    for line in lines {
        lex_line(line, &mut out, errors);
    }
    let pos = lines.last().map(|l| l.pos).unwrap_or_default();
    out.push(Token {
        tok: Tok::Eof,
        pos,
        glued: false,
    });
    out
}

fn lex_line(line: &Line, out: &mut Vec<Token>, errors: &mut Vec<Diagnostic>) {
    let b: Vec<char> = line.text.chars().collect();
    let mut i = 0;
    let mut glued = false;
    while i < b.len() {
        let c = b[i];
        let pos = Pos {
            col: i as u32 + 1,
            ..line.pos
        };
        if c.is_whitespace() {
            i += 1;
            glued = false;
            continue;
        }
        let start = i;
        let tok = if c.is_ascii_alphabetic() || c == '_' {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == '_') {
                i += 1;
            }
            Tok::Ident(b[start..i].iter().collect())
        } else if c.is_ascii_digit() {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == '_') {
                i += 1;
            }
            let text: String = b[start..i].iter().collect();
            match parse_int(&text) {
                Ok(t) => t,
                Err(m) => {
                    errors.push(Diagnostic::new(pos, m));
                    Tok::Int(0, None)
                }
            }
        } else if c == '"' {
            i += 1;
            let mut s = String::new();
            let mut closed = false;
            while i < b.len() {
                if b[i] == '"' {
                    closed = true;
                    i += 1;
                    break;
                }
                if b[i] == '\\' && i + 1 < b.len() {
                    i += 1;
                    s.push(match b[i] {
                        'n' => '\n',
                        't' => '\t',
                        x => x,
                    });
                } else {
                    s.push(b[i]);
                }
                i += 1;
            }
            if !closed {
                errors.push(Diagnostic::new(pos, "unterminated string literal"));
            }
            Tok::Str(s)
        } else {
            let rest: String = b[i..(i + 4).min(b.len())].iter().collect();
            match PUNCT.iter().find(|p| rest.starts_with(**p)) {
                Some(p) => {
                    i += p.chars().count();
                    Tok::P(p)
                }
                None => {
                    errors.push(Diagnostic::new(pos, format!("unexpected character `{c}`")));
                    i += 1;
                    glued = false;
                    continue;
                }
            }
        };
        out.push(Token { tok, pos, glued });
        glued = true;
    }
}

/// Parse an integer literal: `[width(w|s)]` then `0x`/`0b`/`0o`/`0d` or decimal, `_` allowed.
pub fn parse_int(text: &str) -> Result<Tok, String> {
    let bad = || format!("invalid integer literal `{text}`");
    let mut width = None;
    let mut rest = text;
    if let Some(p) = text.find(['w', 's']) {
        let (w, r) = text.split_at(p);
        if !w.is_empty() && w.chars().all(|c| c.is_ascii_digit()) {
            let wv: u32 = w.parse().map_err(|_| bad())?;
            if wv == 0 || wv > 2048 {
                return Err(format!("invalid width {wv} in integer literal `{text}`"));
            }
            width = Some((wv, r.starts_with('s')));
            rest = &r[1..];
        }
    }
    let (radix, digits) = match rest.get(..2) {
        Some("0x") | Some("0X") => (16, &rest[2..]),
        Some("0b") | Some("0B") => (2, &rest[2..]),
        Some("0o") | Some("0O") => (8, &rest[2..]),
        Some("0d") | Some("0D") => (10, &rest[2..]),
        _ => (10, rest),
    };
    let digits: String = digits.chars().filter(|c| *c != '_').collect();
    if digits.is_empty() {
        return Err(bad());
    }
    let mut v: u128 = 0;
    for c in digits.chars() {
        let d = c.to_digit(radix).ok_or_else(bad)?;
        v = v
            .checked_mul(radix as u128)
            .and_then(|v| v.checked_add(d as u128))
            .ok_or_else(|| format!("integer literal `{text}` does not fit in 128 bits"))?;
    }
    Ok(Tok::Int(v, width))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> (Vec<Tok>, usize) {
        let mut e = Vec::new();
        let line = Line {
            text: s.into(),
            pos: Pos {
                file: 0,
                line: 1,
                col: 1,
            },
        };
        let t = lex(&[line], &mut e);
        (t.into_iter().map(|t| t.tok).collect(), e.len())
    }

    #[test]
    fn literals_and_punct() {
        let (t, e) = toks("8w0xFF 16s5 0b1_0 x&&&y |+| \"a\\\"b\" >>");
        assert_eq!(e, 0);
        assert_eq!(t[0], Tok::Int(255, Some((8, false))));
        assert_eq!(t[1], Tok::Int(5, Some((16, true))));
        assert_eq!(t[2], Tok::Int(2, None));
        assert_eq!(t[4], Tok::P("&&&"));
        assert_eq!(t[6], Tok::P("|+|"));
        assert_eq!(t[7], Tok::Str("a\"b".into()));
        assert_eq!(t[8], Tok::P(">"));
        assert_eq!(t[9], Tok::P(">"));
    }

    #[test]
    fn bad_literals_are_errors() {
        assert_eq!(toks("0xZZ").1, 1);
        assert_eq!(toks("0w5").1, 1);
        assert_eq!(toks("999999999999999999999999999999999999999999").1, 1);
        assert_eq!(toks("`").1, 1);
    }
}
