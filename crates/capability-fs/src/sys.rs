//! The one module of this crate that touches the OS: directory handles, `openat2` beneath a
//! root (or the `O_NOFOLLOW` walk), and the `*at` calls that act through held descriptors.
#![allow(
    clippy::disallowed_methods,
    reason = "the file system backend's OS layer"
)]

use std::ffi::OsStr;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use capability_types::FileKind;
use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};

/// Why an operation failed at the OS level.
#[derive(Debug)]
pub(crate) enum SysError {
    /// The kernel refused to leave the root (`EXDEV`, `ELOOP`, a magic link, a symlink in the
    /// component walk).
    Escape,
    /// Anything else.
    Io(io::Error),
}

impl From<rustix::io::Errno> for SysError {
    fn from(e: rustix::io::Errno) -> Self {
        match e {
            rustix::io::Errno::XDEV | rustix::io::Errno::LOOP => SysError::Escape,
            e => SysError::Io(e.into()),
        }
    }
}

impl From<io::Error> for SysError {
    fn from(e: io::Error) -> Self {
        SysError::Io(e)
    }
}

pub(crate) type SysResult<T> = Result<T, SysError>;

/// Whether `openat2` was found missing once; then the walk is used from then on.
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

/// Opens a root directory where the policy put it, following no symbolic link on the way
/// ([`SysError::Escape`] at one). The policy resolved its roots' links when it loaded, so a link
/// on the way now was made since, perhaps by a child that may write a directory above the root,
/// and would lead the root anywhere (docs/policy.md, "Symbolic links in a policy").
pub(crate) fn open_root(root: &Path) -> SysResult<OwnedFd> {
    let top = rustix::fs::open(
        "/",
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let relative = root.strip_prefix("/").unwrap_or(root);
    walk_beneath(
        top.as_fd(),
        relative,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
    )
}

/// The first symbolic link on the way to `path` (absolute), itself included: what a refusal of
/// [`open_root`] names.
pub(crate) fn link_on_the_way(path: &Path) -> Option<PathBuf> {
    let mut at = PathBuf::from("/");
    for name in path.components().skip(1) {
        at.push(name);
        if std::fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink()) {
            return Some(at);
        }
    }
    None
}

/// Whether `path` exists and is not a directory (following symlinks in the path: it comes from
/// the policy).
pub(crate) fn is_existing_non_directory(path: &Path) -> bool {
    rustix::fs::stat(path).is_ok_and(|st| {
        rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::Directory
    })
}

/// Opens `relative` (normalised, only normal components; empty = the root) beneath `root`.
///
/// Returns the descriptor and whether a symlink inside the root was followed on the way. When
/// none was, the object reached is exactly `root/relative`; when one was, the caller must ask
/// where it landed ([`reached`]) and check that place.
pub(crate) fn open_beneath(
    root: BorrowedFd<'_>,
    relative: &Path,
    flags: OFlags,
    walk: bool,
) -> SysResult<(OwnedFd, bool)> {
    // O_NOCTTY is meaningless for O_PATH, and openat2 refuses the pair with EINVAL.
    let flags = if flags.contains(OFlags::PATH) {
        flags | OFlags::CLOEXEC
    } else {
        flags | OFlags::CLOEXEC | OFlags::NOCTTY
    };
    let target: &Path = if relative.as_os_str().is_empty() {
        Path::new(".")
    } else {
        relative
    };
    if !walk && !NO_OPENAT2.load(Ordering::Relaxed) {
        let strict =
            ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS | ResolveFlags::NO_SYMLINKS;
        match openat2_retrying(root, target, flags, strict) {
            Ok(fd) => return Ok((fd, false)),
            // A symlink on the way (or a final one): resolve it, still beneath the root.
            Err(rustix::io::Errno::LOOP) => {
                let beneath = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
                match openat2_retrying(root, target, flags, beneath) {
                    Ok(fd) => return Ok((fd, true)),
                    // An absolute link on the way (or one that climbs out): follow it only if
                    // it leads back beneath this root.
                    Err(rustix::io::Errno::XDEV) => {
                        let rewritten = without_absolute_links(root, target, flags)?;
                        return openat2_retrying(root, &rewritten, flags, strict)
                            .map(|fd| (fd, true))
                            .map_err(SysError::from);
                    }
                    Err(rustix::io::Errno::NOSYS) => NO_OPENAT2.store(true, Ordering::Relaxed),
                    Err(e) => return Err(e.into()),
                }
            }
            Err(rustix::io::Errno::NOSYS) => NO_OPENAT2.store(true, Ordering::Relaxed),
            Err(e) => return Err(e.into()),
        }
    }
    walk_beneath(root, relative, flags).map(|fd| (fd, false))
}

