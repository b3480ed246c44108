//! Ethos personality directories as personalities (docs/policy.md, "Ethos personality
//! directories"): `config.yaml`, `toolset.yaml` and `mcp.yaml`, mapped field by field onto a
//! [`PersonalityPolicy`], the fields that are not access policy ignored by an explicit list,
//! anything else an error. This module reads no file: the caller hands over the texts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::ethos_mcp::{ServerTools, mcp_tools, reject_constraints, unnamable, wider_than_ethos};
use crate::ethos_reach::EthosReach;
use crate::parse::parse_any;
use crate::{PersonalityPolicy, PolicyError, PolicyFormat, ToolConstraints};

/// The policy-bearing files of one Ethos personality directory, as text (absent when the file
/// is not there).
#[derive(Debug, Clone, Copy, Default)]
pub struct EthosFiles<'a> {
    /// `config.yaml`.
    pub config: Option<&'a str>,
    /// `toolset.yaml`: the list of tools.
    pub toolset: Option<&'a str>,
    /// `mcp.yaml`: per-server MCP tool lists.
    pub mcp: Option<&'a str>,
}

/// What Ethos substitutes into `fs_reach` paths: `${ETHOS_HOME}` and `${CWD}` (`${self}` is the
/// personality's id).
#[derive(Debug, Clone, Copy)]
pub struct EthosVars<'a> {
    /// Ethos's home (`$ETHOS_HOME`, by default `~/.ethos`).
    pub ethos_home: &'a Path,
    /// The current directory of the agent.
    pub cwd: &'a Path,
}

/// The names of the files in a personality directory that carry policy.
pub const ETHOS_POLICY_FILES: [&str; 3] = ["config.yaml", "toolset.yaml", "mcp.yaml"];

/// Files an Ethos personality directory holds that are not access policy (read by nobody here).
pub const ETHOS_OTHER_FILES: [&str; 4] = ["SOUL.md", "skills", "tools.yaml", "README.md"];

/// What Ethos refuses every personality, whatever its `fs_reach`: its `sensitiveDenyPaths` (the
/// always-deny floor of its `storage-fs`: credentials, shell histories, system places) but for
/// its state dir's own entries, which are [`ETHOS_STATE_DENY`]. An Ethos personality gets them
/// as deny rules, so that it reaches here no more than it does in Ethos; without a known home
/// directory for the entries under `~`, it does not load. Its `/proc/self/environ` and
/// `/proc/self/cmdline` are not among them (a rule on `/proc/self` would be a rule on this
/// process's number, another in every run): toolcap's own floor keeps all of `/proc`, and an
/// Ethos personality may not lift it (`from_ethos` refuses a root there).
pub const ETHOS_ALWAYS_DENY: [&str; 19] = [
    "~/.ssh",
    "~/.aws/credentials",
    "~/.aws/config",
    "~/.gnupg",
    "~/.netrc",
    "~/.bash_history",
    "~/.zsh_history",
    "~/.psql_history",
    "~/.mysql_history",
    "~/.npmrc",
    "~/Library/Keychains",
    "/etc/passwd",
    "/etc/shadow",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/root",
    "/boot",
    "/sys",
    "/proc/sys",
];

/// The entries of Ethos's state dir it keeps from every personality, kept here beneath
/// `~/.ethos` and beneath `$ETHOS_HOME` when that is elsewhere (Ethos keeps them in every
/// state dir it has): its keys and secrets, its configuration and web token, the pairing
/// database and sessions its file tools refuse to write (a deny rule here refuses reading them
/// too), and since its `STATE_DIR_DENY_ENTRIES` (2026-09) what its next boot or cron run
/// executes on the host (`mcp.json`, `plugins`, `scripts`), every personality's transcripts,
/// telemetry and memory (the SQLite databases, with the side files it keeps beside them), and
/// the learning inbox.
pub const ETHOS_STATE_DENY: [&str; 19] = [
    "keys.json",
    "secrets",
    "config.yaml",
    "web-token",
    "pairing.db",
    "sessions",
    "mcp.json",
    "plugins",
    "scripts",
    "sessions.db",
    "sessions.db-wal",
    "sessions.db-shm",
    "observability.db",
    "observability.db-wal",
    "observability.db-shm",
    "memory.db",
    "memory.db-wal",
    "memory.db-shm",
    "learning",
];

