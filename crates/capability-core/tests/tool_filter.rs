//! Per-call tool filters through the registry (docs/policy.md, "Per-call tool filters"): a
//! framework narrows the toolset for one batch; a filtered tool never runs, is refused with its
//! own code, and the filter is in every audit event of the batch.

mod support;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use capability_core::{
    Admission, AuditKind, DefaultToolRegistry, ExecutionContext, MemoryAuditSink, ToolCall,
    ToolFilter,
};
use capability_types::{DenialCode, ToolCapabilities};
use serde_json::json;
use support::{Behaviour, TestTool, policy};

const PERSONALITY: &str = r#"
id = "p"
toolset = ["read_file", "list_dir", "write_file", "mcp__gh__get_issue", "mcp__gh__create_issue", "mcp__linear__list"]
"#;

/// A registry of echo tools: the personality's toolset plus one tool outside it.
fn registry() -> (
    DefaultToolRegistry,
    Vec<Arc<std::sync::atomic::AtomicUsize>>,
    Arc<MemoryAuditSink>,
) {
    let sink = Arc::new(MemoryAuditSink::new());
    let mut registry = DefaultToolRegistry::new(None).with_audit_sink(sink.clone());
    let mut runs = Vec::new();
    for name in [
        "read_file",
        "list_dir",
        "write_file",
        "mcp__gh__get_issue",
        "mcp__gh__create_issue",
        "mcp__linear__list",
        "outside_toolset",
    ] {
        let tool = TestTool::new(name, ToolCapabilities::none(), Behaviour::Echo);
        runs.push(Arc::clone(&tool.runs));
        registry.register(tool).unwrap();
    }
    (registry, runs, sink)
}

fn outcome(result: &capability_core::ToolCallResult) -> String {
    result
        .result
        .error_message()
        .map_or_else(|| "ok".to_owned(), str::to_owned)
}

// guarantee: G-REG-12
#[tokio::test]
async fn a_filter_narrows_the_toolset_with_its_own_code_and_is_audited() {
    let (registry, runs, sink) = registry();
    let filter = ToolFilter::from_json(
        r#"{"allowedTools": ["read_*", "list_dir", "outside_*"],
            "allowedMcpServers": ["gh"],
            "allowedMcpTools": {"gh": ["get_*"]}}"#,
    )
    .unwrap();
    let ctx = ExecutionContext::new("s", policy(PERSONALITY), "/tmp").with_tool_filter(filter);
    let names = [
        "read_file",
        "list_dir",
        "write_file",
        "mcp__gh__get_issue",
        "mcp__gh__create_issue",
        "mcp__linear__list",
        "outside_toolset",
    ];
    let calls: Vec<ToolCall> = names
        .iter()
        .enumerate()
        .map(|(i, n)| ToolCall::new(i.to_string(), *n, json!({})))
        .collect();
    // The batch path and the batch-of-one path answer the same.
    let batch: Vec<String> = registry
        .execute_parallel(calls.clone(), &ctx)
        .await
        .iter()
        .map(outcome)
        .collect();
    let mut single = Vec::new();
    for call in calls.clone() {
        single.push(outcome(&registry.execute(call, &ctx).await));
    }
    assert_eq!(batch, single);
    assert_eq!(
        batch,
        [
            "ok",
            "ok",
            r#"TOOL_FILTERED_OUT: write_file is not matched by allowedTools ["read_*", "list_dir", "outside_*"]"#,
            "ok",
            r#"TOOL_FILTERED_OUT: create_issue is not matched by allowedMcpTools[gh] ["get_*"]"#,
            r#"TOOL_FILTERED_OUT: MCP server linear is not matched by allowedMcpServers ["gh"]"#,
            // The toolset comes first: a filter cannot let in what the personality leaves out.
            "TOOL_NOT_IN_TOOLSET: outside_toolset is not in the toolset of personality p",
        ]
    );
    let ran: Vec<usize> = runs.iter().map(|r| r.load(Ordering::SeqCst)).collect();
    assert_eq!(ran, [2, 2, 0, 2, 0, 0, 0], "a refused tool never runs");
    // The dry run agrees with the call.
    for call in &calls {
        let dry = match registry.admission(call, &ctx) {
            Admission::Refused { message, .. } => message,
            _ => "ok".to_owned(),
        };
        assert_eq!(
            dry,
            single[call.id.parse::<usize>().unwrap()],
            "{}",
            call.tool
        );
    }
    // Every event names the filter; a denial carries the code.
    let events = sink.events();
    assert!(!events.is_empty());
    assert!(events.iter().all(|e| e.tool_filter.is_some()));
    let denied: Vec<_> = events
        .iter()
        .filter(|e| e.event == AuditKind::ToolDenied && e.tool == "write_file")
        .collect();
    assert_eq!(denied.len(), 2);
    assert_eq!(denied[0].denial_code, Some(DenialCode::ToolFilteredOut));
    let line = serde_json::to_string(denied[0]).unwrap();
    assert!(
        line.contains(r#""tool_filter":[{"allowedTools":["read_*","list_dir","outside_*"]"#),
        "{line}"
    );
    // Without a filter, nothing about one is recorded.
    let plain = ExecutionContext::new("s", policy(PERSONALITY), "/tmp");
    let before = sink.events().len();
    registry
        .execute(ToolCall::new("x", "write_file", json!({})), &plain)
        .await;
    assert!(
        sink.events()[before..]
            .iter()
            .all(|e| e.tool_filter.is_none())
    );
}

