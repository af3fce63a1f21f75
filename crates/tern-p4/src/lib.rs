//! tern-p4: a P4-16 compiler for the v1model architecture. Source text goes through tern's own
//! preprocessor ([`preproc`]), lexer ([`lexer`]) and parser ([`parser`]), then a
//! checker/lowering pass ([`lower`]) produces a [`tern_model::Program`] (BMv2 JSON, written with
//! `tern_model::to_json`) and a P4Info text file ([`p4info`]).
//!
//! One call compiles a program; errors come back as [`Diagnostics`] that render as
//! `file:line:col: error: …` with the source line and a caret:
//!
//! ```
//! let src = std::fs::read_to_string(concat!(
//!     env!("CARGO_MANIFEST_DIR"),
//!     "/../../p4/tutorials/basic.p4"
//! ))
//! .unwrap();
//! let c = tern_p4::compile_str(&src, "basic.p4", &tern_p4::Options::default()).unwrap();
//! assert!(c.json.contains("MyIngress.ipv4_lpm"));
//! assert!(c.p4info.contains("MyIngress.ipv4_forward"));
//!
//! let bad = src.replace("hdr.ipv4.ttl - 1", "hdr.ipv4.ttl - true");
//! let err = tern_p4::compile_str(&bad, "basic.p4", &tern_p4::Options::default()).unwrap_err();
//! assert!(err.to_string().starts_with("basic.p4:"));
//! ```

pub mod ast;
pub mod diag;
pub mod lexer;
pub mod lower;
pub mod p4info;
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

/// The result of a successful compilation.
#[derive(Clone, Debug)]
pub struct Compiled {
    /// The program model (what the JSON says).
    pub program: tern_model::Program,
    /// BMv2 JSON text.
    pub json: String,
    /// P4Info in protobuf text format.
    pub p4info: String,
}

/// Compile P4-16 source text for v1model. `name` labels diagnostics (and locates quoted
/// includes).
pub fn compile_str(src: &str, name: &str, opts: &Options) -> Result<Compiled, Diagnostics> {
    let (decls, sources) = parse_str(src, name, opts)?;
    let fail = |errors: Vec<Diagnostic>, sources: Sources| Diagnostics { errors, sources };
    let (program, extra) = match lower::Lower::new(decls).run() {
        Ok(x) => x,
        Err(errors) => return Err(fail(errors, sources)),
    };
    let json = tern_model::to_json(&program);
    if let Err(e) = tern_model::load(&json) {
        return Err(fail(
            vec![Diagnostic::new(
                Pos::default(),
                format!("internal error: the generated BMv2 JSON does not load: {e}"),
            )],
            sources,
        ));
    }
    let p4info = p4info::write(&program, &extra);
    Ok(Compiled {
        program,
        json,
        p4info,
    })
}

/// Compile a P4 file from disk.
pub fn compile_file(path: &std::path::Path, opts: &Options) -> Result<Compiled, Diagnostics> {
    let name = path.display().to_string();
    match std::fs::read_to_string(path) {
        Ok(src) => compile_str(&src, &name, opts),
        Err(e) => Err(Diagnostics {
            errors: vec![Diagnostic::new(
                Pos::default(),
                format!("cannot read `{name}`: {e}"),
            )],
            sources: Sources::default(),
        }),
    }
}
