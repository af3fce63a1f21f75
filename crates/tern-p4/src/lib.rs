//! tern-p4: a P4-16 compiler for the v1model architecture. Source text goes through tern's own
//! preprocessor, lexer and parser, then a checker/lowering pass produces a
//! [`tern_model::Program`] (BMv2 JSON) and a P4Info text file.

pub mod ast;
pub mod diag;
pub mod lexer;
pub mod parser;
pub mod preproc;

pub use diag::{Diagnostic, Diagnostics, Pos, Sources};

use std::path::PathBuf;

/// Compiler options.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// `-I` include directories.
    pub include_dirs: Vec<PathBuf>,
    /// `-D NAME[=VALUE]` definitions.
    pub defines: Vec<String>,
}

/// Preprocess, lex and parse a source text (`name` is used in diagnostics; quoted includes are
/// searched next to it).
pub fn parse_str(
    src: &str,
    name: &str,
    opts: &Options,
) -> Result<(Vec<ast::Decl>, Sources), Diagnostics> {
    let mut pp = preproc::Preprocessor::new(&opts.include_dirs, &opts.defines);
    let dir = std::path::Path::new(name).parent().map(|p| p.to_path_buf());
    pp.run_file(name, src, dir.as_deref());
    let mut errors = std::mem::take(&mut pp.errors);
    let toks = lexer::lex(&pp.out, &mut errors);
    let (decls, perr) = parser::parse(&toks);
    errors.extend(perr);
    if errors.is_empty() {
        Ok((decls, pp.sources))
    } else {
        Err(Diagnostics {
            errors,
            sources: pp.sources,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundled_includes_parse() {
        let r = parse_str("#include <v1model.p4>\n", "t.p4", &Options::default());
        let (decls, _) = r.unwrap_or_else(|d| panic!("{d}"));
        assert!(decls.iter().any(|d| d.name() == Some("V1Switch")));
        assert!(decls.iter().any(|d| d.name() == Some("packet_in")));
    }

    #[test]
    fn diagnostics_render_with_caret() {
        let d = parse_str("header h {\n  bit<8> a\n}\n", "x.p4", &Options::default()).unwrap_err();
        let s = d.to_string();
        assert!(s.starts_with("x.p4:3:1: error: expected `;`"), "{s}");
        assert!(s.contains("}\n^\n"), "{s}");
    }
}
