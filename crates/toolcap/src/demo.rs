//! `toolcap demo`: the whole system on real files, a real HTTP server on loopback and real
//! processes, in a few seconds. Each call's outcome is checked against what the personality
//! says it must be; any mismatch makes the demo fail.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use capability_capsule::{Capsule, CapsuleConfig};
use capability_core::{ExecutionContext, IsolationSelection, ToolCall};
use capability_tools::{StandardConfig, Store, standard_registry};
use capability_types::ToolResult;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::host;

/// A tiny HTTP/1.1 server on loopback: `/status` answers JSON, `/hop` redirects to `/status`,
/// `/leave` redirects to a host the personality does not allow.
async fn loopback_server() -> Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .context("binding a loopback port")?;
    let port = listener.local_addr()?.port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let n = stream.read(&mut buf).await.unwrap_or(0);
                let request = String::from_utf8_lossy(&buf[..n]);
                let path = request.split_whitespace().nth(1).unwrap_or("/");
                let response = match path {
                    "/status" => "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 15\r\nconnection: close\r\n\r\n{\"status\":\"up\"}".to_owned(),
                    "/hop" => "HTTP/1.1 302 Found\r\nlocation: /status\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_owned(),
                    "/leave" => "HTTP/1.1 302 Found\r\nlocation: http://169.254.169.254/latest/meta-data/\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_owned(),
                    _ => "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_owned(),
                };
                let _ = stream.write_all(response.as_bytes()).await;
            });
        }
    });
    Ok(port)
}

/// (call, what the personality must make of it: `None` = ok, `Some(code)` = refused with it).
fn batch(port: u16) -> Vec<(ToolCall, Option<&'static str>, &'static str)> {
    let call = |id: &str, tool: &str, args: Value| ToolCall::new(id, tool, args);
    vec![
        (
            call("1", "read_file", json!({"path": "notes.md"})),
            None,
            "a file in the read reach",
        ),
        (
            call("2", "read_file", json!({"path": "../outside/secret.txt"})),
            Some("denied"),
            "`..` out of the reach",
        ),
        (
            call("3", "read_file", json!({"path": "escape.txt"})),
            Some("denied"),
            "a symlink leading out (kernel-refused)",
        ),
        (
            call("4", "read_file", json!({"path": "private/keys.txt"})),
            Some("denied"),
            "under fs_reach.deny",
        ),
        (
            call(
                "5",
                "write_file",
                json!({"path": "reports/summary.md", "content": "# summary\n"}),
            ),
            None,
            "a file in the write reach",
        ),
        (
            call(
                "6",
                "write_file",
                json!({"path": "notes.md", "content": "overwritten"}),
            ),
            Some("denied"),
            "read-only area",
        ),
        (
            call("7", "list_dir", json!({"path": "."})),
            None,
            "listing the workspace",
        ),
        (
            call(
                "8",
                "fetch_url",
                json!({"url": format!("http://127.0.0.1:{port}/status")}),
            ),
            None,
            "an explicitly allowed host",
        ),
        (
            call(
                "9",
                "fetch_url",
                json!({"url": format!("http://127.0.0.1:{port}/hop")}),
            ),
            None,
            "a redirect, re-checked",
        ),
        (
            call(
                "10",
                "fetch_url",
                json!({"url": format!("http://127.0.0.1:{port}/leave")}),
            ),
            Some("denied"),
            "a redirect to cloud metadata",
        ),
        (
            call("11", "fetch_url", json!({"url": "https://example.com/"})),
            Some("denied"),
            "a host not allowed (never contacted)",
        ),
        (
            call(
                "12",
                "run_command",
                json!({"binary": "echo", "args": ["hello from a child"]}),
            ),
            None,
            "an allowed binary, no shell",
        ),
        (
            call(
                "13",
                "run_command",
                json!({"binary": "rm", "args": ["-rf", "~"]}),
            ),
            Some("denied"),
            "a binary not allowed",
        ),
        (
            call(
                "14",
                "run_command",
                json!({"binary": "ls", "args": ["-R", "."]}),
            ),
            Some("denied"),
            "argv refused by deny_args",
        ),
        (
            call(
                "15",
                "run_command",
                json!({"binary": "echo", "args": ["x"], "env": {"LD_PRELOAD": "evil.so"}}),
            ),
            Some("denied"),
            "a loader hook in the env",
        ),
        (
            call(
                "16",
                "run_command",
                json!({"binary": "echo", "args": ["/etc/shadow"]}),
            ),
            Some("denied"),
            "a path argument outside the reach (gate)",
        ),
        (
            call("17", "kv_delete", json!({"key": "demo_runs"})),
            Some("denied"),
            "a tool outside the toolset",
        ),
        (
            call("18", "shell_exec", json!({"cmd": "id"})),
            Some("not_available"),
            "an unknown tool",
        ),
        (
            call("19", "read_file", json!({"paht": "notes.md"})),
            Some("input_invalid"),
            "a typo in the arguments",
        ),
    ]
}

