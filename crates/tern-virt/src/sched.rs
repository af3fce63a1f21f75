//! How the kernel schedules tern-virt's threads: the time slice a worker asks for.
//!
//! With more busy threads than CPUs (the front and two workers on a 2-vCPU machine, one
//! worker flat out on a flood) a worker woken for a victim's packets is runnable but waits
//! for a CPU until a running thread's time slice ends: the kernel's default slice (EEVDF,
//! Linux 6.6+) is 0.7 ms × (1 + log2 CPUs), 1.4 ms on two CPUs, and the victim's p99 was
//! three of them (bench/RESULTS.md, "two workers: the victim's p99 under attack").
//!
//! Since Linux 6.12 a normal (`SCHED_OTHER`) thread may ask for a slice of its own
//! (`sched_attr.sched_runtime`, kept within 0.1–100 ms by the kernel, no privilege needed):
//! a woken thread whose slice is shorter than the running thread's preempts it at once, and
//! a running thread with a short slice gives way sooner. The shares do not change (a slice
//! cuts CPU time finer; it does not give a thread more of it): a flooding tenant's worker
//! keeps its fair share of the CPU, it only holds it in shorter pieces. Real-time policies
//! (`SCHED_FIFO`/`SCHED_RR`) are not used: a flat-out real-time worker would starve every
//! other thread of its CPU.
//!
//! [`ThreadSlice::Auto`] gives the workers [`AUTO_SLICE_NS`] when the workers and the front
//! are more threads than the CPUs the process may run on, and leaves the kernel's default
//! otherwise (no thread waits for a CPU then, and a longer slice costs fewer context
//! switches).
//!
//! **Measured, it does not remove the two-worker stall on the 2-vCPU machine** (Linux 6.18,
//! `CONFIG_HZ=250`, preemption "none"; bench/RESULTS.md, "two workers: the victim's p99 under
//! attack"), so the default is [`ThreadSlice::Kernel`]: the kernel ends a running thread's
//! slice only at its tick (4 ms here), and a woken worker preempts the running one at once
//! only when EEVDF finds it *eligible* (it has not run ahead of its share); a victim's
//! worker woken a few µs after a burst of its own is not, and waits for the next tick
//! whatever the slices (`perf sched timehist`: 66 of 70 waits over 0.5 ms ended within 0.2 ms of a tick). A
//! shorter slice helps where the kernel preempts between ticks (`HZ=1000`, `HRTICK`).

/// The slice [`ThreadSlice::Auto`] asks for: the kernel's shortest, 0.1 ms.
pub const AUTO_SLICE_NS: u64 = 100_000;

/// The time slice the worker threads ask the kernel for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ThreadSlice {
    /// The kernel's default (nothing asked).
    #[default]
    Kernel,
    /// [`AUTO_SLICE_NS`] when the workers and the front outnumber the CPUs, else the kernel's
    /// default.
    Auto,
    /// This many ns (the kernel keeps it within 0.1–100 ms).
    Ns(u64),
}

impl ThreadSlice {
    /// The slice (ns) to ask for with `workers` worker threads and a front on `cpus` CPUs
    /// (`None`: the kernel's default).
    pub fn resolve(self, workers: usize, cpus: usize) -> Option<u64> {
        match self {
            ThreadSlice::Kernel => None,
            ThreadSlice::Auto => (workers + 1 > cpus).then_some(AUTO_SLICE_NS),
            ThreadSlice::Ns(ns) => Some(ns),
        }
    }

    /// From a number of µs as the command line and the configuration give it (0: the
    /// kernel's default).
    pub fn from_us(us: u64) -> ThreadSlice {
        match us {
            0 => ThreadSlice::Kernel,
            us => ThreadSlice::Ns(us.saturating_mul(1000)),
        }
    }
}

/// The CPUs this process may run on (its affinity mask and CPU quota; 1 if unknown).
pub fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The calling thread's kernel id (`gettid`; 0 where there is none).
pub fn current_tid() -> i32 {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid takes no arguments and returns the caller's thread id.
        unsafe { libc::gettid() }
    }
    #[cfg(not(target_os = "linux"))]
    {
        0
    }
}

