//! `explain`: would a call be allowed, and by which rule — without touching anything.
//!
//! Explain is a dry run of the registry's own admission ([`DefaultToolRegistry::admission`]):
//! the same lookup, toolset, availability, backend guard, resolution, constraints, argument gate
//! and escalation as `call`, stopped before the tool runs, with the same result codes. What the
//! tool's scoped objects would check while it runs (a path, a host, a binary and its argv) is
//! then asked of the very objects and policy objects the call would be handed.

use std::path::Path;
use std::sync::Arc;

use capability_core::{
    Admission, Admitted, CompiledPolicy, DefaultToolRegistry, ExecutionContext, ToolCall,
    validate_declaration,
};
use capability_types::backend::{
    FsAccess, HostMatch, HostPolicy, PathAccess, PathPolicy, ProcessPolicy, SandboxMode,
};
use capability_types::{CapabilityError, DenialCode, ErrorCode, SpawnOptions};
use serde::Serialize;
use serde_json::Value;

use crate::args::parse;
use crate::tools::{FetchArgs, PathArgs, RunArgs, WriteArgs};
use crate::{StandardConfig, Store, dry_run_registry};

/// One check `explain` made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// `admission`, `toolset`, `declaration`, `escalate`, `fs_reach.read`, `fs_reach.write`,
    /// `network`, `process`, `process.sandbox`, `storage`.
    pub capability: String,
    /// What was checked (a path, a URL, a binary, an argv, a variable).
    pub subject: String,
    /// Whether it passes.
    pub allowed: bool,
    /// The rule that decided, or why it failed (a refusal's message, as the call would give it).
    pub rule: String,
}

/// The verdict on one prospective call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Explanation {
    /// The tool.
    pub tool: String,
    /// Whether the call would be allowed (every check passes).
    pub allowed: bool,
    /// The result code a call would get when not allowed (`denied`, `input_invalid`,
    /// `not_available`, `cancelled`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<ErrorCode>,
    /// The stable denial code of that result, for a policy refusal (`PATH_NOT_REACHABLE`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub denial: Option<DenialCode>,
    /// The checks, in the order a call makes them.
    pub checks: Vec<Check>,
}

impl Explanation {
    /// Adds a check made outside the registry (a guard's own argument checks, say), in order.
    pub fn push_check(
        &mut self,
        capability: &str,
        subject: impl Into<String>,
        result: Result<String, String>,
    ) {
        self.checks.push(check(capability, subject, result));
    }

    /// Marks the call refused by `error`, with its result and denial codes.
    pub fn refuse(&mut self, error: &CapabilityError) {
        self.allowed = false;
        self.code = Some(error.result_code());
        self.denial = error.denial_code();
    }
}

fn check(capability: &str, subject: impl Into<String>, result: Result<String, String>) -> Check {
    let (allowed, rule) = match result {
        Ok(rule) => (true, rule),
        Err(why) => (false, why),
    };
    Check {
        capability: capability.to_owned(),
        subject: subject.into(),
        allowed,
        rule,
    }
}

/// A refusal of a check, keeping its typed codes for the verdict.
struct Refused {
    code: ErrorCode,
    denial: Option<DenialCode>,
}

impl From<&CapabilityError> for Refused {
    fn from(e: &CapabilityError) -> Self {
        Refused {
            code: e.result_code(),
            denial: e.denial_code(),
        }
    }
}

/// Explains a call of a standard tool under `policy`, with relative paths resolved against
/// `working_dir`: [`explain_call`] on [`dry_run_registry`] with the default configuration.
/// Reads no file, opens no socket and starts no process.
pub fn explain(
    tool: &str,
    args: &Value,
    policy: &CompiledPolicy,
    working_dir: &Path,
) -> Explanation {
    let ctx = ExecutionContext::new("explain", Arc::new(policy.clone()), working_dir);
    let call = ToolCall::new("explain", tool, args.clone());
    match dry_run_registry(&StandardConfig::new(Store::Memory)) {
        Ok(registry) => explain_call(&registry, &call, &ctx),
        Err(e) => Explanation {
            tool: tool.to_owned(),
            allowed: false,
            code: Some(e.result_code()),
            denial: e.denial_code(),
            checks: vec![check("admission", tool, Err(e.to_string()))],
        },
    }
}

