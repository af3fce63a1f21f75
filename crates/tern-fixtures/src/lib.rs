//! Test support: where tern's tests find the shared BMv2 fixtures, the suite's rule for when they
//! are missing, scratch directories ([`scratch`]) that remove themselves when a test ends, a
//! busy process beside a test ([`BusyProcess`]) killed when it is dropped, and the tests' own
//! IPv4 header checksum ([`ipv4_checksum`]).
//!
//! The fixtures (real BMv2 JSON files, P4Info files, pcaps and CLI golden outputs from the BMv2
//! repository) live in `../shared/fixtures` beside the checkout, not in the repository. A test
//! that needs them starts with [`require!`]: when the folder is absent the test prints
//! `skipping: ... not found` and returns (it passes without checking anything), so a bare clone
//! still runs every test that does not depend on them.
//!
//! ```
//! fn loads_packet_redirect() {
//!     tern_fixtures::require!();
//!     let json = tern_fixtures::bmv2("targets/simple_switch/tests/testdata/packet_redirect.json");
//!     assert!(json.is_file());
//! }
//! loads_packet_redirect();
//! ```

use std::path::{Path, PathBuf};

/// The BMv2 fixtures (`DIR/bmv2`).
pub const BMV2: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/fixtures/bmv2");

/// Whether the fixtures are present. When they are not, prints the skip message (once per call,
/// so each skipped test says so in `--nocapture` output) and returns `false`.
pub fn available() -> bool {
    let dir = Path::new(BMV2);
    if dir.is_dir() {
        true
    } else {
        println!(
            "skipping: {} not found (the shared fixtures are not beside this checkout)",
            display(dir)
        );
        false
    }
}

/// The path of `rel` inside the BMv2 fixtures.
pub fn bmv2(rel: &str) -> PathBuf {
    Path::new(BMV2).join(rel)
}

/// The fixtures path without its `crates/tern-fixtures/../../..` detour, when it resolves.
fn display(dir: &Path) -> String {
    let mut p = PathBuf::new();
    for c in dir.components() {
        match c {
            std::path::Component::ParentDir => {
                p.pop();
            }
            other => p.push(other),
        }
    }
    p.display().to_string()
}

/// Returns from the calling test (with `()` or the given value) when the shared fixtures are
/// absent, after printing why. Use it as a test's first statement.
#[macro_export]
macro_rules! require {
    () => {
        if !$crate::available() {
            return;
        }
    };
    ($ret:expr) => {
        if !$crate::available() {
            return $ret;
        }
    };
}

/// A scratch directory for one test, removed with everything in it when dropped: at the end of
/// the test, and also when the test fails (a panic unwinds through the drop). Derefs to its
/// [`Path`], so `dir.join("x")` and `&dir` work where a path is expected.
pub struct ScratchDir(tempfile::TempDir);

/// A fresh, empty scratch directory in the system's temporary folder (`$TMPDIR`), named
/// `tern-<name>-<random>` so that a listing shows which test made it.
pub fn scratch(name: &str) -> ScratchDir {
    let dir = tempfile::Builder::new()
        .prefix(&format!("tern-{name}-"))
        .tempdir()
        .unwrap_or_else(|e| panic!("cannot create a scratch directory for {name}: {e}"));
    ScratchDir(dir)
}

impl std::ops::Deref for ScratchDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        self.0.path()
    }
}

impl AsRef<Path> for ScratchDir {
    fn as_ref(&self) -> &Path {
        self.0.path()
    }
}

/// Another process kept busy beside a test: a child `sh` running `while :; do :; done` (a
/// CPU-bound loop the scheduler sees as any other process's), killed and reaped when this is
/// dropped — also when the test fails and unwinds, so no loop outlives its test. On Linux the
/// loop also dies with the thread that started it (`PR_SET_PDEATHSIG`): a test process killed
/// outright (a timeout, `kill -9`), which runs no destructor, leaves no loop spinning behind
/// it. Keep it on the thread that spawned it.
pub struct BusyProcess(std::process::Child);

