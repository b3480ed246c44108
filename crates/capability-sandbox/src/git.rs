//! What git runs outside the sandbox, kept from a child's writes: the hooks and configuration
//! of the repositories in its write roots, found as the child starts (docs/policy.md, "Git's
//! hooks and configuration").
//!
//! Git runs a repository's hooks, and the commands its configuration names (`core.fsmonitor`,
//! `core.hooksPath`, `core.pager`, an alias starting with `!`), whenever the user runs git
//! there: later, with the user's whole reach. Landlock cannot take a place out of a granted
//! directory, so in the child's own mount namespace:
//!
//! - each git directory (a repository's `.git`, a submodule's under `.git/modules`, the one a
//!   `.git` file points at) is bound onto itself: a mount point cannot be renamed or removed, so
//!   a child cannot set it aside and put a git directory of its own in its place, while what is
//!   in it (objects, refs, the index) stays writable, and `git add` and `git commit` work;
//! - its `hooks`, `config` and `config.worktree`, and a `.git` that is a file, are bound onto
//!   themselves read-only. A missing `hooks` directory is made first (empty, as `git init`
//!   makes it), so that a child cannot make one. A git directory whose `hooks` or `config` is a
//!   symbolic link is bound read-only whole.
//!
//! Which directories are looked at: every write root, and the working directory with each
//! directory above it that is still beneath a write root (where git, run there, finds its
//! repository). A `.git` that is a symbolic link cannot be kept (a child could point it
//! elsewhere), and the child is not started. A repository a child makes itself (`git init`)
//! is kept from the next child, not from the one that made it.

#![allow(
    clippy::disallowed_methods,
    reason = "the sandbox finds the repositories in a child's write roots as it starts the child"
)]

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::hide::Mask;

/// The most git directories kept for one child (submodules included); past it, a repository's
/// `modules` directory is kept read-only whole.
const MAX_GIT_DIRS: usize = 64;

/// The most entries of the submodules' directories looked at for one child.
const MAX_MODULE_ENTRIES: usize = 1024;

/// The files of a git directory whose settings can make git run a command.
const CONFIG_NAMES: [&str; 2] = ["config", "config.worktree"];

/// What to bind in a child's mount namespace, found in `write` (its write roots) and along
/// `cwd`, leaving out what `writable` says the caller's policy lets children write: the pins
/// first, then the read-only places. An error when a `.git` cannot be kept.
pub(crate) fn masks(
    write: &[PathBuf],
    cwd: &Path,
    writable: Option<&(dyn Fn(&Path) -> bool + Sync)>,
) -> Result<Vec<Mask>, String> {
    let beneath = |p: &Path| write.iter().any(|w| p.starts_with(w));
    let mut dirs: Vec<PathBuf> = write.to_vec();
    dirs.extend(
        cwd.ancestors()
            .take_while(|d| beneath(d))
            .map(Path::to_path_buf),
    );
    dirs.sort();
    dirs.dedup();
    let mut found = Found {
        roots: write,
        ..Found::default()
    };
    for dir in &dirs {
        let dot_git = dir.join(".git");
        let meta = match std::fs::symlink_metadata(&dot_git) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(format!("{}: {e}", dot_git.display())),
        };
        if meta.file_type().is_symlink() && !writable.is_some_and(|w| w(&dot_git)) {
            return Err(format!(
                "{} is a symbolic link: a child could point it at a git directory of its own, \
                 whose hooks and configuration git would run outside the sandbox; make it a \
                 directory, or keep the repository out of the child's write roots",
                dot_git.display()
            ));
        }
        if meta.file_type().is_symlink() {
            continue;
        }
        if meta.is_dir() {
            found.git_dir(&dot_git);
        } else {
            // A file pointing at a git directory, or anything else a child left there (a FIFO,
            // which git cannot use either): kept read-only.
            found.read_only.push(dot_git.clone());
            if meta.is_file()
                && let Some(target) = pointed_at(&dot_git, dir)
            {
                found.git_dir(&target);
            }
        }
    }
    let keep = |p: &PathBuf| beneath(p) && !writable.is_some_and(|w| w(p));
    let mut out = Vec::new();
    for (places, read_only) in [(&found.pinned, false), (&found.read_only, true)] {
        let mut places: Vec<&PathBuf> = places.iter().filter(|p| keep(p)).collect();
        places.sort();
        places.dedup();
        for place in places {
            let path = CString::new(place.as_os_str().as_bytes())
                .map_err(|_| format!("{} contains a NUL byte", place.display()))?;
            out.push(if read_only {
                Mask::ReadOnly {
                    flags: mount_flags(place)?,
                    path,
                }
            } else {
                Mask::Pin { path }
            });
        }
    }
    Ok(out)
}

