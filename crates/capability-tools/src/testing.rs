//! A test kit for plugin authors and framework maintainers (docs/testing.md): scoped objects
//! and a registry from a reach description, in a few lines, with the real backends and the
//! real policy path, and no network.
//!
//! ```
//! use capability_tools::testing::TestReach;
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let dir = tempfile::tempdir().unwrap();
//! std::fs::write(dir.path().join("a.md"), "hello").unwrap();
//! let reach = TestReach::new().read(dir.path());
//! let fs = reach.fs().unwrap();
//! assert_eq!(fs.read(&dir.path().join("a.md")).await.unwrap(), "hello");
//! let refused = fs.read(std::path::Path::new("/etc/hostname")).await.unwrap_err();
//! assert!(!refused.is_not_found(), "outside the reach: refused, not 'missing'");
//! # }
//! ```
//!
//! What a [`TestReach`] builds is what toolcap builds for a personality with exactly that reach:
//! the description becomes a personality (strictly parsed, the deny floor included), a
//! declaration is intersected with it by `capability-core`, and the scoped objects come from
//! the real backends (files confined by `openat2`, hyper for HTTP, the sandboxed process
//! backend, in-memory secrets and key-value store). Host names resolve only through the table
//! given with [`TestReach::resolve`]; nothing reaches the system's DNS.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use capability_core::{
    CapabilityBackends, CompiledPolicy, DefaultToolRegistry, ExecutionContext, MemoryAuditSink,
    PolicyFormat, ScopedObjects, ToolCall, build_scoped, resolve,
};
use capability_fetch::{FetchBackend, FetchConfig, StaticResolver};
use capability_fs::{FsBackend, FsConfig};
use capability_kv::{KvBackend, KvLimits, MemoryStore};
use capability_process::{ProcessBackend, ProcessConfig};
use capability_secrets::{MemorySecrets, SecretsResolverFactory};
use capability_types::{
    CapabilityError, FsPaths, KeyValueStore, ScopedFetch, ScopedFs, ScopedProcess,
    ScopedSecretsResolver, SecretRef, StorageScope, Tool, ToolCapabilities, ToolContext,
    ToolResult,
};
use serde_json::{Value, json};

/// The personality id a [`TestReach`] stands for (it also names the storage namespace).
pub const TEST_PERSONALITY: &str = "test";

/// A reach description: what a test's personality allows. Build it with the methods, then ask
/// for scoped objects ([`fs`](Self::fs), [`fetch`](Self::fetch), …), a tool's context
/// ([`context_for`](Self::context_for)) or a whole registry ([`registry`](Self::registry)).
#[derive(Debug, Clone, Default)]
pub struct TestReach {
    read: Vec<PathBuf>,
    write: Vec<PathBuf>,
    deny: Vec<PathBuf>,
    hosts: Vec<String>,
    resolver: StaticResolver,
    binaries: Vec<String>,
    secrets: Vec<(String, String)>,
    working_dir: Option<PathBuf>,
    home: Option<PathBuf>,
}

impl TestReach {
    /// A reach that allows nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Files under `path` (a directory or one file) may be read.
    pub fn read(mut self, path: impl AsRef<Path>) -> Self {
        self.read.push(path.as_ref().to_path_buf());
        self
    }

    /// Files under `path` may be written (and read).
    pub fn write(mut self, path: impl AsRef<Path>) -> Self {
        let path = path.as_ref().to_path_buf();
        self.read.push(path.clone());
        self.write.push(path);
        self
    }

    /// `path` is refused even inside the reach.
    pub fn deny(mut self, path: impl AsRef<Path>) -> Self {
        self.deny.push(path.as_ref().to_path_buf());
        self
    }

    /// Hosts matching `pattern` (`api.example.test`, `*.example.test`) may be fetched.
    pub fn host(mut self, pattern: impl Into<String>) -> Self {
        self.hosts.push(pattern.into());
        self
    }