/// The entries of a personality's directory that define it, which Ethos keeps every turn from
/// writing, for every personality beneath every state dir (its `PERSONALITY_DEFINITION_ENTRIES`
/// and the snapshots `ethos personality revert` restores): a personality that wrote its own
/// `toolset.yaml`, or another's, would grant itself tools at the next load. Kept here from
/// writes beneath `personalities/*/` of `~/.ethos` and `$ETHOS_HOME` (docs/policy.md, "Kept
/// from writes"); reading them stays open, as in Ethos.
pub const ETHOS_DEFINITION_ENTRIES: [&str; 9] = [
    "SOUL.md",
    "config.yaml",
    "toolset.yaml",
    "mcp.yaml",
    "tools.yaml",
    "ETHOS.md",
    "skills",
    "commands",
    ".expression-history",
];

/// The entries of Ethos's state dir every personality loads, kept from writes as a
/// personality's own definition is (Ethos's `STATE_DIR_DEFINITION_ENTRIES`).
pub const ETHOS_STATE_DEFINITIONS: [&str; 2] = ["skills", "commands"];

/// The `deny_write` rules of Ethos's definition floor for the state dir `state`: every
/// personality's definition entries ([`ETHOS_DEFINITION_ENTRIES`], beneath
/// `personalities/*/`) and the state dir's own ([`ETHOS_STATE_DEFINITIONS`]).
pub fn ethos_definition_rules(state: &Path) -> Vec<PathBuf> {
    let personalities = state.join("personalities").join("*");
    ETHOS_DEFINITION_ENTRIES
        .iter()
        .map(|entry| personalities.join(entry))
        .chain(
            ETHOS_STATE_DEFINITIONS
                .iter()
                .map(|entry| state.join(entry)),
        )
        .collect()
}

/// The tools every Ethos surface with an approval flow asks about, whatever the personality's
/// `approvalMode` (its `APPROVAL_SURFACE_ALWAYS_ASK`): an Ethos personality's `[escalate]`
/// `tools` here.
pub const ETHOS_ALWAYS_ASKS: [&str; 3] =
    ["skills_pending_approve", "skills_pending_reject", "call"];

/// The tools Ethos's `approvalMode: smart` has reviewed before they run (its
/// `SMART_MODE_CONSEQUENTIAL_TOOLS`), by a model there and by the approver here.
pub const ETHOS_SMART_ASKS: [&str; 4] = ["terminal", "write_file", "patch_file", "process_start"];

/// `config.yaml` keys that are not access policy: how the agent talks, which model it uses,
/// how it remembers. Ignored.
const NOT_POLICY: &[&str] = &[
    "name",
    "description",
    "provider",
    "platform",
    "model",
    "capabilities",
    "streamingTimeoutMs",
    "budgetCapUsd",
    "context_engine",
    "evolution_approval_mode",
];

/// Prefixes of dotted `config.yaml` keys that are not access policy. Ignored.
const NOT_POLICY_PREFIXES: &[&str] = &[
    "model.",
    "context_layering.",
    "context_engine_options.",
    "skill_evolution.",
    "dreaming.",
    "nightly.",
    "memory.",
    "mcp_export.",
    "outbound_policy.",
    "voice.",
    "display.",
];

/// `safety:` keys that are about content and logging, not access. Ignored, but for
/// `injectionDefense.postReadDowngrade`, which `ethos_downgrade` reads.
const SAFETY_NOT_ACCESS: &[&str] = &[
    "observability",
    "injectionDefense",
    "piiRedaction",
    "allowed_skill_permissions",
];

