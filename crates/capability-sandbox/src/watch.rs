//! The places a child made that a shell, an agent's client, an editor or a git hook manager runs
//! code from, where none was when it started: a mount keeps only what exists, so what a child
//! makes is found when it has ended, and set aside (docs/policy.md, "Kept from children").

#![allow(
    clippy::disallowed_methods,
    reason = "the child's project directories are looked at again when it has ended"
)]

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::hash::{BuildHasher as _, Hasher as _};
use std::io;
use std::os::fd::{AsRawFd as _, OwnedFd};
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, Mode, OFlags, RenameFlags};
use rustix::io::Errno;

/// The places of the caller's `runs_later` names that were missing from a child's project
/// directories (its write roots, its working directory and those above it beneath a write
/// root) when it started, and that the caller's policy does not let children write.
#[derive(Debug, Default)]
pub struct Watch {
    /// By directory, the names missing from it.
    missing: BTreeMap<PathBuf, Vec<OsString>>,
    /// The write roots the watched places lie beneath: from the outermost one above a place,
    /// nothing the child could have made is followed when the place is set aside.
    roots: Vec<PathBuf>,
    /// The watched places that a deny rule (or the floor) names, rather than what runs later.
    denied: Vec<PathBuf>,
    /// The places that were there when the child started, as spelled on disk: a name is
    /// matched in any case, and one of these is not the child's making.
    present: Vec<PathBuf>,
    /// What the walk saw as the child started ([`also_in`](Self::also_in)), looked at again
    /// when it ends for the same names.
    walked: Walked,
    /// The git directories kept from the child as it started: any other found when it ends is
    /// one it made, looked at for what git would run (`child_repo.rs`).
    repositories: Vec<PathBuf>,
}

/// The walk's directories, for [`Watch::also_in`].
#[derive(Debug, Default)]
struct Walked {
    /// The directories it read.
    read: Vec<PathBuf>,
    /// The subdirectories those held (read or not): one that is not among them is new. By
    /// their bytes: a path's own comparison goes part by part, and these are many.
    seen: std::collections::HashSet<OsString>,
    /// The places covered in the child's namespace, not looked into.
    covered: Vec<PathBuf>,
    /// The names looked for.
    names: Vec<String>,
    /// The places among them the caller's policy lets children write.
    exempt: Vec<PathBuf>,
}

/// What a walk from a write root down to a directory found, following no link.
enum Walk {
    /// The directory itself (opened `O_PATH`).
    Dir(OwnedFd),
    /// A link on the way, which is then the place to set aside: the directory it lies in, its
    /// name there, and its path.
    Link(OwnedFd, OsString, PathBuf),
    /// Nothing there (or something that is no directory): nothing to look at.
    Missing,
}

impl Watch {
    /// Watches `dirs` for `names` (relative paths) that are not among `present`, and that
    /// `writable` does not let children write; `roots` are the child's write roots, beneath
    /// which `dirs` lie.
    pub(crate) fn new(
        dirs: &[PathBuf],
        names: &[&str],
        present: &[PathBuf],
        writable: Option<&(dyn Fn(&Path) -> bool + Sync)>,
        roots: &[PathBuf],
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
        Self {
            missing,
            roots: roots.to_vec(),
            denied: Vec::new(),
            present: present.to_vec(),
            walked: Walked {
                names: names.iter().map(|n| (*n).to_owned()).collect(),
                ..Walked::default()
            },
            repositories: Vec::new(),
        }
    }

    /// The git directories kept from the child as it starts (`kept`): every other one the
    /// child's project directories hold when it ends is one it made, and is set aside when its
    /// configuration or hooks would make git run a program (docs/policy.md, "A repository a
    /// child makes").
    pub(crate) fn keep_repositories(&mut self, kept: Vec<PathBuf>) {
        self.repositories = kept;
    }

