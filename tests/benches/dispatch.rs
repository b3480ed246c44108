//! The per-call fast path (issue 19): what a call costs around its admission checks, measured
//! the way the issue states its targets, each against a baseline of the same run:
//!
//! - `dispatch/bare_five` — a no-op tool declaring all five categories, called directly with a
//!   context built ahead of time (the floor);
//! - `dispatch/single_five` — the same call through resolution, the guard and the scoped objects
//!   of the real backend factories (the in-memory key-value store), then `execute`;
//! - `dispatch/batch_1_five`, `batch_100_five_per_call`, `batch_10000_five_per_call` — through
//!   `DefaultToolRegistry::execute_parallel` on a current-thread runtime;
//! - `dispatch/bare_100_five_per_call`, `bare_10000_five_per_call`, `single_100_five_per_call`,
//!   `single_10000_five_per_call` — the bare and the single call over a batch built as
//!   `execute_parallel`'s are, run one after another: the same allocation pattern as a batch,
//!   without the registry (the bare one is what a batch's caller spends per call on building
//!   its calls and dropping its results, with no dispatch at all);
//! - `dispatch/bare_nothing`, `batch_1_nothing` — a tool that declares nothing;
//! - `dispatch/batch_10000_mt1_per_call`, `batch_10000_mt2_per_call` — a batch of 10,000 spawned
//!   onto a multi-thread runtime with one and with two workers, with a tool that does about
//!   10 µs of work of its own, so that the cores have something to share.
//!
//! A counting global allocator reports the allocations of one call on each path, printed after
//! the run and written to `target/criterion/dispatch-allocations.json`. Then the ratios of issue
//! 19's targets are measured once more, paired: subject and baseline alternate in 41 rounds of
//! about 10 ms a side, and the median of the rounds' ratios goes to
//! `target/criterion/dispatch-paired.json` (a few seconds). `cargo xtask bench` prints both.
#![allow(
    missing_docs,
    clippy::print_stdout,
    unsafe_code,
    clippy::unwrap_used,
    clippy::print_stderr,
    clippy::disallowed_methods,
    reason = "a benchmark with a counting global allocator (an unsafe impl) that writes its counts next to criterion's estimates"
)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::future::Future;
use std::hint::black_box;
use std::path::Path;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use capability_core::{
    CapabilityBackends, CompiledPolicy, DefaultToolRegistry, ExecutionContext, PolicyFormat,
    ResolutionCache, ToolCall,
};
use capability_fetch::{FetchBackend, FetchConfig};
use capability_fs::{FsBackend, FsConfig};
use capability_kv::{KvBackend, KvLimits, MemoryStore};
use capability_process::{ProcessBackend, ProcessConfig};
use capability_secrets::{MemorySecrets, SecretsResolverFactory};
use capability_types::{
    CapabilityError, FsPaths, SecretRef, StorageScope, Tool, ToolCapabilities, ToolContext,
    async_trait,
};
use criterion::{Criterion, criterion_group};
use serde_json::{Value, json};

#[path = "support/paired.rs"]
mod paired;

/// Counts every allocation of the process.
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator; the counter is a relaxed atomic.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations per iteration of `f`, over `n` iterations after a warm-up.
fn allocations_per(n: u64, mut f: impl FnMut()) -> f64 {
    for _ in 0..16 {
        f();
    }
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    for _ in 0..n {
        f();
    }
    (ALLOCATIONS.load(Ordering::Relaxed) - before) as f64 / n as f64
}

/// Polls a future that is ready at once.
fn ready<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("benchmark future was not ready"),
    }
}

/// A tool that returns its arguments; `work` rounds of hashing stand for a tool's own work.
struct Noop {
    caps: ToolCapabilities,
    work: u32,
}

