//! The Linux implementation: everything that allocates happens in [`prepare`]; the closure run in
//! the child makes system calls only.
#![allow(unsafe_code)] // raw system calls between fork and exec; each block says why it is sound

use std::collections::BTreeMap;
use std::ffi::{CStr, CString};
use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::sync::Arc;

use crate::bpf::{self, Decision};
use capability_types::CapabilityError;
use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, NetPort, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope, path_beneath_rules,
};

use crate::{
    EGRESS_PROXY_PORT, ResourceLimits, SYSTEM_DEVICES, SYSTEM_READ_DIRS, SandboxPolicy, Support,
};

/// The newest ABI this crate asks for; older kernels get what they have (best effort), and a
/// kernel without Landlock is refused.
const WANTED_ABI: ABI = ABI::V6;

pub(crate) fn probe() -> Support {
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
        let err = io::Error::last_os_error();
        let why = match err.raw_os_error() {
            Some(libc::ENOSYS) => "the kernel has no Landlock (ENOSYS)".to_owned(),
            Some(libc::EOPNOTSUPP) => "Landlock is disabled at boot (EOPNOTSUPP)".to_owned(),
            _ => format!("Landlock is unavailable: {err}"),
        };
        return Support::unsupported(why);
    }
    Support {
        landlock_abi: u32::try_from(version).ok(),
        refusal: None,
    }
}

/// The parts of a sandbox built in the parent.
pub(crate) struct Prepared {
    /// The Landlock ruleset; shared by every application (the child restricts itself with the
    /// descriptor it inherited).
    ruleset: Arc<OwnedFd>,
    filter: Vec<libc::sock_filter>,
    limits: ResourceLimits,
    egress: Option<Maps>,
}

/// The user namespace maps of a child with egress (written when it does not run as root).
#[derive(Clone)]
struct Maps {
    root: bool,
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
}

/// What the child needs to set up its private network: its end of the channel the listener is
/// sent over, and its maps.
struct Egress {
    channel: OwnedFd,
    maps: Maps,
}

impl fmt::Debug for Prepared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Prepared")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

fn failed(what: &str, e: impl fmt::Display) -> CapabilityError {
    CapabilityError::not_available(format!("children cannot be confined here: {what}: {e}"))
}

pub(crate) fn prepare(
    policy: &SandboxPolicy,
    support: &Support,
) -> Result<Prepared, CapabilityError> {
    let abi = WANTED_ABI;
    let read = AccessFs::ReadFile | AccessFs::ReadDir;
    let exec = AccessFs::from_read(abi);
    let write = AccessFs::from_all(abi) & !AccessFs::Execute;
    let ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))
        .and_then(|r| r.handle_access(AccessNet::from_all(abi)))
        .and_then(|r| r.scope(Scope::from_all(abi)))
        .and_then(Ruleset::create)
        .and_then(|r| r.add_rules(path_beneath_rules(policy.exec_paths(), exec)))
        .and_then(|r| r.add_rules(path_beneath_rules(policy.system(SYSTEM_READ_DIRS), read)))
        .and_then(|r| r.add_rules(path_beneath_rules(&policy.read, read)))
        .and_then(|r| r.add_rules(path_beneath_rules(&policy.write, write)))
        .and_then(|r| {
            r.add_rules(path_beneath_rules(
                policy.system(SYSTEM_DEVICES),
                read | AccessFs::WriteFile,
            ))
        })
        .and_then(|r| {
            // With egress, the proxy's port on the child's own loopback is the one TCP
            // destination.
            let ports = policy
                .egress
                .then(|| Ok(NetPort::new(EGRESS_PROXY_PORT, AccessNet::ConnectTcp)));
            r.add_rules(ports)
        })
        .map_err(|e| failed("Landlock ruleset", e))?;
    let ruleset: Option<OwnedFd> = ruleset.into();
    let ruleset = Arc::new(
        ruleset.ok_or_else(|| failed("Landlock", "the kernel would not enforce the ruleset"))?,
    );
    if support.landlock_abi().is_none() {
        return Err(failed("Landlock", "no ABI version"));
    }

    let filter = bpf::compile(&decisions(policy)).map_err(|e| failed("seccomp filter", e))?;
    let egress = policy.egress.then(|| {
        // SAFETY: geteuid and getegid cannot fail.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        Maps {
            root: uid == 0,
            uid_map: format!("{uid} {uid} 1").into_bytes(),
            gid_map: format!("{gid} {gid} 1").into_bytes(),
        }
    });
    Ok(Prepared {
        ruleset,
        filter,
        limits: policy.limits,
        egress,
    })
}

