//! Per-call tool filters (docs/policy.md, "Per-call tool filters"): what a framework passes for
//! one call or one turn to narrow the toolset further than the personality does, in Ethos's
//! terms (`allowedTools`, `allowedMcpServers`, `allowedMcpTools`), with glob patterns.
//!
//! A filter can only take tools away. It is checked after the personality's toolset, so a tool
//! outside the toolset is refused with `TOOL_NOT_IN_TOOLSET` whatever the filter says, and a
//! tool the filter leaves out is refused with its own code, `TOOL_FILTERED_OUT`.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// The longest pattern accepted, in bytes.
const MAX_PATTERN_LEN: usize = 256;
/// The most patterns one filter may hold, all lists together.
const MAX_PATTERNS: usize = 4096;

/// One layer of a filter, in Ethos's JSON shape. Every field absent means "no filter on that".
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Layer {
    /// Tools a call may use. MCP tools (`mcp__<server>__<tool>`) answer to it only when the
    /// layer has no MCP part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    allowed_tools: Option<Vec<String>>,
    /// MCP servers whose tools a call may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    allowed_mcp_servers: Option<Vec<String>>,
    /// Per MCP server, the tools (bare names) a call may use; a server not named is not
    /// filtered here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    allowed_mcp_tools: Option<BTreeMap<String, Vec<String>>>,
}

/// A per-call tool filter: one or more layers, every one of which a tool must pass.
///
/// Build it from Ethos's JSON shape ([`ToolFilter::from_json`]) or with the builder methods,
/// and hand it to a batch with
/// [`ExecutionContext::with_tool_filter`](crate::ExecutionContext::with_tool_filter). Adding a
/// filter to a context that has one keeps both ([`ToolFilter::and`]): filters only narrow.
///
/// Patterns are globs over tool and server names: `*` matches any run of characters
/// (including none), `?` exactly one; every other character matches itself. A pattern may use
/// the characters of MCP tool names (`A-Z a-z 0-9 _ - .`) and the two wildcards.
///
/// ```
/// use capability_core::ToolFilter;
///
/// let filter = ToolFilter::from_json(r#"{
///     "allowedTools": ["read_*", "list_dir"],
///     "allowedMcpServers": ["github"],
///     "allowedMcpTools": {"github": ["get_*"]}
/// }"#).unwrap();
/// assert!(filter.allows("read_file").is_ok());
/// assert!(filter.allows("write_file").is_err());
/// assert!(filter.allows("mcp__github__get_issue").is_ok());
/// assert!(filter.allows("mcp__github__create_issue").is_err());
/// assert!(filter.allows("mcp__linear__list_issues").is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct ToolFilter {
    layers: Vec<Layer>,
}

/// A filter that could not be built: the field and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("tool filter: {0}")]
pub struct ToolFilterError(String);

impl Default for ToolFilter {
    fn default() -> Self {
        Self {
            layers: vec![Layer::default()],
        }
    }
}

impl ToolFilter {
    /// A filter that lets every tool through (until a builder method narrows it).
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses Ethos's JSON shape: an object with any of `allowedTools` (list of patterns),
    /// `allowedMcpServers` (list of patterns) and `allowedMcpTools` (object from server name to
    /// list of patterns). An unknown field, a wrong type or a bad pattern is an error.
    pub fn from_json(text: &str) -> Result<Self, ToolFilterError> {
        // A key given twice would let the second list silently replace the first.
        capability_policy::check_policy_text(text, capability_policy::PolicyFormat::Json)
            .map_err(ToolFilterError)?;
        let layer: Layer =
            serde_json::from_str(text).map_err(|e| ToolFilterError(e.to_string()))?;
        Self::from_layer(layer)
    }

    /// [`from_json`](Self::from_json) from an already parsed value.
    pub fn from_value(value: &serde_json::Value) -> Result<Self, ToolFilterError> {
        let layer = Layer::deserialize(value).map_err(|e| ToolFilterError(e.to_string()))?;
        Self::from_layer(layer)
    }

    fn from_layer(layer: Layer) -> Result<Self, ToolFilterError> {
        let filter = Self {
            layers: vec![layer],
        };
        filter.check()?;
        Ok(filter)
    }