pub(crate) async fn run(keep: bool) -> Result<ExitCode> {
    let started = Instant::now();
    let scratch = tempfile::Builder::new()
        .prefix("toolcap-demo-")
        .tempdir()
        .context("creating a scratch directory")?;
    #[allow(
        clippy::disallowed_methods,
        reason = "the demo's own scratch directory, resolved once so that the tour's paths are real"
    )]
    let root = scratch.path().canonicalize()?;
    let workspace = root.join("workspace");
    host::write(
        &workspace.join("notes.md"),
        "# notes\ntools declare what they touch\n",
    )?;
    host::write(&workspace.join("private/keys.txt"), "not for tools\n")?;
    host::write(&root.join("outside/secret.txt"), "outside the reach\n")?;
    host::write(&workspace.join("reports/.keep"), "")?;
    host::symlink(
        &root.join("outside/secret.txt"),
        &workspace.join("escape.txt"),
    )?;

    let port = loopback_server().await?;
    let personality = root.join("demo-personality.toml");
    host::write(
        &personality,
        &format!(
            r#"# Written by `toolcap demo`; try it with `toolcap call --personality {p} --workdir {w} read_file '{{"path": "notes.md"}}'`
id = "demo"
toolset = ["read_file", "write_file", "list_dir", "fetch_url", "run_command", "kv_get", "kv_set", "kv_list"]

[fs_reach]
read  = ["{w}"]
write = ["{w}/reports"]
deny  = ["{w}/private"]

[safety.network]
allow = ["127.0.0.1:{port}"]

[safety.process]
allow = ["echo", "ls"]
deny_args = ["ls -R*"]
"#,
            p = personality.display(),
            w = workspace.display(),
        ),
    )?;
    let policy = Arc::new(host::load_policy(&personality).map_err(|u| anyhow::anyhow!(u.0))?);
    let store = host::default_store("demo.redb").map_err(|u| anyhow::anyhow!(u.0))?;
    let audit = root.join("audit.jsonl");
    let registry = standard_registry(StandardConfig::new(Store::Embedded(store.clone())))
        .await?
        .with_audit_sink(host::audit_file(&audit).map_err(|u| anyhow::anyhow!(u.0))?);
    let ctx = ExecutionContext::new("demo", policy, &workspace);

    // State that persists across runs: a counter in the embedded store.
    let previous = registry
        .execute(
            ToolCall::new("0", "kv_get", json!({"key": "demo_runs"})),
            &ctx,
        )
        .await;
    let runs = previous.result.value().and_then(Value::as_u64).unwrap_or(0) + 1;
    let saved = registry
        .execute(
            ToolCall::new("0b", "kv_set", json!({"key": "demo_runs", "value": runs})),
            &ctx,
        )
        .await;

    let mut planned = batch(port);
    let calls: Vec<ToolCall> = planned.iter().map(|(c, _, _)| c.clone()).collect();
    let mut results = registry.execute_parallel(calls, &ctx).await;

    // The same tools in the capsule: their code runs in a worker (this binary, re-executed) that
    // confined itself before any tool code ran; the host answers and checks every request.
    let isolated = standard_registry(StandardConfig::new(Store::Memory))
        .await?
        .with_isolation(
            Arc::new(Capsule::new(CapsuleConfig::current_exe()?)),
            IsolationSelection::All,
        );
    let capsule_planned = capsule_batch();
    let calls: Vec<ToolCall> = capsule_planned.iter().map(|(c, _, _)| c.clone()).collect();
    results.extend(isolated.execute_parallel(calls, &ctx).await);
    planned.extend(capsule_planned);

    let colour = host::stdout_is_terminal();
    let paint = |text: &str, ok: bool| {
        if colour {
            format!("\x1b[{}m{text}\x1b[0m", if ok { "32" } else { "31" })
        } else {
            text.to_owned()
        }
    };
    crate::outln!(
        "toolcap demo — personality `demo`, workspace {}\n",
        workspace.display()
    )
    .map_err(|crate::Usage(m)| anyhow::anyhow!(m))?;
    crate::outln!(
        "{:<3} {:<12} {:<40} {:<14} detail",
        "id",
        "tool",
        "case",
        "outcome"
    )
    .map_err(|crate::Usage(m)| anyhow::anyhow!(m))?;
    let mut mismatches = 0;
    for ((_, expected, case), result) in planned.iter().zip(&results) {
        let (outcome, detail) = match &result.result {
            ToolResult::Ok(v) => ("allowed".to_owned(), short(&v.to_string())),
            ToolResult::Err { code, error } => (code.as_str().to_owned(), short(error)),
        };
        let as_expected = match expected {
            None => result.result.is_ok(),
            Some(code) => result.result.code().is_some_and(|c| c.as_str() == *code),
        };
        if !as_expected {
            mismatches += 1;
        }
        let shown = paint(&format!("{outcome:<14}"), result.result.is_ok());
        let mark = if as_expected { "" } else { "  <-- UNEXPECTED" };
        crate::outln!(
            "{:<3} {:<12} {:<40} {shown} {detail}{mark}",
            result.call_id,
            result.tool,
            case
        )
        .map_err(|crate::Usage(m)| anyhow::anyhow!(m))?;
    }
    if !saved.result.is_ok() {
        mismatches += 1;
        crate::outln!("kv_set of the run counter failed: {:?}", saved.result)
            .map_err(|crate::Usage(m)| anyhow::anyhow!(m))?;
    }
    drop(registry);
    crate::outln!(
        "\ndemo run #{runs} (the counter lives in {}; run the demo again to see it persist)",
        store.display()
    )
    .map_err(|crate::Usage(m)| anyhow::anyhow!(m))?;
    crate::outln!(
        "audit log: {} ({} events, JSON lines)",
        audit.display(),
        host::count_lines(&audit)
    )
    .map_err(|crate::Usage(m)| anyhow::anyhow!(m))?;
    crate::outln!("personality: {}", personality.display())
        .map_err(|crate::Usage(m)| anyhow::anyhow!(m))?;
    if keep {
        let kept = scratch.keep();
        crate::outln!("scratch directory kept: {}", kept.display())
            .map_err(|crate::Usage(m)| anyhow::anyhow!(m))?;
    } else {
        crate::outln!(
            "(the scratch directory, audit log and personality included, is removed now; \
             `toolcap demo --keep` keeps it to read them)"
        )
        .map_err(|crate::Usage(m)| anyhow::anyhow!(m))?;
    }
    crate::outln!("finished in {:.2?}", started.elapsed())
        .map_err(|crate::Usage(m)| anyhow::anyhow!(m))?;
    if mismatches > 0 {
        bail!("{mismatches} call(s) did not end as the personality says they must");
    }
    Ok(ExitCode::SUCCESS)
}

/// Calls run in the capsule: the same answers as in process.
fn capsule_batch() -> Vec<(ToolCall, Option<&'static str>, &'static str)> {
    vec![
        (
            ToolCall::new("c1", "read_file", json!({"path": "notes.md"})),
            None,
            "capsule: read inside the reach",
        ),
        (
            ToolCall::new("c2", "read_file", json!({"path": "private/keys.txt"})),
            Some("denied"),
            "capsule: read a denied path",
        ),
        (
            ToolCall::new(
                "c3",
                "run_command",
                json!({"binary": "echo", "args": ["from a capsule"]}),
            ),
            None,
            "capsule: spawn an allowed binary",
        ),
    ]
}

fn short(text: &str) -> String {
    let one_line = text.replace('\n', "\\n");
    if one_line.chars().count() > 90 {
        format!("{}…", one_line.chars().take(89).collect::<String>())
    } else {
        one_line
    }
}
