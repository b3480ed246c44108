//! Call-time resolution: the intersection of a declaration with the personality, the policy
//! objects handed to backends, the fail-closed backend guard, and building the scoped objects.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use capability_policy::{is_fixed_env_name, is_refused_env_name, is_safe_env_name, valid_env_name};
use capability_types::{
    CapabilityError, DenialCode, FetchFactory, FsAccess, FsFactory, FsGrant, FsPaths, HostMatch,
    HostPolicy, KeyValueStore, KvStoreFactory, NetworkGrant, PathAccess, PathPolicy,
    ProcessFactory, ProcessGrant, ProcessPolicy, SandboxMode, ScopedFetch, ScopedFs, ScopedProcess,
    ScopedSecretsResolver, SecretRef, SecretsFactory, SecretsGrant, StorageGrant, StorageScope,
    ToolCapabilities, ToolContext,
};

use crate::matching::binary::{ArgvPattern, intersect_binaries};
use crate::matching::host::{HostSet, intersect_hosts, normalize_host};
use crate::matching::path::{DenyFloor, intersect_paths, is_within, resolve_path};
use crate::policy::CompiledPolicy;
use crate::realpath::Aliases;

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
    /// Adds the fetch backend.
    pub fn with_fetch(mut self, factory: Arc<dyn FetchFactory>) -> Self {
        self.fetch = Some(factory);
        self
    }
    /// Adds the file system backend.
    pub fn with_fs(mut self, factory: Arc<dyn FsFactory>) -> Self {
        self.fs = Some(factory);
        self
    }
    /// Adds the secrets backend.
    pub fn with_secrets(mut self, factory: Arc<dyn SecretsFactory>) -> Self {
        self.secrets = Some(factory);
        self
    }
    /// Adds the process backend.
    pub fn with_process(mut self, factory: Arc<dyn ProcessFactory>) -> Self {
        self.process = Some(factory);
        self
    }
    /// Adds the key-value backend.
    pub fn with_kv(mut self, factory: Arc<dyn KvStoreFactory>) -> Self {
        self.kv = Some(factory);
        self
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
    let mut needs = Vec::new();
    if caps.network.is_some() {
        needs.push(Backend::Fetch);
    }
    if caps.fs_reach.is_some() {
        needs.push(Backend::Fs);
    }
    if caps.secrets.is_some() {
        needs.push(Backend::Secrets);
    }
    if caps.process.is_some() {
        needs.push(Backend::Process);
    }
    if caps.storage.is_some() {
        needs.push(Backend::Kv);
    }
    needs
}

/// The fail-closed guard: `not_available` when the tool declares a category whose backend is
/// not configured. The tool's `execute` must not run after an error.
pub fn check_backends(
    tool: &str,
    caps: &ToolCapabilities,
    backends: Option<&CapabilityBackends>,
) -> Result<(), CapabilityError> {
    let needs = needs_backends(caps);
    if needs.is_empty() {
        return Ok(());
    }
    let Some(backends) = backends else {
        return Err(CapabilityError::not_available(format!(
            "Tool {tool} declares capabilities but no capability backends are configured"
        )));
    };
    let missing: Vec<String> = needs
        .into_iter()
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

/// The intersection of one tool's declaration with the personality: data, before any backend
/// is involved. Categories the tool did not declare are `None`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ResolvedCapabilities {
    /// The tool's name.
    pub tool: String,
    /// The resolved host set.
    pub network: Option<Arc<ResolvedHosts>>,
    /// The resolved read and write reach.
    pub fs: Option<Arc<ResolvedPaths>>,
    /// The declared secret refs.
    pub secrets: Option<Vec<SecretRef>>,
    /// The resolved process rules.
    pub process: Option<Arc<ResolvedProcess>>,
    /// The storage namespace.
    pub storage: Option<StorageGrant>,
}

/// Resolves `caps` under `policy` for one session: the same intersection functions the
/// validator uses, so whatever is granted here the validator has reported as granted.
///
/// This recomputes the intersection; callers that resolve the same tool under the same
/// personality repeatedly use a [`ResolutionCache`], as the registry does.
pub fn resolve(
    tool: &str,
    caps: &ToolCapabilities,
    policy: &CompiledPolicy,
    session_id: &str,
    working_dir: &Path,
) -> ResolvedCapabilities {
    Intersected::new(tool, caps, policy).for_call(session_id, working_dir)
}

