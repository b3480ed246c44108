//! The Linux implementation: everything that allocates happens in [`prepare`]; the closure run in
//! the child makes system calls only.
use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::Arc;

use crate::bpf::{self, Decision};
use crate::hide;
use crate::sys::confine::{self, Descriptors};
use crate::sys::ns::{self, Mode, Namespaces};
use crate::sys::{self, Egress, failed};
use capability_types::CapabilityError;
use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath,
    Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetError, Scope, path_beneath_rules,
};

use crate::{
    EGRESS_PROXY_PORT, ResourceLimits, SYSTEM_DEVICES, SYSTEM_HIDDEN, SYSTEM_READ_DIRS,
    SandboxPolicy, Support,
};

/// The newest ABI this crate asks for; older kernels get what they have (best effort), and a
/// kernel without Landlock is refused.
const WANTED_ABI: ABI = ABI::V6;

pub(crate) fn probe() -> Support {
    let version = match sys::landlock_abi() {
        Ok(version) => version,
        Err(err) => {
            let why = match err.raw_os_error() {
                Some(libc::ENOSYS) => "the kernel has no Landlock (ENOSYS)".to_owned(),
                Some(libc::EOPNOTSUPP) => "Landlock is disabled at boot (EOPNOTSUPP)".to_owned(),
                _ => format!("Landlock is unavailable: {err}"),
            };
            return Support::unsupported(why);
        }
    };
    Support {
        landlock_abi: Some(version),
        pid_max_per_namespace: kernel_at_least(6, 14),
        refusal: None,
    }
}

/// Whether the running kernel's release is at least `major.minor` (`uname`).
fn kernel_at_least(major: u32, minor: u32) -> bool {
    let Some(release) = sys::kernel_release() else {
        return false;
    };
    let mut parts = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|n| n.parse::<u32>().unwrap_or(0));
    let found = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    found >= (major, minor)
}

/// The parts of a sandbox built in the parent.
pub(crate) struct Prepared {
    /// The Landlock ruleset; shared by every application (the child restricts itself with the
    /// descriptor it inherited).
    pub(crate) ruleset: Arc<OwnedFd>,
    pub(crate) filter: Vec<libc::sock_filter>,
    /// The filter's decisions when the policy starts no process: a process that confines
    /// itself under it may then reach no other process by its id (`confine_current_process`).
    pub(crate) alone: Option<BTreeMap<u32, Decision>>,
    pub(crate) limits: ResourceLimits,
    /// The child gets a network namespace with the egress proxy's listener.
    pub(crate) egress: bool,
    /// The namespaces it is created in (or unshares), and what it mounts there.
    pub(crate) ns: Namespaces,
    /// The write roots, where a spawn looks for the repositories whose hooks and configuration
    /// it keeps from the child (`git.rs`).
    pub(crate) write: Vec<PathBuf>,
    /// The write roots that are the child's scratch space, not a project ([`crate::Watch`]).
    pub(crate) scratch: Vec<PathBuf>,
    /// Where each child's own home must be (`SandboxPolicy::homes`).
    pub(crate) homes: Option<PathBuf>,
    /// The hidden places beneath the write roots (deny rules, the floor, toolcap's own files):
    /// one missing when a child starts is looked for when it ends, since no mount can cover
    /// what is not there ([`crate::Watch`]).
    pub(crate) denied: Vec<PathBuf>,
    /// The places covered or replaced in a child's mount namespace beneath the write roots
    /// (those a deny rule or the floor protects, kernel file systems, `/proc`, `/sys` and
    /// `/dev`), where no child reaches what the host sees: the walk for what children are kept
    /// from does not look in them (`walk.rs`).
    pub(crate) covered: Vec<PathBuf>,
}

impl fmt::Debug for Prepared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Prepared")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

