//! `explain`: would a call be allowed, and by which rule — without touching anything.

use std::path::Path;
use std::sync::Arc;

use capability_core::matching::binary::ArgvPattern;
use capability_core::{CompiledPolicy, resolve, validate_declaration};
use capability_types::{
    CapabilityError, FsAccess, HostMatch, HostPolicy, PathPolicy, ProcessPolicy, SandboxMode,
};
use serde::Serialize;
use serde_json::Value;

use crate::args::parse;
use crate::standard_tools;
use crate::tools::{FetchArgs, PathArgs, RunArgs, WriteArgs};

/// One check `explain` made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// `toolset`, `declaration`, `fs_reach.read`, `fs_reach.write`, `network`, `process`,
    /// `process.args`, `env`, `storage`.
    pub capability: String,
    /// What was checked (a path, a URL, a binary, an argv, a variable).
    pub subject: String,
    /// Whether it passes.
    pub allowed: bool,
    /// The rule that decided, or why it failed.
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
    /// `not_available`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// The checks, in the order a call makes them.
    pub checks: Vec<Check>,
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

fn denial_text(e: CapabilityError) -> String {
    e.to_string()
}

/// Explains a call of a standard tool under `policy`, with relative paths resolved against
/// `working_dir`. Reads no file, opens no socket and starts no process.
pub fn explain(
    tool: &str,
    args: &Value,
    policy: &CompiledPolicy,
    working_dir: &Path,
) -> Explanation {
    let mut checks = Vec::new();
    let finish = |checks: Vec<Check>, code: Option<&str>| {
        let allowed = code.is_none() && checks.iter().all(|c| c.allowed);
        let code = if allowed {
            None
        } else {
            Some(code.unwrap_or("denied").to_owned())
        };
        Explanation {
            tool: tool.to_owned(),
            allowed,
            code,
            checks,
        }
    };
    let Some(instance) = standard_tools().into_iter().find(|t| t.name() == tool) else {
        checks.push(check("toolset", tool, Err(format!("unknown tool {tool}"))));
        return finish(checks, Some("not_available"));
    };
    let personality = policy.id().unwrap_or("<none>").to_owned();
    checks.push(check(
        "toolset",
        tool,
        if policy.allows_tool(tool) {
            Ok(match policy.toolset() {
                Some(_) => format!("listed in the toolset of personality {personality}"),
                None => format!("personality {personality} has no toolset: every tool may run"),
            })
        } else {
            Err(format!(
                "TOOL_NOT_IN_TOOLSET: {tool} is not in the toolset of personality {personality}"
            ))
        },
    ));
    let caps = instance.capabilities();
    for finding in validate_declaration(tool, &caps, policy) {
        // Registration findings are informational: the resolved scope already excludes them.
        checks.push(Check {
            capability: "declaration".to_owned(),
            subject: finding.capability,
            allowed: true,
            rule: format!("note: {}", finding.message),
        });
    }
    let resolved = resolve(tool, &caps, policy, "explain", working_dir);
    let arguments = match tool_checks(tool, args, policy, &resolved) {
        Ok(c) => c,
        Err(e) => {
            checks.push(check("arguments", args.to_string(), Err(e.to_string())));
            return finish(checks, Some("input_invalid"));
        }
    };
    checks.extend(arguments);
    finish(checks, None)
}

fn path_check(
    paths: &Option<Arc<capability_core::ResolvedPaths>>,
    path: &str,
    access: FsAccess,
) -> Check {
    let capability = match access {
        FsAccess::Read => "fs_reach.read",
        FsAccess::Write => "fs_reach.write",
    };
    let result = match paths {
        None => Err(format!("the tool has no {capability} in this personality")),
        Some(p) => p
            .check(Path::new(path), access)
            .map(|a| {
                format!(
                    "{} is under the {capability} root {}",
                    a.path.display(),
                    a.root.display()
                )
            })
            .map_err(denial_text),
    };
    check(capability, path, result)
}

