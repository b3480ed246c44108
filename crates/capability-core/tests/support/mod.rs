//! Test tools and recording backend factories shared by the capability-core API tests.
//!
//! The factories stand in for the backend crates (which depend on capability-types only and
//! are tested against the real world in their own crates): they record every grant they are
//! given and build scoped objects that answer by asking the grant's policy object, so these
//! tests exercise exactly the matching the real backends call.
#![allow(dead_code, unreachable_pub)]

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use capability_core::PolicyFormat;
use capability_core::{CapabilityBackends, CompiledPolicy};
use capability_types::backend::{
    FetchFactory, FsAccess, FsFactory, FsGrant, KvStoreFactory, NetworkGrant, ProcessFactory,
    ProcessGrant, SecretsFactory, SecretsGrant, StorageGrant,
};
use capability_types::{
    CapabilityError, DirEntry, FsMetadata, KeyValueStore, ProcessOutput, ScopedFetch, ScopedFs,
    ScopedProcess, ScopedSecretsResolver, SecretRef, SecretString, SpawnOptions, Tool,
    ToolCapabilities, ToolContext, async_trait,
};
use serde_json::{Value, json};

/// A tool with a fixed declaration whose `execute` counts its runs and runs `behaviour`.
pub struct TestTool {
    pub name: &'static str,
    pub caps: ToolCapabilities,
    pub runs: Arc<AtomicUsize>,
    pub available: bool,
    pub behaviour: Behaviour,
}

#[derive(Clone, Copy)]
pub enum Behaviour {
    /// Returns the arguments.
    Echo,
    /// Panics.
    Panic,
    /// Sleeps this long, then returns.
    Sleep(Duration),
    /// Holds its thread this long without yielding (a tool that computes), then returns.
    Block(Duration),
    /// Reads `args.path` through its ScopedFs.
    ReadFile,
    /// Fetches `args.url` through its ScopedFetch.
    Fetch,
    /// Returns which scoped objects it received.
    ReportScoped,
    /// Returns what its context says of the call: id, name, session, directory, personality,
    /// whether the batch is cancelled, whether it has a file system view.
    ReportIdentity,
}

impl TestTool {
    pub fn new(name: &'static str, caps: ToolCapabilities, behaviour: Behaviour) -> Self {
        Self {
            name,
            caps,
            runs: Arc::default(),
            available: true,
            behaviour,
        }
    }
    pub fn unavailable(mut self) -> Self {
        self.available = false;
        self
    }
}

#[async_trait]
impl Tool for TestTool {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "test tool"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn capabilities(&self) -> ToolCapabilities {
        self.caps.clone()
    }
    fn is_available(&self) -> bool {
        self.available
    }
    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<Value, CapabilityError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        match self.behaviour {
            Behaviour::Echo => Ok(args),
            Behaviour::Panic => {
                quiet_deliberate_panics();
                panic!("boom from {}", self.name)
            }
            Behaviour::Sleep(d) => {
                tokio::time::sleep(d).await;
                Ok(json!("slept"))
            }
            Behaviour::Block(d) => {
                std::thread::sleep(d);
                Ok(json!("computed"))
            }
            Behaviour::ReadFile => {
                let path = args["path"]
                    .as_str()
                    .ok_or_else(|| CapabilityError::invalid_input("path"))?;
                ctx.fs()?.read(Path::new(path)).await.map(Value::String)
            }
            Behaviour::Fetch => {
                let url = args["url"]
                    .as_str()
                    .ok_or_else(|| CapabilityError::invalid_input("url"))?;
                let req = http::Request::get(url)
                    .body(Bytes::new())
                    .map_err(|e| CapabilityError::invalid_input(e.to_string()))?;
                let resp = ctx.fetch()?.fetch(req).await?;
                Ok(json!(resp.status().as_u16()))
            }
            Behaviour::ReportScoped => Ok(json!({
                "fetch": ctx.scoped_fetch.is_some(),
                "fs": ctx.scoped_fs.is_some(),
                "secrets": ctx.secrets_resolver.is_some(),
                "process": ctx.scoped_process.is_some(),
                "kv": ctx.kv_store.is_some(),
            })),
            Behaviour::ReportIdentity => Ok(json!({
                "call": ctx.call_id,
                "tool": ctx.tool,
                "session": &*ctx.session_id,
                "dir": ctx.working_dir.display().to_string(),
                "personality": ctx.personality_id.as_deref(),
                "cancelled": ctx.cancellation.is_cancelled(),
                "fs": ctx.scoped_fs.is_some(),
            })),
        }
    }
}

