//! `DefaultToolRegistry`: registration, and `execute_parallel` with bounded concurrency,
//! timeouts, cancellation and panic containment (docs/semantics.md, "The registry").
//!
//! - [`call`]: what a batch is made of (calls, their context, the invocation, the settings);
//! - [`admission`]: everything decided before a tool runs — lookup, toolset, availability, the
//!   fail-closed guard, resolution, constraints, the argument gate and escalation — shared by
//!   `execute` and its dry run, [`DefaultToolRegistry::admission`];
//! - [`output`]: what a call returns when a tool panics, overruns its budget or never ran.

mod admission;
mod call;
mod drive;
use drive::Clock;
mod output;

pub use self::admission::{Admission, Admitted};
pub(crate) use self::call::ByName;
pub use self::call::{
    ExecutionContext, Invocation, RegistryConfig, RegistryError, ToolCall, ToolCallResult,
};
pub use self::output::{apply_budget, panic_message};

use self::admission::{Ready, Refusal, check_declaration};
use self::output::{AbortOnDrop, unreachable_result};

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::validate::CapabilityValidationError;
use capability_policy::valid_tool_name;
use capability_types::{
    CapabilityError, ErrorCode, ScopedAttachments, Tool, ToolCapabilities, ToolContext, ToolResult,
};
use futures_util::FutureExt;

use crate::attachments::CallAttachments;
use crate::audit::{AuditEvent, AuditKind, AuditSink, emit};
use crate::escalation::{self, ApprovalHandler, mask_arguments_with};
use crate::isolation::{IsolationKey, IsolationSelection, ToolIsolation};
use crate::policy::CompiledPolicy;
use crate::resolve::{CapabilityBackends, Plan, ResolutionCache, build_scoped};
use crate::validate::validate_declaration;

struct Entry {
    tool: Arc<dyn Tool>,
    capabilities: Arc<ToolCapabilities>,
    /// The plan of a tool that declares nothing, made once (it is the same in every context).
    undeclared: Option<Arc<Plan>>,
    /// The last invocation this tool is known to have completed in
    /// ([`Invocation::id`](call::Invocation)), so that its later successes in that invocation
    /// need not mark it again.
    completed_in: AtomicU64,
}

/// The registry an agent loop calls tools through.
///
/// Every call passes, in order: unknown tool (`not_available`), the personality's toolset
/// (`denied`), [`Tool::is_available`] (`not_available`), the fail-closed backend guard
/// (`not_available`), and resolution of its scoped objects (the tool's admission plan). Only then
/// does `execute` run, under a timeout and the batch's cancellation; a panic becomes
/// `execution_failed` (see [`execute_parallel`](Self::execute_parallel) for where it runs).
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// use std::sync::Arc;
/// use capability_core::{CompiledPolicy, DefaultToolRegistry, ExecutionContext, ToolCall};
/// use capability_types::{async_trait, CapabilityError, Tool, ToolCapabilities, ToolContext};
/// use serde_json::{json, Value};
///
/// struct Echo;
/// #[async_trait]
/// impl Tool for Echo {
///     fn name(&self) -> &str { "echo" }
///     fn description(&self) -> &str { "Returns its arguments" }
///     fn input_schema(&self) -> Value { json!({"type": "object"}) }
///     fn capabilities(&self) -> ToolCapabilities { ToolCapabilities::none() }
///     async fn execute(&self, args: Value, _: &ToolContext) -> Result<Value, CapabilityError> { Ok(args) }
/// }
///
/// let mut registry = DefaultToolRegistry::new(None);
/// registry.register(Echo).unwrap();
/// let ctx = ExecutionContext::new("session-1", Arc::new(CompiledPolicy::none(None)), "/tmp");
/// let results = registry
///     .execute_parallel(vec![ToolCall::new("1", "echo", json!({"x": 1})), ToolCall::new("2", "nope", json!({}))], &ctx)
///     .await;
/// assert_eq!(serde_json::to_string(&results[0].result).unwrap(), r#"{"ok":true,"value":{"x":1}}"#);
/// assert_eq!(results[1].result.error_message(), Some("unknown tool nope"));
/// # });
/// ```
pub struct DefaultToolRegistry {
    tools: BTreeMap<String, Entry>,
    backends: Option<CapabilityBackends>,
    config: RegistryConfig,
    audit: Option<Arc<dyn AuditSink>>,
    approval: Option<Arc<dyn ApprovalHandler>>,
    cache: ResolutionCache,
    isolation: Option<(Arc<dyn ToolIsolation>, IsolationSelection)>,
}

