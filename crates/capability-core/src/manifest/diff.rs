//! The diff of two manifests: every way the new one allows more than the old, found by
//! coverage with the runtime's matchers, never by comparing strings (docs/review.md).

use std::fmt;
use std::path::PathBuf;

use capability_types::{FsPaths, StorageScope};
use serde::{Deserialize, Serialize};

use super::{GuardedServer, Manifest};
use crate::matching::host::{HostPattern, HostSet};
use crate::matching::path::is_within;

/// What kind of widening a change is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub enum WideningCode {
    /// A tool that was not there.
    #[serde(rename = "tool.added")]
    ToolAdded,
    /// Hosts not covered before.
    #[serde(rename = "network.widened")]
    Network,
    /// Readable paths not covered before.
    #[serde(rename = "fs.read.widened")]
    FsRead,
    /// Writable paths not covered before.
    #[serde(rename = "fs.write.widened")]
    FsWrite,
    /// Secret refs not covered before.
    #[serde(rename = "secrets.widened")]
    Secrets,
    /// Binaries not allowed before.
    #[serde(rename = "process.widened")]
    Process,
    /// Storage newly declared, or a wider scope.
    #[serde(rename = "storage.widened")]
    Storage,
    /// The toolset admits tools it did not.
    #[serde(rename = "toolset.widened")]
    Toolset,
    /// Attachment kinds not covered before.
    #[serde(rename = "attachments.widened")]
    Attachments,
    /// A deny path, deny host pattern or `deny_args` pattern no longer in force.
    #[serde(rename = "restriction.removed")]
    Restriction,
    /// Something that needed approval no longer does.
    #[serde(rename = "escalation.removed")]
    Escalation,
    /// A child may be given a variable it could not.
    #[serde(rename = "env.widened")]
    Environment,
    /// Children no longer run under kernel confinement.
    #[serde(rename = "sandbox.off")]
    Sandbox,
    /// A constraint dropped or relaxed.
    #[serde(rename = "constraints.loosened")]
    Constraints,
    /// A guarded server's `runtime` covers places it did not.
    #[serde(rename = "runtime.widened")]
    Runtime,
    /// A guarded server runs another program.
    #[serde(rename = "command.changed")]
    Command,
    /// A guarded server offers tools its allow list left out.
    #[serde(rename = "tools.widened")]
    ServerTools,
    /// A guarded server's tools are no longer pinned, or pinned as something else, or pinned
    /// where they were not: the model may be shown descriptions it was not.
    #[serde(rename = "pins.changed")]
    Pins,
}

impl WideningCode {
    /// The code as written in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            WideningCode::ToolAdded => "tool.added",
            WideningCode::Network => "network.widened",
            WideningCode::FsRead => "fs.read.widened",
            WideningCode::FsWrite => "fs.write.widened",
            WideningCode::Secrets => "secrets.widened",
            WideningCode::Process => "process.widened",
            WideningCode::Storage => "storage.widened",
            WideningCode::Toolset => "toolset.widened",
            WideningCode::Attachments => "attachments.widened",
            WideningCode::Restriction => "restriction.removed",
            WideningCode::Escalation => "escalation.removed",
            WideningCode::Environment => "env.widened",
            WideningCode::Sandbox => "sandbox.off",
            WideningCode::Constraints => "constraints.loosened",
            WideningCode::Runtime => "runtime.widened",
            WideningCode::Command => "command.changed",
            WideningCode::ServerTools => "tools.widened",
            WideningCode::Pins => "pins.changed",
        }
    }
}

/// One widening found by [`diff`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Widening {
    /// What kind.
    pub code: WideningCode,
    /// The tool (empty for the toolset).
    pub tool: String,
    /// Whether it is in the declaration or the effective access.
    pub layer: String,
    /// What is new, naming the values.
    pub detail: String,
}

impl fmt::Display for Widening {
    /// One line. The tool's name and the detail come from the manifests, which a change
    /// proposes: they are [`shown`](crate::shown) escaped, so that terminal controls or a
    /// bidirectional override in them cannot hide or disguise a widening from its reviewer.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let detail = crate::shown(&self.detail);
        if self.tool.is_empty() {
            write!(f, "{}: {detail}", self.code.as_str())
        } else {
            write!(
                f,
                "{}: {} ({}): {detail}",
                self.code.as_str(),
                crate::shown(&self.tool),
                self.layer,
            )
        }
    }
}

