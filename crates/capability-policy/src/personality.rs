//! The personality policy file (docs/reference.md, "Personality policy"): what a session may touch, whatever its tools
//! declare.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use capability_types::backend::SandboxMode;
use capability_types::check_binary_spec;

use crate::env::{is_fixed_env_name, is_refused_env_name, valid_env_name};
use crate::error::PolicyError;
use crate::names::{is_mcp_server_entry, valid_tool_name};
use crate::parse::parse_any;

/// A personality: the upper bound on what any tool may touch while it is active.
///
/// Loaded from TOML (or YAML / JSON with the same structure) by [`PersonalityPolicy::parse`],
/// which rejects unknown fields, expands `~`, requires absolute paths and normalises them.
/// Host patterns are checked by `capability-core` when the policy is compiled.
///
/// ```
/// # #[cfg(feature = "toml")] {
/// use capability_policy::{PersonalityPolicy, PolicyFormat};
/// let policy = PersonalityPolicy::parse(r#"
///     id = "researcher"
///     toolset = ["read_file", "fetch_url"]
///     [fs_reach]
///     read = ["~/notes", "/srv/data"]
///     deny = ["/srv/data/private"]
///     [safety.network]
///     allow = ["api.github.com", "*.example.com"]
/// "#, PolicyFormat::Toml, Some("/home/ada".as_ref())).unwrap();
/// assert_eq!(policy.fs_reach.read[0], std::path::Path::new("/home/ada/notes"));
///
/// let err = PersonalityPolicy::parse("id = \"x\"\n[safety.netwrok]\n", PolicyFormat::Toml, None)
///     .unwrap_err();
/// assert!(err.to_string().contains("netwrok"), "{err}");
/// # }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
#[non_exhaustive]
pub struct PersonalityPolicy {
    /// The personality's id; also names its storage namespace. `A-Z a-z 0-9 _ - .`, 1–128.
    pub id: String,
    /// Tools that may run under this personality. Absent: every registered tool; `[]`: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toolset: Option<Vec<String>>,
    /// Paths tools may read and write, and paths that are always refused.
    #[serde(default)]
    pub fs_reach: PolicyFsReach,
    /// Network, process and environment rules.
    #[serde(default)]
    pub safety: Safety,
    /// Per-tool invocation constraints (`[constraints.<tool>]`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub constraints: BTreeMap<String, ToolConstraints>,
    /// Calls that need a human's approval first (`[escalate]`).
    #[serde(default)]
    pub escalate: EscalateRules,
    /// Kinds of attachment tools may receive (`[attachments]`; absent: none).
    #[serde(default)]
    pub attachments: AttachmentRules,
    /// Tools refused for a while after a result of a tool whose output is untrusted
    /// (`[after_untrusted]`; absent: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_untrusted: Option<AfterUntrusted>,
    /// Calls refused outright by what their text holds (`[refuse]`).
    #[serde(default)]
    pub refuse: RefuseRules,
}

/// `[refuse]`: calls refused before anything runs, with no one asked (docs/policy.md,
/// "Refused calls").
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
#[non_exhaustive]
pub struct RefuseRules {
    /// Text that, held by a call's text (the tool's name, a space, and its arguments as JSON
    /// with keys sorted, as `[escalate] calls` reads it), refuses the call. Case-sensitive.
    #[serde(default)]
    pub calls: Vec<String>,
}

/// `[after_untrusted]`: the tools refused after a batch of the agent loop in which a tool ran
/// whose output is untrusted (a file's or a web page's text, a command's or an MCP server's
/// output: `Tool::output_is_untrusted` in `capability-types`), so that text the model has just
/// read cannot at once have a shell run or a file written (docs/policy.md, "After untrusted
/// output"). Names as in `toolset`: a tool, or `mcp__SERVER__*` for every tool of a server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
#[non_exhaustive]
pub struct AfterUntrusted {
    /// Refused in the `batches` batches of the invocation that begin after such a tool was
    /// admitted.
    #[serde(default)]
    pub pause: Vec<String>,
    /// How many batches a pause lasts (2 when not said; 0: `pause` refuses nothing).
    #[serde(default = "two_batches")]
    pub batches: u32,
    /// Refused for the rest of the invocation once such a tool was admitted in it (what
    /// writes text a later run reads: a memory, a scheduled job's prompt).
    #[serde(default)]
    pub hold: Vec<String>,
    /// Places no tool (nor child) writes for the rest of such an invocation, as `deny_write`
    /// places are kept (an agent's state: its memory, its skills, what its next run reads);
    /// absolute, or `~/…`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hold_writes: Vec<PathBuf>,
}

