//! The declaration a tool makes of everything external it touches (docs/reference.md, "Declaration").

use std::fmt;
use std::num::NonZeroU64;
use std::path::{Component, Path, PathBuf};

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::ser::Serializer;
use serde::{Deserialize, Serialize};

use crate::attachments::AttachmentsCapability;
use crate::secret_ref::SecretRef;

/// Everything a tool touches outside its own memory, as data.
///
/// The JSON form is byte-compatible with Ethos declarations:
///
/// ```json
/// {
///   "network":  { "allowedHosts": ["api.github.com", "*.example.com"] },
///   "secrets":  ["GITHUB_TOKEN", "providers/exa/*"],
///   "storage":  { "scope": "tool-private", "kind": "kv", "ttlSecondsDefault": 3600 },
///   "fs_reach": { "read": "from-personality", "write": ["/srv/out"] },
///   "process":  { "allowedBinaries": ["git"] },
///   "attachments": { "kinds": ["image/*", "application/pdf"] }
/// }
/// ```
///
/// An absent category is not declared: the tool gets no scoped object for it. A present but
/// empty category (`"secrets": []`) *is* declared, so it still needs its backend. `{}` touches
/// nothing and runs without any backend. Unknown fields are an error.
///
/// ```
/// use capability_types::ToolCapabilities;
/// let err = serde_json::from_str::<ToolCapabilities>(r#"{"netwrok": {}}"#).unwrap_err();
/// assert!(err.to_string().contains("unknown field `netwrok`"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
#[non_exhaustive]
pub struct ToolCapabilities {
    /// Hosts the tool fetches from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkCapability>,
    /// Secrets the tool reads, by ref.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secrets: Option<Vec<SecretRef>>,
    /// Key-value state the tool keeps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<StorageCapability>,
    /// Paths the tool reads and writes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fs_reach: Option<FsReach>,
    /// Binaries the tool spawns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<ProcessCapability>,
    /// Kinds of attachment the tool may receive (absent: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attachments: Option<AttachmentsCapability>,
}

impl ToolCapabilities {
    /// A declaration that touches nothing external (`{}`).
    pub fn none() -> Self {
        Self::default()
    }

    /// Whether nothing at all is declared.
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }

    /// Declares the kinds of attachment the tool may receive ([`AttachmentsCapability`]).
    pub fn with_attachments(mut self, attachments: AttachmentsCapability) -> Self {
        self.attachments = Some(attachments);
        self
    }

    /// Declares the host patterns the tool fetches from (`"*"` defers to the personality).
    pub fn with_network<I, S>(mut self, hosts: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.network = Some(NetworkCapability {
            allowed_hosts: hosts.into_iter().map(Into::into).collect(),
        });
        self
    }

    /// Declares the secrets the tool reads.
    pub fn with_secrets<I: IntoIterator<Item = SecretRef>>(mut self, refs: I) -> Self {
        self.secrets = Some(refs.into_iter().collect());
        self
    }

    /// Declares key-value storage in `scope`.
    pub fn with_storage(
        mut self,
        scope: StorageScope,
        ttl_seconds_default: Option<NonZeroU64>,
    ) -> Self {
        self.storage = Some(StorageCapability {
            scope,
            kind: StorageKind::Kv,
            ttl_seconds_default,
        });
        self
    }

    /// Declares the paths the tool reads.
    pub fn with_fs_read(mut self, paths: FsPaths) -> Self {
        self.fs_reach.get_or_insert_with(FsReach::default).read = Some(paths);
        self
    }

    /// Declares the paths the tool writes.
    pub fn with_fs_write(mut self, paths: FsPaths) -> Self {
        self.fs_reach.get_or_insert_with(FsReach::default).write = Some(paths);
        self
    }

    /// Declares the binaries the tool spawns (`"*"` defers to the personality).
    pub fn with_process<I, S>(mut self, binaries: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.process = Some(ProcessCapability {
            allowed_binaries: binaries.into_iter().map(Into::into).collect(),
        });
        self
    }
}

