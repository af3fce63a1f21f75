//! The `tern` command: one binary for running, compiling and testing P4 programs.
//!
//! Each subcommand lives in its own module and only wires crates together: the work is done in
//! the library crates (`tern-dataplane`, `tern-p4`, `tern-stf`, `tern-control`, ...).

mod cmd_cli;
mod cmd_compile;
mod cmd_demo;
mod cmd_run;
mod cmd_test;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "tern",
    version,
    about = "tern: a fast, multi-tenant P4 software switch",
    long_about = "tern runs BMv2 JSON (v1model) programs with simple_switch's semantics, \
                  compiles P4-16 itself, and runs p4c's STF packet tests.\n\n\
                  Run without a subcommand for a built-in demo."
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run a program with pcap-file ports (simple_switch --use-files semantics).
    Run(cmd_run::RunArgs),
    /// Run p4c STF packet tests against a program; exits non-zero on failure.
    Test(cmd_test::TestArgs),
    /// Compile a P4-16 (v1model) program to BMv2 JSON and P4Info.
    Compile(cmd_compile::CompileArgs),
    /// The simple_switch_CLI runtime command language against a program loaded in-process.
    Cli(cmd_cli::CliArgs),
    /// The built-in demo: compile an IPv4 router, install routes, push traffic, report.
    Demo(cmd_demo::DemoArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Run(a)) => cmd_run::run(a),
        Some(Command::Test(a)) => cmd_test::run(a),
        Some(Command::Compile(a)) => cmd_compile::run(a),
        Some(Command::Cli(a)) => cmd_cli::run(a),
        Some(Command::Demo(a)) => cmd_demo::run(a),
        None => cmd_demo::run(cmd_demo::DemoArgs::default()),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
