//! The capsule's cost: a warm call (a worker already running for the tool) and a cold start (a
//! new worker per call: spawn, self-confinement, handshake), each against the same call in
//! process, through the same registry, in the same run. Also one scoped file read made from a
//! warm capsule (a round trip over the worker's channel) against the same read in process, and
//! the floors of a process round trip on the machine, with both sides asleep (a pipe) and with
//! both polling (a capsule channel). Where a warm call's time goes: the worker driven by a host
//! that only encodes, polls and decodes (`worker_round_trip`), against the polling floor. On a
//! current-thread runtime, as the dispatch benchmarks; the warm call and the in-process call
//! also from a multi-thread runtime (the `toolcap` binary's). Then issue 19's
//! capsule ratios, and the worker against the floor, timed paired (`support/paired.rs`) into
//! `target/criterion/capsule-paired.json`, which `cargo xtask bench` prints.
#![allow(
    missing_docs,
    clippy::disallowed_methods,
    unsafe_code,
    reason = "the benchmark writes its fixture file, starts `cat` and forks an echo for the round-trip floors"
)]

use std::hint::black_box;
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use capability_capsule::ring::{BlockingEnd, WorkerDescriptors};
use capability_capsule::wire::{CallContext, FromWorker, ToWorker, decode, encode};

use capability_capsule::{Capsule, CapsuleConfig};
use capability_core::PolicyFormat;
use capability_core::{
    CapabilityBackends, CompiledPolicy, DefaultToolRegistry, ExecutionContext, IsolationSelection,
    ToolCall,
};
use capability_fs::{FsBackend, FsConfig};
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;

#[path = "support/paired.rs"]
mod paired;

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

/// A lab worker of `tool` started as the capsule host starts one (its channel on descriptors 3
/// and 4, its settings as an argument, an empty environment), polling for `spin`, and the
/// host's end of its channel, after its `ready`.
fn raw_worker(tool: &str, spin: Duration) -> (std::process::Child, BlockingEnd) {
    let (mut host, worker) = BlockingEnd::for_worker().unwrap();
    let spin_micros = u64::try_from(spin.as_micros()).unwrap_or(u64::MAX);
    let mut command = lab::worker_command(
        env!("CARGO_BIN_EXE_capsule-lab"),
        tool,
        1 << 20,
        spin_micros,
        worker,
    );
    let child = command.spawn().unwrap();
    drop(command);
    let ready = read_frame_polling(&mut host);
    assert!(!ready.is_empty());
    (child, host)
}

/// One frame's body, read by polling the channel without sleeping.
fn read_frame_polling(channel: &mut BlockingEnd) -> Vec<u8> {
    let mut got = Vec::with_capacity(8192);
    let mut buf = [0u8; 8192];
    loop {
        match channel.read_now(&mut buf).unwrap() {
            0 => std::hint::spin_loop(),
            n => got.extend_from_slice(&buf[..n]),
        }
        if got.len() >= 4 {
            let len = u32::from_be_bytes([got[0], got[1], got[2], got[3]]) as usize;
            if got.len() >= 4 + len {
                assert_eq!(got.len(), 4 + len, "one frame at a time");
                return got.split_off(4);
            }
        }
    }
}

