//! Admission: everything decided before a tool runs, in the order a call meets it (docs/
//! architecture.md, "A call, step by step"). `execute` and its dry run,
//! [`DefaultToolRegistry::admission`], share these functions, so what `toolcap explain` reports
//! is what `toolcap call` does.

use std::borrow::Cow;
use std::sync::Arc;

use capability_types::{
    CapabilityError, DenialCode, ErrorCode, FsPaths, Tool, ToolCapabilities, check_binary_spec,
};

use crate::audit::{AuditKind, emit};
use crate::escalation::{self, ApprovalRequest, EscalationSubject, mask_arguments_with};
use crate::matching::host::HostPattern;
use crate::resolve::{Plan, ResolvedCapabilities, ScopedObjects};

use super::output::AbortOnDrop;
use super::{DefaultToolRegistry, ExecutionContext, ToolCall};

/// The message of a call whose batch was cancelled before it started.
pub(super) const CANCELLED_BEFORE_START: &str = "the batch was cancelled before the call started";

/// Why a call was refused before `execute`, shared by every call of the batch to that tool.
#[derive(Clone)]
pub(super) struct Refusal {
    pub(super) code: ErrorCode,
    pub(super) denial: Option<DenialCode>,
    pub(super) message: String,
    pub(super) kind: AuditKind,
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
    /// A refusal that is not a policy denial (`not_available`, `cancelled`): no denial code.
    pub(super) fn without_denial(code: ErrorCode, message: String) -> Self {
        Refusal {
            code,
            denial: None,
            message,
            kind: AuditKind::ToolDenied,
        }
    }

    fn constraint(message: String) -> Self {
        Refusal {
            code: ErrorCode::Denied,
            denial: Some(DenialCode::ConstraintNotMet),
            message: format!("{}: {message}", DenialCode::ConstraintNotMet),
            kind: AuditKind::ConstraintDenied,
        }
    }
}

/// A tool found, allowed and resolved for a batch: borrowed from the registry's entry, with
/// the plan of the batch's context.
pub(super) struct Ready<'r> {
    pub(super) tool: &'r Arc<dyn Tool>,
    /// The tool's declaration, for escalation.
    pub(super) caps: &'r Arc<ToolCapabilities>,
    /// The tool's admission plan in the batch's context: resolution, scoped objects, and the
    /// reach the argument gate checks against. A tool that declares nothing lends its entry's
    /// plan; a declared tool's comes from the cache.
    pub(super) plan: Cow<'r, Arc<Plan>>,
    /// The last invocation the tool is known to have completed in.
    pub(super) completed_in: &'r std::sync::atomic::AtomicU64,
    /// Where the tool's spare context waits between calls.
    pub(super) spare: &'r super::spare::SpareSlot,
    /// Its arguments that are data, not places ([`Tool::data_arguments`]).
    pub(super) data: &'r [String],
    /// Whether its results are untrusted text ([`Tool::output_is_untrusted`]).
    pub(super) untrusted: bool,
}

/// Whether admission is for a call that will run, or a dry run that stops before execution.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Run {
    Real,
    /// A call of a batch of more than one: see [`DefaultToolRegistry::admit_in_batch`].
    Batch,
    Dry,
}

/// The outcome of a dry run of admission ([`DefaultToolRegistry::admission`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Admission {
    /// The call would be refused before its tool runs, with exactly this result.
    Refused {
        /// The result code the call would get.
        code: ErrorCode,
        /// The stable denial code, for a policy refusal.
        denial: Option<DenialCode>,
        /// The message the call would get.
        message: String,
    },
    /// The call needs approval first (`[escalate]`): it runs only if the approval handler says
    /// yes, and is refused with `ESCALATION_REFUSED` otherwise.
    NeedsApproval {
        /// What would be asked about.
        subjects: Vec<EscalationSubject>,
        /// The resolution the call would run under once approved (before the approved items
        /// are added).
        admitted: Admitted,
    },
    /// The call would reach `execute`.
    Admitted(Admitted),
}

/// A call that passed admission: what its tool would be handed.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Admitted {
    /// The tool's declaration.
    pub capabilities: Arc<ToolCapabilities>,
    /// The declaration resolved under the batch's policy: the same policy objects the scoped
    /// objects consult on every operation.
    pub resolved: Arc<ResolvedCapabilities>,
    /// The scoped objects the tool would be handed (before any approval widens them).
    pub scoped: ScopedObjects,
}

