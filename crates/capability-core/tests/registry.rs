//! `DefaultToolRegistry::execute_parallel`: order, bounds, refusals before `execute`, timeouts,
//! cancellation, panics, budgets and the audit trail.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use capability_core::{
    AuditError, AuditEvent, AuditKind, AuditSink, CompiledPolicy, DefaultToolRegistry,
    ExecutionContext, MemoryAuditSink, RegistryConfig, RegistryError, ToolCall,
};
use capability_types::{CancellationToken, ErrorCode, FsPaths, ToolCapabilities, ToolResult};
use serde_json::json;
use support::{Behaviour, TestTool, policy, recording_backends};

fn none_policy() -> Arc<CompiledPolicy> {
    Arc::new(CompiledPolicy::none(None))
}

fn call(id: usize, tool: &str) -> ToolCall {
    ToolCall::new(id.to_string(), tool, json!({ "n": id }))
}

// guarantee: G-REG-02
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_mixed_calls_keep_order_and_denied_tools_never_run() {
    let (backends, _) = recording_backends();
    let echo = TestTool::new("echo", ToolCapabilities::none(), Behaviour::Echo);
    let excluded = TestTool::new("excluded", ToolCapabilities::none(), Behaviour::Echo);
    let panicky = TestTool::new("panicky", ToolCapabilities::none(), Behaviour::Panic);
    let slow = TestTool::new(
        "slow",
        ToolCapabilities::none(),
        Behaviour::Sleep(Duration::from_secs(30)),
    );
    let offline = TestTool::new("offline", ToolCapabilities::none(), Behaviour::Echo).unavailable();
    let runs = [&echo, &excluded, &panicky, &slow, &offline].map(|t| Arc::clone(&t.runs));
    let audit = Arc::new(MemoryAuditSink::new());
    let mut registry = DefaultToolRegistry::new(Some(backends))
        .with_config(RegistryConfig::default().call_timeout(Duration::from_millis(20)))
        .with_audit_sink(audit.clone());
    for t in [echo, excluded, panicky, slow, offline] {
        registry.register(t).unwrap();
    }
    let p = policy("id = \"mixed\"\ntoolset = [\"echo\", \"panicky\", \"slow\", \"offline\"]\n");
    let ctx = ExecutionContext::new("s", p, "/tmp");
    let kinds = [
        "echo", "excluded", "panicky", "slow", "unknown", "offline", "echo", "echo", "echo", "echo",
    ];
    let calls: Vec<ToolCall> = (0..10_000)
        .map(|i| call(i, kinds[i % kinds.len()]))
        .collect();

    let results = registry.execute_parallel(calls, &ctx).await;

    assert_eq!(results.len(), 10_000);
    for (i, r) in results.iter().enumerate() {
        assert_eq!(r.call_id, i.to_string(), "result {i} out of order");
        let expected = match kinds[i % kinds.len()] {
            "echo" => None,
            "excluded" => Some(ErrorCode::Denied),
            "panicky" => Some(ErrorCode::ExecutionFailed),
            "slow" => Some(ErrorCode::Timeout),
            "unknown" | "offline" => Some(ErrorCode::NotAvailable),
            _ => unreachable!(),
        };
        assert_eq!(r.result.code(), expected, "call {i}: {:?}", r.result);
        if expected.is_none() {
            assert_eq!(r.result.value(), Some(&json!({ "n": i })));
        }
    }
    assert_eq!(runs[0].load(Ordering::SeqCst), 5_000, "echo");
    assert_eq!(
        runs[1].load(Ordering::SeqCst),
        0,
        "a tool outside the toolset never runs"
    );
    assert_eq!(runs[2].load(Ordering::SeqCst), 1_000, "panicky");
    assert_eq!(runs[3].load(Ordering::SeqCst), 1_000, "slow");
    assert_eq!(
        runs[4].load(Ordering::SeqCst),
        0,
        "an unavailable tool never runs"
    );

    let events = audit.events();
    let count = |kind| events.iter().filter(|e| e.event == kind).count();
    assert_eq!(count(AuditKind::ToolDenied), 3_000);
    assert_eq!(count(AuditKind::ToolCalled), 7_000);
    assert_eq!(count(AuditKind::ToolCompleted), 7_000);
    let denied_ids: std::collections::HashSet<_> = events
        .iter()
        .filter(|e| e.event == AuditKind::ToolDenied)
        .map(|e| e.call_id.clone())
        .collect();
    assert!(
        events
            .iter()
            .filter(|e| e.event == AuditKind::ToolCalled)
            .all(|e| !denied_ids.contains(&e.call_id)),
        "a denied call never emits ToolCalled"
    );
}

