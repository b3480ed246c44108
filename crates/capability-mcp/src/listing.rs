//! What `tools/list` answers: the personality's toolset as MCP tools (docs/mcp.md, "Tools").

use std::sync::Arc;

use capability_core::{CompiledPolicy, DefaultToolRegistry};
use capability_types::ToolCapabilities;
use rmcp::model::{Tool, ToolAnnotations};
use serde_json::Value;

/// The registered, available tools that `policy`'s toolset names, sorted by name.
pub(crate) fn list(registry: &DefaultToolRegistry, policy: &CompiledPolicy) -> Vec<Tool> {
    registry
        .tools()
        .filter(|(tool, _)| policy.allows_tool(tool.name()) && tool.is_available())
        .map(|(tool, caps)| {
            let mut listed = Tool::default();
            listed.name = tool.name().to_owned().into();
            listed.description = Some(tool.description().to_owned().into());
            listed.input_schema = Arc::new(input_schema(tool.input_schema()));
            let mut hints = tool_annotations(caps);
            // A process confined once (a guarded server) does what its declaration cannot
            // show, in a home it keeps for its life: never read-only (docs/mcp.md, "Tools").
            if registry.is_confined_once(tool.name()) {
                hints = hints.read_only(false).destructive(true);
            }
            listed.annotations = Some(hints);
            listed
        })
        .collect()
}

/// A tool's schema as an MCP input schema: a JSON object; anything else (a tool that returns a
/// non-object) becomes `{"type": "object"}`, so the listing stays valid.
fn input_schema(schema: Value) -> serde_json::Map<String, Value> {
    match schema {
        Value::Object(map) if map.get("type").and_then(Value::as_str) == Some("object") => map,
        _ => {
            let mut map = serde_json::Map::new();
            map.insert("type".to_owned(), Value::from("object"));
            map
        }
    }
}

/// The MCP annotations a declaration implies (hints for the client; the declaration, not the
/// hint, is what toolcap enforces):
///
/// - `readOnlyHint`: nothing is changed: no filesystem write, no command, no key-value state
///   and no network (a declaration cannot tell a key-value read from a write, nor a `GET` from
///   a `POST`, so storage and hosts count as writing: a client may ask nothing before a tool it
///   is told is read-only, and a guarded GitHub server's `merge_pull_request` declares hosts and
///   nothing else);
/// - `destructiveHint`: the opposite of read-only (a write can overwrite, a command can do
///   anything, a key can be deleted, a request can delete what lies at the other end);
/// - `openWorldHint`: the tool reaches the network or runs commands.
///
/// ```
/// use capability_types::{FsPaths, ToolCapabilities};
/// let read = capability_mcp::tool_annotations(
///     &ToolCapabilities::none().with_fs_read(FsPaths::FromPersonality),
/// );
/// assert_eq!(read.read_only_hint, Some(true));
/// assert_eq!(read.destructive_hint, Some(false));
/// assert_eq!(read.open_world_hint, Some(false));
/// ```
pub fn tool_annotations(caps: &ToolCapabilities) -> ToolAnnotations {
    let writes = caps
        .fs_reach
        .as_ref()
        .is_some_and(|reach| reach.write.is_some());
    let spawns = caps.process.is_some();
    let stores = caps.storage.is_some();
    let reaches = caps.network.is_some();
    let read_only = !(writes || spawns || stores || reaches);
    ToolAnnotations::new()
        .read_only(read_only)
        .destructive(!read_only)
        .open_world(reaches || spawns)
}
