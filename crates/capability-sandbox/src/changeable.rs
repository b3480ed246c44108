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

/// Who besides this process's user and root may write a file or a directory.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Writer {
    /// Anyone (`o+w`).
    Anyone,
    /// Its group (`g+w`), which another account is in or nobody is.
    Group(crate::GroupOpen),
    /// A user its access control list lets write.
    AclUser {
        /// Their user id.
        uid: u32,
    },
    /// A group its access control list lets write, which another account is in or nobody is.
    AclGroup(crate::GroupOpen),
    /// Its access control list, which cannot be read (and so may let anyone write).
    AclUnknown {
        /// Why not.
        why: String,
    },
}

impl Writer {
    /// "`has mode …` and who: they", the start of a sentence that ends in what they can do.
    fn said(&self, mode: u32) -> String {
        match self {
            Writer::Anyone => format!("has mode {mode:o}: other users"),
            Writer::Group(group) => format!("has mode {mode:o} and {group}: they"),
            Writer::AclUser { uid } => format!(
                "has mode {mode:o} and an access control list that lets uid {uid} write: they"
            ),
            Writer::AclGroup(group) => format!(
                "has mode {mode:o} and an access control list that lets {group} write: they"
            ),
            Writer::AclUnknown { why } => format!(
                "has mode {mode:o} and an access control list that cannot be read ({why}): \
                 others"
            ),
        }
    }
}

/// How another account could replace a file through a directory it lies in.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Swappable {
    /// The directory another account may write (and it has no sticky bit).
    WritableBy {
        /// The directory.
        dir: std::path::PathBuf,
        /// Its permission bits.
        mode: u32,
        /// Who.
        writer: Writer,
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
            Swappable::WritableBy { dir, mode, writer } => write!(
                f,
                "lies in {}, which {} can replace what is in it",
                dir.display(),
                writer.said(*mode)
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

/// How another account can change a file (or a directory) itself, found by
/// [`changeable_by_others`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Changeable {
    /// Another account may write it.
    WritableBy {
        /// Its permission bits.
        mode: u32,
        /// Who.
        writer: Writer,
    },
    /// Another user than this one and root owns it.
    Owned {
        /// Its owner.
        uid: u32,
    },
}

impl Changeable {
    /// What the user can do about it, for the end of a message about `shown`.
    pub fn remedy(&self, shown: &Path) -> String {
        let shown = shown.display();
        match self {
            Changeable::WritableBy {
                writer: Writer::Anyone,
                ..
            } => format!(
                "make it writable by its owner only (chmod o-w {shown}), or copy it to a file \
                 system that keeps Unix permissions"
            ),
            Changeable::WritableBy { .. } => {
                format!("make it writable by its owner only (chmod go-w {shown})")
            }
            Changeable::Owned { .. } => "use a copy of your own".to_owned(),
        }
    }
}

impl std::fmt::Display for Changeable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Changeable::WritableBy { mode, writer } => {
                write!(f, "{} can change it", writer.said(*mode))
            }
            Changeable::Owned { uid } => {
                write!(f, "is owned by another user (uid {uid}), who can change it")
            }
        }
    }
}

/// How another account than this process's user and root can change the file at `path`, whose
/// `mode`, owner `uid` and group `gid` the caller read (from the file it opened, say): writable
/// by all, by a group somebody else is in ([`group_open`](crate::group_open)), by a user or
/// group its access control list names, or another user's. `None` when only this user and root
/// can. Whether it can be *replaced* through a directory is [`swappable_through`]'s question.
///
/// # Ambient Authority
///
/// Reads the file's access control list, and `/etc/passwd` and `/etc/group`, when its group
/// bits let writing.
pub fn changeable_by_others(path: &Path, mode: u32, uid: u32, gid: u32) -> Option<Changeable> {
    let mode = mode & 0o7777;
    let me = rustix::process::geteuid().as_raw();
    if uid != me && uid != 0 {
        return Some(Changeable::Owned { uid });
    }
    writer(path, mode, gid, me, &mut None).map(|writer| Changeable::WritableBy { mode, writer })
}

/// Who besides `me` and root may write what is at `path`, with `mode` and group `gid`. The
/// group bits are the access control list's mask when it has one: with writing in them, every
/// entry the list has is looked at (a named user, a named group, the owning group); without
/// it, the list lets nobody write. `accounts` holds the account files once read.
fn writer(
    path: &Path,
    mode: u32,
    gid: u32,
    me: u32,
    accounts: &mut Option<crate::accounts::AccountFiles>,
) -> Option<Writer> {
    if mode & 0o002 != 0 {
        return Some(Writer::Anyone);
    }
    if mode & 0o020 == 0 {
        return None;
    }
    let accounts = accounts.get_or_insert_with(crate::accounts::AccountFiles::read);
    let entries = match access_list(path) {
        Ok(Some(entries)) => entries,
        // No list: the group bits are the owning group's.
        Ok(None) => return accounts.open(gid, me).map(Writer::Group),
        Err(why) => return Some(Writer::AclUnknown { why }),
    };
    for (tag, perm, id) in entries {
        if perm & 0o2 == 0 {
            continue;
        }
        let open = match tag {
            ACL_USER if id != me && id != 0 => Some(Writer::AclUser { uid: id }),
            ACL_GROUP_OBJ => accounts.open(gid, me).map(Writer::Group),
            ACL_GROUP => accounts.open(id, me).map(Writer::AclGroup),
            // The owner, this user named, the mask and others (the mode's own bits).
            _ => None,
        };
        if open.is_some() {
            return open;
        }
    }
    None
}

