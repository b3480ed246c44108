//! The guard: third-party MCP servers started confined by toolcap, their tools offered as
//! `mcp__<server>__<tool>` through the registry, every call checked, audited and relayed
//! (docs/guard.md).
//!
//! Each server's tools are registry tools ([`Guard::register_into`]) whose declaration is the
//! server's configured reach: the registry intersects it with the personality, applies the
//! toolset, constraints, the argument gate, escalation and audit as for any tool, and the
//! server process runs under the kernel confinement of the same intersection.

mod client;
mod code;
mod config;
mod dry;
mod linecap;
mod pin;
mod strings;
mod supervisor;
mod tool;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use capability_core::{CompiledPolicy, DefaultToolRegistry, RegistryError, resolve};
use capability_policy::valid_tool_name;
use capability_sandbox::{ResourceLimits, SandboxPolicy};
use capability_secrets::SecretsBackend;
use capability_types::backend::EgressFactory;
use secrecy::SecretString;

pub use self::config::{GuardConfig, GuardConfigError, Limits, Reach, ServerConfig};

/// Why the guard would not start `server` for its code, if it would not: its `command`, a
/// `runtime` root, a script its arguments name, or the working directory its launcher takes
/// code from, lies where the personality lets its tools write, or where another account can
/// change it (docs/guard.md, "Confinement"). `working_dir` is the guard's (`--workdir`), the
/// server's when its configuration sets no `cwd`. What [`Guard`] checks before it starts a
/// server; for a review before anything runs (`toolcap validate --guard-config`).
///
/// # Ambient Authority
///
/// Looks at the files the configuration names (their kind, owner and mode, a script's first
/// two bytes) and the directories they lie in.
pub fn code_refused(
    server: &ServerConfig,
    policy: &CompiledPolicy,
    working_dir: &Path,
) -> Option<String> {
    code::examined(server, policy, working_dir).err()
}

/// The first of `server`'s `command` and `runtime` roots that is not on this machine, if one
/// is not: the server is not installed here, and its code can be examined only where it is (a
/// review run elsewhere than the guard).
///
/// # Ambient Authority
///
/// Looks whether the paths the configuration names exist.
pub fn code_not_here(server: &ServerConfig) -> Option<&Path> {
    code::not_here(server)
}
use self::supervisor::{CallFailure, Supervisor};
use self::tool::GuardedTool;

/// Started guarded servers and the tools they offer.
#[derive(Debug)]
pub struct Guard {
    tools: Vec<Arc<GuardedTool>>,
    problems: Vec<(String, String)>,
    withheld: Vec<(String, String)>,
    listings: Vec<Listing>,
    _supervisors: Vec<Arc<Supervisor>>,
}

/// What a started server lists of the tools the guard would offer (its allow list applied,
/// names listed twice or unusable left out), each with its pin: what `toolcap mcp pins` prints
/// for review (docs/guard.md, "Pinning what the model is shown").
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Listing {
    /// The server's name in the configuration.
    pub server: String,
    /// The name and version it gave itself in the MCP handshake (its words: what a reviewer
    /// reads beside its pins, not a check).
    pub implementation: Option<(String, String)>,
    /// Its tools, in the order the server lists them.
    pub tools: Vec<ListedTool>,
}

/// One tool as its server lists it: what an MCP client is shown of it, and its pin.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ListedTool {
    /// Its name on the server (offered as `mcp__<server>__<name>`).
    pub name: String,
    /// Its description, the server's words to the model.
    pub description: Option<String>,
    /// Its input schema.
    pub input_schema: serde_json::Value,
    /// The SHA-256 of its name, description and input schema (`sha256:` and 64 hex digits).
    pub pin: String,
}

