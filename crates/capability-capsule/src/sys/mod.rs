//! The few system calls the capsule makes itself: handing the worker its channel as descriptors 3
//! and 4 between fork and exec, and taking them back in the worker.
#![allow(unsafe_code)] // descriptor plumbing between fork and exec; each block says why it is sound
#![allow(
    clippy::disallowed_methods,
    reason = "the capsule starts its own worker binary; the worker is confined before any tool code runs"
)]

pub(crate) mod shm;

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::Path;

/// The descriptor a worker finds its channel on.
pub(crate) const CHANNEL_FD: i32 = 3;

/// A command that starts `program` with its channel (see
/// [`WorkerDescriptors::pass_to`](crate::ring::WorkerDescriptors::pass_to)), in a session (and
/// so a process group) of its own, killed when the thread that started it goes away.
///
/// The session leaves the worker without a controlling terminal: a tool's code could otherwise
/// open `/dev/tty` and push input into the user's terminal (docs/isolation-model.md, "The
/// terminal").
pub(crate) fn worker_command(
    program: &Path,
    descriptors: crate::ring::WorkerDescriptors,
) -> std::process::Command {
    let mut command = std::process::Command::new(program);
    descriptors.pass_to(&mut command);
    let setup = || -> io::Result<()> {
        // SAFETY: setsid and prctl take plain integers.
        unsafe {
            if libc::setsid() < 0 || libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    };
    // SAFETY: the closure makes two system calls and allocates nothing.
    unsafe {
        command.pre_exec(setup);
    }
    command
}

impl crate::ring::WorkerDescriptors {
    /// Makes `command` start its program with these: the channel's socket as descriptor 3 and
    /// the shared memory as [`SHARED_FD`](crate::ring::SHARED_FD), where a worker looks for
    /// them. They stay open in this process until `command` is dropped (drop it once the
    /// worker is spawned, so that this side sees the worker's end close when it dies).
    pub fn pass_to(self, command: &mut std::process::Command) {
        let (channel, shared) = (self.channel.as_raw_fd(), self.shared.as_raw_fd());
        let hold = self;
        let setup = move || -> io::Result<()> {
            let _ = &hold;
            // SAFETY: fcntl and dup2 take plain integers; between fork and exec only the
            // descriptor table of the child is touched.
            unsafe {
                // Each is first copied above both places, so that neither is overwritten by
                // the other before it is moved (the copies close on exec).
                let channel = libc::fcntl(channel, libc::F_DUPFD_CLOEXEC, 10);
                let shared = libc::fcntl(shared, libc::F_DUPFD_CLOEXEC, 10);
                if channel < 0 || shared < 0 {
                    return Err(io::Error::last_os_error());
                }
                if libc::dup2(channel, CHANNEL_FD) != CHANNEL_FD
                    || libc::dup2(shared, crate::ring::SHARED_FD) != crate::ring::SHARED_FD
                {
                    return Err(io::Error::last_os_error());
                }
            }
            Ok(())
        };
        // SAFETY: the closure makes system calls only and allocates nothing.
        unsafe {
            command.pre_exec(setup);
        }
    }
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

/// The worker's shared memory: descriptor 4, taken (it is closed when the returned descriptor
/// is dropped; the mapping made from it stays).
pub(crate) fn adopt_shared() -> io::Result<OwnedFd> {
    let fd = crate::ring::SHARED_FD;
    // SAFETY: fcntl takes plain integers.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return Err(io::Error::other(format!(
            "no shared memory on descriptor {fd}: {}",
            io::Error::last_os_error()
        )));
    }
    // SAFETY: by the worker contract descriptor 4 is the shared memory its host passed, owned by
    // nobody else in this process; it was checked to be open above (its size and seals are
    // checked when it is mapped).
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Closes every descriptor above the channel's (anything the worker inherited by mistake).
pub(crate) fn close_descriptors_after_channel() -> io::Result<()> {
    // SAFETY: close_range closes descriptors this process does not use: at the top of a worker's
    // `main`, once the shared memory is mapped and its descriptor closed, nothing but 0-3 is
    // owned by anyone.
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
