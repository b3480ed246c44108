//! toolcap's standard tools, a registry wired with the real backends, and `explain`, the policy
//! simulator.
//!
//! | tool | arguments | value |
//! |---|---|---|
//! | `read_file` | `{path}` | file text |
//! | `write_file` | `{path, content}` | bytes written |
//! | `list_dir` | `{path}` | sorted names |
//! | `fetch_url` | `{url, method?, headers?, body?}` | `{status, headers, body}` |
//! | `run_command` | `{binary, args, cwd?, env?, timeout_ms?, stdin?}` | `{exit_code, signal, stdout, stderr, truncated}` |
//! | `kv_get` / `kv_set` / `kv_delete` / `kv_list` | `{key}` / `{key, value, ttl_seconds?}` / `{key}` / `{prefix}` | value / `null` / existed / keys |
//! | `read_attachment` | `{id?, offset?, max_bytes?}` | the call's attachments (no `id`), or `{id, offset, bytes_read, text \| base64}` |
//!
//! Each tool uses only its scoped objects (checked by `cargo xtask lint`). Unknown or malformed
//! arguments are `input_invalid`, naming the field. What each declares is in docs/reference.md
//! ("Standard tools"): `run_command` reads the personality's reach and starts what it allows, so
//! its children write only their own scratch home.
//!
//! ```no_run
//! # async fn run() -> Result<(), capability_types::CapabilityError> {
//! use capability_tools::{StandardConfig, Store, standard_registry};
//! let registry = standard_registry(StandardConfig::new(Store::Embedded("/var/lib/agent/kv.redb".into()))).await?;
//! # let _ = registry; Ok(()) }
//! ```
#![deny(missing_docs)]

mod args;
mod explain;
pub mod testing;
mod tools;

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use capability_core::{CapabilityBackends, DefaultToolRegistry, RegistryConfig};
use capability_fetch::{EgressProxy, FetchBackend, FetchConfig};
use capability_fs::{FsBackend, FsConfig};
use capability_kv::{EmbeddedStore, KvBackend, KvLimits, MemoryStore, RedisStore};
use capability_process::{ProcessBackend, ProcessConfig};
use capability_secrets::{EnvSecrets, SecretsBackend, SecretsResolverFactory};
use capability_types::{CapabilityError, Tool};

pub use crate::explain::{Check, Explanation, explain, explain_call};
pub use crate::tools::{
    FetchUrl, KvDelete, KvGet, KvList, KvSet, ListDir, ReadAttachment, ReadFile, RunCommand,
    WriteFile,
};

/// The names of the standard tools, in a stable order.
pub const STANDARD_TOOLS: [&str; 10] = [
    "read_file",
    "write_file",
    "list_dir",
    "fetch_url",
    "run_command",
    "kv_get",
    "kv_set",
    "kv_delete",
    "kv_list",
    "read_attachment",
];

/// The standard tools.
pub fn standard_tools() -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(ReadFile),
        Arc::new(WriteFile),
        Arc::new(ListDir),
        Arc::new(FetchUrl),
        Arc::new(RunCommand),
        Arc::new(KvGet),
        Arc::new(KvSet),
        Arc::new(KvDelete),
        Arc::new(KvList),
        Arc::new(ReadAttachment),
    ]
}

/// Where key-value state lives. Its `Debug` shows a Redis URL without its credentials.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Store {
    /// In this process only.
    Memory,
    /// A crash-safe file (created `0600` when missing).
    Embedded(PathBuf),
    /// A Redis server, `redis://host:port/db`.
    Redis(String),
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Store::Memory => f.write_str("Memory"),
            Store::Embedded(path) => f.debug_tuple("Embedded").field(path).finish(),
            Store::Redis(url) => f
                .debug_tuple("Redis")
                .field(&capability_kv::shown_redis_url(url))
                .finish(),
        }
    }
}

impl Store {
    /// `redis://…` and `rediss://…` are Redis; anything else is an embedded store's path.
    pub fn parse(text: &str) -> Self {
        if text.starts_with("redis://")
            || text.starts_with("rediss://")
            || text.starts_with("redis+unix://")
        {
            Store::Redis(text.to_owned())
        } else {
            Store::Embedded(PathBuf::from(text))
        }
    }
}

