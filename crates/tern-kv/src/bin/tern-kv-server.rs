//! A standalone storage server (`tern-kv-server --dir D --port P [--partitions N] [--workers W]
//! [--index I]`), used by the crash tests; `tern kv server` is the user-facing command.

use std::process::ExitCode;
use std::sync::atomic::Ordering;
use tern_kv::server::{start, ServerConfig};

fn parse() -> Result<ServerConfig, String> {
    let mut cfg = ServerConfig::new("kv-data", 1152);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let v = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let num = |what: &str| v.parse::<u64>().map_err(|e| format!("{what} {v:?}: {e}"));
        match flag.as_str() {
            "--dir" => cfg.dir = v.clone().into(),
            "--port" => cfg
                .addr
                .set_port(u16::try_from(num("--port")?).map_err(|e| e.to_string())?),
            "--partitions" => cfg.partitions = num("--partitions")? as usize,
            "--workers" => cfg.workers = num("--workers")? as usize,
            "--index" => cfg.index = u16::try_from(num("--index")?).map_err(|e| e.to_string())?,
            other => return Err(format!("unknown option {other}")),
        }
    }
    Ok(cfg)
}

fn main() -> ExitCode {
    let cfg = match parse() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let server = match start(&cfg) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let stop = server.stop_flag();
    let _ = ctrlc::set_handler(move || stop.store(true, Ordering::Release));
    println!("listening {}", server.addr());
    match server.wait() {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
