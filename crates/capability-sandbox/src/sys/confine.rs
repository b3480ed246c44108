//! The confinement itself, as system calls: limits, no-new-privileges, Landlock and seccomp in the
//! order docs/isolation-model.md gives, the loopback listener of an egress child, and the
//! descriptor passing that hands it to the host. Everything here runs between fork (or clone)
//! and exec, or at the top of a worker's `main`, on memory prepared before.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;

use capability_types::CapabilityError;

use crate::EGRESS_PROXY_PORT;
use crate::ResourceLimits;
use crate::sys::ns;
use crate::sys::{Egress, failed};

/// `errno` as an `io::Error` without allocating.
pub(crate) fn last_error() -> io::Error {
    io::Error::last_os_error()
}

/// `Ok` when a libc call returned 0, else the error in `errno`.
pub(crate) fn check(result: libc::c_int) -> io::Result<()> {
    if result == 0 {
        Ok(())
    } else {
        Err(last_error())
    }
}

/// This process's core limit set to 0, soft and hard ([`crate::dump_no_core`]).
pub(crate) fn dump_no_core() -> io::Result<()> {
    set_limit(libc::RLIMIT_CORE, Some(0))
}

fn set_limit(resource: libc::__rlimit_resource_t, value: Option<u64>) -> io::Result<()> {
    let Some(value) = value else {
        return Ok(());
    };
    // A limit is "at most": one above the hard limit already in force (an operator's "no
    // limit", `u64::MAX`) keeps that one, which the child, its capabilities dropped, could not
    // raise anyway (`EPERM` failed the spawn).
    let mut current = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `current` is a valid rlimit for the kernel to fill.
    check(unsafe { libc::getrlimit(resource, &mut current) })?;
    let value = value.min(current.rlim_max);
    let limit = libc::rlimit {
        rlim_cur: value,
        rlim_max: value,
    };
    // SAFETY: `limit` is a valid rlimit for the duration of the call.
    check(unsafe { libc::setrlimit(resource, &limit) })
}

/// Every handler the host installed back to the default, and `SIGPIPE`, which Rust's runtime
/// ignores, too, as `std::process::Command` leaves a program's (docs/decisions.md,
/// "capability-sandbox"); other ignored signals stay ignored, as across any `exec` (`nohup`'s
/// `SIGHUP`). Runs between clone and exec: system calls only.
pub(crate) fn default_handlers() -> io::Result<()> {
    for signal in 1..=libc::SIGRTMAX() {
        if signal == libc::SIGKILL || signal == libc::SIGSTOP {
            continue;
        }
        // SAFETY: sigaction is plain data, valid all zeroes; the calls only read and set this
        // process's disposition of `signal`.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(signal, std::ptr::null(), &mut old) != 0 {
                continue;
            }
            if old.sa_sigaction != libc::SIG_DFL
                && (old.sa_sigaction != libc::SIG_IGN || signal == libc::SIGPIPE)
            {
                let mut default: libc::sigaction = std::mem::zeroed();
                default.sa_sigaction = libc::SIG_DFL;
                check(libc::sigaction(signal, &default, std::ptr::null_mut()))?;
            }
        }
    }
    Ok(())
}

/// What to do with inherited descriptors above stderr.
#[derive(Clone, Copy)]
pub(crate) enum Descriptors {
    /// Mark every descriptor from 3 up close-on-exec (a child about to `exec`).
    CloseOnExec,
    /// Leave them (a process confining itself closes what it must before preparing).
    Keep,
}

/// The most memory a confined process may lock (`RLIMIT_MEMLOCK`): Linux's own default before
/// 5.16, enough for the secure memory of gpg and its kin.
const LOCKED_MEMORY: u64 = 64 << 10;

/// The confinement itself: system calls on memory prepared before, in the order the crate
/// documents. Runs between fork and exec, or at the top of a worker's `main`.
pub(crate) fn confine(
    ruleset: RawFd,
    filter: &[libc::sock_filter],
    limits: &ResourceLimits,
    egress: Option<&Egress>,
    descriptors: Descriptors,
) -> io::Result<()> {
    if let Some(egress) = egress {
        serve_loopback(egress)?;
    }
    ns::drop_capabilities()?;
    // SAFETY: prctl takes plain integers.
    unsafe {
        check(libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL))?;
    }
    set_limit(libc::RLIMIT_AS, limits.address_space)?;
    set_limit(libc::RLIMIT_CPU, limits.cpu_seconds)?;
    set_limit(libc::RLIMIT_NPROC, limits.processes)?;
    set_limit(libc::RLIMIT_FSIZE, limits.file_size)?;
    set_limit(libc::RLIMIT_NOFILE, limits.open_files)?;
    // No core dump, soft or hard: a crash would write the process's memory where it runs, or
    // hand it to the host's crash handler outside the sandbox (docs/isolation-model.md, "Core
    // dumps").
    dump_no_core()?;
    // No real-time priority and no raising of its own, and little memory locked where no swap
    // can take it, whatever the host was started with (docs/isolation-model.md, "Priority and
    // locked memory").
    set_limit(libc::RLIMIT_RTPRIO, Some(0))?;
    set_limit(libc::RLIMIT_NICE, Some(0))?;
    set_limit(libc::RLIMIT_MEMLOCK, Some(LOCKED_MEMORY))?;
    // Nothing it makes is writable by other accounts: the file mode creation mask keeps their
    // write bit, and seccomp refuses a mask that does not (docs/isolation-model.md, "Modes
    // that open a place to others").
    // SAFETY: umask takes and returns a mode; it cannot fail.
    unsafe {
        let mask = libc::umask(0);
        libc::umask(mask | libc::S_IWOTH);
    }
    if let Descriptors::CloseOnExec = descriptors {
        // SAFETY: close_range with CLOSE_RANGE_CLOEXEC only sets flags on descriptors.
        let marked = unsafe {
            libc::syscall(
                libc::SYS_close_range,
                3u32,
                u32::MAX,
                libc::CLOSE_RANGE_CLOEXEC,
            )
        };
        if marked != 0 {
            return Err(last_error());
        }
    }
    // SAFETY: prctl and landlock_restrict_self take integers.
    unsafe {
        check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))?;
        if libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) != 0 {
            return Err(last_error());
        }
    }
    let program = libc::sock_fprog {
        len: u16::try_from(filter.len()).map_err(|_| io::Error::from_raw_os_error(libc::E2BIG))?,
        filter: filter.as_ptr().cast_mut(),
    };
    // SAFETY: prctl takes integers; seccomp reads the program, which lives across the call (the
    // kernel copies it).
    unsafe {
        if libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            0u32,
            &raw const program,
        ) != 0
        {
            return Err(last_error());
        }
    }
    Ok(())
}

