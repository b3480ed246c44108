//! How Ethos itself reads a personality's `config.yaml` and `toolset.yaml`: not as YAML, but a
//! line at a time (its `parseConfigYaml`, `parseNestedBlock` and `parseToolsetYaml`). toolcap
//! reads the files as strict YAML and then asks what Ethos would have read; where a value that
//! carries policy differs (a comment after a value, which is part of the value in Ethos; a list
//! in brackets, which is one string there; a quote around a tool's name, which is part of the
//! name), the personality is refused, since it would reach something here that it does not in
//! Ethos (docs/policy.md, "Ethos personality directories").

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::PolicyError;

/// The flat `key: value` pairs Ethos reads from `config.yaml`: every line that starts with a
/// key of word characters and dots, then `:`, then a value on the same line; the value trimmed,
/// a quote at either end dropped. A key given twice is its last value, as in Ethos.
pub(crate) fn flat(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in text.split('\n') {
        let key_len = line
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.'))
            .count();
        let Some(rest) = line[key_len..].strip_prefix(':') else {
            continue;
        };
        // `\s*(.+)$`: at least one character after the spaces, and none that JavaScript's `.`
        // refuses (a line ending left in the line, as a CRLF file leaves `\r`: such a line
        // is not read at all there).
        let value = rest.trim_start();
        if key_len == 0 || value.is_empty() || value.contains(['\r', '\u{2028}', '\u{2029}']) {
            continue;
        }
        out.insert(line[..key_len].to_owned(), unquote(value.trim()).to_owned());
    }
    out
}

