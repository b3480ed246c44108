//! Fault injection: the host survives its tools (its own test binary: it counts the processes,
//! descriptors and threads of the whole test process). Calls that misbehave on purpose — panic, hang
//! past the deadline, return gigantic results, spawn children, and in the capsule also exit,
//! abort, segfault, exhaust memory, spin, write garbage frames, forge a compact result against
//! its rules, exit mid-frame, flood stderr, fork repeatedly and close their standard pipes
//! early — go through the registry in process mode and in the capsule. For each: the next call
//! is still served, the failing call gets a typed error naming the cause, nothing is left behind
//! (child processes, descriptors, scratch homes; threads stay bounded), and the audit log
//! records every call exactly once.
//!
//! 120 calls per mode in `cargo test`; `TOOLCAP_FAULT_CALLS` (1,000 in `cargo xtask soak`).
#![allow(
    clippy::disallowed_methods,
    reason = "the suite counts the host's descriptors, children and scratch homes through /proc and the file system"
)]

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use capability_capsule::{Capsule, CapsuleConfig};
use capability_core::PolicyFormat;
use capability_core::{
    AuditKind, CapabilityBackends, CompiledPolicy, DefaultToolRegistry, ExecutionContext,
    IsolationSelection, MemoryAuditSink, RegistryConfig, ToolCall,
};
use capability_fetch::{FetchBackend, FetchConfig};
use capability_fs::{FsBackend, FsConfig};
use capability_kv::{KvBackend, KvLimits, MemoryStore};
use capability_process::{ProcessBackend, ProcessConfig};
use capability_secrets::{MemorySecrets, SecretsResolverFactory};
use capability_types::{ErrorCode, ToolResult};
use serde_json::{Value, json};

#[path = "capsule_lab/tools.rs"]
mod lab;

const LAB: &str = env!("CARGO_BIN_EXE_capsule-lab");

fn backends() -> CapabilityBackends {
    CapabilityBackends::new()
        .with_fs(Arc::new(FsBackend::new(FsConfig::default())))
        .with_fetch(Arc::new(FetchBackend::new(FetchConfig::default()).unwrap()))
        .with_secrets(Arc::new(SecretsResolverFactory::new(vec![Arc::new(
            MemorySecrets::new().with("LAB_TOKEN", "tok-1234"),
        )])))
        .with_kv(Arc::new(KvBackend::new(
            MemoryStore::new(),
            KvLimits::default(),
        )))
}

fn policy(root: &Path) -> CompiledPolicy {
    CompiledPolicy::load(
        &format!(
            "id = \"faults\"\n[fs_reach]\nread = [\"{r}/data\"]\nwrite = [\"{r}/out\"]\n[safety.process]\nallow = [\"echo\"]\n",
            r = root.display()
        ),
        PolicyFormat::Toml,
        Some(Path::new("/home/faults")),
    )
    .unwrap()
}

fn calls() -> usize {
    std::env::var("TOOLCAP_FAULT_CALLS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(120)
}

/// What the host holds: open descriptors, live child processes, threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Held {
    fds: usize,
    children: usize,
    threads: usize,
}

fn held() -> Held {
    let me = std::process::id().to_string();
    let count = |dir: &str| std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0);
    let children = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::read_to_string(e.path().join("stat")).is_ok_and(|stat| {
                let after = stat.rsplit(')').next().unwrap_or("");
                let mut fields = after.split_whitespace();
                let state = fields.next().unwrap_or("");
                let ppid = fields.next().unwrap_or("");
                ppid == me && state != "Z"
            })
        })
        .count();
    Held {
        fds: count("/proc/self/fd"),
        children,
        threads: count("/proc/self/task"),
    }
}

/// What each open descriptor is, for a failure message.
fn fd_targets() -> Vec<String> {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .map(|e| {
            let target = std::fs::read_link(e.path()).unwrap_or_default();
            format!("{}={}", e.file_name().to_string_lossy(), target.display())
        })
        .collect()
}

/// Scratch homes left under `root`: each call's `HOME`, removed when the call ends, inside its
/// tool's scratch parent (one per tool, kept by design: a prepared sandbox grants it; what it
/// hands out is the directory beside its lock, `ScratchDir::INNER`).
fn homes_left(root: &Path) -> usize {
    std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|parent| parent.path().is_dir())
        .map(|parent| {
            std::fs::read_dir(parent.path().join(capability_sandbox::ScratchDir::INNER))
                .into_iter()
                .flatten()
                .flatten()
                .count()
        })
        .sum()
}

