//! The registry runs a call's `execute` in one of two places (docs/decisions.md, "The per-call
//! path"): in the caller's task (a batch of one; any batch on a current-thread runtime) or in a
//! task of its own (a batch of several on a multi-thread runtime). Each semantic of a call —
//! timeout, cancellation of running and pending calls, panic containment, input order, the
//! concurrency cap, a complete audit trail, stopping when the batch is dropped — is checked here
//! in every placement, and so is the admission plan a tool keeps between calls.

mod support;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use capability_core::{
    AuditKind, CompiledPolicy, DefaultToolRegistry, ExecutionContext, IsolationKey,
    IsolationSelection, MemoryAuditSink, RegistryConfig, ToolCall, ToolIsolation,
};
use capability_types::{
    CancellationToken, CapabilityError, ErrorCode, FsPaths, StorageScope, Tool, ToolCapabilities,
    ToolContext, async_trait,
};
use serde_json::{Value, json};
use support::{Behaviour, TestTool, policy, recording_backends};

/// Where the calls of a check run.
#[derive(Debug, Clone, Copy)]
enum Placement {
    /// A batch of one on a current-thread runtime.
    One,
    /// A batch of several on a current-thread runtime.
    CurrentThread,
    /// A batch of several on a multi-thread runtime (each call in its own task).
    MultiThread,
}

const PLACEMENTS: [Placement; 3] = [
    Placement::One,
    Placement::CurrentThread,
    Placement::MultiThread,
];

fn runtime(placement: Placement) -> tokio::runtime::Runtime {
    match placement {
        Placement::MultiThread => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build(),
        _ => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
    }
    .unwrap()
}

/// `call` alone for [`Placement::One`], or `call` then three echoes.
fn batch(placement: Placement, call: ToolCall) -> Vec<ToolCall> {
    let mut calls = vec![call];
    if !matches!(placement, Placement::One) {
        calls.extend((1..4).map(|i| ToolCall::new(format!("e{i}"), "echo", json!({"i": i}))));
    }
    calls
}

fn ctx() -> ExecutionContext {
    ExecutionContext::new("s", Arc::new(CompiledPolicy::none(None)), "/tmp")
}

fn registry_with(tool: impl Tool + 'static) -> DefaultToolRegistry {
    let mut registry = DefaultToolRegistry::new(None);
    registry.register(tool).unwrap();
    registry
        .register(TestTool::new(
            "echo",
            ToolCapabilities::none(),
            Behaviour::Echo,
        ))
        .unwrap();
    registry
}

/// The echoes of a batch came back in order, each with its own value.
fn echoes_in_order(results: &[capability_core::ToolCallResult]) {
    for (i, r) in results.iter().enumerate().skip(1) {
        assert_eq!(r.call_id, format!("e{i}"));
        assert_eq!(r.result.value(), Some(&json!({"i": i})));
    }
}

// guarantee: G-REG-10
#[test]
fn a_call_past_its_timeout_ends_as_timeout_in_every_placement() {
    for placement in PLACEMENTS {
        let registry = registry_with(TestTool::new(
            "slow",
            ToolCapabilities::none(),
            Behaviour::Sleep(Duration::from_secs(60)),
        ));
        let ctx = ctx().with_timeout(Duration::from_millis(20));
        let started = Instant::now();
        let results = runtime(placement).block_on(registry.execute_parallel(
            batch(placement, ToolCall::new("0", "slow", json!({}))),
            &ctx,
        ));
        assert!(started.elapsed() < Duration::from_secs(10), "{placement:?}");
        assert_eq!(
            results[0].result.code(),
            Some(ErrorCode::Timeout),
            "{placement:?}"
        );
        assert_eq!(
            results[0].result.error_message(),
            Some("tool slow timed out after 20ms")
        );
        echoes_in_order(&results);
    }
}

