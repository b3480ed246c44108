//! What the resolver grants a tool for one call, and the factories that turn a grant into a
//! scoped object.
//!
//! The matching rules (hosts, paths, binaries, argv, what runs later) are implemented once, in
//! `capability-core`, and reach the backends as the policy objects below: a backend never
//! re-implements a rule, it asks the same matcher the validator and the resolver used.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::capabilities::StorageScope;
use crate::error::CapabilityError;
use crate::scoped::{KeyValueStore, ScopedFetch, ScopedFs, ScopedProcess, ScopedSecretsResolver};
use crate::secret_ref::SecretRef;

/// How a host was allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
// toolcap: exhaustive(reason = "a new way of matching must be weighed by every backend that refuses private addresses")
pub enum HostMatch {
    /// Through a wildcard (`*.example.com`, `*`). Loopback, private, link-local and metadata
    /// addresses must still be refused.
    Wildcard,
    /// Through a pattern naming exactly this host or IP literal. Such addresses may be reached.
    Explicit,
}

/// The resolved host set of one tool: the intersection of its declaration with the
/// personality, minus the personality's deny list.
pub trait HostPolicy: Send + Sync + fmt::Debug {
    /// Whether `host` (as a WHATWG URL parser yields it; normalised again here) on `port` may
    /// be fetched. Refusals carry [`DenialCode::HostNotAllowed`](crate::DenialCode).
    fn check(&self, host: &str, port: u16) -> Result<HostMatch, CapabilityError>;
    /// The allowed patterns, normalised, for display and manifests.
    fn patterns(&self) -> Vec<String>;
}

/// Read or write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
// toolcap: exhaustive(reason = "read and write are the whole access model; a third kind must break every match that grants one")
pub enum FsAccess {
    /// Reading a file, listing a directory, reading metadata.
    Read,
    /// Creating, writing or removing.
    Write,
}

impl fmt::Display for FsAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            FsAccess::Read => "read",
            FsAccess::Write => "write",
        })
    }
}

/// Where an allowed path lies: the root whose directory handle confines the open, and the
/// path relative to it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PathAccess {
    /// The lexically normalised absolute path.
    pub path: PathBuf,
    /// The resolved root that covers it.
    pub root: PathBuf,
    /// `path` relative to `root` (empty when they are equal).
    pub relative: PathBuf,
}

impl PathAccess {
    /// A path access record.
    pub fn new(path: PathBuf, root: PathBuf, relative: PathBuf) -> Self {
        Self {
            path,
            root,
            relative,
        }
    }
}