fn two_batches() -> u32 {
    2
}

impl Default for AfterUntrusted {
    /// Nothing paused or held, for two batches.
    fn default() -> Self {
        Self {
            pause: Vec::new(),
            batches: two_batches(),
            hold: Vec::new(),
            hold_writes: Vec::new(),
        }
    }
}

/// `[attachments]`: the kinds of attachment (docs/semantics.md, "Attachments") a tool may be
/// handed under this personality, intersected with what the tool declares. No `kinds` (or an
/// empty list) allows none.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
#[non_exhaustive]
pub struct AttachmentRules {
    /// Kind patterns: MIME types, `type/*`, `image`, `audio`, `video`, `text`, `file` or `*`.
    #[serde(default)]
    pub kinds: Vec<String>,
}

/// `[escalate]`: patterns whose calls pause and ask an approval handler. Until approved for
/// exactly that subject, a matching host, write path or argv is refused like a deny rule.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
#[non_exhaustive]
pub struct EscalateRules {
    /// Host patterns whose fetches need approval.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    /// Paths under which writes need approval.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub write_paths: Vec<PathBuf>,
    /// Argv patterns (as `deny_args`) whose spawns need approval.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Tools every call of which needs approval.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// Text that a call needs approval for when its text holds it: the tool's name, a space and
    /// its arguments as JSON with sorted keys (Ethos's `safety.denyRules`, docs/policy.md,
    /// "Escalation").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<String>,
    /// How long to wait for an answer before refusing (default 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
}

/// `[constraints.<tool>]`: limits on how and when a tool runs within one invocation of the agent
/// loop (one [`ExecutionContext`](../capability_core/struct.ExecutionContext.html) in
/// `capability-core`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
#[non_exhaustive]
pub struct ToolConstraints {
    /// At most this many calls run per invocation (at least 1; use `forbidden` for none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_invocations: Option<u32>,
    /// Each named tool must have completed successfully in an earlier batch of the invocation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub only_after: Vec<String>,
    /// Declared, but never dispatchable under this personality.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub forbidden: bool,
    /// Check absolute-path and `file://` arguments against the tool's reach before it runs
    /// (default true; turn off for a tool whose string arguments are not file paths).
    #[serde(default = "default_true", skip_serializing_if = "Clone::clone")]
    pub path_gate: bool,
    /// Argument values refused: a call whose top-level argument `name` is a string equal to one
    /// of `values` is refused (`reject_args = { status = ["Done"] }`). Ethos's `mcp.yaml`
    /// `reject_args` reads into this (docs/policy.md, "Invocation constraints").
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub reject_args: BTreeMap<String, Vec<String>>,
}

fn default_true() -> bool {
    true
}

impl ToolConstraints {
    /// No limits, path gate on.
    pub fn new() -> Self {
        Self {
            path_gate: true,
            ..Self::default()
        }
    }
}

/// `[fs_reach]` of a personality.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
#[non_exhaustive]
pub struct PolicyFsReach {
    /// Roots tools may read.
    #[serde(default)]
    pub read: Vec<PathBuf>,
    /// Roots tools may write.
    #[serde(default)]
    pub write: Vec<PathBuf>,
    /// Paths refused for both, whatever `read` and `write` say.
    #[serde(default)]
    pub deny: Vec<PathBuf>,
    /// Paths refused for writing (and for being made, replaced or removed), whatever `write`
    /// says; reading them is untouched. A name that is `*` stands for any one name
    /// (`~/.ethos/personalities/*/toolset.yaml`). docs/policy.md, "Kept from writes".
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny_write: Vec<PathBuf>,
    /// Places kept apart: reached only through a root at or beneath them, never through a root
    /// above them (a reach of `~` does not reach into `~/.ethos`; a root of
    /// `~/.ethos/personalities/me` does). docs/policy.md, "Kept apart".
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub apart: Vec<PathBuf>,
}

