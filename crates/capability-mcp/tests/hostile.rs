//! Hostile input on the MCP transport: every frame gets a JSON-RPC error or a clean close, the
//! server never panics, and memory stays bounded (docs/mcp.md, "Hostile input").

mod common;

use std::time::Duration;

use common::{Raw, Scratch, eventually, server, text};
use serde_json::json;

// guarantee: G-MCP-04
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_frames_get_errors_and_the_session_goes_on() {
    let scratch = Scratch::new();
    let (server, _) = server(&scratch).await;
    let mut raw = Raw::initialized(&server, false).await;

    // Truncated JSON, a non-object, binary junk: answered with an error or skipped; the
    // session survives each.
    for junk in [
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/li"#,
        "[1,2,3]",
        "\u{1}\u{2}garbage\u{7f}",
        "null",
        r#"{"jsonrpc":"1.0","id":2,"method":"ping"}"#,
    ] {
        raw.send_line(junk).await;
    }
    raw.ping(100).await;

    // Parameters of the wrong type: invalid params.
    raw.send(json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
        "params": {"name": "read_file", "arguments": "notes.md"}}))
        .await;
    let (wrong, _) = raw.response(4).await;
    assert_eq!(wrong["error"]["code"], -32602, "{wrong}");
    raw.send(json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": 42}}))
        .await;
    let (wrong, _) = raw.response(5).await;
    assert_eq!(wrong["error"]["code"], -32602, "{wrong}");
    // Params that are not an object: rmcp answers Invalid Request (without the id).
    raw.send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": 5}))
        .await;
    let wrong = raw.recv().await.expect("an answer");
    assert_eq!(wrong["error"]["code"], -32600, "{wrong}");

    // An unknown method.
    raw.send(json!({"jsonrpc": "2.0", "id": 6, "method": "tools/explode"}))
        .await;
    let (unknown, _) = raw.response(6).await;
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");

    // A cursor toolcap never handed out (it lists every tool on one page): invalid params, as
    // MCP's pagination asks, not the first page again (a client that loops on its cursor would
    // list for ever). No cursor, or a null one, is the first page.
    for cursor in [json!("zzz"), json!(""), json!("e30=")] {
        raw.send(json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list",
            "params": {"cursor": cursor}}))
            .await;
        let (listed, _) = raw.response(9).await;
        assert_eq!(listed["error"]["code"], -32602, "{cursor}: {listed}");
        assert!(listed.get("result").is_none(), "{listed}");
    }
    for params in [json!({}), json!({"cursor": null})] {
        raw.send(json!({"jsonrpc": "2.0", "id": 10, "method": "tools/list", "params": params}))
            .await;
        let (listed, _) = raw.response(10).await;
        assert!(
            listed["result"]["tools"]
                .as_array()
                .is_some_and(|t| !t.is_empty()),
            "{listed}"
        );
        assert!(listed["result"].get("nextCursor").is_none(), "{listed}");
    }

    // Deeply nested arguments are refused by the registry's depth gate, not a stack overflow.
    let nest = |levels: usize| {
        let mut deep = json!("x");
        for _ in 0..levels {
            deep = json!({"a": deep});
        }
        deep
    };
    let (nested, _) = raw
        .call(
            7,
            "read_file",
            json!({"path": "notes.md", "extra": nest(100)}),
        )
        .await;
    assert_eq!(nested["result"]["isError"], true, "{nested}");
    assert!(text(&nested).starts_with("INPUT_INVALID: "), "{nested}");
    // Past serde_json's recursion limit (128) the frame is not JSON to the parser: dropped
    // unanswered like any unparsable line, and the session goes on.
    raw.call_no_wait(
        8,
        "read_file",
        json!({"path": "notes.md", "extra": nest(400)}),
    )
    .await;

    raw.ping(101).await;
    assert!(!raw.task.is_finished());
}

