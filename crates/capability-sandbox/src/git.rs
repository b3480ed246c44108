//! What git runs outside the sandbox, kept from a child's writes: the hooks and configuration
//! of the repositories in its write roots, found as the child starts (docs/policy.md, "Git's
//! hooks and configuration").
//!
//! Git runs a repository's hooks, and the commands its configuration names (`core.fsmonitor`,
//! `core.hooksPath`, `core.pager`, an alias starting with `!`), whenever the user runs git
//! there: later, with the user's whole reach; and it takes both from whatever git directory a
//! `commondir` file in the repository's own names. Landlock cannot take a place out of a
//! granted directory, so in the child's own mount namespace:
//!
//! - each git directory (a repository's `.git`, the one a `.git` file points at, and so the
//!   submodules' and linked worktrees' kept inside it) is bound onto itself read-only, keeping
//!   the flags of the mount it lies on: a child can neither write in it (`git commit` fails
//!   there) nor set it aside. A mount can keep only names that exist, and a child that could
//!   write in a git directory could make a `commondir` in it;
//! - unless the caller's policy lets children write that git directory: it is then bound onto
//!   itself read-write (a mount point cannot be renamed or removed), `git add` and `git commit`
//!   work, and its `hooks`, `config`, `config.worktree` and `commondir` are bound read-only (a
//!   missing `hooks` directory is made first, empty, as `git init` makes it; one whose `hooks`
//!   or `config` is a symbolic link is read-only whole). It can then make a `commondir`;
//! - a `.git` that is a file is bound read-only; a place inside a read-only git directory that
//!   the caller lets children write is bound writable again.
//!
//! Which directories are looked at: every write root, the working directory with each
//! directory above it that is still beneath a write root (where git, run there, finds its
//! repository), and the directories up to three levels beneath each write root (the other
//! repositories of a workspace, one inside the working tree), read breadth first, every one of
//! them or the child is not started (`crate::walk`). A `.git` that is a symbolic link cannot be
//! kept (a child could point it elsewhere), and the child is not started. A repository a child
//! makes itself (`git init`) is kept from the next child, not from the one that made it.
//!
//! The same walk keeps what a shell runs as it starts and what an AI agent's client or an
//! editor runs when it next opens the project (the caller's names, `Launch::runs_later`: a
//! `.bashrc`, a `.mcp.json`, a `.claude` or `.vscode` directory, fish's configuration, ...):
//! each that exists in a directory the walk reads, and in the working directory and the
//! directories above it beneath a write root, is bound onto itself read-only, unless the
//! caller's policy lets children write it (docs/policy.md, "Shell startup files", "What agents
//! and editors run"). One that is a symbolic link is kept where it leads, when that lies
//! beneath a write root. One that does not exist cannot be kept by a mount: a child may still
//! make it.

#![allow(
    clippy::disallowed_methods,
    reason = "the sandbox finds the repositories in a child's write roots as it starts the child"
)]

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::gitconfig::user_config;
use crate::hide::Mask;
use crate::hooks::{
    configured_hooks, git_dir_area, is_git_dir, named_by_git, pointed_at, small_file,
    user_hooks_dirs,
};
use crate::walk::{Later, nested};
use crate::watch::Watch;

/// The most git directories kept for one child (submodules included); past it, a repository's
/// `modules` directory is kept read-only whole.
const MAX_GIT_DIRS: usize = 64;

/// The most entries of the submodules' directories looked at for one child.
const MAX_MODULE_ENTRIES: usize = 1024;

/// The most places of the caller's `runs_later` names kept for one child; past it the child
/// is not started. Each is a bind mount in the child's namespace, with the directories above
/// it pinned (some 10 µs a mount on the project's VM: 250 projects' `.vscode` cost a spawn
/// 5 ms), and the walk finds every one within its levels, so a workspace of many projects
/// holds many.
const MAX_LATER_PLACES: usize = 1024;

/// The files of a git directory whose settings can make git run a command, and the one that
/// names another git directory to take hooks and configuration from (git reads `commondir` in
/// any git directory).
const CONFIG_NAMES: [&str; 3] = ["config", "config.worktree", "commondir"];

