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

#[cfg(test)]
mod tests {
    use super::*;

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
