//! What a batch is made of: calls, the context they run in, the invocation that constraints
//! count over, and the registry's settings.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use capability_types::{CancellationToken, ToolResult};
use serde_json::Value;

use crate::attachments::Attachment;
use crate::filter::ToolFilter;
use crate::policy::CompiledPolicy;

/// One call in a batch.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The caller's id for this call; echoed in the result.
    pub id: String,
    /// The tool's name.
    pub tool: String,
    /// The arguments (a JSON object for the standard tools).
    pub args: Value,
    /// The attachments the user gave with this call's turn ([`with_attachments`](Self::with_attachments)).
    pub attachments: Vec<Arc<Attachment>>,
}

impl ToolCall {
    /// A call.
    pub fn new(id: impl Into<String>, tool: impl Into<String>, args: Value) -> Self {
        Self {
            id: id.into(),
            tool: tool.into(),
            args,
            attachments: Vec::new(),
        }
    }

    /// Hands this call `attachments` (docs/semantics.md, "Attachments"). Its tool sees those
    /// whose kind its declaration and the personality both allow, through
    /// [`ToolContext::attachments`](capability_types::ToolContext::attachments); the next call
    /// sees only what it is handed itself.
    pub fn with_attachments(
        mut self,
        attachments: impl IntoIterator<Item = Arc<Attachment>>,
    ) -> Self {
        self.attachments.extend(attachments);
        self
    }
}

/// The outcome of one call of a batch.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallResult {
    /// The call's id.
    pub call_id: String,
    /// The tool's name as called.
    pub tool: String,
    /// The result.
    pub result: ToolResult,
    /// Wall time from the start of the batch's checks (made for every call of the batch before
    /// any runs) to this call's result.
    pub duration: Duration,
}

/// Who is calling, under which personality, and for how long: shared by every call of a batch.
#[derive(Debug, Clone)]
pub struct ExecutionContext {
    /// The agent session.
    pub session_id: Arc<str>,
    /// The active personality ([`CompiledPolicy::none`] for none).
    pub policy: Arc<CompiledPolicy>,
    /// Relative paths of every call resolve against this absolute directory.
    pub working_dir: Arc<Path>,
    /// Cancels every call of the batch that has not finished.
    pub cancellation: CancellationToken,
    /// Overrides the registry's per-call timeout for this batch.
    pub call_timeout: Option<Duration>,
    /// The invocation of the agent loop these batches belong to: what has run and completed,
    /// for `max_invocations` and `only_after`. Fresh for each new context.
    pub invocation: Arc<Invocation>,
    /// The per-call tool filter of this batch, if the framework passed one
    /// ([`with_tool_filter`](Self::with_tool_filter)).
    pub tool_filter: Option<Arc<ToolFilter>>,
}

/// What one invocation of the agent loop has done so far: how often each tool was dispatched,
/// and which tools completed successfully in earlier batches.
#[derive(Debug)]
pub struct Invocation {
    /// Unique among the invocations of this process, never 0.
    id: u64,
    /// The first tool counted in this invocation, whose count is `first_count`: counted without
    /// a lock (an agent loop calls the same tool again and again). Every other tool is counted
    /// in `dispatched`; a tool is never counted in both.
    first: OnceLock<Box<str>>,
    first_count: AtomicU32,
    dispatched: Mutex<HashMap<String, u32, ByName>>,
    completed: Mutex<HashSet<String, ByName>>,
    /// For `[after_untrusted]` (docs/policy.md, "After untrusted output"): how many batches
    /// have begun, counted only under a personality that has the table; the first batch not
    /// paused; and whether a tool whose results are untrusted has been admitted.
    batches: AtomicU64,
    paused_below: AtomicU64,
    held: AtomicBool,
}

/// The `[after_untrusted]` state a batch began with.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Untrusted {
    /// Its `pause` tools are refused.
    pub(super) paused: bool,
    /// Its `hold` tools are refused.
    pub(super) held: bool,
}

/// What a batch's admissions share: taken as the batch begins, or when first needed.
#[derive(Default)]
pub(super) struct BatchState {
    /// What had completed when the batch began (for `only_after`), taken when a constraint
    /// first asks.
    pub(super) completed_before: Option<CompletedBefore>,
    /// The `[after_untrusted]` state as the batch began.
    pub(super) untrusted: Untrusted,
}

