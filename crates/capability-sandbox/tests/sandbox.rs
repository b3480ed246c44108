//! Real children under a real kernel: what a confined child can and cannot do.
#![cfg(target_os = "linux")]
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "the tests start real children and build fixture trees directly"
)]

#[path = "../../../tests/shared/mounted.rs"]
mod mounted;

use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output};

use capability_sandbox::{ResourceLimits, SandboxPolicy, Support, probe};
use capability_types::ErrorCode;

struct Tree {
    _dir: tempfile::TempDir,
    read: std::path::PathBuf,
    write: std::path::PathBuf,
    outside: std::path::PathBuf,
}

fn tree() -> Tree {
    let dir = tempfile::tempdir().unwrap();
    let read = dir.path().join("read");
    let write = dir.path().join("write");
    let outside = dir.path().join("outside");
    for d in [&read, &write, &outside] {
        std::fs::create_dir(d).unwrap();
    }
    std::fs::write(read.join("in.txt"), "inside").unwrap();
    std::fs::write(outside.join("secret.txt"), "secret").unwrap();
    Tree {
        _dir: dir,
        read,
        write,
        outside,
    }
}

fn policy(t: &Tree) -> SandboxPolicy {
    SandboxPolicy::new().read(&t.read).write(&t.write)
}

/// Runs `sh -c script` under `policy`.
fn sh(policy: &SandboxPolicy, script: &str) -> Output {
    let mut command = Command::new("/bin/sh");
    command.arg("-c").arg(script);
    policy.prepare().unwrap().apply_to(&mut command).unwrap();
    command.output().expect("the confined child starts")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn this_kernel_supports_confinement() {
    // CI runs on Linux with Landlock; if this fails, every other test here would too.
    let support = probe();
    assert_eq!(support.refusal(), None);
    assert!(support.landlock_abi().unwrap() >= 1);
}

#[test]
fn reads_only_beneath_read_and_write_roots() {
    let t = tree();
    let out = sh(&policy(&t), &format!("cat {}/in.txt", t.read.display()));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "inside");

    let out = sh(
        &policy(&t),
        &format!("cat {}/secret.txt", t.outside.display()),
    );
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("Permission denied"),
        "{}",
        text(&out.stderr)
    );
    assert!(!text(&out.stdout).contains("secret"));

    // The home directory and /proc of other processes are outside too.
    let home = std::env::var("HOME").unwrap();
    let out = sh(&policy(&t), &format!("ls {home}"));
    assert!(!out.status.success(), "{}", text(&out.stdout));
    let out = sh(
        &policy(&t),
        &format!("cat /proc/{}/environ", std::process::id()),
    );
    assert!(!out.status.success());
}

// guarantee: G-KERN-01
#[test]
fn writes_only_beneath_write_roots_and_never_executes_from_them() {
    let t = tree();
    let out = sh(
        &policy(&t),
        &format!("echo hi > {}/made.txt", t.write.display()),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        std::fs::read_to_string(t.write.join("made.txt")).unwrap(),
        "hi\n"
    );

    for target in [t.outside.join("made.txt"), t.read.join("made.txt")] {
        let out = sh(&policy(&t), &format!("echo hi > {}", target.display()));
        assert!(!out.status.success(), "{}", target.display());
        assert!(!target.exists(), "{}", target.display());
    }

    // A program copied into a write root cannot be run from there.
    let out = sh(
        &policy(&t),
        &format!(
            "cp /bin/true {w}/t && chmod +x {w}/t && {w}/t",
            w = t.write.display()
        ),
    );
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("Permission denied"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn the_child_has_no_network() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let t = tree();
    // bash's /dev/tcp makes a plain socket + connect.
    let mut command = Command::new("/bin/bash");
    command.arg("-c").arg(format!(
        "exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected"
    ));
    policy(&t)
        .prepare()
        .unwrap()
        .apply_to(&mut command)
        .unwrap();
    let out = command.output().unwrap();
    assert!(!out.status.success());
    assert!(!text(&out.stdout).contains("connected"));
    assert!(listener.accept().is_err(), "nothing reached the listener");
}

#[test]
fn namespace_and_tracing_calls_are_refused() {
    let t = tree();
    // unshare(1) needs unshare(2), which seccomp refuses.
    if Path::new("/usr/bin/unshare").exists() {
        let out = sh(&policy(&t), "/usr/bin/unshare -r true");
        assert!(!out.status.success());
        assert!(
            text(&out.stderr).contains("Operation not permitted"),
            "{}",
            text(&out.stderr)
        );
    }
    // Ordinary process creation still works (fork, pipes, threads through clone).
    let out = sh(&policy(&t), "echo a | cat && (true) && echo b");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "a\nb\n");
}

