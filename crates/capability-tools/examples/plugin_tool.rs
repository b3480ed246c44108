//! The template a plugin author copies: a tool that depends only on `capability-types`,
//! registered beside the standard tools, run in a batch under a personality.
//!
//! Run it with `cargo run -p capability-tools --example plugin_tool`.
#![allow(
    clippy::print_stdout,
    clippy::disallowed_methods,
    reason = "an example program: it sets up a scratch directory and prints what happens"
)]

use std::path::Path;
use std::sync::Arc;

use capability_core::PolicyFormat;
use capability_core::{CompiledPolicy, ExecutionContext, ToolCall};
use capability_tools::{StandardConfig, Store, standard_registry};
use capability_types::{
    CapabilityError, FsPaths, Tool, ToolCapabilities, ToolContext, async_trait,
};
use serde_json::{Value, json};

// ---- The plugin: this part needs nothing but `capability-types` (and serde_json). ----

/// Counts lines, words and bytes of a file the personality lets it read.
struct WordStats;

#[async_trait]
impl Tool for WordStats {
    fn name(&self) -> &str {
        "word_stats"
    }

    fn description(&self) -> &str {
        "Counts the lines, words and bytes of a text file"
    }

    fn input_schema(&self) -> Value {
        json!({"type": "object", "additionalProperties": false, "required": ["path"],
               "properties": {"path": {"type": "string"}}})
    }

    /// The declaration a reviewer reads: this tool reads files, and touches nothing else.
    fn capabilities(&self) -> ToolCapabilities {
        ToolCapabilities::none().with_fs_read(FsPaths::FromPersonality)
    }

    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<Value, CapabilityError> {
        let path = args
            .get("path")
            .and_then(Value::as_str)
            .ok_or_else(|| CapabilityError::invalid_input("path: expected a string"))?;
        // The only way to the file system: the scoped object, confined to the intersection of
        // the declaration and the personality.
        let text = ctx.fs()?.read(Path::new(path)).await?;
        Ok(
            json!({"lines": text.lines().count(), "words": text.split_whitespace().count(), "bytes": text.len()}),
        )
    }
}

// ---- The host: wire the plugin beside the standard tools and run a batch. ----

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let scratch = tempfile::tempdir()?;
    let root = scratch.path().canonicalize()?;
    std::fs::write(
        root.join("essay.txt"),
        "Tools declare what they touch.\nReviewers read declarations.\n",
    )?;
    let policy = CompiledPolicy::load(
        &format!(
            "id = \"plugin-demo\"\n[fs_reach]\nread = [\"{}\"]\n",
            root.display()
        ),
        PolicyFormat::Toml,
        None,
    )?;

    let mut registry = standard_registry(StandardConfig::new(Store::Memory)).await?;
    registry.register(WordStats)?;
    for finding in registry.validate(&policy) {
        println!("registration note: {finding}");
    }

    let ctx = ExecutionContext::new("plugin-session", Arc::new(policy), &root);
    let results = registry
        .execute_parallel(
            vec![
                ToolCall::new("1", "word_stats", json!({"path": "essay.txt"})),
                ToolCall::new("2", "word_stats", json!({"path": "/etc/passwd"})),
                ToolCall::new("3", "read_file", json!({"path": "essay.txt"})),
                ToolCall::new("4", "fetch_url", json!({"url": "https://example.com/"})),
            ],
            &ctx,
        )
        .await;
    for r in results {
        println!(
            "{} {:<10} {}",
            r.call_id,
            r.tool,
            serde_json::to_string(&r.result)?
        );
    }
    Ok(())
}
