//! What `toolcap explain`, `validate` and `manifest` know of a guard configuration without
//! starting a server (docs/guard.md, "Review").

use std::path::Path;
use std::sync::Arc;

use capability_core::manifest::GuardedServer;
use capability_core::{CompiledPolicy, Manifest, build_manifest, resolve};
use capability_types::{CapabilityError, Tool, ToolCapabilities, ToolContext, async_trait};
use serde_json::{Value, json};

use super::config::{GuardConfig, ServerConfig};
use super::tool::{ArgumentCheck, declaration};

/// A guarded tool in a dry run: its name and its server's declaration; it never runs.
#[derive(Debug)]
struct StandIn {
    name: String,
    caps: ToolCapabilities,
}

#[async_trait]
impl Tool for StandIn {
    /// What a server answers is its own text (docs/policy.md, "After untrusted output").
    fn output_is_untrusted(&self) -> bool {
        true
    }
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        "a guarded tool, described by its server's declaration (dry runs only)"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn capabilities(&self) -> ToolCapabilities {
        self.caps.clone()
    }
    async fn execute(&self, _args: Value, _ctx: &ToolContext) -> Result<Value, CapabilityError> {
        Err(CapabilityError::not_available(
            "a stand-in for a guarded tool never runs; start `toolcap mcp guard`",
        ))
    }
}

impl GuardConfig {
    /// The name a server's entry has in a manifest: `mcp__<server>__*`, standing for all its
    /// tools.
    fn manifest_name(server: &str) -> String {
        format!("mcp__{server}__*")
    }

    /// Each server's declaration, as the manifest shows it: `mcp__<server>__*` (every tool of a
    /// server declares what the server may reach).
    pub fn declarations(&self) -> Vec<(String, ToolCapabilities)> {
        self.servers
            .iter()
            .map(|(name, server)| (Self::manifest_name(name), declaration(server)))
            .collect()
    }

    /// The manifest of these servers: each one's declaration as [`declarations`](Self::declarations)
    /// gives it (with its effective access under `policy`), and what the configuration says of
    /// it beyond its reach: its code, read and executed outside the personality's reach, and
    /// the restrictions the guard adds to its calls (docs/guard.md, "Review").
    pub fn manifest(&self, policy: Option<&CompiledPolicy>) -> Manifest {
        let declarations = self.declarations();
        let manifest = build_manifest(declarations.iter().map(|(n, c)| (n.as_str(), c)), policy);
        self.servers
            .iter()
            .fold(manifest, |manifest, (name, server)| {
                manifest.with_server(
                    &Self::manifest_name(name),
                    GuardedServer {
                        command: server.command.clone(),
                        runtime: server.runtime.clone(),
                        tools: server.tools.clone(),
                        path_arguments: server.path_arguments.clone(),
                        pins: server.pins.clone(),
                    },
                )
            })
    }