#[test]
fn resource_limits_are_applied() {
    let t = tree();
    let limits = ResourceLimits {
        address_space: Some(512 << 20),
        cpu_seconds: Some(7),
        file_size: Some(4096),
        open_files: Some(64),
        ..ResourceLimits::default()
    };
    let out = sh(
        &policy(&t).limits(limits),
        "ulimit -t; ulimit -n; ulimit -v; ulimit -f",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    // dash reports -v in KiB and -f in 512-byte blocks.
    assert_eq!(text(&out.stdout), "7\n64\n524288\n8\n");

    // A write past the file size limit is cut off.
    let out = sh(
        &policy(&t).limits(limits),
        &format!("head -c 10000 /dev/zero > {}/big", t.write.display()),
    );
    assert!(!out.status.success());
    assert!(std::fs::metadata(t.write.join("big")).unwrap().len() <= 4096);
}

// guarantee: G-KERN-06
#[test]
fn unsupported_kernels_refuse_and_nothing_runs() {
    let t = tree();
    let err = policy(&t)
        .prepare_with(&Support::unsupported("forced by the test"))
        .unwrap_err();
    assert_eq!(err.result_code(), ErrorCode::NotAvailable);
    assert!(err.to_string().contains("forced by the test"), "{err}");
}

#[test]
fn every_spawn_of_a_confined_command_is_confined() {
    let t = tree();
    let mut command = Command::new("/bin/cat");
    command.arg(t.outside.join("secret.txt"));
    policy(&t)
        .prepare()
        .unwrap()
        .apply_to(&mut command)
        .unwrap();
    // The confinement runs in each forked child on its own copy of the prepared state, so a
    // command spawned twice is confined twice.
    for _ in 0..2 {
        let out = command.output().unwrap();
        assert!(!out.status.success());
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn relative_paths_are_refused() {
    let err = SandboxPolicy::new().read("data").prepare().unwrap_err();
    assert_eq!(err.result_code(), ErrorCode::InputInvalid);
}

/// The `errno` each raw system call `(number, arguments)` leaves (0 when it succeeded), made in
/// order through python's ctypes by a child, confined by `policy` when there is one.
fn errnos(calls: &[(libc::c_long, &[i64])], policy: Option<&SandboxPolicy>) -> Vec<String> {
    let list: Vec<String> = calls
        .iter()
        .map(|(nr, args)| format!("({nr}, {args:?})"))
        .collect();
    let script = format!(
        "import ctypes\n\
         libc = ctypes.CDLL(None, use_errno=True)\n\
         for nr, args in ({},):\n\
         \x20   ctypes.set_errno(0)\n\
         \x20   libc.syscall(nr, *[ctypes.c_long(a) for a in args])\n\
         \x20   print(ctypes.get_errno())\n",
        list.join(", ")
    );
    let mut command = Command::new("/usr/bin/python3");
    command.arg("-c").arg(&script);
    if let Some(policy) = policy {
        policy.prepare().unwrap().apply_to(&mut command).unwrap();
    }
    let out = command.output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout).lines().map(str::to_owned).collect()
}

#[test]
fn tracing_and_io_uring_system_calls_fail_with_eperm() {
    let t = tree();
    let calls: [(libc::c_long, &[i64]); 3] = [
        (libc::SYS_io_uring_setup, &[1, 0]),
        (libc::SYS_ptrace, &[0, 0, 0, 0]),
        (libc::SYS_bpf, &[0, 0, 0]),
    ];
    let eperm = libc::EPERM.to_string();
    assert_eq!(
        errnos(&calls, Some(&policy(&t))),
        [eperm.as_str(); 3],
        "io_uring_setup, ptrace(PTRACE_TRACEME), bpf"
    );
    // Unconfined, the same calls get past the filter (and fail, if at all, for other reasons).
    assert_ne!(errnos(&calls[..2], None), [eperm.as_str(); 2]);
}

// guarantee: G-KERN-03
#[test]
fn the_new_mount_api_kexec_and_descriptor_theft_fail_with_eperm() {
    // Each call with arguments the kernel itself rejects (bad flags, no descriptor), so that
    // without the filter it answers EINVAL or EBADF, and with it EPERM, whatever the caller's
    // capabilities. Nothing here could mount, load or take anything even unfiltered.
    let calls: [(libc::c_long, &[i64]); 5] = [
        (libc::SYS_fspick, &[-100, 0, 0xffff]),
        (libc::SYS_mount_setattr, &[-100, 0, 0xffff, 0, 0]),
        (libc::SYS_pidfd_getfd, &[-1, 0, 1]),
        (libc::SYS_quotactl_fd, &[-1, 0, 0, 0]),
        (libc::SYS_kexec_file_load, &[-1, -1, 0, 0, 0]),
    ];
    let t = tree();
    let eperm = libc::EPERM.to_string();
    assert_eq!(
        errnos(&calls, Some(&policy(&t))),
        [eperm.as_str(); 5],
        "fspick, mount_setattr, pidfd_getfd, quotactl_fd, kexec_file_load"
    );
    // Unconfined, the kernel answers the bad arguments itself (kexec_file_load not tried).
    for (errno, call) in
        errnos(&calls[1..4], None)
            .iter()
            .zip(["mount_setattr", "pidfd_getfd", "quotactl_fd"])
    {
        assert_ne!(*errno, eperm, "{call} unconfined");
    }
}

// guarantee: G-KERN-03, G-KERN-15
/// Every call the filter refuses outright fails with `EPERM` in a confined child, each with
/// arguments that do nothing anywhere (null pointers, no descriptor, flags the kernel rejects,
/// a query), so that what answers is the filter or a dropped capability, never a change. The
/// calls that need no capability are also made unconfined, where the kernel answers them
/// itself: for those the filter is the only thing in the way (the keyring calls reach the
/// keys every process of the account shares; `unshare(0)` and `personality` change nothing
/// here but would succeed).
#[test]
fn every_call_the_filter_refuses_outright_fails_with_eperm() {
    let t = tree();
    let open: &[(&str, libc::c_long, &[i64])] = &[
        ("add_key", libc::SYS_add_key, &[0, 0, 0, 0, 0]),
        ("request_key", libc::SYS_request_key, &[0, 0, 0, 0]),
        // KEYCTL_GET_KEYRING_ID of the user keyring, not created.
        ("keyctl", libc::SYS_keyctl, &[0, -4, 0]),
        ("unshare", libc::SYS_unshare, &[0]),
        ("setns", libc::SYS_setns, &[-1, 0]),
        // The query form: the persona is read, not set.
        ("personality", libc::SYS_personality, &[0xffff_ffff]),
        (
            "perf_event_open",
            libc::SYS_perf_event_open,
            &[0, 0, -1, -1, 0],
        ),
        (
            "process_vm_readv",
            libc::SYS_process_vm_readv,
            &[0, 0, 0, 0, 0, 1],
        ),
        (
            "process_vm_writev",
            libc::SYS_process_vm_writev,
            &[0, 0, 0, 0, 0, 1],
        ),
        (
            "name_to_handle_at",
            libc::SYS_name_to_handle_at,
            &[-1, 0, 0, 0, 0],
        ),
        ("adjtimex", libc::SYS_adjtimex, &[0]),
        ("clock_adjtime", libc::SYS_clock_adjtime, &[0, 0]),
    ];
    let guarded: &[(&str, libc::c_long, &[i64])] = &[
        ("userfaultfd", libc::SYS_userfaultfd, &[-1]),
        ("mount", libc::SYS_mount, &[0, 0, 0, 0, 0]),
        ("umount2", libc::SYS_umount2, &[0, -1]),
        ("pivot_root", libc::SYS_pivot_root, &[0, 0]),
        ("chroot", libc::SYS_chroot, &[0]),
        ("move_mount", libc::SYS_move_mount, &[-1, 0, -1, 0, -1]),
        ("open_tree", libc::SYS_open_tree, &[-1, 0, -1]),
        ("fsopen", libc::SYS_fsopen, &[0, -1]),
        ("fsmount", libc::SYS_fsmount, &[-1, -1, -1]),
        ("fsconfig", libc::SYS_fsconfig, &[-1, -1, 0, 0, 0]),
        ("init_module", libc::SYS_init_module, &[0, 0, 0]),
        ("finit_module", libc::SYS_finit_module, &[-1, 0, -1]),
        ("delete_module", libc::SYS_delete_module, &[0, -1]),
        ("kexec_load", libc::SYS_kexec_load, &[0, 0, 0, -1]),
        ("lookup_dcookie", libc::SYS_lookup_dcookie, &[0, 0, 0]),
        ("nfsservctl", libc::SYS_nfsservctl, &[0, 0, 0]),
        ("settimeofday", libc::SYS_settimeofday, &[0, 0]),
        ("clock_settime", libc::SYS_clock_settime, &[0, 0]),
        ("reboot", libc::SYS_reboot, &[0, 0, 0, 0]),
        ("swapon", libc::SYS_swapon, &[0, 0]),
        ("swapoff", libc::SYS_swapoff, &[0]),
        ("sethostname", libc::SYS_sethostname, &[0, 100_000]),
        ("setdomainname", libc::SYS_setdomainname, &[0, 100_000]),
        ("acct", libc::SYS_acct, &[0]),
        ("quotactl", libc::SYS_quotactl, &[0, 0, 0, 0]),
        ("vhangup", libc::SYS_vhangup, &[]),
        (
            "open_by_handle_at",
            libc::SYS_open_by_handle_at,
            &[-1, 0, 0],
        ),
        ("fanotify_init", libc::SYS_fanotify_init, &[-1, 0]),
        #[cfg(target_arch = "x86_64")]
        ("uselib", libc::SYS_uselib, &[0]),
        #[cfg(target_arch = "x86_64")]
        ("iopl", libc::SYS_iopl, &[0]),
        #[cfg(target_arch = "x86_64")]
        ("ioperm", libc::SYS_ioperm, &[0, 0, 0]),
    ];
    let eperm = libc::EPERM.to_string();
    for calls in [open, guarded] {
        let raw: Vec<(libc::c_long, &[i64])> = calls.iter().map(|&(_, n, a)| (n, a)).collect();
        for ((name, ..), errno) in calls.iter().zip(errnos(&raw, Some(&policy(&t)))) {
            assert_eq!(errno, eperm, "{name} confined");
        }
    }
    // Unconfined, only the calls that need no capability and change nothing.
    let raw: Vec<(libc::c_long, &[i64])> = open.iter().map(|&(_, n, a)| (n, a)).collect();
    for ((name, ..), errno) in open.iter().zip(errnos(&raw, None)) {
        assert_ne!(errno, eperm, "{name} unconfined");
    }
}

#[test]
fn one_prepared_sandbox_confines_every_command_it_is_applied_to() {
    let t = tree();
    let prepared = policy(&t).prepare().unwrap();
    for _ in 0..3 {
        let mut command = Command::new("/bin/sh");
        command.arg("-c").arg(format!(
            "cat {}/in.txt; cat {}/secret.txt",
            t.read.display(),
            t.outside.display()
        ));
        assert!(prepared.apply_to(&mut command).unwrap().is_none());
        let out = command.output().unwrap();
        assert_eq!(text(&out.stdout), "inside");
        assert!(text(&out.stderr).contains("Permission denied"), "{out:?}");
    }
}

#[test]
fn with_egress_the_child_reaches_its_proxy_port_and_nothing_else() {
    let host = TcpListener::bind("127.0.0.1:0").unwrap();
    host.set_nonblocking(true).unwrap();
    let host_port = host.local_addr().unwrap().port();
    let t = tree();
    let prepared = policy(&t).egress_proxy().prepare().unwrap();
    let mut command = Command::new("/bin/bash");
    command.arg("-c").arg(format!(
        "exec 3<>/dev/tcp/127.0.0.1/3128 && echo proxy-reached; \
         exec 4<>/dev/tcp/127.0.0.1/{host_port} && echo host-reached; \
         exec 5<>/dev/tcp/127.0.0.1/3129 && echo other-port-reached; true"
    ));
    command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let receiver = prepared
        .apply_to(&mut command)
        .unwrap()
        .expect("an egress receiver");
    let child = command.spawn().unwrap();
    // The listener the child made inside its own namespace, now the host's to serve.
    let proxy = receiver.receive().unwrap();
    assert_eq!(proxy.local_addr().unwrap().port(), 3128);
    let accepted = std::thread::spawn(move || proxy.accept().map(|_| ()).is_ok());
    let out = child.wait_with_output().unwrap();
    assert!(
        accepted.join().unwrap(),
        "the host accepted the child's connection"
    );
    let stdout = text(&out.stdout);
    assert!(stdout.contains("proxy-reached"), "{out:?}");
    assert!(!stdout.contains("host-reached"), "{out:?}");
    assert!(!stdout.contains("other-port-reached"), "{out:?}");
    assert!(
        host.accept().is_err(),
        "the host's own listener was not reached"
    );
}

/// Runs a [`PreparedSandbox::spawn`]ed child to its end: (exit status, stdout, stderr).
fn run_spawned(child: capability_sandbox::ConfinedChild, input: &[u8]) -> (i32, String, String) {
    use std::io::{Read, Write};
    // The parent's ends come back non-blocking (for an async runtime): retry on WouldBlock.
    let blocking = std::fs::File::from;
    if let Some(stdin) = child.stdin {
        let mut stdin = blocking(stdin);
        loop {
            match stdin.write(input) {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                _ => break,
            }
        }
    }
    let drain = |fd: std::os::fd::OwnedFd| {
        let mut file = blocking(fd);
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                Err(e) => panic!("{e}"),
            }
        }
        text(&out)
    };
    let stdout = drain(child.stdout);
    let stderr = drain(child.stderr);
    let mut status = 0;
    // SAFETY: waits for our own child.
    #[allow(unsafe_code, reason = "reaping the test's own child")]
    let reaped = unsafe { libc::waitpid(child.pid as i32, &mut status, 0) };
    assert_eq!(reaped, child.pid as i32);
    (libc::WEXITSTATUS(status), stdout, stderr)
}

fn launch<'a>(
    program: &'a Path,
    args: &'a [String],
    cwd: &'a Path,
    stdin: bool,
) -> capability_sandbox::Launch<'a> {
    capability_sandbox::Launch {
        program,
        arg0: std::ffi::OsStr::new("sh"),
        args,
        env: &[],
        cwd,
        stdin,
        git_writable: None,
        runs_later: &[],
        runs_later_places: &[],
        home: None,
    }
}

#[test]
fn spawned_children_are_confined_without_copying_the_parent() {
    let t = tree();
    let prepared = policy(&t).prepare().unwrap();
    let script = format!(
        "read line; echo \"got $line\"; cat {}/in.txt; echo; cat {}/secret.txt; echo done >&2; exit 3",
        t.read.display(),
        t.outside.display()
    );
    let args = vec!["-c".to_owned(), script];
    let child = prepared
        .spawn(&launch(Path::new("/bin/sh"), &args, &t.write, true))
        .unwrap();
    assert!(child.egress.is_none());
    let (status, stdout, stderr) = run_spawned(child, b"hello\n");
    assert_eq!(status, 3);
    assert_eq!(stdout, "got hello\ninside\n");
    assert!(stderr.contains("Permission denied"), "{stderr}");
    assert!(stderr.ends_with("done\n"), "{stderr}");
}