/// `network`: the hosts a tool fetches from.
///
/// ```
/// use capability_types::ToolCapabilities;
/// let caps = ToolCapabilities::none().with_network(["api.github.com", "*.example.com"]);
/// let network = caps.network.unwrap();
/// assert_eq!(network.allowed_hosts, ["api.github.com", "*.example.com"]);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
#[non_exhaustive]
pub struct NetworkCapability {
    /// Host patterns: `api.github.com`, `*.example.com`, `host:8443`, or `*` (the
    /// personality's list). Their syntax is checked at registration by `capability-core`.
    #[serde(rename = "allowedHosts")]
    pub allowed_hosts: Vec<String>,
}

/// `storage`: key-value state and the namespace it lives in.
///
/// ```
/// use capability_types::{StorageScope, ToolCapabilities};
/// let caps = ToolCapabilities::none().with_storage(StorageScope::Session, std::num::NonZeroU64::new(3600));
/// assert_eq!(
///     serde_json::to_string(&caps).unwrap(),
///     r#"{"storage":{"scope":"session","kind":"kv","ttlSecondsDefault":3600}}"#,
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
#[non_exhaustive]
pub struct StorageCapability {
    /// Which namespace the tool's keys live in.
    pub scope: StorageScope,
    /// The kind of store; only `kv` exists.
    pub kind: StorageKind,
    /// TTL applied to every `set` that gives none. Zero is refused when parsed.
    #[serde(
        rename = "ttlSecondsDefault",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub ttl_seconds_default: Option<NonZeroU64>,
}

/// The namespace a tool's key-value state lives in (docs/semantics.md, "Storage scopes").
///
/// ```
/// use capability_types::StorageScope;
/// let scope: StorageScope = serde_json::from_str(r#""tool-private""#).unwrap();
/// assert_eq!(scope, StorageScope::ToolPrivate);
/// assert!(serde_json::from_str::<StorageScope>(r#""global""#).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
// toolcap: exhaustive(reason = "every scope needs its namespace rule; a default arm could share state between tools")
pub enum StorageScope {
    /// `tool:<tool>` — private to the tool.
    ToolPrivate,
    /// `session:<session id>` — shared by every tool of the session.
    Session,
    /// `personality:<personality id>` — shared by every session of the personality.
    Personality,
}

/// The kind of store a tool declares.
///
/// ```
/// use capability_types::StorageKind;
/// assert_eq!(serde_json::to_string(&StorageKind::Kv).unwrap(), r#""kv""#);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
// toolcap: exhaustive(reason = "a new kind needs its own backend; a default arm could hand out the wrong store")
pub enum StorageKind {
    /// Key-value: get, set with TTL, delete, list by prefix.
    Kv,
}

/// `fs_reach`: the paths a tool reads and writes.
///
/// ```
/// use capability_types::{FsPaths, ToolCapabilities};
/// let caps = ToolCapabilities::none()
///     .with_fs_read(FsPaths::FromPersonality)
///     .with_fs_write(FsPaths::Paths(vec!["/srv/out".into()]));
/// let reach = caps.fs_reach.unwrap();
/// assert_eq!(reach.read, Some(FsPaths::FromPersonality));
/// assert_eq!(reach.write, Some(FsPaths::Paths(vec!["/srv/out".into()])));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
#[non_exhaustive]
pub struct FsReach {
    /// Paths the tool reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read: Option<FsPaths>,
    /// Paths the tool writes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write: Option<FsPaths>,
}

/// A list of absolute paths, or `"from-personality"`: whatever the personality allows.
///
/// ```
/// use capability_types::FsPaths;
/// let from: FsPaths = serde_json::from_str(r#""from-personality""#).unwrap();
/// assert_eq!(from, FsPaths::FromPersonality);
/// let listed: FsPaths = serde_json::from_str(r#"["/srv/data"]"#).unwrap();
/// assert_eq!(listed, FsPaths::Paths(vec!["/srv/data".into()]));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
// toolcap: exhaustive(reason = "the two shapes of a reach declaration; a third must be read by the validator and the resolver alike")
pub enum FsPaths {
    /// `"from-personality"` — the personality's list for this access.
    FromPersonality,
    /// An explicit list, intersected with the personality's list at call time. Each path must
    /// be absolute; this is checked when the declaration is parsed and again at registration.
    Paths(Vec<PathBuf>),
}

