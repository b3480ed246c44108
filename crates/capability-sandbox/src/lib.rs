//! Kernel confinement for the children toolcap starts, derived from a tool's resolved
//! capabilities.
//!
//! Scoped objects stop a tool that uses them; they do not stop a child process from reading any
//! file its user can. A [`SandboxPolicy`] closes that gap for children: built from the same
//! resolved path policy the scoped objects enforce, it is applied as the child starts
//! ([`PreparedSandbox::spawn`]), in this order:
//!
//! 1. the child is the only child of a reaper that is process 1 of its own PID namespace, in its
//!    own mount and IPC namespaces (and user namespace, unless the host is root): when the
//!    program ends, everything it started ends with it, and no System V or POSIX IPC object of
//!    the host's is in reach;
//! 2. in that mount namespace: every mount read-only but the trees of its write roots (Landlock
//!    does not mediate `chmod`, `utime`, `chown` or extended attributes; a read-only mount
//!    refuses them), and without devices (`nodev`) but `/dev` (Landlock grants reading a
//!    device node beneath a read root like any file), a fresh `/proc` of the child's PID namespace, the places deny
//!    rules and the deny floor protect inside its roots covered ([`SandboxPolicy::hide`]), and
//!    the repositories in its write roots kept from rewriting what git runs outside the sandbox
//!    (their git directories pinned, their hooks and configuration read-only, found at each
//!    [`PreparedSandbox::spawn`]: [`Launch::git_writable`]); for a root host, the PID
//!    namespace's `pid_max` is the process limit;
//! 3. every capability is dropped for good (securebits, bounding, ambient, effective, permitted,
//!    inheritable);
//! 4. the child dies with the thread that started it (`PR_SET_PDEATHSIG`);
//! 5. resource limits: address space, CPU time, processes, file size, open files, and no core
//!    dump (a core limit of 0, soft and hard);
//! 6. every inherited descriptor above stderr is marked close-on-exec;
//! 7. Landlock: reads only beneath the tool's read and write roots, the system directories a
//!    program needs to load (`/usr`, `/lib*`, `/bin`, `/sbin`) and the world-readable part of
//!    `/etc` (never [`SYSTEM_HIDDEN`]), writes only beneath its write roots (and `/dev/null`),
//!    never a device node, execution only from the system directories; TCP bind and connect
//!    refused; abstract Unix sockets and signals outside the sandbox refused (where the kernel's
//!    Landlock ABI has them); `no_new_privs`;
//! 8. seccomp: `socket` (every family), `io_uring_*`, `ptrace`, `process_vm_*`, `bpf`,
//!    `perf_event_open`, `keyctl`, mount and namespace calls, kernel modules, `syslog`, clock
//!    setting, `reboot`, swap, host names, `open_by_handle_at` and extended attributes fail
//!    with `EPERM`, as does a mode with the set-ID bits or (in a change) the write bit of
//!    others; a `umask` that drops that bit does nothing; `clone3` fails with `ENOSYS` so that
//!    the C library falls back to `clone`, whose namespace flags the filter can see.
//!
//! So the child has no network and no socket: it cannot create an Internet, netlink, packet or
//! Unix socket at all (a pathname Unix socket would reach whatever listens there: Landlock does
//! not mediate that `connect`). With [`SandboxPolicy::egress_proxy`] it gets Internet sockets in a
//! network namespace whose only listener is the host's proxy.
//!
//! Everything fails closed: [`SandboxPolicy::prepare`] refuses with `not_available` when the
//! kernel has no Landlock (or when [`Support`] says so), and a child whose confinement cannot be
//! applied does not run — `spawn` fails instead.
//!
//! ```no_run
//! # fn main() -> Result<(), capability_types::CapabilityError> {
//! use capability_sandbox::SandboxPolicy;
//!
//! let prepared = SandboxPolicy::new()
//!     .read("/srv/data")
//!     .write("/srv/out")
//!     .prepare()?;
//! let mut command = std::process::Command::new("/usr/bin/cat");
//! command.arg("/srv/data/report.txt");
//! prepared.apply_to(&mut command)?;
//! let output = command.output(); // `/etc/hostname` would be readable, `~/.ssh` would not
//! # let _ = output;
//! # Ok(())
//! # }
//! ```
//!
//! Honest limits: a place that does not exist when the sandbox is prepared is not covered; a
//! hard link to a protected file inside a root is not; `RLIMIT_NPROC` counts every process of an
//! unprivileged user, not only the child's; [`PreparedSandbox::apply_to`] (a `fork`) cannot put
//! the program in a new PID namespace, nor set aside a place that runs later (a `.bashrc`, a
//! `.mcp.json`) which the program makes where none was. See `docs/isolation-model.md`.

