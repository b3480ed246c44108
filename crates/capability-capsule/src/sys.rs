//! The few system calls the capsule makes itself: handing the worker its channel as descriptor 3
//! between fork and exec, taking it back in the worker, and reading it without waiting
//! (the polling wait of `spin.rs`).
#![allow(unsafe_code)] // descriptor plumbing between fork and exec; each block says why it is sound
#![allow(
    clippy::disallowed_methods,
    reason = "the capsule starts its own worker binary; the worker is confined before any tool code runs"
)]

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::Path;

use bytes::{BufMut, BytesMut};

/// The descriptor a worker finds its channel on.
pub(crate) const CHANNEL_FD: i32 = 3;

/// A command that starts `program` with `channel` as descriptor 3, in its own process group,
/// killed when the thread that started it goes away.
pub(crate) fn worker_command(program: &Path, channel: OwnedFd) -> std::process::Command {
    let mut command = std::process::Command::new(program);
    command.process_group(0);
    let fd = channel.as_raw_fd();
    let hold = channel;
    let setup = move || -> io::Result<()> {
        // Keeps the descriptor open in the parent until the command is dropped.
        let _ = &hold;
        // SAFETY: dup2, fcntl and prctl take plain integers; between fork and exec only the
        // descriptor table of the child is touched.
        unsafe {
            if fd == CHANNEL_FD {
                if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                    return Err(io::Error::last_os_error());
                }
            } else if libc::dup2(fd, CHANNEL_FD) != CHANNEL_FD {
                return Err(io::Error::last_os_error());
            }
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    };
    // SAFETY: the closure makes system calls only and allocates nothing.
    unsafe {
        command.pre_exec(setup);
    }
    command
}

/// The worker's channel: descriptor 3, which must be a socket.
pub(crate) fn adopt_channel() -> io::Result<UnixStream> {
    // SAFETY: `stat` is a plain out-parameter for fstat.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes into `stat`, which lives across the call.
    if unsafe { libc::fstat(CHANNEL_FD, &mut stat) } != 0 {
        return Err(io::Error::other(format!(
            "no channel on descriptor {CHANNEL_FD}: {}",
            io::Error::last_os_error()
        )));
    }
    if stat.st_mode & libc::S_IFMT != libc::S_IFSOCK {
        return Err(io::Error::other(format!(
            "descriptor {CHANNEL_FD} is not a socket"
        )));
    }
    // SAFETY: by the worker contract descriptor 3 is the channel its host passed, owned by
    // nobody else in this process; it was checked to be open and a socket above.
    let fd = unsafe { OwnedFd::from_raw_fd(CHANNEL_FD) };
    // SAFETY: fcntl takes plain integers.
    if unsafe { libc::fcntl(CHANNEL_FD, libc::F_SETFD, libc::FD_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(UnixStream::from(fd))
}

/// Closes every descriptor above the channel (anything the worker inherited by mistake).
pub(crate) fn close_descriptors_after_channel() -> io::Result<()> {
    // SAFETY: close_range closes descriptors this process does not use: at the top of a worker's
    // `main` nothing but 0-3 is owned by anyone.
    let closed =
        unsafe { libc::syscall(libc::SYS_close_range, CHANNEL_FD as u32 + 1, u32::MAX, 0u32) };
    if closed == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Whether the kernel shows `pid` under a seccomp filter with `no_new_privs`: what a worker that
/// says it confined itself must show before the host believes it (`/proc/<pid>/status`). Landlock
/// leaves no mark there; the filter comes after it in the same function, so a filter is the sign
/// that the whole sequence ran.
pub(crate) fn shows_confinement(pid: u32) -> io::Result<bool> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .map(str::trim)
    };
    Ok(field("Seccomp:") == Some("2") && field("NoNewPrivs:") == Some("1"))
}

/// Reads what `fd` (non-blocking) holds now into `buf`: `Ok(None)` when nothing is there,
/// `Ok(Some(0))` at end of file.
pub(crate) fn read_now(fd: BorrowedFd<'_>, buf: &mut BytesMut) -> io::Result<Option<usize>> {
    if buf.capacity() - buf.len() < 4096 {
        buf.reserve(64 << 10);
    }
    let spare = buf.chunk_mut();
    // SAFETY: `read` writes at most `spare.len()` bytes into the buffer's spare capacity, which
    // `spare` borrows for the call; no other reference to it exists.
    let n = unsafe { libc::read(fd.as_raw_fd(), spare.as_mut_ptr().cast(), spare.len()) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
            _ => Err(e),
        };
    }
    let n = usize::try_from(n).unwrap_or(0);
    // SAFETY: `read` initialised the first `n` bytes of the spare capacity.
    unsafe { buf.advance_mut(n) };
    Ok(Some(n))
}