/// Every place whose contents run later outside any sandbox, outside a repository's git
/// directory, as a relative path from the directory it is found in: the shells' startup files,
/// git's user configuration, what the programs a user starts and the user's session read as
/// they start, what agents and editors run, the git hook managers' places, and the build
/// tools' and package managers' configuration. `capability_core::matching::path::runs_later`
/// matches exactly these (its tests hold the two together); the kernel layer looks for them
/// beneath a child's write roots and keeps those that exist from the child (docs/policy.md,
/// "Kept from children").
pub const RUNS_LATER_NAMES: [&str; 130] = [
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".bash_aliases",
    ".profile",
    ".zshrc",
    ".zprofile",
    ".zshenv",
    ".zlogin",
    ".zlogout",
    ".cshrc",
    ".tcshrc",
    ".login",
    ".logout",
    ".kshrc",
    ".mkshrc",
    ".xonshrc",
    ".gitconfig",
    ".pam_environment",
    ".xprofile",
    ".xsessionrc",
    ".xsession",
    ".xinitrc",
    ".rprofile",
    ".renviron",
    ".octaverc",
    ".irbrc",
    ".pryrc",
    ".tmux.conf",
    ".screenrc",
    ".psqlrc",
    ".sqliterc",
    ".gdbinit",
    ".lldbinit",
    ".config/tmux",
    ".local/bin",
    ".vimrc",
    ".gvimrc",
    ".exrc",
    ".emacs",
    ".vim",
    ".emacs.d",
    ".config/nvim",
    ".config/emacs",
    ".config/git/config",
    ".config/fish",
    ".config/nushell",
    ".config/powershell",
    ".config/xonsh",
    ".config/elvish",
    ".config/systemd/user",
    ".config/autostart",
    ".config/environment.d",
    ".mcp.json",
    "opencode.json",
    "opencode.jsonc",
    "crush.json",
    ".crush.json",
    ".aider.conf.yml",
    ".claude",
    ".cursor",
    ".codex",
    ".gemini",
    ".vscode",
    ".idea",
    ".agents",
    ".kiro",
    ".roo",
    ".continue",
    ".zed",
    ".helix",
    ".windsurf",
    ".clinerules",
    ".opencode",
    ".qwen",
    ".kilocode",
    ".amazonq",
    ".junie",
    ".husky",
    ".pre-commit-config.yaml",
    "lefthook.yml",
    ".lefthook.yml",
    "lefthook.yaml",
    ".lefthook.yaml",
    "lefthook-local.yml",
    ".lefthook-local.yml",
    "lefthook-local.yaml",
    ".lefthook-local.yaml",
    ".overcommit.yml",
    ".cargo/config.toml",
    ".cargo/config",
    ".hg/hgrc",
    "rust-toolchain.toml",
    "rust-toolchain",
    ".npmrc",
    ".yarnrc.yml",
    ".yarnrc",
    "bunfig.toml",
    ".devcontainer",
    ".devcontainer.json",
    ".pnpmfile.cjs",
    ".mvn",
    ".pdbrc",
    ".iex.exs",
    ".ghci",
    ".ocamlinit",
    ".perldb",
    ".ghc/ghci.conf",
    ".cargo/env",
    ".cargo/env.fish",
    ".cargo/bin",
    ".kube/config",
    ".local/lib",
    ".julia/config",
    ".local/share/direnv",
    ".local/share/applications",
    ".local/share/systemd/user",
    ".local/share/dbus-1/services",
    ".config/plasma-workspace/env",
    ".config/direnv",
    ".config/mise",
    ".mavenrc",
    ".jvmopts",
    ".sbtopts",
    ".gradle/init.gradle",
    ".gradle/init.gradle.kts",
    ".gradle/gradle.properties",
    ".gradle/init.d",
    ".bundle",
];

/// The resolved read and write reach of one tool for one call.
///
/// Lexical checks happen here; the backend then opens `relative` beneath a handle on `root`
/// with the kernel refusing escapes, and calls [`check`](Self::check) again on the path the
/// kernel actually reached, so a symlink inside a root cannot lead into a denied sub-tree.
pub trait PathPolicy: Send + Sync + fmt::Debug {
    /// Whether `path` (absolute, or relative to [`working_dir`](Self::working_dir)) may be
    /// accessed. Refusals carry [`DenialCode::PathNotReachable`](crate::DenialCode).
    fn check(&self, path: &Path, access: FsAccess) -> Result<PathAccess, CapabilityError>;
    /// The resolved roots for `access`.
    fn roots(&self, access: FsAccess) -> Vec<PathBuf>;
    /// The directory relative paths resolve against.
    fn working_dir(&self) -> &Path;
    /// The places beneath the roots that stay out of reach: the deny rules and the areas of the
    /// deny floor the personality does not lift, as resolved paths. The kernel layer hides them
    /// from children (Landlock can only grant, so a child's mount namespace covers them).
    fn hidden(&self) -> Vec<PathBuf>;
    /// Names of places whose contents run later outside any sandbox (`.bashrc`, `.claude`): the
    /// kernel layer keeps from a child those it finds beneath a write root.
    fn runs_later_names(&self) -> &'static [&'static str];
    /// Such places reached by another name, where they really are (a home's `.bashrc` that is
    /// a link into a dotfiles repository): the kernel layer keeps from a child those that
    /// exist beneath a write root, as it keeps the named ones.
    fn runs_later_places(&self) -> Vec<PathBuf>;
}

