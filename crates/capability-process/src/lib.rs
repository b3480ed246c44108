//! The process backend for toolcap: a [`ScopedProcess`] that
//! runs only the binaries a tool may run, with arguments checked token by token, in a cleared
//! environment, and kills the whole process group on timeout.
//!
//! What a spawn goes through (docs/semantics.md, "Binaries" and "Child environment"):
//!
//! 1. The requested binary — a bare name or an absolute path, never a shell line — resolves
//!    through the trusted search path (never the child's or the host's `PATH`) to a canonical
//!    file, which must be the canonical file of one of the tool's allowed binaries
//!    (`BINARY_NOT_ALLOWED`). Allowed names are resolved once and remembered.
//! 2. The argv is checked against the personality's `deny_args` (`ARGS_NOT_ALLOWED`).
//! 3. The environment is cleared. The child gets a fixed `PATH`, `HOME` set to a fresh scratch
//!    directory (a confined child sees no other child's), `LANG`, the host variables named in `safety.env.allow`, and the variables the
//!    call passes — loader and interpreter hooks, and `PATH` itself, refused
//!    (`ENV_NOT_ALLOWED`).
//! 4. `cwd` must lie inside the tool's read reach, also after symlinks are resolved
//!    (`PATH_NOT_REACHABLE`).
//! 5. The child runs in its own process group. stdout and stderr are captured up to a cap
//!    (default 10 MiB each) with a `truncated` flag. On timeout the group gets `SIGTERM`, then
//!    `SIGKILL` after a grace period; when the child exits, whatever it left in its group is
//!    killed too, so nothing outlives the call.
//!
//! ```
//! use std::sync::Arc;
//! use capability_core::CapabilityBackends;
//! use capability_process::{ProcessBackend, ProcessConfig};
//!
//! let backends = CapabilityBackends::new()
//!     .with_process(Arc::new(ProcessBackend::new(ProcessConfig::from_process_env())));
//! # let _ = backends;
//! ```
#![deny(missing_docs)]

mod spawn;
mod sys;

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use capability_types::backend::{EgressFactory, ProcessFactory, ProcessGrant};
use capability_types::{CapabilityError, ScopedProcess};

pub use crate::spawn::ScopedSpawner;
pub use crate::sys::resolve_binary;

/// The search path bare binary names resolve through, and the `PATH` a child gets.
pub const TRUSTED_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Settings of the process backend. Starts from safe defaults.
#[derive(Clone)]
#[non_exhaustive]
pub struct ProcessConfig {
    /// Directories bare names resolve through, in order (default [`TRUSTED_PATH`]).
    pub search_path: Vec<PathBuf>,
    /// The `PATH` every child gets (default [`TRUSTED_PATH`]).
    pub child_path: String,
    /// Cap on captured stdout and on captured stderr, each (default 10 MiB).
    pub output_cap: usize,
    /// Timeout when a call gives none (default 30 s).
    pub default_timeout: Duration,
    /// The longest timeout a call may ask for (default 10 min).
    pub max_timeout: Duration,
    /// Between `SIGTERM` and `SIGKILL` on timeout (default 500 ms).
    pub kill_grace: Duration,
    /// Where per-call scratch `HOME` directories are made (default: the system temp dir).
    pub scratch_root: PathBuf,
    /// The host environment that `safety.env.allow` and `LANG` draw from.
    pub host_env: HashMap<String, String>,
    /// What the kernel can confine, probed when the config is made. Children of a policy that
    /// requires the sandbox (the default) fail with `not_available` when it has a refusal;
    /// [`Support::unsupported`](capability_sandbox::Support::unsupported) forces that path.
    pub sandbox_support: capability_sandbox::Support,
    /// Resource limits of sandboxed children (default: [`ResourceLimits::default`] without its
    /// CPU limit). The CPU-time limit is never above the call's timeout, rounded up.
    ///
    /// [`ResourceLimits::default`]: capability_sandbox::ResourceLimits
    pub sandbox_limits: capability_sandbox::ResourceLimits,
    /// The egress proxy for sandboxed children of tools that declare `network` as well as
    /// `process` (default none: every child has no network at all). With it, such a child runs
    /// in its own network namespace and reaches exactly its tool's hosts through the proxy
    /// (`HTTP_PROXY`, `HTTPS_PROXY` and `ALL_PROXY` point there).
    pub egress: Option<Arc<dyn EgressFactory>>,
}

