//! A personality compiled for matching: patterns parsed and indexed once, so resolving a call
//! is a handful of reference-count bumps.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use std::collections::{BTreeMap, BTreeSet};

use capability_policy::{
    Narrowing, PersonalityPolicy, PolicyError, PolicyFormat, RestrictedAddresses, ToolConstraints,
};
use capability_types::backend::SandboxMode;

use crate::matching::binary::{ArgvPattern, intersect_binaries};
use crate::matching::host::{HostPattern, HostSet, intersect_hosts};
use crate::matching::path::{DenyFloor, intersect_paths, is_within};
use crate::realpath::{Aliases, LaterAlias, later_aliases, resolve_real};

/// The active personality, checked and compiled. Cheap to clone.
///
/// [`CompiledPolicy::none`] stands for "no personality": it allows no hosts, no paths and no
/// binaries, so every declared category resolves to nothing (fail closed).
#[derive(Debug, Clone)]
pub struct CompiledPolicy {
    /// Unique per compilation (clones share it): the key of resolution caches.
    pub(crate) generation: u64,
    source: Option<Arc<PersonalityPolicy>>,
    /// The personality's id, shared with every call's context without a copy.
    shared_id: Option<Arc<str>>,
    pub(crate) network_allow: Arc<HostSet>,
    pub(crate) network_deny: Arc<HostSet>,
    /// `[safety.network] restricted_addresses`.
    pub(crate) restricted_addresses: RestrictedAddresses,
    pub(crate) process_allow: Arc<[String]>,
    pub(crate) deny_args: Arc<[ArgvPattern]>,
    pub(crate) env_allow: Arc<[String]>,
    pub(crate) sandbox: SandboxMode,
    pub(crate) fs_read: Arc<[PathBuf]>,
    pub(crate) fs_write: Arc<[PathBuf]>,
    pub(crate) fs_deny: Arc<[PathBuf]>,
    /// The deny rules as written (`fs_deny` adds where each really leads): what a manifest
    /// records, the same in every run (`/proc/self/environ`, not this process's number).
    pub(crate) fs_deny_written: Arc<[PathBuf]>,
    /// `[fs_reach] deny_write`, each also where its fixed part really leads (docs/policy.md,
    /// "Kept from writes"), and as written, for manifests.
    pub(crate) fs_deny_write: Arc<[PathBuf]>,
    pub(crate) fs_deny_write_written: Arc<[PathBuf]>,
    /// `[fs_reach] apart`, each also where it really leads (docs/policy.md, "Kept apart"), and
    /// as written.
    pub(crate) fs_apart: Arc<[PathBuf]>,
    pub(crate) fs_apart_written: Arc<[PathBuf]>,
    pub(crate) floor: Arc<DenyFloor>,
    /// Roots the policy named through a symbolic link, with where they lead.
    pub(crate) aliases: Arc<Aliases>,
    /// The places of the home and the write roots whose contents run later, where they lead
    /// when that is elsewhere (docs/policy.md, "Reached by another name").
    pub(crate) later_aliases: Arc<[LaterAlias]>,
    /// `[escalate]`: hosts, write paths and argv that need approval.
    pub(crate) escalate_hosts: Arc<HostSet>,
    pub(crate) escalate_write: Arc<[PathBuf]>,
    pub(crate) escalate_args: Arc<[ArgvPattern]>,
    /// Tools every call of which asks, and text whose presence in a call's text asks.
    pub(crate) escalate_tools: Arc<[String]>,
    pub(crate) escalate_calls: Arc<[String]>,
    /// `[refuse] calls`: text that refuses a call whose text holds it (a narrowing keeps it).
    pub(crate) refuse_calls: Arc<[String]>,
    pub(crate) escalate_timeout: Option<std::time::Duration>,
    /// `[attachments] kinds`: what a tool may be handed (docs/semantics.md, "Attachments").
    pub(crate) attachment_kinds: Arc<[String]>,
    /// `None`: every tool.
    toolset: Option<Arc<[String]>>,
    constraints: Arc<BTreeMap<String, ToolConstraints>>,
    /// `[after_untrusted]` (docs/policy.md, "After untrusted output"); a narrowing keeps it.
    pub(crate) after_untrusted: Option<Arc<capability_policy::AfterUntrusted>>,
    /// This policy with `[after_untrusted] hold_writes` kept from writes, for the batches of an
    /// invocation that has seen untrusted output (`after_untrusted.rs`).
    pub(crate) held: Option<Arc<CompiledPolicy>>,
}