#[tokio::test]
async fn refusal_messages_are_exact() {
    let mut registry = DefaultToolRegistry::new(None);
    registry
        .register(TestTool::new(
            "echo",
            ToolCapabilities::none(),
            Behaviour::Echo,
        ))
        .unwrap();
    let reader = TestTool::new(
        "reader",
        ToolCapabilities::none().with_fs_read(FsPaths::FromPersonality),
        Behaviour::ReadFile,
    );
    let reader_runs = Arc::clone(&reader.runs);
    registry.register(reader).unwrap();
    let ctx = ExecutionContext::new("s", policy("id = \"p\"\ntoolset = [\"reader\"]\n"), "/tmp");
    let r = registry
        .execute_parallel(
            vec![call(0, "echo"), call(1, "reader"), call(2, "ghost")],
            &ctx,
        )
        .await;
    assert_eq!(
        serde_json::to_value(&r[0].result).unwrap(),
        json!({"ok": false, "code": "denied", "error": "TOOL_NOT_IN_TOOLSET: echo is not in the toolset of personality p"})
    );
    assert_eq!(
        serde_json::to_value(&r[1].result).unwrap(),
        json!({"ok": false, "code": "not_available", "error": "Tool reader declares capabilities but no capability backends are configured"})
    );
    assert_eq!(r[2].result.error_message(), Some("unknown tool ghost"));
    assert_eq!(
        reader_runs.load(Ordering::SeqCst),
        0,
        "the guard stops execute"
    );
}

