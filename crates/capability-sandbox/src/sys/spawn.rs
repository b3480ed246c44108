//! Starting a confined child without copying the host: a reaper that is process 1 of the child's
//! own PID namespace, and the program, its only direct child.
//!
//! The host `clone`s the reaper into new PID and mount namespaces (and a user namespace unless it
//! runs as root, and a network namespace with egress). The reaper shares the host's memory but
//! runs on a stack of its own; it sets up the namespaces, starts the program the way
//! `posix_spawn` does (`CLONE_VM | CLONE_VFORK`: the program confines itself and executes), and
//! tells the host over the report pipe whether that worked. From then on it only waits: it reaps
//! whatever dies in the namespace, passes `SIGTERM`, `SIGINT` and `SIGHUP` on to every process
//! there, and when the program has ended it writes the program's wait status to the report pipe
//! and exits — and the kernel kills everything left in the namespace. Nothing the program starts
//! outlives it, whatever it does with sessions and process groups (docs/isolation-model.md).
//!
//! The reaper runs concurrently with the host in the host's memory, so after its report it makes
//! system calls through [`raw`] only: no `errno`, no thread-local, no allocation.
use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};

use capability_types::CapabilityError;

use crate::ResourceLimits;
use crate::hide::Mask;
use crate::linux::Prepared;
use crate::sys::confine::{self, Descriptors, check, confine, last_error};
use crate::sys::ns::{self, Mode, Namespaces};
use crate::sys::{Egress, failed};

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

/// Everything the reaper and the program read, built before the clone; both share the host's
/// memory, and the host keeps this alive until the reaper has reported.
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
    /// The host's `/proc`, opened before the clone: the program sets its out-of-memory score
    /// through it, its own `/proc` being read-only by then.
    proc: RawFd,
    filter: &'a [libc::sock_filter],
    limits: &'a ResourceLimits,
    egress: Option<&'a Egress>,
    ns: &'a Namespaces,
    /// The child's own home, in the sandbox's homes (`ns::Homes`).
    home: Option<&'a CStr>,
    flags: libc::c_int,
    /// The program's stack (it runs on it until it executes).
    program_stack: *mut u8,
    /// Set by the program when it reported a failure (the reaper then reports nothing more).
    failed: AtomicBool,
}

/// Steps of the child, reported with `errno` when one fails.
const STEP_SIGNALS: u32 = 1;
const STEP_GROUP: u32 = 2;
const STEP_STDIO: u32 = 3;
const STEP_CWD: u32 = 4;
const STEP_CONFINE: u32 = 5;
const STEP_EXEC: u32 = 6;
const STEP_NAMESPACES: u32 = 7;
const STEP_START: u32 = 8;
const STEP_OOM: u32 = 9;
/// The program runs (the reaper's report).
const STEP_RUNNING: u32 = 0x100;
/// The program ended; the second word is its wait status.
const STEP_STATUS: u32 = 0x200;

fn step_name(step: u32) -> &'static str {
    match step {
        STEP_SIGNALS => "resetting signal handlers",
        STEP_GROUP => "creating its process group",
        STEP_STDIO => "placing stdin, stdout and stderr",
        STEP_CWD => "entering its working directory",
        STEP_CONFINE => "confining itself",
        STEP_EXEC => "executing the program",
        STEP_NAMESPACES => "setting up its namespaces (fresh /proc, hidden places, process limit)",
        STEP_START => "starting the program in its PID namespace",
        STEP_OOM => "setting its out-of-memory score",
        _ => "starting",
    }
}

const PROGRAM_STACK: usize = 128 * 1024;
const REAPER_STACK: usize = 64 * 1024;