/// The Landlock rules for `paths` granted `access`: those the policy's path policy resolved
/// ([`SandboxPolicy::from_paths`]), opened where it resolved them, and the others, to be opened
/// as given. A link on a resolved root's way refuses the confinement, naming it.
#[allow(clippy::type_complexity)]
fn reach_rules<'p>(
    policy: &SandboxPolicy,
    paths: &'p [PathBuf],
    access: BitFlags<AccessFs>,
    abi: ABI,
) -> Result<(Vec<PathBeneath<OwnedFd>>, Vec<&'p PathBuf>), CapabilityError> {
    let mut resolved = Vec::new();
    let mut given = Vec::new();
    for path in paths {
        if !policy.resolved.contains(path) {
            given.push(path);
            continue;
        }
        match crate::roots::open_unlinked(path) {
            Ok((fd, is_dir)) => {
                let access = if is_dir {
                    access
                } else {
                    access & AccessFs::from_file(abi)
                };
                resolved.push(PathBeneath::new(fd, access));
            }
            Err(crate::roots::Unopened::Link(link)) => {
                return Err(CapabilityError::not_available(format!(
                    "{} is reached through the symbolic link {}, which toolcap does not \
                     follow to a root (made since the policy loaded, or inside the reach, \
                     where a child may have made it); list the place it leads to, if it is \
                     meant",
                    path.display(),
                    link.display()
                )));
            }
            // As a root that cannot be opened always was: it grants nothing.
            Err(crate::roots::Unopened::Other) => {}
        }
    }
    Ok((resolved, given))
}

pub(crate) fn prepare(
    policy: &SandboxPolicy,
    support: &Support,
) -> Result<Prepared, CapabilityError> {
    let abi = WANTED_ABI;
    let read = AccessFs::ReadFile | AccessFs::ReadDir;
    let exec = AccessFs::from_read(abi);
    // No device nodes, even where the child may write (and it has no CAP_MKNOD either).
    let write =
        AccessFs::from_all(abi) & !AccessFs::Execute & !AccessFs::MakeChar & !AccessFs::MakeBlock;
    let system = if policy.system_dirs {
        hide::system_rules(SYSTEM_READ_DIRS, SYSTEM_HIDDEN)
            .map_err(|e| failed("reading the system directories", e))?
    } else {
        hide::SystemRules::default()
    };
    // The roots a path policy resolved, each opened here where it resolved them (no link on
    // the way: docs/policy.md, "Symbolic links in a policy"); a builder's own paths as given.
    let (read_resolved, read_given) = reach_rules(policy, &policy.read, read, abi)?;
    let (write_resolved, write_given) = reach_rules(policy, &policy.write, write, abi)?;
    let ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))
        .and_then(|r| r.handle_access(AccessNet::from_all(abi)))
        .and_then(|r| r.scope(Scope::from_all(abi)))
        .and_then(Ruleset::create)
        .and_then(|r| r.add_rules(path_beneath_rules(policy.exec_paths(), exec)))
        .and_then(|r| r.add_rules(path_beneath_rules(&system.whole, read)))
        .and_then(|r| r.add_rules(path_beneath_rules(&system.list_only, AccessFs::ReadDir)))
        .and_then(|r| r.add_rules(path_beneath_rules(&read_given, read)))
        .and_then(|r| r.add_rules(read_resolved.into_iter().map(Ok::<_, RulesetError>)))
        .and_then(|r| r.add_rules(path_beneath_rules(&write_given, write)))
        .and_then(|r| r.add_rules(write_resolved.into_iter().map(Ok::<_, RulesetError>)))
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

    let decisions = crate::seccomp::decisions(policy);
    let filter = bpf::compile(&decisions).map_err(|e| failed("seccomp filter", e))?;
    let (ns, hidden) = namespaces(policy, support)?;
    Ok(Prepared {
        ruleset,
        filter,
        alone: (!policy.new_processes).then_some(decisions),
        limits: policy.limits,
        egress: policy.egress,
        ns,
        // Not the children's homes: a child sees only its own, made empty for it, so nothing
        // another child made there can reach it, and a walk there would only spend the walk's
        // budget on other children's files (`git.rs`).
        write: policy
            .write
            .iter()
            .filter(|w| policy.homes.as_ref().is_none_or(|(top, _)| top != *w))
            .cloned()
            .collect(),
        scratch: policy.scratch.clone(),
        homes: policy.homes.as_ref().map(|(_, dir)| dir.clone()),
        // A pattern (`dir/prefix*`) names no one place to look for.
        denied: policy
            .hidden
            .iter()
            .filter(|h| policy.write.iter().any(|w| h.starts_with(w) && *h != w))
            .filter(|h| !h.as_os_str().as_encoded_bytes().contains(&b'*'))
            .cloned()
            .collect(),
        // `/proc`, `/sys` and `/dev` beneath a write root are the child's own, not the host's.
        covered: hidden
            .into_iter()
            .chain(["/proc", "/sys", "/dev"].map(PathBuf::from))
            .filter(|h| policy.write.iter().any(|w| h.starts_with(w) && h != w))
            .filter(|h| !h.as_os_str().as_encoded_bytes().contains(&b'*'))
            .collect(),
    })
}

