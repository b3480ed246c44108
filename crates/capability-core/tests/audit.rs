//! Audit events reach `tracing` (target `toolcap::audit`) and the sink, and never carry a
//! secret. Alone in its own test binary because it installs a global subscriber.

mod support;

use std::sync::Arc;

use capability_core::{DefaultToolRegistry, ExecutionContext, ToolCall};
use capability_types::{ErrorCode, ToolCapabilities};
use serde_json::json;
use support::policy;
/// A `tracing` writer that keeps everything written to it.
#[derive(Clone, Default)]
struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);
impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "current_thread")]
async fn every_decision_reaches_tracing_and_no_secret_reaches_the_audit() {
    use capability_core::JsonLinesAuditSink;
    const SECRET: &str = "sk-live-THIS-MUST-NOT-LEAK";
    struct Leaky;
    #[capability_types::async_trait]
    impl capability_types::Tool for Leaky {
        fn name(&self) -> &str {
            "leaky"
        }
        fn description(&self) -> &str {
            "puts a secret in its error and its panic"
        }
        fn input_schema(&self) -> serde_json::Value {
            json!({})
        }
        fn capabilities(&self) -> ToolCapabilities {
            ToolCapabilities::none()
        }
        async fn execute(
            &self,
            args: serde_json::Value,
            _: &capability_types::ToolContext,
        ) -> Result<serde_json::Value, capability_types::CapabilityError> {
            if args["panic"] == json!(true) {
                support::quiet_deliberate_panics();
                panic!("boom from leaky {SECRET}");
            }
            Err(capability_types::CapabilityError::failed(format!(
                "upstream said {SECRET}"
            )))
        }
    }
    let logs = Captured::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .finish();
    // Global, and alone in this test binary: a thread-local default races with tracing's
    // per-callsite interest cache when other tests run beside it.
    tracing::subscriber::set_global_default(subscriber).unwrap();

    let sink = Arc::new(JsonLinesAuditSink::new(Vec::new()));
    let mut registry = DefaultToolRegistry::new(None).with_audit_sink(sink.clone());
    registry.register(Leaky).unwrap();
    let ctx = ExecutionContext::new("s", policy("id = \"p\"\ntoolset = [\"leaky\"]\n"), "/tmp");
    let calls = vec![
        ToolCall::new("1", "leaky", json!({"token": SECRET})),
        ToolCall::new("2", "leaky", json!({"panic": true, "token": SECRET})),
        ToolCall::new("3", "ghost", json!({"token": SECRET})),
    ];
    let results = registry.execute_parallel(calls, &ctx).await;
    assert_eq!(results[0].result.code(), Some(ErrorCode::ExecutionFailed));
    assert_eq!(results[1].result.code(), Some(ErrorCode::ExecutionFailed));
    assert_eq!(results[2].result.code(), Some(ErrorCode::NotAvailable));
    drop(registry);

    let traced = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    let audit_lines = traced
        .lines()
        .filter(|l| l.contains("toolcap::audit"))
        .count();
    assert_eq!(
        audit_lines, 5,
        "called+completed for two calls, denied for one:\n{traced}"
    );
    assert!(
        traced.contains("tool_denied")
            && traced.contains("tool_called")
            && traced.contains("tool_completed")
    );
    let audit = String::from_utf8(Arc::try_unwrap(sink).unwrap().into_inner()).unwrap();
    assert_eq!(audit.lines().count(), 5);
    assert!(
        !traced.contains(SECRET),
        "a secret reached tracing:\n{traced}"
    );
    assert!(
        !audit.contains(SECRET),
        "a secret reached the audit file:\n{audit}"
    );
}
