//! The capsule's cost: a warm call (a worker already running for the tool) and a cold start (a
//! new worker per call: spawn, self-confinement, handshake), each against the same call in
//! process, through the same registry, in the same run. Also one scoped file read made from a
//! warm capsule (a round trip over the worker's channel) against the same read in process, and
//! the floor of any process round trip on the machine. On a current-thread runtime, as the
//! dispatch benchmarks; the warm call also from a multi-thread runtime.
#![allow(
    missing_docs,
    clippy::disallowed_methods,
    reason = "the benchmark writes its fixture file and starts `cat` for the round-trip floor"
)]

use std::io::{Read, Write};
use std::path::Path;
use std::sync::Arc;

use capability_capsule::{Capsule, CapsuleConfig};
use capability_core::PolicyFormat;
use capability_core::{
    CapabilityBackends, CompiledPolicy, DefaultToolRegistry, ExecutionContext, IsolationSelection,
    ToolCall,
};
use capability_fs::{FsBackend, FsConfig};
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;

#[path = "../capsule_lab/tools.rs"]
#[allow(dead_code, reason = "the benchmark calls only some of the lab tools")]
mod lab;

fn registry(capsule: Option<CapsuleConfig>) -> DefaultToolRegistry {
    let backends = CapabilityBackends::new().with_fs(Arc::new(FsBackend::new(FsConfig::default())));
    let mut registry = DefaultToolRegistry::new(Some(backends));
    if let Some(config) = capsule {
        registry = registry.with_isolation(Arc::new(Capsule::new(config)), IsolationSelection::All);
    }
    for tool in lab::lab_tools() {
        registry.register_arc(tool).unwrap();
    }
    registry
}

fn capsule(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(root.join("notes.md"), "x".repeat(4096)).unwrap();
    let policy = CompiledPolicy::load(
        &format!(
            "id = \"bench\"\n[fs_reach]\nread = [\"{}\"]\n",
            root.display()
        ),
        PolicyFormat::Toml,
        Some(Path::new("/home/bench")),
    )
    .unwrap();
    let ctx = ExecutionContext::new("bench", Arc::new(policy), &root);
    let lab = CapsuleConfig::new(env!("CARGO_BIN_EXE_capsule-lab"));
    let in_process = registry(None);
    let warm = registry(Some(lab.clone()));
    let cold = registry(Some(lab.clone().warm_workers(0)));
    let echo = || ToolCall::new("1", "echo", json!({"n": 1}));
    let read = || {
        ToolCall::new(
            "1",
            "escape",
            json!({"attempt": "scoped_read", "path": "notes.md"}),
        )
    };
    let run = |registry: &DefaultToolRegistry, call: ToolCall| {
        let result = rt.block_on(registry.execute(call, &ctx));
        assert!(result.result.is_ok(), "{:?}", result.result);
    };

    let mut group = c.benchmark_group("capsule");
    // The floor of any round trip to another process on this machine: 64 bytes to `cat` and
    // back over pipes, each side sleeping in `read` until the other writes.
    let mut cat = std::process::Command::new("cat")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (mut to_cat, mut from_cat) = (cat.stdin.take().unwrap(), cat.stdout.take().unwrap());
    group.bench_function("process_round_trip", |b| {
        b.iter(|| {
            let mut buf = [7u8; 64];
            to_cat.write_all(&buf).unwrap();
            from_cat.read_exact(&mut buf).unwrap();
        })
    });
    drop(to_cat);
    let _ = cat.wait();
    group.bench_function("in_process_call", |b| b.iter(|| run(&in_process, echo())));
    group.bench_function("warm_call", |b| b.iter(|| run(&warm, echo())));
    // The same warm call from a multi-thread runtime (as the `toolcap` binary runs one): its
    // idle workers sleep in `epoll_wait` on the channel, and each frame wakes one.
    let mt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // Its own capsule: a worker's channel belongs to the runtime that started it.
    let warm_mt = registry(Some(lab.clone()));
    group.bench_function("warm_call_multi_thread", |b| {
        b.iter(|| {
            let result = mt.block_on(warm_mt.execute(echo(), &ctx));
            assert!(result.result.is_ok(), "{:?}", result.result);
        })
    });
    group.bench_function("in_process_scoped_read", |b| {
        b.iter(|| run(&in_process, read()))
    });
    group.bench_function("warm_scoped_read", |b| b.iter(|| run(&warm, read())));
    group.sample_size(20);
    group.bench_function("cold_start_call", |b| b.iter(|| run(&cold, echo())));
    group.finish();
}

criterion_group!(benches, capsule);
criterion_main!(benches);
