//! `toolcap mcp serve` and `toolcap mcp config` (docs/mcp.md).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use capability_capsule::{Capsule, CapsuleConfig};
use capability_core::{CompiledPolicy, IsolationSelection};
use capability_mcp::{
    BearerToken, DEFAULT_MAX_SESSIONS, Guard, HttpOptions, HttpServer, McpServer, RemoteAccess,
};
use capability_tools::{StandardConfig, Store, standard_registry};
use clap::{Args, Subcommand};
use serde_json::Value;

use crate::clients::{self, Client, Launch};
use crate::filter::FilterArgs;
use crate::{Usage, errln, host, outln};

/// `toolcap mcp ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum McpCommand {
    /// Serve the personality's toolset to an MCP client: stdio by default (what desktop clients
    /// start), Streamable HTTP with --http. Every call goes through the registry: declarations,
    /// the personality, audit and, with --capsule, the kernel-confined worker.
    Serve {
        /// The personality policy file (.toml, .yaml, .yml or .json).
        #[arg(long, value_name = "FILE")]
        personality: PathBuf,
        /// Directory relative paths resolve against (default: the current directory).
        #[arg(long, value_name = "DIR")]
        workdir: Option<PathBuf>,
        /// Key-value store: a file path (embedded; default in the user's data directory) or a
        /// redis:// URL.
        #[arg(long, value_name = "PATH|URL")]
        store: Option<String>,
        /// The store, read from this environment variable: a Redis URL's password stays out of
        /// the process list, where every local account can read a command line.
        #[arg(long, value_name = "VAR", conflicts_with = "store")]
        store_env: Option<String>,
        /// Append audit events (JSON lines, one session id per MCP connection) to this file.
        #[arg(long, value_name = "FILE")]
        audit: Option<PathBuf>,
        /// Run every tool call in a capsule worker confined by Landlock and seccomp.
        #[arg(long)]
        capsule: bool,
        /// Serve Streamable HTTP on this address instead of stdio, e.g. 127.0.0.1:8808.
        #[arg(long, value_name = "ADDR")]
        http: Option<SocketAddr>,
        /// Allow a non-loopback --http address. Requires a bearer token (--token-file or
        /// --token-env); every request must carry it.
        #[arg(long, requires = "http")]
        allow_remote: bool,
        #[command(flatten)]
        http_args: HttpArgs,
        /// A host name remote clients use to reach the server (checked against `Host`);
        /// repeatable.
        #[arg(long = "public-host", value_name = "NAME", requires = "allow_remote")]
        public_hosts: Vec<String>,
        #[command(flatten)]
        filter: FilterArgs,
    },
    /// Start the MCP servers of a guard configuration confined by the personality, and serve
    /// their tools (as mcp__SERVER__TOOL) to an MCP client: every call checked, audited and
    /// relayed. stdio by default, Streamable HTTP with --http.
    Guard {
        #[command(flatten)]
        files: GuardFiles,
        /// Append audit events (JSON lines) to this file.
        #[arg(long, value_name = "FILE")]
        audit: Option<PathBuf>,
        /// Serve Streamable HTTP on this loopback address instead of stdio.
        #[arg(long, value_name = "ADDR")]
        http: Option<SocketAddr>,
        #[command(flatten)]
        http_args: HttpArgs,
        #[command(flatten)]
        filter: FilterArgs,
    },
    /// Start the MCP servers of a guard configuration as `mcp guard` does, print the pin of
    /// each tool it would offer beside what an MCP client is shown of it (its description and
    /// input schema), for review, then stop them. Put each server's [servers.NAME.pins] table
    /// in the configuration: from then on a tool is offered only as it was pinned.
    Pins {
        #[command(flatten)]
        files: GuardFiles,
    },
    /// Print the configuration an MCP client needs to start `toolcap mcp serve`, or merge it
    /// into the client's configuration file with --write (other servers are kept).
    Config {
        /// The client.
        #[arg(long, value_enum)]
        client: Client,
        /// The personality policy file the server will use.
        #[arg(long, value_name = "FILE")]
        personality: PathBuf,
        /// The working directory of the served tools (default: the current directory).
        #[arg(long, value_name = "DIR")]
        workdir: Option<PathBuf>,
        /// Add --capsule to the server's command.
        #[arg(long, conflicts_with = "guard_config")]
        capsule: bool,
        /// Configure `toolcap mcp guard` with this guard configuration instead of
        /// `toolcap mcp serve` (the configuration is checked now).
        #[arg(long, value_name = "FILE")]
        guard_config: Option<PathBuf>,
        /// The server's name in the client's configuration: 1 to 64 ASCII letters, digits, `-`
        /// or `_` (clients build tool names from it).
        #[arg(long, value_name = "NAME", default_value = "toolcap", value_parser = server_name)]
        name: String,
        /// Merge into the client's configuration file instead of printing.
        #[arg(long)]
        write: bool,
        /// The configuration file to merge into (default: where the client looks).
        #[arg(long, value_name = "FILE", requires = "write")]
        file: Option<PathBuf>,
    },
}