    /// Only tools matching one of `patterns` (see the type's docs for MCP tools).
    pub fn allowed_tools<I, S>(self, patterns: I) -> Result<Self, ToolFilterError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.edit(|l| l.allowed_tools = Some(patterns.into_iter().map(Into::into).collect()))
    }

    /// Only MCP tools of servers matching one of `patterns`.
    pub fn allowed_mcp_servers<I, S>(self, patterns: I) -> Result<Self, ToolFilterError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.edit(|l| l.allowed_mcp_servers = Some(patterns.into_iter().map(Into::into).collect()))
    }

    /// Of `server`'s MCP tools, only those whose bare name matches one of `patterns`.
    pub fn allowed_mcp_tools<I, S>(
        self,
        server: impl Into<String>,
        patterns: I,
    ) -> Result<Self, ToolFilterError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.edit(|l| {
            l.allowed_mcp_tools
                .get_or_insert_with(BTreeMap::new)
                .insert(
                    server.into(),
                    patterns.into_iter().map(Into::into).collect(),
                );
        })
    }

    /// Changes the last layer (the one the builder methods speak of), then checks.
    fn edit(mut self, change: impl FnOnce(&mut Layer)) -> Result<Self, ToolFilterError> {
        if let Some(last) = self.layers.last_mut() {
            change(last);
        }
        self.check()?;
        Ok(self)
    }

    /// Both filters: a tool passes only if it passes each.
    pub fn and(&self, other: &ToolFilter) -> ToolFilter {
        let mut layers = self.layers.clone();
        layers.extend(other.layers.iter().cloned());
        ToolFilter { layers }
    }

    /// `Ok` when `tool` passes every layer; otherwise why not, naming the list that left it out.
    pub fn allows(&self, tool: &str) -> Result<(), String> {
        self.layers.iter().try_for_each(|layer| layer.allows(tool))
    }

    fn check(&self) -> Result<(), ToolFilterError> {
        let mut count = 0;
        for layer in &self.layers {
            let lists = layer
                .allowed_tools
                .iter()
                .map(|l| ("allowedTools", l))
                .chain(
                    layer
                        .allowed_mcp_servers
                        .iter()
                        .map(|l| ("allowedMcpServers", l)),
                )
                .chain(
                    layer
                        .allowed_mcp_tools
                        .iter()
                        .flatten()
                        .map(|(_, l)| ("allowedMcpTools", l)),
                );
            for (field, list) in lists {
                for (i, pattern) in list.iter().enumerate() {
                    check_pattern(pattern)
                        .map_err(|why| ToolFilterError(format!("{field}[{i}] {why}")))?;
                    count += 1;
                }
            }
            for server in layer.allowed_mcp_tools.iter().flat_map(BTreeMap::keys) {
                if server.is_empty() || !server.chars().all(is_name_char) {
                    return Err(ToolFilterError(format!(
                        "allowedMcpTools key {:?} is not a server name",
                        server.escape_debug().to_string()
                    )));
                }
            }
        }
        if count > MAX_PATTERNS {
            return Err(ToolFilterError(format!(
                "{count} patterns; at most {MAX_PATTERNS} are accepted"
            )));
        }
        Ok(())
    }
}

impl Layer {
    fn allows(&self, tool: &str) -> Result<(), String> {
        let mcp = split_mcp(tool);
        let has_mcp_part = self.allowed_mcp_servers.is_some() || self.allowed_mcp_tools.is_some();
        if let Some(patterns) = &self.allowed_tools
            && (mcp.is_none() || !has_mcp_part)
            && !any_matches(patterns, tool)
        {
            return Err(format!(
                "{tool} is not matched by allowedTools {patterns:?}"
            ));
        }
        let Some((server, bare)) = mcp else {
            return Ok(());
        };
        if let Some(patterns) = &self.allowed_mcp_servers
            && !any_matches(patterns, server)
        {
            return Err(format!(
                "MCP server {server} is not matched by allowedMcpServers {patterns:?}"
            ));
        }
        if let Some(patterns) = self.allowed_mcp_tools.as_ref().and_then(|m| m.get(server))
            && !any_matches(patterns, bare)
        {
            return Err(format!(
                "{bare} is not matched by allowedMcpTools[{server}] {patterns:?}"
            ));
        }
        Ok(())
    }
}

/// The serialized form (a list of layers, as audit records hold it) is checked like any other
/// input: a bad pattern is an error, not a filter that lets things through.
impl<'de> Deserialize<'de> for ToolFilter {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let filter = ToolFilter {
            layers: Vec::<Layer>::deserialize(d)?,
        };
        filter.check().map_err(serde::de::Error::custom)?;
        Ok(filter)
    }
}

impl fmt::Display for ToolFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match serde_json::to_string(self) {
            Ok(text) => f.write_str(&text),
            Err(_) => f.write_str("<tool filter>"),
        }
    }
}

/// `mcp__<server>__<tool>` → (server, tool); anything else is not an MCP tool.
fn split_mcp(tool: &str) -> Option<(&str, &str)> {
    let rest = tool.strip_prefix("mcp__")?;
    let (server, bare) = rest.split_once("__")?;
    (!server.is_empty() && !bare.is_empty()).then_some((server, bare))
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')
}

fn check_pattern(pattern: &str) -> Result<(), String> {
    if pattern.is_empty() {
        return Err("is empty".to_owned());
    }
    if pattern.len() > MAX_PATTERN_LEN {
        return Err(format!(
            "is {} bytes long; at most {MAX_PATTERN_LEN} are accepted",
            pattern.len()
        ));
    }
    if let Some(c) = pattern
        .chars()
        .find(|&c| !is_name_char(c) && c != '*' && c != '?')
    {
        return Err(format!(
            "{:?} has the character {:?}; patterns use A-Z a-z 0-9 _ - . and the wildcards * ?",
            pattern.escape_debug().to_string(),
            c
        ));
    }
    Ok(())
}