/// `[safety]` of a personality.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
#[non_exhaustive]
pub struct Safety {
    /// `[safety.network]`.
    #[serde(default)]
    pub network: NetworkRules,
    /// `[safety.process]`.
    #[serde(default)]
    pub process: ProcessRules,
    /// `[safety.env]`.
    #[serde(default)]
    pub env: EnvRules,
}

/// `[safety.network]`: host patterns. No `allow` (or an empty one) allows nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
#[non_exhaustive]
pub struct NetworkRules {
    /// Hosts tools may fetch from.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Hosts always refused; wins over `allow`.
    #[serde(default)]
    pub deny: Vec<String>,
    /// Whether a host the personality names exactly may reach the restricted address classes
    /// (loopback, private, link-local with cloud metadata, CGNAT, multicast, reserved):
    /// `"named"`, the default, or `"never"` (docs/semantics.md, "Fetch").
    #[serde(default, skip_serializing_if = "RestrictedAddresses::is_named")]
    pub restricted_addresses: RestrictedAddresses,
}

/// `[safety.network] restricted_addresses`: who may reach the restricted address classes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
// toolcap: exhaustive(reason = "a new mode must be weighed by the host policy that refuses restricted addresses; a default arm could let one through")
pub enum RestrictedAddresses {
    /// Only a host named exactly (`127.0.0.1`, `db.internal`), never one matched by a wildcard.
    #[default]
    Named,
    /// No host, however it is named: what an Ethos personality gets (Ethos refuses them unless
    /// `allow_private_urls`, and cloud metadata always).
    Never,
}

impl RestrictedAddresses {
    /// Whether this is the default, `named` (left out when a policy is written).
    pub fn is_named(&self) -> bool {
        *self == RestrictedAddresses::Named
    }
}

/// `[safety.process]`: binaries and refused argument patterns.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
#[non_exhaustive]
pub struct ProcessRules {
    /// Binaries tools may spawn: bare names or absolute paths (`*` is not accepted here).
    #[serde(default)]
    pub allow: Vec<String>,
    /// Argv patterns always refused, token by token (`git push --force*`).
    #[serde(default)]
    pub deny_args: Vec<String>,
    /// Kernel confinement of every child: `"required"` (the default) or `"off"`.
    #[serde(default)]
    pub sandbox: SandboxMode,
}

/// `[safety.env]`: variables a child may inherit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
#[non_exhaustive]
pub struct EnvRules {
    /// Variable names; loader and interpreter hooks are refused at load time.
    #[serde(default)]
    pub allow: Vec<String>,
}

/// The syntax a policy file is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PolicyFormat {
    /// TOML (feature `toml`).
    Toml,
    /// YAML (feature `yaml`).
    Yaml,
    /// JSON.
    Json,
}

impl PolicyFormat {
    /// The format named by a file's extension: `.toml`, `.yaml` / `.yml`, `.json`.
    pub fn from_path(path: &Path) -> Result<Self, PolicyError> {
        match path.extension().and_then(|e| e.to_str()) {
            Some("toml") => Ok(PolicyFormat::Toml),
            Some("yaml" | "yml") => Ok(PolicyFormat::Yaml),
            Some("json") => Ok(PolicyFormat::Json),
            _ => Err(PolicyError::UnsupportedFormat(format!(
                "cannot tell the format of {} from its extension (use .toml, .yaml, .yml or .json)",
                path.display()
            ))),
        }
    }
}

impl PersonalityPolicy {
    /// Parses and checks a policy. `home` expands a leading `~`; a `~` with no home is an error.
    ///
    /// Fails whole on the first problem, naming the field.
    pub fn parse(
        text: &str,
        format: PolicyFormat,
        home: Option<&Path>,
    ) -> Result<Self, PolicyError> {
        let mut policy: PersonalityPolicy = parse_any(text, format)?;
        policy.check(home)?;
        Ok(policy)
    }