/// The tool names Ethos reads from `toolset.yaml`: every line that, trimmed, starts with `- `,
/// the rest trimmed, empty names left out.
pub(crate) fn toolset(text: &str) -> Vec<String> {
    text.split('\n')
        .map(str::trim)
        .filter_map(|line| line.strip_prefix("- "))
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The `safety:` block as Ethos reads it (`safety:` alone on its line at the left margin, or
/// followed by `{}`), or `None` when Ethos finds none.
pub(crate) fn safety(text: &str) -> Option<Map<String, Value>> {
    let lines: Vec<&str> = text.split('\n').collect();
    let at = lines.iter().position(|line| {
        line.strip_prefix("safety:")
            .is_some_and(|rest| rest.trim().is_empty() || rest.trim_start().starts_with("{}"))
    })?;
    Some(block(&lines, at + 1).0)
}

/// The `config.yaml` keys toolcap maps onto access policy, and the `safety:` fields.
const POLICY_KEYS: [&str; 6] = [
    "fs_reach.read",
    "fs_reach.write",
    "fs_reach.workdir",
    "mcp_servers",
    "plugins",
    "memoryScope",
];

/// Refuses a `config.yaml` whose policy reads differently as YAML than as Ethos reads it, a line
/// at a time (`ethos_lines`): a comment after a value is part of the value there, a list in
/// brackets one string, a value on the next lines none at all. Read as YAML, each would reach
/// what the personality does not reach in Ethos.
pub(crate) fn same_as_ethos_reads(
    text: &str,
    yaml: &BTreeMap<String, Value>,
) -> Result<(), PolicyError> {
    let differs = |field: String, ethos: &dyn std::fmt::Debug, yaml: &dyn std::fmt::Display| {
        PolicyError::invalid(
            format!("config.yaml: {field}"),
            format!(
                "Ethos reads it as {ethos:?}, a line at a time, and YAML as {yaml}; write \
                 `key: value` on one line, with no comment after the value"
            ),
        )
    };
    let flat = flat(text);
    for key in POLICY_KEYS {
        let ethos = flat.get(key);
        let same = match (yaml.get(key), ethos) {
            (None, None) => true,
            (Some(Value::String(y)), Some(e)) => y == e,
            _ => false,
        };
        if !same {
            let yaml = yaml.get(key).map_or("nothing".to_owned(), Value::to_string);
            return Err(differs(key.to_owned(), &ethos, &yaml));
        }
    }
    let ethos_safety = safety(text);
    let yaml_safety = yaml.get("safety").and_then(Value::as_object);
    for path in [
        &["network", "allow"][..],
        &["network", "deny"],
        &["approvalMode"],
        &["denyRules"],
    ] {
        let at = |block: Option<&serde_json::Map<String, Value>>| {
            let (first, rest) = path.split_first()?;
            rest.iter()
                .try_fold(block?.get(*first)?, |value, key| value.get(key))
                .cloned()
        };
        let (y, e) = (at(yaml_safety), at(ethos_safety.as_ref()));
        if y != e {
            let yaml = y.map_or("nothing".to_owned(), |v| v.to_string());
            return Err(differs(format!("safety.{}", path.join(".")), &e, &yaml));
        }
    }
    Ok(())
}

/// What Ethos reads of one server in `mcp.yaml`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct McpServer {
    /// `tools:`, its `- name` items.
    pub(crate) tools: Option<Vec<String>>,
    /// `enabled: true|false`.
    pub(crate) enabled: Option<bool>,
    /// `reject_args:`: per tool at six spaces, per argument at eight, its `- value` items at ten.
    pub(crate) reject_args: crate::ethos_mcp::RejectArgs,
}

/// The servers Ethos reads from `mcp.yaml` (its `parseMcpYaml`): `servers:` at the left margin,
/// each server at two spaces, its keys at four, list items at six, exactly; whatever else it
/// skips with a warning (so that a line it does not read restricts nothing there).
pub(crate) fn mcp(text: &str) -> BTreeMap<String, McpServer> {
    let lines: Vec<&str> = text.split('\n').collect();
    let mut out = BTreeMap::new();
    let Some(start) = lines.iter().position(|l| {
        l.strip_prefix("servers:")
            .is_some_and(|rest| rest.trim().is_empty())
    }) else {
        return out;
    };
    let blank = |l: &str| l.trim().is_empty() || l.trim_start().starts_with('#');
    // `^\s{n}` then `rest`: exactly `n` whitespace characters before it.
    let at = |l: &'_ str, n: usize| -> Option<String> {
        let mut chars = l.chars();
        for _ in 0..n {
            if !chars.next()?.is_whitespace() {
                return None;
            }
        }
        Some(chars.as_str().to_owned())
    };
    let mut i = start + 1;
    while i < lines.len() {
        if blank(lines[i]) {
            i += 1;
            continue;
        }
        if indentation(lines[i]) < 2 {
            break;
        }
        // `^\s{n}(\w[\w-]*):\s*$`: a name alone on its line, at exactly `n` spaces.
        let name_at = |l: &str, n: usize| {
            at(l, n).and_then(|rest| {
                let name = rest.trim_end().strip_suffix(':')?;
                let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
                (name.starts_with(word) && name.chars().all(|c| word(c) || c == '-'))
                    .then(|| name.to_owned())
            })
        };
        // `^\s{n}-\s+(.+)$`, trimmed: JavaScript's `.` takes no line ending, so an item of a
        // CRLF file is not read.
        let item_at = |l: &str, n: usize| {
            at(l, n).and_then(|rest| {
                let rest = rest.strip_prefix('-')?;
                let taken = rest.trim_start();
                (rest.starts_with(char::is_whitespace)
                    && !taken.is_empty()
                    && !taken.contains(['\r', '\u{2028}', '\u{2029}']))
                .then(|| taken.trim().to_owned())
            })
        };
        // The items at `n` spaces from line `i` on, past blank lines and comments.
        let items_at = |i: &mut usize, n: usize| {
            let mut items = Vec::new();
            while *i < lines.len() {
                if blank(lines[*i]) {
                    *i += 1;
                    continue;
                }
                let Some(item) = item_at(lines[*i], n) else {
                    break;
                };
                items.push(item);
                *i += 1;
            }
            items
        };
        let server = name_at(lines[i], 2);
        i += 1;
        let Some(server) = server else { continue };
        let mut policy = McpServer::default();
        while i < lines.len() {
            if blank(lines[i]) {
                i += 1;
                continue;
            }
            if indentation(lines[i]) < 4 {
                break;
            }
            let key = at(lines[i], 4).unwrap_or_default();
            if key
                .strip_prefix("tools:")
                .is_some_and(|r| r.trim().is_empty())
            {
                i += 1;
                policy.tools = Some(items_at(&mut i, 6));
                continue;
            }
            if key
                .strip_prefix("reject_args:")
                .is_some_and(|r| r.trim().is_empty())
            {
                // A tool at six spaces, each argument at eight, its values at ten; a line
                // indented further that is none of these is skipped, as Ethos skips it.
                i += 1;
                let mut tool: Option<String> = None;
                while i < lines.len() && (blank(lines[i]) || indentation(lines[i]) >= 6) {
                    let line = lines[i];
                    i += 1;
                    if blank(line) {
                        continue;
                    }
                    if let Some(name) = name_at(line, 6) {
                        policy.reject_args.insert(name.clone(), BTreeMap::new());
                        tool = Some(name);
                    } else if indentation(line) < 8 {
                        // Ethos is back to looking for a tool: arguments until the next are not
                        // read.
                        tool = None;
                    } else if let Some(arg) = name_at(line, 8)
                        && let Some(rules) =
                            tool.as_ref().and_then(|t| policy.reject_args.get_mut(t))
                    {
                        rules.insert(arg, items_at(&mut i, 10));
                    }
                }
                continue;
            }
            if let Some(value) = key.strip_prefix("enabled:") {
                match value.trim() {
                    "true" => policy.enabled = Some(true),
                    "false" => policy.enabled = Some(false),
                    _ => {}
                }
            }
            i += 1;
        }
        out.insert(server, policy);
    }
    out
}