#[cfg(target_os = "linux")]
fn attr_for(tid: i32, ns: u64) -> libc::sched_attr {
    // SAFETY: getpriority takes integers only; a failure reads as nice -1, harmless for
    // a thread that only sets its slice (its own nice value is what it passes).
    let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, tid as libc::id_t) };
    libc::sched_attr {
        size: std::mem::size_of::<libc::sched_attr>() as u32,
        sched_policy: libc::SCHED_OTHER as u32,
        sched_flags: 0,
        sched_nice: nice,
        sched_priority: 0,
        sched_runtime: ns,
        sched_deadline: 0,
        sched_period: 0,
    }
}

/// Ask for a time slice of `ns` for the calling thread (normal policy, its nice value
/// kept). An error where the kernel refuses; a kernel older than 6.12 accepts the call and
/// keeps its own slice ([`thread_slice`] tells).
pub fn set_current_slice(ns: u64) -> std::io::Result<()> {
    set_thread_slice(0, ns)
}

/// [`set_current_slice`] for thread `tid` of this process (0: the calling thread), e.g. one
/// of [`crate::VirtWorkers::thread_ids`] or a `/proc/self/task` entry.
pub fn set_thread_slice(tid: i32, ns: u64) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        let attr = attr_for(tid, ns);
        // SAFETY: sched_setattr reads `attr`, a fully initialised sched_attr whose `size`
        // says how much, during the call, and changes thread `tid`'s scheduling only.
        let r = unsafe {
            libc::syscall(
                libc::SYS_sched_setattr,
                tid,
                &attr as *const libc::sched_attr,
                0u32,
            )
        };
        if r == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (tid, ns);
        Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "custom time slices are a Linux feature",
        ))
    }
}

/// The time slice (ns) the kernel gives thread `tid` of any process (0: the calling
/// thread), as `sched_getattr` reports it (`sched_runtime`: Linux 6.12+ reports a normal
/// thread's slice there, asked for or the default; an older kernel 0).
pub fn thread_slice(tid: i32) -> std::io::Result<u64> {
    #[cfg(target_os = "linux")]
    {
        let mut attr = attr_for(tid, 0);
        // SAFETY: sched_getattr writes at most `size` bytes (the size of `attr`, passed as
        // both the struct's field and the argument) into `attr`, which lives for the call.
        let r = unsafe {
            libc::syscall(
                libc::SYS_sched_getattr,
                tid,
                &mut attr as *mut libc::sched_attr,
                std::mem::size_of::<libc::sched_attr>() as u32,
                0u32,
            )
        };
        if r == 0 {
            Ok(attr.sched_runtime)
        } else {
            Err(std::io::Error::last_os_error())
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = tid;
        Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "custom time slices are a Linux feature",
        ))
    }
}

/// The CPUs this process may run on by its affinity mask (`sched_getaffinity`; `None` where
/// it cannot be read).
pub fn affinity_cpus() -> Option<usize> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity writes at most
        // `size_of::<cpu_set_t>()` bytes into it during the call, and CPU_COUNT only reads it.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
                return None;
            }
            usize::try_from(libc::CPU_COUNT(&set))
                .ok()
                .filter(|&n| n > 0)
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// What `tern virt run --workers N` tells the operator when the front and `workers` worker
/// threads are more busy threads than the `cpus` the process may run on (`None` otherwise).
pub fn oversubscription_warning(workers: usize, cpus: usize) -> Option<String> {
    if workers == 0 || workers < cpus {
        return None;
    }
    let fewer = cpus.saturating_sub(1).max(1);
    Some(format!(
        "--workers {workers}: the front and {workers} worker thread(s) are {} busy threads on \
         the {cpus} CPU(s) this process may run on (sched_getaffinity). A worker then shares a \
         CPU with a thread running flat out (another tenant's worker under a flood, or the \
         front), and when woken for a tenant's packets it can wait for the kernel's next tick \
         (4 ms at HZ=250) behind it: on a 2-vCPU VM with 2 workers the victim's p99 was about \
         4 ms under every attack against about 0.1 ms with 1 worker (bench/RESULTS.md, \"Two \
         workers: the victim's p99 under attack\"). Run --workers {fewer} (or give the process \
         more CPUs) when a tenant's latency matters.",
        workers + 1
    ))
}

/// One thread's scheduler counters (`/proc/<pid>/task/<tid>/schedstat`): time on a CPU (ns)
/// and the times it was run on one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadTime {
    pub tid: u32,
    /// Its `comm` (kernel threads: `kdamond.0`, `kworker/1:2`, ...).
    pub name: String,
    pub run_ns: u64,
    pub runs: u64,
}

