//! `tern test prog.json tests.stf...`: runs p4c STF packet tests against a BMv2 JSON program
//! (or a `.p4` source compiled first), one fresh switch per STF file, and reports PASS/FAIL
//! per file with the mismatch details.

use anyhow::Context;
use std::path::PathBuf;
use std::process::ExitCode;
use tern_dataplane::{Switch, SwitchOptions};

#[derive(clap::Args, Default)]
pub struct TestArgs {
    /// The program: a BMv2 JSON file (as produced by p4c-bm2-ss), or a P4-16 source (`.p4`),
    /// which is first compiled with tern's compiler (as p4c's run-bmv2-test compiles first).
    pub json: PathBuf,
    /// One or more STF files; each runs on a freshly loaded switch.
    #[arg(required = true)]
    pub stf: Vec<PathBuf>,
    /// Also list met expectations, accepted commands and ignored lines.
    #[arg(short, long)]
    pub verbose: bool,
    /// Evaluate `check_counter` lines (p4c's BMv2 runner ignores them).
    #[arg(long)]
    pub strict_counters: bool,
    /// For a `.p4` program: add a directory to the include search path.
    #[arg(short = 'I', value_name = "DIR")]
    pub include: Vec<PathBuf>,
    /// For a `.p4` program: define a preprocessor macro, NAME or NAME=VALUE.
    #[arg(short = 'D', value_name = "NAME[=VALUE]")]
    pub define: Vec<String>,
}

