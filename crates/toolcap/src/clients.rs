//! `toolcap mcp config`: the entry each MCP client needs to start `toolcap mcp serve` or `toolcap
//! mcp guard`, printed or merged into the client's own configuration file (docs/mcp.md, "Use it
//! from a client"). Four clients keep JSON; Codex keeps TOML, which is merged as text and read
//! back before it is written, so that nothing else in the file changes.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::ValueEnum;

use crate::ordered::Ordered;
use crate::{Usage, host, outln};

/// The MCP clients `toolcap mcp config` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Client {
    /// Claude Desktop (claude_desktop_config.json).
    ClaudeDesktop,
    /// Claude Code (.mcp.json in the project).
    ClaudeCode,
    /// Cursor (~/.cursor/mcp.json).
    Cursor,
    /// VS Code (.vscode/mcp.json in the workspace).
    Vscode,
    /// Codex (config.toml in $CODEX_HOME, by default ~/.codex).
    Codex,
}

/// Which toolcap MCP server a client starts.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Launch<'a> {
    /// `toolcap mcp serve`, with `--capsule` or not.
    Serve { capsule: bool },
    /// `toolcap mcp guard --config FILE`.
    Guard(&'a Path),
}

/// What `toolcap mcp config` was asked for, its paths resolved.
pub(crate) struct Request<'a> {
    pub(crate) client: Client,
    pub(crate) name: &'a str,
    pub(crate) exe: &'a Path,
    pub(crate) personality: &'a Path,
    pub(crate) workdir: &'a Path,
    pub(crate) launch: Launch<'a>,
    /// `--write`, with `--file` or the client's own file.
    pub(crate) write: Option<Option<PathBuf>>,
}

/// Prints the client's entry, or merges it into the client's configuration file.
pub(crate) fn configure(request: &Request<'_>) -> Result<ExitCode, Usage> {
    let args = server_args(request.personality, request.workdir, request.launch);
    let Some(file) = &request.write else {
        let text = match request.client {
            Client::Codex => codex_table(request.name, request.exe, &args, request.launch),
            client => {
                let entry = server_entry(client, request.exe, &args);
                pretty(&merge(client, Ordered::object(), request.name, entry)?)?
            }
        };
        outln!("{}", text.trim_end())?;
        return Ok(ExitCode::SUCCESS);
    };
    let path = match file {
        Some(f) => f.clone(),
        None => {
            let path = default_config_path(request.client, request.workdir)?;
            // A project's own file stays in the project, whatever its directories link to.
            if matches!(request.client, Client::ClaudeCode | Client::Vscode) {
                host::stays_within(&path, request.workdir)?;
            }
            path
        }
    };
    let merged = match request.client {
        Client::Codex => {
            let existing = host::read_config_text(&path)?;
            let table = codex_table(request.name, request.exe, &args, request.launch);
            merge_toml(existing.as_deref(), request.name, &table)
                .map_err(|why| Usage(format!("{}: {why}; it was left as it is", path.display())))?
        }
        client => {
            let existing = host::read_json_config(&path)?;
            let entry = server_entry(client, request.exe, &args);
            pretty(&merge(client, existing, request.name, entry)?)?
        }
    };
    host::write_private_atomically(&path, merged.trim_end().as_bytes())?;
    outln!("wrote the {} server into {}", request.name, path.display())?;
    Ok(ExitCode::SUCCESS)
}

fn pretty(value: &Ordered) -> Result<String, Usage> {
    serde_json::to_string_pretty(value).map_err(Usage::from)
}

/// The arguments that start `toolcap mcp serve` or `toolcap mcp guard`.
fn server_args(personality: &Path, workdir: &Path, launch: Launch<'_>) -> Vec<String> {
    let mut args = vec![
        "mcp".to_owned(),
        match launch {
            Launch::Serve { .. } => "serve",
            Launch::Guard(_) => "guard",
        }
        .to_owned(),
        "--personality".to_owned(),
        personality.display().to_string(),
        "--workdir".to_owned(),
        workdir.display().to_string(),
    ];
    match launch {
        Launch::Serve { capsule: true } => args.push("--capsule".to_owned()),
        Launch::Serve { capsule: false } => {}
        Launch::Guard(config) => {
            args.push("--config".to_owned());
            args.push(config.display().to_string());
        }
    }
    args
}

