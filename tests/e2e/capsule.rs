//! The capsule, end to end: lab tools run in confined workers (the `capsule-lab` binary is its
//! own worker) through the registry with the real backends. The escape suite tries, from inside a
//! capsule, everything a tool must not do; each attempt is stopped and the host goes on. Each
//! escape is first shown to succeed in process, so that a capsule that stopped nothing would
//! fail these tests.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use capability_capsule::{Capsule, CapsuleConfig};
use capability_core::PolicyFormat;
use capability_core::{
    ApprovalHandler, ApprovalRequest, CapabilityBackends, CompiledPolicy, DefaultToolRegistry,
    ExecutionContext, IsolationKey, IsolationSelection, RegistryConfig, ToolCall,
};
use capability_fetch::{FetchBackend, FetchConfig};
use capability_fs::{FsBackend, FsConfig};
use capability_kv::{KvBackend, KvLimits, MemoryStore};
use capability_process::{ProcessBackend, ProcessConfig};
use capability_sandbox::Support;
use capability_secrets::{MemorySecrets, SecretsResolverFactory};
use capability_types::ToolResult;
use serde_json::{Value, json};

#[path = "../capsule_lab/tools.rs"]
pub(crate) mod lab;

const LAB: &str = env!("CARGO_BIN_EXE_capsule-lab");

/// A loopback server that answers with its name and whether the lab tool's header arrived.
async fn http_server(name: &'static str) -> (u16, Arc<AtomicUsize>) {
    crate::support::http_server(name, move |request| {
        format!("{name}:{}", request.contains("x-lab: capsule"))
    })
    .await
}

struct Lab {
    _dir: tempfile::TempDir,
    root: PathBuf,
    policy: Arc<CompiledPolicy>,
    capsule: Arc<Capsule>,
    registry: DefaultToolRegistry,
    allowed_port: u16,
    forbidden_port: u16,
    forbidden_hits: Arc<AtomicUsize>,
}

fn config() -> CapsuleConfig {
    CapsuleConfig::new(LAB).address_space(Some(1 << 30))
}

fn backends() -> CapabilityBackends {
    CapabilityBackends::new()
        .with_fs(Arc::new(FsBackend::new(FsConfig::default())))
        .with_fetch(Arc::new(FetchBackend::new(FetchConfig::default()).unwrap()))
        .with_secrets(Arc::new(SecretsResolverFactory::new(vec![Arc::new(
            MemorySecrets::new().with("LAB_TOKEN", "tok-1234"),
        )])))
        .with_process(Arc::new(ProcessBackend::new(
            ProcessConfig::from_process_env(),
        )))
        .with_kv(Arc::new(KvBackend::new(
            MemoryStore::new(),
            KvLimits::default(),
        )))
}

fn policy(root: &Path, port: u16) -> CompiledPolicy {
    CompiledPolicy::load(
        &format!(
            "id = \"capsule\"\n[fs_reach]\nread = [\"{r}/data\"]\nwrite = [\"{r}/out\"]\n[safety.network]\nallow = [\"127.0.0.1:{port}\"]\n[safety.process]\nallow = [\"echo\"]\n",
            r = root.display()
        ),
        PolicyFormat::Toml,
        Some(Path::new("/home/capsule")),
    )
    .unwrap()
}

async fn lab_with(config: CapsuleConfig, registry_config: RegistryConfig) -> Lab {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join("data")).unwrap();
    std::fs::create_dir_all(root.join("out")).unwrap();
    std::fs::create_dir_all(root.join("private")).unwrap();
    std::fs::write(root.join("data/notes.md"), "# notes").unwrap();
    std::fs::write(root.join("private/key"), "do not read").unwrap();
    let (allowed_port, _) = http_server("allowed").await;
    let (forbidden_port, forbidden_hits) = http_server("forbidden").await;
    let capsule = Arc::new(Capsule::new(config));
    let mut registry = DefaultToolRegistry::new(Some(backends()))
        .with_config(registry_config)
        .with_isolation(capsule.clone(), IsolationSelection::All);
    for tool in lab::lab_tools() {
        registry.register_arc(tool).unwrap();
    }
    Lab {
        policy: Arc::new(policy(&root, allowed_port)),
        _dir: dir,
        root,
        capsule,
        registry,
        allowed_port,
        forbidden_port,
        forbidden_hits,
    }
}

async fn lab_default() -> Lab {
    lab_with(config(), RegistryConfig::default()).await
}

impl Lab {
    fn ctx(&self) -> ExecutionContext {
        ExecutionContext::new(
            "capsule-e2e",
            Arc::clone(&self.policy),
            self.root.join("data"),
        )
    }

    async fn call(&self, tool: &str, args: Value) -> ToolResult {
        self.registry
            .execute(ToolCall::new("1", tool, args), &self.ctx())
            .await
            .result
    }

    async fn value(&self, tool: &str, args: Value) -> Value {
        match self.call(tool, args.clone()).await {
            ToolResult::Ok(value) => value,
            other => panic!("{tool} {args} failed: {other:?}"),
        }
    }

    /// The host goes on: a plain call still works.
    async fn assert_alive(&self) {
        let value = self.value("echo", json!({"still": "here"})).await;
        assert_eq!(value["args"], json!({"still": "here"}));
    }
}

fn json_of(result: &ToolResult) -> String {
    serde_json::to_string(result).unwrap()
}

/// A registry running the same lab tools in process: the control group.
fn in_process() -> DefaultToolRegistry {
    let mut registry = DefaultToolRegistry::new(Some(backends()));
    for tool in lab::lab_tools() {
        registry.register_arc(tool).unwrap();
    }
    registry
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scoped_calls_are_proxied_and_checked_again_by_the_host() {
    scoped_calls_are_proxied(config()).await;
}

// The same calls with each side sleeping on the channel at once (no polling), and with both
// polling long enough to take every frame of a call without sleeping (docs/isolation-model.md,
// "The warm path"): the answers do not depend on how a side waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scoped_calls_give_the_same_answers_whether_the_channel_is_polled_or_not() {
    scoped_calls_are_proxied(config().spin(Duration::ZERO)).await;
    scoped_calls_are_proxied(config().spin(Duration::from_millis(20))).await;
}

#[tokio::test(flavor = "current_thread")]
async fn scoped_calls_work_from_a_current_thread_runtime() {
    scoped_calls_are_proxied(config()).await;
}

