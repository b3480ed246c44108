//! What the seccomp filter of a confined process decides, per system call
//! (docs/isolation-model.md, "Children"): the calls a confined process never needs, and those
//! whose arguments decide (sockets, `clone`, modes, `ioctl`, the calls that reach another
//! process). `bpf.rs` compiles these decisions into the program.

use std::collections::BTreeMap;

use crate::SandboxPolicy;
use crate::bpf::Decision;

/// Nothing granted, not even the system directories (a capsule worker's policy): no path may
/// be opened, so none need name anything. Such a process gets an empty root of its own, and no
/// `inotify` instance (docs/isolation-model.md, "An empty root").
pub(crate) fn grants_no_path(policy: &SandboxPolicy) -> bool {
    policy.read.is_empty()
        && policy.write.is_empty()
        && policy.exec.is_empty()
        && !policy.system_dirs
}

/// `setxattrat` (Linux 6.13), the same number on x86_64 and aarch64 (the common table), which
/// the `libc` crate does not name yet.
const SYS_SETXATTRAT: libc::c_long = 463;

/// `open_tree_attr` (Linux 6.15), a mount call like `open_tree`, likewise not named yet.
const SYS_OPEN_TREE_ATTR: libc::c_long = 467;

/// What the seccomp filter decides, per system call: the calls a confined process never needs
/// fail with `EPERM`; `socket` and `clone` depend on their arguments; `clone3` fails with
/// `ENOSYS` so that the C library falls back to `clone`, whose flags the filter can see.
pub(crate) fn decisions(policy: &SandboxPolicy) -> BTreeMap<u32, Decision> {
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
        SYS_OPEN_TREE_ATTR,
        libc::SYS_fsopen,
        libc::SYS_fsmount,
        libc::SYS_fsconfig,
        libc::SYS_fspick,
        libc::SYS_mount_setattr,
        libc::SYS_quotactl_fd,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        libc::SYS_kexec_load,
        libc::SYS_kexec_file_load,
        // Another process's descriptor, taken by its pidfd (Landlock refuses it too, where it
        // scopes ptrace: only a process of the caller's own domain).
        libc::SYS_pidfd_getfd,
        // Calls the kernel keeps only for compatibility, if at all.
        libc::SYS_lookup_dcookie,
        libc::SYS_nfsservctl,
        #[cfg(target_arch = "x86_64")]
        libc::SYS_uselib,
        libc::SYS_userfaultfd,
        libc::SYS_personality,
        // What root could do with a capability left over; the capabilities are gone too.
        libc::SYS_syslog,
        libc::SYS_settimeofday,
        libc::SYS_clock_settime,
        libc::SYS_clock_adjtime,
        libc::SYS_adjtimex,
        libc::SYS_reboot,
        libc::SYS_swapon,
        libc::SYS_swapoff,
        libc::SYS_sethostname,
        libc::SYS_setdomainname,
        libc::SYS_acct,
        libc::SYS_quotactl,
        libc::SYS_vhangup,
        libc::SYS_open_by_handle_at,
        libc::SYS_name_to_handle_at,
        libc::SYS_fanotify_init,
        #[cfg(target_arch = "x86_64")]
        libc::SYS_iopl,
        #[cfg(target_arch = "x86_64")]
        libc::SYS_ioperm,
    ];
    let eperm = Decision::Errno(libc::EPERM as u32);
    let nr = |n: libc::c_long| n as u32;
    let mut d: BTreeMap<u32, Decision> =
        always.into_iter().map(|n| (nr(n), eperm.clone())).collect();
    // Sockets: none but what the egress proxy needs. A Unix socket can connect to any pathname
    // socket the child can name (Landlock does not mediate that connect), so a child makes none:
    // its own network is the proxy's (Internet sockets, in a namespace that has nothing else),
    // and without egress it has no socket at all (docs/isolation-model.md). socketpair stays
    // allowed: an anonymous connected pair reaches nothing (runtimes use one for signals).
    let socket = if policy.sockets && policy.egress {
        Decision::Arg0In(vec![libc::AF_INET as u32, libc::AF_INET6 as u32])
    } else {
        eperm.clone()
    };
    d.insert(nr(libc::SYS_socket), socket);
    // In an empty root an `inotify` instance can watch nothing, and each one counts against the
    // user's instances (128 by default, for every process of the uid, the host's included).
    if grants_no_path(policy) {
        #[cfg(target_arch = "x86_64")]
        d.insert(nr(libc::SYS_inotify_init), eperm.clone());
        d.insert(nr(libc::SYS_inotify_init1), eperm.clone());
    }
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
    // A terminal's input is not the child's to write: `TIOCSTI` pushes characters into it as
    // if typed, and the user's shell reads them once the child ends, outside any sandbox (a
    // terminal the child inherited as a descriptor needs no reach; bubblewrap's CVE-2017-5226).
    // `TIOCLINUX` pastes a virtual console's selection the same way.
    d.insert(
        nr(libc::SYS_ioctl),
        Decision::IoctlRequests(vec![libc::TIOCSTI as u32, libc::TIOCLINUX as u32]),
    );
    // No set-user-ID or set-group-ID file: one left in the write reach would run, for whoever
    // can reach it later, as the user the host runs as (root, in a container), outside any
    // sandbox (docs/isolation-model.md, "Set-ID files"). The mode is refused wherever a call
    // sets one: `chmod` and its kin, and creation by `open`, `creat` and `mknod`. `openat2`
    // takes its mode behind a pointer, which the filter cannot read: it is `ENOSYS`, and
    // callers fall back to `openat` as on kernels before 5.6.
    let set_id: u32 = libc::S_ISUID | libc::S_ISGID;
    // `O_TMPFILE` includes `O_DIRECTORY`, which alone creates nothing.
    let creating = (libc::O_CREAT | (libc::O_TMPFILE & !libc::O_DIRECTORY)) as u32;
    let mode_at = |mode: u32, refused: u32, only_with: Option<(u32, u32)>| Decision::ModeBits {
        mode,
        refused,
        only_with,
    };
    // Nor a place other accounts may write ("Modes that open a place to others"): `chmod` and
    // its kin refuse their write bit; a file created is masked by the `umask` (which keeps
    // that bit: below, and `confine`), so `open(…, 0666)`, every program's default, still works.
    let changed = set_id | libc::S_IWOTH;
    for (n, decision) in [
        (libc::SYS_fchmod, mode_at(1, changed, None)),
        (libc::SYS_fchmodat, mode_at(2, changed, None)),
        (libc::SYS_fchmodat2, mode_at(2, changed, None)),
        (libc::SYS_mknodat, mode_at(2, set_id, None)),
        (libc::SYS_openat, mode_at(3, set_id, Some((2, creating)))),
        #[cfg(target_arch = "x86_64")]
        (libc::SYS_chmod, mode_at(1, changed, None)),
        #[cfg(target_arch = "x86_64")]
        (libc::SYS_creat, mode_at(1, set_id, None)),
        #[cfg(target_arch = "x86_64")]
        (libc::SYS_mknod, mode_at(1, set_id, None)),
        #[cfg(target_arch = "x86_64")]
        (libc::SYS_open, mode_at(2, set_id, Some((1, creating)))),
    ] {
        d.insert(nr(n), decision);
    }
    d.insert(
        nr(libc::SYS_umask),
        Decision::KeepsBit {
            arg: 0,
            bit: libc::S_IWOTH,
        },
    );
    // An access control list is an extended attribute (`system.posix_acl_access`), which can
    // give another account write access whatever the mode says; a filter cannot read the
    // attribute's name, so no extended attribute is set.
    for n in [
        libc::SYS_setxattr,
        libc::SYS_lsetxattr,
        libc::SYS_fsetxattr,
        SYS_SETXATTRAT,
    ] {
        d.insert(nr(n), eperm.clone());
    }
    d.insert(nr(libc::SYS_openat2), Decision::Errno(libc::ENOSYS as u32));
    d
}