#![deny(missing_docs)]

use std::path::{Path, PathBuf};

use capability_types::CapabilityError;
use capability_types::backend::{FsAccess, PathPolicy};

#[cfg(unix)]
mod accounts;
#[cfg(target_os = "linux")]
mod bpf;
#[cfg(unix)]
mod changeable;
#[cfg(target_os = "linux")]
mod child_repo;
mod env;
#[cfg(target_os = "linux")]
mod git;
#[cfg(unix)]
mod gitconfig;
#[cfg(target_os = "linux")]
mod hide;
mod hooks;
#[cfg(target_os = "linux")]
mod kernel_mounts;
#[cfg(target_os = "linux")]
mod launch;
#[cfg(target_os = "linux")]
mod linux;
#[cfg(unix)]
mod remove;
#[cfg(target_os = "linux")]
mod roots;
#[cfg(unix)]
mod scratch;
#[cfg(target_os = "linux")]
mod seccomp;
#[cfg(target_os = "linux")]
mod sys;
#[cfg(target_os = "linux")]
mod walk;
#[cfg(target_os = "linux")]
mod watch;

#[cfg(unix)]
pub use accounts::{GroupOpen, group_open};
#[cfg(unix)]
pub use changeable::{Changeable, Swappable, Writer, changeable_by_others, swappable_through};
#[cfg(unix)]
pub use env::{
    CHILD_FIXED_ENV, EGRESS_PROXY_PORT, EGRESS_PROXY_URL, EGRESS_PROXY_VARIABLES,
    call_env_value_refusal, child_fixed_env, point_at_egress_proxy,
};
#[cfg(unix)]
pub use hooks::{GitPlace, git_dir_area, git_place_of, would_make_git_dir};
#[cfg(target_os = "linux")]
pub use launch::{ChildEnd, ConfinedChild, Launch};
#[cfg(unix)]
pub use remove::remove_tree;
pub use scratch::{ScratchDir, temp_root};
#[cfg(target_os = "linux")]
pub use watch::Watch;

/// Directories a program needs to be loaded and run: readable and executable in every sandbox.
pub const SYSTEM_EXEC_DIRS: &[&str] = &["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64"];
/// Directories readable (not executable) in every sandbox: configuration and the loader cache.
pub const SYSTEM_READ_DIRS: &[&str] = &["/etc"];
/// Entries of [`SYSTEM_READ_DIRS`] no child may read, whatever their mode (a last component
/// ending in `*` names every entry starting with the rest). Beyond these, a child reads only the
/// files there that every user may read: a child of a root host keeps root's uid (not its
/// capabilities), and so would otherwise read root's own files.
pub const SYSTEM_HIDDEN: &[&str] = &[
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers*",
    "/etc/ssh/ssh_host_*",
    "/etc/ssl/private",
];
/// Device files readable and writable in every sandbox.
pub const SYSTEM_DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/urandom", "/dev/random"];

/// Resource limits applied to a sandboxed child (`setrlimit`, soft and hard alike). `None`
/// leaves the inherited limit. Each is "at most": a value above the hard limit already in force
/// (`u64::MAX` for "no limit") keeps that one, since the child, its capabilities dropped, could
/// not raise it; for root, whose processes are limited by the PID namespace's `pid_max`,
/// `processes` above the kernel's 4 Mi is 4 Mi. The core-dump limit is not among them: it is
/// always 0 (docs/isolation-model.md, "Core dumps").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ResourceLimits {
    /// `RLIMIT_AS`, in bytes.
    pub address_space: Option<u64>,
    /// `RLIMIT_CPU`, in seconds of CPU time.
    pub cpu_seconds: Option<u64>,
    /// `RLIMIT_NPROC`: processes of the user (the kernel counts them per user, not per child).
    pub processes: Option<u64>,
    /// `RLIMIT_FSIZE`, in bytes: the largest file the child may write.
    pub file_size: Option<u64>,
    /// `RLIMIT_NOFILE`: open descriptors.
    pub open_files: Option<u64>,
}

