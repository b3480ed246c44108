//! A personality compiled for matching: patterns parsed and indexed once, so resolving a call
//! is a handful of reference-count bumps.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use capability_types::{PersonalityPolicy, PolicyError, PolicyFormat};

use crate::matching::binary::ArgvPattern;
use crate::matching::host::{HostPattern, HostSet};
use crate::matching::path::DenyFloor;

/// The active personality, checked and compiled. Cheap to clone.
///
/// [`CompiledPolicy::none`] stands for "no personality": it allows no hosts, no paths and no
/// binaries, so every declared category resolves to nothing (fail closed).
#[derive(Debug, Clone)]
pub struct CompiledPolicy {
    /// Unique per compilation (clones share it): the key of resolution caches.
    pub(crate) generation: u64,
    source: Option<Arc<PersonalityPolicy>>,
    pub(crate) network_allow: Arc<HostSet>,
    pub(crate) network_deny: Arc<HostSet>,
    pub(crate) process_allow: Arc<[String]>,
    pub(crate) deny_args: Arc<[ArgvPattern]>,
    pub(crate) env_allow: Arc<[String]>,
    pub(crate) fs_read: Arc<[PathBuf]>,
    pub(crate) fs_write: Arc<[PathBuf]>,
    pub(crate) fs_deny: Arc<[PathBuf]>,
    pub(crate) floor: Arc<DenyFloor>,
}

impl CompiledPolicy {
    /// Parses, checks and compiles a policy file's text. `home` expands `~` and places the
    /// home entries of the deny floor.
    ///
    /// ```
    /// use capability_core::CompiledPolicy;
    /// use capability_types::PolicyFormat;
    /// let err = CompiledPolicy::load(
    ///     r#"{"id": "x", "safety": {"network": {"allow": ["api.github.com", "*.com"]}}}"#,
    ///     PolicyFormat::Json,
    ///     None,
    /// ).unwrap_err();
    /// assert_eq!(err.field(), Some("safety.network.allow[1]"));
    /// ```
    pub fn load(
        text: &str,
        format: PolicyFormat,
        home: Option<&Path>,
    ) -> Result<Self, PolicyError> {
        Self::compile(PersonalityPolicy::parse(text, format, home)?, home)
    }

    /// Checks and compiles a policy built in code or already parsed.
    pub fn compile(
        mut policy: PersonalityPolicy,
        home: Option<&Path>,
    ) -> Result<Self, PolicyError> {
        policy.check(home)?;
        let hosts = |field: &str, list: &[String]| -> Result<HostSet, PolicyError> {
            let mut patterns = Vec::with_capacity(list.len());
            for (i, text) in list.iter().enumerate() {
                patterns.push(
                    HostPattern::parse(text)
                        .map_err(|why| PolicyError::invalid(format!("{field}[{i}]"), why))?,
                );
            }
            Ok(HostSet::new(patterns))
        };
        let network_allow = hosts("safety.network.allow", &policy.safety.network.allow)?;
        let network_deny = hosts("safety.network.deny", &policy.safety.network.deny)?;
        let mut deny_args = Vec::new();
        for (i, text) in policy.safety.process.deny_args.iter().enumerate() {
            deny_args.push(ArgvPattern::parse(text).map_err(|why| {
                PolicyError::invalid(format!("safety.process.deny_args[{i}]"), why)
            })?);
        }
        Ok(Self {
            generation: next_generation(),
            network_allow: Arc::new(network_allow),
            network_deny: Arc::new(network_deny),
            process_allow: policy.safety.process.allow.clone().into(),
            deny_args: deny_args.into(),
            env_allow: policy.safety.env.allow.clone().into(),
            fs_read: policy.fs_reach.read.clone().into(),
            fs_write: policy.fs_reach.write.clone().into(),
            fs_deny: policy.fs_reach.deny.clone().into(),
            floor: Arc::new(DenyFloor::new(home)),
            source: Some(Arc::new(policy)),
        })
    }

    /// No personality: nothing is allowed in any category; every registered tool may be called
    /// (and gets nothing it declared but secrets and storage).
    pub fn none(home: Option<&Path>) -> Self {
        Self {
            generation: next_generation(),
            source: None,
            network_allow: Arc::default(),
            network_deny: Arc::default(),
            process_allow: Arc::new([]),
            deny_args: Arc::new([]),
            env_allow: Arc::new([]),
            fs_read: Arc::new([]),
            fs_write: Arc::new([]),
            fs_deny: Arc::new([]),
            floor: Arc::new(DenyFloor::new(home)),
        }
    }

    /// The personality's id, if there is a personality.
    pub fn id(&self) -> Option<&str> {
        self.source.as_deref().map(|p| p.id.as_str())
    }

    /// The checked policy it was compiled from.
    pub fn policy(&self) -> Option<&PersonalityPolicy> {
        self.source.as_deref()
    }

    /// Whether `tool` is in the toolset (no toolset, or no personality: every tool).
    pub fn allows_tool(&self, tool: &str) -> bool {
        match self.source.as_deref().and_then(|p| p.toolset.as_ref()) {
            None => true,
            Some(toolset) => toolset.iter().any(|t| t == tool),
        }
    }
}

fn next_generation() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}