// guarantee: G-PROC-06
#[test]
fn a_launch_has_its_own_home_in_the_policys_homes_and_nowhere_else() {
    let t = tree();
    let homes = capability_sandbox::ScratchDir::new_in(&t.write, "toolcap-home-").unwrap();
    let prepared = SandboxPolicy::new().homes(&homes).prepare().unwrap();
    let mine = tempfile::tempdir_in(homes.path()).unwrap();
    let other = tempfile::tempdir_in(homes.path()).unwrap();
    std::fs::write(other.path().join("token"), "the other's").unwrap();
    let script = "echo kept > \"$H/f\"; ls -a \"$H/..\"; cat \"$H\"/../*/token; \
                  touch \"$H/../beside\" || echo refused"
        .to_owned();
    let args = vec!["-c".to_owned(), script];
    let env = [("H".to_owned(), mine.path().display().to_string())];
    let name = mine.path().file_name().unwrap().to_str().unwrap();
    let own = capability_sandbox::Launch {
        env: &env,
        home: Some(mine.path()),
        ..launch(Path::new("/bin/sh"), &args, mine.path(), false)
    };
    let (_, stdout, _) = run_spawned(prepared.spawn(&own).unwrap(), b"");
    assert_eq!(stdout, format!(".\n..\n{name}\nrefused\n"));
    assert_eq!(
        std::fs::read_to_string(mine.path().join("f")).unwrap(),
        "kept\n"
    );
    assert!(!homes.path().join("beside").exists());

    // A home anywhere but directly in the homes is refused before anything starts.
    let nested = other.path().join("inner");
    std::fs::create_dir(&nested).unwrap();
    let up = homes.path().join("..");
    let dotted = homes.path().join(name).join("..");
    for wrong in [
        homes.path(),
        nested.as_path(),
        up.as_path(),
        dotted.as_path(),
        t.write.as_path(),
        Path::new("/etc"),
        Path::new("relative"),
    ] {
        let elsewhere = capability_sandbox::Launch {
            home: Some(wrong),
            ..launch(Path::new("/bin/sh"), &args, mine.path(), false)
        };
        let err = prepared.spawn(&elsewhere).unwrap_err();
        assert_eq!(
            err.result_code(),
            ErrorCode::InputInvalid,
            "{wrong:?}: {err}"
        );
    }
    // And by a sandbox whose policy has no homes.
    let without = policy(&t).prepare().unwrap();
    let unhomed = capability_sandbox::Launch {
        home: Some(mine.path()),
        ..launch(Path::new("/bin/sh"), &args, &t.write, false)
    };
    let err = without.spawn(&unhomed).unwrap_err();
    assert_eq!(err.result_code(), ErrorCode::InputInvalid, "{err}");
}

#[test]
fn a_spawn_that_cannot_start_names_the_step_and_runs_nothing() {
    let t = tree();
    let prepared = policy(&t).prepare().unwrap();
    let args = vec!["-c".to_owned(), "echo ran".to_owned()];
    // A working directory that does not exist.
    let missing = t.write.join("missing");
    let err = prepared
        .spawn(&launch(Path::new("/bin/sh"), &args, &missing, false))
        .unwrap_err();
    assert_eq!(err.result_code(), ErrorCode::NotAvailable);
    assert!(
        err.to_string()
            .contains("entering its working directory: No such file or directory"),
        "{err}"
    );
    // A program Landlock does not let it execute (a copy in its write root).
    let copy = t.write.join("sh");
    std::fs::copy("/bin/sh", &copy).unwrap();
    let err = prepared
        .spawn(&launch(&copy, &args, &t.write, false))
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("executing the program: Permission denied"),
        "{err}"
    );
    // NUL bytes never reach the kernel.
    let nul = vec!["-c".to_owned(), "echo a\0b".to_owned()];
    let err = prepared
        .spawn(&launch(Path::new("/bin/sh"), &nul, &t.write, false))
        .unwrap_err();
    assert_eq!(err.result_code(), ErrorCode::InputInvalid);
}

/// A hidden place named through a symbolic link is covered where the link leads: the canary
/// is read neither through the link nor under its real name.
#[test]
fn a_hidden_link_is_covered_where_it_leads() {
    let t = tree();
    std::fs::write(t.read.join("secret.env"), "canary-hidden").unwrap();
    std::os::unix::fs::symlink(t.read.join("secret.env"), t.read.join("link.env")).unwrap();
    let policy = policy(&t).hide(t.read.join("link.env"));
    let out = sh(
        &policy,
        &format!(
            "cat {r}/secret.env {r}/link.env; cat {r}/in.txt",
            r = t.read.display()
        ),
    );
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(!all.contains("canary-hidden"), "{all}");
    assert!(
        all.contains("inside"),
        "the rest of the root stays readable: {all}"
    );
}

/// `git` run in `dir` by the test itself, outside any sandbox; its standard output.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", text(&out.stderr));
    text(&out.stdout)
}

/// `sh -c script` spawned under `prepared` in `cwd`, with `writable` as the caller's say on
/// git's places: its status and what it printed.
fn spawn_sh(
    prepared: &capability_sandbox::PreparedSandbox,
    cwd: &Path,
    script: &str,
    writable: Option<&(dyn Fn(&Path) -> bool + Sync)>,
) -> Result<(i32, String, String), capability_types::CapabilityError> {
    let args = vec!["-c".to_owned(), script.to_owned()];
    let mut launch = launch(Path::new("/bin/sh"), &args, cwd, false);
    launch.git_writable = writable;
    launch.runs_later = &capability_types::backend::RUNS_LATER_NAMES;
    let env = [("PATH".to_owned(), "/usr/bin:/bin".to_owned())];
    launch.env = &env;
    prepared.spawn(&launch).map(|child| run_spawned(child, b""))
}

