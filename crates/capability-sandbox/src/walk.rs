//! The walk of a child's write roots for what it is kept from: the repositories beneath them
//! and the places a shell, an agent's client, an editor or a build tool runs code from
//! (docs/policy.md, "Git's hooks and configuration", "Kept from children").
//!
//! Breadth first, [`NESTED_DEPTH`] levels down, never through a link, never into a `.git` nor a
//! `node_modules` ([`NOT_WALKED`]). A walk that cut itself short would leave what lies past its
//! end writable, and a child decides what its write roots hold: one that filled a write root
//! with directories, or its working directory with files, had the next child write a hook into
//! a repository or a `.mcp.json` the walk no longer reached. So the walk looks at everything
//! within its levels or refuses: past its budget ([`WALK_BUDGET`]), or at a directory it cannot
//! read that a child could enter (a child may take the read permission of a directory it owns
//! away), the child is not started.

#![allow(
    clippy::disallowed_methods,
    reason = "the sandbox looks at a child's write roots as it starts the child"
)]

use std::io;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

/// How many levels beneath a write root repositories are looked for (`root/a/b/c/.git`).
pub(crate) const NESTED_DEPTH: usize = 3;

/// A directory the walk does not look into: a package manager's tree of dependencies, often
/// tens of thousands of entries within the walk's levels, where no repository a user commits
/// to and no place a client or an editor opens lies. A child cannot move a directory that
/// holds a kept place into one of this name: the directories above kept places are pinned.
pub(crate) const NOT_WALKED: &str = "node_modules";

/// How much the walk may read for one child: reading a directory costs the spawn some ten
/// microseconds on the project's VM, looking at an entry or asking a directory for a `.git`
/// well under one, so a walk that uses it all takes some tens of milliseconds
/// (docs/benchmarks.md). Past it the child is not started.
pub(crate) const WALK_BUDGET: Budget = Budget {
    dirs: 4096,
    entries: 65_536,
};

/// What is left of the walk's budget.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Budget {
    /// Directories still to be read.
    pub(crate) dirs: usize,
    /// Entries still to be looked at (and directories asked for a `.git`).
    pub(crate) entries: usize,
}

/// The directories beneath `roots` (not the roots themselves) that hold a `.git`, of any kind,
/// or are a git directory of another name, at most [`NESTED_DEPTH`] levels down, breadth first.
/// An error when the walk cannot look at all of them.
pub(crate) fn nested(roots: &[PathBuf], later: &mut Later<'_>) -> Result<Vec<PathBuf>, String> {
    let mut found = Vec::new();
    // Nothing to find inside a git directory of another name but its own places.
    let mut level: Vec<PathBuf> = roots
        .iter()
        .filter(|r| !crate::hooks::is_git_dir(r))
        .cloned()
        .collect();
    for depth in 1..=NESTED_DEPTH {
        let mut next = Vec::new();
        for dir in &level {
            for sub in later.read_dir(dir, true)? {
                if sub.repository || sub.bare {
                    found.push(sub.path.clone());
                }
                if depth < NESTED_DEPTH && !sub.bare {
                    next.push(sub.path);
                }
            }
        }
        level = next;
    }
    Ok(found)
}

/// A directory the walk found in one it read.
pub(crate) struct Sub {
    pub(crate) path: PathBuf,
    /// It holds a `.git` (of any kind).
    pub(crate) repository: bool,
    /// It is a git directory of another name (a bare repository): its `HEAD`, and its
    /// `objects` or `commondir`.
    pub(crate) bare: bool,
}

/// The places named as the caller's `runs_later` names them, found in the directories read,
/// and those directories, within the walk's budget.
pub(crate) struct Later<'a> {
    /// The names looked for, as relative paths (`.bashrc`, `.config/fish`), those starting
    /// with a dot apart from the others.
    dotted: Vec<&'a str>,
    undotted: Vec<&'a str>,
    /// Directories whose entries were looked at.
    pub(crate) read: Vec<PathBuf>,
    /// Places found (links not yet followed).
    pub(crate) places: Vec<PathBuf>,
    /// Every subdirectory the reads gave, read later or not.
    pub(crate) seen: Vec<PathBuf>,
    /// What is left of the walk's budget.
    pub(crate) budget: Budget,
    /// Places covered in the child's mount namespace, which no child reaches into: not
    /// looked into either.
    covered: &'a [PathBuf],
}