impl BatchState {
    /// A batch of `ctx` beginning: counted, under a personality with `[after_untrusted]`.
    pub(super) fn begin(ctx: &ExecutionContext) -> Self {
        Self::under(ctx, Invocation::begin_batch)
    }

    /// What a batch of `ctx` beginning now would have, counting nothing (a dry run).
    pub(super) fn peek(ctx: &ExecutionContext) -> Self {
        Self::under(ctx, Invocation::next_batch)
    }

    /// The context a held batch of `ctx` runs under: its policy with `[after_untrusted]
    /// hold_writes` kept from writes; `None` when the batch is not held or there is nothing
    /// to keep (docs/policy.md, "After untrusted output").
    pub(super) fn held_context(&self, ctx: &ExecutionContext) -> Option<ExecutionContext> {
        let policy = ctx
            .policy
            .held_after_untrusted()
            .filter(|_| self.untrusted.held)?;
        let mut held = ctx.clone();
        held.policy = Arc::clone(policy);
        Some(held)
    }

    /// The state `untrusted` gives, asked only under a personality with `[after_untrusted]`.
    fn under(ctx: &ExecutionContext, untrusted: fn(&Invocation) -> Untrusted) -> Self {
        BatchState {
            completed_before: None,
            untrusted: if ctx.policy.after_untrusted().is_some() {
                untrusted(&ctx.invocation)
            } else {
                Untrusted::default()
            },
        }
    }
}

impl Default for Invocation {
    fn default() -> Self {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Invocation {
            id: NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            first: OnceLock::new(),
            first_count: AtomicU32::new(0),
            dispatched: Mutex::default(),
            completed: Mutex::default(),
            batches: AtomicU64::new(0),
            paused_below: AtomicU64::new(0),
            held: AtomicBool::new(false),
        }
    }
}

/// FNV-1a, for the registry's index of its tools, the invocation's tables and the plan cache.
/// Their keys are names of registered tools, never text an attacker can choose to collide: a
/// name a caller makes up is only looked up (in the index, before anything else), which probes
/// a table of registered names and inserts nothing. So the hash need not resist flooding, and a
/// call pays a few nanoseconds instead of SipHash.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl std::hash::Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

pub(crate) type ByName = std::hash::BuildHasherDefault<Fnv>;

/// What had completed when a batch began (for `only_after`).
pub(super) type CompletedBefore = HashSet<String, ByName>;

impl Invocation {
    /// A fresh invocation.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// This invocation's number, unique among the invocations of the process (never 0): the
    /// registry remembers per tool the last invocation it completed in.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// A batch begins: its `[after_untrusted]` state.
    pub(super) fn begin_batch(&self) -> Untrusted {
        let index = self.batches.fetch_add(1, Ordering::AcqRel);
        self.state_of(index)
    }

    /// The `[after_untrusted]` state of the next batch to begin, which is not counted.
    pub(super) fn next_batch(&self) -> Untrusted {
        self.state_of(self.batches.load(Ordering::Acquire))
    }

    fn state_of(&self, index: u64) -> Untrusted {
        Untrusted {
            paused: index < self.paused_below.load(Ordering::Acquire),
            held: self.held.load(Ordering::Acquire),
        }
    }

    /// A tool whose results are untrusted was admitted: the `batches` batches that begin after
    /// now are paused, and the rest of the invocation held.
    pub(super) fn saw_untrusted(&self, batches: u32) {
        let until = self
            .batches
            .load(Ordering::Acquire)
            .saturating_add(u64::from(batches));
        self.paused_below.fetch_max(until, Ordering::AcqRel);
        self.held.store(true, Ordering::Release);
    }

    /// Whether a tool whose results are untrusted has been admitted in this invocation, which
    /// holds `[after_untrusted]`'s `hold` tools for the rest of it.
    pub fn saw_untrusted_output(&self) -> bool {
        self.held.load(Ordering::Acquire)
    }

    /// How many calls of `tool` were dispatched.
    pub fn dispatched(&self, tool: &str) -> u32 {
        // Asking claims nothing: a tool not yet counted is in neither place.
        if self.first.get().is_some_and(|first| **first == *tool) {
            return self.first_count.load(Ordering::Acquire);
        }
        self.dispatched
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(tool)
            .copied()
            .unwrap_or(0)
    }

    /// Whether `tool` completed successfully at least once.
    pub fn completed(&self, tool: &str) -> bool {
        self.completed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(tool)
    }

