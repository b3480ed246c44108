//! A tour of toolcap's enforcement points on the example `researcher` personality:
//! registration findings, call-time decisions for hosts and paths, and a batch through the
//! registry with its audit trail.
//!
//! Run it with `cargo run -p capability-core --example quickstart`.
#![allow(
    clippy::print_stdout,
    clippy::disallowed_methods,
    reason = "an example program: it reads the example policy and prints what it sees"
)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use capability_core::PolicyFormat;
use capability_core::{
    CompiledPolicy, DefaultToolRegistry, ExecutionContext, JsonLinesAuditSink, RegistryConfig,
    ToolCall, resolve, validate_declaration,
};
use capability_types::backend::{FsAccess, HostPolicy, PathPolicy};
use capability_types::{
    CapabilityError, FsPaths, Tool, ToolCapabilities, ToolContext, async_trait,
};
use serde_json::{Value, json};

/// A plugin tool: depends on capability-types alone and touches nothing external.
struct WordCount;

#[async_trait]
impl Tool for WordCount {
    fn name(&self) -> &str {
        "word_count"
    }
    fn description(&self) -> &str {
        "Counts the words of a text"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}})
    }
    fn capabilities(&self) -> ToolCapabilities {
        ToolCapabilities::none()
    }
    async fn execute(&self, args: Value, _: &ToolContext) -> Result<Value, CapabilityError> {
        let text = args["text"]
            .as_str()
            .ok_or_else(|| CapabilityError::invalid_input("text: expected a string"))?;
        Ok(json!(text.split_whitespace().count()))
    }
}

/// Declares what it reads; with no file backend configured it is refused before it runs.
struct ReadNotes;