/// Explains `call` under `ctx` through `registry`'s own admission, stopped before the tool
/// runs. Nothing is audited, counted, asked or executed.
pub fn explain_call(
    registry: &DefaultToolRegistry,
    call: &ToolCall,
    ctx: &ExecutionContext,
) -> Explanation {
    let tool = call.tool.as_str();
    let policy = &ctx.policy;
    let mut checks = Vec::new();
    let verdict = |checks: Vec<Check>, refused: Option<Refused>| Explanation {
        tool: tool.to_owned(),
        allowed: refused.is_none(),
        code: refused.as_ref().map(|r| r.code),
        denial: refused.and_then(|r| r.denial),
        checks,
    };
    let admitted = match registry.admission(call, ctx) {
        Admission::Refused {
            code,
            denial,
            message,
        } => {
            let stage = match denial {
                Some(DenialCode::ToolNotInToolset) => "toolset",
                Some(DenialCode::ConstraintNotMet) => "constraints",
                Some(_) => "arguments",
                None if code == ErrorCode::InputInvalid => "arguments",
                None => "admission",
            };
            checks.push(check(stage, tool, Err(message)));
            return verdict(checks, Some(Refused { code, denial }));
        }
        Admission::NeedsApproval { subjects, .. } => {
            for s in subjects {
                checks.push(check(
                    "escalate",
                    format!("{} {}", s.category, s.subject),
                    Err(format!(
                        "{}: needs approval ([escalate]); refused unless an approver says yes (`toolcap call --ask`)",
                        DenialCode::EscalationRefused
                    )),
                ));
            }
            return verdict(
                checks,
                Some(Refused {
                    code: ErrorCode::Denied,
                    denial: Some(DenialCode::EscalationRefused),
                }),
            );
        }
        Admission::Admitted(admitted) => admitted,
        // A future outcome of admission is not known to pass.
        _ => {
            checks.push(check(
                "admission",
                tool,
                Err("an unknown admission outcome".to_owned()),
            ));
            return verdict(
                checks,
                Some(Refused {
                    code: ErrorCode::NotAvailable,
                    denial: None,
                }),
            );
        }
    };
    let personality = policy.id().unwrap_or("<none>").to_owned();
    checks.push(check(
        "toolset",
        tool,
        Ok(match policy.toolset() {
            Some(_) => format!("listed in the toolset of personality {personality}"),
            None => format!("personality {personality} has no toolset: every tool may run"),
        }),
    ));
    for finding in validate_declaration(tool, &admitted.capabilities, policy) {
        // Registration findings are informational: the resolved scope already excludes them.
        checks.push(Check {
            capability: "declaration".to_owned(),
            subject: finding.capability,
            allowed: true,
            rule: format!("note: {}", finding.message),
        });
    }
    if let Some(declared) = &admitted.capabilities.attachments {
        let declared = declared
            .kinds
            .as_ref()
            .map_or_else(|| "*".to_owned(), |k| k.join(", "));
        let personality = policy.attachment_kinds();
        let rule = if personality.is_empty() {
            "the personality has no [attachments] kinds: the tool is handed no attachment"
                .to_owned()
        } else {
            format!(
                "the call's own attachments whose kind the declaration ({declared}) and [attachments] kinds ({}) both allow; by id, never by path",
                personality.join(", ")
            )
        };
        checks.push(check("attachments", declared, Ok(rule)));
    }
    let refused = match tool_checks(tool, &call.args, &admitted, &mut checks) {
        Ok(refused) => refused,
        Err(e) => {
            checks.push(check(
                "arguments",
                call.args.to_string(),
                Err(e.to_string()),
            ));
            Some(Refused::from(&e))
        }
    };
    verdict(checks, refused)
}