    pub(super) fn completed_snapshot(&self) -> HashSet<String, ByName> {
        self.completed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Takes a `max_invocations` slot; false when none is left.
    pub(super) fn reserve(&self, tool: &str, max: Option<u32>) -> bool {
        if self.is_first(tool) {
            // One compare-and-swap: the limit is checked against the count it replaces.
            return self
                .first_count
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                    max.is_none_or(|m| n < m).then(|| n.saturating_add(1))
                })
                .is_ok();
        }
        let mut counts = self
            .dispatched
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        with_count(&mut counts, tool, |n| {
            if max.is_some_and(|m| *n >= m) {
                return false;
            }
            // An invocation can last a server's life (the stateless MCP requests'): a count
            // that no maximum limits stops at its top rather than wrapping.
            *n = n.saturating_add(1);
            true
        })
    }

    /// Counts `n` dispatches of `tool` that no maximum limits, at once.
    pub(super) fn add_dispatched(&self, tool: &str, n: u32) {
        if self.is_first(tool) {
            // `fetch_update` cannot fail when the closure always returns `Some`.
            let _ = self
                .first_count
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |count| {
                    Some(count.saturating_add(n))
                });
            return;
        }
        let mut counts = self
            .dispatched
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        with_count(&mut counts, tool, |count| *count = count.saturating_add(n));
    }

    /// Whether `tool` is the invocation's first counted tool; the first tool counted becomes it.
    fn is_first(&self, tool: &str) -> bool {
        &**self.first.get_or_init(|| Box::from(tool)) == tool
    }

    pub(super) fn mark_completed(&self, tool: &str) {
        let mut completed = self
            .completed
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if !completed.contains(tool) {
            completed.insert(tool.to_owned());
        }
    }
}

/// Runs `f` on `tool`'s dispatch count; the name is copied once per invocation, not per call.
fn with_count<R>(
    counts: &mut HashMap<String, u32, ByName>,
    tool: &str,
    f: impl FnOnce(&mut u32) -> R,
) -> R {
    if let Some(n) = counts.get_mut(tool) {
        return f(n);
    }
    f(counts.entry(tool.to_owned()).or_insert(0))
}

impl ExecutionContext {
    /// A context with a fresh cancellation token and the registry's timeout.
    pub fn new(
        session_id: impl Into<Arc<str>>,
        policy: Arc<CompiledPolicy>,
        working_dir: impl AsRef<Path>,
    ) -> Self {
        Self {
            session_id: session_id.into(),
            policy,
            working_dir: Arc::from(working_dir.as_ref()),
            cancellation: CancellationToken::new(),
            call_timeout: None,
            invocation: Invocation::new(),
            tool_filter: None,
        }
    }

    /// Starts a new invocation of the agent loop: constraints count from zero again.
    pub fn new_invocation(mut self) -> Self {
        self.invocation = Invocation::new();
        self
    }

    /// Sets the per-call timeout for this batch.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = Some(timeout);
        self
    }

    /// The same invocation under `narrowing`, which can only restrict the policy (see
    /// [`CompiledPolicy::narrow`]). Constraint counts carry on: it is the same invocation.
    pub fn narrowed(
        &self,
        narrowing: &capability_policy::Narrowing,
    ) -> Result<Self, capability_policy::PolicyError> {
        let mut ctx = self.clone();
        ctx.policy = Arc::new(self.policy.narrow(narrowing)?);
        Ok(ctx)
    }

    /// The same invocation with `filter` narrowing the toolset further (docs/policy.md,
    /// "Per-call tool filters"). A context that already has a filter keeps it: a tool must pass
    /// both, so a filter can never widen what an earlier one left out. A tool the filter leaves
    /// out is refused with `TOOL_FILTERED_OUT`, and every audit event of the batch names the
    /// filter.
    pub fn with_tool_filter(mut self, filter: ToolFilter) -> Self {
        let filter = match &self.tool_filter {
            Some(earlier) => earlier.and(&filter),
            None => filter,
        };
        self.tool_filter = Some(Arc::new(filter));
        self
    }

    /// Uses `token` for cancellation.
    pub fn with_cancellation(mut self, token: CancellationToken) -> Self {
        self.cancellation = token;
        self
    }
}