/// Ethos's `parseNestedBlock`, line for line: the keys at the first line's indentation, each a
/// value on its line, a list of `- ` lines, or a deeper block; and where it stopped.
fn block(lines: &[&str], start: usize) -> (Map<String, Value>, usize) {
    let mut obj = Map::new();
    let indent = lines
        .get(start)
        .map(|l| indentation(l))
        .filter(|n| *n > 0)
        .unwrap_or(2);
    let mut i = start;
    while i < lines.len() {
        let line = lines[i];
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            i += 1;
            continue;
        }
        let at = indentation(line);
        if at < indent {
            break;
        }
        if at == indent
            && let Some((key, value)) = key_line(line)
        {
            let value = value.trim();
            if value.is_empty() || value == "{}" {
                let deeper = lines.get(i + 1).filter(|next| indentation(next) > indent);
                if let Some(next) = deeper {
                    if next.trim().starts_with("- ") {
                        let mut items = Vec::new();
                        let mut j = i + 1;
                        while j < lines.len() {
                            let item = lines[j].trim();
                            if item.is_empty() || item.starts_with('#') {
                                j += 1;
                                continue;
                            }
                            let Some(item) = item.strip_prefix("- ") else {
                                break;
                            };
                            items.push(Value::String(unquote(item.trim()).to_owned()));
                            j += 1;
                        }
                        obj.insert(key.to_owned(), Value::Array(items));
                        i = j;
                        continue;
                    }
                    let (child, end) = block(lines, i + 1);
                    obj.insert(key.to_owned(), Value::Object(child));
                    i = end;
                    continue;
                }
                obj.insert(key.to_owned(), Value::Object(Map::new()));
            } else if let Some(first) = value.strip_prefix("- ") {
                let mut items = vec![Value::String(first.to_owned())];
                let mut j = i + 1;
                while let Some(item) = lines.get(j).and_then(|l| l.trim().strip_prefix("- ")) {
                    items.push(Value::String(item.trim().to_owned()));
                    j += 1;
                }
                obj.insert(key.to_owned(), Value::Array(items));
                i = j;
                continue;
            } else {
                obj.insert(key.to_owned(), Value::String(unquote(value).to_owned()));
            }
        }
        i += 1;
    }
    (obj, i)
}

/// The whitespace a line starts with, in characters.
fn indentation(line: &str) -> usize {
    line.chars().take_while(|c| c.is_whitespace()).count()
}

/// `^\s+(\w+):\s*(.*)$`: an indented key of word characters and what follows its colon.
fn key_line(line: &str) -> Option<(&str, &str)> {
    let rest = line.trim_start();
    if rest.len() == line.len() {
        return None;
    }
    let key_len = rest
        .bytes()
        .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
        .count();
    let value = rest[key_len..].strip_prefix(':')?;
    (key_len > 0).then(|| (&rest[..key_len], value))
}

