//! `McpServer` from the client's side: listing, calls, refusals, approval, cancellation,
//! progress and sessions, over a pipe with raw JSON-RPC (docs/mcp.md).
#![allow(clippy::disallowed_methods, reason = "tests build fixture files")]

mod common;

use std::time::Duration;

use capability_core::AuditKind;
use common::{CANARY, Raw, Scratch, eventually, processes_with, server, text};
use serde_json::json;

// guarantee: G-MCP-01
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_list_is_the_toolset_with_schemas_and_annotations() {
    let scratch = Scratch::new();
    let (server, _) = server(&scratch).await;
    let mut raw = Raw::initialized(&server, false).await;
    raw.send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .await;
    let (list, _) = raw.response(1).await;
    let tools = list["result"]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    // The personality's toolset, not every registered tool (fetch_url, kv_delete and kv_list
    // are registered but not in it), sorted by name.
    assert_eq!(
        names,
        [
            "kv_get",
            "kv_set",
            "list_dir",
            "read_file",
            "run_command",
            "write_file"
        ]
    );
    let by_name = |n: &str| tools.iter().find(|t| t["name"] == n).unwrap().clone();
    let read = by_name("read_file");
    assert_eq!(read["inputSchema"]["type"], "object");
    assert_eq!(read["inputSchema"]["required"], json!(["path"]));
    assert_eq!(read["inputSchema"]["additionalProperties"], false);
    assert_eq!(read["annotations"]["readOnlyHint"], true);
    assert_eq!(read["annotations"]["destructiveHint"], false);
    assert_eq!(read["annotations"]["openWorldHint"], false);
    let write = by_name("write_file");
    assert_eq!(write["annotations"]["readOnlyHint"], false);
    assert_eq!(write["annotations"]["destructiveHint"], true);
    let run = by_name("run_command");
    assert_eq!(run["annotations"]["destructiveHint"], true);
    assert_eq!(run["annotations"]["openWorldHint"], true);
    assert_eq!(
        run["inputSchema"]["properties"]["timeout_ms"]["minimum"], 1,
        "generated from the argument type, with its range"
    );
}

// guarantee: G-MCP-15
/// A client may ask no approval for a tool it is told is read-only. A tool that reaches the
/// network can change what lies at the other end (a `POST`, a guarded GitHub server's
/// `merge_pull_request`, which declares hosts and nothing else), so it is not read-only and may
/// be destructive; a tool that only reads files is read-only; each kind of effect a
/// declaration names takes the hint away.
#[test]
fn a_tool_that_reaches_the_network_is_not_called_read_only() {
    use capability_types::{FsPaths, ToolCapabilities};
    let hints = |caps: &ToolCapabilities| {
        let a = capability_mcp::tool_annotations(caps);
        (a.read_only_hint, a.destructive_hint, a.open_world_hint)
    };
    assert_eq!(
        hints(&ToolCapabilities::none().with_network(["api.github.com"])),
        (Some(false), Some(true), Some(true))
    );
    assert_eq!(
        hints(
            &ToolCapabilities::none()
                .with_network(["*"])
                .with_fs_read(FsPaths::FromPersonality)
        ),
        (Some(false), Some(true), Some(true))
    );
    assert_eq!(
        hints(&ToolCapabilities::none().with_fs_read(FsPaths::FromPersonality)),
        (Some(true), Some(false), Some(false))
    );
    assert_eq!(
        hints(&ToolCapabilities::none()),
        (Some(true), Some(false), Some(false))
    );
    for caps in [
        ToolCapabilities::none().with_fs_write(FsPaths::FromPersonality),
        ToolCapabilities::none().with_process(["git"]),
    ] {
        assert_eq!(hints(&caps).0, Some(false), "{caps:?}");
    }
}

