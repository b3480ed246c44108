//! What the MCP tests share: where `.ci/mcp-deps` put the pinned peers, and when to skip.
#![allow(
    clippy::print_stderr,
    dead_code,
    reason = "a test that skips says so; each test binary uses part of this"
)]

use std::path::PathBuf;

/// The cache of pinned MCP peers (`$TOOLCAP_MCP_CACHE`, or `~/.cache/toolcap-mcp`) when every
/// path in `needs` (relative to it) is there. Otherwise the test skips with a message, except
/// in CI (`CI` set), where `.ci/run` installs them and their absence fails the test.
pub(crate) fn mcp_cache(needs: &[&str]) -> Option<PathBuf> {
    let cache = std::env::var_os("TOOLCAP_MCP_CACHE")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/toolcap-mcp"))
        })?;
    if needs.iter().all(|n| cache.join(n).exists()) {
        return Some(cache);
    }
    let message = format!(
        "the pinned MCP peers are not in {} (run `bash .ci/mcp-deps`)",
        cache.display()
    );
    assert!(std::env::var_os("CI").is_none(), "{message}");
    eprintln!("SKIPPED: {message}");
    None
}
