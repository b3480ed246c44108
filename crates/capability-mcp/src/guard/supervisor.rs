//! One guarded server: started confined, spoken to as an MCP client, restarted within a budget
//! after a crash or a hang, marked down after that (docs/guard.md, "Supervision").

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use capability_core::{ResolvedHosts, ResolvedPaths};
use capability_sandbox::{Launch, PreparedSandbox};
use capability_types::backend::{
    EgressFactory, EgressSession, FsAccess, NetworkGrant, PathPolicy as _,
};
use rmcp::model::{CallToolRequestParams, CallToolResponse, CallToolResult, Tool};
use rmcp::service::{RunningService, ServiceError};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::{Peer, RoleClient, ServiceExt as _};
use secrecy::{ExposeSecret as _, SecretString};
// toolcap: allow(tokio::net::unix::pipe, reason = "the guard's own end of a confined server's stdio pipes, which the sandbox created")
use tokio::net::unix::pipe;
use tokio::sync::Mutex;

use super::client::GuardClient;
use super::config::ServerConfig;
use super::linecap::LineCap;

/// How long a server has to complete the MCP handshake after it starts.
const START_WITHIN: Duration = Duration::from_secs(30);

/// The most tools the guard lists of one server. A server's list comes in pages, each with a
/// cursor to the next; one that never stops handing out cursors would otherwise be listed
/// until the guard's memory ran out or the deadline passed.
const MAX_TOOLS: usize = 1024;

/// Every page of `peer`'s tools, or `None` once there are more than `max`.
async fn list_within(
    peer: &Peer<RoleClient>,
    max: usize,
) -> Result<Option<Vec<Tool>>, ServiceError> {
    let mut tools = Vec::new();
    let mut cursor = None;
    loop {
        let params = cursor
            .map(|cursor| rmcp::model::PaginatedRequestParams::default().with_cursor(Some(cursor)));
        let page = peer.list_tools(params).await?;
        tools.extend(page.tools);
        if tools.len() > max {
            return Ok(None);
        }
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return Ok(Some(tools)),
        }
    }
}

/// A guarded server and its running process, if any.
pub(crate) struct Supervisor {
    pub(crate) name: String,
    config: ServerConfig,
    prepared: PreparedSandbox,
    hosts: Option<Arc<ResolvedHosts>>,
    /// The server's reach: of git's places in it, those it lists it may write (docs/policy.md,
    /// "Git's hooks and configuration").
    paths: Option<Arc<ResolvedPaths>>,
    egress: Arc<dyn EgressFactory>,
    env: Vec<(String, String)>,
    cwd: PathBuf,
    state: Mutex<State>,
    /// Set when the server wrote a message longer than `output_bytes` (its output then ends).
    overflowed: Arc<AtomicBool>,
    /// The server's private, writable `HOME`.
    _home: capability_sandbox::ScratchDir,
    /// The pins of the tools offered when it first listed them, by their own names: what the
    /// client is shown for the guard's life, which a restarted server is held to.
    offered: OnceLock<BTreeMap<String, String>>,
}

#[derive(Default)]
struct State {
    running: Option<Running>,
    /// Counts starts, so a failure is acted on once even when several calls see it.
    generation: u64,
    restarts: u32,
    down: Option<String>,
}