impl DefaultToolRegistry {
    /// A dry run of admission for `call` under `ctx`: the same steps, in the same order, as
    /// [`execute`](Self::execute) (lookup, toolset, availability, the fail-closed guard,
    /// resolution, constraints, the argument gate, escalation), stopped before the tool runs.
    ///
    /// Nothing is recorded, counted or asked: no audit event, no invocation count, no approval
    /// request. The scoped objects are built as for a call (the backends' factories do no I/O
    /// when they build) and handed over unused. A refusal here is the result `execute` would
    /// return; an admitted call can still be refused by its scoped objects while it runs (a
    /// path, a host, a binary), which [`Admitted::resolved`] and the objects' own checks
    /// ([`ScopedProcess::check`](capability_types::ScopedProcess::check)) answer the same way.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use capability_core::{Admission, CompiledPolicy, DefaultToolRegistry, ExecutionContext, ToolCall};
    /// use capability_types::{async_trait, CapabilityError, DenialCode, Tool, ToolCapabilities, ToolContext};
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
    /// let policy = CompiledPolicy::load("id = \"p\"\ntoolset = []\n", capability_core::PolicyFormat::Toml, None);
    /// # let Ok(policy) = policy else { return };
    /// let ctx = ExecutionContext::new("s", Arc::new(policy), "/tmp");
    /// match registry.admission(&ToolCall::new("1", "echo", json!({})), &ctx) {
    ///     Admission::Refused { denial, .. } => assert_eq!(denial, Some(DenialCode::ToolNotInToolset)),
    ///     other => panic!("{other:?}"),
    /// }
    /// ```
    pub fn admission(&self, call: &ToolCall, ctx: &ExecutionContext) -> Admission {
        let refused = |r: Refusal| Admission::Refused {
            code: r.code,
            denial: r.denial,
            message: r.message,
        };
        let mut batch = super::call::BatchState::peek(ctx);
        let held = batch.held_context(ctx);
        let ctx = held.as_ref().unwrap_or(ctx);
        let ready = match self.prepare(&call.tool, ctx) {
            Ok(ready) => ready,
            Err(r) => return refused(r),
        };
        if let Err(r) = self.admit_as(call, &ready, ctx, &mut batch, Run::Dry) {
            return refused(r);
        }
        if ctx.cancellation.is_cancelled() {
            return Admission::Refused {
                code: ErrorCode::Cancelled,
                denial: None,
                message: CANCELLED_BEFORE_START.to_owned(),
            };
        }
        let admitted = Admitted {
            capabilities: Arc::clone(ready.caps),
            resolved: Arc::clone(&ready.plan.resolved),
            scoped: ready.plan.scoped.clone(),
        };
        match escalation::subjects(
            &call.tool,
            ready.caps,
            &call.args,
            &ctx.policy,
            &ctx.working_dir,
        ) {
            None => Admission::Admitted(admitted),
            Some((subjects, _)) => Admission::NeedsApproval { subjects, admitted },
        }
    }

