//! The permission manifest: every tool's declaration and, under a personality, its effective
//! access — deterministic JSON with a SHA-256 of its content — and the diff that reports
//! widenings between two manifests by coverage, never by string comparison.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use capability_types::{FsPaths, SecretRef, StorageScope, ToolCapabilities};
use serde::{Deserialize, Serialize};

pub use crate::restrictions::Restrictions;
use sha2::{Digest, Sha256};

use crate::matching::binary::intersect_binaries;
use crate::matching::host::{HostPattern, intersect_hosts};
use crate::matching::path::{intersect_paths, is_within};
use crate::policy::CompiledPolicy;

/// The format tag of manifests this version writes and reads.
pub const MANIFEST_FORMAT: &str = "toolcap-manifest/1";

/// A permission manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// [`MANIFEST_FORMAT`].
    pub format: String,
    /// Hex SHA-256 of the compact JSON of the manifest without this field.
    pub sha256: String,
    /// The personality the effective access was computed under, if any.
    pub personality: Option<String>,
    /// The personality's toolset, if it has one.
    pub toolset: Option<Vec<String>>,
    /// Per tool, by name.
    pub tools: BTreeMap<String, ToolEntry>,
}

/// One tool in a manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolEntry {
    /// What the tool declares.
    pub declaration: ToolCapabilities,
    /// What it gets under the manifest's personality (absent without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effective: Option<Effective>,
    /// For a guarded MCP server (`mcp__<server>__*`), what its configuration says beyond its
    /// reach that a review must see (absent for other tools).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<GuardedServer>,
}

/// What a guard configuration says of one server beyond its reach (docs/guard.md, "Review"):
/// the code it runs, read and executed outside the personality's reach, and the restrictions
/// the guard adds to its calls.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuardedServer {
    /// The program started.
    pub command: PathBuf,
    /// The places it reads and executes as its code (an interpreter's libraries, its
    /// package), whatever the personality's reach says.
    #[serde(default)]
    pub runtime: Vec<PathBuf>,
    /// Only these of the server's tools are offered; absent: every tool it lists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// Argument names the guard checks as paths besides its defaults.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub path_arguments: Vec<String>,
}

/// The intersection of a declaration with a personality, as data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Effective {
    /// Whether the personality's toolset admits the tool.
    pub in_toolset: bool,
    /// Allowed host patterns (deny patterns apply on top).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<Vec<String>>,
    /// Read roots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fs_read: Option<Vec<PathBuf>>,
    /// Write roots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fs_write: Option<Vec<PathBuf>>,
    /// Secret refs (by ref only, never values).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secrets: Option<Vec<SecretRef>>,
    /// Binaries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<Vec<String>>,
    /// Storage scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<StorageScope>,
    /// Attachment kinds the tool may be handed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attachments: Option<Vec<String>>,
    /// What the personality takes from that reach (absent in manifests made before it was
    /// recorded; then its loosening cannot be told).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restrictions: Option<Restrictions>,
}

#[derive(Serialize)]
struct Hashed<'a> {
    format: &'a str,
    personality: &'a Option<String>,
    toolset: &'a Option<Vec<String>>,
    tools: &'a BTreeMap<String, ToolEntry>,
}