impl Guard {
    /// Starts every configured server confined to its reach ∩ `policy`, and lists its tools.
    ///
    /// A server that cannot be confined here (the kernel lacks what its reach needs), cannot be
    /// started, or does not complete the MCP handshake is not offered; the reason is in
    /// [`problems`](Self::problems). The others are unaffected.
    ///
    /// # Ambient Authority
    ///
    /// Starts processes (each server under a reaper in its own namespaces), creates a private
    /// home directory per server, and serves an egress proxy for servers that declare hosts.
    ///
    /// Secrets come from this process's environment by the `TOOLCAP_SECRET_` prefix rule (the
    /// ref `GITHUB_TOKEN` is the variable `TOOLCAP_SECRET_GITHUB_TOKEN`, `providers/exa/api-key`
    /// is `TOOLCAP_SECRET_PROVIDERS__EXA__API_KEY`), read once, now.
    pub async fn start(config: &GuardConfig, policy: &CompiledPolicy, working_dir: &Path) -> Self {
        let egress = Arc::new(capability_fetch::EgressProxy::new(
            &capability_fetch::FetchConfig::default(),
        ));
        let secrets: Vec<Arc<dyn SecretsBackend>> = vec![Arc::new(
            capability_secrets::EnvSecrets::from_process_env().with_prefix_rule("TOOLCAP_SECRET_"),
        )];
        Self::start_with(config, policy, working_dir, egress, &secrets).await
    }

    /// [`start`](Self::start) with the egress proxy of servers that declare hosts, and the
    /// secrets backends asked (in order) for the secrets servers are handed.
    ///
    /// # Ambient Authority
    ///
    /// As [`start`](Self::start), and whatever the secrets backends read.
    pub async fn start_with(
        config: &GuardConfig,
        policy: &CompiledPolicy,
        working_dir: &Path,
        egress: Arc<dyn EgressFactory>,
        secrets: &[Arc<dyn SecretsBackend>],
    ) -> Self {
        let mut guard = Self {
            tools: Vec::new(),
            problems: Vec::new(),
            withheld: Vec::new(),
            listings: Vec::new(),
            _supervisors: Vec::new(),
        };
        for (name, server) in &config.servers {
            let started = Self::start_one(
                name,
                server,
                policy,
                working_dir,
                Arc::clone(&egress),
                secrets,
            );
            match started.await {
                Ok(Started {
                    supervisor,
                    tools,
                    withheld,
                    listing,
                }) => {
                    guard.tools.extend(tools);
                    guard.withheld.extend(withheld);
                    guard.listings.push(Listing {
                        server: name.clone(),
                        implementation: supervisor.server_info().await,
                        tools: listing,
                    });
                    guard._supervisors.push(supervisor);
                }
                Err(why) => guard.problems.push((name.clone(), why)),
            }
        }
        guard
    }