#[async_trait]
impl Tool for ReadNotes {
    fn name(&self) -> &str {
        "read_file"
    }
    fn description(&self) -> &str {
        "Reads a note"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn capabilities(&self) -> ToolCapabilities {
        ToolCapabilities::none().with_fs_read(FsPaths::FromPersonality)
    }
    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<Value, CapabilityError> {
        let path = args["path"].as_str().unwrap_or_default();
        ctx.fs()?.read(Path::new(path)).await.map(Value::String)
    }
}

/// Misbehaves in the two ways the registry must survive.
struct Flaky;

#[async_trait]
impl Tool for Flaky {
    fn name(&self) -> &str {
        "flaky"
    }
    fn description(&self) -> &str {
        "Hangs or panics"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn capabilities(&self) -> ToolCapabilities {
        ToolCapabilities::none()
    }
    async fn execute(&self, args: Value, _: &ToolContext) -> Result<Value, CapabilityError> {
        if args["panic"] == json!(true) {
            panic!("flaky tool gave up");
        }
        tokio::time::sleep(Duration::from_secs(3600)).await;
        Ok(Value::Null)
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/personalities/researcher.toml");
    let text = std::fs::read_to_string(&path)?;
    let policy = Arc::new(CompiledPolicy::load(
        &text,
        PolicyFormat::Toml,
        Some(Path::new("/home/agent")),
    )?);
    println!(
        "personality {} from {}\n",
        policy.id().unwrap_or("?"),
        path.display()
    );

    println!("1. registration: a tool that declares more than the personality allows");
    let greedy: ToolCapabilities = serde_json::from_str(
        r#"{"network": {"allowedHosts": ["api.github.com", "*.stripe.com"]}, "fs_reach": {"read": ["/srv"], "write": ["/etc"]}}"#,
    )?;
    for finding in validate_declaration("greedy", &greedy, &policy) {
        println!("   {finding}");
    }

    println!("\n2. call time: what the resolved scope lets a `fetch_url`-style tool reach");
    let fetcher = ToolCapabilities::none().with_network(["*"]);
    let hosts = resolve("fetch_url", &fetcher, &policy, "demo", Path::new("/"))
        .network
        .ok_or("no network scope")?;
    for (host, port) in [
        ("api.github.com", 443),
        ("export.arxiv.org", 443),
        ("EXPORT.arxiv.org.", 443),
        ("uploads.arxiv.org", 443),
        ("arxiv.org", 443),
        ("evilarxiv.org", 443),
        ("api.github.com.evil.io", 443),
    ] {
        let verdict = match hosts.check(host, port) {
            Ok(how) => format!("allowed ({how:?})"),
            Err(e) => e.to_string(),
        };
        println!("   {host:<26} {verdict}");
    }

    println!(
        "\n3. call time: paths, relative to the session's working directory /srv/research/data"
    );
    let reader = ToolCapabilities::none()
        .with_fs_read(FsPaths::FromPersonality)
        .with_fs_write(FsPaths::FromPersonality);
    let paths = resolve(
        "read_file",
        &reader,
        &policy,
        "demo",
        Path::new("/srv/research/data"),
    )
    .fs
    .ok_or("no fs scope")?;
    for (p, access) in [
        ("2024/results.csv", FsAccess::Read),
        ("../reports/summary.md", FsAccess::Write),
        ("embargoed/draft.pdf", FsAccess::Read),
        ("../../../../etc/passwd", FsAccess::Read),
        ("/home/agent/notes/todo.md", FsAccess::Read),
        ("/home/agent/.ssh/id_ed25519", FsAccess::Read),
        ("2024/results.csv", FsAccess::Write),
    ] {
        let verdict = match paths.check(Path::new(p), access) {
            Ok(ok) => format!("allowed under {}", ok.root.display()),
            Err(e) => e.to_string(),
        };
        println!("   {access:<5} {p:<30} {verdict}");
    }

    println!("\n4. the registry: a batch through execute_parallel (no backends configured)");
    let audit = Arc::new(JsonLinesAuditSink::new(Vec::new()));
    let mut registry = DefaultToolRegistry::new(None)
        .with_config(RegistryConfig::default().call_timeout(Duration::from_millis(200)))
        .with_audit_sink(audit.clone());
    registry.register(WordCount)?;
    registry.register(ReadNotes)?;
    registry.register(Flaky)?;
    let mut open = policy.policy().ok_or("no policy")?.clone();
    open.toolset = Some(vec![
        "word_count".into(),
        "read_file".into(),
        "flaky".into(),
    ]);
    let open = Arc::new(CompiledPolicy::compile(
        open,
        Some(Path::new("/home/agent")),
    )?);
    let calls = vec![
        ToolCall::new(
            "1",
            "word_count",
            json!({"text": "tools declare what they touch"}),
        ),
        ToolCall::new("2", "word_count", json!({"text": 42})),
        ToolCall::new("3", "read_file", json!({"path": "notes.md"})),
        ToolCall::new("4", "flaky", json!({})),
        ToolCall::new("5", "flaky", json!({"panic": true})),
        ToolCall::new("6", "rm_rf", json!({})),
    ];
    std::panic::set_hook(Box::new(|_| {})); // the panic of call 5 is expected; keep the output tidy
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()?;
    let mut results = runtime.block_on(registry.execute_parallel(
        calls.clone(),
        &ExecutionContext::new("demo", open, "/srv/research/data"),
    ));
    let outside = runtime.block_on(registry.execute(
        ToolCall::new("7", "flaky", json!({})),
        &ExecutionContext::new("demo", Arc::clone(&policy), "/srv/research/data"),
    ));
    results.push(outside);
    println!("   {:<3} {:<11} {:<17} result", "id", "tool", "outcome");
    for r in &results {
        let outcome = r.result.code().map_or("ok", |c| c.as_str());
        let detail = serde_json::to_string(&r.result)?;
        println!(
            "   {:<3} {:<11} {:<17} {detail}",
            r.call_id, r.tool, outcome
        );
    }
    println!("   (call 7 ran under the unmodified personality, whose toolset has no `flaky`)");

    drop(registry);
    let audit = Arc::try_unwrap(audit)
        .map_err(|_| "audit sink still shared")?
        .into_inner();
    println!("\n5. the audit trail (JSON lines; no arguments, no secrets):");
    for line in String::from_utf8(audit)?.lines() {
        println!("   {line}");
    }
    Ok(())
}
