//! `explain` and `call` agree: every case below runs first as a dry run (`explain_call`) and then
//! for real (`execute`) through one registry of the standard tools with the real backends, in one
//! invocation, in order. Where the call is refused before or by its scoped objects, explain must
//! have refused it with the same result code and the same denial code; where the call ran (and
//! succeeded, or failed on its own account), explain must have allowed it.

use std::path::Path;
use std::sync::Arc;

use capability_core::{CompiledPolicy, ExecutionContext, PolicyFormat, ToolCall};
use capability_tools::{StandardConfig, Store, explain_call, standard_registry};
use capability_types::{DenialCode, ErrorCode, ToolResult};
use serde_json::{Value, json};

/// The denial code a refusal's message starts with.
fn denial_of(message: &str) -> Option<DenialCode> {
    let code = message.split(':').next()?;
    serde_json::from_value(Value::String(code.to_owned())).ok()
}

/// A value nested `depth` arrays deep.
fn nested(depth: usize) -> Value {
    (0..depth).fold(json!("x"), |inner, _| json!([inner]))
}

// guarantee: G-REG-09
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_and_call_agree_on_every_policy_case() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path().canonicalize().unwrap();
    for d in ["work/out/releases", "work/private"] {
        std::fs::create_dir_all(r.join(d)).unwrap();
    }
    std::fs::write(r.join("work/a.md"), "alpha").unwrap();
    std::fs::write(r.join("work/private/s.txt"), "secret").unwrap();
    // Links the call follows: into a denied place, out of the root, and into a repository's
    // configured hooks by another name (docs/policy.md, "Reached by another name").
    std::os::unix::fs::symlink("private", r.join("work/hidden")).unwrap();
    std::os::unix::fs::symlink("/etc", r.join("work/etc")).unwrap();
    std::fs::create_dir_all(r.join("work/out/svc/.git")).unwrap();
    std::fs::create_dir_all(r.join("work/out/svc/.githooks")).unwrap();
    std::fs::write(
        r.join("work/out/svc/.git/config"),
        "[core]\n\thooksPath = .githooks\n",
    )
    .unwrap();
    std::os::unix::fs::symlink(".githooks", r.join("work/out/svc/alias")).unwrap();
    let (port, _) = crate::support::http_server("agree", |_| "hello".to_owned()).await;
    let policy = CompiledPolicy::load(
        &format!(
            r#"
id = "agree"
toolset = ["read_file", "write_file", "list_dir", "fetch_url", "run_command", "kv_get", "kv_set", "kv_list"]
[fs_reach]
read = ["{r}/work"]
write = ["{r}/work/out"]
deny = ["{r}/work/private"]
[safety.network]
allow = ["127.0.0.1:{port}", "*.example.com"]
deny = ["blocked.example.com"]
[safety.process]
allow = ["echo"]
deny_args = ["echo --force*"]
[constraints.list_dir]
forbidden = true
[constraints.kv_get]
max_invocations = 1
[constraints.kv_list]
only_after = ["kv_set"]
[escalate]
write_paths = ["{r}/work/out/releases"]
hosts = ["api.example.com"]
args = ["echo release*"]
"#,
            r = r.display()
        ),
        PolicyFormat::Toml,
        Some(Path::new("/home/agree")),
    )
    .unwrap();
    let registry = standard_registry(StandardConfig::new(Store::Memory))
        .await
        .unwrap();
    let ctx = ExecutionContext::new("agree", Arc::new(policy), r.join("work"));
    let out = |p: &str| r.join("work/out").join(p).display().to_string();
    let cases: Vec<(&str, Value)> = vec![
        // Files: reach, deny rules, the floor, read-only roots, escalation, the argument gate.
        ("read_file", json!({"path": "a.md"})),
        ("read_file", json!({"path": "missing.md"})),
        ("read_file", json!({"path": "/etc/passwd"})),
        ("read_file", json!({"path": "private/s.txt"})),
        ("read_file", json!({"path": "../../../../../etc/shadow"})),
        ("read_file", json!({"path": "hidden/s.txt"})),
        ("read_file", json!({"path": "etc/hostname"})),
        (
            "write_file",
            json!({"path": out("svc/alias/pre-commit"), "content": "x"}),
        ),
        (
            "write_file",
            json!({"path": out("svc/notes.md"), "content": "x"}),
        ),
        ("read_file", json!({"nope": 1})),
        ("read_file", json!({"path": nested(120)})),
        ("write_file", json!({"path": out("x.md"), "content": "x"})),
        ("write_file", json!({"path": "x.md", "content": "x"})),
        (
            "write_file",
            json!({"path": out("releases/v1.tar"), "content": "x"}),
        ),
        (
            "write_file",
            json!({"path": out("y.md"), "content": "/etc/shadow"}),
        ),
        (
            "write_file",
            json!({"path": out("z.md"), "content": "file:///etc/passwd"}),
        ),
        // The toolset and constraints.
        ("list_dir", json!({"path": "."})),
        ("kv_delete", json!({"key": "a"})),
        ("no_such_tool", json!({})),
        ("kv_list", json!({})),
        ("kv_set", json!({"key": "a", "value": "b"})),
        ("kv_get", json!({"key": "a"})),
        ("kv_get", json!({"key": "a"})),
        ("kv_list", json!({})),
        // Hosts: listed, another port, denied, wildcard, escalated, schemes, user-info, IPs.
        (
            "fetch_url",
            json!({"url": format!("http://127.0.0.1:{port}/")}),
        ),
        (
            "fetch_url",
            json!({"url": format!("http://0x7f.1:{port}/")}),
        ),
        (
            "fetch_url",
            json!({"url": format!("http://127.0.0.1:{}/", port.wrapping_add(1))}),
        ),
        ("fetch_url", json!({"url": "https://blocked.example.com/"})),
        ("fetch_url", json!({"url": "https://api.example.com/"})),
        ("fetch_url", json!({"url": "https://api.github.com/"})),
        ("fetch_url", json!({"url": "ftp://files.example.com/"})),
        (
            "fetch_url",
            json!({"url": format!("http://u:p@127.0.0.1:{port}/")}),
        ),
        (
            "fetch_url",
            json!({"url": "http://169.254.169.254/latest/meta-data/"}),
        ),
        ("fetch_url", json!({"url": "not a url"})),
        // Processes: binaries, argv, escalated argv, environment, working directory.
        ("run_command", json!({"binary": "echo", "args": ["hi"]})),
        (
            "run_command",
            json!({"binary": "echo", "args": ["--force"]}),
        ),
        (
            "run_command",
            json!({"binary": "echo", "args": ["release", "v1"]}),
        ),
        ("run_command", json!({"binary": "rm", "args": ["-rf", "/"]})),
        (
            "run_command",
            json!({"binary": "/bin/../bin/echo", "args": []}),
        ),
        (
            "run_command",
            json!({"binary": "echo", "args": [], "env": {"LD_PRELOAD": "/x.so"}}),
        ),
        (
            "run_command",
            json!({"binary": "echo", "args": [], "env": {"LANG": "C"}}),
        ),
        (
            "run_command",
            json!({"binary": "echo", "args": [], "cwd": "/etc"}),
        ),
        (
            "run_command",
            json!({"binary": "echo", "args": [], "cwd": "private"}),
        ),
        (
            "run_command",
            json!({"binary": "echo", "args": ["a\u{0}b"]}),
        ),
    ];
    let mut refused = 0;
    for (n, (tool, args)) in cases.into_iter().enumerate() {
        let call = ToolCall::new(n.to_string(), tool, args.clone());
        let explained = explain_call(&registry, &call, &ctx);
        let called = registry.execute(call, &ctx).await;
        let shown = format!(
            "case {n}: {tool} {args}\n  explain: {}\n  call:    {}",
            serde_json::to_string(&explained).unwrap(),
            serde_json::to_string(&called.result).unwrap()
        );
        match &called.result {
            ToolResult::Err {
                code,
                error: message,
            } if !matches!(
                code,
                ErrorCode::ExecutionFailed | ErrorCode::Timeout | ErrorCode::NotFound
            ) =>
            {
                refused += 1;
                assert!(
                    !explained.allowed,
                    "explain allowed a refused call: {shown}"
                );
                assert_eq!(explained.code, Some(*code), "{shown}");
                assert_eq!(explained.denial, denial_of(message), "{shown}");
            }
            _ => {
                assert!(
                    explained.allowed,
                    "explain refused a call that ran: {shown}"
                );
                assert_eq!((explained.code, explained.denial), (None, None), "{shown}");
            }
        }
    }
    // The table is worth something only if it holds refusals of many kinds.
    assert!(refused >= 25, "only {refused} refusals");
}