/// A reach root that lifts part of the deny floor ([`CompiledPolicy::floor_lifts`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FloorLift {
    /// Where the policy lists the root (`fs_reach.read[1]`).
    pub field: String,
    /// The root, `~` expanded and `..` folded.
    pub root: PathBuf,
    /// The protected area it lifts (`/proc`, `~/.ssh` expanded, `/etc/sudoers*`).
    pub area: PathBuf,
}

/// A reach root a deny rule takes whole ([`CompiledPolicy::denied_roots`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeniedRoot {
    /// Where the policy lists the root (`fs_reach.read[1]`).
    pub field: String,
    /// The root, `~` expanded and `..` folded.
    pub root: PathBuf,
    /// The deny rule at or above it.
    pub rule: PathBuf,
}

/// A host pattern of a personality written with letters outside ASCII
/// ([`CompiledPolicy::international_hosts`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InternationalHost {
    /// Where the policy lists it (`safety.network.allow[1]`).
    pub field: String,
    /// The pattern as written (`аpi.github.com`).
    pub written: String,
    /// The ASCII form it is matched as (`xn--pi-6kc.github.com`).
    pub ascii: String,
}

impl CompiledPolicy {
    /// Parses, checks and compiles a policy file's text. `home` expands `~` and places the
    /// home entries of the deny floor.
    ///
    /// ```
    /// use capability_core::CompiledPolicy;
    /// use capability_policy::{PolicyFormat};
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
        let toolset = policy.toolset.clone().map(Arc::from);
        let constraints = Arc::new(policy.constraints.clone());
        let escalate_hosts = hosts("escalate.hosts", &policy.escalate.hosts)?;
        let mut escalate_args = Vec::new();
        for (i, text) in policy.escalate.args.iter().enumerate() {
            escalate_args.push(
                ArgvPattern::parse(text)
                    .map_err(|why| PolicyError::invalid(format!("escalate.args[{i}]"), why))?,
            );
        }
        let network_deny = hosts("safety.network.deny", &policy.safety.network.deny)?;
        // The options that run programs are refused for every personality before these
        // (`matching::exec_options`), by how each program parses, not by patterns.
        let mut deny_args: Vec<ArgvPattern> = Vec::new();
        for (i, text) in policy.safety.process.deny_args.iter().enumerate() {
            deny_args.push(ArgvPattern::parse(text).map_err(|why| {
                PolicyError::invalid(format!("safety.process.deny_args[{i}]"), why)
            })?);
        }
        let reach: Vec<PathBuf> = (policy.fs_reach.read.iter())
            .chain(&policy.fs_reach.write)
            .cloned()
            .collect();
        let floor = floor_for(home, &reach);
        let mut aliases = Aliases::default();
        let fs_read = real_roots("fs_reach.read", &policy.fs_reach.read, &floor, &mut aliases)?;
        let fs_write = real_roots(
            "fs_reach.write",
            &policy.fs_reach.write,
            &floor,
            &mut aliases,
        )?;
        let later_aliases =
            later_aliases(home.into_iter().chain(fs_write.iter().map(|r| r.as_path())));
        Self {
            generation: next_generation(),
            network_allow: Arc::new(network_allow),
            network_deny: Arc::new(network_deny),
            restricted_addresses: policy.safety.network.restricted_addresses,
            process_allow: policy.safety.process.allow.clone().into(),
            deny_args: deny_args.into(),
            env_allow: policy.safety.env.allow.clone().into(),
            sandbox: policy.safety.process.sandbox,
            fs_read: fs_read.into(),
            fs_write: fs_write.into(),
            fs_deny: both_spellings(&policy.fs_reach.deny).into(),
            fs_deny_written: policy.fs_reach.deny.clone().into(),
            fs_deny_write: both_spellings(&policy.fs_reach.deny_write).into(),
            fs_deny_write_written: policy.fs_reach.deny_write.clone().into(),
            fs_apart: both_spellings(&policy.fs_reach.apart).into(),
            fs_apart_written: policy.fs_reach.apart.clone().into(),
            floor: Arc::new(floor),
            aliases: Arc::new(aliases),
            later_aliases: later_aliases.into(),
            escalate_hosts: Arc::new(escalate_hosts),
            escalate_write: both_spellings(&policy.escalate.write_paths).into(),
            escalate_args: escalate_args.into(),
            escalate_tools: policy.escalate.tools.clone().into(),
            escalate_calls: policy.escalate.calls.clone().into(),
            refuse_calls: policy.refuse.calls.clone().into(),
            escalate_timeout: policy
                .escalate
                .timeout_seconds
                .map(std::time::Duration::from_secs),
            attachment_kinds: policy.attachments.kinds.clone().into(),
            toolset,
            constraints,
            after_untrusted: policy.after_untrusted.clone().map(Arc::new),
            held: None,
            shared_id: Some(Arc::from(policy.id.as_str())),
            source: Some(Arc::new(policy)),
        }
        .with_held()
    }

    /// No personality: nothing is allowed in any category; every registered tool may be called
    /// (and gets nothing it declared but secrets and storage).
    pub fn none(home: Option<&Path>) -> Self {
        Self {
            generation: next_generation(),
            source: None,
            shared_id: None,
            network_allow: Arc::default(),
            network_deny: Arc::default(),
            restricted_addresses: RestrictedAddresses::Named,
            process_allow: Arc::new([]),
            deny_args: Arc::new([]),
            env_allow: Arc::new([]),
            sandbox: SandboxMode::Required,
            fs_read: Arc::new([]),
            fs_write: Arc::new([]),
            fs_deny: Arc::new([]),
            fs_deny_written: Arc::new([]),
            fs_deny_write: Arc::new([]),
            fs_deny_write_written: Arc::new([]),
            fs_apart: Arc::new([]),
            fs_apart_written: Arc::new([]),
            floor: Arc::new(floor_for(home, &[])),
            aliases: Arc::new(Aliases::default()),
            later_aliases: Arc::new([]),
            escalate_hosts: Arc::default(),
            escalate_write: Arc::new([]),
            escalate_args: Arc::new([]),
            escalate_tools: Arc::new([]),
            escalate_calls: Arc::new([]),
            refuse_calls: Arc::new([]),
            escalate_timeout: None,
            attachment_kinds: Arc::new([]),
            toolset: None,
            constraints: Arc::default(),
            after_untrusted: None,
            held: None,
        }
    }

    /// Unique per compilation (and per narrowing); clones share it. Caches and warm capsule
    /// workers are keyed by it, so nothing crosses from one personality to another.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The personality's id, if there is a personality.
    pub fn id(&self) -> Option<&str> {
        self.source.as_deref().map(|p| p.id.as_str())
    }

    /// [`id`](Self::id), shared (a call's context takes it without a copy).
    pub(crate) fn shared_id(&self) -> Option<Arc<str>> {
        self.shared_id.clone()
    }

    /// The checked personality it was compiled from (before any narrowing).
    pub fn policy(&self) -> Option<&PersonalityPolicy> {
        self.source.as_deref()
    }

    /// Each reach root that lifts the deny floor, with where the file lists it and the area it
    /// lifts, read roots first, in the file's order. A root written with `..` lifts the floor
    /// as the place it folds to does (`/srv/x/../../proc` is `/proc`), so a reviewer is shown
    /// the place, not the spelling (`toolcap validate`; docs/policy.md, "Deny rules").
    pub fn floor_lifts(&self) -> Vec<FloorLift> {
        self.each_root(|field, root| {
            Some(FloorLift {
                field,
                root: root.clone(),
                area: self.floor.area_of(root)?,
            })
        })
    }

    /// Each reach root at or beneath one of the personality's deny rules, with where the file
    /// lists it and the rule: it reaches nothing (a deny rule wins over every grant), though it
    /// reads like a grant, read roots first, in the file's order (`toolcap validate`;
    /// docs/policy.md, "Deny rules").
    pub fn denied_roots(&self) -> Vec<DeniedRoot> {
        let deny = self
            .source
            .as_deref()
            .map_or(&[][..], |s| &s.fs_reach.deny[..]);
        self.each_root(|field, root| {
            Some(DeniedRoot {
                field,
                root: root.clone(),
                rule: deny.iter().find(|d| is_within(root, d))?.clone(),
            })
        })
    }

    /// `note` of each reach root of the personality as written, with where the file lists it
    /// (`fs_reach.read[1]`), read roots first, in the file's order; none without a personality.
    fn each_root<T>(&self, note: impl Fn(String, &PathBuf) -> Option<T>) -> Vec<T> {
        let Some(source) = self.source.as_deref() else {
            return Vec::new();
        };
        [
            ("fs_reach.read", &source.fs_reach.read),
            ("fs_reach.write", &source.fs_reach.write),
        ]
        .into_iter()
        .flat_map(|(field, roots)| {
            roots
                .iter()
                .enumerate()
                .filter_map(|(i, root)| note(format!("{field}[{i}]"), root))
                .collect::<Vec<_>>()
        })
        .collect()
    }

    /// Each host pattern of the personality written with letters outside ASCII, with where the
    /// file lists it and the ASCII form it is matched as (`safety.network.allow[1]`,
    /// `аpi.github.com`, `xn--pi-6kc.github.com`): allow, deny and escalation lists in that
    /// order. A name in another script can look like a familiar one and be another host
    /// (`toolcap validate`; docs/review.md).
    pub fn international_hosts(&self) -> Vec<InternationalHost> {
        let Some(source) = self.source.as_deref() else {
            return Vec::new();
        };
        [
            ("safety.network.allow", &source.safety.network.allow),
            ("safety.network.deny", &source.safety.network.deny),
            ("escalate.hosts", &source.escalate.hosts),
        ]
        .into_iter()
        .flat_map(|(field, patterns)| {
            patterns.iter().enumerate().filter_map(move |(i, p)| {
                let ascii = crate::matching::host::ascii_form(p)?;
                Some(InternationalHost {
                    field: format!("{field}[{i}]"),
                    written: p.clone(),
                    ascii,
                })
            })
        })
        .collect()
    }

    /// The places a confined child must not see whatever its grants say: the deny rules and
    /// the deny floor's areas this personality does not lift (docs/policy.md, "Deny rules").
    /// What the kernel layer hides in a child's mount namespace.
    pub fn hidden_places(&self) -> Vec<PathBuf> {
        let lifting: Vec<PathBuf> = self
            .fs_read
            .iter()
            .chain(self.fs_write.iter())
            .cloned()
            .collect();
        let mut out: Vec<PathBuf> = self.fs_deny.to_vec();
        out.extend(self.floor.areas(&lifting));
        out
    }

    /// The kinds of attachment tools may be handed (`[attachments] kinds`).
    pub fn attachment_kinds(&self) -> &[String] {
        &self.attachment_kinds
    }

    /// Whether `tool` is in the toolset (no toolset, or no personality: every tool). An entry
    /// `mcp__<server>__*` covers every tool of that MCP server.
    pub fn allows_tool(&self, tool: &str) -> bool {
        match &self.toolset {
            None => true,
            Some(toolset) => toolset
                .iter()
                .any(|t| crate::after_untrusted::names_tool(t, tool)),
        }
    }

    /// The toolset in force (after narrowing), `None` for every tool.
    pub fn toolset(&self) -> Option<&[String]> {
        self.toolset.as_deref()
    }

    /// The `deny_args` patterns in force (after narrowing), as written.
    pub fn deny_args(&self) -> impl Iterator<Item = &str> {
        self.deny_args.iter().map(ArgvPattern::as_str)
    }

    /// The invocation constraints of `tool` in force (after narrowing).
    pub fn constraints(&self, tool: &str) -> Option<&ToolConstraints> {
        self.constraints.get(tool)
    }

    /// The tools `[escalate] tools` names: every call of each asks first.
    pub fn escalated_tools(&self) -> impl Iterator<Item = &str> {
        self.escalate_tools.iter().map(String::as_str)
    }

    /// The tools `[constraints]` names, sorted.
    pub fn constrained_tools(&self) -> impl Iterator<Item = &str> {
        self.constraints.keys().map(String::as_str)
    }

    /// This policy further restricted by `narrowing`: every list present in the narrowing is
    /// intersected with this policy's (with the same functions the resolver uses), deny lists add
    /// up, and constraints combine to the stricter. The result is never wider than `self` in any
    /// category; the storage namespace (the personality's id) is unchanged.
    pub fn narrow(&self, narrowing: &Narrowing) -> Result<CompiledPolicy, PolicyError> {
        self.narrowed(narrowing)?.with_held()
    }

    /// [`narrow`](Self::narrow), without the variant for held batches.
    pub(crate) fn narrowed(&self, narrowing: &Narrowing) -> Result<CompiledPolicy, PolicyError> {
        let mut n = narrowing.clone();
        n.check(None)?;
        let parse_hosts = |field: &str, list: &[String]| -> Result<Vec<HostPattern>, PolicyError> {
            list.iter()
                .enumerate()
                .map(|(i, t)| {
                    HostPattern::parse(t)
                        .map_err(|why| PolicyError::invalid(format!("{field}[{i}]"), why))
                })
                .collect()
        };
        let mut deny_patterns: Vec<HostPattern> = self.network_deny.patterns().to_vec();
        deny_patterns.extend(parse_hosts("network.deny", &n.network.deny)?);
        let network_allow = match &n.network.allow {
            None => Arc::clone(&self.network_allow),
            Some(list) => {
                parse_hosts("network.allow", list)?;
                Arc::new(HostSet::new(
                    intersect_hosts(list, &self.network_allow, &HostSet::default()).granted,
                ))
            }
        };
        let mut aliases = (*self.aliases).clone();
        let mut side = |mine: &Arc<[PathBuf]>,
                        theirs: &Option<Vec<PathBuf>>,
                        field: &str|
         -> Result<Arc<[PathBuf]>, PolicyError> {
            Ok(match theirs {
                None => Arc::clone(mine),
                Some(list) => {
                    let real = real_roots(field, list, &self.floor, &mut aliases)?;
                    intersect_paths(&real, mine, field).granted.into()
                }
            })
        };
        let fs_read = side(&self.fs_read, &n.fs_reach.read, "fs_reach.read")?;
        let fs_write = side(&self.fs_write, &n.fs_reach.write, "fs_reach.write")?;
        let mut later: Vec<LaterAlias> = self.later_aliases.to_vec();
        for alias in later_aliases(fs_write.iter().map(|r| r.as_path())) {
            if !later.contains(&alias) {
                later.push(alias);
            }
        }
        let mut fs_deny: Vec<PathBuf> = self.fs_deny.to_vec();
        fs_deny.extend(both_spellings(&n.fs_reach.deny));
        let mut fs_deny_written: Vec<PathBuf> = self.fs_deny_written.to_vec();
        fs_deny_written.extend(n.fs_reach.deny.iter().cloned());
        let mut fs_deny_write: Vec<PathBuf> = self.fs_deny_write.to_vec();
        fs_deny_write.extend(both_spellings(&n.fs_reach.deny_write));
        let mut fs_deny_write_written: Vec<PathBuf> = self.fs_deny_write_written.to_vec();
        fs_deny_write_written.extend(n.fs_reach.deny_write.iter().cloned());
        let mut fs_apart: Vec<PathBuf> = self.fs_apart.to_vec();
        fs_apart.extend(both_spellings(&n.fs_reach.apart));
        let mut fs_apart_written: Vec<PathBuf> = self.fs_apart_written.to_vec();
        fs_apart_written.extend(n.fs_reach.apart.iter().cloned());
        let mut deny_args: Vec<ArgvPattern> = self.deny_args.to_vec();
        for (i, text) in n.process.deny_args.iter().enumerate() {
            deny_args.push(
                ArgvPattern::parse(text)
                    .map_err(|why| PolicyError::invalid(format!("process.deny_args[{i}]"), why))?,
            );
        }
        let process_allow: Arc<[String]> = match &n.process.allow {
            None => Arc::clone(&self.process_allow),
            Some(list) => intersect_binaries(list, &self.process_allow).granted.into(),
        };
        let env_allow: Arc<[String]> = match &n.env_allow {
            None => Arc::clone(&self.env_allow),
            Some(list) => self
                .env_allow
                .iter()
                .filter(|v| list.contains(v))
                .cloned()
                .collect(),
        };
        let toolset: Option<Arc<[String]>> = match (&self.toolset, &n.toolset) {
            (mine, None) => mine.clone(),
            (None, Some(theirs)) => Some(theirs.clone().into()),
            (Some(mine), Some(theirs)) => Some(
                mine.iter()
                    .filter(|t| theirs.contains(t))
                    .cloned()
                    .collect(),
            ),
        };
        let mut escalate_hosts: Vec<HostPattern> = self.escalate_hosts.patterns().to_vec();
        escalate_hosts.extend(parse_hosts("escalate.hosts", &n.escalate.hosts)?);
        let mut escalate_write: Vec<PathBuf> = self.escalate_write.to_vec();
        escalate_write.extend(both_spellings(&n.escalate.write_paths));
        let mut escalate_args: Vec<ArgvPattern> = self.escalate_args.to_vec();
        for (i, text) in n.escalate.args.iter().enumerate() {
            escalate_args.push(
                ArgvPattern::parse(text)
                    .map_err(|why| PolicyError::invalid(format!("escalate.args[{i}]"), why))?,
            );
        }
        let added = |mine: &[String], theirs: &[String]| -> Arc<[String]> {
            let extra = theirs.iter().filter(|t| !mine.contains(t));
            mine.iter().chain(extra).cloned().collect()
        };
        let escalate_tools = added(&self.escalate_tools, &n.escalate.tools);
        let escalate_calls = added(&self.escalate_calls, &n.escalate.calls);
        let escalate_timeout = match (
            self.escalate_timeout,
            n.escalate
                .timeout_seconds
                .map(std::time::Duration::from_secs),
        ) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let attachment_kinds = match &n.attachments {
            None => Arc::clone(&self.attachment_kinds),
            Some(rules) => intersect_kinds(&rules.kinds, &self.attachment_kinds).into(),
        };
        let mut constraints = (*self.constraints).clone();
        for (tool, extra) in &n.constraints {
            let merged = match constraints.get(tool) {
                None => extra.clone(),
                Some(mine) => {
                    let mut c = mine.clone();
                    c.max_invocations = match (mine.max_invocations, extra.max_invocations) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                    let after: BTreeSet<String> = mine
                        .only_after
                        .iter()
                        .chain(&extra.only_after)
                        .cloned()
                        .collect();
                    c.only_after = after.into_iter().collect();
                    c.forbidden = mine.forbidden || extra.forbidden;
                    c.path_gate = mine.path_gate || extra.path_gate;
                    for (arg, values) in &extra.reject_args {
                        let refused = c.reject_args.entry(arg.clone()).or_default();
                        for value in values {
                            if !refused.contains(value) {
                                refused.push(value.clone());
                            }
                        }
                    }
                    c
                }
            };
            constraints.insert(tool.clone(), merged);
        }
        Ok(CompiledPolicy {
            generation: next_generation(),
            source: self.source.clone(),
            shared_id: self.shared_id.clone(),
            network_allow,
            network_deny: Arc::new(HostSet::new(deny_patterns)),
            restricted_addresses: self.restricted_addresses,
            process_allow,
            deny_args: deny_args.into(),
            env_allow,
            sandbox: self.sandbox,
            fs_read,
            fs_write,
            aliases: Arc::new(aliases),
            later_aliases: later.into(),
            fs_deny: fs_deny.into(),
            fs_deny_written: fs_deny_written.into(),
            fs_deny_write: fs_deny_write.into(),
            fs_deny_write_written: fs_deny_write_written.into(),
            fs_apart: fs_apart.into(),
            fs_apart_written: fs_apart_written.into(),
            floor: Arc::clone(&self.floor),
            escalate_hosts: Arc::new(HostSet::new(escalate_hosts)),
            escalate_write: escalate_write.into(),
            escalate_args: escalate_args.into(),
            escalate_tools,
            escalate_calls,
            refuse_calls: Arc::clone(&self.refuse_calls),
            escalate_timeout,
            attachment_kinds,
            toolset,
            constraints: Arc::new(constraints),
            after_untrusted: self.after_untrusted.clone(),
            held: None,
        })
    }
}