// guarantee: G-REG-10
#[test]
fn a_call_has_its_whole_timeout_from_its_own_start_whatever_ran_before_it() {
    // Under a 150 ms timeout: two tools that hold the thread 100 ms each, then a call that
    // waits 80 ms, all one at a time. Counted from the batch's start the last would be late
    // (280 ms); counted from its own start it is on time. Then three sleepers queued behind a
    // cap of one: 3 × 100 ms, each on time.
    for placement in [Placement::CurrentThread, Placement::MultiThread] {
        let mut registry = DefaultToolRegistry::new(None)
            .with_config(RegistryConfig::default().max_concurrency(1));
        for (name, behaviour) in [
            ("compute", Behaviour::Block(Duration::from_millis(100))),
            ("wait", Behaviour::Sleep(Duration::from_millis(80))),
            ("sleep", Behaviour::Sleep(Duration::from_millis(100))),
        ] {
            registry
                .register(TestTool::new(name, ToolCapabilities::none(), behaviour))
                .unwrap();
        }
        let ctx = ctx().with_timeout(Duration::from_millis(150));
        let rt = runtime(placement);
        for tools in [["compute", "compute", "wait"], ["sleep", "sleep", "sleep"]] {
            let calls = tools
                .iter()
                .enumerate()
                .map(|(i, tool)| ToolCall::new(i.to_string(), *tool, json!({})))
                .collect();
            let results = rt.block_on(registry.execute_parallel(calls, &ctx));
            for r in &results {
                assert!(r.result.is_ok(), "{placement:?} {tools:?}: {r:?}");
            }
            // Durations count from the start of the batch's checks, so they only grow.
            assert!(
                results.windows(2).all(|w| w[0].duration <= w[1].duration),
                "{placement:?} {tools:?}: {results:?}"
            );
        }
    }
}

// guarantee: G-REG-10
#[test]
fn a_timeout_too_long_for_the_clock_lets_a_waiting_call_finish() {
    // A call's deadline is worked out only when it has to wait; a timeout the clock cannot add
    // (`Duration::MAX`) is up in thirty years, never a panic, in every placement.
    let registry = registry_with(TestTool::new(
        "wait",
        ToolCapabilities::none(),
        Behaviour::Sleep(Duration::from_millis(20)),
    ));
    let ctx = ctx().with_timeout(Duration::MAX);
    for placement in PLACEMENTS {
        let n = if matches!(placement, Placement::One) {
            1
        } else {
            3
        };
        let calls = (0..n)
            .map(|i| ToolCall::new(i.to_string(), "wait", json!({})))
            .collect();
        let results = runtime(placement).block_on(registry.execute_parallel(calls, &ctx));
        assert_eq!(results.len(), n);
        for r in &results {
            assert!(r.result.is_ok(), "{placement:?}: {r:?}");
        }
    }
}

#[test]
fn a_result_counts_from_the_batchs_checks_and_its_audit_from_the_calls_start() {
    // Two tools that hold the thread 40 ms and 25 ms, one after the other (a cap of one): each
    // result's duration covers everything before it in the batch, and each `ToolCompleted`
    // event's covers its own call and not the calls before it. Bounds from what the calls did
    // only, never from how fast the machine is.
    let held = [Duration::from_millis(40), Duration::from_millis(25)];
    for placement in PLACEMENTS {
        let sink = Arc::new(MemoryAuditSink::new());
        let mut registry = DefaultToolRegistry::new(None)
            .with_config(RegistryConfig::default().max_concurrency(1))
            .with_audit_sink(sink.clone());
        for (name, hold) in [("first", held[0]), ("second", held[1])] {
            registry
                .register(TestTool::new(
                    name,
                    ToolCapabilities::none(),
                    Behaviour::Block(hold),
                ))
                .unwrap();
        }
        let mut calls = vec![
            ToolCall::new("0", "first", json!({})),
            ToolCall::new("1", "second", json!({})),
        ];
        if matches!(placement, Placement::One) {
            calls.truncate(1);
        }
        let results = runtime(placement).block_on(registry.execute_parallel(calls, &ctx()));
        let events = sink.events();
        let mut before = Duration::ZERO;
        for (r, hold) in results.iter().zip(held) {
            assert!(r.result.is_ok(), "{placement:?}: {r:?}");
            before += hold;
            assert!(
                r.duration >= before,
                "{placement:?}: call {} ended {:?} after the batch began, having held the thread {before:?} by then",
                r.call_id,
                r.duration
            );
            let ran = events
                .iter()
                .find(|e| e.call_id == r.call_id && e.event == AuditKind::ToolCompleted)
                .and_then(|e| e.duration_us)
                .map(Duration::from_micros)
                .unwrap_or_else(|| {
                    panic!("{placement:?}: no duration for {}: {events:?}", r.call_id)
                });
            // It started once the calls before it had held the thread.
            let earlier = before - hold;
            assert!(
                ran >= hold && ran <= r.duration.saturating_sub(earlier),
                "{placement:?}: call {} ran {ran:?} by its audit event, held {hold:?}, result {:?}, after {earlier:?}",
                r.call_id,
                r.duration
            );
        }
    }
}