// guarantee: G-FS-09
/// Git runs a repository's hooks and the commands its configuration names when the user runs
/// git there later, outside any sandbox, and takes them from whatever git directory a
/// `commondir` file in its git directory names. A child that may write the working tree cannot
/// write any of those, nor set the repository's `.git` aside for one of its own, nor repoint a
/// linked worktree's `.git` file: the git directory is read-only to it, so `git commit` fails
/// there. What the caller's policy lets children write stays writable: a repository's git
/// directory (then `git commit` works, and its hooks and configuration are still kept), or its
/// hooks alone.
#[test]
fn a_child_cannot_plant_what_git_runs_outside_the_sandbox() {
    let t = tree();
    let repo = t.write.join("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    std::fs::write(repo.join("a.txt"), "a").unwrap();
    git(&repo, &["add", "a.txt"]);
    git(&repo, &["commit", "-qm", "first"]);
    git(&repo, &["worktree", "add", "-q", "../wt"]);
    let config = std::fs::read_to_string(repo.join(".git/config")).unwrap();
    let pointer = std::fs::read_to_string(t.write.join("wt/.git")).unwrap();
    let prepared = policy(&t).prepare().unwrap();
    // A git directory of the child's own, with a hook, for `commondir` to name.
    let evil = t.write.join("evil");
    std::fs::create_dir_all(evil.join("hooks")).unwrap();
    let attacks = "echo 'touch /tmp/planted' > .git/hooks/pre-commit; echo hook=$?; \
         git config core.fsmonitor 'touch /tmp/planted'; echo config=$?; \
         echo ../../evil > .git/commondir; echo commondir=$?; \
         mv .git .git-aside; echo moved=$?; rm -rf .git/hooks; echo removed=$?; \
         echo b > b.txt; git add b.txt && git -c user.name=t -c user.email=t@example.com \
         commit -qm second; echo commit=$?";
    let (status, stdout, stderr) = spawn_sh(&prepared, &repo, attacks, None).unwrap();
    assert_eq!(status, 0, "{stdout}{stderr}");
    for refused in [
        "hook=",
        "config=",
        "commondir=",
        "moved=",
        "removed=",
        "commit=",
    ] {
        assert!(
            !stdout.contains(&format!("{refused}0")),
            "{refused}: {stdout}{stderr}"
        );
    }
    assert!(!repo.join(".git/hooks/pre-commit").exists());
    assert!(!repo.join(".git/commondir").exists());
    assert!(!repo.join(".git-aside").exists());
    assert_eq!(
        std::fs::read_to_string(repo.join(".git/config")).unwrap(),
        config
    );
    assert!(git(&repo, &["log", "--format=%s"]).starts_with("first\n"));

    // The git directory lifted: commits work; hooks and configuration are still kept (a
    // `commondir` it could now write, docs/policy.md).
    let git_dir_writable = |p: &Path| p.ends_with("repo/.git");
    let lifted = attacks.replace("echo ../../evil > .git/commondir; echo commondir=$?;", "");
    let (_, stdout, stderr) = spawn_sh(&prepared, &repo, &lifted, Some(&git_dir_writable)).unwrap();
    assert!(stdout.contains("commit=0"), "{stdout}{stderr}");
    for refused in ["hook=", "config=", "moved=", "removed="] {
        assert!(
            !stdout.contains(&format!("{refused}0")),
            "{refused}: {stdout}{stderr}"
        );
    }
    assert!(git(&repo, &["log", "--format=%s"]).starts_with("second\n"));
    assert!(!repo.join(".git/hooks/pre-commit").exists());

    // From the linked worktree: its `.git` file, and the repository's configuration it shares.
    let wt = t.write.join("wt");
    let script = "echo 'gitdir: /tmp' > .git; echo pointer=$?; \
         git config core.fsmonitor x; echo config=$?";
    let (_, stdout, stderr) = spawn_sh(&prepared, &wt, script, None).unwrap();
    assert!(
        !stdout.contains("pointer=0") && !stdout.contains("config=0"),
        "{stdout}{stderr}"
    );
    assert_eq!(std::fs::read_to_string(wt.join(".git")).unwrap(), pointer);
    assert_eq!(
        std::fs::read_to_string(repo.join(".git/config")).unwrap(),
        config
    );

    // What the caller's policy lets children write, they may: the hooks alone, inside a git
    // directory that stays read-only.
    let hooks_writable = |p: &Path| p.ends_with(".git/hooks");
    let script = "echo 'true' > .git/hooks/post-commit; echo hook=$?";
    let (_, stdout, _) = spawn_sh(&prepared, &repo, script, Some(&hooks_writable)).unwrap();
    assert!(stdout.contains("hook=0"), "{stdout}");

    // A `.git` file that names a place outside the write roots (`../..`) is bound read-only,
    // and the place it names is neither looked into nor changed.
    let pointing = t.write.join("pointing");
    std::fs::create_dir(&pointing).unwrap();
    let rel = format!(
        "gitdir: ../../{}",
        t.outside.file_name().unwrap().to_str().unwrap()
    );
    std::fs::write(pointing.join(".git"), &rel).unwrap();
    let (_, stdout, _) =
        spawn_sh(&prepared, &pointing, "echo x > .git; echo pointer=$?", None).unwrap();
    assert!(!stdout.contains("pointer=0"), "{stdout}");
    assert!(
        !t.outside.join("hooks").exists(),
        "a place outside was changed"
    );
    // A `modules` directory made a link to a place outside (by an earlier child): not followed.
    std::fs::create_dir_all(t.outside.join("sub")).unwrap();
    std::fs::write(t.outside.join("sub/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::os::unix::fs::symlink(&t.outside, repo.join(".git/modules")).unwrap();
    spawn_sh(&prepared, &repo, "true", None).unwrap();
    assert!(
        !t.outside.join("sub/hooks").exists(),
        "a place outside was changed through modules"
    );

    // A `.git` that is a link cannot be kept: the child does not start.
    let linked = t.write.join("linked");
    std::fs::create_dir(&linked).unwrap();
    std::os::unix::fs::symlink(repo.join(".git"), linked.join(".git")).unwrap();
    let err = spawn_sh(&prepared, &linked, "echo ran", None).unwrap_err();
    assert_eq!(err.result_code(), ErrorCode::NotAvailable, "{err}");
    assert!(err.to_string().contains("symbolic link"), "{err}");
}

// guarantee: G-FS-10
// guarantee: G-FS-11
/// What a shell runs as it starts, and what an AI agent's client or an editor runs when it next
/// opens the project, outside any sandbox: a child that may write its write roots cannot change
/// those that exist there (`.claude/settings.json`'s hooks, `.mcp.json`, `.vscode/tasks.json`,
/// `.bashrc`, fish's configuration, git's user configuration), in a write root, along its
/// working directory or a few levels beneath a root, nor set them aside; a file beside them is
/// written, and a place the caller's policy lets children write stays writable. Checked on disk.
#[test]
fn a_child_cannot_change_what_an_agent_an_editor_or_a_shell_runs_later() {
    let t = tree();
    let w = &t.write;
    for dir in [
        ".claude",
        ".vscode",
        "pkg/.cursor",
        "deep/a/b/c/d",
        "deep/a/b/c/d/.idea",
        ".config/fish",
        ".config/git",
        "linked-target",
        "hgrepo/.hg",
        ".cargo",
        ".local/lib/python3.11/site-packages",
        "gem/.bundle",
    ] {
        std::fs::create_dir_all(w.join(dir)).unwrap();
    }
    let planted = [
        "hgrepo/.hg/hgrc",
        ".pdbrc",
        ".cargo/env",
        ".local/lib/python3.11/site-packages/x.pth",
        "gem/.bundle/config",
        ".claude/settings.json",
        ".mcp.json",
        ".vscode/tasks.json",
        ".bashrc",
        "pkg/.cursor/mcp.json",
        "deep/a/b/c/d/.idea/workspace.xml",
        ".config/fish/config.fish",
        ".config/git/config",
        "linked-target/settings.json",
    ];
    for file in planted {
        std::fs::write(w.join(file), "as it was\n").unwrap();
    }
    // `.gemini` a link to a directory of the write root: where it leads is kept.
    std::os::unix::fs::symlink(w.join("linked-target"), w.join(".gemini")).unwrap();
    let prepared = policy(&t).prepare().unwrap();
    let attacks: String = planted
        .iter()
        .map(|f| format!("echo evil >> {f}; echo '{f}='$?; "))
        .chain([
            "mv .claude .claude-aside; echo 'moved='$?; ".to_owned(),
            "rm -f .bashrc; echo 'removed='$?; ".to_owned(),
            "echo fine > notes.md; echo 'notes='$?; ".to_owned(),
            "echo fine > .vscode-notes; echo 'beside='$?; ".to_owned(),
        ])
        .collect();
    let cwd = w.join("deep/a/b/c/d");
    let script = format!("cd {}; {attacks}", w.display());
    let (status, stdout, stderr) = spawn_sh(&prepared, &cwd, &script, None).unwrap();
    assert_eq!(status, 0, "{stdout}{stderr}");
    for refused in planted.iter().copied().chain(["moved", "removed"]) {
        assert!(
            !stdout.contains(&format!("{refused}=0")),
            "{refused}: {stdout}{stderr}"
        );
    }
    assert!(
        stdout.contains("notes=0") && stdout.contains("beside=0"),
        "{stdout}{stderr}"
    );
    for file in planted {
        assert_eq!(
            std::fs::read_to_string(w.join(file)).unwrap(),
            "as it was\n",
            "{file}"
        );
    }
    assert!(!w.join(".claude-aside").exists());

    // Hooks a repository's configuration points git at in its working tree
    // (`core.hooksPath = .githooks`), existing, are kept as git's own, though the caller's rule
    // (which knows names, not the setting) would let children write them.
    let rule_says_writable = |p: &Path| p.ends_with(".githooks");
    let svc = w.join("svc");
    std::fs::create_dir_all(svc.join(".githooks")).unwrap();
    git(&svc, &["init", "-q"]);
    git(&svc, &["config", "core.hooksPath", ".githooks"]);
    std::fs::write(svc.join(".githooks/pre-commit"), "as it was\n").unwrap();
    let (_, stdout, stderr) = spawn_sh(
        &prepared,
        &svc,
        "echo evil >> .githooks/pre-commit; echo hook=$?; echo x > .githooks/pre-push; \
         echo new=$?; echo fine > a.txt; echo fine=$?",
        Some(&rule_says_writable),
    )
    .unwrap();
    assert!(
        !stdout.contains("hook=0") && !stdout.contains("new=0") && stdout.contains("fine=0"),
        "{stdout}{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(svc.join(".githooks/pre-commit")).unwrap(),
        "as it was\n"
    );

    // What the caller's policy lets children write, they may: `.vscode`.
    let vscode_writable = |p: &Path| p.ends_with(".vscode");
    let (_, stdout, stderr) = spawn_sh(
        &prepared,
        w,
        "echo '{}' > .vscode/tasks.json; echo tasks=$?; echo evil >> .bashrc; echo rc=$?",
        Some(&vscode_writable),
    )
    .unwrap();
    assert!(
        stdout.contains("tasks=0") && !stdout.contains("rc=0"),
        "{stdout}{stderr}"
    );
}

// guarantee: G-FS-10
// guarantee: G-FS-11
/// A caller that names no places of its own (`Launch::runs_later` empty, as a struct literal
/// leaves it) still has its children kept from what a shell or an agent's client runs later:
/// the built-in names are always kept, a caller's only add to them. Checked on disk.
#[test]
fn a_launch_that_names_no_runs_later_places_keeps_the_built_in_ones() {
    let t = tree();
    let w = &t.write;
    std::fs::create_dir_all(w.join(".claude")).unwrap();
    for file in [".claude/settings.json", ".bashrc"] {
        std::fs::write(w.join(file), "as it was\n").unwrap();
    }
    let prepared = policy(&t).prepare().unwrap();
    let args = vec![
        "-c".to_owned(),
        "echo evil >> .bashrc; echo rc=$?; echo evil >> .claude/settings.json; echo hooks=$?; \
         echo fine > notes.md; echo notes=$?"
            .to_owned(),
    ];
    let mut launch = launch(Path::new("/bin/sh"), &args, w, false);
    assert!(launch.runs_later.is_empty());
    let env = [("PATH".to_owned(), "/usr/bin:/bin".to_owned())];
    launch.env = &env;
    let (_, stdout, stderr) = run_spawned(prepared.spawn(&launch).unwrap(), b"");
    assert!(
        !stdout.contains("rc=0") && !stdout.contains("hooks=0") && stdout.contains("notes=0"),
        "{stdout}{stderr}"
    );
    for file in [".claude/settings.json", ".bashrc"] {
        assert_eq!(
            std::fs::read_to_string(w.join(file)).unwrap(),
            "as it was\n",
            "{file}"
        );
    }
}

// guarantee: G-FS-09
// guarantee: G-FS-10
// guarantee: G-FS-11
/// `apply_to`, the crate's first example, keeps what runs later from the child as `spawn` does:
/// a command confined with it and started by its caller cannot plant a hook or a configured
/// command in a repository of its write root, nor change the `.bashrc`, `.mcp.json` or
/// `.claude` settings there; a file beside them is written. Checked on disk.
#[test]
fn a_command_confined_with_apply_to_cannot_plant_what_runs_later() {
    let t = tree();
    let w = &t.write;
    let repo = w.join("repo");
    std::fs::create_dir_all(repo.join(".claude")).unwrap();
    git(&repo, &["init", "-q"]);
    let config = std::fs::read_to_string(repo.join(".git/config")).unwrap();
    let planted = [".bashrc", ".mcp.json", "repo/.claude/settings.json"];
    for file in planted {
        std::fs::write(w.join(file), "as it was\n").unwrap();
    }
    let attacks = "echo 'touch /tmp/planted' > .git/hooks/pre-commit; echo hook=$?; \
         git config core.fsmonitor 'touch /tmp/planted'; echo config=$?; \
         echo evil >> ../.bashrc; echo rc=$?; echo '{}' > ../.mcp.json; echo mcp=$?; \
         echo evil >> .claude/settings.json; echo claude=$?; \
         mv .git .git-aside; echo moved=$?; echo fine > notes.md; echo notes=$?";
    let mut command = Command::new("/bin/sh");
    command
        .args(["-c", attacks])
        .current_dir(&repo)
        .env("PATH", "/usr/bin:/bin");
    policy(&t)
        .prepare()
        .unwrap()
        .apply_to(&mut command)
        .unwrap();
    let out = command.output().expect("the confined child starts");
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}{stderr}");
    for refused in ["hook=", "config=", "rc=", "mcp=", "claude=", "moved="] {
        assert!(
            !stdout.contains(&format!("{refused}0")),
            "{refused}: {stdout}{stderr}"
        );
    }
    assert!(stdout.contains("notes=0"), "{stdout}{stderr}");
    assert!(!repo.join(".git/hooks/pre-commit").exists());
    assert!(!repo.join(".git-aside").exists());
    assert_eq!(
        std::fs::read_to_string(repo.join(".git/config")).unwrap(),
        config
    );
    for file in planted {
        assert_eq!(
            std::fs::read_to_string(w.join(file)).unwrap(),
            "as it was\n",
            "{file}"
        );
    }

    // A `.git` that is a link cannot be kept: the command is refused before it can start.
    let linked = w.join("linked");
    std::fs::create_dir(&linked).unwrap();
    std::os::unix::fs::symlink(repo.join(".git"), linked.join(".git")).unwrap();
    let mut command = Command::new("/bin/sh");
    command
        .args(["-c", "echo ran > ran.txt"])
        .current_dir(&linked);
    let err = policy(&t)
        .prepare()
        .unwrap()
        .apply_to(&mut command)
        .unwrap_err();
    assert_eq!(err.result_code(), ErrorCode::NotAvailable, "{err}");
    assert!(err.to_string().contains("symbolic link"), "{err}");
}

// guarantee: G-FS-09
/// The repositories a child's working directory is not in are kept too: a write root that is a
/// workspace of repositories (a sibling of the one the child works in, one nested two levels
/// down, a repository inside the working tree) has their hooks and configuration read-only and
/// their git directories pinned, so a child working in one cannot plant what git runs when the
/// user next works in another. Checked on disk.
#[test]
fn a_child_cannot_plant_what_git_runs_in_the_other_repositories_of_its_reach() {
    let t = tree();
    let work = t.write.join("work");
    let others = [
        t.write.join("sibling"),
        t.write.join("group/inner"),
        t.write.join("a/b/deep"),
        work.join("vendor/lib"),
    ];
    for repo in std::iter::once(&work).chain(&others) {
        std::fs::create_dir_all(repo).unwrap();
        git(repo, &["init", "-q"]);
    }
    let configs: Vec<String> = others
        .iter()
        .map(|r| std::fs::read_to_string(r.join(".git/config")).unwrap())
        .collect();
    let prepared = policy(&t).prepare().unwrap();
    let mut script = String::new();
    for (i, repo) in others.iter().enumerate() {
        let g = repo.join(".git");
        script.push_str(&format!(
            "echo 'touch /tmp/planted' > {g}/hooks/post-checkout; echo hook{i}=$?; \
             echo '[core] fsmonitor = x' >> {g}/config; echo config{i}=$?; \
             mv {g} {g}-aside; echo moved{i}=$?; ",
            g = g.display()
        ));
    }
    let (status, stdout, stderr) = spawn_sh(&prepared, &work, &script, None).unwrap();
    assert_eq!(status, 0, "{stdout}{stderr}");
    for (i, repo) in others.iter().enumerate() {
        for refused in ["hook", "config", "moved"] {
            assert!(
                !stdout.contains(&format!("{refused}{i}=0")),
                "{}: {refused}: {stdout}{stderr}",
                repo.display()
            );
        }
        assert!(!repo.join(".git/hooks/post-checkout").exists());
        assert!(repo.join(".git").is_dir() && !repo.join(".git-aside").exists());
        assert_eq!(
            std::fs::read_to_string(repo.join(".git/config")).unwrap(),
            configs[i]
        );
    }
}

// guarantee: G-FS-09
/// A child may leave a FIFO where the next spawn looks for git's places (a `.git` in a write
/// root, a `commondir` inside a git directory). Opening one for reading would wait for a writer
/// that never comes, and the host's spawn with it: the next child starts, and the FIFO `.git`
/// is kept read-only like any `.git` file.
#[test]
fn a_fifo_among_git_places_does_not_stall_the_next_spawn() {
    let t = tree();
    let fifo_dir = t.write.join("fifo");
    let repo = t.write.join("repo");
    std::fs::create_dir(&fifo_dir).unwrap();
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    for fifo in [fifo_dir.join(".git"), repo.join(".git/commondir")] {
        let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
    }
    let prepared = std::sync::Arc::new(policy(&t).prepare().unwrap());
    for cwd in [fifo_dir.clone(), repo] {
        let (done, waited) = std::sync::mpsc::channel();
        let prepared = std::sync::Arc::clone(&prepared);
        let dir = cwd.clone();
        std::thread::spawn(move || {
            let _ = done.send(spawn_sh(
                &prepared,
                &dir,
                "echo ran; rm -f .git; echo rm=$?",
                None,
            ));
        });
        let (status, stdout, stderr) = waited
            .recv_timeout(std::time::Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("the spawn in {} is stalled", cwd.display()))
            .unwrap();
        assert_eq!(status, 0, "{stdout}{stderr}");
        assert!(stdout.starts_with("ran\n"), "{stdout}{stderr}");
        assert!(!stdout.contains("rm=0"), "{stdout}{stderr}");
    }
    assert!(std::fs::symlink_metadata(fifo_dir.join(".git")).is_ok());
}

/// A new pseudo-terminal: its controller and the terminal end (both close-on-exec).
#[allow(unsafe_code, reason = "opening a pseudo-terminal for the test")]
fn terminal() -> (std::os::fd::OwnedFd, std::os::fd::OwnedFd) {
    use std::os::fd::FromRawFd as _;
    // SAFETY: the libc pseudo-terminal calls on a descriptor this function owns; `name` is a
    // buffer on the stack that `ptsname_r` fills with a terminated string.
    unsafe {
        let controller = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
        assert!(controller >= 0, "posix_openpt");
        let controller = std::os::fd::OwnedFd::from_raw_fd(controller);
        use std::os::fd::AsRawFd as _;
        assert_eq!(libc::grantpt(controller.as_raw_fd()), 0);
        assert_eq!(libc::unlockpt(controller.as_raw_fd()), 0);
        let mut name = [0 as libc::c_char; 128];
        assert_eq!(
            libc::ptsname_r(controller.as_raw_fd(), name.as_mut_ptr(), name.len()),
            0
        );
        let end = libc::open(
            name.as_ptr(),
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        );
        assert!(end >= 0, "open the terminal end");
        (controller, std::os::fd::OwnedFd::from_raw_fd(end))
    }
}

// guarantee: G-KERN-08
/// A confined child whose standard input is the user's terminal, and which has that terminal
/// as its controlling one (a program run from a shell), cannot push input into it with
/// `TIOCSTI` (bubblewrap's CVE-2017-5226): what it typed would be read by the user's shell
/// once the child ends, and run outside any sandbox. Checked on the terminal's side: nothing
/// waits to be read there.
#[test]
#[allow(
    unsafe_code,
    reason = "making the terminal the child's controlling one, and reading it"
)]
fn a_confined_child_cannot_type_into_its_terminal() {
    use std::os::fd::AsRawFd as _;
    use std::os::unix::process::CommandExt as _;
    let t = tree();
    let (_controller, end) = terminal();
    let probe = "import fcntl, termios\ntry:\n    for c in b'typed-by-the-child\\n':\n        fcntl.ioctl(0, termios.TIOCSTI, bytes([c]))\n    print('typed')\nexcept OSError as e:\n    print('refused', e.errno)\n";
    let mut command = Command::new("/usr/bin/python3");
    command
        .arg("-c")
        .arg(probe)
        .stdin(std::process::Stdio::from(end.try_clone().unwrap()));
    // The child as a shell's job: a session of its own whose controlling terminal this is.
    // SAFETY: setsid and ioctl on the child's own standard input, between fork and exec.
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    policy(&t)
        .prepare()
        .unwrap()
        .apply_to(&mut command)
        .unwrap();
    let out = command.output().expect("the confined child starts");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "refused 1\n", "{}", text(&out.stderr));
    // SAFETY: a non-blocking read into a local buffer from a descriptor this test owns.
    let waiting = unsafe {
        libc::fcntl(end.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK);
        let mut buf = [0u8; 64];
        libc::read(end.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len())
    };
    assert!(waiting <= 0, "the child's input waits on the terminal");
}

