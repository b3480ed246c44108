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
    std::env::temp_dir()
}

/// Resolves a binary spec to a canonical, executable regular file: bare names through
/// `search_path` (first hit wins), absolute paths as they are.
pub(crate) fn resolve_binary(spec: &str, search_path: &[PathBuf]) -> Option<PathBuf> {
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

/// A fresh private directory for a child's `HOME`, removed when dropped.
pub(crate) fn scratch_home(root: &Path) -> std::io::Result<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix("toolcap-home-")
        .tempdir_in(root)
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