// guarantee: G-REG-04
#[tokio::test]
async fn missing_single_backend_is_named_and_empty_lists_count_as_declared() {
    let backends = capability_core::CapabilityBackends::new();
    let mut registry = DefaultToolRegistry::new(Some(backends));
    let t = TestTool::new(
        "secretive",
        ToolCapabilities::none().with_secrets([]),
        Behaviour::Echo,
    );
    let runs = Arc::clone(&t.runs);
    registry.register(t).unwrap();
    let ctx = ExecutionContext::new("s", Arc::new(CompiledPolicy::none(None)), "/tmp");
    let r = registry.execute(call(0, "secretive"), &ctx).await;
    assert_eq!(
        r.result.error_message(),
        Some(
            "Tool secretive declares capabilities whose backends are not configured: secrets (for secrets)"
        )
    );
    assert_eq!(r.result.code(), Some(ErrorCode::NotAvailable));
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn empty_declaration_runs_without_backends() {
    let mut registry = DefaultToolRegistry::new(None);
    registry
        .register(TestTool::new(
            "echo",
            ToolCapabilities::none(),
            Behaviour::ReportScoped,
        ))
        .unwrap();
    let r = registry
        .execute(
            call(7, "echo"),
            &ExecutionContext::new("s", none_policy(), "/tmp"),
        )
        .await;
    assert_eq!(
        r.result.value(),
        Some(
            &json!({"fetch": false, "fs": false, "secrets": false, "process": false, "kv": false})
        )
    );
    assert_eq!(r.call_id, "7");
}

// guarantee: G-REG-03
#[tokio::test]
async fn tool_receives_only_declared_scoped_objects() {
    let (backends, grants) = recording_backends();
    let mut registry = DefaultToolRegistry::new(Some(backends));
    let caps = ToolCapabilities::none()
        .with_network(["*"])
        .with_fs_read(FsPaths::FromPersonality);
    registry
        .register(TestTool::new("partial", caps, Behaviour::ReportScoped))
        .unwrap();
    let r = registry
        .execute(
            call(0, "partial"),
            &ExecutionContext::new("s", none_policy(), "/tmp"),
        )
        .await;
    assert_eq!(
        r.result.value(),
        Some(&json!({"fetch": true, "fs": true, "secrets": false, "process": false, "kv": false}))
    );
    assert_eq!(grants.network.lock().unwrap().len(), 1);
    assert!(grants.secrets.lock().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_is_bounded() {
    struct Gauge {
        now: AtomicUsize,
        max: AtomicUsize,
    }
    struct Probe(Arc<Gauge>);
    #[capability_types::async_trait]
    impl capability_types::Tool for Probe {
        fn name(&self) -> &str {
            "probe"
        }
        fn description(&self) -> &str {
            "measures concurrency"
        }
        fn input_schema(&self) -> serde_json::Value {
            json!({})
        }
        fn capabilities(&self) -> ToolCapabilities {
            ToolCapabilities::none()
        }
        async fn execute(
            &self,
            _: serde_json::Value,
            _: &capability_types::ToolContext,
        ) -> Result<serde_json::Value, capability_types::CapabilityError> {
            let now = self.0.now.fetch_add(1, Ordering::SeqCst) + 1;
            self.0.max.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(2)).await;
            self.0.now.fetch_sub(1, Ordering::SeqCst);
            Ok(json!(null))
        }
    }
    let gauge = Arc::new(Gauge {
        now: AtomicUsize::new(0),
        max: AtomicUsize::new(0),
    });
    let mut registry =
        DefaultToolRegistry::new(None).with_config(RegistryConfig::default().max_concurrency(5));
    registry.register(Probe(Arc::clone(&gauge))).unwrap();
    let calls = (0..100).map(|i| call(i, "probe")).collect();
    let results = registry
        .execute_parallel(calls, &ExecutionContext::new("s", none_policy(), "/tmp"))
        .await;
    assert!(results.iter().all(|r| r.result.is_ok()));
    let max = gauge.max.load(Ordering::SeqCst);
    assert!((2..=5).contains(&max), "max concurrency was {max}");
}

#[tokio::test]
async fn cancellation_stops_running_and_pending_calls() {
    let mut registry =
        DefaultToolRegistry::new(None).with_config(RegistryConfig::default().max_concurrency(1));
    let slow = TestTool::new(
        "slow",
        ToolCapabilities::none(),
        Behaviour::Sleep(Duration::from_secs(60)),
    );
    let runs = Arc::clone(&slow.runs);
    registry.register(slow).unwrap();
    let token = CancellationToken::new();
    let ctx = ExecutionContext::new("s", none_policy(), "/tmp").with_cancellation(token.clone());
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        token.cancel();
    });
    let results = registry
        .execute_parallel(vec![call(0, "slow"), call(1, "slow")], &ctx)
        .await;
    canceller.await.unwrap();
    assert_eq!(results[0].result.code(), Some(ErrorCode::Cancelled));
    assert_eq!(results[1].result.code(), Some(ErrorCode::Cancelled));
    assert_eq!(
        results[1].result.error_message(),
        Some("the batch was cancelled before the call started")
    );
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "the pending call never started"
    );
}

// guarantee: G-REG-06
#[tokio::test]
async fn context_timeout_overrides_registry_timeout() {
    let mut registry = DefaultToolRegistry::new(None);
    registry
        .register(TestTool::new(
            "slow",
            ToolCapabilities::none(),
            Behaviour::Sleep(Duration::from_secs(60)),
        ))
        .unwrap();
    let ctx =
        ExecutionContext::new("s", none_policy(), "/tmp").with_timeout(Duration::from_millis(10));
    let r = registry.execute(call(0, "slow"), &ctx).await;
    assert_eq!(r.result.code(), Some(ErrorCode::Timeout));
    assert_eq!(
        r.result.error_message(),
        Some("tool slow timed out after 10ms")
    );
}

// guarantee: G-REG-06
#[tokio::test]
async fn panic_is_contained_and_reported() {
    let mut registry = DefaultToolRegistry::new(None);
    registry
        .register(TestTool::new(
            "panicky",
            ToolCapabilities::none(),
            Behaviour::Panic,
        ))
        .unwrap();
    registry
        .register(TestTool::new(
            "echo",
            ToolCapabilities::none(),
            Behaviour::Echo,
        ))
        .unwrap();
    let ctx = ExecutionContext::new("s", none_policy(), "/tmp");
    let r = registry
        .execute_parallel(vec![call(0, "panicky"), call(1, "echo")], &ctx)
        .await;
    assert_eq!(r[0].result.code(), Some(ErrorCode::ExecutionFailed));
    assert_eq!(
        r[0].result.error_message(),
        Some("tool panicky panicked: boom from panicky")
    );
    assert!(r[1].result.is_ok(), "the registry goes on");
}