/// Says on stderr which servers are not offered, which of their tools are withheld for their
/// pins, and which tools the toolset names of a started server that it does not offer, and why.
fn say_what_is_not_offered(guard: &Guard, policy: &CompiledPolicy) {
    for (server, why) in guard.problems() {
        errln!("toolcap: MCP server {server} is not offered: {why}");
    }
    for (tool, why) in guard.withheld() {
        errln!("toolcap: tool {tool} is not offered: {why}");
    }
    let accounted: std::collections::HashSet<&str> = guard
        .tool_names()
        .chain(guard.withheld().iter().map(|(tool, _)| tool.as_str()))
        .collect();
    let named = policy.toolset().unwrap_or_default();
    for listing in guard.listings() {
        let prefix = format!("mcp__{}__", listing.server);
        for entry in named {
            if entry.starts_with(&prefix)
                && !entry.contains('*')
                && !accounted.contains(entry.as_str())
            {
                errln!(
                    "toolcap: tool {} is not offered: the MCP server {} does not list it, or the \
                     guard configuration's `tools` leaves it out (a server may list some tools \
                     only to a client that declares sampling, elicitation or roots, which the \
                     guard does not)",
                    capability_types::shown(entry),
                    listing.server
                );
            }
        }
    }
}

/// The pins of every tool `guard`'s servers would offer, as TOML tables for the configuration
/// at `config`, each tool preceded by what an MCP client is shown of it. Everything a server
/// wrote is shown escaped ([`capability_types::shown`]): a description's line breaks, terminal
/// controls and invisible or reordering characters cannot hide what it says from its reviewer.
fn pins_text(guard: &Guard, config: &Path) -> String {
    use capability_types::shown;
    use std::fmt::Write as _;
    let mut out = format!(
        "# The pins of the tools each server offers (docs/guard.md, \"Pinning what the model is\n\
         # shown\"). Read what each tool's description and input schema tell the model, then put\n\
         # the tables (or the lines of the tools to offer) into\n\
         # {}\n\
         # From then on a tool is offered only while it is as pinned.\n",
        shown(&config.display().to_string())
    );
    for listing in guard.listings() {
        if let Some((name, version)) = &listing.implementation {
            let _ = writeln!(
                out,
                "\n# {}: {} {}, as the server names itself",
                listing.server,
                shown(name),
                shown(version)
            );
        }
        for tool in &listing.tools {
            let _ = writeln!(out, "\n# {}: {}", listing.server, shown(&tool.name));
            match &tool.description {
                Some(description) => {
                    for line in description.lines() {
                        let _ = writeln!(out, "#   {}", shown(line));
                    }
                }
                None => out.push_str("#   (no description)\n"),
            }
            let schema = serde_json::to_string(&tool.input_schema).unwrap_or_default();
            let _ = writeln!(out, "#   input schema: {}", shown(&schema));
        }
        let _ = writeln!(out, "\n[servers.{}.pins]", listing.server);
        for tool in &listing.tools {
            let _ = writeln!(out, "{} = \"{}\"", toml_key(&tool.name), tool.pin);
        }
    }
    out
}