/// A forked child that echoes what it reads on the worker's end of a capsule channel until the
/// host's end closes, polling it for up to 50 µs after each echo before it sleeps on it, as
/// host and worker do: the floor of a round trip between two processes that both poll.
fn polling_echo(worker: WorkerDescriptors, host: &BlockingEnd) -> libc::pid_t {
    let mut end = BlockingEnd::worker_end(worker).unwrap();
    // SAFETY: the child only copies in and out of the shared memory and calls `poll`, `recv`,
    // `send`, `clock_gettime` and `_exit` (async-signal-safe; nothing on these paths allocates
    // but an error, which ends it), so forking this process, whatever its threads, is sound.
    unsafe {
        let pid = libc::fork();
        assert!(pid >= 0, "fork");
        if pid == 0 {
            // The host's socket, inherited, would keep the channel open for ever.
            libc::close(host.as_fd().as_raw_fd());
            let mut buf = [0u8; 4096];
            let mut idle_since = Instant::now();
            loop {
                let n = match end.read_now(&mut buf) {
                    Ok(0) if idle_since.elapsed() > Duration::from_micros(50) => {
                        // Sleeps until the host writes (or goes).
                        match end.read(&mut buf) {
                            Ok(0) | Err(_) => libc::_exit(0),
                            Ok(n) => n,
                        }
                    }
                    Ok(0) => {
                        std::hint::spin_loop();
                        continue;
                    }
                    Ok(n) => n,
                    Err(_) => libc::_exit(1),
                };
                if end.write_all(&buf[..n]).is_err() {
                    libc::_exit(1);
                }
                idle_since = Instant::now();
            }
        }
        pid
    }
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
    // The floor of a round trip when both sides poll (as host and worker do while a call is in
    // flight): 64 bytes to a forked echo and back over a capsule channel, neither side sleeping.
    let (mut ours, theirs) = BlockingEnd::for_worker().unwrap();
    let echo_pid = polling_echo(theirs, &ours);
    let mut polling_round_trip = |n: u64| {
        for _ in 0..n {
            let mut buf = [7u8; 64];
            ours.write_all(&buf).unwrap();
            let mut got = 0;
            while got < buf.len() {
                match ours.read_now(&mut buf[got..]).unwrap() {
                    0 => std::hint::spin_loop(),
                    n => got += n,
                }
            }
        }
    };
    group.bench_function("polling_round_trip", |b| b.iter(|| polling_round_trip(1)));
    // A warm worker driven by a host that does nothing but encode the call, poll for the
    // answer and decode it: the worker's own share of a warm call, beside the floor above.
    let (mut child, mut channel) = raw_worker("echo", Duration::from_micros(50));
    let mut context = Some(CallContext {
        session_id: "bench".into(),
        personality_id: Some("bench".into()),
        tool: "echo".into(),
        working_dir: root.clone(),
        fetch: false,
        fs: false,
        secrets: None,
        process: false,
        kv: false,
        attachments: false,
    });
    let mut seq = 0u64;
    let mut worker_round_trip = |n: u64| {
        for _ in 0..n {
            seq += 1;
            let call = ToWorker::Call {
                seq,
                call_id: "1".into(),
                args: json!({"n": 1}),
                context: context.take(),
                lifted: Vec::new(),
            };
            let frame = encode(&call, &[], 1 << 20).unwrap();
            channel.write_all(&frame).unwrap();
            let body = read_frame_polling(&mut channel);
            let (done, _) = decode::<FromWorker>(Bytes::from(body)).unwrap();
            black_box(done);
        }
    };
    group.bench_function("worker_round_trip", |b| b.iter(|| worker_round_trip(1)));
    fn calls<'a>(
        run: &'a impl Fn(&DefaultToolRegistry, ToolCall),
        registry: &'a DefaultToolRegistry,
        call: fn() -> ToolCall,
    ) -> impl FnMut(u64) + 'a {
        move |n| (0..n).for_each(|_| run(registry, call()))
    }
    let mut in_process_call = calls(&run, &in_process, echo);
    let mut warm_call = calls(&run, &warm, echo);
    group.bench_function("in_process_call", |b| b.iter(|| in_process_call(1)));
    group.bench_function("warm_call", |b| b.iter(|| warm_call(1)));
    // The same warm call from a multi-thread runtime (as the `toolcap` binary runs one): its
    // idle workers sleep in `epoll_wait` on the channel, and each frame wakes one.
    let mt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // Its baseline: the in-process call from the same runtime.
    group.bench_function("in_process_call_multi_thread", |b| {
        b.iter(|| {
            let result = mt.block_on(in_process.execute(echo(), &ctx));
            assert!(result.result.is_ok(), "{:?}", result.result);
        })
    });
    // Its own capsule: a worker's channel belongs to the runtime that started it.
    let warm_mt = registry(Some(lab.clone()));
    group.bench_function("warm_call_multi_thread", |b| {
        b.iter(|| {
            let result = mt.block_on(warm_mt.execute(echo(), &ctx));
            assert!(result.result.is_ok(), "{:?}", result.result);
        })
    });
    let mut in_process_scoped_read = calls(&run, &in_process, read);
    let mut warm_scoped_read = calls(&run, &warm, read);
    group.bench_function("in_process_scoped_read", |b| {
        b.iter(|| in_process_scoped_read(1))
    });
    group.bench_function("warm_scoped_read", |b| b.iter(|| warm_scoped_read(1)));
    group.sample_size(20);
    group.bench_function("cold_start_call", |b| b.iter(|| run(&cold, echo())));
    group.finish();

    // Issue 19's capsule ratios, and the worker's share against the floor, timed paired.
    if paired::measuring() {
        paired::Rows::default()
            .pair(
                ("warm_call", "in_process_call"),
                (&mut warm_call, 1),
                (&mut in_process_call, 1),
            )
            .pair(
                ("warm_scoped_read", "in_process_scoped_read"),
                (&mut warm_scoped_read, 1),
                (&mut in_process_scoped_read, 1),
            )
            .pair(
                ("worker_round_trip", "polling_round_trip"),
                (&mut worker_round_trip, 1),
                (&mut polling_round_trip, 1),
            )
            .write("capsule-paired.json");
    }
    drop(channel);
    let _ = child.wait();
    drop(ours);
    // SAFETY: waits for the child forked above.
    unsafe { libc::waitpid(echo_pid, std::ptr::null_mut(), 0) };
}

criterion_group!(benches, capsule);
criterion_main!(benches);
