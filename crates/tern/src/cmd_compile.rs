//! `tern compile`: placeholder until its owner wires it.

use std::process::ExitCode;

#[derive(clap::Args, Default)]
pub struct CompileArgs {}

pub fn run(_args: CompileArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`tern compile` is not wired yet")
}