// guarantee: G-REG-12
#[tokio::test]
async fn a_second_filter_cannot_widen_the_first() {
    let (registry, _, _) = registry();
    let narrow = ToolFilter::new().allowed_tools(["read_file"]).unwrap();
    let wide = ToolFilter::new().allowed_tools(["*"]).unwrap();
    let ctx = ExecutionContext::new("s", policy(PERSONALITY), "/tmp")
        .with_tool_filter(narrow)
        .with_tool_filter(wide);
    let r = registry
        .execute(ToolCall::new("1", "list_dir", json!({})), &ctx)
        .await;
    assert_eq!(
        outcome(&r),
        r#"TOOL_FILTERED_OUT: list_dir is not matched by allowedTools ["read_file"]"#
    );
    let r = registry
        .execute(ToolCall::new("2", "read_file", json!({})), &ctx)
        .await;
    assert_eq!(outcome(&r), "ok");
    // An empty list lets nothing through.
    let none = ExecutionContext::new("s", policy(PERSONALITY), "/tmp").with_tool_filter(
        ToolFilter::new()
            .allowed_tools(Vec::<String>::new())
            .unwrap(),
    );
    let r = registry
        .execute(ToolCall::new("3", "read_file", json!({})), &none)
        .await;
    assert!(outcome(&r).starts_with("TOOL_FILTERED_OUT"));
}

// guarantee: G-POL-05
/// A toolset entry `mcp__<server>__*` (what an Ethos `mcp_servers` list becomes) admits every
/// tool of that server and nothing else.
#[tokio::test]
async fn a_server_entry_in_the_toolset_admits_that_servers_tools_only() {
    let (registry, _, _) = registry();
    let ctx = ExecutionContext::new(
        "s",
        policy("id = \"p\"\ntoolset = [\"read_file\", \"mcp__gh__*\"]\n"),
        "/tmp",
    );
    let results: Vec<String> = registry
        .execute_parallel(
            [
                "mcp__gh__get_issue",
                "mcp__gh__create_issue",
                "mcp__linear__list",
                "list_dir",
            ]
            .iter()
            .map(|t| ToolCall::new(*t, *t, json!({})))
            .collect(),
            &ctx,
        )
        .await
        .iter()
        .map(outcome)
        .collect();
    assert_eq!(results[..2], ["ok", "ok"]);
    assert!(results[2].starts_with("TOOL_NOT_IN_TOOLSET"));
    assert!(results[3].starts_with("TOOL_NOT_IN_TOOLSET"));
    for bad in ["mcp__*", "mcp__gh__x*", "mcp__a__b__*", "*"] {
        let text = format!("id = \"p\"\ntoolset = [\"{bad}\"]\n");
        assert!(
            capability_core::CompiledPolicy::load(&text, capability_core::PolicyFormat::Toml, None)
                .is_err(),
            "{bad}"
        );
    }
}