/// What the seccomp filter decides, per system call: the calls a confined process never needs
/// fail with `EPERM`; `socket` and `clone` depend on their arguments; `clone3` fails with
/// `ENOSYS` so that the C library falls back to `clone`, whose flags the filter can see.
fn decisions(policy: &SandboxPolicy) -> BTreeMap<u32, Decision> {
    let always = [
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_chroot,
        libc::SYS_unshare,
        libc::SYS_setns,
        libc::SYS_move_mount,
        libc::SYS_open_tree,
        libc::SYS_fsopen,
        libc::SYS_fsmount,
        libc::SYS_fsconfig,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        libc::SYS_kexec_load,
        libc::SYS_userfaultfd,
        libc::SYS_personality,
    ];
    let eperm = Decision::Errno(libc::EPERM as u32);
    let nr = |n: libc::c_long| n as u32;
    let mut d: BTreeMap<u32, Decision> =
        always.into_iter().map(|n| (nr(n), eperm.clone())).collect();
    // Sockets: Unix domain only. This, with Landlock's TCP rules, is what keeps the child off
    // the network (see docs/decisions.md: a network namespace per spawn cost 0.7 ms). With
    // egress, Internet sockets too (the namespace has nothing but the proxy); an isolated worker
    // may create none at all. socketpair stays allowed: an anonymous connected pair reaches
    // nothing (an async runtime uses one to deliver signals).
    let socket = if !policy.sockets {
        eperm.clone()
    } else if policy.egress {
        Decision::SocketFamilies(vec![
            libc::AF_UNIX as u32,
            libc::AF_INET as u32,
            libc::AF_INET6 as u32,
        ])
    } else {
        Decision::SocketFamilies(vec![libc::AF_UNIX as u32])
    };
    d.insert(nr(libc::SYS_socket), socket);
    if !policy.new_processes {
        for n in [
            libc::SYS_execve,
            libc::SYS_execveat,
            #[cfg(target_arch = "x86_64")]
            libc::SYS_fork,
            #[cfg(target_arch = "x86_64")]
            libc::SYS_vfork,
        ] {
            d.insert(nr(n), eperm.clone());
        }
    }
    // clone with any namespace flag; without new processes, any clone that is not a thread
    // (threads stay allowed: an async runtime needs them, and they share the confinement).
    let namespaces = libc::CLONE_NEWUSER
        | libc::CLONE_NEWNS
        | libc::CLONE_NEWNET
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWIPC
        | libc::CLONE_NEWUTS
        | libc::CLONE_NEWCGROUP;
    d.insert(
        nr(libc::SYS_clone),
        Decision::CloneFlags {
            refused: namespaces as u32,
            threads_only: !policy.new_processes,
        },
    );
    d.insert(nr(libc::SYS_clone3), Decision::Errno(libc::ENOSYS as u32));
    d
}

/// `errno` as an `io::Error` without allocating.
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

fn set_limit(resource: libc::__rlimit_resource_t, value: Option<u64>) -> io::Result<()> {
    let Some(value) = value else {
        return Ok(());
    };
    let limit = libc::rlimit {
        rlim_cur: value,
        rlim_max: value,
    };
    // SAFETY: `limit` is a valid rlimit for the duration of the call.
    check(unsafe { libc::setrlimit(resource, &limit) })
}

/// What to do with inherited descriptors above stderr.
#[derive(Clone, Copy)]
enum Descriptors {
    /// Mark every descriptor from 3 up close-on-exec (a child about to `exec`).
    CloseOnExec,
    /// Leave them (a process confining itself closes what it must before preparing).
    Keep,
}

/// The confinement itself: system calls on memory prepared before, in the order the crate
/// documents. Runs between fork and exec, or at the top of a worker's `main`.
fn confine(
    ruleset: RawFd,
    filter: &[libc::sock_filter],
    limits: &ResourceLimits,
    egress: Option<&Egress>,
    descriptors: Descriptors,
) -> io::Result<()> {
    if let Some(egress) = egress {
        enter_private_network(egress)?;
    }
    // SAFETY: prctl takes plain integers.
    unsafe {
        check(libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL))?;
    }
    set_limit(libc::RLIMIT_AS, limits.address_space)?;
    set_limit(libc::RLIMIT_CPU, limits.cpu_seconds)?;
    set_limit(libc::RLIMIT_NPROC, limits.processes)?;
    set_limit(libc::RLIMIT_FSIZE, limits.file_size)?;
    set_limit(libc::RLIMIT_NOFILE, limits.open_files)?;
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