#[async_trait]
impl Tool for Noop {
    fn name(&self) -> &str {
        if self.caps.is_empty() {
            "nothing"
        } else {
            "five"
        }
    }
    fn description(&self) -> &str {
        "returns its arguments"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn capabilities(&self) -> ToolCapabilities {
        self.caps.clone()
    }
    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<Value, CapabilityError> {
        black_box(ctx.scoped_fs.is_some());
        let mut h = 0xcbf2_9ce4_8422_2325_u64;
        for round in 0..self.work {
            h = (h ^ u64::from(round)).wrapping_mul(0x0100_0000_01b3);
        }
        black_box(h);
        Ok(args)
    }
}

fn five() -> ToolCapabilities {
    ToolCapabilities::none()
        .with_network(["api.github.com"])
        .with_fs_read(FsPaths::FromPersonality)
        .with_secrets([SecretRef::parse("GITHUB_TOKEN").unwrap()])
        .with_process(["git"])
        .with_storage(StorageScope::Session, None)
}

fn backends() -> CapabilityBackends {
    CapabilityBackends::new()
        .with_fetch(Arc::new(FetchBackend::new(FetchConfig::default()).unwrap()))
        .with_fs(Arc::new(FsBackend::new(FsConfig::default())))
        .with_secrets(Arc::new(SecretsResolverFactory::new(vec![Arc::new(
            MemorySecrets::new().with("GITHUB_TOKEN", "t"),
        )])))
        .with_process(Arc::new(ProcessBackend::new(ProcessConfig::with_host_env(
            Default::default(),
        ))))
        .with_kv(Arc::new(KvBackend::new(
            MemoryStore::new(),
            KvLimits::default(),
        )))
}

fn policy() -> Arc<CompiledPolicy> {
    Arc::new(
        CompiledPolicy::load(
            r#"
id = "bench"
[fs_reach]
read = ["/srv/data", "/srv/shared"]
write = ["/srv/out"]
deny = ["/srv/data/private"]
[safety.network]
allow = ["api.github.com", "*.example.com"]
[safety.process]
allow = ["git"]
"#,
            PolicyFormat::Toml,
            Some(Path::new("/home/bench")),
        )
        .unwrap(),
    )
}

fn registry_of(work: u32) -> DefaultToolRegistry {
    let mut registry = DefaultToolRegistry::new(Some(backends()));
    registry.register(Noop { caps: five(), work }).unwrap();
    registry
        .register(Noop {
            caps: ToolCapabilities::none(),
            work,
        })
        .unwrap();
    registry
}

fn batch(tool: &str, n: usize) -> Vec<ToolCall> {
    (0..n)
        .map(|i| ToolCall::new(i.to_string(), tool, json!({"path": "a.txt"})))
        .collect()
}

/// Everything the paths share, built once: the floor's tools and prebuilt contexts, the
/// resolution cache of the single call, and the registry with its context.
struct Setup {
    rt: tokio::runtime::Runtime,
    policy: Arc<CompiledPolicy>,
    backends: CapabilityBackends,
    five_tool: Noop,
    nothing_tool: Noop,
    cache: ResolutionCache,
    /// The five-category tool's context, its scoped objects installed ahead of time.
    prebuilt: ToolContext,
    /// A context with no scoped objects, for the tool that declares nothing.
    bare: ToolContext,
    registry: DefaultToolRegistry,
    ctx: ExecutionContext,
}

impl Setup {
    fn new() -> Self {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let policy = policy();
        let backends = backends();
        let five_tool = Noop {
            caps: five(),
            work: 0,
        };
        let cache = ResolutionCache::new();
        let scoped = cache
            .resolve_capabilities(
                "five",
                &five_tool.caps,
                &policy,
                "s",
                Path::new("/srv/data"),
                Some(&backends),
            )
            .unwrap();
        let mut prebuilt = ToolContext::new("s", "/srv/data");
        scoped.install(&mut prebuilt);
        let ctx = ExecutionContext::new("s", Arc::clone(&policy), "/srv/data");
        Setup {
            rt,
            policy,
            backends,
            five_tool,
            nothing_tool: Noop {
                caps: ToolCapabilities::none(),
                work: 0,
            },
            cache,
            prebuilt,
            bare: ToolContext::new("s", "/srv/data"),
            registry: registry_of(0),
            ctx,
        }
    }