impl<'a> Later<'a> {
    /// A walk looking for `names`, with the whole [`WALK_BUDGET`], passing what is `covered`.
    pub(crate) fn new(names: &'a [&'a str], covered: &'a [PathBuf]) -> Self {
        let (dotted, undotted) = names.iter().partition(|n| n.starts_with('.'));
        Self {
            dotted,
            undotted,
            read: Vec::new(),
            places: Vec::new(),
            seen: Vec::new(),
            budget: WALK_BUDGET,
            covered,
        }
    }

    /// Reads `dir` and looks at each of its entries, and gives the subdirectories the walk goes
    /// on into (not a link, a `.git`, a [`NOT_WALKED`] nor a covered place); with `ask`, each is
    /// asked what it holds, relative to `dir`. A directory that no longer exists holds nothing; one that cannot be read or
    /// looked into is an error when a child could enter it, since what lies in it would be a
    /// child's to write and nobody's to see.
    pub(crate) fn read_dir(&mut self, dir: &Path, ask: bool) -> Result<Vec<Sub>, String> {
        if self.budget.dirs == 0 {
            return Err(self.spent(dir));
        }
        self.budget.dirs -= 1;
        self.read.push(dir.to_path_buf());
        // `O_DIRECTORY`: a FIFO a child left where a directory was is not waited on.
        let opened = if ask {
            std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_DIRECTORY)
                .open(dir)
                .and_then(|f| Ok((std::fs::read_dir(dir)?, Some(f))))
        } else {
            // `opendir` opens with `O_DIRECTORY` too.
            std::fs::read_dir(dir).map(|entries| (entries, None))
        };
        let (entries, handle) = match opened {
            Ok(opened) => opened,
            Err(e) if passable(dir, &e) => return Ok(Vec::new()),
            Err(e) => return Err(unreadable(dir, &e)),
        };
        let mut subs = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| unreadable(dir, &e))?;
            self.spend_entry(dir)?;
            let name = entry.file_name();
            self.entry(dir, &name);
            // The entry's type as the directory gives it: a link is not followed.
            let walked =
                name != ".git" && name != NOT_WALKED && entry.file_type().is_ok_and(|t| t.is_dir());
            if walked {
                let path = entry.path();
                // Compared as bytes: a path's own comparison goes part by part.
                if self
                    .covered
                    .iter()
                    .any(|c| c.as_os_str() == path.as_os_str())
                {
                    continue;
                }
                self.seen.push(path.clone());
                if let Some(handle) = &handle {
                    self.spend_entry(dir)?;
                    subs.push(ask_into(handle, path)?);
                } else {
                    subs.push(Sub {
                        path,
                        repository: false,
                        bare: false,
                    });
                }
            }
        }
        Ok(subs)
    }

    /// One entry of the budget, looking in `dir`.
    fn spend_entry(&mut self, dir: &Path) -> Result<(), String> {
        if self.budget.entries == 0 {
            return Err(self.spent(dir));
        }
        self.budget.entries -= 1;
        Ok(())
    }

    /// The refusal when the budget is spent at `dir`.
    fn spent(&self, dir: &Path) -> String {
        format!(
            "{}: the write roots hold more than the {} directories and {} entries within {} \
             levels that toolcap looks at for the repositories and the places a shell, an agent's \
             client or an editor runs code from, to keep them from children; what lies past them \
             cannot be told (a child could fill a write root to hide one there): narrow the \
             write roots, or move what fills them elsewhere (a `{NOT_WALKED}` directory is not \
             looked into)",
            dir.display(),
            WALK_BUDGET.dirs,
            WALK_BUDGET.entries,
            NESTED_DEPTH
        )
    }

    /// The entry `name` of `dir`: a place named, or the first part of names further down
    /// (`.config`), beneath which those are asked for. Names are matched folded, as a file
    /// system that does not tell names apart finds them (`capability_types::fold_name`: any
    /// case, `.g\u{131}t`, `.cla\u{200D}ude`; docs/policy.md, "Names in any case"); a place is
    /// kept under the name it has on disk.
    fn entry(&mut self, dir: &Path, name: &std::ffi::OsStr) {
        let Some(name) = name.to_str() else {
            return;
        };
        let folded = capability_types::fold_name(name.as_bytes());
        // Most names looked for start with a dot, and most entries do not: those are asked
        // only for the few names without one (`lefthook.yml`, `rust-toolchain.toml`).
        let wanted = if folded.first() == Some(&b'.') {
            &self.dotted
        } else {
            &self.undotted
        };
        let is = |wanted: &str| capability_types::fold_name(wanted.as_bytes()) == folded;
        for wanted in wanted {
            match wanted.split_once('/') {
                None if is(wanted) => self.places.push(dir.join(name)),
                Some((first, rest)) if is(first) => {
                    let place = dir.join(name).join(rest);
                    if std::fs::symlink_metadata(&place).is_ok() {
                        self.places.push(place);
                    }
                }
                _ => {}
            }
        }
    }
}