/// The part of a resolution that depends only on the declaration and the personality: host
/// sets, path roots and binaries, intersected once.
#[derive(Debug)]
pub struct Intersected {
    tool: String,
    network: Option<(Arc<HostSet>, Arc<HostSet>)>,
    /// The host policy with nothing approved, built once per intersection.
    hosts: Option<Arc<ResolvedHosts>>,
    escalate: Escalation,
    /// `Some` when `fs_reach` or `process` is declared (a child's cwd must be readable).
    paths: Option<PathRoots>,
    fs_declared: bool,
    secrets: Option<Vec<SecretRef>>,
    process: Option<ProcessRoots>,
    storage: Option<(StorageScope, String, Option<Duration>)>,
}

/// Binaries, argv deny patterns and the environment allow list of an intersection.
#[derive(Debug, Clone)]
struct ProcessRoots {
    binaries: Arc<[String]>,
    deny_args: Arc<[ArgvPattern]>,
    env_allow: Arc<[String]>,
    sandbox: SandboxMode,
}

#[derive(Debug, Clone)]
struct PathRoots {
    read: Arc<[PathBuf]>,
    write: Arc<[PathBuf]>,
    /// Per root of `read` / `write`: whether a deny rule or the floor overlaps it.
    read_guarded: Arc<[bool]>,
    write_guarded: Arc<[bool]>,
    deny: Arc<[PathBuf]>,
    floor: Arc<DenyFloor>,
    aliases: Arc<Aliases>,
    personality_read: Arc<[PathBuf]>,
    personality_write: Arc<[PathBuf]>,
}

impl Intersected {
    /// Intersects `caps` with `policy`.
    pub fn new(tool: &str, caps: &ToolCapabilities, policy: &CompiledPolicy) -> Self {
        let network = caps.network.as_ref().map(|n| {
            let allow = if n.allowed_hosts.len() == 1 && n.allowed_hosts[0] == "*" {
                Arc::clone(&policy.network_allow)
            } else {
                let granted = intersect_hosts(
                    &n.allowed_hosts,
                    &policy.network_allow,
                    &policy.network_deny,
                )
                .granted;
                Arc::new(HostSet::new(granted))
            };
            (allow, Arc::clone(&policy.network_deny))
        });
        let paths = (caps.fs_reach.is_some() || caps.process.is_some()).then(|| {
            let reach = caps.fs_reach.clone().unwrap_or_default();
            let side = |declared: &Option<FsPaths>,
                        personality: &Arc<[PathBuf]>,
                        field: &str|
             -> Arc<[PathBuf]> {
                match declared {
                    None => Arc::new([]),
                    Some(FsPaths::FromPersonality) => Arc::clone(personality),
                    Some(FsPaths::Paths(paths)) => {
                        // A declared path spelled through a root's link means the root's place.
                        let paths: Vec<PathBuf> = paths
                            .iter()
                            .map(|p| policy.aliases.rewrite(p.clone()))
                            .collect();
                        intersect_paths(&paths, personality, field).granted.into()
                    }
                }
            };
            let read = side(&reach.read, &policy.fs_read, "fs_reach.read");
            let write = side(&reach.write, &policy.fs_write, "fs_reach.write");
            let guarded = |roots: &[PathBuf]| -> Arc<[bool]> {
                roots
                    .iter()
                    .map(|r| {
                        policy.floor.overlaps(r)
                            || policy
                                .fs_deny
                                .iter()
                                .any(|d| is_within(d, r) || is_within(r, d))
                    })
                    .collect()
            };
            PathRoots {
                read_guarded: guarded(&read),
                write_guarded: guarded(&write),
                read,
                write,
                deny: Arc::clone(&policy.fs_deny),
                floor: Arc::clone(&policy.floor),
                aliases: Arc::clone(&policy.aliases),
                personality_read: Arc::clone(&policy.fs_read),
                personality_write: Arc::clone(&policy.fs_write),
            }
        });
        let process = caps.process.as_ref().map(|p| ProcessRoots {
            binaries: intersect_binaries(&p.allowed_binaries, &policy.process_allow)
                .granted
                .into(),
            deny_args: Arc::clone(&policy.deny_args),
            env_allow: Arc::clone(&policy.env_allow),
            sandbox: policy.sandbox,
        });
        let storage = caps.storage.as_ref().map(|s| {
            // `{}` stands for the session id, filled in per call.
            let namespace = match (s.scope, policy.id()) {
                (StorageScope::ToolPrivate, _) => format!("tool:{tool}"),
                (StorageScope::Session, _) | (StorageScope::Personality, None) => String::new(),
                (StorageScope::Personality, Some(id)) => format!("personality:{id}"),
            };
            (
                s.scope,
                namespace,
                s.ttl_seconds_default.map(|t| Duration::from_secs(t.get())),
            )
        });
        let escalate = Escalation {
            hosts: Arc::clone(&policy.escalate_hosts),
            write: Arc::clone(&policy.escalate_write),
            args: Arc::clone(&policy.escalate_args),
            approved: Arc::default(),
        };
        let hosts = network
            .as_ref()
            .map(|(allow, deny): &(Arc<HostSet>, Arc<HostSet>)| {
                Arc::new(ResolvedHosts {
                    allow: Arc::clone(allow),
                    deny: Arc::clone(deny),
                    escalate: escalate.clone(),
                })
            });
        Self {
            tool: tool.to_owned(),
            network,
            hosts,
            escalate,
            paths,
            fs_declared: caps.fs_reach.is_some(),
            secrets: caps.secrets.clone(),
            process,
            storage,
        }
    }

