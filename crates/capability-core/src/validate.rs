//! Registration-time validation: what a tool declares that the personality will not grant,
//! reported as data.

use capability_types::backend::SandboxMode;
use std::fmt;

use capability_types::{FsPaths, Tool, ToolCapabilities};
use serde::{Deserialize, Serialize};

use crate::matching::Dropped;
use crate::matching::binary::intersect_binaries;
use crate::matching::host::intersect_hosts;
use crate::matching::path::intersect_paths;
use crate::policy::CompiledPolicy;

/// One finding of registration validation: a declared capability the personality does not
/// grant, or a declaration that is malformed. Data, not a panic.
///
/// ```
/// use capability_core::CapabilityValidationError;
/// let finding = CapabilityValidationError {
///     tool: "fetch_url".into(),
///     capability: "network".into(),
///     message: "api.stripe.com is not in the personality's network allow list".into(),
/// };
/// assert_eq!(
///     finding.to_string(),
///     "fetch_url: network: api.stripe.com is not in the personality's network allow list"
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapabilityValidationError {
    /// The tool's name.
    pub tool: String,
    /// `network`, `fs_reach.read`, `fs_reach.write`, `process`, `secrets` or `storage`.
    pub capability: String,
    /// What is wrong, naming the value.
    pub message: String,
}

impl fmt::Display for CapabilityValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: {}", self.tool, self.capability, self.message)
    }
}

impl std::error::Error for CapabilityValidationError {}

/// Validates one tool's declaration against a personality. Each finding names the tool, the
/// capability (`network`, `fs_reach.read`, `fs_reach.write`, `process`, `process.sandbox`) and
/// the entry.
///
/// An empty result means every declared entry is granted as declared. The findings come from
/// the same intersection functions the resolver uses, so what is reported dropped here is
/// exactly what a call will not get.
pub fn validate_registration(
    tool: &dyn Tool,
    policy: &CompiledPolicy,
) -> Vec<CapabilityValidationError> {
    validate_declaration(tool.name(), &tool.capabilities(), policy)
}

/// [`validate_registration`] for a declaration held as data (a manifest entry, a cached
/// declaration).
pub fn validate_declaration(
    tool: &str,
    caps: &ToolCapabilities,
    policy: &CompiledPolicy,
) -> Vec<CapabilityValidationError> {
    let mut errors = Vec::new();
    let mut report = |capability: &str, dropped: Vec<Dropped>| {
        errors.extend(dropped.into_iter().map(|d| CapabilityValidationError {
            tool: tool.to_owned(),
            capability: capability.to_owned(),
            message: d.reason,
        }));
    };
    if let Some(network) = &caps.network {
        report(
            "network",
            intersect_hosts(
                &network.allowed_hosts,
                &policy.network_allow,
                &policy.network_deny,
            )
            .dropped,
        );
    }
    if let Some(reach) = &caps.fs_reach {
        for (field, declared, personality) in [
            ("fs_reach.read", &reach.read, &policy.fs_read),
            ("fs_reach.write", &reach.write, &policy.fs_write),
        ] {
            match declared {
                None => {}
                Some(FsPaths::FromPersonality) if personality.is_empty() => {
                    let why =
                        format!("declares from-personality but the personality grants no {field}");
                    report(field, vec![Dropped::new(FsPaths::FROM_PERSONALITY, why)]);
                }
                Some(FsPaths::FromPersonality) => {}
                Some(FsPaths::Paths(paths)) => {
                    report(field, intersect_paths(paths, personality, field).dropped);
                }
            }
        }
    }
    if let Some(attachments) = &caps.attachments {
        let dropped = crate::attachments::uncovered_kinds(attachments, &policy.attachment_kinds)
            .into_iter()
            .map(|kind| {
                let why = format!(
                    "attachments of kind {kind} are not all allowed by the personality's [attachments] kinds"
                );
                Dropped::new(kind, why)
            })
            .collect();
        report("attachments", dropped);
    }
    if let Some(process) = &caps.process {
        report(
            "process",
            intersect_binaries(&process.allowed_binaries, &policy.process_allow).dropped,
        );
        if policy.sandbox == SandboxMode::Off {
            report(
                "process.sandbox",
                vec![Dropped::new(
                    "sandbox",
                    "children run without kernel confinement: the personality sets \
                     safety.process.sandbox = \"off\""
                        .to_owned(),
                )],
            );
        }
    }
    errors
}

/// Validates every tool that the personality's toolset admits (tools outside it never run and
/// are skipped), in the order given.
pub fn validate_tools_for_personality<'a, I>(
    tools: I,
    policy: &CompiledPolicy,
) -> Vec<CapabilityValidationError>
where
    I: IntoIterator<Item = &'a dyn Tool>,
{
    tools
        .into_iter()
        .filter(|t| policy.allows_tool(t.name()))
        .flat_map(|t| validate_registration(t, policy))
        .collect()
}