/// How a guarded server's `new` configuration widens `old` (absent: a manifest made before
/// servers were recorded, which has nothing to compare but the runtime), as (code, detail).
fn server_widenings(
    old: Option<&GuardedServer>,
    new: &GuardedServer,
) -> Vec<(WideningCode, String)> {
    let mut out = Vec::new();
    let Some(old) = old else {
        if !new.runtime.is_empty() {
            let all: Vec<String> = new
                .runtime
                .iter()
                .map(|p| p.display().to_string())
                .collect();
            out.push((WideningCode::Runtime, all.join(", ")));
        }
        return out;
    };
    let added = uncovered_paths(&old.runtime, &new.runtime);
    if !added.is_empty() {
        out.push((WideningCode::Runtime, added.join(", ")));
    }
    if old.command != new.command {
        out.push((
            WideningCode::Command,
            format!("{} -> {}", old.command.display(), new.command.display()),
        ));
    }
    match (&old.tools, &new.tools) {
        (Some(o), None) => out.push((
            WideningCode::ServerTools,
            format!("every tool the server lists (only {} before)", o.join(", ")),
        )),
        (Some(o), Some(n)) => {
            let added: Vec<&str> = n
                .iter()
                .filter(|t| !o.contains(t))
                .map(String::as_str)
                .collect();
            if !added.is_empty() {
                out.push((WideningCode::ServerTools, added.join(", ")));
            }
        }
        (None, _) => {}
    }
    match (&old.pins, &new.pins) {
        (Some(o), None) => out.push((
            WideningCode::Pins,
            format!(
                "every tool the server lists, as it describes it (pinned before: {})",
                o.keys().map(String::as_str).collect::<Vec<_>>().join(", ")
            ),
        )),
        (Some(o), Some(n)) => {
            let changed: Vec<String> = n
                .iter()
                .filter_map(|(tool, pin)| match o.get(tool) {
                    None => Some(format!("{tool} pinned as {pin}")),
                    Some(before) if before != pin => Some(format!("{tool}: {before} -> {pin}")),
                    Some(_) => None,
                })
                .collect();
            if !changed.is_empty() {
                out.push((WideningCode::Pins, changed.join(", ")));
            }
        }
        (None, _) => {}
    }
    let unchecked: Vec<&str> = old
        .path_arguments
        .iter()
        .filter(|a| !new.path_arguments.contains(a))
        .map(String::as_str)
        .collect();
    if !unchecked.is_empty() {
        out.push((
            WideningCode::Restriction,
            format!("path_arguments no longer: {}", unchecked.join(", ")),
        ));
    }
    out
}

/// Host patterns of `new` not covered by any of `old` (an unparsable one counts as new unless the
/// very same text is in `old`), as
/// a reviewer is shown them: a pattern with letters outside ASCII followed by its ASCII form.
pub(crate) fn uncovered_hosts(old: &[String], new: &[String]) -> Vec<String> {
    // Indexed: a manifest can list tens of thousands of hosts on each side.
    let parsed = HostSet::new(old.iter().filter_map(|p| HostPattern::parse(p).ok()));
    let texts: std::collections::HashSet<&str> = old.iter().map(String::as_str).collect();
    new.iter()
        .filter(|n| match HostPattern::parse(n) {
            // What it means is unknown, so only the very same text is not new.
            Err(_) => !texts.contains(n.as_str()),
            Ok(n) => !parsed.covers(&n),
        })
        .map(|n| crate::matching::host::shown_pattern(n))
        .collect()
}

/// The kind patterns of `new` that no pattern of `old` covers.
fn uncovered_kinds(old: &[String], new: &[String]) -> Vec<String> {
    new.iter()
        .filter(|k| !old.iter().any(|o| crate::attachments::covers(o, k)))
        .cloned()
        .collect()
}

/// Paths of `new` not beneath any of `old`, as shown in a widening.
pub(crate) fn uncovered_paths(old: &[PathBuf], new: &[PathBuf]) -> Vec<String> {
    // A path with `..` is not beneath the place it starts with (`/srv/data/../../etc` is
    // `/etc` to the kernel), and a relative one is beneath nothing: each counts as new unless
    // the very same text was there, as an unparsable host pattern does. Registration refuses
    // both; a manifest made by hand can hold them.
    let plain = |p: &PathBuf| {
        p.is_absolute()
            && !p
                .components()
                .any(|c| matches!(c, std::path::Component::ParentDir))
    };
    new.iter()
        .filter(|n| {
            if plain(n) {
                !old.iter().any(|o| is_within(n, o))
            } else {
                !old.contains(n)
            }
        })
        .map(|p| p.display().to_string())
        .collect()
}

