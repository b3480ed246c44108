//! A thread's spare tool context: a call run in the caller's task borrows the context the
//! thread's last such call left, when it was made for the same plan and batch context, instead
//! of building one (docs/decisions.md, "The per-call path").
//!
//! Building a context clones the session, the directory, the token, the personality's id and
//! each scoped object of the plan: one reference count each, up and down again when the call
//! ends. A spare holds exactly those, so a call that borrows it sets only its own id, its
//! tool's name and its attachments, and gives it back when it ends. Nothing of one call is
//! left for the next: the id and the name are taken back with the outcome, and the attachments
//! are dropped before the context is given back. A call that was approved after an escalation
//! has scoped objects of its own and neither borrows nor gives back; a call whose future is
//! dropped drops its context with it.

use std::cell::RefCell;
use std::sync::Arc;

use capability_types::ToolContext;

use super::ExecutionContext;
use crate::resolve::Plan;

/// The context left by the thread's last call, and what it was made for.
struct Spare {
    /// Held, so that a plan compared by address is never a new one at an old address.
    plan: Arc<Plan>,
    /// The policy's generation (never reused), standing for its personality.
    generation: u64,
    /// `None` while a call has it.
    ctx: Option<Box<ToolContext>>,
}

thread_local! {
    static SPARE: RefCell<Option<Spare>> = const { RefCell::new(None) };
}

impl Spare {
    /// Whether a context made for this spare's plan is the one a call of `plan` under `ctx`
    /// would build: the same plan, policy, session, directory and token.
    fn fits(&self, plan: &Arc<Plan>, ctx: &ExecutionContext) -> bool {
        Arc::ptr_eq(&self.plan, plan)
            && self.generation == ctx.policy.generation()
            && self.ctx.as_ref().is_some_and(|kept| {
                Arc::ptr_eq(&kept.session_id, &ctx.session_id)
                    && Arc::ptr_eq(&kept.working_dir, &ctx.working_dir)
                    && kept.cancellation.same_as(&ctx.cancellation)
            })
    }
}

/// The thread's spare context for a call of `plan` under `ctx`, if it has one that fits; its
/// call id and tool name are empty and it has no attachments.
pub(super) fn borrow(plan: &Arc<Plan>, ctx: &ExecutionContext) -> Option<Box<ToolContext>> {
    SPARE
        .try_with(|spare| {
            let mut spare = spare.try_borrow_mut().ok()?;
            let spare = spare.as_mut().filter(|spare| spare.fits(plan, ctx))?;
            spare.ctx.take()
        })
        .ok()
        .flatten()
}

/// Gives `kept`, made for a call of `plan` under a policy of `generation`, back to the thread;
/// its call id, tool name and attachments must already be taken out.
pub(super) fn give_back(plan: &Arc<Plan>, generation: u64, kept: Box<ToolContext>) {
    debug_assert!(kept.call_id.is_empty() && kept.tool.is_empty());
    debug_assert!(kept.scoped_attachments.is_none());
    // Whatever the slot held before is dropped after the borrow ends: a scoped object's `Drop`
    // is a backend's code.
    let replaced = SPARE.try_with(|spare| {
        let Ok(mut spare) = spare.try_borrow_mut() else {
            return (Some(kept), None);
        };
        match spare.as_mut() {
            Some(same) if Arc::ptr_eq(&same.plan, plan) && same.generation == generation => {
                (same.ctx.replace(kept), None)
            }
            _ => {
                let fresh = Spare {
                    plan: Arc::clone(plan),
                    generation,
                    ctx: Some(kept),
                };
                (None, spare.replace(fresh))
            }
        }
    });
    drop(replaced);
}