    // Every path builds its call the same way (`ToolCall::new`, as an agent loop does); the
    // bare paths then hand its arguments straight to the tool.
    fn bare_five(&self) -> Value {
        let call = black_box(batch("five", 1)).pop().unwrap();
        ready(self.five_tool.execute(call.args, &self.prebuilt)).unwrap()
    }

    fn bare_nothing(&self) -> Value {
        let call = black_box(batch("nothing", 1)).pop().unwrap();
        ready(self.nothing_tool.execute(call.args, &self.bare)).unwrap()
    }

    /// One call through resolution, the guard and the real factories' scoped objects.
    fn resolved_call(&self, args: Value) -> Value {
        let scoped = self
            .cache
            .resolve_capabilities(
                "five",
                &self.five_tool.caps,
                black_box(&self.policy),
                "s",
                Path::new("/srv/data"),
                Some(&self.backends),
            )
            .unwrap();
        let mut ctx = ToolContext::new("s", "/srv/data");
        scoped.install(&mut ctx);
        ready(self.five_tool.execute(args, &ctx)).unwrap()
    }

    fn single_five(&self) -> Value {
        self.resolved_call(black_box(batch("five", 1)).pop().unwrap().args)
    }

    /// One batch of `n` calls built as `execute_parallel`'s are, each run bare (`resolve`
    /// false) or as the single call is, one after another, the results kept and then dropped.
    fn looped(&self, n: usize, resolve: bool) {
        let calls = black_box(batch("five", n));
        let results: Vec<(String, String, Value)> = calls
            .into_iter()
            .map(|call| {
                let value = if resolve {
                    self.resolved_call(call.args)
                } else {
                    ready(self.five_tool.execute(call.args, &self.prebuilt)).unwrap()
                };
                (call.id, call.tool, value)
            })
            .collect();
        drop(black_box(results));
    }

