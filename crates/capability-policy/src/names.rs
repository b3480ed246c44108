//! Tool names in a toolset.

/// Whether `name` is a valid tool name: 1–64 characters of `a-z`, `0-9`, `_`, `-`.
pub fn valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'_' | b'-'))
}

/// Whether a toolset entry names every tool of one MCP server: `mcp__<server>__*`, the server a
/// tool name without `__` (docs/policy.md, "Ethos personality directories").
///
/// ```
/// use capability_policy::is_mcp_server_entry;
/// assert!(is_mcp_server_entry("mcp__github__*"));
/// assert!(!is_mcp_server_entry("mcp__*"));
/// assert!(!is_mcp_server_entry("mcp__a__b__*"));
/// assert!(!is_mcp_server_entry("read_*"));
/// ```
pub fn is_mcp_server_entry(entry: &str) -> bool {
    entry
        .strip_prefix("mcp__")
        .and_then(|rest| rest.strip_suffix("__*"))
        .is_some_and(|server| valid_tool_name(server) && !server.contains("__"))
}
