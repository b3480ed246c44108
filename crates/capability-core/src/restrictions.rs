//! The personality's rules that take from a tool's reach, recorded in a manifest's effective
//! layer so that `diff` reports their loosening (docs/review.md, "The diff: did anything
//! widen?"): a deny path or host, a `deny_args` pattern, an escalation, a constraint, a child
//! variable, the sandbox mode. A manifest that recorded only the reach said "no widenings" when
//! any of these was removed.

use std::collections::BTreeMap;
use std::path::PathBuf;

use capability_policy::ToolConstraints;
use capability_types::ToolCapabilities;
use capability_types::backend::SandboxMode;
use serde::{Deserialize, Serialize};

use crate::manifest::{WideningCode, uncovered_hosts, uncovered_paths};
use crate::policy::CompiledPolicy;

/// What the personality takes from a tool's reach, for the categories the tool declares.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Restrictions {
    /// Paths refused inside the roots (`[fs_reach] deny`, as written), for a tool that declares
    /// a reach.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fs_deny: Vec<PathBuf>,
    /// Paths refused for writing (`[fs_reach] deny_write`, as written), for a tool that
    /// declares a reach.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fs_deny_write: Vec<PathBuf>,
    /// Places kept apart, reached only through a root at or beneath them (`[fs_reach] apart`,
    /// as written), for a tool that declares a reach.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fs_apart: Vec<PathBuf>,
    /// Host patterns refused (`[safety.network] deny`), for a tool that declares network.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network_deny: Vec<String>,
    /// No host reaches the restricted address classes (`restricted_addresses = "never"`), for
    /// a tool that declares network.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub restricted_addresses_never: bool,
    /// Argv patterns refused (`deny_args`, the built-in ones first), for a tool that spawns.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny_args: Vec<String>,
    /// Variables a child may be given (`[safety.env] allow`), for a tool that spawns.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_allow: Vec<String>,
    /// Children run without kernel confinement (`sandbox = "off"`), for a tool that spawns.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sandbox_off: bool,
    /// What needs approval first (`[escalate]`), as `network <host>`, `fs_reach.write <path>`
    /// or `process.args <pattern>`, for the categories the tool declares; `tool <name>` for the
    /// tool itself (or a guarded server's tools), `call <text>` for every tool.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub escalate: Vec<String>,
    /// Text that refuses a call holding it (`[refuse] calls`), for every tool.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refuse_calls: Vec<String>,
    /// The tool's `[constraints]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constraints: Option<ToolConstraints>,
    /// For an entry that stands for every tool of a guarded server (`mcp__<server>__*`), the
    /// `[constraints]` of each of the server's tools the personality names.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tool_constraints: BTreeMap<String, ToolConstraints>,
    /// For how many batches the tool is paused after untrusted output (`[after_untrusted]
    /// pause`, docs/policy.md, "After untrusted output"), when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_after_untrusted: Option<u32>,
    /// Whether the tool is held for the rest of an invocation that has seen untrusted output
    /// (`[after_untrusted] hold`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub held_after_untrusted: bool,
    /// Places kept from writes for the rest of an invocation that has seen untrusted output
    /// (`[after_untrusted] hold_writes`, as written), for a tool that declares a reach.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held_writes_after_untrusted: Vec<PathBuf>,
}

