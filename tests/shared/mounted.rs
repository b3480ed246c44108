//! A kernel file system mounted for a test, unmounted when the test ends (shared by the test
//! files of several crates through `#[path]`: capability-fs, capability-sandbox, toolcap).

use std::path::{Path, PathBuf};

/// A kernel file system mounted at a place (`mount -t kind kind place`), unmounted (lazily)
/// when dropped, a failing test's unwinding included.
pub(crate) struct Mounted(PathBuf);

impl Mounted {
    /// Mounts a file system of `kind` at `place` (made if missing); `None` when it cannot be
    /// mounted: not root, or a container's root without the right to mount.
    pub(crate) fn new(kind: &str, place: &Path) -> Option<Self> {
        std::fs::create_dir_all(place).unwrap();
        std::process::Command::new("mount")
            .args(["-t", kind, kind])
            .arg(place)
            .status()
            .is_ok_and(|s| s.success())
            .then(|| Self(place.to_owned()))
    }
}

impl Mounted {
    /// Binds `source` (a file or a directory) over `place`, which must exist and be of the same
    /// kind; `None` when it cannot be bound.
    pub(crate) fn bind(source: &Path, place: &Path) -> Option<Self> {
        std::process::Command::new("mount")
            .arg("--bind")
            .arg(source)
            .arg(place)
            .status()
            .is_ok_and(|s| s.success())
            .then(|| Self(place.to_owned()))
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}