impl PersonalityPolicy {
    /// The personality an Ethos personality directory describes, under `id` (the directory's
    /// name). `fs_reach` entries are read as Ethos reads them: substituted, `~` not expanded, an
    /// entry that is not absolute beneath `vars.cwd`. The result is checked like any policy.
    ///
    /// Where Ethos and toolcap differ, toolcap is stricter (docs/policy.md): no `toolset.yaml`
    /// means no tool; no `safety.network.allow` means no host; a `safety` setting toolcap does
    /// not know is an error, never silently dropped. Ethos's approval flow becomes `[escalate]`
    /// (`tools`: [`ETHOS_ALWAYS_ASKS`], and [`ETHOS_SMART_ASKS`] under `approvalMode: smart`),
    /// with toolcap's approver in place of Ethos's modal or model; its `denyRules` become
    /// `[refuse] calls`, which no approval passes, as in the later Ethos.
    /// `mcp.yaml`'s `reject_args` become `[constraints.mcp__<server>__<tool>]` `reject_args`,
    /// read both as YAML and as Ethos reads the file.
    ///
    /// ```
    /// # #[cfg(feature = "yaml")] {
    /// use capability_policy::{EthosFiles, EthosVars, PersonalityPolicy};
    /// use std::path::Path;
    /// let files = EthosFiles {
    ///     config: Some("name: Reviewer\nmodel: claude-sonnet-4-6\nfs_reach.read: /srv/repo\n"),
    ///     toolset: Some("- read_file\n- search_files\n"),
    ///     mcp: None,
    /// };
    /// let vars = EthosVars { ethos_home: Path::new("/home/ada/.ethos"), cwd: Path::new("/srv/repo") };
    /// let p = PersonalityPolicy::from_ethos("reviewer", files, vars, Some(Path::new("/home/ada"))).unwrap();
    /// assert_eq!(p.toolset.as_deref(), Some(&["read_file".to_owned(), "search_files".to_owned()][..]));
    /// assert_eq!(p.fs_reach.read, [Path::new("/srv/repo")]);
    /// # }
    /// ```
    pub fn from_ethos(
        id: &str,
        files: EthosFiles<'_>,
        vars: EthosVars<'_>,
        home: Option<&Path>,
    ) -> Result<Self, PolicyError> {
        let config: BTreeMap<String, Value> = match files.config {
            Some(text) if !text.trim().is_empty() => {
                parse_any(text, PolicyFormat::Yaml).map_err(|e| in_file("config.yaml", e))?
            }
            _ => BTreeMap::new(),
        };
        let mut policy = PersonalityPolicy {
            id: id.to_owned(),
            ..PersonalityPolicy::default()
        };
        let mut reach = EthosReach::default();
        let mut mcp_servers: Vec<String> = Vec::new();
        for (key, value) in &config {
            match key.as_str() {
                "fs_reach.read" => reach.read = Some(path_list(key, value)?),
                "fs_reach.write" => reach.write = Some(path_list(key, value)?),
                // `trim() || undefined` in Ethos: an empty workdir is none at all.
                "fs_reach.workdir" => {
                    let workdir = string(key, value)?;
                    reach.workdir = Some(workdir).filter(|w| !w.trim().is_empty());
                }
                "mcp_servers" => {
                    let Value::String(names) = value else {
                        return Err(PolicyError::invalid(
                            "config.yaml: mcp_servers",
                            "Ethos reads mcp_servers only as names on its own line \
                             (`mcp_servers: linear github`); a list on the next lines gives the \
                             personality no server there",
                        ));
                    };
                    mcp_servers = names.split_whitespace().map(str::to_owned).collect();
                }
                // Plugin tools are gated by the toolset in toolcap; the list adds nothing.
                "plugins" => {
                    string(key, value)?;
                }
                // Which MEMORY.md Ethos's memory tools shared (Ethos shipped it until 2026-05
                // and no longer reads it): toolcap keeps every personality's storage to
                // itself, so `global` gives less here than it did there.
                "memoryScope" => memory_scope(value)?,
                "safety" => safety(value, &mut policy)?,
                k if NOT_POLICY.contains(&k)
                    || NOT_POLICY_PREFIXES.iter().any(|p| k.starts_with(p)) => {}
                k => {
                    return Err(PolicyError::invalid(
                        format!("config.yaml: {k}"),
                        "not a field toolcap knows in an Ethos personality (neither access policy it maps nor one it ignores by name)",
                    ));
                }
            }
        }
        crate::ethos_lines::same_as_ethos_reads(files.config.unwrap_or(""), &config)?;
        // Ethos's post-read downgrade, on unless both readings turn it off.
        policy.after_untrusted = crate::ethos_downgrade::after_untrusted(
            config.get("safety"),
            crate::ethos_lines::safety(files.config.unwrap_or("")).as_ref(),
        );
        // The later Ethos refuses a run that has read untrusted text every write into its state
        // dirs: what is there, a later prompt reads.
        if let Some(after) = &mut policy.after_untrusted {
            after.hold_writes = vec![PathBuf::from("~/.ethos"), vars.ethos_home.to_path_buf()];
        }
        // Ethos refuses loopback, private and link-local addresses whatever host names them,
        // unless `allow_private_urls`, and cloud metadata always: never here, which is the
        // same, or less (docs/policy.md, "Ethos personality directories").
        policy.safety.network.restricted_addresses = crate::RestrictedAddresses::Never;
        reach.apply(id, vars, home, &mut policy)?;
        // Naming `/proc` lifts toolcap's floor there, while Ethos keeps `/proc/self/environ`
        // and `cmdline` from every personality, places no rule here can name for every process.
        for (field, roots) in [
            ("fs_reach.read", &policy.fs_reach.read),
            ("fs_reach.write", &policy.fs_reach.write),
        ] {
            let proc = Path::new("/proc");
            if let Some(root) = roots
                .iter()
                .find(|r| crate::normalize_lexically(r).starts_with(proc))
            {
                return Err(PolicyError::invalid(
                    field,
                    format!(
                        "{} lies in /proc, which an Ethos personality may not reach here: Ethos \
                         keeps /proc/self/environ and cmdline from every personality",
                        root.display()
                    ),
                ));
            }
        }
        // Ethos's own floor holds whatever the reach says; toolcap's floor is added at check.
        // Its places beneath the home directory need one: without it, refused, never loaded
        // without them.
        if home.is_none() {
            return Err(PolicyError::invalid(
                "fs_reach",
                "an Ethos personality needs the home directory known (HOME): Ethos keeps \
                 ~/.npmrc, the shell histories and its own secrets from every personality",
            ));
        }
        policy
            .fs_reach
            .deny
            .extend(ETHOS_ALWAYS_DENY.iter().map(PathBuf::from));
        for state in [Path::new("~/.ethos"), vars.ethos_home] {
            let entries = ETHOS_STATE_DENY.iter().map(|entry| state.join(entry));
            policy.fs_reach.deny.extend(entries);
            (policy.fs_reach.deny_write).extend(ethos_definition_rules(state));
            // A root above a state dir does not reach into it (UBP-047): only the personality's
            // own places there, or a state dir it names (docs/policy.md, "Kept apart").
            policy.fs_reach.apart.push(state.to_path_buf());
        }
        policy.fs_reach.deny.dedup();
        policy.fs_reach.deny_write.dedup();
        (policy.escalate.tools).extend(ETHOS_ALWAYS_ASKS.iter().map(|t| t.to_string()));

        let mut toolset: Vec<String> = match files.toolset {
            Some(text) if !text.trim().is_empty() => {
                let list = toolset_list(text)?;
                let ethos = crate::ethos_lines::toolset(text);
                if list != ethos {
                    return Err(PolicyError::invalid(
                        "toolset.yaml",
                        format!(
                            "Ethos reads its tools as {ethos:?}, a line at a time, and YAML as \
                             {list:?}; write one `- tool` a line, with no quote or comment after \
                             the name"
                        ),
                    ));
                }
                list
            }
            _ => Vec::new(),
        };
        let (per_server, rejects) = match files.mcp {
            Some(text) if !text.trim().is_empty() => mcp_tools(text)?,
            _ => Default::default(),
        };
        let ethos_servers = files.mcp.map(crate::ethos_lines::mcp).unwrap_or_default();
        // Each entry is checked here, where the error can name the field it came from; the
        // toolset's own check would name only the entry it made.
        for server in &mcp_servers {
            let all = format!("mcp__{server}__*");
            if !crate::is_mcp_server_entry(&all) {
                return Err(unnamable("config.yaml: mcp_servers".to_owned(), &all));
            }
            wider_than_ethos(server, per_server.get(server), ethos_servers.get(server))?;
            match per_server.get(server) {
                Some(ServerTools::Off) => {}
                Some(ServerTools::Listed(tools)) => {
                    for tool in tools {
                        let entry = format!("mcp__{server}__{tool}");
                        if !crate::valid_tool_name(&entry) {
                            let field = format!("mcp.yaml: servers.{server}.tools");
                            return Err(unnamable(field, &entry));
                        }
                        toolset.push(entry);
                    }
                }
                None => toolset.push(all),
            }
        }
        #[allow(
            clippy::unwrap_or_default,
            reason = "ToolConstraints::default() has the path gate off; new() is what applies"
        )]
        for (tool, rules) in reject_constraints(rejects, &ethos_servers)? {
            let constraints = (policy.constraints.entry(tool)).or_insert_with(ToolConstraints::new);
            constraints.reject_args = rules;
        }
        policy.toolset = Some(toolset);
        policy.check(home)?;
        Ok(policy)
    }
}

