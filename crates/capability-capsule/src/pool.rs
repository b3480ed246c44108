//! The capsule's idle workers: kept per (tool, personality), each serving one session, bounded
//! in all (docs/isolation-model.md, "The warm path").

use std::collections::HashMap;

use tokio::runtime;

use capability_core::IsolationKey;

use crate::channel::Worker;

/// The idle workers, by key, each with when it went idle (a count, not a clock).
#[derive(Default)]
pub(crate) struct Idle {
    pub(crate) by_key: HashMap<IsolationKey, Vec<(u64, Worker)>>,
    pub(crate) total: usize,
    pub(crate) next: u64,
    /// Workers being started ahead, by key and runtime ([`Idle::starting`]).
    pub(crate) starting: HashMap<(IsolationKey, Option<runtime::Id>), usize>,
}

impl Idle {
    /// Ends the worker idle the longest (dropping it kills it), and forgets keys left without
    /// workers once there are many: a key per personality ever used would otherwise stay.
    pub(crate) fn evict_oldest(&mut self) {
        let oldest = self
            .by_key
            .iter()
            .flat_map(|(key, workers)| {
                workers
                    .iter()
                    .enumerate()
                    .map(move |(at, (since, _))| (*since, key, at))
            })
            .min_by_key(|(since, _, _)| *since)
            .map(|(_, key, at)| (key.clone(), at));
        if let Some((key, at)) = oldest
            && let Some(workers) = self.by_key.get_mut(&key)
        {
            drop(workers.swap_remove(at));
            self.total -= 1;
        }
        if self.by_key.len() > 2 * self.total.max(8) {
            self.by_key.retain(|_, workers| !workers.is_empty());
        }
    }

    /// Takes out every idle worker that served `session`, and forgets the keys left without
    /// workers.
    pub(crate) fn take_session(&mut self, session: &str) -> Vec<Worker> {
        let mut taken = Vec::new();
        self.by_key.retain(|_, workers| {
            let mut at = 0;
            while at < workers.len() {
                if workers[at].1.session() == Some(session) {
                    taken.push(workers.swap_remove(at).1);
                } else {
                    at += 1;
                }
            }
            !workers.is_empty()
        });
        self.total -= taken.len();
        taken
    }

    /// An idle worker for `key`, started on `runtime`, for a call of `session`: the one that
    /// served that session last, else one that has served nobody yet (started ahead). A
    /// worker's channel is registered with the runtime that started it, and another runtime
    /// would wait on it for ever; and what a tool keeps in memory between calls must reach no
    /// other session (docs/isolation-model.md, "The warm path").
    pub(crate) fn take(
        &mut self,
        key: &IsolationKey,
        runtime: Option<runtime::Id>,
        session: &str,
    ) -> Option<Worker> {
        let workers = self.by_key.get_mut(key)?;
        let on = |w: &Worker| w.runtime == runtime;
        let at = workers
            .iter()
            .rposition(|(_, w)| on(w) && w.session() == Some(session))
            .or_else(|| {
                workers
                    .iter()
                    .rposition(|(_, w)| on(w) && w.session().is_none())
            })?;
        let (_, worker) = workers.swap_remove(at);
        self.total -= 1;
        Some(worker)
    }

    /// Keeps `worker` idle for `key`, unless `limit` workers of its runtime and its session
    /// (or, for one that has served nobody, of none) are kept already; past `max_total` in
    /// all, the worker idle the longest goes. What is not kept is handed back, for the caller
    /// to drop (so kill) outside the lock.
    pub(crate) fn put(
        &mut self,
        key: &IsolationKey,
        worker: Worker,
        limit: usize,
        max_total: usize,
    ) -> Option<Worker> {
        self.next += 1;
        let since = self.next;
        // The key is copied only the first time a worker of it goes idle.
        let workers = match self.by_key.get_mut(key) {
            Some(workers) => workers,
            None => self.by_key.entry(key.clone()).or_default(),
        };
        let kept = workers
            .iter()
            .filter(|(_, w)| w.runtime == worker.runtime && w.session() == worker.session())
            .count();
        if kept >= limit {
            return Some(worker);
        }
        workers.push((since, worker));
        self.total += 1;
        if self.total > max_total {
            self.evict_oldest();
        }
        None
    }

    /// The workers of `key` that wait for a session's first call on `runtime`: idle ones that
    /// have served nobody, and those being started ahead.
    pub(crate) fn ahead(&self, key: &IsolationKey, runtime: Option<runtime::Id>) -> usize {
        let idle = self.by_key.get(key).map_or(0, |workers| {
            workers
                .iter()
                .filter(|(_, w)| w.runtime == runtime && w.session().is_none())
                .count()
        });
        let starting = self
            .starting
            .iter()
            .find(|((k, r), _)| k == key && *r == runtime)
            .map_or(0, |(_, n)| *n);
        idle + starting
    }

    /// Counts `n` more workers of `key` being started ahead on `runtime`.
    pub(crate) fn starting(&mut self, key: &IsolationKey, runtime: Option<runtime::Id>, n: usize) {
        if n > 0 {
            *self.starting.entry((key.clone(), runtime)).or_default() += n;
        }
    }

    /// One worker of `key` started ahead on `runtime` is no longer starting.
    pub(crate) fn starting_done(&mut self, key: &IsolationKey, runtime: Option<runtime::Id>) {
        let at = (key.clone(), runtime);
        if let Some(n) = self.starting.get_mut(&at) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.starting.remove(&at);
            }
        }
    }
}