/// Every grant the recording factories were given.
#[derive(Debug, Default)]
pub struct Grants {
    pub network: Mutex<Vec<NetworkGrant>>,
    pub fs: Mutex<Vec<FsGrant>>,
    pub secrets: Mutex<Vec<SecretsGrant>>,
    pub process: Mutex<Vec<ProcessGrant>>,
    pub storage: Mutex<Vec<StorageGrant>>,
}

#[derive(Debug, Clone)]
pub struct Recording(pub Arc<Grants>);

/// Backends that record grants; their scoped objects answer through the grant's policy.
pub fn recording_backends() -> (CapabilityBackends, Arc<Grants>) {
    let grants = Arc::new(Grants::default());
    let r = Arc::new(Recording(Arc::clone(&grants)));
    let backends = CapabilityBackends::new()
        .with_fetch(r.clone())
        .with_fs(r.clone())
        .with_secrets(r.clone())
        .with_process(r.clone())
        .with_kv(r);
    (backends, grants)
}

impl FetchFactory for Recording {
    fn scoped_fetch(&self, grant: NetworkGrant) -> Result<Arc<dyn ScopedFetch>, CapabilityError> {
        self.0.network.lock().unwrap().push(grant.clone());
        Ok(Arc::new(PolicyFetch(grant)))
    }
}
impl FsFactory for Recording {
    fn scoped_fs(&self, grant: FsGrant) -> Result<Arc<dyn ScopedFs>, CapabilityError> {
        self.0.fs.lock().unwrap().push(grant.clone());
        Ok(Arc::new(PolicyFs(grant)))
    }
}
impl SecretsFactory for Recording {
    fn secrets_resolver(
        &self,
        grant: SecretsGrant,
    ) -> Result<Arc<dyn ScopedSecretsResolver>, CapabilityError> {
        self.0.secrets.lock().unwrap().push(grant.clone());
        Ok(Arc::new(PolicySecrets(grant.refs)))
    }
}
impl ProcessFactory for Recording {
    fn scoped_process(
        &self,
        grant: ProcessGrant,
    ) -> Result<Arc<dyn ScopedProcess>, CapabilityError> {
        self.0.process.lock().unwrap().push(grant.clone());
        Ok(Arc::new(PolicyProcess(grant)))
    }
}
impl KvStoreFactory for Recording {
    fn kv_store(&self, grant: StorageGrant) -> Result<Arc<dyn KeyValueStore>, CapabilityError> {
        self.0.storage.lock().unwrap().push(grant);
        Ok(Arc::new(NoKv))
    }
}

/// Checks the URL's host against the grant and answers 200 without any network.
struct PolicyFetch(NetworkGrant);
#[async_trait]
impl ScopedFetch for PolicyFetch {
    async fn fetch(
        &self,
        request: http::Request<Bytes>,
    ) -> Result<http::Response<Bytes>, CapabilityError> {
        let uri = request.uri();
        let host = uri
            .host()
            .ok_or_else(|| CapabilityError::invalid_input("no host"))?;
        let port = uri
            .port_u16()
            .unwrap_or(if uri.scheme_str() == Some("https") {
                443
            } else {
                80
            });
        self.0.hosts.check(host, port)?;
        Ok(http::Response::new(Bytes::new()))
    }
}