/// Installs `before_exec` to run in the child between fork and exec.
///
/// The closure must do what `confine` does: system calls on memory it owns or that was prepared
/// before the fork, no allocation, no locks. Every caller in this crate builds it from
/// [`unshare`], [`ns::enter`] and [`confine`].
pub(crate) fn run_before_exec(
    command: &mut std::process::Command,
    before_exec: impl FnMut() -> io::Result<()> + Send + Sync + 'static,
) {
    // SAFETY: the closure is async-signal-safe in the sense above (its only callers are in
    // linux.rs and build it from the functions of this module).
    unsafe {
        command.pre_exec(before_exec);
    }
}

/// `unshare(flags)`.
pub(crate) fn unshare(flags: libc::c_int) -> io::Result<()> {
    // SAFETY: unshare takes flags.
    check(unsafe { libc::unshare(flags) })
}

/// In the child, inside the network namespace it was created in (or unshared): loopback up and
/// one listener on the proxy port, sent to the host over the egress channel.
pub(crate) fn serve_loopback(egress: &Egress) -> io::Result<()> {
    // SAFETY: plain socket, ioctl, bind, listen and sendmsg calls on stack memory that lives
    // across each call; every descriptor opened here is closed here.
    unsafe {
        let probe = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if probe < 0 {
            return Err(last_error());
        }
        let mut request: libc::ifreq = std::mem::zeroed();
        for (slot, byte) in request.ifr_name.iter_mut().zip(b"lo\0") {
            *slot = *byte as libc::c_char;
        }
        request.ifr_ifru.ifru_flags = (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        let up = libc::ioctl(probe, libc::SIOCSIFFLAGS, &request);
        let err = last_error();
        libc::close(probe);
        if up != 0 {
            return Err(err);
        }

        let listener = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if listener < 0 {
            return Err(last_error());
        }
        let addr = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: EGRESS_PROXY_PORT.to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(std::net::Ipv4Addr::LOCALHOST).to_be(),
            },
            sin_zero: [0; 8],
        };
        let bound = libc::bind(
            listener,
            (&raw const addr).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        );
        if bound != 0 || libc::listen(listener, 64) != 0 {
            let err = last_error();
            libc::close(listener);
            return Err(err);
        }
        let sent = send_fd(egress.channel.as_raw_fd(), listener);
        libc::close(listener);
        sent
    }
}

/// Space for one descriptor in a control message, aligned for `cmsghdr`.
#[repr(C, align(8))]
struct OneFd([u8; 32]);

/// Sends `fd` over the Unix socket `channel` (SCM_RIGHTS), with one byte of data.
pub(crate) fn send_fd(channel: RawFd, fd: RawFd) -> io::Result<()> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut control = OneFd([0; 32]);
    // SAFETY: the message header points at live stack buffers; CMSG_* compute offsets inside
    // `control`, which is large and aligned enough for one descriptor.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &raw mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.0.as_mut_ptr().cast();
        msg.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) as _;
        let header = libc::CMSG_FIRSTHDR(&raw const msg);
        (*header).cmsg_level = libc::SOL_SOCKET;
        (*header).cmsg_type = libc::SCM_RIGHTS;
        (*header).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(header).cast::<RawFd>(), fd);
        if libc::sendmsg(channel, &raw const msg, libc::MSG_NOSIGNAL) != 1 {
            return Err(last_error());
        }
    }
    Ok(())
}

/// In the host: the listener the child sent (it did so before `exec`, so it is already there).
pub(crate) fn receive_listener(
    channel: &OwnedFd,
) -> Result<std::net::TcpListener, CapabilityError> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut control = OneFd([0; 32]);
    // SAFETY: as in `send_fd`; the received descriptor is checked before it is owned.
    let fd = unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &raw mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.0.as_mut_ptr().cast();
        msg.msg_controllen = control.0.len() as _;
        let got = libc::recvmsg(
            channel.as_raw_fd(),
            &raw mut msg,
            libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC,
        );
        if got != 1 {
            return Err(failed("receiving the child's proxy listener", last_error()));
        }
        let header = libc::CMSG_FIRSTHDR(&raw const msg);
        if header.is_null()
            || (*header).cmsg_level != libc::SOL_SOCKET
            || (*header).cmsg_type != libc::SCM_RIGHTS
        {
            return Err(failed(
                "receiving the child's proxy listener",
                "no descriptor in the message",
            ));
        }
        std::ptr::read_unaligned(libc::CMSG_DATA(header).cast::<RawFd>())
    };
    // SAFETY: the kernel just installed `fd` in this process for us (SCM_RIGHTS); nothing else
    // owns it.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    Ok(std::net::TcpListener::from(owned))
}