// guarantee: G-MCP-01
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_run_through_the_registry_and_refusals_carry_their_code() {
    let scratch = Scratch::new();
    let (server, audit) = server(&scratch).await;
    let mut raw = Raw::initialized(&server, false).await;
    let (ok, _) = raw.call(1, "read_file", json!({"path": "notes.md"})).await;
    assert_eq!(ok["result"]["isError"], false, "{ok}");
    assert_eq!(text(&ok), "hello from notes\n");

    let canary = scratch.canary.display().to_string();
    let mut seen = String::new();
    for (id, path) in [
        (2, canary.clone()),
        (3, "../canary.txt".to_owned()),
        (4, "/proc/self/environ".to_owned()),
    ] {
        let (refused, other) = raw.call(id, "read_file", json!({"path": path})).await;
        assert_eq!(refused["result"]["isError"], true, "{refused}");
        assert!(
            text(&refused).starts_with("PATH_NOT_REACHABLE: "),
            "{refused}"
        );
        seen.push_str(&refused.to_string());
        for o in other {
            seen.push_str(&o.to_string());
        }
    }
    assert!(!seen.contains(CANARY), "the canary leaked: {seen}");

    let (bad, _) = raw.call(5, "read_file", json!({"path": 7})).await;
    assert_eq!(bad["result"]["isError"], true);
    assert!(text(&bad).starts_with("INPUT_INVALID: "), "{bad}");

    let (unknown, _) = raw.call(6, "no_such_tool", json!({})).await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    assert_eq!(unknown["error"]["message"], "unknown tool \"no_such_tool\"");
    // guarantee: G-REG-16
    // An error repeats no megabyte of what it was given: not an unknown tool's name, not a path.
    let huge = "n".repeat(1 << 20);
    let (unknown, _) = raw.call(61, &huge, json!({})).await;
    let message = unknown["error"]["message"].as_str().unwrap();
    assert!(message.len() < 400, "{} bytes", message.len());
    assert!(message.starts_with("unknown tool \"nnnn"), "{message}");
    assert!(message.ends_with(" more bytes not shown)\""), "{message}");
    let (refused, _) = raw
        .call(62, "read_file", json!({"path": format!("/etc/{huge}")}))
        .await;
    assert!(
        text(&refused).len() <= 8 * 1024,
        "{} bytes",
        text(&refused).len()
    );
    assert!(
        text(&refused).starts_with("PATH_NOT_REACHABLE: read not permitted for /etc/nnnn"),
        "{refused}"
    );

    // Registered but outside the toolset: a refusal the model can read, not a protocol error.
    let (outside, _) = raw.call(7, "kv_list", json!({})).await;
    assert!(
        text(&outside).starts_with("TOOL_NOT_IN_TOOLSET: "),
        "{outside}"
    );

    let events = audit.events();
    let session = &events[0].session_id;
    assert!(session.starts_with("mcp-"), "{session}");
    assert!(events.iter().all(|e| &e.session_id == session));
    assert!(
        events
            .iter()
            .any(|e| e.event == AuditKind::ToolDenied && e.tool == "read_file")
    );
}

// guarantee: G-MCP-02
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_escalated_call_asks_the_client_and_runs_only_on_approval() {
    let scratch = Scratch::new();
    std::fs::create_dir(scratch.work.join("ask")).unwrap();
    let (server, audit) = server(&scratch).await;
    let mut raw = Raw::initialized(&server, true).await;

    for (id, file, answer, runs) in [
        (
            1,
            "yes.txt",
            json!({"action": "accept", "content": {"approve": true}}),
            true,
        ),
        (
            2,
            "no.txt",
            json!({"action": "accept", "content": {"approve": false}}),
            false,
        ),
        (3, "declined.txt", json!({"action": "decline"}), false),
        (4, "cancelled.txt", json!({"action": "cancel"}), false),
    ] {
        raw.send(
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "write_file", "arguments": {"path": format!("ask/{file}"), "content": "x"}}}),
        )
        .await;
        let ask = raw.recv().await.unwrap();
        assert_eq!(ask["method"], "elicitation/create", "{ask}");
        let message = ask["params"]["message"].as_str().unwrap();
        assert!(message.contains("write_file"), "{message}");
        assert!(message.contains(file), "{message}");
        assert_eq!(
            ask["params"]["requestedSchema"]["properties"]["approve"]["type"],
            "boolean"
        );
        raw.send(json!({"jsonrpc": "2.0", "id": ask["id"], "result": answer}))
            .await;
        let (result, _) = raw.response(id).await;
        let written = scratch.work.join("ask").join(file).exists();
        assert_eq!(written, runs, "{file}: {result}");
        if !runs {
            assert!(
                text(&result).starts_with("ESCALATION_REFUSED: "),
                "{result}"
            );
        }
    }
    let decided: Vec<_> = audit
        .events()
        .into_iter()
        .filter(|e| e.event == AuditKind::EscalationDecided)
        .collect();
    assert_eq!(decided.len(), 4, "every decision is audited");
}