/// What to bind in a child's mount namespace, found in `write` (its write roots), along `cwd`
/// and a few levels beneath the roots, with what `writable` says the caller's policy lets
/// children write left writable: the pins first, then the read-only places, then the places
/// bound writable again inside them. An error when a `.git` cannot be kept.
pub(crate) fn masks(
    write: &[PathBuf],
    cwd: &Path,
    writable: Option<&(dyn Fn(&Path) -> bool + Sync)>,
    runs_later: &[&str],
    elsewhere: &[PathBuf],
    scratch: &[PathBuf],
    covered: &[PathBuf],
) -> Result<(Vec<Mask>, Watch), String> {
    let beneath = |p: &Path| write.iter().any(|w| p.starts_with(w));
    // The caller's rule knows git's places by the name `.git`; those of a git directory of
    // another name (a bare repository, one kept apart from its working tree) it cannot, so they
    // are the caller's to let children write only where a write root lies at or inside them,
    // as configured hooks are.
    let rule = writable;
    let named = move |p: &Path| {
        // The caller's answer first: what it refuses needs no look at the disk.
        if !rule.is_some_and(|w| w(p)) {
            return false;
        }
        let unnamed = if !named_by_git(p) && is_git_dir(p) {
            Some(p.to_path_buf())
        } else {
            git_dir_area(p, Path::new("/")).map(|(_, area)| area)
        };
        unnamed.is_none_or(|area| write.iter().any(|w| w.starts_with(&area)))
    };
    let writable: Option<&(dyn Fn(&Path) -> bool + Sync)> = Some(&named);
    let mut dirs: Vec<PathBuf> = write.to_vec();
    dirs.extend(
        cwd.ancestors()
            .take_while(|d| beneath(d))
            .map(Path::to_path_buf),
    );
    dirs.sort();
    dirs.dedup();
    // The others after the working directory's own: it is kept first, should the git
    // directories be more than `MAX_GIT_DIRS`.
    let mut later = Later::new(runs_later, covered);
    let others: Vec<PathBuf> = nested(write, &mut later)?
        .into_iter()
        .filter(|d| !dirs.contains(d))
        .collect();
    // The working directory and those above it that the walk did not read: a client opened
    // there reads its own.
    for dir in &dirs {
        if !later.read.contains(dir) {
            later.read_dir(dir, false)?;
        }
    }
    // What is missing from the project directories now is looked for when the child ends.
    let projects: Vec<PathBuf> = dirs
        .iter()
        .filter(|d| !scratch.iter().any(|s| d.starts_with(s)))
        .cloned()
        .collect();
    let mut watch = Watch::new(&projects, runs_later, &later.places, writable, write);
    // What the walk read is looked at again too (what a child makes in `packages/web`, or in
    // a directory it made), but for what the caller lets children write there: only a place a
    // write root lies at or beneath can be that, so only those are asked.
    let exempt: Vec<PathBuf> = write
        .iter()
        .flat_map(|w| w.ancestors())
        .filter(|a| beneath(a) && writable.is_some_and(|rule| rule(a)))
        .map(Path::to_path_buf)
        .collect();
    watch.also_in(&later, scratch, covered, exempt);
    dirs.extend(others);
    // The same places by another name (a home's `.bashrc` linked into a write root): kept
    // where they are, when they exist.
    later.places.extend(elsewhere.iter().cloned());
    for place in elsewhere {
        // One missing (a link that leads nowhere yet) no mount can keep: looked for at the end.
        if beneath(place)
            && std::fs::symlink_metadata(place).is_err()
            && !writable.is_some_and(|w| w(place))
        {
            watch.also(place);
        }
    }
    let mut found = Found {
        roots: write,
        writable,
        ..Found::default()
    };
    // What git's configuration points it at, which the caller's rule cannot know by name: the
    // user's own `core.hooksPath` (one absolute or in the home directory is one directory for
    // every repository) and the files it includes; each repository's, below.
    let user = user_config();
    let mut configured: Vec<PathBuf> = user_hooks_dirs(&user);
    configured.extend(user.included.iter().cloned());
    for dir in &dirs {
        // A git directory of another name (a bare repository): kept as a `.git` is.
        if !named_by_git(dir) && is_git_dir(dir) {
            found.git_dir(dir);
            continue;
        }
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
        let git_dir = if meta.is_dir() {
            found.git_dir(&dot_git);
            Some(dot_git.clone())
        } else {
            // A file pointing at a git directory, or anything else a child left there (a FIFO,
            // which git cannot use either): kept read-only, and not the child's making.
            found.read_only.push(dot_git.clone());
            found.kept.push(dot_git.clone());
            let target = meta.is_file().then(|| pointed_at(&dot_git, dir)).flatten();
            if let Some(target) = &target {
                found.git_dir(target);
            }
            target
        };
        // Hooks the configuration points git at in the working tree (`core.hooksPath`), and the
        // files it includes.
        if let Some(git_dir) = git_dir {
            let own = configured_hooks(dir, &git_dir, &user);
            configured.extend(own.hooks.into_iter().map(|(hooks, _)| hooks));
            configured.extend(own.included);
        }
    }
    // Read-only, unless the caller's policy lists a write root at or inside them (its rule
    // does not know the settings, so it cannot be asked); one that is a link where it leads; one
    // missing looked for when the child ends, as no mount can keep it.
    configured.sort();
    configured.dedup();
    for named in configured {
        // Where git reaches it: a link on its way followed, one leading nowhere yet to the place
        // it names (docs/policy.md, "Reached by another name").
        let place = match crate::hooks::leads_to(&named) {
            Some(led) => led,
            // A link that cannot be followed (a loop): git cannot use it either.
            None if std::fs::symlink_metadata(&named).is_ok_and(|m| m.file_type().is_symlink()) => {
                continue;
            }
            None => named,
        };
        let kept = beneath(&place) && !write.iter().any(|w| w.starts_with(&place));
        match std::fs::symlink_metadata(&place) {
            Ok(_) if kept => found.hooks.push(place),
            Ok(_) => {}
            Err(_) if kept => watch.also(&place),
            Err(_) => {}
        }
    }
    found.later(later.places, write)?;
    watch.keep_repositories(std::mem::take(&mut found.kept));
    let keep = |p: &PathBuf| beneath(p) && !writable.is_some_and(|w| w(p));
    // First the directories above what is bound, so that none is moved away with them.
    let bound = found
        .pinned
        .iter()
        .filter(|p| beneath(p))
        .chain(found.read_only.iter().filter(|p| keep(p)))
        .chain(&found.hooks)
        .map(PathBuf::as_path);
    let mut out = crate::hide::pins_above(bound, write)?;
    // In this order: a git directory the caller lets children write is pinned all the same
    // (set aside, it would take its read-only places with it); the read-only places, but for
    // what the caller lets children write; and what it lets them write inside a read-only git
    // directory, bound writable again.
    #[derive(Clone, Copy, PartialEq)]
    enum Bind {
        Pin,
        ReadOnly,
        Writable,
    }
    for (bind, places) in [
        (Bind::Pin, &found.pinned),
        (Bind::ReadOnly, &found.read_only),
        (Bind::Writable, &found.reopened),
    ] {
        let mut places: Vec<&PathBuf> = places
            .iter()
            .filter(|p| {
                if bind == Bind::ReadOnly {
                    keep(p)
                } else {
                    beneath(p)
                }
            })
            .chain(found.hooks.iter().filter(|_| bind == Bind::ReadOnly))
            .collect();
        places.sort();
        places.dedup();
        for place in places {
            let path = CString::new(place.as_os_str().as_bytes())
                .map_err(|_| format!("{} contains a NUL byte", place.display()))?;
            out.push(match bind {
                Bind::Pin => Mask::Pin { path },
                Bind::ReadOnly => Mask::ReadOnly {
                    flags: mount_flags(place)?,
                    path,
                },
                Bind::Writable => Mask::Writable {
                    flags: mount_flags(place)?,
                    path,
                },
            });
        }
    }
    Ok((out, watch))
}