impl fmt::Debug for DefaultToolRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DefaultToolRegistry")
            .field("tools", &self.tools.keys().collect::<Vec<_>>())
            .field("backends", &self.backends)
            .field("config", &self.config)
            .field("audit", &self.audit)
            .field("isolation", &self.isolation)
            .finish()
    }
}

impl DefaultToolRegistry {
    /// An empty registry. `None` means no backends: only tools that declare nothing can run.
    pub fn new(backends: Option<CapabilityBackends>) -> Self {
        Self {
            tools: BTreeMap::new(),
            backends,
            config: RegistryConfig::default(),
            audit: None,
            approval: None,
            cache: ResolutionCache::new(),
            isolation: None,
        }
    }

    /// Runs the tools `selection` names through `isolation` (the capsule): their code runs in a
    /// confined worker, and every scoped-object request it makes is answered here, through the
    /// same scoped objects an in-process call would get. Everything before `execute` (toolset,
    /// backends, escalation, constraints, the argument gate, audit) is unchanged.
    pub fn with_isolation(
        mut self,
        isolation: Arc<dyn ToolIsolation>,
        selection: IsolationSelection,
    ) -> Self {
        self.isolation = Some((isolation, selection));
        self
    }

    /// Replaces the settings.
    pub fn with_config(mut self, config: RegistryConfig) -> Self {
        self.config = config;
        self
    }

    /// Sends every audit event to `sink` too.
    pub fn with_audit_sink(mut self, sink: Arc<dyn AuditSink>) -> Self {
        self.audit = Some(sink);
        self
    }

    /// Asks `handler` about calls that match the personality's `[escalate]` patterns. Without a
    /// handler (headless), such calls are refused.
    pub fn with_approval_handler(mut self, handler: Arc<dyn ApprovalHandler>) -> Self {
        self.approval = Some(handler);
        self
    }

    /// Registers a tool, reading its declaration once.
    pub fn register(&mut self, tool: impl Tool + 'static) -> Result<(), RegistryError> {
        self.register_arc(Arc::new(tool))
    }

    /// Registers a shared tool, reading its declaration once.
    pub fn register_arc(&mut self, tool: Arc<dyn Tool>) -> Result<(), RegistryError> {
        let name = tool.name().to_owned();
        if !valid_tool_name(&name) {
            return Err(RegistryError::InvalidName(name));
        }
        if self.tools.contains_key(&name) {
            return Err(RegistryError::DuplicateTool(name));
        }
        let capabilities = tool.capabilities();
        check_declaration(&capabilities).map_err(|message| RegistryError::InvalidDeclaration {
            tool: name.clone(),
            message,
        })?;
        let undeclared = capabilities
            .is_empty()
            .then(|| Arc::new(Plan::undeclared(&name)));
        self.tools.insert(
            name,
            Entry {
                undeclared,
                tool,
                capabilities: Arc::new(capabilities),
                completed_in: AtomicU64::new(0),
            },
        );
        Ok(())
    }

    /// The registered tools and their declarations, sorted by name.
    pub fn tools(&self) -> impl Iterator<Item = (&dyn Tool, &ToolCapabilities)> {
        self.tools
            .values()
            .map(|e| (e.tool.as_ref(), e.capabilities.as_ref()))
    }