    /// Completes the resolution for one session and working directory.
    pub fn for_call(&self, session_id: &str, working_dir: &Path) -> ResolvedCapabilities {
        self.for_call_approved(session_id, working_dir, Arc::default())
    }

    /// [`for_call`](Self::for_call) for a call that escalation approved for `approvals`: exactly
    /// those hosts, write paths and argv pass the `[escalate]` patterns; nothing else does.
    pub fn for_call_approved(
        &self,
        session_id: &str,
        working_dir: &Path,
        approvals: Arc<Approvals>,
    ) -> ResolvedCapabilities {
        let escalate = Escalation {
            approved: approvals,
            ..self.escalate.clone()
        };
        let paths = self.paths.as_ref().map(|r| {
            Arc::new(ResolvedPaths {
                read: Arc::clone(&r.read),
                write: Arc::clone(&r.write),
                read_guarded: Arc::clone(&r.read_guarded),
                write_guarded: Arc::clone(&r.write_guarded),
                deny: Arc::clone(&r.deny),
                floor: Arc::clone(&r.floor),
                aliases: Arc::clone(&r.aliases),
                personality_read: Arc::clone(&r.personality_read),
                personality_write: Arc::clone(&r.personality_write),
                working_dir: working_dir.to_path_buf(),
                escalate: escalate.clone(),
            })
        });
        let process = self.process.as_ref().map(|p| {
            Arc::new(ResolvedProcess {
                binaries: Arc::clone(&p.binaries),
                deny_args: Arc::clone(&p.deny_args),
                env_allow: Arc::clone(&p.env_allow),
                sandbox: p.sandbox,
                paths: paths.clone().unwrap_or_default(),
                escalate: escalate.clone(),
            })
        });
        let storage = self.storage.as_ref().map(|(scope, namespace, ttl)| {
            let namespace = if namespace.is_empty() {
                format!("session:{session_id}")
            } else {
                namespace.clone()
            };
            StorageGrant::new(self.tool.clone(), *scope, namespace, *ttl)
        });
        ResolvedCapabilities {
            tool: self.tool.clone(),
            // Shared while nothing is approved: a backend may key per-policy state (the fetch
            // backend's connection pool) by this object, so it must not be rebuilt per batch.
            network: match (&self.network, *escalate.approved == Approvals::default()) {
                (None, _) => None,
                (Some(_), true) => self.hosts.clone(),
                (Some((allow, deny)), false) => Some(Arc::new(ResolvedHosts {
                    allow: Arc::clone(allow),
                    deny: Arc::clone(deny),
                    escalate: escalate.clone(),
                })),
            },
            fs: if self.fs_declared { paths } else { None },
            secrets: self.secrets.clone(),
            process,
            storage,
        }
    }
}

