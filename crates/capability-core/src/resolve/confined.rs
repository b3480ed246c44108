//! Whether a call's resolution confines as a process's start-time confinement does: what the
//! registry asks of a tool whose code runs in a process confined once, as it started (a guarded
//! MCP server), before each call (docs/policy.md, "Tools confined once, as they start").

use std::path::PathBuf;

use capability_types::backend::{FsAccess, PathPolicy};
use capability_types::{CapabilityError, DenialCode};

use super::{ResolvedCapabilities, ResolvedHosts};

impl ResolvedCapabilities {
    /// `Ok` when `call`, this tool's resolution for one call, confines as `self`, the
    /// resolution its process was confined to as it started: the same read and write roots,
    /// the same places hidden and kept from writes, the same hosts. A process's kernel
    /// confinement and its egress proxy are fixed for its life, and what it writes of its own
    /// accord is named in no argument, so a call resolved to a narrower reach (a narrowed
    /// invocation, one held after untrusted output, another personality) could not be held to
    /// it; it is refused, saying what differs (`PATH_NOT_REACHABLE` for the files,
    /// `HOST_NOT_ALLOWED` for the hosts).
    ///
    /// ```
    /// use capability_core::{CompiledPolicy, resolve};
    /// use capability_policy::PolicyFormat;
    /// use capability_types::{FsPaths, ToolCapabilities};
    /// use std::path::Path;
    /// let caps = ToolCapabilities::none().with_fs_write(FsPaths::Paths(vec!["/srv/ws".into()]));
    /// let load = |toml: &str| CompiledPolicy::load(toml, PolicyFormat::Toml, None).unwrap();
    /// let personality = load("id = \"p\"\n[fs_reach]\nwrite = [\"/srv/ws\"]\n");
    /// let held = load("id = \"p\"\n[fs_reach]\nwrite = [\"/srv/ws\"]\ndeny_write = [\"/srv/ws/held\"]\n");
    /// let at_start = resolve("mcp__s__t", &caps, &personality, "s", Path::new("/srv/ws"));
    /// let same = resolve("mcp__s__t", &caps, &personality, "s", Path::new("/srv/ws"));
    /// let narrower = resolve("mcp__s__t", &caps, &held, "s", Path::new("/srv/ws"));
    /// assert!(at_start.confines_alike(&same).is_ok());
    /// let refused = at_start.confines_alike(&narrower).unwrap_err().to_string();
    /// assert!(refused.starts_with("PATH_NOT_REACHABLE: ") && refused.contains("/srv/ws/held"));
    /// ```
    pub fn confines_alike(&self, call: &ResolvedCapabilities) -> Result<(), CapabilityError> {
        let refused = |code: DenialCode, what: String| {
            CapabilityError::denied(
                code,
                format!(
                    "{} runs in a process confined once, as it started, and {what}; it cannot \
                     be held to this call's narrower reach (a narrowed invocation, or \
                     [after_untrusted] hold_writes once untrusted output came in), so it is not \
                     called under it",
                    call.tool
                ),
            )
        };
        let paths = |r: &ResolvedCapabilities| r.fs.as_deref().map(PathView::of);
        if let Some(what) = PathView::difference(paths(self), paths(call)) {
            return Err(refused(DenialCode::PathNotReachable, what));
        }
        if !same_hosts(self.network.as_deref(), call.network.as_deref()) {
            return Err(refused(
                DenialCode::HostNotAllowed,
                "this call may reach other hosts than those its process may reach".to_owned(),
            ));
        }
        Ok(())
    }
}

/// What a process's kernel confinement is made of, from a path policy (as
/// `capability_sandbox::SandboxPolicy::from_paths` and the places kept read-only take it), each
/// list sorted.
#[derive(PartialEq, Eq)]
struct PathView {
    read: Vec<PathBuf>,
    write: Vec<PathBuf>,
    hidden: Vec<PathBuf>,
    kept: Vec<PathBuf>,
}

impl PathView {
    fn of(paths: &super::ResolvedPaths) -> Self {
        let sorted = |mut places: Vec<PathBuf>| {
            places.sort();
            places.dedup();
            places
        };
        PathView {
            read: sorted(paths.roots(FsAccess::Read)),
            write: sorted(paths.roots(FsAccess::Write)),
            hidden: sorted(paths.hidden()),
            kept: sorted(paths.runs_later_places()),
        }
    }

    /// What `call` confines otherwise than `start`, in words; `None` when they are alike.
    fn difference(start: Option<Self>, call: Option<Self>) -> Option<String> {
        let (start, call) = match (start, call) {
            (None, None) => return None,
            (Some(start), Some(call)) => (start, call),
            _ => return Some("this call's file reach is not the one it started with".to_owned()),
        };
        if start == call {
            return None;
        }
        let first_new = |at_start: &[PathBuf], now: &[PathBuf]| {
            now.iter().find(|p| !at_start.contains(p)).cloned()
        };
        if let Some(place) = first_new(&start.kept, &call.kept) {
            return Some(format!(
                "this call keeps {} from writes, which that process may still write",
                place.display()
            ));
        }
        if let Some(place) = first_new(&start.hidden, &call.hidden) {
            return Some(format!(
                "this call keeps {} out of reach, which that process may still reach",
                place.display()
            ));
        }
        if let Some(root) = first_new(&call.write, &start.write) {
            return Some(format!(
                "that process may write {}, which this call may not",
                root.display()
            ));
        }
        if let Some(root) = first_new(&call.read, &start.read) {
            return Some(format!(
                "that process may read {}, which this call may not",
                root.display()
            ));
        }
        Some("this call's file reach is not the one it started with".to_owned())
    }
}

/// Whether two host sets allow and refuse the same hosts, written the same way.
fn same_hosts(start: Option<&ResolvedHosts>, call: Option<&ResolvedHosts>) -> bool {
    match (start, call) {
        (None, None) => true,
        (Some(a), Some(b)) => {
            a.allow.patterns() == b.allow.patterns()
                && a.deny.patterns() == b.deny.patterns()
                && a.never_restricted == b.never_restricted
        }
        _ => false,
    }
}