impl Default for ResourceLimits {
    /// 4 GiB of address space, 60 s of CPU, 1,024 processes, 1 GiB files, 1,024 descriptors.
    fn default() -> Self {
        Self {
            address_space: Some(4 << 30),
            cpu_seconds: Some(60),
            processes: Some(1024),
            file_size: Some(1 << 30),
            open_files: Some(1024),
        }
    }
}

impl ResourceLimits {
    /// Limits that leave every inherited limit in place (the core-dump limit is 0 whatever
    /// these say).
    pub fn inherited() -> Self {
        Self {
            address_space: None,
            cpu_seconds: None,
            processes: None,
            file_size: None,
            open_files: None,
        }
    }
}

/// What the running kernel can enforce, as [`probe`] found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Support {
    landlock_abi: Option<u32>,
    pid_max_per_namespace: bool,
    refusal: Option<String>,
}

impl Support {
    /// A kernel that cannot confine children, with the reason; every
    /// [`prepare_with`](SandboxPolicy::prepare_with) against it refuses. Also how tests force
    /// the "unsupported" path.
    pub fn unsupported(reason: impl Into<String>) -> Self {
        Self {
            landlock_abi: None,
            pid_max_per_namespace: false,
            refusal: Some(reason.into()),
        }
    }

    /// Whether a PID namespace has a `pid_max` of its own (Linux 6.14 and later): how a root
    /// host limits its children's processes, since `RLIMIT_NPROC` does not bind root.
    pub fn pid_max_per_namespace(&self) -> bool {
        self.pid_max_per_namespace
    }

    /// The Landlock ABI version the kernel reports, if it has Landlock.
    pub fn landlock_abi(&self) -> Option<u32> {
        self.landlock_abi
    }

    /// Why children cannot be confined here, or `None` when they can.
    pub fn refusal(&self) -> Option<&str> {
        self.refusal.as_deref()
    }
}

/// Probes the running kernel once per call: the Landlock ABI (`landlock_create_ruleset` with
/// the version flag). Not Linux, or no Landlock, is a [`Support`] with a refusal.
///
/// # Ambient Authority
///
/// Asks the running kernel (a `landlock_create_ruleset` version query and `uname`); changes
/// nothing.
pub fn probe() -> Support {
    #[cfg(target_os = "linux")]
    {
        linux::probe()
    }
    #[cfg(not(target_os = "linux"))]
    {
        Support::unsupported("kernel confinement of children is implemented for Linux only")
    }
}

/// Keeps this process from leaving an image of its memory when it crashes: its core limit is
/// set to 0, soft and hard, for good (docs/isolation-model.md, "Core dumps"). The process that
/// confines children holds what none of them sees (the secrets it resolves, a server's token,
/// every session's calls); a crash (an abort on a failed allocation, a stack overflow) would
/// otherwise have the kernel write that memory where the process runs, often the project its
/// tools read, or hand it to the crash handler `core_pattern` names. Call it first in a host's
/// `main`; the `toolcap` binary does. What it starts inherits the limit.
///
/// # Errors
///
/// The kernel's refusal, as `io::Error` (lowering a limit is always allowed), or
/// `Unsupported` off Linux.
///
/// # Ambient Authority
///
/// Changes this process's resource limits.
pub fn dump_no_core() -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        sys::confine::dump_no_core()
    }
    #[cfg(not(target_os = "linux"))]
    {
        Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "kernel confinement is implemented for Linux only",
        ))
    }
}

/// A hidden place written `dir/prefix*` (every entry of `dir` whose name starts with
/// `prefix`), as its directory and its prefix; `None` for a place named as it is.
pub(crate) fn name_prefix(path: &Path) -> Option<(&Path, &[u8])> {
    let prefix = path.file_name()?.as_encoded_bytes().strip_suffix(b"*")?;
    Some((path.parent()?, prefix))
}