/// The two ways a confined child starts: [`capability_sandbox::PreparedSandbox::spawn`] and
/// `apply_to` on a caller's own `Command`.
const BOTH_WAYS: [&str; 2] = ["spawn", "apply_to"];

/// Runs `python3 args` in `cwd` under `prepared`, started the way `how` names
/// ([`BOTH_WAYS`]); asserts that it succeeds and returns its standard output.
fn python_in(
    prepared: &capability_sandbox::PreparedSandbox,
    how: &str,
    args: &[String],
    cwd: &Path,
) -> String {
    let python = Path::new("/usr/bin/python3");
    if how == "spawn" {
        let launch = capability_sandbox::Launch {
            arg0: std::ffi::OsStr::new("python3"),
            ..launch(python, args, cwd, false)
        };
        let (status, stdout, stderr) = run_spawned(prepared.spawn(&launch).unwrap(), b"");
        assert_eq!(status, 0, "{how}: {stderr}");
        stdout
    } else {
        let mut command = Command::new(python);
        command.args(args).current_dir(cwd);
        prepared.apply_to(&mut command).unwrap();
        let out = command.output().unwrap();
        assert!(out.status.success(), "{how}: {}", text(&out.stderr));
        text(&out.stdout)
    }
}

/// Tries every way a file gets the set-user-ID or set-group-ID bit in the directory `argv[1]`,
/// printing `<way> done` or `<way> refused <errno>` for each, then `end`.
const SET_ID_PROBE: &str = "import ctypes, os, sys\n\
         libc = ctypes.CDLL(None, use_errno=True)\n\
         out = sys.argv[1]\n\
         def attempt(name, call):\n\
         \x20   try:\n        call()\n        print(name, 'done')\n\
         \x20   except OSError as e:\n        print(name, 'refused', e.errno)\n\
         def plain(name):\n\
         \x20   path = os.path.join(out, name)\n\
         \x20   with open(path, 'wb') as f:\n        f.write(b'#!/bin/sh\\nid\\n')\n\
         \x20   return path\n\
         for bits in (0o4755, 0o2755, 0o6755):\n\
         \x20   p = plain('chmod-%o' % bits)\n\
         \x20   attempt('chmod %o' % bits, lambda: os.chmod(p, bits))\n\
         \x20   p = plain('fchmod-%o' % bits)\n\
         \x20   fd = os.open(p, os.O_RDONLY)\n\
         \x20   attempt('fchmod %o' % bits, lambda: os.fchmod(fd, bits))\n\
         \x20   os.close(fd)\n\
         \x20   p = plain('fchmodat-%o' % bits)\n\
         \x20   d = os.open(out, os.O_RDONLY)\n\
         \x20   attempt('fchmodat %o' % bits, lambda: os.chmod(os.path.basename(p), bits, dir_fd=d))\n\
         \x20   attempt('openat %o' % bits, lambda: os.close(os.open('openat-%o' % bits, os.O_CREAT | os.O_WRONLY, bits, dir_fd=d)))\n\
         \x20   os.close(d)\n\
         \x20   def raw_open():\n\
         \x20       fd = libc.syscall(2, os.path.join(out, 'open-%o' % bits).encode(), os.O_CREAT | os.O_WRONLY, bits)\n\
         \x20       if fd < 0:\n            raise OSError(ctypes.get_errno(), 'open')\n\
         \x20       os.close(fd)\n\
         \x20   attempt('open %o' % bits, raw_open)\n\
         \x20   def creat():\n\
         \x20       fd = libc.creat(os.path.join(out, 'creat-%o' % bits).encode(), bits)\n\
         \x20       if fd < 0:\n            raise OSError(ctypes.get_errno(), 'creat')\n\
         \x20       os.close(fd)\n\
         \x20   attempt('creat %o' % bits, creat)\n\
         \x20   attempt('mknod %o' % bits, lambda: os.mknod(os.path.join(out, 'mknod-%o' % bits), 0o100000 | bits))\n\
         attempt('chmod 755', lambda: os.chmod(plain('plain'), 0o755))\n\
         attempt('openat 644', lambda: os.close(os.open(os.path.join(out, 'made'), os.O_CREAT | os.O_WRONLY, 0o644)))\n\
         print('end')\n";