/// How many symbolic links one lookup may follow, as the kernel's own limit.
const MAX_LINKS: usize = 40;

/// `relative` with every symbolic link on the way replaced by what it says, as a path beneath
/// `root` that contains no link (docs/policy.md, "Symbolic links inside the reach").
///
/// `RESOLVE_BENEATH` refuses an absolute link outright, even one whose target lies inside the
/// root. This walk reads each link and keeps going only while every target stays beneath the
/// root: an absolute target is taken relative to the root's real path (and must be inside it),
/// a `..` may not climb above the root. The caller opens the result with `RESOLVE_NO_SYMLINKS`,
/// so the kernel still has the last word: a component swapped for a link after this walk read
/// it fails that open rather than redirecting it. The final component is left alone when
/// `flags` has `O_NOFOLLOW`.
fn without_absolute_links(
    root: BorrowedFd<'_>,
    relative: &Path,
    flags: OFlags,
) -> SysResult<PathBuf> {
    let root_real = real_path(root)?;
    let mut pending: std::collections::VecDeque<std::ffi::OsString> =
        relative.iter().map(OsStr::to_os_string).collect();
    let mut resolved = PathBuf::new();
    let mut links = 0;
    while let Some(name) = pending.pop_front() {
        match Path::new(&name).components().next() {
            Some(Component::CurDir) | None => continue,
            Some(Component::ParentDir) => {
                if !resolved.pop() {
                    return Err(SysError::Escape);
                }
                continue;
            }
            _ => {}
        }
        let candidate = resolved.join(&name);
        if pending.is_empty() && flags.contains(OFlags::NOFOLLOW) {
            resolved = candidate;
            break;
        }
        let here: &Path = if candidate.as_os_str().is_empty() {
            Path::new(".")
        } else {
            &candidate
        };
        let target = match rustix::fs::readlinkat(root, here, Vec::new()) {
            Ok(target) => PathBuf::from(std::ffi::OsString::from_vec(target.into_bytes())),
            // Not a link (EINVAL), or missing: the open that follows says which.
            Err(_) => {
                resolved = candidate;
                continue;
            }
        };
        links += 1;
        if links > MAX_LINKS {
            return Err(SysError::Escape);
        }
        let rest = if target.is_absolute() {
            resolved = PathBuf::new();
            target
                .strip_prefix(&root_real)
                .map_err(|_| SysError::Escape)?
                .to_path_buf()
        } else {
            target
        };
        for part in rest.iter().rev() {
            pending.push_front(part.to_os_string());
        }
    }
    Ok(if resolved.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        resolved
    })
}

/// `openat2`, retried a few times on `EAGAIN` (a rename racing the lookup).
fn openat2_retrying(
    root: BorrowedFd<'_>,
    target: &Path,
    flags: OFlags,
    resolve: ResolveFlags,
) -> Result<OwnedFd, rustix::io::Errno> {
    let mut last = rustix::io::Errno::AGAIN;
    for _ in 0..8 {
        match rustix::fs::openat2(root, target, flags, Mode::empty(), resolve) {
            Err(rustix::io::Errno::AGAIN) => last = rustix::io::Errno::AGAIN,
            other => return other,
        }
    }
    Err(last)
}