    /// The server and upstream tool a guarded tool name (`mcp__<server>__<tool>`) stands for,
    /// when the server is configured and its allow list and its pins (when it has either)
    /// admit the tool.
    pub fn server_of<'a>(&'a self, tool: &'a str) -> Option<(&'a str, &'a ServerConfig, &'a str)> {
        let rest = tool.strip_prefix("mcp__")?;
        let (server, upstream) = rest.split_once("__")?;
        let (name, config) = self.servers.get_key_value(server)?;
        if upstream.is_empty()
            || config
                .tools
                .as_ref()
                .is_some_and(|allowed| !allowed.iter().any(|t| t == upstream))
            || config
                .pins
                .as_ref()
                .is_some_and(|pins| !pins.contains_key(upstream))
        {
            return None;
        }
        Some((name.as_str(), config, upstream))
    }

    /// A stand-in for `tool` (`mcp__<server>__<tool>`) with its server's declaration, to run
    /// the registry's admission on (explain); `None` when no configured server offers it.
    pub fn stand_in(&self, tool: &str) -> Option<Arc<dyn Tool>> {
        let (_, server, _) = self.server_of(tool)?;
        Some(Arc::new(StandIn {
            name: tool.to_owned(),
            caps: declaration(server),
        }))
    }

    /// The guard's own argument checks (relative paths named as paths, URLs) for a call of
    /// `tool` with `args` under `policy`, as the running guard makes them.
    ///
    /// # Errors
    ///
    /// The refusal the call would get; `not_available` when no configured server offers `tool`.
    pub fn check_arguments(
        &self,
        tool: &str,
        args: &Value,
        policy: &CompiledPolicy,
        working_dir: &Path,
    ) -> Result<(), CapabilityError> {
        let (name, server, _) = self.server_of(tool).ok_or_else(|| {
            CapabilityError::not_available(format!("no configured MCP server offers {tool}"))
        })?;
        let caps = declaration(server);
        let resolved = resolve(
            &format!("mcp__{name}"),
            &caps,
            policy,
            "explain",
            working_dir,
        );
        let cwd = server
            .cwd
            .clone()
            .unwrap_or_else(|| working_dir.to_path_buf());
        ArgumentCheck::new(
            name,
            resolved.fs.clone(),
            resolved.network.clone(),
            server.path_arguments.clone().into(),
            super::tool::relative_bases(&server.args, &cwd, None),
        )
        .for_tool(tool)
        .check(args)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use capability_core::PolicyFormat;

    fn config() -> GuardConfig {
        GuardConfig::parse(
            "[servers.files]\ncommand = \"/bin/x\"\ntools = [\"read\"]\n\
             [servers.files.reach]\nread = [\"/srv/ws\"]\nhosts = [\"api.example.com\"]\n",
        )
        .unwrap()
    }

    /// A personality from TOML text.
    fn personality(toml: &str) -> CompiledPolicy {
        CompiledPolicy::load(toml, PolicyFormat::Toml, None).unwrap()
    }

    #[test]
    fn names_map_to_servers_and_their_allow_lists() {
        let config = config();
        assert!(config.server_of("mcp__files__read").is_some());
        assert!(
            config.server_of("mcp__files__write").is_none(),
            "not in the allow list"
        );
        assert!(config.server_of("mcp__other__read").is_none());
        assert!(config.server_of("read_file").is_none());
        assert!(config.server_of("mcp__files__").is_none());
        assert_eq!(config.declarations()[0].0, "mcp__files__*");
    }

    #[test]
    fn argument_checks_match_the_running_guard() {
        let config = config();
        let policy = personality(
            "id = \"p\"\n[fs_reach]\nread = [\"/srv/ws\"]\n[safety.network]\nallow = [\"api.example.com\"]\n",
        );
        let wd = Path::new("/srv/ws");
        let check = |args: Value| config.check_arguments("mcp__files__read", &args, &policy, wd);
        assert!(check(json!({"path": "notes.md"})).is_ok());
        assert!(
            check(json!({"path": "../etc/passwd"}))
                .unwrap_err()
                .to_string()
                .starts_with("PATH_NOT_REACHABLE")
        );
        assert!(check(json!({"url": "https://api.example.com/x"})).is_ok());
        assert!(
            check(json!({"q": ["https://evil.example/"]}))
                .unwrap_err()
                .to_string()
                .starts_with("HOST_NOT_ALLOWED")
        );
        assert!(check(json!({"note": "../not-a-path-argument"})).is_ok());
        // The scheme in any case, and surrounding whitespace, are still URLs to check.
        for url in [
            "HTTPS://evil.example/",
            " http://evil.example/",
            "Http://169.254.169.254/",
        ] {
            let refused = check(json!({"url": url})).unwrap_err().to_string();
            assert!(refused.starts_with("HOST_NOT_ALLOWED"), "{url}: {refused}");
        }
    }

    #[test]
    fn a_relative_path_is_checked_as_the_gate_checks_an_absolute_one_read_or_write_reach() {
        // A server that writes reports to a directory it may not read back: the gate admits
        // `/srv/out/report.md` (within the write reach), so the guard must admit `out/report.md`
        // from `/srv` too, and still refuse what neither reach holds.
        let config = GuardConfig::parse(
            "[servers.files]\ncommand = \"/bin/x\"\ncwd = \"/srv\"\ntools = [\"write\"]\n\
             [servers.files.reach]\nread = [\"/srv/ws\"]\nwrite = [\"/srv/out\"]\n",
        )
        .unwrap();
        let policy =
            personality("id = \"p\"\n[fs_reach]\nread = [\"/srv/ws\"]\nwrite = [\"/srv/out\"]\n");
        let check = |args: Value| {
            config.check_arguments("mcp__files__write", &args, &policy, Path::new("/srv"))
        };
        assert!(
            check(json!({"path": "out/report.md"})).is_ok(),
            "write reach"
        );
        assert!(check(json!({"path": "ws/notes.md"})).is_ok(), "read reach");
        for outside in ["secrets/key", "../etc/passwd", "out/../secrets/key"] {
            let refused = check(json!({"path": outside})).unwrap_err().to_string();
            assert!(
                refused.starts_with("PATH_NOT_REACHABLE"),
                "{outside}: {refused}"
            );
        }
    }

    // guarantee: G-MCP-07
    #[test]
    fn a_relative_path_is_read_from_every_directory_the_server_may_resolve_it_from() {
        let policy = personality("id = \"p\"\n[fs_reach]\nread = [\"/srv/ws\"]\n");
        let wd = Path::new("/srv/ws");
        let server = |args: &str| {
            GuardConfig::parse(&format!(
                "[servers.files]\ncommand = \"/bin/x\"\nargs = {args}\ntools = [\"read\"]\n\
                 [servers.files.reach]\nread = [\"/srv/ws\"]\n"
            ))
            .unwrap()
        };
        let check = |config: &GuardConfig, path: &str| {
            config
                .check_arguments("mcp__files__read", &json!({"path": path}), &policy, wd)
                .map_err(|e| e.to_string())
        };
        // Given `/` to serve, the filesystem server reads `etc/passwd` as `/etc/passwd`, from
        // any working directory: every relative path is read from `/` too, so none is within
        // a reach of `/srv/ws`; after `=` as well. Given `~`, its home, which no reach holds.
        for args in [r#"["/"]"#, r#"["--root=/"]"#, r#"["~"]"#] {
            let config = server(args);
            for path in ["etc/passwd", "notes.md"] {
                let refused = check(&config, path).unwrap_err();
                assert!(
                    refused.starts_with("PATH_NOT_REACHABLE"),
                    "{args} {path}: {refused}"
                );
                assert!(
                    refused.contains("its command line names"),
                    "says where the reading came from: {refused}"
                );
            }
        }
        // Given only its working directory, or a file, or a directory that does not exist, a
        // relative path is read from the working directory alone.
        for args in ["[]", r#"["/srv/ws"]"#, r#"["/etc/passwd", "/no/such/dir"]"#] {
            let config = server(args);
            assert!(check(&config, "notes.md").is_ok(), "{args}");
            assert!(check(&config, "s3://bucket/key").is_ok(), "{args}: a URI");
            assert!(
                check(&config, "~/cache/x").is_ok(),
                "{args}: the server's own home"
            );
            for path in [
                "etc/../../etc/passwd",
                "s3://../../etc/passwd",
                "~/../../etc/passwd",
                "~root/../etc/passwd",
                "~/../srv/ws/notes.md",
            ] {
                let refused = check(&config, path).unwrap_err();
                assert!(
                    refused.starts_with("PATH_NOT_REACHABLE"),
                    "{args} {path}: {refused}"
                );
            }
        }
    }
}