impl Restrictions {
    /// The rules of `policy` that apply to `tool` declaring `caps`.
    pub(crate) fn of(tool: &str, caps: &ToolCapabilities, policy: &CompiledPolicy) -> Self {
        let reach = caps.fs_reach.clone().unwrap_or_default();
        let fs = reach.read.is_some() || reach.write.is_some();
        let spawns = caps.process.is_some();
        let hosts = |set: &crate::matching::host::HostSet| -> Vec<String> {
            set.patterns().iter().map(ToString::to_string).collect()
        };
        let mut escalate = Vec::new();
        if caps.network.is_some() {
            escalate.extend(
                hosts(&policy.escalate_hosts)
                    .into_iter()
                    .map(|h| format!("network {h}")),
            );
        }
        if reach.write.is_some() {
            escalate.extend(
                policy
                    .escalate_write
                    .iter()
                    .map(|p| format!("fs_reach.write {}", p.display())),
            );
        }
        if spawns {
            escalate.extend(
                policy
                    .escalate_args
                    .iter()
                    .map(|a| format!("process.args {}", a.as_str())),
            );
        }
        // Whole tools (a guarded server's entry stands for each of its tools), and call text,
        // which any tool's call may hold.
        let server = tool
            .strip_suffix('*')
            .filter(|_| crate::is_mcp_server_entry(tool));
        escalate.extend(
            (policy.escalate_tools.iter())
                .filter(|t| *t == tool || server.is_some_and(|s| t.starts_with(s)))
                .map(|t| format!("tool {t}")),
        );
        escalate.extend(policy.escalate_calls.iter().map(|c| format!("call {c}")));
        // An `[after_untrusted]` entry naming the tool, or, for a server's entry, naming it or
        // one of its tools.
        let named = |list: &[String]| {
            list.iter().any(|entry| {
                crate::after_untrusted::names_tool(entry, tool)
                    || server.is_some_and(|s| entry.starts_with(s))
            })
        };
        Restrictions {
            fs_deny: if fs {
                policy.fs_deny_written.to_vec()
            } else {
                Vec::new()
            },
            fs_deny_write: if fs {
                policy.fs_deny_write_written.to_vec()
            } else {
                Vec::new()
            },
            fs_apart: if fs {
                policy.fs_apart_written.to_vec()
            } else {
                Vec::new()
            },
            network_deny: if caps.network.is_some() {
                hosts(&policy.network_deny)
            } else {
                Vec::new()
            },
            restricted_addresses_never: caps.network.is_some()
                && policy.restricted_addresses == capability_policy::RestrictedAddresses::Never,
            deny_args: if spawns {
                policy.deny_args().map(str::to_owned).collect()
            } else {
                Vec::new()
            },
            env_allow: if spawns {
                policy.env_allow.to_vec()
            } else {
                Vec::new()
            },
            sandbox_off: spawns && policy.sandbox == SandboxMode::Off,
            escalate,
            refuse_calls: policy.refuse_calls.to_vec(),
            constraints: policy.constraints(tool).cloned(),
            paused_after_untrusted: policy
                .after_untrusted()
                .filter(|a| named(&a.pause))
                .map(|a| a.batches),
            held_after_untrusted: policy.after_untrusted().is_some_and(|a| named(&a.hold)),
            held_writes_after_untrusted: match policy.after_untrusted() {
                Some(a) if fs => a.hold_writes.clone(),
                _ => Vec::new(),
            },
            tool_constraints: match server {
                Some(server) => policy
                    .constrained_tools()
                    .filter(|t| t.starts_with(server))
                    .filter_map(|t| Some((t.to_owned(), policy.constraints(t)?.clone())))
                    .collect(),
                _ => BTreeMap::new(),
            },
        }
    }
}

