//! A policy's reach roots opened for the child's Landlock rules where the policy resolved them:
//! no symbolic link followed on the way (docs/policy.md, "Symbolic links in a policy").
//!
//! A path policy resolves its roots' links when it loads. A link on a root's way at a child's
//! start was made since, perhaps by a child of another tool that may write a directory above
//! the root, and a rule opened through it would grant the child wherever it leads (before
//! 2026-12-07 a child wrote outside the reach that way). The rule is made on the descriptor
//! opened here, so the directory it names is the one checked, whatever changes after.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags};

/// Why a root could not be opened.
pub(crate) enum Unopened {
    /// A symbolic link lies on its way (the first one, itself perhaps the root).
    Link(PathBuf),
    /// Anything else (a root that does not exist yet grants nothing, as before).
    Other,
}

/// Opens `root` (absolute) component by component from `/`, following no link: the descriptor
/// (`O_PATH`) and whether it is a directory.
pub(crate) fn open_unlinked(root: &Path) -> Result<(OwnedFd, bool), Unopened> {
    let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut at = PathBuf::from("/");
    let mut fd = rustix::fs::open("/", flags | OFlags::DIRECTORY, Mode::empty())
        .map_err(|_| Unopened::Other)?;
    let mut is_dir = true;
    for name in root.components().skip(1) {
        if !is_dir {
            return Err(Unopened::Other);
        }
        at.push(name);
        // O_PATH with O_NOFOLLOW opens a link itself: its type says so.
        fd = rustix::fs::openat(&fd, name.as_os_str(), flags, Mode::empty())
            .map_err(|_| Unopened::Other)?;
        let kind = rustix::fs::fstat(&fd)
            .map(|st| FileType::from_raw_mode(st.st_mode))
            .map_err(|_| Unopened::Other)?;
        if kind == FileType::Symlink {
            return Err(Unopened::Link(at));
        }
        is_dir = kind == FileType::Directory;
    }
    Ok((fd, is_dir))
}