    pub(super) fn prepare(&self, name: &str, ctx: &ExecutionContext) -> Result<Ready<'_>, Refusal> {
        let entry = self.entry(name).ok_or_else(|| {
            Refusal::without_denial(
                ErrorCode::NotAvailable,
                format!("unknown tool {}", name.escape_debug()),
            )
        })?;
        if !ctx.policy.allows_tool(name) {
            let personality = ctx.policy.id().unwrap_or("<none>");
            return Err(CapabilityError::denied(
                DenialCode::ToolNotInToolset,
                format!("{name} is not in the toolset of personality {personality}"),
            )
            .into());
        }
        if let Some(filter) = &ctx.tool_filter
            && let Err(why) = filter.allows(name)
        {
            return Err(CapabilityError::denied(DenialCode::ToolFilteredOut, why).into());
        }
        if !entry.tool.is_available() {
            return Err(CapabilityError::not_available(format!(
                "tool {name} is not available here"
            ))
            .into());
        }
        let plan = match &entry.undeclared {
            Some(plan) => Cow::Borrowed(plan),
            None => Cow::Owned(self.cache.plan_remembered(
                name,
                &entry.capabilities,
                &ctx.policy,
                &ctx.session_id,
                &ctx.working_dir,
                self.backends.as_ref(),
            )?),
        };
        if let Some(confined) = &entry.confined {
            confined.confines_alike(&plan.resolved)?;
        }
        Ok(Ready {
            tool: &entry.tool,
            caps: &entry.capabilities,
            plan,
            completed_in: &entry.completed_in,
            spare: &entry.spare,
            data: &entry.data,
            untrusted: entry.untrusted,
        })
    }

    /// The personality's constraints and the argument gate, decided in input order before the
    /// batch runs (so the outcome never depends on scheduling).
    pub(super) fn admit(
        &self,
        call: &ToolCall,
        ready: &Ready<'_>,
        ctx: &ExecutionContext,
        batch: &mut super::call::BatchState,
    ) -> Result<(), Refusal> {
        self.admit_as(call, ready, ctx, batch, Run::Real)
            .map(|_| ())
    }

    /// [`admit`](Self::admit) for a call of a batch: a dispatch that no `max_invocations`
    /// limits is not counted here but returned as `Ok(false)`, for the batch to count all of a
    /// tool's at once ([`Invocation::add_dispatched`](super::Invocation)) before anything runs.
    pub(super) fn admit_in_batch(
        &self,
        call: &ToolCall,
        ready: &Ready<'_>,
        ctx: &ExecutionContext,
        batch: &mut super::call::BatchState,
    ) -> Result<bool, Refusal> {
        self.admit_as(call, ready, ctx, batch, Run::Batch)
    }

    /// [`admit`](Self::admit); a dry run counts nothing against `max_invocations`.
    fn admit_as(
        &self,
        call: &ToolCall,
        ready: &Ready<'_>,
        ctx: &ExecutionContext,
        batch: &mut super::call::BatchState,
        run: Run,
    ) -> Result<bool, Refusal> {
        // The constraints in force: the personality's, combined with any narrowing.
        let constraints = ctx.policy.constraints(&call.tool);
        let personality = ctx.policy.id().unwrap_or("<none>");
        if constraints.is_some_and(|c| c.forbidden) {
            return Err(Refusal::constraint(format!(
                "{} is forbidden under personality {personality}",
                call.tool
            )));
        }
        if let Some(c) = constraints.filter(|c| !c.reject_args.is_empty()) {
            refused_value(call, &c.reject_args, personality)?;
        }
        if !ctx.policy.refuse_calls.is_empty() {
            refused_call(call, &ctx.policy.refuse_calls, personality)?;
        }
        if let Some(after) = ctx.policy.after_untrusted() {
            paused_after_untrusted(&call.tool, after, batch, personality)?;
        }
        let gated = constraints.is_none_or(|c| c.path_gate);
        super::gate::check_arguments(
            &call.args,
            gated,
            ready.data,
            ready.plan.gate_reach.as_deref(),
        )?;
        if let Some(c) = constraints.filter(|c| !c.only_after.is_empty()) {
            // What had completed when the batch began, taken once per batch and only when a
            // constraint asks.
            let completed_before = batch
                .completed_before
                .get_or_insert_with(|| ctx.invocation.completed_snapshot());
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
        let (within, counted) = match run {
            Run::Real => (ctx.invocation.reserve(&call.tool, max), true),
            Run::Batch if max.is_none() => (true, false),
            Run::Batch => (ctx.invocation.reserve(&call.tool, max), true),
            Run::Dry => (
                max.is_none_or(|m| ctx.invocation.dispatched(&call.tool) < m),
                false,
            ),
        };
        if !within {
            return Err(Refusal::constraint(format!(
                "{} may run at most {} time(s) per invocation",
                call.tool,
                max.unwrap_or(0)
            )));
        }
        // A tool whose results are untrusted, admitted: the batches that begin after this one
        // are paused (docs/policy.md, "After untrusted output").
        if ready.untrusted
            && run != Run::Dry
            && let Some(after) = ctx.policy.after_untrusted()
        {
            ctx.invocation.saw_untrusted(after.batches);
        }
        Ok(counted)
    }

    /// Asks the approval handler about `subjects`; audits the question and the answer.
    pub(super) async fn escalate(
        &self,
        call: &ToolCall,
        ctx: &ExecutionContext,
        subjects: Vec<EscalationSubject>,
    ) -> Result<(), Refusal> {
        let sink = self.audit.as_deref();
        let personality = ctx.policy.id();
        let listing = |subjects: &[EscalationSubject]| {
            subjects
                .iter()
                .map(|s| format!("{} {}", s.category, s.subject))
                .collect::<Vec<_>>()
                .join(", ")
        };
        // More than a screen shows: nobody is asked (docs/policy.md, "Escalation").
        let unshowable = crate::escalation::too_much_to_ask(&subjects);
        let listed = match &unshowable {
            Some(_) if subjects.len() > 3 => format!(
                "{} and {} more",
                listing(&subjects[..3]),
                subjects.len() - 3
            ),
            _ => listing(&subjects),
        };
        let event = |kind| super::call_event(kind, ctx, &call.id, &call.tool);
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
        let outcome: Result<(), String> = match (unshowable, &self.approval) {
            (Some(why), _) => Err(why),
            (None, None) => Err("no approval handler is configured (headless)".to_owned()),
            (None, Some(handler)) => {
                let request = ApprovalRequest {
                    session_id: ctx.session_id.to_string(),
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
}

/// Structural checks on a declaration that the type system cannot make for a builder-made
/// value: host pattern syntax, absolute paths, binary specs.
pub(super) fn check_declaration(caps: &ToolCapabilities) -> Result<(), String> {
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

/// Refuses `call` when its text (the tool's name and its arguments as JSON, keys sorted, as
/// `[escalate] calls` reads it) holds one of `rules` (`[refuse] calls`, docs/policy.md,
/// "Refused calls"): before anything runs, with no one asked.
fn refused_call(call: &ToolCall, rules: &[String], personality: &str) -> Result<(), Refusal> {
    let text = crate::escalation::call_text(&call.tool, &call.args);
    match rules.iter().find(|rule| text.contains(rule.as_str())) {
        Some(rule) => Err(Refusal::constraint(format!(
            "{} is refused under personality {personality}: the call holds {} (refuse.calls)",
            call.tool,
            crate::shown(rule)
        ))),
        None => Ok(()),
    }
}

/// Refuses `tool` when `[after_untrusted]` holds it now: paused in a batch that began within
/// `batches` batches after one that admitted a tool whose results are untrusted, or held for the
/// rest of an invocation that has admitted one (docs/policy.md, "After untrusted output"). As
/// the batch began: what its own calls admit counts from the next batch on.
fn paused_after_untrusted(
    tool: &str,
    after: &capability_policy::AfterUntrusted,
    batch: &super::call::BatchState,
    personality: &str,
) -> Result<(), Refusal> {
    let named = |list: &[String]| {
        list.iter()
            .any(|entry| crate::after_untrusted::names_tool(entry, tool))
    };
    let why = if batch.untrusted.paused && named(&after.pause) {
        format!(
            "it is paused for {} batch(es) after one in which a tool whose output is untrusted \
             ran (text from a file, a web page or a program the model has just read)",
            after.batches
        )
    } else if batch.untrusted.held && named(&after.hold) {
        "it is held for the rest of this invocation, which has run a tool whose output is \
         untrusted (what it writes, a later run reads)"
            .to_owned()
    } else {
        return Ok(());
    };
    Err(Refusal::constraint(format!(
        "{tool} does not run under personality {personality}: {why}; a new invocation (the \
         user's next message) lifts it"
    )))
}

/// `reject_args`: a top-level argument that is a string equal to one the rule lists refuses the
/// call (docs/policy.md, "Invocation constraints"), as Ethos's `mcp.yaml` rules do.
#[cold]
fn refused_value(
    call: &ToolCall,
    rules: &std::collections::BTreeMap<String, Vec<String>>,
    personality: &str,
) -> Result<(), Refusal> {
    for (arg, refused) in rules {
        if let Some(value) = call.args.get(arg).and_then(serde_json::Value::as_str)
            && refused.iter().any(|r| r == value)
        {
            return Err(Refusal::constraint(format!(
                "{}: argument {arg:?} may not be {value:?} under personality {personality}",
                call.tool
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declarations_are_checked_for_what_types_cannot_say() {
        assert!(check_declaration(&ToolCapabilities::none()).is_ok());
        let bad_host = ToolCapabilities::none().with_network(["https://x.com"]);
        assert!(
            check_declaration(&bad_host)
                .unwrap_err()
                .starts_with("network.allowedHosts")
        );
        let bad_binary = ToolCapabilities::none().with_process(["bin/../sh"]);
        assert!(
            check_declaration(&bad_binary)
                .unwrap_err()
                .starts_with("process.allowedBinaries")
        );
    }
}