/// The JSON server entry: how the client starts toolcap.
fn server_entry(client: Client, exe: &Path, args: &[String]) -> Ordered {
    // In the order the clients' own documentation writes an entry.
    let mut entry = Vec::new();
    if matches!(client, Client::ClaudeCode | Client::Vscode) {
        entry.push(("type".to_owned(), Ordered::from("stdio")));
    }
    entry.push((
        "command".to_owned(),
        Ordered::from(exe.display().to_string().as_str()),
    ));
    entry.push((
        "args".to_owned(),
        Ordered::Array(args.iter().map(|a| Ordered::from(a.as_str())).collect()),
    ));
    Ordered::Object(entry)
}

/// `existing` with the server `name` set to `entry` under the client's key (`mcpServers`, or
/// `servers` for VS Code); every other key and server is kept, in its place. A new server goes
/// last; a server already there is replaced where it is.
fn merge(
    client: Client,
    mut existing: Ordered,
    name: &str,
    entry: Ordered,
) -> Result<Ordered, Usage> {
    let key = match client {
        Client::Vscode => "servers",
        _ => "mcpServers",
    };
    let Some(root) = existing.as_object_mut() else {
        return Err(Usage(
            "the client's configuration file is not a JSON object; it was left as it is".to_owned(),
        ));
    };
    let Some(servers) = Ordered::entry(root, key, Ordered::object).as_object_mut() else {
        return Err(Usage(format!(
            "\"{key}\" in the client's configuration file is not a JSON object; the file was left as it is"
        )));
    };
    Ordered::set(servers, name, entry);
    Ok(existing)
}

/// Where each client reads its MCP servers from.
fn default_config_path(client: Client, workdir: &Path) -> Result<PathBuf, Usage> {
    let home = || host::home().ok_or_else(|| Usage("HOME is not set; pass --file".to_owned()));
    Ok(match client {
        Client::ClaudeDesktop => {
            let home = home()?;
            if cfg!(target_os = "macos") {
                home.join("Library/Application Support/Claude/claude_desktop_config.json")
            } else {
                home.join(".config/Claude/claude_desktop_config.json")
            }
        }
        Client::ClaudeCode => workdir.join(".mcp.json"),
        Client::Cursor => home()?.join(".cursor/mcp.json"),
        Client::Vscode => workdir.join(".vscode/mcp.json"),
        // Codex reads a project's `.codex/config.toml` only once the project is trusted; the
        // user's own file always.
        Client::Codex => match host::codex_home()? {
            Some(codex_home) => codex_home.join("config.toml"),
            None => home()?.join(".codex/config.toml"),
        },
    })
}

/// Codex's `[mcp_servers.NAME]` table. `name` is a bare key (`server_name` allows nothing else).
/// The guard answers a client once every server it guards has started (each within 30 s), which
/// can take longer than Codex's default wait of 10 s; `toolcap mcp serve` starts at once.
fn codex_table(name: &str, exe: &Path, args: &[String], launch: Launch<'_>) -> String {
    let args: Vec<String> = args.iter().map(|a| toml_string(a)).collect();
    let mut table = format!(
        "[mcp_servers.{name}]\ncommand = {}\nargs = [{}]\n",
        toml_string(&exe.display().to_string()),
        args.join(", ")
    );
    if matches!(launch, Launch::Guard(_)) {
        table.push_str("startup_timeout_sec = 60\n");
    }
    table
}

/// `text` as a TOML basic string: JSON's escapes are TOML's, but for DEL, which TOML wants
/// escaped and JSON leaves as it is.
fn toml_string(text: &str) -> String {
    serde_json::to_string(text)
        .unwrap_or_default()
        .replace('\u{7f}', "\\u007F")
}

