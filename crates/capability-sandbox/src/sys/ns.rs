//! The parts of the confinement that run in the child before it confines itself: its own user
//! (unless the host is root), PID and mount namespaces, the fresh `/proc`, the masks over hidden
//! places, the process limit that binds root, and the capabilities it gives up. System calls on
//! memory prepared in the parent only.
use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use crate::hide::Mask;

/// Everything the child needs to set up its namespaces, built in the parent.
#[derive(Debug, Clone)]
pub(crate) struct Namespaces {
    /// The host runs as root: no user namespace (root needs none to create the others), and the
    /// process limit is the PID namespace's `pid_max`.
    pub(crate) root: bool,
    /// `/proc/self/uid_map` and `gid_map` contents for a user namespace: the host's own ids.
    pub(crate) uid_map: Vec<u8>,
    pub(crate) gid_map: Vec<u8>,
    /// Places to cover.
    pub(crate) masks: Vec<Mask>,
    /// The write roots: every other mount of the child's tree is made read-only (at most
    /// [`MAX_WRITABLE`]).
    pub(crate) writable: Vec<CString>,
    /// The value written to the PID namespace's `pid_max` (root only: `RLIMIT_NPROC` does not
    /// bind root).
    pub(crate) pid_max: Option<Vec<u8>>,
    /// The child's Landlock rules reach `/proc`: a fresh procfs is then required, never the
    /// host's.
    pub(crate) proc_required: bool,
    /// `/proc` is itself hidden (covered after the process limit is set).
    pub(crate) proc_hidden: bool,
    /// The policy grants no path at all (a capsule worker's): the process's root becomes an
    /// empty file system of its own, and the host's tree is detached, so that no path names
    /// anything (docs/isolation-model.md, "An empty root").
    pub(crate) empty_root: bool,
    /// The children's homes (`SandboxPolicy::homes`): each child sees its own and no other.
    pub(crate) homes: Option<Homes>,
}

/// Where a sandbox's children have their homes: `top`, which the Landlock ruleset grants, is
/// made read-only in each child's mount namespace, and `dir`, where every child's home is made,
/// is covered there by an empty file system into which the child's own home is bound back
/// (docs/isolation-model.md, "Each child's own home").
#[derive(Debug, Clone)]
pub(crate) struct Homes {
    pub(crate) top: CString,
    pub(crate) dir: CString,
}

/// What a child's namespace set-up does: in a new PID namespace (`spawn`) or not (`apply_to`,
/// whose `fork` cannot put the program itself in one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Spawn,
    Apply,
}

impl Namespaces {
    /// These namespaces with `first` bound before their own masks: what one child is kept from
    /// of what runs later (`git.rs`) pins places that a mask made after it must not carry off.
    pub(crate) fn with_first(&self, first: Vec<Mask>) -> Namespaces {
        let mut ns = self.clone();
        ns.masks.splice(0..0, first);
        ns
    }

    /// `clone` / `unshare` flags for `mode`, with or without a network namespace.
    pub(crate) fn flags(&self, mode: Mode, network: bool) -> libc::c_int {
        let mut flags = 0;
        if mode == Mode::Spawn {
            flags |= libc::CLONE_NEWPID;
        }
        // Always a mount namespace, though it costs about a fifth of a spawn (its teardown
        // waits for an RCU grace period): Landlock does not mediate a file's metadata, so only
        // a read-only mount keeps a child from changing the mode, times or attributes of what
        // lies outside its write roots (docs/isolation-model.md, "Metadata").
        flags |= libc::CLONE_NEWNS;
        // And an IPC namespace: System V shared memory, queues and semaphores, and POSIX
        // message queues, are not files, so Landlock does not mediate them; in the host's
        // namespace a child could attach to the host's segments and leave objects behind for
        // the next child (docs/isolation-model.md, "IPC").
        flags |= libc::CLONE_NEWIPC;
        if network {
            flags |= libc::CLONE_NEWNET;
        }
        if !self.root {
            flags |= libc::CLONE_NEWUSER;
        }
        flags
    }
}

fn last_error() -> io::Error {
    io::Error::last_os_error()
}

fn check(result: libc::c_int) -> io::Result<()> {
    if result == 0 {
        Ok(())
    } else {
        Err(last_error())
    }
}

