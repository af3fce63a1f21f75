//! `tern p4runtime`: a switch served over P4Runtime (gRPC), like `simple_switch_grpc` without
//! data ports; packets reach it through packet-out on the CPU port.

use anyhow::{bail, Context};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use tern_dataplane::{Switch, SwitchOptions};

/// A program with no tables, used until a controller pushes a pipeline.
pub(crate) const EMPTY_PROGRAM: &str = r#"{"header_types":[{"name":"standard_metadata","id":0,"fields":[["ingress_port",9,false],["egress_spec",9,false],["egress_port",9,false],["instance_type",32,false],["packet_length",32,false],["enq_timestamp",32,false],["enq_qdepth",19,false],["deq_timedelta",32,false],["deq_qdepth",19,false],["ingress_global_timestamp",48,false],["egress_global_timestamp",48,false],["mcast_grp",16,false],["egress_rid",16,false],["checksum_error",1,false],["parser_error",32,false],["priority",3,false],["_padding",3,false]]}],"headers":[{"name":"standard_metadata","id":0,"header_type":"standard_metadata","metadata":true}],"parsers":[{"name":"parser","id":0,"init_state":"start","parse_states":[{"name":"start","id":0,"parser_ops":[],"transitions":[{"value":"default","mask":null,"next_state":null}],"transition_key":[]}]}],"deparsers":[{"name":"deparser","id":0,"order":[]}],"actions":[],"pipelines":[{"name":"ingress","id":0,"init_table":null,"tables":[],"action_profiles":[],"conditionals":[]},{"name":"egress","id":1,"init_table":null,"tables":[],"action_profiles":[],"conditionals":[]}]}"#;

#[derive(clap::Args)]
pub struct P4rtArgs {
    /// Address of the gRPC server (loopback by default; simple_switch_grpc uses 0.0.0.0:9559).
    #[arg(long, default_value = "127.0.0.1:9559")]
    pub grpc_addr: SocketAddr,
    /// CPU port: packet-out enters the pipeline here; packets sent here become packet-in.
    #[arg(long)]
    pub cpu_port: Option<u32>,
    /// P4Runtime device id.
    #[arg(long, default_value_t = 0)]
    pub device_id: u64,
    /// P4Info (text format) for a JSON program; derived from the JSON when omitted.
    #[arg(long)]
    pub p4info: Option<PathBuf>,
    /// Program to start with: BMv2 JSON, or P4-16 source compiled by tern. Without it, clients
    /// must push a pipeline with SetForwardingPipelineConfig.
    pub program: Option<PathBuf>,
}

pub fn run(args: P4rtArgs) -> anyhow::Result<ExitCode> {
    let switch_options = SwitchOptions {
        device_id: args.device_id,
        ..SwitchOptions::default()
    };
    let (json, p4info) = match &args.program {
        None => (None, None),
        Some(path) if path.extension().is_some_and(|e| e == "p4") => {
            let c = tern_p4::compile_file(path, &tern_p4::Options::default())
                .map_err(|d| anyhow::anyhow!("{d}"))?;
            let info = tern_p4rt::p4info::parse_p4info_text(&c.p4info)
                .map_err(|e| anyhow::anyhow!("{}: P4Info from tern-p4: {e}", path.display()))?;
            (Some(c.json), Some(info))
        }
        Some(path) => {
            let json = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            (Some(json), None)
        }
    };
    let sw = Switch::from_json(
        json.as_deref().unwrap_or(EMPTY_PROGRAM),
        switch_options.clone(),
    )
    .map_err(|e| anyhow::anyhow!("loading the program: {e}"))?;
    let p4info = match (&args.p4info, p4info, &json) {
        (Some(f), _, _) => {
            let text =
                std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?;
            Some(
                tern_p4rt::p4info::parse_p4info_text(&text)
                    .map_err(|e| anyhow::anyhow!("{}: {e}", f.display()))?,
            )
        }
        (None, Some(info), _) => Some(info),
        (None, None, Some(_)) => Some(tern_p4rt::p4info::derive_p4info(sw.program())),
        (None, None, None) => None,
    };
    if args.p4info.is_some() && json.is_none() {
        bail!("--p4info needs a program");
    }
    let initial = match (p4info, json) {
        (Some(i), Some(j)) => Some((i, j)),
        _ => None,
    };
    let opts = tern_p4rt::Options {
        device_id: args.device_id,
        cpu_port: args.cpu_port,
        initial,
        switch_options,
    };
    let handle = tern_p4rt::Handle::new(Arc::new(Mutex::new(sw)), opts)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    eprintln!("tern p4runtime: serving P4Runtime on {}", args.grpc_addr);
    handle
        .serve(args.grpc_addr)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(ExitCode::SUCCESS)
}
