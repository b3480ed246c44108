//! Escalation: calls that match an `[escalate]` pattern pause and ask an [`ApprovalHandler`].
//!
//! The patterns are also refusals in every resolved scope unless the call was approved for
//! exactly that subject, so a redirect, a second path or another argv that was not in the
//! approval is still refused by the scoped objects (fail closed). This module finds the subjects
//! in a call's arguments and builds the request a human sees.

use std::fmt;
use std::path::Path;

use capability_types::{ToolCapabilities, async_trait};
use serde::Serialize;
use serde_json::Value;

use crate::matching::host::normalize_host;
use crate::matching::path::{is_within, resolve_path};
use crate::policy::CompiledPolicy;
use crate::resolve::Approvals;

/// Decides escalated calls. An `Err` (a broken channel to the human, say) refuses the call.
#[async_trait]
pub trait ApprovalHandler: Send + Sync + fmt::Debug {
    /// Whether the call may proceed.
    async fn approve(&self, request: &ApprovalRequest) -> Result<bool, String>;
}

pub use capability_types::shown;

/// One thing a call would do that needs approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EscalationSubject {
    /// `network`, `fs_reach.write` or `process.args`.
    pub category: String,
    /// The host, the path or the argv.
    pub subject: String,
}

/// What an approval handler is asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ApprovalRequest {
    /// The session.
    pub session_id: String,
    /// The personality.
    pub personality_id: Option<String>,
    /// The call's id.
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// What needs approval.
    pub subjects: Vec<EscalationSubject>,
    /// The call's arguments, with credential-like values masked.
    pub arguments: Value,
}

/// Argument names whose values are masked wherever they appear (compared case-insensitively,
/// as substrings: `github_token`, `X-Api-Key` and `password2` are all masked).
const SENSITIVE: &[&str] = &[
    "password",
    "passwd",
    "secret",
    "token",
    "authorization",
    "api_key",
    "apikey",
    "api-key",
    "cookie",
    "credential",
    "private_key",
];

/// A copy of `args` with the values of credential-like keys replaced by `"***"`.
pub fn mask_arguments(args: &Value) -> Value {
    mask_arguments_with(args, &[])
}

/// [`mask_arguments`], also masking keys containing any of `extra` (case-insensitive).
pub fn mask_arguments_with(args: &Value, extra: &[String]) -> Value {
    match args {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let lower = k.to_ascii_lowercase();
                    let sensitive = SENSITIVE.iter().any(|s| lower.contains(s))
                        || extra
                            .iter()
                            .any(|s| lower.contains(&s.to_ascii_lowercase()));
                    if sensitive {
                        (k.clone(), Value::String("***".to_owned()))
                    } else {
                        (k.clone(), mask_arguments_with(v, extra))
                    }
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| mask_arguments_with(v, extra))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The escalation subjects of a call, and the approvals that granting them means; `None` when
/// there are none (most personalities have no `[escalate]` rules, and then nothing is built).
///
/// Hosts come from every `http(s)` URL among the arguments (tools that declare `network`);
/// write paths from every absolute-path argument and the `path` argument (tools that declare a
/// write reach); argv from `{binary, args}` (tools that declare `process`).
#[inline]
pub(crate) fn subjects(
    caps: &ToolCapabilities,
    args: &Value,
    policy: &CompiledPolicy,
    working_dir: &Path,
) -> Option<(Vec<EscalationSubject>, Approvals)> {
    if policy.escalate_hosts.is_empty()
        && policy.escalate_write.is_empty()
        && policy.escalate_args.is_empty()
    {
        // No `[escalate]` rules: nothing to look for in the arguments (decided where the call
        // is, without a call).
        return None;
    }
    Some(subjects_of(caps, args, policy, working_dir)).filter(|(subjects, _)| !subjects.is_empty())
}

/// [`subjects`] under a policy that has `[escalate]` rules.
fn subjects_of(
    caps: &ToolCapabilities,
    args: &Value,
    policy: &CompiledPolicy,
    working_dir: &Path,
) -> (Vec<EscalationSubject>, Approvals) {
    let mut out = Vec::new();
    let mut approvals = Approvals::default();
    let declares_write = caps.fs_reach.as_ref().is_some_and(|r| r.write.is_some());
    let mut strings = Vec::new();
    collect_strings(args, None, &mut strings);
    for (key, text) in strings {
        if caps.network.is_some()
            && !policy.escalate_hosts.is_empty()
            && let Ok(url) = url::Url::parse(text)
            && matches!(url.scheme(), "http" | "https")
            && let Some(host) = url.host_str().and_then(|h| normalize_host(h).ok())
            && policy
                .escalate_hosts
                .lookup(&host, url.port_or_known_default().unwrap_or(80))
                .is_some()
            && !approvals.hosts.contains(&host)
        {
            out.push(EscalationSubject {
                category: "network".to_owned(),
                subject: host.clone(),
            });
            approvals.hosts.push(host);
        }
        if declares_write
            && !policy.escalate_write.is_empty()
            && (text.starts_with('/') || key == Some("path"))
            && let Ok(full) = resolve_path(Path::new(text), working_dir)
            && policy.escalate_write.iter().any(|e| is_within(&full, e))
            && !approvals.write_paths.contains(&full)
        {
            out.push(EscalationSubject {
                category: "fs_reach.write".to_owned(),
                subject: full.display().to_string(),
            });
            approvals.write_paths.push(full);
        }
    }
    if caps.process.is_some()
        && !policy.escalate_args.is_empty()
        && let Some(binary) = args.get("binary").and_then(Value::as_str)
        && let Some(rest) = args.get("args").map_or(Some(Vec::new()), |a| {
            a.as_array()
                .and_then(|a| a.iter().map(|v| v.as_str().map(str::to_owned)).collect())
        })
        && policy
            .escalate_args
            .iter()
            .any(|p| p.matches(binary, Path::new(binary), &rest))
    {
        let full: Vec<String> = std::iter::once(binary.to_owned()).chain(rest).collect();
        out.push(EscalationSubject {
            category: "process.args".to_owned(),
            subject: full.join(" "),
        });
        approvals.argv.push(full);
    }
    (out, approvals)
}

fn collect_strings<'a>(
    value: &'a Value,
    key: Option<&'a str>,
    out: &mut Vec<(Option<&'a str>, &'a str)>,
) {
    match value {
        Value::String(s) => out.push((key, s)),
        Value::Array(items) => items.iter().for_each(|v| collect_strings(v, key, out)),
        Value::Object(map) => map
            .iter()
            .for_each(|(k, v)| collect_strings(v, Some(k), out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn configured_keys_are_masked_too() {
        let masked = mask_arguments_with(
            &json!({"ssn": "1", "Customer_SSN": "2", "name": "n"}),
            &["SSN".to_owned()],
        );
        assert_eq!(
            masked,
            json!({"ssn": "***", "Customer_SSN": "***", "name": "n"})
        );
    }

    #[test]
    fn masking() {
        let masked = mask_arguments(&json!({
            "url": "https://x", "headers": {"Authorization": "Bearer t", "X-Api-Key": "k", "accept": "*/*"},
            "github_token": "ghp", "list": [{"password": "p"}], "n": 1
        }));
        assert_eq!(
            masked,
            json!({"url": "https://x", "headers": {"Authorization": "***", "X-Api-Key": "***", "accept": "*/*"},
                   "github_token": "***", "list": [{"password": "***"}], "n": 1})
        );
    }
}