    /// Watches what the walk read too (`later`'s directories, but `scratch`), for the names of
    /// [`new`](Self::new): when the child ends each is listed again, and each directory the
    /// child made in them, within the walk's levels, is read as well (a child may make what
    /// runs later in any of them, `packages/web/.mcp.json`, or in one it made,
    /// `packages/new/.vscode`); but for what is `covered` in its namespace, and for `exempt`,
    /// the places the caller's policy lets children write.
    pub(crate) fn also_in(
        &mut self,
        later: &crate::walk::Later<'_>,
        scratch: &[PathBuf],
        covered: &[PathBuf],
        exempt: Vec<PathBuf>,
    ) {
        let ours = |d: &PathBuf| !scratch.iter().any(|s| d.starts_with(s));
        self.walked.read = later.read.iter().filter(|d| ours(d)).cloned().collect();
        self.walked.seen = later
            .seen
            .iter()
            .map(|d| d.as_os_str().to_owned())
            .collect();
        self.walked.covered = covered.to_vec();
        self.walked.exempt = exempt;
    }

    /// How many levels `dir` lies beneath the nearest write root above it.
    fn depth(&self, dir: &Path) -> usize {
        self.roots
            .iter()
            .filter(|r| dir.starts_with(r))
            .map(|r| dir.components().count() - r.components().count())
            .min()
            .unwrap_or(usize::MAX)
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

    /// Watches `place` too, a place the policy denies, when it is missing as the child starts:
    /// no mount covers it, so a child could make it (a link to a file of its own reach, through
    /// which the user's next write of the place would land where the child reads).
    pub(crate) fn also_denied(&mut self, place: &Path) {
        if std::fs::symlink_metadata(place).is_ok() {
            return;
        }
        self.also(place);
        self.denied.push(place.to_path_buf());
    }

    /// Why `made` (a place [`set_aside`](Self::set_aside) moved) was not the child's to make,
    /// as a refusal says it: a denied place, or one that runs later outside any sandbox.
    pub fn why(&self, made: &Path) -> &'static str {
        if self.denied.iter().any(|d| d == made || d.starts_with(made)) {
            "a place the policy denies, which no mount could cover since it did not exist"
        } else {
            "where a shell, an AI agent's client, an editor or git would run what it says \
             outside any sandbox"
        }
    }

    /// A place [`set_aside`](Self::set_aside) moved, as a refusal names it: where it was, where
    /// it went, and [`why`](Self::why).
    pub fn describe(&self, made: &Path, aside: &Path) -> String {
        let repository =
            made.file_name() == Some(OsStr::new(".git")) || crate::hooks::is_git_dir(aside);
        if let Some(what) = repository.then(|| self.repository_runs(aside)).flatten() {
            return format!(
                "{} (now {}), a repository the child made: {what}, which git would run outside \
                 any sandbox when the user next runs git there",
                made.display(),
                aside.display()
            );
        }
        format!(
            "{} (now {}), {}",
            made.display(),
            aside.display(),
            self.why(made)
        )
    }

    /// The watched places that exist now: each directory read once, one that does not exist
    /// (or is no directory) skipped. A directory the child took its owner's permissions away
    /// from (`chmod 0`) is given them back and read; when it is reached through a link the
    /// child could have made, that link is the place found.
    ///
    /// # Errors
    ///
    /// A directory that exists but cannot be read, even by its owner: what is in it cannot be
    /// told, so the caller refuses.
    pub fn made(&self) -> io::Result<Vec<PathBuf>> {
        let (made, failed) = self.found();
        failed.map_or(Ok(made), Err)
    }

    /// [`made`](Self::made), looking at everything it can: what it found, and the first
    /// directory it could not look into (one such does not keep the others from being looked
    /// at, nor what was found there from being set aside).
    fn found(&self) -> (Vec<PathBuf>, Option<io::Error>) {
        let mut made = Vec::new();
        let mut failed = None;
        for (dir, names) in &self.missing {
            if let Err(e) = self.look_in(dir, names, &mut made) {
                failed.get_or_insert(e);
            }
        }
        if let Err(e) = self.look_through_the_walk(&mut made) {
            failed.get_or_insert(e);
        }
        // A link where a denied place's directory would be: the user's next write of the place
        // would go where it leads.
        for place in &self.denied {
            match place.parent().map(|dir| self.walk(dir)) {
                Some(Ok(Walk::Link(_, _, link))) => made.push(link),
                Some(Err(e)) => {
                    failed.get_or_insert(e);
                }
                _ => {}
            }
        }
        made.sort();
        made.dedup();
        (made, failed)
    }

