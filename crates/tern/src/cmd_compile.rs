//! `tern compile`: P4-16 (v1model) source to BMv2 JSON and, optionally, P4Info text, using
//! tern's own compiler (`tern-p4`). Diagnostics go to stderr; any error gives a non-zero exit.

use anyhow::Context;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Default)]
pub struct CompileArgs {
    /// The P4-16 source file.
    pub source: PathBuf,
    /// Where to write the BMv2 JSON (default: the source name with `.json`).
    #[arg(short = 'o', long = "output")]
    pub output: Option<PathBuf>,
    /// Write P4Info (protobuf text format) to this file.
    #[arg(long = "p4runtime-files")]
    pub p4runtime_files: Option<PathBuf>,
    /// Add a directory to the include search path.
    #[arg(short = 'I', value_name = "DIR")]
    pub include: Vec<PathBuf>,
    /// Define a preprocessor macro: NAME or NAME=VALUE.
    #[arg(short = 'D', value_name = "NAME[=VALUE]")]
    pub define: Vec<String>,
}

pub fn run(args: CompileArgs) -> anyhow::Result<ExitCode> {
    let opts = tern_p4::Options {
        include_dirs: args.include.clone(),
        defines: args.define.clone(),
    };
    let compiled = match tern_p4::compile_file(&args.source, &opts) {
        Ok(c) => c,
        Err(d) => {
            eprint!("{d}");
            eprintln!("{} error(s); nothing was written", d.errors.len());
            return Ok(ExitCode::FAILURE);
        }
    };
    let out = args
        .output
        .clone()
        .unwrap_or_else(|| args.source.with_extension("json"));
    std::fs::write(&out, &compiled.json)
        .with_context(|| format!("cannot write {}", out.display()))?;
    if let Some(p) = &args.p4runtime_files {
        std::fs::write(p, &compiled.p4info)
            .with_context(|| format!("cannot write {}", p.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}