/// What the standard registry is built from.
#[non_exhaustive]
pub struct StandardConfig {
    /// The key-value store.
    pub store: Store,
    /// HTTP settings.
    pub fetch: FetchConfig,
    /// File settings.
    pub fs: FsConfig,
    /// Process settings.
    pub process: ProcessConfig,
    /// Secrets backends, asked in order.
    pub secrets: Vec<Arc<dyn SecretsBackend>>,
    /// Registry settings.
    pub registry: RegistryConfig,
}

impl fmt::Debug for StandardConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StandardConfig")
            .field("store", &self.store)
            .field("fetch", &self.fetch)
            .field("fs", &self.fs)
            .field("process", &self.process)
            .field("secrets", &self.secrets.len())
            .field("registry", &self.registry)
            .finish()
    }
}

impl StandardConfig {
    /// Defaults with `store`.
    ///
    /// # Ambient Authority
    ///
    /// Snapshots the process environment: for the variables a personality's `safety.env.allow`
    /// lets children inherit, and for secrets under the `TOOLCAP_SECRET_` prefix rule.
    pub fn new(store: Store) -> Self {
        Self {
            store,
            fetch: FetchConfig::default(),
            fs: FsConfig::default(),
            process: ProcessConfig::from_process_env(),
            secrets: vec![Arc::new(
                EnvSecrets::from_process_env().with_prefix_rule("TOOLCAP_SECRET_"),
            )],
            registry: RegistryConfig::default(),
        }
    }
}

/// The four backends and the key-value store, built from `config`. Fails with `not_available`
/// when the store cannot be opened or reached.
pub async fn backends(config: &StandardConfig) -> Result<CapabilityBackends, CapabilityError> {
    let kv = match &config.store {
        Store::Memory => KvBackend::new(MemoryStore::new(), KvLimits::default()),
        Store::Embedded(path) => KvBackend::new(EmbeddedStore::open(path)?, KvLimits::default()),
        Store::Redis(url) => {
            KvBackend::new(RedisStore::connect(url, None).await?, KvLimits::default())
        }
    };
    assemble(config, kv)
}

/// The backends of `config` around the key-value backend `kv`.
fn assemble(config: &StandardConfig, kv: KvBackend) -> Result<CapabilityBackends, CapabilityError> {
    // Children of tools that declare network reach their hosts through the egress proxy, with
    // the fetcher's timeouts (unless the configuration brings its own).
    let mut process = config.process.clone();
    if process.egress.is_none() {
        process = process.egress(Arc::new(EgressProxy::new(&config.fetch)));
    }
    Ok(CapabilityBackends::new()
        .with_fs(Arc::new(FsBackend::new(config.fs.clone())))
        .with_fetch(Arc::new(FetchBackend::new(config.fetch.clone())?))
        .with_process(Arc::new(ProcessBackend::new(process)))
        .with_secrets(Arc::new(SecretsResolverFactory::new(
            config.secrets.clone(),
        )))
        .with_kv(Arc::new(kv)))
}

/// The standard tools registered in `registry`.
fn register_standard(
    mut registry: DefaultToolRegistry,
) -> Result<DefaultToolRegistry, CapabilityError> {
    for tool in standard_tools() {
        registry
            .register_arc(tool)
            .map_err(|e| CapabilityError::failed(e.to_string()))?;
    }
    Ok(registry)
}

/// A registry of the standard tools for dry runs ([`explain`]): the real backends of `config`
/// with an in-memory key-value store in place of the configured one, so building it opens and
/// reaches nothing.
///
/// # Ambient Authority
///
/// None beyond what `config` already snapshotted; the backends it builds do no I/O until a
/// scoped object is used.
pub fn dry_run_registry(config: &StandardConfig) -> Result<DefaultToolRegistry, CapabilityError> {
    let kv = KvBackend::new(MemoryStore::new(), KvLimits::default());
    register_standard(
        DefaultToolRegistry::new(Some(assemble(config, kv)?)).with_config(config.registry.clone()),
    )
}

/// A registry with the standard tools registered and the real backends wired in.
pub async fn standard_registry(
    config: StandardConfig,
) -> Result<DefaultToolRegistry, CapabilityError> {
    register_standard(
        DefaultToolRegistry::new(Some(backends(&config).await?))
            .with_config(config.registry.clone()),
    )
}