/// `replace(/^["']|["']$/g, '')`: one quote at the start and one at the end dropped, each on
/// its own.
fn unquote(value: &str) -> &str {
    let value = value.strip_prefix(['"', '\'']).unwrap_or(value);
    value.strip_suffix(['"', '\'']).unwrap_or(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_are_read_as_ethos_reads_them() {
        let flat = flat(
            "name: \"Ada\"\nfs_reach.read: /a # notes\nfs_reach.write: [/b]\n  indented: x\n\
             fs_reach.workdir:\nmodel: x\nmodel: y\n# c: d\n",
        );
        assert_eq!(flat["name"], "Ada");
        assert_eq!(flat["fs_reach.read"], "/a # notes");
        assert_eq!(flat["fs_reach.write"], "[/b]");
        assert_eq!(flat["model"], "y", "the last of a key given twice");
        assert!(!flat.contains_key("fs_reach.workdir") && !flat.contains_key("indented"));
        assert!(!flat.contains_key("# c"));
        assert!(
            super::flat("fs_reach.read: /a\r\n").is_empty(),
            "a CRLF line is not read"
        );

        assert_eq!(
            toolset("# tools\n- read_file\n-  \"x\" # y\ntools:\n  - write_file\n-\n"),
            ["read_file", "\"x\" # y", "write_file"]
        );

        let safety = safety(
            "name: x\nsafety:\n  approvalMode: 'off'\n  network:\n    allow:\n      \
             - api.github.com # the forge\n      # gh\n      - \"b.com\"\n    deny: [c.com]\n  denyRules: - rm\n    - mv\nother: 1\n",
        )
        .unwrap();
        assert_eq!(
            Value::Object(safety),
            json!({
                "approvalMode": "off",
                "network": {"allow": ["api.github.com # the forge", "b.com"], "deny": "[c.com]"},
                "denyRules": ["rm", "mv"]
            })
        );
        // A comment right after `allow:` makes Ethos read a block, not a list: no allow list.
        let quirk = super::safety("safety:\n  network:\n    allow:\n      # gh\n      - a.com\n");
        assert_eq!(
            quirk.map(Value::Object),
            Some(json!({"network": {"allow": {}}}))
        );
        assert!(super::safety("safety: {network: {}}\n").is_none());

        let mcp = mcp(
            "servers:\n  linear:\n    tools:\n      - list_issues # mine\n      \
             - get_issue\n    enabled: false # off\n  github:\n    enabled: false\n    \
             reject_args:\n      save:\n        status:\n          - Done\n    tools: [a]\n    \
             server:\n  bad name:\n    tools:\n      - x\n",
        );
        assert_eq!(
            mcp["linear"],
            McpServer {
                tools: Some(vec![
                    "list_issues # mine".to_owned(),
                    "get_issue".to_owned()
                ]),
                enabled: None,
                reject_args: BTreeMap::new(),
            }
        );
        type Written<'a> = [(&'a str, &'a [(&'a str, &'a [&'a str])])];
        let rules = |pairs: &Written<'_>| {
            pairs
                .iter()
                .map(|(tool, args)| {
                    let args = args
                        .iter()
                        .map(|(a, v)| (a.to_string(), v.iter().map(|x| x.to_string()).collect()))
                        .collect();
                    (tool.to_string(), args)
                })
                .collect::<BTreeMap<String, BTreeMap<String, Vec<String>>>>()
        };
        assert_eq!(
            mcp["github"],
            McpServer {
                tools: None,
                enabled: Some(false),
                reject_args: rules(&[("save", &[("status", &["Done"])])]),
            }
        );
        assert_eq!(mcp.len(), 2, "{mcp:?}");

        // Ethos's own loader cases, and the lines it skips: an argument before any tool, one
        // after a line that ends the tool's block, a value not at ten spaces, a CRLF value.
        let read = |text: &str| {
            super::mcp(text)
                .remove("linear")
                .unwrap_or_default()
                .reject_args
        };
        assert_eq!(
            read(
                "servers:\n  linear:\n    reject_args:\n      save_issue:\n        status:\n          - Done\n          - Cancelled\n"
            ),
            rules(&[("save_issue", &[("status", &["Done", "Cancelled"])])])
        );
        assert_eq!(
            read(
                "servers:\n  linear:\n    tools:\n      - save_issue\n    reject_args:\n      \
                  # the rules\n      save_issue:\n\n        status:\n          - \"Done\" # final\n           - x\n        \
                  team:\n          - core\r\n        prio: x\n          - p1\n      create:\n       stray:\n        kind:\n          - bug\n    enabled: true\n"
            ),
            rules(&[
                (
                    "save_issue",
                    &[("status", &["\"Done\" # final"]), ("team", &[])]
                ),
                ("create", &[]),
            ])
        );
        assert_eq!(
            read(
                "servers:\n  linear:\n    reject_args:\n        status:\n          - Done\n      a:\n        b:\n          - c\n      a:\n        d:\n          - e\n"
            ),
            rules(&[("a", &[("d", &["e"])])]),
            "an argument before any tool is not read; a tool given twice is its last"
        );
        assert_eq!(super::safety("safety: {}\n"), Some(Map::new()));
    }
}
