//! The Linux implementation: everything that allocates happens in [`prepare`]; the closure run in
//! the child makes system calls only.
#![allow(unsafe_code)] // raw system calls between fork and exec; each block says why it is sound

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::os::unix::process::CommandExt;

use capability_types::CapabilityError;
use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use crate::{ResourceLimits, SYSTEM_DEVICES, SYSTEM_READ_DIRS, SandboxPolicy, Support};

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
    ruleset: RulesetCreated,
    deny: BpfProgram,
    enosys: BpfProgram,
    limits: ResourceLimits,
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
        .map_err(|e| failed("Landlock ruleset", e))?;
    if support.landlock_abi().is_none() {
        return Err(failed("Landlock", "no ABI version"));
    }

    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| failed("seccomp", e))?;
    let deny = deny_filter(arch, policy)?;
    let enosys = program(
        BTreeMap::from([(libc::SYS_clone3, Vec::new())]),
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )?;
    Ok(Prepared {
        ruleset,
        deny,
        enosys,
        limits: policy.limits,
    })
}

/// The system calls a confined child never needs, refused with `EPERM`.
fn deny_filter(arch: TargetArch, policy: &SandboxPolicy) -> Result<BpfProgram, CapabilityError> {
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
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        always.into_iter().map(|nr| (nr, Vec::new())).collect();
    let condition = |index, op, value: u64| {
        SeccompCondition::new(index, SeccompCmpArgLen::Dword, op, value)
            .and_then(|c| SeccompRule::new(vec![c]))
            .map_err(|e| failed("seccomp rule", e))
    };
    // Sockets: Unix domain only. This, with Landlock's TCP rules, is what keeps the child off
    // the network (see docs/decisions.md: a network namespace per spawn cost 0.7 ms).
    // An isolated worker may create none at all (an empty rule list matches every call).
    let socket = if policy.sockets {
        vec![condition(0, SeccompCmpOp::Ne, libc::AF_UNIX as u64)?]
    } else {
        Vec::new()
    };
    rules.insert(libc::SYS_socket, socket);
    // socketpair stays allowed: an anonymous connected pair reaches nothing (an async runtime
    // uses one to deliver signals).
    if !policy.new_processes {
        for nr in [
            libc::SYS_execve,
            libc::SYS_execveat,
            #[cfg(target_arch = "x86_64")]
            libc::SYS_fork,
            #[cfg(target_arch = "x86_64")]
            libc::SYS_vfork,
        ] {
            rules.insert(nr, Vec::new());
        }
    }
    // clone with any namespace flag.
    let namespaces = [
        libc::CLONE_NEWUSER,
        libc::CLONE_NEWNS,
        libc::CLONE_NEWNET,
        libc::CLONE_NEWPID,
        libc::CLONE_NEWIPC,
        libc::CLONE_NEWUTS,
        libc::CLONE_NEWCGROUP,
    ];
    let mut clone = Vec::new();
    for flag in namespaces {
        let flag = flag as u64;
        clone.push(condition(0, SeccompCmpOp::MaskedEq(flag), flag)?);
    }
    if !policy.new_processes {
        // A clone without CLONE_THREAD is a new process. Threads stay allowed (an async
        // runtime needs them); they share the confinement.
        let thread = libc::CLONE_THREAD as u64;
        clone.push(condition(0, SeccompCmpOp::MaskedEq(thread), 0)?);
    }
    rules.insert(libc::SYS_clone, clone);
    program(rules, SeccompAction::Errno(libc::EPERM as u32), arch)
}

fn program(
    rules: BTreeMap<i64, Vec<SeccompRule>>,
    action: SeccompAction,
    arch: TargetArch,
) -> Result<BpfProgram, CapabilityError> {
    SeccompFilter::new(rules, SeccompAction::Allow, action, arch)
        .and_then(BpfProgram::try_from)
        .map_err(|e| failed("seccomp filter", e))
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
    ruleset: RulesetCreated,
    deny: &BpfProgram,
    enosys: &BpfProgram,
    limits: &ResourceLimits,
    descriptors: Descriptors,
) -> io::Result<()> {
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
    let status = ruleset
        .restrict_self()
        .map_err(|_| io::Error::from_raw_os_error(libc::EPERM))?;
    if status.ruleset == RulesetStatus::NotEnforced || !status.no_new_privs {
        return Err(io::Error::from_raw_os_error(libc::ENOSYS));
    }
    seccompiler::apply_filter(deny).map_err(|_| io::Error::from_raw_os_error(libc::EPERM))?;
    seccompiler::apply_filter(enosys).map_err(|_| io::Error::from_raw_os_error(libc::EPERM))?;
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
        confine(
            self.ruleset,
            &self.deny,
            &self.enosys,
            &self.limits,
            Descriptors::Keep,
        )
        .map_err(|e| failed("confining this process", e))
    }

    pub(crate) fn apply_to(self, command: &mut std::process::Command) {
        let Prepared {
            ruleset,
            deny,
            enosys,
            limits,
        } = self;
        let mut ruleset = Some(ruleset);
        let confine = move || -> io::Result<()> {
            // The closure runs in the single-threaded child between fork and exec and makes
            // system calls on memory prepared before the fork; it allocates only on the error
            // path of the Landlock crate, which then ends the child.
            let ruleset = ruleset
                .take()
                .ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
            confine(ruleset, &deny, &enosys, &limits, Descriptors::CloseOnExec)
        };
        // SAFETY: `confine` is async-signal-safe in the sense above: system calls on memory
        // owned by the closure.
        unsafe {
            command.pre_exec(confine);
        }
    }
}
