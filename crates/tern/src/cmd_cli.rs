//! `tern cli`: the simple_switch_CLI runtime command language, against a program loaded
//! in-process or against a running switch over BMv2's Thrift API (`--thrift-port`, as
//! simple_switch_CLI; the program is downloaded from the switch with `bm_get_config`).

use std::io::{self, BufRead, BufReader, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use tern_control::{Cli, PreType};
use tern_dataplane::{Switch, SwitchOptions};

#[derive(clap::Args, Default)]
pub struct CliArgs {
    /// BMv2 JSON program to load in-process.
    #[arg(value_name = "PROG_JSON")]
    pub json: Option<PathBuf>,
    /// Read commands from FILE instead of stdin.
    #[arg(long, value_name = "FILE")]
    pub commands: Option<PathBuf>,
    /// Drive a running switch over Thrift at ADDR (e.g. 127.0.0.1:9090) instead of a local
    /// program.
    #[arg(long, value_name = "ADDR", conflicts_with_all = ["json", "thrift_port"])]
    pub connect: Option<String>,
    /// Drive a running switch's Thrift server on this port (simple_switch_CLI's option).
    #[arg(long, value_name = "PORT", conflicts_with = "json")]
    pub thrift_port: Option<u16>,
    /// Host of the Thrift server (with --thrift-port).
    #[arg(long, value_name = "IP", default_value = "127.0.0.1")]
    pub thrift_ip: String,
    /// Packet replication engine: None, SimplePre or SimplePreLAG (default, as simple_switch_CLI).
    #[arg(long, value_name = "TYPE")]
    pub pre: Option<String>,
    /// Allow `load_new_config_file` / `swap_configs` (simple_switch --enable-swap).
    #[arg(long)]
    pub enable_swap: bool,
}

const PROMPT: &str = "RuntimeCmd: ";

/// Where one command's output goes.
trait Session {
    fn run(&mut self, line: &str) -> anyhow::Result<String>;
}

struct Local {
    sw: Switch,
    cli: Cli,
}

impl Session for Local {
    fn run(&mut self, line: &str) -> anyhow::Result<String> {
        let out = self.cli.execute(&mut self.sw, line);
        let err = self.cli.take_stderr();
        if !err.is_empty() {
            eprint!("{err}");
        }
        Ok(out)
    }
}

/// A switch reached over BMv2's Thrift API: the same command interpreter, over the wire.
struct Remote {
    rt: tern_thrift::ThriftRuntime,
    cli: Cli,
}

impl Session for Remote {
    fn run(&mut self, line: &str) -> anyhow::Result<String> {
        let out = self.cli.execute(&mut self.rt, line);
        let err = self.cli.take_stderr();
        if !err.is_empty() {
            eprint!("{err}");
        }
        // Failures that are not BMv2 errors (connection lost, a call BMv2's API cannot
        // express) are explained on stderr; the command's own output says what failed.
        if let Some(e) = self.rt.last_error() {
            eprintln!("tern cli: {e}");
        }
        Ok(out)
    }
}

/// Connect to a switch's Thrift server and download its program, as simple_switch_CLI does.
fn connect(addr: &str, pre: PreType) -> anyhow::Result<Remote> {
    use tern_runtime::Runtime as _;
    let service = match pre {
        PreType::SimplePre | PreType::None => tern_thrift::PreService::Plain,
        PreType::SimplePreLag => tern_thrift::PreService::Lag,
    };
    let rt = tern_thrift::ThriftRuntime::connect_with(addr, service).with_context(|| {
        format!(
            "could not connect to the switch at {addr}\n\
             Make sure the switch is running and that you have the right port"
        )
    })?;
    let json = rt.get_config();
    if let Some(e) = rt.last_error() {
        bail!("could not read the program from the switch at {addr}: {e}");
    }
    let program = tern_model::load(&json)
        .with_context(|| format!("the switch at {addr} sent a program tern cannot read"))?;
    let cli = Cli::new(&program).with_pre(pre);
    Ok(Remote { rt, cli })
}

pub fn run(args: CliArgs) -> anyhow::Result<ExitCode> {
    let mut session = open_session(&args)?;
    let interactive = args.commands.is_none() && io::stdin().is_terminal();
    let mut input: Box<dyn BufRead> = match &args.commands {
        Some(path) => Box::new(BufReader::new(
            std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?,
        )),
        None => Box::new(io::stdin().lock()),
    };
    let stdout = io::stdout();
    let mut out = stdout.lock();
    drive(session.as_mut(), &mut input, &mut out, interactive)?;
    Ok(ExitCode::SUCCESS)
}

/// Load the program (or connect to the switch) named by the arguments.
fn open_session(args: &CliArgs) -> anyhow::Result<Box<dyn Session>> {
    let pre = match &args.pre {
        Some(p) => p.parse::<PreType>().map_err(anyhow::Error::msg)?,
        None => PreType::SimplePreLag,
    };
    let addr = match (&args.connect, args.thrift_port) {
        (Some(a), _) => Some(a.clone()),
        (None, Some(port)) => Some(format!("{}:{port}", args.thrift_ip)),
        (None, None) => None,
    };
    Ok(match (addr, &args.json) {
        (Some(addr), _) => Box::new(connect(&addr, pre)?),
        (None, Some(path)) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            let opts = SwitchOptions {
                enable_swap: args.enable_swap,
                ..SwitchOptions::default()
            };
            let sw = Switch::from_json(&text, opts)
                .with_context(|| format!("cannot load {}", path.display()))?;
            let cli = Cli::new(sw.program()).with_pre(pre);
            Box::new(Local { sw, cli })
        }
        (None, None) => bail!("give a program JSON, or --thrift-port PORT / --connect ADDR"),
    })
}

