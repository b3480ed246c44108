//! The one module of this crate that touches the OS: reading the process environment and
//! opening a secrets file without following links.
#![allow(clippy::disallowed_methods, reason = "the secrets backend's OS layer")]

use std::ffi::OsString;
use std::io::Read;
use std::path::Path;

use capability_sandbox::{Swappable, swappable_through};
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
        // Without waiting: a FIFO's open would wait for a writer; it is refused below.
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK,
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