// guarantee: G-KERN-09
/// A child cannot leave a set-user-ID or set-group-ID file behind in its write reach: every
/// account that can reach the file could run it later as the user who ran the host (as root,
/// when the host runs as root the way containers run), outside any sandbox. Tried every way a
/// file gets those bits (`chmod`, `fchmod`, `fchmodat`, created so by `open`, `openat`, `creat`
/// and `mknod`), by a child started with `spawn` and by one started through `apply_to`.
/// Checked on disk: no file the child made has either bit, and plain modes still work.
#[test]
fn a_child_cannot_leave_a_set_id_file_behind() {
    use std::os::unix::fs::PermissionsExt as _;
    let t = tree();
    let prepared = policy(&t).prepare().unwrap();
    let args = vec![
        "-c".to_owned(),
        SET_ID_PROBE.to_owned(),
        t.write.display().to_string(),
    ];
    for how in BOTH_WAYS {
        let said = python_in(&prepared, how, &args, &t.write);
        assert!(said.ends_with("end\n"), "{how}: {said}");
        assert!(said.contains("chmod 755 done"), "{how}: {said}");
        assert!(said.contains("openat 644 done"), "{how}: {said}");
        let mut set_id = Vec::new();
        for entry in std::fs::read_dir(&t.write).unwrap() {
            let entry = entry.unwrap();
            let bits = entry.metadata().unwrap().permissions().mode();
            if bits & 0o6000 != 0 {
                set_id.push(format!("{:?} {bits:o}", entry.file_name()));
            }
        }
        assert!(
            set_id.is_empty(),
            "{how}: set-ID files left: {set_id:?}\n{said}"
        );
        for line in said
            .lines()
            .filter(|l| !l.contains(" 755") && !l.contains(" 644"))
        {
            assert!(
                line == "end" || line.ends_with(&format!("refused {}", libc::EPERM)),
                "{how}: {line}\n{said}"
            );
        }
        for entry in std::fs::read_dir(&t.write).unwrap() {
            std::fs::remove_file(entry.unwrap().path()).unwrap();
        }
    }
}

/// A probe that tries, in its write reach (`sys.argv[1]`), every way a file or directory gets
/// a mode that lets other accounts write it, and one that gives another account write access
/// through an access control list; each printed `<how> done|refused <errno>`.
const OPEN_TO_OTHERS_PROBE: &str = "import ctypes, os, struct, sys\n\
         libc = ctypes.CDLL(None, use_errno=True)\n\
         out = sys.argv[1]\n\
         def attempt(name, call):\n\
         \x20   try:\n        call()\n        print(name, 'done')\n\
         \x20   except OSError as e:\n        print(name, 'refused', e.errno)\n\
         def made(name):\n\
         \x20   path = os.path.join(out, name)\n\
         \x20   with open(path, 'w') as f:\n        f.write('x')\n\
         \x20   return path\n\
         p = made('chmod')\n\
         attempt('chmod 666', lambda: os.chmod(p, 0o666))\n\
         attempt('chmod 644', lambda: os.chmod(p, 0o644))\n\
         p = made('fchmod')\n\
         fd = os.open(p, os.O_RDONLY)\n\
         attempt('fchmod 606', lambda: os.fchmod(fd, 0o606))\n\
         os.close(fd)\n\
         os.mkdir(os.path.join(out, 'dir'), 0o755)\n\
         attempt('chmod dir 777', lambda: os.chmod(os.path.join(out, 'dir'), 0o777))\n\
         attempt('chmod dir 1777', lambda: os.chmod(os.path.join(out, 'dir'), 0o1777))\n\
         attempt('chmod dir 755', lambda: os.chmod(os.path.join(out, 'dir'), 0o755))\n\
         p = made('fchmodat2')\n\
         def fchmodat2():\n\
         \x20   if libc.syscall(452, -100, p.encode(), 0o646, 0) != 0:\n\
         \x20       e = ctypes.get_errno()\n\
         \x20       if e == 38:\n            os.chmod(p, 0o646)\n            return\n\
         \x20       raise OSError(e, os.strerror(e))\n\
         attempt('fchmodat2 646', fchmodat2)\n\
         print('umask', oct(os.umask(0o022)))\n\
         libc.umask.restype = ctypes.c_uint\n\
         old = libc.umask(0)\n\
         libc.umask(old)\n\
         fd = os.open(os.path.join(out, 'after-reading-the-mask'), os.O_CREAT | os.O_WRONLY, 0o644)\n\
         os.close(fd)\n\
         libc.umask(0)\n\
         fd = os.open(os.path.join(out, 'created'), os.O_CREAT | os.O_WRONLY, 0o666)\n\
         os.close(fd)\n\
         os.mkdir(os.path.join(out, 'made-dir'), 0o777)\n\
         os.mkfifo(os.path.join(out, 'fifo'), 0o666)\n\
         p = made('acl')\n\
         acl = struct.pack('<I', 2) + b''.join(struct.pack('<HHI', tag, perm, 0xffffffff) for tag, perm in ((1, 6), (4, 4), (0x20, 6)))\n\
         attempt('setxattr acl', lambda: os.setxattr(p, 'system.posix_acl_access', acl))\n\
         attempt('setxattr user', lambda: os.setxattr(p, 'user.toolcap', b'x'))\n\
         class XattrArgs(ctypes.Structure):\n\
         \x20   _fields_ = [('value', ctypes.c_uint64), ('size', ctypes.c_uint32), ('flags', ctypes.c_uint32)]\n\
         value = ctypes.create_string_buffer(acl)\n\
         args = XattrArgs(ctypes.addressof(value), len(acl), 0)\n\
         def setxattrat():\n\
         \x20   r = libc.syscall(ctypes.c_long(463), ctypes.c_int(-100), p.encode(), ctypes.c_uint(0), b'system.posix_acl_access', ctypes.byref(args), ctypes.c_size_t(ctypes.sizeof(args)))\n\
         \x20   if r != 0:\n\
         \x20       e = ctypes.get_errno()\n\
         \x20       raise OSError(e, os.strerror(e))\n\
         attempt('setxattrat acl', setxattrat)\n\
         print('end')\n";