/// The deny floor for `home`, the places in the machine's accounts' homes that hold what it
/// protects where `roots` reach them, and toolcap's scratch directories, each area under the
/// name it is written with and the place it really leads.
fn floor_for(home: Option<&Path>, roots: &[PathBuf]) -> DenyFloor {
    DenyFloor::new(home)
        .with_places(crate::accounts::account_places(&both_spellings(roots)))
        .with_scratch(crate::accounts::temp_dirs())
        .with_real(resolve_real)
}

/// Each path, and where it really leads when that differs: deny rules and escalation paths bind
/// under both names.
fn both_spellings(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::with_capacity(paths.len());
    for path in paths {
        out.push(path.clone());
        let real = resolve_real(path);
        if &real != path {
            out.push(real);
        }
    }
    out
}

/// Reach roots resolved to where they really lead, recording each spelling that differs. A root
/// that leads into the deny floor while its spelling does not is a policy error: `/srv/link` to
/// `/proc` would otherwise lift the floor for `/proc`, which only naming `/proc` itself may.
fn real_roots(
    field: &str,
    roots: &[PathBuf],
    floor: &DenyFloor,
    aliases: &mut Aliases,
) -> Result<Vec<PathBuf>, PolicyError> {
    let mut out = Vec::with_capacity(roots.len());
    for (i, root) in roots.iter().enumerate() {
        let real = resolve_real(root);
        if &real != root {
            if let Some(area) = floor.area_of(&real)
                && floor.area_of(root).as_ref() != Some(&area)
            {
                return Err(PolicyError::invalid(
                    format!("{field}[{i}]"),
                    format!(
                        "{} leads to {}, inside the deny floor ({}); name that place itself if \
                         it is meant",
                        root.display(),
                        real.display(),
                        area.display()
                    ),
                ));
            }
            aliases.add(root, &real);
        }
        out.push(real);
    }
    Ok(out)
}

