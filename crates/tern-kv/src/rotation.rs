//! FarReach's server rotation: emulate N storage servers with two physical ones.
//!
//! The workload is routed to N logical servers by crc32 partition ranges. The bottleneck (the
//! logical server with the most requests) is found from the pre-generated stream. Iteration 0
//! runs only the bottleneck's requests, on physical server 0. Each of the N−1 further
//! iterations runs the bottleneck's requests on physical server 0 together with one other
//! logical server's requests on physical server 1 (the rest of the stream is skipped), and
//! measures that server's request rate. Rates measured next to a slower or faster bottleneck
//! are rescaled by `mean bottleneck rate / bottleneck rate in that iteration`; the aggregate is
//! the sum over the N logical servers. Both physical servers hold every record (each is loaded
//! with the whole key space), so any logical server can run on either.

use crate::bench::{self, BenchConfig, BenchError, BenchReport};
use crate::router::Router;
use crate::ycsb::{generate_with_ack_lag, KvOp, OpKind};
use serde::Serialize;
use std::net::SocketAddr;

/// One iteration's measurements.
#[derive(Clone, Debug, Serialize)]
pub struct RotationIteration {
    /// The rotated logical server (the bottleneck itself in iteration 0).
    pub server: usize,
    /// Operations run.
    pub operations: u64,
    /// Wall time in seconds.
    pub seconds: f64,
    /// Bottleneck requests per second in this iteration.
    pub bottleneck_rate: f64,
    /// The rotated server's requests per second, as measured.
    pub rate: f64,
    /// The rotated server's rate rescaled to the mean bottleneck rate.
    pub scaled_rate: f64,
    /// Failed operations.
    pub errors: u64,
    /// Value mismatches.
    pub mismatches: u64,
}

/// The outcome of a rotation run.
#[derive(Clone, Debug, Serialize)]
pub struct RotationReport {
    /// Workload name.
    pub workload: String,
    /// Emulated (logical) servers.
    pub servers: usize,
    /// The bottleneck logical server.
    pub bottleneck: usize,
    /// Each logical server's share of the stream's requests.
    pub shares: Vec<f64>,
    /// Per iteration (iteration 0 first).
    pub iterations: Vec<RotationIteration>,
    /// Mean bottleneck rate over the iterations (requests/s).
    pub bottleneck_rate: f64,
    /// Each logical server's (rescaled) request rate; index = logical server.
    pub per_server_rate: Vec<f64>,
    /// Sum of the per-server rates (requests/s): the emulated aggregate throughput.
    pub aggregate_rate: f64,
    /// Aggregate divided by the largest per-server rate (N = perfectly balanced).
    pub normalized: f64,
    /// Largest per-server rate divided by the smallest.
    pub imbalance: f64,
    /// Errors over all iterations.
    pub errors: u64,
    /// Value mismatches over all iterations.
    pub mismatches: u64,
    /// The full bench report of iteration 0 (the bottleneck alone: its latency).
    pub bottleneck_run: BenchReport,
}

impl RotationReport {
    /// A human-readable summary.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "server rotation: workload {}, {} emulated servers, bottleneck = server {} ({:.2}% of requests)\n",
            self.workload,
            self.servers,
            self.bottleneck,
            self.shares[self.bottleneck] * 100.0
        );
        s += &format!(
            "aggregate {:.0} requests/s, bottleneck {:.0} requests/s, normalized {:.2} of {}, imbalance max/min {:.2}, errors {}, mismatches {}\n",
            self.aggregate_rate,
            self.bottleneck_rate,
            self.normalized,
            self.servers,
            self.imbalance,
            self.errors,
            self.mismatches
        );
        s += "per-server rate (requests/s, rescaled):";
        for (i, r) in self.per_server_rate.iter().enumerate() {
            if i % 8 == 0 {
                s += "\n ";
            }
            s += &format!(" {i:>3}:{r:>8.0}");
        }
        s += "\n";
        s
    }
}

/// Requests an operation sends (a read-modify-write sends two).
fn weight(op: &KvOp) -> u64 {
    if op.kind == OpKind::ReadModifyWrite {
        2
    } else {
        1
    }
}