// guarantee: G-KERN-17
/// A child cannot open its write reach to the machine's other accounts: a file or directory
/// it leaves there that another account may write (`chmod 666`, `chmod 777` on a directory,
/// `fchmod`, `fchmodat2`, created so after `umask 0`) or that an access control list lets
/// another account write is one another user changes later (a `Makefile`, a script, a
/// project's source), and the user then runs it outside any sandbox; a confined child with no
/// network could also hand the project to another account that way. Before, each of these
/// left a world-writable place (watched failing). Now the mode bit that lets others write is
/// refused wherever a call sets a mode, `umask` keeps it, and extended attributes (an access
/// control list is one) are refused; modes that do not open a place to others still change.
/// Checked on disk, by a child started with `spawn` and by one started through `apply_to`.
#[test]
fn a_child_cannot_open_its_write_reach_to_other_accounts() {
    use std::os::unix::fs::PermissionsExt as _;
    let t = tree();
    let prepared = policy(&t).prepare().unwrap();
    let args = vec![
        "-c".to_owned(),
        OPEN_TO_OTHERS_PROBE.to_owned(),
        t.write.display().to_string(),
    ];
    for how in BOTH_WAYS {
        let said = python_in(&prepared, how, &args, &t.write);
        assert!(said.ends_with("end\n"), "{how}: {said}");
        // The forbidden side first: nothing in the write reach that others may write, and no
        // access control list.
        let mut open = Vec::new();
        for entry in std::fs::read_dir(&t.write).unwrap() {
            let entry = entry.unwrap();
            let bits = std::fs::symlink_metadata(entry.path())
                .unwrap()
                .permissions()
                .mode();
            if bits & 0o002 != 0 {
                open.push(format!("{:?} {bits:o}", entry.file_name()));
            }
            let acl = Command::new("/usr/bin/python3")
                .args([
                    "-c",
                    "import os, sys\nprint(os.listxattr(sys.argv[1], follow_symlinks=False))",
                ])
                .arg(entry.path())
                .output()
                .unwrap();
            assert!(
                !String::from_utf8_lossy(&acl.stdout).contains("posix_acl"),
                "{how}: {:?} has an access control list",
                entry.file_name()
            );
        }
        assert!(
            open.is_empty(),
            "{how}: left open to others: {open:?}\n{said}"
        );
        // A program that reads the mask by setting it (`old = umask(0); umask(old)`, as Node's
        // `process.umask()` does) still makes files its owner can read and write.
        let read_back = std::fs::metadata(t.write.join("after-reading-the-mask"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(read_back & 0o777, 0o644, "{how}: {read_back:o}\n{said}");
        for line in ["chmod 644 done", "chmod dir 755 done", "umask 0o2"] {
            assert!(
                said.lines().any(|l| l.starts_with(line)),
                "{how}: {line}\n{said}"
            );
        }
        for line in said.lines().filter(|l| l.contains("refused")) {
            assert!(
                line.ends_with(&format!("refused {}", libc::EPERM)),
                "{how}: {line}"
            );
        }
        for entry in std::fs::read_dir(&t.write).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                std::fs::remove_dir(&path).unwrap();
            } else {
                std::fs::remove_file(&path).unwrap();
            }
        }
    }
}

/// A probe that changes the metadata of every file named after it (mode by path and through a
/// read-only descriptor, to modes that open it to nobody else, since the write bit of others is
/// refused everywhere (`a_child_cannot_open_its_write_reach_to_other_accounts`), times, owner;
/// extended attributes are refused everywhere too) and prints each call's outcome as
/// `<call> <file> done|refused <errno>`.
const METADATA_PROBE: &str = "import os, sys\n\
         def attempt(name, path, call):\n\
         \x20   try:\n        call()\n        print(name, path, 'done')\n\
         \x20   except OSError as e:\n        print(name, path, 'refused', e.errno)\n\
         for path in sys.argv[1:]:\n\
         \x20   attempt('chmod', path, lambda: os.chmod(path, 0o644))\n\
         \x20   def fchmod():\n\
         \x20       fd = os.open(path, os.O_RDONLY)\n\
         \x20       try:\n            os.fchmod(fd, 0o604)\n\
         \x20       finally:\n            os.close(fd)\n\
         \x20   attempt('fchmod', path, fchmod)\n\
         \x20   attempt('utime', path, lambda: os.utime(path, (0, 0)))\n\
         \x20   attempt('chown', path, lambda: os.chown(path, os.getuid(), os.getgid()))\n\
         print('end')\n";

// guarantee: G-KERN-11
/// Landlock does not mediate a file's metadata: `chmod`, `utime`, extended attributes and
/// `chown` pass it for any file the child can name, wherever it lies, by path or through a
/// descriptor opened for reading (the owner needs no capability for them; on a root host the
/// owner of nearly everything is uid 0). A child must not change the mode of a file outside its
/// write roots (a `chmod 666` of `/etc/passwd` would hand it to every user of the host), its
/// times or its attributes. Checked on disk, in both ways a child starts, and the same calls
/// still work on a file beneath a write root (with modes that open it to no other account;
/// extended attributes are refused everywhere since 2026-12-07, fifteenth session).
#[test]
fn a_child_changes_no_files_metadata_outside_its_write_roots() {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    let t = tree();
    let prepared = policy(&t).prepare().unwrap();
    let outside = t.outside.join("secret.txt");
    let readable = t.read.join("in.txt");
    let writable = t.write.join("mine.txt");
    for how in BOTH_WAYS {
        for file in [&outside, &readable] {
            std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o640)).unwrap();
        }
        std::fs::write(&writable, "mine").unwrap();
        let before = |p: &Path| {
            let m = std::fs::metadata(p).unwrap();
            (m.mode(), m.mtime(), m.uid(), m.gid())
        };
        let (outside_before, readable_before) = (before(&outside), before(&readable));
        let mut args = vec!["-c".to_owned(), METADATA_PROBE.to_owned()];
        for file in [&outside, &readable, &writable] {
            args.push(file.display().to_string());
        }
        let said = python_in(&prepared, how, &args, &t.write);
        assert!(said.ends_with("end\n"), "{how}: {said}");
        for line in said.lines().filter(|l| *l != "end") {
            let mine = line.contains(&*writable.display().to_string());
            assert_eq!(
                line.ends_with(" done"),
                mine,
                "{how}: only a file beneath a write root may change: {line}\n{said}"
            );
        }
        assert_eq!(before(&outside), outside_before, "{how}: {said}");
        assert_eq!(before(&readable), readable_before, "{how}: {said}");
        for file in [&outside, &readable] {
            assert!(
                xattr_names(file).is_empty(),
                "{how}: {} has an attribute the child set",
                file.display()
            );
        }
        assert!(xattr_names(&writable).is_empty(), "{how}");
        std::fs::remove_file(&writable).unwrap();
    }
    // A child that starts in its write root writes there by relative paths: its working
    // directory is the writable tree, not the read-only one beneath it (`apply_to` enters it
    // before the tree is made).
    let relative = vec![
        "-c".to_owned(),
        "import os\nopen('rel.txt', 'w').write('x')\nos.chmod('rel.txt', 0o600)\nprint('wrote')"
            .to_owned(),
    ];
    for how in BOTH_WAYS {
        assert_eq!(
            python_in(&prepared, how, &relative, &t.write),
            "wrote\n",
            "{how}"
        );
        std::fs::remove_file(t.write.join("rel.txt")).unwrap();
    }
    // A write root of `/` leaves nothing outside: the same calls work everywhere.
    let everywhere = SandboxPolicy::new().write("/").prepare().unwrap();
    let args = vec![
        "-c".to_owned(),
        METADATA_PROBE.to_owned(),
        outside.display().to_string(),
    ];
    for how in BOTH_WAYS {
        let said = python_in(&everywhere, how, &args, &t.write);
        assert_eq!(
            said.lines().filter(|l| l.ends_with(" done")).count(),
            4,
            "{how}: {said}"
        );
    }
}

/// The names of `path`'s extended attributes.
fn xattr_names(path: &Path) -> Vec<String> {
    let out = Command::new("/usr/bin/python3")
        .args([
            "-c",
            "import os, sys\nfor n in os.listxattr(sys.argv[1]): print(n)",
        ])
        .arg(path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout).lines().map(str::to_owned).collect()
}

/// A probe that looks for the System V shared-memory segment of `argv[1]` (a key), reads it
/// when found, and makes a message queue of key `argv[2]`; prints one line for each.
const IPC_PROBE: &str = "import ctypes, sys\n\
         libc = ctypes.CDLL(None, use_errno=True)\n\
         libc.shmat.restype = ctypes.c_void_p\n\
         shmid = libc.shmget(int(sys.argv[1]), 0, 0)\n\
         print('shmget', shmid if shmid >= 0 else -ctypes.get_errno())\n\
         if shmid >= 0:\n\
         \x20   addr = libc.shmat(shmid, None, 0)\n\
         \x20   print('read', ctypes.string_at(addr, 11).decode('latin-1'))\n\
         q = libc.msgget(int(sys.argv[2]), 0o1000 | 0o600)\n\
         print('msgget', 'made' if q >= 0 else -ctypes.get_errno())\n";

/// The host's side: `make` a segment of key `argv[2]` holding `host-secret`, or `clean` up
/// (remove the segment, and the queue of key `argv[3]` if one is left, saying so).
const IPC_HOST: &str = "import ctypes, sys\n\
         libc = ctypes.CDLL(None, use_errno=True)\n\
         libc.shmat.restype = ctypes.c_void_p\n\
         key = int(sys.argv[2])\n\
         if sys.argv[1] == 'make':\n\
         \x20   shmid = libc.shmget(key, 4096, 0o1000 | 0o2000 | 0o600)\n\
         \x20   assert shmid >= 0, ctypes.get_errno()\n\
         \x20   addr = libc.shmat(shmid, None, 0)\n\
         \x20   ctypes.memmove(addr, b'host-secret', 11)\n\
         else:\n\
         \x20   libc.shmctl(libc.shmget(key, 0, 0), 0, None)\n\
         \x20   q = libc.msgget(int(sys.argv[3]), 0)\n\
         \x20   print('queue left' if q >= 0 else 'no queue')\n\
         \x20   if q >= 0:\n        libc.msgctl(q, 0, None)\n";

// guarantee: G-KERN-12
/// System V IPC is not a file: Landlock does not mediate it, and a child in the host's IPC
/// namespace could attach to the host's shared memory (a root host's child owns root's
/// segments) and leave queues, segments and semaphores behind for the next child, of any tool,
/// to find. Each child has an IPC namespace of its own: the host's segment is not there, and
/// what the child makes goes with it. Checked on the host's side, in both ways a child starts.
#[test]
fn a_child_reaches_no_ipc_object_of_the_host_and_leaves_none() {
    // Keys of this process's own, so that parallel runs do not meet.
    let key = 0x7c00_0000 | (std::process::id() & 0xffff) << 4;
    let (segment, queue) = (key.to_string(), (key + 1).to_string());
    let host = |what: &str| {
        let out = Command::new("/usr/bin/python3")
            .args(["-c", IPC_HOST, what, &segment, &queue])
            .output()
            .unwrap();
        assert!(out.status.success(), "{what}: {}", text(&out.stderr));
        text(&out.stdout)
    };
    let t = tree();
    let prepared = policy(&t).prepare().unwrap();
    let args = vec![
        "-c".to_owned(),
        IPC_PROBE.to_owned(),
        segment.clone(),
        queue.clone(),
    ];
    for how in BOTH_WAYS {
        host("make");
        let said = python_in(&prepared, how, &args, &t.write);
        let left = host("clean");
        assert_eq!(
            said,
            format!("shmget -{}\nmsgget made\n", libc::ENOENT),
            "{how}: the child met the host's segment, or made no queue of its own"
        );
        assert_eq!(left, "no queue\n", "{how}: a child's queue outlived it");
    }
}

