//! Arbitrary packets through two switches running the same program, one with native code
//! (parser, pipelines with inlined actions, emit loop) and one interpreted: the outputs (ports
//! and bytes) must agree. Programs: `p4/tests/native.p4` (every inlined operation with its
//! result in an emitted header) and the L2/L3/ACL/NAT bench pipeline, each with a few entries
//! whose keys the fuzzer can find by comparison tracing. The first input byte picks the
//! program and the ingress port; the rest is the frame.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::sync::Mutex;
use tern_dataplane::{Switch, SwitchOptions};
use tern_runtime::{MatchParam, PacketPath, Runtime};

const NATIVE: &str = include_str!("../../p4/tests/native.p4");
const ACL_NAT: &str = include_str!("../../p4/bench/l2l3_acl_nat.p4");

fn exact(v: &[u8]) -> Vec<MatchParam> {
    vec![MatchParam::Exact(v.to_vec())]
}

/// `native.p4`'s tables: by_dst (10.0.0.i), by_port (5000 + i), two routes.
fn entries_native(sw: &mut Switch) {
    for i in 1..=8u8 {
        let p = vec![0, 0, i, i.wrapping_mul(37)];
        sw.mt_add_entry("I.by_dst", &exact(&[10, 0, 0, i]), "I.arith", &[p, vec![i, 3], vec![i + 1]], None)
            .expect("by_dst");
        let port = (5000u16 + u16::from(i)).to_be_bytes();
        let action = if i % 4 == 0 { "I.leave" } else { "I.mark" };
        let data = if i % 4 == 0 { vec![] } else { vec![vec![i & 0xf]] };
        sw.mt_add_entry("I.by_port", &exact(&port), action, &data, None).expect("by_port");
    }
    for (net, len, port) in [([10u8, 0, 0, 0], 8, 1u8), ([10, 0, 1, 0], 24, 2)] {
        let key = vec![MatchParam::Lpm { key: net.to_vec(), prefix_len: len }];
        sw.mt_add_entry("I.route", &key, "I.fwd", &[vec![0, port]], None).expect("route");
    }
}

fn switches() -> &'static Mutex<Vec<(Switch, Switch)>> {
    static S: std::sync::OnceLock<Mutex<Vec<(Switch, Switch)>>> = std::sync::OnceLock::new();
    S.get_or_init(|| {
        let mut out = Vec::new();
        for (src, name) in [(NATIVE, "native.p4"), (ACL_NAT, "l2l3_acl_nat.p4")] {
            let json = tern_p4::compile_str(src, name, &Default::default()).expect("compiles").json;
            let mut a = Switch::from_json(&json, SwitchOptions::default()).expect("loads");
            let mut b = Switch::from_json(&json, SwitchOptions::default()).expect("loads");
            b.use_interpreter();
            for sw in [&mut a, &mut b] {
                sw.set_clock_us(Some(1));
                if name == "native.p4" {
                    entries_native(sw);
                }
            }
            assert!(a.native_summary().pipelines > 0, "{name}: no native pipeline");
            out.push((a, b));
        }
        Mutex::new(out)
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((sel, frame)) = data.split_first() else { return };
    let mut sws = switches().lock().unwrap_or_else(|e| e.into_inner());
    let n = sws.len();
    let (native, interp) = &mut sws[*sel as usize % n];
    let port = u32::from(*sel >> 4);
    let (mut o1, mut o2) = (Vec::new(), Vec::new());
    native.process_packet(port, frame, &mut o1);
    interp.process_packet(port, frame, &mut o2);
    let got: Vec<_> = o1.iter().map(|o| (o.port, &o.data)).collect();
    let want: Vec<_> = o2.iter().map(|o| (o.port, &o.data)).collect();
    assert_eq!(got, want, "frame {frame:02x?}");
});