impl ProcessConfig {
    /// Defaults, with the host environment snapshotted from this process.
    ///
    /// # Ambient Authority
    ///
    /// Reads the process environment (once, now) and the system temp directory's location.
    /// Children see only the variables a personality allows.
    pub fn from_process_env() -> Self {
        Self::with_host_env(sys::environment()).scratch_root(sys::temp_dir())
    }

    /// Defaults with an explicit host environment.
    pub fn with_host_env(host_env: HashMap<String, String>) -> Self {
        Self {
            search_path: std::env::split_paths(TRUSTED_PATH).collect(),
            child_path: TRUSTED_PATH.to_owned(),
            output_cap: 10 * 1024 * 1024,
            default_timeout: Duration::from_secs(30),
            max_timeout: Duration::from_secs(600),
            kill_grace: Duration::from_millis(500),
            scratch_root: PathBuf::from("/tmp"),
            host_env,
            sandbox_support: capability_sandbox::probe(),
            sandbox_limits: capability_sandbox::ResourceLimits {
                cpu_seconds: None,
                ..capability_sandbox::ResourceLimits::default()
            },
            egress: None,
        }
    }

    /// Sets the egress proxy of sandboxed children whose tool declares `network`.
    pub fn egress(mut self, proxy: Arc<dyn EgressFactory>) -> Self {
        self.egress = Some(proxy);
        self
    }

    /// Sets what the kernel is taken to support (tests force the "unsupported" path with
    /// [`Support::unsupported`](capability_sandbox::Support::unsupported)).
    pub fn sandbox_support(mut self, support: capability_sandbox::Support) -> Self {
        self.sandbox_support = support;
        self
    }
    /// Sets the resource limits of sandboxed children.
    pub fn sandbox_limits(mut self, limits: capability_sandbox::ResourceLimits) -> Self {
        self.sandbox_limits = limits;
        self
    }
    /// Sets the search path for bare names.
    pub fn search_path(mut self, dirs: Vec<PathBuf>) -> Self {
        self.search_path = dirs;
        self
    }
    /// Sets the output cap.
    pub fn output_cap(mut self, bytes: usize) -> Self {
        self.output_cap = bytes;
        self
    }
    /// Sets the default timeout.
    pub fn default_timeout(mut self, timeout: Duration) -> Self {
        self.default_timeout = timeout;
        self
    }
    /// Sets the grace period between `SIGTERM` and `SIGKILL`.
    pub fn kill_grace(mut self, grace: Duration) -> Self {
        self.kill_grace = grace;
        self
    }
    /// Sets where scratch `HOME` directories are made.
    pub fn scratch_root(mut self, dir: PathBuf) -> Self {
        self.scratch_root = dir;
        self
    }
}

impl fmt::Debug for ProcessConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Host variables may hold credentials: names only.
        let mut names: Vec<&String> = self.host_env.keys().collect();
        names.sort();
        f.debug_struct("ProcessConfig")
            .field("search_path", &self.search_path)
            .field("child_path", &self.child_path)
            .field("output_cap", &self.output_cap)
            .field("default_timeout", &self.default_timeout)
            .field("max_timeout", &self.max_timeout)
            .field("kill_grace", &self.kill_grace)
            .field("scratch_root", &self.scratch_root)
            .field("host_env", &names)
            .field("sandbox_support", &self.sandbox_support)
            .field("sandbox_limits", &self.sandbox_limits)
            .field("egress", &self.egress.is_some())
            .finish()
    }
}

/// Builds a [`ScopedSpawner`] per tool. Remembers which file each binary spec resolves to.
#[derive(Clone)]
pub struct ProcessBackend {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) config: ProcessConfig,
    /// An allowed spec (bare name or absolute path, as a personality lists it) → canonical
    /// file, or `None` when it resolves to no executable file. Resolved once per spec; what a
    /// call names is resolved for that call and never kept here.
    resolved: Mutex<HashMap<String, Option<PathBuf>>>,
    /// Prepared sandboxes by what they are built from (see [`SandboxKey`]): preparing costs
    /// about a tenth of a spawn, so it happens once per distinct policy.
    sandboxes: Mutex<HashMap<SandboxKey, Arc<capability_sandbox::PreparedSandbox>>>,
    /// One scratch parent per tool: the per-call `HOME` directories live inside it, so that a
    /// prepared sandbox (`SandboxPolicy::homes`) serves every call of the tool; each confined
    /// child sees only its own home there (docs/isolation-model.md, "Each child's own home").
    homes: Mutex<HashMap<String, Arc<capability_sandbox::ScratchDir>>>,
}