/// Writes `contents` to the file at `path` with system calls only.
pub(crate) fn write_file(path: &CStr, contents: &[u8]) -> io::Result<()> {
    // SAFETY: open/write/close on a NUL-terminated path and a live buffer.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(last_error());
        }
        let written = libc::write(fd, contents.as_ptr().cast(), contents.len());
        let err = last_error();
        libc::close(fd);
        if written != contents.len() as isize {
            return Err(err);
        }
    }
    Ok(())
}

/// The host's `/proc`, for a spawned program to set its score through ([`first_to_end`]).
pub(crate) fn host_proc() -> io::Result<OwnedFd> {
    // SAFETY: open of a NUL-terminated literal path.
    let fd = unsafe {
        libc::open(
            c"/proc".as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(last_error());
    }
    // SAFETY: open just returned it, and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Makes this process the first the kernel's out-of-memory killer ends (`oom_score_adj` 1000,
/// `path` beneath `dir`), whatever the host's own score, which it inherited (a service's
/// `OOMScoreAdjust=`); written while a root host still holds `CAP_SYS_RESOURCE`, it is the
/// floor as well (docs/isolation-model.md, "Memory"). Only for a process that shares no memory
/// with the host: the kernel writes one process's score into every other that shares its
/// memory, but a `vfork` child's.
pub(crate) fn first_to_end(dir: RawFd, path: &CStr) -> io::Result<()> {
    // SAFETY: openat/write/close on a NUL-terminated path and a live buffer.
    unsafe {
        let fd = libc::openat(dir, path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(last_error());
        }
        let written = libc::write(fd, b"1000".as_ptr().cast(), 4);
        let err = last_error();
        libc::close(fd);
        if written != 4 {
            return Err(err);
        }
    }
    Ok(())
}

/// Creates an empty file with mode `000` at `path` (a mount point for a bind mount).
fn create_empty(path: &CStr) -> io::Result<()> {
    // SAFETY: open of a NUL-terminated path; the descriptor is closed here.
    unsafe {
        let fd = libc::open(
            path.as_ptr(),
            libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_CLOEXEC,
            0,
        );
        if fd < 0 {
            return Err(last_error());
        }
        libc::close(fd);
    }
    Ok(())
}

fn mount(
    source: &CStr,
    target: &CStr,
    fstype: Option<&CStr>,
    flags: libc::c_ulong,
    data: Option<&CStr>,
) -> io::Result<()> {
    // SAFETY: every pointer is a NUL-terminated string that lives across the call, or null.
    check(unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            fstype.map_or(std::ptr::null(), CStr::as_ptr),
            flags,
            data.map_or(std::ptr::null(), |d| d.as_ptr().cast()),
        )
    })
}

const HIDDEN: libc::c_ulong = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;

/// The scratch place the blank file and the kept devices are staged in: a tmpfs mounted over
/// `/proc` for a moment (replaced by the fresh procfs, or uncovered again, afterwards).
const STAGE: &CStr = c"/proc";
const BLANK: &CStr = c"/proc/blank";

/// Staging names for kept devices: `/proc/keep0` ... (at most this many).
const KEEP_NAMES: [&CStr; 8] = [
    c"/proc/keep0",
    c"/proc/keep1",
    c"/proc/keep2",
    c"/proc/keep3",
    c"/proc/keep4",
    c"/proc/keep5",
    c"/proc/keep6",
    c"/proc/keep7",
];

/// The most device files a hidden directory can keep.
pub(crate) const MAX_KEPT: usize = KEEP_NAMES.len();

