//! The behaviour cache on the fast lane (issue 21, B-Cache): owns the two calls by which the
//! lane ([`super::fast`]) runs a packet's ingress and egress pipelines through the switch's
//! behaviour cache, so that a hit is classify → probe → replay → emit with no job queue and
//! no `Flow`.
//!
//! The cache is the one the general v1model flow uses (`Flow::ingress` / `Flow::egress` call
//! the same [`crate::bcache::Cache::run`] / `run_egress`), so its semantics are unchanged:
//! a hit replays the recorded effects (field bytes, validity, packet registers, length,
//! direct and indirect counters, ageing stamps, register guards and updates, a cached
//! prefix's native resumption), a miss runs the pipeline (recording it when admitted, the
//! interpreter with the recorder on), and the barrier's invalidations apply to the lane's
//! packets as to any other. What a packet does after its pipeline is the lane's business as
//! without a cache: a replayed clone, digest, resubmit or multicast request is handed to the
//! general flow at the point of divergence (`Flow::ingress_tail`), exactly as when the
//! pipeline had run natively, and likewise after egress.
//!
//! Tracing and stage timing keep the lane off (`Switch::lane_ready`), and with them the
//! cache's debug bypass stays on the general path.

use crate::bcache::Cache;
use crate::compile::Engine;
use crate::exec::{Fault, Pkt, State};

/// Ingress of a lane packet through the cache, as `Flow::ingress` runs it; `None` when the
/// switch has no cache (the lane runs the pipeline natively).
#[inline]
pub(super) fn ingress(
    bc: Option<&mut Cache>,
    eng: &Engine,
    st: &mut State,
    pkt: &mut Pkt,
) -> Option<Result<(), Fault>> {
    let bc = bc?;
    // A program with no ingress control has nothing to run, cached or not.
    let init = eng.ingress?;
    Some(bc.run(eng, st, pkt, init))
}

/// Egress of a lane packet through the egress cache when there is one (natively otherwise),
/// as `Flow::egress` runs it; `None` when the switch has no cache.
#[inline]
pub(super) fn egress(
    bc: Option<&mut Cache>,
    eng: &Engine,
    st: &mut State,
    pkt: &mut Pkt,
) -> Option<Result<(), Fault>> {
    let bc = bc?;
    // No egress cache (the default): the lane's native egress is the same run.
    bc.egress_plan()?;
    let init = eng.egress?;
    Some(bc.run_egress(eng, st, pkt, init))
}