#[test]
fn cancelling_the_batch_stops_running_and_pending_calls_in_every_placement() {
    for placement in PLACEMENTS {
        let slow = TestTool::new(
            "slow",
            ToolCapabilities::none(),
            Behaviour::Sleep(Duration::from_secs(60)),
        );
        let runs = Arc::clone(&slow.runs);
        let mut registry = DefaultToolRegistry::new(None)
            .with_config(RegistryConfig::default().max_concurrency(1));
        registry.register(slow).unwrap();
        let token = CancellationToken::new();
        let ctx = ctx().with_cancellation(token.clone());
        let mut calls = vec![ToolCall::new("0", "slow", json!({}))];
        if !matches!(placement, Placement::One) {
            calls.push(ToolCall::new("1", "slow", json!({})));
        }
        let rt = runtime(placement);
        let results = rt.block_on(async {
            let canceller = tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(30)).await;
                token.cancel();
            });
            let results = registry.execute_parallel(calls, &ctx).await;
            canceller.await.unwrap();
            results
        });
        assert_eq!(
            results[0].result.code(),
            Some(ErrorCode::Cancelled),
            "{placement:?}"
        );
        if let Some(pending) = results.get(1) {
            assert_eq!(
                pending.result.error_message(),
                Some("the batch was cancelled before the call started"),
                "{placement:?}"
            );
        }
        assert_eq!(
            runs.load(Ordering::SeqCst),
            1,
            "{placement:?}: one call started"
        );
    }
}

#[test]
fn a_panic_ends_its_own_call_only_in_every_placement() {
    for placement in PLACEMENTS {
        let registry = registry_with(TestTool::new(
            "panicky",
            ToolCapabilities::none(),
            Behaviour::Panic,
        ));
        let results = runtime(placement).block_on(registry.execute_parallel(
            batch(placement, ToolCall::new("0", "panicky", json!({}))),
            &ctx(),
        ));
        assert_eq!(results[0].call_id, "0");
        assert_eq!(results[0].tool, "panicky");
        assert_eq!(
            results[0].result.error_message(),
            Some("tool panicky panicked: boom from panicky"),
            "{placement:?}"
        );
        echoes_in_order(&results);
        // The registry goes on.
        let again = runtime(placement)
            .block_on(registry.execute(ToolCall::new("x", "echo", json!(1)), &ctx()));
        assert!(again.result.is_ok());
    }
}

/// Panics where its arguments say: `"make"` while making its future (a tool written without
/// `async_trait` runs code there), `"first"` at the future's first poll, `"wait"` after it
/// waited once, `"drop"` when its future, done, is dropped.
struct PanicsAt;

/// A future that is done at once, and panics when it is dropped.
struct DoneThenPanics;

impl Future for DoneThenPanics {
    type Output = Result<Value, CapabilityError>;
    fn poll(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::task::Poll::Ready(Ok(json!("done")))
    }
}

impl Drop for DoneThenPanics {
    fn drop(&mut self) {
        panic!("boom from dropping its future");
    }
}

impl Tool for PanicsAt {
    fn name(&self) -> &str {
        "panics_at"
    }
    fn description(&self) -> &str {
        "panics where it is told"
    }
    fn input_schema(&self) -> Value {
        json!({})
    }
    fn capabilities(&self) -> ToolCapabilities {
        ToolCapabilities::none()
    }
    fn execute<'a, 'b, 'f>(
        &'a self,
        args: Value,
        _: &'b ToolContext,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<Value, CapabilityError>> + Send + 'f>>
    where
        'a: 'f,
        'b: 'f,
        Self: 'f,
    {
        support::quiet_deliberate_panics();
        let at = args["at"].as_str().unwrap_or_default().to_owned();
        if at == "make" {
            panic!("boom from making its future");
        }
        if at == "drop" {
            return Box::pin(DoneThenPanics);
        }
        Box::pin(async move {
            if at == "wait" {
                tokio::task::yield_now().await;
                panic!("boom from after it waited");
            }
            panic!("boom from its first poll")
        })
    }
}

// guarantee: G-REG-10
#[test]
fn a_panic_while_making_polling_or_dropping_the_future_ends_its_own_call_only() {
    // The panic is caught where the tool's code runs: making its future, its first poll, every
    // poll after it waited, and dropping it (docs/decisions.md, "The per-call path").
    for placement in PLACEMENTS {
        let registry = registry_with(PanicsAt);
        for (at, said) in [
            ("make", "boom from making its future"),
            ("first", "boom from its first poll"),
            ("wait", "boom from after it waited"),
            ("drop", "boom from dropping its future"),
        ] {
            let call = ToolCall::new("0", "panics_at", json!({"at": at}));
            let results = runtime(placement)
                .block_on(registry.execute_parallel(batch(placement, call), &ctx()));
            assert_eq!(results[0].call_id, "0");
            assert_eq!(
                results[0].result.error_message(),
                Some(format!("tool panics_at panicked: {said}").as_str()),
                "{placement:?} {at}"
            );
            assert_eq!(results[0].result.code(), Some(ErrorCode::ExecutionFailed));
            echoes_in_order(&results);
        }
        let again = runtime(placement)
            .block_on(registry.execute(ToolCall::new("x", "echo", json!(1)), &ctx()));
        assert!(again.result.is_ok(), "{placement:?}");
    }
}