/// Checks the path against the grant and answers with the checked path.
struct PolicyFs(FsGrant);
#[async_trait]
impl ScopedFs for PolicyFs {
    async fn read(&self, path: &Path) -> Result<String, CapabilityError> {
        let access = self.0.paths.check(path, FsAccess::Read)?;
        Ok(format!("contents of {}", access.path.display()))
    }
    async fn read_bytes(&self, path: &Path) -> Result<Vec<u8>, CapabilityError> {
        self.read(path).await.map(String::into_bytes)
    }
    async fn write(&self, path: &Path, contents: &[u8]) -> Result<u64, CapabilityError> {
        self.0.paths.check(path, FsAccess::Write)?;
        Ok(contents.len() as u64)
    }
    async fn append(&self, path: &Path, contents: &[u8]) -> Result<u64, CapabilityError> {
        self.write(path, contents).await
    }
    async fn exists(&self, path: &Path) -> Result<bool, CapabilityError> {
        self.0.paths.check(path, FsAccess::Read).map(|_| true)
    }
    async fn list(&self, path: &Path) -> Result<Vec<DirEntry>, CapabilityError> {
        self.0.paths.check(path, FsAccess::Read).map(|_| Vec::new())
    }
    async fn mkdir(&self, path: &Path) -> Result<(), CapabilityError> {
        self.0.paths.check(path, FsAccess::Write).map(|_| ())
    }
    async fn metadata(&self, path: &Path) -> Result<FsMetadata, CapabilityError> {
        self.0.paths.check(path, FsAccess::Read)?;
        Err(CapabilityError::failed(
            "no metadata in the recording backend",
        ))
    }
    async fn remove(&self, path: &Path) -> Result<(), CapabilityError> {
        self.0.paths.check(path, FsAccess::Write).map(|_| ())
    }
}

struct PolicySecrets(Vec<SecretRef>);
#[async_trait]
impl ScopedSecretsResolver for PolicySecrets {
    async fn resolve(&self, name: &str) -> Result<SecretString, CapabilityError> {
        if self.0.iter().any(|r| r.matches(name)) {
            Ok(SecretString::from(format!("value-of-{name}")))
        } else {
            Err(CapabilityError::denied(
                capability_types::DenialCode::SecretNotDeclared,
                format!("{name} is not in the tool's declared secrets"),
            ))
        }
    }
    fn declared(&self) -> &[SecretRef] {
        &self.0
    }
}

struct PolicyProcess(ProcessGrant);
#[async_trait]
impl ScopedProcess for PolicyProcess {
    async fn spawn(
        &self,
        binary: &str,
        args: &[String],
        _: SpawnOptions,
    ) -> Result<ProcessOutput, CapabilityError> {
        if !self
            .0
            .process
            .allowed_binaries()
            .iter()
            .any(|b| b == binary)
        {
            return Err(CapabilityError::denied(
                capability_types::DenialCode::BinaryNotAllowed,
                format!("{binary} is not in the declared allowedBinaries"),
            ));
        }
        self.0
            .process
            .check_args(binary, binary, Path::new(binary), args)?;
        Ok(ProcessOutput::new(
            Some(0),
            None,
            Bytes::new(),
            Bytes::new(),
            false,
        ))
    }
}

struct NoKv;
#[async_trait]
impl KeyValueStore for NoKv {
    async fn get(&self, _: &str) -> Result<Option<Value>, CapabilityError> {
        Ok(None)
    }
    async fn set(&self, _: &str, _: Value, _: Option<Duration>) -> Result<(), CapabilityError> {
        Ok(())
    }
    async fn delete(&self, _: &str) -> Result<bool, CapabilityError> {
        Ok(false)
    }
    async fn list(&self, _: &str) -> Result<Vec<String>, CapabilityError> {
        Ok(Vec::new())
    }
}

/// A registry without backends holding an echoing tool that declares nothing under each name.
#[allow(
    dead_code,
    reason = "not every test binary that includes the support module uses it"
)]
pub fn echo_registry(names: &[&'static str]) -> capability_core::DefaultToolRegistry {
    let mut registry = capability_core::DefaultToolRegistry::new(None);
    for name in names {
        registry
            .register(TestTool::new(
                name,
                ToolCapabilities::none(),
                Behaviour::Echo,
            ))
            .unwrap();
    }
    registry
}

/// Compiles a TOML personality with `/home/ada` as home.
pub fn policy(toml: &str) -> Arc<CompiledPolicy> {
    Arc::new(CompiledPolicy::load(toml, PolicyFormat::Toml, Some(Path::new("/home/ada"))).unwrap())
}

/// Keeps the deliberate panics of `Behaviour::Panic` off stderr (a thousand backtraces would
/// bury real failures); every other panic, assertion failures included, is printed as usual.
pub fn quiet_deliberate_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let msg = info
                .payload()
                .downcast_ref::<String>()
                .map(String::as_str)
                .unwrap_or("");
            if !msg.starts_with("boom from ") {
                default(info);
            }
        }));
    });
}
