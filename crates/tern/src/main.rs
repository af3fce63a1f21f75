//! The `tern` command: one binary for running, compiling and testing P4 programs.
//!
//! Each subcommand lives in its own module and only wires crates together: the work is done in
//! the library crates (`tern-dataplane`, `tern-p4`, `tern-stf`, `tern-control`, ...).
//! Invoked under the name `simple_switch` (a symlink), the binary parses simple_switch's own
//! command line and runs it as `tern run` does.

mod bcache_cases;
mod cmd_bcache;
mod cmd_bcache_exp;
mod cmd_bench;
mod cmd_bench_kv;
mod cmd_bench_workers;
mod cmd_cli;
mod cmd_compile;
mod cmd_demo;
mod cmd_kv;
mod cmd_kv_exp;
mod cmd_kv_up;
mod cmd_p4rt;
mod cmd_run;
mod cmd_test;
mod cmd_virt;
mod kv_paper;
mod kv_sim;
mod madinc_exp;
mod madinc_net;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "tern",
    version,
    about = "tern: a fast, multi-tenant P4 software switch",
    long_about = "tern runs BMv2 JSON (v1model) programs with simple_switch's semantics, \
                  compiles P4-16 itself, runs p4c's STF packet tests, serves BMv2's Thrift API \
                  and P4Runtime, and drives key-value storage benchmarks.\n\n\
                  Run without a subcommand for a built-in demo."
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run a program on pcap-file ports (--use-files) or live interfaces, like simple_switch.
    Run(cmd_run::RunArgs),
    /// Run p4c STF packet tests against a program; exits non-zero on failure.
    Test(cmd_test::TestArgs),
    /// Compile a P4-16 (v1model) program to BMv2 JSON and P4Info.
    Compile(cmd_compile::CompileArgs),
    /// The simple_switch_CLI runtime command language against a program loaded in-process.
    Cli(cmd_cli::CliArgs),
    /// Serve a program over P4Runtime (gRPC) for controllers such as p4runtime-shell.
    P4runtime(cmd_p4rt::P4rtArgs),
    /// Benchmark a program in memory: packets per second, latency percentiles, memory.
    Bench(cmd_bench::BenchArgs),
    /// Behaviour-level caching (B-Cache): `tern bcache explain PROG` prints what the cache
    /// keys on, replays and refuses, per pipeline.
    #[command(subcommand)]
    Bcache(cmd_bcache::BcacheCmd),
    /// Key-value suite: RocksDB storage servers, YCSB workloads, benchmarks.
    Kv(cmd_kv::KvArgs),
    /// The built-in demo: compile an IPv4 router, install routes, push traffic, report.
    Demo(cmd_demo::DemoArgs),
    /// Many tenant programs on one tern: devices, classifier, links, quotas, snapshots.
    Virt(cmd_virt::VirtArgs),
}

/// simple_switch's command line (`simple_switch [options] <JSON> [-- <target options>]`).
#[derive(Parser)]
#[command(
    name = "simple_switch",
    about = "tern as a drop-in simple_switch (BMv2): same options, same behaviour",
    disable_version_flag = true
)]
struct SimpleSwitchCli {
    #[command(flatten)]
    run: cmd_run::RunArgs,
}

/// simple_switch options tern does not implement: refused by name rather than misparsed.
const UNSUPPORTED: &[&str] = &[
    "--packet-in",
    "--notifications-addr",
    "--restore-state",
    "--log-file-max-size",
    "--log-file-max-files",
    "--debugger",
    "--debugger-addr",
];

/// The first option in `args` (before any `--`) that simple_switch has and tern does not.
fn unsupported_option(args: &[std::ffi::OsString]) -> Option<&'static str> {
    args.iter()
        .map(|a| a.to_string_lossy())
        .take_while(|a| a != "--")
        .find_map(|a| {
            UNSUPPORTED
                .iter()
                .find(|u| a == **u || a.starts_with(&format!("{u}=")))
                .copied()
        })
}

/// The `simple_switch` entry point: exit status 1 on bad options, like simple_switch. As
/// `simple_switch_grpc` (`grpc`), P4Runtime is served on 0.0.0.0:9559 unless
/// `--grpc-server-addr` says otherwise.
fn simple_switch_main(argv: Vec<std::ffi::OsString>, grpc: bool) -> ExitCode {
    if let Some(opt) = unsupported_option(argv.get(1..).unwrap_or(&[])) {
        eprintln!(
            "Error while parsing command line arguments\n\
             simple_switch option {opt} is not supported by tern (see simple_switch --help)"
        );
        return ExitCode::from(1);
    }
    let cli = match SimpleSwitchCli::try_parse_from(&argv) {
        Ok(c) => c,
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("Error while parsing command line arguments\n{e}");
            return ExitCode::from(1);
        }
    };
    report(if grpc {
        cmd_run::run_as_simple_switch_grpc(cli.run)
    } else {
        cmd_run::run(cli.run)
    })
}

fn report(result: anyhow::Result<ExitCode>) -> ExitCode {
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let invoked_as = argv
        .first()
        .and_then(|a| std::path::Path::new(a).file_name())
        .map(|n| n.to_string_lossy().into_owned());
    match invoked_as.as_deref() {
        Some("simple_switch") => return simple_switch_main(argv, false),
        Some("simple_switch_grpc") => return simple_switch_main(argv, true),
        _ => {}
    }
    if argv.get(1).is_some_and(|a| a == "run") {
        if let Some(opt) = unsupported_option(&argv[2..]) {
            eprintln!("error: simple_switch option {opt} is not supported by tern");
            return ExitCode::FAILURE;
        }
    }
    let cli = Cli::parse_from(argv);
    let result = match cli.command {
        Some(Command::Run(a)) => cmd_run::run(a),
        Some(Command::Test(a)) => cmd_test::run(a),
        Some(Command::Compile(a)) => cmd_compile::run(a),
        Some(Command::Cli(a)) => cmd_cli::run(a),
        Some(Command::P4runtime(a)) => cmd_p4rt::run(a),
        Some(Command::Bench(a)) => cmd_bench::run(a),
        Some(Command::Bcache(a)) => cmd_bcache::run(a),
        Some(Command::Kv(a)) => cmd_kv::run(a),
        Some(Command::Demo(a)) => cmd_demo::run(a),
        Some(Command::Virt(a)) => cmd_virt::run(a),
        None => cmd_demo::run(cmd_demo::DemoArgs::default()),
    };
    report(result)
}