/// `toolset.yaml`: a list of tool names, or a mapping whose only key `tools` holds that list
/// (both forms ship with Ethos).
fn toolset_list(text: &str) -> Result<Vec<String>, PolicyError> {
    let doc: Value = parse_any(text, PolicyFormat::Yaml).map_err(|e| in_file("toolset.yaml", e))?;
    let (field, list) = match &doc {
        Value::Array(_) => ("toolset.yaml", &doc),
        Value::Object(map) if map.len() == 1 && map.contains_key("tools") => {
            ("toolset.yaml: tools", &map["tools"])
        }
        _ => {
            return Err(PolicyError::invalid(
                "toolset.yaml",
                "expected a list of tool names, or `tools:` with that list",
            ));
        }
    };
    if !list.is_array() {
        return Err(PolicyError::invalid(field, "expected a list of tool names"));
    }
    strings(field, list)
}

/// A comma-separated list of paths (Ethos's form), or a YAML list.
fn path_list(key: &str, value: &Value) -> Result<Vec<String>, PolicyError> {
    match value {
        Value::String(s) => Ok(s
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()),
        Value::Array(items) => items.iter().map(|v| string(key, v)).collect(),
        _ => Err(PolicyError::invalid(
            format!("config.yaml: {key}"),
            "expected a comma-separated list of paths",
        )),
    }
}