/// Sets up the namespaces the child was created in (or has just unshared): the user namespace
/// maps, a private mount tree, the masks, its own home (`home`, a directory in
/// [`Homes::dir`]), a fresh `/proc` and the process limit.
pub(crate) fn enter(
    ns: &Namespaces,
    mode: Mode,
    flags: libc::c_int,
    home: Option<&CStr>,
) -> io::Result<()> {
    if mode == Mode::Apply {
        // A process confining itself (a worker, a guarded server before it executes) shares
        // no memory with the host; a spawned program sets its own (`spawn.rs`).
        first_to_end(libc::AT_FDCWD, c"/proc/self/oom_score_adj")?;
    }
    if flags & libc::CLONE_NEWUSER != 0 {
        write_file(c"/proc/self/setgroups", b"deny")?;
        write_file(c"/proc/self/uid_map", &ns.uid_map)?;
        write_file(c"/proc/self/gid_map", &ns.gid_map)?;
    }
    if let (Mode::Spawn, Some(value)) = (mode, &ns.pid_max) {
        // The sysctl is the writer's own PID namespace's (Linux 6.14+), through any procfs.
        write_file(c"/proc/sys/kernel/pid_max", value)?;
    }
    if flags & libc::CLONE_NEWNS == 0 {
        return Ok(());
    }
    // `apply_to`'s program entered its working directory before this (`Command` changes it
    // before the code that runs here), so it is still in the directory as it was: on the
    // read-only tree, beneath any cover. It enters it again by path once the tree is made.
    // `spawn` enters it afterwards.
    let mut cwd = [0 as libc::c_char; libc::PATH_MAX as usize];
    // SAFETY: getcwd writes at most the buffer's length, NUL-terminated.
    if mode == Mode::Apply && unsafe { libc::getcwd(cwd.as_mut_ptr(), cwd.len()) }.is_null() {
        return Err(last_error());
    }
    // Nothing mounted here reaches the host's mount namespace, and nothing mounted there later
    // reaches this one.
    mount(c"none", c"/", None, libc::MS_REC | libc::MS_PRIVATE, None)?;
    if ns.empty_root {
        // The tree is about to be detached whole: nothing in it needs making read-only or
        // covering, and nothing is left to enter again (the working directory is the new root).
        return empty_root();
    }
    read_only_but(&ns.writable)?;
    cover(ns)?;
    if let Some(homes) = &ns.homes {
        // After the masks: one beneath another child's home is covered with it.
        own_home(homes, home)?;
    }
    if mode == Mode::Spawn && ns.proc_required {
        fresh_proc()?;
    }
    if ns.proc_hidden && ns.masks.iter().any(Mask::is_proc) {
        hide_dir(c"/proc")?;
    }
    if mode == Mode::Apply {
        // SAFETY: chdir to the NUL-terminated path getcwd wrote above.
        check(unsafe { libc::chdir(cwd.as_ptr()) })?;
    }
    Ok(())
}

/// The most write roots a child's tree keeps writable: their trees are held as descriptors on
/// the stack between being cloned and being put back.
pub(crate) const MAX_WRITABLE: usize = 64;

/// Makes every mount of this mount namespace read-only and without devices (`nodev`) except
/// the trees at `writable`, which keep the other flags they have on the host (a mount inside a
/// write root that the host made read-only stays so), and `/dev`, which keeps its devices (the
/// system devices a child may open live there, and Landlock keeps the rest of it out of reach).
/// Each of those trees is cloned first (`open_tree`), the whole tree is then made read-only
/// and device-less at once (`mount_setattr`, recursively), and the clones are moved back over
/// their places, `/dev` first. A read-only mount refuses what Landlock does not see: `chmod`,
/// `chown`, `utime` and extended attributes, by path or through a descriptor. A `nodev` mount
/// refuses opening a device node, which Landlock grants beneath a read root whatever the
/// file: a copy of a disk's node in the reach would otherwise be the whole disk.
fn read_only_but(writable: &[CString]) -> io::Result<()> {
    // A write root of `/` is the whole tree: nothing lies outside it, and a clone moved over
    // `/` would not be the process's root anyway.
    if writable.iter().any(|w| w.as_bytes() == b"/") {
        return Ok(());
    }
    if writable.len() > MAX_WRITABLE {
        return Err(io::Error::from_raw_os_error(libc::E2BIG));
    }
    let mut trees: [libc::c_int; MAX_WRITABLE] = [-1; MAX_WRITABLE];
    let mut dev: libc::c_int = -1;
    let mut apply = || -> io::Result<()> {
        for (tree, path) in trees.iter_mut().zip(writable) {
            *tree = clone_tree(path)?;
            set_attr(*tree, c"", libc::AT_EMPTY_PATH, libc::MOUNT_ATTR_NODEV)?;
        }
        match clone_tree(c"/dev") {
            Ok(fd) => {
                dev = fd;
                set_attr(dev, c"", libc::AT_EMPTY_PATH, libc::MOUNT_ATTR_RDONLY)?;
            }
            // A tree without `/dev` (a minimal container) has no devices to keep.
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
            Err(e) => return Err(e),
        }
        set_attr(
            libc::AT_FDCWD,
            c"/",
            0,
            libc::MOUNT_ATTR_RDONLY | libc::MOUNT_ATTR_NODEV,
        )?;
        // `/dev` first: a write root inside it (a personality may lift the floor for
        // `/dev/shm`) goes back over the clone, not under it.
        let back = (dev >= 0).then_some((dev, c"/dev"));
        for (tree, path) in back.into_iter().chain(
            trees
                .iter()
                .copied()
                .zip(writable.iter().map(CString::as_c_str)),
        ) {
            move_tree(tree, path)?;
        }
        Ok(())
    };
    let result = apply();
    for fd in trees.into_iter().chain([dev]).filter(|fd| *fd >= 0) {
        // SAFETY: closes a descriptor open_tree returned above.
        unsafe { libc::close(fd) };
    }
    result
}

