//! A plugin crate written the way a plugin author writes one (`examples/plugin-word-count`,
//! which depends on `capability-types` alone) run through the registry with the real file
//! backend under an example personality, beside a tool whose backend is missing.

use std::path::Path;
use std::sync::Arc;

use capability_core::PolicyFormat;
use capability_core::{
    CapabilityBackends, CompiledPolicy, DefaultToolRegistry, ExecutionContext, ToolCall,
};
use capability_fs::{FsBackend, FsConfig};
use capability_types::{
    CapabilityError, FsPaths, Tool, ToolCapabilities, ToolContext, async_trait,
};
use plugin_word_count::WordCount;
use serde_json::{Value, json};

/// Declares file access but is registered where no backend is configured.
struct Grep;

#[async_trait]
impl Tool for Grep {
    fn name(&self) -> &str {
        "grep"
    }
    fn description(&self) -> &str {
        "Searches files"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn capabilities(&self) -> ToolCapabilities {
        ToolCapabilities::none().with_fs_read(FsPaths::FromPersonality)
    }
    async fn execute(&self, _: Value, _: &ToolContext) -> Result<Value, CapabilityError> {
        unreachable!("the fail-closed guard must stop this call")
    }
}

#[tokio::test]
async fn plugin_tool_runs_and_undeclared_access_fails_closed() {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/personalities/coder.toml"),
    )
    .unwrap();
    let mut policy =
        capability_core::PersonalityPolicy::parse(&text, PolicyFormat::Toml, None).unwrap();
    policy.toolset = None; // admit the plugin tools too
    let policy = Arc::new(CompiledPolicy::compile(policy, None).unwrap());
    // No backends: a tool that declares nothing runs; one that declares files fails closed.
    let mut registry = DefaultToolRegistry::new(None);
    registry.register(WordCount).unwrap();
    registry.register(Grep).unwrap();
    let ctx = ExecutionContext::new("e2e", policy, "/work/repo");
    let results = registry
        .execute_parallel(
            vec![
                ToolCall::new("a", "word_count", json!({"text": "three little words"})),
                ToolCall::new("c", "grep", json!({"pattern": "x"})),
            ],
            &ctx,
        )
        .await;
    let shown: Vec<String> = results
        .iter()
        .map(|r| serde_json::to_string(&r.result).unwrap())
        .collect();
    assert_eq!(
        shown,
        [
            r#"{"ok":false,"code":"not_available","error":"Tool word_count declares capabilities but no capability backends are configured"}"#,
            r#"{"ok":false,"code":"not_available","error":"Tool grep declares capabilities but no capability backends are configured"}"#,
        ]
    );
}

#[tokio::test]
async fn the_plugin_crate_reads_through_its_scoped_object_only() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join("notes")).unwrap();
    std::fs::write(root.join("notes/a.md"), "one two\nthree\n").unwrap();
    let policy = CompiledPolicy::load(
        &format!(
            "id = \"reader\"\n[fs_reach]\nread = [\"{}/notes\"]\n",
            root.display()
        ),
        PolicyFormat::Toml,
        None,
    )
    .unwrap();
    let backends = CapabilityBackends::new().with_fs(Arc::new(FsBackend::new(FsConfig::default())));
    let mut registry = DefaultToolRegistry::new(Some(backends));
    registry.register(WordCount).unwrap();
    let ctx = ExecutionContext::new("e2e", Arc::new(policy), root.join("notes"));
    let results = registry
        .execute_parallel(
            vec![
                ToolCall::new("a", "word_count", json!({"text": "three little words"})),
                ToolCall::new("b", "word_count", json!({"path": "a.md"})),
                ToolCall::new("c", "word_count", json!({"path": "/etc/passwd"})),
                ToolCall::new("d", "word_count", json!({"text": 7})),
            ],
            &ctx,
        )
        .await;
    let shown: Vec<String> = results
        .iter()
        .map(|r| serde_json::to_string(&r.result).unwrap())
        .collect();
    assert_eq!(
        shown,
        [
            r#"{"ok":true,"value":{"bytes":18,"lines":1,"words":3}}"#,
            r#"{"ok":true,"value":{"bytes":14,"lines":2,"words":3}}"#,
            r#"{"ok":false,"code":"denied","error":"PATH_NOT_REACHABLE: read not permitted for /etc/passwd"}"#,
            r#"{"ok":false,"code":"input_invalid","error":"give either `path` or `text`, a string"}"#,
        ]
    );
}
