//! The registry's per-thread memo of admission plans: a warm call finds its tool's plan without
//! taking the plan cache's lock (docs/decisions.md, "The per-call path").
//!
//! The shared cache ([`ResolutionCache::plan`](super::ResolutionCache::plan)) takes a lock and
//! hashes the tool's name on every call; taken out, a batch of one took about a ninth less
//! time. Each thread keeps the last few plans it was handed, with everything they were made
//! for: the cache they came from, the declaration (compared by address), the policy's and the
//! backends' generations, the session and the working directory. A plan is served from the
//! memo only when every one of them is the same, so a memo never answers for a context the
//! shared cache would not; a miss goes to the shared cache and remembers what it returns.
//!
//! A memo holds its plans and declarations weakly: it never keeps a plan, or the scoped
//! objects in it, alive after the cache has let it go (a store's file is closed when the
//! registry that opened it is dropped), and a weak reference keeps the declaration's memory
//! from being reused, so an address compared is never a new declaration's.

use std::cell::RefCell;
use std::path::Path;
use std::sync::{Arc, Weak};

use capability_types::ToolCapabilities;

use super::Plan;

/// How many plans a thread remembers.
pub(super) const SLOTS: usize = 4;

/// What a plan was made for, and the plan.
struct Remembered {
    /// The [`ResolutionCache`](super::ResolutionCache) it came from (ids are never reused).
    cache: u64,
    /// Held weakly: its memory is not reused while this lives, so its address is never a new
    /// declaration's.
    caps: Weak<ToolCapabilities>,
    generation: u64,
    backends: u64,
    session_id: Arc<str>,
    working_dir: Arc<Path>,
    plan: Weak<Plan>,
}

/// What a plan is looked up by: the same fields as [`Remembered`], borrowed.
pub(super) struct Key<'a> {
    pub(super) cache: u64,
    pub(super) caps: &'a Arc<ToolCapabilities>,
    pub(super) generation: u64,
    pub(super) backends: u64,
    pub(super) session_id: &'a Arc<str>,
    pub(super) working_dir: &'a Arc<Path>,
}

impl Remembered {
    fn is_for(&self, key: &Key<'_>) -> bool {
        self.cache == key.cache
            && std::ptr::eq(self.caps.as_ptr(), Arc::as_ptr(key.caps))
            && self.generation == key.generation
            && self.backends == key.backends
            && (Arc::ptr_eq(&self.session_id, key.session_id)
                || *self.session_id == **key.session_id)
            && (Arc::ptr_eq(&self.working_dir, key.working_dir)
                || *self.working_dir == **key.working_dir)
    }
}

/// The slots, and the one a miss fills next.
struct Memo {
    slots: [Option<Remembered>; SLOTS],
    next: usize,
}

thread_local! {
    static MEMO: RefCell<Memo> = const {
        RefCell::new(Memo {
            slots: [const { None }; SLOTS],
            next: 0,
        })
    };
}

/// The plan this thread remembers for `key`, if it has one and the cache still holds it.
pub(super) fn recall(key: &Key<'_>) -> Option<Arc<Plan>> {
    MEMO.try_with(|memo| {
        let memo = memo.try_borrow().ok()?;
        memo.slots
            .iter()
            .flatten()
            .find(|held| held.is_for(key))
            .and_then(|held| held.plan.upgrade())
    })
    .ok()
    .flatten()
}

/// Remembers `plan` for `key`, in place of the slot filled longest ago.
///
/// What a slot held is dropped after the memo's borrow ends, though only weak references and
/// the session's and directory's names are in it.
pub(super) fn remember(key: &Key<'_>, plan: &Arc<Plan>) {
    let held = Remembered {
        cache: key.cache,
        caps: Arc::downgrade(key.caps),
        generation: key.generation,
        backends: key.backends,
        session_id: Arc::clone(key.session_id),
        working_dir: Arc::clone(key.working_dir),
        plan: Arc::downgrade(plan),
    };
    let replaced = MEMO
        .try_with(|memo| {
            let mut memo = memo.try_borrow_mut().ok()?;
            let at = memo.next;
            memo.next = (at + 1) % SLOTS;
            memo.slots[at].replace(held)
        })
        .ok()
        .flatten();
    drop(replaced);
}
