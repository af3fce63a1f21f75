//! `tern test prog.json tests.stf...`: runs p4c STF packet tests against a BMv2 JSON program,
//! one fresh switch per STF file, and reports PASS/FAIL per file with the mismatch details.

use anyhow::Context;
use std::path::PathBuf;
use std::process::ExitCode;
use tern_dataplane::{Switch, SwitchOptions};

#[derive(clap::Args, Default)]
pub struct TestArgs {
    /// The program: a BMv2 JSON file (as produced by p4c-bm2-ss).
    pub json: PathBuf,
    /// One or more STF files; each runs on a freshly loaded switch.
    #[arg(required = true)]
    pub stf: Vec<PathBuf>,
    /// Also list met expectations, accepted commands and ignored lines.
    #[arg(short, long)]
    pub verbose: bool,
}

pub fn run(args: TestArgs) -> anyhow::Result<ExitCode> {
    let json_name = args.json.display().to_string();
    let json = std::fs::read_to_string(&args.json)
        .with_context(|| format!("cannot read program {json_name}"))?;
    // Load once up front so a bad program is reported once, before any STF file.
    Switch::from_json(&json, SwitchOptions::default())
        .map_err(|e| anyhow::anyhow!("{json_name}: cannot load program: {e}"))?;
    let (mut passed, mut failed) = (0usize, 0usize);
    for path in &args.stf {
        let name = path.display().to_string();
        let outcome = run_one(&json, path, &name, args.verbose);
        match outcome {
            Ok(true) => passed += 1,
            Ok(false) => failed += 1,
            Err(e) => {
                println!("ERROR {e:#}");
                failed += 1;
            }
        }
    }
    if args.stf.len() > 1 {
        println!("{passed} passed, {failed} failed");
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Run one STF file; `Ok(passed)`, or an error for unreadable or unparsable files.
fn run_one(json: &str, path: &PathBuf, name: &str, verbose: bool) -> anyhow::Result<bool> {
    let text = std::fs::read_to_string(path).with_context(|| format!("{name}: cannot read"))?;
    let script = tern_stf::parse(&text, name)?;
    let mut sw = Switch::from_json(json, SwitchOptions::default())
        .map_err(|e| anyhow::anyhow!("cannot load program: {e}"))?;
    let program = sw.program().clone();
    let report = tern_stf::run(&script, &mut sw, &program);
    print!("{}", report.render(verbose));
    Ok(report.passed())
}
