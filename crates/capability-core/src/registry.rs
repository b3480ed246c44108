//! `DefaultToolRegistry`: registration, the toolset filter, the fail-closed guard, and
//! `execute_parallel` with bounded concurrency, timeouts, cancellation and panic containment.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use capability_policy::valid_tool_name;
use capability_types::{
    CancellationToken, CapabilityError, CapabilityValidationError, DenialCode, ErrorCode, FsPaths,
    Tool, ToolCapabilities, ToolContext, ToolResult, check_binary_spec,
};
use futures_util::StreamExt;
use serde_json::Value;

use crate::audit::{AuditEvent, AuditKind, AuditSink, emit};
use crate::escalation::{
    self, ApprovalHandler, ApprovalRequest, EscalationSubject, mask_arguments_with,
};
use crate::isolation::{IsolationKey, IsolationSelection, ToolIsolation};
use crate::matching::host::HostPattern;
use crate::policy::CompiledPolicy;
use crate::resolve::{
    CapabilityBackends, ResolutionCache, ResolvedPaths, ScopedObjects, build_scoped, check_backends,
};
use crate::validate::validate_declaration;

/// One call in a batch.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The caller's id for this call; echoed in the result.
    pub id: String,
    /// The tool's name.
    pub tool: String,
    /// The arguments (a JSON object for the standard tools).
    pub args: Value,
}

