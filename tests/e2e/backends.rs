//! One tool of each kind — files, HTTP, secrets, processes — through `execute_parallel` with the
//! four real backends wired into `CapabilityBackends`, allowed and refused.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use capability_core::PolicyFormat;
use capability_core::{
    CapabilityBackends, CompiledPolicy, DefaultToolRegistry, ExecutionContext, ToolCall,
};
use capability_fetch::{FetchBackend, FetchConfig};
use capability_fs::{FsBackend, FsConfig};
use capability_process::{ProcessBackend, ProcessConfig};
use capability_secrets::{MemorySecrets, SecretsResolverFactory};
use capability_types::{
    CapabilityError, ExposeSecret, FsPaths, SecretRef, SpawnOptions, Tool, ToolCapabilities,
    ToolContext, async_trait,
};
use serde_json::{Value, json};

/// The four kinds of tool, each using only its scoped object.
struct Kind(&'static str);

#[async_trait]
impl Tool for Kind {
    fn name(&self) -> &str {
        self.0
    }
    fn description(&self) -> &str {
        "end-to-end test tool"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn capabilities(&self) -> ToolCapabilities {
        match self.0 {
            "reader" => ToolCapabilities::none()
                .with_fs_read(FsPaths::FromPersonality)
                .with_fs_write(FsPaths::FromPersonality),
            "fetcher" => ToolCapabilities::none().with_network(["*"]),
            "secret" => {
                ToolCapabilities::none().with_secrets([SecretRef::parse("API_TOKEN").unwrap()])
            }
            _ => ToolCapabilities::none()
                .with_process(["*"])
                .with_fs_read(FsPaths::FromPersonality),
        }
    }
    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<Value, CapabilityError> {
        let arg = |k: &str| args[k].as_str().unwrap_or_default().to_owned();
        match self.0 {
            "reader" if args.get("write").is_some() => ctx
                .fs()?
                .write(Path::new(&arg("path")), arg("write").as_bytes())
                .await
                .map(|n| json!(n)),
            "reader" => ctx
                .fs()?
                .read(Path::new(&arg("path")))
                .await
                .map(Value::String),
            "fetcher" => {
                let request = http::Request::get(arg("url"))
                    .body(Bytes::new())
                    .map_err(|e| CapabilityError::invalid_input(e.to_string()))?;
                let response = ctx.fetch()?.fetch(request).await?;
                Ok(json!(String::from_utf8_lossy(response.body())))
            }
            "secret" => ctx
                .secrets()?
                .resolve(&arg("name"))
                .await
                .map(|s| json!(s.expose_secret().len())),
            _ => {
                let argv: Vec<String> = args["args"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|a| a.as_str().map(str::to_owned))
                    .collect();
                let out = ctx
                    .process()?
                    .spawn(&arg("binary"), &argv, SpawnOptions::default())
                    .await?;
                Ok(json!(String::from_utf8_lossy(&out.stdout)))
            }
        }
    }
}

/// A loopback server that answers every request with `ok`.
async fn http_server() -> (u16, Arc<AtomicUsize>) {
    crate::support::http_server("ok", |_| "ok".to_owned()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_tool_of_each_kind_through_the_registry() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join("data")).unwrap();
    std::fs::create_dir_all(root.join("out")).unwrap();
    std::fs::write(root.join("data/notes.md"), "# notes").unwrap();
    let (port, connections) = http_server().await;

    let policy = CompiledPolicy::load(
        &format!(
            "id = \"e2e\"\n[fs_reach]\nread = [\"{r}/data\"]\nwrite = [\"{r}/out\"]\n[safety.network]\nallow = [\"127.0.0.1:{port}\"]\n[safety.process]\nallow = [\"echo\"]\ndeny_args = [\"echo --force*\"]\n",
            r = root.display()
        ),
        PolicyFormat::Toml,
        Some(Path::new("/home/e2e")),
    )
    .unwrap();

    let backends = CapabilityBackends::new()
        .with_fs(Arc::new(FsBackend::new(FsConfig::default())))
        .with_fetch(Arc::new(FetchBackend::new(FetchConfig::default()).unwrap()))
        .with_secrets(Arc::new(SecretsResolverFactory::new(vec![Arc::new(
            MemorySecrets::new().with("API_TOKEN", "tok-123456"),
        )])))
        .with_process(Arc::new(ProcessBackend::new(
            ProcessConfig::from_process_env(),
        )));
    let mut registry = DefaultToolRegistry::new(Some(backends));
    for kind in ["reader", "fetcher", "secret", "runner"] {
        registry.register(Kind(kind)).unwrap();
    }
    assert!(
        registry.validate(&policy).is_empty(),
        "{:?}",
        registry.validate(&policy)
    );

    let ctx = ExecutionContext::new("e2e", Arc::new(policy), root.join("data"));
    let calls = vec![
        ToolCall::new("1", "reader", json!({"path": "notes.md"})),
        ToolCall::new("2", "reader", json!({"path": "../../../etc/passwd"})),
        ToolCall::new(
            "3",
            "reader",
            json!({"path": "../out/report.md", "write": "done"}),
        ),
        ToolCall::new(
            "4",
            "fetcher",
            json!({"url": format!("http://127.0.0.1:{port}/")}),
        ),
        ToolCall::new(
            "5",
            "fetcher",
            json!({"url": "http://169.254.169.254/latest/meta-data/"}),
        ),
        ToolCall::new("6", "secret", json!({"name": "API_TOKEN"})),
        ToolCall::new("7", "secret", json!({"name": "AWS_SECRET_ACCESS_KEY"})),
        ToolCall::new("8", "runner", json!({"binary": "echo", "args": ["hi"]})),
        ToolCall::new("9", "runner", json!({"binary": "rm", "args": ["-rf", "~"]})),
        ToolCall::new(
            "10",
            "runner",
            json!({"binary": "echo", "args": ["--force"]}),
        ),
    ];
    let results = registry.execute_parallel(calls, &ctx).await;
    let shown: Vec<String> = results
        .iter()
        .map(|r| serde_json::to_string(&r.result).unwrap())
        .collect();
    assert_eq!(
        shown,
        [
            r##"{"ok":true,"value":"# notes"}"##.to_owned(),
            r#"{"ok":false,"code":"denied","error":"PATH_NOT_REACHABLE: read not permitted for /etc/passwd"}"#.to_owned(),
            r#"{"ok":true,"value":4}"#.to_owned(),
            r#"{"ok":true,"value":"ok"}"#.to_owned(),
            r#"{"ok":false,"code":"denied","error":"HOST_NOT_ALLOWED: 169.254.169.254 is not in the declared allowedHosts"}"#.to_owned(),
            r#"{"ok":true,"value":10}"#.to_owned(),
            r#"{"ok":false,"code":"denied","error":"SECRET_NOT_DECLARED: AWS_SECRET_ACCESS_KEY is not in the tool's declared secrets"}"#.to_owned(),
            r#"{"ok":true,"value":"hi\n"}"#.to_owned(),
            r#"{"ok":false,"code":"denied","error":"BINARY_NOT_ALLOWED: rm is not in the declared allowedBinaries"}"#.to_owned(),
            r#"{"ok":false,"code":"denied","error":"ARGS_NOT_ALLOWED: echo --force refused by policy (the deny_args pattern `echo --force*`)"}"#.to_owned(),
        ]
    );
    assert_eq!(
        std::fs::read_to_string(root.join("out/report.md")).unwrap(),
        "done"
    );
    assert_eq!(
        connections.load(Ordering::SeqCst),
        1,
        "only the allowed fetch connected"
    );
}
