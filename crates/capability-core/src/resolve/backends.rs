//! The fail-closed guard (a declared category needs its backend) and the scoped objects the
//! backends build from a resolution (docs/architecture.md, "The enforcement points").

use std::fmt;
use std::sync::Arc;

use capability_types::backend::{
    FetchFactory, FsFactory, FsGrant, HostPolicy, KvStoreFactory, NetworkGrant, PathPolicy,
    ProcessFactory, ProcessGrant, ProcessPolicy, SecretsFactory, SecretsGrant,
};
use capability_types::{
    CapabilityError, KeyValueStore, ScopedFetch, ScopedFs, ScopedProcess, ScopedSecretsResolver,
    ToolCapabilities, ToolContext,
};

use super::ResolvedCapabilities;

/// A backend a declaration can need.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Backend {
    /// `network` → [`FetchFactory`].
    Fetch,
    /// `fs_reach` → [`FsFactory`].
    Fs,
    /// `secrets` → [`SecretsFactory`].
    Secrets,
    /// `process` → [`ProcessFactory`].
    Process,
    /// `storage` → [`KvStoreFactory`].
    Kv,
}

impl Backend {
    /// The declaration category that needs this backend.
    pub fn capability(self) -> &'static str {
        match self {
            Backend::Fetch => "network",
            Backend::Fs => "fs_reach",
            Backend::Secrets => "secrets",
            Backend::Process => "process",
            Backend::Kv => "storage",
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::Fetch => "fetch",
            Backend::Fs => "fs",
            Backend::Secrets => "secrets",
            Backend::Process => "process",
            Backend::Kv => "kv",
        })
    }
}

/// The backends that build scoped objects. Starts empty; each `with_*` adds one.
#[derive(Clone, Default)]
pub struct CapabilityBackends {
    /// Unique per set of factories (clones share it; every `with_*` makes a new one): scoped
    /// objects cached for one set are never handed out for another.
    pub(crate) generation: u64,
    fetch: Option<Arc<dyn FetchFactory>>,
    fs: Option<Arc<dyn FsFactory>>,
    secrets: Option<Arc<dyn SecretsFactory>>,
    process: Option<Arc<dyn ProcessFactory>>,
    kv: Option<Arc<dyn KvStoreFactory>>,
}

impl CapabilityBackends {
    /// No backends.
    pub fn new() -> Self {
        Self::default()
    }

    /// This set after a change: a new generation.
    fn changed(mut self) -> Self {
        self.generation = crate::policy::next_generation();
        self
    }
    /// Adds the fetch backend.
    pub fn with_fetch(mut self, factory: Arc<dyn FetchFactory>) -> Self {
        self.fetch = Some(factory);
        self.changed()
    }
    /// Adds the file system backend.
    pub fn with_fs(mut self, factory: Arc<dyn FsFactory>) -> Self {
        self.fs = Some(factory);
        self.changed()
    }
    /// Adds the secrets backend.
    pub fn with_secrets(mut self, factory: Arc<dyn SecretsFactory>) -> Self {
        self.secrets = Some(factory);
        self.changed()
    }
    /// Adds the process backend.
    pub fn with_process(mut self, factory: Arc<dyn ProcessFactory>) -> Self {
        self.process = Some(factory);
        self.changed()
    }
    /// Adds the key-value backend.
    pub fn with_kv(mut self, factory: Arc<dyn KvStoreFactory>) -> Self {
        self.kv = Some(factory);
        self.changed()
    }
    /// Whether `backend` is configured.
    pub fn has(&self, backend: Backend) -> bool {
        match backend {
            Backend::Fetch => self.fetch.is_some(),
            Backend::Fs => self.fs.is_some(),
            Backend::Secrets => self.secrets.is_some(),
            Backend::Process => self.process.is_some(),
            Backend::Kv => self.kv.is_some(),
        }
    }
}

impl fmt::Debug for CapabilityBackends {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CapabilityBackends")
            .field("fetch", &self.fetch)
            .field("fs", &self.fs)
            .field("secrets", &self.secrets)
            .field("process", &self.process)
            .field("kv", &self.kv)
            .finish()
    }
}

