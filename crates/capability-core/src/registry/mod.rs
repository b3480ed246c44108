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
mod output;

pub use self::admission::{Admission, Admitted};
pub use self::call::{
    ExecutionContext, Invocation, RegistryConfig, RegistryError, ToolCall, ToolCallResult,
};
pub use self::output::{apply_budget, panic_message};

use self::admission::{Ready, Refusal, check_declaration};
use self::output::{AbortOnDrop, unreachable_result};

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::validate::CapabilityValidationError;
use capability_policy::valid_tool_name;
use capability_types::{
    CapabilityError, ErrorCode, Tool, ToolCapabilities, ToolContext, ToolResult,
};
use futures_util::StreamExt;

use crate::audit::{AuditEvent, AuditKind, AuditSink, emit};
use crate::escalation::{self, ApprovalHandler, mask_arguments_with};
use crate::isolation::{IsolationKey, IsolationSelection, ToolIsolation};
use crate::policy::CompiledPolicy;
use crate::resolve::{CapabilityBackends, ResolutionCache, build_scoped};
use crate::validate::validate_declaration;

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
}

impl DefaultToolRegistry {
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
            let message = admission::CANCELLED_BEFORE_START.to_owned();
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
