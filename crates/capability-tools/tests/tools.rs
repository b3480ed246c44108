//! The standard tools through `standard_registry` with the real backends: value shapes,
//! argument errors that name the field, and refusals.
#![allow(
    clippy::disallowed_methods,
    reason = "tests build fixture files and a loopback server"
)]

use std::path::Path;
use std::sync::Arc;

use capability_core::PolicyFormat;
use capability_core::{CompiledPolicy, ExecutionContext, ToolCall};
use capability_tools::{STANDARD_TOOLS, StandardConfig, Store, standard_registry, standard_tools};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn http_ok_server() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let n = s.read(&mut buf).await.unwrap_or(0);
                let echoed = String::from_utf8_lossy(&buf[..n])
                    .lines()
                    .next()
                    .unwrap_or("")
                    .to_owned();
                let body = format!("seen: {echoed}");
                let reply = format!(
                    "HTTP/1.1 201 Created\r\nx-a: 1\r\nx-a: 2\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = s.write_all(reply.as_bytes()).await;
            });
        }
    });
    port
}

async fn run(calls: Vec<(&str, Value)>) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join("out")).unwrap();
    std::fs::write(root.join("a.txt"), "alpha").unwrap();
    std::fs::create_dir(root.join("sub")).unwrap();
    let port = http_ok_server().await;
    let policy = CompiledPolicy::load(
        &format!(
            "id = \"t\"\n[fs_reach]\nread = [\"{r}\"]\nwrite = [\"{r}/out\"]\n[safety.network]\nallow = [\"127.0.0.1:{port}\"]\n[safety.process]\nallow = [\"echo\", \"sleep\", \"cat\"]\n",
            r = root.display()
        ),
        PolicyFormat::Toml,
        Some(Path::new("/home/t")),
    )
    .unwrap();
    let registry = standard_registry(StandardConfig::new(Store::Memory))
        .await
        .unwrap();
    let ctx = ExecutionContext::new("s", Arc::new(policy), &root);
    let calls = calls
        .into_iter()
        .enumerate()
        .map(|(i, (tool, args))| {
            let args =
                serde_json::from_str(&args.to_string().replace("PORT", &port.to_string())).unwrap();
            ToolCall::new(i.to_string(), tool, args)
        })
        .collect();
    registry
        .execute_parallel(calls, &ctx)
        .await
        .into_iter()
        .map(|r| serde_json::to_value(&r.result).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tool_does_its_job() {
    let r = run(vec![
        ("read_file", json!({"path": "a.txt"})),
        ("write_file", json!({"path": "out/b.txt", "content": "beta"})),
        ("list_dir", json!({"path": "."})),
        ("fetch_url", json!({"url": "http://127.0.0.1:PORT/x", "method": "post", "headers": {"x-k": "v"}, "body": "b"})),
        ("run_command", json!({"binary": "cat", "stdin": "piped in"})),
        ("kv_set", json!({"key": "k", "value": [1, 2]})),
    ])
    .await;
    assert_eq!(r[0], json!({"ok": true, "value": "alpha"}));
    assert_eq!(r[1], json!({"ok": true, "value": 4}));
    assert_eq!(r[2], json!({"ok": true, "value": ["a.txt", "out", "sub"]}));
    assert_eq!(r[3]["value"]["status"], 201);
    assert_eq!(r[3]["value"]["body"], "seen: POST /x HTTP/1.1");
    assert_eq!(r[3]["value"]["headers"]["x-a"], "1, 2");
    assert_eq!(
        r[4],
        json!({"ok": true, "value": {"exit_code": 0, "signal": null, "stdout": "piped in", "stderr": "", "truncated": false}})
    );
    assert_eq!(r[5], json!({"ok": true, "value": null}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_value_tools() {
    let dir = tempfile::tempdir().unwrap();
    let policy = Arc::new(CompiledPolicy::load("id = \"kv\"\n", PolicyFormat::Toml, None).unwrap());
    let registry = standard_registry(StandardConfig::new(Store::Embedded(
        dir.path().join("kv.redb"),
    )))
    .await
    .unwrap();
    let ctx = ExecutionContext::new("s", policy, dir.path());
    let step = |tool: &str, args: Value| ToolCall::new("c", tool, args);
    let mut out = Vec::new();
    for call in [
        step("kv_get", json!({"key": "missing"})),
        step("kv_set", json!({"key": "a/1", "value": {"x": 1}})),
        step(
            "kv_set",
            json!({"key": "a/2", "value": "two", "ttl_seconds": 60}),
        ),
        step("kv_set", json!({"key": "b", "value": 3})),
        step("kv_get", json!({"key": "a/1"})),
        step("kv_list", json!({"prefix": "a/"})),
        step("kv_list", json!({})),
        step("kv_delete", json!({"key": "a/1"})),
        step("kv_delete", json!({"key": "a/1"})),
        step("kv_set", json!({"key": "a", "value": 1, "ttl_seconds": -5})),
    ] {
        out.push(serde_json::to_value(registry.execute(call, &ctx).await.result).unwrap());
    }
    assert_eq!(out[0], json!({"ok": true, "value": null}));
    assert_eq!(out[4], json!({"ok": true, "value": {"x": 1}}));
    assert_eq!(out[5], json!({"ok": true, "value": ["a/1", "a/2"]}));
    assert_eq!(out[6], json!({"ok": true, "value": ["a/1", "a/2", "b"]}));
    assert_eq!(
        (out[7]["value"].clone(), out[8]["value"].clone()),
        (json!(true), json!(false))
    );
    assert_eq!(
        out[9],
        json!({"ok": false, "code": "input_invalid", "error": "ttl_seconds: must be a positive integer"})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argument_errors_name_the_field() {
    let r = run(vec![
        ("read_file", json!({})),
        ("read_file", json!({"path": 7})),
        ("read_file", json!({"path": "a.txt", "follow": true})),
        ("write_file", json!({"path": "out/x"})),
        (
            "fetch_url",
            json!({"url": "http://127.0.0.1:PORT/", "method": "NOT A METHOD"}),
        ),
        (
            "fetch_url",
            json!({"url": "http://127.0.0.1:PORT/", "headers": {"x": 1}}),
        ),
        (
            "run_command",
            json!({"binary": "echo", "args": "not-a-list"}),
        ),
        ("run_command", json!({"binary": "echo", "timeout_ms": 0})),
        ("kv_set", json!({"value": 1})),
        ("list_dir", json!(".")),
    ])
    .await;
    let errors: Vec<(&str, &str)> = r
        .iter()
        .map(|v| (v["code"].as_str().unwrap(), v["error"].as_str().unwrap()))
        .collect();
    assert_eq!(
        errors,
        [
            ("input_invalid", "missing field `path`"),
            (
                "input_invalid",
                "path: invalid type: integer `7`, expected a string"
            ),
            (
                "input_invalid",
                "follow: unknown field `follow`, expected `path`"
            ),
            ("input_invalid", "missing field `content`"),
            (
                "input_invalid",
                "method: \"NOT A METHOD\" is not an HTTP method"
            ),
            (
                "input_invalid",
                "headers.x: invalid type: integer `1`, expected a string"
            ),
            (
                "input_invalid",
                "args: invalid type: string \"not-a-list\", expected a sequence"
            ),
            ("input_invalid", "timeout_ms: must be at least 1"),
            ("input_invalid", "missing field `key`"),
            ("input_invalid", "arguments: expected a JSON object"),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_that_times_out_is_a_timeout() {
    let r = run(vec![(
        "run_command",
        json!({"binary": "sleep", "args": ["30"], "timeout_ms": 200}),
    )])
    .await;
    assert_eq!(r[0]["code"], "timeout");
    assert!(
        r[0]["error"]
            .as_str()
            .unwrap()
            .starts_with("sleep timed out and its process group was killed"),
        "{}",
        r[0]
    );
}

#[test]
fn the_standard_tool_list_is_consistent() {
    let names: Vec<String> = standard_tools()
        .iter()
        .map(|t| t.name().to_owned())
        .collect();
    assert_eq!(names, STANDARD_TOOLS);
    for tool in standard_tools() {
        let schema = tool.input_schema();
        assert_eq!(schema["type"], "object", "{}", tool.name());
        assert_eq!(
            schema["additionalProperties"],
            false,
            "{}: unknown arguments are refused",
            tool.name()
        );
        assert!(!tool.description().is_empty());
    }
}

// guarantee: G-REG-11, G-KV-03
#[tokio::test]
async fn dropping_the_registry_closes_its_store_for_the_next_one() {
    // The registry keeps plans and a spare context between calls (docs/decisions.md, "The
    // per-call path"), and a thread remembers the plans it was handed; none of it outlives the
    // registry. So the embedded store's file is closed when the registry is dropped (not only
    // once idle: nothing is left holding the store), and the same thread opens it again at
    // once, with what was written.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kv.redb");
    let policy = Arc::new(CompiledPolicy::load("id = \"kv\"\n", PolicyFormat::Toml, None).unwrap());
    let ctx = ExecutionContext::new("s", policy, dir.path());
    for round in 0..3 {
        let registry = standard_registry(StandardConfig::new(Store::Embedded(path.clone())))
            .await
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
        let call = |tool: &str, args: Value| registry.execute(ToolCall::new("c", tool, args), &ctx);
        let before = call("kv_get", json!({"key": "round"})).await.result;
        let expected = if round == 0 {
            json!(null)
        } else {
            json!(round - 1)
        };
        assert_eq!(before.value(), Some(&expected), "round {round}");
        assert!(
            call("kv_set", json!({"key": "round", "value": round}))
                .await
                .result
                .is_ok()
        );
        drop(registry);
        let free = std::process::Command::new("flock")
            .args(["--nonblock", "--conflict-exit-code", "3"])
            .arg(&path)
            .arg("true")
            .status()
            .unwrap();
        assert!(free.success(), "round {round}: the file is still locked");
    }
}

/// A Redis store's URL is shown without its password wherever the configuration is shown.
// guarantee: G-KV-04
#[test]
fn a_redis_stores_password_is_not_in_its_debug() {
    let store = Store::parse("redis://default:pa@ss-word@cache.internal:6379/2");
    let shown = format!("{store:?}");
    assert!(
        !shown.contains("pa@ss") && !shown.contains("ss-word"),
        "{shown}"
    );
    assert!(shown.contains("cache.internal:6379/2"), "{shown}");
    assert_eq!(
        store,
        Store::Redis("redis://default:pa@ss-word@cache.internal:6379/2".into()),
        "the store itself keeps the whole URL"
    );
}
