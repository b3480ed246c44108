//! Call-time resolution: the intersection of a declaration with the personality
//! ([`Intersected`], cached per policy in [`ResolutionCache`]), carried per call into the policy
//! objects handed to backends.
//!
//! - [`backends`]: the fail-closed guard and building scoped objects from the factories;
//! - [`scope`]: the policy objects themselves, which answer every call-time check (hosts,
//!   paths, binaries, argv, environment) with the personality's deny rules and escalation;
//! - [`confined`]: whether a call's resolution confines as a process confined once, as it
//!   started, is confined.

mod backends;
mod confined;
mod memo;
mod scope;

pub use self::backends::{
    Backend, CapabilityBackends, ScopedObjects, build_scoped, check_backends, needs_backends,
};
pub use self::scope::{ResolvedHosts, ResolvedPaths, ResolvedProcess};

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use capability_policy::RestrictedAddresses;
use capability_types::backend::{SandboxMode, StorageGrant};
use capability_types::{CapabilityError, FsPaths, SecretRef, StorageScope, ToolCapabilities};

use crate::matching::binary::{ArgvPattern, intersect_binaries};
use crate::matching::host::{HostSet, intersect_hosts};
use crate::matching::path::{DenyFloor, intersect_paths, is_within_any_case};
use crate::policy::CompiledPolicy;
use crate::realpath::{Aliases, LaterAlias};

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
    /// `restricted_addresses = "never"`.
    never_restricted: bool,
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
    deny_write: Arc<[PathBuf]>,
    apart: Arc<[PathBuf]>,
    floor: Arc<DenyFloor>,
    aliases: Arc<Aliases>,
    later_aliases: Arc<[LaterAlias]>,
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
                                .any(|d| is_within_any_case(d, r) || is_within_any_case(r, d))
                    })
                    .collect()
            };
            PathRoots {
                read_guarded: guarded(&read),
                write_guarded: guarded(&write),
                read,
                write,
                deny: Arc::clone(&policy.fs_deny),
                deny_write: Arc::clone(&policy.fs_deny_write),
                apart: Arc::clone(&policy.fs_apart),
                floor: Arc::clone(&policy.floor),
                aliases: Arc::clone(&policy.aliases),
                later_aliases: Arc::clone(&policy.later_aliases),
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
        let never_restricted = policy.restricted_addresses == RestrictedAddresses::Never;
        let hosts = network
            .as_ref()
            .map(|(allow, deny): &(Arc<HostSet>, Arc<HostSet>)| {
                Arc::new(ResolvedHosts {
                    allow: Arc::clone(allow),
                    deny: Arc::clone(deny),
                    escalate: escalate.clone(),
                    never_restricted,
                })
            });
        Self {
            tool: tool.to_owned(),
            network,
            hosts,
            never_restricted,
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
                deny_write: Arc::clone(&r.deny_write),
                apart: Arc::clone(&r.apart),
                floor: Arc::clone(&r.floor),
                aliases: Arc::clone(&r.aliases),
                later_aliases: Arc::clone(&r.later_aliases),
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
                    never_restricted: self.never_restricted,
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
#[derive(Debug)]
pub struct ResolutionCache {
    /// Unique in the process: a thread's memo of plans tells caches apart by it.
    id: u64,
    entries: Mutex<HashMap<CacheKey, CacheEntry>>,
    /// Per tool, the plan of the last context it was resolved in.
    plans: Mutex<HashMap<String, PlanSlot, crate::registry::ByName>>,
}

impl Default for ResolutionCache {
    fn default() -> Self {
        Self {
            id: crate::policy::next_generation(),
            entries: Mutex::default(),
            plans: Mutex::default(),
        }
    }
}

/// An admission plan: what one tool gets in one context — a compiled policy, a set of
/// backends, a session and a working directory. Everything in it depends on those alone, so a
/// call in the same context reuses it and does only what depends on its arguments
/// (docs/decisions.md, "The per-call path").
#[derive(Debug)]
#[non_exhaustive]
pub struct Plan {
    /// The declaration resolved in the context.
    pub resolved: Arc<ResolvedCapabilities>,
    /// The scoped objects the backends built from it.
    pub scoped: ScopedObjects,
    /// The reach without escalation patterns, for the argument gate (`None`: no reach).
    pub(crate) gate_reach: Option<Arc<ResolvedPaths>>,
}

impl Plan {
    /// The plan of a tool that declares nothing: the same in every context (no scoped object,
    /// no reach for the argument gate), so the registry makes it once, when the tool is
    /// registered, and no call of the tool consults the cache.
    pub(crate) fn undeclared(tool: &str) -> Self {
        Plan {
            resolved: Arc::new(ResolvedCapabilities {
                tool: tool.to_owned(),
                network: None,
                fs: None,
                secrets: None,
                process: None,
                storage: None,
            }),
            scoped: ScopedObjects::default(),
            gate_reach: None,
        }
    }
}

/// A declaration as a caller of [`ResolutionCache::plan_shared`] holds it.
#[derive(Clone, Copy)]
pub(crate) enum Declaration<'a> {
    /// Compared field by field.
    Borrowed(&'a ToolCapabilities),
    /// Compared by address first.
    Shared(&'a Arc<ToolCapabilities>),
}

impl Declaration<'_> {
    fn caps(&self) -> &ToolCapabilities {
        match self {
            Declaration::Borrowed(caps) => caps,
            Declaration::Shared(caps) => caps,
        }
    }

    /// Whether `held` is this declaration.
    fn is(&self, held: &Arc<ToolCapabilities>) -> bool {
        match self {
            Declaration::Shared(caps) if Arc::ptr_eq(caps, held) => true,
            _ => **held == *self.caps(),
        }
    }

    fn into_shared(self) -> Arc<ToolCapabilities> {
        match self {
            Declaration::Borrowed(caps) => Arc::new(caps.clone()),
            Declaration::Shared(caps) => Arc::clone(caps),
        }
    }
}

/// A plan and the context it was made for.
#[derive(Debug)]
struct PlanSlot {
    generation: u64,
    backends: u64,
    session_id: Box<str>,
    working_dir: Box<Path>,
    /// Held, so that a caller's `Arc` compared by address can never be a new declaration at
    /// an old address.
    caps: Arc<ToolCapabilities>,
    plan: Arc<Plan>,
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

    /// [`resolve_capabilities`] through the cache: the scoped objects of the tool's
    /// [`plan`](Self::plan).
    pub fn resolve_capabilities(
        &self,
        tool: &str,
        caps: &ToolCapabilities,
        policy: &CompiledPolicy,
        session_id: &str,
        working_dir: &Path,
        backends: Option<&CapabilityBackends>,
    ) -> Result<ScopedObjects, CapabilityError> {
        self.plan(tool, caps, policy, session_id, working_dir, backends)
            .map(|plan| plan.scoped.clone())
    }

    /// The guard, then the [`Plan`] of `tool` in this context: the one made last time when the
    /// context (policy generation, backends, session, working directory) and the declaration
    /// are the same, a new one otherwise. A failure to build is never kept.
    pub fn plan(
        &self,
        tool: &str,
        caps: &ToolCapabilities,
        policy: &CompiledPolicy,
        session_id: &str,
        working_dir: &Path,
        backends: Option<&CapabilityBackends>,
    ) -> Result<Arc<Plan>, CapabilityError> {
        self.plan_shared(
            tool,
            Declaration::Borrowed(caps),
            policy,
            session_id,
            working_dir,
            backends,
        )
    }

    /// [`plan_shared`](Self::plan_shared) for the registry, whose entries hold their
    /// declarations and whose contexts share their session and directory: first from the
    /// calling thread's memo of the plans it was last handed, without a lock; on a miss, from
    /// the cache, then remembered (docs/decisions.md, "The per-call path").
    pub(crate) fn plan_remembered(
        &self,
        tool: &str,
        caps: &Arc<ToolCapabilities>,
        policy: &CompiledPolicy,
        session_id: &Arc<str>,
        working_dir: &Arc<Path>,
        backends: Option<&CapabilityBackends>,
    ) -> Result<Arc<Plan>, CapabilityError> {
        let key = memo::Key {
            cache: self.id,
            caps,
            generation: policy.generation,
            backends: backends.map_or(0, |b| b.generation),
            session_id,
            working_dir,
        };
        if let Some(plan) = memo::recall(&key) {
            return Ok(plan);
        }
        let plan = self.plan_shared(
            tool,
            Declaration::Shared(caps),
            policy,
            session_id,
            working_dir,
            backends,
        )?;
        memo::remember(&key, &plan);
        Ok(plan)
    }

    /// [`plan`](Self::plan) for a declaration the caller keeps in an `Arc` (the registry): the
    /// same declaration is then recognised by address before it is compared field by field.
    pub(crate) fn plan_shared(
        &self,
        tool: &str,
        declaration: Declaration<'_>,
        policy: &CompiledPolicy,
        session_id: &str,
        working_dir: &Path,
        backends: Option<&CapabilityBackends>,
    ) -> Result<Arc<Plan>, CapabilityError> {
        let caps = declaration.caps();
        check_backends(tool, caps, backends)?;
        let backends_generation = backends.map_or(0, |b| b.generation);
        {
            let plans = self.plans.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(slot) = plans.get(tool)
                && slot.generation == policy.generation
                && slot.backends == backends_generation
                && *slot.session_id == *session_id
                && *slot.working_dir == *working_dir
                && declaration.is(&slot.caps)
            {
                return Ok(Arc::clone(&slot.plan));
            }
        }
        let resolved = self
            .intersect(tool, caps, policy)
            .for_call(session_id, working_dir);
        let scoped = build_scoped(&resolved, backends)?;
        let plan = Arc::new(Plan {
            gate_reach: resolved
                .fs
                .as_deref()
                .map(ResolvedPaths::without_escalation),
            resolved: Arc::new(resolved),
            scoped,
        });
        let mut plans = self.plans.lock().unwrap_or_else(PoisonError::into_inner);
        if plans.len() >= Self::MAX_ENTRIES {
            plans.clear();
        }
        plans.insert(
            tool.to_owned(),
            PlanSlot {
                generation: policy.generation,
                backends: backends_generation,
                session_id: session_id.into(),
                working_dir: working_dir.into(),
                caps: declaration.into_shared(),
                plan: Arc::clone(&plan),
            },
        );
        Ok(plan)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::test_policy as policy;
    use capability_types::backend::HostPolicy;

    #[test]
    fn the_plan_made_at_registration_for_no_declaration_is_what_resolution_makes() {
        // Under a wide personality and under none: nothing declared, nothing granted.
        for text in [
            "id = \"wide\"\n[fs_reach]\nread = [\"/\"]\n[safety.network]\nallow = [\"*\"]\n",
            "id = \"narrow\"\ntoolset = []\n",
        ] {
            let resolved = resolve(
                "t",
                &ToolCapabilities::none(),
                &policy(text),
                "s",
                Path::new("/w"),
            );
            let plan = Plan::undeclared("t");
            assert_eq!(plan.resolved.tool, resolved.tool);
            assert!(resolved.network.is_none() && plan.resolved.network.is_none());
            assert!(resolved.fs.is_none() && plan.resolved.fs.is_none());
            assert!(resolved.secrets.is_none() && plan.resolved.secrets.is_none());
            assert!(resolved.process.is_none() && plan.resolved.process.is_none());
            assert!(resolved.storage.is_none() && plan.resolved.storage.is_none());
            assert!(plan.gate_reach.is_none());
            let built = build_scoped(&resolved, None).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(format!("{built:?}"), format!("{:?}", plan.scoped));
        }
    }

    #[test]
    fn the_cache_serves_one_policy_generation_and_one_declaration() {
        let cache = ResolutionCache::new();
        let caps = ToolCapabilities::none().with_network(["*"]);
        let p1 = policy("id = \"a\"\n[safety.network]\nallow = [\"a.example.com\"]\n");
        let first = cache.intersect("t", &caps, &p1);
        assert!(
            Arc::ptr_eq(&first, &cache.intersect("t", &caps, &p1)),
            "a hit"
        );
        let p2 = policy("id = \"a\"\n[safety.network]\nallow = [\"b.example.com\"]\n");
        let second = cache.intersect("t", &caps, &p2);
        assert!(
            !Arc::ptr_eq(&first, &second),
            "a new policy is a new generation"
        );
        let hosts = second.for_call("s", Path::new("/")).network.unwrap();
        assert!(hosts.check("b.example.com", 443).is_ok());
        assert!(hosts.check("a.example.com", 443).is_err());
        let other = ToolCapabilities::none().with_network(["c.example.com"]);
        assert!(
            !Arc::ptr_eq(&second, &cache.intersect("t", &other, &p2)),
            "a new declaration"
        );
    }

    #[test]
    fn storage_scopes_name_their_namespace() {
        let p = policy("id = \"pers\"\n");
        let ns = |scope| {
            let caps = ToolCapabilities::none().with_storage(scope, None);
            resolve("tool", &caps, &p, "sess", Path::new("/"))
                .storage
                .unwrap()
                .namespace
        };
        assert_eq!(ns(StorageScope::ToolPrivate), "tool:tool");
        assert_eq!(ns(StorageScope::Session), "session:sess");
        assert_eq!(ns(StorageScope::Personality), "personality:pers");
        let none = CompiledPolicy::none(None);
        let caps = ToolCapabilities::none().with_storage(StorageScope::Personality, None);
        let storage = resolve("tool", &caps, &none, "sess", Path::new("/"))
            .storage
            .unwrap();
        assert_eq!(
            storage.namespace, "session:sess",
            "no personality: the session"
        );
    }

    #[test]
    fn undeclared_categories_resolve_to_nothing() {
        let p = policy(
            "id = \"p\"\n[fs_reach]\nread = [\"/srv\"]\n[safety.network]\nallow = [\"*\"]\n",
        );
        let r = resolve("t", &ToolCapabilities::none(), &p, "s", Path::new("/"));
        assert!(r.network.is_none() && r.fs.is_none() && r.process.is_none());
        assert!(r.secrets.is_none() && r.storage.is_none());
    }
}