fn digest(
    format: &str,
    personality: &Option<String>,
    toolset: &Option<Vec<String>>,
    tools: &BTreeMap<String, ToolEntry>,
) -> String {
    let bytes = serde_json::to_vec(&Hashed {
        format,
        personality,
        toolset,
        tools,
    })
    .unwrap_or_default();
    Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Builds the manifest of `tools` (name, declaration), with effective access when `policy` is
/// given. The same input always gives the same bytes.
pub fn build_manifest<'a, I>(tools: I, policy: Option<&CompiledPolicy>) -> Manifest
where
    I: IntoIterator<Item = (&'a str, &'a ToolCapabilities)>,
{
    let mut entries = BTreeMap::new();
    for (name, caps) in tools {
        let effective = policy.map(|p| effective(name, caps, p));
        entries.insert(
            name.to_owned(),
            ToolEntry {
                declaration: caps.clone(),
                effective,
                server: None,
            },
        );
    }
    let personality = policy.and_then(|p| p.id().map(str::to_owned));
    let toolset = policy.and_then(|p| p.toolset().map(<[String]>::to_vec));
    let sha256 = digest(MANIFEST_FORMAT, &personality, &toolset, &entries);
    Manifest {
        format: MANIFEST_FORMAT.to_owned(),
        sha256,
        personality,
        toolset,
        tools: entries,
    }
}

fn effective(tool: &str, caps: &ToolCapabilities, policy: &CompiledPolicy) -> Effective {
    let side = |declared: &Option<FsPaths>, personality: &[PathBuf], field: &str| {
        declared.as_ref().map(|d| match d {
            FsPaths::FromPersonality => personality.to_vec(),
            FsPaths::Paths(paths) => intersect_paths(paths, personality, field).granted,
        })
    };
    let reach = caps.fs_reach.clone().unwrap_or_default();
    Effective {
        in_toolset: policy.allows_tool(tool),
        network: caps.network.as_ref().map(|n| {
            intersect_hosts(
                &n.allowed_hosts,
                &policy.network_allow,
                &policy.network_deny,
            )
            .granted
            .iter()
            .map(ToString::to_string)
            .collect()
        }),
        fs_read: side(&reach.read, &policy.fs_read, "fs_reach.read"),
        fs_write: side(&reach.write, &policy.fs_write, "fs_reach.write"),
        secrets: caps.secrets.clone(),
        process: caps
            .process
            .as_ref()
            .map(|p| intersect_binaries(&p.allowed_binaries, &policy.process_allow).granted),
        storage: caps.storage.as_ref().map(|s| s.scope),
        attachments: caps
            .attachments
            .as_ref()
            .map(|a| crate::attachments::effective_kinds(a, &policy.attachment_kinds)),
        restrictions: Some(Restrictions::of(tool, caps, policy)),
    }
}

/// A manifest that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ManifestError {
    /// Not a manifest (the message names the field).
    #[error("not a toolcap manifest: {0}")]
    Invalid(String),
    /// A format this version does not read.
    #[error("unsupported manifest format {0:?} (this toolcap reads {MANIFEST_FORMAT})")]
    Format(String),
    /// The content does not match its SHA-256: edited by hand, or corrupt.
    #[error("manifest content does not match its sha256 (edited or corrupt)")]
    Tampered,
}

impl Manifest {
    /// Parses and verifies a manifest.
    pub fn parse(text: &str) -> Result<Self, ManifestError> {
        let m: Manifest = serde_path_to_json(text)?;
        if m.format != MANIFEST_FORMAT {
            return Err(ManifestError::Format(m.format));
        }
        if digest(&m.format, &m.personality, &m.toolset, &m.tools) != m.sha256 {
            return Err(ManifestError::Tampered);
        }
        Ok(m)
    }

    /// This manifest with `server` recorded for the guarded server `tool` (a tool it does not
    /// list is left alone), its SHA-256 computed again.
    #[must_use]
    pub fn with_server(mut self, tool: &str, server: GuardedServer) -> Self {
        if let Some(entry) = self.tools.get_mut(tool) {
            entry.server = Some(server);
            self.sha256 = digest(&self.format, &self.personality, &self.toolset, &self.tools);
        }
        self
    }

    /// Pretty JSON with a trailing newline: the committed form.
    pub fn to_pretty_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }
}

fn serde_path_to_json(text: &str) -> Result<Manifest, ManifestError> {
    capability_policy::check_policy_text(text, capability_policy::PolicyFormat::Json)
        .map_err(ManifestError::Invalid)?;
    serde_json::from_str(text).map_err(|e| ManifestError::Invalid(e.to_string()))
}

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

/// Host patterns of `new` not covered by any of `old` (an unparsable pattern counts as new), as
/// a reviewer is shown them: a pattern with letters outside ASCII followed by its ASCII form.
pub(crate) fn uncovered_hosts(old: &[String], new: &[String]) -> Vec<String> {
    let old: Vec<Option<HostPattern>> = old.iter().map(|p| HostPattern::parse(p).ok()).collect();
    new.iter()
        .filter(|n| match HostPattern::parse(n) {
            Err(_) => true,
            Ok(n) => !old.iter().flatten().any(|o| n.is_covered_by(o)),
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
    // `/etc` to the kernel), and a relative one is beneath nothing: each counts as new, as an
    // unparsable host pattern does. Registration refuses both; a manifest made by hand can
    // hold them.
    let plain = |p: &PathBuf| {
        p.is_absolute()
            && !p
                .components()
                .any(|c| matches!(c, std::path::Component::ParentDir))
    };
    new.iter()
        .filter(|n| !plain(n) || !old.iter().any(|o| is_within(n, o)))
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