/// The widening of one declared path list: `from-personality` replacing explicit paths widens;
/// explicit paths must lie inside old ones.
fn fs_widening(old: &Option<FsPaths>, new: &Option<FsPaths>) -> Option<String> {
    match (old, new) {
        (_, None) => None,
        (None, Some(_)) => Some("newly declared".to_owned()),
        (Some(FsPaths::FromPersonality), Some(_)) => None,
        (Some(FsPaths::Paths(_)), Some(FsPaths::FromPersonality)) => {
            Some("from-personality replaces an explicit list".to_owned())
        }
        (Some(FsPaths::Paths(o)), Some(FsPaths::Paths(n))) => {
            let added = uncovered_paths(o, n);
            (!added.is_empty()).then(|| added.join(", "))
        }
    }
}

fn scope_rank(scope: StorageScope) -> u8 {
    match scope {
        StorageScope::ToolPrivate => 0,
        StorageScope::Session => 1,
        StorageScope::Personality => 2,
    }
}

/// Reports every way `new` allows more than `old`, by coverage: replacing `/srv/uploads` with
/// `/srv` widens; replacing `/srv` with `/srv/uploads` does not; adding `api.github.com` next to
/// `*.github.com` does not. Narrowings are not reported.
pub fn diff(old: &Manifest, new: &Manifest) -> Vec<Widening> {
    let mut out = Vec::new();
    let mut push = |code, tool: &str, layer: &str, detail: String| {
        out.push(Widening {
            code,
            tool: tool.to_owned(),
            layer: layer.to_owned(),
            detail,
        });
    };
    match (&old.toolset, &new.toolset) {
        (Some(_), None) if old.personality.is_some() || new.personality.is_some() => {
            push(
                WideningCode::Toolset,
                "",
                "toolset",
                "the toolset was removed: every tool may run".to_owned(),
            );
        }
        (Some(o), Some(n)) => {
            let added: Vec<&String> = n.iter().filter(|t| !o.contains(t)).collect();
            if !added.is_empty() {
                let list = added
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ");
                push(
                    WideningCode::Toolset,
                    "",
                    "toolset",
                    format!("admits {list}"),
                );
            }
        }
        _ => {}
    }
    for (name, entry) in &new.tools {
        let Some(before) = old.tools.get(name) else {
            push(
                WideningCode::ToolAdded,
                name,
                "declaration",
                "a new tool".to_owned(),
            );
            continue;
        };
        if let Some(n) = &entry.server {
            for (code, detail) in server_widenings(before.server.as_ref(), n) {
                push(code, name, "server", detail);
            }
        }
        let (o, n) = (&before.declaration, &entry.declaration);
        match (&o.network, &n.network) {
            (None, Some(_)) => push(
                WideningCode::Network,
                name,
                "declaration",
                "network newly declared".to_owned(),
            ),
            (Some(o), Some(n)) => {
                let added = uncovered_hosts(&o.allowed_hosts, &n.allowed_hosts);
                if !added.is_empty() {
                    push(WideningCode::Network, name, "declaration", added.join(", "));
                }
            }
            _ => {}
        }
        let (or, nr) = (
            o.fs_reach.clone().unwrap_or_default(),
            n.fs_reach.clone().unwrap_or_default(),
        );
        if let Some(d) = fs_widening(&or.read, &nr.read) {
            push(WideningCode::FsRead, name, "declaration", d);
        }
        if let Some(d) = fs_widening(&or.write, &nr.write) {
            push(WideningCode::FsWrite, name, "declaration", d);
        }
        match (&o.secrets, &n.secrets) {
            (None, Some(_)) => push(
                WideningCode::Secrets,
                name,
                "declaration",
                "secrets newly declared".to_owned(),
            ),
            (Some(o), Some(n)) => {
                let added: Vec<String> = n
                    .iter()
                    .filter(|r| !o.iter().any(|x| r.is_covered_by(x)))
                    .map(ToString::to_string)
                    .collect();
                if !added.is_empty() {
                    push(WideningCode::Secrets, name, "declaration", added.join(", "));
                }
            }
            _ => {}
        }
        match (&o.process, &n.process) {
            (None, Some(_)) => push(
                WideningCode::Process,
                name,
                "declaration",
                "process newly declared".to_owned(),
            ),
            (Some(o), Some(n)) => {
                let star = o.allowed_binaries.iter().any(|b| b == "*");
                let added: Vec<&String> = n
                    .allowed_binaries
                    .iter()
                    .filter(|b| !star && !o.allowed_binaries.contains(b))
                    .collect();
                if !added.is_empty() {
                    push(
                        WideningCode::Process,
                        name,
                        "declaration",
                        added
                            .iter()
                            .map(|s| s.as_str())
                            .collect::<Vec<_>>()
                            .join(", "),
                    );
                }
            }
            _ => {}
        }
        match (&o.storage, &n.storage) {
            (None, Some(s)) => push(
                WideningCode::Storage,
                name,
                "declaration",
                format!("storage newly declared ({:?})", s.scope),
            ),
            (Some(a), Some(b)) if scope_rank(b.scope) > scope_rank(a.scope) => {
                push(
                    WideningCode::Storage,
                    name,
                    "declaration",
                    format!("scope {:?} -> {:?}", a.scope, b.scope),
                );
            }
            _ => {}
        }
        let kinds = |a: &capability_types::AttachmentsCapability| {
            a.kinds.clone().unwrap_or_else(|| vec!["*".to_owned()])
        };
        match (&o.attachments, &n.attachments) {
            (None, Some(_)) => push(
                WideningCode::Attachments,
                name,
                "declaration",
                "attachments newly declared".to_owned(),
            ),
            (Some(a), Some(b)) => {
                let added = uncovered_kinds(&kinds(a), &kinds(b));
                if !added.is_empty() {
                    push(
                        WideningCode::Attachments,
                        name,
                        "declaration",
                        added.join(", "),
                    );
                }
            }
            _ => {}
        }
        if let (Some(oe), Some(ne)) = (&before.effective, &entry.effective) {
            let added = match (&oe.attachments, &ne.attachments) {
                (_, None) => Vec::new(),
                (None, Some(n)) => n.clone(),
                (Some(o), Some(n)) => uncovered_kinds(o, n),
            };
            if !added.is_empty() {
                push(
                    WideningCode::Attachments,
                    name,
                    "effective",
                    added.join(", "),
                );
            }
            if ne.in_toolset && !oe.in_toolset {
                push(
                    WideningCode::Toolset,
                    name,
                    "effective",
                    "now in the toolset".to_owned(),
                );
            }
            let list = |o: &Option<Vec<String>>, n: &Option<Vec<String>>| -> Vec<String> {
                match (o, n) {
                    (_, None) => Vec::new(),
                    (None, Some(n)) => n.clone(),
                    (Some(o), Some(n)) => uncovered_hosts(o, n),
                }
            };
            let hosts = list(&oe.network, &ne.network);
            if !hosts.is_empty() {
                push(WideningCode::Network, name, "effective", hosts.join(", "));
            }
            for (code, o, n) in [
                (WideningCode::FsRead, &oe.fs_read, &ne.fs_read),
                (WideningCode::FsWrite, &oe.fs_write, &ne.fs_write),
            ] {
                let added = match (o, n) {
                    (_, None) => Vec::new(),
                    (None, Some(n)) => n.iter().map(|p| p.display().to_string()).collect(),
                    (Some(o), Some(n)) => uncovered_paths(o, n),
                };
                if !added.is_empty() {
                    push(code, name, "effective", added.join(", "));
                }
            }
            let binaries: Vec<String> = match (&oe.process, &ne.process) {
                (_, None) => Vec::new(),
                (None, Some(n)) => n.clone(),
                (Some(o), Some(n)) => n.iter().filter(|b| !o.contains(b)).cloned().collect(),
            };
            if !binaries.is_empty() {
                push(
                    WideningCode::Process,
                    name,
                    "effective",
                    binaries.join(", "),
                );
            }
            if let (Some(or), Some(nr)) = (&oe.restrictions, &ne.restrictions) {
                for (code, detail) in crate::restrictions::loosened(or, nr) {
                    push(code, name, "effective", detail);
                }
            }
        }
    }
    out
}
