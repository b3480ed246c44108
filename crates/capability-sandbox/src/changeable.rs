//! Who else can change a file: another account than this process's user and root, through
//! the file's own mode, owner and group, or through a directory its path is looked up in
//! (docs/policy.md, "Who else can change a file"). Asked by every reader of a file that must be
//! its user's own: a secrets file, and in the command line and the MCP guard a personality, a
//! token file, an audit file and a guarded server's program; and by the embedded store of its
//! directories.

#![allow(
    clippy::disallowed_methods,
    reason = "examines the paths of files a user keeps (a policy, a token, a store), not a tool's reach"
)]

use std::path::Path;

/// How another account could replace a file through a directory it lies in.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Swappable {
    /// The directory anyone may write, without the sticky bit, and its mode.
    WritableByAll {
        /// The directory.
        dir: std::path::PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The directory its group may write, without the sticky bit, where that group is open to
    /// other accounts ([`group_open`](crate::group_open)).
    WritableByGroup {
        /// The directory.
        dir: std::path::PathBuf,
        /// Its permission bits.
        mode: u32,
        /// Its group.
        gid: u32,
        /// Who else is in that group.
        group: crate::GroupOpen,
    },
    /// The directory another user (neither this one nor root) owns, and who.
    Owned {
        /// The directory.
        dir: std::path::PathBuf,
        /// Its owner.
        uid: u32,
    },
}

impl std::fmt::Display for Swappable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Swappable::WritableByAll { dir, mode } => write!(
                f,
                "lies in {}, which has mode {mode:o}: other users can replace what is in it",
                dir.display()
            ),
            Swappable::WritableByGroup {
                dir, mode, group, ..
            } => write!(
                f,
                "lies in {}, which has mode {mode:o} and {group}: they can replace what is in it",
                dir.display()
            ),
            Swappable::Owned { dir, uid } => write!(
                f,
                "lies in {}, which is owned by another user (uid {uid}), who can replace what is \
                 in it",
                dir.display()
            ),
        }
    }
}

/// How another account can change a file (or a directory) itself, found from its mode, owner
/// and group by [`changeable_by_others`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Changeable {
    /// Anyone may write it (`o+w`); its permission bits.
    WritableByAll {
        /// Its permission bits.
        mode: u32,
    },
    /// Its group may write it (`g+w`), and that group is open to other accounts.
    WritableByGroup {
        /// Its permission bits.
        mode: u32,
        /// Who else is in that group.
        group: crate::GroupOpen,
    },
    /// Another user than this one and root owns it.
    Owned {
        /// Its owner.
        uid: u32,
    },
}

impl Changeable {
    /// What the user can do about it, for the end of a message about `shown`.
    pub fn remedy(&self, shown: &std::path::Path) -> String {
        let shown = shown.display();
        match self {
            Changeable::WritableByAll { .. } => format!(
                "make it writable by its owner only (chmod o-w {shown}), or copy it to a file \
                 system that keeps Unix permissions"
            ),
            Changeable::WritableByGroup { .. } => {
                format!("make it writable by its owner only (chmod g-w {shown})")
            }
            Changeable::Owned { .. } => "use a copy of your own".to_owned(),
        }
    }
}

impl std::fmt::Display for Changeable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Changeable::WritableByAll { mode } => {
                write!(f, "has mode {mode:o}: other users can change it")
            }
            Changeable::WritableByGroup { mode, group } => {
                write!(f, "has mode {mode:o} and {group}: they can change it")
            }
            Changeable::Owned { uid } => {
                write!(f, "is owned by another user (uid {uid}), who can change it")
            }
        }
    }
}

/// How another account than this process's user and root can change a file with `mode`,
/// owner `uid` and group `gid` itself: writable by all, writable by a group somebody else is in
/// ([`group_open`](crate::group_open)), or another user's. `None` when only this user and root
/// can. Whether it can be *replaced* through a directory is [`swappable_through`]'s question.
///
/// # Ambient Authority
///
/// Reads `/etc/passwd` and `/etc/group` when the group may write.
pub fn changeable_by_others(mode: u32, uid: u32, gid: u32) -> Option<Changeable> {
    let mode = mode & 0o7777;
    let me = rustix::process::geteuid().as_raw();
    if mode & 0o002 != 0 {
        return Some(Changeable::WritableByAll { mode });
    }
    if uid != me && uid != 0 {
        return Some(Changeable::Owned { uid });
    }
    if mode & 0o020 != 0
        && let Some(group) = crate::accounts::AccountFiles::read().open(gid, me)
    {
        return Some(Changeable::WritableByGroup { mode, group });
    }
    None
}

