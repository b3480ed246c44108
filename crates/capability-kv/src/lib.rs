//! Key-value state for toolcap tools: a [`KeyValueStore`] confined to the namespace the resolver
//! derived from a tool's declared storage scope, over one of three stores.
//!
//! | store | feature | for |
//! |---|---|---|
//! | [`MemoryStore`] | `memory` | tests and single-process hosts; expired entries purged lazily and by a sweeper |
//! | [`EmbeddedStore`] | `embedded` | the default: one crash-safe file (redb), no server, shared by the processes of one user one at a time; an acknowledged `set` is committed durably |
//! | [`RedisStore`] | `redis` | agents on many machines sharing state; TTL by Redis expiry, listing by `SCAN MATCH` |
//!
//! All three behave the same, and one conformance suite runs against each: keys never leave
//! their namespace (the namespace is kept apart from the key — a table per namespace, a
//! length-prefixed binary key, a length-prefixed Redis key — never joined with a separator a
//! key could contain); `ttlSecondsDefault` applies when `set` gives no TTL; a TTL of zero is
//! refused; expired keys are invisible; `list(prefix)` is exact-case and sorted; keys are at most
//! 1 KiB and values 1 MiB of JSON by default, and an over-limit write changes nothing.
//!
//! ```
//! # #[cfg(feature = "memory")] {
//! use std::sync::Arc;
//! use capability_kv::{KvBackend, KvLimits, MemoryStore};
//!
//! let backend = KvBackend::new(MemoryStore::new(), KvLimits::default());
//! let backends = capability_types::backend::KvStoreFactory::kv_store(
//!     &backend,
//!     capability_types::backend::StorageGrant::new("kv_set", capability_types::StorageScope::Session, "session:s1", None),
//! );
//! assert!(backends.is_ok());
//! # }
//! ```
#![deny(missing_docs)]

#[cfg(feature = "embedded")]
mod embedded;
#[cfg(feature = "memory")]
mod memory;
#[cfg(feature = "redis")]
mod redis_store;
mod scoped;

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use capability_types::backend::{KvStoreFactory, StorageGrant};
use capability_types::{CapabilityError, KeyValueStore};

#[cfg(feature = "embedded")]
pub use crate::embedded::EmbeddedStore;
#[cfg(feature = "memory")]
pub use crate::memory::MemoryStore;
#[cfg(feature = "redis")]
pub use crate::redis_store::{RedisStore, shown_redis_url};
pub use crate::scoped::ScopedKv;

/// Size limits, checked before anything is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct KvLimits {
    /// Longest key (and list prefix) in bytes (default 1 KiB).
    pub max_key: usize,
    /// Longest value, as JSON, in bytes (default 1 MiB).
    pub max_value: usize,
    /// Most keys one listing returns (default 100,000, as a directory listing's
    /// `FsConfig::max_entries`): past it the listing fails, naming the limit, without reading
    /// the rest.
    pub max_list: usize,
}

impl Default for KvLimits {
    fn default() -> Self {
        Self {
            max_key: 1024,
            max_value: 1024 * 1024,
            max_list: 100_000,
        }
    }
}

impl KvLimits {
    /// Sets the key limit.
    pub fn max_key(mut self, bytes: usize) -> Self {
        self.max_key = bytes;
        self
    }
    /// Sets the value limit.
    pub fn max_value(mut self, bytes: usize) -> Self {
        self.max_value = bytes;
        self
    }
    /// Sets the listing limit.
    pub fn max_list(mut self, keys: usize) -> Self {
        self.max_list = keys;
        self
    }
}