/// `name` as a TOML key: bare when it can be, quoted (and escaped) when not.
fn toml_key(name: &str) -> String {
    if !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        name.to_owned()
    } else {
        // A JSON string is a TOML basic string, escapes included.
        serde_json::to_string(name).unwrap_or_default()
    }
}

/// What `mcp guard` and `mcp pins` start their servers from.
#[derive(Debug, Args)]
pub(crate) struct GuardFiles {
    /// The personality policy file: it confines the servers, and its toolset names the
    /// mcp__SERVER__TOOL tools `mcp guard` offers.
    #[arg(long, value_name = "FILE")]
    personality: PathBuf,
    /// The guard configuration (TOML; docs/guard.md).
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// The servers' default working directory (default: the current directory).
    #[arg(long, value_name = "DIR")]
    workdir: Option<PathBuf>,
}

impl GuardFiles {
    /// Loads the personality (keeping `own`, with the configuration, out of every tool's reach)
    /// and the configuration, starts the servers, and says on stderr what is not offered: the
    /// personality, the working directory and the guard.
    async fn start(
        &self,
        mut own: Vec<&Path>,
    ) -> Result<(Arc<CompiledPolicy>, PathBuf, Guard), Usage> {
        own.push(&self.config);
        let policy = Arc::new(host::load_policy_keeping(&self.personality, &own)?);
        let config = host::load_guard_config(&self.config)?;
        let workdir = host::workdir(self.workdir.clone())?;
        let guard = Guard::start(&config, &policy, &workdir).await;
        say_what_is_not_offered(&guard, &policy);
        Ok((policy, workdir, guard))
    }
}

/// The bearer token an HTTP endpoint requires: read from a file or the environment, never
/// from the command line (which `ps` shows).
#[derive(Debug, Args)]
pub(crate) struct HttpArgs {
    /// Require a bearer token on every HTTP request, read from this file's first line.
    /// Without one, every process on this machine, of any user, can call the tools.
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with = "token_env",
        requires = "http"
    )]
    token_file: Option<PathBuf>,
    /// The same, with the token read from this environment variable.
    #[arg(long, value_name = "VAR", requires = "http")]
    token_env: Option<String>,
    /// The most MCP sessions kept open at once over HTTP (default 64); a client's handshake
    /// past it gets 503 until one ends or has been idle for five minutes.
    #[arg(long, value_name = "N", requires = "http", value_parser = clap::value_parser!(u16).range(1..))]
    max_sessions: Option<u16>,
}

/// The HTTP endpoint on `bind`: reachable from other machines with `remote` (its public host
/// names), and behind the token `token` names (required with `remote`).
fn http_options(
    bind: SocketAddr,
    args: &HttpArgs,
    remote: Option<Vec<String>>,
) -> Result<HttpOptions, Usage> {
    let options = HttpOptions::loopback(bind)
        .with_max_sessions(args.max_sessions.map_or(DEFAULT_MAX_SESSIONS, usize::from));
    let given = args.token_file.is_some() || args.token_env.is_some();
    if remote.is_none() && !given {
        return Ok(options);
    }
    let token = host::bearer_token(args.token_file.as_deref(), args.token_env.as_deref())?;
    Ok(match remote {
        Some(hosts) => options.with_remote(RemoteAccess::new(&token, hosts).map_err(Usage::from)?),
        None => options.with_token(BearerToken::new(&token).map_err(Usage::from)?),
    })
}

/// Binds `server`'s HTTP endpoint and says where, on the first line (scripts read the port
/// from it), then who may call it.
async fn bind_http(server: &McpServer, options: HttpOptions) -> Result<HttpServer, Usage> {
    let open = options.token.is_none() && options.remote.is_none();
    let bound = server.bind_http(options).await.map_err(Usage::from)?;
    let addr = bound.local_addr().map_err(Usage::from)?;
    errln!("toolcap: serving MCP (Streamable HTTP) on http://{addr}/mcp");
    if open {
        errln!(
            "toolcap: no bearer token: every process on this machine, of any user, can call \
             these tools (--token-file FILE or --token-env VAR requires one)"
        );
    } else {
        errln!("toolcap: every request must carry the bearer token");
    }
    Ok(bound)
}

