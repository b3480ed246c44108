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

/// The most subjects one approval request puts before a person: more do not fit a screen, and a
/// prompt whose first subjects have scrolled out of sight asks for what its reader cannot see.
/// A call with more is refused without asking (`ESCALATION_REFUSED`); made in smaller calls,
/// each is asked for on its own (docs/policy.md, "Escalation").
pub const MAX_SUBJECTS_ASKED: usize = 32;

/// The most bytes of subjects one approval request puts before a person, all subjects
/// together: a subject is shown whole, since it is what is approved, so a call whose subjects
/// run longer (a 100 KB path or argv, which would scroll the rest out of sight) is refused
/// without asking, as one with too many is.
pub const MAX_SUBJECT_BYTES_ASKED: usize = 8 * 1024;

/// Why `subjects` cannot be put before a person (more than [`MAX_SUBJECTS_ASKED`], or longer
/// than [`MAX_SUBJECT_BYTES_ASKED`] together), or `None` when they can. A call whose subjects
/// cannot be shown is refused without asking.
pub fn too_much_to_ask(subjects: &[EscalationSubject]) -> Option<String> {
    let bytes: usize = subjects.iter().map(|s| s.subject.len()).sum();
    if subjects.len() > MAX_SUBJECTS_ASKED {
        Some(format!(
            "{} subjects are too many to show for approval (at most {MAX_SUBJECTS_ASKED}); make \
             the call in smaller ones",
            subjects.len()
        ))
    } else if bytes > MAX_SUBJECT_BYTES_ASKED {
        Some(format!(
            "its subjects ({bytes} bytes) are too long to show for approval (at most \
             {MAX_SUBJECT_BYTES_ASKED})"
        ))
    } else {
        None
    }
}

impl ApprovalRequest {
    /// The masked arguments as a prompt shows them: escaped as [`shown`] does, and cut after
    /// about `max` bytes, saying how many were left out, so that a flood of arguments cannot push
    /// the subjects out of sight. The subjects, never cut, are what is approved.
    pub fn arguments_shown(&self, max: usize) -> String {
        shown_at_most(&self.arguments.to_string(), max)
    }
}

