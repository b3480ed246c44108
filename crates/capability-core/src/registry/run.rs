//! One admitted call, run: its escalation, its tool context, `execute` under its timeout, its
//! batch's cancellation and `catch_unwind`, the result's checks and its audit events
//! (docs/semantics.md, "The registry").
//!
//! What every call does is written inline in [`DefaultToolRegistry::run_one`]; what only some
//! calls do (a refusal, an escalation, an audit event) lives in functions of its own, kept out
//! of line, so a plain call's path reads and runs as one short sequence (docs/benchmarks.md,
//! "Instructions per call").

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use capability_types::{
    CapabilityError, ErrorCode, ScopedAttachments, Tool, ToolContext, ToolResult,
};
use futures_util::FutureExt;

use super::admission::{self, Ready, Refusal};
use super::drive::{Clock, Deadline};
use super::output::{AbortOnDrop, apply_budget, bounded_message, panic_message};
use super::spare::Spare;
use super::{
    DefaultToolRegistry, ExecutionContext, Placement, ToolCall, ToolCallResult, call_event,
};
use crate::attachments::CallAttachments;
use crate::audit::{AuditKind, emit};
use crate::escalation::{self, EscalationSubject, mask_arguments_with};
use crate::isolation::{IsolationKey, ToolIsolation};
use crate::resolve::{Approvals, ScopedObjects, build_scoped};

