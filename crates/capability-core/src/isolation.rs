//! The registry's hook for running chosen tools somewhere other than this process.
//!
//! The registry resolves a call exactly as it always does — toolset, backends, scoped objects,
//! escalation, constraints, audit — and then, for a tool the [`IsolationSelection`] names, hands
//! the call to a [`ToolIsolation`] instead of calling [`Tool::execute`] itself. The isolation
//! (the capsule of `capability-capsule`) runs the tool's code in a confined worker and serves
//! every scoped-object request of that worker through the [`ToolContext`] it is given here, so
//! the host enforces the policy a second time. Timeouts and cancellation are the registry's: the
//! future is dropped, and the isolation must then stop the worker.

use std::collections::BTreeSet;
use std::fmt;

use async_trait::async_trait;
use capability_types::{CapabilityError, Tool, ToolContext};
use serde_json::Value;

/// Which registered tools run isolated.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum IsolationSelection {
    /// Every tool, under every personality.
    All,
    /// Only the tools of these names.
    Tools(BTreeSet<String>),
    /// Every tool called under a personality of these ids.
    Personalities(BTreeSet<String>),
}

impl IsolationSelection {
    /// The tools of these names.
    pub fn tools<I: IntoIterator<Item = S>, S: Into<String>>(names: I) -> Self {
        IsolationSelection::Tools(names.into_iter().map(Into::into).collect())
    }

    /// Every tool called under the personalities of these ids.
    pub fn personalities<I: IntoIterator<Item = S>, S: Into<String>>(ids: I) -> Self {
        IsolationSelection::Personalities(ids.into_iter().map(Into::into).collect())
    }

    /// Whether `tool`, called under the personality `personality`, runs isolated.
    pub fn includes(&self, tool: &str, personality: Option<&str>) -> bool {
        match self {
            IsolationSelection::All => true,
            IsolationSelection::Tools(names) => names.contains(tool),
            IsolationSelection::Personalities(ids) => {
                personality.is_some_and(|id| ids.contains(id))
            }
        }
    }
}

/// What an isolated call may share a worker with: calls of the same tool under the same compiled
/// personality ([`CompiledPolicy::generation`](crate::CompiledPolicy::generation)). A worker is
/// never reused across tools or personalities, so state a tool keeps in memory cannot cross them;
/// an isolation may keep it narrower still (the capsule keeps a worker to one session, which the
/// call's context names).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IsolationKey {
    /// The tool's name.
    pub tool: String,
    /// The compiled personality's generation.
    pub policy: u64,
}

/// Runs one call of a tool out of process.
///
/// `ctx` carries the host-side scoped objects the registry resolved for this call; every request
/// the isolated tool makes must be answered through them (never by authority of the isolation's
/// own). A crash of the isolated code is `execution_failed` for this call only.
#[async_trait]
pub trait ToolIsolation: Send + Sync + fmt::Debug {
    /// Runs `tool` with `args`. Dropping the future (timeout, cancellation) must stop the
    /// isolated code.
    async fn execute(
        &self,
        key: &IsolationKey,
        tool: &dyn Tool,
        args: Value,
        ctx: &ToolContext,
    ) -> Result<Value, CapabilityError>;

    /// No call of `session` will come again (its MCP connection ended, say): what the
    /// isolation keeps for that session alone (the capsule's warm workers) can go now. A call
    /// of the session still running when this is said keeps what it uses. The default keeps
    /// nothing per session and does nothing.
    fn session_ended(&self, session: &str) {
        let _ = session;
    }
}