/// The resolved process rules of one tool.
pub trait ProcessPolicy: Send + Sync + fmt::Debug {
    /// The binaries the tool may spawn: bare names (to resolve through the trusted search path)
    /// and absolute paths.
    fn allowed_binaries(&self) -> &[String];
    /// Whether the argv may run: `binary` as requested, `allowed` the allowed entry it was found
    /// to be (the child's name), `resolved` the canonical file; a rule is read against each.
    /// Refusals carry [`DenialCode::ArgsNotAllowed`](crate::DenialCode).
    fn check_args(
        &self,
        binary: &str,
        allowed: &str,
        resolved: &Path,
        args: &[String],
    ) -> Result<(), CapabilityError>;
    /// Whether a call may pass the variable `name` to the child: never a loader or interpreter
    /// hook (`capability_policy::is_refused_env_name`) nor a variable toolcap fixes
    /// (`capability_policy::is_fixed_env_name`). Refusals carry
    /// [`DenialCode::EnvNotAllowed`](crate::DenialCode).
    fn check_env(&self, name: &str) -> Result<(), CapabilityError>;
    /// Variables the child may inherit from the host (`safety.env.allow`).
    fn env_allow(&self) -> &[String];
    /// Whether children must run under kernel confinement (`safety.process.sandbox`). Required
    /// unless a policy says otherwise.
    fn sandbox(&self) -> SandboxMode {
        SandboxMode::Required
    }
}

/// The network grant of one tool.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct NetworkGrant {
    /// The tool's name.
    pub tool: String,
    /// The resolved host set.
    pub hosts: Arc<dyn HostPolicy>,
}

impl NetworkGrant {
    /// A grant.
    pub fn new(tool: impl Into<String>, hosts: Arc<dyn HostPolicy>) -> Self {
        Self {
            tool: tool.into(),
            hosts,
        }
    }
}

/// The file system grant of one tool for one call.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct FsGrant {
    /// The tool's name.
    pub tool: String,
    /// The resolved reach.
    pub paths: Arc<dyn PathPolicy>,
}

impl FsGrant {
    /// A grant.
    pub fn new(tool: impl Into<String>, paths: Arc<dyn PathPolicy>) -> Self {
        Self {
            tool: tool.into(),
            paths,
        }
    }
}

/// The secrets grant of one tool.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SecretsGrant {
    /// The tool's name.
    pub tool: String,
    /// The declared refs; anything else is refused.
    pub refs: Vec<SecretRef>,
}

impl SecretsGrant {
    /// A grant.
    pub fn new(tool: impl Into<String>, refs: Vec<SecretRef>) -> Self {
        Self {
            tool: tool.into(),
            refs,
        }
    }
}

/// The process grant of one tool for one call.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ProcessGrant {
    /// The tool's name.
    pub tool: String,
    /// Binaries, argv rules and environment.
    pub process: Arc<dyn ProcessPolicy>,
    /// The tool's file reach; a child's `cwd` must lie inside its read reach.
    pub paths: Arc<dyn PathPolicy>,
    /// The tool's network grant, when it declared both `process` and `network`: a confined
    /// child then reaches exactly these hosts, through the backend's [`EgressFactory`] proxy.
    /// `None`: children have no network at all.
    pub network: Option<NetworkGrant>,
}

impl ProcessGrant {
    /// A grant.
    pub fn new(
        tool: impl Into<String>,
        process: Arc<dyn ProcessPolicy>,
        paths: Arc<dyn PathPolicy>,
    ) -> Self {
        Self {
            tool: tool.into(),
            process,
            paths,
            network: None,
        }
    }

    /// Lets the tool's children reach the hosts of `network` through the egress proxy.
    pub fn with_network(mut self, network: NetworkGrant) -> Self {
        self.network = Some(network);
        self
    }
}

