//! A clone storm and a multicast storm under traffic allocate and free nothing per packet, on
//! the front and on the workers: the storm's copies and their output frames take their
//! buffers from the attacker device's bounded pools (`DEVICE_BUFFERS`), the front gives the
//! transmitted frames back to the workers instead of freeing them, and the workers hand
//! their excess to the front instead of freeing it. Before (issue 17, h-pool), each clone was
//! allocated in the worker's arena and freed by the front (cross-arena frees, heap trims:
//! the front's `munmap`s stalled the victim). A global allocator counts every thread's
//! allocations and frees while a window is open, the front's apart (this file holds one test,
//! so no other test's allocations run meanwhile).

mod common;

use tern_runtime::{MirroringSession, OutputPacket, Runtime};
use tern_virt::{Caller, DeviceSpec, Quotas, Target, VirtSwitch, VirtWorkers};

use common::{compile, packet, route};

#[global_allocator]
static A: common::Counting = common::Counting;

/// The attacker: Ethernet only, `body` in ingress.
fn attacker(body: &str) -> String {
    let src = format!(
        r#"
#include <core.p4>
#include <v1model.p4>
header eth_t {{ bit<48> dst; bit<48> src; bit<16> type; }}
struct headers {{ eth_t eth; }}
struct metadata {{ }}
parser P(packet_in p, out headers h, inout metadata m, inout standard_metadata_t sm) {{
    state start {{ p.extract(h.eth); transition accept; }}
}}
control V(inout headers h, inout metadata m) {{ apply {{ }} }}
control I(inout headers h, inout metadata m, inout standard_metadata_t sm) {{
    apply {{ {body} }}
}}
control E(inout headers h, inout metadata m, inout standard_metadata_t sm) {{ apply {{ }} }}
control C(inout headers h, inout metadata m) {{ apply {{ }} }}
control D(packet_out p, in headers h) {{ apply {{ p.emit(h.eth); }} }}
V1Switch(P(), V(), I(), E(), C(), D()) main;
"#
    );
    tern_p4::compile_str(&src, "attacker.p4", &tern_p4::Options::default())
        .unwrap_or_else(|d| panic!("{d}"))
        .json
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Storm {
    /// Every packet: an I2E clone to port 1, then a resubmit (as the isolation bench's), cut
    /// at 64 passes: 32 frames out per packet.
    Clone,
    /// Every packet multicast to 512 ports (8 of them mapped out, the rest dropped), cut at
    /// 64 passes.
    Multicast,
}

/// A victim (basic.p4, routed: port 1 in, 2 out) and a storming attacker (port 5 in, its
/// frames out of port 3) on 1 and on 2 workers; each dispatch carries 8 attacker frames and
/// 8 victim packets. After a warm-up, 400 dispatches allocate and free nothing on any
/// thread, every victim packet comes out, and so does every copy the storm's pass quota
/// allows (its pool of `DEVICE_BUFFERS` refills as the front transmits its frames).
#[test]
fn clone_and_multicast_storms_allocate_and_free_nothing_per_packet() {
    let router = compile("p4/tutorials/basic.p4");
    for storm in [Storm::Clone, Storm::Multicast] {
        let json = match storm {
            Storm::Clone => attacker("clone(CloneType.I2E, 1); resubmit_preserving_field_list(0);"),
            Storm::Multicast => attacker("sm.mcast_grp = 1;"),
        };
        for workers in [1, 2] {
            let mut vs = VirtSwitch::new();
            vs.add_device(
                1,
                DeviceSpec {
                    json: router.clone(),
                    owner: Some("alice".into()),
                    quotas: Quotas::default(),
                },
            )
            .unwrap();
            vs.add_device(
                2,
                DeviceSpec {
                    json: json.clone(),
                    owner: Some("mallory".into()),
                    quotas: Quotas {
                        max_passes: 64,
                        ..Quotas::default()
                    },
                },
            )
            .unwrap();
            route(
                &mut vs.runtime(Caller::Operator, 1).unwrap(),
                [10, 0, 2, 2],
                2,
            );
            {
                let rt: &mut dyn Runtime = &mut vs.runtime(Caller::Tenant("mallory"), 2).unwrap();
                match storm {
                    Storm::Clone => rt
                        .mirroring_session_add(
                            1,
                            MirroringSession {
                                port: Some(1),
                                mgid: None,
                            },
                        )
                        .unwrap(),
                    Storm::Multicast => {
                        let g = rt.mc_mgrp_create(1).unwrap();
                        let ports: Vec<u32> = (0..512).collect();
                        let node = rt.mc_node_create(0, &ports, &[]).unwrap();
                        rt.mc_node_associate(g, node).unwrap();
                    }
                }
            }
            for vport in 0..8 {
                vs.map_port(2, vport, Target::Phys(3)).unwrap();
            }
            let mut pool = common::victim_and_tenant(vs, workers);
            let (v, a) = (packet([10, 0, 2, 2]), packet([10, 0, 9, 9]));
            let mut batch: Vec<(u32, &[u8])> = (0..8).map(|_| (5, &a[..])).collect();
            batch.extend((0..8).map(|_| (1, &v[..])));
            let mut out: Vec<OutputPacket> = Vec::with_capacity(4096);
            // One dispatch: the storm's frames out.
            let run = |pool: &mut VirtWorkers, out: &mut Vec<OutputPacket>| {
                pool.process_batch(&batch, out);
                assert_eq!(out.iter().filter(|o| o.port == 2).count(), 8, "{storm:?}");
                assert!(out.iter().all(|o| o.port == 2 || o.port == 3));
                let n = out.iter().filter(|o| o.port == 3).count() as u64;
                pool.recycle_outputs(out);
                n
            };
            for _ in 0..1000 {
                run(&mut pool, &mut out);
            }
            let mut storm_frames = 0u64;
            common::start();
            for _ in 0..400 {
                storm_frames += run(&mut pool, &mut out);
            }
            let n = common::stop_by_thread();
            assert_eq!(
                n,
                common::ByThread::default(),
                "{storm:?}, {workers} worker(s): allocations and frees in 400 dispatches of 8 \
                 storm frames and 8 victim packets"
            );
            // Every copy the pass quota allows went out: 32 clones per frame (64 passes:
            // ingress and clone egress alternate), or the 8 mapped replicas of 63.
            let per_frame = match storm {
                Storm::Clone => 32,
                Storm::Multicast => 8,
            };
            let d = pool.device_stats(2).unwrap();
            assert_eq!(
                storm_frames,
                400 * 8 * per_frame,
                "{storm:?}: the storm's frames out, copies dropped for want of a buffer {}",
                d.buffer_drops
            );
            assert_eq!(pool.device_stats(1).unwrap().to_phys, 1400 * 8);
            assert_eq!(pool.device_stats(1).unwrap().buffer_drops, 0);
            eprintln!(
                "{storm:?}, {workers} worker(s): {storm_frames} storm frames out in the window, \
                 {} copies dropped for want of a buffer in all",
                d.buffer_drops
            );
        }
    }
}