/// The operations a store implements, on a namespace given apart from the key. Values are
/// bytes; `ttl` is relative. A store never returns an expired entry.
#[async_trait]
pub trait RawStore: Send + Sync + fmt::Debug {
    /// The value of `key` in `namespace`.
    async fn get(&self, namespace: &str, key: &str) -> Result<Option<Vec<u8>>, CapabilityError>;
    /// The value of `key` when it is at most `max` bytes; a longer one is refused
    /// (`execution_failed`, naming the limit) — the read side of [`KvLimits::max_value`], for
    /// values written around this crate (another client of the same Redis). A store that can
    /// should transfer no more than `max + 1` bytes to find out.
    async fn get_limited(
        &self,
        namespace: &str,
        key: &str,
        max: usize,
    ) -> Result<Option<Vec<u8>>, CapabilityError> {
        let value = self.get(namespace, key).await?;
        check_read_limit(key, value.as_ref().map(Vec::len), max)?;
        Ok(value)
    }
    /// Stores `value`, expiring after `ttl` when given.
    async fn set(
        &self,
        namespace: &str,
        key: &str,
        value: Vec<u8>,
        ttl: Option<Duration>,
    ) -> Result<(), CapabilityError>;
    /// Deletes `key`; whether a live entry existed.
    async fn delete(&self, namespace: &str, key: &str) -> Result<bool, CapabilityError>;
    /// Live keys of `namespace` starting with `prefix` (exact case), sorted.
    async fn list(&self, namespace: &str, prefix: &str) -> Result<Vec<String>, CapabilityError>;
    /// [`list`](Self::list) when at most `max` keys start with `prefix`; more are refused
    /// (`execution_failed`, naming the limit) — [`KvLimits::max_list`]. A store that can should
    /// stop reading once it has found `max + 1`.
    async fn list_limited(
        &self,
        namespace: &str,
        prefix: &str,
        max: usize,
    ) -> Result<Vec<String>, CapabilityError> {
        let mut keys = self.list(namespace, prefix).await?;
        keys.sort();
        keys.dedup();
        check_list_limit(prefix, keys.len(), max)?;
        Ok(keys)
    }
}

/// Refuses a listing of `found` keys under `prefix` past the limit `max`.
pub(crate) fn check_list_limit(
    prefix: &str,
    found: usize,
    max: usize,
) -> Result<(), CapabilityError> {
    if found > max {
        return Err(CapabilityError::failed(format!(
            "more than {max} keys start with {prefix:?}, the most a listing returns; list with \
             a longer prefix"
        )));
    }
    Ok(())
}

/// Refuses a stored value of `len` bytes over the read limit `max`.
pub(crate) fn check_read_limit(
    key: &str,
    len: Option<usize>,
    max: usize,
) -> Result<(), CapabilityError> {
    match len {
        Some(len) if len > max => Err(CapabilityError::failed(format!(
            "the stored value of {key:?} is larger than the read limit of {max} bytes"
        ))),
        _ => Ok(()),
    }
}

/// Builds a [`ScopedKv`] for each tool's storage grant over one store.
#[derive(Clone)]
pub struct KvBackend {
    store: Arc<dyn RawStore>,
    limits: KvLimits,
}

impl KvBackend {
    /// A backend over `store`.
    pub fn new<S: RawStore + 'static>(store: Arc<S>, limits: KvLimits) -> Self {
        Self { store, limits }
    }

    /// The store (for hosts that inspect it).
    pub fn store(&self) -> &Arc<dyn RawStore> {
        &self.store
    }
}

impl fmt::Debug for KvBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KvBackend")
            .field("store", &self.store)
            .field("limits", &self.limits)
            .finish()
    }
}

impl KvStoreFactory for KvBackend {
    fn kv_store(&self, grant: StorageGrant) -> Result<Arc<dyn KeyValueStore>, CapabilityError> {
        Ok(Arc::new(ScopedKv::new(
            grant,
            Arc::clone(&self.store),
            self.limits,
        )))
    }
}

/// Milliseconds since the Unix epoch (absolute expiry of the stores that keep it themselves).
#[cfg_attr(not(feature = "embedded"), allow(dead_code))]
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}