/// The places found so far.
#[derive(Default)]
struct Found<'a> {
    /// The child's write roots: a git directory elsewhere is not the child's to change, and is
    /// not looked into (a `.git` file or a `commondir` can name any place).
    roots: &'a [PathBuf],
    pinned: Vec<PathBuf>,
    read_only: Vec<PathBuf>,
    /// Git directories looked at, against [`MAX_GIT_DIRS`].
    seen: usize,
    /// Entries of `modules` directories looked at, against [`MAX_MODULE_ENTRIES`].
    entries: usize,
}

impl Found<'_> {
    /// A git directory: pinned, its hooks and configuration read-only, and the same for the
    /// submodules' git directories kept in it and, for a linked worktree's, its repository's.
    fn git_dir(&mut self, dir: &Path) {
        if !self.roots.iter().any(|w| dir.starts_with(w)) {
            return;
        }
        self.seen += 1;
        if self.seen > MAX_GIT_DIRS {
            self.read_only.push(dir.to_path_buf());
            return;
        }
        let hooks = dir.join("hooks");
        let linked =
            |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink());
        if linked(&hooks) || CONFIG_NAMES.iter().any(|n| linked(&dir.join(n))) {
            self.read_only.push(dir.to_path_buf());
            return;
        }
        // Made as `git init` makes it, so that a child cannot make it.
        if !hooks.is_dir() && std::fs::create_dir(&hooks).is_err() {
            self.read_only.push(dir.to_path_buf());
            return;
        }
        self.pinned.push(dir.to_path_buf());
        self.read_only.push(hooks);
        for name in CONFIG_NAMES {
            let config = dir.join(name);
            if config.exists() {
                self.read_only.push(config);
            }
        }
        self.modules(&dir.join("modules"), 0);
        // A linked worktree's git directory shares its repository's hooks and configuration.
        if let Some(common) = small_file(&dir.join("commondir"))
            && let Ok(common) = std::fs::canonicalize(dir.join(common.trim()))
            && common.is_dir()
            && common != dir
        {
            self.git_dir(&common);
        }
    }

    /// The git directories of submodules beneath `dir` (a submodule's name may hold `/`, so a
    /// directory without a `HEAD` is looked into, at most four levels down).
    fn modules(&mut self, dir: &Path, depth: usize) {
        // Never through a link (a child could make `modules` one to `/`), and never more than
        // `MAX_MODULE_ENTRIES` entries in all (a child could fill it): past that, the whole of
        // it is kept read-only.
        if !std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()) {
            return;
        }
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            self.entries += 1;
            if self.entries > MAX_MODULE_ENTRIES {
                self.read_only.push(dir.to_path_buf());
                return;
            }
            let path = entry.path();
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            if path.join("HEAD").is_file() {
                self.git_dir(&path);
            } else if depth < 4 {
                self.modules(&path, depth + 1);
            } else {
                self.read_only.push(path);
            }
        }
    }
}

/// The git directory a `.git` file in `dir` points at (`gitdir: PATH`, relative to `dir`), if
/// it says one that exists.
fn pointed_at(file: &Path, dir: &Path) -> Option<PathBuf> {
    let text = small_file(file)?;
    let target = text.lines().next()?.strip_prefix("gitdir:")?.trim();
    // Where it really is: the file may say `../..` or go through links, and only a place
    // beneath the write roots is looked into.
    std::fs::canonicalize(dir.join(target))
        .ok()
        .filter(|t| t.is_dir())
}

/// The first 4 KiB of the regular file at `path`, as text; `None` for anything else. Opened
/// without following a link and without waiting: a child may have left a FIFO there, whose open
/// would wait for a writer that never comes.
fn small_file(path: &Path) -> Option<String> {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut text = String::new();
    file.take(4096).read_to_string(&mut text).ok()?;
    Some(text)
}

/// The flags of the mount `path` lies on that a read-only bind of it must keep (a mount made
/// in a more privileged namespace has them locked), as `mount` flags.
fn mount_flags(path: &Path) -> Result<libc::c_ulong, String> {
    let flags = crate::sys::mount_flags(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let kept = [
        (libc::ST_NOSUID, libc::MS_NOSUID),
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (libc::ST_RELATIME, libc::MS_RELATIME),
    ];
    Ok(kept
        .iter()
        .filter(|(st, _)| flags & st == *st)
        .fold(0, |acc, (_, ms)| acc | ms))
}