/// What a prepared sandbox is built from. Paths are keyed with the identity of the file they
/// name when the key is made, so a root that is replaced gets a new sandbox (Landlock rules
/// hold the directory, not its name).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct SandboxKey {
    pub(crate) tool: String,
    pub(crate) read: Vec<(PathBuf, Option<(u64, u64)>)>,
    pub(crate) write: Vec<(PathBuf, Option<(u64, u64)>)>,
    /// The places covered in the child (deny rules, the floor): a narrowing that adds one, or a
    /// hidden place that appears after the sandbox was prepared, must not reuse a sandbox
    /// prepared without its cover.
    pub(crate) hidden: Vec<(PathBuf, Option<(u64, u64)>)>,
    /// The directories within the reach where a hidden name prefix (`/tmp/toolcap-home-*`) is
    /// matched, with when each last changed: an entry made there after the sandbox was
    /// prepared (another process's scratch directory) changes it, and must not find a sandbox
    /// that covers only the entries there before it.
    pub(crate) listed: Vec<(PathBuf, Option<std::time::SystemTime>)>,
    pub(crate) program: (PathBuf, Option<(u64, u64)>),
    pub(crate) limits: capability_sandbox::ResourceLimits,
    pub(crate) egress: bool,
}

/// At most this many prepared sandboxes are kept; beyond it the cache starts over.
const SANDBOX_CACHE: usize = 256;

impl Inner {
    /// The prepared sandbox for `key`, built by `prepare` on first use.
    pub(crate) fn sandbox(
        &self,
        key: SandboxKey,
        prepare: impl FnOnce() -> Result<capability_sandbox::PreparedSandbox, CapabilityError>,
    ) -> Result<Arc<capability_sandbox::PreparedSandbox>, CapabilityError> {
        if let Some(hit) = self
            .sandboxes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
        {
            return Ok(Arc::clone(hit));
        }
        let prepared = Arc::new(prepare()?);
        let mut cache = self
            .sandboxes
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if cache.len() >= SANDBOX_CACHE {
            cache.clear();
        }
        cache.insert(key, Arc::clone(&prepared));
        Ok(prepared)
    }

    /// The scratch parent of `tool`'s `HOME` directories, made on first use (mode 0700), and
    /// removed by the next process that makes one if this one is killed before it can
    /// (docs/isolation-model.md, "Scratch directories").
    pub(crate) fn home_parent(
        &self,
        tool: &str,
    ) -> std::io::Result<Arc<capability_sandbox::ScratchDir>> {
        let mut homes = self.homes.lock().unwrap_or_else(PoisonError::into_inner);
        // The scratch parent may have been removed by another process's clean-up; asked of
        // this crate's own directory, not of a tool's path.
        #[allow(
            clippy::disallowed_methods,
            reason = "a look at the process backend's own scratch directory"
        )]
        let still_there = |parent: &capability_sandbox::ScratchDir| parent.path().is_dir();
        if let Some(parent) = homes.get(tool)
            && still_there(parent)
        {
            return Ok(Arc::clone(parent));
        }
        let parent = Arc::new(capability_sandbox::ScratchDir::new_in(
            &self.config.scratch_root,
            sys::SCRATCH_PREFIX,
        )?);
        homes.insert(tool.to_owned(), Arc::clone(&parent));
        Ok(parent)
    }

    /// The canonical file `spec` resolves to, resolving it once.
    pub(crate) fn resolve(&self, spec: &str) -> Option<PathBuf> {
        if let Some(hit) = self
            .resolved
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(spec)
        {
            return hit.clone();
        }
        let found = sys::resolve_binary(spec, &self.config.search_path);
        self.resolved
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(spec.to_owned(), found.clone());
        found
    }
}

impl ProcessBackend {
    /// A backend with `config`.
    pub fn new(config: ProcessConfig) -> Self {
        Self {
            inner: Arc::new(Inner {
                config,
                resolved: Mutex::new(HashMap::new()),
                sandboxes: Mutex::new(HashMap::new()),
                homes: Mutex::new(HashMap::new()),
            }),
        }
    }
}

impl fmt::Debug for ProcessBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProcessBackend")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl ProcessFactory for ProcessBackend {
    fn scoped_process(
        &self,
        grant: ProcessGrant,
    ) -> Result<Arc<dyn ScopedProcess>, CapabilityError> {
        Ok(Arc::new(ScopedSpawner::new(grant, Arc::clone(&self.inner))))
    }
}