    /// The declaration of a registered tool.
    pub fn capabilities(&self, tool: &str) -> Option<&ToolCapabilities> {
        self.tools.get(tool).map(|e| e.capabilities.as_ref())
    }

    /// Registration findings for every tool the personality's toolset admits.
    pub fn validate(&self, policy: &CompiledPolicy) -> Vec<CapabilityValidationError> {
        self.tools
            .iter()
            .filter(|(name, _)| policy.allows_tool(name))
            .flat_map(|(name, e)| validate_declaration(name, &e.capabilities, policy))
            .collect()
    }

    /// Runs one call; see [`execute_parallel`](Self::execute_parallel).
    pub async fn execute(&self, call: ToolCall, ctx: &ExecutionContext) -> ToolCallResult {
        let mut results = self.execute_parallel(vec![call], ctx).await;
        results.pop().unwrap_or_else(unreachable_result)
    }

    /// Runs a batch: one result per call, in input order, each with its id and duration.
    ///
    /// At most `min(calls, max_concurrency)` calls run at once. A panic in a tool is contained
    /// (`execution_failed`); dropping the returned future stops the calls still running. On a
    /// multi-thread runtime the calls of a batch of more than one run in tasks of their own, so
    /// they share the cores; otherwise (a batch of one, a current-thread runtime) they run in
    /// the caller's task, which costs less and gives the same results (docs/decisions.md, "The
    /// per-call path"). Must be awaited inside a tokio runtime with time enabled; without a
    /// runtime every call is refused with `not_available`.
    pub async fn execute_parallel(
        &self,
        mut calls: Vec<ToolCall>,
        ctx: &ExecutionContext,
    ) -> Vec<ToolCallResult> {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return calls
                .into_iter()
                .map(|c| ToolCallResult {
                    call_id: c.id,
                    tool: c.tool,
                    result: ToolResult::error(
                        ErrorCode::NotAvailable,
                        "execute_parallel must run inside a tokio runtime",
                    ),
                    duration: Duration::ZERO,
                })
                .collect();
        };
        let total = calls.len();
        let timeout = ctx.call_timeout.unwrap_or(self.config.call_timeout);
        let mut completed_before = None;
        if total == 1
            && let Some(call) = calls.pop()
        {
            // A batch of one: no task, no stream, no table of prepared tools.
            let clock = Clock::start();
            let prep = self.prepare(&call.tool, ctx).and_then(|ready| {
                self.admit(&call, &ready, ctx, &mut completed_before)
                    .map(|()| ready)
            });
            let prep = prep.as_ref().map_err(Refusal::clone);
            return vec![
                self.run_one(call, prep, ctx, timeout, &clock, Placement::Only)
                    .await,
            ];
        }
        let concurrency = self.config.max_concurrency.min(total).max(1);
        let placement = match runtime.runtime_flavor() {
            tokio::runtime::RuntimeFlavor::CurrentThread => Placement::Inline,
            _ => Placement::Task,
        };
        // Admission in input order, before anything runs, so a batch's outcome never depends on
        // scheduling; each distinct tool is prepared once.
        // Batches name few distinct tools: a short list scanned in place beats hashing each
        // call's name. Past `SCANNED` names (a batch naming many unknown tools, say) an index
        // takes over, so a batch never costs calls × names.
        const SCANNED: usize = 16;
        let mut prepared: Vec<Prepared<'_>> = Vec::new();
        let mut index_of: HashMap<String, usize> = HashMap::new();
        // Per call, only what its admission decided and when it began: the calls stay where the
        // caller put them, so a large batch is not copied into a second table.
        let mut decided: Vec<Decided> = Vec::with_capacity(total);
        let clock = Clock::start();
        for call in &calls {
            let found = if prepared.len() <= SCANNED {
                prepared.iter().position(|p| p.tool == call.tool)
            } else {
                index_of.get(call.tool.as_str()).copied()
            };
            let at = match found {
                Some(at) => at,
                None => {
                    prepared.push(Prepared {
                        tool: call.tool.clone(),
                        ready: self.prepare(&call.tool, ctx),
                        uncounted: 0,
                    });
                    if prepared.len() == SCANNED + 1 {
                        index_of.extend(
                            prepared
                                .iter()
                                .enumerate()
                                .map(|(i, p)| (p.tool.clone(), i)),
                        );
                    } else if prepared.len() > SCANNED + 1 {
                        index_of.insert(call.tool.clone(), prepared.len() - 1);
                    }
                    prepared.len() - 1
                }
            };
            let entry = &mut prepared[at];
            let outcome = match &entry.ready {
                Ok(ready) => match self.admit_in_batch(call, ready, ctx, &mut completed_before) {
                    Ok(counted) => {
                        entry.uncounted += u32::from(!counted);
                        Decided::Prepared(at)
                    }
                    Err(refusal) => Decided::Refused(Box::new(refusal)),
                },
                // The preparation's refusal, kept once for all its calls.
                Err(_) => Decided::Prepared(at),
            };
            decided.push(outcome);
        }
        // The dispatches no maximum limits, a tool's all at once, before anything runs.
        for entry in prepared.iter().filter(|p| p.uncounted > 0) {
            ctx.invocation.add_dispatched(&entry.tool, entry.uncounted);
        }
        let prepared = &prepared;
        // Read once admission is done, for the first call's deadline.
        clock.read();
        let clock = &clock;
        let start = |(call, outcome)| {
            let prep = match outcome {
                Decided::Prepared(at) => prepared[at].ready.as_ref().map_err(Refusal::clone),
                Decided::Refused(refusal) => Err(*refusal),
            };
            self.run_one(call, prep, ctx, timeout, clock, placement)
        };
        let calls = calls.into_iter().zip(decided);
        drive::in_order(calls, start, total, concurrency, unreachable_result).await
    }
}

