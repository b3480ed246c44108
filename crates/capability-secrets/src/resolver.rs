//! The scoped resolver: declared refs only, then the backends in order.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use capability_types::backend::{SecretsFactory, SecretsGrant};
use capability_types::{
    CapabilityError, DenialCode, ScopedSecretsResolver, SecretRef, SecretString,
};

use crate::backend::SecretsBackend;

/// Builds a [`ScopedSecrets`] per tool from a chain of backends; the first backend that has a
/// secret answers.
#[derive(Debug, Clone)]
pub struct SecretsResolverFactory {
    backends: Arc<[Arc<dyn SecretsBackend>]>,
}

impl SecretsResolverFactory {
    /// A factory over `backends`, asked in order.
    pub fn new(backends: Vec<Arc<dyn SecretsBackend>>) -> Self {
        Self {
            backends: backends.into(),
        }
    }
}

impl SecretsFactory for SecretsResolverFactory {
    fn secrets_resolver(
        &self,
        grant: SecretsGrant,
    ) -> Result<Arc<dyn ScopedSecretsResolver>, CapabilityError> {
        Ok(Arc::new(ScopedSecrets {
            tool: grant.tool,
            refs: grant.refs,
            backends: Arc::clone(&self.backends),
        }))
    }
}

/// A tool's view of its secrets: the refs it declared, nothing else.
pub struct ScopedSecrets {
    tool: String,
    refs: Vec<SecretRef>,
    backends: Arc<[Arc<dyn SecretsBackend>]>,
}

impl ScopedSecrets {
    /// A resolver for `tool` limited to `refs` (the factory builds these from grants).
    pub fn new(
        tool: impl Into<String>,
        refs: Vec<SecretRef>,
        backends: Vec<Arc<dyn SecretsBackend>>,
    ) -> Self {
        Self {
            tool: tool.into(),
            refs,
            backends: backends.into(),
        }
    }
}

impl fmt::Debug for ScopedSecrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScopedSecrets")
            .field("tool", &self.tool)
            .field("refs", &self.refs)
            .field("backends", &self.backends.len())
            .finish()
    }
}

#[async_trait]
impl ScopedSecretsResolver for ScopedSecrets {
    async fn resolve(&self, name: &str) -> Result<SecretString, CapabilityError> {
        // `SecretRef::matches` refuses malformed names (empty, `.`/`..` segments, wildcards),
        // so nothing reaches a backend that is not a declared, well-formed exact name.
        if !self.refs.iter().any(|r| r.matches(name)) {
            return Err(CapabilityError::denied(
                DenialCode::SecretNotDeclared,
                format!(
                    "{} is not in the tool's declared secrets",
                    name.escape_debug()
                ),
            ));
        }
        for backend in self.backends.iter() {
            match backend.lookup(name).await {
                Ok(Some(value)) => return Ok(value),
                Ok(None) => {}
                Err(e) => return Err(CapabilityError::failed(format!("secret {name}: {e}"))),
            }
        }
        Err(CapabilityError::not_found(format!(
            "secret {name} is not set in any configured secrets backend"
        )))
    }

    fn declared(&self) -> &[SecretRef] {
        &self.refs
    }
}
