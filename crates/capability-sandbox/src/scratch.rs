//! Scratch directories: the `HOME` toolcap gives a confined child, the home of a guarded MCP
//! server. What a child keeps there (a credential cache, a token, its history) is its user's
//! alone and lives only as long as its owner: the directory is made mode 0700 and removed when
//! dropped, and one left behind by an owner that could not remove it (killed with `SIGKILL`,
//! which runs no destructor) is removed by the next one made beside it
//! (docs/isolation-model.md, "Scratch directories").
//!
//! An owner holds an advisory lock (`flock`) on a file in its directory, [`ScratchDir::LOCK`],
//! for as long as it lives; the kernel lets go of the lock when the owner dies, however it dies.
//! The lock file is made and locked under another name and only then renamed to its own, so a
//! lock file that can be seen is one that was locked. What the owner hands out
//! ([`ScratchDir::path`], what a sandbox grants writes beneath) is a directory inside, beside the
//! lock file: a confined child cannot replace the lock and have a live owner's directory taken
//! for abandoned.
//!
//! A directory is taken for abandoned only when all of these hold: its name has the prefix, it
//! is a directory (not a symlink) of this user's, its lock file is a regular file of this
//! user's (opened without following a symlink), and the lock can be taken. Anything else is
//! left as it is: a live owner's, an older toolcap's (no lock file), anyone else's.
#![allow(
    clippy::disallowed_methods,
    reason = "toolcap's own directories in the temporary directory, not a tool's reach"
)]

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Where toolcap makes its scratch directories: `TMPDIR` when it is an absolute path, `/tmp`
/// otherwise. `std::env::temp_dir` hands back an empty or relative `TMPDIR` as it is, which
/// would make every scratch directory in the working directory (a project a tool's reach
/// commonly holds, and where one stays when its owner is killed); the C library's temporary
/// files fall back to `/tmp` for an empty one too (docs/isolation-model.md, "Scratch
/// directories").
///
/// # Ambient Authority
///
/// Reads the process environment's `TMPDIR`.
pub fn temp_root() -> std::path::PathBuf {
    match std::env::var_os("TMPDIR").map(std::path::PathBuf::from) {
        Some(dir) if dir.is_absolute() => dir,
        _ => std::path::PathBuf::from("/tmp"),
    }
}

/// A directory of toolcap's own (mode 0700), removed when dropped, and removed by the next one
/// made beside it when its owner is killed first (docs/isolation-model.md, "Scratch directories").
#[derive(Debug)]
pub struct ScratchDir {
    // Dropped first: the directory goes while its lock is still held.
    dir: tempfile::TempDir,
    inner: std::path::PathBuf,
    /// `None` on a file system without locks: the directory then has no lock file, and is
    /// never taken for abandoned (as an older toolcap's).
    _lock: Option<File>,
}

impl ScratchDir {
    /// The name of the lock file an owner holds in its directory.
    pub const LOCK: &'static str = ".toolcap-owner";

    /// The name of the directory [`path`](Self::path) is, inside the one named with the prefix.
    pub const INNER: &'static str = "d";

    /// Makes a directory named `prefix` and random characters in `root`, then removes the
    /// directories of the same prefix there whose owners died without removing them. The
    /// sweep is best effort: a directory that cannot be examined or removed is left, and
    /// nothing it meets is an error.
    pub fn new_in(root: &Path, prefix: &str) -> io::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix(prefix)
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir_in(root)?;
        let pending = dir.path().join(".toolcap-owner.pending");
        let lock = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&pending)?;
        // Nobody else can know of the file yet, so a lock that cannot be taken is a file system
        // without them: the directory goes without a lock file, never swept, as before.
        let lock = match lock.try_lock() {
            Ok(()) => {
                std::fs::rename(&pending, dir.path().join(Self::LOCK))?;
                Some(lock)
            }
            Err(_) => {
                std::fs::remove_file(&pending)?;
                None
            }
        };
        let inner = dir.path().join(Self::INNER);
        std::fs::DirBuilder::new().mode(0o700).create(&inner)?;
        let user = std::fs::metadata(dir.path())?.uid();
        sweep(root, prefix, user, dir.path());
        Ok(ScratchDir {
            dir,
            inner,
            _lock: lock,
        })
    }

    /// The directory to use (mode 0700): [`INNER`](Self::INNER) inside the directory named with
    /// the prefix, which holds the lock.
    pub fn path(&self) -> &Path {
        &self.inner
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        // Before the fields go, so the lock is still held; whatever a child built in it
        // ([`remove_tree`](crate::remove_tree)). The `TempDir` then finds nothing to remove.
        let _ = crate::remove_tree(self.dir.path());
    }
}

/// Removes the directories of `prefix` in `root` that belong to `user` and whose owners are
/// gone, all but `own`.
fn sweep(root: &Path, prefix: &str, user: u32, own: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let ours = entry
            .file_name()
            .to_str()
            .is_some_and(|name| name.starts_with(prefix));
        if !ours || path == own {
            continue;
        }
        // `DirEntry::metadata` does not follow a symlink.
        let Ok(meta) = entry.metadata() else { continue };
        if !meta.is_dir() || meta.uid() != user {
            continue;
        }
        if let Some(_abandoned) = abandoned(&path, user) {
            // Removed while the lock is held here, so no other sweeper's work is undone.
            // Following no symlink inside, however deep or closed what a child left there.
            let _ = crate::remove_tree(&path);
        }
    }
}

/// The lock of `dir`, taken, when its owner is gone; `None` when it is held, missing, or not a
/// regular file of `user`'s.
fn abandoned(dir: &Path, user: u32) -> Option<File> {
    let lock = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(dir.join(ScratchDir::LOCK))
        .ok()?;
    let meta = lock.metadata().ok()?;
    if !meta.is_file() || meta.uid() != user {
        return None;
    }
    lock.try_lock().ok()?;
    Some(lock)
}

impl crate::SandboxPolicy {
    /// Gives the children their homes in `homes`: each launch names its own
    /// ([`Launch::home`](crate::Launch::home)), a directory made for it directly in
    /// [`ScratchDir::path`], which the child reads and writes at its path (it is never executed
    /// from). In the child's mount namespace that directory holds its own home and nothing else:
    /// no other child's, running at the same time or before it, and nothing a child left there
    /// beside its home (docs/isolation-model.md, "Each child's own home"). Like
    /// [`scratch`](Self::scratch), what a child makes there is not looked for when it ends.
    pub fn homes(mut self, homes: &ScratchDir) -> Self {
        // The rule is on the directory that holds the lock file: the one the homes are made in
        // is covered in the child, and Landlock does not consult a rule on a covered directory.
        // The child sees the former read-only.
        let top = homes.dir.path().to_path_buf();
        self.write.push(top.clone());
        self.scratch.push(top.clone());
        self.homes = Some((top, homes.inner.clone()));
        self
    }
}