/// The number of threads of this process, from `/proc/self/status`.
fn thread_count() -> io::Result<usize> {
    #[allow(
        clippy::disallowed_methods,
        reason = "the sandbox reads its own /proc/self/status before confining itself"
    )]
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no Threads: line"))
}

impl Prepared {
    pub(crate) fn confine_current_process(self) -> Result<(), CapabilityError> {
        let threads = thread_count().map_err(|e| failed("counting this process's threads", e))?;
        if threads != 1 {
            return Err(failed(
                "confining this process",
                format!("it has {threads} threads; confine before starting any"),
            ));
        }
        if self.egress.is_some() {
            return Err(failed(
                "confining this process",
                "the egress proxy is for children only",
            ));
        }
        confine(
            self.ruleset.as_raw_fd(),
            &self.filter,
            &self.limits,
            None,
            Descriptors::Keep,
        )
        .map_err(|e| failed("confining this process", e))
    }

    /// With egress: a fresh channel, the child's end (with the maps) and the host's end.
    fn egress_channel(&self) -> Result<(Option<Egress>, Option<OwnedFd>), CapabilityError> {
        let Some(maps) = &self.egress else {
            return Ok((None, None));
        };
        let (host_end, child_end) =
            std::os::unix::net::UnixStream::pair().map_err(|e| failed("egress channel", e))?;
        let egress = Egress {
            channel: OwnedFd::from(child_end),
            maps: maps.clone(),
        };
        Ok((Some(egress), Some(OwnedFd::from(host_end))))
    }

    /// Installs the confinement into `command`; returns the host's end of the egress channel
    /// when the policy has egress. Reusable: each call duplicates the ruleset descriptor.
    pub(crate) fn apply_to(
        &self,
        command: &mut std::process::Command,
    ) -> Result<Option<OwnedFd>, CapabilityError> {
        let ruleset = Arc::clone(&self.ruleset);
        let filter = self.filter.clone();
        let limits = self.limits;
        let (egress, host_end) = self.egress_channel()?;
        let confine = move || -> io::Result<()> {
            // The closure runs in the single-threaded child between fork and exec and makes
            // system calls on memory prepared before the fork; it allocates nothing.
            confine(
                ruleset.as_raw_fd(),
                &filter,
                &limits,
                egress.as_ref(),
                Descriptors::CloseOnExec,
            )
        };
        // SAFETY: `confine` is async-signal-safe in the sense above: system calls on memory
        // owned by the closure.
        unsafe {
            command.pre_exec(confine);
        }
        Ok(host_end)
    }
}

/// Writes `contents` to the file at `path` with system calls only.
fn write_proc(path: &std::ffi::CStr, contents: &[u8]) -> io::Result<()> {
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

/// In the child: a network namespace of its own (and a user namespace, unless root) with
/// loopback up and one listener on the proxy port, sent to the host over the egress channel.
fn enter_private_network(egress: &Egress) -> io::Result<()> {
    let flags = if egress.maps.root {
        libc::CLONE_NEWNET
    } else {
        libc::CLONE_NEWUSER | libc::CLONE_NEWNET
    };
    // SAFETY: unshare takes flags.
    check(unsafe { libc::unshare(flags) })?;
    if !egress.maps.root {
        write_proc(c"/proc/self/setgroups", b"deny")?;
        write_proc(c"/proc/self/uid_map", &egress.maps.uid_map)?;
        write_proc(c"/proc/self/gid_map", &egress.maps.gid_map)?;
    }
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
fn send_fd(channel: RawFd, fd: RawFd) -> io::Result<()> {
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

/// A pipe whose two ends are close-on-exec and above stderr (so that placing another pipe's
/// end on 0, 1 or 2 in the child never clobbers one of them).
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: pipe2 writes two descriptors into `fds`.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: pipe2 just returned them; nothing else owns them.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    Ok((above_stderr(read)?, above_stderr(write)?))
}

fn above_stderr(fd: OwnedFd) -> io::Result<OwnedFd> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    // SAFETY: F_DUPFD_CLOEXEC returns a new descriptor we then own.
    let moved = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
    if moved < 0 {
        return Err(last_error());
    }
    // SAFETY: fcntl just returned it.
    Ok(unsafe { OwnedFd::from_raw_fd(moved) })
}

fn nonblocking(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: fcntl takes integers.
    unsafe {
        let flags = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
        if flags < 0 {
            return Err(last_error());
        }
        check(libc::fcntl(
            fd.as_raw_fd(),
            libc::F_SETFL,
            flags | libc::O_NONBLOCK,
        ))
    }
}

/// Everything the child of [`Prepared::spawn`] reads, built before the clone; the child shares
/// the parent's memory until it executes the program, so it only reads this.
struct ChildArgs<'a> {
    program: &'a CStr,
    argv: &'a [*const libc::c_char],
    envp: &'a [*const libc::c_char],
    cwd: &'a CStr,
    stdin: RawFd,
    stdout: RawFd,
    stderr: RawFd,
    report: RawFd,
    ruleset: RawFd,
    filter: &'a [libc::sock_filter],
    limits: &'a ResourceLimits,
    egress: Option<&'a Egress>,
    mask: libc::sigset_t,
}

