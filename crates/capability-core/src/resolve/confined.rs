//! Whether a call's resolution confines as a process's start-time confinement does: what the
//! registry asks of a tool whose code runs in a process confined once, as it started (a guarded
//! MCP server), before each call (docs/policy.md, "Tools confined once, as they start").

use std::path::PathBuf;

use capability_types::backend::{FsAccess, PathPolicy};
use capability_types::{CapabilityError, DenialCode};

use super::{Escalation, ResolvedCapabilities, ResolvedHosts, ResolvedProcess};

impl ResolvedCapabilities {
    /// `Ok` when `call`, this tool's resolution for one call, confines no more narrowly than
    /// `self`, the resolution its process was confined to as it started: every root of the
    /// process is the call's too, every place the call hides or keeps from writes the process
    /// already cannot reach or write, every host of the process the call's too and none it
    /// refuses, every binary, argument pattern and variable of its process rules the call's
    /// too, every secret it was handed one the call declares, and nothing the call would ask
    /// approval for (`[escalate]`) that the process does without asking. A process's kernel
    /// confinement and its egress proxy are fixed for its life, and what it writes of its own
    /// accord is named in no argument, so a call resolved to a narrower reach (a narrowed
    /// invocation, one held after untrusted output, another personality) could not be held to
    /// it; it is refused, saying what differs (`PATH_NOT_REACHABLE` for the files,
    /// `HOST_NOT_ALLOWED` for the hosts, `BINARY_NOT_ALLOWED` for the process rules,
    /// `SECRET_NOT_DECLARED` for the secrets, `ARGS_NOT_ALLOWED` for argument patterns to
    /// approve).
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
        // What the call would ask approval for, that process does without asking.
        let escalations = [
            (
                DenialCode::PathNotReachable,
                Asked::Writes,
                self.fs.as_deref().map(|p| &p.escalate),
                call.fs.as_deref().map(|p| &p.escalate),
            ),
            (
                DenialCode::HostNotAllowed,
                Asked::Hosts,
                self.network.as_deref().map(|h| &h.escalate),
                call.network.as_deref().map(|h| &h.escalate),
            ),
            (
                DenialCode::ArgsNotAllowed,
                Asked::Args,
                self.process.as_deref().map(|p| &p.escalate),
                call.process.as_deref().map(|p| &p.escalate),
            ),
        ];
        for (code, which, start, now) in escalations {
            if let (Some(start), Some(now)) = (start, now)
                && let Some(what) = asks_more(start, now, which)
            {
                return Err(refused(code, what));
            }
        }
        if !same_hosts(self.network.as_deref(), call.network.as_deref()) {
            return Err(refused(
                DenialCode::HostNotAllowed,
                "that process may reach hosts this call may not".to_owned(),
            ));
        }
        if let Some(what) = process_difference(self.process.as_deref(), call.process.as_deref()) {
            return Err(refused(DenialCode::BinaryNotAllowed, what));
        }
        let handed = self.secrets.as_deref().unwrap_or_default();
        let readable = call.secrets.as_deref().unwrap_or_default();
        if let Some(secret) = handed.iter().find(|s| !readable.contains(s)) {
            return Err(refused(
                DenialCode::SecretNotDeclared,
                format!(
                    "that process was handed the secret {secret}, which this call may not read"
                ),
            ));
        }
        Ok(())
    }
}

/// The part of an escalation that concerns one category: hosts, written places, arguments.
#[derive(Clone, Copy)]
enum Asked {
    Hosts,
    Writes,
    Args,
}

/// What `call` asks approval for (`[escalate]`, a narrowing's among it) in `which` that `start`
/// does not: the process, started under `start`, does it without asking.
fn asks_more(start: &Escalation, call: &Escalation, which: Asked) -> Option<String> {
    let what = match which {
        Asked::Hosts => call
            .hosts
            .patterns()
            .iter()
            .find(|p| !start.hosts.patterns().contains(p))
            .map(|p| format!("the hosts {p}")),
        Asked::Writes => call
            .write
            .iter()
            .find(|w| !start.write.contains(w))
            .map(|place| format!("writes beneath {}", place.display())),
        Asked::Args => call
            .args
            .iter()
            .find(|a| !start.args.iter().any(|b| b.as_str() == a.as_str()))
            .map(|pattern| format!("the arguments `{}`", pattern.as_str())),
    }?;
    Some(format!(
        "this call asks approval for {what}, which that process does without asking"
    ))
}

/// Where the call's process rules are narrower than those the process started under: a binary
/// it may run that the call may not, an argument pattern or a variable the call refuses that it
/// does not, another confinement mode for its children.
fn process_difference(
    start: Option<&ResolvedProcess>,
    call: Option<&ResolvedProcess>,
) -> Option<String> {
    let (start, call) = match (start, call) {
        (None, _) => return None,
        (Some(_), None) => {
            return Some("this call may start no program, and that process may".to_owned());
        }
        (Some(start), Some(call)) => (start, call),
    };
    if let Some(binary) = start.binaries.iter().find(|b| !call.binaries.contains(b)) {
        return Some(format!(
            "that process may run {binary}, which this call may not"
        ));
    }
    if let Some(pattern) = call
        .deny_args
        .iter()
        .find(|p| !start.deny_args.iter().any(|q| q.as_str() == p.as_str()))
    {
        return Some(format!(
            "this call refuses the arguments `{}`, which that process may still pass",
            pattern.as_str()
        ));
    }
    if let Some(name) = start.env_allow.iter().find(|v| !call.env_allow.contains(v)) {
        return Some(format!(
            "that process may hand its children {name}, which this call may not"
        ));
    }
    (start.sandbox != call.sandbox)
        .then(|| "this call confines children otherwise than that process does".to_owned())
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
