//! The one module of this crate that touches the OS outside of `tokio::process`: the host
//! environment, binary resolution, scratch directories and process-group signals.
#![allow(clippy::disallowed_methods, reason = "the process backend's OS layer")]

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// A snapshot of the process environment (variables that are not UTF-8 are left out).
pub(crate) fn environment() -> HashMap<String, String> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}

pub(crate) fn temp_dir() -> PathBuf {
    capability_sandbox::temp_root()
}

/// Resolves a binary spec to a canonical, executable regular file, as a child's program is
/// found: bare names through `search_path` (first hit wins, as [`TRUSTED_PATH`](crate::TRUSTED_PATH)
/// by default), absolute paths as they are, anything else (a relative path) nowhere.
pub fn resolve_binary(spec: &str, search_path: &[PathBuf]) -> Option<PathBuf> {
    if spec.is_empty() || spec.contains('\0') {
        return None;
    }
    let candidates: Vec<PathBuf> = if spec.starts_with('/') {
        vec![PathBuf::from(spec)]
    } else if spec.contains('/') {
        return None;
    } else {
        search_path
            .iter()
            .filter(|d| d.is_absolute())
            .map(|d| d.join(spec))
            .collect()
    };
    candidates.into_iter().find_map(|c| {
        let canonical = std::fs::canonicalize(&c).ok()?;
        let meta = std::fs::metadata(&canonical).ok()?;
        (meta.is_file() && meta.permissions().mode() & 0o111 != 0).then_some(canonical)
    })
}

/// The canonical form of an existing directory.
pub(crate) fn canonical_dir(path: &Path) -> std::io::Result<PathBuf> {
    let canonical = std::fs::canonicalize(path)?;
    if std::fs::metadata(&canonical)?.is_dir() {
        Ok(canonical)
    } else {
        Err(std::io::Error::new(
            std::io::ErrorKind::NotADirectory,
            "not a directory",
        ))
    }
}

/// How the names of scratch directories begin: the deny floor's
/// `capability_core::matching::path::CHILD_HOMES_PREFIX` (docs/semantics.md, "Paths"; this
/// crate does not depend on `capability-core`, so a test holds the two alike).
pub(crate) const SCRATCH_PREFIX: &str = "toolcap-home-";

/// How the names of scratch homes on their way out begin ([`ScratchHome`]'s drop).
const RETIRED_PREFIX: &str = "toolcap-gone-";

/// A fresh directory for a child's `HOME`, in its tool's scratch parent, retired when dropped
/// ([`ScratchHome`]): mode 0700, since what a child keeps in its `HOME` (a credential cache, a
/// token, its history) is its user's alone.
pub(crate) fn scratch_home(root: &Path) -> std::io::Result<ScratchHome> {
    use std::os::unix::fs::PermissionsExt as _;
    tempfile::Builder::new()
        .prefix(SCRATCH_PREFIX)
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir_in(root)
        .map(|dir| ScratchHome(Some(dir)))
}

/// A child's `HOME`. Dropped inside a tokio runtime, its name goes at once (renamed beside it,
/// `toolcap-gone-…`, in the same directory), and the directory with what the child left in it
/// is removed on the runtime's blocking pool: removing a directory can wait on the disk (on a
/// file system mounted with `discard`, freeing its block waits for the device, some 200 µs),
/// and a call's answer need not wait for that (docs/decisions.md, "capability-process": a
/// home's name goes with its call, its removal after). Outside a runtime, or when the rename fails, it is removed where
/// it is dropped.
pub(crate) struct ScratchHome(Option<tempfile::TempDir>);

impl ScratchHome {
    /// Where it is.
    pub(crate) fn path(&self) -> &Path {
        self.0
            .as_ref()
            .map_or(Path::new(""), tempfile::TempDir::path)
    }
}

impl Drop for ScratchHome {
    fn drop(&mut self) {
        let Some(dir) = self.0.take() else { return };
        // Removed by a `Retired` below, not by the `TempDir`, whose removal a child can defeat
        // (capability_sandbox::remove_tree).
        let dir = dir.keep();
        // Inside a runtime, renamed beside itself; its path names nothing from then on.
        let renamed = tokio::runtime::Handle::try_current()
            .ok()
            .and_then(|runtime| {
                let mut retired = std::ffi::OsString::from(RETIRED_PREFIX);
                retired.push(dir.file_name()?);
                let retired = dir.with_file_name(retired);
                std::fs::rename(&dir, &retired).ok()?;
                Some((runtime, retired))
            });
        match renamed {
            // Removed under its new name, whether the task runs or the runtime drops it unrun.
            Some((runtime, retired)) => {
                let retired = Retired(retired);
                drop(runtime.spawn_blocking(move || drop(retired)));
            }
            None => drop(Retired(dir)),
        }
    }
}

/// A retired home, removed with everything in it when dropped, following no symlink, however
/// deep or closed to its owner the child made what it left
/// ([`remove_tree`](capability_sandbox::remove_tree)).
struct Retired(PathBuf);

impl Drop for Retired {
    fn drop(&mut self) {
        let _ = capability_sandbox::remove_tree(&self.0);
    }
}

/// Sends `signal` to the process group `pgid`. A group that is already gone is not an error.
pub(crate) fn signal_group(pgid: u32, signal: rustix::process::Signal) {
    let Ok(raw) = i32::try_from(pgid) else { return };
    if let Some(pid) = rustix::process::Pid::from_raw(raw) {
        let _ = rustix::process::kill_process_group(pid, signal);
    }
}