/// Whether a child could enter `dir`, which toolcap cannot read: toolcap may search it (a
/// child has toolcap's user, or root's without its capabilities), or owns it, and a child could
/// give the permission back.
fn enterable(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    crate::sys::may_search(dir)
        || std::fs::symlink_metadata(dir).is_ok_and(|m| m.uid() == crate::sys::effective_ids().0)
}

/// What the directory `path`, an entry of the open directory `parent`, holds: a `.git`, or a
/// git directory's own `HEAD` with its `objects` or `commondir` (as `hooks::is_git_dir` asks),
/// each looked up relative to `parent`.
fn ask_into(parent: &std::fs::File, path: PathBuf) -> Result<Sub, String> {
    use std::os::unix::ffi::OsStrExt as _;
    let name = path.file_name().unwrap_or_default().as_bytes();
    let kind = |inside: &str| {
        let relative = std::ffi::CString::new([name, b"/", inside.as_bytes()].concat())
            .map_err(|_| format!("{} contains a NUL byte", path.display()))?;
        match crate::sys::type_at(parent, &relative) {
            Ok(kind) => Ok(kind),
            Err(e) if passable(&path, &e) => Ok(None),
            Err(e) => Err(unreadable(&path, &e)),
        }
    };
    let repository = kind(".git")?.is_some();
    let bare = crate::hooks::git_dir_by(kind)?;
    Ok(Sub {
        path,
        repository,
        bare,
    })
}

/// Whether an error looking into `dir` hides nothing from the walk: it no longer exists, or
/// toolcap may not look in and a child could not enter it either.
fn passable(dir: &Path, e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
    ) || (e.kind() == io::ErrorKind::PermissionDenied && !enterable(dir))
}

/// The refusal for a directory the walk cannot read.
fn unreadable(dir: &Path, e: &io::Error) -> String {
    format!(
        "{} cannot be looked into ({e}), though a child could reach what lies in it: toolcap \
         looks there for the repositories and the places a shell, an agent's client or an editor \
         runs code from, to keep them from children; give the directory its read permission \
         back (`chmod u+r`), or move it out of the write roots",
        dir.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn walk(root: &Path, budget: Budget) -> Result<Vec<PathBuf>, String> {
        let mut later = Later::new(&[], &[]);
        later.budget = budget;
        let mut found = nested(&[root.to_path_buf()], &mut later)?;
        found.sort();
        Ok(found)
    }

    /// What the walk finds: a `.git` of any kind one to three levels down, not the root's own,
    /// not four levels down, never through a link, never in a `node_modules`.
    #[test]
    fn the_walk_finds_repositories_three_levels_down_and_no_further() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let at = |rel: &str| root.join(rel);
        for repo in [
            "one",
            "a/two",
            "a/b/three",
            "a/b/c/four",
            "x/y/z",
            "node_modules/dep",
        ] {
            std::fs::create_dir_all(at(repo).join(".git")).unwrap();
        }
        std::fs::create_dir(at(".git")).unwrap();
        std::fs::create_dir_all(at("a/file-pointer")).unwrap();
        std::fs::write(at("a/file-pointer/.git"), "gitdir: ../one/.git\n").unwrap();
        // A link to a repository elsewhere is not followed into.
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(outside.path().join("r/.git")).unwrap();
        std::os::unix::fs::symlink(outside.path(), at("link")).unwrap();
        let want: Vec<PathBuf> = ["a/b/three", "a/file-pointer", "a/two", "one", "x/y/z"]
            .iter()
            .map(|r| at(r))
            .collect();
        assert_eq!(walk(&root, WALK_BUDGET).unwrap(), want);
    }

    // guarantee: G-FS-09
    /// Past its budget the walk refuses, whichever runs out first, instead of leaving what lies
    /// past it unseen; within it, it finds everything.
    #[test]
    fn the_walk_refuses_past_its_budget() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for i in 0..20 {
            std::fs::create_dir(root.join(format!("d{i:02}"))).unwrap();
        }
        std::fs::create_dir_all(root.join("d19/e/.git")).unwrap();
        // Reads: the root, its twenty directories and `e` (22). Entries: the root's twenty,
        // each of them asked for a `.git`, `d19`'s `e`, `e` asked, and `e`'s own `.git` (43).
        let enough = Budget {
            dirs: 22,
            entries: 43,
        };
        assert_eq!(walk(root, enough).unwrap(), vec![root.join("d19/e")]);
        for short in [
            Budget { dirs: 21, ..enough },
            Budget {
                entries: 30,
                ..enough
            },
        ] {
            let err = walk(root, short).unwrap_err();
            assert!(err.contains("cannot be told"), "{short:?}: {err}");
        }
    }
}