/// Runs the rotation for `logical` emulated servers over the two physical servers `physical`
/// (both must hold every record). `cfg.router` is ignored; `cfg.dynamic` must be `None`
/// (rotation only applies to static workloads, as in FarReach).
pub fn run(
    cfg: &BenchConfig,
    logical: usize,
    physical: [SocketAddr; 2],
) -> Result<RotationReport, BenchError> {
    if cfg.dynamic.is_some() {
        return Err(BenchError::Config(
            "server rotation applies to static workloads only (no --dynamic)".into(),
        ));
    }
    if !(2..=1024).contains(&logical) {
        return Err(BenchError::Config(format!(
            "rotation needs 2..=1024 emulated servers, not {logical}"
        )));
    }
    let ops = generate_with_ack_lag(&cfg.workload, cfg.seed, 2 * cfg.threads)?;
    let shape =
        Router::new(vec![physical[0]; logical]).map_err(|e| BenchError::Config(e.to_string()))?;
    let owner: Vec<usize> = ops.iter().map(|o| shape.server_index(&o.key)).collect();
    let mut requests = vec![0u64; logical];
    for (op, &s) in ops.iter().zip(&owner) {
        requests[s] += weight(op);
    }
    let total: u64 = requests.iter().sum();
    let bottleneck = (0..logical).max_by_key(|&i| requests[i]).unwrap_or(0);
    let shares: Vec<f64> = requests
        .iter()
        .map(|&r| r as f64 / total.max(1) as f64)
        .collect();

    let mut iterations = Vec::with_capacity(logical);
    let mut bottleneck_run = None;
    let order = std::iter::once(bottleneck).chain((0..logical).filter(|&i| i != bottleneck));
    for server in order {
        let picked: Vec<KvOp> = ops
            .iter()
            .zip(&owner)
            .filter(|(_, &s)| s == bottleneck || s == server)
            .map(|(o, _)| *o)
            .collect();
        let addrs = (0..logical)
            .map(|i| {
                if i == bottleneck {
                    physical[0]
                } else {
                    physical[1]
                }
            })
            .collect();
        let mut c = cfg.clone();
        c.router = Router::new(addrs).map_err(|e| BenchError::Config(e.to_string()))?;
        let report = bench::run_ops(&c, picked)?;
        let rate_of = |i: usize| report.per_server[i].requests as f64 / report.seconds.max(1e-9);
        iterations.push(RotationIteration {
            server,
            operations: report.operations,
            seconds: report.seconds,
            bottleneck_rate: rate_of(bottleneck),
            rate: rate_of(server),
            scaled_rate: 0.0,
            errors: report.errors,
            mismatches: report.mismatches,
        });
        if bottleneck_run.is_none() {
            bottleneck_run = Some(report);
        }
    }
    let mean_b =
        iterations.iter().map(|i| i.bottleneck_rate).sum::<f64>() / iterations.len() as f64;
    let mut per_server_rate = vec![0.0; logical];
    for it in &mut iterations {
        it.scaled_rate = if it.server == bottleneck {
            mean_b
        } else if it.bottleneck_rate > 0.0 {
            it.rate * mean_b / it.bottleneck_rate
        } else {
            0.0
        };
        per_server_rate[it.server] = it.scaled_rate;
    }
    let aggregate: f64 = per_server_rate.iter().sum();
    let max = per_server_rate.iter().copied().fold(0.0, f64::max);
    let min = per_server_rate
        .iter()
        .copied()
        .fold(f64::INFINITY, f64::min);
    let bottleneck_run = bottleneck_run.ok_or_else(|| BenchError::Config("no iteration".into()))?;
    Ok(RotationReport {
        workload: cfg.workload.name.clone(),
        servers: logical,
        bottleneck,
        shares,
        errors: iterations.iter().map(|i| i.errors).sum(),
        mismatches: iterations.iter().map(|i| i.mismatches).sum(),
        iterations,
        bottleneck_rate: mean_b,
        per_server_rate,
        aggregate_rate: aggregate,
        normalized: if max > 0.0 { aggregate / max } else { 0.0 },
        imbalance: if min > 0.0 { max / min } else { f64::INFINITY },
        bottleneck_run,
    })
}