/// What a sandboxed child may touch. Paths are absolute; a path that does not exist when the
/// sandbox is prepared grants nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxPolicy {
    read: Vec<PathBuf>,
    write: Vec<PathBuf>,
    scratch: Vec<PathBuf>,
    /// The children's homes: the directory granted, and the one inside it where each home is
    /// made (`scratch.rs`, `SandboxPolicy::homes`).
    homes: Option<(PathBuf, PathBuf)>,
    exec: Vec<PathBuf>,
    hidden: Vec<PathBuf>,
    /// The roots a path policy resolved through links as it loaded ([`from_paths`](Self::from_paths)):
    /// granted only where no link lies on their way when the sandbox is prepared.
    resolved: Vec<PathBuf>,
    limits: ResourceLimits,
    system_dirs: bool,
    new_processes: bool,
    sockets: bool,
    egress: bool,
}

impl Default for SandboxPolicy {
    fn default() -> Self {
        Self::new()
    }
}

impl SandboxPolicy {
    /// Only the system directories ([`SYSTEM_EXEC_DIRS`], [`SYSTEM_READ_DIRS`],
    /// [`SYSTEM_DEVICES`]) and the default [`ResourceLimits`].
    pub fn new() -> Self {
        Self {
            read: Vec::new(),
            write: Vec::new(),
            scratch: Vec::new(),
            homes: None,
            exec: Vec::new(),
            hidden: Vec::new(),
            resolved: Vec::new(),
            limits: ResourceLimits::default(),
            system_dirs: true,
            new_processes: true,
            sockets: true,
            egress: false,
        }
    }

    /// The policy of a capsule worker, which holds no authority of its own: no file system
    /// access at all (not even the system directories), no new processes (`fork`, `vfork`,
    /// `execve` and a `clone` that is not a thread fail with `EPERM`), no new sockets of any
    /// family. Everything the worker's tool is allowed to do it asks its host for, over the
    /// channel it inherited.
    ///
    /// A process under a policy that grants no path at all, as this one does unless paths are
    /// added to it, also gets an empty root of its own: the host's tree is detached from its
    /// mount namespace, so `stat`, `access`, `readlink`, extended attributes and `inotify`,
    /// which Landlock does not mediate, find nothing (`ENOENT`) at any path; and it may make no
    /// `inotify` instance (`EPERM`), which could watch nothing there.
    pub fn isolated() -> Self {
        let mut policy = Self::new();
        policy.system_dirs = false;
        policy.new_processes = false;
        policy.sockets = false;
        policy
    }

    /// The policy for a tool's resolved path policy: its read roots readable, its write roots
    /// readable and writable, and the places its deny rules and the deny floor protect inside
    /// them hidden ([`PathPolicy::hidden`]). The roots are granted where the path policy
    /// resolved them: [`prepare`](Self::prepare) refuses (`not_available`, naming it) where a
    /// symbolic link lies on a root's way by then, which would lead the grant elsewhere.
    pub fn from_paths(paths: &dyn PathPolicy) -> Self {
        let mut policy = Self::new();
        policy.read = paths.roots(FsAccess::Read);
        policy.write = paths.roots(FsAccess::Write);
        policy.hidden = paths.hidden();
        policy.resolved = policy.read.iter().chain(&policy.write).cloned().collect();
        policy
    }

    /// Hides a place inside a granted directory: in the child's own mount namespace a directory
    /// is covered by an empty, read-only, mode-`000` file system and a file by an empty mode-`000`
    /// file, so neither its content nor (for a directory) its entries can be read, written,
    /// removed or renamed. A path that does not exist when the sandbox is prepared is not
    /// covered. Landlock cannot subtract from a grant; this is how deny rules and the deny floor
    /// hold for children too.
    pub fn hide(mut self, path: impl Into<PathBuf>) -> Self {
        self.hidden.push(path.into());
        self
    }

    /// The hidden places (see [`hide`](Self::hide)).
    pub fn hidden_paths(&self) -> &[PathBuf] {
        &self.hidden
    }

