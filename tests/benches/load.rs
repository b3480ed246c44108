//! Load (issue 14): latency percentiles, calls per second and peak memory of the registry under
//! three shapes of load, with one tool that declares a file reach and the real file backend:
//!
//! - one batch of 10,000 calls through `execute_parallel`;
//! - 100 batches of 100 calls, all in flight at once;
//! - 1,000,000 sequential calls, the resident set sampled every 100,000 (growth beyond a bound
//!   is a leak).
//!
//! A benchmark, not a test: it prints figures and asserts nothing about time. Run it with
//! `cargo bench -p tests --bench load` (`cargo xtask bench` runs it with the rest); the figures
//! are recorded in docs/benchmarks.md.
#![allow(
    missing_docs,
    clippy::print_stdout,
    clippy::disallowed_methods,
    reason = "a benchmark that prints its report and reads /proc/self/status"
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use capability_core::PolicyFormat;
use capability_core::{
    CapabilityBackends, CompiledPolicy, DefaultToolRegistry, ExecutionContext, ToolCall,
};
use capability_fs::{FsBackend, FsConfig};
use capability_types::{
    CapabilityError, FsPaths, Tool, ToolCapabilities, ToolContext, async_trait,
};
use serde_json::{Value, json};

#[derive(Debug)]
struct NoOp;

#[async_trait]
impl Tool for NoOp {
    fn name(&self) -> &str {
        "noop"
    }
    fn description(&self) -> &str {
        "returns its argument"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn capabilities(&self) -> ToolCapabilities {
        ToolCapabilities::none().with_fs_read(FsPaths::FromPersonality)
    }
    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<Value, CapabilityError> {
        ctx.fs()?;
        Ok(args["n"].clone())
    }
}

/// `VmRSS` and `VmHWM` (peak) in KiB.
fn rss() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn report(name: &str, mut latencies: Vec<Duration>, elapsed: Duration, calls: usize) {
    latencies.sort();
    let (_, peak) = rss();
    println!(
        "| {name} | {calls} | {:.1} µs | {:.1} µs | {:.0} | {:.1} MiB |",
        percentile(&latencies, 0.5).as_secs_f64() * 1e6,
        percentile(&latencies, 0.99).as_secs_f64() * 1e6,
        calls as f64 / elapsed.as_secs_f64(),
        peak as f64 / 1024.0
    );
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing: run short then.
    let full = std::env::args().any(|a| a == "--bench");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let policy = CompiledPolicy::load(
        &format!(
            "id = \"load\"\n[fs_reach]\nread = [\"{}\"]\n",
            root.display()
        ),
        PolicyFormat::Toml,
        None,
    )
    .unwrap();
    let ctx = ExecutionContext::new("load", Arc::new(policy), &root);
    let backends = CapabilityBackends::new().with_fs(Arc::new(FsBackend::new(FsConfig::default())));
    let mut registry = DefaultToolRegistry::new(Some(backends));
    registry.register(NoOp).unwrap();
    let registry = Arc::new(registry);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let scale = if full { 1 } else { 100 };

    println!("| load | calls | p50 | p99 | calls/s | peak RSS |");
    println!("|---|---:|---:|---:|---:|---:|");

    // One batch of 10,000: latency of a call is the batch's wall time divided out, so report the
    // per-call figures of ten batches of the same size.
    let batch = 10_000 / scale;
    let mut latencies = Vec::new();
    let started = Instant::now();
    for _ in 0..10 {
        let calls: Vec<ToolCall> = (0..batch)
            .map(|i| ToolCall::new(i.to_string(), "noop", json!({"n": i})))
            .collect();
        let t = Instant::now();
        let results = rt.block_on(registry.execute_parallel(calls, &ctx));
        latencies.push(t.elapsed() / batch as u32);
        assert_eq!(results.len(), batch);
    }
    report(
        "batch of 10,000 (per call, 10 batches)",
        latencies,
        started.elapsed(),
        10 * batch,
    );

    // 100 batches of 100, concurrently: each batch's latency.
    let concurrent = 100 / scale.min(10);
    let started = Instant::now();
    let latencies = rt.block_on(async {
        let mut handles = Vec::new();
        for b in 0..concurrent {
            let registry = Arc::clone(&registry);
            let ctx = ctx.clone();
            handles.push(tokio::spawn(async move {
                let calls: Vec<ToolCall> = (0..100)
                    .map(|i| ToolCall::new(format!("{b}-{i}"), "noop", json!({"n": i})))
                    .collect();
                let t = Instant::now();
                let results = registry.execute_parallel(calls, &ctx).await;
                assert_eq!(results.len(), 100);
                t.elapsed()
            }));
        }
        let mut out = Vec::new();
        for h in handles {
            out.push(h.await.unwrap());
        }
        out
    });
    report(
        "100 concurrent batches of 100 (per batch)",
        latencies,
        started.elapsed(),
        concurrent * 100,
    );

    // 1,000,000 sequential calls, RSS sampled every 100,000.
    let total = 1_000_000 / scale;
    let sample_every = total / 10;
    let mut samples = Vec::new();
    // Written in place, allocated and touched before the run: its growth is not the registry's.
    let mut latencies = vec![Duration::ZERO; total];
    let started = Instant::now();
    rt.block_on(async {
        for (i, slot) in latencies.iter_mut().enumerate() {
            let t = Instant::now();
            let r = registry
                .execute(ToolCall::new("s", "noop", json!({"n": i})), &ctx)
                .await;
            *slot = t.elapsed();
            debug_assert!(matches!(r.result, capability_types::ToolResult::Ok(_)));
            if (i + 1) % sample_every == 0 {
                samples.push(rss().0);
            }
        }
    });
    let elapsed = started.elapsed();
    report("1,000,000 sequential", latencies, elapsed, total);
    let first = samples.first().copied().unwrap_or(0);
    let last = samples.last().copied().unwrap_or(0);
    println!(
        "\nRSS every {sample_every} sequential calls (KiB): {samples:?}; growth from the first sample to the last: {} KiB",
        last as i64 - first as i64
    );
}
