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
    /// Write P4Info (protobuf text format) to this file (`--p4runtime-file` also works).
    #[arg(long = "p4runtime-files", visible_alias = "p4runtime-file")]
    pub p4runtime_files: Option<PathBuf>,
    /// P4Info format for `--p4runtime-file`: only `text` is supported.
    #[arg(long = "p4runtime-format", value_name = "FORMAT")]
    pub p4runtime_format: Option<String>,
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
    if let Some(f) = &args.p4runtime_format {
        if f != "text" {
            anyhow::bail!("--p4runtime-format {f}: only `text` is supported");
        }
    }
    if let Some(p) = &args.p4runtime_files {
        let ext = p.extension().and_then(|e| e.to_str()).unwrap_or("");
        if matches!(ext, "json" | "bin" | "pb") {
            anyhow::bail!(
                "--p4runtime-files {}: only the P4Info text format is supported (use a .txt or .txtpb name)",
                p.display()
            );
        }
    }
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
