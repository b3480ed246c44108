//! A tool written the way a plugin author writes one — against `capability-types` alone — run
//! through the registry under an example personality.

use std::path::Path;
use std::sync::Arc;

use capability_core::PolicyFormat;
use capability_core::{CompiledPolicy, DefaultToolRegistry, ExecutionContext, ToolCall};
use capability_types::{
    CapabilityError, FsPaths, Tool, ToolCapabilities, ToolContext, async_trait,
};
use serde_json::{Value, json};

/// Counts words in its argument; touches nothing external.
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
        let text = args
            .get("text")
            .and_then(Value::as_str)
            .ok_or_else(|| CapabilityError::invalid_input("text: expected a string"))?;
        Ok(json!(text.split_whitespace().count()))
    }
}

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
    let mut registry = DefaultToolRegistry::new(None);
    registry.register(WordCount).unwrap();
    registry.register(Grep).unwrap();
    let ctx = ExecutionContext::new("e2e", policy, "/work/repo");
    let results = registry
        .execute_parallel(
            vec![
                ToolCall::new("a", "word_count", json!({"text": "three little words"})),
                ToolCall::new("b", "word_count", json!({"text": 7})),
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
            r#"{"ok":true,"value":3}"#,
            r#"{"ok":false,"code":"input_invalid","error":"text: expected a string"}"#,
            r#"{"ok":false,"code":"not_available","error":"Tool grep declares capabilities but no capability backends are configured"}"#,
        ]
    );
}
