//! Test support: where tern's tests find the shared BMv2 fixtures, the suite's rule for when they
//! are missing, and scratch directories ([`scratch`]) that remove themselves when a test ends.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_removes_parent_steps() {
        assert_eq!(display(Path::new("/a/b/c/../../x")), "/a/x");
    }

    #[test]
    fn available_matches_the_folder() {
        assert_eq!(available(), Path::new(BMV2).is_dir());
    }
}