    /// The places of `names` made in the project directory `dir`.
    fn look_in(&self, dir: &Path, names: &[OsString], made: &mut Vec<PathBuf>) -> io::Result<()> {
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => {
                return Ok(());
            }
            Err(e) if e.raw_os_error() == Some(libc::EACCES) => match self.walk(dir)? {
                Walk::Dir(fd) => {
                    // Listing it needs its search and read permissions.
                    with_permissions(&fd, || {
                        rustix::fs::statat(&fd, ".", AtFlags::empty()).and_then(|_| readable(&fd))
                    })
                    .map_err(|e| at(dir, e.into()))?;
                    std::fs::read_dir(dir).map_err(|e| at(dir, e))?
                }
                Walk::Link(_, _, link) => {
                    made.push(link);
                    return Ok(());
                }
                Walk::Missing => return Ok(()),
            },
            Err(e) => return Err(at(dir, e)),
        };
        for entry in entries {
            let entry = entry.map_err(|e| at(dir, e))?;
            // Folded: where names are not told apart, `.CLAUDE` and `.cla\u{200D}ude` are
            // `.claude` (docs/policy.md, "Names in any case").
            let name = entry.file_name();
            let folded = capability_types::fold_name(name.as_encoded_bytes());
            if names
                .iter()
                .any(|n| capability_types::fold_name(n.as_encoded_bytes()) == folded)
            {
                let place = entry.path();
                if !self.present.contains(&place) {
                    made.push(place);
                }
            }
        }
        Ok(())
    }

    /// What the walk read, listed as the walk lists them, and the directories the child made
    /// there within its levels: the places of the names made in them. An error for the first
    /// that could not be looked into (one a child could enter but toolcap cannot read, or past
    /// the walk's budget); the others are looked at all the same.
    fn look_through_the_walk(&self, made: &mut Vec<PathBuf>) -> io::Result<()> {
        let walked = &self.walked;
        if walked.read.is_empty() {
            return Ok(());
        }
        let names: Vec<&str> = walked.names.iter().map(String::as_str).collect();
        let mut later = crate::walk::Later::new(&names, &walked.covered);
        let mut failed = None;
        let mut queue = walked.read.clone();
        // A directory read here is asked what it holds when its parent is read; the others
        // (the write roots, the project directories above the walk's levels) are asked here.
        let read: std::collections::HashSet<&Path> =
            walked.read.iter().map(PathBuf::as_path).collect();
        let mut repositories = Vec::new();
        for dir in walked
            .read
            .iter()
            .filter(|d| d.parent().is_none_or(|p| !read.contains(p)))
        {
            if std::fs::symlink_metadata(dir.join(".git")).is_ok() {
                repositories.push(dir.join(".git"));
            }
            if !crate::hooks::named_by_git(dir) && crate::hooks::is_git_dir(dir) {
                repositories.push(dir.clone());
            }
        }
        while let Some(dir) = queue.pop() {
            let subs = match later.read_dir(&dir, true) {
                Ok(subs) => subs,
                Err(e) => {
                    failed.get_or_insert(e);
                    continue;
                }
            };
            for sub in subs {
                if sub.repository {
                    repositories.push(sub.path.join(".git"));
                }
                if sub.bare {
                    repositories.push(sub.path.clone());
                }
                // A directory the child made, within the walk's levels.
                if !walked.seen.contains(sub.path.as_os_str())
                    && self.depth(&sub.path) < crate::walk::NESTED_DEPTH
                {
                    queue.push(sub.path);
                }
            }
        }
        let present: std::collections::HashSet<&OsStr> =
            self.present.iter().map(|p| p.as_os_str()).collect();
        made.extend(
            later
                .places
                .into_iter()
                .filter(|p| !present.contains(p.as_os_str()) && !walked.exempt.contains(p)),
        );
        repositories.sort();
        repositories.dedup();
        made.extend(
            repositories
                .into_iter()
                .filter(|r| self.repository_runs(r).is_some()),
        );
        failed.map_or(Ok(()), |e| Err(io::Error::other(e)))
    }

    /// What git would run of `place` (a `.git`, or a git directory of another name) when it is
    /// one the child made: not kept as it started, and, a `.git` file or link, leading to a git
    /// directory beneath its write roots that was not kept either.
    fn repository_runs(&self, place: &Path) -> Option<String> {
        if self.repositories.iter().any(|r| r == place) {
            return None;
        }
        let meta = std::fs::symlink_metadata(place).ok()?;
        let dir = if meta.is_file() {
            // One toolcap cannot read may name any git directory (root's git reads it).
            if crate::hooks::small_file(place, 4096).is_none() {
                return Some(format!(
                    "{}: a .git file toolcap cannot read",
                    place.display()
                ));
            }
            crate::hooks::pointed_at(place, place.parent()?)?
        } else if meta.file_type().is_symlink() {
            // Git follows a `.git` that is a link; the sandbox refuses to start a child beside
            // one, and one a child made is looked at where it leads.
            std::fs::canonicalize(place).ok().filter(|d| d.is_dir())?
        } else if meta.is_dir() {
            place.to_path_buf()
        } else {
            return None;
        };
        if self.repositories.contains(&dir) || !self.roots.iter().any(|r| dir.starts_with(r)) {
            return None;
        }
        crate::child_repo::runs_a_program(&dir, &self.roots, &self.repositories)
    }

    /// Renames each place [`made`](Self::made) finds to `NAME.refused-by-toolcap` beside it
    /// (`-2`, `-3`, ... when that is taken, then a name nobody can guess), so that nothing runs
    /// it, and returns each with where it went. No link is followed beneath the write root
    /// above a place: a place reached through a link (a `.cargo` that leads elsewhere) is set
    /// aside as the link itself, so nothing outside the write reach is moved. A directory the
    /// child took its owner's permissions away from is given them back first. They stay
    /// watched: one made again is found again.
    ///
    /// # Errors
    ///
    /// A watched directory that cannot be read (what was found elsewhere is set aside first,
    /// and the error names it), or the first place that could not be renamed.
    pub fn set_aside(&self) -> io::Result<Vec<(PathBuf, PathBuf)>> {
        let mut moved = Vec::new();
        // What was found is set aside even when some directory could not be looked into; the
        // error is then the answer, naming what was moved.
        let (made, failed) = self.found();
        for place in made {
            let (Some(parent), Some(name)) = (place.parent(), place.file_name()) else {
                continue;
            };
            // A denied place that is a plain file or directory is covered from the next child
            // on, whoever made it (the user, meanwhile); one that leads elsewhere would take the
            // user's next write of it where a child reads.
            if self.denied.contains(&place) && !leads_elsewhere(&place) {
                continue;
            }
            let (dir, name, path) = match self.walk(parent)? {
                Walk::Dir(dir) => (dir, name.to_os_string(), place.clone()),
                Walk::Link(dir, name, path) => (dir, name, path),
                // Set aside with a link above it, or gone meanwhile.
                Walk::Missing => continue,
            };
            if let Some(aside) = rename_aside(&dir, &name).map_err(|e| at(&path, e))? {
                moved.push((path.clone(), path.with_file_name(aside)));
            }
        }
        match failed {
            None => Ok(moved),
            Some(e) if moved.is_empty() => Err(e),
            Some(e) => {
                let list: Vec<String> = moved
                    .iter()
                    .map(|(made, aside)| self.describe(made, aside))
                    .collect();
                Err(io::Error::new(
                    e.kind(),
                    format!(
                        "{e}; what could be found was set aside: {}",
                        list.join("; ")
                    ),
                ))
            }
        }
    }

    /// Walks from the outermost write root above `dir` down to `dir`, following no link,
    /// giving a directory on the way its owner's permissions back where the child took them.
    fn walk(&self, dir: &Path) -> io::Result<Walk> {
        let Some(root) = self
            .roots
            .iter()
            .filter(|r| dir.starts_with(r))
            .min_by_key(|r| r.as_os_str().len())
        else {
            return Err(io::Error::other(format!(
                "{} lies beneath no write root",
                dir.display()
            )));
        };
        let path_only = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
        // Nothing above the outermost write root is the child's to change: its own path is
        // taken as the policy gave it.
        let mut fd = match rustix::fs::open(root, path_only, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT | Errno::NOTDIR) => return Ok(Walk::Missing),
            Err(e) => return Err(at(root, e.into())),
        };
        let mut path = root.clone();
        for part in dir.strip_prefix(root).unwrap_or(Path::new("")).components() {
            let Component::Normal(part) = part else {
                continue;
            };
            let stat = match with_permissions(&fd, || {
                rustix::fs::statat(&fd, part, AtFlags::SYMLINK_NOFOLLOW)
            }) {
                Ok(stat) => stat,
                Err(Errno::NOENT | Errno::NOTDIR) => return Ok(Walk::Missing),
                Err(e) => return Err(at(&path.join(part), e.into())),
            };
            path.push(part);
            match stat.st_mode & libc::S_IFMT {
                libc::S_IFLNK => return Ok(Walk::Link(fd, part.to_os_string(), path)),
                libc::S_IFDIR => {}
                _ => return Ok(Walk::Missing),
            }
            fd = match rustix::fs::openat(&fd, part, path_only | OFlags::NOFOLLOW, Mode::empty()) {
                Ok(next) => next,
                Err(Errno::NOENT | Errno::NOTDIR) => return Ok(Walk::Missing),
                Err(e) => return Err(at(&path, e.into())),
            };
        }
        Ok(Walk::Dir(fd))
    }
}