    /// The directories within the grants where a hidden name prefix (`dir/prefix*`, such as
    /// the deny floor's `/tmp/toolcap-home-*`) is matched, each once. A prepared sandbox covers
    /// the entries there as they were when it was prepared; a caller that keeps one for later
    /// children looks at when these directories last changed (docs/isolation-model.md,
    /// "Scratch directories").
    pub fn prefix_dirs(&self) -> Vec<&Path> {
        let mut dirs: Vec<&Path> = self
            .hidden
            .iter()
            .filter_map(|h| name_prefix(h))
            .map(|(dir, _)| dir)
            .filter(|dir| {
                self.read
                    .iter()
                    .chain(&self.write)
                    .chain(&self.exec)
                    .any(|g| dir.starts_with(g))
            })
            .collect();
        dirs.sort();
        dirs.dedup();
        dirs
    }

    /// Adds a directory or file the child may read.
    pub fn read(mut self, path: impl Into<PathBuf>) -> Self {
        self.read.push(path.into());
        self
    }

    /// Adds a directory or file the child may read and write (never execute from).
    pub fn write(mut self, path: impl Into<PathBuf>) -> Self {
        self.write.push(path.into());
        self
    }

    /// Adds a directory the child may write that is its own scratch space (a private home),
    /// not a project: what it makes there is not looked for when it ends ([`Watch`]).
    pub fn scratch(mut self, path: impl Into<PathBuf>) -> Self {
        let path = path.into();
        self.write.push(path.clone());
        self.scratch.push(path);
        self
    }

    /// Adds a directory or file the child may read and execute, beyond the system directories.
    pub fn exec(mut self, path: impl Into<PathBuf>) -> Self {
        self.exec.push(path.into());
        self
    }

    /// Replaces the resource limits.
    pub fn limits(mut self, limits: ResourceLimits) -> Self {
        self.limits = limits;
        self
    }

    /// The readable paths the policy adds to the system ones.
    pub fn read_paths(&self) -> &[PathBuf] {
        &self.read
    }

    /// The writable paths.
    pub fn write_paths(&self) -> &[PathBuf] {
        &self.write
    }

    /// The resource limits.
    pub fn resource_limits(&self) -> ResourceLimits {
        self.limits
    }

    /// Builds the Landlock ruleset and seccomp filters in this process, ready to be applied in
    /// a child, against what [`probe`] finds.
    ///
    /// # Ambient Authority
    ///
    /// Probes the kernel, opens a Landlock ruleset and the policy's granted paths (`O_PATH`), and
    /// stats the system's hidden places (`/etc` and the deny rules) to decide what to mask.
    pub fn prepare(&self) -> Result<PreparedSandbox, CapabilityError> {
        self.prepare_with(&probe())
    }

    /// [`prepare`](Self::prepare) against a given [`Support`]: refuses with `not_available` when
    /// it has a refusal.
    ///
    /// # Ambient Authority
    ///
    /// As [`prepare`](Self::prepare), without the probe.
    pub fn prepare_with(&self, support: &Support) -> Result<PreparedSandbox, CapabilityError> {
        if let Some(reason) = support.refusal() {
            return Err(CapabilityError::not_available(format!(
                "children cannot be confined here: {reason}"
            )));
        }
        for path in self
            .read
            .iter()
            .chain(&self.write)
            .chain(&self.exec)
            .chain(&self.hidden)
        {
            if !path.is_absolute() {
                return Err(CapabilityError::invalid_input(format!(
                    "sandbox path {} is not absolute",
                    path.display()
                )));
            }
        }
        #[cfg(target_os = "linux")]
        {
            linux::prepare(self, support).map(|inner| PreparedSandbox { inner })
        }
        #[cfg(not(target_os = "linux"))]
        {
            Err(CapabilityError::not_available(
                "kernel confinement of children is implemented for Linux only",
            ))
        }
    }