fn path_check(
    paths: &Option<Arc<capability_core::ResolvedPaths>>,
    path: &str,
    access: FsAccess,
    refused: &mut Option<Refused>,
) -> Check {
    let capability = match access {
        FsAccess::Read => "fs_reach.read",
        FsAccess::Write => "fs_reach.write",
    };
    let result = match paths {
        None => Err(CapabilityError::denied(
            DenialCode::PathNotReachable,
            format!("the tool has no {capability} in this personality"),
        )),
        Some(p) => p
            .check(Path::new(path), access)
            .and_then(|a| {
                // The file system backend's own refusal of a write, as a call meets it.
                if access == FsAccess::Write {
                    capability_fs::refuse_what_git_runs(&a)?;
                }
                landing(p.as_ref(), &a, access)?;
                Ok(a)
            })
            .map(|a| {
                format!(
                    "{} is under the {capability} root {}",
                    a.path.display(),
                    a.root.display()
                )
            }),
    };
    outcome(capability, path, result, refused)
}

/// Where the call would land when a symbolic link lies on the way of `a` (its directory, for a
/// write; the path itself, for a read), judged as the file system backend judges where the
/// kernel lands: the policy there, and for a write what runs later there (docs/policy.md,
/// "Reached by another name"), and a link out of the root refused, as the backend never
/// follows one.
#[allow(
    clippy::disallowed_methods,
    reason = "explain resolves the path a call would open, as the kernel would; it reads nothing there"
)]
fn landing(
    paths: &dyn PathPolicy,
    a: &PathAccess,
    access: FsAccess,
) -> Result<(), CapabilityError> {
    let (opened, below) = match access {
        FsAccess::Write => (a.path.parent(), a.path.file_name()),
        FsAccess::Read => (Some(a.path.as_path()), None),
    };
    let Some(opened) = opened else {
        return Ok(());
    };
    // toolcap: allow(std::fs::canonicalize, reason = "explain resolves the path a call would open, as the kernel would, to judge where it lands")
    let Ok(real) = std::fs::canonicalize(opened) else {
        return Ok(());
    };
    if real == opened {
        return Ok(());
    }
    capability_fs::refuse_where_it_lands(paths, &a.root, &real, access, &a.path, below)
}

/// A check from a scoped object's own answer; the first refusal decides the verdict.
fn outcome(
    capability: &str,
    subject: impl Into<String>,
    result: Result<String, CapabilityError>,
    refused: &mut Option<Refused>,
) -> Check {
    if let Err(e) = &result
        && refused.is_none()
    {
        *refused = Some(Refused::from(e));
    }
    check(capability, subject, result.map_err(|e| e.to_string()))
}