async fn scoped_calls_are_proxied(config: CapsuleConfig) {
    let lab = lab_with(config, RegistryConfig::default()).await;
    let r = &lab.root;
    let url = |port: u16| format!("http://127.0.0.1:{port}/x");
    let cases = [
        (json!({"op": "read", "path": "notes.md"}), r##"{"ok":true,"value":"# notes"}"##.to_owned()),
        (json!({"op": "read_bytes", "path": "notes.md"}), r#"{"ok":true,"value":7}"#.to_owned()),
        (
            json!({"op": "read", "path": format!("{}/private/key", r.display())}),
            format!(r#"{{"ok":false,"code":"denied","error":"PATH_NOT_REACHABLE: read not permitted for {}/private/key"}}"#, r.display()),
        ),
        (json!({"op": "write", "path": "../out/report.md", "content": "done"}), r#"{"ok":true,"value":4}"#.to_owned()),
        (
            json!({"op": "write", "path": "notes.md", "content": "x"}),
            format!(r#"{{"ok":false,"code":"denied","error":"PATH_NOT_REACHABLE: write not permitted for {}/data/notes.md"}}"#, r.display()),
        ),
        (json!({"op": "append", "path": "../out/log.txt", "content": "a"}), r#"{"ok":true,"value":1}"#.to_owned()),
        (json!({"op": "append", "path": "../out/log.txt", "content": "bc"}), r#"{"ok":true,"value":2}"#.to_owned()),
        (
            json!({"op": "append", "path": "notes.md", "content": "x"}),
            format!(r#"{{"ok":false,"code":"denied","error":"PATH_NOT_REACHABLE: write not permitted for {}/data/notes.md"}}"#, r.display()),
        ),
        (json!({"op": "exists", "path": "notes.md"}), r#"{"ok":true,"value":true}"#.to_owned()),
        (json!({"op": "list", "path": "."}), r#"{"ok":true,"value":["notes.md"]}"#.to_owned()),
        (json!({"op": "mkdir", "path": "../out/sub"}), r#"{"ok":true,"value":null}"#.to_owned()),
        (json!({"op": "metadata", "path": "notes.md"}), r#"{"ok":true,"value":{"kind":"file","len":7,"modified":true}}"#.to_owned()),
        (json!({"op": "remove", "path": "../out/sub"}), r#"{"ok":true,"value":null}"#.to_owned()),
        (json!({"op": "concurrent", "path": "notes.md"}), r#"{"ok":true,"value":{"exists":true,"len":7}}"#.to_owned()),
        (json!({"op": "spawned", "path": "notes.md"}), r##"{"ok":true,"value":"# notes"}"##.to_owned()),
        (
            json!({"op": "fetch", "url": url(lab.allowed_port), "body": "hello"}),
            r#"{"ok":true,"value":{"body":"allowed:true","server":"allowed","status":200}}"#.to_owned(),
        ),
        (
            json!({"op": "fetch", "url": url(lab.forbidden_port)}),
            r#"{"ok":false,"code":"denied","error":"HOST_NOT_ALLOWED: 127.0.0.1 is not in the declared allowedHosts"}"#.to_owned(),
        ),
        (json!({"op": "secret", "name": "LAB_TOKEN"}), r#"{"ok":true,"value":{"declared":["LAB_TOKEN"],"len":8}}"#.to_owned()),
        (
            json!({"op": "secret", "name": "AWS_SECRET_ACCESS_KEY"}),
            r#"{"ok":false,"code":"denied","error":"SECRET_NOT_DECLARED: AWS_SECRET_ACCESS_KEY is not in the tool's declared secrets"}"#.to_owned(),
        ),
        (
            json!({"op": "spawn", "binary": "echo", "args": ["from", "the", "host"]}),
            r#"{"ok":true,"value":{"exit_code":0,"stdout":"from the host\n"}}"#.to_owned(),
        ),
        (
            json!({"op": "spawn", "binary": "rm", "args": ["-rf", "."]}),
            r#"{"ok":false,"code":"denied","error":"BINARY_NOT_ALLOWED: rm is not in the declared allowedBinaries"}"#.to_owned(),
        ),
        (
            json!({"op": "kv"}),
            r#"{"ok":true,"value":{"deleted":true,"keys":["lab"],"value":{"n":1}}}"#.to_owned(),
        ),
    ];
    for (args, expected) in cases {
        let result = lab.call("proxy", args.clone()).await;
        assert_eq!(json_of(&result), expected, "{args}");
    }
    assert_eq!(
        std::fs::read_to_string(r.join("out/report.md")).unwrap(),
        "done"
    );
    assert_eq!(
        std::fs::read_to_string(r.join("out/log.txt")).unwrap(),
        "abc"
    );
    assert_eq!(lab.forbidden_hits.load(Ordering::SeqCst), 0);
    // Every call above ran in one warm worker.
    assert_eq!(lab.capsule.workers_started(), 1);
}

/// The components of an absolute path, for the lab's `hidden_path`.
fn parts(path: &Path) -> Vec<String> {
    path.components()
        .skip(1)
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect()
}

/// Runs `args` through the in-process control registry, where the escape must succeed.
async fn control(lab: &Lab, args: Value) -> Value {
    let result = in_process()
        .execute(ToolCall::new("c", "escape", args.clone()), &lab.ctx())
        .await
        .result;
    match result {
        ToolResult::Ok(value) => value,
        other => panic!("control {args}: {other:?}"),
    }
}

// guarantee: G-CAP-01, G-CAP-06
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escapes_are_stopped_by_the_kernel_and_the_host_goes_on() {
    let lab = lab_default().await;
    let r = &lab.root;

    // std::fs::read outside (and even inside) the tool's reach: nothing is there, in the
    // worker's empty root.
    for path in [r.join("private/key"), r.join("data/notes.md")] {
        let args = json!({"attempt": "fs_read", "parts": parts(&path)});
        assert_eq!(control(&lab, args.clone()).await["escaped"], true);
        let confined = lab.value("escape", args).await;
        assert_eq!(confined["escaped"], false, "{confined}");
        assert_eq!(confined["errno"], libc::ENOENT, "{confined}");
    }
    // And what is there, the empty root itself, Landlock refuses to open.
    let confined = lab
        .value("escape", json!({"attempt": "fs_read", "parts": []}))
        .await;
    assert_eq!(confined["escaped"], false, "{confined}");
    assert_eq!(confined["errno"], libc::EACCES, "{confined}");
    // ... while the scoped read of the same file works, served by the host.
    let scoped = lab
        .value(
            "escape",
            json!({"attempt": "scoped_read", "path": "notes.md"}),
        )
        .await;
    assert_eq!(scoped["text"], "# notes");
    // A write anywhere.
    let target = r.join("out/escaped.txt");
    let confined = lab
        .value(
            "escape",
            json!({"attempt": "fs_write", "parts": parts(&target)}),
        )
        .await;
    assert_eq!(confined["escaped"], false, "{confined}");
    assert!(!target.exists());

    // A TcpStream to a loopback port it was not given.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let confined = lab
        .value("escape", json!({"attempt": "tcp", "port": port}))
        .await;
    assert_eq!(confined["escaped"], false, "{confined}");
    assert_eq!(confined["errno"], libc::EPERM, "{confined}");
    assert!(
        listener.accept().is_err(),
        "the listener was reached from the capsule"
    );
    let reached = control(&lab, json!({"attempt": "tcp", "port": lab.allowed_port})).await;
    assert_eq!(
        reached["escaped"], true,
        "in process the same code connects"
    );

    // fork without bound, and spawning a program.
    let confined = lab.value("escape", json!({"attempt": "fork_bomb"})).await;
    assert_eq!(confined["forked"], 0, "{confined}");
    assert_eq!(confined["spawn"]["escaped"], false, "{confined}");

    // ptrace of the host, io_uring.
    for attempt in ["ptrace", "io_uring"] {
        let confined = lab.value("escape", json!({"attempt": attempt})).await;
        assert_eq!(confined["escaped"], false, "{attempt}: {confined}");
        assert_eq!(confined["errno"], libc::EPERM, "{attempt}: {confined}");
    }
    lab.assert_alive().await;
    assert_eq!(
        lab.capsule.workers_started(),
        2,
        "one worker per tool, reused"
    );
}

/// An escape attempt's outcome (`errno_of` in the lab): refused with `EPERM`.
fn refused_eperm(outcome: &Value, what: &str) {
    assert_eq!(outcome["escaped"], false, "{what}: {outcome}");
    assert_eq!(outcome["errno"], libc::EPERM, "{what}: {outcome}");
}

/// Adds (`make`) or removes (`take`) the key `name` in this account's user keyring (`@u`),
/// through python's ctypes; `take` says whether the key was there.
fn user_key(what: &str, name: &str) -> bool {
    let out = std::process::Command::new("/usr/bin/python3")
        .args([
            "-c",
            "import ctypes, platform, sys\n\
             libc = ctypes.CDLL(None, use_errno=True)\n\
             ADD, KEYCTL = {'x86_64': (248, 250), 'aarch64': (217, 219)}[platform.machine()]\n\
             USER = ctypes.c_long(-4)\n\
             name = sys.argv[2].encode()\n\
             if sys.argv[1] == 'make':\n\
             \x20   assert libc.syscall(ADD, b'user', name, b'host-secret', 11, USER) > 0\n\
             else:\n\
             \x20   key = libc.syscall(KEYCTL, 10, USER, b'user', name, 0)\n\
             \x20   print('there' if key > 0 else 'not there')\n\
             \x20   if key > 0:\n        libc.syscall(KEYCTL, 21, ctypes.c_long(key))\n",
            what,
            name,
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{what} {name}: {out:?}");
    out.stdout == b"there\n"
}

// guarantee: G-KERN-15
/// A tool in a capsule reads no key of its user's keyring and plants none there: the host's
/// key (a token, a ticket, a file system's key, which every process of the account shares)
/// is not found, and a key the worker would add is not made. In process the same code reads
/// the host's key and adds its own, the control.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workers_keyring_calls_are_refused() {
    let lab = lab_default().await;
    let tag = std::process::id();
    let (host, planted) = (
        format!("toolcap-host-{tag}"),
        format!("toolcap-worker-{tag}"),
    );
    user_key("make", &host);
    let read = json!({"attempt": "key_read", "name": host});
    let add = json!({"attempt": "key_add", "name": planted});
    let confined = [
        lab.value("escape", read.clone()).await,
        lab.value("escape", add.clone()).await,
    ];
    let controls = [control(&lab, read).await, control(&lab, add).await];
    let control_planted = user_key("take", &planted);
    assert!(user_key("take", &host), "the host's key went");
    refused_eperm(&confined[0], "key_read");
    refused_eperm(&confined[1], "key_add");
    assert_eq!(controls[0]["value"], "host-secret", "{}", controls[0]);
    assert_eq!(controls[1]["escaped"], true, "{}", controls[1]);
    assert!(control_planted, "the control's key was made");
    lab.assert_alive().await;
}

// guarantee: G-KERN-02, G-KERN-03, G-KERN-08, G-KERN-10
/// issue 13, classes 1 and 3, in the capsule: a Unix socket outside the reach (the listener
/// counts its connections), the kernel log, the clock, and the capabilities of a root host;
/// the worker's own session (no controlling terminal), and signals to other processes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unix_sockets_and_root_powers_are_out_of_a_workers_reach() {
    let lab = lab_default().await;
    let socket = lab.root.join("private/agent.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    listener.set_nonblocking(true).unwrap();
    let args = json!({"attempt": "unix_socket", "parts": parts(&socket)});
    assert_eq!(
        control(&lab, args.clone()).await["escaped"],
        true,
        "the control connects"
    );
    while listener.accept().is_ok() {} // the control's connection
    let confined = lab.value("escape", args).await;
    assert_eq!(confined["escaped"], false, "{confined}");
    assert_eq!(confined["errno"], libc::EPERM, "{confined}");
    assert!(
        listener.accept().is_err(),
        "the socket was reached from the capsule"
    );

    let root = control(&lab, json!({"attempt": "capabilities"})).await;
    let confined = lab
        .value("escape", json!({"attempt": "capabilities"}))
        .await;
    assert_eq!(confined["ok"], true, "{confined}");
    assert_eq!(
        confined["effective"],
        json!([0, 0]),
        "{confined} (host: {root})"
    );
    assert_eq!(
        confined["permitted"],
        json!([0, 0]),
        "{confined} (host: {root})"
    );
    for attempt in ["syslog", "settimeofday"] {
        let confined = lab.value("escape", json!({"attempt": attempt})).await;
        refused_eperm(&confined, attempt);
    }
    // A session of its own: no controlling terminal, so no `/dev/tty` for a tool to type into
    // (G-KERN-08). The test process is no session's leader.
    assert_eq!(
        control(&lab, json!({"attempt": "session"})).await["leader"],
        false
    );
    let confined = lab.value("escape", json!({"attempt": "session"})).await;
    assert_eq!(confined["leader"], true, "{confined}");
    // Signals to any other process refused, whatever the kernel's Landlock (its signal scope is
    // Linux 6.12+): not a process of the user's (it would note a SIGURG in a file), not every
    // process at once (`kill -1`), not the host; the worker itself still.
    let marker = lab.root.join("data/signalled");
    let mut victim = std::process::Command::new("/usr/bin/python3")
        .args([
            "-c",
            "import signal, sys, time\n\
             signal.signal(signal.SIGURG, lambda *_: open(sys.argv[1], 'w').write('got'))\n\
             signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGURG])\n\
             print('ready', flush=True)\ntime.sleep(60)\n",
        ])
        .arg(&marker)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(victim.stdout.as_mut().unwrap()),
        &mut ready,
    )
    .unwrap();
    assert_eq!(ready, "ready\n", "the victim started");
    let args = json!({"attempt": "signal", "victim": victim.id()});
    let confined = lab.value("escape", args.clone()).await;
    for target in ["victim", "everyone", "host"] {
        refused_eperm(&confined[target], target);
    }
    assert_eq!(confined["itself"]["escaped"], true, "{confined}");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(
        !marker.exists(),
        "a signal from the capsule reached the victim"
    );
    // The control, in process, reaches it: the victim notes what it gets.
    assert_eq!(control(&lab, args).await["victim"]["escaped"], true);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !marker.exists() && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(marker.exists(), "the victim does note a signal");
    victim.kill().unwrap();
    victim.wait().unwrap();
    // Nor what would change how the host runs: its limits (read here, not set), its priority
    // and its CPUs (set to what they are); the worker's own priority still.
    let host = control(&lab, json!({"attempt": "other_process"})).await;
    assert_eq!(host["prlimit"]["escaped"], true, "the control may: {host}");
    let confined = lab
        .value("escape", json!({"attempt": "other_process"}))
        .await;
    for target in ["prlimit", "priority", "affinity"] {
        refused_eperm(&confined[target], target);
    }
    assert_eq!(confined["own_priority"]["escaped"], true, "{confined}");
    lab.assert_alive().await;
}

// guarantee: G-KERN-11
/// A worker changes no file's metadata (Landlock does not mediate it): not the mode, times or
/// attributes of a file outside every reach. Checked on disk; the control, in process, does
/// change them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_changes_no_files_metadata() {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    let lab = lab_default().await;
    let file = lab.root.join("private/meta.txt");
    std::fs::write(&file, "private").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let state = || {
        let m = std::fs::metadata(&file).unwrap();
        let xattr = std::process::Command::new("/usr/bin/python3")
            .args(["-c", "import os, sys\nprint(os.listxattr(sys.argv[1]))"])
            .arg(&file)
            .output()
            .unwrap();
        (
            m.mode(),
            m.mtime(),
            String::from_utf8_lossy(&xattr.stdout).into_owned(),
        )
    };
    let before = state();
    let args = json!({"attempt": "metadata", "parts": parts(&file)});
    let confined = lab.value("escape", args.clone()).await;
    for call in ["chmod", "utime", "setxattr"] {
        assert_eq!(confined[call]["escaped"], false, "{call}: {confined}");
    }
    assert_eq!(state(), before, "the worker changed the file: {confined}");
    let host = control(&lab, args).await;
    for call in ["chmod", "utime", "setxattr"] {
        assert_eq!(host[call]["escaped"], true, "the control may: {host}");
    }
    assert_ne!(state(), before, "the control changes the file");
    lab.assert_alive().await;
}

/// What the peek attempt looks at.
const PEEKS: [&str; 5] = ["stat", "access", "readlink", "listxattr", "inotify"];

// guarantee: G-CAP-06
/// A worker learns nothing of a path it cannot open: not its size, not whether it exists, not
/// where a link points, not its extended attributes, and it cannot watch a directory for the
/// names made there (Landlock mediates none of these; the worker's root is an empty file system
/// of its own, and it makes no `inotify` instance). The control, in process, learns each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_learns_nothing_of_a_path_it_cannot_open() {
    let lab = lab_default().await;
    let file = lab.root.join("private/peek.txt");
    std::fs::write(&file, "twelve bytes").unwrap();
    std::os::unix::fs::symlink("/somewhere/secret", lab.root.join("private/peek.txt.link"))
        .unwrap();
    let args = json!({"attempt": "peek", "parts": parts(&file)});
    let confined = lab.value("escape", args.clone()).await;
    for peek in PEEKS {
        assert_eq!(confined[peek]["escaped"], false, "{peek}: {confined}");
        // Nothing is there; and an inotify instance, which could watch nothing, is not made.
        let errno = if peek == "inotify" {
            libc::EPERM
        } else {
            libc::ENOENT
        };
        assert_eq!(confined[peek]["errno"], errno, "{peek}: {confined}");
    }
    // What the control learns below is nowhere in the worker's answer.
    let said = confined.to_string();
    assert!(
        !said.contains("/somewhere/secret") && !said.contains("\"size\""),
        "{said}"
    );
    let host = control(&lab, args).await;
    for peek in PEEKS {
        assert_eq!(
            host[peek]["escaped"], true,
            "the control may {peek}: {host}"
        );
    }
    assert_eq!(host["stat"]["size"], 12, "{host}");
    assert_eq!(host["readlink"]["target"], "/somewhere/secret", "{host}");
    lab.assert_alive().await;
}

// guarantee: G-KERN-12
/// A worker finds none of the host's System V IPC objects (not files: Landlock does not
/// mediate them); the control, in process, finds the segment the test made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_reaches_no_ipc_object_of_the_host() {
    let lab = lab_default().await;
    let key = 0x7d00_0000 | (std::process::id() & 0xffff) << 4;
    let segment = |what: &str| {
        let script = "import ctypes, sys\n\
             libc = ctypes.CDLL(None, use_errno=True)\n\
             key = int(sys.argv[2])\n\
             if sys.argv[1] == 'make':\n    assert libc.shmget(key, 4096, 0o1000 | 0o2000 | 0o600) >= 0\n\
             else:\n    libc.shmctl(libc.shmget(key, 0, 0), 0, None)\n";
        let status = std::process::Command::new("/usr/bin/python3")
            .args(["-c", script, what, &key.to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "{what}");
    };
    segment("make");
    let args = json!({"attempt": "sysv_shm", "key": key});
    let confined = lab.value("escape", args.clone()).await;
    let host = control(&lab, args).await;
    segment("remove");
    assert_eq!(confined["escaped"], false, "{confined}");
    assert_eq!(confined["errno"], libc::ENOENT, "{confined}");
    assert_eq!(host["escaped"], true, "the control finds it: {host}");
    lab.assert_alive().await;
}

// guarantee: G-KERN-13
/// A worker cannot dump core: its hard core limit is 0, so a crash hands no image of its memory
/// (the secrets its tools resolved among it) to the host's crash handler. The control, in
/// process, has the test process's limit, which a crash there could use when it is above 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_cannot_dump_core() {
    let lab = lab_default().await;
    let args = json!({"attempt": "core_dump"});
    let confined = lab.value("escape", args.clone()).await;
    assert_eq!(confined["escaped"], false, "{confined}");
    assert_eq!(
        (&confined["soft"], &confined["hard"]),
        (&json!(0), &json!(0)),
        "{confined}"
    );
    let host = control(&lab, args).await;
    // "Max core file size  <soft>  <hard>  bytes", the hard limit a number or "unlimited".
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap();
    let hard = limits
        .lines()
        .find_map(|l| l.strip_prefix("Max core file size"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or_else(|| panic!("no core limit in {limits}"));
    assert_eq!(
        host["escaped"],
        hard != "0",
        "the control has the test's limit {hard}: {host}"
    );
    lab.assert_alive().await;
}

// guarantee: G-KERN-16
/// A worker is the first process the kernel's out-of-memory killer ends: its `oom_score_adj`
/// is 1000, read from outside (a worker has no `/proc` to read or lower it in: its root is
/// empty), while the host keeps its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_is_the_first_the_out_of_memory_killer_ends() {
    let lab = lab_default().await;
    let worker = lab.value("counter", json!({})).await;
    let pid = worker["pid"].as_u64().unwrap();
    assert_ne!(pid, u64::from(std::process::id()));
    let score = |path: String| std::fs::read_to_string(path).unwrap().trim().to_owned();
    assert_eq!(
        score(format!("/proc/{pid}/oom_score_adj")),
        "1000",
        "{worker}"
    );
    assert_ne!(
        score("/proc/self/oom_score_adj".to_owned()),
        "1000",
        "the host's own"
    );
    lab.assert_alive().await;
}

// guarantee: G-CAP-01
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_planted_secret_in_the_hosts_environment_is_out_of_reach() {
    let needle = format!("planted-{}", std::process::id());
    let output = std::process::Command::new(LAB)
        .args(["host", "environ"])
        .env("LAB_PLANTED", &needle)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    // The control: the secret is in the host's environment, readable there.
    assert_eq!(report["planted_in_host"], true, "{report}");
    let value = &report["result"]["value"];
    assert_eq!(value["env"], false, "{report}");
    for place in ["self", "parent"] {
        assert_eq!(value[place]["found"], false, "{report}");
        assert_eq!(value[place]["readable"], false, "{report}");
    }
}

// guarantee: G-CAP-02
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crashes_fail_only_their_own_call() {
    let lab = lab_default().await;
    let ctx = lab.ctx();
    let calls = vec![
        ToolCall::new("panic", "escape", json!({"attempt": "panic"})),
        ToolCall::new("a", "echo", json!({"n": 1})),
        ToolCall::new("exit", "escape", json!({"attempt": "exit"})),
        ToolCall::new("abort", "escape", json!({"attempt": "abort"})),
        ToolCall::new("segv", "escape", json!({"attempt": "segfault"})),
        ToolCall::new("oom", "escape", json!({"attempt": "alloc_bomb"})),
        ToolCall::new("junk", "escape", json!({"attempt": "garbage"})),
        ToolCall::new("b", "echo", json!({"n": 2})),
    ];
    let results = lab.registry.execute_parallel(calls, &ctx).await;
    let by_id = |id: &str| {
        results
            .iter()
            .find(|r| r.call_id == id)
            .map(|r| json_of(&r.result))
            .unwrap()
    };
    let expect = [
        (
            "panic",
            "tool escape panicked in its capsule: the lab tool panics on purpose",
        ),
        ("exit", "the worker exited with status 7"),
        ("abort", "killed by signal 6 (SIGABRT"),
        ("segv", "killed by signal 11 (SIGSEGV)"),
        ("oom", "memory allocation of 67108864 bytes failed"),
        ("junk", "a frame of 2147483647 bytes exceeds the limit"),
    ];
    for (id, needle) in expect {
        let shown = by_id(id);
        assert!(
            shown.starts_with(r#"{"ok":false,"code":"execution_failed""#) && shown.contains(needle),
            "{id}: {shown}"
        );
    }
    for id in ["a", "b"] {
        assert!(
            by_id(id).starts_with(r#"{"ok":true"#),
            "{id}: {}",
            by_id(id)
        );
    }
    lab.assert_alive().await;
}

// guarantee: G-CAP-04
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_forges_its_channel_counters_fails_its_own_call_only() {
    // The channel's rings live in memory the worker shares (docs/isolation-model.md, "The warm
    // path"): a tool can overwrite the worker's counters there. The host checks each counter
    // before it uses it; a claim out of range ends that worker with a protocol error, and the
    // host goes on with a fresh one.
    let lab = lab_default().await;
    let out_of_range = "is out of range: it broke the protocol";
    // A claim to have put in more than a ring holds: the call that makes it fails.
    let shown = json_of(
        &lab.call("escape", json!({"attempt": "forge_put_count"}))
            .await,
    );
    assert!(
        shown.starts_with(r#"{"ok":false,"code":"execution_failed""#)
            && shown.contains(out_of_range),
        "{shown}"
    );
    let after = lab.call("echo", json!({"n": 1})).await;
    assert!(after.is_ok(), "{after:?}");
    // A claim to have taken more than the host put in: the worker's own answer still comes,
    // and the host refuses the worker at its next call, which fails; the one after runs on a
    // fresh worker.
    let started = lab.capsule.workers_started();
    let forged = lab
        .call("escape", json!({"attempt": "forge_taken_count"}))
        .await;
    assert!(forged.is_ok(), "{forged:?}");
    let shown = json_of(
        &lab.call(
            "escape",
            json!({"attempt": "scoped_read", "path": "notes.md"}),
        )
        .await,
    );
    assert!(
        shown.starts_with(r#"{"ok":false,"code":"execution_failed""#)
            && shown.contains(out_of_range),
        "{shown}"
    );
    let again = lab.call("echo", json!({"n": 2})).await;
    assert!(again.is_ok(), "{again:?}");
    assert!(
        lab.capsule.workers_started() > started,
        "the forging worker was replaced"
    );
}

/// A lab whose every call gets a fresh worker, whose first call is number 1; its restart budget
/// leaves room for the calls a test makes fail.
async fn lab_with_a_worker_per_call() -> Lab {
    lab_with(
        config()
            .warm_workers(0)
            .restart_budget(10, Duration::from_secs(60)),
        RegistryConfig::default(),
    )
    .await
}

/// The lab's `escape` tool, told by `args` to forge its result, fails its call with
/// `execution_failed` naming `needle`.
async fn assert_forged_result_fails(lab: &Lab, args: Value, needle: &str) {
    let shown = json_of(&lab.call("escape", args).await);
    assert!(
        shown.starts_with(r#"{"ok":false,"code":"execution_failed""#) && shown.contains(needle),
        "{needle}: {shown}"
    );
}

// guarantee: G-CAP-02
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_whose_lifted_strings_do_not_fit_fails_its_call_only() {
    // A result's long strings ride in its frame's blob (docs/isolation-model.md, "The warm
    // path"); a worker that lies about them fails its own call, and the host goes on. Each call
    // gets a fresh worker, whose first call is number 1 (and the restart budget leaves room
    // for the five that fail).
    let lab = lab_with_a_worker_per_call().await;
    let done = |rest: &str| format!(r#"{{"done":{{"seq":1,{rest}}}}}"#);
    for (header, blob, needle) in [
        (
            done(r#""result":{"Ok":{"text":""}},"lifted":[[0,10]]"#),
            Some("abc"),
            "lifted strings: longer than the blob",
        ),
        (
            done(r#""result":{"Ok":{"text":"x"}},"lifted":[[0,3]]"#),
            Some("abc"),
            "lifted strings: a place that is not an empty string",
        ),
        (
            // "é" is two bytes: cut in the middle, neither half is text.
            done(r#""result":{"Ok":{"a":"","b":""}},"lifted":[[0,1],[1,1]]"#),
            Some("\u{e9}"),
            "lifted strings: not UTF-8",
        ),
        (
            done(
                r#""result":{"Err":{"code":"execution_failed","denial":null,"message":"m"}},"lifted":[[0,3]]"#,
            ),
            Some("abc"),
            "lifted strings: an error carries none",
        ),
        (
            done(r#""result":{"Ok":{"text":"abc"}}"#),
            Some("abc"),
            "lifted strings: the blobs do not match the places",
        ),
    ] {
        let mut args = json!({"attempt": "forged_done", "header": header});
        if let Some(blob) = blob {
            args["blob"] = json!(blob);
        }
        assert_forged_result_fails(&lab, args, needle).await;
    }
    // A frame that fits is taken as the result, as the worker's own would be.
    let shown = json_of(
        &lab.call(
            "escape",
            json!({
                "attempt": "forged_done",
                "header": done(r#""result":{"Ok":{"text":"","n":1}},"lifted":[[0,3]]"#),
                "blob": "abc",
            }),
        )
        .await,
    );
    assert!(shown.contains(r#""text":"abc""#), "{shown}");
    lab.assert_alive().await;
}

/// The compact header of call 1's result: `Ok` with `value` (already encoded), nothing lifted,
/// then `trailer`; in hexadecimal, as the lab's `forged_done` takes it.
fn compact_done(value: &[u8], trailer: &[u8]) -> String {
    let mut header = vec![0x02];
    header.extend_from_slice(&1u64.to_be_bytes());
    header.push(0);
    header.extend_from_slice(value);
    header.extend_from_slice(&0u32.to_be_bytes());
    header.extend_from_slice(trailer);
    header.iter().map(|b| format!("{b:02x}")).collect()
}

/// A compact object of `entries` (key, encoded value).
fn compact_object(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut value = vec![0x08];
    value.extend_from_slice(&u32::try_from(entries.len()).unwrap().to_be_bytes());
    for (key, item) in entries {
        value.extend_from_slice(&u32::try_from(key.len()).unwrap().to_be_bytes());
        value.extend_from_slice(key.as_bytes());
        value.extend_from_slice(item);
    }
    value
}

// guarantee: G-CAP-02
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compact_result_that_breaks_its_rules_fails_its_call_only() {
    // Results cross in the compact encoding (docs/isolation-model.md, "The warm path", the wire
    // format); a worker that writes one against its rules fails its own call, and the host goes
    // on. A fresh worker per call, whose first call is number 1.
    let lab = lab_with_a_worker_per_call().await;
    let deep = {
        let mut value = Vec::new();
        for _ in 0..129 {
            value.push(0x07);
            value.extend_from_slice(&1u32.to_be_bytes());
        }
        value.push(0x00);
        value
    };
    let huge_count = [vec![0x07], u32::MAX.to_be_bytes().to_vec()].concat();
    for (header, needle) in [
        (compact_done(&[0x09], b""), "compact message: value tag 9"),
        (
            compact_done(&compact_object(&[("k", &[0x02]), ("k", &[0x01])]), b""),
            "compact message: a key twice in one object",
        ),
        (
            compact_done(&[0x00], b"\x00"),
            "compact message: 1 bytes after the message",
        ),
        (compact_done(&deep, b""), "nested deeper than 128"),
        (compact_done(&huge_count, b""), "items announced"),
        (
            compact_done(&[0x06, 0, 0, 0, 2, 0xc3, 0x28], b""),
            "a string that is not UTF-8",
        ),
    ] {
        let args = json!({"attempt": "forged_done", "header_hex": header});
        assert_forged_result_fails(&lab, args, needle).await;
    }
    // A compact result that keeps the rules is taken as the worker's own would be.
    let value = compact_object(&[("text", &[0x06, 0, 0, 0, 2, b'o', b'k'])]);
    let header = compact_done(&value, b"");
    let shown = json_of(
        &lab.call(
            "escape",
            json!({"attempt": "forged_done", "header_hex": header}),
        )
        .await,
    );
    assert!(shown.contains(r#""text":"ok""#), "{shown}");
    lab.assert_alive().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_loops_is_killed_at_the_timeout_and_replaced() {
    let lab = lab_with(
        config(),
        RegistryConfig::default().call_timeout(Duration::from_millis(1500)),
    )
    .await;
    let first = lab.value("counter", json!({})).await;
    let result = lab.call("escape", json!({"attempt": "loop"})).await;
    assert_eq!(
        result.code(),
        Some(capability_types::ErrorCode::Timeout),
        "{result:?}"
    );
    // The looping worker is gone (killed when the call was dropped), not left spinning.
    let started = lab.capsule.workers_started();
    let again = lab
        .call(
            "escape",
            json!({"attempt": "scoped_read", "path": "notes.md"}),
        )
        .await;
    assert!(json_of(&again).contains("# notes"), "{again:?}");
    assert_eq!(lab.capsule.workers_started(), started + 1, "a fresh worker");
    // Other tools' warm workers are untouched.
    let second = lab.value("counter", json!({})).await;
    assert_eq!(second["pid"], first["pid"]);
    assert_eq!(second["count"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warm_workers_are_reused_per_tool_and_personality_only() {
    let lab = lab_default().await;
    let first = lab.value("counter", json!({})).await;
    let second = lab.value("counter", json!({})).await;
    assert_eq!(first["pid"], second["pid"], "the warm worker is reused");
    assert_eq!(
        (first["count"].as_u64(), second["count"].as_u64()),
        (Some(1), Some(2))
    );
    let key = IsolationKey {
        tool: "counter".into(),
        policy: lab.policy.generation(),
    };
    assert_eq!(lab.capsule.idle_workers(&key), 1);

    // Another personality never sees that worker's memory.
    let other = Arc::new(policy(&lab.root, lab.allowed_port));
    let ctx = ExecutionContext::new("capsule-e2e", other, lab.root.join("data"));
    let result = lab
        .registry
        .execute(ToolCall::new("x", "counter", json!({})), &ctx)
        .await
        .result;
    let ToolResult::Ok(fresh) = result else {
        panic!("{result:?}")
    };
    assert_ne!(fresh["pid"], first["pid"]);
    assert_eq!(fresh["count"], 1);
    // Nor does another tool: echo has its own worker.
    let echo = lab.value("echo", json!({})).await;
    assert_ne!(echo["pid"], first["pid"]);
    // And the worker is not the host.
    assert_ne!(first["pid"], json!(std::process::id()));
}

/// Kills `pid` (a worker) and waits until the kernel shows it dead: gone, or a zombie its host
/// has not reaped yet.
fn kill_and_wait(pid: u64) {
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success(), "kill {pid}: {killed}");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => return,
            // The state follows the command's closing parenthesis.
            Ok(stat)
                if stat
                    .rsplit_once(") ")
                    .is_some_and(|(_, rest)| rest.starts_with('Z')) =>
            {
                return;
            }
            Ok(_) => {}
        }
        assert!(std::time::Instant::now() < deadline, "{pid} still alive");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Waits until `pid` is gone from the process table: dead and reaped by its host.
async fn reaped(pid: u64) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while std::path::Path::new(&format!("/proc/{pid}")).exists() {
        if std::time::Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    true
}

// guarantee: G-CAP-02
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_worker_killed_while_idle_is_replaced_and_the_call_runs() {
    // An idle worker can die from outside (the OOM killer, an administrator): the next call
    // must run on a fresh worker, not fail, and the dead one is not a failure of the tool
    // (more deaths than the restart budget allows, and every call still runs).
    let lab = lab_with(
        config().restart_budget(2, Duration::from_secs(60)),
        RegistryConfig::default(),
    )
    .await;
    let key = IsolationKey {
        tool: "echo".into(),
        policy: lab.policy.generation(),
    };
    let mut pid = lab.value("echo", json!({"n": 0})).await["pid"].clone();
    for n in 1..=4 {
        let started = lab.capsule.workers_started();
        kill_and_wait(pid.as_u64().unwrap());
        // Long enough to ride in the frame's blob: the call's arguments come back from the
        // dead worker's channel whole, for the fresh one.
        let args = json!({"n": n, "text": "é".repeat(200 * n)});
        let value = lab.value("echo", args.clone()).await;
        assert_eq!(value["args"], args, "the call ran whole");
        assert_ne!(value["pid"], pid, "on a fresh worker");
        assert_eq!(
            lab.capsule.workers_started(),
            started + 1,
            "one worker started"
        );
        assert_eq!(lab.capsule.idle_workers(&key), 1, "the fresh one kept warm");
        // The dead worker is not left behind as a zombie.
        let dead = pid.as_u64().unwrap();
        assert!(reaped(dead).await, "worker {dead} was never reaped");
        pid = value["pid"].clone();
    }
}

// guarantee: G-CAP-07
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_worker_sees_each_calls_own_identity() {
    // The host sends a call's session, directory and scoped objects only when they change
    // (docs/isolation-model.md, "The warm path"); every call must still see its own.
    let lab = lab_default().await;
    let one = ExecutionContext::new("one", Arc::clone(&lab.policy), lab.root.join("data"));
    let moved = ExecutionContext::new("one", Arc::clone(&lab.policy), lab.root.join("out"));
    let two = ExecutionContext::new("two", Arc::clone(&lab.policy), lab.root.join("out"));
    let mut pids: std::collections::BTreeMap<String, Value> = Default::default();
    for (i, ctx) in [&one, &one, &moved, &two, &one, &two, &moved]
        .into_iter()
        .enumerate()
    {
        let result = lab
            .registry
            .execute(
                ToolCall::new(format!("c{i}"), "whoami", json!({"i": i})),
                ctx,
            )
            .await
            .result;
        let ToolResult::Ok(seen) = result else {
            panic!("call {i}: {result:?}")
        };
        assert_eq!(seen["call_id"], json!(format!("c{i}")), "{seen}");
        assert_eq!(seen["session"], json!(&*ctx.session_id), "call {i}: {seen}");
        assert_eq!(
            seen["dir"],
            json!(ctx.working_dir.display().to_string()),
            "call {i}: {seen}"
        );
        assert_eq!(seen["personality"], json!("capsule"), "call {i}: {seen}");
        assert_eq!(seen["args"], json!({"i": i}));
        // One warm worker served each session, whatever its directory.
        let pid = pids
            .entry(ctx.session_id.to_string())
            .or_insert_with(|| seen["pid"].clone());
        assert_eq!(*pid, seen["pid"], "call {i}");
    }
    assert_ne!(pids["one"], pids["two"], "a worker serves one session");
}

/// The lab's `counter` called in `session`: its count and the worker's process id.
async fn counted(lab: &Lab, session: &str, i: usize) -> (u64, u64) {
    let ctx = ExecutionContext::new(session, Arc::clone(&lab.policy), lab.root.join("data"));
    let call = ToolCall::new(format!("n{i}"), "counter", json!({}));
    match lab.registry.execute(call, &ctx).await.result {
        ToolResult::Ok(seen) => (
            seen["count"].as_u64().unwrap(),
            seen["pid"].as_u64().unwrap(),
        ),
        other => panic!("{other:?}"),
    }
}

// guarantee: G-CAP-07
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_tool_keeps_in_memory_reaches_no_other_session() {
    // A warm worker keeps the tool's memory between calls (a cache, a count, what it was told):
    // calls of one session share it, another session's never do, running at the same time or
    // after (docs/isolation-model.md, "The warm path").
    let lab = lab_default().await;
    let (first, a_pid) = counted(&lab, "a", 0).await;
    let (second, again) = counted(&lab, "a", 1).await;
    assert_eq!(
        (first, second),
        (1, 2),
        "one session's calls share its worker"
    );
    assert_eq!(a_pid, again);
    let (b_first, b_pid) = counted(&lab, "b", 2).await;
    assert_eq!(
        b_first, 1,
        "session b starts from nothing, not from a's count"
    );
    assert_ne!(a_pid, b_pid);
    // And a's worker is still a's: its count goes on where a left it.
    let (third, a_again) = counted(&lab, "a", 3).await;
    assert_eq!((third, a_again), (3, a_pid));
    // Two idle workers of the tool now, one for each session.
    let key = IsolationKey {
        tool: "counter".into(),
        policy: lab.policy.generation(),
    };
    assert_eq!(lab.capsule.idle_workers(&key), 2);
}

// guarantee: G-CAP-08
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_warm_workers_end_with_the_session() {
    // A server whose sessions come and go (HTTP clients, the stateless mode's requests) must
    // not keep their workers as processes once no call of theirs can come again.
    let lab = lab_default().await;
    let (_, a_pid) = counted(&lab, "a", 0).await;
    let (_, b_pid) = counted(&lab, "b", 1).await;
    assert_eq!(lab.capsule.idle_workers_total(), 2);
    lab.registry.end_session("a");
    assert!(reaped(a_pid).await, "session a's worker ended with it");
    assert_eq!(lab.capsule.idle_workers_total(), 1);
    // b's worker is untouched: b's next call is served by it, its count going on.
    assert_eq!(counted(&lab, "b", 2).await, (2, b_pid));
    assert_eq!(lab.capsule.workers_started(), 2);
    // Ending a session that has no worker, or one already ended, changes nothing.
    lab.registry.end_session("a");
    lab.registry.end_session("never-seen");
    assert_eq!(lab.capsule.idle_workers_total(), 1);
    // A later call under the ended id is served afresh, by a worker of its own.
    let (count, again) = counted(&lab, "a", 3).await;
    assert_eq!(count, 1);
    assert_ne!(again, a_pid);
    // A call still running when its session is said to end keeps its worker to the end.
    let slow = lab.call("escape", json!({"attempt": "nap", "ms": 400}));
    let ending = async {
        tokio::time::sleep(Duration::from_millis(150)).await;
        lab.registry.end_session("capsule-e2e");
    };
    let (result, ()) = tokio::join!(slow, ending);
    let ToolResult::Ok(napped) = result else {
        panic!("{result:?}")
    };
    assert_eq!(napped["napped"], 400);
}

/// Waits until the lab's capsule has started `started` workers and keeps `idle` idle.
async fn settled(lab: &Lab, started: u64, idle: usize) {
    for _ in 0..500 {
        if lab.capsule.workers_started() == started && lab.capsule.idle_workers_total() == idle {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!(
        "{} started and {} idle, not {started} and {idle}",
        lab.capsule.workers_started(),
        lab.capsule.idle_workers_total()
    );
}

// guarantee: G-CAP-09
// On the current thread: a worker started ahead is started by a task that runs only when the
// test awaits, so what a call took can be told from the count of starts at its return.
#[tokio::test]
async fn a_new_sessions_first_call_takes_a_worker_started_ahead_that_served_nobody() {
    let lab = lab_with(config().spare_workers(1), RegistryConfig::default()).await;
    // Nothing is started ahead of a tool's first call; then one is.
    assert_eq!(lab.capsule.workers_started(), 0);
    let (count, a_pid) = counted(&lab, "a", 0).await;
    assert_eq!((count, lab.capsule.workers_started()), (1, 1));
    settled(&lab, 2, 2).await;
    // a's next call goes to a's own worker, not to the one started ahead.
    assert_eq!(counted(&lab, "a", 1).await, (2, a_pid));
    assert_eq!(lab.capsule.workers_started(), 2);
    // b's first call takes the one started ahead: no start at the call (the count is still 2
    // at its return), and the tool's memory there is fresh (it served nobody).
    let (count, b_pid) = counted(&lab, "b", 2).await;
    assert_eq!((count, lab.capsule.workers_started()), (1, 2));
    assert_ne!(b_pid, a_pid);
    // Another is started ahead for the next session.
    settled(&lab, 3, 3).await;
    // Ending b ends b's worker, not the one started ahead, nor a's.
    lab.registry.end_session("b");
    assert!(reaped(b_pid).await, "b's worker ended with b");
    assert_eq!(lab.capsule.idle_workers_total(), 2);
    assert_eq!(counted(&lab, "a", 3).await, (3, a_pid));
    // A tool that was never called has none started ahead.
    let echo = IsolationKey {
        tool: "echo".into(),
        policy: lab.policy.generation(),
    };
    assert_eq!(lab.capsule.idle_workers(&echo), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_restart_budget_stops_a_crash_loop() {
    let lab = lab_with(
        config().restart_budget(2, Duration::from_secs(600)),
        RegistryConfig::default(),
    )
    .await;
    for _ in 0..2 {
        let result = lab.call("escape", json!({"attempt": "exit"})).await;
        assert!(
            json_of(&result).contains("exited with status 7"),
            "{result:?}"
        );
    }
    let started = lab.capsule.workers_started();
    let refused = lab
        .call(
            "escape",
            json!({"attempt": "fs_read", "parts": ["etc", "hostname"]}),
        )
        .await;
    assert_eq!(
        json_of(&refused),
        r#"{"ok":false,"code":"not_available","error":"the capsule of tool escape failed 2 times within 600s; it is not restarted until that window has passed"}"#
    );
    assert_eq!(
        lab.capsule.workers_started(),
        started,
        "no worker was started"
    );
    // Other tools are not affected.
    lab.assert_alive().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kernel_that_cannot_confine_fails_closed() {
    let lab = lab_with(
        config().support(Support::unsupported("forced by the test")),
        RegistryConfig::default(),
    )
    .await;
    let result = lab.call("echo", json!({})).await;
    assert_eq!(
        json_of(&result),
        r#"{"ok":false,"code":"not_available","error":"tool echo runs in a capsule, and this kernel cannot confine one: forced by the test"}"#
    );
    assert_eq!(lab.capsule.workers_started(), 0, "nothing ran unconfined");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_or_foreign_worker_binary_is_not_available() {
    for program in ["/nonexistent/worker", "/bin/true"] {
        let lab = lab_with(CapsuleConfig::new(program), RegistryConfig::default()).await;
        let result = lab.call("echo", json!({})).await;
        assert_eq!(
            result.code(),
            Some(capability_types::ErrorCode::NotAvailable),
            "{program}: {result:?}"
        );
        assert!(
            json_of(&result).contains("the capsule worker for tool echo cannot start"),
            "{program}: {result:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_selected_tools_run_in_the_capsule() {
    let capsule = Arc::new(Capsule::new(config()));
    let mut registry = DefaultToolRegistry::new(Some(backends()))
        .with_isolation(capsule.clone(), IsolationSelection::tools(["counter"]));
    for tool in lab::lab_tools() {
        registry.register_arc(tool).unwrap();
    }
    let ctx = ExecutionContext::new("s", Arc::new(CompiledPolicy::none(None)), "/");
    let echo = registry
        .execute(ToolCall::new("1", "echo", json!({})), &ctx)
        .await
        .result;
    let counter = registry
        .execute(ToolCall::new("2", "counter", json!({})), &ctx)
        .await
        .result;
    let (ToolResult::Ok(echo), ToolResult::Ok(counter)) = (echo, counter) else {
        panic!("both succeed");
    };
    assert_eq!(
        echo["pid"],
        json!(std::process::id()),
        "echo ran in process"
    );
    assert_ne!(
        counter["pid"],
        json!(std::process::id()),
        "counter ran in a worker"
    );
    assert_eq!(capsule.workers_started(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_personality_can_put_all_its_tools_in_the_capsule() {
    let capsule = Arc::new(Capsule::new(config()));
    let mut registry = DefaultToolRegistry::new(Some(backends())).with_isolation(
        capsule.clone(),
        IsolationSelection::personalities(["untrusted"]),
    );
    for tool in lab::lab_tools() {
        registry.register_arc(tool).unwrap();
    }
    let under = |id: &str| {
        let policy =
            CompiledPolicy::load(&format!("id = \"{id}\"\n"), PolicyFormat::Toml, None).unwrap();
        ExecutionContext::new("s", Arc::new(policy), "/")
    };
    let pid_under = |id: &'static str| {
        let registry = &registry;
        let ctx = under(id);
        async move {
            let result = registry
                .execute(ToolCall::new("1", "echo", json!({})), &ctx)
                .await
                .result;
            result.value().unwrap()["pid"].clone()
        }
    };
    let host = json!(std::process::id());
    assert_ne!(
        pid_under("untrusted").await,
        host,
        "isolated under `untrusted`"
    );
    assert_eq!(
        pid_under("trusted").await,
        host,
        "in process under `trusted`"
    );
    assert_eq!(capsule.workers_started(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_says_ready_without_confining_itself_is_not_believed() {
    let lab = lab_default().await;
    let result = lab.call("liar", json!({})).await;
    assert_eq!(
        json_of(&result),
        r#"{"ok":false,"code":"not_available","error":"the capsule worker for tool liar cannot start: it said it was ready, but the kernel shows no seccomp filter and no_new_privs on it"}"#
    );
    lab.assert_alive().await;
}

#[test]
fn a_warm_worker_is_handed_only_to_calls_on_the_runtime_that_started_it() {
    // A worker's channel is registered with the runtime that started it. A call on another
    // runtime gets a worker of its own instead of waiting on a channel nobody drives.
    let first = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let second = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let lab = first.block_on(lab_with(
        config().spin(Duration::ZERO),
        RegistryConfig::default(),
    ));
    let echo = |rt: &tokio::runtime::Runtime| {
        rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(10), lab.value("echo", json!({"n": 1})))
                .await
                .expect("the call is answered, not left waiting")
        })
    };
    let host = json!(std::process::id());
    assert_ne!(echo(&first)["pid"], host);
    assert_eq!(lab.capsule.workers_started(), 1);
    assert_ne!(echo(&second)["pid"], host);
    assert_eq!(
        lab.capsule.workers_started(),
        2,
        "a worker of the second runtime's own"
    );
    // Each runtime's calls go on reusing the worker it started.
    echo(&first);
    echo(&second);
    assert_eq!(lab.capsule.workers_started(), 2);
}

#[test]
fn a_worker_that_trickles_a_frame_is_ended_at_the_call_timeout() {
    // While the host polls the channel for an answer (docs/isolation-model.md, "The warm
    // path"), a worker that sends a frame one byte at a time must not keep it polling past the
    // polling time: on a current-thread runtime the call's timer only fires once the host's
    // task yields. The call ends at its timeout, the worker is gone, the host goes on.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let lab = rt.block_on(lab_with(
        config(),
        RegistryConfig::default().call_timeout(Duration::from_millis(1000)),
    ));
    let started = std::time::Instant::now();
    let result = rt.block_on(lab.call("escape", json!({"attempt": "trickle"})));
    let took = started.elapsed();
    assert_eq!(
        result.code(),
        Some(capability_types::ErrorCode::Timeout),
        "{result:?}"
    );
    assert!(took < Duration::from_secs(4), "ended after {took:?}");
    assert_eq!(
        lab.capsule.idle_workers(&capability_core::IsolationKey {
            tool: "escape".to_owned(),
            policy: lab.policy.generation(),
        }),
        0,
        "the trickling worker is not kept"
    );
    rt.block_on(lab.assert_alive());
}

/// Approves every question it is asked, and counts them.
#[derive(Debug, Default)]
struct Approves(AtomicUsize);

#[capability_types::async_trait]
impl ApprovalHandler for Approves {
    async fn approve(&self, _: &ApprovalRequest) -> Result<bool, String> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(true)
    }
}

// guarantee: G-REG-11
#[tokio::test]
async fn an_approved_write_is_never_lent_to_a_later_call_in_process_or_in_the_capsule() {
    // A current-thread runtime, one context for every call: a call runs in the caller's task and
    // reuses its tool's spare context (docs/decisions.md, "The per-call path"). A write approved
    // after an escalation is its call's alone: a later call of the same tool that writes the
    // same file without naming it (so nothing is asked) is refused, and the file is not there.
    for capsule in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("out/releases")).unwrap();
        let policy = CompiledPolicy::load(
            &format!(
                "id = \"releases\"\n[fs_reach]\nwrite = [\"{r}/out\"]\n\
                 [escalate]\nwrite_paths = [\"{r}/out/releases\"]\n",
                r = root.display()
            ),
            PolicyFormat::Toml,
            Some(Path::new("/home/capsule")),
        )
        .unwrap();
        let approver = Arc::new(Approves::default());
        let mut registry =
            DefaultToolRegistry::new(Some(backends())).with_approval_handler(approver.clone());
        let isolation = Arc::new(Capsule::new(config()));
        if capsule {
            registry = registry.with_isolation(isolation.clone(), IsolationSelection::All);
        }
        for tool in lab::lab_tools() {
            registry.register_arc(tool).unwrap();
        }
        let ctx = ExecutionContext::new("approvals", Arc::new(policy), root.join("out"));
        let released = root.join("out/releases/a.txt");
        let approved = || {
            ToolCall::new(
                "approved",
                "proxy",
                json!({"op": "write", "path": "releases/a.txt", "content": "approved"}),
            )
        };
        let sneak = || ToolCall::new("sneak", "proxy", json!({"op": "sneak_write"}));
        let refused = format!(
            "PATH_NOT_REACHABLE: write to {} requires approval (escalate) and this call was not approved for it",
            released.display()
        );
        for round in 0..2 {
            // One call a batch, then both in one batch run on this thread.
            let results = if round == 0 {
                let first = registry.execute(approved(), &ctx).await;
                assert!(first.result.is_ok(), "capsule {capsule}: {first:?}");
                assert_eq!(std::fs::read_to_string(&released).unwrap(), "approved");
                std::fs::remove_file(&released).unwrap();
                vec![registry.execute(sneak(), &ctx).await]
            } else {
                std::fs::remove_file(&released).ok();
                let both = registry
                    .execute_parallel(vec![approved(), sneak()], &ctx)
                    .await;
                assert!(both[0].result.is_ok(), "capsule {capsule}: {both:?}");
                both[1..].to_vec()
            };
            assert_eq!(
                results[0].result.error_message(),
                Some(refused.as_str()),
                "capsule {capsule}, round {round}"
            );
            // The forbidden side: the file the sneak aimed at holds no sneaked bytes.
            let left = std::fs::read_to_string(&released).ok();
            assert_ne!(
                left.as_deref(),
                Some("sneaked"),
                "capsule {capsule}, round {round}"
            );
            if round == 0 {
                assert!(!released.exists(), "capsule {capsule}");
            }
        }
        assert_eq!(
            approver.0.load(Ordering::SeqCst),
            2,
            "capsule {capsule}: one question per approved call"
        );
        // In the capsule, the calls really ran in a confined worker.
        assert_eq!(isolation.workers_started() > 0, capsule);
    }
}

/// A loopback server that holds every request for `hold` before it answers, and counts the
/// most requests it held at once.
async fn holding_server(hold: Duration) -> (u16, Arc<AtomicUsize>) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let now = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&most);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let (now, most) = (Arc::clone(&now), Arc::clone(&most));
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let _ = stream.read(&mut buf).await;
                let at_once = now.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(at_once, Ordering::SeqCst);
                tokio::time::sleep(hold).await;
                now.fetch_sub(1, Ordering::SeqCst);
                let _ = stream
                    .write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok",
                    )
                    .await;
            });
        }
    });
    (port, seen)
}

// guarantee: G-CAP-05
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capsule_call_has_a_bounded_number_of_requests_in_flight_at_the_host() {
    // The host performs what a worker asks of its scoped objects. A tool (or a worker that has
    // been taken over) can ask for as much at once as it likes: without a bound, the host would
    // hold that many fetches, reads or children for one call.
    let (port, most) = holding_server(Duration::from_millis(300)).await;
    let mut lab = lab_default().await;
    lab.policy = Arc::new(policy(&lab.root, port));
    let flood = json!({"op": "flood", "n": 150, "url": format!("http://127.0.0.1:{port}/")});

    // In process, the tool's 150 fetches are all in flight at once: the test can see it.
    let ctx = lab.ctx();
    let result = in_process()
        .execute(ToolCall::new("1", "proxy", flood.clone()), &ctx)
        .await
        .result;
    assert_eq!(json_of(&result), r#"{"ok":true,"value":{"ok":150}}"#);
    assert!(most.load(Ordering::SeqCst) > 100, "{most:?} in process");

    // In the capsule, every one is performed, no more than the bound at a time.
    most.store(0, Ordering::SeqCst);
    let result = lab.call("proxy", flood).await;
    assert_eq!(json_of(&result), r#"{"ok":true,"value":{"ok":150}}"#);
    let at_once = most.load(Ordering::SeqCst);
    assert!(
        at_once <= capability_capsule::MAX_REQUESTS_IN_FLIGHT,
        "{at_once} requests of one capsule call performed at once"
    );
    lab.assert_alive().await;
}

// guarantee: G-CAP-05
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_workers_are_bounded_across_personalities() {
    // Workers are kept warm per tool and compiled personality. A host that compiles a
    // personality per session (or narrows one per task) makes a new one each time, and its
    // workers of the old ones are never asked for again: they must not pile up as processes.
    let mut lab = lab_with(config().max_idle_workers(3), RegistryConfig::default()).await;
    for i in 0..8 {
        lab.policy = Arc::new(policy(&lab.root, lab.allowed_port));
        let value = lab.value("echo", json!({"i": i})).await;
        assert_eq!(value["args"]["i"], i);
    }
    assert_eq!(
        lab.capsule.workers_started(),
        8,
        "one worker per personality"
    );
    assert_eq!(
        lab.capsule.idle_workers_total(),
        3,
        "the three most recent kept"
    );
    // The most recent personality's worker is one of those kept: its next call is warm.
    lab.value("echo", json!({})).await;
    assert_eq!(lab.capsule.workers_started(), 8);
    assert_eq!(CapsuleConfig::new("x").max_idle_workers, 16);
}