/// Whether a write of `place` (or of a file beneath it) could land in another file: a
/// symbolic link, a file with more than one name (a hard link), or a directory holding either
/// (looked at without following a link; one too large to look through counts as one).
fn leads_elsewhere(place: &Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    let mut budget = 4096usize;
    let mut pending = vec![place.to_path_buf()];
    while let Some(path) = pending.pop() {
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.file_type().is_symlink() || (!meta.is_dir() && meta.nlink() > 1) {
            return true;
        }
        if meta.is_dir() {
            let Ok(entries) = std::fs::read_dir(&path) else {
                return true;
            };
            for entry in entries {
                let Some(budget_left) = budget.checked_sub(1) else {
                    return true;
                };
                budget = budget_left;
                let Ok(entry) = entry else { return true };
                pending.push(entry.path());
            }
        }
    }
    false
}

/// `op`, and when it is refused for want of permission on `dir`, `op` again once `dir` has its
/// owner's permissions back (a child may `chmod 0` a directory of its own write reach, which
/// does not stop its owner, the user toolcap runs as, from giving them back).
fn with_permissions<T>(
    dir: &OwnedFd,
    op: impl Fn() -> rustix::io::Result<T>,
) -> rustix::io::Result<T> {
    match op() {
        Err(Errno::ACCESS) => {
            let stat = rustix::fs::fstat(dir)?;
            if stat.st_uid != rustix::process::geteuid().as_raw() {
                return Err(Errno::ACCESS);
            }
            // An `O_PATH` descriptor cannot be `fchmod`ed; its `/proc` link names exactly it.
            let mode = Mode::from_raw_mode((stat.st_mode & 0o7777) | 0o700);
            rustix::fs::chmod(format!("/proc/self/fd/{}", dir.as_raw_fd()), mode)?;
            op()
        }
        other => other,
    }
}