/// A detached clone of the tree of mounts at `path` (`open_tree`, recursively, close-on-exec).
fn clone_tree(path: &CStr) -> io::Result<libc::c_int> {
    // SAFETY: open_tree of a NUL-terminated path; the caller closes the descriptor.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            path.as_ptr(),
            libc::OPEN_TREE_CLONE | libc::OPEN_TREE_CLOEXEC | libc::AT_RECURSIVE as u32,
        )
    };
    if fd < 0 {
        return Err(last_error());
    }
    Ok(fd as libc::c_int)
}

/// Moves the detached tree `tree` (from [`clone_tree`]) onto `path` (`move_mount`).
fn move_tree(tree: libc::c_int, path: &CStr) -> io::Result<()> {
    // SAFETY: move_mount of a descriptor the caller holds onto a NUL-terminated path.
    let moved = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree,
            c"".as_ptr(),
            libc::AT_FDCWD,
            path.as_ptr(),
            libc::MOVE_MOUNT_F_EMPTY_PATH,
        )
    };
    if moved != 0 {
        return Err(last_error());
    }
    Ok(())
}

/// Sets `attributes` on every mount of the tree at `path` beneath `dirfd` (`mount_setattr`,
/// recursively; `flags` may add `AT_EMPTY_PATH` for the tree of a descriptor itself).
fn set_attr(
    dirfd: libc::c_int,
    path: &CStr,
    flags: libc::c_int,
    attributes: u64,
) -> io::Result<()> {
    let attr = libc::mount_attr {
        attr_set: attributes,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: mount_setattr of a NUL-terminated path with a live attribute structure of the
    // size passed.
    let set = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            dirfd,
            path.as_ptr(),
            (libc::AT_RECURSIVE | flags) as libc::c_uint,
            &raw const attr,
            std::mem::size_of::<libc::mount_attr>(),
        )
    };
    if set != 0 {
        return Err(last_error());
    }
    Ok(())
}

/// Binds `path` onto itself, then remounts that bind with `flags`.
fn rebind(path: &CStr, flags: libc::c_ulong) -> io::Result<()> {
    mount(path, path, None, libc::MS_BIND | libc::MS_REC, None)?;
    mount(
        c"none",
        path,
        None,
        libc::MS_REMOUNT | libc::MS_BIND | flags,
        None,
    )
}