/// `existing` (absent: no file) with `[mcp_servers.NAME]` set to `table`: a table already there
/// is replaced where it is (with its sub-tables, `[mcp_servers.NAME.env]`), a new one goes at
/// the end; every other line is kept as it is, comments included. The result is read back and
/// must mean what `existing` meant but for that one server, which must be `table`; otherwise
/// (the server written as an inline table or with dotted keys, a header inside a multi-line
/// string) the error says so and nothing is written.
fn merge_toml(existing: Option<&str>, name: &str, table: &str) -> Result<String, String> {
    let existing = existing.unwrap_or("");
    let before: toml::Table =
        toml::from_str(existing).map_err(|e| format!("is not valid TOML ({})", e.message()))?;
    let lines: Vec<&str> = existing.lines().collect();
    // The header of a table, as its dotted path without spaces or quotes.
    let header = |line: &str| -> Option<String> {
        let line = line.trim();
        let inner = line.strip_prefix('[')?.split(']').next()?;
        (!inner.starts_with('[')).then(|| inner.replace([' ', '\t', '"', '\''], ""))
    };
    let ours = format!("mcp_servers.{name}");
    let is_ours = |path: &str| path == ours || path.starts_with(&format!("{ours}."));
    let mut kept = Vec::new();
    let mut at = None;
    let mut inside = false;
    for line in &lines {
        if let Some(path) = header(line) {
            inside = is_ours(&path);
            if inside && at.is_none() {
                at = Some(kept.len());
            }
        }
        if !inside {
            kept.push(*line);
        }
    }
    let text = match at {
        Some(at) => {
            let mut merged: Vec<&str> = kept[..at].to_vec();
            merged.extend(table.lines());
            if kept.len() > at {
                merged.push("");
            }
            merged.extend(&kept[at..]);
            merged.join("\n")
        }
        None => {
            let mut text = kept.join("\n");
            if !text.trim().is_empty() {
                text.push_str("\n\n");
            }
            text.push_str(table);
            text
        }
    };
    let mut text = text.trim_end().to_owned();
    text.push('\n');
    let after: toml::Table = toml::from_str(&text).map_err(|e| {
        format!(
            "could not add [{ours}] without changing the rest of the file ({}); add this \
             yourself:\n{table}",
            e.message()
        )
    })?;
    let wanted: toml::Table = toml::from_str(table).map_err(|e| e.message().to_owned())?;
    let server = |t: &toml::Table| t.get("mcp_servers")?.get(name).cloned();
    let without = |mut t: toml::Table| {
        if let Some(servers) = t.get_mut("mcp_servers").and_then(toml::Value::as_table_mut) {
            servers.remove(name);
            if servers.is_empty() {
                t.remove("mcp_servers");
            }
        }
        t
    };
    if server(&after) != server(&wanted) || without(after) != without(before) {
        return Err(format!(
            "[{ours}] is written in a form toolcap does not rewrite (an inline table, dotted \
             keys, or a header inside a multi-line string); replace it yourself with:\n{table}"
        ));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// `value` as a document, its keys in `serde_json`'s order.
    fn doc(value: Value) -> Ordered {
        serde_json::from_value(value).unwrap()
    }

    /// `merge`, its result read back as a `Value`.
    fn merged(client: Client, existing: Value, entry: Ordered) -> Value {
        serde_json::to_value(merge(client, doc(existing), "toolcap", entry).unwrap()).unwrap()
    }

    fn args(launch: Launch<'_>) -> Vec<String> {
        server_args(Path::new("/p.toml"), Path::new("/w"), launch)
    }

    #[test]
    fn merging_keeps_other_servers_and_keys() {
        let existing = json!({"theme": "dark", "mcpServers": {"other": {"command": "x"}}});
        let entry = server_entry(
            Client::ClaudeDesktop,
            Path::new("/bin/toolcap"),
            &args(Launch::Serve { capsule: true }),
        );
        let merged = merged(Client::ClaudeDesktop, existing, entry);
        assert_eq!(merged["theme"], "dark");
        assert_eq!(merged["mcpServers"]["other"]["command"], "x");
        assert_eq!(merged["mcpServers"]["toolcap"]["command"], "/bin/toolcap");
        assert_eq!(
            merged["mcpServers"]["toolcap"]["args"],
            json!([
                "mcp",
                "serve",
                "--personality",
                "/p.toml",
                "--workdir",
                "/w",
                "--capsule"
            ])
        );
    }

    #[test]
    fn vscode_uses_servers_with_a_type() {
        let entry = server_entry(
            Client::Vscode,
            Path::new("/bin/toolcap"),
            &args(Launch::Guard(Path::new("/g.toml"))),
        );
        assert_eq!(
            serde_json::to_value(&entry).unwrap()["args"],
            json!([
                "mcp",
                "guard",
                "--personality",
                "/p.toml",
                "--workdir",
                "/w",
                "--config",
                "/g.toml"
            ])
        );
        let merged = merged(Client::Vscode, json!({}), entry);
        assert_eq!(merged["servers"]["toolcap"]["type"], "stdio");
    }

    #[test]
    fn a_file_that_is_not_an_object_is_refused_not_replaced() {
        for bad in [json!([1, 2]), json!("text"), json!({"mcpServers": [1]})] {
            assert!(merge(Client::Cursor, doc(bad), "toolcap", Ordered::object()).is_err());
        }
    }

    fn table() -> String {
        codex_table(
            "toolcap",
            Path::new("/bin/toolcap"),
            &args(Launch::Serve { capsule: false }),
            Launch::Serve { capsule: false },
        )
    }

    /// Reads `text` as TOML.
    fn read(text: &str) -> toml::Table {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn codex_strings_are_toml_strings_whatever_they_hold() {
        let odd = "/tmp/a \"q\" \\ \t\n\u{7f}\u{1} é";
        let text = codex_table(
            "toolcap",
            Path::new(odd),
            &[odd.to_owned()],
            Launch::Guard(Path::new("/g")),
        );
        let t = read(&text);
        assert_eq!(t["mcp_servers"]["toolcap"]["command"].as_str(), Some(odd));
        assert_eq!(t["mcp_servers"]["toolcap"]["args"][0].as_str(), Some(odd));
        assert_eq!(
            t["mcp_servers"]["toolcap"]["startup_timeout_sec"].as_integer(),
            Some(60)
        );
    }

    #[test]
    fn codex_merging_adds_or_replaces_one_table_and_keeps_every_other_line() {
        // No file, an empty one: the table alone.
        assert_eq!(merge_toml(None, "toolcap", &table()).unwrap(), table());
        assert_eq!(
            merge_toml(Some("\n"), "toolcap", &table()).unwrap(),
            table()
        );
        // Added at the end, comments and other servers kept.
        let existing =
            "# mine\nmodel = \"o3\" # the model\n\n[mcp_servers.other]\ncommand = \"npx\"\n";
        let merged = merge_toml(Some(existing), "toolcap", &table()).unwrap();
        assert!(merged.starts_with(existing), "{merged}");
        assert_eq!(
            read(&merged)["mcp_servers"]["toolcap"]["command"].as_str(),
            Some("/bin/toolcap")
        );
        // Replaced where it is, its sub-table with it; what follows is kept.
        let existing = "model = \"o3\"\n\n[mcp_servers.toolcap]\ncommand = \"/old\" # old\nargs = []\n\n[mcp_servers.toolcap.env]\nX = \"1\"\n\n[mcp_servers.toolcapx]\ncommand = \"y\"\n\n[profiles.fast]\nmodel = \"mini\"\n";
        let merged = merge_toml(Some(existing), "toolcap", &table()).unwrap();
        assert!(
            !merged.contains("/old") && !merged.contains("X = "),
            "{merged}"
        );
        let t = read(&merged);
        assert_eq!(t["mcp_servers"]["toolcapx"]["command"].as_str(), Some("y"));
        assert_eq!(t["profiles"]["fast"]["model"].as_str(), Some("mini"));
        assert!(
            merged.find("[mcp_servers.toolcap]").unwrap()
                < merged.find("[mcp_servers.toolcapx]").unwrap(),
            "{merged}"
        );
        // Again: the same file.
        assert_eq!(
            merge_toml(Some(&merged), "toolcap", &table()).unwrap(),
            merged
        );
    }

    #[test]
    fn codex_files_toolcap_cannot_rewrite_safely_are_refused() {
        for existing in [
            // Not TOML.
            "model = \n",
            // The servers as an inline table, or the server with dotted keys.
            "mcp_servers = { other = { command = \"x\" } }\n",
            "[mcp_servers]\ntoolcap.command = \"x\"\n",
            // A header inside a multi-line string.
            "notes = \"\"\"\n[mcp_servers.toolcap]\n\"\"\"\n",
        ] {
            let refused = merge_toml(Some(existing), "toolcap", &table());
            assert!(refused.is_err(), "{existing}: {refused:?}");
        }
    }
}