/// Everything under `root`, for a failure message.
fn list(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            out.push(entry.path().display().to_string());
            if entry.path().is_dir() {
                stack.push(entry.path());
            }
        }
    }
    out
}

/// The misbehaviours of a mode, each with the result code and a word its message must have.
fn faults(capsule: bool) -> Vec<(Value, Option<ErrorCode>, &'static str)> {
    let mut list = vec![
        (
            json!({"attempt": "panic"}),
            Some(ErrorCode::ExecutionFailed),
            "panic",
        ),
        (
            json!({"attempt": "sleep"}),
            Some(ErrorCode::Timeout),
            "timed out",
        ),
        (json!({"attempt": "big", "mib": 4}), None, ""),
    ];
    if capsule {
        list.extend([
            (
                json!({"attempt": "exit"}),
                Some(ErrorCode::ExecutionFailed),
                "status 7",
            ),
            (
                json!({"attempt": "abort"}),
                Some(ErrorCode::ExecutionFailed),
                "SIGABRT",
            ),
            (
                json!({"attempt": "segfault"}),
                Some(ErrorCode::ExecutionFailed),
                "SIGSEGV",
            ),
            (
                json!({"attempt": "alloc_bomb"}),
                Some(ErrorCode::ExecutionFailed),
                "",
            ),
            (
                json!({"attempt": "garbage"}),
                Some(ErrorCode::ExecutionFailed),
                "frame",
            ),
            (
                // A compact result against its rules (a key twice in one object), from a
                // fresh worker whose first call is number 1: docs/isolation-model.md, "The
                // wire format".
                json!({"attempt": "forged_done", "header_hex": concat!(
                    "02", "0000000000000001", "00",
                    "08", "00000002", "00000001", "6b", "02", "00000001", "6b", "01",
                    "00000000",
                )}),
                Some(ErrorCode::ExecutionFailed),
                "a key twice in one object",
            ),
            (
                json!({"attempt": "loop"}),
                Some(ErrorCode::Timeout),
                "timed out",
            ),
            (json!({"attempt": "fork_bomb"}), None, ""),
            (
                json!({"attempt": "cut_frame"}),
                Some(ErrorCode::ExecutionFailed),
                "",
            ),
            (json!({"attempt": "flood_stderr"}), None, ""),
            (json!({"attempt": "close_pipes"}), None, ""),
        ]);
    }
    list
}