/// The read–execute–print loop: the prompt and banner only when interactive; blank lines and
/// `#` comments skipped; `EOF` ends the session with an empty line, as in the stock CLI.
fn drive(
    session: &mut dyn Session,
    input: &mut dyn BufRead,
    out: &mut dyn Write,
    interactive: bool,
) -> anyhow::Result<()> {
    if interactive {
        writeln!(out, "Control utility for runtime P4 table manipulation")?;
    }
    let mut buf = Vec::new();
    loop {
        if interactive {
            write!(out, "{PROMPT}")?;
            out.flush()?;
        }
        buf.clear();
        if input.read_until(b'\n', &mut buf)? == 0 {
            if interactive {
                writeln!(out)?;
            }
            return Ok(());
        }
        let line = String::from_utf8_lossy(&buf);
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if line == "EOF" {
            writeln!(out)?;
            return Ok(());
        }
        let text = session.run(line)?;
        out.write_all(text.as_bytes())?;
        out.flush()?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIX: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/fixtures/bmv2");

    fn args(json: &str) -> CliArgs {
        CliArgs {
            json: Some(PathBuf::from(format!("{FIX}/{json}"))),
            ..CliArgs::default()
        }
    }

    #[test]
    fn runs_a_script_in_process() {
        tern_fixtures::require!();
        let mut s = open_session(&args("targets/l2_switch/l2_switch.json")).unwrap();
        let input = "# comment\n\nmc_mgrp_create 1\nmc_node_create 0 1 2\nEOF\nmc_dump\n";
        let mut out = Vec::new();
        drive(s.as_mut(), &mut input.as_bytes(), &mut out, false).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "Creating multicast group 1\n\
             Creating node with rid 0 , port map 110 and lag map \n\
             node was created with handle 0\n\n"
        );
    }

    #[test]
    fn interactive_mode_prompts() {
        tern_fixtures::require!();
        let mut s = open_session(&args("targets/l2_switch/l2_switch.json")).unwrap();
        let mut out = Vec::new();
        drive(s.as_mut(), &mut "greet\n".as_bytes(), &mut out, true).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "Control utility for runtime P4 table manipulation\n\
             RuntimeCmd: hello\nRuntimeCmd: \n"
        );
    }

    #[test]
    fn plain_pre_option() {
        tern_fixtures::require!();
        let mut a = args("targets/l2_switch/l2_switch.json");
        a.pre = Some("SimplePre".into());
        let mut s = open_session(&a).unwrap();
        assert_eq!(
            s.run("mc_node_create 0 1").unwrap(),
            "Creating node with rid 0 and with port map 10\nnode was created with handle 0\n"
        );
        a.pre = Some("Bogus".into());
        let e = open_session(&a).err().unwrap().to_string();
        assert!(e.contains("invalid PRE type 'Bogus'"), "{e}");
    }

    #[test]
    fn load_errors_are_clear() {
        tern_fixtures::require!();
        let e = open_session(&args("does/not/exist.json")).err().unwrap();
        assert!(format!("{e:#}").contains("cannot read"), "{e:#}");
        let e = open_session(&args("tests/testdata/one_header.json"))
            .err()
            .unwrap();
        let msg = format!("{e:#}");
        assert!(
            msg.contains("cannot load") && msg.contains("standard_metadata.egress_port"),
            "{msg}"
        );
        let e = open_session(&CliArgs::default()).err().unwrap();
        assert!(e.to_string().contains("--connect"), "{e}");
    }

    #[test]
    fn connect_drives_a_served_switch() {
        tern_fixtures::require!();
        let text =
            std::fs::read_to_string(format!("{FIX}/targets/l2_switch/l2_switch.json")).unwrap();
        let sw = Switch::from_json(&text, SwitchOptions::default()).unwrap();
        let sw = std::sync::Arc::new(std::sync::Mutex::new(sw));
        let (addr, _server) =
            tern_thrift::spawn("127.0.0.1:0", std::sync::Arc::clone(&sw)).unwrap();
        let a = CliArgs {
            thrift_port: Some(addr.port()),
            thrift_ip: "127.0.0.1".into(),
            ..CliArgs::default()
        };
        let mut s = open_session(&a).unwrap();
        let mut out = Vec::new();
        let input = "table_set_default dmac broadcast\ntable_num_entries dmac\n";
        drive(s.as_mut(), &mut input.as_bytes(), &mut out, false).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "Setting default action of dmac\naction:              broadcast\n\
             runtime data:        \n0\n"
        );
        // The change is visible to any other session on the same switch.
        let mut other = open_session(&CliArgs {
            connect: Some(addr.to_string()),
            ..CliArgs::default()
        })
        .unwrap();
        let dump = other.run("table_dump dmac").unwrap();
        assert!(
            dump.ends_with("Dumping default entry\nAction entry: broadcast - \n==========\n"),
            "{dump}"
        );
        drop(sw);
    }
}