impl BusyProcess {
    /// Start the loop (panics when `sh` cannot be started).
    pub fn spawn() -> BusyProcess {
        let mut cmd = std::process::Command::new("sh");
        cmd.args(["-c", "while :; do :; done"])
            .stdin(std::process::Stdio::null());
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::process::CommandExt;
            // SAFETY: the closure runs in the child between fork and exec and only calls
            // prctl (async-signal-safe), with integer arguments.
            unsafe {
                cmd.pre_exec(|| {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start a busy `sh` loop: {e}"));
        BusyProcess(child)
    }

    /// Its process id (its only thread's id too).
    pub fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for BusyProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The RFC 1071 checksum an IPv4 header `h` should carry: the ones' complement of the ones'
/// complement sum of its 16-bit words, its own checksum field (bytes 10–11) left out, so the
/// field may hold anything. Written apart from the engine's (`tern_hash::csum16`) on purpose:
/// the tests that build or check frames with it are an oracle for the engine and must not
/// share its code.
pub fn ipv4_checksum(h: &[u8]) -> u16 {
    let mut sum: u32 = h
        .chunks(2)
        .enumerate()
        .filter(|&(i, _)| i != 5)
        .map(|(_, c)| u32::from(c[0]) << 8 | u32::from(*c.get(1).unwrap_or(&0)))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The loop runs while held (its state in `/proc` is running or runnable), and is gone —
    /// killed and reaped, no zombie — once dropped, also when dropped by an unwinding panic.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_busy_process_runs_until_dropped_even_by_a_panic() {
        let state = |pid: u32| -> Option<String> {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // The state follows the command in parentheses.
            let after = &stat[stat.rfind(')')? + 2..];
            after.split(' ').next().map(str::to_string)
        };
        let busy = BusyProcess::spawn();
        let pid = busy.pid();
        // `sh` is running its loop (R) once it has started; it may be scheduled out (R
        // still), never sleeping in it.
        let running = (0..1000).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(1));
            state(pid).as_deref() == Some("R")
        });
        assert!(running, "the loop never ran: {:?}", state(pid));
        drop(busy);
        assert_eq!(state(pid), None, "pid {pid} left behind");

        let (tx, rx) = std::sync::mpsc::channel();
        let r = std::thread::spawn(move || {
            let busy = BusyProcess::spawn();
            tx.send(busy.pid()).unwrap();
            panic!("a failing test holding the loop");
        })
        .join();
        assert!(r.is_err());
        let pid = rx.recv().unwrap();
        assert_eq!(state(pid), None, "pid {pid} left behind by the failed test");
    }

    /// A loop whose guard never runs its destructor (forgotten here; a test process killed
    /// outright in real life) dies with the thread that started it.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_busy_process_dies_with_its_thread_without_a_destructor() {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let busy = BusyProcess::spawn();
            tx.send(busy.pid()).unwrap();
            std::mem::forget(busy);
        })
        .join()
        .unwrap();
        let pid = rx.recv().unwrap() as libc::pid_t;
        let mut status = 0;
        let reaped = (0..5000).any(|_| {
            // SAFETY: waitpid on our own child, writing its status into a local.
            let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
            r == pid || {
                std::thread::sleep(std::time::Duration::from_millis(1));
                false
            }
        });
        if !reaped {
            // SAFETY: kill and reap our own child before failing.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
        }
        assert!(reaped, "pid {pid} outlived the thread that started it");
        assert!(
            libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGKILL,
            "pid {pid} ended otherwise: status {status:#x}"
        );
    }

    #[test]
    fn display_removes_parent_steps() {
        assert_eq!(display(Path::new("/a/b/c/../../x")), "/a/x");
    }

    #[test]
    fn available_matches_the_folder() {
        assert_eq!(available(), Path::new(BMV2).is_dir());
    }

    /// The worked example of RFC 1071's common use: a header from a capture, checksum 0xb861,
    /// gives that checksum whatever its checksum field holds.
    #[test]
    fn ipv4_checksum_matches_a_captured_header() {
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(ipv4_checksum(&h), 0xb861);
        h[10] = 0;
        h[11] = 0;
        assert_eq!(ipv4_checksum(&h), 0xb861);
        h[15] ^= 1;
        assert_ne!(ipv4_checksum(&h), 0xb861);
    }
}
