//! The permission manifest: every tool's declaration and, under a personality, its effective
//! access — deterministic JSON with a SHA-256 of its content — and the diff that reports
//! widenings between two manifests by coverage, never by string comparison.

use std::collections::BTreeMap;
use std::path::PathBuf;

use capability_types::{FsPaths, SecretRef, StorageScope, ToolCapabilities};
use serde::{Deserialize, Serialize};

pub use crate::restrictions::Restrictions;
use sha2::{Digest, Sha256};

use crate::matching::binary::intersect_binaries;
use crate::matching::host::intersect_hosts;
use crate::matching::path::intersect_paths;
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
    /// The pins of the tools offered, by their own names: only these are offered, and only as
    /// pinned (what the model is shown of them); absent: every tool, as the server describes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pins: Option<std::collections::BTreeMap<String, String>>,
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

/// The largest manifest text [`Manifest::parse`] reads, in bytes. A manifest repeats the
/// personality's hosts and roots in the access of each tool that has them, so one made under a
/// personality within [`MAX_POLICY_BYTES`](crate::MAX_POLICY_BYTES) can pass that limit; it
/// is held to the policy's nesting and duplicate-key rules all the same.
pub const MAX_MANIFEST_BYTES: usize = 16 << 20;

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
    capability_policy::check_text_within(
        text,
        capability_policy::PolicyFormat::Json,
        MAX_MANIFEST_BYTES,
    )
    .map_err(ManifestError::Invalid)?;
    serde_json::from_str(text).map_err(|e| ManifestError::Invalid(e.to_string()))
}

mod diff;
pub use diff::{Widening, WideningCode, diff};
pub(crate) use diff::{uncovered_hosts, uncovered_paths};
