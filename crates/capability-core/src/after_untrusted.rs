//! A personality's `[after_untrusted]` as the registry applies it (docs/policy.md, "After
//! untrusted output"): which tools its lists name, and the policy a held batch runs under, with
//! `hold_writes` kept from writes.

use std::sync::Arc;

use capability_policy::{AfterUntrusted, Narrowing, PolicyError};

use crate::policy::CompiledPolicy;

/// Whether the toolset-style `entry` names `tool`: the tool itself, or `mcp__SERVER__*` every
/// tool of that server.
pub(crate) fn names_tool(entry: &str, tool: &str) -> bool {
    entry == tool
        || (capability_policy::is_mcp_server_entry(entry)
            && tool.len() > entry.len() - 1
            && tool.starts_with(&entry[..entry.len() - 1]))
}

impl CompiledPolicy {
    /// `[after_untrusted]`, when the personality has one (docs/policy.md, "After untrusted
    /// output").
    pub fn after_untrusted(&self) -> Option<&AfterUntrusted> {
        self.after_untrusted.as_deref()
    }

    /// The policy the batches of an invocation that has seen untrusted output run under: this
    /// one with `[after_untrusted] hold_writes` added to `deny_write`, so that no tool, and no
    /// child, writes there for the rest of the invocation. `None` when there is nothing to
    /// hold from writes (the policy itself then applies).
    pub fn held_after_untrusted(&self) -> Option<&Arc<CompiledPolicy>> {
        self.held.as_ref()
    }

    /// This policy with its variant for held batches made, once, as it is compiled or
    /// narrowed.
    pub(crate) fn with_held(mut self) -> Result<Self, PolicyError> {
        let places = self
            .after_untrusted
            .as_ref()
            .map(|a| a.hold_writes.clone())
            .unwrap_or_default();
        if !places.is_empty() {
            let mut narrowing = Narrowing::default();
            narrowing.fs_reach.deny_write = places;
            self.held = Some(Arc::new(self.narrowed(&narrowing).map_err(|e| {
                PolicyError::invalid(
                    "after_untrusted.hold_writes",
                    format!("cannot be kept from writes: {e}"),
                )
            })?));
        }
        Ok(self)
    }
}