/// The (device, inode) of what `path` names now, without following a final symlink.
pub(crate) fn identity(path: &Path) -> Option<(u64, u64)> {
    std::fs::symlink_metadata(path).ok().map(|m| {
        (
            std::os::unix::fs::MetadataExt::dev(&m),
            std::os::unix::fs::MetadataExt::ino(&m),
        )
    })
}

/// When the directory at `path` last changed (an entry made, removed or renamed in it).
pub(crate) fn changed(path: &Path) -> Option<std::time::SystemTime> {
    std::fs::symlink_metadata(path)
        .and_then(|m| m.modified())
        .ok()
}

/// Waits for a child started outside tokio, through a pidfd the runtime watches; reaps it even
/// when dropped before it ended (the group is killed by then).
pub(crate) struct PidWaiter {
    fd: Option<Pidfd>,
}

/// A pidfd registered with the runtime.
type Pidfd = tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>;

impl PidWaiter {
    /// Watches our child `pid` (not yet reaped).
    pub(crate) fn new(pid: u32) -> std::io::Result<Self> {
        let raw = i32::try_from(pid).map_err(|_| std::io::Error::other("pid out of range"))?;
        let pid =
            rustix::process::Pid::from_raw(raw).ok_or_else(|| std::io::Error::other("pid 0"))?;
        let fd = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::NONBLOCK)?;
        // The safe constructor is deprecated for types whose descriptor could change under the
        // registration; an `OwnedFd` always names the same one, which is the whole contract of
        // the unsafe replacement. This crate has no unsafe code.
        #[allow(
            deprecated,
            reason = "an OwnedFd meets AsyncFd::register's contract; no unsafe in this crate"
        )]
        let fd = tokio::io::unix::AsyncFd::new(fd)?;
        Ok(Self { fd: Some(fd) })
    }

    /// The exit code or the signal that ended the child.
    pub(crate) async fn wait(&mut self) -> std::io::Result<(Option<i32>, Option<i32>)> {
        let fd = self
            .fd
            .as_ref()
            .ok_or_else(|| std::io::Error::other("the child was already reaped"))?;
        let status = wait_on(fd).await?;
        self.fd = None;
        Ok(status)
    }
}

/// Waits until the child behind `fd` has ended and reaps it.
async fn wait_on(fd: &Pidfd) -> std::io::Result<(Option<i32>, Option<i32>)> {
    loop {
        let mut ready = fd.readable().await?;
        match reap_now(fd)? {
            Some(status) => return Ok(status),
            None => ready.clear_ready(),
        }
    }
}

/// Reaps the child behind `fd` if it has ended, without waiting.
fn reap_now(fd: &Pidfd) -> std::io::Result<Option<(Option<i32>, Option<i32>)>> {
    let status = rustix::process::waitid(
        rustix::process::WaitId::PidFd(std::os::fd::AsFd::as_fd(fd.get_ref())),
        rustix::process::WaitIdOptions::EXITED | rustix::process::WaitIdOptions::NOHANG,
    )?;
    Ok(status.map(|s| (s.exit_status(), s.terminating_signal())))
}

/// A dropped waiter's child, reaped by a task of the runtime once it ends.
///
/// It holds the pidfd, not a [`PidWaiter`]: a task dropped unfinished (its runtime shutting
/// down, which drops at once every task spawned then) must not hand its child on again, or
/// each hand-off's task is dropped in turn, each inside the last one's drop, until the stack
/// overflows. Dropped unfinished, it reaps the child if it has ended by then; one that has not
/// is left to the process's end (or to init).
struct Reaper(Option<Pidfd>);

impl Drop for Reaper {
    fn drop(&mut self) {
        if let Some(fd) = &self.0 {
            let _ = reap_now(fd);
        }
    }
}

impl Drop for PidWaiter {
    fn drop(&mut self) {
        let Some(fd) = self.fd.take() else { return };
        let mut reaper = Reaper(Some(fd));
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Some(fd) = &reaper.0
                    && wait_on(fd).await.is_ok()
                {
                    // Reaped: nothing is left for the drop to look at.
                    drop(reaper.0.take());
                }
            });
        }
    }
}

/// The parent's end of a child's stdout or stderr (non-blocking), for the runtime.
pub(crate) fn pipe_reader(
    fd: std::os::fd::OwnedFd,
) -> std::io::Result<tokio::net::unix::pipe::Receiver> {
    tokio::net::unix::pipe::Receiver::from_owned_fd(fd)
}

/// The parent's end of a child's stdin (non-blocking), for the runtime.
pub(crate) fn pipe_writer(
    fd: std::os::fd::OwnedFd,
) -> std::io::Result<tokio::net::unix::pipe::Sender> {
    tokio::net::unix::pipe::Sender::from_owned_fd(fd)
}

#[cfg(test)]
mod tests {
    /// The children's homes are made under the name the deny floor keeps out of every tool's
    /// and child's reach (docs/semantics.md, "Paths").
    #[test]
    fn the_homes_are_named_as_the_floor_knows_them() {
        assert_eq!(
            super::SCRATCH_PREFIX,
            capability_core::matching::path::CHILD_HOMES_PREFIX
        );
    }
}
