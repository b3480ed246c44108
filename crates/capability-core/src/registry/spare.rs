//! A tool's spare context: a call run in the caller's task borrows the context the tool's last
//! such call left, when it was made for the same plan and batch context, instead of building
//! one (docs/decisions.md, "The per-call path").
//!
//! Building a context clones the session, the directory, the token, the personality's id and
//! each scoped object of the plan: one reference count each, up and down again when the call
//! ends. A spare holds exactly those, so a call that borrows it sets only its own id, its
//! tool's name and its attachments, and gives it back when it ends. Nothing of one call is
//! left for the next: the id and the name are taken back with the outcome, and the attachments
//! are dropped before the context is given back. A call that was approved after an escalation
//! has scoped objects of its own and neither borrows nor gives back; a call whose future is
//! dropped drops its context with it.
//!
//! The spare lives in the registry's entry for the tool, so it goes when the registry goes,
//! and its scoped objects with it (a store's file is closed when its last holder lets go). Two
//! calls of one tool at once: one borrows, the other builds, and the one that gives back last
//! leaves its own.

use std::sync::Arc;

use crossbeam_utils::atomic::AtomicCell;

use capability_types::ToolContext;

use super::ExecutionContext;
use crate::resolve::Plan;

/// A context, and what it was made for: kept boxed, so that lending it moves a pointer (moved
/// by value, its 200 bytes cost more than the reference counts it saves).
pub(super) struct Spare {
    /// Held, so that a plan compared by address is never a new one at an old address. `None`
    /// for a call approved after an escalation: its scoped objects are its own, not the
    /// plan's, so it never fits and is never left for another call.
    plan: Option<Arc<Plan>>,
    /// The policy's generation (never reused), standing for its personality.
    generation: u64,
    /// The context; between calls its id and tool name are empty and it has no attachments.
    pub(super) ctx: ToolContext,
}

impl Spare {
    /// A spare for a context made afresh for a call of `plan` under `ctx`.
    pub(super) fn new(plan: &Arc<Plan>, ctx: &ExecutionContext, fresh: ToolContext) -> Box<Self> {
        Box::new(Spare {
            plan: Some(Arc::clone(plan)),
            generation: ctx.policy.generation(),
            ctx: fresh,
        })
    }

    /// A context made for a call approved after an escalation, with the scoped objects that
    /// allow what was approved: lent to that call alone.
    pub(super) fn approved(fresh: ToolContext) -> Box<Self> {
        Box::new(Spare {
            plan: None,
            generation: 0,
            ctx: fresh,
        })
    }

    /// Whether this is the context a call of `plan` under `ctx` would build: the same plan,
    /// policy, session, directory and token.
    fn fits(&self, plan: &Arc<Plan>, ctx: &ExecutionContext) -> bool {
        self.plan.as_ref().is_some_and(|own| Arc::ptr_eq(own, plan))
            && self.generation == ctx.policy.generation()
            && Arc::ptr_eq(&self.ctx.session_id, &ctx.session_id)
            && Arc::ptr_eq(&self.ctx.working_dir, &ctx.working_dir)
            && self.ctx.cancellation.same_as(&ctx.cancellation)
    }
}

/// Where a tool's spare context waits between calls: taken and left with one atomic swap
/// each, no lock.
#[derive(Default)]
pub(super) struct SpareSlot(AtomicCell<Option<Box<Spare>>>);

impl SpareSlot {
    /// The spare for a call of `plan` under `ctx`, if the slot holds one that fits. One that
    /// does not fit is dropped: the call's own will take its place.
    pub(super) fn borrow(&self, plan: &Arc<Plan>, ctx: &ExecutionContext) -> Option<Box<Spare>> {
        self.0.take().filter(|spare| spare.fits(plan, ctx))
    }

    /// Leaves `spare` for the next call, its attachments dropped (its call id and tool name
    /// must already be taken out); one made for an approved call is dropped instead. Whatever
    /// another call left meanwhile is dropped.
    pub(super) fn give_back(&self, mut spare: Box<Spare>) {
        debug_assert!(spare.ctx.call_id.is_empty() && spare.ctx.tool.is_empty());
        if spare.plan.is_none() {
            return;
        }
        spare.ctx.scoped_attachments = None;
        drop(self.0.swap(Some(spare)));
    }
}