// guarantee: G-MCP-02
/// The client's approval dialog cannot be flooded: a megabyte of arguments is cut short and
/// comes before what the call needs, and a call that needs more than a dialog shows (here 200
/// paths) is refused without asking.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_request_cannot_be_flooded() {
    let scratch = Scratch::new();
    std::fs::create_dir(scratch.work.join("ask")).unwrap();
    let (server, _) = server(&scratch).await;
    let mut raw = Raw::initialized(&server, true).await;
    raw.send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "write_file",
        "arguments": {"path": "ask/flood.txt", "content": "x".repeat(1 << 20)}}}),
    )
    .await;
    let ask = raw.recv().await.unwrap();
    assert_eq!(ask["method"], "elicitation/create", "{ask}");
    let message = ask["params"]["message"].as_str().unwrap();
    assert!(message.len() < 4096, "{} bytes", message.len());
    assert!(message.contains("more bytes not shown"), "{message}");
    assert!(
        message.ends_with("ask/flood.txt"),
        "what it needs comes last: {message}"
    );
    raw.send(json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "decline"}}))
        .await;
    let (result, _) = raw.response(1).await;
    assert!(
        text(&result).starts_with("ESCALATION_REFUSED: "),
        "{result}"
    );

    let ask_dir = scratch.work.join("ask");
    let many: Vec<String> = (0..200)
        .map(|i| ask_dir.join(format!("f{i}.txt")).display().to_string())
        .collect();
    let (result, other) = raw
        .call(
            2,
            "write_file",
            json!({"path": "ask/x.txt", "content": "x", "also": many}),
        )
        .await;
    assert!(
        other.iter().all(|m| m["method"] != "elicitation/create"),
        "{other:?}"
    );
    assert!(text(&result).contains("too many to show"), "{result}");
    assert!(!scratch.work.join("ask/x.txt").exists());
}

// guarantee: G-MCP-02
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_elicitation_an_escalated_call_is_refused() {
    let scratch = Scratch::new();
    std::fs::create_dir(scratch.work.join("ask")).unwrap();
    let (server, _) = server(&scratch).await;
    let mut raw = Raw::initialized(&server, false).await;
    let (result, other) = raw
        .call(
            1,
            "write_file",
            json!({"path": "ask/x.txt", "content": "x"}),
        )
        .await;
    assert!(other.iter().all(|m| m["method"] != "elicitation/create"));
    assert!(
        text(&result).starts_with("ESCALATION_REFUSED: "),
        "{result}"
    );
    assert!(text(&result).contains("elicitation"), "{result}");
    assert!(!scratch.work.join("ask/x.txt").exists());
}

// guarantee: G-MCP-03
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_call_kills_its_child_and_leaves_other_sessions_alone() {
    let scratch = Scratch::new();
    let (server, audit) = server(&scratch).await;
    let mut a = Raw::initialized(&server, false).await;
    let mut b = Raw::initialized(&server, false).await;
    let marker = "31.4159";
    a.send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "run_command", "arguments": {"binary": "sleep", "args": [marker]}}}),
    )
    .await;
    let mut started = false;
    for _ in 0..200 {
        if !processes_with(marker).is_empty() {
            started = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(started, "the child did not start");
    // Session b works while a's call runs.
    let (ok, _) = b.call(1, "read_file", json!({"path": "notes.md"})).await;
    assert_eq!(text(&ok), "hello from notes\n");

    a.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 1, "reason": "user pressed stop"}}),
    )
    .await;
    let mut gone = false;
    for _ in 0..250 {
        if processes_with(marker).is_empty() {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(gone, "the child outlived its cancelled call");
    // b is untouched, and a serves the next call.
    let (ok, _) = b.call(2, "read_file", json!({"path": "notes.md"})).await;
    assert_eq!(text(&ok), "hello from notes\n");
    let (ok, _) = a.call(2, "read_file", json!({"path": "notes.md"})).await;
    assert_eq!(text(&ok), "hello from notes\n");

    // The child is gone as soon as it is killed; the call's record follows it, on the server's
    // own time.
    let completed = |e: &capability_core::AuditEvent| {
        e.tool == "run_command" && e.event == AuditKind::ToolCompleted
    };
    assert!(
        eventually(|| audit.events().iter().any(completed)).await,
        "the cancelled call is audited"
    );
    let events = audit.events();
    let cancelled = events.iter().find(|e| completed(e)).expect("found above");
    assert_eq!(cancelled.code, Some(capability_types::ErrorCode::Cancelled));
    let sessions: std::collections::BTreeSet<_> = events.iter().map(|e| &e.session_id).collect();
    assert_eq!(sessions.len(), 2, "two sessions, two ids: {sessions:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_call_with_a_progress_token_reports_progress() {
    let scratch = Scratch::new();
    let (server, _) = server(&scratch).await;
    let mut raw = Raw::initialized(&server, false).await;
    raw.send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "_meta": {"progressToken": "p-1"},
        "name": "run_command", "arguments": {"binary": "sleep", "args": ["0.4"]}}}),
    )
    .await;
    let (result, before) = raw.response(1).await;
    assert_eq!(result["result"]["isError"], false, "{result}");
    let progress: Vec<_> = before
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    assert!(!progress.is_empty(), "no progress: {before:?}");
    assert!(
        progress
            .iter()
            .all(|p| p["params"]["progressToken"] == "p-1")
    );
    let values: Vec<f64> = progress
        .iter()
        .filter_map(|p| p["params"]["progress"].as_f64())
        .collect();
    assert!(
        values.windows(2).all(|w| w[0] < w[1]),
        "progress increases: {values:?}"
    );

    // Without a token, none.
    let (_, before) = raw
        .call(
            2,
            "run_command",
            json!({"binary": "sleep", "args": ["0.2"]}),
        )
        .await;
    assert!(before.is_empty(), "{before:?}");
}