/// Steps of the child, reported with `errno` when one fails.
const STEP_SIGNALS: u32 = 1;
const STEP_GROUP: u32 = 2;
const STEP_STDIO: u32 = 3;
const STEP_CWD: u32 = 4;
const STEP_CONFINE: u32 = 5;
const STEP_EXEC: u32 = 6;

fn step_name(step: u32) -> &'static str {
    match step {
        STEP_SIGNALS => "resetting signal handlers",
        STEP_GROUP => "creating its process group",
        STEP_STDIO => "placing stdin, stdout and stderr",
        STEP_CWD => "entering its working directory",
        STEP_CONFINE => "confining itself",
        STEP_EXEC => "executing the program",
        _ => "starting",
    }
}

/// The child: runs on its own stack in the parent's memory (`CLONE_VM | CLONE_VFORK`), makes
/// system calls only, and either executes the program or reports the failed step and exits.
extern "C" fn child_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` points at the `ChildArgs` the parent keeps alive, unmoved, until this child
    // has executed the program or exited (the parent is suspended until then).
    let a = unsafe { &*arg.cast::<ChildArgs<'_>>() };
    let fail = |step: u32, err: Option<i32>| -> libc::c_int {
        let report = [step, err.unwrap_or(0) as u32];
        // SAFETY: writes 8 bytes of a stack array to the report pipe, then ends the child
        // without running any of the parent's exit handlers.
        unsafe {
            libc::write(a.report, report.as_ptr().cast(), 8);
            libc::_exit(127)
        }
    };
    let errno = || io::Error::last_os_error().raw_os_error();
    // SAFETY: system calls on integers and on memory built by the parent.
    unsafe {
        // The parent's handlers must never run here, in its memory: back to the defaults, then
        // the parent's signal mask (all signals were blocked around the clone).
        for signal in 1..=libc::SIGRTMAX() {
            if signal == libc::SIGKILL || signal == libc::SIGSTOP {
                continue;
            }
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(signal, std::ptr::null(), &mut old) != 0 {
                continue;
            }
            if old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN {
                let mut default: libc::sigaction = std::mem::zeroed();
                default.sa_sigaction = libc::SIG_DFL;
                if libc::sigaction(signal, &default, std::ptr::null_mut()) != 0 {
                    return fail(STEP_SIGNALS, errno());
                }
            }
        }
        if libc::setpgid(0, 0) != 0 {
            return fail(STEP_GROUP, errno());
        }
        for (fd, target) in [(a.stdin, 0), (a.stdout, 1), (a.stderr, 2)] {
            if libc::dup2(fd, target) != target {
                return fail(STEP_STDIO, errno());
            }
        }
        if libc::chdir(a.cwd.as_ptr()) != 0 {
            return fail(STEP_CWD, errno());
        }
    }
    if let Err(e) = confine(
        a.ruleset,
        a.filter,
        a.limits,
        a.egress,
        Descriptors::CloseOnExec,
    ) {
        return fail(STEP_CONFINE, e.raw_os_error());
    }
    // SAFETY: as above; execve only returns on failure.
    unsafe {
        libc::pthread_sigmask(libc::SIG_SETMASK, &a.mask, std::ptr::null_mut());
        libc::execve(a.program.as_ptr(), a.argv.as_ptr(), a.envp.as_ptr());
    }
    fail(STEP_EXEC, errno())
}

/// A child started by [`Prepared::spawn`].
pub(crate) struct Started {
    pub(crate) pid: u32,
    pub(crate) stdin: Option<OwnedFd>,
    pub(crate) stdout: OwnedFd,
    pub(crate) stderr: OwnedFd,
    pub(crate) egress: Option<OwnedFd>,
}

impl Prepared {
    /// Starts `program` confined, the way `posix_spawn` starts programs: the child shares the
    /// parent's memory and the parent waits until it has executed the program, so nothing of
    /// the parent's address space is copied (a `fork` of a large host costs more than the whole
    /// confinement). The parent's ends of stdin (when `stdin`), stdout and stderr are returned
    /// non-blocking; the child leads its own process group.
    pub(crate) fn spawn(
        &self,
        program: &CStr,
        argv: &[CString],
        envp: &[CString],
        cwd: &CStr,
        stdin: bool,
    ) -> Result<Started, CapabilityError> {
        let io_failed = |what: &str, e: io::Error| failed(what, e);
        let (stdin_read, stdin_write) = if stdin {
            let (r, w) = pipe().map_err(|e| io_failed("stdin pipe", e))?;
            (r, Some(w))
        } else {
            // SAFETY: open of a NUL-terminated literal path.
            let null =
                unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
            if null < 0 {
                return Err(io_failed("/dev/null", last_error()));
            }
            // SAFETY: open just returned it.
            let null = above_stderr(unsafe { OwnedFd::from_raw_fd(null) })
                .map_err(|e| io_failed("/dev/null", e))?;
            (null, None)
        };
        let (stdout_read, stdout_write) = pipe().map_err(|e| io_failed("stdout pipe", e))?;
        let (stderr_read, stderr_write) = pipe().map_err(|e| io_failed("stderr pipe", e))?;
        let (report_read, report_write) = pipe().map_err(|e| io_failed("report pipe", e))?;
        let (egress, egress_host) = self.egress_channel()?;
        let mut argv_ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
        argv_ptrs.push(std::ptr::null());
        let mut envp_ptrs: Vec<*const libc::c_char> = envp.iter().map(|e| e.as_ptr()).collect();
        envp_ptrs.push(std::ptr::null());
        // SAFETY: sigset_t is plain data, valid all zeroes.
        let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut mask: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: sigfillset and pthread_sigmask fill and swap masks in live locals. Every signal
        // stays blocked until the child has reset the handlers it shares with this process.
        unsafe {
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut mask);
        }
        let args = ChildArgs {
            program,
            argv: &argv_ptrs,
            envp: &envp_ptrs,
            cwd,
            stdin: stdin_read.as_raw_fd(),
            stdout: stdout_write.as_raw_fd(),
            stderr: stderr_write.as_raw_fd(),
            report: report_write.as_raw_fd(),
            ruleset: self.ruleset.as_raw_fd(),
            filter: &self.filter,
            limits: &self.limits,
            egress: egress.as_ref(),
            mask,
        };
        // The child's stack: only the confinement and the exec run on it.
        let mut stack = vec![0u8; 128 * 1024];
        // SAFETY: the stack grows down from its (16-byte aligned) top; `args` and `stack` live
        // until clone returns, which with CLONE_VFORK is after the child executed or exited.
        let pid = unsafe {
            let top = stack.as_mut_ptr().add(stack.len()) as usize & !15;
            libc::clone(
                child_main,
                top as *mut libc::c_void,
                libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
                (&raw const args).cast_mut().cast(),
            )
        };
        let clone_error = last_error();
        // SAFETY: restores the mask saved above.
        unsafe {
            libc::pthread_sigmask(libc::SIG_SETMASK, &mask, std::ptr::null_mut());
        }
        // `args` and `stack` are used by the child until here: keep them alive to this point.
        let _ = &args;
        drop(stack);
        // The child's ends, closed here so that end-of-file reaches the parent's ends.
        drop((stdin_read, stdout_write, stderr_write, report_write, egress));
        if pid < 0 {
            return Err(failed("starting the child", clone_error));
        }
        let mut report = [0u32; 2];
        // SAFETY: reads at most 8 bytes into a stack array.
        let got = unsafe { libc::read(report_read.as_raw_fd(), report.as_mut_ptr().cast(), 8) };
        if got != 0 {
            // The child reported a failure and exited: reap it.
            // SAFETY: waits for our own child.
            unsafe {
                libc::waitpid(pid, std::ptr::null_mut(), 0);
            }
            let why = if got == 8 {
                format!(
                    "{}: {}",
                    step_name(report[0]),
                    io::Error::from_raw_os_error(report[1] as i32)
                )
            } else {
                format!("the child failed before reporting why ({})", last_error())
            };
            return Err(CapabilityError::not_available(format!(
                "cannot start {} under kernel confinement: {why}",
                program.to_string_lossy()
            )));
        }
        for fd in [&stdout_read, &stderr_read]
            .into_iter()
            .chain(stdin_write.as_ref())
        {
            nonblocking(fd).map_err(|e| io_failed("pipes", e))?;
        }
        Ok(Started {
            pid: pid as u32,
            stdin: stdin_write,
            stdout: stdout_read,
            stderr: stderr_read,
            egress: egress_host,
        })
    }
}