/// Remembers intersections per (tool, declaration, personality), so a call resolves with a
/// lookup and a few reference-count bumps. Entries are checked against the declaration they
/// were made from, so a stale entry is never used; the cache empties itself past 4,096 entries.
#[derive(Debug, Default)]
pub struct ResolutionCache {
    entries: Mutex<HashMap<CacheKey, CacheEntry>>,
}

/// (tool name, policy generation).
type CacheKey = (String, u64);
/// The declaration an intersection was made from, and the intersection.
type CacheEntry = (ToolCapabilities, Arc<Intersected>);

impl ResolutionCache {
    const MAX_ENTRIES: usize = 4_096;

    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// The intersection of `caps` with `policy` for `tool`, computed at most once.
    pub fn intersect(
        &self,
        tool: &str,
        caps: &ToolCapabilities,
        policy: &CompiledPolicy,
    ) -> Arc<Intersected> {
        let key = (tool.to_owned(), policy.generation);
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((cached_caps, hit)) = entries.get(&key)
            && cached_caps == caps
        {
            return Arc::clone(hit);
        }
        let fresh = Arc::new(Intersected::new(tool, caps, policy));
        if entries.len() >= Self::MAX_ENTRIES {
            entries.clear();
        }
        entries.insert(key, (caps.clone(), Arc::clone(&fresh)));
        fresh
    }

