//! The in-memory store: one ordered map per namespace, in a sharded concurrent map.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Bound;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use capability_types::CapabilityError;
use dashmap::DashMap;

use crate::RawStore;

#[derive(Clone)]
struct Entry {
    value: Vec<u8>,
    expires_at: Option<Instant>,
}

impl Entry {
    fn live(&self, now: Instant) -> bool {
        self.expires_at.is_none_or(|t| t > now)
    }
}

/// Key-value state in this process's memory.
#[derive(Default)]
pub struct MemoryStore {
    namespaces: DashMap<String, BTreeMap<String, Entry>>,
}

impl fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryStore")
            .field("namespaces", &self.namespaces.len())
            .finish_non_exhaustive()
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// An empty store with a sweeper that purges expired entries every `interval` on the current
    /// tokio runtime (at least a millisecond apart: an interval of zero sweeps every millisecond).
    /// The sweeper holds only a weak reference and stops with the store.
    pub fn with_sweeper(interval: Duration) -> Arc<Self> {
        // `tokio::time::interval` panics on zero, inside the task, which would leave the store
        // with no sweeper and no word of it.
        let interval = interval.max(Duration::from_millis(1));
        let store = Self::new();
        let weak: Weak<Self> = Arc::downgrade(&store);
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                let mut tick = tokio::time::interval(interval);
                tick.tick().await;
                loop {
                    tick.tick().await;
                    match weak.upgrade() {
                        Some(store) => {
                            store.purge_expired();
                        }
                        None => break,
                    }
                }
            });
        }
        store
    }

    /// Removes every expired entry (and namespaces left empty); returns how many were removed.
    pub fn purge_expired(&self) -> usize {
        let now = Instant::now();
        let mut removed = 0;
        self.namespaces.retain(|_, entries| {
            let before = entries.len();
            entries.retain(|_, e| e.live(now));
            removed += before - entries.len();
            !entries.is_empty()
        });
        removed
    }

    /// Entries held, expired ones included (for tests of the sweeper).
    pub fn len_including_expired(&self) -> usize {
        self.namespaces.iter().map(|n| n.len()).sum()
    }
}

#[async_trait]
impl RawStore for MemoryStore {
    async fn get(&self, namespace: &str, key: &str) -> Result<Option<Vec<u8>>, CapabilityError> {
        let now = Instant::now();
        let Some(mut entries) = self.namespaces.get_mut(namespace) else {
            return Ok(None);
        };
        match entries.get(key) {
            Some(e) if e.live(now) => Ok(Some(e.value.clone())),
            Some(_) => {
                entries.remove(key); // lazy purge
                Ok(None)
            }
            None => Ok(None),
        }
    }

    async fn set(
        &self,
        namespace: &str,
        key: &str,
        value: Vec<u8>,
        ttl: Option<Duration>,
    ) -> Result<(), CapabilityError> {
        // A TTL past what the clock can count never comes: the value stays.
        let expires_at = ttl.and_then(|t| Instant::now().checked_add(t));
        self.namespaces
            .entry(namespace.to_owned())
            .or_default()
            .insert(key.to_owned(), Entry { value, expires_at });
        Ok(())
    }

    async fn delete(&self, namespace: &str, key: &str) -> Result<bool, CapabilityError> {
        let now = Instant::now();
        let Some(mut entries) = self.namespaces.get_mut(namespace) else {
            return Ok(false);
        };
        Ok(entries.remove(key).is_some_and(|e| e.live(now)))
    }

    async fn list(&self, namespace: &str, prefix: &str) -> Result<Vec<String>, CapabilityError> {
        self.list_limited(namespace, prefix, usize::MAX).await
    }

    async fn list_limited(
        &self,
        namespace: &str,
        prefix: &str,
        max: usize,
    ) -> Result<Vec<String>, CapabilityError> {
        let now = Instant::now();
        let Some(entries) = self.namespaces.get(namespace) else {
            return Ok(Vec::new());
        };
        let keys: Vec<String> = entries
            .range::<str, _>((Bound::Included(prefix), Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix))
            .filter(|(_, e)| e.live(now))
            .map(|(k, _)| k.clone())
            .take(max.saturating_add(1))
            .collect();
        crate::check_list_limit(prefix, keys.len(), max)?;
        Ok(keys)
    }
}
