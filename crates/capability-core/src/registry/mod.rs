//! `DefaultToolRegistry`: registration, and `execute_parallel` with bounded concurrency,
//! timeouts, cancellation and panic containment (docs/semantics.md, "The registry").
//!
//! - [`call`]: what a batch is made of (calls, their context, the invocation, the settings);
//! - [`admission`]: everything decided before a tool runs — lookup, toolset, availability, the
//!   fail-closed guard, resolution, constraints, the argument gate and escalation — shared by
//!   `execute` and its dry run, [`DefaultToolRegistry::admission`];
//! - [`run`]: one admitted call, run: its escalation, context, timeout, result and audit;
//! - [`output`]: what a call returns when a tool panics, overruns its budget or never ran.

mod admission;
mod call;
mod drive;
mod gate;
use drive::Clock;
mod output;
mod run;
mod spare;

pub use self::admission::{Admission, Admitted};
pub(crate) use self::call::ByName;
pub use self::call::{
    ExecutionContext, Invocation, RegistryConfig, RegistryError, ToolCall, ToolCallResult,
};
pub use self::output::{MAX_ERROR_MESSAGE, apply_budget, bounded_message, panic_message};

use self::admission::{Ready, Refusal, check_declaration};
use self::output::unreachable_result;

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use crate::validate::CapabilityValidationError;
use capability_policy::valid_tool_name;
use capability_types::{ErrorCode, Tool, ToolCapabilities, ToolResult};

use crate::audit::{AuditEvent, AuditKind, AuditSink};
use crate::escalation::ApprovalHandler;
use crate::isolation::{IsolationSelection, ToolIsolation};
use crate::policy::CompiledPolicy;
use crate::resolve::{CapabilityBackends, Plan, ResolutionCache, ResolvedCapabilities};
use crate::validate::validate_declaration;

struct Entry {
    name: String,
    tool: Arc<dyn Tool>,
    capabilities: Arc<ToolCapabilities>,
    /// The plan of a tool that declares nothing, made once (it is the same in every context).
    undeclared: Option<Arc<Plan>>,
    /// The last invocation this tool is known to have completed in
    /// ([`Invocation::id`](call::Invocation)), so that its later successes in that invocation
    /// need not mark it again.
    completed_in: AtomicU64,
    /// The context the tool's last call run in the caller's task left for the next.
    spare: spare::SpareSlot,
    /// Its arguments that are data, not places ([`Tool::data_arguments`]), read at
    /// registration.
    data: Box<[String]>,
    /// Whether its results are untrusted text ([`Tool::output_is_untrusted`]), read at
    /// registration.
    untrusted: bool,
    /// The resolution its process was confined to as it started, for a tool registered with
    /// [`DefaultToolRegistry::register_confined`].
    confined: Option<Arc<ResolvedCapabilities>>,
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
    /// The registered tools, sorted by name: listings and validation go in this order.
    tools: Vec<Entry>,
    /// Where each tool is in `tools`, by name. A call finds its tool with one hash of the name
    /// it gives instead of a walk of string comparisons (docs/benchmarks.md, "MCP"). The keys
    /// are the registered names; a name a caller makes up only probes this small table, so the
    /// hash need not resist flooding.
    index: HashMap<String, usize, ByName>,
    backends: Option<CapabilityBackends>,
    config: RegistryConfig,
    audit: Option<Arc<dyn AuditSink>>,
    approval: Option<Arc<dyn ApprovalHandler>>,
    cache: ResolutionCache,
    isolation: Option<(Arc<dyn ToolIsolation>, IsolationSelection)>,
    /// The places of [`RegistryConfig::max_running`], when it is set.
    running: Option<tokio::sync::Semaphore>,
}