/// The fallback: one `openat` per component with `O_NOFOLLOW`, so no symlink is ever followed.
fn walk_beneath(root: BorrowedFd<'_>, relative: &Path, flags: OFlags) -> SysResult<OwnedFd> {
    let mut names: Vec<&OsStr> = Vec::new();
    for c in relative.components() {
        match c {
            Component::Normal(n) => names.push(n),
            Component::CurDir => {}
            _ => return Err(SysError::Escape),
        }
    }
    let Some((last, parents)) = names.split_last() else {
        return Ok(rustix::fs::openat(root, ".", flags, Mode::empty())?);
    };
    let mut current: Option<OwnedFd> = None;
    for name in parents {
        let base = current.as_ref().map_or(root, AsFd::as_fd);
        let next = rustix::fs::openat(
            base,
            *name,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| {
            if e == rustix::io::Errno::NOTDIR {
                SysError::Escape
            } else {
                e.into()
            }
        })?;
        current = Some(next);
    }
    let base = current.as_ref().map_or(root, AsFd::as_fd);
    match rustix::fs::openat(base, *last, flags | OFlags::NOFOLLOW, Mode::empty()) {
        // O_PATH | O_NOFOLLOW opens a final symlink itself rather than failing with ELOOP; it
        // is still a link this walk does not follow.
        Ok(fd) if flags.contains(OFlags::PATH) => {
            if FileType::from_raw_mode(rustix::fs::fstat(&fd)?.st_mode) == FileType::Symlink {
                return Err(SysError::Escape);
            }
            Ok(fd)
        }
        Ok(fd) => Ok(fd),
        // With O_DIRECTORY a final symlink gives ENOTDIR rather than ELOOP: still a link.
        Err(rustix::io::Errno::NOTDIR)
            if rustix::fs::statat(base, *last, AtFlags::SYMLINK_NOFOLLOW)
                .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Symlink) =>
        {
            Err(SysError::Escape)
        }
        Err(e) => Err(e.into()),
    }
}

/// The path a descriptor refers to, as the kernel reports it.
fn real_path(fd: BorrowedFd<'_>) -> SysResult<PathBuf> {
    let link = format!("/proc/self/fd/{}", fd.as_raw_fd());
    Ok(std::fs::read_link(link)?)
}

/// Where `fd` (opened beneath `root`) landed, relative to `root`: the kernel's paths of both,
/// one stripped from the other. The caller joins it onto the *lexical* root, so a root that is
/// itself reached through a symlink is handled. Fails closed when the kernel's answer is not
/// beneath the root.
pub(crate) fn reached(root: BorrowedFd<'_>, fd: BorrowedFd<'_>) -> SysResult<PathBuf> {
    let root_real = real_path(root)?;
    let real = real_path(fd)?;
    real.strip_prefix(&root_real)
        .map(Path::to_path_buf)
        .map_err(|_| SysError::Escape)
}

pub(crate) fn kind_of(file_type: FileType) -> FileKind {
    match file_type {
        FileType::RegularFile => FileKind::File,
        FileType::Directory => FileKind::Dir,
        FileType::Symlink => FileKind::Symlink,
        _ => FileKind::Other,
    }
}

pub(crate) struct Stat {
    pub(crate) kind: FileKind,
    pub(crate) len: u64,
    pub(crate) mode: u32,
    pub(crate) modified: Option<SystemTime>,
    /// How many directory entries name the object.
    pub(crate) links: u64,
    /// The file system it lies on (`st_dev`).
    pub(crate) dev: u64,
    /// Its owner and group.
    pub(crate) uid: u32,
    pub(crate) gid: u32,
}

fn convert(st: &rustix::fs::Stat) -> Stat {
    let modified = u64::try_from(st.st_mtime).ok().map(|secs| {
        UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_nanos(st.st_mtime_nsec)
    });
    Stat {
        kind: kind_of(FileType::from_raw_mode(st.st_mode)),
        len: u64::try_from(st.st_size).unwrap_or(0),
        mode: st.st_mode & 0o7777,
        modified,
        links: st.st_nlink,
        dev: st.st_dev,
        uid: st.st_uid,
        gid: st.st_gid,
    }
}