/// The namespaces of a child under `policy`: what to hide in its mount namespace, and how its
/// process limit is held; and the places hidden (kernel file systems in the reach among them).
fn namespaces(
    policy: &SandboxPolicy,
    support: &Support,
) -> Result<(Namespaces, Vec<PathBuf>), CapabilityError> {
    let (uid, gid) = sys::effective_ids();
    let root = uid == 0;
    let granted: Vec<&std::path::Path> = policy
        .read
        .iter()
        .chain(&policy.write)
        .chain(&policy.exec)
        .map(PathBuf::as_path)
        .collect();
    // A kernel file system mounted beneath a root is hidden as a denied place is.
    let kernel = crate::kernel_mounts::beneath(&granted)
        .map_err(|e| failed("finding kernel file systems in the reach", e))?;
    let hidden: Vec<PathBuf> = policy.hidden.iter().cloned().chain(kernel).collect();
    // The directories above the hidden places in the write roots first, so that none is moved
    // away with them.
    let mut masks = hide::pins_above(hidden.iter().map(PathBuf::as_path), &policy.write)
        .map_err(|e| failed("hiding denied places", e))?;
    masks.extend(
        hide::masks(
            &hidden,
            &granted,
            policy.system(SYSTEM_DEVICES),
            &policy.scratch,
        )
        .map_err(|e| failed("hiding denied places", e))?,
    );
    if masks
        .iter()
        .any(|m| matches!(m, hide::Mask::Dir { keep, .. } if keep.len() > ns::MAX_KEPT))
    {
        return Err(failed(
            "hiding denied places",
            "too many device files to keep",
        ));
    }
    if policy.write.len() > ns::MAX_WRITABLE {
        return Err(failed(
            "keeping the rest of the filesystem read-only",
            format!(
                "{} write roots; a child may have at most {}",
                policy.write.len(),
                ns::MAX_WRITABLE
            ),
        ));
    }
    let writable = policy
        .write
        .iter()
        .map(|w| std::ffi::CString::new(w.as_os_str().as_encoded_bytes()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| {
            failed(
                "keeping the rest of the filesystem read-only",
                "a write root contains a NUL byte",
            )
        })?;
    let proc = std::path::Path::new("/proc");
    let proc_required = granted
        .iter()
        .any(|g| proc.starts_with(g) || g.starts_with(proc));
    let proc_hidden = policy.hidden.iter().any(|h| proc.starts_with(h));
    let proc_required = proc_required && !proc_hidden;
    // RLIMIT_NPROC does not bind root: a PID namespace's own pid_max does (Linux 6.14+).
    let pid_max = match (root, policy.limits.processes) {
        (true, Some(processes)) if support.pid_max_per_namespace => {
            Some(ns::pid_max_for(processes))
        }
        (true, Some(_)) => {
            return Err(failed(
                "limiting the child's processes",
                "RLIMIT_NPROC does not bind root and this kernel has no per-namespace pid_max \
                 (Linux 6.14 or later); run toolcap as an unprivileged user or on a newer kernel",
            ));
        }
        _ => None,
    };
    let ns = Namespaces {
        root,
        uid_map: format!("{uid} {uid} 1").into_bytes(),
        gid_map: format!("{gid} {gid} 1").into_bytes(),
        masks,
        writable,
        pid_max,
        proc_required,
        proc_hidden,
        empty_root: crate::seccomp::grants_no_path(policy),
        homes: match &policy.homes {
            Some((top, dir)) => {
                let c = |p: &std::path::Path| {
                    std::ffi::CString::new(p.as_os_str().as_encoded_bytes())
                        .map_err(|_| failed("the children's homes", "a NUL byte in their path"))
                };
                Some(ns::Homes {
                    top: c(top)?,
                    dir: c(dir)?,
                })
            }
            None => None,
        },
    };
    Ok((ns, hidden))
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
    /// Confines this process, with `first` bound before the sandbox's own masks (what runs
    /// later, as `apply_to` binds it).
    pub(crate) fn confine_current_process(
        mut self,
        first: Vec<hide::Mask>,
    ) -> Result<(), CapabilityError> {
        self.ns = self.ns.with_first(first);
        let threads = thread_count().map_err(|e| failed("counting this process's threads", e))?;
        if threads != 1 {
            return Err(failed(
                "confining this process",
                format!("it has {threads} threads; confine before starting any"),
            ));
        }
        if self.egress {
            return Err(failed(
                "confining this process",
                "the egress proxy is for children only",
            ));
        }
        // A process that starts none has no other process to signal or steer: every other is
        // refused, whatever the kernel's Landlock (its signal scope is Linux 6.12+; without it
        // a worker could stop or kill every process of the user, `kill -1`), and whatever
        // Landlock does not cover (another process's limits and priority).
        let filter = match &self.alone {
            Some(decisions) => {
                let mut decisions = decisions.clone();
                crate::seccomp::only_itself(&mut decisions, std::process::id());
                bpf::compile(&decisions).map_err(|e| failed("seccomp filter", e))?
            }
            None => self.filter.clone(),
        };
        // Its own mount namespace, read-only but for its write roots, and its own IPC
        // namespace, as a child's (docs/isolation-model.md, "Metadata" and "IPC").
        let flags = self.ns.flags(Mode::Apply, false);
        confine::unshare(flags)
            .and_then(|()| ns::enter(&self.ns, Mode::Apply, flags, None))
            .map_err(|e| failed("namespaces of its own for this process", e))?;
        confine::confine(
            self.ruleset.as_raw_fd(),
            &filter,
            &self.limits,
            None,
            Descriptors::Keep,
        )
        .map_err(|e| failed("confining this process", e))
    }

    /// With egress: a fresh channel, the child's end and the host's end.
    pub(crate) fn egress_channel(
        &self,
    ) -> Result<(Option<Egress>, Option<OwnedFd>), CapabilityError> {
        if !self.egress {
            return Ok((None, None));
        }
        let (host_end, child_end) =
            std::os::unix::net::UnixStream::pair().map_err(|e| failed("egress channel", e))?;
        let egress = Egress {
            channel: OwnedFd::from(child_end),
        };
        Ok((Some(egress), Some(OwnedFd::from(host_end))))
    }

    /// Installs the confinement into `command`, with `first` bound before the sandbox's own
    /// masks (what runs later, `git.rs`, as `spawn` binds it); returns the host's end of the
    /// egress channel when the policy has egress. Reusable: each call duplicates the ruleset
    /// descriptor.
    pub(crate) fn apply_to(
        &self,
        command: &mut std::process::Command,
        first: Vec<hide::Mask>,
    ) -> Result<Option<OwnedFd>, CapabilityError> {
        let ruleset = Arc::clone(&self.ruleset);
        let filter = self.filter.clone();
        let limits = self.limits;
        let (egress, host_end) = self.egress_channel()?;
        let namespaces = self.ns.with_first(first);
        let flags = namespaces.flags(Mode::Apply, self.egress);
        let before_exec = move || -> io::Result<()> {
            // The closure runs in the single-threaded child between fork and exec and makes
            // system calls on memory prepared before the fork; it allocates nothing.
            if flags != 0 {
                confine::unshare(flags)?;
                ns::enter(&namespaces, Mode::Apply, flags, None)?;
            }
            confine::confine(
                ruleset.as_raw_fd(),
                &filter,
                &limits,
                egress.as_ref(),
                Descriptors::CloseOnExec,
            )
        };
        confine::run_before_exec(command, before_exec);
        Ok(host_end)
    }
}
