//! The worker threads' time slice ([`tern_virt::ThreadSlice`]) as the kernel reports it.

#![cfg(target_os = "linux")]

use tern_virt::sched::{cpus, thread_slice, AUTO_SLICE_NS};
use tern_virt::{ThreadSlice, VirtSwitch, VirtWorkers, WorkerOptions};

/// The slice a new thread of this process gets from the kernel (none asked); `None` on a
/// kernel that reports no slice (older than 6.12): the tests then have nothing to check.
fn default_slice() -> Option<u64> {
    let ns = std::thread::spawn(|| thread_slice(0).expect("sched_getattr"))
        .join()
        .unwrap();
    (ns > 0).then_some(ns)
}

/// Every worker thread's slice, read from the kernel by thread id.
fn worker_slices(opts: WorkerOptions) -> (Option<u64>, Vec<u64>) {
    let pool = VirtWorkers::new(VirtSwitch::new(), opts);
    let tids = pool.thread_ids().to_vec();
    assert_eq!(tids.len(), opts.workers);
    assert!(tids.iter().all(|&t| t > 0), "{tids:?}");
    let got = tids
        .iter()
        .map(|&t| thread_slice(t).expect("sched_getattr of a worker"))
        .collect();
    let asked = pool.slice_ns();
    drop(pool.shutdown(&mut Vec::new()));
    (asked, got)
}

#[test]
fn a_slice_given_reaches_every_worker_thread() {
    let Some(default) = default_slice() else {
        eprintln!("skipped: this kernel reports no slice (older than 6.12)");
        return;
    };
    let want = if default == 300_000 { 400_000 } else { 300_000 };
    let (asked, got) = worker_slices(WorkerOptions {
        workers: 3,
        slice: ThreadSlice::Ns(want),
        ..WorkerOptions::default()
    });
    assert_eq!(asked, Some(want));
    assert_eq!(got, vec![want; 3]);
}

/// The default asks for nothing: every worker keeps the kernel's slice.
#[test]
fn the_kernels_slice_is_left_alone_by_default() {
    let Some(default) = default_slice() else {
        eprintln!("skipped: this kernel reports no slice (older than 6.12)");
        return;
    };
    assert_eq!(WorkerOptions::default().slice, ThreadSlice::Kernel);
    let (asked, got) = worker_slices(WorkerOptions {
        workers: 2,
        ..WorkerOptions::default()
    });
    assert_eq!(asked, None);
    assert_eq!(got, vec![default; 2]);
}

/// `Auto`: as many workers as CPUs (the front makes one thread more than CPUs) ask for the
/// short slice; one worker fewer than the CPUs keeps the kernel's.
#[test]
fn auto_shortens_the_slice_only_when_the_threads_outnumber_the_cpus() {
    let Some(default) = default_slice() else {
        eprintln!("skipped: this kernel reports no slice (older than 6.12)");
        return;
    };
    let n = cpus();
    let (asked, got) = worker_slices(WorkerOptions {
        workers: n,
        slice: ThreadSlice::Auto,
        ..WorkerOptions::default()
    });
    assert_eq!(asked, Some(AUTO_SLICE_NS));
    assert_eq!(got, vec![AUTO_SLICE_NS; n]);
    if n >= 2 {
        let (asked, got) = worker_slices(WorkerOptions {
            workers: n - 1,
            slice: ThreadSlice::Auto,
            ..WorkerOptions::default()
        });
        assert_eq!(asked, None);
        assert_eq!(got, vec![default; n - 1]);
    }
}

/// The configuration's `worker_slice_us`: a number of µs within what the kernel takes, or
/// absent; anything else is an error naming the key.
#[test]
fn the_config_names_the_workers_slice() {
    use tern_virt::config::Config;
    let cfg = |extra: &str| {
        Config::parse(
            &format!(r#"{{ "devices": [ {{ "id": 1, "program": "p.json" }} ]{extra} }}"#),
            "v.json",
        )
    };
    assert_eq!(cfg("").unwrap().worker_slice_us, None);
    assert_eq!(
        cfg(r#", "worker_slice_us": 250"#).unwrap().worker_slice_us,
        Some(250)
    );
    assert_eq!(
        cfg(r#", "worker_slice_us": 0"#).unwrap().worker_slice_us,
        Some(0)
    );
    for bad in [
        r#", "worker_slice_us": 100001"#,
        r#", "worker_slice_us": "fast""#,
    ] {
        let e = cfg(bad).unwrap_err().to_string();
        assert!(e.contains("worker_slice_us"), "{e}");
    }
}