pub fn run(args: TestArgs) -> anyhow::Result<ExitCode> {
    let json_name = args.json.display().to_string();
    let json = if args.json.extension().is_some_and(|e| e == "p4") {
        let opts = tern_p4::Options {
            include_dirs: args.include.clone(),
            defines: args.define.clone(),
        };
        match tern_p4::compile_file(&args.json, &opts) {
            Ok(c) => c.json,
            Err(d) => anyhow::bail!("{json_name}: compilation failed\n{d}"),
        }
    } else {
        std::fs::read_to_string(&args.json)
            .with_context(|| format!("cannot read program {json_name}"))?
    };
    // Load once up front so a bad program is reported once, before any STF file.
    Switch::from_json(&json, SwitchOptions::default())
        .map_err(|e| anyhow::anyhow!("{json_name}: cannot load program: {e}"))?;
    let (mut passed, mut failed) = (0usize, 0usize);
    for path in &args.stf {
        let name = path.display().to_string();
        let options = tern_stf::RunOptions {
            strict_counters: args.strict_counters,
        };
        let outcome = run_one(&json, path, &name, args.verbose, options);
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
fn run_one(
    json: &str,
    path: &PathBuf,
    name: &str,
    verbose: bool,
    options: tern_stf::RunOptions,
) -> anyhow::Result<bool> {
    let text = std::fs::read_to_string(path).with_context(|| format!("{name}: cannot read"))?;
    let script = tern_stf::parse(&text, name)?;
    let mut sw = Switch::from_json(json, SwitchOptions::default())
        .map_err(|e| anyhow::anyhow!("cannot load program: {e}"))?;
    let program = sw.program().clone();
    let report = tern_stf::run_with_options(&script, &mut sw, &program, options);
    print!("{}", report.render(verbose));
    Ok(report.passed())
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURES: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/fixtures/bmv2/"
    );
    const STF_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/stf/");

    fn args(json: &str, stf: &[&str]) -> TestArgs {
        TestArgs {
            json: PathBuf::from(format!("{FIXTURES}{json}")),
            stf: stf.iter().map(PathBuf::from).collect(),
            verbose: false,
            strict_counters: false,
            include: vec![],
            define: vec![],
        }
    }

    /// `text` written to `dir/name`; the directory goes when the test ends.
    fn tmp(dir: &std::path::Path, name: &str, text: &str) -> String {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    }

    #[test]
    fn passing_files_exit_zero() {
        tern_fixtures::require!();
        let a = args(
            "targets/simple_switch/tests/testdata/parser_error.json",
            &[&format!("{STF_DIR}parser_error.stf")],
        );
        assert_eq!(run(a).unwrap(), ExitCode::SUCCESS);
    }

    #[test]
    fn failing_or_unparsable_files_exit_non_zero() {
        tern_fixtures::require!();
        let json = "targets/simple_switch/tests/testdata/parser_error.json";
        let dir = tern_fixtures::scratch("cmd-test");
        let wrong = tmp(
            &dir,
            "wrong.stf",
            "expect 1 00000001 $\npacket 1 00000000\n",
        );
        assert_eq!(run(args(json, &[&wrong])).unwrap(), ExitCode::FAILURE);
        let bad = tmp(&dir, "bad.stf", "packet 1 0\n");
        assert_eq!(run(args(json, &[&bad])).unwrap(), ExitCode::FAILURE);
        let ok = format!("{STF_DIR}parser_error.stf");
        assert_eq!(run(args(json, &[&ok, &wrong])).unwrap(), ExitCode::FAILURE);
        let missing = run(args(json, &["/nonexistent/x.stf"])).unwrap();
        assert_eq!(missing, ExitCode::FAILURE);
    }

    #[test]
    fn strict_counters_flag() {
        tern_fixtures::require!();
        let json = "targets/simple_switch_grpc/tests/testdata/counter.json";
        let dir = tern_fixtures::scratch("cmd-test");
        let wrong = tmp(
            &dir,
            "cnt.stf",
            "add t_redirect packet_length:2 port_redirect() = e\nexpect 1 0000 $\npacket 1 0000\n\
             check_counter cntr(e) packets == 5\n",
        );
        assert_eq!(run(args(json, &[&wrong])).unwrap(), ExitCode::SUCCESS);
        let mut a = args(json, &[&wrong]);
        a.strict_counters = true;
        assert_eq!(run(a).unwrap(), ExitCode::FAILURE);
    }

    #[test]
    fn p4_source_is_compiled_first() {
        tern_fixtures::require!();
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../");
        let a = TestArgs {
            json: PathBuf::from(format!("{root}p4/tutorials/basic.p4")),
            stf: vec![PathBuf::from(format!("{STF_DIR}basic.stf"))],
            verbose: false,
            strict_counters: false,
            include: vec![],
            define: vec![],
        };
        assert_eq!(run(a).unwrap(), ExitCode::SUCCESS);
        let ecn = |define: Vec<String>| TestArgs {
            json: PathBuf::from(format!("{root}p4/tutorials/ecn.p4")),
            stf: vec![PathBuf::from(format!("{STF_DIR}ecn_marked.stf"))],
            verbose: false,
            strict_counters: false,
            include: vec![],
            define,
        };
        assert_eq!(run(ecn(vec![])).unwrap(), ExitCode::FAILURE);
        let marked = ecn(vec!["ECN_THRESHOLD=0".into()]);
        assert_eq!(run(marked).unwrap(), ExitCode::SUCCESS);
        let dir = tern_fixtures::scratch("cmd-test");
        let bad = tmp(&dir, "bad.p4", "header h { bit<8> a }\n");
        let e = run(TestArgs {
            json: PathBuf::from(&bad),
            stf: vec![PathBuf::from(format!("{STF_DIR}basic.stf"))],
            verbose: false,
            strict_counters: false,
            include: vec![],
            define: vec![],
        })
        .unwrap_err();
        let msg = format!("{e:#}");
        assert!(
            msg.contains("compilation failed") && msg.contains("bad.p4"),
            "{msg}"
        );
    }

    #[test]
    fn bad_program_is_an_error_naming_the_file() {
        tern_fixtures::require!();
        let e = run(args("tests/testdata/empty_config.json", &["x.stf"])).unwrap_err();
        let msg = format!("{e:#}");
        assert!(msg.contains("empty_config.json"), "{msg}");
        assert!(msg.contains("standard_metadata.egress_port"), "{msg}");
    }
}