fn string(key: &str, value: &Value) -> Result<String, PolicyError> {
    value.as_str().map(str::to_owned).ok_or_else(|| {
        PolicyError::invalid(
            format!("config.yaml: {key}"),
            format!("expected a string, got {value}"),
        )
    })
}

/// `memoryScope`: one of the two values Ethos documented; a misspelt one is an error like any
/// unknown field.
fn memory_scope(value: &Value) -> Result<(), PolicyError> {
    match value.as_str() {
        Some("global" | "per-personality") => Ok(()),
        _ => Err(PolicyError::invalid(
            "config.yaml: memoryScope",
            format!("expected global or per-personality, got {value}"),
        )),
    }
}

/// The `safety:` block: `network.allow` / `network.deny` map onto `safety.network`; what
/// toolcap does not know is an error; `approvalMode` becomes `[escalate]` rules and `denyRules`
/// `[refuse]` rules;
/// content and logging settings are ignored.
fn safety(value: &Value, policy: &mut PersonalityPolicy) -> Result<(), PolicyError> {
    let Value::Object(block) = value else {
        return Err(PolicyError::invalid(
            "config.yaml: safety",
            "expected a block",
        ));
    };
    for (key, v) in block {
        let field = format!("config.yaml: safety.{key}");
        match key.as_str() {
            "network" => {
                let Value::Object(net) = v else {
                    return Err(PolicyError::invalid(field, "expected a block"));
                };
                for (k, list) in net {
                    let hosts = |l: &Value| -> Result<Vec<String>, PolicyError> {
                        l.as_array()
                            .ok_or_else(|| {
                                PolicyError::invalid(format!("{field}.{k}"), "expected a list")
                            })?
                            .iter()
                            .map(|h| string(&format!("safety.network.{k}"), h))
                            .collect()
                    };
                    match k.as_str() {
                        "allow" => policy.safety.network.allow = hosts(list)?,
                        // Ethos's `*.x` matches `x` too (its `hostnameMatches`); toolcap's is
                        // strictly beneath `x`, so a deny pattern brings its apex along.
                        "deny" => {
                            let mut deny = hosts(list)?;
                            let apexes: Vec<String> = deny
                                .iter()
                                .filter_map(|p| p.strip_prefix("*."))
                                .map(str::to_owned)
                                .collect();
                            deny.extend(apexes);
                            policy.safety.network.deny = deny;
                        }
                        // Ethos refuses these addresses unless this is set (and cloud metadata
                        // always); an Ethos personality here never reaches them (below).
                        "allow_private_urls" => {}
                        other => {
                            return Err(PolicyError::invalid(
                                format!("{field}.{other}"),
                                "not a network field toolcap knows",
                            ));
                        }
                    }
                }
            }
            // `manual` (Ethos's default) and `off` ask about the tools every Ethos surface asks
            // about, added below; `smart` also about its consequential tools, which a model
            // reviews in Ethos and the approver here.
            "approvalMode" => match v.as_str() {
                Some("manual" | "off") => {}
                Some("smart") => {
                    (policy.escalate.tools).extend(ETHOS_SMART_ASKS.iter().map(|t| t.to_string()));
                }
                _ => {
                    return Err(PolicyError::invalid(
                        field,
                        format!("{v} is not manual, smart or off"),
                    ));
                }
            },
            // The later Ethos refuses a call whose text holds a rule (its `denyRules`, a hard
            // floor no approval passes; an earlier Ethos asked).
            "denyRules" => {
                let rules = v.as_array().ok_or_else(|| {
                    PolicyError::invalid(field.clone(), "expected a list of match strings")
                })?;
                for rule in rules {
                    match rule.as_str() {
                        Some(text) if !text.trim().is_empty() => {
                            policy.refuse.calls.push(text.to_owned());
                        }
                        _ => {
                            return Err(PolicyError::invalid(
                                field,
                                format!("{rule}: every rule is a text that is not blank"),
                            ));
                        }
                    }
                }
            }
            k if SAFETY_NOT_ACCESS.contains(&k) => {}
            _ => {
                return Err(PolicyError::invalid(
                    field,
                    "not a safety field toolcap knows",
                ));
            }
        }
    }
    Ok(())
}

/// A YAML list of strings; an error names `field`.
pub(crate) fn strings(field: &str, v: &Value) -> Result<Vec<String>, PolicyError> {
    let list = v
        .as_array()
        .ok_or_else(|| PolicyError::invalid(field, "expected a list"))?;
    list.iter()
        .map(|t| {
            t.as_str()
                .map(str::to_owned)
                .ok_or_else(|| PolicyError::invalid(field, format!("expected a string, got {t}")))
        })
        .collect()
}

/// `e`, named as an error of the file `file`.
pub(crate) fn in_file(file: &str, e: PolicyError) -> PolicyError {
    PolicyError::invalid(file, e.to_string())
}