    /// [`resolve_capabilities`] through the cache.
    pub fn resolve_capabilities(
        &self,
        tool: &str,
        caps: &ToolCapabilities,
        policy: &CompiledPolicy,
        session_id: &str,
        working_dir: &Path,
        backends: Option<&CapabilityBackends>,
    ) -> Result<ScopedObjects, CapabilityError> {
        check_backends(tool, caps, backends)?;
        build_scoped(
            &self
                .intersect(tool, caps, policy)
                .for_call(session_id, working_dir),
            backends,
        )
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

/// The call-time enforcement point: runs the guard, resolves the intersection and builds the
/// scoped objects through the backends. A tool never receives an object for a category it did
/// not declare.
pub fn resolve_capabilities(
    tool: &str,
    caps: &ToolCapabilities,
    policy: &CompiledPolicy,
    session_id: &str,
    working_dir: &Path,
    backends: Option<&CapabilityBackends>,
) -> Result<ScopedObjects, CapabilityError> {
    check_backends(tool, caps, backends)?;
    build_scoped(
        &resolve(tool, caps, policy, session_id, working_dir),
        backends,
    )
}

/// Builds scoped objects from an existing resolution. Run the guard ([`check_backends`]) first
/// for its message naming every missing backend; without it, the first declared category whose
/// backend is missing (all of them when `backends` is `None`) still refuses.
pub fn build_scoped(
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

/// What one call was approved for after escalation: exact hosts, exact write paths, exact argv.
/// Anything else that an `[escalate]` pattern matches stays refused.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Approvals {
    /// Normalised host names.
    pub hosts: Vec<String>,
    /// Normalised absolute paths.
    pub write_paths: Vec<PathBuf>,
    /// Whole argv (binary first).
    pub argv: Vec<Vec<String>>,
}

/// The escalation patterns of a policy, carried into each resolved scope.
#[derive(Debug, Clone, Default)]
struct Escalation {
    hosts: Arc<HostSet>,
    write: Arc<[PathBuf]>,
    args: Arc<[ArgvPattern]>,
    approved: Arc<Approvals>,
}

fn needs_approval(what: String) -> String {
    format!("{what} requires approval (escalate) and this call was not approved for it")
}

/// A tool's resolved host set; deny patterns win.
#[derive(Debug)]
pub struct ResolvedHosts {
    allow: Arc<HostSet>,
    deny: Arc<HostSet>,
    escalate: Escalation,
}

impl ResolvedHosts {
    /// The allowed set.
    pub fn allow(&self) -> &HostSet {
        &self.allow
    }
}

impl HostPolicy for ResolvedHosts {
    fn check(&self, host: &str, port: u16) -> Result<HostMatch, CapabilityError> {
        let host = normalize_host(host)
            .map_err(|why| CapabilityError::denied(DenialCode::HostNotAllowed, why))?;
        if self.deny.lookup(&host, port).is_some() {
            return Err(CapabilityError::denied(
                DenialCode::HostNotAllowed,
                format!("{host} is refused by policy"),
            ));
        }
        if self.escalate.hosts.lookup(&host, port).is_some()
            && !self.escalate.approved.hosts.contains(&host)
        {
            return Err(CapabilityError::denied(
                DenialCode::HostNotAllowed,
                needs_approval(host),
            ));
        }
        match self.allow.lookup(&host, port) {
            Some(true) => Ok(HostMatch::Explicit),
            Some(false) => Ok(HostMatch::Wildcard),
            None => Err(CapabilityError::denied(
                DenialCode::HostNotAllowed,
                format!("{host} is not in the declared allowedHosts"),
            )),
        }
    }

    fn patterns(&self) -> Vec<String> {
        self.allow
            .patterns()
            .iter()
            .map(ToString::to_string)
            .collect()
    }
}

/// A tool's resolved read and write reach for one call.
#[derive(Debug, Default)]
pub struct ResolvedPaths {
    read: Arc<[PathBuf]>,
    write: Arc<[PathBuf]>,
    read_guarded: Arc<[bool]>,
    write_guarded: Arc<[bool]>,
    deny: Arc<[PathBuf]>,
    floor: Arc<DenyFloor>,
    aliases: Arc<Aliases>,
    personality_read: Arc<[PathBuf]>,
    personality_write: Arc<[PathBuf]>,
    working_dir: PathBuf,
    escalate: Escalation,
}

impl ResolvedPaths {
    /// The same reach without `[escalate]` patterns: what the argument gate checks, since
    /// escalation is asked (and enforced by the scoped objects) after the gate.
    pub(crate) fn without_escalation(&self) -> Arc<ResolvedPaths> {
        Arc::new(ResolvedPaths {
            read: Arc::clone(&self.read),
            write: Arc::clone(&self.write),
            read_guarded: Arc::clone(&self.read_guarded),
            write_guarded: Arc::clone(&self.write_guarded),
            deny: Arc::clone(&self.deny),
            floor: Arc::clone(&self.floor),
            aliases: Arc::clone(&self.aliases),
            personality_read: Arc::clone(&self.personality_read),
            personality_write: Arc::clone(&self.personality_write),
            working_dir: self.working_dir.clone(),
            escalate: Escalation::default(),
        })
    }
}

impl PathPolicy for ResolvedPaths {
    fn check(&self, path: &Path, access: FsAccess) -> Result<PathAccess, CapabilityError> {
        let full = resolve_path(path, &self.working_dir).map_err(CapabilityError::invalid_input)?;
        // Matched where it really leads when it names a root by a link's spelling.
        let full = if self.aliases.is_empty() {
            full
        } else {
            self.aliases.rewrite(full)
        };
        let refuse = || {
            CapabilityError::denied(
                DenialCode::PathNotReachable,
                format!("{access} not permitted for {}", full.display()),
            )
        };
        let (roots, guarded, personality) = match access {
            FsAccess::Read => (&self.read, &self.read_guarded, &self.personality_read),
            FsAccess::Write => (&self.write, &self.write_guarded, &self.personality_write),
        };
        let (index, root) = roots
            .iter()
            .enumerate()
            .filter(|(_, r)| is_within(&full, r))
            .max_by_key(|(_, r)| r.as_os_str().len())
            .ok_or_else(refuse)?;
        // Deny rules and the floor can only bite under a root they overlap (decided once per
        // intersection); a missing flag counts as overlapping.
        if guarded.get(index).copied().unwrap_or(true)
            && (self.deny.iter().any(|d| is_within(&full, d))
                || self.floor.blocks(&full, personality))
        {
            return Err(refuse());
        }
        if access == FsAccess::Write
            && self.escalate.write.iter().any(|e| is_within(&full, e))
            && !self.escalate.approved.write_paths.contains(&full)
        {
            return Err(CapabilityError::denied(
                DenialCode::PathNotReachable,
                needs_approval(format!("write to {}", full.display())),
            ));
        }
        // Both normalised and `full` within `root`: the remainder is a byte slice after `root/`.
        let (f, r) = (full.as_os_str().as_bytes(), root.as_os_str().as_bytes());
        let rest = if f.len() == r.len() {
            &f[f.len()..]
        } else if r == b"/" {
            &f[1..]
        } else {
            &f[r.len() + 1..]
        };
        let relative = PathBuf::from(OsStr::from_bytes(rest));
        Ok(PathAccess::new(full.clone(), root.clone(), relative))
    }

    fn roots(&self, access: FsAccess) -> Vec<PathBuf> {
        match access {
            FsAccess::Read => self.read.to_vec(),
            FsAccess::Write => self.write.to_vec(),
        }
    }

    fn working_dir(&self) -> &Path {
        &self.working_dir
    }

    fn hidden(&self) -> Vec<PathBuf> {
        let lifting: Vec<PathBuf> = self
            .personality_read
            .iter()
            .chain(self.personality_write.iter())
            .cloned()
            .collect();
        let mut out: Vec<PathBuf> = self.deny.to_vec();
        out.extend(self.floor.areas(&lifting));
        out
    }
}

/// A tool's resolved process rules.
#[derive(Debug)]
pub struct ResolvedProcess {
    binaries: Arc<[String]>,
    deny_args: Arc<[ArgvPattern]>,
    env_allow: Arc<[String]>,
    sandbox: SandboxMode,
    /// The tool's reach (empty when it declared no `fs_reach`): a child's cwd must be readable.
    paths: Arc<ResolvedPaths>,
    escalate: Escalation,
}

impl ProcessPolicy for ResolvedProcess {
    fn allowed_binaries(&self) -> &[String] {
        &self.binaries
    }

    fn check_args(
        &self,
        binary: &str,
        resolved: &Path,
        args: &[String],
    ) -> Result<(), CapabilityError> {
        let shown = || {
            std::iter::once(binary)
                .chain(args.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" ")
        };
        if self
            .deny_args
            .iter()
            .any(|p| p.matches(binary, resolved, args))
        {
            return Err(CapabilityError::denied(
                DenialCode::ArgsNotAllowed,
                format!("{} refused by policy", shown()),
            ));
        }
        if self
            .escalate
            .args
            .iter()
            .any(|p| p.matches(binary, resolved, args))
        {
            let argv: Vec<String> = std::iter::once(binary.to_owned())
                .chain(args.iter().cloned())
                .collect();
            if !self.escalate.approved.argv.contains(&argv) {
                return Err(CapabilityError::denied(
                    DenialCode::ArgsNotAllowed,
                    needs_approval(shown()),
                ));
            }
        }
        Ok(())
    }

    fn check_env(&self, name: &str) -> Result<(), CapabilityError> {
        if is_fixed_env_name(name) {
            return Err(CapabilityError::denied(
                DenialCode::EnvNotAllowed,
                format!("{name} is set by toolcap and may not be passed to a child"),
            ));
        }
        if !valid_env_name(name) || is_refused_env_name(name) {
            return Err(CapabilityError::denied(
                DenialCode::EnvNotAllowed,
                format!("{} may not be passed to a child", name.escape_debug()),
            ));
        }
        // An allow list, not a deny list: a variable that steers a program (where it reads its
        // configuration, what it runs) is unknown to any list of bad names.
        if !is_safe_env_name(name) && !self.env_allow.iter().any(|a| a == name) {
            return Err(CapabilityError::denied(
                DenialCode::EnvNotAllowed,
                format!(
                    "{} is neither a variable every child may get (locale, time zone, terminal, \
                     commit identity) nor in safety.env.allow",
                    name.escape_debug()
                ),
            ));
        }
        Ok(())
    }

    fn env_allow(&self) -> &[String] {
        &self.env_allow
    }

    fn sandbox(&self) -> SandboxMode {
        self.sandbox
    }
}