/// The backends a declaration needs. A declared category counts even when its list is empty.
pub fn needs_backends(caps: &ToolCapabilities) -> Vec<Backend> {
    needed(caps).collect()
}

/// The backends `caps` needs, in a fixed order, without collecting them.
fn needed(caps: &ToolCapabilities) -> impl Iterator<Item = Backend> + '_ {
    [
        (caps.network.is_some(), Backend::Fetch),
        (caps.fs_reach.is_some(), Backend::Fs),
        (caps.secrets.is_some(), Backend::Secrets),
        (caps.process.is_some(), Backend::Process),
        (caps.storage.is_some(), Backend::Kv),
    ]
    .into_iter()
    .filter_map(|(declared, backend)| declared.then_some(backend))
}

/// The fail-closed guard: `not_available` when the tool declares a category whose backend is
/// not configured. The tool's `execute` must not run after an error.
pub fn check_backends(
    tool: &str,
    caps: &ToolCapabilities,
    backends: Option<&CapabilityBackends>,
) -> Result<(), CapabilityError> {
    // The common case, every declared backend present, allocates nothing.
    if needed(caps).next().is_none() {
        return Ok(());
    }
    let Some(backends) = backends else {
        return Err(CapabilityError::not_available(format!(
            "Tool {tool} declares capabilities but no capability backends are configured"
        )));
    };
    if needed(caps).all(|b| backends.has(b)) {
        return Ok(());
    }
    let missing: Vec<String> = needed(caps)
        .filter(|b| !backends.has(*b))
        .map(|b| format!("{} (for {})", b, b.capability()))
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(CapabilityError::not_available(format!(
            "Tool {tool} declares capabilities whose backends are not configured: {}",
            missing.join(", ")
        )))
    }
}

/// The scoped objects of one call, built by the backends from a [`ResolvedCapabilities`].
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct ScopedObjects {
    /// Present when `network` was declared.
    pub fetch: Option<Arc<dyn ScopedFetch>>,
    /// Present when `fs_reach` was declared.
    pub fs: Option<Arc<dyn ScopedFs>>,
    /// Present when `secrets` was declared.
    pub secrets: Option<Arc<dyn ScopedSecretsResolver>>,
    /// Present when `process` was declared.
    pub process: Option<Arc<dyn ScopedProcess>>,
    /// Present when `storage` was declared.
    pub kv: Option<Arc<dyn KeyValueStore>>,
}

impl ScopedObjects {
    /// Places the objects in `ctx`'s scoped fields (replacing whatever was there).
    pub fn install(self, ctx: &mut ToolContext) {
        ctx.scoped_fetch = self.fetch;
        ctx.scoped_fs = self.fs;
        ctx.secrets_resolver = self.secrets;
        ctx.scoped_process = self.process;
        ctx.kv_store = self.kv;
    }
}

impl fmt::Debug for ScopedObjects {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScopedObjects")
            .field("fetch", &self.fetch.is_some())
            .field("fs", &self.fs.is_some())
            .field("secrets", &self.secrets.is_some())
            .field("process", &self.process.is_some())
            .field("kv", &self.kv.is_some())
            .finish()
    }
}

/// Builds scoped objects from an existing resolution. Run the guard ([`check_backends`]) first
/// for its message naming every missing backend; without it, the first declared category whose
/// backend is missing (all of them when `backends` is `None`) still refuses.
///
/// A factory that panics fails the build as one that returns an error does
/// (`execution_failed`, naming the panic): a backend is the host's code, as a tool is, and its
/// panic goes no further than the call it was making objects for.
pub fn build_scoped(
    resolved: &ResolvedCapabilities,
    backends: Option<&CapabilityBackends>,
) -> Result<ScopedObjects, CapabilityError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| made(resolved, backends)))
        .unwrap_or_else(|payload| {
            Err(CapabilityError::failed(format!(
                "a capability backend panicked while making the scoped objects of tool {}: {}",
                resolved.tool,
                crate::panic_message(payload)
            )))
        })
}