/// The checks the tool's scoped objects would make on these arguments; `Ok(Some(_))` is the
/// first refusal among them.
fn tool_checks(
    tool: &str,
    args: &Value,
    admitted: &Admitted,
    out: &mut Vec<Check>,
) -> Result<Option<Refused>, CapabilityError> {
    let resolved = &admitted.resolved;
    let mut refused = None;
    match tool {
        "read_file" | "list_dir" => {
            let a: PathArgs = parse(args.clone())?;
            out.push(path_check(
                &resolved.fs,
                &a.path,
                FsAccess::Read,
                &mut refused,
            ));
        }
        "write_file" => {
            let a: WriteArgs = parse(args.clone())?;
            out.push(path_check(
                &resolved.fs,
                &a.path,
                FsAccess::Write,
                &mut refused,
            ));
        }
        "fetch_url" => {
            let a: FetchArgs = parse(args.clone())?;
            let host_refused =
                |why: String| CapabilityError::denied(DenialCode::HostNotAllowed, why);
            // The fetcher's own URL check first (scheme, user-info, a host), then the host.
            let result = capability_fetch::check_url(&a.url).and_then(|u| {
                let host = u.host_str().unwrap_or_default();
                let port = u.port_or_known_default().unwrap_or(80);
                match &resolved.network {
                    None => Err(host_refused(
                        "the tool has no network capability".to_owned(),
                    )),
                    Some(hosts) => match hosts.check(host, port) {
                        Ok(HostMatch::Explicit) => Ok(format!(
                            "{host}:{port} is named explicitly by safety.network.allow (loopback and private addresses allowed for it); every redirect is checked again"
                        )),
                        // An address written in the URL is decided here as the fetcher decides
                        // it when connecting (the same function): a wildcard reaches public
                        // addresses only.
                        Ok(HostMatch::Wildcard) => match literal_ip(&u).and_then(|ip| {
                            capability_fetch::address_refusal(ip).map(|why| (ip, why))
                        }) {
                            Some((ip, why)) => Err(host_refused(format!(
                                "{host} resolves to {why} ({ip}), which a host matched by a wildcard may not reach, nor any host under restricted_addresses = \"never\""
                            ))),
                            None => Ok(format!(
                                "{host}:{port} matches a wildcard of safety.network.allow; its addresses must be public (checked when connecting); every redirect is checked again"
                            )),
                        },
                        Err(e) => Err(e),
                    },
                }
            });
            out.push(outcome("network", a.url.clone(), result, &mut refused));
        }
        "run_command" => {
            let a: RunArgs = parse(args.clone())?;
            let argv = std::iter::once(a.binary.clone())
                .chain(a.args.iter().cloned())
                .collect::<Vec<_>>()
                .join(" ");
            let (Some(policy), Some(process)) = (&resolved.process, &admitted.scoped.process)
            else {
                let missing = CapabilityError::denied(
                    DenialCode::BinaryNotAllowed,
                    format!("{} is not in the declared allowedBinaries", a.binary),
                );
                out.push(outcome("process", argv, Err(missing), &mut refused));
                return Ok(refused);
            };
            let mut options = SpawnOptions::default();
            options.cwd = a.cwd.as_ref().map(Into::into);
            options.env = a.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            // The spawner's own checks, in its order: binary (through the trusted search path),
            // argv, environment, working directory.
            let result = process.check(&a.binary, &a.args, &options).map(|()| {
                format!(
                    "{} resolves to an allowed binary; no safety.process.deny_args pattern matches; every variable and the working directory pass",
                    a.binary
                )
            });
            out.push(outcome("process", argv, result, &mut refused));
            let sandbox = match policy.sandbox() {
                SandboxMode::Off => Ok(
                    "safety.process.sandbox = \"off\": the tool's children run without kernel confinement"
                        .to_owned(),
                ),
                SandboxMode::Required => match capability_sandbox::probe().refusal() {
                    None => Ok(
                        "the tool's children run under Landlock and seccomp: its reach, no network, resource limits"
                            .to_owned(),
                    ),
                    Some(why) => Err(CapabilityError::not_available(format!(
                        "children cannot be confined here: {why}"
                    ))),
                },
            };
            out.push(outcome(
                "process.sandbox",
                a.binary.clone(),
                sandbox,
                &mut refused,
            ));
        }
        "kv_get" | "kv_set" | "kv_delete" | "kv_list" => {
            if tool == "kv_list" {
                parse::<serde_json::Map<String, Value>>(args.clone())?;
            } else if !args.get("key").is_some_and(Value::is_string) {
                return Err(CapabilityError::invalid_input("key: required, a string"));
            }
            let namespace = resolved
                .storage
                .as_ref()
                .map(|s| s.namespace.clone())
                .unwrap_or_default();
            out.push(check(
                "storage",
                namespace.clone(),
                Ok(format!("keys live in the namespace {namespace}")),
            ));
        }
        _ => {}
    }
    Ok(refused)
}

/// The address a URL names literally (`http://0:80/` is `0.0.0.0`), if it names one.
fn literal_ip(url: &url::Url) -> Option<std::net::IpAddr> {
    match url.host()? {
        url::Host::Ipv4(ip) => Some(ip.into()),
        url::Host::Ipv6(ip) => Some(ip.into()),
        url::Host::Domain(_) => None,
    }
}