/// An audit event about one call of a batch under `ctx`: its session, personality and tool
/// filter filled in.
pub(super) fn call_event(
    kind: AuditKind,
    ctx: &ExecutionContext,
    call_id: &str,
    tool: &str,
) -> AuditEvent {
    AuditEvent::new(kind, &ctx.session_id, ctx.policy.id(), call_id, tool)
        .with_tool_filter(ctx.tool_filter.as_deref())
}

/// A tool as a batch prepared it: once per distinct tool of the batch.
struct Prepared<'r> {
    tool: String,
    ready: Result<Ready<'r>, Refusal>,
    /// Its calls admitted without being counted (no `max_invocations`), counted in one go.
    uncounted: u32,
}

/// What admission decided for one call of a batch.
enum Decided {
    /// The outcome of preparing its tool, at this index: the tool ready to run, or the refusal
    /// every call of the tool gets (unknown, outside the toolset, unavailable, unresolvable).
    Prepared(usize),
    /// A constraint or the argument gate refused it.
    Refused(Box<Refusal>),
}

/// Where a call's `execute` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Placement {
    /// In the caller's task, under `catch_unwind`: the only call of its batch.
    Only,
    /// In the caller's task, under `catch_unwind`.
    Inline,
    /// In a task of its own (a multi-thread runtime), aborted when dropped.
    Task,
}

impl DefaultToolRegistry {
    /// Whether audit events at `level` go anywhere: to the sink, or to a `tracing` subscriber
    /// that listens to `toolcap::audit`. Events nobody receives are not built.
    fn audited(&self, level: tracing::Level) -> bool {
        self.audit.is_some()
            || match level {
                tracing::Level::WARN => {
                    tracing::enabled!(target: "toolcap::audit", tracing::Level::WARN)
                }
                _ => tracing::enabled!(target: "toolcap::audit", tracing::Level::INFO),
            }
    }