fn tool_checks(
    tool: &str,
    args: &Value,
    policy: &CompiledPolicy,
    resolved: &capability_core::ResolvedCapabilities,
) -> Result<Vec<Check>, CapabilityError> {
    let mut out = Vec::new();
    match tool {
        "read_file" | "list_dir" => {
            let a: PathArgs = parse(args.clone())?;
            out.push(path_check(&resolved.fs, &a.path, FsAccess::Read));
        }
        "write_file" => {
            let a: WriteArgs = parse(args.clone())?;
            out.push(path_check(&resolved.fs, &a.path, FsAccess::Write));
        }
        "fetch_url" => {
            let a: FetchArgs = parse(args.clone())?;
            let result = match url::Url::parse(&a.url) {
                Err(e) => return Err(CapabilityError::invalid_input(format!("url: {e}"))),
                Ok(u) if !matches!(u.scheme(), "http" | "https") => Err(format!(
                    "HOST_NOT_ALLOWED: {}: only http and https URLs may be fetched",
                    u.scheme()
                )),
                Ok(u) if !u.username().is_empty() || u.password().is_some() => {
                    Err("HOST_NOT_ALLOWED: URLs with user-info are refused".to_owned())
                }
                Ok(u) => {
                    let host = u.host_str().unwrap_or_default();
                    let port = u.port_or_known_default().unwrap_or(80);
                    match &resolved.network {
                        None => Err("the tool has no network capability".to_owned()),
                        Some(hosts) => match hosts.check(host, port) {
                            Ok(HostMatch::Explicit) => Ok(format!(
                                "{host}:{port} is named explicitly by safety.network.allow (loopback and private addresses allowed for it); every redirect is checked again"
                            )),
                            // An address written in the URL is decided here as the fetcher
                            // decides it when connecting: a wildcard reaches public ones only.
                            Ok(HostMatch::Wildcard) => match literal_ip(&u).and_then(|ip| {
                                capability_fetch::address_refusal(ip).map(|why| (ip, why))
                            }) {
                                Some((ip, why)) => Err(format!(
                                    "HOST_NOT_ALLOWED: {host} resolves to {why} ({ip}), which only an explicitly named host may reach"
                                )),
                                None => Ok(format!(
                                    "{host}:{port} matches a wildcard of safety.network.allow; its addresses must be public (checked when connecting); every redirect is checked again"
                                )),
                            },
                            Err(e) => Err(denial_text(e)),
                        },
                    }
                }
            };
            out.push(check("network", a.url.clone(), result));
        }
        "run_command" => {
            let a: RunArgs = parse(args.clone())?;
            let Some(process) = &resolved.process else {
                out.push(check(
                    "process",
                    a.binary,
                    Err("the tool has no process capability".to_owned()),
                ));
                return Ok(out);
            };
            let allowed = process.allowed_binaries();
            out.push(check(
                "process",
                a.binary.clone(),
                if allowed.iter().any(|b| b == &a.binary) {
                    Ok(format!("safety.process.allow lists {} (resolved through the trusted search path when spawned)", a.binary))
                } else {
                    Err(format!("BINARY_NOT_ALLOWED: {} is not in the declared allowedBinaries", a.binary))
                },
            ));
            let argv = std::iter::once(a.binary.clone())
                .chain(a.args.iter().cloned())
                .collect::<Vec<_>>()
                .join(" ");
            let resolved_name = Path::new(&a.binary);
            let matched = policy.deny_args().map(str::to_owned).find(|pattern| {
                ArgvPattern::parse(pattern)
                    .is_ok_and(|p| p.matches(&a.binary, resolved_name, &a.args))
            });
            out.push(check(
                "process.args",
                argv.clone(),
                match matched {
                    None => Ok("no safety.process.deny_args pattern matches".to_owned()),
                    Some(pattern) => Err(format!(
                        "ARGS_NOT_ALLOWED: {argv} refused by the deny_args pattern `{pattern}`"
                    )),
                },
            ));
            for name in a.env.keys() {
                let result = process
                    .check_env(name)
                    .map(|()| "not a loader or interpreter hook".to_owned())
                    .map_err(denial_text);
                out.push(check("env", name.clone(), result));
            }
            if let Some(cwd) = &a.cwd {
                out.push(path_check(&resolved.fs, cwd, FsAccess::Read));
            }
            let sandbox = match process.sandbox() {
                SandboxMode::Off => Ok(
                    "safety.process.sandbox = \"off\": the child runs without kernel confinement"
                        .to_owned(),
                ),
                SandboxMode::Required => match capability_sandbox::probe().refusal() {
                    None => Ok(
                        "the child runs under Landlock and seccomp: the tool's reach, \
                                no network, resource limits"
                            .to_owned(),
                    ),
                    Some(why) => Err(format!(
                        "NOT_AVAILABLE: children cannot be confined here: {why}"
                    )),
                },
            };
            out.push(check("process.sandbox", a.binary.clone(), sandbox));
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
                Ok(format!(
                    "keys live in the namespace {namespace} (scope personality)"
                )),
            ));
        }
        _ => {}
    }
    Ok(out)
}

/// The address a URL names literally (`http://0:80/` is `0.0.0.0`), if it names one.
fn literal_ip(url: &url::Url) -> Option<std::net::IpAddr> {
    match url.host()? {
        url::Host::Ipv4(ip) => Some(ip.into()),
        url::Host::Ipv6(ip) => Some(ip.into()),
        url::Host::Domain(_) => None,
    }
}