/// Covers every mask. Directory masks are empty read-only tmpfs mounts; file masks bind an empty
/// mode-`000` file staged on a scratch tmpfs, which is detached again afterwards.
fn cover(ns: &Namespaces) -> io::Result<()> {
    if ns
        .masks
        .iter()
        .all(|m| matches!(m, Mask::Dir { path, .. } if path.as_bytes() == b"/proc"))
    {
        return Ok(());
    }
    mount(
        c"toolcap",
        STAGE,
        Some(c"tmpfs"),
        HIDDEN,
        Some(c"mode=0700,size=64k"),
    )?;
    create_empty(BLANK)?;
    for mask in &ns.masks {
        match mask {
            // `/proc` holds the stage; it is covered after the stage is gone (`enter`).
            mask if mask.is_proc() => {}
            Mask::File { path } => {
                mount(BLANK, path, None, libc::MS_BIND, None)?;
                mount(
                    c"none",
                    path,
                    None,
                    libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | HIDDEN,
                    None,
                )?;
            }
            Mask::Pin { path } => {
                mount(path, path, None, libc::MS_BIND | libc::MS_REC, None)?;
            }
            // A bind takes the flags of the mount it is made from: each is remounted with its
            // own, keeping `flags` of the mount the place lies on.
            Mask::Writable { path, flags } => rebind(path, *flags)?,
            Mask::ReadOnly { path, flags } => rebind(path, libc::MS_RDONLY | HIDDEN | flags)?,
            Mask::Dir { path, keep } if keep.is_empty() => hide_dir(path)?,
            Mask::Dir { path, keep } => {
                // Stage the kept devices first: the tmpfs about to cover them hides the
                // originals.
                for (device, stage) in keep.iter().zip(KEEP_NAMES) {
                    create_empty(stage)?;
                    mount(device, stage, None, libc::MS_BIND, None)?;
                }
                mount(
                    c"toolcap-hidden",
                    path,
                    Some(c"tmpfs"),
                    libc::MS_NOSUID | libc::MS_NOEXEC,
                    Some(c"mode=755,size=4k"),
                )?;
                for (device, stage) in keep.iter().zip(KEEP_NAMES) {
                    create_empty(device)?;
                    mount(stage, device, None, libc::MS_BIND, None)?;
                }
                mount(
                    c"none",
                    path,
                    None,
                    libc::MS_REMOUNT | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NOEXEC,
                    None,
                )?;
            }
        }
    }
    // SAFETY: umount2 of a NUL-terminated path.
    check(unsafe { libc::umount2(STAGE.as_ptr(), libc::MNT_DETACH) })
}

/// Leaves the child only its own home of those in `homes.dir`: the home's tree cloned while it
/// can still be reached (writable, as the write root it lies in), `homes.top` bound read-only
/// (the Landlock rule that lets the child write its home is there, and a rule on a directory a
/// mount covers is not consulted), `homes.dir` covered by an empty tmpfs, and the clone moved
/// onto a directory of the same name made in it; the tmpfs is then made read-only. The child's
/// home keeps its path, and no other home, nor anything a child left beside them, is there.
fn own_home(homes: &Homes, home: Option<&CStr>) -> io::Result<()> {
    let tree = match home {
        Some(home) => Some((clone_tree(home)?, home)),
        None => None,
    };
    let apply = || -> io::Result<()> {
        rebind(&homes.top, libc::MS_RDONLY | HIDDEN)?;
        mount(
            c"toolcap-homes",
            &homes.dir,
            Some(c"tmpfs"),
            HIDDEN,
            Some(c"mode=0700,size=4k,nr_inodes=2"),
        )?;
        if let Some((tree, home)) = tree {
            // SAFETY: mkdir of a NUL-terminated path.
            check(unsafe { libc::mkdir(home.as_ptr(), 0o700) })?;
            move_tree(tree, home)?;
        }
        mount(
            c"none",
            &homes.dir,
            None,
            libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | HIDDEN,
            None,
        )
    };
    let result = apply();
    if let Some((tree, _)) = tree {
        // SAFETY: closes the descriptor open_tree returned above.
        unsafe { libc::close(tree) };
    }
    result
}

/// A procfs of the child's own PID namespace over `/proc`, when its reach includes `/proc`: the
/// host's processes are not in it. An unprivileged host inside a container may not be allowed to
/// mount one (the container's own is partly covered): the spawn then fails, rather than leave the
/// host's in reach.
fn fresh_proc() -> io::Result<()> {
    mount(c"proc", c"/proc", Some(c"proc"), HIDDEN, None)
}

