//! A narrowing (docs/policy.md, "Per-invocation narrowing"): an extra policy for one batch or
//! one invocation that can only restrict the personality.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::PolicyError;
use crate::parse::parse_any;
use crate::personality::{
    AttachmentRules, EscalateRules, PersonalityPolicy, PolicyFormat, ToolConstraints,
};

/// An extra policy for one batch (or one invocation) that can only restrict the personality.
///
/// Every field is optional: absent means "not narrowed". A list that is present is intersected
/// with the personality's, rule by rule; deny lists add up; constraints combine to the stricter
/// of the two. Parsed strictly, like a personality (`Narrowing::parse`).
///
/// ```
/// # #[cfg(feature = "toml")] {
/// use capability_policy::{Narrowing, PolicyFormat};
/// let n = Narrowing::parse("toolset = [\"read_file\"]\n[network]\ndeny = [\"*.example.com\"]\n", PolicyFormat::Toml, None).unwrap();
/// assert_eq!(n.toolset.as_deref(), Some(&["read_file".to_owned()][..]));
/// # }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
#[non_exhaustive]
pub struct Narrowing {
    /// Tools that may run: intersected with the personality's toolset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toolset: Option<Vec<String>>,
    /// File reach.
    #[serde(default)]
    pub fs_reach: NarrowFs,
    /// Hosts.
    #[serde(default)]
    pub network: NarrowNetwork,
    /// Binaries and argv rules.
    #[serde(default)]
    pub process: NarrowProcess,
    /// Variables a child may inherit: intersected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_allow: Option<Vec<String>>,
    /// Extra constraints per tool, combined with the personality's to the stricter.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub constraints: BTreeMap<String, ToolConstraints>,
    /// Escalation patterns added to the personality's (an escalation in either layer stays).
    #[serde(default)]
    pub escalate: EscalateRules,
    /// Kinds of attachment tools may receive: intersected with the personality's (an empty
    /// list: none). Absent: the personality's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attachments: Option<AttachmentRules>,
}

/// `[fs_reach]` of a [`Narrowing`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
#[non_exhaustive]
pub struct NarrowFs {
    /// Read roots, intersected with the personality's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read: Option<Vec<PathBuf>>,
    /// Write roots, intersected with the personality's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write: Option<Vec<PathBuf>>,
    /// Added to the personality's deny list.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<PathBuf>,
    /// Added to the personality's `deny_write` list.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny_write: Vec<PathBuf>,
    /// Added to the personality's `apart` list.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub apart: Vec<PathBuf>,
}

/// `[network]` of a [`Narrowing`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
#[non_exhaustive]
pub struct NarrowNetwork {
    /// Host patterns, kept where the personality's allow list covers them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow: Option<Vec<String>>,
    /// Added to the personality's deny list.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<String>,
}

/// `[process]` of a [`Narrowing`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
#[non_exhaustive]
pub struct NarrowProcess {
    /// Binaries, intersected with the personality's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow: Option<Vec<String>>,
    /// Added to the personality's `deny_args`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny_args: Vec<String>,
}

impl Narrowing {
    /// Parses and checks a narrowing (same formats and `~` rules as a personality).
    pub fn parse(
        text: &str,
        format: PolicyFormat,
        home: Option<&Path>,
    ) -> Result<Self, PolicyError> {
        let mut n: Narrowing = parse_any(text, format)?;
        n.check(home)?;
        Ok(n)
    }

    /// Checks and normalises a narrowing built in code.
    pub fn check(&mut self, home: Option<&Path>) -> Result<(), PolicyError> {
        // The same rules as a personality: build one carrying the narrowing's lists and check it.
        let mut probe = PersonalityPolicy {
            id: "narrowing".to_owned(),
            ..PersonalityPolicy::default()
        };
        probe.toolset = self.toolset.clone();
        probe.fs_reach.read = self.fs_reach.read.clone().unwrap_or_default();
        probe.fs_reach.write = self.fs_reach.write.clone().unwrap_or_default();
        probe.fs_reach.deny = self.fs_reach.deny.clone();
        probe.fs_reach.deny_write = self.fs_reach.deny_write.clone();
        probe.fs_reach.apart = self.fs_reach.apart.clone();
        probe.safety.process.allow = self.process.allow.clone().unwrap_or_default();
        probe.safety.process.deny_args = self.process.deny_args.clone();
        probe.safety.env.allow = self.env_allow.clone().unwrap_or_default();
        probe.constraints = self.constraints.clone();
        probe.escalate = self.escalate.clone();
        probe.attachments = self.attachments.clone().unwrap_or_default();
        probe.check(home)?;
        self.escalate = probe.escalate.clone();
        if self.fs_reach.read.is_some() {
            self.fs_reach.read = Some(probe.fs_reach.read);
        }
        if self.fs_reach.write.is_some() {
            self.fs_reach.write = Some(probe.fs_reach.write);
        }
        self.fs_reach.deny = probe.fs_reach.deny;
        self.fs_reach.deny_write = probe.fs_reach.deny_write;
        self.fs_reach.apart = probe.fs_reach.apart;
        Ok(())
    }
}

capability_types::__map_only!(Narrowing, NarrowFs, NarrowNetwork, NarrowProcess);