/// The places found so far.
#[derive(Default)]
struct Found<'a> {
    /// The child's write roots: a git directory elsewhere is not the child's to change, and is
    /// not looked into (a `.git` file or a `commondir` can name any place).
    roots: &'a [PathBuf],
    /// What the caller's policy lets children write of git's places.
    writable: Option<&'a (dyn Fn(&Path) -> bool + Sync)>,
    pinned: Vec<PathBuf>,
    read_only: Vec<PathBuf>,
    /// Places inside a read-only git directory that the caller lets children write.
    reopened: Vec<PathBuf>,
    /// Hooks directories git's configuration names, and the configuration files it includes,
    /// already decided (the caller's rule does not know the settings).
    hooks: Vec<PathBuf>,
    /// Git directories looked at, against [`MAX_GIT_DIRS`].
    seen: usize,
    /// The git directories kept, whatever the caller lets children write of them: their hooks
    /// and configuration are not the child's to change.
    kept: Vec<PathBuf>,
    /// Entries of `modules` directories looked at, against [`MAX_MODULE_ENTRIES`].
    entries: usize,
}

impl Found<'_> {
    /// The places of the caller's `runs_later` names found: each read-only, but for what the caller lets
    /// children write; one that is a link where it leads, if that lies beneath a write root
    /// (elsewhere a child cannot write it anyway); and a write root inside one of them bound
    /// writable again, since the caller's policy granted it. An error past
    /// [`MAX_LATER_PLACES`].
    fn later(&mut self, places: Vec<PathBuf>, write: &[PathBuf]) -> Result<(), String> {
        if places.len() > MAX_LATER_PLACES {
            return Err(format!(
                "the write roots hold more than {MAX_LATER_PLACES} places a shell, an agent's \
                 client or an editor runs code from (a `.bashrc`, a `.vscode`, ...), too many to \
                 keep from the child; make them fewer, or narrow the write roots"
            ));
        }
        for place in places {
            let Ok(meta) = std::fs::symlink_metadata(&place) else {
                continue;
            };
            let place = if meta.file_type().is_symlink() {
                match std::fs::canonicalize(&place) {
                    Ok(target) => target,
                    Err(_) => continue,
                }
            } else {
                place
            };
            if !self.roots.iter().any(|w| place.starts_with(w))
                || self.writable.is_some_and(|w| w(&place))
            {
                continue;
            }
            self.reopened.extend(
                write
                    .iter()
                    .filter(|w| w.starts_with(&place) && **w != place)
                    .cloned(),
            );
            self.read_only.push(place);
        }
        Ok(())
    }

    /// A git directory: read-only whole, unless the caller lets children write it (then pinned,
    /// its hooks and configuration read-only, and the same for the submodules' git directories
    /// kept in it); and, for a linked worktree's, its repository's.
    fn git_dir(&mut self, dir: &Path) {
        if !self.roots.iter().any(|w| dir.starts_with(w)) {
            return;
        }
        self.kept.push(dir.to_path_buf());
        self.seen += 1;
        if self.seen > MAX_GIT_DIRS {
            self.read_only.push(dir.to_path_buf());
            return;
        }
        if !self.writable.is_some_and(|w| w(dir)) {
            // Read-only whole: a child could otherwise make a `commondir` in it, naming a git
            // directory of its own, and no mount can keep a name that does not exist yet.
            self.read_only.push(dir.to_path_buf());
            let lifted = |p: &Path| {
                self.writable.is_some_and(|w| w(p))
                    && std::fs::symlink_metadata(p).is_ok_and(|m| !m.file_type().is_symlink())
            };
            let reopened: Vec<PathBuf> = std::iter::once(dir.join("hooks"))
                .chain(CONFIG_NAMES.iter().map(|n| dir.join(n)))
                .filter(|p| lifted(p))
                .collect();
            self.reopened.extend(reopened);
            self.common(dir);
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
        self.common(dir);
    }

    /// A linked worktree's git directory shares its repository's hooks and configuration: the
    /// git directory its `commondir` names.
    fn common(&mut self, dir: &Path) {
        if let Some(common) = small_file(&dir.join("commondir"), 4096)
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
