//! A framework's own tool, next to the standard ones, served to MCP clients over stdio.
//!
//! ```sh
//! cargo run -p capability-mcp --example stdio_server -- /path/to/a/directory
//! ```
//!
//! Point an MCP client at that command (or type JSON-RPC lines into it): the personality below
//! lets `word_count` and `read_file` read the given directory and nothing else.
#![allow(
    clippy::print_stderr,
    reason = "an example explains itself on stderr (stdout is the MCP channel)"
)]

use std::path::Path;
use std::sync::Arc;

use capability_core::{CompiledPolicy, PolicyFormat};
use capability_mcp::McpServer;
use capability_tools::{StandardConfig, Store, standard_registry};
use capability_types::{
    CapabilityError, FsPaths, Tool, ToolCapabilities, ToolContext, async_trait,
};
use serde_json::{Value, json};

/// Counts the words of a text file; it declares that it reads files, and nothing else.
struct WordCount;

#[async_trait]
impl Tool for WordCount {
    fn name(&self) -> &str {
        "word_count"
    }
    fn description(&self) -> &str {
        "Counts the words of a UTF-8 text file."
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object", "additionalProperties": false, "required": ["path"],
               "properties": {"path": {"type": "string"}}})
    }
    fn capabilities(&self) -> ToolCapabilities {
        ToolCapabilities::none().with_fs_read(FsPaths::FromPersonality)
    }
    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<Value, CapabilityError> {
        let path = args["path"]
            .as_str()
            .ok_or_else(|| CapabilityError::invalid_input("path: expected a string"))?;
        let text = ctx.fs()?.read(Path::new(path)).await?;
        Ok(json!(text.split_whitespace().count()))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let Some(dir) = std::env::args().nth(1) else {
        eprintln!("usage: stdio_server DIRECTORY");
        std::process::exit(2);
    };
    #[allow(
        clippy::disallowed_methods,
        reason = "the example's host resolves the directory its user named, before any tool runs"
    )]
    let dir = Path::new(&dir).canonicalize()?;
    let policy = CompiledPolicy::load(
        &format!(
            "id = \"example\"\ntoolset = [\"word_count\", \"read_file\"]\n[fs_reach]\nread = [{:?}]\n",
            dir.display().to_string()
        ),
        PolicyFormat::Toml,
        None,
    )?;
    let mut registry = standard_registry(StandardConfig::new(Store::Memory)).await?;
    registry.register(WordCount)?;
    let server = McpServer::new(registry, Arc::new(policy), &dir);
    eprintln!(
        "serving word_count and read_file over stdio for {}",
        dir.display()
    );
    server.serve_stdio().await?;
    Ok(())
}
