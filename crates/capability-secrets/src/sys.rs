//! The one module of this crate that touches the OS: reading the process environment and
//! opening a secrets file without following links.
#![allow(clippy::disallowed_methods, reason = "the secrets backend's OS layer")]

use std::ffi::OsString;
use std::io::Read;
use std::path::Path;

use rustix::fs::{Mode, OFlags};

/// A snapshot of the process environment.
pub(crate) fn environment() -> Vec<(OsString, OsString)> {
    std::env::vars_os().collect()
}

/// What [`read_private_file`] found.
pub(crate) struct PrivateFile {
    pub(crate) contents: String,
}

/// Why a secrets file was not read. Never carries its contents.
pub(crate) enum OpenError {
    Io(std::io::Error),
    NotRegular,
    Exposed(u32),
    /// Owned by this uid, neither this user nor root.
    Theirs(u32),
    /// Another account can replace it through a directory it lies in.
    Swappable(Swappable),
    NotUtf8,
}

/// Opens `path` without following a final symlink, checks the *opened* file's type, mode and
/// owner (so no swap between check and read is possible) and the directories it lies in (none
/// another account can replace it through), and reads it.
pub(crate) fn read_private_file(path: &Path) -> Result<PrivateFile, OpenError> {
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY,
        Mode::empty(),
    )
    .map_err(|e| OpenError::Io(e.into()))?;
    let stat = rustix::fs::fstat(&fd).map_err(|e| OpenError::Io(e.into()))?;
    let mode = stat.st_mode;
    if rustix::fs::FileType::from_raw_mode(mode) != rustix::fs::FileType::RegularFile {
        return Err(OpenError::NotRegular);
    }
    if mode & 0o077 != 0 {
        return Err(OpenError::Exposed(mode & 0o7777));
    }
    let me = rustix::process::geteuid().as_raw();
    if stat.st_uid != me && stat.st_uid != 0 {
        return Err(OpenError::Theirs(stat.st_uid));
    }
    if let Some(swap) = swappable_through(path).map_err(OpenError::Io)? {
        return Err(OpenError::Swappable(swap));
    }
    let mut bytes = Vec::new();
    std::fs::File::from(fd)
        .read_to_end(&mut bytes)
        .map_err(OpenError::Io)?;
    let contents = String::from_utf8(bytes).map_err(|_| OpenError::NotUtf8)?;
    Ok(PrivateFile { contents })
}

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
            Swappable::Owned { dir, uid } => write!(
                f,
                "lies in {}, which is owned by another user (uid {uid}), who can replace what is \
                 in it",
                dir.display()
            ),
        }
    }
}

/// Whether another account can replace `path` (or, when it does not exist yet, what would be
/// made there) through a directory its resolution walks: one anyone may write without the
/// sticky bit, or one of another user's than this one and root. They can rename an entry there
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
    for dir in walked(path)?.iter().rev() {
        let meta = rustix::fs::stat(dir)?;
        let mode = meta.st_mode & 0o7777;
        if mode & 0o002 != 0 && mode & 0o1000 == 0 {
            return Ok(Some(Swappable::WritableByAll {
                dir: dir.clone(),
                mode,
            }));
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