    /// Checks the structure of a policy built in code and normalises it as [`parse`](Self::parse)
    /// does: expands `~`, requires absolute paths, folds `.` and `..`.
    pub fn check(&mut self, home: Option<&Path>) -> Result<(), PolicyError> {
        if self.id.is_empty()
            || self.id.len() > 128
            || !self
                .id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
        {
            return Err(PolicyError::invalid(
                "id",
                format!(
                    "{:?} must be 1-128 characters of A-Z a-z 0-9 _ - .",
                    self.id
                ),
            ));
        }
        if let Some(after) = &self.after_untrusted {
            for (field, list) in [("pause", &after.pause), ("hold", &after.hold)] {
                if let Some((i, name)) = list
                    .iter()
                    .enumerate()
                    .find(|(_, n)| !valid_tool_name(n) && !is_mcp_server_entry(n))
                {
                    return Err(PolicyError::invalid(
                        format!("after_untrusted.{field}[{i}]"),
                        format!(
                            "{name:?} is not a tool name or every tool of an MCP server (mcp__SERVER__*)"
                        ),
                    ));
                }
            }
        }
        if let Some(toolset) = &self.toolset {
            for (i, name) in toolset.iter().enumerate() {
                if !valid_tool_name(name) && !is_mcp_server_entry(name) {
                    return Err(PolicyError::invalid(
                        format!("toolset[{i}]"),
                        format!(
                            "{name:?} is not a tool name (1-64 characters of a-z 0-9 _ -) or every tool of an MCP server (mcp__SERVER__*)"
                        ),
                    ));
                }
            }
        }
        for (field, list) in [
            ("fs_reach.read", &mut self.fs_reach.read),
            ("fs_reach.write", &mut self.fs_reach.write),
            ("fs_reach.deny", &mut self.fs_reach.deny),
            ("fs_reach.deny_write", &mut self.fs_reach.deny_write),
            ("fs_reach.apart", &mut self.fs_reach.apart),
        ] {
            for (i, path) in list.iter_mut().enumerate() {
                *path = absolute_policy_path(path, home)
                    .map_err(|why| PolicyError::invalid(format!("{field}[{i}]"), why))?;
            }
        }
        for (i, path) in self.fs_reach.apart.iter().enumerate() {
            if path.parent().is_none() {
                return Err(PolicyError::invalid(
                    format!("fs_reach.apart[{i}]"),
                    "/ has no root above it to be kept apart from",
                ));
            }
        }
        for (i, path) in self.fs_reach.deny_write.iter().enumerate() {
            check_write_pattern(path)
                .map_err(|why| PolicyError::invalid(format!("fs_reach.deny_write[{i}]"), why))?;
        }
        if let Some(after) = &mut self.after_untrusted {
            for (i, path) in after.hold_writes.iter_mut().enumerate() {
                let field = format!("after_untrusted.hold_writes[{i}]");
                *path = absolute_policy_path(path, home)
                    .map_err(|why| PolicyError::invalid(field.clone(), why))?;
                check_write_pattern(path).map_err(|why| PolicyError::invalid(field, why))?;
            }
        }
        // A rule given twice (`~/.ethos` and an `$ETHOS_HOME` that is the same place) once.
        for list in [
            &mut self.fs_reach.deny,
            &mut self.fs_reach.deny_write,
            &mut self.fs_reach.apart,
        ] {
            let mut seen = std::collections::HashSet::new();
            list.retain(|path| seen.insert(path.clone()));
        }
        for (i, kind) in self.attachments.kinds.iter().enumerate() {
            capability_types::check_kind_pattern(kind)
                .map_err(|why| PolicyError::invalid(format!("attachments.kinds[{i}]"), why))?;
        }
        for (i, bin) in self.safety.process.allow.iter().enumerate() {
            check_binary_spec(bin, false)
                .map_err(|why| PolicyError::invalid(format!("safety.process.allow[{i}]"), why))?;
        }
        for (i, pattern) in self.safety.process.deny_args.iter().enumerate() {
            if pattern.split_ascii_whitespace().next().is_none() || pattern.contains('\0') {
                return Err(PolicyError::invalid(
                    format!("safety.process.deny_args[{i}]"),
                    format!("{pattern:?} has no tokens"),
                ));
            }
        }
        for (i, path) in self.escalate.write_paths.iter_mut().enumerate() {
            *path = absolute_policy_path(path, home)
                .map_err(|why| PolicyError::invalid(format!("escalate.write_paths[{i}]"), why))?;
        }
        for (i, pattern) in self.escalate.args.iter().enumerate() {
            if pattern.split_ascii_whitespace().next().is_none() || pattern.contains('\0') {
                return Err(PolicyError::invalid(
                    format!("escalate.args[{i}]"),
                    format!("{pattern:?} has no tokens"),
                ));
            }
        }
        for (i, tool) in self.escalate.tools.iter().enumerate() {
            if !valid_tool_name(tool) {
                return Err(PolicyError::invalid(
                    format!("escalate.tools[{i}]"),
                    format!("{tool:?} is not a tool name"),
                ));
            }
        }
        if let Some(i) = self.refuse.calls.iter().position(|c| c.trim().is_empty()) {
            return Err(PolicyError::invalid(
                format!("refuse.calls[{i}]"),
                "blank: every call's text holds it (use forbidden = true in [constraints.TOOL] \
                 to refuse a tool)",
            ));
        }
        if let Some(i) = self.escalate.calls.iter().position(|c| c.trim().is_empty()) {
            return Err(PolicyError::invalid(
                format!("escalate.calls[{i}]"),
                "blank: every call's text holds it (list the tools in escalate.tools instead)",
            ));
        }
        if self.escalate.timeout_seconds == Some(0) {
            return Err(PolicyError::invalid(
                "escalate.timeout_seconds",
                "must be at least 1",
            ));
        }
        for (tool, c) in &self.constraints {
            let field = format!("constraints.{tool}");
            if !valid_tool_name(tool) {
                return Err(PolicyError::invalid(
                    field,
                    format!("{tool:?} is not a tool name"),
                ));
            }
            if c.max_invocations == Some(0) {
                return Err(PolicyError::invalid(
                    format!("{field}.max_invocations"),
                    "must be at least 1 (use forbidden = true to refuse every call)",
                ));
            }
            for (i, name) in c.only_after.iter().enumerate() {
                if !valid_tool_name(name) || name == tool {
                    return Err(PolicyError::invalid(
                        format!("{field}.only_after[{i}]"),
                        format!("{name:?} is not another tool's name"),
                    ));
                }
            }
            if c.reject_args.keys().any(String::is_empty) {
                return Err(PolicyError::invalid(
                    format!("{field}.reject_args"),
                    "an argument's name is empty",
                ));
            }
        }
        for (i, name) in self.safety.env.allow.iter().enumerate() {
            let field = format!("safety.env.allow[{i}]");
            if !valid_env_name(name) {
                return Err(PolicyError::invalid(
                    field,
                    format!("{name:?} is not a variable name"),
                ));
            }
            if is_refused_env_name(name) {
                return Err(PolicyError::invalid(
                    field,
                    format!(
                        "{name} steers what a program loads or runs (a hook, a program to run, \
                         options or configuration that can name one) and may never be passed to \
                         a child (docs/reference.md, \"Refused environment names\")"
                    ),
                ));
            }
            if is_fixed_env_name(name) {
                return Err(PolicyError::invalid(
                    field,
                    format!("{name} is set by toolcap for every child and may not be inherited"),
                ));
            }
        }
        Ok(())
    }
}