/// Every thread on the machine that is not this process's (kernel threads included), with
/// its counters so far; empty where `/proc` cannot be read. Read before and after a timed
/// run, the difference ([`others_ran`]) is the CPU time the machine's other work (a VM's
/// housekeeping such as DAMON's `kdamond`) took from the CPUs meanwhile.
pub fn other_threads() -> Vec<ThreadTime> {
    let me = std::process::id();
    let mut v = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return v;
    };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(tasks) = std::fs::read_dir(p.path().join("task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(st) = std::fs::read_to_string(t.path().join("schedstat")) else {
                continue;
            };
            let mut f = st.split_whitespace().map(|x| x.parse::<u64>().ok());
            let (Some(Some(run_ns)), _, Some(Some(runs))) = (f.next(), f.next(), f.next()) else {
                continue;
            };
            let name = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
            v.push(ThreadTime {
                tid,
                name: name.trim().to_string(),
                run_ns,
                runs,
            });
        }
    }
    v
}

/// What the other threads ran between two [`other_threads`] readings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OthersRan {
    /// CPU time of every other thread (ns) and the times they were run.
    pub run_ns: u64,
    pub runs: u64,
    /// Of which DAMON's kernel threads (`kdamond*`).
    pub kdamond_ns: u64,
    pub kdamond_runs: u64,
    /// The busiest names (threads of one name added up), most CPU time first: (name, ns,
    /// runs), at most five.
    pub top: Vec<(String, u64, u64)>,
}