/// How `new` loosens `old`, as (code, detail): a rule of `old` that `new` no longer has (a deny
/// or `deny_write` path no such rule of `new` covers, a deny host pattern no deny pattern of `new` covers, a
/// `deny_args` pattern or an escalation missing from `new`), a child variable `new` adds, the
/// sandbox turned off, a constraint dropped or relaxed.
pub(crate) fn loosened(old: &Restrictions, new: &Restrictions) -> Vec<(WideningCode, String)> {
    let mut out = Vec::new();
    let gone = |what: &str, items: Vec<String>, out: &mut Vec<(WideningCode, String)>| {
        if !items.is_empty() {
            out.push((
                WideningCode::Restriction,
                format!("{what} no longer: {}", items.join(", ")),
            ));
        }
    };
    // A rule of `old` is still in force when a rule of `new` covers it: the widenings of the
    // reach with the sides swapped.
    gone(
        "fs_reach.deny",
        uncovered_paths(&new.fs_deny, &old.fs_deny),
        &mut out,
    );
    gone(
        "fs_reach.deny_write",
        uncovered_paths(&new.fs_deny_write, &old.fs_deny_write),
        &mut out,
    );
    // A place kept apart holds only as itself: a larger one lets the roots between the two
    // reach into the smaller.
    gone(
        "fs_reach.apart",
        (old.fs_apart.iter())
            .filter(|place| !new.fs_apart.contains(place))
            .map(|place| place.display().to_string())
            .collect(),
        &mut out,
    );
    gone(
        "safety.network.deny",
        uncovered_hosts(&new.network_deny, &old.network_deny),
        &mut out,
    );
    let missing = |o: &[String], n: &[String]| -> Vec<String> {
        o.iter().filter(|x| !n.contains(x)).cloned().collect()
    };
    gone(
        "safety.process.deny_args",
        missing(&old.deny_args, &new.deny_args),
        &mut out,
    );
    gone(
        "refuse.calls",
        missing(&old.refuse_calls, &new.refuse_calls),
        &mut out,
    );
    let asks = missing(&old.escalate, &new.escalate);
    if !asks.is_empty() {
        out.push((
            WideningCode::Escalation,
            format!("no longer asks for: {}", asks.join(", ")),
        ));
    }
    let env = missing(&new.env_allow, &old.env_allow);
    if !env.is_empty() {
        out.push((
            WideningCode::Environment,
            format!("children may now be given {}", env.join(", ")),
        ));
    }
    if old.restricted_addresses_never && !new.restricted_addresses_never {
        out.push((
            WideningCode::Restriction,
            "restricted_addresses no longer never: a host named exactly reaches loopback, \
             private and link-local addresses again"
                .to_owned(),
        ));
    }
    if new.sandbox_off && !old.sandbox_off {
        out.push((
            WideningCode::Sandbox,
            "children now run without kernel confinement".to_owned(),
        ));
    }
    let mut relaxed = relaxed_constraints(old.constraints.as_ref(), new.constraints.as_ref());
    for (tool, o) in &old.tool_constraints {
        let n = new.tool_constraints.get(tool);
        relaxed.extend(
            relaxed_constraints(Some(o), n)
                .into_iter()
                .map(|r| format!("{tool}: {r}")),
        );
    }
    match (old.paused_after_untrusted, new.paused_after_untrusted) {
        (Some(a), None) => relaxed.push(format!(
            "no longer paused after untrusted output (for {a} batch(es))"
        )),
        (Some(a), Some(b)) if b < a => relaxed.push(format!(
            "paused after untrusted output for {b} batch(es) instead of {a}"
        )),
        _ => {}
    }
    if old.held_after_untrusted && !new.held_after_untrusted {
        relaxed.push("no longer held after untrusted output".to_owned());
    }
    let unheld = uncovered_paths(
        &new.held_writes_after_untrusted,
        &old.held_writes_after_untrusted,
    );
    if !unheld.is_empty() {
        relaxed.push(format!(
            "written after untrusted output again: {}",
            unheld.join(", ")
        ));
    }
    if !relaxed.is_empty() {
        out.push((WideningCode::Constraints, relaxed.join("; ")));
    }
    out
}

/// How the constraints `new` loosens `old` (absent: the defaults, no limit and the path gate
/// on), one line for each.
fn relaxed_constraints(
    old: Option<&ToolConstraints>,
    new: Option<&ToolConstraints>,
) -> Vec<String> {
    let missing = |o: &[String], n: &[String]| -> Vec<String> {
        o.iter().filter(|x| !n.contains(x)).cloned().collect()
    };
    // No entry is the defaults in force: no limit, the path gate on (`new`, where `Default`
    // would have it off).
    #[allow(
        clippy::unwrap_or_default,
        reason = "ToolConstraints::default() has the path gate off; new() is what applies"
    )]
    let [o, n] = [old, new].map(|c| c.cloned().unwrap_or_else(ToolConstraints::new));
    let mut relaxed = Vec::new();
    if o.forbidden && !n.forbidden {
        relaxed.push("no longer forbidden".to_owned());
    }
    match (o.max_invocations, n.max_invocations) {
        (Some(a), None) => relaxed.push(format!("max_invocations {a} -> none")),
        (Some(a), Some(b)) if b > a => relaxed.push(format!("max_invocations {a} -> {b}")),
        _ => {}
    }
    let after = missing(&o.only_after, &n.only_after);
    if !after.is_empty() {
        relaxed.push(format!("only_after no longer: {}", after.join(", ")));
    }
    if o.path_gate && !n.path_gate {
        relaxed.push("path_gate off".to_owned());
    }
    for (arg, values) in &o.reject_args {
        let kept = n.reject_args.get(arg).map_or(&[][..], Vec::as_slice);
        let dropped = missing(values, kept);
        if !dropped.is_empty() {
            relaxed.push(format!(
                "reject_args {arg} no longer: {}",
                dropped.join(", ")
            ));
        }
    }
    relaxed
}