/// A probe that raises its core-dump limit as far as it may, then starts a child that touches
/// `argv[1]` MiB of memory and aborts in the directory `argv[2]`; prints the limits it found
/// and how the child ended.
const CORE_PROBE: &str = "import os, resource, subprocess, sys\n\
         soft, hard = resource.getrlimit(resource.RLIMIT_CORE)\n\
         print('core limit', soft, hard)\n\
         try:\n\
         \x20   resource.setrlimit(resource.RLIMIT_CORE, (hard, hard))\n\
         except (OSError, ValueError) as e:\n\
         \x20   print('raise refused', e)\n\
         print('core limit now', *resource.getrlimit(resource.RLIMIT_CORE))\n\
         crash = 'import os\\nb = bytearray(%s << 20)\\nfor i in range(0, len(b), 4096): b[i] = 1\\nos.abort()' % sys.argv[1]\n\
         p = subprocess.run(['/usr/bin/python3', '-c', crash], cwd=sys.argv[2])\n\
         print('crashed', p.returncode)\n";

// guarantee: G-KERN-13
/// A child that crashes leaves no core dump. Before, a child raised its soft core limit to the
/// hard limit the host left (unlimited here) and a grandchild's abort wrote a `core` of its
/// memory into the write root (cut at the file-size limit); where `core_pattern` names a
/// program (a `|`), the kernel hands that image to the host's crash handler, which runs outside
/// the sandbox and honours the limit the child set. Checked in both ways a child starts: the
/// limit is 0, soft and hard, it cannot be raised, and the crash leaves no file.
#[test]
fn a_crashing_child_leaves_no_core_dump() {
    let t = tree();
    let limits = ResourceLimits {
        file_size: Some(1 << 20),
        ..ResourceLimits::default()
    };
    let prepared = policy(&t).limits(limits).prepare().unwrap();
    let args = vec![
        "-c".to_owned(),
        CORE_PROBE.to_owned(),
        "8".to_owned(),
        t.write.display().to_string(),
    ];
    for how in BOTH_WAYS {
        let said = python_in(&prepared, how, &args, &t.write);
        assert!(
            said.contains("crashed -6"),
            "{how}: the child aborts: {said}"
        );
        assert!(said.contains("core limit 0 0\n"), "{how}: {said}");
        assert!(said.contains("core limit now 0 0\n"), "{how}: {said}");
        let left: Vec<_> = std::fs::read_dir(&t.write)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(left.is_empty(), "{how}: the crash left {left:?}: {said}");
    }
}

// guarantee: G-KERN-14
/// A device node beneath a read root or a write root opens nothing (every mount but `/dev` is
/// `nodev` in the child's namespace), in both ways a child starts, while the system devices in
/// `/dev` still work. Making a node needs root (CI runs as root).
#[test]
fn a_device_node_beneath_a_root_opens_nothing() {
    let t = tree();
    let nodes = [t.read.join("zero-node"), t.write.join("zero-node")];
    let made = nodes.iter().all(|node| {
        std::process::Command::new("mknod")
            .arg(node)
            .args(["c", "1", "5"])
            .status()
            .is_ok_and(|s| s.success())
    });
    if !made {
        // Not root: nothing to plant (and nothing this test can show).
        return;
    }
    let prepared = policy(&t).prepare().unwrap();
    let probe = "import os, sys\n\
        for path, flags in [(p, os.O_RDONLY) for p in sys.argv[1:]] + [('/dev/null', os.O_WRONLY), ('/dev/zero', os.O_RDONLY)]:\n\
        \x20   try:\n\
        \x20       os.close(os.open(path, flags))\n\
        \x20       print(path, 'opened')\n\
        \x20   except OSError as e:\n\
        \x20       print(path, e.errno)\n";
    let mut args = vec!["-c".to_owned(), probe.to_owned()];
    args.extend(nodes.iter().map(|n| n.display().to_string()));
    for how in BOTH_WAYS {
        let said = python_in(&prepared, how, &args, &t.write);
        let expected = format!(
            "{} 13\n{} 13\n/dev/null opened\n/dev/zero opened\n",
            nodes[0].display(),
            nodes[1].display()
        );
        assert_eq!(said, expected, "{how}");
    }
}

// guarantee: G-FS-12
/// A procfs mounted beneath a read root or a write root is covered in the child's namespace,
/// in both ways a child starts: it cannot read another process's command line through it, nor
/// open a kernel setting for writing (`sys/kernel/…`: a root child's uid owns them, and its
/// write root's tree keeps the procfs writable), nor one bound over a file of its write root. Mounting needs root (CI runs as root).
#[test]
fn a_procfs_beneath_a_root_is_covered() {
    let t = tree();
    let Some(_read) = mounted::Mounted::new("proc", &t.read.join("proc")) else {
        // Not root: nothing to mount (and nothing this test can show).
        return;
    };
    let Some(_write) = mounted::Mounted::new("proc", &t.write.join("proc")) else {
        panic!("one procfs mounted, the second not");
    };
    // One kernel setting bound over a file of the write root.
    std::fs::write(t.write.join("setting"), "").unwrap();
    let _setting = mounted::Mounted::bind(
        Path::new("/proc/sys/kernel/printk_ratelimit"),
        &t.write.join("setting"),
    )
    .expect("root binds a file");
    let prepared = policy(&t).prepare().unwrap();
    let probe = "import os, sys\n\
        for path, flags in [(sys.argv[1], os.O_RDONLY), (sys.argv[2], os.O_WRONLY), (sys.argv[3], os.O_WRONLY)]:\n\
        \x20   try:\n\
        \x20       os.close(os.open(path, flags))\n\
        \x20       print('opened')\n\
        \x20   except OSError as e:\n\
        \x20       print(e.errno)\n";
    let args = [
        "-c".to_owned(),
        probe.to_owned(),
        t.read.join("proc/1/cmdline").display().to_string(),
        t.write
            .join("proc/sys/kernel/printk_ratelimit")
            .display()
            .to_string(),
        t.write.join("setting").display().to_string(),
    ];
    for how in BOTH_WAYS {
        let said = python_in(&prepared, how, &args, &t.write);
        assert_eq!(said, "13\n13\n13\n", "{how}: each refused (EACCES)");
    }
}

// guarantee: G-KERN-16
/// A command the sandbox is applied to is the first process the kernel's out-of-memory killer
/// ends (`oom_score_adj` 1000, set in the forked process before it executes, read once it has),
/// and the host keeps its own score.
#[test]
fn a_confined_command_is_the_first_the_out_of_memory_killer_ends() {
    let t = tree();
    let mut command = Command::new("/bin/sh");
    command.arg("-c").arg("read line");
    command.stdin(std::process::Stdio::piped());
    policy(&t)
        .prepare()
        .unwrap()
        .apply_to(&mut command)
        .unwrap();
    // `spawn` returns once the program has executed.
    let mut child = command.spawn().expect("the confined child starts");
    let score = std::fs::read_to_string(format!("/proc/{}/oom_score_adj", child.id()));
    drop(child.stdin.take());
    let _ = child.wait();
    assert_eq!(score.unwrap().trim(), "1000");
    let own = std::fs::read_to_string("/proc/self/oom_score_adj").unwrap();
    assert_ne!(
        own.trim(),
        "1000",
        "the host's own score was changed with the child's"
    );
}

/// A spawned program starts with no signal blocked, as `std::process::Command` starts one,
/// whatever the host's thread had blocked: a blocked `SIGTERM` or `SIGINT` inherited would keep
/// a child from ever hearing it. The host's own mask is as it was.
#[test]
fn a_spawned_program_starts_with_no_signal_blocked() {
    let t = tree();
    let prepared = policy(&t).prepare().unwrap();
    let args = vec![
        "-c".to_owned(),
        "import signal; print(sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])))"
            .to_owned(),
    ];
    // A thread of its own, whose mask the test may change.
    std::thread::spawn(move || {
        #[allow(unsafe_code, reason = "blocking signals in the test's own thread")]
        // SAFETY: sigset_t is plain data; the libc helpers only fill it and swap the mask.
        let before = unsafe {
            let mut blocked: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut blocked);
            libc::sigaddset(&mut blocked, libc::SIGTERM);
            libc::sigaddset(&mut blocked, libc::SIGUSR1);
            libc::pthread_sigmask(libc::SIG_BLOCK, &blocked, std::ptr::null_mut());
            let mut now: libc::sigset_t = std::mem::zeroed();
            libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut now);
            libc::sigismember(&now, libc::SIGTERM)
        };
        assert_eq!(before, 1);
        let mut python = launch(Path::new("/usr/bin/python3"), &args, &t.write, false);
        python.arg0 = std::ffi::OsStr::new("python3");
        let child = prepared.spawn(&python).unwrap();
        let (status, stdout, stderr) = run_spawned(child, b"");
        assert_eq!((status, stdout.as_str()), (0, "[]\n"), "{stderr}");
        #[allow(unsafe_code, reason = "reading the test's own thread's mask")]
        // SAFETY: as above.
        let after = unsafe {
            let mut now: libc::sigset_t = std::mem::zeroed();
            libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut now);
            libc::sigismember(&now, libc::SIGTERM)
        };
        assert_eq!(after, 1, "the host's own mask changed");
    })
    .join()
    .unwrap();
}