/// Whether the directory `dir` can be listed (its read permission, for its owner).
fn readable(dir: &OwnedFd) -> rustix::io::Result<()> {
    rustix::fs::openat(
        dir,
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map(drop)
}

/// Renames `name` in `dir` to a name of its own that nothing runs, never replacing anything:
/// `NAME.refused-by-toolcap`, `-2` to `-1000`, then names nobody can guess (a child may have
/// taken the others first). `None` when `name` is gone meanwhile.
fn rename_aside(dir: &OwnedFd, name: &OsStr) -> io::Result<Option<OsString>> {
    const ASIDE: &str = ".refused-by-toolcap";
    // NAME_MAX less the longest suffix (`-` and sixteen hexadecimal digits).
    let short = name.len() + ASIDE.len() + 17 > 255;
    let guessed = (1..=1000u32).filter(|_| !short).map(|n| {
        let mut aside = name.to_os_string();
        aside.push(ASIDE);
        if n > 1 {
            aside.push(format!("-{n}"));
        }
        aside
    });
    let unguessable = (0..16).map(|_| {
        let random = std::hash::RandomState::new().build_hasher().finish();
        let mut aside = if short {
            OsString::new()
        } else {
            name.to_os_string()
        };
        aside.push(format!("{ASIDE}-{random:016x}"));
        aside
    });
    for aside in guessed.chain(unguessable) {
        let renamed = with_permissions(dir, || {
            rustix::fs::renameat_with(dir, name, dir, &aside, RenameFlags::NOREPLACE)
        });
        match renamed {
            Ok(()) => return Ok(Some(aside)),
            Err(Errno::EXIST) => {}
            Err(Errno::NOENT) => return Ok(None),
            // A file system without `RENAME_NOREPLACE`: looked at first, then renamed.
            Err(Errno::INVAL) => {
                match rustix::fs::statat(dir, &aside, AtFlags::SYMLINK_NOFOLLOW) {
                    Err(Errno::NOENT) => {}
                    _ => continue,
                }
                return match rustix::fs::renameat(dir, name, dir, &aside) {
                    Ok(()) => Ok(Some(aside)),
                    Err(Errno::NOENT) => Ok(None),
                    Err(e) => Err(e.into()),
                };
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(io::Error::other("no free name to set it aside under"))
}

/// `e`, saying where.
fn at(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watching(root: &Path, names: &[&str]) -> Watch {
        Watch::new(
            &[root.to_path_buf()],
            names,
            &[],
            None,
            &[root.to_path_buf()],
        )
    }

    #[test]
    fn a_name_too_long_for_its_suffix_is_set_aside_under_a_short_one() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let long = "h".repeat(240);
        let watch = watching(&root, &[long.as_str()]);
        std::fs::write(root.join(&long), "x").unwrap();
        let moved = watch.set_aside().unwrap();
        assert_eq!(moved.len(), 1);
        let aside = moved[0].1.file_name().unwrap().to_str().unwrap().to_owned();
        assert!(aside.starts_with(".refused-by-toolcap-"), "{aside}");
        assert!(!root.join(&long).exists());
        assert!(root.join(&aside).exists());
    }

    #[test]
    fn every_guessable_name_taken_leaves_one_nobody_could_guess() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let watch = watching(&root, &[".zshrc"]);
        std::fs::write(root.join(".zshrc.refused-by-toolcap"), "").unwrap();
        for n in 2..=1000 {
            std::fs::write(root.join(format!(".zshrc.refused-by-toolcap-{n}")), "").unwrap();
        }
        std::fs::write(root.join(".zshrc"), "evil").unwrap();
        let moved = watch.set_aside().unwrap();
        let aside = moved[0].1.file_name().unwrap().to_str().unwrap().to_owned();
        let random = aside.strip_prefix(".zshrc.refused-by-toolcap-").unwrap();
        assert_eq!(random.len(), 16, "{aside}");
        assert_eq!(std::fs::read_to_string(root.join(&aside)).unwrap(), "evil");
        assert!(!root.join(".zshrc").exists());
    }

    #[test]
    fn a_place_reached_through_a_link_is_set_aside_as_the_link() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("config"), "theirs").unwrap();
        let watch = watching(&root, &[".config/git/config"]);
        std::fs::create_dir(root.join(".config")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join(".config/git")).unwrap();
        let moved = watch.set_aside().unwrap();
        assert_eq!(
            moved,
            vec![(
                root.join(".config/git"),
                root.join(".config/git.refused-by-toolcap")
            )]
        );
        assert_eq!(
            std::fs::read_to_string(outside.path().join("config")).unwrap(),
            "theirs"
        );
        assert!(
            watch.set_aside().unwrap().is_empty(),
            "nothing is left to find"
        );
    }
}