impl FsPaths {
    /// The literal string that stands for the personality's list.
    pub const FROM_PERSONALITY: &'static str = "from-personality";
}

impl Serialize for FsPaths {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            FsPaths::FromPersonality => s.serialize_str(Self::FROM_PERSONALITY),
            FsPaths::Paths(paths) => paths.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for FsPaths {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = FsPaths;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("\"from-personality\" or a list of absolute paths")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<FsPaths, E> {
                if v == FsPaths::FROM_PERSONALITY {
                    Ok(FsPaths::FromPersonality)
                } else {
                    Err(E::invalid_value(de::Unexpected::Str(v), &self))
                }
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<FsPaths, A::Error> {
                let mut paths = Vec::new();
                while let Some(p) = seq.next_element::<String>()? {
                    if p.contains('\0') {
                        return Err(de::Error::custom(format!("path {p:?} contains a NUL byte")));
                    }
                    if !p.starts_with('/') {
                        return Err(de::Error::custom(format!("path {p:?} is not absolute")));
                    }
                    paths.push(PathBuf::from(p));
                }
                Ok(FsPaths::Paths(paths))
            }
        }
        d.deserialize_any(V)
    }
}

/// `process`: the binaries a tool spawns.
///
/// ```
/// use capability_types::ToolCapabilities;
/// let caps = ToolCapabilities::none().with_process(["git", "/usr/bin/ls"]);
/// assert_eq!(caps.process.unwrap().allowed_binaries, ["git", "/usr/bin/ls"]);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
#[non_exhaustive]
pub struct ProcessCapability {
    /// Bare names (`git`, resolved through the trusted search path), absolute paths, or `*`
    /// (the personality's `safety.process.allow`).
    #[serde(rename = "allowedBinaries")]
    pub allowed_binaries: Vec<String>,
}

/// Checks a binary spec: a bare name or an absolute path without `.` or `..` components (and
/// `*` when `allow_star`). The error names the spec.
///
/// ```
/// use capability_types::check_binary_spec;
/// assert!(check_binary_spec("git", false).is_ok() && check_binary_spec("/usr/bin/git", false).is_ok());
/// assert!(check_binary_spec("*", true).is_ok() && check_binary_spec("*", false).is_err());
/// assert!(check_binary_spec("bin/git", false).is_err() && check_binary_spec("/bin/../sh", false).is_err());
/// ```
pub fn check_binary_spec(spec: &str, allow_star: bool) -> Result<(), String> {
    if spec == "*" {
        return if allow_star {
            Ok(())
        } else {
            Err("'*' is not accepted here: list the binaries by name or absolute path".to_owned())
        };
    }
    if spec.is_empty() || spec.contains('\0') || spec.chars().any(char::is_whitespace) {
        return Err(format!("{spec:?} is not a binary name or absolute path"));
    }
    if spec.contains('/') {
        if !spec.starts_with('/') {
            return Err(format!("{spec:?} must be a bare name or an absolute path"));
        }
        if Path::new(spec)
            .components()
            .any(|c| matches!(c, Component::ParentDir | Component::CurDir))
        {
            return Err(format!("{spec:?} must not contain '.' or '..' components"));
        }
    } else if spec == "." || spec == ".." {
        return Err(format!("{spec:?} is not a binary name"));
    }
    Ok(())
}

crate::__map_only!(
    ToolCapabilities,
    NetworkCapability,
    StorageCapability,
    FsReach,
    ProcessCapability
);

#[cfg(test)]
mod tests {
    use super::*;

    const ETHOS: &str = r#"{"network":{"allowedHosts":["api.github.com","*.example.com"]},"secrets":["GITHUB_TOKEN","providers/exa/*"],"storage":{"scope":"tool-private","kind":"kv","ttlSecondsDefault":3600},"fs_reach":{"read":"from-personality","write":["/srv/out"]},"process":{"allowedBinaries":["git"]},"attachments":{"kinds":["image","file"]}}"#;

