//! `tern cli`: placeholder until its owner wires it.

use std::process::ExitCode;

#[derive(clap::Args, Default)]
pub struct CliArgs {}

pub fn run(_args: CliArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`tern cli` is not wired yet")
}
