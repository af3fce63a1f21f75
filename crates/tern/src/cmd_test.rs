//! `tern test`: placeholder until its owner wires it.

use std::process::ExitCode;

#[derive(clap::Args, Default)]
pub struct TestArgs {}

pub fn run(_args: TestArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`tern test` is not wired yet")
}