/// Counts how many calls run at once.
struct Gauge {
    now: AtomicUsize,
    max: AtomicUsize,
}

struct Probe(Arc<Gauge>);

#[async_trait]
impl Tool for Probe {
    fn name(&self) -> &str {
        "probe"
    }
    fn description(&self) -> &str {
        "measures concurrency"
    }
    fn input_schema(&self) -> Value {
        json!({})
    }
    fn capabilities(&self) -> ToolCapabilities {
        ToolCapabilities::none()
    }
    async fn execute(&self, args: Value, _: &ToolContext) -> Result<Value, CapabilityError> {
        let now = self.0.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.0.max.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(2)).await;
        self.0.now.fetch_sub(1, Ordering::SeqCst);
        Ok(args)
    }
}

#[test]
fn results_keep_input_order_and_the_cap_holds_in_every_batch_placement() {
    for placement in [Placement::CurrentThread, Placement::MultiThread] {
        let gauge = Arc::new(Gauge {
            now: AtomicUsize::new(0),
            max: AtomicUsize::new(0),
        });
        let mut registry = DefaultToolRegistry::new(None)
            .with_config(RegistryConfig::default().max_concurrency(4));
        registry.register(Probe(Arc::clone(&gauge))).unwrap();
        let calls = (0..60)
            .map(|i| ToolCall::new(i.to_string(), "probe", json!(i)))
            .collect();
        let results = runtime(placement).block_on(registry.execute_parallel(calls, &ctx()));
        for (i, r) in results.iter().enumerate() {
            assert_eq!(r.call_id, i.to_string(), "{placement:?}");
            assert_eq!(r.result.value(), Some(&json!(i)), "{placement:?}");
        }
        let max = gauge.max.load(Ordering::SeqCst);
        assert!(
            (2..=4).contains(&max),
            "{placement:?}: max concurrency was {max}"
        );
    }
}

/// An isolation that runs the tool where it is: the registry's path for isolated tools (the
/// capsule's), without a worker process.
#[derive(Debug, Default)]
struct Aside(AtomicUsize);

#[async_trait]
impl ToolIsolation for Aside {
    async fn execute(
        &self,
        _: &IsolationKey,
        tool: &dyn Tool,
        args: Value,
        ctx: &ToolContext,
    ) -> Result<Value, CapabilityError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        tool.execute(args, ctx).await
    }
}

#[test]
fn the_running_bound_holds_across_batches_in_every_placement() {
    // `max_concurrency` bounds the calls of one batch. A server that makes a batch of each
    // request (MCP) needs a bound across them: `max_running`, whether the tool runs in process
    // or through an isolation (`toolcap mcp serve --capsule`).
    let placements = [Placement::CurrentThread, Placement::MultiThread];
    for (placement, isolated) in placements.into_iter().flat_map(|p| [(p, false), (p, true)]) {
        let gauge = Arc::new(Gauge {
            now: AtomicUsize::new(0),
            max: AtomicUsize::new(0),
        });
        let mut registry =
            DefaultToolRegistry::new(None).with_config(RegistryConfig::default().max_running(3));
        let aside = Arc::new(Aside::default());
        if isolated {
            registry = registry.with_isolation(
                Arc::clone(&aside) as Arc<dyn ToolIsolation>,
                IsolationSelection::All,
            );
        }
        registry.register(Probe(Arc::clone(&gauge))).unwrap();
        let registry = Arc::new(registry);
        let results = runtime(placement).block_on(async {
            let batches = (0..20).map(|i| {
                let registry = Arc::clone(&registry);
                async move {
                    let calls = vec![
                        ToolCall::new(format!("{i}a"), "probe", json!(i)),
                        ToolCall::new(format!("{i}b"), "probe", json!(i)),
                    ];
                    registry.execute_parallel(calls, &ctx()).await
                }
            });
            futures_util::future::join_all(batches).await
        });
        assert!(
            results.iter().flatten().all(|r| r.result.value().is_some()),
            "{placement:?} (isolated {isolated}): every call ran"
        );
        let max = gauge.max.load(Ordering::SeqCst);
        assert!(
            (2..=3).contains(&max),
            "{placement:?} (isolated {isolated}): {max} calls ran at once across batches"
        );
        let through = if isolated { 40 } else { 0 };
        assert_eq!(aside.0.load(Ordering::SeqCst), through, "{placement:?}");
    }
}