    async fn start_one(
        name: &str,
        server: &ServerConfig,
        policy: &CompiledPolicy,
        working_dir: &Path,
        egress: Arc<dyn EgressFactory>,
        secrets: &[Arc<dyn SecretsBackend>],
    ) -> Result<Started, String> {
        code::examined(server, policy, working_dir)?;
        let handed = Self::secrets_for(server, secrets).await?;
        let caps = tool::declaration(server);
        let resolved = resolve(&format!("mcp__{name}"), &caps, policy, "guard", working_dir);
        // What the server is confined to for its life: a call resolved otherwise is refused
        // (docs/policy.md, "Tools confined once, as they start").
        let confined = Arc::new(resolved.clone());
        // Its user's alone (mode 0700): a server keeps tokens and caches in its home, and the
        // temporary directory is listed to every account. Removed when the server ends, or by
        // the next guard if this one is killed first (docs/isolation-model.md, "Scratch
        // directories").
        let home = capability_sandbox::ScratchDir::new_in(
            &capability_sandbox::temp_root(),
            capability_core::matching::path::GUARD_HOME_PREFIX,
        )
        .map_err(|e| format!("cannot create its home directory: {e}"))?;
        let mut sandbox = match &resolved.fs {
            Some(paths) => SandboxPolicy::from_paths(paths.as_ref()),
            None => SandboxPolicy::new(),
        };
        sandbox = sandbox.scratch(home.path()).exec(&server.command);
        for path in &server.runtime {
            sandbox = sandbox.exec(path);
        }
        // A runtime root is granted whole (read and execute); the deny rules and the deny floor
        // are hidden under it too, also for a server that declares no reach (docs/guard.md,
        // "Confinement").
        for place in policy.hidden_places() {
            if !sandbox.hidden_paths().contains(&place) {
                sandbox = sandbox.hide(place);
            }
        }
        let limits = server.limits;
        sandbox = sandbox.limits(ResourceLimits {
            address_space: Some(address_space(limits.memory_mib)),
            cpu_seconds: Some(limits.cpu_seconds),
            processes: Some(limits.processes),
            ..ResourceLimits::default()
        });
        let hosts = resolved.network.clone();
        if hosts.is_some() {
            sandbox = sandbox.egress_proxy();
        }
        let prepared = sandbox
            .prepare()
            .map_err(|e| format!("cannot be confined as declared, so it is not started: {e}"))?;
        let cwd = server
            .cwd
            .clone()
            .unwrap_or_else(|| working_dir.to_path_buf());
        let bases = tool::relative_bases(&server.args, &cwd, Some(home.path()));
        let supervisor = Arc::new(Supervisor::new(
            name.to_owned(),
            server.clone(),
            prepared,
            hosts.clone(),
            resolved.fs.clone(),
            egress,
            cwd.clone(),
            home,
            handed,
        ));
        let listed = supervisor.list_tools().await.map_err(|e| match e {
            CallFailure::Protocol(m)
            | CallFailure::Unrelayed(m)
            | CallFailure::Server(m)
            | CallFailure::Planted(m) => m,
        })?;
        let checks = tool::ArgumentCheck::new(
            name,
            resolved.fs.clone(),
            hosts.clone(),
            server.path_arguments.clone().into(),
            bases,
        );
        // A name listed twice: which description the client would be shown, and which tool the
        // server would run, are the server's to choose. Neither copy is offered.
        let mut seen = std::collections::HashMap::<&str, usize>::new();
        for upstream in &listed {
            *seen.entry(upstream.name.as_ref()).or_default() += 1;
        }
        let mut started = Started {
            supervisor: Arc::clone(&supervisor),
            tools: Vec::new(),
            withheld: Vec::new(),
            listing: Vec::new(),
        };
        // What each offered tool was, for the server's restarts to be held to.
        let mut offered = BTreeMap::new();
        for upstream in &listed {
            if seen.get(upstream.name.as_ref()).is_some_and(|&n| n > 1) {
                tracing::warn!(target: "toolcap::guard", server = %name,
                    "tool {:?} is not offered: the server lists it more than once", upstream.name);
                continue;
            }
            if server
                .tools
                .as_ref()
                .is_some_and(|allowed| !allowed.iter().any(|t| t == upstream.name.as_ref()))
            {
                continue;
            }
            let tool = GuardedTool::new(
                Arc::clone(&supervisor),
                upstream,
                caps.clone(),
                checks.clone(),
                Arc::clone(&confined),
            );
            if !valid_tool_name(&tool.name) {
                tracing::warn!(target: "toolcap::guard", server = %name,
                    "tool {:?} is not offered: {} is not a valid tool name", upstream.name,
                    capability_types::shown(&tool.name));
                continue;
            }
            let pin = pin::pin_of(upstream);
            started.listing.push(ListedTool {
                name: upstream.name.to_string(),
                description: upstream.description.as_deref().map(str::to_owned),
                input_schema: serde_json::Value::Object((*upstream.input_schema).clone()),
                pin: pin.clone(),
            });
            if let Some(why) = server
                .pins
                .as_ref()
                .and_then(|pins| unpinned(pins.get(upstream.name.as_ref()), &pin))
            {
                started.withheld.push((tool.name.clone(), why));
                continue;
            }
            offered.insert(upstream.name.to_string(), pin);
            started.tools.push(Arc::new(tool));
        }
        for pinned in server.pins.iter().flat_map(BTreeMap::keys) {
            if !listed.iter().any(|t| t.name == pinned.as_str()) {
                started.withheld.push((
                    format!("mcp__{name}__{pinned}"),
                    "it is pinned, but the server does not list it".to_owned(),
                ));
            }
        }
        supervisor.offer(offered);
        Ok(started)
    }