/// Makes an empty, read-only tmpfs the root of this mount namespace and detaches the tree that
/// was there, the working directory moved into the new root. Landlock refuses opening what a
/// path names, but not `stat`, `access`, `readlink`, `listxattr` or an `inotify` watch; in an
/// empty tree every path names nothing, so each of them finds nothing (`ENOENT`) instead of
/// telling what lies there. For a process that may open no path at all (a capsule worker).
fn empty_root() -> io::Result<()> {
    mount(
        c"toolcap-empty",
        STAGE,
        Some(c"tmpfs"),
        libc::MS_RDONLY | HIDDEN,
        Some(c"mode=0555,size=4k,nr_inodes=1"),
    )?;
    // SAFETY: chdir, pivot_root and umount2 of NUL-terminated paths. `pivot_root(".", ".")`
    // stacks the old root on the new one at the same place; detaching `.` then takes the old
    // root (and every mount beneath it) away, leaving the empty one.
    unsafe {
        check(libc::chdir(STAGE.as_ptr()))?;
        if libc::syscall(libc::SYS_pivot_root, c".".as_ptr(), c".".as_ptr()) != 0 {
            return Err(last_error());
        }
        check(libc::umount2(c".".as_ptr(), libc::MNT_DETACH))?;
        check(libc::chdir(c"/".as_ptr()))
    }
}

/// An empty, read-only, mode-`000` tmpfs over the directory `path`.
fn hide_dir(path: &CStr) -> io::Result<()> {
    mount(
        c"toolcap-hidden",
        path,
        Some(c"tmpfs"),
        libc::MS_RDONLY | HIDDEN,
        Some(c"mode=000,size=4k,nr_inodes=1"),
    )
}

/// `SECBIT_NOROOT`, `SECBIT_NO_SETUID_FIXUP`, `SECBIT_NO_CAP_AMBIENT_RAISE`, each locked, and
/// `SECBIT_KEEP_CAPS_LOCKED`: executing a program as uid 0 grants no capability.
const SECUREBITS: libc::c_ulong = 0b1110_1111;

/// `_LINUX_CAPABILITY_VERSION_3`.
const CAPABILITY_VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Gives up every capability for good: the securebits that stop `execve` from granting root's
/// capabilities again, the bounding set, the ambient set, then the effective, permitted and
/// inheritable sets; checked afterwards. A process without `CAP_SETPCAP` (an unprivileged host
/// that made no user namespace) cannot change its securebits or bounding set, and needs not:
/// it has no capability to give up, and `no_new_privs` keeps `execve` from granting any.
pub(crate) fn drop_capabilities() -> io::Result<()> {
    // SAFETY: prctl and capget/capset on live stack structures of the kernel's layout.
    unsafe {
        if libc::prctl(libc::PR_SET_SECUREBITS, SECUREBITS, 0, 0, 0) != 0 {
            let err = last_error();
            if err.raw_os_error() != Some(libc::EPERM) {
                return Err(err);
            }
        }
        for cap in 0..64 {
            if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 {
                match last_error().raw_os_error() {
                    Some(libc::EINVAL) => break, // past the last capability
                    Some(libc::EPERM) => {}      // see above
                    _ => return Err(last_error()),
                }
            }
        }
        check(libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        ))?;
        let mut header = CapHeader {
            version: CAPABILITY_VERSION_3,
            pid: 0,
        };
        let none = [CapData {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        if libc::syscall(libc::SYS_capset, &raw mut header, none.as_ptr()) != 0 {
            return Err(last_error());
        }
        let mut now = [CapData {
            effective: 1,
            permitted: 1,
            inheritable: 1,
        }; 2];
        header.version = CAPABILITY_VERSION_3;
        if libc::syscall(libc::SYS_capget, &raw mut header, now.as_mut_ptr()) != 0 {
            return Err(last_error());
        }
        if now
            .iter()
            .any(|d| d.effective | d.permitted | d.inheritable != 0)
        {
            return Err(io::Error::from_raw_os_error(libc::EPERM));
        }
    }
    Ok(())
}

/// The most `pid_max` may be (`PID_MAX_LIMIT` on 64-bit kernels, 4 Mi): the kernel refuses
/// more, so a larger process limit (an operator's "no limit") is this one, not a failed spawn.
const PID_MAX_LIMIT: u64 = 4 << 20;

/// The value for `pid_max` that allows `processes` processes in a fresh PID namespace (the
/// kernel refuses values below 301 and above [`PID_MAX_LIMIT`]).
pub(crate) fn pid_max_for(processes: u64) -> Vec<u8> {
    CString::new(
        processes
            .saturating_add(1)
            .clamp(301, PID_MAX_LIMIT)
            .to_string(),
    )
    .map(CString::into_bytes)
    .unwrap_or_default()
}