    /// `iterations` batches of `n` calls of `tool` through the registry, awaited inside the
    /// runtime as an agent loop awaits them; the calls are built as the loop goes.
    async fn batches(&self, tool: &str, n: usize, iterations: u64) {
        for _ in 0..iterations {
            let results = self
                .registry
                .execute_parallel(batch(tool, n), &self.ctx)
                .await;
            drop(black_box(results));
        }
    }
}

/// One path run `iterations` times.
type Run = fn(&Setup, u64);

/// The paths `TOOLCAP_DISPATCH_COUNT` can name, each with its calls per iteration.
const COUNTED: &[(&str, usize, Run)] = &[
    ("bare_five", 1, |s, n| {
        (0..n).for_each(|_| drop(s.bare_five()))
    }),
    ("bare_nothing", 1, |s, n| {
        (0..n).for_each(|_| drop(s.bare_nothing()))
    }),
    ("single_five", 1, |s, n| {
        (0..n).for_each(|_| drop(s.single_five()))
    }),
    ("batch_1_five", 1, |s, n| {
        s.rt.block_on(s.batches("five", 1, n))
    }),
    ("batch_1_nothing", 1, |s, n| {
        s.rt.block_on(s.batches("nothing", 1, n))
    }),
    ("batch_100_five", 100, |s, n| {
        s.rt.block_on(s.batches("five", 100, n))
    }),
    ("batch_10000_five", 10_000, |s, n| {
        s.rt.block_on(s.batches("five", 10_000, n))
    }),
    ("bare_100_five", 100, |s, n| {
        (0..n).for_each(|_| s.looped(100, false))
    }),
    ("bare_10000_five", 10_000, |s, n| {
        (0..n).for_each(|_| s.looped(10_000, false))
    }),
];

/// `TOOLCAP_DISPATCH_COUNT=<path>:<iterations>`: runs one path that many times and nothing
/// else, for `cargo xtask bench` to count its instructions under callgrind (the difference of
/// two such runs is the path's own count, whatever the process's start costs).
/// `TOOLCAP_DISPATCH_COUNT=list` prints the paths, one `<path> <calls per iteration>` a line.
fn count(spec: &str) {
    if spec == "list" {
        for (path, calls, _) in COUNTED {
            println!("{path} {calls}");
        }
        return;
    }
    let (name, iterations) = spec
        .split_once(':')
        .and_then(|(p, i)| Some((p, i.parse::<u64>().ok()?)))
        .unwrap_or_else(|| {
            panic!("TOOLCAP_DISPATCH_COUNT={spec:?}: expected list or <path>:<iterations>")
        });
    let Some((_, _, run)) = COUNTED.iter().find(|(path, _, _)| *path == name) else {
        panic!(
            "TOOLCAP_DISPATCH_COUNT: no path {name:?}; one of {:?}",
            COUNTED.iter().map(|(p, _, _)| *p).collect::<Vec<_>>()
        );
    };
    run(&Setup::new(), iterations);
}

/// The ratios of issue 19's targets, each measured paired (subject, baseline): the two paths
/// alternate in short rounds, so a slow moment of this shared machine slows both sides of a
/// round alike, where criterion's separate means can land in different moments of a run.
const PAIRED: &[(&str, &str)] = &[
    ("single_five", "bare_five"),
    ("batch_1_five", "single_five"),
    ("batch_100_five", "single_five"),
    ("batch_10000_five", "single_five"),
    ("batch_1_nothing", "bare_nothing"),
    // What a batch's caller spends per call with no dispatch at all, against the single call
    // the batch targets compare with: over 1.0×, no registry can meet them at that size.
    ("bare_100_five", "single_five"),
    ("bare_10000_five", "single_five"),
];

/// A path of [`COUNTED`] by name.
fn counted(name: &str) -> (usize, Run) {
    COUNTED
        .iter()
        .find(|(path, _, _)| *path == name)
        .map(|(_, calls, run)| (*calls, *run))
        .unwrap_or_else(|| panic!("no counted path {name}"))
}

fn dispatch(c: &mut Criterion) {
    let setup = Setup::new();
    let (rt, registry, ctx) = (&setup.rt, &setup.registry, &setup.ctx);
    let mut allocations: Vec<(&str, f64)> = Vec::new();
    let mut group = c.benchmark_group("dispatch");

    // The floor: the tools called directly with contexts built ahead of time.
    let bare_five = || setup.bare_five();
    let bare_nothing = || setup.bare_nothing();
    group.bench_function("bare_five", |b| b.iter(bare_five));
    group.bench_function("bare_nothing", |b| b.iter(bare_nothing));
    // Counted: what toolcap allocates for a call, not what the caller builds (the call and its
    // arguments); the result's own vector is counted.
    let arguments = allocations_per(10_000, || drop(black_box(batch("five", 1))));
    allocations.push((
        "bare_five",
        allocations_per(10_000, || drop(bare_five())) - arguments,
    ));
    allocations.push((
        "bare_nothing",
        allocations_per(10_000, || drop(bare_nothing())) - arguments,
    ));

    let single_five = || setup.single_five();
    group.bench_function("single_five", |b| b.iter(single_five));
    allocations.push((
        "single_five",
        allocations_per(10_000, || drop(single_five())) - arguments,
    ));

    // The same two paths over a batch built the way `execute_parallel`'s batches are (all the
    // calls first, then each run, the results kept, then all dropped): the allocator serves a
    // batch's hundreds of live strings and maps differently from one call's, and these say
    // how much of a batch's per-call figure is that, whoever dispatches.
    let looped = |n: usize, resolve: bool| setup.looped(n, resolve);
    for (name, n, resolve) in [
        ("bare_100_five_per_call", 100usize, false),
        ("bare_10000_five_per_call", 10_000, false),
        ("single_100_five_per_call", 100, true),
        ("single_10000_five_per_call", 10_000, true),
    ] {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let start = std::time::Instant::now();
                for _ in 0..iters {
                    looped(n, resolve);
                }
                start.elapsed() / n as u32
            })
        });
    }

    // Through the registry, awaited inside the runtime as an agent loop awaits it; the calls
    // are built as the loop goes, inside the timing, as the single call builds its own.
    let per_call = |tool: &str, n: usize, iters: u64| -> (Duration, f64) {
        rt.block_on(async {
            let before = ALLOCATIONS.load(Ordering::Relaxed);
            let start = std::time::Instant::now();
            setup.batches(tool, n, iters).await;
            let spent = start.elapsed();
            let allocated = ALLOCATIONS.load(Ordering::Relaxed) - before;
            (
                spent / n as u32,
                allocated as f64 / (iters as f64 * n as f64),
            )
        })
    };
    assert!(
        rt.block_on(registry.execute_parallel(batch("five", 1), ctx))[0]
            .result
            .is_ok()
    );
    for (name, tool, n) in [
        ("batch_1_five", "five", 1usize),
        ("batch_1_nothing", "nothing", 1),
        ("batch_100_five_per_call", "five", 100),
        ("batch_10000_five_per_call", "five", 10_000),
    ] {
        group.bench_function(name, |b| b.iter_custom(|iters| per_call(tool, n, iters).0));
        let iters = (20_000 / n as u64).max(2);
        let _ = per_call(tool, n, iters);
        let building = allocations_per(iters, || drop(black_box(batch(tool, n)))) / n as f64;
        allocations.push((name, per_call(tool, n, iters).1 - building));
    }
    group.finish();

    // The cores: a batch of 10,000 calls of a tool with some work of its own.
    let mut group = c.benchmark_group("dispatch");
    // The whole batch runs on the runtime's workers (spawned, not `block_on`'s own thread), and
    // each call does about 10 µs of work of its own.
    let working = Arc::new(registry_of(20_000));
    let shared_ctx = Arc::new(ctx.clone());
    for workers in [1usize, 2] {
        let mt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_time()
            .build()
            .unwrap();
        let name = if workers == 1 {
            "batch_10000_mt1_per_call"
        } else {
            "batch_10000_mt2_per_call"
        };
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut spent = Duration::ZERO;
                for _ in 0..iters {
                    let calls = batch("five", 10_000);
                    let (registry, ctx) = (Arc::clone(&working), Arc::clone(&shared_ctx));
                    let start = std::time::Instant::now();
                    let results = mt.block_on(
                        mt.spawn(async move { registry.execute_parallel(calls, &ctx).await }),
                    );
                    spent += start.elapsed();
                    black_box(results.unwrap());
                }
                spent / 10_000
            })
        });
    }
    group.finish();

    let shown: Vec<String> = allocations
        .iter()
        .map(|(name, n)| format!("  \"{name}\": {n:.2}"))
        .collect();
    let json = format!("{{\n{}\n}}\n", shown.join(",\n"));
    eprintln!("allocations per call:\n{json}");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/criterion");
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(dir.join("dispatch-allocations.json"), json);

    if paired::measuring() {
        let mut rows = paired::Rows::default();
        for &(subject, baseline) in PAIRED {
            let (s_calls, s_run) = counted(subject);
            let (b_calls, b_run) = counted(baseline);
            rows.pair(
                (subject, baseline),
                (&mut |n| s_run(&setup, n), s_calls),
                (&mut |n| b_run(&setup, n), b_calls),
            );
        }
        rows.write("dispatch-paired.json");
    }
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30)
}

criterion_group! { name = benches; config = config(); targets = dispatch }

fn main() {
    match std::env::var("TOOLCAP_DISPATCH_COUNT") {
        Ok(spec) => count(&spec),
        Err(_) => {
            benches();
            Criterion::default().configure_from_args().final_summary();
        }
    }
}