/// The calls that reach another process by its id, allowed only to `pid` itself (`0` naming
/// the caller; for `kill` also its own process group, of which it is the only member): signals,
/// and what would change how another process runs (its resource limits, its priority, its CPUs,
/// its scheduling, where its memory lies), which a tool could use to starve the host. `tkill`
/// names a thread without its process and `pidfd_send_signal` a process by descriptor, so both
/// are refused; `setpriority` and `ioprio_set` only for a process or its group, never for
/// every process of a user.
pub(crate) fn only_itself(d: &mut BTreeMap<u32, Decision>, pid: u32) {
    let nr = |n: libc::c_long| n as u32;
    let group = pid.wrapping_neg();
    d.insert(nr(libc::SYS_kill), Decision::Arg0In(vec![pid, 0, group]));
    for n in [
        libc::SYS_prlimit64,
        libc::SYS_sched_setaffinity,
        libc::SYS_sched_setscheduler,
        libc::SYS_sched_setparam,
        libc::SYS_sched_setattr,
        libc::SYS_migrate_pages,
        libc::SYS_move_pages,
    ] {
        d.insert(nr(n), Decision::Arg0In(vec![0, pid]));
    }
    // PRIO_PROCESS and PRIO_PGRP (not PRIO_USER, 2), as the kernel numbers them.
    d.insert(
        nr(libc::SYS_setpriority),
        Decision::Args01In(vec![0, 1], vec![0, pid]),
    );
    // IOPRIO_WHO_PROCESS and IOPRIO_WHO_PGRP (not IOPRIO_WHO_USER, 3).
    d.insert(
        nr(libc::SYS_ioprio_set),
        Decision::Args01In(vec![1, 2], vec![0, pid]),
    );
    for n in [
        libc::SYS_tgkill,
        libc::SYS_rt_sigqueueinfo,
        libc::SYS_rt_tgsigqueueinfo,
    ] {
        d.insert(nr(n), Decision::Arg0In(vec![pid]));
    }
    for n in [libc::SYS_tkill, libc::SYS_pidfd_send_signal] {
        d.insert(nr(n), Decision::Errno(libc::EPERM as u32));
    }
}
