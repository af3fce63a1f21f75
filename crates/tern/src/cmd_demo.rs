//! `tern demo`: placeholder until its owner wires it.

use std::process::ExitCode;

#[derive(clap::Args, Default)]
pub struct DemoArgs {}

pub fn run(_args: DemoArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`tern demo` is not wired yet")
}