#[tokio::test]
async fn result_budget_truncates_values() {
    let mut registry = DefaultToolRegistry::new(None)
        .with_config(RegistryConfig::default().result_budget(Some(8)));
    registry
        .register(TestTool::new(
            "echo",
            ToolCapabilities::none(),
            Behaviour::Echo,
        ))
        .unwrap();
    let ctx = ExecutionContext::new("s", none_policy(), "/tmp");
    let r = registry
        .execute(ToolCall::new("0", "echo", json!("0123456789abcdef")), &ctx)
        .await;
    assert_eq!(
        r.result,
        ToolResult::Ok(json!("01234567…[truncated: 8 of 16 bytes omitted]"))
    );
}

#[derive(Debug)]
struct BrokenSink;
impl AuditSink for BrokenSink {
    fn record(&self, _: &AuditEvent) -> Result<(), AuditError> {
        Err(AuditError::new("disk full"))
    }
}

// guarantee: G-REG-05
#[tokio::test]
async fn a_call_that_cannot_be_audited_does_not_run() {
    let echo = TestTool::new("echo", ToolCapabilities::none(), Behaviour::Echo);
    let runs = Arc::clone(&echo.runs);
    let mut registry = DefaultToolRegistry::new(None).with_audit_sink(Arc::new(BrokenSink));
    registry.register(echo).unwrap();
    let r = registry
        .execute(
            call(0, "echo"),
            &ExecutionContext::new("s", none_policy(), "/tmp"),
        )
        .await;
    assert_eq!(r.result.code(), Some(ErrorCode::NotAvailable));
    assert_eq!(
        r.result.error_message(),
        Some("the call cannot be audited, so it does not run: audit sink failed: disk full")
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

// guarantee: G-REG-01
#[test]
fn registration_refuses_bad_names_duplicates_and_malformed_declarations() {
    let mut registry = DefaultToolRegistry::new(None);
    registry
        .register(TestTool::new(
            "echo",
            ToolCapabilities::none(),
            Behaviour::Echo,
        ))
        .unwrap();
    assert_eq!(
        registry.register(TestTool::new(
            "echo",
            ToolCapabilities::none(),
            Behaviour::Echo
        )),
        Err(RegistryError::DuplicateTool("echo".into()))
    );
    for bad in ["", "Echo", "has space", "a/b"] {
        let name: &'static str = Box::leak(bad.to_owned().into_boxed_str());
        assert_eq!(
            registry.register(TestTool::new(
                name,
                ToolCapabilities::none(),
                Behaviour::Echo
            )),
            Err(RegistryError::InvalidName(bad.into()))
        );
    }
    let cases = [
        (
            ToolCapabilities::none().with_network(["*.com"]),
            "single-label",
        ),
        (
            ToolCapabilities::none().with_network(["https://x.example.com"]),
            "scheme",
        ),
        (
            ToolCapabilities::none().with_fs_read(FsPaths::Paths(vec!["rel".into()])),
            "not absolute",
        ),
        (
            ToolCapabilities::none().with_process(["../bin/sh"]),
            "bare name or an absolute path",
        ),
    ];
    for (caps, needle) in cases {
        let err = registry
            .register(TestTool::new("bad", caps, Behaviour::Echo))
            .unwrap_err();
        assert!(
            matches!(&err, RegistryError::InvalidDeclaration { tool, .. } if tool == "bad"),
            "{err}"
        );
        assert!(err.to_string().contains(needle), "{err}");
    }
}

#[test]
fn without_a_runtime_every_call_is_refused() {
    use std::future::Future;
    use std::task::{Context, Poll, Wake, Waker};
    struct Noop;
    impl Wake for Noop {
        fn wake(self: Arc<Self>) {}
    }
    let mut registry = DefaultToolRegistry::new(None);
    let echo = TestTool::new("echo", ToolCapabilities::none(), Behaviour::Echo);
    let runs = Arc::clone(&echo.runs);
    registry.register(echo).unwrap();
    let ctx = ExecutionContext::new("s", none_policy(), "/tmp");
    let mut fut = Box::pin(registry.execute_parallel(vec![call(0, "echo")], &ctx));
    let waker = Waker::from(Arc::new(Noop));
    let Poll::Ready(results) = fut.as_mut().poll(&mut Context::from_waker(&waker)) else {
        panic!("expected an immediate refusal");
    };
    assert_eq!(results[0].result.code(), Some(ErrorCode::NotAvailable));
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

// guarantee: G-REG-15
#[tokio::test]
async fn audit_arguments_are_opt_in_and_masked() {
    let call_args = json!({"query": "status", "api_token": "sk-live-1", "nested": {"SSN": "123-45", "Cookie": "c"}});
    for (enabled, expected) in [
        (false, None),
        (
            true,
            Some(
                json!({"query": "status", "api_token": "***", "nested": {"SSN": "***", "Cookie": "***"}}),
            ),
        ),
    ] {
        let audit = Arc::new(MemoryAuditSink::new());
        let mut registry = DefaultToolRegistry::new(None)
            .with_config(
                RegistryConfig::default()
                    .audit_arguments(enabled)
                    .sensitive_keys(["ssn"]),
            )
            .with_audit_sink(audit.clone());
        registry
            .register(TestTool::new(
                "echo",
                ToolCapabilities::none(),
                Behaviour::Echo,
            ))
            .unwrap();
        let ctx = ExecutionContext::new("s", none_policy(), "/tmp");
        registry
            .execute(ToolCall::new("1", "echo", call_args.clone()), &ctx)
            .await;
        registry
            .execute(ToolCall::new("2", "ghost", call_args.clone()), &ctx)
            .await;
        let events = audit.events();
        let called = events
            .iter()
            .find(|e| e.event == AuditKind::ToolCalled)
            .unwrap();
        let denied = events
            .iter()
            .find(|e| e.event == AuditKind::ToolDenied)
            .unwrap();
        assert_eq!(called.arguments, expected);
        assert_eq!(denied.arguments, expected);
        assert!(
            events
                .iter()
                .filter(|e| e.event == AuditKind::ToolCompleted)
                .all(|e| e.arguments.is_none())
        );
    }
}

#[test]
fn the_json_lines_sink_syncs_per_event_when_asked() {
    use capability_core::{DurableWrite, FsyncPolicy, JsonLinesAuditSink};
    #[derive(Default)]
    struct Counting {
        bytes: Vec<u8>,
        syncs: usize,
    }
    impl std::io::Write for Counting {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.bytes.extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    impl DurableWrite for Counting {
        fn sync_data(&mut self) -> std::io::Result<()> {
            self.syncs += 1;
            Ok(())
        }
    }
    for (policy, syncs) in [(FsyncPolicy::Flush, 0), (FsyncPolicy::EveryEvent, 3)] {
        let sink = JsonLinesAuditSink::with_policy(Counting::default(), policy);
        for _ in 0..3 {
            sink.record(&sample_event()).unwrap();
        }
        let inner = sink.into_inner();
        assert_eq!(inner.syncs, syncs, "{policy:?}");
        assert_eq!(String::from_utf8(inner.bytes).unwrap().lines().count(), 3);
    }
}

fn sample_event() -> capability_core::AuditEvent {
    serde_json::from_value(json!({"timestamp_ms": 1, "event": "tool_called", "session_id": "s", "personality_id": null, "call_id": "c", "tool": "t"})).unwrap()
}

/// A current-thread runtime (where a batch runs in the caller's task) and a multi-thread one
/// (where its calls run in tasks of their own), named.
fn both_runtimes() -> [(&'static str, tokio::runtime::Runtime); 2] {
    let build = |b: &mut tokio::runtime::Builder| b.enable_all().build().unwrap();
    [
        (
            "current",
            build(&mut tokio::runtime::Builder::new_current_thread()),
        ),
        (
            "multi",
            build(tokio::runtime::Builder::new_multi_thread().worker_threads(2)),
        ),
    ]
}

/// A sink that panics on the event it is handed (`at`: the first event of that kind).
#[derive(Debug)]
struct PanickingSink {
    at: AuditKind,
}
impl AuditSink for PanickingSink {
    fn record(&self, event: &AuditEvent) -> Result<(), AuditError> {
        if event.event == self.at {
            panic!("the sink's disk caught fire");
        }
        Ok(())
    }
}

// guarantee: G-REG-05
/// A sink that panics is a sink that failed: a call whose start cannot be recorded does not run,
/// one whose end cannot be recorded still gets its result, and the panic reaches neither the
/// caller nor the batch's other calls, in a batch of one, in a batch of several, and on a
/// multi-thread runtime.
#[test]
fn a_sink_that_panics_fails_its_call_and_nothing_else() {
    for (flavour, runtime) in both_runtimes() {
        for at in [AuditKind::ToolCalled, AuditKind::ToolCompleted] {
            for n in [1usize, 3] {
                let echo = TestTool::new("echo", ToolCapabilities::none(), Behaviour::Echo);
                let runs = Arc::clone(&echo.runs);
                let mut registry =
                    DefaultToolRegistry::new(None).with_audit_sink(Arc::new(PanickingSink { at }));
                registry.register(echo).unwrap();
                let ctx = ExecutionContext::new("s", none_policy(), "/tmp");
                let calls: Vec<ToolCall> = (0..n).map(|i| call(i, "echo")).collect();
                let results = runtime.block_on(registry.execute_parallel(calls, &ctx));
                assert_eq!(results.len(), n, "{flavour} {at:?} {n}");
                for r in &results {
                    match at {
                        AuditKind::ToolCalled => {
                            assert_eq!(
                                r.result.code(),
                                Some(ErrorCode::NotAvailable),
                                "{flavour} {n}"
                            );
                            assert!(
                                r.result
                                    .error_message()
                                    .is_some_and(|m| m.contains("cannot be audited")),
                                "{:?}",
                                r.result
                            );
                        }
                        _ => assert!(r.result.is_ok(), "{flavour} {n}: {:?}", r.result),
                    }
                }
                let ran = if at == AuditKind::ToolCalled { 0 } else { n };
                assert_eq!(runs.load(Ordering::SeqCst), ran, "{flavour} {at:?} {n}");
            }
        }
    }
}

/// A backend whose factory panics when asked for a scoped object.
#[derive(Debug)]
struct PanickingFs;
impl capability_types::backend::FsFactory for PanickingFs {
    fn scoped_fs(
        &self,
        _: capability_types::backend::FsGrant,
    ) -> Result<Arc<dyn capability_types::ScopedFs>, capability_types::CapabilityError> {
        panic!("the backend's mount went away");
    }
}

// guarantee: G-REG-06
/// A backend that panics while a call's scoped objects are made fails that call (a backend is
/// the host's code, as a tool is): the panic reaches neither the caller nor the batch's other
/// calls, in a batch of one, in a batch of several, and on a multi-thread runtime.
#[test]
fn a_backend_that_panics_fails_its_call_and_nothing_else() {
    for (flavour, runtime) in both_runtimes() {
        for n in [1usize, 3] {
            let (backends, _) = recording_backends();
            let reads = TestTool::new(
                "reads",
                ToolCapabilities::none().with_fs_read(FsPaths::FromPersonality),
                Behaviour::Echo,
            );
            let echo = TestTool::new("echo", ToolCapabilities::none(), Behaviour::Echo);
            let (read_runs, echo_runs) = (Arc::clone(&reads.runs), Arc::clone(&echo.runs));
            let mut registry =
                DefaultToolRegistry::new(Some(backends.with_fs(Arc::new(PanickingFs))));
            registry.register(reads).unwrap();
            registry.register(echo).unwrap();
            let ctx = ExecutionContext::new(
                "s",
                policy("id = \"p\"\n[fs_reach]\nread = [\"/srv\"]\n"),
                "/srv",
            );
            let mut calls: Vec<ToolCall> = (0..n).map(|i| call(i, "reads")).collect();
            calls.push(call(n, "echo"));
            let results = runtime.block_on(registry.execute_parallel(calls, &ctx));
            assert_eq!(results.len(), n + 1, "{flavour} {n}");
            for r in &results[..n] {
                assert!(!r.result.is_ok(), "{flavour} {n}: {:?}", r.result);
                assert!(
                    r.result
                        .error_message()
                        .is_some_and(|m| m.contains("mount went away")),
                    "{flavour} {n}: {:?}",
                    r.result
                );
            }
            assert!(
                results[n].result.is_ok(),
                "{flavour} {n}: {:?}",
                results[n].result
            );
            assert_eq!(read_runs.load(Ordering::SeqCst), 0, "{flavour} {n}");
            assert_eq!(echo_runs.load(Ordering::SeqCst), 1, "{flavour} {n}");
        }
    }
}
