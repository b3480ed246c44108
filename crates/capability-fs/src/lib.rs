//! The file system backend for toolcap: a [`ScopedFs`] whose every
//! open is confined by the kernel beneath the root the policy matched.
//!
//! Each operation:
//!
//! 1. asks the tool's [`PathPolicy`](capability_types::backend::PathPolicy) (the one matcher of
//!    `capability-core`): lexical `..` folding, relative paths against the context's working
//!    directory, component-wise coverage, deny list and deny floor;
//! 2. opens the matched root and then the relative remainder with
//!    `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`, so a symlink or `..` that leads out of
//!    the root is refused by the kernel, with no window between check and open;
//! 3. when a symlink inside the root was followed (the first attempt uses `RESOLVE_NO_SYMLINKS`
//!    and retries without it only on `ELOOP`), asks the policy again about the place the kernel
//!    actually reached, so a symlink *inside* a root cannot lead into a denied sub-tree or onto
//!    the deny floor;
//! 4. refuses what it opened when that lies on a kernel file system (a procfs or a sysfs
//!    mounted inside the reach, say a chroot's) other than the root's own: the floor names
//!    `/proc` and `/sys`, and such a mount is the same under another name (docs/semantics.md,
//!    "Paths").
//!
//! Where `openat2` is missing (Linux before 5.6, or [`FsConfig::force_component_walk`]), the
//! remainder is walked one component at a time with `O_NOFOLLOW`: every symlink is refused.
//!
//! Writes are atomic: a temporary file beside the target, written, `fsync`ed and renamed over
//! it through the same directory descriptor; a failed write leaves the old file as it was.
//! Writing through a symlink is refused. Reads are capped (default 10 MiB).
//!
//! ```
//! use std::sync::Arc;
//! use capability_core::CapabilityBackends;
//! use capability_fs::{FsBackend, FsConfig};
//!
//! let backends = CapabilityBackends::new().with_fs(Arc::new(FsBackend::new(FsConfig::default())));
//! # let _ = backends;
//! ```
#![deny(missing_docs)]

mod kept;
mod scoped;
mod sys;

use std::sync::Arc;

use capability_types::backend::{FsFactory, FsGrant};
use capability_types::{CapabilityError, ScopedFs};

pub use crate::kept::{refuse_what_git_runs, refuse_where_it_lands};
pub use crate::scoped::ScopedFiles;

/// Settings of the file system backend.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FsConfig {
    /// Reads of files larger than this fail (default 10 MiB; `u64::MAX` is no limit).
    pub max_read: u64,
    /// Writes larger than this fail (default 64 MiB).
    pub max_write: u64,
    /// Listings of directories with more entries than this fail, without reading the rest
    /// (default 100,000; `usize::MAX` is no limit): a listing is held in memory whole, as a
    /// file read is.
    pub max_entries: usize,
    /// Use the `O_NOFOLLOW` component walk even where `openat2` exists (refuses every symlink).
    pub force_component_walk: bool,
    /// Run each operation on tokio's blocking pool instead of inline. An operation is a handful
    /// of system calls, which a local file system answers in microseconds, while a hop to the
    /// pool costs tens of microseconds; turn this on for network file systems, where a call may
    /// stall (default off).
    pub offload_blocking: bool,
}

impl Default for FsConfig {
    fn default() -> Self {
        Self {
            max_read: 10 * 1024 * 1024,
            max_write: 64 * 1024 * 1024,
            max_entries: 100_000,
            force_component_walk: false,
            offload_blocking: false,
        }
    }
}

impl FsConfig {
    /// Sets the read cap.
    pub fn max_read(mut self, bytes: u64) -> Self {
        self.max_read = bytes;
        self
    }
    /// Sets the listing cap.
    pub fn max_entries(mut self, entries: usize) -> Self {
        self.max_entries = entries;
        self
    }
    /// Sets the write cap.
    pub fn max_write(mut self, bytes: u64) -> Self {
        self.max_write = bytes;
        self
    }
    /// Forces the `O_NOFOLLOW` component walk.
    pub fn force_component_walk(mut self, on: bool) -> Self {
        self.force_component_walk = on;
        self
    }
    /// Runs operations on tokio's blocking pool.
    pub fn offload_blocking(mut self, on: bool) -> Self {
        self.offload_blocking = on;
        self
    }
}

/// Builds a [`ScopedFiles`] per tool, sharing one handle per root.
///
/// A root directory is opened once, the first time any tool uses it, and that handle confines
/// every later operation under it. A root path that is replaced afterwards (renamed, swapped
/// for a symlink) therefore cannot redirect a tool; see `docs/decisions.md` for the window
/// before first use.
#[derive(Debug, Clone, Default)]
pub struct FsBackend {
    config: Arc<FsConfig>,
    roots: Arc<scoped::RootHandles>,
}

impl FsBackend {
    /// A backend with `config`.
    pub fn new(config: FsConfig) -> Self {
        Self {
            config: Arc::new(config),
            roots: Arc::default(),
        }
    }
}

impl FsFactory for FsBackend {
    fn scoped_fs(&self, grant: FsGrant) -> Result<Arc<dyn ScopedFs>, CapabilityError> {
        Ok(Arc::new(ScopedFiles::new(
            grant,
            Arc::clone(&self.config),
            Arc::clone(&self.roots),
        )))
    }
}