/// A `deny_write` entry's wildcards: `*` only as a whole name, and never for the whole of
/// what follows the root (`/*` would keep every write out, which `write = []` says plainly).
fn check_write_pattern(path: &Path) -> Result<(), String> {
    let names: Vec<&std::ffi::OsStr> = path
        .components()
        .filter_map(|c| match c {
            std::path::Component::Normal(name) => Some(name),
            _ => None,
        })
        .collect();
    for name in &names {
        let text = name.to_string_lossy();
        if text.contains('*') && text != "*" {
            return Err(format!(
                "{}: `*` stands for a whole name only (`dir/*/file`), not part of one ({text:?})",
                path.display()
            ));
        }
    }
    if names.first().is_none_or(|first| *first == "*") {
        return Err(format!(
            "{}: names no place (a first name of `*` is every place; write = [] keeps every \
             write out)",
            path.display()
        ));
    }
    Ok(())
}

fn absolute_policy_path(path: &Path, home: Option<&Path>) -> Result<PathBuf, String> {
    let text = path
        .to_str()
        .ok_or_else(|| format!("{} is not valid UTF-8", path.display()))?;
    if text.contains('\0') {
        return Err(format!("{text:?} contains a NUL byte"));
    }
    let expanded = if text == "~" || text.starts_with("~/") {
        let home = home.ok_or_else(|| format!("{text:?} uses ~ but no home directory is known"))?;
        // A home of `/` (a service account's, a container's default `HOME`) is no home: `~`
        // would stand for the whole file system (docs/semantics.md, "Paths").
        if normalize_lexically(home) == Path::new("/") {
            return Err(format!(
                "{text:?} uses ~, but the home directory is / (the whole file system); set \
                 HOME to a home directory, or write the path out"
            ));
        }
        home.join(text.trim_start_matches('~').trim_start_matches('/'))
    } else if text.starts_with('~') {
        return Err(format!("{text:?}: only ~ and ~/ are expanded, not ~user"));
    } else {
        path.to_path_buf()
    };
    if !expanded.is_absolute() {
        return Err(format!("{text:?} is not absolute"));
    }
    Ok(normalize_lexically(&expanded))
}

