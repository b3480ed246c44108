//! Per-call tool filters over MCP (docs/mcp.md, "Per-call tool filters"): a server-wide filter
//! narrows `tools/list` and `tools/call`; a client's `_meta` filter narrows one call further;
//! neither can widen; a malformed one is invalid params and nothing runs.
#![allow(clippy::disallowed_methods, reason = "tests build fixture files")]

mod common;

use capability_core::{AuditKind, ToolFilter};
use common::{Raw, Scratch, server, text};
use serde_json::{Value, json};

async fn call_with_meta(raw: &mut Raw, id: i64, tool: &str, args: Value, meta: Value) -> Value {
    raw.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": tool, "arguments": args, "_meta": meta}}))
        .await;
    raw.response(id).await.0
}

// guarantee: G-MCP-09
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_filter_narrows_the_listing_and_the_calls() {
    let scratch = Scratch::new();
    let (server, audit) = server(&scratch).await;
    let server = server
        .with_tool_filter(
            ToolFilter::new()
                .allowed_tools(["read_*", "list_dir", "kv_*"])
                .unwrap(),
        )
        // A second filter narrows the first; it cannot bring write_file back.
        .with_tool_filter(
            ToolFilter::new()
                .allowed_tools(["read_file", "list_dir", "write_file"])
                .unwrap(),
        );
    let mut raw = Raw::initialized(&server, false).await;
    raw.send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .await;
    let (list, _) = raw.response(1).await;
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, ["list_dir", "read_file"]);

    let (ok, _) = raw.call(2, "read_file", json!({"path": "notes.md"})).await;
    assert_eq!(ok["result"]["isError"], false, "{ok}");
    assert!(text(&ok).contains("hello from notes"));

    let (refused, _) = raw
        .call(3, "write_file", json!({"path": "x.md", "content": "no"}))
        .await;
    assert_eq!(refused["result"]["isError"], true);
    assert!(
        text(&refused).starts_with("TOOL_FILTERED_OUT: write_file is not matched by allowedTools"),
        "{refused}"
    );
    assert!(
        !scratch.work.join("x.md").exists(),
        "a filtered tool never runs"
    );

    // The client narrows one call further with `_meta`; it cannot widen.
    let narrowed = call_with_meta(
        &mut raw,
        4,
        "read_file",
        json!({"path": "notes.md"}),
        json!({"toolcap/toolFilter": {"allowedTools": ["list_dir"]}}),
    )
    .await;
    assert!(
        text(&narrowed).starts_with("TOOL_FILTERED_OUT: read_file"),
        "{narrowed}"
    );
    let widened = call_with_meta(
        &mut raw,
        5,
        "write_file",
        json!({"path": "y.md", "content": "no"}),
        json!({"toolcap/toolFilter": {"allowedTools": ["*"]}}),
    )
    .await;
    assert!(
        text(&widened).starts_with("TOOL_FILTERED_OUT: write_file"),
        "{widened}"
    );
    assert!(!scratch.work.join("y.md").exists());
    // The next call without `_meta` is back to the server's filter only.
    let (again, _) = raw.call(6, "read_file", json!({"path": "notes.md"})).await;
    assert_eq!(again["result"]["isError"], false, "{again}");

    // Hostile `_meta` filters: invalid params, and nothing runs.
    for (id, bad) in [
        (7, json!({"allowedTool": ["read_file"]})),
        (8, json!({"allowedTools": "read_file"})),
        (9, json!({"allowedTools": ["read file"]})),
        (10, json!({"allowedTools": [""]})),
        (11, json!(["read_file"])),
        (12, json!(null)),
    ] {
        let r = call_with_meta(
            &mut raw,
            id,
            "write_file",
            json!({"path": "z.md", "content": "no"}),
            json!({"toolcap/toolFilter": bad}),
        )
        .await;
        assert_eq!(r["error"]["code"], -32602, "{bad}: {r}");
        assert!(
            r["error"]["message"]
                .as_str()
                .unwrap()
                .contains("toolcap/toolFilter"),
            "{r}"
        );
    }
    assert!(!scratch.work.join("z.md").exists());

    // The filter is in the audit record of every call made under it.
    let events = audit.events();
    assert!(events.iter().all(|e| e.tool_filter.is_some()));
    assert!(events.iter().any(|e| e.event == AuditKind::ToolDenied
        && e.denial_code == Some(capability_types::DenialCode::ToolFilteredOut)));
}