/// `text` escaped as [`shown`] escapes it, and cut after about `max` bytes (on a character's
/// boundary), saying how many were left out.
///
/// ```
/// use capability_core::shown_at_most;
/// assert_eq!(shown_at_most("a\nb", 64), "a\\nb");
/// assert_eq!(shown_at_most(&"x".repeat(100), 10), "xxxxxxxxxx… (90 more bytes not shown)");
/// ```
pub fn shown_at_most(text: &str, max: usize) -> String {
    let text = shown(text);
    if text.len() <= max {
        return text.into_owned();
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!(
        "{}… ({} more bytes not shown)",
        &text[..cut],
        text.len() - cut
    )
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
    "privatekey",
    "private-key",
    "passphrase",
    "bearer",
    "jwt",
    "signature",
];

/// Names too short to look for inside others (`sig` is in `signal`, `auth` in `author`),
/// masked when they are the whole name: Azure's signed URLs carry their signature as `sig`.
const SENSITIVE_WHOLE: &[&str] = &["sig", "auth", "pwd", "pass"];

/// Options whose value is `user:password` (curl's `-u`, `--user`, `-U`, `--proxy-user`): the
/// part after the first `:` is masked.
const USER_PASSWORD_OPTIONS: &[&str] = &["-u", "--user", "-U", "--proxy-user"];

/// A copy of `args` with the values of credential-like keys replaced by `"***"`.
pub fn mask_arguments(args: &Value) -> Value {
    mask_arguments_with(args, &[])
}

/// [`mask_arguments`], also masking keys containing any of `extra` (case-insensitive).
///
/// Credentials written inside a value are masked too, where they have a name: a URL's password
/// and the values of its credential-like query parameters (`?api_key=***`), a header line
/// (`Authorization: ***`), an option with its value attached (`--password=***`), and in a list
/// (an argv), the value that follows such an option (`"--token", "***"`).
pub fn mask_arguments_with(args: &Value, extra: &[String]) -> Value {
    let sensitive = |name: &str| {
        let lower = name.to_ascii_lowercase();
        SENSITIVE.iter().any(|s| lower.contains(s))
            || SENSITIVE_WHOLE.contains(&lower.as_str())
            || extra
                .iter()
                .any(|s| lower.contains(&s.to_ascii_lowercase()))
    };
    mask_value(args, &sensitive)
}

fn mask_value(value: &Value, sensitive: &dyn Fn(&str) -> bool) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    if sensitive(k) {
                        (k.clone(), Value::String("***".to_owned()))
                    } else {
                        (k.clone(), mask_value(v, sensitive))
                    }
                })
                .collect(),
        ),
        Value::Array(items) => {
            let mut masked = Vec::with_capacity(items.len());
            let mut next_is_secret = false;
            let mut next_is_user = false;
            for item in items {
                if next_is_secret {
                    next_is_secret = false;
                    masked.push(Value::String("***".to_owned()));
                    continue;
                }
                // `-u user:password`: the user stays, the password goes.
                if std::mem::take(&mut next_is_user)
                    && let Some((user, _)) = item.as_str().and_then(|t| t.split_once(':'))
                {
                    masked.push(Value::String(format!("{user}:***")));
                    continue;
                }
                next_is_user = item
                    .as_str()
                    .is_some_and(|t| USER_PASSWORD_OPTIONS.contains(&t));
                // `--token VALUE`: the option alone, its value the next item.
                next_is_secret = item
                    .as_str()
                    .and_then(|t| t.strip_prefix("--"))
                    .is_some_and(|name| !name.is_empty() && !name.contains('=') && sensitive(name));
                masked.push(mask_value(item, sensitive));
            }
            Value::Array(masked)
        }
        Value::String(text) => match mask_text(text, sensitive) {
            Some(masked) => Value::String(masked),
            None => value.clone(),
        },
        other => other.clone(),
    }
}

/// `text` with a named credential in it masked, or `None` when it holds none.
fn mask_text(text: &str, sensitive: &dyn Fn(&str) -> bool) -> Option<String> {
    // `--password=VALUE`.
    if let Some((option, _)) = text.split_once('=')
        && let Some(name) = option.strip_prefix("--")
        && sensitive(name)
    {
        return Some(format!("{option}=***"));
    }
    if let Some((scheme, rest)) = text.split_once("://") {
        return mask_url(scheme, rest, sensitive);
    }
    // `Authorization: Bearer VALUE`: a header's name is one word.
    let (name, _) = text.split_once(':')?;
    let header = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    (header && sensitive(name)).then(|| format!("{name}: ***"))
}

/// A URL's password and credential-like query values masked, or `None` when it has neither.
fn mask_url(scheme: &str, rest: &str, sensitive: &dyn Fn(&str) -> bool) -> Option<String> {
    let (before_fragment, fragment) = match rest.split_once('#') {
        Some((b, f)) => (b, Some(f)),
        None => (rest, None),
    };
    let (place, query) = match before_fragment.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (before_fragment, None),
    };
    let authority_end = place.find('/').unwrap_or(place.len());
    let (authority, path) = place.split_at(authority_end);
    let mut changed = false;
    let authority = match authority.rsplit_once('@') {
        Some((user_info, host)) if user_info.contains(':') => {
            changed = true;
            let user = user_info.split(':').next().unwrap_or_default();
            format!("{user}:***@{host}")
        }
        _ => authority.to_owned(),
    };
    let query = query.map(|q| {
        q.split('&')
            .map(|pair| match pair.split_once('=') {
                Some((name, _)) if sensitive(name) => {
                    changed = true;
                    format!("{name}=***")
                }
                _ => pair.to_owned(),
            })
            .collect::<Vec<_>>()
            .join("&")
    });
    changed.then(|| {
        let mut out = format!("{scheme}://{authority}{path}");
        if let Some(q) = query {
            out.push('?');
            out.push_str(&q);
        }
        if let Some(f) = fragment {
            out.push('#');
            out.push_str(f);
        }
        out
    })
}