impl ToolCall {
    /// A call.
    pub fn new(id: impl Into<String>, tool: impl Into<String>, args: Value) -> Self {
        Self {
            id: id.into(),
            tool: tool.into(),
            args,
        }
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
    /// Wall time from the start of the call's checks to its result.
    pub duration: Duration,
}

/// Who is calling, under which personality, and for how long: shared by every call of a batch.
#[derive(Debug, Clone)]
pub struct ExecutionContext {
    /// The agent session.
    pub session_id: String,
    /// The active personality ([`CompiledPolicy::none`] for none).
    pub policy: Arc<CompiledPolicy>,
    /// Relative paths of every call resolve against this absolute directory.
    pub working_dir: PathBuf,
    /// Cancels every call of the batch that has not finished.
    pub cancellation: CancellationToken,
    /// Overrides the registry's per-call timeout for this batch.
    pub call_timeout: Option<Duration>,
    /// The invocation of the agent loop these batches belong to: what has run and completed,
    /// for `max_invocations` and `only_after`. Fresh for each new context.
    pub invocation: Arc<Invocation>,
}

/// What one invocation of the agent loop has done so far: how often each tool was dispatched,
/// and which tools completed successfully in earlier batches.
#[derive(Debug, Default)]
pub struct Invocation {
    dispatched: Mutex<HashMap<String, u32>>,
    completed: Mutex<HashSet<String>>,
}

impl Invocation {
    /// A fresh invocation.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// How many calls of `tool` were dispatched.
    pub fn dispatched(&self, tool: &str) -> u32 {
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

    fn completed_snapshot(&self) -> HashSet<String> {
        self.completed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Takes a `max_invocations` slot; false when none is left.
    fn reserve(&self, tool: &str, max: Option<u32>) -> bool {
        let mut counts = self
            .dispatched
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let n = counts.entry(tool.to_owned()).or_insert(0);
        if max.is_some_and(|m| *n >= m) {
            return false;
        }
        *n += 1;
        true
    }

    fn mark_completed(&self, tool: &str) {
        self.completed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(tool.to_owned());
    }
}

impl ExecutionContext {
    /// A context with a fresh cancellation token and the registry's timeout.
    pub fn new(
        session_id: impl Into<String>,
        policy: Arc<CompiledPolicy>,
        working_dir: impl Into<PathBuf>,
    ) -> Self {
        Self {
            session_id: session_id.into(),
            policy,
            working_dir: working_dir.into(),
            cancellation: CancellationToken::new(),
            call_timeout: None,
            invocation: Invocation::new(),
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
            call_timeout: Duration::from_secs(60),
            result_budget: None,
            approval_timeout: Duration::from_secs(30),
            audit_arguments: false,
            sensitive_keys: Vec::new(),
        }
    }
}

impl RegistryConfig {
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

struct Entry {
    tool: Arc<dyn Tool>,
    capabilities: Arc<ToolCapabilities>,
}

/// The registry an agent loop calls tools through.
///
/// Every call passes, in order: unknown tool (`not_available`), the personality's toolset
/// (`denied`), [`Tool::is_available`] (`not_available`), the fail-closed backend guard
/// (`not_available`), and resolution of its scoped objects. Only then does `execute` run, in its
/// own task, under a timeout and the batch's cancellation; a panic becomes `execution_failed`.
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

/// Why a call was refused before `execute`, shared by every call of the batch to that tool.
#[derive(Clone)]
struct Refusal {
    code: ErrorCode,
    denial: Option<DenialCode>,
    message: String,
    kind: AuditKind,
}

impl From<CapabilityError> for Refusal {
    fn from(e: CapabilityError) -> Self {
        Refusal {
            code: e.result_code(),
            denial: e.denial_code(),
            message: e.to_string(),
            kind: AuditKind::ToolDenied,
        }
    }
}

impl Refusal {
    fn constraint(message: String) -> Self {
        Refusal {
            code: ErrorCode::Denied,
            denial: Some(DenialCode::ConstraintNotMet),
            message: format!("{}: {message}", DenialCode::ConstraintNotMet),
            kind: AuditKind::ConstraintDenied,
        }
    }
}

#[derive(Clone)]
struct Ready {
    tool: Arc<dyn Tool>,
    scoped: ScopedObjects,
    /// The tool's resolved reach without escalation patterns, for the argument gate (`None`: it
    /// has none).
    reach: Option<Arc<ResolvedPaths>>,
    /// The tool's declaration, for escalation.
    caps: Arc<ToolCapabilities>,
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
        self.tools.insert(
            name,
            Entry {
                tool,
                capabilities: Arc::new(capabilities),
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
    /// At most `min(calls, max_concurrency)` calls run at once. Each runs in its own tokio task,
    /// so a panic is contained; dropping the returned future aborts the calls still running.
    /// Must be awaited inside a tokio runtime with time enabled; without a runtime every call
    /// is refused with `not_available`.
    pub async fn execute_parallel(
        &self,
        calls: Vec<ToolCall>,
        ctx: &ExecutionContext,
    ) -> Vec<ToolCallResult> {
        if tokio::runtime::Handle::try_current().is_err() {
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
        }
        let total = calls.len();
        let concurrency = self.config.max_concurrency.min(total).max(1);
        let timeout = ctx.call_timeout.unwrap_or(self.config.call_timeout);
        let mut prepared: HashMap<String, Result<Ready, Refusal>> = HashMap::new();
        let completed_before = ctx.invocation.completed_snapshot();
        let jobs: Vec<_> = calls
            .into_iter()
            .enumerate()
            .map(|(index, call)| {
                let started = Instant::now();
                let prep = prepared
                    .entry(call.tool.clone())
                    .or_insert_with(|| self.prepare(&call.tool, ctx))
                    .clone()
                    .and_then(|ready| {
                        self.admit(&call, &ready, ctx, &completed_before)
                            .map(|()| ready)
                    });
                (index, call, prep, started)
            })
            .collect();
        let mut slots: Vec<Option<ToolCallResult>> = (0..total).map(|_| None).collect();
        let mut stream = futures_util::stream::iter(jobs)
            .map(|(index, call, prep, started)| async move {
                (index, self.run_one(call, prep, ctx, timeout, started).await)
            })
            .buffer_unordered(concurrency);
        while let Some((index, result)) = stream.next().await {
            slots[index] = Some(result);
        }
        slots
            .into_iter()
            .map(|r| r.unwrap_or_else(unreachable_result))
            .collect()
    }

    fn prepare(&self, name: &str, ctx: &ExecutionContext) -> Result<Ready, Refusal> {
        let entry = self.tools.get(name).ok_or_else(|| Refusal {
            code: ErrorCode::NotAvailable,
            denial: None,
            message: format!("unknown tool {}", name.escape_debug()),
            kind: AuditKind::ToolDenied,
        })?;
        if !ctx.policy.allows_tool(name) {
            let personality = ctx.policy.id().unwrap_or("<none>");
            return Err(CapabilityError::denied(
                DenialCode::ToolNotInToolset,
                format!("{name} is not in the toolset of personality {personality}"),
            )
            .into());
        }
        if !entry.tool.is_available() {
            return Err(CapabilityError::not_available(format!(
                "tool {name} is not available here"
            ))
            .into());
        }
        check_backends(name, &entry.capabilities, self.backends.as_ref())?;
        let resolved = self
            .cache
            .intersect(name, &entry.capabilities, &ctx.policy)
            .for_call(&ctx.session_id, &ctx.working_dir);
        let scoped = build_scoped(&resolved, self.backends.as_ref())?;
        Ok(Ready {
            tool: Arc::clone(&entry.tool),
            scoped,
            reach: resolved
                .fs
                .as_deref()
                .map(ResolvedPaths::without_escalation),
            caps: Arc::clone(&entry.capabilities),
        })
    }

    /// The personality's constraints and the argument gate, decided in input order before the
    /// batch runs (so the outcome never depends on scheduling).
    fn admit(
        &self,
        call: &ToolCall,
        ready: &Ready,
        ctx: &ExecutionContext,
        completed_before: &HashSet<String>,
    ) -> Result<(), Refusal> {
        // The constraints in force: the personality's, combined with any narrowing.
        let constraints = ctx.policy.constraints(&call.tool);
        let personality = ctx.policy.id().unwrap_or("<none>");
        if constraints.is_some_and(|c| c.forbidden) {
            return Err(Refusal::constraint(format!(
                "{} is forbidden under personality {personality}",
                call.tool
            )));
        }
        let depth = capability_types::value_depth(&call.args);
        if depth > capability_types::MAX_VALUE_DEPTH {
            return Err(Refusal::from(CapabilityError::invalid_input(format!(
                "arguments nest {depth} levels deep; at most {} are accepted",
                capability_types::MAX_VALUE_DEPTH
            ))));
        }
        if constraints.is_none_or(|c| c.path_gate) {
            gate_arguments(&call.args, ready.reach.as_deref())?;
        }
        if let Some(c) = constraints {
            let missing: Vec<&str> = c
                .only_after
                .iter()
                .filter(|t| !completed_before.contains(*t))
                .map(String::as_str)
                .collect();
            if !missing.is_empty() {
                return Err(Refusal::constraint(format!(
                    "{} may run only after {} completed successfully in an earlier batch of this invocation",
                    call.tool,
                    missing.join(", ")
                )));
            }
        }
        let max = constraints.and_then(|c| c.max_invocations);
        if !ctx.invocation.reserve(&call.tool, max) {
            return Err(Refusal::constraint(format!(
                "{} may run at most {} time(s) per invocation",
                call.tool,
                max.unwrap_or(0)
            )));
        }
        Ok(())
    }

    /// Asks the approval handler about `subjects`; audits the question and the answer.
    async fn escalate(
        &self,
        call: &ToolCall,
        ctx: &ExecutionContext,
        subjects: Vec<EscalationSubject>,
    ) -> Result<(), Refusal> {
        let sink = self.audit.as_deref();
        let personality = ctx.policy.id();
        let listed = subjects
            .iter()
            .map(|s| format!("{} {}", s.category, s.subject))
            .collect::<Vec<_>>()
            .join(", ");
        let event =
            |kind| AuditEvent::new(kind, &ctx.session_id, personality, &call.id, &call.tool);
        let refusal = |why: String| Refusal {
            code: ErrorCode::Denied,
            denial: Some(DenialCode::EscalationRefused),
            message: format!("{}: {listed}: {why}", DenialCode::EscalationRefused),
            kind: AuditKind::ToolDenied,
        };
        if let Err(err) = emit(
            &event(AuditKind::EscalationAsked).with_reason(listed.clone()),
            sink,
        ) {
            return Err(refusal(format!("the escalation cannot be audited: {err}")));
        }
        let timeout = ctx
            .policy
            .escalate_timeout
            .unwrap_or(self.config.approval_timeout);
        let outcome: Result<(), String> = match &self.approval {
            None => Err("no approval handler is configured (headless)".to_owned()),
            Some(handler) => {
                let request = ApprovalRequest {
                    session_id: ctx.session_id.clone(),
                    personality_id: personality.map(str::to_owned),
                    call_id: call.id.clone(),
                    tool: call.tool.clone(),
                    subjects,
                    arguments: mask_arguments_with(&call.args, &self.config.sensitive_keys),
                };
                let handler = Arc::clone(handler);
                // In its own task: a handler that panics refuses the call, not the batch.
                let task =
                    AbortOnDrop(tokio::spawn(async move { handler.approve(&request).await }));
                match tokio::time::timeout(timeout, task.join()).await {
                    Ok(Ok(Ok(true))) => Ok(()),
                    Ok(Ok(Ok(false))) => Err("the approver denied it".to_owned()),
                    Ok(Ok(Err(e))) => Err(format!("the approval handler failed: {e}")),
                    Ok(Err(_)) => Err("the approval handler panicked".to_owned()),
                    Err(_) => Err(format!("no answer within {timeout:?}")),
                }
            }
        };
        let decided = event(AuditKind::EscalationDecided).with_reason(match &outcome {
            Ok(()) => "approved".to_owned(),
            Err(why) => why.clone(),
        });
        if let Err(err) = emit(&decided, sink) {
            return Err(refusal(format!("the decision cannot be audited: {err}")));
        }
        outcome.map_err(refusal)
    }

    async fn run_one(
        &self,
        call: ToolCall,
        prep: Result<Ready, Refusal>,
        ctx: &ExecutionContext,
        timeout: Duration,
        started: Instant,
    ) -> ToolCallResult {
        let personality = ctx.policy.id();
        let event =
            |kind| AuditEvent::new(kind, &ctx.session_id, personality, &call.id, &call.tool);
        let sink = self.audit.as_deref();
        // Arguments appear in audit events only when configured, and then masked.
        let audited_args = self
            .config
            .audit_arguments
            .then(|| mask_arguments_with(&call.args, &self.config.sensitive_keys));
        let refuse = |refusal: Refusal| {
            let e = event(refusal.kind)
                .with_outcome(Some(refusal.code), refusal.denial)
                .with_reason(refusal.message.clone())
                .with_arguments(audited_args.clone());
            if let Err(err) = emit(&e, sink) {
                tracing::error!(target: "toolcap::audit", error = %err, "could not record a denial");
            }
            ToolResult::error(refusal.code, refusal.message)
        };
        let finish = |result: ToolResult| ToolCallResult {
            call_id: call.id.clone(),
            tool: call.tool.clone(),
            result,
            duration: started.elapsed(),
        };
        let ready = match prep {
            Ok(ready) => ready,
            Err(refusal) => return finish(refuse(refusal)),
        };
        if ctx.cancellation.is_cancelled() {
            let message = "the batch was cancelled before the call started".to_owned();
            return finish(refuse(Refusal {
                code: ErrorCode::Cancelled,
                denial: None,
                message,
                kind: AuditKind::ToolDenied,
            }));
        }
        // Escalation: ask before anything runs; an approved call gets scoped objects that allow
        // exactly what was approved.
        let (subjects, approvals) =
            escalation::subjects(&ready.caps, &call.args, &ctx.policy, &ctx.working_dir);
        let scoped = if subjects.is_empty() {
            ready.scoped.clone()
        } else {
            if let Err(refusal) = self.escalate(&call, ctx, subjects).await {
                return finish(refuse(refusal));
            }
            let resolved = self
                .cache
                .intersect(&call.tool, &ready.caps, &ctx.policy)
                .for_call_approved(&ctx.session_id, &ctx.working_dir, Arc::new(approvals));
            match build_scoped(&resolved, self.backends.as_ref()) {
                Ok(scoped) => scoped,
                Err(e) => return finish(refuse(e.into())),
            }
        };
        if let Err(err) = emit(
            &event(AuditKind::ToolCalled).with_arguments(audited_args.clone()),
            sink,
        ) {
            let message = format!("the call cannot be audited, so it does not run: {err}");
            return finish(refuse(Refusal {
                code: ErrorCode::NotAvailable,
                denial: None,
                message,
                kind: AuditKind::ToolDenied,
            }));
        }

        let mut tool_ctx = ToolContext::new(ctx.session_id.clone(), ctx.working_dir.clone())
            .with_call(call.id.clone(), call.tool.clone())
            .with_cancellation(ctx.cancellation.clone());
        tool_ctx.personality_id = personality.map(str::to_owned);
        scoped.install(&mut tool_ctx);
        let tool = ready.tool;
        let args = call.args.clone();
        let cancel = ctx.cancellation.clone();
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
        let exec_started = Instant::now();
        let task = AbortOnDrop(tokio::spawn(async move {
            let run = async {
                match &isolation {
                    Some((isolation, key)) => {
                        isolation.execute(key, tool.as_ref(), args, &tool_ctx).await
                    }
                    None => tool.execute(args, &tool_ctx).await,
                }
            };
            tokio::select! {
                biased;
                () = cancel.cancelled() => Err(CapabilityError::Cancelled),
                r = tokio::time::timeout(timeout, run) => match r {
                    Ok(r) => r,
                    Err(_) => Err(CapabilityError::Timeout(format!("tool {} timed out after {timeout:?}", tool_ctx.tool))),
                },
            }
        }));
        let outcome = match task.join().await {
            Ok(r) => r,
            Err(e) if e.is_panic() => Err(CapabilityError::failed(format!(
                "tool {} panicked: {}",
                call.tool,
                panic_message(e.into_panic())
            ))),
            Err(_) => Err(CapabilityError::Cancelled),
        };
        // One limit in process mode and in the capsule (whose messages cannot carry deeper).
        let outcome = outcome.and_then(|value| {
            let depth = capability_types::value_depth(&value);
            if depth > capability_types::MAX_VALUE_DEPTH {
                return Err(CapabilityError::failed(format!(
                    "tool {} returned a value nested {depth} levels deep; at most {} are accepted",
                    call.tool,
                    capability_types::MAX_VALUE_DEPTH
                )));
            }
            Ok(value)
        });
        let elapsed = exec_started.elapsed();
        let completed = event(AuditKind::ToolCompleted)
            .with_outcome(
                outcome.as_ref().err().map(CapabilityError::result_code),
                outcome
                    .as_ref()
                    .err()
                    .and_then(CapabilityError::denial_code),
            )
            .with_duration(elapsed);
        if let Err(err) = emit(&completed, sink) {
            tracing::error!(target: "toolcap::audit", error = %err, "could not record a completion");
        }
        if outcome.is_ok() {
            ctx.invocation.mark_completed(&call.tool);
        }
        let result = match outcome {
            Ok(value) => ToolResult::Ok(match self.config.result_budget {
                Some(budget) => apply_budget(value, budget),
                None => value,
            }),
            Err(e) => ToolResult::from(Err(e)),
        };
        finish(result)
    }
}

/// The argument gate: every string argument (at any depth) that is an absolute path or a
/// `file://` URL must lie within the tool's read or write reach, so a tool that takes a path but
/// does not use `ScopedFs` is gated all the same. A tool with no reach may take no such argument.
fn gate_arguments(args: &Value, reach: Option<&ResolvedPaths>) -> Result<(), Refusal> {
    use capability_types::{FsAccess, PathPolicy};
    let empty = ResolvedPaths::default();
    let reach = reach.unwrap_or(&empty);
    let mut stack = vec![args];
    while let Some(value) = stack.pop() {
        match value {
            Value::Array(items) => stack.extend(items.iter()),
            Value::Object(map) => stack.extend(map.values()),
            Value::String(s) => {
                let path = if s.starts_with('/') && !s.starts_with("//") {
                    Some(std::path::PathBuf::from(s))
                } else if s
                    .get(..7)
                    .is_some_and(|head| head.eq_ignore_ascii_case("file://"))
                {
                    // A file URL that does not name a local path is refused outright.
                    match url::Url::parse(s).ok().and_then(|u| u.to_file_path().ok()) {
                        Some(p) => Some(p),
                        None => {
                            return Err(CapabilityError::denied(
                                DenialCode::PathNotReachable,
                                format!("{} is not a local file URL", s.escape_debug()),
                            )
                            .into());
                        }
                    }
                } else {
                    None
                };
                if let Some(path) = path
                    && let Err(read) = reach.check(&path, FsAccess::Read)
                {
                    reach
                        .check(&path, FsAccess::Write)
                        .map_err(|_| Refusal::from(read))?;
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Aborts the task when dropped, so a dropped batch does not leave tools running.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> AbortOnDrop<T> {
    async fn join(mut self) -> Result<T, tokio::task::JoinError> {
        (&mut self.0).await
    }
}

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The text of a panic's payload (a `&str` or `String`), for an `execution_failed` message.
pub fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}

fn unreachable_result() -> ToolCallResult {
    // Every slot is filled exactly once; this keeps the registry panic-free if that ever broke.
    ToolCallResult {
        call_id: String::new(),
        tool: String::new(),
        result: ToolResult::error(
            ErrorCode::ExecutionFailed,
            "internal error: the call produced no result",
        ),
        duration: Duration::ZERO,
    }
}

/// Truncates a value whose JSON exceeds `budget` bytes: a string keeps its first `budget` bytes
/// (on a character boundary); anything else becomes the first `budget` bytes of its JSON text.
/// Either way the marker `…[truncated: N of M bytes omitted]` ends the string.
pub fn apply_budget(value: Value, budget: usize) -> Value {
    let text = match &value {
        Value::String(s) => {
            if s.len() <= budget {
                return value;
            }
            s.clone()
        }
        other => {
            let json = other.to_string();
            if json.len() <= budget {
                return value;
            }
            json
        }
    };
    let mut cut = budget.min(text.len());
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    Value::String(format!(
        "{}…[truncated: {} of {} bytes omitted]",
        &text[..cut],
        text.len() - cut,
        text.len()
    ))
}

/// Structural checks on a declaration that the type system cannot make for a builder-made
/// value: host pattern syntax, absolute paths, binary specs.
fn check_declaration(caps: &ToolCapabilities) -> Result<(), String> {
    if let Some(n) = &caps.network {
        for h in n.allowed_hosts.iter().filter(|h| *h != "*") {
            HostPattern::parse(h).map_err(|why| format!("network.allowedHosts: {why}"))?;
        }
    }
    if let Some(reach) = &caps.fs_reach {
        for (field, paths) in [
            ("fs_reach.read", &reach.read),
            ("fs_reach.write", &reach.write),
        ] {
            if let Some(FsPaths::Paths(paths)) = paths {
                for p in paths {
                    if !p.is_absolute() {
                        return Err(format!("{field}: {} is not absolute", p.display()));
                    }
                }
            }
        }
    }
    if let Some(p) = &caps.process {
        for b in &p.allowed_binaries {
            check_binary_spec(b, true).map_err(|why| format!("process.allowedBinaries: {why}"))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn budget_truncates_with_marker() {
        assert_eq!(apply_budget(json!("short"), 10), json!("short"));
        let v = apply_budget(json!("héllo world"), 2);
        assert_eq!(
            v,
            json!("h…[truncated: 11 of 12 bytes omitted]"),
            "never splits a character"
        );
        let v = apply_budget(json!({"a": [1, 2, 3]}), 5);
        assert_eq!(v, json!("{\"a\":…[truncated: 8 of 13 bytes omitted]"));
        assert_eq!(apply_budget(json!([1]), 100), json!([1]));
    }
}
