//! Whether a call's resolution confines as a process's start-time confinement does: what the
//! registry asks of a tool whose code runs in a process confined once, as it started (a guarded
//! MCP server), before each call (docs/policy.md, "Tools confined once, as they start").

use std::path::PathBuf;

use capability_types::backend::{FsAccess, PathPolicy};
use capability_types::{CapabilityError, DenialCode};

use super::{ResolvedCapabilities, ResolvedHosts};

impl ResolvedCapabilities {
    /// `Ok` when `call`, this tool's resolution for one call, confines no more narrowly than
    /// `self`, the resolution its process was confined to as it started: every root of the
    /// process is the call's too, every place the call hides or keeps from writes the process
    /// already cannot reach or write, every host of the process the call's too and none it
    /// refuses. A process's kernel
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
                "that process may reach hosts this call may not".to_owned(),
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

    /// Where `call` confines more narrowly than `start`, in words; `None` when it does not:
    /// every root the process has is one the call has (or lies within one), and every place
    /// the call hides or keeps from writes beneath the process's roots is one the process
    /// already cannot reach or write (a place it was started with hidden or kept read-only, or
    /// one within such a place). A call wider than the process's confinement is not refused:
    /// the process is held to less than the call allows.
    fn difference(start: Option<Self>, call: Option<Self>) -> Option<String> {
        let (start, call) = match (start, call) {
            (None, None) | (None, Some(_)) => return None,
            (Some(_), None) => {
                return Some("this call has no file reach, and that process has".to_owned());
            }
            (Some(start), Some(call)) => (start, call),
        };
        if start == call {
            return None;
        }
        let within_any = |place: &PathBuf, places: &[PathBuf]| {
            places
                .iter()
                .any(|p| crate::matching::path::is_within(place, p))
        };
        if let Some(root) = start.write.iter().find(|r| !within_any(r, &call.write)) {
            return Some(format!(
                "that process may write {}, which this call may not",
                root.display()
            ));
        }
        if let Some(root) = start.read.iter().find(|r| !within_any(r, &call.read)) {
            return Some(format!(
                "that process may read {}, which this call may not",
                root.display()
            ));
        }
        let roots: Vec<PathBuf> = start.read.iter().chain(&start.write).cloned().collect();
        // Within a root, or above one (a place that holds a whole root).
        let touches = |place: &PathBuf| {
            roots.iter().any(|r| {
                crate::matching::path::is_within(place, r)
                    || crate::matching::path::is_within(r, place)
            })
        };
        if let Some(place) = call
            .hidden
            .iter()
            .find(|h| touches(h) && !within_any(h, &start.hidden))
        {
            return Some(format!(
                "this call keeps {} out of reach, which that process may still reach",
                place.display()
            ));
        }
        let unwritable: Vec<PathBuf> = start.hidden.iter().chain(&start.kept).cloned().collect();
        if let Some(place) = call
            .kept
            .iter()
            .find(|k| within_any(k, &start.write) && !within_any(k, &unwritable))
        {
            return Some(format!(
                "this call keeps {} from writes, which that process may still write",
                place.display()
            ));
        }
        None
    }
}

/// Whether the call's host set is no narrower than the process's: each pattern the process's
/// proxy allows is the call's too (as written), the call refuses no pattern the process's does
/// not, and it keeps no restricted address the process's reaches.
fn same_hosts(start: Option<&ResolvedHosts>, call: Option<&ResolvedHosts>) -> bool {
    match (start, call) {
        (None, _) => true,
        (Some(a), Some(b)) => {
            a.allow
                .patterns()
                .iter()
                .all(|p| b.allow.patterns().contains(p))
                && b.deny
                    .patterns()
                    .iter()
                    .all(|p| a.deny.patterns().contains(p))
                && (a.never_restricted || !b.never_restricted)
        }
        (Some(_), None) => false,
    }
}