    /// `name` resolves to `address` (usually a loopback test server). The address rules still
    /// apply: a name allowed only through a wildcard may not reach loopback or private
    /// addresses; name the host explicitly ([`host`](Self::host)) to reach a loopback server.
    pub fn resolve(mut self, name: &str, address: IpAddr) -> Self {
        self.resolver = self.resolver.with(name, [address]);
        self
    }

    /// `binary` (a name found on the trusted `PATH`, or an absolute path) may be run.
    pub fn binary(mut self, binary: impl Into<String>) -> Self {
        self.binaries.push(binary.into());
        self
    }

    /// The secret `name` has `value` (held in memory).
    pub fn secret(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.secrets.push((name.into(), value.into()));
        self
    }

    /// Relative paths resolve against `dir` (default: the first read path, else `/`).
    pub fn working_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.working_dir = Some(dir.as_ref().to_path_buf());
        self
    }

    /// The home directory `~` and the deny floor's home entries refer to (default: none).
    pub fn home(mut self, dir: impl AsRef<Path>) -> Self {
        self.home = Some(dir.as_ref().to_path_buf());
        self
    }

    /// The personality this reach stands for, as JSON (what a reviewer would read).
    pub fn personality(&self) -> Value {
        json!({
            "id": TEST_PERSONALITY,
            "fs_reach": {"read": self.read, "write": self.write, "deny": self.deny},
            "safety": {
                "network": {"allow": self.hosts},
                "process": {"allow": self.binaries},
            },
        })
    }

    /// The compiled personality. Fails when the description is not a valid policy (a relative
    /// path, a bad host pattern, a root inside the deny floor), with the policy's message.
    pub fn policy(&self) -> Result<Arc<CompiledPolicy>, CapabilityError> {
        CompiledPolicy::load(
            &self.personality().to_string(),
            PolicyFormat::Json,
            self.home.as_deref(),
        )
        .map(Arc::new)
        .map_err(|e| CapabilityError::invalid_input(format!("test reach: {e}")))
    }

    /// The backends the scoped objects come from: the real file, HTTP (with this reach's
    /// resolver table) and process backends, in-memory secrets and key-value store.
    pub fn backends(&self) -> Result<CapabilityBackends, CapabilityError> {
        let secrets = self
            .secrets
            .iter()
            .fold(MemorySecrets::new(), |m, (name, value)| m.with(name, value));
        let fetch = FetchConfig::default().resolver(self.resolver.clone());
        Ok(CapabilityBackends::new()
            .with_fs(Arc::new(FsBackend::new(FsConfig::default())))
            .with_fetch(Arc::new(FetchBackend::new(fetch)?))
            .with_process(Arc::new(ProcessBackend::new(ProcessConfig::with_host_env(
                Default::default(),
            ))))
            .with_secrets(Arc::new(SecretsResolverFactory::new(vec![Arc::new(
                secrets,
            )])))
            .with_kv(Arc::new(KvBackend::new(
                MemoryStore::new(),
                KvLimits::default(),
            ))))
    }

    /// What a tool declaring `caps` is handed under this reach: the declaration intersected
    /// with the reach, built by the real backends.
    pub fn scoped_for(
        &self,
        tool: &str,
        caps: &ToolCapabilities,
    ) -> Result<ScopedObjects, CapabilityError> {
        let policy = self.policy()?;
        let resolved = resolve(tool, caps, &policy, "test-session", &self.workdir());
        build_scoped(&resolved, Some(&self.backends()?))
    }

    /// A [`ToolContext`] for `tool` with the scoped objects its declaration gets here, for
    /// calling `tool.execute(args, &ctx)` directly.
    pub fn context_for(&self, tool: &dyn Tool) -> Result<ToolContext, CapabilityError> {
        let scoped = self.scoped_for(tool.name(), &tool.capabilities())?;
        let mut ctx =
            ToolContext::new("test-session", self.workdir()).with_call("test-1", tool.name());
        ctx.personality_id = Some(Arc::from(TEST_PERSONALITY));
        scoped.install(&mut ctx);
        Ok(ctx)
    }

    /// A [`ScopedFs`] over the whole reach (read and write as described).
    pub fn fs(&self) -> Result<Arc<dyn ScopedFs>, CapabilityError> {
        let caps = ToolCapabilities::none()
            .with_fs_read(FsPaths::FromPersonality)
            .with_fs_write(FsPaths::FromPersonality);
        self.one("fs", &caps, |s| s.fs)
    }

    /// A [`ScopedFetch`] over the reach's hosts.
    pub fn fetch(&self) -> Result<Arc<dyn ScopedFetch>, CapabilityError> {
        self.one(
            "fetch",
            &ToolCapabilities::none().with_network(["*"]),
            |s| s.fetch,
        )
    }

    /// A [`ScopedProcess`] over the reach's binaries (and its files, for the children).
    pub fn process(&self) -> Result<Arc<dyn ScopedProcess>, CapabilityError> {
        let caps = ToolCapabilities::none()
            .with_process(self.binaries.clone())
            .with_fs_read(FsPaths::FromPersonality)
            .with_fs_write(FsPaths::FromPersonality);
        self.one("process", &caps, |s| s.process)
    }

    /// A [`ScopedSecretsResolver`] over the reach's secrets.
    pub fn secrets(&self) -> Result<Arc<dyn ScopedSecretsResolver>, CapabilityError> {
        let refs = self
            .secrets
            .iter()
            .map(|(name, _)| SecretRef::parse(name))
            .collect::<Result<Vec<_>, _>>()
            .map_err(CapabilityError::invalid_input)?;
        self.one(
            "secrets",
            &ToolCapabilities::none().with_secrets(refs),
            |s| s.secrets,
        )
    }

    /// A [`KeyValueStore`], in memory, private to the tool.
    pub fn kv(&self) -> Result<Arc<dyn KeyValueStore>, CapabilityError> {
        let caps = ToolCapabilities::none().with_storage(StorageScope::ToolPrivate, None);
        self.one("kv", &caps, |s| s.kv)
    }

    /// A registry with `tools` and this reach's backends, and a context to call them in, with
    /// an in-memory audit log: `reach.registry([Arc::new(MyTool) as _])?.call("my_tool", args)`.
    /// Registration is validated as in production (a malformed declaration is an error here).
    pub fn registry(
        &self,
        tools: impl IntoIterator<Item = Arc<dyn Tool>>,
    ) -> Result<TestRegistry, CapabilityError> {
        let audit = Arc::new(MemoryAuditSink::new());
        let mut registry =
            DefaultToolRegistry::new(Some(self.backends()?)).with_audit_sink(audit.clone());
        for tool in tools {
            registry
                .register_arc(tool)
                .map_err(|e| CapabilityError::invalid_input(e.to_string()))?;
        }
        let context = ExecutionContext::new("test-session", self.policy()?, self.workdir());
        Ok(TestRegistry {
            registry,
            context,
            audit,
        })
    }

    fn one<T>(
        &self,
        what: &str,
        caps: &ToolCapabilities,
        take: impl FnOnce(ScopedObjects) -> Option<T>,
    ) -> Result<T, CapabilityError> {
        take(self.scoped_for(&format!("test-{what}"), caps)?)
            .ok_or_else(|| CapabilityError::not_available(format!("no scoped {what} was built")))
    }

    fn workdir(&self) -> PathBuf {
        self.working_dir
            .clone()
            .or_else(|| self.read.first().cloned())
            .unwrap_or_else(|| PathBuf::from("/"))
    }
}

/// A registry built by [`TestReach::registry`], with the context its calls run in and the
/// audit events they left.
#[derive(Debug)]
#[non_exhaustive]
pub struct TestRegistry {
    /// The registry.
    pub registry: DefaultToolRegistry,
    /// The context calls run in (its personality is the reach).
    pub context: ExecutionContext,
    /// Every audit event of the calls.
    pub audit: Arc<MemoryAuditSink>,
}

impl TestRegistry {
    /// Calls `tool` with `args` through the registry: toolset, constraints, the argument gate,
    /// scoped objects and audit, as in production.
    pub async fn call(&self, tool: &str, args: Value) -> ToolResult {
        self.registry
            .execute(ToolCall::new("test-call", tool, args), &self.context)
            .await
            .result
    }
}