const ACL_USER: u16 = 0x02;
const ACL_GROUP_OBJ: u16 = 0x04;
const ACL_GROUP: u16 = 0x08;
/// One entry of an access control list: its tag, permissions and id.
type AclEntry = (u16, u16, u32);

/// The version of the list's layout the kernel writes (`POSIX_ACL_XATTR_VERSION`).
const ACL_VERSION: u32 = 2;

/// The entries (tag, permissions, id) of the access control list of what is at `path`, `None`
/// when it has none (or its file system keeps none), or why it cannot be read.
fn access_list(path: &Path) -> Result<Option<Vec<AclEntry>>, String> {
    use rustix::io::Errno;
    let mut buf = vec![0u8; 4096];
    let len = match rustix::fs::getxattr(path, "system.posix_acl_access", &mut buf[..]) {
        Ok(len) => len,
        // (`ENOTSUP` and `EOPNOTSUPP` are one number on Linux.)
        Err(Errno::NODATA | Errno::NOTSUP) => return Ok(None),
        Err(Errno::RANGE) => return Err("over 4096 bytes".to_owned()),
        Err(e) => return Err(e.to_string()),
    };
    parsed_acl(&buf[..len]).map(Some)
}

/// The entries of an access control list as the kernel lays it out: a version, then eight
/// bytes an entry. Anything else (a file system that makes up its own answer) cannot be read.
fn parsed_acl(bytes: &[u8]) -> Result<Vec<AclEntry>, String> {
    let version = bytes
        .get(..4)
        .map(|v| u32::from_le_bytes([v[0], v[1], v[2], v[3]]));
    if version != Some(ACL_VERSION) || !(bytes.len() - 4).is_multiple_of(8) {
        return Err("an unknown layout".to_owned());
    }
    Ok(bytes[4..]
        .chunks_exact(8)
        .map(|e| {
            (
                u16::from_le_bytes([e[0], e[1]]),
                u16::from_le_bytes([e[2], e[3]]),
                u32::from_le_bytes([e[4], e[5], e[6], e[7]]),
            )
        })
        .collect())
}

/// Whether another account can replace `path` (or, when it does not exist yet, what would be
/// made there) through a directory its resolution walks: one another account may write (as
/// [`changeable_by_others`] finds) without the sticky bit, or one of another user's than this
/// one and root. They can rename an entry there (the file, a directory between, or a symlink
/// on the way) away and put theirs in its place; in a sticky directory (`/tmp`) only an
/// entry's owner can. Every directory an entry is looked up in counts, the directories of the
/// symlinks followed included, not only those of the file the path ends at. The first such
/// directory from the file up, if any.
///
/// # Errors
///
/// When the path cannot be resolved (a directory on the way is missing, a link loops), or a
/// directory cannot be examined: a caller refuses then too.
///
/// # Ambient Authority
///
/// Resolves `path` and examines its directories (their access control lists too) and the
/// account files in the process's file system view.
pub fn swappable_through(path: &Path) -> std::io::Result<Option<Swappable>> {
    let me = rustix::process::geteuid().as_raw();
    // Read when a directory its group may write is met, and once for the walk.
    let mut accounts = None;
    for dir in walked(path)?.iter().rev() {
        let meta = rustix::fs::stat(dir)?;
        let mode = meta.st_mode & 0o7777;
        if mode & 0o1000 == 0
            && let Some(writer) = writer(dir, mode, meta.st_gid, me, &mut accounts)
        {
            return Ok(Some(Swappable::WritableBy {
                dir: dir.clone(),
                mode,
                writer,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_access_control_list_of_another_layout_cannot_be_read() {
        let mut good = ACL_VERSION.to_le_bytes().to_vec();
        good.extend([2, 0, 6, 0, 0xfe, 0xff, 0, 0]);
        assert_eq!(parsed_acl(&good), Ok(vec![(2, 6, 65534)]));
        assert_eq!(parsed_acl(&good[..4]), Ok(vec![]));
        for bad in [
            &[][..],
            &good[..3],
            &good[..9],
            &[1, 0, 0, 0, 2, 0, 6, 0, 0, 0, 0, 0][..],
            &[2, 0, 0, 0, 2, 0, 6, 0, 0, 0, 0, 0, 9][..],
        ] {
            assert!(parsed_acl(bad).is_err(), "{bad:?}");
        }
    }
}