pub(crate) async fn run(command: McpCommand) -> Result<ExitCode, Usage> {
    match command {
        McpCommand::Serve {
            personality,
            workdir,
            store,
            store_env,
            audit,
            capsule,
            http,
            allow_remote,
            http_args,
            public_hosts,
            filter,
        } => {
            let filter = filter.filter()?;
            let store = host::store(store, store_env.as_deref())?;
            let mut own = crate::own_files(audit.as_deref(), &store, None);
            own.extend(http_args.token_file.as_deref());
            let policy = Arc::new(host::load_policy_keeping(&personality, &own)?);
            let workdir = host::workdir(workdir)?;
            let registry = standard_registry(StandardConfig::new(store))
                .await
                .map_err(|e| Usage(format!("cannot start the standard tools: {e}")))?;
            let registry = match audit {
                Some(path) => registry.with_audit_sink(host::audit_file(&path)?),
                None => registry,
            };
            let registry = if capsule {
                let config = CapsuleConfig::current_exe().map_err(Usage::from)?;
                // Over HTTP, sessions come and go (in the stateless mode, one a request): a
                // worker started ahead serves each new session's first call
                // (docs/isolation-model.md, "Workers started ahead"). Over stdio there is one.
                let config = config.spare_workers(usize::from(http.is_some()));
                registry.with_isolation(Arc::new(Capsule::new(config)), IsolationSelection::All)
            } else {
                registry
            };
            let server = McpServer::new(registry, Arc::clone(&policy), &workdir);
            let server = match filter {
                Some(f) => server.with_tool_filter(f),
                None => server,
            };
            match http {
                None => {
                    say_what_is_offered(&server, &policy);
                    server.serve_stdio().await.map_err(Usage::from)?;
                    Ok(ExitCode::SUCCESS)
                }
                Some(bind) => {
                    let options =
                        http_options(bind, &http_args, allow_remote.then_some(public_hosts))?;
                    let bound = bind_http(&server, options).await?;
                    say_what_is_offered(&server, &policy);
                    // Until a signal stops the process (main.rs).
                    bound.run().await;
                    Ok(ExitCode::SUCCESS)
                }
            }
        }
        McpCommand::Guard {
            files,
            audit,
            http,
            http_args,
            filter,
        } => {
            let filter = filter.filter()?;
            // The token is read before any guarded server starts.
            let options = http
                .map(|bind| http_options(bind, &http_args, None))
                .transpose()?;
            let mut own = crate::own_files(audit.as_deref(), &Store::Memory, None);
            own.extend(http_args.token_file.as_deref());
            let (policy, workdir, guard) = files.start(own).await?;
            // The standard backends check the guarded tools' scoped reach (the servers' own
            // I/O is confined by the kernel); the standard tools are offered only if the
            // toolset names them.
            let mut registry = standard_registry(StandardConfig::new(Store::Memory))
                .await
                .map_err(|e| Usage(format!("cannot start the backends: {e}")))?;
            guard.register_into(&mut registry).map_err(Usage::from)?;
            let offered: Vec<&str> = guard
                .tool_names()
                .filter(|t| {
                    policy.allows_tool(t) && filter.as_ref().is_none_or(|f| f.allows(t).is_ok())
                })
                .collect();
            if offered.is_empty() {
                return Err(Usage(format!(
                    "no guarded tool is offered: {} (the personality's toolset must name them, e.g. \"mcp__SERVER__TOOL\")",
                    if guard.tool_names().next().is_none() {
                        "no server started"
                    } else {
                        "none of the servers' tools is in the toolset (and passes --allowed-*)"
                    }
                )));
            }
            errln!(
                "toolcap: guarding {} tool(s): {}",
                offered.len(),
                offered.join(", ")
            );
            let known: Vec<&str> = guard
                .tool_names()
                .chain(capability_tools::STANDARD_TOOLS)
                .collect();
            warn_of_misspelt_tools(&policy, &known);
            let registry = match audit {
                Some(path) => registry.with_audit_sink(host::audit_file(&path)?),
                None => registry,
            };
            // A guarded server's images, audio and resources reach the client as such.
            let server =
                McpServer::new(registry, policy, &workdir).with_content_from(guard.tool_names());
            let server = match filter {
                Some(f) => server.with_tool_filter(f),
                None => server,
            };
            match options {
                None => server.serve_stdio().await.map_err(Usage::from)?,
                Some(options) => bind_http(&server, options).await?.run().await,
            }
            Ok(ExitCode::SUCCESS)
        }
        McpCommand::Pins { files } => {
            let own = crate::own_files(None, &Store::Memory, None);
            let (_, _, guard) = files.start(own).await?;
            outln!("{}", pins_text(&guard, &files.config).trim_end())?;
            Ok(if guard.problems().is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        McpCommand::Config {
            client,
            personality,
            workdir,
            capsule,
            guard_config,
            name,
            write,
            file,
        } => {
            // The server would refuse an unusable personality or guard configuration at every
            // start: say so now.
            host::load_policy(&personality)?;
            let resolve = |path: &PathBuf| {
                host::canonical(path)
                    .map_err(|e| Usage(format!("cannot resolve {}: {e}", path.display())))
            };
            let personality = resolve(&personality)?;
            let guard_config = match guard_config {
                Some(path) => {
                    host::load_guard_config(&path)?;
                    Some(resolve(&path)?)
                }
                None => None,
            };
            let workdir = host::workdir(workdir)?;
            let exe = host::current_exe()?;
            clients::configure(&clients::Request {
                client,
                name: &name,
                exe: &exe,
                personality: &personality,
                workdir: &workdir,
                launch: match &guard_config {
                    Some(config) => Launch::Guard(config),
                    None => Launch::Serve { capsule },
                },
                write: write.then_some(file),
            })
        }
    }
}

/// A server name every client can use: clients show it and build tool names from it
/// (`mcp__NAME__tool`), which model APIs allow only letters, digits, `_` and `-` in, up to 64.
fn server_name(given: &str) -> Result<String, String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_');
    if given.is_empty() || given.len() > 64 || !given.chars().all(allowed) {
        return Err(format!(
            "\"{}\" is not a server name clients can use: 1 to 64 ASCII letters, digits, `-` \
             or `_`",
            capability_core::shown(given)
        ));
    }
    Ok(given.to_owned())
}

/// `toolcap explain --guard-config`: the registry's admission for a stand-in with the server's
/// declaration, then the guard's own argument checks, as a running guard would make them.
pub(crate) fn explain_guarded(
    config: &capability_mcp::GuardConfig,
    tool: &str,
    args: &Value,
    policy: capability_core::CompiledPolicy,
    workdir: &Path,
) -> Result<capability_tools::Explanation, Usage> {
    let stand_in = config.stand_in(tool).ok_or_else(|| {
        Usage(format!(
            "{tool} is not a tool of the guard configuration (mcp__SERVER__TOOL, with SERVER \
             configured and TOOL in its allow list and its pins, when it has them)"
        ))
    })?;
    let mut registry = capability_tools::dry_run_registry(&StandardConfig::new(Store::Memory))
        .map_err(Usage::from)?;
    registry.register_arc(stand_in).map_err(Usage::from)?;
    let policy = Arc::new(policy);
    let ctx = capability_core::ExecutionContext::new("explain", Arc::clone(&policy), workdir);
    let call = capability_core::ToolCall::new("explain", tool, args.clone());
    let mut explanation = capability_tools::explain_call(&registry, &call, &ctx);
    // The guard does not start a server whose code a tool may change or another account may
    // (docs/guard.md, "Confinement"): a call of its tools finds no server. One not installed
    // here is examined where the guard starts it.
    let server = tool
        .strip_prefix("mcp__")
        .and_then(|rest| rest.split_once("__"))
        .and_then(|(server, _)| Some((server, config.servers.get(server)?)));
    if explanation.allowed
        && let Some((name, server)) = server
        && capability_mcp::code_not_here(server).is_none()
    {
        let refused = capability_mcp::code_refused(server, &policy, workdir);
        explanation.push_check(
            "guard.code",
            name,
            refused.clone().map_or_else(
                || Ok("the server's code is neither in the write reach nor another account's to change".to_owned()),
                Err,
            ),
        );
        if let Some(why) = refused {
            explanation.refuse(&capability_types::CapabilityError::not_available(format!(
                "the guard does not start MCP server {name}: {why}"
            )));
        }
    }
    if explanation.allowed {
        let verdict = config.check_arguments(tool, args, &policy, workdir);
        explanation.push_check(
            "guard.arguments",
            tool,
            verdict
                .as_ref()
                .map(|()| "relative paths within the server's reach, URLs to its hosts, nothing beneath its write reach that git, a shell, an agent or an editor runs later".to_owned())
                .map_err(ToString::to_string),
        );
        if let Err(e) = verdict {
            explanation.refuse(&e);
        }
    }
    Ok(explanation)
}

/// `toolcap validate --guard-config`: what each server declares that the personality will not
/// grant, and whether this kernel can confine it.
pub(crate) fn validate_guard(
    config: &capability_mcp::GuardConfig,
    policy: &capability_core::CompiledPolicy,
    workdir: Option<PathBuf>,
) -> Result<ExitCode, Usage> {
    let mut findings = 0usize;
    for (name, caps) in config.declarations() {
        for finding in capability_core::validate_declaration(&name, &caps, policy) {
            outln!("{finding}")?;
            findings += 1;
        }
    }
    // What the guard checks of each server's code before it starts it, from the directory it
    // would start in by default (docs/guard.md, "Confinement").
    let working_dir = host::workdir(workdir)?;
    let mut not_here = Vec::new();
    for (name, server) in &config.servers {
        if let Some(missing) = capability_mcp::code_not_here(server) {
            not_here.push((name, missing));
        } else if let Some(why) = capability_mcp::code_refused(server, policy, &working_dir) {
            outln!("servers.{name}: the guard would not start it: {why}")?;
            findings += 1;
        }
    }
    let offered = policy
        .toolset()
        .map(|t| t.iter().filter(|t| config.server_of(t).is_some()).count());
    let code = crate::review::conclude(policy, findings, || {
        format!(
            "ok: {} server(s); every declaration is granted as declared by {}{}",
            config.servers.len(),
            policy.id().unwrap_or("?"),
            match offered {
                Some(n) => format!("; its toolset names {n} guarded tool(s)"),
                None => String::new(),
            }
        )
    })?;
    // Not a finding: pinning is the reviewer's choice, but what the model is told without it
    // must be seen (docs/guard.md, "Pinning what the model is shown").
    for (name, missing) in not_here {
        outln!(
            "note: servers.{name} is not installed here ({} is missing): its code is examined \
             where the guard starts it",
            capability_types::shown(&missing.display().to_string())
        )?;
    }
    for (name, _) in config.servers.iter().filter(|(_, s)| s.pins.is_none()) {
        outln!(
            "note: servers.{name} has no pins: its tools are offered as it describes them when \
             it starts, a new version's descriptions too (`toolcap mcp pins` prints them to pin)"
        )?;
    }
    Ok(code)
}

/// Warns on stderr of the personality's tool names a typo away from one of `known`
/// ([`crate::review::misspelt_tools`]).
fn warn_of_misspelt_tools(policy: &CompiledPolicy, known: &[&str]) {
    for warning in crate::review::misspelt_tools(policy, known) {
        errln!("toolcap: warning: {warning}");
    }
}

/// Says on stderr (which an MCP client keeps as the server's log) which tools the server
/// offers, and warns when it offers none or the toolset names a tool a typo away from a
/// standard one: otherwise a client just shows no tools, with nothing to say why.
fn say_what_is_offered(server: &McpServer, policy: &CompiledPolicy) {
    warn_of_misspelt_tools(policy, &capability_tools::STANDARD_TOOLS);
    let names: Vec<&str> = server.tools().iter().map(|t| t.name.as_ref()).collect();
    if names.is_empty() {
        errln!(
            "toolcap: warning: personality {} offers no tool: its toolset names none of the \
             standard tools ({})",
            capability_core::shown(policy.id().unwrap_or("?")),
            capability_tools::STANDARD_TOOLS.join(", ")
        );
    } else {
        errln!(
            "toolcap: serving {} tool(s): {}",
            names.len(),
            names.join(", ")
        );
    }
}