#[test]
fn a_call_waiting_for_a_place_is_cancelled_with_its_batch() {
    let gauge = Arc::new(Gauge {
        now: AtomicUsize::new(0),
        max: AtomicUsize::new(0),
    });
    let mut registry =
        DefaultToolRegistry::new(None).with_config(RegistryConfig::default().max_running(1));
    registry.register(Probe(Arc::clone(&gauge))).unwrap();
    registry
        .register(TestTool::new(
            "hang",
            ToolCapabilities::none(),
            Behaviour::Sleep(Duration::from_secs(30)),
        ))
        .unwrap();
    let rt = runtime(Placement::CurrentThread);
    rt.block_on(async {
        // One call holds the only place; a call of another batch waits for it and is cancelled.
        let holder = ctx();
        let waiter = ctx();
        let hold = registry.execute(ToolCall::new("h", "hang", json!({})), &holder);
        let wait = async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            waiter.cancellation.cancel();
            registry
                .execute(ToolCall::new("w", "probe", json!(1)), &waiter)
                .await
        };
        tokio::select! {
            _ = hold => panic!("the holder finished"),
            waited = wait => {
                assert_eq!(waited.result.code(), Some(ErrorCode::Cancelled), "{waited:?}");
            }
        }
    });
    assert_eq!(
        gauge.max.load(Ordering::SeqCst),
        0,
        "the waiting call never ran"
    );
    assert_eq!(RegistryConfig::default().max_running, None);
}

#[test]
fn every_call_is_audited_in_every_placement() {
    for placement in PLACEMENTS {
        let sink = Arc::new(MemoryAuditSink::new());
        let mut registry = registry_with(TestTool::new(
            "panicky",
            ToolCapabilities::none(),
            Behaviour::Panic,
        ))
        .with_audit_sink(sink.clone());
        let mut calls = batch(placement, ToolCall::new("0", "panicky", json!({})));
        calls.push(ToolCall::new("u", "unknown", json!({})));
        if matches!(placement, Placement::One) {
            calls.truncate(1);
        }
        let n = calls.len();
        let results = runtime(placement).block_on(registry.execute_parallel(calls, &ctx()));
        assert_eq!(results.len(), n);
        let events = sink.events();
        for r in &results {
            let kinds: Vec<AuditKind> = events
                .iter()
                .filter(|e| e.call_id == r.call_id)
                .map(|e| e.event)
                .collect();
            let expected = if r.call_id == "u" {
                vec![AuditKind::ToolDenied]
            } else {
                vec![AuditKind::ToolCalled, AuditKind::ToolCompleted]
            };
            assert_eq!(kinds, expected, "{placement:?}: call {}", r.call_id);
        }
        let _ = &mut registry;
    }
}

/// Returns once the call's `execute` future is dropped, counting drops.
struct Hang(Arc<AtomicUsize>);

struct DropCount(Arc<AtomicUsize>);

impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[async_trait]
impl Tool for Hang {
    fn name(&self) -> &str {
        "hang"
    }
    fn description(&self) -> &str {
        "never finishes"
    }
    fn input_schema(&self) -> Value {
        json!({})
    }
    fn capabilities(&self) -> ToolCapabilities {
        ToolCapabilities::none()
    }
    async fn execute(&self, _: Value, _: &ToolContext) -> Result<Value, CapabilityError> {
        let _guard = DropCount(Arc::clone(&self.0));
        std::future::pending::<()>().await;
        Ok(Value::Null)
    }
}