/// Registry settings. The defaults are safe for an interactive agent.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RegistryConfig {
    /// At most this many calls of a batch run at once (default 64).
    pub max_concurrency: usize,
    /// At most this many calls of this registry run at once, across every batch (default: no
    /// bound beyond each batch's). A server that makes a batch of each request it gets (an MCP
    /// server) needs it: `max_concurrency` never binds across requests. A call past it waits
    /// for a place after its admission and approval and before its tool starts; its timeout
    /// counts from then, and its batch's cancellation ends the wait.
    pub max_running: Option<usize>,
    /// A call still running after this long ends with `timeout` (default 60 s).
    pub call_timeout: Duration,
    /// Successful values whose JSON is longer than this many bytes are truncated with a marker
    /// (default: no budget).
    pub result_budget: Option<usize>,
    /// How long an escalated call waits for approval when the personality sets no
    /// `escalate.timeout_seconds` (default 30 s). No answer in time is a refusal.
    pub approval_timeout: Duration,
    /// Record each call's arguments in its `tool_called` / `tool_denied` audit event, masked
    /// (default false: events carry no arguments).
    pub audit_arguments: bool,
    /// Argument keys masked in audit events and approval requests besides the built-in
    /// credential names (`token`, `password`, `authorization`, …); matched case-insensitively,
    /// as substrings.
    pub sensitive_keys: Vec<String>,
}

impl Default for RegistryConfig {
    fn default() -> Self {
        Self {
            max_concurrency: 64,
            max_running: None,
            call_timeout: Duration::from_secs(60),
            result_budget: None,
            approval_timeout: Duration::from_secs(30),
            audit_arguments: false,
            sensitive_keys: Vec::new(),
        }
    }
}

impl RegistryConfig {
    /// Bounds the calls running at once across every batch (at least 1).
    pub fn max_running(mut self, n: usize) -> Self {
        self.max_running = Some(n.max(1));
        self
    }

    /// Sets the concurrency bound (at least 1).
    pub fn max_concurrency(mut self, n: usize) -> Self {
        self.max_concurrency = n.max(1);
        self
    }
    /// Sets the per-call timeout.
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }
    /// Records masked arguments in audit events.
    pub fn audit_arguments(mut self, on: bool) -> Self {
        self.audit_arguments = on;
        self
    }
    /// Adds argument keys to mask.
    pub fn sensitive_keys<I: IntoIterator<Item = S>, S: Into<String>>(mut self, keys: I) -> Self {
        self.sensitive_keys.extend(keys.into_iter().map(Into::into));
        self
    }
    /// Sets the approval timeout.
    pub fn approval_timeout(mut self, timeout: Duration) -> Self {
        self.approval_timeout = timeout;
        self
    }
    /// Sets the result budget in bytes.
    pub fn result_budget(mut self, bytes: Option<usize>) -> Self {
        self.result_budget = bytes;
        self
    }
}

/// Registering a tool failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// A tool of that name is already registered.
    #[error("a tool named {0} is already registered")]
    DuplicateTool(String),
    /// The name is not 1–64 characters of `a-z 0-9 _ -`.
    #[error("{0:?} is not a valid tool name (1-64 characters of a-z 0-9 _ -)")]
    InvalidName(String),
    /// The declaration is malformed (a bad host pattern, a relative path, a bad binary spec).
    #[error("tool {tool} has an invalid declaration: {message}")]
    InvalidDeclaration {
        /// The tool.
        tool: String,
        /// What is wrong.
        message: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_invocation_counts_dispatches_against_the_maximum() {
        let invocation = Invocation::new();
        assert!(invocation.reserve("t", Some(2)));
        assert!(invocation.reserve("t", Some(2)));
        assert!(!invocation.reserve("t", Some(2)), "the third is over");
        assert_eq!(invocation.dispatched("t"), 2);
        assert!(invocation.reserve("u", None), "no maximum, no limit");
        assert!(!invocation.completed("t"));
        invocation.mark_completed("t");
        assert!(invocation.completed("t"));
        assert!(invocation.completed_snapshot().contains("t"));
    }

    #[test]
    fn a_new_invocation_starts_from_zero() {
        let ctx = ExecutionContext::new("s", Arc::new(CompiledPolicy::none(None)), "/tmp");
        assert!(ctx.invocation.reserve("t", Some(1)));
        let next = ctx.clone().new_invocation();
        assert_eq!(next.invocation.dispatched("t"), 0);
        assert_eq!(ctx.invocation.dispatched("t"), 1);
    }
}
