//! `tern run`: placeholder until its owner wires it.

use std::process::ExitCode;

#[derive(clap::Args, Default)]
pub struct RunArgs {}

pub fn run(_args: RunArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`tern run` is not wired yet")
}