/// The program: runs on its own stack in the host's memory (`CLONE_VM | CLONE_VFORK`, its
/// reaper suspended and the host waiting for the report), makes system calls only, and either
/// executes the program or reports the failed step and exits.
extern "C" fn program_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` points at the `ChildArgs` the host keeps alive, unmoved, until the reaper has
    // reported, which is after this child has executed the program or exited.
    let a = unsafe { &*arg.cast::<ChildArgs<'_>>() };
    let fail = |step: u32, err: Option<i32>| -> libc::c_int {
        a.failed.store(true, Ordering::SeqCst);
        let report = [step, err.unwrap_or(0) as u32];
        // SAFETY: writes 8 bytes of a stack array to the report pipe, then ends the child
        // without running any of the host's exit handlers.
        unsafe {
            libc::write(a.report, report.as_ptr().cast(), 8);
            libc::_exit(127)
        }
    };
    let errno = || io::Error::last_os_error().raw_os_error();
    // SAFETY: system calls on integers and on memory built by the host.
    unsafe {
        // The host's handlers must never run here, in its memory (all signals were blocked
        // around the clone); the mask is cleared just before the program executes.
        if let Err(e) = confine::default_handlers() {
            return fail(STEP_SIGNALS, e.raw_os_error());
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
    // Here, not in the reaper, which shares the host's memory (docs/isolation-model.md, "Memory").
    if let Err(e) = ns::first_to_end(a.proc, c"self/oom_score_adj") {
        return fail(STEP_OOM, e.raw_os_error());
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
    // No signal blocked, as `std::process::Command` starts a program, not the host thread's mask
    // (a `SIGTERM` it blocked would never reach the child).
    // SAFETY: as above; execve only returns on failure.
    unsafe {
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        libc::execve(a.program.as_ptr(), a.argv.as_ptr(), a.envp.as_ptr());
    }
    fail(STEP_EXEC, errno())
}

/// The reaper, process 1 of the child's PID namespace: sets the namespaces up, starts the
/// program, reports, then reaps until the program has ended (all signals stay blocked; it waits
/// for them with `rt_sigtimedwait`).
extern "C" fn reaper_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: as in `program_main`: the host keeps the arguments until this reaper's report.
    let a = unsafe { &*arg.cast::<ChildArgs<'_>>() };
    let report = a.report;
    let say = |step: u32, word: u32| {
        let message = [step, word];
        // SAFETY: writes 8 bytes of a stack array.
        unsafe { raw::write(report, message.as_ptr().cast(), 8) };
    };
    let errno = || io::Error::last_os_error().raw_os_error().unwrap_or(0) as u32;
    // A session of its own, which also makes it a process group's leader: the child has no
    // controlling terminal, so no `/dev/tty` to type into or read the user's keys from
    // (docs/isolation-model.md, "The terminal").
    // SAFETY: prctl and setsid take integers.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        libc::setsid();
    }
    // Before the program enters its working directory: a directory entered first would stay
    // reachable beneath a mask mounted over it.
    if let Err(e) = ns::enter(a.ns, Mode::Spawn, a.flags, a.home) {
        say(STEP_NAMESPACES, e.raw_os_error().unwrap_or(0) as u32);
        // SAFETY: ends this process only.
        unsafe { raw::exit(127) };
    }
    // SAFETY: the program's stack lives until the host has read the report; CLONE_VFORK keeps
    // this reaper suspended until the program has executed or exited.
    let program = unsafe {
        let top = a.program_stack.add(PROGRAM_STACK) as usize & !15;
        libc::clone(
            program_main,
            top as *mut libc::c_void,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            arg,
        )
    };
    if program < 0 {
        say(STEP_START, errno());
        // SAFETY: ends this process only.
        unsafe { raw::exit(127) };
    }
    if a.failed.load(Ordering::SeqCst) {
        // The program reported why; the host reaps us.
        // SAFETY: ends this process only.
        unsafe { raw::exit(127) };
    }
    // The reaper never executes a program, so close-on-exec closes nothing of what it copied
    // from the host: it closes every descriptor but its report itself. Another call's pipe end
    // held here would keep that call's child waiting for an end of file.
    // SAFETY: close_range takes integers; `report` is above stderr.
    unsafe {
        libc::syscall(libc::SYS_close_range, 0u32, (report - 1) as u32, 0u32);
        libc::syscall(libc::SYS_close_range, (report + 1) as u32, u32::MAX, 0u32);
    }
    // SAFETY: sigset_t is plain data; the libc helpers only fill it.
    let mut wanted: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe {
        libc::sigemptyset(&mut wanted);
        for signal in [libc::SIGCHLD, libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::sigaddset(&mut wanted, signal);
        }
    }
    // From here on the host may free the arguments: only locals and raw system calls.
    say(STEP_RUNNING, 0);
    loop {
        // SAFETY: waits for one of the blocked signals in `wanted`; no timeout.
        let signal = unsafe { raw::sigwait(&wanted) };
        if signal == libc::SIGCHLD as isize {
            loop {
                let mut status: libc::c_int = 0;
                // SAFETY: reaps any child without blocking into a local.
                let pid = unsafe { raw::wait_any(&mut status) };
                if pid <= 0 {
                    break;
                }
                if pid == program as isize {
                    say(STEP_STATUS, status as u32);
                    let code = if status & 0x7f == 0 {
                        (status >> 8) & 0xff
                    } else {
                        128 + (status & 0x7f)
                    };
                    // SAFETY: ends this process; the kernel ends the rest of the namespace.
                    unsafe { raw::exit(code) };
                }
            }
        } else if signal > 0 {
            // SAFETY: kill(-1) from process 1 reaches every other process of the namespace.
            unsafe { raw::kill(-1, signal as libc::c_int) };
        }
    }
}

/// A child started by [`Prepared::spawn`]: the reaper (process 1 of the child's namespace).
pub(crate) struct Started {
    pub(crate) pid: u32,
    pub(crate) stdin: Option<OwnedFd>,
    pub(crate) stdout: OwnedFd,
    pub(crate) stderr: OwnedFd,
    pub(crate) egress: Option<OwnedFd>,
    pub(crate) report: OwnedFd,
    pub(crate) stack: ReaperStack,
}

/// The reaper's stack. It runs in the host's memory until it has exited, so the stack is unmapped
/// only then: dropping this kills the reaper (and so its namespace) and waits for its end
/// without reaping it.
pub(crate) struct ReaperStack {
    base: *mut libc::c_void,
    pidfd: OwnedFd,
}

// SAFETY: the mapping belongs to this value alone; the reaper that runs on it is a process.
unsafe impl Send for ReaperStack {}
// SAFETY: as above; `&ReaperStack` gives no access to the mapping.
unsafe impl Sync for ReaperStack {}

impl std::fmt::Debug for ReaperStack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReaperStack").finish_non_exhaustive()
    }
}

impl ReaperStack {
    fn map() -> io::Result<*mut libc::c_void> {
        // SAFETY: a fresh private anonymous mapping.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                REAPER_STACK,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(last_error());
        }
        Ok(base)
    }
}

impl ReaperStack {
    /// Whether the reaper has ended (and so every process of its namespace).
    /// Only an answer that says so counts: a failed question is "not known to have ended", so
    /// that the look when this is dropped still happens.
    pub(crate) fn ended(&self) -> bool {
        // SAFETY: waits on our own pidfd without blocking or reaping.
        unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            match libc::waitid(
                libc::P_PIDFD,
                self.pidfd.as_raw_fd() as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            ) {
                0 => info.si_pid() != 0,
                // Reaped already (the caller waited for it): ended.
                _ => last_error().raw_os_error() == Some(libc::ECHILD),
            }
        }
    }

    /// Kills the reaper (and so its namespace) and waits for its end, without reaping it.
    pub(crate) fn end(&self) {
        // SAFETY: signals and waits on our own pidfd.
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.pidfd.as_raw_fd(),
                libc::SIGKILL,
                std::ptr::null::<libc::siginfo_t>(),
                0u32,
            );
            let mut info: libc::siginfo_t = std::mem::zeroed();
            while libc::waitid(
                libc::P_PIDFD,
                self.pidfd.as_raw_fd() as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            ) != 0
                && last_error().raw_os_error() == Some(libc::EINTR)
            {}
        }
    }
}

impl Drop for ReaperStack {
    fn drop(&mut self) {
        self.end();
        // SAFETY: unmaps the mapping made in `new` once the reaper no longer runs on it (or
        // never started: then the wait fails at once).
        unsafe {
            libc::munmap(self.base, REAPER_STACK);
        }
    }
}

/// Decodes the program's end from the reaper's last report: `(exit code, signal)`, or `None`
/// when the reaper ended without one (it was killed).
pub(crate) fn read_status(report: &OwnedFd) -> Option<(Option<i32>, Option<i32>)> {
    let mut message = [0u32; 2];
    // SAFETY: reads at most 8 bytes into a stack array (the descriptor is non-blocking).
    let got = unsafe { libc::read(report.as_raw_fd(), message.as_mut_ptr().cast(), 8) };
    if got != 8 || message[0] != STEP_STATUS {
        return None;
    }
    let status = message[1] as i32;
    Some(if status & 0x7f == 0 {
        (Some((status >> 8) & 0xff), None)
    } else {
        (None, Some(status & 0x7f))
    })
}

impl Prepared {
    /// Starts `program` confined in its own PID namespace, without copying the host: see the
    /// module documentation. The host's ends of stdin (when `stdin`), stdout and stderr are
    /// returned non-blocking. `first`: this child's own places to bind (`git.rs`); `home`: its
    /// own home in the policy's homes.
    #[allow(
        clippy::too_many_arguments,
        reason = "the parts of one launch, from `PreparedSandbox::spawn` alone"
    )]
    pub(crate) fn spawn(
        &self,
        program: &CStr,
        argv: &[CString],
        envp: &[CString],
        cwd: &CStr,
        stdin: bool,
        first: Vec<Mask>,
        home: Option<&CStr>,
    ) -> Result<Started, CapabilityError> {
        let io_failed = |what: &str, e: io::Error| failed(what, e);
        // This child's own places to bind first (`git.rs`), before the sandbox's masks: a pin
        // made after a mask beneath it would carry the uncovered place.
        let with_first;
        let ns = if first.is_empty() {
            &self.ns
        } else {
            with_first = self.ns.with_first(first);
            &with_first
        };
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
        let proc = ns::host_proc()
            .and_then(above_stderr)
            .map_err(|e| io_failed("/proc", e))?;
        let mut argv_ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
        argv_ptrs.push(std::ptr::null());
        let mut envp_ptrs: Vec<*const libc::c_char> = envp.iter().map(|e| e.as_ptr()).collect();
        envp_ptrs.push(std::ptr::null());
        // Left uninitialised: only the program writes it, as its stack, through the pointer
        // below. Zeroing 128 KiB (and faulting in pages the program never touches) was some
        // 5 % of a confined spawn's time in the host (docs/benchmarks.md).
        let mut program_stack = Box::<[u8]>::new_uninit_slice(PROGRAM_STACK);
        let reaper_stack = ReaperStack::map().map_err(|e| io_failed("reaper stack", e))?;
        // SAFETY: sigset_t is plain data, valid all zeroes.
        let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut mask: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: sigfillset and pthread_sigmask fill and swap masks in live locals. Every signal
        // stays blocked in the reaper for good, and in the program until it has reset the
        // handlers it shares with the host.
        unsafe {
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut mask);
        }
        let flags = ns.flags(Mode::Spawn, self.egress);
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
            proc: proc.as_raw_fd(),
            filter: &self.filter,
            limits: &self.limits,
            egress: egress.as_ref(),
            ns,
            home,
            flags,
            program_stack: program_stack.as_mut_ptr().cast::<u8>(),
            failed: AtomicBool::new(false),
        };
        // SAFETY: the reaper's stack is a mapping that outlives it (`ReaperStack`); `args` lives
        // until the reaper has reported below.
        let pid = unsafe {
            let top = (reaper_stack as usize + REAPER_STACK) & !15;
            libc::clone(
                reaper_main,
                top as *mut libc::c_void,
                libc::CLONE_VM | libc::SIGCHLD | flags,
                (&raw const args).cast_mut().cast(),
            )
        };
        let clone_error = last_error();
        // SAFETY: restores the mask saved above.
        unsafe {
            libc::pthread_sigmask(libc::SIG_SETMASK, &mask, std::ptr::null_mut());
        }
        if pid < 0 {
            // SAFETY: the mapping was never used.
            unsafe { libc::munmap(reaper_stack, REAPER_STACK) };
            return Err(failed("starting the child", clone_error));
        }
        // SAFETY: pidfd_open of our own, not yet reaped child.
        let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0u32) };
        if pidfd < 0 {
            // Without a pidfd the stack cannot be released safely: kill, reap, then unmap.
            let err = last_error();
            // SAFETY: our own child, killed and reaped before its stack is unmapped.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, std::ptr::null_mut(), libc::__WALL);
                libc::munmap(reaper_stack, REAPER_STACK);
            }
            return Err(failed("watching the child", err));
        }
        let stack = ReaperStack {
            base: reaper_stack,
            // SAFETY: pidfd_open just returned it.
            pidfd: unsafe { OwnedFd::from_raw_fd(pidfd as RawFd) },
        };
        // The child's ends, closed here so that end-of-file reaches the host's ends (the reaper
        // and the program hold their own copies).
        drop((stdin_read, stdout_write, stderr_write, report_write));
        let mut report = [0u32; 2];
        let got = loop {
            // SAFETY: reads at most 8 bytes into a stack array.
            let got = unsafe { libc::read(report_read.as_raw_fd(), report.as_mut_ptr().cast(), 8) };
            if got < 0 && last_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            break got;
        };
        // The reaper no longer reads the arguments.
        let _ = &args;
        drop((program_stack, egress));
        if got != 8 || report[0] != STEP_RUNNING {
            // The reaper is ending (or ended): reap it.
            drop(stack);
            // SAFETY: reaps our own child, which `stack`'s drop waited for.
            unsafe {
                libc::waitpid(pid, std::ptr::null_mut(), libc::__WALL);
            }
            let why = if got == 8 {
                format!(
                    "{}: {}",
                    step_name(report[0]),
                    io::Error::from_raw_os_error(report[1] as i32)
                )
            } else {
                "the child failed before reporting why".to_owned()
            };
            return Err(CapabilityError::not_available(format!(
                "cannot start {} under kernel confinement: {why}",
                program.to_string_lossy()
            )));
        }
        for fd in [&stdout_read, &stderr_read, &report_read]
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
            report: report_read,
            stack,
        })
    }
}

/// System calls without the C library, for the reaper once the host may run again: they touch no
/// `errno` (which is the host thread's, in the host's memory) and return the kernel's result.
mod raw {
    #[cfg(target_arch = "x86_64")]
    unsafe fn syscall4(nr: libc::c_long, a: usize, b: usize, c: usize, d: usize) -> isize {
        let ret: isize;
        // SAFETY: the x86_64 system call convention; the caller vouches for the arguments.
        unsafe {
            std::arch::asm!(
                "syscall",
                inlateout("rax") nr as isize => ret,
                in("rdi") a,
                in("rsi") b,
                in("rdx") c,
                in("r10") d,
                lateout("rcx") _,
                lateout("r11") _,
                options(nostack),
            );
        }
        ret
    }

    #[cfg(target_arch = "aarch64")]
    unsafe fn syscall4(nr: libc::c_long, a: usize, b: usize, c: usize, d: usize) -> isize {
        let ret: isize;
        // SAFETY: the aarch64 system call convention; the caller vouches for the arguments.
        unsafe {
            std::arch::asm!(
                "svc 0",
                in("x8") nr,
                inlateout("x0") a as isize => ret,
                in("x1") b,
                in("x2") c,
                in("x3") d,
                options(nostack),
            );
        }
        ret
    }

    /// `write(2)`.
    pub(super) unsafe fn write(fd: libc::c_int, buf: *const u8, len: usize) -> isize {
        // SAFETY: the caller's buffer of `len` bytes.
        unsafe { syscall4(libc::SYS_write, fd as usize, buf as usize, len, 0) }
    }

    /// `exit_group(2)` of this process.
    pub(super) unsafe fn exit(code: libc::c_int) -> ! {
        loop {
            // SAFETY: ends the process.
            unsafe { syscall4(libc::SYS_exit_group, code as usize, 0, 0, 0) };
        }
    }

    /// `rt_sigtimedwait(2)` without a timeout: the signal number, or a negative errno.
    pub(super) unsafe fn sigwait(set: &libc::sigset_t) -> isize {
        // SAFETY: the kernel reads `_NSIG / 8` bytes of the set.
        unsafe {
            syscall4(
                libc::SYS_rt_sigtimedwait,
                set as *const libc::sigset_t as usize,
                0,
                0,
                8,
            )
        }
    }

    /// `wait4(-1, status, WNOHANG | __WALL)`: a pid, 0, or a negative errno.
    pub(super) unsafe fn wait_any(status: &mut libc::c_int) -> isize {
        // SAFETY: the kernel writes one int.
        unsafe {
            syscall4(
                libc::SYS_wait4,
                -1isize as usize,
                status as *mut libc::c_int as usize,
                (libc::WNOHANG | libc::__WALL) as usize,
                0,
            )
        }
    }

    /// `kill(2)`.
    pub(super) unsafe fn kill(pid: libc::pid_t, signal: libc::c_int) -> isize {
        // SAFETY: integers only.
        unsafe { syscall4(libc::SYS_kill, pid as isize as usize, signal as usize, 0, 0) }
    }
}