    /// Gives the child the network of an egress proxy instead of none: it runs in a network
    /// namespace of its own (a user namespace too, unless it runs as root) whose loopback has
    /// one listening socket, on [`EGRESS_PROXY_PORT`]; that socket is handed to the host
    /// (the [`EgressReceiver`] of [`PreparedSandbox::apply_to`]), which serves the proxy on it. Landlock lets the child
    /// connect to that port only, and seccomp lets it create Internet sockets (still no netlink
    /// or packet sockets). Set `HTTP_PROXY` and friends to [`EGRESS_PROXY_URL`] for it.
    pub fn egress_proxy(mut self) -> Self {
        self.egress = true;
        self
    }

    /// Whether the child gets the egress proxy (see [`SandboxPolicy::egress_proxy`]).
    pub fn has_egress_proxy(&self) -> bool {
        self.egress
    }

    /// Whether the system directories ([`SYSTEM_EXEC_DIRS`], [`SYSTEM_READ_DIRS`],
    /// [`SYSTEM_DEVICES`]) are granted (true but for [`SandboxPolicy::isolated`]).
    pub fn grants_system_dirs(&self) -> bool {
        self.system_dirs
    }

    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    fn system<'a>(&self, dirs: &'a [&'a str]) -> &'a [&'a str] {
        if self.system_dirs { dirs } else { &[] }
    }

    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    fn exec_paths(&self) -> impl Iterator<Item = &Path> {
        self.system(SYSTEM_EXEC_DIRS)
            .iter()
            .map(Path::new)
            .chain(self.exec.iter().map(PathBuf::as_path))
    }
}

/// A sandbox ready to be applied to a command: the Landlock ruleset is created and the seccomp
/// filters compiled; what runs in the child is system calls only.
#[derive(Debug)]
pub struct PreparedSandbox {
    #[cfg(target_os = "linux")]
    inner: linux::Prepared,
}

/// The host's end of a child's egress: after the spawn, [`receive`](Self::receive) yields the
/// listening socket the child created inside its network namespace.
#[derive(Debug)]
pub struct EgressReceiver {
    #[cfg(target_os = "linux")]
    channel: std::os::fd::OwnedFd,
}

impl EgressReceiver {
    /// The child's listener. Call after a successful spawn (the child sends it before `exec`);
    /// fails with `not_available` when it did not arrive.
    ///
    /// # Ambient Authority
    ///
    /// Receives one descriptor over the channel the child was given: a listening socket in the
    /// child's network namespace, which this process then owns.
    pub fn receive(self) -> Result<std::net::TcpListener, CapabilityError> {
        #[cfg(target_os = "linux")]
        {
            sys::confine::receive_listener(&self.channel)
        }
        #[cfg(not(target_os = "linux"))]
        {
            Err(CapabilityError::not_available(
                "kernel confinement is implemented for Linux only",
            ))
        }
    }
}

impl PreparedSandbox {
    /// Confines the calling process itself, now and for good: the capsule worker calls this at
    /// the top of `main`, before any tool code runs. Descriptors are left as they are: close
    /// the inherited ones you do not need *before* [`SandboxPolicy::prepare`] (which opens the
    /// Landlock ruleset's own).
    ///
    /// Landlock applies to the calling thread and the threads it starts later, so this refuses
    /// (`not_available`) unless the process has exactly one thread. Any failure may leave the
    /// process partly confined: the caller must then exit, never go on.
    ///
    /// # Ambient Authority
    ///
    /// Restricts the calling process for the rest of its life: mount and IPC namespaces of its
    /// own, every mount read-only but its write roots' and `nodev` but `/dev` (a user namespace
    /// first, where the host is not root), an empty root when the policy grants no path at all
    /// (see [`isolated`](SandboxPolicy::isolated)), capabilities dropped, resource limits set
    /// (a core limit of 0 among them), `no_new_privs`, Landlock and seccomp installed. What
    /// runs later outside any sandbox is kept from it as from a command confined with
    /// [`apply_to`](Self::apply_to): beneath its write roots, git's places and those of
    /// [`RUNS_LATER_NAMES`](capability_types::backend::RUNS_LATER_NAMES) that exist are bound
    /// read-only, and a `.git` that is a symbolic link refuses the confinement.
    pub fn confine_current_process(self) -> Result<(), CapabilityError> {
        #[cfg(target_os = "linux")]
        {
            let kept = self.kept_without_policy(None)?;
            self.inner.confine_current_process(kept)
        }
        #[cfg(not(target_os = "linux"))]
        {
            Err(CapabilityError::not_available(
                "kernel confinement is implemented for Linux only",
            ))
        }
    }

