//! Every raw system call of the crate, and the code that runs between clone and exec.
//!
//! `unsafe` lives here and nowhere else in `capability-sandbox` (`cargo xtask structure` holds
//! it). The rest of the crate decides *what* to confine; this module does it, through functions
//! whose contracts are stated where they are defined. Each `unsafe` block carries a `SAFETY:`
//! note saying why it is sound.
#![allow(unsafe_code)]

pub(crate) mod confine;
pub(crate) mod ns;
pub(crate) mod spawn;

use std::ffi::CStr;
use std::fmt;
use std::io;
use std::os::fd::OwnedFd;

use capability_types::CapabilityError;

/// The Landlock ABI version the kernel offers, or the error that says why there is none.
pub(crate) fn landlock_abi() -> io::Result<u32> {
    // SAFETY: landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION) only returns
    // the ABI version (or an error); it reads no memory.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1u32, // LANDLOCK_CREATE_RULESET_VERSION
        )
    };
    if version < 1 {
        return Err(io::Error::last_os_error());
    }
    u32::try_from(version).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// The running kernel's release string (`uname -r`), when `uname` answers.
pub(crate) fn kernel_release() -> Option<String> {
    // SAFETY: utsname is plain data, valid all zeroes; uname fills it.
    let mut name: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: uname writes into the live struct.
    if unsafe { libc::uname(&mut name) } != 0 {
        return None;
    }
    // SAFETY: uname NUL-terminates `release`.
    let release = unsafe { CStr::from_ptr(name.release.as_ptr()) };
    Some(release.to_string_lossy().into_owned())
}

/// The `ST_*` flags of the mount `path` lies on (`statvfs`).
pub(crate) fn mount_flags(path: &std::path::Path) -> std::io::Result<libc::c_ulong> {
    use std::os::unix::ffi::OsStrExt as _;
    let path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::other("a NUL byte in the path"))?;
    // SAFETY: statvfs is plain data, valid all zeroes.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a live out-parameter.
    if unsafe { libc::statvfs(path.as_ptr(), &mut stat) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(stat.f_flag)
}

/// Whether this process may search (enter) the directory `path`, by its effective ids
/// (`faccessat(X_OK, AT_EACCESS)`).
pub(crate) fn may_search(path: &std::path::Path) -> bool {
    use std::os::unix::ffi::OsStrExt as _;
    let Ok(path) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: a NUL-terminated path; faccessat reads nothing else.
    unsafe { libc::faccessat(libc::AT_FDCWD, path.as_ptr(), libc::X_OK, libc::AT_EACCESS) == 0 }
}

/// The type bits (`S_IFMT`) of what `name` names relative to the open directory `dir`, not
/// following a final link (`fstatat(AT_SYMLINK_NOFOLLOW)`): `None` when nothing is there (`ENOENT`,
/// `ENOTDIR`), an error when it cannot be looked at.
pub(crate) fn type_at(
    dir: &std::fs::File,
    name: &std::ffi::CStr,
) -> io::Result<Option<libc::mode_t>> {
    use std::os::fd::AsRawFd as _;
    // SAFETY: stat is plain data, valid all zeroes.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a live descriptor, a NUL-terminated name and a live out-parameter.
    let done = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            &mut stat,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if done == 0 {
        return Ok(Some(stat.st_mode & libc::S_IFMT));
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::ENOENT | libc::ENOTDIR) => Ok(None),
        _ => Err(e),
    }
}

/// This process's effective user and group ids.
pub(crate) fn effective_ids() -> (u32, u32) {
    // SAFETY: geteuid and getegid cannot fail.
    unsafe { (libc::geteuid(), libc::getegid()) }
}

/// What the child needs to set up its private network: its end of the channel the listener is
/// sent over.
pub(crate) struct Egress {
    pub(crate) channel: OwnedFd,
}

/// The refusal of a step of confinement that failed: `not_available`, naming the step.
pub(crate) fn failed(what: &str, e: impl fmt::Display) -> CapabilityError {
    CapabilityError::not_available(format!("children cannot be confined here: {what}: {e}"))
}