#[allow(
    clippy::print_stderr,
    reason = "the suite reports what it held, for the soak run's log"
)]
async fn run_mode(capsule: bool) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    for sub in ["data", "out", "scratch"] {
        std::fs::create_dir_all(root.join(sub)).unwrap();
    }
    let audit = Arc::new(MemoryAuditSink::new());
    let backends = backends().with_process(Arc::new(ProcessBackend::new(
        ProcessConfig::from_process_env().scratch_root(root.join("scratch")),
    )));
    let mut registry = DefaultToolRegistry::new(Some(backends))
        .with_config(RegistryConfig::default().call_timeout(Duration::from_millis(2000)))
        .with_audit_sink(audit.clone());
    if capsule {
        // A fresh worker per call: nothing of one call may stay for the next.
        let config = CapsuleConfig::new(LAB)
            .address_space(Some(1 << 30))
            .warm_workers(0)
            .restart_budget(1_000_000, Duration::from_secs(1));
        registry = registry.with_isolation(Arc::new(Capsule::new(config)), IsolationSelection::All);
    }
    for tool in lab::lab_tools() {
        registry.register_arc(tool).unwrap();
    }
    let policy: Arc<CompiledPolicy> = Arc::new(policy(&root));
    let ctx = ExecutionContext::new("faults", policy, root.join("data"));

    // Warm up what stays by design: runtime threads, the blocking pool, the cached sandbox, the
    // signal driver a first timeout or child registers. Each kind of call twice, before
    // counting; what the run adds after that is a leak.
    let faults = faults(capsule);
    let mut warm = vec![ToolCall::new(
        "warm-spawn",
        "proxy",
        json!({"op": "spawn", "binary": "echo", "args": ["spawned"]}),
    )];
    for (i, (args, _, _)) in faults.iter().enumerate() {
        warm.push(ToolCall::new(format!("warm-{i}"), "escape", args.clone()));
    }
    let _ = registry.execute_parallel(warm.clone(), &ctx).await;
    let _ = registry.execute_parallel(warm, &ctx).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = held();

    let total = calls();
    let mut expected: HashMap<String, (Option<ErrorCode>, &'static str)> = HashMap::new();
    let mut batch = Vec::new();
    for i in 0..total {
        let id = format!("call-{i}");
        if i % 4 == 0 {
            // A child process of its own, through the spawner.
            batch.push(ToolCall::new(
                &id,
                "proxy",
                json!({"op": "spawn", "binary": "echo", "args": ["spawned"]}),
            ));
            expected.insert(id, (None, ""));
        } else if i % 2 == 0 {
            batch.push(ToolCall::new(&id, "echo", json!({"n": i})));
            expected.insert(id, (None, ""));
        } else {
            let (args, code, word) = faults[(i / 2) % faults.len()].clone();
            batch.push(ToolCall::new(&id, "escape", args));
            expected.insert(id, (code, word));
        }
    }
    // Batches of 16: misbehaving calls run beside well-behaved ones.
    let mut results = Vec::new();
    for chunk in batch.chunks(16) {
        results.extend(registry.execute_parallel(chunk.to_vec(), &ctx).await);
    }
    assert_eq!(results.len(), total);
    for r in &results {
        let (code, word) = expected[&r.call_id];
        match (&r.result, code) {
            (ToolResult::Ok(_), None) => {}
            // Running out of memory can also run out of time first, on a loaded machine.
            (other, Some(ErrorCode::ExecutionFailed))
                if word.is_empty() && other.code() == Some(ErrorCode::Timeout) => {}
            (other, Some(code)) if other.code() == Some(code) => {
                let text = serde_json::to_string(other).unwrap();
                assert!(
                    text.contains(word),
                    "capsule {capsule} {}: {text}",
                    r.call_id
                );
            }
            (other, _) => panic!(
                "capsule {capsule} {}: expected {code:?}, got {other:?}",
                r.call_id
            ),
        }
    }
    // The host goes on.
    let still = registry
        .execute(
            ToolCall::new("after", "echo", json!({"still": "here"})),
            &ctx,
        )
        .await;
    assert!(matches!(still.result, ToolResult::Ok(_)), "{still:?}");

    // Nothing left behind: give killed workers and children a moment to be reaped.
    let mut after = held();
    for _ in 0..100 {
        if after.children <= before.children && after.fds <= before.fds {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        after = held();
    }
    assert!(
        after.children <= before.children,
        "capsule {capsule}: children {before:?} -> {after:?}"
    );
    assert!(
        after.fds <= before.fds,
        "capsule {capsule}: descriptors {before:?} -> {after:?}: {:?}",
        fd_targets()
    );
    // Runtime and blocking-pool threads come and go; they must stay bounded.
    assert!(
        after.threads <= before.threads + 16,
        "capsule {capsule}: threads {before:?} -> {after:?}"
    );
    let mut left = homes_left(&root.join("scratch"));
    for _ in 0..200 {
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        left = homes_left(&root.join("scratch"));
    }
    assert_eq!(
        left,
        0,
        "capsule {capsule}: scratch homes left: {:?}",
        list(&root.join("scratch"))
    );

    // The audit log has every call exactly once: one end each, and at most one start.
    let events = audit.events();
    for id in expected.keys() {
        let of = |kind: AuditKind| {
            events
                .iter()
                .filter(|e| &e.call_id == id && e.event == kind)
                .count()
        };
        let ends = of(AuditKind::ToolCompleted)
            + of(AuditKind::ToolDenied)
            + of(AuditKind::ConstraintDenied);
        assert_eq!(
            ends, 1,
            "capsule {capsule}: {id} ended {ends} times in the audit log"
        );
        assert!(of(AuditKind::ToolCalled) <= 1, "capsule {capsule}: {id}");
    }
    eprintln!("faults: capsule {capsule}: {total} calls; held before {before:?}, after {after:?}");
}

// guarantee: G-REG-06, G-CAP-02
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_leave_nothing_behind() {
    // One after the other, in a test binary of their own: what the host holds is counted
    // process-wide, so nothing else may run beside them.
    run_mode(false).await;
    run_mode(true).await;
}