    /// Runs one admitted call.
    #[allow(
        clippy::too_many_arguments,
        reason = "the per-call path; its arguments are what admission decided"
    )]
    async fn run_one(
        &self,
        mut call: ToolCall,
        prep: Result<&Ready<'_>, Refusal>,
        ctx: &ExecutionContext,
        timeout: Duration,
        clock: &Clock,
        placement: Placement,
    ) -> ToolCallResult {
        let personality = ctx.policy.id();
        let sink = self.audit.as_deref();
        // Arguments appear in audit events only when configured, and then masked.
        let audited_args = || {
            self.config
                .audit_arguments
                .then(|| mask_arguments_with(&call.args, &self.config.sensitive_keys))
        };
        let refuse = |call: ToolCall, refusal: Refusal| {
            if self.audited(tracing::Level::WARN) {
                let e = call_event(refusal.kind, ctx, &call.id, &call.tool)
                    .with_outcome(Some(refusal.code), refusal.denial)
                    .with_reason(refusal.message.clone())
                    .with_arguments(
                        self.config
                            .audit_arguments
                            .then(|| mask_arguments_with(&call.args, &self.config.sensitive_keys)),
                    );
                if let Err(err) = emit(&e, sink) {
                    tracing::error!(target: "toolcap::audit", error = %err, "could not record a denial");
                }
            }
            ToolCallResult {
                call_id: call.id,
                tool: call.tool,
                result: ToolResult::error(refusal.code, refusal.message),
                duration: clock.read(),
            }
        };
        let ready = match prep {
            Ok(ready) => ready,
            Err(refusal) => return refuse(call, refusal),
        };
        if ctx.cancellation.is_cancelled() {
            let refusal = Refusal::without_denial(
                ErrorCode::Cancelled,
                admission::CANCELLED_BEFORE_START.to_owned(),
            );
            return refuse(call, refusal);
        }
        // Escalation: ask before anything runs; an approved call gets scoped objects that allow
        // exactly what was approved.
        let (subjects, approvals) =
            escalation::subjects(ready.caps, &call.args, &ctx.policy, &ctx.working_dir);
        let asked = !subjects.is_empty();
        let scoped = if !asked {
            ready.plan.scoped.clone()
        } else {
            // Boxed: the question's state (its request, its timer) is carried only by a call that asks.
            if let Err(refusal) = Box::pin(self.escalate(&call, ctx, subjects)).await {
                return refuse(call, refusal);
            }
            let resolved = self
                .cache
                .intersect(&call.tool, ready.caps, &ctx.policy)
                .for_call_approved(&ctx.session_id, &ctx.working_dir, Arc::new(approvals));
            match build_scoped(&resolved, self.backends.as_ref()) {
                Ok(scoped) => scoped,
                Err(e) => return refuse(call, e.into()),
            }
        };
        // The call's own attachments, of the kinds its declaration and the personality allow.
        let attachments = ready.caps.attachments.as_ref().map(|declared| {
            Arc::new(CallAttachments::new(
                &call.attachments,
                declared,
                ctx.policy.attachment_kinds(),
            ))
        });
        // Asked once: whether `ToolCalled` and `ToolCompleted` go anywhere.
        let audit_info = self.audited(tracing::Level::INFO);
        if audit_info {
            let called = call_event(AuditKind::ToolCalled, ctx, &call.id, &call.tool)
                .with_arguments(audited_args())
                .with_attachments(attachments.as_deref().map(CallAttachments::ids));
            if let Err(err) = emit(&called, sink) {
                let refusal = Refusal::without_denial(
                    ErrorCode::NotAvailable,
                    format!("the call cannot be audited, so it does not run: {err}"),
                );
                return refuse(call, refusal);
            }
        }

        let args = std::mem::take(&mut call.args);
        let isolation = self
            .isolation
            .as_ref()
            .filter(|(_, selection)| selection.includes(&call.tool, personality))
            .map(|(isolation, _)| {
                let key = IsolationKey {
                    tool: call.tool.clone(),
                    policy: ctx.policy.generation(),
                };
                (Arc::clone(isolation), key)
            });
        // The call's id and tool name move into the context and come back with the outcome.
        let mut tool_ctx = ToolContext::shared(
            Arc::clone(&ctx.session_id),
            Arc::clone(&ctx.working_dir),
            ctx.cancellation.clone(),
        )
        .with_call(call.id, call.tool);
        tool_ctx.personality_id = ctx.policy.shared_id();
        scoped.install(&mut tool_ctx);
        tool_ctx.scoped_attachments = attachments.map(|a| a as Arc<dyn ScopedAttachments>);
        let tool = ready.tool.as_ref();
        // The deadline counts from when `execute` is about to start (not from admission: a call
        // queued behind the concurrency cap, or waiting for an approval, is not charged for the
        // wait). Unless the call waited for an approval, the batch's latest reading of the clock
        // serves: it was taken at most a call's bookkeeping ago (docs/decisions.md, "The per-call
        // path"), so the deadline is, if anything, that much earlier.
        let started = if asked { clock.read() } else { clock.latest() };
        let exec_started = audit_info.then_some(started);
        let deadline = tokio::time::Instant::from_std(clock.at(started)) + timeout;
        let panicked = |tool: &str, payload| {
            Err(CapabilityError::failed(format!(
                "tool {tool} panicked: {}",
                panic_message(payload)
            )))
        };
        let (outcome, call_id, tool_name) = match placement {
            Placement::Only | Placement::Inline => {
                let run = guarded(tool, isolation.as_ref(), args, &tool_ctx, deadline, timeout);
                let outcome = std::panic::AssertUnwindSafe(run)
                    .catch_unwind()
                    .await
                    .unwrap_or_else(|payload| panicked(&tool_ctx.tool, payload));
                (
                    outcome,
                    std::mem::take(&mut tool_ctx.call_id),
                    std::mem::take(&mut tool_ctx.tool),
                )
            }
            Placement::Task => {
                // The task owns the context; the identity is kept here for a task that panics.
                let (id, name) = (tool_ctx.call_id.clone(), tool_ctx.tool.clone());
                let tool = Arc::clone(ready.tool);
                let task = AbortOnDrop(tokio::spawn(async move {
                    guarded(
                        tool.as_ref(),
                        isolation.as_ref(),
                        args,
                        &tool_ctx,
                        deadline,
                        timeout,
                    )
                    .await
                }));
                let outcome = match task.join().await {
                    Ok(outcome) => outcome,
                    Err(e) if e.is_panic() => panicked(&name, e.into_panic()),
                    Err(_) => Err(CapabilityError::Cancelled),
                };
                (outcome, id, name)
            }
        };
        // One limit in process mode and in the capsule (whose messages cannot carry deeper).
        let outcome = outcome.and_then(|value| {
            let depth = capability_types::value_depth(&value);
            if depth > capability_types::MAX_VALUE_DEPTH {
                return Err(CapabilityError::failed(format!(
                    "tool {tool_name} returned a value nested {depth} levels deep; at most {} are accepted",
                    capability_types::MAX_VALUE_DEPTH
                )));
            }
            Ok(value)
        });
        let ended = clock.read();
        if let Some(exec_started) = exec_started {
            let completed = call_event(AuditKind::ToolCompleted, ctx, &call_id, &tool_name)
                .with_outcome(
                    outcome.as_ref().err().map(CapabilityError::result_code),
                    outcome
                        .as_ref()
                        .err()
                        .and_then(CapabilityError::denial_code),
                )
                .with_duration(ended.saturating_sub(exec_started));
            if let Err(err) = emit(&completed, sink) {
                tracing::error!(target: "toolcap::audit", error = %err, "could not record a completion");
            }
        }
        // A success marks the invocation once per tool; `completed` is never unset, so a tool
        // already known to have completed in this invocation need not take its lock again.
        let invocation = ctx.invocation.id();
        if outcome.is_ok() && ready.completed_in.load(Ordering::Relaxed) != invocation {
            ctx.invocation.mark_completed(&tool_name);
            ready.completed_in.store(invocation, Ordering::Relaxed);
        }
        let result = match outcome {
            Ok(value) => ToolResult::Ok(match self.config.result_budget {
                Some(budget) => apply_budget(value, budget),
                None => value,
            }),
            Err(e) => ToolResult::from(Err(e)),
        };
        ToolCallResult {
            call_id,
            tool: tool_name,
            result,
            duration: ended,
        }
    }
}

