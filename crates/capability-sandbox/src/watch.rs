//! The places a child made that a shell, an agent's client, an editor or a git hook manager runs
//! code from, where none was when it started: a mount keeps only what exists, so what a child
//! makes is found when it has ended, and set aside (docs/policy.md, "Kept from children").

#![allow(
    clippy::disallowed_methods,
    reason = "the child's project directories are looked at again when it has ended"
)]

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};

/// The places of the caller's `runs_later` names that were missing from a child's project
/// directories (its write roots, its working directory and those above it beneath a write
/// root) when it started, and that the caller's policy does not let children write.
#[derive(Debug, Default)]
pub struct Watch {
    /// By directory, the names missing from it.
    missing: BTreeMap<PathBuf, Vec<OsString>>,
}

impl Watch {
    /// Watches `dirs` for `names` (relative paths) that are not among `present`, and that
    /// `writable` does not let children write.
    pub(crate) fn new(
        dirs: &[PathBuf],
        names: &[&str],
        present: &[PathBuf],
        writable: Option<&(dyn Fn(&Path) -> bool + Sync)>,
    ) -> Self {
        let mut missing: BTreeMap<PathBuf, Vec<OsString>> = BTreeMap::new();
        for dir in dirs {
            for name in names {
                let place = dir.join(name);
                if present.contains(&place) || writable.is_some_and(|w| w(&place)) {
                    continue;
                }
                if let (Some(parent), Some(last)) = (place.parent(), place.file_name()) {
                    missing
                        .entry(parent.to_path_buf())
                        .or_default()
                        .push(last.to_os_string());
                }
            }
        }
        Self { missing }
    }

    /// Watches `place` too (one of the caller's places by another name, missing when the child
    /// started).
    pub(crate) fn also(&mut self, place: &Path) {
        if let (Some(parent), Some(last)) = (place.parent(), place.file_name()) {
            let names = self.missing.entry(parent.to_path_buf()).or_default();
            if !names.iter().any(|n| n == last) {
                names.push(last.to_os_string());
            }
        }
    }

    /// The watched places that exist now: each directory read once, one that does not exist
    /// (or is no directory) skipped.
    ///
    /// # Errors
    ///
    /// A directory that exists but cannot be read (a child may take a write root's permissions
    /// away): what is in it cannot be told, so the caller refuses.
    pub fn made(&self) -> io::Result<Vec<PathBuf>> {
        let mut made = Vec::new();
        for (dir, names) in &self.missing {
            let entries = match std::fs::read_dir(dir) {
                Ok(entries) => entries,
                Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => {
                    continue;
                }
                Err(e) => return Err(io::Error::new(e.kind(), format!("{}: {e}", dir.display()))),
            };
            for entry in entries {
                let entry = entry
                    .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?;
                if names.contains(&entry.file_name()) {
                    made.push(entry.path());
                }
            }
        }
        Ok(made)
    }

    /// Renames each place [`made`](Self::made) finds to `NAME.refused-by-toolcap` beside it
    /// (`-2`, `-3`, ... when that is taken), so that nothing runs it, and returns each with
    /// where it went. They stay watched: one made again is found again.
    ///
    /// # Errors
    ///
    /// A watched directory that cannot be read, or the first place that could not be renamed.
    pub fn set_aside(&self) -> io::Result<Vec<(PathBuf, PathBuf)>> {
        let mut moved = Vec::new();
        for place in self.made()? {
            let name = place
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            let aside = (1..=1000)
                .map(|n| {
                    let suffix = if n == 1 {
                        String::new()
                    } else {
                        format!("-{n}")
                    };
                    place.with_file_name(format!("{name}.refused-by-toolcap{suffix}"))
                })
                .find(|p| std::fs::symlink_metadata(p).is_err())
                .ok_or_else(|| io::Error::other("no free name to set it aside under"))?;
            std::fs::rename(&place, &aside)
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", place.display())))?;
            moved.push((place, aside));
        }
        Ok(moved)
    }
}