/// A started server: the MCP client session over its pipes, its reaper, its proxy.
struct Running {
    client: RunningService<RoleClient, GuardClient>,
    generation: u64,
    // Dropping these ends the server: the reaper is killed with its whole PID namespace, the
    // proxy stops.
    end: capability_sandbox::ChildEnd,
    _proxy: Option<Box<dyn EgressSession>>,
    _stderr: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for Supervisor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Supervisor")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// Why a relayed call got no result.
#[derive(Debug)]
pub(crate) enum CallFailure {
    /// The server answered with a JSON-RPC error; it is still serving.
    Protocol(String),
    /// The server answered by asking the client for input (`input_required`), which the guard
    /// does not relay; it is still serving. The whole message.
    Unrelayed(String),
    /// The server crashed, hung or could not be started; it was stopped (and will be restarted
    /// within its budget).
    Server(String),
    /// The server made a place a shell, an agent's client, an editor or git runs code from; it
    /// was set aside and the server stopped.
    Planted(String),
}

impl Supervisor {
    #[allow(
        clippy::too_many_arguments,
        reason = "built once, by Guard::start, from its parts"
    )]
    pub(crate) fn new(
        name: String,
        config: ServerConfig,
        prepared: PreparedSandbox,
        hosts: Option<Arc<ResolvedHosts>>,
        paths: Option<Arc<ResolvedPaths>>,
        egress: Arc<dyn EgressFactory>,
        cwd: PathBuf,
        home: capability_sandbox::ScratchDir,
        secrets: Vec<(String, SecretString)>,
    ) -> Self {
        let mut env = vec![
            ("PATH".to_owned(), "/usr/local/bin:/usr/bin:/bin".to_owned()),
            ("HOME".to_owned(), home.path().display().to_string()),
            // Its temporary directory is its private home too (a configuration may name
            // another): `/tmp` is not the server's to write.
            ("TMPDIR".to_owned(), home.path().display().to_string()),
            ("LANG".to_owned(), "C.UTF-8".to_owned()),
        ];
        // Git uses only the repositories it is pointed at, and no program starts an editor; a
        // configuration cannot set these.
        env.extend(capability_sandbox::child_fixed_env());
        for (name, value) in &config.env {
            env.retain(|(n, _)| n != name);
            env.push((name.clone(), value.clone()));
        }
        // Kept to start the server again after a failure; never logged (the supervisor's
        // `Debug` shows its name only).
        for (name, value) in secrets {
            env.retain(|(n, _)| *n != name);
            env.push((name, value.expose_secret().to_owned()));
        }
        if hosts.is_some() {
            capability_sandbox::point_at_egress_proxy(&mut env);
        }
        Self {
            name,
            config,
            prepared,
            hosts,
            paths,
            egress,
            env,
            cwd,
            state: Mutex::new(State::default()),
            overflowed: Arc::default(),
            _home: home,
            offered: OnceLock::new(),
        }
    }

    /// Records the pins of the tools the guard offers, as first listed (once).
    pub(crate) fn offer(&self, pins: BTreeMap<String, String>) {
        let _ = self.offered.set(pins);
    }

    /// The server's tools (starting it if needed).
    pub(crate) async fn list_tools(&self) -> Result<Vec<Tool>, CallFailure> {
        let (peer, generation) = self.peer().await?;
        let listed = tokio::time::timeout(self.call_timeout(), list_within(&peer, MAX_TOOLS)).await;
        // What it made as it started, too.
        self.refuse_what_it_made(generation).await?;
        match listed {
            Ok(Ok(Some(tools))) => Ok(tools),
            Ok(Ok(None)) => Err(self
                .failed(
                    generation,
                    format!("lists more than {MAX_TOOLS} tools, so none of them is offered"),
                )
                .await),
            Ok(Err(ServiceError::McpError(e))) => Err(CallFailure::Protocol(e.message.to_string())),
            Ok(Err(e)) => Err(self
                .failed(generation, format!("did not list its tools: {e}"))
                .await),
            Err(_) => Err(self
                .failed(generation, "did not list its tools in time".to_owned())
                .await),
        }
    }

    /// The name and version the running server gave itself in the MCP handshake, if it is
    /// running.
    pub(crate) async fn server_info(&self) -> Option<(String, String)> {
        let state = self.state.lock().await;
        let info = state.running.as_ref()?.client.peer().peer_info()?;
        let implementation = info.server_info.as_ref()?;
        Some((implementation.name.clone(), implementation.version.clone()))
    }

    /// Relays one call; a hang past the deadline or a crash stops the server.
    pub(crate) async fn call(
        &self,
        tool: &str,
        arguments: serde_json::Map<String, serde_json::Value>,
    ) -> Result<CallToolResult, CallFailure> {
        let (peer, generation) = self.peer().await?;
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        let answer = tokio::time::timeout(self.call_timeout(), peer.call_tool_once(params)).await;
        self.refuse_what_it_made(generation).await?;
        match answer {
            Ok(Ok(CallToolResponse::Complete(result))) => Ok(result),
            Ok(Ok(CallToolResponse::InputRequired(asked))) => Err(CallFailure::Unrelayed(format!(
                "the MCP server {} asked its client for input to answer the call ({}); the guard \
                 relays nothing a server asks of its client",
                self.name,
                super::client::asked_for(&asked)
            ))),
            // A task the guard did not ask for (it declares no task support): the server does
            // not keep to the protocol, and runs on at something nobody will collect.
            Ok(Ok(_)) => Err(self
                .failed(
                    generation,
                    "answered the call with a task, which the guard did not ask for".to_owned(),
                )
                .await),
            Ok(Err(ServiceError::McpError(e))) => Err(CallFailure::Protocol(e.message.to_string())),
            Ok(Err(e)) => Err(self
                .failed(generation, format!("failed during the call: {e}"))
                .await),
            Err(_) => Err(self
                .failed(
                    generation,
                    format!(
                        "did not answer within {} s",
                        self.config.limits.call_timeout_seconds
                    ),
                )
                .await),
        }
    }

    /// What the server made, where none was when it started, of the places a shell, an agent's
    /// client, an editor or a git hook manager runs code from (a mount could not keep a name
    /// that did not exist): set aside (`NAME.refused-by-toolcap`), the server stopped as one
    /// that failed, and the call refused saying so (docs/guard.md, "Confinement").
    async fn refuse_what_it_made(&self, generation: u64) -> Result<(), CallFailure> {
        let moved = {
            let state = self.state.lock().await;
            match state
                .running
                .as_ref()
                .filter(|r| r.generation == generation)
            {
                Some(running) => running.end.set_aside().map(|moved| {
                    moved
                        .iter()
                        .map(|(made, aside)| running.end.watch().describe(made, aside))
                        .collect::<Vec<_>>()
                }),
                None => return Ok(()),
            }
        };
        let why = match moved {
            Ok(moved) if moved.is_empty() => return Ok(()),
            Ok(moved) => format!("made {}; set aside", moved.join("; ")),
            Err(e) => format!(
                "made a place a shell or an agent's client runs code from, or one the policy \
                 denies, which could not be set aside: {e}"
            ),
        };
        let stopped = self.failed(generation, why).await;
        Err(match stopped {
            CallFailure::Server(message) => CallFailure::Planted(message),
            other => other,
        })
    }

    fn call_timeout(&self) -> Duration {
        Duration::from_secs(self.config.limits.call_timeout_seconds)
    }

    /// The running server's client, started (or restarted) first when needed.
    async fn peer(&self) -> Result<(Peer<RoleClient>, u64), CallFailure> {
        let mut state = self.state.lock().await;
        if let Some(why) = &state.down {
            return Err(CallFailure::Server(format!(
                "the MCP server {} is down: {why}",
                self.name
            )));
        }
        if let Some(running) = &state.running {
            if !running.client.is_closed() {
                let (peer, generation) = (running.client.peer().clone(), running.generation);
                // It said its tools changed (`tools/list_changed`): the client is still shown
                // what it first listed, so it must still list that (docs/guard.md, "Pinning
                // what the model is shown").
                if running.client.service().take_tools_changed()
                    && let Some(offered) = self.offered.get()
                    && let Some(changed) = self.changed(&peer, offered).await
                {
                    // Dropping it kills the server's whole PID namespace.
                    state.running = None;
                    return Err(self.changed_down(&mut state, "while it ran", &changed));
                }
                return Ok((peer, generation));
            }
            // It ended between calls (crashed, or closed its output).
            let generation = running.generation;
            drop(state);
            return Err(self.failed(generation, "exited".to_owned()).await);
        }
        state.generation += 1;
        let generation = state.generation;
        match self.start(generation).await {
            Ok(running) => {
                let peer = running.client.peer().clone();
                // A restart: the client is still shown what the server first listed, so the
                // server must still list it (docs/guard.md, "Pinning what the model is shown").
                if let Some(offered) = self.offered.get()
                    && generation > 1
                    && let Some(changed) = self.changed(&peer, offered).await
                {
                    // Dropping it kills the server's whole PID namespace.
                    drop(running);
                    return Err(self.changed_down(&mut state, "when it was restarted", &changed));
                }
                state.running = Some(running);
                Ok((peer, generation))
            }
            Err(why) => {
                let failure = format!("could not be started: {why}");
                Self::count_failure(
                    &mut state,
                    &self.name,
                    self.config.limits.restarts,
                    &failure,
                );
                Err(CallFailure::Server(format!(
                    "the MCP server {} {failure}",
                    self.name
                )))
            }
        }
    }

    /// Marks the server down because its offered tools `changed` (`when`: when it was
    /// restarted, while it ran), and the failure a call gets.
    fn changed_down(&self, state: &mut State, when: &str, changed: &str) -> CallFailure {
        let why = format!(
            "its tools changed {when} ({changed}), and the client is still shown them as they were"
        );
        tracing::warn!(target: "toolcap::guard", server = %self.name, "marked down: {why}");
        state.down = Some(why.clone());
        CallFailure::Server(format!("the MCP server {} is down: {why}", self.name))
    }

    /// How a server's tools, listed again (after a restart, or after it said they changed),
    /// differ from the `offered` ones (by their own names, with their pins), or `None` when
    /// every offered tool is listed as it was. A listing that fails
    /// or does not come in time counts as a change: the guard cannot tell it is not one.
    async fn changed(
        &self,
        peer: &Peer<RoleClient>,
        offered: &BTreeMap<String, String>,
    ) -> Option<String> {
        let listed =
            match tokio::time::timeout(self.call_timeout(), list_within(peer, MAX_TOOLS)).await {
                Ok(Ok(Some(tools))) => tools,
                Ok(Ok(None)) => return Some(format!("it lists more than {MAX_TOOLS} tools")),
                Ok(Err(e)) => {
                    return Some(format!(
                        "it did not list its tools: {}",
                        capability_types::shown(&e.to_string())
                    ));
                }
                Err(_) => return Some("it did not list its tools in time".to_owned()),
            };
        let mut changed = Vec::new();
        for (name, pin) in offered {
            let mut same_name = listed.iter().filter(|t| t.name == name.as_str());
            match (same_name.next(), same_name.next()) {
                (None, _) => changed.push(format!("{name} is no longer listed")),
                (Some(_), Some(_)) => changed.push(format!("{name} is listed twice")),
                (Some(tool), None) if super::pin::pin_of(tool) != *pin => changed.push(format!(
                    "{name}'s description or input schema is not what it was"
                )),
                (Some(_), None) => {}
            }
        }
        (!changed.is_empty()).then(|| changed.join(", "))
    }

    /// Stops the server after a failure seen by a call of `generation` (once per generation),
    /// and counts it against the restart budget.
    /// `why` may quote the server (an SDK error repeating what it sent): it is logged and
    /// handed to the client with its control characters shown, not obeyed.
    async fn failed(&self, generation: u64, why: String) -> CallFailure {
        let why = if self.overflowed.load(Ordering::Relaxed) {
            format!(
                "wrote a message longer than output_bytes ({} bytes)",
                self.config.limits.output_bytes
            )
        } else {
            capability_types::shown(&why).into_owned()
        };
        let mut state = self.state.lock().await;
        if state
            .running
            .as_ref()
            .is_some_and(|r| r.generation == generation)
        {
            // Dropping it kills the server's whole PID namespace.
            state.running = None;
            Self::count_failure(&mut state, &self.name, self.config.limits.restarts, &why);
            tracing::warn!(target: "toolcap::guard", server = %self.name, "stopped: {why}");
        }
        CallFailure::Server(format!(
            "the MCP server {} {why}; it was stopped{}",
            self.name,
            if state.down.is_some() {
                " and is now down (restart budget spent)"
            } else {
                " and will be restarted on the next call"
            }
        ))
    }

    fn count_failure(state: &mut State, name: &str, budget: u32, why: &str) {
        state.restarts += 1;
        if state.restarts > budget {
            state.down = Some(format!(
                "{why} ({} failures, {budget} restarts allowed)",
                state.restarts
            ));
            tracing::warn!(target: "toolcap::guard", server = %name, "marked down: {why}");
        }
    }

    /// Starts the server confined and completes the MCP handshake with it.
    async fn start(&self, generation: u64) -> Result<Running, String> {
        // argv[0] is the path as configured, as a shell would pass it: interpreters find their
        // environment from it (a Python venv's `pyvenv.cfg` sits beside its `bin/python`).
        // Git's places a server may write are those its reach lists, as for a tool's child: a
        // repository's git directory read-only unless listed.
        let git_writable = |p: &std::path::Path| {
            self.paths
                .as_ref()
                .is_some_and(|paths| paths.check(p, FsAccess::Write).is_ok())
        };
        let elsewhere = self
            .paths
            .as_ref()
            .map(|paths| paths.runs_later_places())
            .unwrap_or_default();
        let launch = Launch {
            program: &self.config.command,
            arg0: self.config.command.as_os_str(),
            args: &self.config.args,
            env: &self.env,
            cwd: &self.cwd,
            stdin: true,
            git_writable: Some(&git_writable),
            runs_later: &capability_core::matching::path::RUNS_LATER_NAMES,
            runs_later_places: &elsewhere,
            // Its home is a directory of its own, which its restarts keep (`Supervisor::new`).
            home: None,
        };
        let child = self.prepared.spawn(&launch).map_err(|e| e.to_string())?;
        let proxy = match (child.egress, &self.hosts) {
            (Some(receiver), Some(hosts)) => {
                let listener = receiver.receive().map_err(|e| e.to_string())?;
                let grant =
                    NetworkGrant::new(format!("mcp__{}", self.name), Arc::clone(hosts) as _);
                Some(
                    self.egress
                        .serve(grant, listener)
                        .map_err(|e| e.to_string())?,
                )
            }
            _ => None,
        };
        let pipes = |e: std::io::Error| format!("cannot use the server's pipes: {e}");
        let stdin = child
            .stdin
            .ok_or_else(|| "the server has no stdin".to_owned())?;
        // toolcap: allow(tokio::net::unix::pipe::Sender::from_owned_fd, reason = "the guard's own end of a confined server's stdio pipes, which the sandbox created")
        let writer = pipe::Sender::from_owned_fd(stdin).map_err(pipes)?;
        // toolcap: allow(tokio::net::unix::pipe::Receiver::from_owned_fd, reason = "the guard's own end of a confined server's stdio pipes, which the sandbox created")
        let reader = pipe::Receiver::from_owned_fd(child.stdout).map_err(pipes)?;
        // toolcap: allow(tokio::net::unix::pipe::Receiver::from_owned_fd, reason = "the guard's own end of a confined server's stdio pipes, which the sandbox created")
        let stderr = pipe::Receiver::from_owned_fd(child.stderr).map_err(pipes)?;
        let name = self.name.clone();
        let stderr = tokio::spawn(async move {
            // What the server says on stderr goes to the log, a line at a time, capped: 1,000
            // lines of at most 500 bytes; the rest is read and dropped (a line that never ends
            // is not held, and invalid UTF-8 does not stop the draining).
            super::linecap::drain_lines(stderr, 1000, 500, |line| {
                tracing::debug!(target: "toolcap::guard", server = %name, "{line}");
            })
            .await;
        });
        self.overflowed.store(false, Ordering::Relaxed);
        let limit = self.config.limits.output_bytes;
        let reader = LineCap::new(reader, limit, Arc::clone(&self.overflowed));
        let transport = AsyncRwTransport::new_client(reader, writer).with_max_line_length(limit);
        let client =
            match tokio::time::timeout(START_WITHIN, GuardClient::new(&self.name).serve(transport))
                .await
            {
                Ok(Ok(client)) => client,
                Ok(Err(e)) => return Err(handshake_failure(&e)),
                Err(_) => {
                    return Err(format!(
                        "the MCP handshake did not complete within {} s",
                        START_WITHIN.as_secs()
                    ));
                }
            };
        Ok(Running {
            client,
            generation,
            end: child.end,
            _proxy: proxy,
            _stderr: stderr,
        })
    }
}

/// Why the MCP handshake with a server failed, in a user's words: a server that ended or closed
/// its pipes before answering (a wrong command, a script that exits, a crash) is said to have
/// done so, without the SDK's transport types; what it wrote on stderr is in the log (`-v`).
fn handshake_failure(e: &rmcp::service::ClientInitializeError) -> String {
    use rmcp::service::ClientInitializeError as Failed;
    match e {
        Failed::ConnectionClosed(_) | Failed::TransportError { .. } => {
            "it ended before answering the MCP handshake (`toolcap -v` shows what it wrote on \
             stderr)"
                .to_owned()
        }
        // The server's own words (a JSON-RPC error's message) reach a terminal through
        // stderr: shown, not obeyed.
        other => format!(
            "the MCP handshake failed: {}",
            capability_types::shown(&other.to_string())
        ),
    }
}