// guarantee: G-MCP-04
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_before_initialize_ends_the_session_cleanly() {
    let scratch = Scratch::new();
    let (server, audit) = server(&scratch).await;
    let mut raw = Raw::connect(&server);
    raw.send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "read_file", "arguments": {"path": "notes.md"}}}))
        .await;
    // An error for the request; never the file.
    let answer = raw.recv().await.expect("an answer");
    assert!(answer.get("error").is_some(), "{answer}");
    assert!(!answer.to_string().contains("hello from notes"));
    // The session waits for `initialize` and ends cleanly when the client goes away.
    raw.close().await;
    let ended = tokio::time::timeout(Duration::from_secs(10), &mut raw.task)
        .await
        .expect("the session ends");
    assert!(ended.expect("no panic").is_err(), "the handshake failed");
    assert!(audit.events().is_empty(), "nothing ran");
}

// guarantee: G-MCP-04
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_pipelined_requests_are_all_answered() {
    let scratch = Scratch::new();
    let (server, _) = server(&scratch).await;
    let mut raw = Raw::initialized(&server, false).await;
    let n = 10_000;
    let mut batch = String::new();
    for id in 1..=n {
        let method = if id % 10 == 0 { "tools/call" } else { "ping" };
        let frame = if method == "ping" {
            json!({"jsonrpc": "2.0", "id": id, "method": "ping"})
        } else {
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": "kv_get", "arguments": {"key": "k"}}})
        };
        batch.push_str(&frame.to_string());
        batch.push('\n');
    }
    let writer = async {
        raw.send_line(batch.trim_end()).await;
    };
    writer.await;
    let mut seen = std::collections::BTreeSet::new();
    while seen.len() < n as usize {
        let message = raw.recv().await.expect("every request is answered");
        let id = message["id"].as_i64().expect("a response");
        assert!(message.get("error").is_none(), "{message}");
        seen.insert(id);
    }
    assert_eq!(seen.len(), n as usize);
}

// guarantee: G-MCP-04
/// Reusing the id of a request in flight breaks the protocol; rmcp keeps one entry per id, so
/// one of the two is answered (docs/mcp.md, "Hostile input"). Both calls run under the policy
/// and are audited, and the session goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn colliding_ids_do_not_break_the_session() {
    let scratch = Scratch::new();
    let (server, audit) = server(&scratch).await;
    let mut raw = Raw::initialized(&server, false).await;
    for path in ["notes.md", &scratch.canary.display().to_string()] {
        raw.send(json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "read_file", "arguments": {"path": path}}}))
            .await;
    }
    let (answer, mut seen) = raw.response(7).await;
    seen.push(answer.clone());
    seen.extend(raw.ping(8).await);
    // Nothing that came back carries the canary, whichever call was answered.
    for message in &seen {
        assert!(!message.to_string().contains(common::CANARY), "{message}");
    }
    // The unanswered call may still be finishing when the answered one and the ping are back.
    let ended = || {
        audit
            .events()
            .into_iter()
            .filter(|e| e.tool == "read_file")
            .filter(|e| {
                matches!(
                    e.event,
                    capability_core::AuditKind::ToolCompleted
                        | capability_core::AuditKind::ToolDenied
                )
            })
            .collect::<Vec<_>>()
    };
    assert!(
        eventually(|| ended().len() >= 2).await,
        "both calls ran and were audited"
    );
    let ended = ended();
    assert_eq!(ended.len(), 2, "each call audited once");
    // The canary's read was refused by the server itself, whatever reached the client.
    assert_eq!(
        ended
            .iter()
            .filter(|e| e.denial_code == Some(capability_types::DenialCode::PathNotReachable))
            .count(),
        1,
        "{ended:?}"
    );
    assert!(!raw.task.is_finished(), "the session goes on");
    assert!(text(&answer).starts_with("hello") || text(&answer).starts_with("PATH_NOT_REACHABLE"));
}