impl fmt::Debug for DefaultToolRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DefaultToolRegistry")
            .field(
                "tools",
                &self.tools.iter().map(|e| &e.name).collect::<Vec<_>>(),
            )
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
            tools: Vec::new(),
            index: HashMap::default(),
            backends,
            config: RegistryConfig::default(),
            audit: None,
            approval: None,
            cache: ResolutionCache::new(),
            isolation: None,
            running: None,
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

    /// Says that no call of the session `session_id` will come again (an MCP session ended, an
    /// agent's conversation closed): the isolation lets go of what it keeps for that session
    /// alone, so a server whose sessions come and go does not keep their warm workers
    /// ([`ToolIsolation::session_ended`]; docs/isolation-model.md, "The warm path"). Call it
    /// once the session's calls have returned. A later call under the same id is served
    /// afresh. Without an isolation it does nothing.
    pub fn end_session(&self, session_id: &str) {
        if let Some((isolation, _)) = &self.isolation {
            isolation.session_ended(session_id);
        }
    }

    /// Replaces the settings.
    pub fn with_config(mut self, config: RegistryConfig) -> Self {
        self.running = config
            .max_running
            .map(|n| tokio::sync::Semaphore::new(n.max(1)));
        self.config = config;
        self
    }

    /// The settings in force.
    pub fn config(&self) -> &RegistryConfig {
        &self.config
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
        self.register_entry(tool, None)
    }

    /// Registers a tool whose code runs in a process confined once, as it started, to
    /// `confined` (its declaration resolved under the personality then; a guarded MCP server):
    /// a call of it is refused unless its resolution in the call's context confines alike
    /// ([`ResolvedCapabilities::confines_alike`]), since the process cannot be held to a
    /// narrower reach per call (docs/policy.md, "Tools confined once, as they start").
    pub fn register_confined(
        &mut self,
        tool: Arc<dyn Tool>,
        confined: Arc<ResolvedCapabilities>,
    ) -> Result<(), RegistryError> {
        self.register_entry(tool, Some(confined))
    }

    fn register_entry(
        &mut self,
        tool: Arc<dyn Tool>,
        confined: Option<Arc<ResolvedCapabilities>>,
    ) -> Result<(), RegistryError> {
        let name = tool.name().to_owned();
        if !valid_tool_name(&name) {
            return Err(RegistryError::InvalidName(name));
        }
        if self.index.contains_key(&name) {
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
        let data = tool
            .data_arguments()
            .iter()
            .map(|d| (*d).to_owned())
            .collect();
        let untrusted = tool.output_is_untrusted();
        let at = self.tools.partition_point(|e| e.name < name);
        self.tools.insert(
            at,
            Entry {
                name,
                undeclared,
                untrusted,
                tool,
                capabilities: Arc::new(capabilities),
                completed_in: AtomicU64::new(0),
                spare: spare::SpareSlot::default(),
                data,
                confined,
            },
        );
        // The tools after the new one moved up by one.
        self.index = self
            .tools
            .iter()
            .enumerate()
            .map(|(i, e)| (e.name.clone(), i))
            .collect();
        Ok(())
    }

    /// Whether `name` was registered with [`register_confined`](Self::register_confined): its
    /// code runs in a process confined once, as it started, which does what its declaration
    /// cannot show (a guarded MCP server keeps a home of its own for its life).
    pub fn is_confined_once(&self, name: &str) -> bool {
        self.entry(name).is_some_and(|e| e.confined.is_some())
    }

    /// The registered tools and their declarations, sorted by name.
    pub fn tools(&self) -> impl Iterator<Item = (&dyn Tool, &ToolCapabilities)> {
        self.tools
            .iter()
            .map(|e| (e.tool.as_ref(), e.capabilities.as_ref()))
    }

    /// The declaration of a registered tool.
    pub fn capabilities(&self, tool: &str) -> Option<&ToolCapabilities> {
        self.entry(tool).map(|e| e.capabilities.as_ref())
    }

    /// The entry of a registered tool.
    fn entry(&self, tool: &str) -> Option<&Entry> {
        self.index.get(tool).and_then(|&at| self.tools.get(at))
    }

    /// Registration findings for every tool the personality's toolset admits.
    pub fn validate(&self, policy: &CompiledPolicy) -> Vec<CapabilityValidationError> {
        self.tools
            .iter()
            .filter(|e| policy.allows_tool(&e.name))
            .flat_map(|e| validate_declaration(&e.name, &e.capabilities, policy))
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
        // No call, no batch: nothing to run, and no step of an `[after_untrusted]` pause.
        if total == 0 {
            return Vec::new();
        }
        let timeout = ctx.call_timeout.unwrap_or(self.config.call_timeout);
        let mut batch = call::BatchState::begin(ctx);
        let held = batch.held_context(ctx);
        let ctx = held.as_ref().unwrap_or(ctx);
        if total == 1
            && let Some(mut call) = calls.pop()
        {
            // A batch of one: no task, no stream, no table of prepared tools.
            let clock = Clock::start();
            let prep = self
                .prepare(&call.tool, ctx)
                .and_then(|ready| self.admit(&call, &ready, ctx, &mut batch).map(|()| ready));
            let prep = prep.as_ref().map_err(Refusal::clone);
            return vec![
                self.run_one(&mut call, prep, ctx, timeout, &clock, Placement::Only)
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
                Ok(ready) => match self.admit_in_batch(call, ready, ctx, &mut batch) {
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
        // Each call is lent to its run, not moved out of the batch: a run takes out what it
        // needs, and its future carries no copy of the call.
        let calls = calls.iter_mut().zip(decided);
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

#[cfg(test)]
mod tests {
    use super::*;
    use capability_types::{CapabilityError, ToolContext, async_trait};
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

    #[test]
    fn tools_are_listed_by_name_and_each_is_found_by_its_own_name() {
        let mut registry = DefaultToolRegistry::new(None);
        let names = ["m_tool", "b_tool", "z_tool", "a_tool", "k_tool"];
        let network = |host: &str| ToolCapabilities::none().with_network([host]);
        for (i, name) in names.into_iter().enumerate() {
            // Each declaration names its own tool, so a lookup that found another's shows.
            registry
                .register(Named(name, network(&format!("h{i}.example.com"))))
                .unwrap();
            let listed: Vec<&str> = registry.tools().map(|(t, _)| t.name()).collect();
            let mut sorted = listed.clone();
            sorted.sort_unstable();
            assert_eq!(listed, sorted, "listed by name after registering {name}");
        }
        for (i, name) in names.into_iter().enumerate() {
            let caps = registry.capabilities(name).unwrap();
            assert_eq!(caps, &network(&format!("h{i}.example.com")), "{name}");
        }
        for unknown in ["", "a_too", "a_tool ", "A_TOOL", "zz_tool", "a_tool\0"] {
            assert!(registry.capabilities(unknown).is_none(), "{unknown:?}");
        }
        assert!(
            registry
                .register(Named("b_tool", ToolCapabilities::none()))
                .is_err(),
            "a duplicate is refused wherever it would sort"
        );
        assert_eq!(registry.tools().count(), names.len());
    }
}