    /// Installs the confinement into `command`, to run in the child between `fork` and `exec`
    /// of every spawn of it: everything [`spawn`](Self::spawn) does but the PID namespace and its
    /// fresh `/proc` (a `fork`ed child cannot enter a PID namespace itself), so children the
    /// program starts are not ended with it. When any step fails there, `spawn` fails with that step's error
    /// and nothing runs.
    ///
    /// What runs later outside any sandbox is kept from the program as [`spawn`](Self::spawn)
    /// keeps it, with nothing of it writable: the git directories of the write roots' repositories
    /// (their hooks, configuration and `commondir` with them) are read-only, and so is each
    /// place of [`RUNS_LATER_NAMES`](capability_types::backend::RUNS_LATER_NAMES) that exists
    /// where git's are looked for (`.bashrc`, `.mcp.json`, `.claude`), as of this call (set the
    /// command's working directory first: the directories above it are looked in too); a
    /// repository that cannot be kept (a `.git` that is a symbolic link) refuses it with
    /// `not_available`. Unlike [`spawn`](Self::spawn), which sets aside one the program makes
    /// where none was, it cannot look at those places when the program ends: its caller starts
    /// and waits for the program (docs/policy.md, "Kept from children").
    ///
    /// The command keeps the session and process group its caller gave it, so a program handed
    /// the caller's terminal keeps it as its controlling terminal; seccomp still refuses it
    /// `TIOCSTI` and `TIOCLINUX` (docs/isolation-model.md, "The terminal"). [`spawn`](Self::spawn)
    /// starts every child in a session of its own. Without a PID namespace of its own, the
    /// program sees the user's other processes: it may change their resource limits (and,
    /// where the host is not root, their priority), and on kernels before 6.12, whose Landlock
    /// does not scope signals, signal them; prefer [`spawn`](Self::spawn).
    ///
    /// A prepared sandbox is reusable: prepare once per distinct policy and apply it to every
    /// command (each application duplicates the Landlock ruleset's descriptor). With
    /// [`egress_proxy`](SandboxPolicy::egress_proxy) it returns the host's end of the child's
    /// egress; call [`EgressReceiver::receive`] after the spawn.
    ///
    /// # Ambient Authority
    ///
    /// Opens a socket pair for the egress channel when the policy has one; the confinement runs
    /// in the child that `command` later starts.
    pub fn apply_to(
        &self,
        command: &mut std::process::Command,
    ) -> Result<Option<EgressReceiver>, CapabilityError> {
        #[cfg(target_os = "linux")]
        {
            // The program starts in the command's working directory, or in this process's.
            let kept = self.kept_without_policy(command.get_current_dir())?;
            let channel = self.inner.apply_to(command, kept)?;
            Ok(channel.map(|channel| EgressReceiver { channel }))
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = command;
            Err(CapabilityError::not_available(
                "kernel confinement is implemented for Linux only",
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The directories a hidden name prefix is matched in, within the grants (read, write or
    /// execution), each once; a place named as it is, and a prefix outside every grant, are
    /// none.
    #[test]
    fn prefix_dirs_are_those_within_the_grants() {
        let policy = SandboxPolicy::new()
            .read("/tmp")
            .exec("/opt/run")
            .hide("/tmp/toolcap-home-*")
            .hide("/tmp/toolcap-guard-*")
            .hide("/opt/run/cache-*")
            .hide("/etc/sudoers*")
            .hide("/tmp/secret");
        assert_eq!(
            policy.prefix_dirs(),
            [Path::new("/opt/run"), Path::new("/tmp")]
        );
        assert_eq!(
            name_prefix(Path::new("/etc/ssh/ssh_host_*")),
            Some((Path::new("/etc/ssh"), &b"ssh_host_"[..]))
        );
        assert_eq!(name_prefix(Path::new("/tmp/secret")), None);
    }
}