fn any_matches(patterns: &[String], name: &str) -> bool {
    patterns
        .iter()
        .any(|p| wildmatch::WildMatch::new(p).matches(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        for (p, n, want) in [
            ("read_file", "read_file", true),
            ("read_*", "read_file", true),
            ("read_*", "read_", true),
            ("read_*", "rea", false),
            ("*", "", true),
            ("*_file", "write_file", true),
            ("?ead_file", "read_file", true),
            ("?", "", false),
            ("a*b*c", "axxbyyc", true),
            ("a*b*c", "axxbyy", false),
            ("*a*a*a*a*a*a*a*b", &"a".repeat(200), false),
        ] {
            assert_eq!(any_matches(&[p.to_owned()], n), want, "{p} vs {n}");
        }
    }

    #[test]
    fn hostile_filters_are_refused_with_the_field() {
        for (text, field) in [
            (r#"{"allowedTool": ["x"]}"#, "unknown field"),
            (r#"{"allowedTools": "x"}"#, "invalid type"),
            (r#"{"allowedTools": [""]}"#, "allowedTools[0] is empty"),
            (r#"{"allowedTools": ["a b"]}"#, "allowedTools[0]"),
            (
                r#"{"allowedMcpServers": ["x", "[a]"]}"#,
                "allowedMcpServers[1]",
            ),
            (
                r#"{"allowedMcpTools": {"gh": ["ok", "../x"]}}"#,
                "allowedMcpTools[1]",
            ),
            (
                r#"{"allowedMcpTools": {"g h": ["ok"]}}"#,
                "is not a server name",
            ),
            (
                r#"{"allowedTools": ["x"], "allowedTools": ["y"]}"#,
                "duplicate key",
            ),
            (
                r#"{"allowedMcpTools": {"gh": ["get"], "gh": ["*"]}}"#,
                "duplicate key",
            ),
            ("[1]", "invalid type"),
            ("{", "EOF"),
        ] {
            let err = ToolFilter::from_json(text).unwrap_err().to_string();
            assert!(err.contains(field), "{text}: {err}");
        }
        let long = format!(r#"{{"allowedTools": ["{}"]}}"#, "a".repeat(300));
        assert!(ToolFilter::from_json(&long).is_err());
        let many: Vec<String> = (0..5000).map(|i| format!("t{i}")).collect();
        assert!(ToolFilter::new().allowed_tools(many).is_err());
    }

    #[test]
    fn ethos_semantics_for_mcp_tools() {
        // allowedTools alone governs every tool, MCP ones included.
        let only = ToolFilter::new().allowed_tools(["read_file"]).unwrap();
        assert!(only.allows("mcp__gh__get_issue").is_err());
        // With an MCP part, MCP tools answer to it, as in Ethos.
        let both = only.clone().allowed_mcp_servers(["gh"]).unwrap();
        assert!(both.allows("mcp__gh__get_issue").is_ok());
        assert!(both.allows("mcp__other__x").is_err());
        assert!(both.allows("write_file").is_err());
        // A server without an allowedMcpTools entry is not filtered by tool name.
        let per_tool = ToolFilter::new()
            .allowed_mcp_tools("gh", ["get_*"])
            .unwrap();
        assert!(per_tool.allows("mcp__gh__get_issue").is_ok());
        assert!(per_tool.allows("mcp__gh__create_issue").is_err());
        assert!(per_tool.allows("mcp__linear__anything").is_ok());
        assert!(per_tool.allows("write_file").is_ok());
        // Bare names keep their inner double underscores.
        let inner = ToolFilter::new().allowed_mcp_tools("gh", ["a__b"]).unwrap();
        assert!(inner.allows("mcp__gh__a__b").is_ok());
        // Not an MCP name: `mcp__` alone, or no tool part.
        assert!(both.allows("mcp__").is_err());
        assert!(both.allows("mcp__gh__").is_err());
    }

    #[test]
    fn and_only_narrows() {
        let a = ToolFilter::new()
            .allowed_tools(["read_*", "list_dir"])
            .unwrap();
        let b = ToolFilter::new().allowed_tools(["*_file"]).unwrap();
        let both = a.and(&b);
        assert!(both.allows("read_file").is_ok());
        assert!(both.allows("list_dir").is_err());
        assert!(both.allows("write_file").is_err());
        let empty = ToolFilter::new()
            .allowed_tools(Vec::<String>::new())
            .unwrap();
        assert!(a.and(&empty).allows("read_file").is_err());
        assert!(ToolFilter::new().allows("anything").is_ok());
    }

    #[test]
    fn round_trips_as_ethos_json() {
        let f = ToolFilter::from_json(
            r#"{"allowedTools":["read_*"],"allowedMcpServers":["gh"],"allowedMcpTools":{"gh":["get_*"]}}"#,
        )
        .unwrap();
        assert_eq!(
            f.to_string(),
            r#"[{"allowedTools":["read_*"],"allowedMcpServers":["gh"],"allowedMcpTools":{"gh":["get_*"]}}]"#
        );
        let back: ToolFilter = serde_json::from_str(&f.to_string()).unwrap();
        assert_eq!(back, f);
        assert!(serde_json::from_str::<ToolFilter>(r#"[{"allowedTools":["a b"]}]"#).is_err());
    }
}