/// Runs `execute` (or the isolation's) under the call's timeout and its batch's cancellation.
///
/// A call that is done at its first poll (a tool that does not wait on anything) never
/// registers a timer or a wake-up: the deadline and the cancellation are armed only when it has
/// to wait. The deadline still counts from before that first poll, and a batch cancelled
/// before it is still refused first.
async fn guarded(
    tool: &dyn Tool,
    isolation: Option<&(Arc<dyn ToolIsolation>, IsolationKey)>,
    args: serde_json::Value,
    ctx: &ToolContext,
    deadline: tokio::time::Instant,
    timeout: Duration,
) -> Result<serde_json::Value, CapabilityError> {
    use std::task::Poll;
    if ctx.cancellation.is_cancelled() {
        return Err(CapabilityError::Cancelled);
    }
    let mut work = match isolation {
        Some((isolation, key)) => isolation.execute(key, tool, args, ctx),
        None => tool.execute(args, ctx),
    };
    let first = std::future::poll_fn(|cx| Poll::Ready(work.as_mut().poll(cx))).await;
    if let Poll::Ready(done) = first {
        return done;
    }
    // The timer and the cancellation's wake-up live in a box of their own, made only for a call
    // that waits: a call's future stays small, and a batch moves it cheaply.
    Box::pin(waited(work, ctx, deadline, timeout)).await
}