/// Folds `.` and `..` components of an absolute path without touching the file system
/// (`..` at the root stays at the root). Relative paths are returned with the same folding,
/// keeping leading `..`.
///
/// ```
/// use capability_policy::normalize_lexically;
/// use std::path::Path;
/// assert_eq!(normalize_lexically(Path::new("/srv/data/../out/./x")), Path::new("/srv/out/x"));
/// assert_eq!(normalize_lexically(Path::new("/../../etc")), Path::new("/etc"));
/// ```
pub fn normalize_lexically(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    let mut depth = 0usize; // normal components pushed
    for component in path.components() {
        match component {
            Component::Prefix(p) => out.push(p.as_os_str()),
            Component::RootDir => out.push(Component::RootDir.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => {
                if depth > 0 {
                    out.pop();
                    depth -= 1;
                } else if !path.has_root() {
                    out.push("..");
                }
            }
            Component::Normal(name) => {
                out.push(name);
                depth += 1;
            }
        }
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

capability_types::__map_only!(
    PersonalityPolicy,
    PolicyFsReach,
    Safety,
    NetworkRules,
    ProcessRules,
    EnvRules,
    ToolConstraints,
    EscalateRules,
    AttachmentRules,
    AfterUntrusted,
    RefuseRules
);

#[cfg(test)]
mod tests {
    use super::*;

    fn json(text: &str) -> Result<PersonalityPolicy, PolicyError> {
        PersonalityPolicy::parse(text, PolicyFormat::Json, Some(Path::new("/home/ada")))
    }

    #[test]
    fn full_json_policy_parses_and_normalises() {
        let p = json(
            r#"{"id":"coder","toolset":["read_file"],
            "fs_reach":{"read":["~/work","/srv/a/../b"],"write":["~"],"deny":["/srv/b/secret/"]},
            "safety":{"network":{"allow":["api.github.com"],"deny":["evil.com"]},
                      "process":{"allow":["git","/usr/bin/ls"],"deny_args":["git push --force*"]},
                      "env":{"allow":["LANG"]}}}"#,
        )
        .unwrap();
        assert_eq!(
            p.fs_reach.read,
            [PathBuf::from("/home/ada/work"), PathBuf::from("/srv/b")]
        );
        assert_eq!(p.fs_reach.write, [PathBuf::from("/home/ada")]);
        assert_eq!(p.fs_reach.deny, [PathBuf::from("/srv/b/secret")]);
        assert_eq!(p.toolset.as_deref(), Some(&["read_file".to_owned()][..]));
    }

    #[test]
    fn a_byte_order_mark_first_is_read_past_in_every_format() {
        let mut cases = vec![("\u{feff}{\"id\": \"b\"}", PolicyFormat::Json)];
        #[cfg(feature = "toml")]
        cases.push(("\u{feff}id = \"b\"\r\n", PolicyFormat::Toml));
        #[cfg(feature = "yaml")]
        cases.push((
            "\u{feff}id: b\r\ntoolset: [read_file]\r\n",
            PolicyFormat::Yaml,
        ));
        for (text, format) in cases {
            let p = PersonalityPolicy::parse(text, format, None).unwrap();
            assert_eq!(p.id, "b", "{format:?}");
        }
    }

    #[test]
    fn a_rule_given_twice_is_kept_once_in_its_first_place() {
        let p = PersonalityPolicy::parse(
            r#"{"id":"x","fs_reach":{"deny":["~/a","/b","/h/a"],"deny_write":["/c/*/d","~/e","/c/*/d"]}}"#,
            PolicyFormat::Json,
            Some(Path::new("/h")),
        )
        .unwrap();
        assert_eq!(
            p.fs_reach.deny,
            [PathBuf::from("/h/a"), PathBuf::from("/b")]
        );
        assert_eq!(
            p.fs_reach.deny_write,
            [PathBuf::from("/c/*/d"), PathBuf::from("/h/e")]
        );
    }

    #[test]
    fn errors_name_the_bad_field() {
        let cases = [
            (
                r#"{"id":"x","safety":{"network":{"allow":["a"],"alow":[]}}}"#,
                Some("safety.network.alow"),
                "unknown field `alow`",
            ),
            (
                r#"{"id":"x","fs_reach":{"read":"/srv"}}"#,
                Some("fs_reach.read"),
                "invalid type",
            ),
            (
                r#"{"id":"x","fs_reach":{"read":["srv"]}}"#,
                Some("fs_reach.read[0]"),
                "not absolute",
            ),
            (
                r#"{"id":"x","fs_reach":{"write":["/a","~bob/x"]}}"#,
                Some("fs_reach.write[1]"),
                "~user",
            ),
            (
                r#"{"id":"x","fs_reach":{"deny":["/a\u0000"]}}"#,
                Some("fs_reach.deny[0]"),
                "NUL",
            ),
            (
                r#"{"id":"x","fs_reach":{"deny_write":["/srv/a*/toolset.yaml"]}}"#,
                Some("fs_reach.deny_write[0]"),
                "whole name only",
            ),
            (
                r#"{"id":"x","fs_reach":{"deny_write":["/srv/ok","/srv/**/x"]}}"#,
                Some("fs_reach.deny_write[1]"),
                "whole name only",
            ),
            (
                r#"{"id":"x","fs_reach":{"deny_write":["/*/x"]}}"#,
                Some("fs_reach.deny_write[0]"),
                "names no place",
            ),
            (
                r#"{"id":"x","fs_reach":{"deny_write":["/"]}}"#,
                Some("fs_reach.deny_write[0]"),
                "names no place",
            ),
            (
                r#"{"id":"x","fs_reach":{"deny_write":["personalities/*/toolset.yaml"]}}"#,
                Some("fs_reach.deny_write[0]"),
                "not absolute",
            ),
            (
                r#"{"id":"x","fs_reach":{"apart":["/srv/state","/"]}}"#,
                Some("fs_reach.apart[1]"),
                "no root above it",
            ),
            (
                r#"{"id":"x","fs_reach":{"apart":["state"]}}"#,
                Some("fs_reach.apart[0]"),
                "not absolute",
            ),
            (r#"{"id":""}"#, Some("id"), "must be 1-128"),
            (r#"{"id":"a b"}"#, Some("id"), "must be 1-128"),
            (
                r#"{"id":"x","toolset":["Read File"]}"#,
                Some("toolset[0]"),
                "not a tool name",
            ),
            (
                r#"{"id":"x","safety":{"process":{"allow":["*"]}}}"#,
                Some("safety.process.allow[0]"),
                "'*' is not accepted",
            ),
            (
                r#"{"id":"x","safety":{"process":{"allow":["bin/git"]}}}"#,
                Some("safety.process.allow[0]"),
                "bare name or an absolute path",
            ),
            (
                r#"{"id":"x","safety":{"process":{"allow":["/usr/../bin/sh"]}}}"#,
                Some("safety.process.allow[0]"),
                "'..'",
            ),
            (
                r#"{"id":"x","safety":{"process":{"deny_args":["  "]}}}"#,
                Some("safety.process.deny_args[0]"),
                "no tokens",
            ),
            (
                r#"{"id":"x","safety":{"env":{"allow":["LD_PRELOAD"]}}}"#,
                Some("safety.env.allow[0]"),
                "may never be passed",
            ),
            (
                r#"{"id":"x","safety":{"env":{"allow":["LANG","PATH"]}}}"#,
                Some("safety.env.allow[1]"),
                "PATH is set by toolcap",
            ),
            (
                r#"{"id":"x","safety":{"env":{"allow":["A=B"]}}}"#,
                Some("safety.env.allow[0]"),
                "not a variable name",
            ),
            (
                r#"{"id":"x","after_untrusted":{"pause":["shell","Not A Tool"]}}"#,
                Some("after_untrusted.pause[1]"),
                "not a tool name",
            ),
            (
                r#"{"id":"x","after_untrusted":{"hold":["web tool"]}}"#,
                Some("after_untrusted.hold[0]"),
                "not a tool name",
            ),
            (
                r#"{"id":"x","after_untrusted":{"pauses":["shell"]}}"#,
                Some("after_untrusted.pauses"),
                "unknown field `pauses`",
            ),
            (
                r#"{"id":"x","after_untrusted":{"batches":-1}}"#,
                Some("after_untrusted.batches"),
                "invalid value",
            ),
            (
                r#"{"id":"x","after_untrusted":{"batches":"2"}}"#,
                Some("after_untrusted.batches"),
                "invalid type",
            ),
            (
                r#"{"id":"x","after_untrusted":{"batches":4294967296}}"#,
                Some("after_untrusted.batches"),
                "invalid value",
            ),
            (
                r#"{"id":"x","refuse":{"call":["rm -rf"]}}"#,
                Some("refuse.call"),
                "unknown field `call`",
            ),
            (
                r#"{"id":"x","refuse":{"calls":[" "]}}"#,
                Some("refuse.calls[0]"),
                "blank",
            ),
            (r#"{"id":"x"} trailing"#, None, "trailing"),
            (r#"{}"#, None, "missing field `id`"),
        ];
        for (text, field, message) in cases {
            let err = json(text).unwrap_err();
            assert_eq!(err.field(), field, "{text}: {err}");
            assert!(err.to_string().contains(message), "{text}: {err}");
        }
    }

    // guarantee: G-POL-10
    #[test]
    fn tilde_without_home_is_refused() {
        let err = PersonalityPolicy::parse(
            r#"{"id":"x","fs_reach":{"read":["~/a"]}}"#,
            PolicyFormat::Json,
            None,
        )
        .unwrap_err();
        assert!(err.to_string().contains("no home directory"), "{err}");
        // Nor is a home of `/`, however it is spelled.
        for home in ["/", "/tmp/..", "//"] {
            let err = PersonalityPolicy::parse(
                r#"{"id":"x","fs_reach":{"read":["~"]}}"#,
                PolicyFormat::Json,
                Some(Path::new(home)),
            )
            .unwrap_err();
            assert!(
                err.to_string().contains("the home directory is /"),
                "{home}: {err}"
            );
        }
        // A personality that names no `~` loads with any home.
        PersonalityPolicy::parse(
            r#"{"id":"x","fs_reach":{"read":["/srv"]}}"#,
            PolicyFormat::Json,
            Some(Path::new("/")),
        )
        .unwrap();
    }

    #[test]
    fn format_from_extension() {
        assert_eq!(
            PolicyFormat::from_path(Path::new("a/p.toml")).unwrap(),
            PolicyFormat::Toml
        );
        assert_eq!(
            PolicyFormat::from_path(Path::new("p.yml")).unwrap(),
            PolicyFormat::Yaml
        );
        assert_eq!(
            PolicyFormat::from_path(Path::new("p.json")).unwrap(),
            PolicyFormat::Json
        );
        assert!(matches!(
            PolicyFormat::from_path(Path::new("p.ini")),
            Err(PolicyError::UnsupportedFormat(_))
        ));
    }

    #[test]
    fn lexical_normalisation() {
        for (input, expected) in [
            ("/a/b/../c", "/a/c"),
            ("/a/./b/", "/a/b"),
            ("/..", "/"),
            ("/a/../../..", "/"),
            ("a/../../b", "../b"),
            ("", "."),
            ("/srv//data", "/srv/data"),
        ] {
            assert_eq!(
                normalize_lexically(Path::new(input)),
                Path::new(expected),
                "{input}"
            );
        }
    }
}
