//! Removing a directory a child wrote in, whatever it built there (docs/isolation-model.md,
//! "Scratch directories"): [`remove_tree`].
//!
//! `std::fs::remove_dir_all` follows no symlink, but it holds an open directory for every level
//! it descends, and it gives up at the first entry its owner may not remove. A child can make
//! either happen on purpose, in its `HOME` or a guarded server in its home: a chain of
//! directories deeper than the host has descriptors (3,000 `mkdir`s under the common limit of
//! 1,024), or a directory it took its own permissions from (`chmod 000`, which stops its owner
//! and not root). What it wrote would then outlive its call on the host's disk, out of every
//! later child's sight and never removed.
//!
//! So when the plain removal fails, the tree is taken apart flat: every directory met is moved up
//! to the top of the tree (a rename on one file system, which copies nothing), the files in it
//! are unlinked, and it is removed once empty, so no more than three directories are open at
//! once whatever the depth. A directory of the user's own that its mode keeps closed to its
//! owner gets the owner's bits back first. Every step works on descriptors opened without
//! following a symlink, so nothing outside the tree is reached: a symlink in it is unlinked, not
//! followed.
#![allow(
    clippy::disallowed_methods,
    reason = "toolcap's own scratch directories, not a tool's reach"
)]

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;

use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags, RenameFlags};
use rustix::io::Errno;

/// How many entries of a directory are read before they are acted on (moving and unlinking
/// change the directory being read, so it is read again after each batch).
const BATCH: usize = 1024;

/// How many passes over the tree's top in a row may remove nothing before the removal gives up
/// (something else keeps writing into the tree).
const IDLE_PASSES: usize = 3;

/// Removes the directory `path` and everything beneath it, following no symlink. First as
/// `std::fs::remove_dir_all` does; where that fails (a tree deeper than this process has
/// descriptors, a directory whose mode keeps its owner out), by taking the tree apart flat (this
/// module's documentation). A `path` that does not exist is no error.
///
/// # Errors
///
/// What stopped the removal: an entry the process may not remove (another user's directory,
/// for a host that is not root), or a tree something else keeps writing into.
///
/// # Ambient Authority
///
/// Removes files and directories beneath `path` with the process's own rights.
pub fn remove_tree(path: &Path) -> io::Result<()> {
    match std::fs::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(_) => take_apart(path),
    }
}

