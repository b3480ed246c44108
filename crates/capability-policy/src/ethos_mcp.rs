//! How toolcap reads an Ethos personality's `mcp.yaml`: each server's `tools` and `enabled`,
//! checked against what Ethos itself reads of them (`ethos_lines::mcp`), and its `reject_args`,
//! the values of a tool's arguments Ethos refuses (docs/policy.md, "Ethos personality
//! directories").

use std::collections::BTreeMap;

use serde_json::Value;

use crate::ethos::{in_file, strings};
use crate::ethos_lines::McpServer;
use crate::parse::parse_any;
use crate::{PolicyError, PolicyFormat};

/// A tool's name made from a server's, which toolcap cannot use: the error names the field the
/// server or tool came from (the toolset's own check would name only the entry it made).
pub(crate) fn unnamable(field: String, entry: &str) -> PolicyError {
    PolicyError::invalid(
        field,
        format!(
            "toolcap cannot give this server's tools a name: {entry:?} is not a tool name \
             (1-64 characters of a-z 0-9 _ -)"
        ),
    )
}

/// Refuses a server whose tools, read from `mcp.yaml` as YAML, include one that Ethos, reading
/// the file a line at a time (`ethos_lines::mcp`), does not offer: a comment after a tool's
/// name is part of the name there, a list indented otherwise or in brackets is not read (then
/// Ethos restricts nothing, which is more, and is let be).
pub(crate) fn wider_than_ethos(
    server: &str,
    ours: Option<&ServerTools>,
    ethos: Option<&crate::ethos_lines::McpServer>,
) -> Result<(), PolicyError> {
    let ethos_tools = match ethos {
        Some(s) if s.enabled == Some(false) => Some(&[][..]),
        Some(s) => s.tools.as_deref(),
        None => None,
    };
    let wider = match (ours, ethos_tools) {
        (_, None) | (Some(ServerTools::Off), _) => false,
        (None, Some(_)) => true,
        (Some(ServerTools::Listed(tools)), Some(theirs)) => {
            tools.iter().any(|t| !theirs.contains(t))
        }
    };
    if wider {
        return Err(PolicyError::invalid(
            format!("mcp.yaml: servers.{server}"),
            format!(
                "Ethos reads its tools as {ethos_tools:?}, a line at a time, and YAML as more; \
                 write `servers:`, two spaces and `{server}:`, four and `tools:`, six and \
                 `- tool` a line, with no comment after a name"
            ),
        ));
    }
    Ok(())
}

/// What `mcp.yaml` says of one server's tools (a server it does not name offers all of them).
pub(crate) enum ServerTools {
    /// `enabled: false`: none, whatever else the file says (Ethos refuses them all).
    Off,
    /// `tools:`: only these.
    Listed(Vec<String>),
}

/// A server's `reject_args`: per tool, per argument, the values refused.
pub(crate) type RejectArgs = BTreeMap<String, ArgRules>;

/// One tool's `reject_args`: per argument, the values refused.
pub(crate) type ArgRules = BTreeMap<String, Vec<String>>;

/// What toolcap reads of `mcp.yaml` as YAML: each server's tools, and its `reject_args`.
pub(crate) type McpYaml = (BTreeMap<String, ServerTools>, BTreeMap<String, RejectArgs>);

/// `mcp.yaml`: `servers.<name>.tools` lists and `enabled`, and each server's `reject_args`.
pub(crate) fn mcp_tools(text: &str) -> Result<McpYaml, PolicyError> {
    let doc: Value = parse_any(text, PolicyFormat::Yaml).map_err(|e| in_file("mcp.yaml", e))?;
    let mut out = BTreeMap::new();
    let mut rejects = BTreeMap::new();
    let Some(servers) = doc.get("servers").and_then(Value::as_object) else {
        return Ok((out, rejects));
    };
    if let Some(extra) = doc
        .as_object()
        .and_then(|o| o.keys().find(|k| *k != "servers"))
    {
        return Err(PolicyError::invalid(
            format!("mcp.yaml: {extra}"),
            "not an mcp.yaml field",
        ));
    }
    for (server, entry) in servers {
        let field = format!("mcp.yaml: servers.{server}");
        let mut enabled = true;
        for (k, v) in entry.as_object().into_iter().flatten() {
            match k.as_str() {
                "enabled" => {
                    enabled = v.as_bool().ok_or_else(|| {
                        PolicyError::invalid(
                            format!("{field}.enabled"),
                            format!("expected true or false, got {v}"),
                        )
                    })?;
                }
                "tools" => {
                    let tools = strings(&format!("{field}.tools"), v)?;
                    out.insert(server.clone(), ServerTools::Listed(tools));
                }
                "reject_args" => {
                    rejects.insert(server.clone(), reject_args(&format!("{field}.{k}"), v)?);
                }
                other => {
                    return Err(PolicyError::invalid(
                        format!("{field}.{other}"),
                        "not an mcp.yaml field",
                    ));
                }
            }
        }
        if !enabled {
            out.insert(server.clone(), ServerTools::Off);
        }
    }
    Ok((out, rejects))
}

/// One server's `reject_args` read as YAML: tool, then argument, then a list of values (none
/// when empty).
fn reject_args(field: &str, v: &Value) -> Result<RejectArgs, PolicyError> {
    // Nothing under a key (YAML's null) is nothing to refuse, as Ethos reads it.
    let map = |field: &str, v: &Value| match v {
        Value::Null => Ok(serde_json::Map::new()),
        v => v.as_object().cloned().ok_or_else(|| {
            PolicyError::invalid(field, "expected a map: a tool, its arguments, their values")
        }),
    };
    let mut tools = RejectArgs::new();
    for (tool, args) in map(field, v)? {
        let field = format!("{field}.{tool}");
        let rules = tools.entry(tool).or_default();
        for (arg, values) in map(&field, &args)? {
            let values = match values {
                Value::Null => Vec::new(),
                values => strings(&format!("{field}.{arg}"), &values)?,
            };
            rules.insert(arg, values);
        }
    }
    Ok(tools)
}

/// The `reject_args` rules of every server, as `[constraints.mcp__<server>__<tool>]`
/// `reject_args`: what YAML reads (`yaml`) and what Ethos reads a line at a time (`ethos`)
/// together. A value either reading lists is refused, so that toolcap never lets through what
/// Ethos refuses (a quote or a comment after a value is part of it in Ethos, and a rule Ethos
/// does not read for its indentation is read here all the same: stricter, never wider).
pub(crate) fn reject_constraints(
    mut yaml: BTreeMap<String, RejectArgs>,
    ethos: &BTreeMap<String, McpServer>,
) -> Result<Vec<(String, ArgRules)>, PolicyError> {
    for (server, theirs) in ethos {
        let ours = yaml.entry(server.clone()).or_default();
        for (tool, args) in &theirs.reject_args {
            let rules = ours.entry(tool.clone()).or_default();
            for (arg, values) in args {
                (rules.entry(arg.clone()).or_default()).extend(values.iter().cloned());
            }
        }
    }
    let mut out = Vec::new();
    for (server, tools) in yaml {
        for (tool, mut rules) in tools {
            let entry = format!("mcp__{server}__{tool}");
            if !crate::valid_tool_name(&entry) {
                let field = format!("mcp.yaml: servers.{server}.reject_args");
                return Err(unnamable(field, &entry));
            }
            for values in rules.values_mut() {
                values.sort();
                values.dedup();
            }
            rules.retain(|_, values| !values.is_empty());
            if !rules.is_empty() {
                out.push((entry, rules));
            }
        }
    }
    Ok(out)
}