/// The rest of a call that did not finish at its first poll: it ends at its result, its
/// deadline, or its batch's cancellation, whichever comes first.
async fn waited(
    work: Pin<Box<dyn Future<Output = Result<serde_json::Value, CapabilityError>> + Send + '_>>,
    ctx: &ToolContext,
    deadline: tokio::time::Instant,
    timeout: Duration,
) -> Result<serde_json::Value, CapabilityError> {
    tokio::select! {
        biased;
        () = ctx.cancellation.cancelled() => Err(CapabilityError::Cancelled),
        r = tokio::time::timeout_at(deadline, work) => match r {
            Ok(r) => r,
            Err(_) => Err(CapabilityError::Timeout(format!(
                "tool {} timed out after {timeout:?}",
                ctx.tool
            ))),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use capability_types::{ToolContext, async_trait};
    use serde_json::Value;
    use serde_json::json;

    struct Named(&'static str, ToolCapabilities);

    #[async_trait]
    impl Tool for Named {
        fn name(&self) -> &str {
            self.0
        }
        fn description(&self) -> &str {
            "test tool"
        }
        fn input_schema(&self) -> Value {
            json!({})
        }
        fn capabilities(&self) -> ToolCapabilities {
            self.1.clone()
        }
        async fn execute(&self, _: Value, _: &ToolContext) -> Result<Value, CapabilityError> {
            Ok(Value::Null)
        }
    }

    #[test]
    fn registration_refuses_bad_names_duplicates_and_malformed_declarations() {
        let mut registry = DefaultToolRegistry::new(None);
        registry
            .register(Named("ok_tool", ToolCapabilities::none()))
            .unwrap();
        assert!(
            registry
                .register(Named("ok_tool", ToolCapabilities::none()))
                .is_err()
        );
        assert!(
            registry
                .register(Named("Bad Name", ToolCapabilities::none()))
                .is_err()
        );
        let relative =
            ToolCapabilities::none().with_fs_read(capability_types::FsPaths::Paths(vec![
                "relative/dir".into(),
            ]));
        let err = registry.register(Named("rel", relative)).unwrap_err();
        assert!(err.to_string().contains("not absolute"), "{err}");
        assert_eq!(registry.tools().count(), 1);
    }
}