/// [`build_scoped`]'s work, each factory asked in turn.
fn made(
    resolved: &ResolvedCapabilities,
    backends: Option<&CapabilityBackends>,
) -> Result<ScopedObjects, CapabilityError> {
    let none = CapabilityBackends::new();
    let backends = backends.unwrap_or(&none);
    let tool = resolved.tool.as_str();
    let missing = |b: Backend| {
        CapabilityError::not_available(format!(
            "Tool {tool} declares {} but no {b} backend is configured",
            b.capability()
        ))
    };
    let mut out = ScopedObjects::default();
    if let Some(hosts) = &resolved.network {
        let factory = backends
            .fetch
            .as_ref()
            .ok_or_else(|| missing(Backend::Fetch))?;
        let hosts: Arc<dyn HostPolicy> = Arc::clone(hosts) as Arc<dyn HostPolicy>;
        out.fetch = Some(factory.scoped_fetch(NetworkGrant::new(tool, hosts))?);
    }
    if let Some(paths) = &resolved.fs {
        let factory = backends.fs.as_ref().ok_or_else(|| missing(Backend::Fs))?;
        out.fs =
            Some(factory.scoped_fs(FsGrant::new(tool, Arc::clone(paths) as Arc<dyn PathPolicy>))?);
    }
    if let Some(refs) = &resolved.secrets {
        let factory = backends
            .secrets
            .as_ref()
            .ok_or_else(|| missing(Backend::Secrets))?;
        out.secrets = Some(factory.secrets_resolver(SecretsGrant::new(tool, refs.clone()))?);
    }
    if let Some(process) = &resolved.process {
        let factory = backends
            .process
            .as_ref()
            .ok_or_else(|| missing(Backend::Process))?;
        let paths = Arc::clone(&process.paths) as Arc<dyn PathPolicy>;
        let mut grant =
            ProcessGrant::new(tool, Arc::clone(process) as Arc<dyn ProcessPolicy>, paths);
        // A tool that declares both may let its children reach its hosts (through the egress
        // proxy, when the process backend has one); otherwise children have no network.
        if let Some(hosts) = &resolved.network {
            let hosts: Arc<dyn HostPolicy> = Arc::clone(hosts) as Arc<dyn HostPolicy>;
            grant = grant.with_network(NetworkGrant::new(tool, hosts));
        }
        out.process = Some(factory.scoped_process(grant)?);
    }
    if let Some(storage) = &resolved.storage {
        let factory = backends.kv.as_ref().ok_or_else(|| missing(Backend::Kv))?;
        out.kv = Some(factory.kv_store(storage.clone())?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use capability_types::SecretRef;

    #[test]
    fn the_guard_names_every_missing_backend_and_counts_empty_lists_as_declared() {
        let caps = ToolCapabilities::none()
            .with_network(Vec::<String>::new())
            .with_process(["echo"]);
        assert_eq!(needs_backends(&caps), [Backend::Fetch, Backend::Process]);
        let none = check_backends("t", &caps, None).unwrap_err();
        assert_eq!(
            none.result_code(),
            capability_types::ErrorCode::NotAvailable
        );
        assert_eq!(
            none.to_string(),
            "Tool t declares capabilities but no capability backends are configured"
        );
        let some = check_backends("t", &caps, Some(&CapabilityBackends::new())).unwrap_err();
        assert!(some.to_string().contains("fetch (for network)"), "{some}");
        assert!(some.to_string().contains("process (for process)"), "{some}");
        assert!(check_backends("t", &ToolCapabilities::none(), None).is_ok());
    }

    #[test]
    fn without_backends_nothing_is_built_for_a_declared_category() {
        let policy = crate::policy::CompiledPolicy::none(None);
        let caps = ToolCapabilities::none().with_secrets([SecretRef::parse("A").unwrap()]);
        let resolved = super::super::resolve("t", &caps, &policy, "s", std::path::Path::new("/"));
        assert!(build_scoped(&resolved, None).is_err());
        let empty = super::super::resolve(
            "t",
            &ToolCapabilities::none(),
            &policy,
            "s",
            std::path::Path::new("/"),
        );
        let scoped = build_scoped(&empty, None).unwrap();
        assert!(scoped.fetch.is_none() && scoped.fs.is_none() && scoped.kv.is_none());
    }
}