pub(crate) fn fstat(fd: BorrowedFd<'_>) -> SysResult<Stat> {
    Ok(convert(&rustix::fs::fstat(fd)?))
}

/// The name of the kernel file system `fd` lies on, when it is one of those that show the
/// kernel's and other processes' state rather than files (procfs, sysfs and their kin); `None`
/// for any other (docs/semantics.md, "Paths": the deny floor).
pub(crate) fn kernel_fs(fd: BorrowedFd<'_>) -> SysResult<Option<&'static str>> {
    // linux/magic.h
    const KERNEL: &[(i64, &str)] = &[
        (0x9fa0, "procfs"),
        (0x6265_6572, "sysfs"),
        (0x6462_6720, "debugfs"),
        (0x7472_6163, "tracefs"),
        (0x7363_6673, "securityfs"),
        (0xf97c_ff8c, "selinuxfs"),
        (0x4341_5d53, "smackfs"),
        (0x0027_e0eb, "cgroup"),
        (0x6367_7270, "cgroup2"),
        (0xcafe_4a11, "bpf"),
        (0x6265_6570, "configfs"),
        (0xde5e_81e4, "efivarfs"),
        (0x6165_676c, "pstore"),
        (0x6573_5543, "fusectl"),
        (0x4249_4e4d, "binfmt_misc"),
        (0x6e73_6673, "nsfs"),
        (0x1cd1, "devpts"),
        (0x1980_0202, "mqueue"),
        (0x9fa2, "usbfs"),
    ];
    let kind = rustix::fs::fstatfs(fd)?.f_type as i64;
    Ok(KERNEL
        .iter()
        .find(|(magic, _)| *magic == kind)
        .map(|(_, name)| *name))
}

/// `stat` of `name` in `dir` without following a final symlink; `None` when it does not exist.
pub(crate) fn stat_in(dir: BorrowedFd<'_>, name: &OsStr) -> SysResult<Option<Stat>> {
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => Ok(Some(convert(&st))),
        Err(rustix::io::Errno::NOENT) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Reads an opened regular file of (stat) size `size_hint`, refusing more than `cap` bytes.
/// The buffer is sized from the hint, so a file that did not change is read in one call (plus
/// the call that sees its end).
pub(crate) fn read_all(fd: OwnedFd, size_hint: u64, cap: u64) -> SysResult<Result<Vec<u8>, u64>> {
    let mut file = std::fs::File::from(fd);
    // Saturating: a cap of `u64::MAX` ("no limit") plus one wrapped to a read of nothing, and
    // the file came back empty.
    let mut bytes =
        Vec::with_capacity(usize::try_from(size_hint.min(cap).saturating_add(1)).unwrap_or(0));
    let read = (&mut file)
        .take(cap.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if read as u64 > cap {
        return Ok(Err(cap));
    }
    Ok(Ok(bytes))
}

/// A directory's entries: (name, kind).
pub(crate) type Listing = Vec<(Vec<u8>, FileKind)>;

/// Entries of an opened directory, without `.` and `..`; `Err(max)` as soon as there are more
/// than `max` (the rest unread).
pub(crate) fn list(dir: OwnedFd, max: usize) -> SysResult<Result<Listing, usize>> {
    let mut entries = Vec::new();
    let mut reader = rustix::fs::Dir::read_from(&dir)?;
    while let Some(entry) = reader.read() {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let kind = match entry.file_type() {
            FileType::Unknown => {
                stat_in(dir.as_fd(), OsStr::from_bytes(name))?.map_or(FileKind::Other, |s| s.kind)
            }
            t => kind_of(t),
        };
        if entries.len() == max {
            return Ok(Err(max));
        }
        entries.push((name.to_vec(), kind));
    }
    Ok(Ok(entries))
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Writes `contents` to `name` in `dir` atomically: a new temporary file in the same directory,
/// written, synced and renamed over `name`. The temporary file is removed on any failure.
///
/// `replaced` is the file `name` holds now, if any: the new one gets its owner, group and
/// permission bits, whatever the umask (a root host rewriting a user's group-shared file left
/// it root's, the umask's mode, before). Where the process may not give the file the old owner
/// (a host that is not root rewriting another account's file), it stays the process's; where
/// it may not give it the old group either, the group's permission bits are cleared rather
/// than granted to the process's own group. A file the process may not write is refused, as
/// an in-place write would be (`EACCES`), though its directory would let it be replaced. A
/// set-ID bit is never kept: the content it vouched for is gone (docs/decisions.md,
/// "capability-fs"). A new file follows the umask.
pub(crate) fn write_atomic(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    contents: &[u8],
    replaced: Option<&Stat>,
) -> SysResult<()> {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let temp = format!(
        ".toolcap-write-{}-{}-{nanos}",
        std::process::id(),
        TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    // A file the process may not write (its owner made it read-only) is not replaced from
    // around its permission bits: an in-place write would fail, and so does this one.
    if replaced.is_some() {
        rustix::fs::accessat(dir, name, rustix::fs::Access::WRITE_OK, AtFlags::EACCESS)?;
    }
    // A replacement is made private and given its mode once its owner is settled.
    let created = if replaced.is_some() { 0o600 } else { 0o644 };
    let fd = rustix::fs::openat(
        dir,
        temp.as_str(),
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(created),
    )?;
    let result = (|| -> SysResult<()> {
        if let Some(old) = replaced {
            keep_owner_and_mode(fd.as_fd(), old);
        }
        let mut file = std::fs::File::from(fd);
        file.write_all(contents)?;
        file.sync_all()?;
        rustix::fs::renameat(dir, temp.as_str(), dir, name)?;
        Ok(())
    })();
    if result.is_err() {
        let _ = rustix::fs::unlinkat(dir, temp.as_str(), AtFlags::empty());
    } else {
        // Make the rename itself durable.
        let _ = rustix::fs::fsync(dir);
    }
    result
}

/// Gives `fd` the owner, group and permission bits of `old`, as far as the process and the file
/// system let it ([`write_atomic`]). Nothing here fails the write: an owner it may not give
/// (`EPERM`, or `EINVAL` for an owner its user namespace does not map) leaves the process's, a
/// group it may not give clears the group's bits, and a file system without Unix permissions
/// (whose `fchmod` fails) leaves the file private (`0600`, as it was made).
fn keep_owner_and_mode(fd: BorrowedFd<'_>, old: &Stat) {
    use rustix::fs::{Gid, Uid};
    let (uid, gid) = (Uid::from_raw(old.uid), Gid::from_raw(old.gid));
    let mut mode = old.mode & 0o777;
    if rustix::fs::fchown(fd, Some(uid), Some(gid)).is_err()
        && rustix::fs::fchown(fd, None, Some(gid)).is_err()
    {
        mode &= !0o070;
    }
    let _ = rustix::fs::fchmod(fd, Mode::from_raw_mode(mode));
}

/// Appends `contents` to `name` in `dir`, creating it (mode 0644) when missing; never follows a
/// final symbolic link, never blocks on a FIFO swapped in (`O_NONBLOCK`; anything but a regular
/// file is refused), never extends a file that has other names (a hard link swapped in after
/// the caller's look: [`SysError::Escape`]), and syncs the data.
pub(crate) fn append_in(dir: BorrowedFd<'_>, name: &OsStr, contents: &[u8]) -> SysResult<()> {
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::WRONLY
            | OFlags::APPEND
            | OFlags::CREATE
            | OFlags::NOFOLLOW
            | OFlags::NONBLOCK
            | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o644),
    )?;
    let opened = fstat(fd.as_fd())?;
    if opened.kind != FileKind::File {
        return Err(io::Error::from(io::ErrorKind::InvalidInput).into());
    }
    if opened.links > 1 {
        return Err(SysError::Escape);
    }
    // A kernel file bound over the name (its directory is the root's, the file is the
    // kernel's setting): checked on what was opened, as the directory was.
    if opened.dev != fstat(dir)?.dev && kernel_fs(fd.as_fd())?.is_some() {
        return Err(SysError::Escape);
    }
    let mut file = std::fs::File::from(fd);
    file.write_all(contents)?;
    file.sync_data()?;
    Ok(())
}

/// Opens a directory for `*at` calls (not `O_PATH`: renames and unlinks need a real handle).
pub(crate) const DIR_FLAGS: OFlags = OFlags::RDONLY.union(OFlags::DIRECTORY);

pub(crate) fn mkdir_in(dir: BorrowedFd<'_>, name: &OsStr) -> SysResult<bool> {
    match rustix::fs::mkdirat(dir, name, Mode::from_raw_mode(0o755)) {
        Ok(()) => Ok(true),
        Err(rustix::io::Errno::EXIST) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

pub(crate) fn remove_in(dir: BorrowedFd<'_>, name: &OsStr, is_dir: bool) -> SysResult<()> {
    let flags = if is_dir {
        AtFlags::REMOVEDIR
    } else {
        AtFlags::empty()
    };
    Ok(rustix::fs::unlinkat(dir, name, flags)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel layer alone, without the policy's re-check: escapes must fail at the open.
    #[test]
    fn open_beneath_refuses_escapes_in_both_modes() {
        let dir = tempfile_dir();
        let root = dir.join("root");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(dir.join("outside.txt"), "x").unwrap();
        std::fs::write(root.join("sub/in.txt"), "y").unwrap();
        std::os::unix::fs::symlink(dir.join("outside.txt"), root.join("abs")).unwrap();
        std::os::unix::fs::symlink("../outside.txt", root.join("rel")).unwrap();
        std::os::unix::fs::symlink(&dir, root.join("dirlink")).unwrap();
        std::os::unix::fs::symlink("sub/in.txt", root.join("inner")).unwrap();
        std::os::unix::fs::symlink(root.join("sub/in.txt"), root.join("abs-inner")).unwrap();
        std::os::unix::fs::symlink(root.join("sub/../.."), root.join("abs-climb")).unwrap();
        let fd = open_root(&root).unwrap();
        for walk in [false, true] {
            for escape in ["abs", "rel", "dirlink/outside.txt"] {
                let r = open_beneath(fd.as_fd(), Path::new(escape), OFlags::RDONLY, walk);
                assert!(
                    matches!(r, Err(SysError::Escape)),
                    "walk={walk} {escape}: {r:?}"
                );
            }
            assert!(
                open_beneath(fd.as_fd(), Path::new("sub/in.txt"), OFlags::RDONLY, walk).is_ok()
            );
            for inside in ["inner", "abs-inner"] {
                let r = open_beneath(fd.as_fd(), Path::new(inside), OFlags::RDONLY, walk);
                assert_eq!(
                    r.is_ok(),
                    !walk,
                    "{inside}: a link into the root: followed by openat2, refused by the walk"
                );
            }
            let r = open_beneath(
                fd.as_fd(),
                Path::new("abs-climb/outside.txt"),
                OFlags::RDONLY,
                walk,
            );
            assert!(matches!(r, Err(SysError::Escape)), "walk={walk}: {r:?}");
        }
        // Magic links: /proc/self/root leads to the real root, whatever the policy.
        let proc = open_root(Path::new("/proc")).unwrap();
        let r = open_beneath(
            proc.as_fd(),
            Path::new("self/root/etc/hostname"),
            OFlags::RDONLY,
            false,
        );
        assert!(matches!(r, Err(SysError::Escape)), "{r:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn tempfile_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "toolcap-sys-test-{}-{}",
            std::process::id(),
            TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir.canonicalize().unwrap()
    }
}
