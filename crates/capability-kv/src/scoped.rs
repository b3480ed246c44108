//! `ScopedKv`: the semantics every store shares, applied once.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use capability_types::backend::StorageGrant;
use capability_types::{CapabilityError, KeyValueStore};
use serde_json::Value;

use crate::{KvLimits, RawStore};

/// A tool's key-value state: its grant's namespace, nothing else.
pub struct ScopedKv {
    grant: StorageGrant,
    store: Arc<dyn RawStore>,
    limits: KvLimits,
}

impl fmt::Debug for ScopedKv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScopedKv")
            .field("tool", &self.grant.tool)
            .field("namespace", &self.grant.namespace)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl ScopedKv {
    /// A view of `store` confined to `grant`'s namespace.
    pub fn new(grant: StorageGrant, store: Arc<dyn RawStore>, limits: KvLimits) -> Self {
        Self {
            grant,
            store,
            limits,
        }
    }

    fn check_key(&self, key: &str) -> Result<(), CapabilityError> {
        if key.is_empty() {
            return Err(CapabilityError::invalid_input("key: must not be empty"));
        }
        if key.len() > self.limits.max_key {
            return Err(CapabilityError::invalid_input(format!(
                "key: {} bytes exceed the limit of {} bytes",
                key.len(),
                self.limits.max_key
            )));
        }
        Ok(())
    }
}

#[async_trait]
impl KeyValueStore for ScopedKv {
    async fn get(&self, key: &str) -> Result<Option<Value>, CapabilityError> {
        self.check_key(key)?;
        let stored = self
            .store
            .get_limited(&self.grant.namespace, key, self.limits.max_value)
            .await?;
        match stored {
            None => Ok(None),
            Some(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|_| {
                CapabilityError::failed(format!("the stored value of {key:?} is not valid JSON"))
            }),
        }
    }

    async fn set(
        &self,
        key: &str,
        value: Value,
        ttl: Option<Duration>,
    ) -> Result<(), CapabilityError> {
        self.check_key(key)?;
        if ttl.is_some_and(|t| t.is_zero()) {
            return Err(CapabilityError::invalid_input(
                "ttl: must be greater than zero",
            ));
        }
        let depth = capability_types::value_depth(&value);
        if depth > capability_types::MAX_VALUE_DEPTH {
            return Err(CapabilityError::invalid_input(format!(
                "value: nested {depth} levels deep; at most {} are accepted",
                capability_types::MAX_VALUE_DEPTH
            )));
        }
        let bytes = serde_json::to_vec(&value)
            .map_err(|e| CapabilityError::invalid_input(format!("value: {e}")))?;
        if bytes.len() > self.limits.max_value {
            return Err(CapabilityError::invalid_input(format!(
                "value: {} bytes exceed the limit of {} bytes",
                bytes.len(),
                self.limits.max_value
            )));
        }
        let ttl = ttl.or(self.grant.ttl_default);
        self.store.set(&self.grant.namespace, key, bytes, ttl).await
    }

    async fn delete(&self, key: &str) -> Result<bool, CapabilityError> {
        self.check_key(key)?;
        self.store.delete(&self.grant.namespace, key).await
    }

    async fn list(&self, prefix: &str) -> Result<Vec<String>, CapabilityError> {
        if prefix.len() > self.limits.max_key {
            return Err(CapabilityError::invalid_input(format!(
                "prefix: {} bytes exceed the limit of {} bytes",
                prefix.len(),
                self.limits.max_key
            )));
        }
        let mut keys = self
            .store
            .list_limited(&self.grant.namespace, prefix, self.limits.max_list)
            .await?;
        keys.sort();
        keys.dedup();
        Ok(keys)
    }
}