/// The storage grant of one tool: the namespace its keys live in.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StorageGrant {
    /// The tool's name.
    pub tool: String,
    /// The declared scope.
    pub scope: StorageScope,
    /// `tool:<tool>`, `session:<id>` or `personality:<id>`. Backends must keep keys inside it
    /// without concatenating it with a separator a key may contain.
    pub namespace: String,
    /// TTL applied to every `set` that gives none.
    pub ttl_default: Option<Duration>,
}

impl StorageGrant {
    /// A grant.
    pub fn new(
        tool: impl Into<String>,
        scope: StorageScope,
        namespace: impl Into<String>,
        ttl_default: Option<Duration>,
    ) -> Self {
        Self {
            tool: tool.into(),
            scope,
            namespace: namespace.into(),
            ttl_default,
        }
    }
}

/// Builds [`ScopedFetch`] objects. Implemented by `capability-fetch`.
pub trait FetchFactory: Send + Sync + fmt::Debug {
    /// A fetcher confined to `grant`.
    fn scoped_fetch(&self, grant: NetworkGrant) -> Result<Arc<dyn ScopedFetch>, CapabilityError>;
}

/// Builds [`ScopedFs`] objects. Implemented by `capability-fs`.
pub trait FsFactory: Send + Sync + fmt::Debug {
    /// A file system view confined to `grant`.
    fn scoped_fs(&self, grant: FsGrant) -> Result<Arc<dyn ScopedFs>, CapabilityError>;
}

/// Builds [`ScopedSecretsResolver`] objects. Implemented by `capability-secrets`.
pub trait SecretsFactory: Send + Sync + fmt::Debug {
    /// A resolver confined to `grant`.
    fn secrets_resolver(
        &self,
        grant: SecretsGrant,
    ) -> Result<Arc<dyn ScopedSecretsResolver>, CapabilityError>;
}

/// Builds [`ScopedProcess`] objects. Implemented by `capability-process`.
pub trait ProcessFactory: Send + Sync + fmt::Debug {
    /// A spawner confined to `grant`.
    fn scoped_process(
        &self,
        grant: ProcessGrant,
    ) -> Result<Arc<dyn ScopedProcess>, CapabilityError>;
}

/// The egress of confined children: an HTTP proxy, served by the host, that a child inside its
/// own network namespace reaches on a loopback port and that lets it reach exactly the hosts of
/// its tool's network grant. Implemented by `capability-fetch` (same host matcher, same address
/// checks as [`ScopedFetch`]); used by `capability-process`.
pub trait EgressFactory: Send + Sync + fmt::Debug {
    /// Serves the proxy on `listener` (a listening socket inside the child's network namespace)
    /// for `grant`, from a task of the current async runtime, until the returned session is
    /// dropped. Every decision is audited.
    fn serve(
        &self,
        grant: NetworkGrant,
        // toolcap: allow(std::net::TcpListener, reason = "a socket handed over by a confined child, not one this code opens")
        listener: std::net::TcpListener,
    ) -> Result<Box<dyn EgressSession>, CapabilityError>;
}

/// A running proxy for one child; dropping it stops the proxy and closes its connections.
pub trait EgressSession: Send + Sync + fmt::Debug {}

/// Builds [`KeyValueStore`] objects for a namespace. Implemented by `capability-kv`.
pub trait KvStoreFactory: Send + Sync + fmt::Debug {
    /// A store confined to `grant`'s namespace.
    fn kv_store(&self, grant: StorageGrant) -> Result<Arc<dyn KeyValueStore>, CapabilityError>;
}

/// Whether children run under kernel confinement (`capability-sandbox`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
// toolcap: exhaustive(reason = "a new confinement mode must be handled by every spawner; a default arm could run a child unconfined")
pub enum SandboxMode {
    /// Every child is confined (Landlock, seccomp, a private network namespace, limits); where
    /// the kernel cannot do that, spawning fails with `not_available`.
    #[default]
    Required,
    /// Children run without kernel confinement. `toolcap validate` reports this opt-out.
    Off,
}