pub(crate) fn next_generation() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// A policy from TOML with `/home/u` as home, for the unit tests of the crate.
#[cfg(test)]
pub(crate) fn test_policy(toml: &str) -> CompiledPolicy {
    CompiledPolicy::load(
        toml,
        capability_policy::PolicyFormat::Toml,
        Some(Path::new("/home/u")),
    )
    .unwrap()
}

/// The kind patterns that match exactly the kinds both lists match: each pattern of one list
/// that a pattern of the other covers. The patterns that match one kind nest (`*` covers
/// `file`, which covers `text`, which covers `text/plain`), so a kind both lists match is
/// matched by the narrower of the two patterns, which is kept.
fn intersect_kinds(theirs: &[String], mine: &[String]) -> Vec<String> {
    use crate::attachments::covers;
    let mut kept: Vec<String> = Vec::new();
    let both = theirs
        .iter()
        .filter(|t| mine.iter().any(|m| covers(m, t)))
        .chain(mine.iter().filter(|m| theirs.iter().any(|t| covers(t, m))));
    for kind in both {
        if !kept.contains(kind) {
            kept.push(kind.clone());
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_lifts_are_the_roots_inside_a_protected_area_wherever_they_are_spelled() {
        let policy = test_policy(
            r#"
id = "lifts"
[fs_reach]
read = ["/", "/home/u", "/srv/x/../../proc/cpuinfo", "/etc/sudoers.d"]
write = ["~/.ssh", "/srv/out"]
"#,
        );
        let lifts: Vec<(String, PathBuf, PathBuf)> = policy
            .floor_lifts()
            .into_iter()
            .map(|l| (l.field, l.root, l.area))
            .collect();
        let lift = |field: &str, root: &str, area: &str| {
            (field.to_owned(), PathBuf::from(root), PathBuf::from(area))
        };
        // `/` and the home directory contain protected areas and lift none of them.
        assert_eq!(
            lifts,
            [
                lift("fs_reach.read[2]", "/proc/cpuinfo", "/proc"),
                lift("fs_reach.read[3]", "/etc/sudoers.d", "/etc/sudoers*"),
                lift("fs_reach.write[0]", "/home/u/.ssh", "/home/u/.ssh"),
            ]
        );
        assert!(CompiledPolicy::none(None).floor_lifts().is_empty());
        assert!(policy.international_hosts().is_empty());
        assert!(test_policy("id = \"plain\"").floor_lifts().is_empty());
    }

    #[test]
    fn international_hosts_are_the_patterns_outside_ascii_with_their_ascii_form() {
        let policy = test_policy(
            "id = \"idn\"\n[safety.network]\nallow = [\"api.github.com\", \"\u{430}pi.github.com\"]\n\
             [escalate]\nhosts = [\"*.b\u{fc}cher.example:8443\"]\n",
        );
        let hosts: Vec<(String, String)> = policy
            .international_hosts()
            .into_iter()
            .map(|h| (h.field, h.ascii))
            .collect();
        assert_eq!(
            hosts,
            [
                (
                    "safety.network.allow[1]".to_owned(),
                    "xn--pi-6kc.github.com".to_owned()
                ),
                (
                    "escalate.hosts[0]".to_owned(),
                    "*.xn--bcher-kva.example:8443".to_owned()
                ),
            ]
        );
    }
}