/// Removes `path` by taking its tree apart flat (this module's documentation).
fn take_apart(path: &Path) -> io::Result<()> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} names no entry of a directory", path.display()),
        ));
    };
    let parent = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    // The parent is opened as the path names it (a temporary directory may be reached through a
    // symlink); below it, nothing is followed.
    let parent = rustix::fs::open(
        parent,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let name = CString::new(name.as_encoded_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in the path"))?;
    let top = match open_dir(&parent, &name) {
        Ok(top) => top,
        Err(Errno::NOENT) => return Ok(()),
        // Not a directory (a symlink put in its place): the entry itself goes.
        Err(Errno::NOTDIR | Errno::LOOP) => {
            return Ok(rustix::fs::unlinkat(&parent, &name, AtFlags::empty())?);
        }
        Err(e) => return Err(e.into()),
    };
    flatten(&top)?;
    drop(top);
    Ok(rustix::fs::unlinkat(&parent, &name, AtFlags::REMOVEDIR)?)
}

/// Empties `top`: each directory in it has its subdirectories moved up into `top` and its other
/// entries unlinked, and is then removed; until `top` holds nothing.
fn flatten(top: &OwnedFd) -> io::Result<()> {
    let mut moved = 0u64;
    let mut idle = 0;
    loop {
        let names = entries(top)?;
        if names.is_empty() {
            return Ok(());
        }
        let mut removed = false;
        for (name, kind) in names {
            if kind != FileType::Directory {
                removed |= gone(rustix::fs::unlinkat(top, &name, AtFlags::empty()))?;
                continue;
            }
            let dir = match open_dir(top, &name) {
                Ok(dir) => dir,
                // Moved or removed since it was listed.
                Err(Errno::NOENT) => continue,
                Err(e) => return Err(e.into()),
            };
            // Until it is empty, or a batch finds only entries already gone.
            loop {
                let inner = entries(&dir)?;
                let mut emptied = false;
                for (entry, kind) in &inner {
                    emptied |= if *kind == FileType::Directory {
                        move_up(&dir, entry, top, &mut moved)?
                    } else {
                        gone(rustix::fs::unlinkat(&dir, entry, AtFlags::empty()))?
                    };
                }
                if !emptied {
                    break;
                }
            }
            drop(dir);
            match rustix::fs::unlinkat(top, &name, AtFlags::REMOVEDIR) {
                Ok(()) => removed = true,
                // Written into again since it was emptied: met on the next pass.
                Err(Errno::NOTEMPTY | Errno::NOENT) => {}
                Err(e) => return Err(e.into()),
            }
        }
        idle = if removed { 0 } else { idle + 1 };
        if idle > IDLE_PASSES {
            return Err(io::Error::other(
                "the tree keeps being written into while it is removed",
            ));
        }
    }
}

/// `Ok(true)` when the entry was removed, `Ok(false)` when it was already gone.
fn gone(result: rustix::io::Result<()>) -> io::Result<bool> {
    match result {
        Ok(()) => Ok(true),
        Err(Errno::NOENT) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Moves the directory `name` of `dir` into `top` under a name of its own there, never over
/// an entry that exists: `Ok(false)` when it was gone already.
fn move_up(dir: &OwnedFd, name: &CStr, top: &OwnedFd, moved: &mut u64) -> io::Result<bool> {
    let mut opened_up = false;
    loop {
        *moved += 1;
        let to = format!(".toolcap-removing-{moved}");
        let renamed =
            match rustix::fs::renameat_with(dir, name, top, to.as_str(), RenameFlags::NOREPLACE) {
                // A file system without `RENAME_NOREPLACE`: a name nothing has.
                Err(Errno::INVAL) => {
                    match rustix::fs::statat(top, to.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
                        Err(Errno::NOENT) => rustix::fs::renameat(dir, name, top, to.as_str()),
                        Ok(_) => Err(Errno::EXIST),
                        Err(e) => Err(e),
                    }
                }
                renamed => renamed,
            };
        match renamed {
            Ok(()) => return Ok(true),
            Err(Errno::NOENT) => return Ok(false),
            Err(Errno::EXIST) => continue,
            // Moving a directory to another parent writes its `..`, which its mode may keep
            // its owner from: given the owner's bits, it is moved on the next turn.
            Err(Errno::ACCESS) if !opened_up => {
                let_the_owner_in(dir, name)?;
                opened_up = true;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Up to [`BATCH`] entries of `dir` (not `.` and `..`), with their types as the directory gives
/// them, asked of the file itself (without following it) where the directory does not say.
fn entries(dir: &OwnedFd) -> io::Result<Vec<(CString, FileType)>> {
    let mut listing = Dir::read_from(dir)?;
    let mut found = Vec::new();
    while found.len() < BATCH {
        let Some(entry) = listing.read() else { break };
        let entry = entry?;
        let name = entry.file_name();
        if name == c"." || name == c".." {
            continue;
        }
        let kind = match entry.file_type() {
            FileType::Unknown => match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(stat) => FileType::from_raw_mode(stat.st_mode),
                Err(Errno::NOENT) => continue,
                Err(e) => return Err(e.into()),
            },
            kind => kind,
        };
        found.push((name.to_owned(), kind));
    }
    Ok(found)
}

/// The flags a directory of the tree is opened with: for reading its entries, never through a
/// symlink.
fn dir_flags() -> OFlags {
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

/// Opens the directory `name` of `dir`, first giving a directory of the user's own the owner's
/// bits its mode lacks: reading it needs them, and removing what is in it needs them too.
fn open_dir(dir: &impl AsFd, name: &CStr) -> rustix::io::Result<OwnedFd> {
    let opened = match rustix::fs::openat(dir, name, dir_flags(), Mode::empty()) {
        Err(Errno::ACCESS) => {
            let_the_owner_in(dir, name)?;
            rustix::fs::openat(dir, name, dir_flags(), Mode::empty())?
        }
        opened => opened?,
    };
    let mode = rustix::fs::fstat(&opened)?.st_mode & 0o7777;
    if mode & 0o700 != 0o700 {
        rustix::fs::fchmod(&opened, Mode::from_raw_mode(mode | 0o700))?;
    }
    Ok(opened)
}

/// Gives the directory `name` of `dir`, which its mode keeps closed to its owner, the owner's
/// bits: through a descriptor that only names it (`O_PATH`, which needs no permission on it and
/// follows no symlink), by the path the kernel gives that descriptor in `/proc`, so the mode
/// changed is the one of the directory opened. A directory of another user's stays as it is
/// (`EPERM`).
fn let_the_owner_in(dir: &impl AsFd, name: &CStr) -> rustix::io::Result<()> {
    let named = rustix::fs::openat(
        dir,
        name,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let mode = rustix::fs::fstat(&named)?.st_mode & 0o7777;
    let by_descriptor = format!("/proc/self/fd/{}", named.as_raw_fd());
    rustix::fs::chmod(by_descriptor.as_str(), Mode::from_raw_mode(mode | 0o700))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;
    use std::path::Path;

    use rustix::fs::Mode;

    use super::{remove_tree, take_apart};

    /// A tree as a hostile child leaves it: a chain 3,000 directories deep with a link out at
    /// its bottom, a directory closed to its owner inside one it may only read, the
    /// top itself read-only, a link out at the top.
    fn hostile_tree(top: &Path, outside: &Path) {
        // Built a level at a time from the one above: the whole path would be longer than the
        // kernel takes.
        std::fs::create_dir(top).unwrap();
        let mut level = rustix::fs::open(top, super::dir_flags(), Mode::empty()).unwrap();
        for _ in 0..3000 {
            rustix::fs::mkdirat(&level, "d", Mode::from_raw_mode(0o700)).unwrap();
            level = rustix::fs::openat(&level, "d", super::dir_flags(), Mode::empty()).unwrap();
        }
        rustix::fs::symlinkat(outside, &level, "out").unwrap();
        drop(level);
        std::os::unix::fs::symlink(outside, top.join("out")).unwrap();
        let closed = top.join("closed/inner");
        std::fs::create_dir_all(&closed).unwrap();
        std::fs::write(closed.join("kept"), "x").unwrap();
        std::os::unix::fs::symlink(outside, closed.join("out")).unwrap();
        std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o000)).unwrap();
        std::fs::set_permissions(top.join("closed"), std::fs::Permissions::from_mode(0o500))
            .unwrap();
        std::fs::set_permissions(top, std::fs::Permissions::from_mode(0o500)).unwrap();
    }

    // guarantee: G-PROC-02
    #[test]
    fn a_tree_taken_apart_goes_whole_and_nothing_outside_it() {
        let scratch = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("kept"), "x").unwrap();
        let top = scratch.path().join("tree");
        hostile_tree(&top, outside.path());
        // The slow path itself (as root, the plain removal would already manage).
        take_apart(&top).unwrap();
        assert!(std::fs::symlink_metadata(&top).is_err(), "the tree is gone");
        assert_eq!(std::fs::read_dir(scratch.path()).unwrap().count(), 0);
        assert!(
            outside.path().join("kept").is_file(),
            "a link's target is kept"
        );
        // And through the entry point.
        hostile_tree(&top, outside.path());
        remove_tree(&top).unwrap();
        assert!(std::fs::symlink_metadata(&top).is_err());
        // Gone already: no error.
        remove_tree(&top).unwrap();
        take_apart(&top).unwrap();
        // A link in the tree's place is removed, not followed.
        std::os::unix::fs::symlink(outside.path(), &top).unwrap();
        take_apart(&top).unwrap();
        assert!(std::fs::symlink_metadata(&top).is_err());
        assert!(outside.path().join("kept").is_file());
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 1);
    }
}