/// A progress interval too long for the clock (an operator's "never") reports no progress and
/// answers the call: the first tick is put thirty years off instead of overflowing the clock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_progress_interval_too_long_for_the_clock_still_answers_the_call() {
    let scratch = Scratch::new();
    let (server, _) = server(&scratch).await;
    let server = server.with_progress_interval(Duration::MAX);
    let mut raw = Raw::initialized(&server, false).await;
    raw.send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "_meta": {"progressToken": "p-1"},
        "name": "run_command", "arguments": {"binary": "sleep", "args": ["0.1"]}}}),
    )
    .await;
    let (result, before) = raw.response(1).await;
    assert_eq!(result["result"]["isError"], false, "{result}");
    assert!(before.is_empty(), "no progress in thirty years: {before:?}");
}

// guarantee: G-MCP-04
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_of_a_session_run_within_the_registrys_concurrency() {
    // Each MCP request is a batch of one, so the registry's per-batch bound never met two of
    // them: a client could start a child per request it sent. The server applies the bound
    // across them.
    let scratch = Scratch::new();
    let mut config = capability_tools::StandardConfig::new(capability_tools::Store::Memory);
    config.registry = capability_core::RegistryConfig::default().max_concurrency(2);
    let registry = capability_tools::standard_registry(config).await.unwrap();
    let server = capability_mcp::McpServer::new(
        registry,
        std::sync::Arc::new(scratch.policy()),
        &scratch.work,
    );
    let mut raw = Raw::initialized(&server, false).await;
    let marker = "1.731";
    for id in 1..=6 {
        raw.call_no_wait(
            id,
            "run_command",
            json!({"binary": "sleep", "args": [marker]}),
        )
        .await;
    }
    // While they run, never more than two children at once; all six finish.
    let mut most = 0;
    let watch = async {
        loop {
            most = most.max(processes_with(&format!("sleep {marker}")).len());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let answers = async {
        let mut answered = 0;
        while answered < 6 {
            let message = raw.recv().await.expect("an answer");
            if message.get("id").is_some() && message.get("method").is_none() {
                assert_eq!(message["result"]["isError"], false, "{message}");
                answered += 1;
            }
        }
    };
    tokio::select! {
        () = watch => unreachable!(),
        () = answers => {}
    }
    assert!((1..=2).contains(&most), "{most} children ran at once");
}

// guarantee: G-PROC-06
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_sessions_child_cannot_read_another_sessions_home() {
    // The sessions of one server share its tools, and so each tool's directory of homes: what
    // one session's child keeps in its HOME (a CLI's token) is not another's to read.
    let scratch = Scratch::new();
    let w = scratch.work.display();
    let policy = capability_core::CompiledPolicy::load(
        &format!(
            "id = \"homes\"\ntoolset = [\"run_command\"]\n[fs_reach]\nread = [\"{w}\"]\n\
             [safety.process]\nallow = [\"sh\"]\n"
        ),
        capability_core::PolicyFormat::Toml,
        None,
    )
    .unwrap();
    let registry = capability_tools::standard_registry(capability_tools::StandardConfig::new(
        capability_tools::Store::Memory,
    ))
    .await
    .unwrap();
    let server =
        capability_mcp::McpServer::new(registry, std::sync::Arc::new(policy), &scratch.work);
    let mut a = Raw::initialized(&server, false).await;
    let mut b = Raw::initialized(&server, false).await;
    // `run_command` writes no project: the first child says it kept its token by what it runs
    // next, which the test sees among the host's processes.
    let marker = "29.271";
    a.call_no_wait(
        1,
        "run_command",
        json!({"binary": "sh", "args": ["-c", format!(
            "echo token-of-session-a > \"$HOME/token\" && exec sleep {marker}"
        )]}),
    )
    .await;
    assert!(
        eventually(|| !processes_with(&format!("sleep {marker}")).is_empty()).await,
        "session a's child never kept its token"
    );
    let (seen, _) = b
        .call(
            1,
            "run_command",
            json!({"binary": "sh", "args": ["-c",
                "ls -a \"$HOME/..\"; cat \"$HOME\"/../*/token; echo own > \"$HOME/t\" && cat \"$HOME/t\""]}),
        )
        .await;
    let output: serde_json::Value = serde_json::from_str(&text(&seen)).unwrap();
    let seen = output["stdout"].as_str().unwrap_or_default();
    assert!(!seen.contains("token-of-session-a"), "{seen}");
    assert!(
        seen.ends_with("own\n"),
        "b's child writes its own home: {seen}"
    );
    a.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 1, "reason": "done"}}),
    )
    .await;
}