/// The escalation subjects of a call, and the approvals that granting them means; `None` when
/// there are none (most personalities have no `[escalate]` rules, and then nothing is built).
///
/// Hosts come from every `http(s)` URL among the arguments (tools that declare `network`);
/// write paths from every absolute-path argument and the `path` argument (tools that declare a
/// write reach); argv from `{binary, args}` (tools that declare `process`); a tool from
/// `escalate.tools`, whatever it declares; a rule of `escalate.calls` from the call's text
/// ([`call_text`]).
#[inline]
pub(crate) fn subjects(
    tool: &str,
    caps: &ToolCapabilities,
    args: &Value,
    policy: &CompiledPolicy,
    working_dir: &Path,
) -> Option<(Vec<EscalationSubject>, Approvals)> {
    if policy.escalate_hosts.is_empty()
        && policy.escalate_write.is_empty()
        && policy.escalate_args.is_empty()
        && policy.escalate_tools.is_empty()
        && policy.escalate_calls.is_empty()
    {
        // No `[escalate]` rules: nothing to look for in the arguments (decided where the call
        // is, without a call).
        return None;
    }
    Some(subjects_of(tool, caps, args, policy, working_dir))
        .filter(|(subjects, _)| !subjects.is_empty())
}

/// [`subjects`] under a policy that has `[escalate]` rules.
fn subjects_of(
    tool: &str,
    caps: &ToolCapabilities,
    args: &Value,
    policy: &CompiledPolicy,
    working_dir: &Path,
) -> (Vec<EscalationSubject>, Approvals) {
    let mut out = Vec::new();
    if policy.escalate_tools.iter().any(|t| t == tool) {
        out.push(EscalationSubject {
            category: "tool".to_owned(),
            subject: tool.to_owned(),
        });
    }
    if !policy.escalate_calls.is_empty() {
        let text = call_text(tool, args);
        out.extend(
            (policy.escalate_calls.iter())
                .filter(|rule| text.contains(rule.as_str()))
                .map(|rule| EscalationSubject {
                    category: "call".to_owned(),
                    subject: rule.clone(),
                }),
        );
    }
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

/// A call as `escalate.calls` reads it: the tool's name, a space, and its arguments as JSON
/// with every object's keys sorted, written as Ethos writes them for its `denyRules`
/// (JavaScript's `JSON.stringify`: no spaces, a whole number without a fraction, an exponent
/// with its sign; [`canonical_json`](crate::canonical_json)), so that a rule asks here about
/// every call it asks about in Ethos.
pub(crate) fn call_text(tool: &str, args: &Value) -> String {
    let mut out = String::with_capacity(tool.len() + 64);
    out.push_str(tool);
    out.push(' ');
    crate::canonical::write_canonical(args, &mut out);
    out
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

    #[test]
    fn arguments_are_shown_escaped_and_cut_short() {
        let request = |arguments: Value| ApprovalRequest {
            session_id: "s".into(),
            personality_id: None,
            call_id: "c".into(),
            tool: "t".into(),
            subjects: Vec::new(),
            arguments,
        };
        assert_eq!(
            request(serde_json::json!({"path": "a\u{202e}.txt"})).arguments_shown(64),
            r#"{"path":"a\u{202e}.txt"}"#
        );
        let long = request(serde_json::json!({"content": "x".repeat(1000)})).arguments_shown(64);
        assert!(long.starts_with(r#"{"content":"xxx"#), "{long}");
        assert!(long.ends_with("… (950 more bytes not shown)"), "{long}");
        // Cut on a character's boundary.
        let wide = request(serde_json::json!({"c": "é".repeat(100)})).arguments_shown(8);
        assert!(
            wide.starts_with(r#"{"c":"é"#) && wide.contains("more bytes not shown"),
            "{wide}"
        );
    }
    use serde_json::json;

    // guarantee: G-REG-14
    /// The text `escalate.calls` reads is what Ethos matches its `denyRules` against: node's
    /// `JSON.stringify` of the same arguments, keys sorted (its output, pasted).
    #[test]
    fn a_calls_text_is_written_as_javascript_writes_it() {
        let args = json!({
            "z": [1.0, -0.0, 0.1, 1.5e-7, 1.5e-6, 1e21, 123456789012345680000.0, 12345678901234567891_u64, -2.5e-300],
            "s": "a\u{1}\u{2028}\"\\/é",
            "b": {"y": null, "x": true}
        });
        assert_eq!(
            call_text("t", &args),
            r#"t {"b":{"x":true,"y":null},"s":"a\u0001LS\"\\/é","z":[1,0,0.1,1.5e-7,0.0000015,1e+21,123456789012345680000,12345678901234567000,-2.5e-300]}"#
                .replace("LS", "\u{2028}")
        );
        assert_eq!(call_text("t", &json!(null)), "t null");
    }

    // guarantee: G-REG-15
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

    // guarantee: G-REG-15
    #[test]
    fn credentials_inside_values_are_masked_too() {
        let masked = mask_arguments(&json!({
            "url": "https://api.example.com/v1/search?q=rust&api_key=k1&Token=t1#frag",
            "next": "https://ada:pw@example.com/a?x=1",
            "plain": "https://example.com/a?q=token",
            "args": ["-H", "Authorization: Bearer t2", "--password=p1", "--token", "t3", "--user", "ada", "-v"],
            "note": "a sentence about a token: not a header",
            "hook": "https://hooks.example.com/services/T0/B0/XXXX"
        }));
        assert_eq!(
            masked,
            json!({
                "url": "https://api.example.com/v1/search?q=rust&api_key=***&Token=***#frag",
                "next": "https://ada:***@example.com/a?x=1",
                "plain": "https://example.com/a?q=token",
                "args": ["-H", "Authorization: ***", "--password=***", "--token", "***", "--user", "ada", "-v"],
                "note": "a sentence about a token: not a header",
                "hook": "https://hooks.example.com/services/T0/B0/XXXX"
            })
        );
    }

    // guarantee: G-REG-15
    /// Names credentials go by that the first list missed: a key in camel case or with a hyphen,
    /// a passphrase, a bearer token or a JWT under its own name, a signed URL's signature (S3's
    /// `X-Amz-Signature`, Azure's `sig`), and the password of `curl -u user:password`.
    #[test]
    fn credentials_by_their_other_names_are_masked() {
        let masked = mask_arguments(&json!({
            "privateKey": "-----BEGIN", "private-key": "k", "sshPassphrase": "p", "bearer": "b",
            "jwt": "eyJ", "pwd": "p2", "auth": {"user": "ada", "pass": "p3"},
            "url": "https://b.s3.amazonaws.com/o?X-Amz-Signature=s1&X-Amz-Date=d",
            "blob": "https://a.blob.core.windows.net/c/b?sv=2024&sig=s2&se=e",
            "args": ["-u", "ada:pw", "--user", "bob:pw2", "--proxy-user", "eve:pw3", "-u", "ada"],
            "author": "Ada", "session": "s", "keys": ["a"], "path": "/srv/signatures.txt"
        }));
        assert_eq!(
            masked,
            json!({
                "privateKey": "***", "private-key": "***", "sshPassphrase": "***", "bearer": "***",
                "jwt": "***", "pwd": "***", "auth": "***",
                "url": "https://b.s3.amazonaws.com/o?X-Amz-Signature=***&X-Amz-Date=d",
                "blob": "https://a.blob.core.windows.net/c/b?sv=2024&sig=***&se=e",
                "args": ["-u", "ada:***", "--user", "bob:***", "--proxy-user", "eve:***", "-u", "ada"],
                "author": "Ada", "session": "s", "keys": ["a"], "path": "/srv/signatures.txt"
            })
        );
    }

    // guarantee: G-REG-15
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