/// `after` − `before` ([`other_threads`]), by thread id (a kernel worker's name changes with
/// its work item): a thread that started in between counts whole (also under a reused id,
/// whose counters went backwards), one that ended is lost (its time cannot be read).
pub fn others_ran(before: &[ThreadTime], after: &[ThreadTime]) -> OthersRan {
    let old: std::collections::HashMap<u32, (u64, u64)> =
        before.iter().map(|t| (t.tid, (t.run_ns, t.runs))).collect();
    let mut r = OthersRan::default();
    let mut by_name: std::collections::BTreeMap<&str, (u64, u64)> = Default::default();
    for t in after {
        let (ns0, runs0) = old
            .get(&t.tid)
            .copied()
            .filter(|&(ns, runs)| ns <= t.run_ns && runs <= t.runs)
            .unwrap_or((0, 0));
        let (ns, runs) = (t.run_ns.saturating_sub(ns0), t.runs.saturating_sub(runs0));
        if runs == 0 && ns == 0 {
            continue;
        }
        r.run_ns += ns;
        r.runs += runs;
        if t.name.starts_with("kdamond") {
            r.kdamond_ns += ns;
            r.kdamond_runs += runs;
        }
        let e = by_name.entry(t.name.as_str()).or_default();
        e.0 += ns;
        e.1 += runs;
    }
    let mut top: Vec<(String, u64, u64)> = by_name
        .into_iter()
        .map(|(n, (ns, runs))| (n.to_string(), ns, runs))
        .collect();
    top.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    top.truncate(5);
    r.top = top;
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_operator_is_warned_when_the_workers_and_the_front_outnumber_the_cpus() {
        // Two workers and the front on two CPUs: three busy threads.
        let w = oversubscription_warning(2, 2).expect("warned");
        assert!(w.contains("3 busy threads on the 2 CPU(s)"), "{w}");
        assert!(w.contains("--workers 1") && w.contains("tick"), "{w}");
        assert!(oversubscription_warning(1, 1).is_some());
        assert!(oversubscription_warning(4, 4).is_some());
        // One worker and the front on two CPUs, three on four: a CPU each.
        assert_eq!(oversubscription_warning(1, 2), None);
        assert_eq!(oversubscription_warning(3, 4), None);
        assert_eq!(oversubscription_warning(0, 1), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_affinity_mask_gives_the_cpus() {
        let n = affinity_cpus().expect("sched_getaffinity");
        assert!((1..=4096).contains(&n), "{n}");
        assert!(n >= cpus(), "{n} < {}", cpus());
    }

    fn t(tid: u32, name: &str, run_ns: u64, runs: u64) -> ThreadTime {
        ThreadTime {
            tid,
            name: name.to_string(),
            run_ns,
            runs,
        }
    }

    #[test]
    fn other_threads_are_counted_by_what_they_ran_in_between() {
        let before = [
            t(77, "kdamond.0", 9_000_000, 100),
            t(5, "kworker/0:1", 1_000, 10),
            t(6, "idle_one", 500, 5),
            t(9, "gone", 100, 1),
        ];
        let after = [
            t(77, "kdamond.0", 13_000_000, 102),
            t(5, "kworker/0:1", 4_000, 13),
            t(6, "idle_one", 500, 5),
            t(8, "kworker/0:1", 2_000, 2), // started in between: counted whole
            t(9, "reused", 70, 1),         // another thread under a reused id
        ];
        let r = others_ran(&before, &after);
        assert_eq!((r.kdamond_ns, r.kdamond_runs), (4_000_000, 2));
        assert_eq!(r.run_ns, 4_000_000 + 3_000 + 2_000 + 70);
        assert_eq!(r.runs, 2 + 3 + 2 + 1);
        assert_eq!(
            r.top,
            vec![
                ("kdamond.0".to_string(), 4_000_000, 2),
                ("kworker/0:1".to_string(), 5_000, 5),
                ("reused".to_string(), 70, 1),
            ]
        );
        // A kernel worker renamed by its work item is the same thread.
        let renamed = [t(5, "kworker/0:1-events", 4_000, 13)];
        let r = others_ran(&before[1..2], &renamed);
        assert_eq!((r.run_ns, r.runs), (3_000, 3));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn other_threads_are_read_from_proc_and_exclude_this_process() {
        let v = other_threads();
        assert!(!v.is_empty(), "no thread read from /proc");
        let me = std::fs::read_dir("/proc/self/task")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .collect::<Vec<_>>();
        assert!(v.iter().all(|t| !me.contains(&t.tid)));
    }

    /// Another process kept busy between two readings shows in what the others ran.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_busy_process_beside_shows_in_what_the_others_ran() {
        // Killed even if the test fails.
        let busy = tern_fixtures::BusyProcess::spawn();
        let pid = busy.pid();
        let runs = |v: &[ThreadTime]| v.iter().find(|t| t.tid == pid).map_or(0, |t| t.runs);
        let before = other_threads();
        // Wait (no time threshold: until it happened) for the loop to be run again.
        let seen = (0..10_000).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(1));
            let after = other_threads();
            runs(&after) > runs(&before)
                && others_ran(&before, &after).runs >= runs(&after) - runs(&before)
        });
        drop(busy);
        assert!(seen, "the busy loop (pid {pid}) never showed");
    }

    #[test]
    fn auto_asks_only_when_the_threads_outnumber_the_cpus() {
        // Two workers and the front on two CPUs: three threads, two CPUs.
        assert_eq!(ThreadSlice::Auto.resolve(2, 2), Some(AUTO_SLICE_NS));
        assert_eq!(ThreadSlice::Auto.resolve(1, 1), Some(AUTO_SLICE_NS));
        // One worker and the front on two CPUs, two workers on four: each has a CPU.
        assert_eq!(ThreadSlice::Auto.resolve(1, 2), None);
        assert_eq!(ThreadSlice::Auto.resolve(2, 4), None);
        assert_eq!(ThreadSlice::Auto.resolve(3, 4), None);
        assert_eq!(ThreadSlice::Kernel.resolve(8, 2), None);
        assert_eq!(ThreadSlice::Ns(300_000).resolve(1, 8), Some(300_000));
        assert_eq!(ThreadSlice::from_us(0), ThreadSlice::Kernel);
        assert_eq!(ThreadSlice::from_us(250), ThreadSlice::Ns(250_000));
    }

    /// The calling thread's slice, set and read back from the kernel (a thread of its own,
    /// so the test harness's threads keep theirs).
    #[cfg(target_os = "linux")]
    #[test]
    fn a_slice_asked_for_is_the_slice_the_kernel_reports() {
        std::thread::spawn(|| {
            let before = thread_slice(0).expect("sched_getattr");
            if before == 0 {
                eprintln!("skipped: this kernel reports no slice (older than 6.12)");
                return;
            }
            let want = if before == 300_000 { 400_000 } else { 300_000 };
            set_current_slice(want).expect("sched_setattr");
            assert_eq!(thread_slice(0).unwrap(), want);
            assert_eq!(thread_slice(current_tid()).unwrap(), want);
        })
        .join()
        .unwrap();
    }
}