    #[test]
    fn ethos_declaration_round_trips_byte_for_byte() {
        let caps: ToolCapabilities = serde_json::from_str(ETHOS).unwrap();
        assert_eq!(
            caps.network.as_ref().unwrap().allowed_hosts,
            ["api.github.com", "*.example.com"]
        );
        assert_eq!(
            caps.storage.as_ref().unwrap().scope,
            StorageScope::ToolPrivate
        );
        assert_eq!(
            caps.fs_reach.as_ref().unwrap().read,
            Some(FsPaths::FromPersonality)
        );
        assert_eq!(serde_json::to_string(&caps).unwrap(), ETHOS);
    }

    #[test]
    fn empty_declaration_is_empty_object() {
        let caps: ToolCapabilities = serde_json::from_str("{}").unwrap();
        assert!(caps.is_empty());
        assert_eq!(
            serde_json::to_string(&ToolCapabilities::none()).unwrap(),
            "{}"
        );
    }

    #[test]
    fn empty_lists_are_declared() {
        let caps: ToolCapabilities = serde_json::from_str(r#"{"secrets":[]}"#).unwrap();
        assert_eq!(caps.secrets, Some(vec![]));
        assert!(!caps.is_empty());
    }

    #[test]
    fn hostile_declarations_are_refused_with_the_reason() {
        let cases = [
            (
                r#"{"network":{"allowedHosts":["a"],"extra":1}}"#,
                "unknown field `extra`",
            ),
            (
                r#"{"network":{"allowed_hosts":["a"]}}"#,
                "unknown field `allowed_hosts`",
            ),
            (
                r#"{"storage":{"scope":"global","kind":"kv"}}"#,
                "unknown variant `global`",
            ),
            (
                r#"{"storage":{"scope":"session","kind":"kv","ttlSecondsDefault":0}}"#,
                "nonzero",
            ),
            (
                r#"{"storage":{"scope":"session","kind":"kv","ttlSecondsDefault":-5}}"#,
                "invalid value",
            ),
            (
                r#"{"storage":{"scope":"session","kind":"blob"}}"#,
                "unknown variant `blob`",
            ),
            (r#"{"fs_reach":{"read":"everything"}}"#, "from-personality"),
            (
                r#"{"fs_reach":{"read":["relative/path"]}}"#,
                "is not absolute",
            ),
            (r#"{"fs_reach":{"read":["/a\u0000b"]}}"#, "NUL"),
            (r#"{"fs_reach":{"exec":[]}}"#, "unknown field `exec`"),
            (r#"{"secrets":["a/../b"]}"#, "traversal"),
            (r#"{"process":{"allowedBinaries":"git"}}"#, "invalid type"),
            (r#"[]"#, "expected a map"),
            (r#"{"network":[["*"]]}"#, "expected a map"),
            (r#"{"network":null}"#, ""),
        ];
        for (json, expected) in cases {
            match serde_json::from_str::<ToolCapabilities>(json) {
                Err(err) => assert!(err.to_string().contains(expected), "{json}: {err}"),
                // `null` for an optional category means "absent", exactly as JSON readers expect.
                Ok(caps) => assert!(
                    caps.is_empty() && expected.is_empty(),
                    "{json} was accepted"
                ),
            }
        }
    }

    #[test]
    fn builders_produce_the_declared_shape() {
        let caps = ToolCapabilities::none()
            .with_network(["api.github.com"])
            .with_fs_read(FsPaths::FromPersonality)
            .with_fs_write(FsPaths::Paths(vec!["/srv/out".into()]))
            .with_process(["git"])
            .with_storage(StorageScope::Session, NonZeroU64::new(60))
            .with_secrets([SecretRef::parse("GITHUB_TOKEN").unwrap()]);
        let json = serde_json::to_value(&caps).unwrap();
        assert_eq!(json["fs_reach"]["write"][0], "/srv/out");
        assert_eq!(json["storage"]["scope"], "session");
        assert_eq!(json["storage"]["ttlSecondsDefault"], 60);
        assert_eq!(
            serde_json::from_value::<ToolCapabilities>(json).unwrap(),
            caps
        );
    }
}
