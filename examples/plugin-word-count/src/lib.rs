//! A toolcap plugin, written the way a plugin author writes one: against `capability-types`
//! alone. It declares what it touches (files the personality lets it read) and touches them only
//! through the scoped object it is handed.
//!
//! ```
//! use capability_types::Tool;
//! let tool = plugin_word_count::WordCount;
//! // The declaration is data: a reviewer reads it, not the code.
//! assert_eq!(
//!     serde_json::to_string(&tool.capabilities()).unwrap(),
//!     r#"{"fs_reach":{"read":"from-personality"}}"#,
//! );
//! ```
#![deny(missing_docs)]

use capability_types::{
    CapabilityError, FsPaths, Tool, ToolCapabilities, ToolContext, async_trait,
};
use serde_json::{Value, json};

/// Counts the lines, words and bytes of a text file, or of a text given inline.
#[derive(Debug, Clone, Copy, Default)]
pub struct WordCount;

#[async_trait]
impl Tool for WordCount {
    fn name(&self) -> &str {
        "word_count"
    }
    fn description(&self) -> &str {
        "Counts the lines, words and bytes of a text file (`path`) or of a text (`text`)"
    }
    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {"path": {"type": "string"}, "text": {"type": "string"}},
            "oneOf": [{"required": ["path"]}, {"required": ["text"]}]
        })
    }
    fn capabilities(&self) -> ToolCapabilities {
        ToolCapabilities::none().with_fs_read(FsPaths::FromPersonality)
    }
    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<Value, CapabilityError> {
        let text = match (args.get("path"), args.get("text")) {
            (Some(Value::String(path)), None) => ctx.fs()?.read(path.as_ref()).await?,
            (None, Some(Value::String(text))) => text.clone(),
            _ => {
                return Err(CapabilityError::invalid_input(
                    "give either `path` or `text`, a string",
                ));
            }
        };
        Ok(json!({
            "lines": text.lines().count(),
            "words": text.split_whitespace().count(),
            "bytes": text.len(),
        }))
    }
}