/// A call's outcome before it becomes a result.
type Outcome = Result<serde_json::Value, CapabilityError>;

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

    /// The call's arguments for an audit event: only when configured, and then masked.
    fn audited_arguments(&self, call: &ToolCall) -> Option<serde_json::Value> {
        self.config
            .audit_arguments
            .then(|| mask_arguments_with(&call.args, &self.config.sensitive_keys))
    }

    /// Runs one admitted call.
    #[allow(
        clippy::too_many_arguments,
        reason = "the per-call path; its arguments are what admission decided"
    )]
    pub(super) async fn run_one(
        &self,
        call: &mut ToolCall,
        prep: Result<&Ready<'_>, Refusal>,
        ctx: &ExecutionContext,
        timeout: Duration,
        clock: &Clock,
        placement: Placement,
    ) -> ToolCallResult {
        let ready = match prep {
            Ok(ready) => ready,
            Err(refusal) => return self.refused(call, refusal, ctx, clock),
        };
        if ctx.cancellation.is_cancelled() {
            let refusal = Refusal::without_denial(
                ErrorCode::Cancelled,
                admission::CANCELLED_BEFORE_START.to_owned(),
            );
            return self.refused(call, refusal, ctx, clock);
        }
        // Escalation: ask before anything runs; an approved call gets scoped objects that allow
        // exactly what was approved.
        let asking = escalation::subjects(
            &call.tool,
            ready.caps,
            &call.args,
            &ctx.policy,
            &ctx.working_dir,
        );
        let asked = asking.is_some();
        // `None`: the plan's own, installed only in a context built afresh.
        let approved = match asking {
            None => None,
            // Boxed: the question's state (its request, its timer) is carried only by a call
            // that asks.
            Some((subjects, approvals)) => {
                match Box::pin(self.approved(call, ready, ctx, subjects, approvals)).await {
                    Ok(scoped) => Some(scoped),
                    Err(refusal) => return self.refused(call, refusal, ctx, clock),
                }
            }
        };
        // A place among the registry's running calls, when they are bounded: taken after the
        // approval (a call waiting for its user holds none), given back when the call ends.
        // Held (not `_`) until the call ends.
        let (_place, waited) = match &self.running {
            None => (None, false),
            Some(places) => match place(places, &ctx.cancellation).await {
                Some((place, waited)) => (Some(place), waited),
                None => {
                    let refusal = Refusal::without_denial(
                        ErrorCode::Cancelled,
                        admission::CANCELLED_BEFORE_START.to_owned(),
                    );
                    return self.refused(call, refusal, ctx, clock);
                }
            },
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
        if audit_info && let Err(refusal) = self.audit_called(call, ctx, attachments.as_deref()) {
            return self.refused(call, refusal, ctx, clock);
        }

        let args = std::mem::take(&mut call.args);
        let personality = ctx.policy.id();
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
        // The context's parts every call has; its id, name and attachments are the call's own.
        let fresh = |scoped: ScopedObjects| {
            let mut fresh = ToolContext::shared(
                Arc::clone(&ctx.session_id),
                Arc::clone(&ctx.working_dir),
                ctx.cancellation.clone(),
            );
            fresh.personality_id = ctx.policy.shared_id();
            scoped.install(&mut fresh);
            fresh
        };
        let attachments = attachments.map(|a| a as Arc<dyn ScopedAttachments>);
        // The call's id, name and attachments move into its context; the id and the name come
        // back with the outcome.
        let own = move |tool_ctx: &mut ToolContext| {
            tool_ctx.call_id = std::mem::take(&mut call.id);
            tool_ctx.tool = std::mem::take(&mut call.tool);
            tool_ctx.scoped_attachments = attachments;
        };
        // The deadline counts from when `execute` is about to start (not from admission: a call
        // queued behind the concurrency cap, waiting for an approval or for a place among the
        // registry's running calls, is not charged for the wait). Unless the call asked for an
        // approval or waited for such a place, the batch's latest reading of the clock serves:
        // it was taken at most a call's bookkeeping ago (docs/decisions.md, "The per-call
        // path"), so the deadline is, if anything, that much earlier.
        let started = if asked || waited {
            clock.read()
        } else {
            clock.latest()
        };
        let exec_started = audit_info.then_some(started);
        let deadline = clock.deadline(started, timeout);
        let (outcome, call_id, tool_name) = match placement {
            Placement::Only | Placement::Inline => {
                // Run here, a call borrows the tool's spare context when one fits, and gives
                // it back; an approved call has scoped objects of its own, lent to it alone.
                let mut spare = match approved {
                    Some(scoped) => Spare::approved(fresh(scoped)),
                    None => ready.spare.borrow(&ready.plan, ctx).unwrap_or_else(|| {
                        Spare::new(&ready.plan, ctx, fresh(ready.plan.scoped.clone()))
                    }),
                };
                let tool_ctx = &mut spare.ctx;
                own(tool_ctx);
                let run = guarded(
                    ready.tool.as_ref(),
                    isolation.as_ref(),
                    args,
                    tool_ctx,
                    deadline,
                );
                let outcome = run.await;
                let call_id = std::mem::take(&mut tool_ctx.call_id);
                let tool_name = std::mem::take(&mut tool_ctx.tool);
                ready.spare.give_back(spare);
                (outcome, call_id, tool_name)
            }
            Placement::Task => {
                let mut tool_ctx = fresh(approved.unwrap_or_else(|| ready.plan.scoped.clone()));
                own(&mut tool_ctx);
                // The task owns the context; the identity is kept here for a task that panics.
                let (id, name) = (tool_ctx.call_id.clone(), tool_ctx.tool.clone());
                let tool = Arc::clone(ready.tool);
                let task = AbortOnDrop(tokio::spawn(async move {
                    guarded(tool.as_ref(), isolation.as_ref(), args, &tool_ctx, deadline).await
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
            if super::output::nests_deeper_than(&value, capability_types::MAX_VALUE_DEPTH) {
                return Err(too_deep(&tool_name, &value));
            }
            Ok(value)
        });
        let ended = clock.read();
        if let Some(exec_started) = exec_started {
            self.audit_completed(
                ctx,
                &call_id,
                &tool_name,
                &outcome,
                ended.saturating_sub(exec_started),
            );
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
            Err(e) => ToolResult::error(e.result_code(), bounded_message(e.to_string())),
        };
        ToolCallResult {
            call_id,
            tool: tool_name,
            result,
            duration: ended,
        }
    }

    /// A call refused before `execute`: its `ToolDenied` (or constraint) event, and its result.
    #[cold]
    #[inline(never)]
    fn refused(
        &self,
        call: &mut ToolCall,
        refusal: Refusal,
        ctx: &ExecutionContext,
        clock: &Clock,
    ) -> ToolCallResult {
        let message = bounded_message(refusal.message);
        if self.audited(tracing::Level::WARN) {
            let e = call_event(refusal.kind, ctx, &call.id, &call.tool)
                .with_outcome(Some(refusal.code), refusal.denial)
                .with_reason(message.clone())
                .with_arguments(self.audited_arguments(call));
            if let Err(err) = emit(&e, self.audit.as_deref()) {
                tracing::error!(target: "toolcap::audit", error = %err, "could not record a denial");
            }
        }
        ToolCallResult {
            call_id: std::mem::take(&mut call.id),
            tool: std::mem::take(&mut call.tool),
            result: ToolResult::error(refusal.code, message),
            duration: clock.read(),
        }
    }

    /// Asks about `subjects` and, once approved, the scoped objects that allow exactly what was
    /// approved.
    async fn approved(
        &self,
        call: &ToolCall,
        ready: &Ready<'_>,
        ctx: &ExecutionContext,
        subjects: Vec<EscalationSubject>,
        approvals: Approvals,
    ) -> Result<ScopedObjects, Refusal> {
        self.escalate(call, ctx, subjects).await?;
        let resolved = self
            .cache
            .intersect(&call.tool, ready.caps, &ctx.policy)
            .for_call_approved(&ctx.session_id, &ctx.working_dir, Arc::new(approvals));
        build_scoped(&resolved, self.backends.as_ref()).map_err(Into::into)
    }

    /// Records that the call runs; a call that cannot be audited does not run.
    #[inline(never)]
    fn audit_called(
        &self,
        call: &ToolCall,
        ctx: &ExecutionContext,
        attachments: Option<&CallAttachments>,
    ) -> Result<(), Refusal> {
        let called = call_event(AuditKind::ToolCalled, ctx, &call.id, &call.tool)
            .with_arguments(self.audited_arguments(call))
            .with_attachments(attachments.map(CallAttachments::ids));
        emit(&called, self.audit.as_deref()).map_err(|err| {
            Refusal::without_denial(
                ErrorCode::NotAvailable,
                format!("the call cannot be audited, so it does not run: {err}"),
            )
        })
    }

    /// Records how the call ended.
    #[inline(never)]
    fn audit_completed(
        &self,
        ctx: &ExecutionContext,
        call_id: &str,
        tool: &str,
        outcome: &Outcome,
        ran: Duration,
    ) {
        let error = outcome.as_ref().err();
        let completed = call_event(AuditKind::ToolCompleted, ctx, call_id, tool)
            .with_outcome(
                error.map(CapabilityError::result_code),
                error.and_then(CapabilityError::denial_code),
            )
            .with_duration(ran);
        if let Err(err) = emit(&completed, self.audit.as_deref()) {
            tracing::error!(target: "toolcap::audit", error = %err, "could not record a completion");
        }
    }
}

/// A place among `places` and whether it had to be waited for, or `None` when `cancellation`
/// fires first. Taken at once when one is free.
async fn place<'p>(
    places: &'p tokio::sync::Semaphore,
    cancellation: &capability_types::CancellationToken,
) -> Option<(tokio::sync::SemaphorePermit<'p>, bool)> {
    if let Ok(place) = places.try_acquire() {
        return Some((place, false));
    }
    tokio::select! {
        place = places.acquire() => place.ok().map(|place| (place, true)),
        () = cancellation.cancelled() => None,
    }
}

/// The outcome of a call whose tool panicked.
#[cold]
#[inline(never)]
fn panicked(tool: &str, payload: Box<dyn std::any::Any + Send>) -> Outcome {
    Err(CapabilityError::failed(format!(
        "tool {tool} panicked: {}",
        panic_message(payload)
    )))
}

/// The error of a result nested deeper than any message can carry.
#[cold]
#[inline(never)]
fn too_deep(tool: &str, value: &serde_json::Value) -> CapabilityError {
    let depth = capability_types::value_depth(value);
    CapabilityError::failed(format!(
        "tool {tool} returned a value nested {depth} levels deep; at most {} are accepted",
        capability_types::MAX_VALUE_DEPTH
    ))
}

/// Runs `execute` (or the isolation's) under the call's timeout and its batch's cancellation,
/// a panic in it ending the call with `execution_failed`.
///
/// A call that is done at its first poll (a tool that does not wait on anything) never
/// registers a timer or a wake-up: the deadline and the cancellation are armed only when it has
/// to wait. The deadline still counts from before that first poll, and a batch cancelled
/// before it is still refused first. The panic is caught where the tool's code runs (making its
/// future, each poll, and dropping it), so the call's future is not moved into a wrapper.
async fn guarded(
    tool: &dyn Tool,
    isolation: Option<&(Arc<dyn ToolIsolation>, IsolationKey)>,
    args: serde_json::Value,
    ctx: &ToolContext,
    deadline: Deadline,
) -> Outcome {
    use std::panic::{AssertUnwindSafe, catch_unwind};
    use std::task::Poll;
    if ctx.cancellation.is_cancelled() {
        return Err(CapabilityError::Cancelled);
    }
    let made = catch_unwind(AssertUnwindSafe(|| match isolation {
        Some((isolation, key)) => isolation.execute(key, tool, args, ctx),
        None => tool.execute(args, ctx),
    }));
    let mut work = match made {
        Ok(work) => work,
        Err(payload) => return panicked(&ctx.tool, payload),
    };
    let first = std::future::poll_fn(|cx| {
        Poll::Ready(catch_unwind(AssertUnwindSafe(|| work.as_mut().poll(cx))))
    })
    .await;
    match first {
        Ok(Poll::Ready(done)) => return dropped(work, done, &ctx.tool),
        Ok(Poll::Pending) => {}
        Err(payload) => return dropped(work, panicked(&ctx.tool, payload), &ctx.tool),
    }
    // The timer and the cancellation's wake-up live in a box of their own, made only for a call
    // that waits: a call's future stays small, and a batch moves it cheaply.
    AssertUnwindSafe(Box::pin(waited(work, ctx, deadline)))
        .catch_unwind()
        .await
        .unwrap_or_else(|payload| panicked(&ctx.tool, payload))
}

/// Drops a call's future, its `outcome` unless the drop panics (a future's own `Drop` is the
/// tool's code too).
fn dropped<F: ?Sized>(work: Pin<Box<F>>, outcome: Outcome, tool: &str) -> Outcome {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(work))) {
        Ok(()) => outcome,
        Err(payload) => panicked(tool, payload),
    }
}

/// The rest of a call that did not finish at its first poll: it ends at its result, its
/// deadline, or its batch's cancellation, whichever comes first.
async fn waited(
    work: Pin<Box<dyn Future<Output = Outcome> + Send + '_>>,
    ctx: &ToolContext,
    deadline: Deadline,
) -> Outcome {
    let timeout = deadline.timeout;
    tokio::select! {
        biased;
        () = ctx.cancellation.cancelled() => Err(CapabilityError::Cancelled),
        r = tokio::time::timeout_at(deadline.instant(), work) => match r {
            Ok(r) => r,
            Err(_) => Err(CapabilityError::Timeout(format!(
                "tool {} timed out after {timeout:?}",
                ctx.tool
            ))),
        },
    }
}