    /// The secrets a server is handed, as (variable, value); a secret that no backend has
    /// keeps the server from starting.
    async fn secrets_for(
        server: &ServerConfig,
        backends: &[Arc<dyn SecretsBackend>],
    ) -> Result<Vec<(String, SecretString)>, String> {
        let mut handed = Vec::new();
        'secrets: for (var, name) in &server.secrets {
            for backend in backends {
                match backend.lookup(name).await {
                    Ok(Some(value)) => {
                        handed.push((var.clone(), value));
                        continue 'secrets;
                    }
                    Ok(None) => {}
                    Err(e) => {
                        return Err(format!("the secret {name} (for {var}) cannot be read: {e}"));
                    }
                }
            }
            return Err(format!(
                "the secret {name} (for {var}) is in no secrets backend, so it is not started"
            ));
        }
        Ok(handed)
    }

    /// The names of the offered tools (`mcp__<server>__<tool>`).
    pub fn tool_names(&self) -> impl Iterator<Item = &str> {
        self.tools.iter().map(|t| t.name.as_str())
    }

    /// The servers that are not offered, and why.
    pub fn problems(&self) -> &[(String, String)] {
        &self.problems
    }

    /// The tools of started servers that are not offered because of their pins
    /// ([`ServerConfig::pins`]), by their offered names (`mcp__<server>__<tool>`), and why.
    pub fn withheld(&self) -> &[(String, String)] {
        &self.withheld
    }

    /// What each started server lists of the tools the guard would offer, with their pins.
    pub fn listings(&self) -> &[Listing] {
        &self.listings
    }

    /// Registers every offered tool in `registry`, each as confined once, as its server
    /// started ([`DefaultToolRegistry::register_confined`]): a call resolved to another reach
    /// than the one the guard started the server under (a narrowed invocation, one held after
    /// untrusted output, another personality) is refused.
    ///
    /// # Errors
    ///
    /// When a name is already registered or a declaration is refused.
    pub fn register_into(&self, registry: &mut DefaultToolRegistry) -> Result<(), RegistryError> {
        for tool in &self.tools {
            registry.register_confined(Arc::clone(tool) as _, Arc::clone(&tool.confined))?;
        }
        Ok(())
    }
}

/// A server started, with what it offers.
struct Started {
    supervisor: Arc<Supervisor>,
    tools: Vec<Arc<GuardedTool>>,
    /// Tools not offered for their pins: (offered name, why).
    withheld: Vec<(String, String)>,
    listing: Vec<ListedTool>,
}

/// Why a tool whose pin is `pin` is not offered under a configuration that pins the server's
/// tools and gives it `pinned`, or `None` when it is offered.
fn unpinned(pinned: Option<&String>, pin: &str) -> Option<String> {
    match pinned {
        None => Some(format!(
            "it is not pinned, so what the client would be shown of it has not been reviewed \
             (`toolcap mcp pins` prints it with its pin, {pin})"
        )),
        Some(pinned) if pinned != pin => Some(format!(
            "it is not what was pinned: its description or input schema changed (pinned \
             {pinned}, now {pin}); review it with `toolcap mcp pins` and pin it again"
        )),
        Some(_) => None,
    }
}

/// `memory_mib` in bytes. A count too large for the bytes to fit (an operator's "no limit") is
/// no limit (`RLIM_INFINITY`), where a shift dropped its high bits: `2^44 + 64` MiB became a
/// 64 MiB limit and `2^44` MiB none at all (zero bytes, a server that cannot start).
fn address_space(memory_mib: u64) -> u64 {
    memory_mib.saturating_mul(1 << 20)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_memory_limit_too_large_for_bytes_is_no_limit() {
        assert_eq!(super::address_space(4096), 4 << 30);
        assert_eq!(super::address_space((1 << 44) + 64), u64::MAX);
        assert_eq!(super::address_space(u64::MAX), u64::MAX);
    }
}