#[test]
fn dropping_the_batch_stops_its_calls_in_every_placement() {
    for placement in PLACEMENTS {
        let dropped = Arc::new(AtomicUsize::new(0));
        let mut registry = DefaultToolRegistry::new(None);
        registry.register(Hang(Arc::clone(&dropped))).unwrap();
        let n = if matches!(placement, Placement::One) {
            1
        } else {
            3
        };
        let calls = (0..n)
            .map(|i| ToolCall::new(i.to_string(), "hang", json!({})))
            .collect();
        let rt = runtime(placement);
        rt.block_on(async {
            let ctx = ctx();
            let batch = registry.execute_parallel(calls, &ctx);
            // The agent loop gives up on the turn.
            let gave_up = tokio::time::timeout(Duration::from_millis(50), batch).await;
            assert!(gave_up.is_err());
            // A task that was aborted is dropped by the runtime shortly after.
            for _ in 0..100 {
                if dropped.load(Ordering::SeqCst) == n {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        });
        assert_eq!(dropped.load(Ordering::SeqCst), n, "{placement:?}");
    }
}

// guarantee: G-REG-11
#[test]
fn the_admission_plan_follows_the_policy_the_session_and_the_working_directory() {
    let rt = runtime(Placement::One);
    let (backends, grants) = recording_backends();
    let mut registry = DefaultToolRegistry::new(Some(backends));
    registry
        .register(TestTool::new(
            "reader",
            ToolCapabilities::none()
                .with_fs_read(FsPaths::FromPersonality)
                .with_storage(StorageScope::Session, None),
            Behaviour::ReadFile,
        ))
        .unwrap();
    let read = |ctx: &ExecutionContext, path: &str| {
        rt.block_on(registry.execute(ToolCall::new("r", "reader", json!({"path": path})), ctx))
    };
    let one = policy("id = \"p\"\n[fs_reach]\nread = [\"/srv/a\"]\n");
    let a = ExecutionContext::new("s1", Arc::clone(&one), "/srv/a");
    assert!(read(&a, "x.txt").result.is_ok());
    assert!(read(&a, "x.txt").result.is_ok());
    let built = grants.storage.lock().unwrap().len();
    assert_eq!(
        built, 1,
        "the second call in the same context reused the plan"
    );
    // Another working directory: relative paths resolve against it.
    let b = ExecutionContext::new("s1", Arc::clone(&one), "/srv/b");
    assert_eq!(
        read(&b, "x.txt").result.error_message(),
        Some("PATH_NOT_REACHABLE: read not permitted for /srv/b/x.txt")
    );
    // Another session: its own storage namespace.
    let c = ExecutionContext::new("s2", Arc::clone(&one), "/srv/a");
    assert!(read(&c, "x.txt").result.is_ok());
    let namespaces: Vec<String> = grants
        .storage
        .lock()
        .unwrap()
        .iter()
        .map(|g| g.namespace.clone())
        .collect();
    assert!(namespaces.contains(&"session:s1".to_owned()));
    assert_eq!(namespaces.last().map(String::as_str), Some("session:s2"));
    // Another policy (a narrowing compiles a new one): the plan is made again under it.
    let two = policy("id = \"p\"\n[fs_reach]\nread = [\"/srv/other\"]\n");
    let d = ExecutionContext::new("s1", two, "/srv/a");
    assert_eq!(
        read(&d, "x.txt").result.error_message(),
        Some("PATH_NOT_REACHABLE: read not permitted for /srv/a/x.txt")
    );
    // And back: the first policy's answer again.
    assert!(read(&a, "x.txt").result.is_ok());
}

#[test]
fn a_batch_naming_many_tools_finds_each_ones_preparation() {
    // Past sixteen distinct names the registry indexes its preparations: every call still gets
    // its own tool's outcome, in order.
    let registry = registry_with(TestTool::new(
        "slow",
        ToolCapabilities::none(),
        Behaviour::Echo,
    ));
    let calls: Vec<ToolCall> = (0..120)
        .map(|i| match i % 3 {
            0 => ToolCall::new(i.to_string(), "echo", json!(i)),
            1 => ToolCall::new(i.to_string(), format!("missing{}", i % 40), json!(i)),
            _ => ToolCall::new(i.to_string(), "slow", json!(i)),
        })
        .collect();
    let results =
        runtime(Placement::CurrentThread).block_on(registry.execute_parallel(calls, &ctx()));
    for (i, r) in results.iter().enumerate() {
        assert_eq!(r.call_id, i.to_string());
        if i % 3 == 1 {
            assert_eq!(
                r.result.error_message(),
                Some(format!("unknown tool missing{}", i % 40).as_str())
            );
        } else {
            assert_eq!(r.result.value(), Some(&json!(i)), "call {i}");
        }
    }
}

/// Two tools that report what their context says: `bare` declares nothing (one plan for every
/// context), `reader` reads the personality's roots (a plan per context).
fn identity_registry() -> DefaultToolRegistry {
    let mut registry = DefaultToolRegistry::new(Some(recording_backends().0));
    registry
        .register(TestTool::new(
            "bare",
            ToolCapabilities::none(),
            Behaviour::ReportIdentity,
        ))
        .unwrap();
    registry
        .register(TestTool::new(
            "reader",
            ToolCapabilities::none().with_fs_read(FsPaths::FromPersonality),
            Behaviour::ReportIdentity,
        ))
        .unwrap();
    registry
}

// guarantee: G-REG-11
#[test]
fn each_call_sees_its_own_identity_and_token_whatever_ran_before_it() {
    // Plans are kept between calls, a tool that declares nothing shares one plan across every
    // context, and a call run in the caller's task borrows the context its thread's last call
    // of the same plan left (docs/decisions.md, "The per-call path"): whatever ran before, each
    // call sees its own id, session, directory, personality and batch token, in every
    // placement: whether the tools run in turn (each call finds the other tool's context left)
    // or one tool runs across the contexts (each finds its own tool's, made for another).
    let registry = identity_registry();
    let p = policy("id = \"p\"\n[fs_reach]\nread = [\"/srv\"]\n");
    let q = policy("id = \"q\"\n[fs_reach]\nread = [\"/srv\"]\n");
    // Each differs from the first in one thing only, the rest shared with it.
    let first = ExecutionContext::new("s1", Arc::clone(&p), "/srv/a");
    let contexts = [
        first.clone(),
        ExecutionContext {
            session_id: Arc::from("s2"),
            ..first.clone()
        },
        ExecutionContext {
            working_dir: Arc::from(std::path::Path::new("/srv/b")),
            ..first.clone()
        },
        ExecutionContext {
            policy: Arc::clone(&q),
            ..first.clone()
        },
        ExecutionContext {
            policy: Arc::new(CompiledPolicy::none(None)),
            ..first.clone()
        },
    ];
    let count = contexts.len();
    // `true`: the batch gets a token of its own, cancelled once it is done when `n` is even;
    // `false`: it shares the first context's token, never cancelled.
    let in_turn = |own_token: bool| {
        (0..3).flat_map(move |round| {
            (0..count).flat_map(move |n| {
                [
                    (round, n, "bare", own_token),
                    (round, n, "reader", own_token),
                ]
            })
        })
    };
    // One tool across the contexts, back to the first between the others: each batch differs
    // from the one before in one thing.
    let across = ["bare", "reader"].into_iter().flat_map(move |tool| {
        (0..3).flat_map(move |round| {
            (1..count).flat_map(move |n| [(round, 0, tool, false), (round, n, tool, false)])
        })
    });
    // Each context twice in a row: the second batch differs from the first in its token only.
    let tokens = ["bare", "reader"].into_iter().flat_map(move |tool| {
        (0..3).flat_map(move |round| (0..count).flat_map(move |n| [(round, n, tool, true); 2]))
    });
    let order: Vec<(usize, usize, &str, bool)> = in_turn(true)
        .chain(in_turn(false))
        .chain(across)
        .chain(tokens)
        .collect();
    for placement in PLACEMENTS {
        let rt = runtime(placement);
        for &(round, n, tool, own_token) in &order {
            let ctx = match own_token {
                true => contexts[n]
                    .clone()
                    .with_cancellation(CancellationToken::new()),
                false => contexts[n].clone(),
            }
            .new_invocation();
            let calls: Vec<ToolCall> = match placement {
                Placement::One => vec![ToolCall::new(format!("{round}-{n}"), tool, json!({}))],
                _ => (0..3)
                    .map(|i| ToolCall::new(format!("{round}-{n}-{i}"), tool, json!({})))
                    .collect(),
            };
            let ids: Vec<String> = calls.iter().map(|c| c.id.clone()).collect();
            let results = rt.block_on(registry.execute_parallel(calls, &ctx));
            for (result, id) in results.iter().zip(&ids) {
                let seen = result
                    .result
                    .value()
                    .unwrap_or_else(|| panic!("{placement:?} {tool}: {:?}", result.result));
                let expected_personality = ctx.policy.id().map(str::to_owned);
                assert_eq!(seen["call"], json!(id), "{placement:?} {tool}");
                assert_eq!(seen["tool"], json!(tool));
                assert_eq!(
                    seen["session"],
                    json!(&*ctx.session_id),
                    "{placement:?} {tool} {id}"
                );
                assert_eq!(seen["dir"], json!(ctx.working_dir.display().to_string()));
                assert_eq!(seen["personality"], json!(expected_personality));
                assert_eq!(seen["cancelled"], json!(false), "the new batch's token");
                assert_eq!(seen["fs"], json!(tool == "reader"), "{placement:?} {tool}");
            }
            if own_token && n % 2 == 0 {
                ctx.cancellation.cancel();
            }
        }
    }
}

// guarantee: G-REG-11
/// Batches of one to three calls from eight tasks on a four-thread runtime, each batch in a
/// context of its own (two personalities with their own directories, three sessions per task),
/// two tools (one with scoped objects, one without): every call sees its own id, session,
/// directory and personality, whichever thread ran the call before it and whatever its
/// plan memo and the tool's kept context held.
#[test]
fn contexts_of_concurrent_batches_on_many_threads_never_cross() {
    let registry = Arc::new(identity_registry());
    let personalities = [
        policy("id = \"a\"\n[fs_reach]\nread = [\"/srv/a\"]\n"),
        policy("id = \"b\"\n[fs_reach]\nread = [\"/srv/b\"]\n"),
    ];
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    let tasks: Vec<_> = (0..8u32)
        .map(|task| {
            let registry = Arc::clone(&registry);
            let personalities = personalities.clone();
            runtime.spawn(async move {
                for i in 0..2000u32 {
                    let k = ((i * 7 + task) % 2) as usize;
                    let session = format!("s{task}-{}", i % 3);
                    let dir = ["/srv/a", "/srv/b"][k];
                    let ctx =
                        ExecutionContext::new(session.as_str(), Arc::clone(&personalities[k]), dir);
                    let calls: Vec<ToolCall> = (0..=(i % 3))
                        .map(|j| {
                            let tool = if (i + j) % 2 == 0 { "reader" } else { "bare" };
                            ToolCall::new(format!("{task}-{i}-{j}"), tool, json!({}))
                        })
                        .collect();
                    for (j, r) in registry
                        .execute_parallel(calls, &ctx)
                        .await
                        .iter()
                        .enumerate()
                    {
                        let seen = r.result.value().expect("a call of a known tool");
                        assert_eq!(seen["call"], format!("{task}-{i}-{j}"));
                        assert_eq!(seen["session"], session);
                        assert_eq!(seen["dir"], dir);
                        assert_eq!(seen["personality"], ["a", "b"][k]);
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        runtime.block_on(task).unwrap();
    }
}

#[test]
fn a_batch_is_admitted_against_the_invocation_as_it_began_in_every_batch_placement() {
    // `reader` comes first and succeeds (it may run two times), then slower calls of `other`,
    // then `writer`s, which may run only after `reader` completed in an earlier batch. By the
    // time the first `writer` starts, the first `reader` has long finished; admission is still
    // against the invocation as it was when the batch began, in input order (docs/policy.md,
    // `[constraints]`): the `writer`s are refused, the third `reader` is refused by its limit,
    // and a later batch sees the `reader`'s success and counts on from two.
    for placement in [Placement::CurrentThread, Placement::MultiThread] {
        let mut registry = DefaultToolRegistry::new(None)
            .with_config(RegistryConfig::default().max_concurrency(2));
        for (name, takes) in [("reader", 1), ("other", 15), ("writer", 1)] {
            registry
                .register(TestTool::new(
                    name,
                    ToolCapabilities::none(),
                    Behaviour::Sleep(Duration::from_millis(takes)),
                ))
                .unwrap();
        }
        let policy = policy(
            "id = \"p\"\n[constraints.writer]\nonly_after = [\"reader\"]\n[constraints.reader]\nmax_invocations = 2\n",
        );
        let ctx = ExecutionContext::new("s", policy, "/tmp");
        let rt = runtime(placement);
        // With two at once, the first `writer` starts only after two calls of `other` ended,
        // and the `reader` before them.
        let mut calls = vec![ToolCall::new("r0", "reader", json!({}))];
        calls.extend((0..4).map(|i| ToolCall::new(format!("o{i}"), "other", json!({}))));
        calls.extend((0..8).map(|i| ToolCall::new(format!("w{i}"), "writer", json!({}))));
        calls.push(ToolCall::new("r1", "reader", json!({})));
        calls.push(ToolCall::new("r2", "reader", json!({})));
        let first = rt.block_on(registry.execute_parallel(calls, &ctx));
        let refused_writer = "CONSTRAINT_NOT_MET: writer may run only after reader completed successfully in an earlier batch of this invocation";
        let refused_reader = "CONSTRAINT_NOT_MET: reader may run at most 2 time(s) per invocation";
        for r in &first {
            let expected = match r.call_id.as_str() {
                "r0" | "r1" => None,
                id if id.starts_with('o') => None,
                "r2" => Some(refused_reader),
                _ => Some(refused_writer),
            };
            assert_eq!(r.result.error_message(), expected, "{placement:?}: {r:?}");
        }
        assert_eq!(ctx.invocation.dispatched("reader"), 2, "{placement:?}");
        assert_eq!(ctx.invocation.dispatched("writer"), 0, "{placement:?}");
        let second = rt.block_on(registry.execute_parallel(
            vec![
                ToolCall::new("w", "writer", json!({})),
                ToolCall::new("r3", "reader", json!({})),
            ],
            &ctx,
        ));
        assert!(second[0].result.is_ok(), "{placement:?}: {:?}", second[0]);
        assert_eq!(
            second[1].result.error_message(),
            Some(refused_reader),
            "{placement:?}"
        );
        assert_eq!(ctx.invocation.dispatched("writer"), 1, "{placement:?}");
    }
}