/// Whether another account can replace `path` (or, when it does not exist yet, what would be
/// made there) through a directory its resolution walks: one anyone may write without the
/// sticky bit, one its group may write without the sticky bit where somebody besides this user
/// and root is in that group ([`group_open`](crate::group_open)), or one of another user's
/// than this one and root. They can rename an entry there
/// (the file, a directory between, or a symlink on the way) away and put theirs in its place; in
/// a sticky directory (`/tmp`) only an entry's owner can. Every directory an entry is looked up
/// in counts, the directories of the symlinks followed included, not only those of the file the
/// path ends at. The first such directory from the file up, if any.
///
/// For every reader of a file that must be its user's own: a secrets file here, and in the
/// command line and the MCP guard a policy, a token file, an audit file and a guarded server's
/// program.
///
/// # Errors
///
/// When the path cannot be resolved (a directory on the way is missing, a link loops), or a
/// directory cannot be examined: a caller refuses then too.
///
/// # Ambient Authority
///
/// Resolves `path` and examines its directories in the process's file system view.
pub fn swappable_through(path: &Path) -> std::io::Result<Option<Swappable>> {
    let me = rustix::process::geteuid().as_raw();
    // Read when a directory its group may write is met, and once for the walk.
    let mut accounts = None;
    for dir in walked(path)?.iter().rev() {
        let meta = rustix::fs::stat(dir)?;
        let mode = meta.st_mode & 0o7777;
        let sticky = mode & 0o1000 != 0;
        if mode & 0o002 != 0 && !sticky {
            return Ok(Some(Swappable::WritableByAll {
                dir: dir.clone(),
                mode,
            }));
        }
        if mode & 0o020 != 0 && !sticky {
            let accounts = accounts.get_or_insert_with(crate::accounts::AccountFiles::read);
            if let Some(group) = accounts.open(meta.st_gid, me) {
                return Ok(Some(Swappable::WritableByGroup {
                    dir: dir.clone(),
                    mode,
                    gid: meta.st_gid,
                    group,
                }));
            }
        }
        if meta.st_uid != me && meta.st_uid != 0 {
            return Ok(Some(Swappable::Owned {
                dir: dir.clone(),
                uid: meta.st_uid,
            }));
        }
    }
    Ok(None)
}

/// The directories resolving `path` looks entries up in, each once, in the order the walk
/// first meets them: the walk the kernel makes, from `/` (a relative path from the working
/// directory), through every symlink it follows, at most 40 as the kernel. The last component
/// may be missing (a file still to be made); any other missing one is an error.
fn walked(path: &Path) -> std::io::Result<Vec<std::path::PathBuf>> {
    use std::path::PathBuf;
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()?.join(path)
    };
    let mut todo = std::collections::VecDeque::new();
    push_front(&mut todo, &absolute);
    let mut current = PathBuf::from("/");
    let mut dirs: Vec<PathBuf> = Vec::new();
    let mut hops = 0;
    while let Some(step) = todo.pop_front() {
        let name = match step {
            Step::Root => {
                current = PathBuf::from("/");
                continue;
            }
            Step::Up => {
                current.pop();
                continue;
            }
            Step::Name(name) => name,
        };
        if !dirs.contains(&current) {
            dirs.push(current.clone());
        }
        let entry = current.join(&name);
        match std::fs::symlink_metadata(&entry) {
            Ok(meta) if meta.file_type().is_symlink() => {
                hops += 1;
                if hops > 40 {
                    return Err(std::io::Error::other(format!(
                        "{} leads through more than 40 links",
                        path.display()
                    )));
                }
                // A relative target from the link's directory, which is still `current`.
                push_front(&mut todo, &std::fs::read_link(&entry)?);
            }
            Ok(_) => current = entry,
            Err(e) if todo.is_empty() && e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(dirs)
}

/// One step of a path's resolution.
enum Step {
    /// Start again at `/` (an absolute link target).
    Root,
    /// `..`: the directory above the current one, where the walk is (links resolved).
    Up,
    /// An entry to look up in the current directory.
    Name(std::ffi::OsString),
}

/// Puts the steps of `path` in front of `todo`, in order.
fn push_front(todo: &mut std::collections::VecDeque<Step>, path: &Path) {
    use std::path::Component;
    for component in path.components().rev() {
        match component {
            Component::RootDir => todo.push_front(Step::Root),
            Component::ParentDir => todo.push_front(Step::Up),
            Component::Normal(name) => todo.push_front(Step::Name(name.to_os_string())),
            Component::CurDir | Component::Prefix(_) => {}
        }
    }
}
