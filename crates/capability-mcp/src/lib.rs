//! toolcap as an MCP server: a personality's toolset over stdio or Streamable HTTP, with every
//! `tools/call` going through the same registry, policy, audit and (optionally) capsule as a
//! call from Rust or from `toolcap call` (docs/mcp.md).
//!
//! A framework maintainer with a [`DefaultToolRegistry`] gets a server in a few lines:
//!
//! ```no_run
//! use std::sync::Arc;
//! use capability_core::{CompiledPolicy, DefaultToolRegistry, PolicyFormat};
//! use capability_mcp::McpServer;
//!
//! # async fn run(registry: DefaultToolRegistry) -> Result<(), Box<dyn std::error::Error>> {
//! let policy = CompiledPolicy::load(
//!     "id = \"reader\"\ntoolset = [\"read_file\"]\n[fs]\nread = [\"/srv/docs\"]\n",
//!     PolicyFormat::Toml,
//!     None,
//! )?;
//! let server = McpServer::new(registry, Arc::new(policy), "/srv/docs");
//! server.serve_stdio().await?; // until the client closes stdin
//! # Ok(()) }
//! ```
//!
//! A whole program, with a tool of its own beside the standard ones, is
//! `examples/stdio_server.rs` (`cargo run -p capability-mcp --example stdio_server -- DIR`).
//!
//! What a client sees:
//!
//! - `tools/list`: the tools of the personality's toolset that are registered and available,
//!   each with its input schema, description and annotations derived from its declaration
//!   ([`tool_annotations`]).
//! - `tools/call`: the registry's result. A refusal or a failure is a tool result with
//!   `isError: true` whose text starts with the stable code (`PATH_NOT_REACHABLE: ...`,
//!   `INPUT_INVALID: ...`), so the model can read it and adapt. A tool that is not registered
//!   is a JSON-RPC error (`-32602`).
//! - A call that needs approval (`[escalate]`) asks the user through MCP elicitation; accept runs
//!   it, anything else refuses it with `ESCALATION_REFUSED` (fail closed), and the decision is
//!   audited. See [`approval`](crate#approval).
//! - `notifications/cancelled` cancels the running call: the registry drops the tool's future,
//!   which kills its confined child or capsule worker; the call is audited as cancelled.
//! - A call that runs longer than a second sends `notifications/progress` when the client gave
//!   a progress token.
//!
//! # Approval
//!
//! On protocol versions before `2026-07-28` the server asks with an `elicitation/create`
//! request while the call waits. From `2026-07-28` on, servers may not send requests, so the
//! call answers with an `input_required` result carrying the elicitation and an opaque
//! `requestState`; the client retries with the user's answer. The state is a random handle to a
//! record kept here (never trusted data): it is bound to the tool and arguments it was issued
//! for, used once, and expires after ten minutes.
//!
//! # Sessions
//!
//! Every connection (a stdio process, an HTTP session, or one stateless HTTP request on
//! `2026-07-28`) gets its own session id, which names it in the audit log and scopes its
//! session storage; a session's cancellation touches only its own calls.

#![deny(missing_docs)]

mod approval;
mod guard;
mod hangup;
mod http;
mod listing;
mod session;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use capability_core::{CompiledPolicy, DefaultToolRegistry, ToolFilter};
use rmcp::ServiceExt as _;

pub use crate::guard::{
    Guard, GuardConfig, GuardConfigError, Limits, ListedTool, Listing, Reach, ServerConfig,
    code_not_here, code_refused,
};
pub use crate::http::{
    BearerToken, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_SESSIONS, HttpError,
    HttpOptions, HttpServer, MAX_REQUEST_BYTES, RemoteAccess,
};
pub use crate::listing::tool_annotations;
pub use crate::session::{CONTENT_KEY, FILTER_META_KEY, McpSession};

use crate::approval::Approvals;

/// An MCP server over one registry and one personality; cheap to clone.
///
/// Each connection is served by an [`McpSession`] ([`session`](Self::session)); the registry,
/// the policy and the pending approvals are shared by all of them.
#[derive(Clone)]
pub struct McpServer {
    shared: Arc<Shared>,
    offer: Arc<Offer>,
}

/// What a server offers its sessions: the tools `tools/list` answers and the tool filter every
/// call runs under. Kept apart from [`Shared`] so narrowing a server never depends on whether a
/// session already holds the rest.
pub(crate) struct Offer {
    /// What `tools/list` answers, computed when the offer changes.
    pub(crate) tools: Vec<rmcp::model::Tool>,
    /// The server-wide filter (`--allowed-tools`, …), if any.
    pub(crate) filter: Option<ToolFilter>,
    /// The tools whose values under [`CONTENT_KEY`] are answered as content blocks
    /// ([`McpServer::with_content_from`]).
    pub(crate) content_from: std::collections::HashSet<String>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("personality", &self.shared.policy.id())
            .field("tools", &self.offer.tools.len())
            .finish_non_exhaustive()
    }
}

struct Shared {
    registry: DefaultToolRegistry,
    policy: Arc<CompiledPolicy>,
    working_dir: Arc<Path>,
    approvals: Arc<Approvals>,
    /// Whether the personality has `[escalate]` rules (else no call is ever asked about).
    escalates: bool,
    /// The prefix of every session id of this server (its start time), then a counter.
    epoch: String,
    sessions: AtomicU64,
    /// The invocation of every request of the stateless 2026-07-28 protocol, which has no
    /// sessions: `max_invocations` and `only_after` count them together, never per request
    /// (docs/mcp.md, "Sessions").
    stateless_invocation: Arc<capability_core::Invocation>,
    progress_interval: Duration,
}

impl McpServer {
    /// A server for `registry` under `policy`; relative paths in arguments resolve against
    /// `working_dir`.
    ///
    /// The registry's approval handler is replaced by the MCP one (elicitation); its audit
    /// sink, isolation and backends are kept. Unless the registry bounds its running calls
    /// ([`RegistryConfig::max_running`](capability_core::RegistryConfig::max_running)), its
    /// per-batch `max_concurrency` becomes that bound: every request is a batch of one, and the
    /// calls of all sessions together run within it (a call waiting for approval holds no place).
    pub fn new(
        registry: DefaultToolRegistry,
        policy: Arc<CompiledPolicy>,
        working_dir: impl AsRef<Path>,
    ) -> Self {
        let approvals = Arc::new(Approvals::default());
        let registry = registry.with_approval_handler(Arc::clone(&approvals) as _);
        // Each request is a batch of one, so the registry's per-batch bound would never meet
        // two of them: it is applied across the server's calls, unless the registry has its own.
        let registry = match registry.config().max_running {
            Some(_) => registry,
            None => {
                let config = registry.config().clone();
                let bound = config.max_concurrency;
                registry.with_config(config.max_running(bound))
            }
        };
        let tools = listing::list(&registry, &policy);
        let escalates = policy.policy().is_some_and(|p| {
            let e = &p.escalate;
            !(e.hosts.is_empty() && e.write_paths.is_empty() && e.args.is_empty())
        });
        let epoch = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        Self {
            shared: Arc::new(Shared {
                registry,
                policy,
                working_dir: Arc::from(working_dir.as_ref()),
                approvals,
                escalates,
                epoch: format!("mcp-{epoch:x}"),
                sessions: AtomicU64::new(0),
                stateless_invocation: capability_core::Invocation::new(),
                progress_interval: Duration::from_secs(1),
            }),
            offer: Arc::new(Offer {
                tools,
                filter: None,
                content_from: std::collections::HashSet::new(),
            }),
        }
    }

    /// Narrows what this server offers by `filter` (docs/policy.md, "Per-call tool filters"):
    /// `tools/list` leaves out what the filter leaves out, and every call runs under it (a
    /// call of a filtered tool is refused with `TOOL_FILTERED_OUT`). A server that already has
    /// a filter keeps it: a tool must pass both. Sessions started before keep what they had.
    pub fn with_tool_filter(mut self, filter: ToolFilter) -> Self {
        let filter = match &self.offer.filter {
            Some(earlier) => earlier.and(&filter),
            None => filter,
        };
        let tools = self
            .offer
            .tools
            .iter()
            .filter(|t| filter.allows(&t.name).is_ok())
            .cloned()
            .collect();
        self.offer = Arc::new(Offer {
            tools,
            filter: Some(filter),
            content_from: self.offer.content_from.clone(),
        });
        self
    }

    /// Lets `tools` answer with MCP content blocks: a value of theirs that is an object whose
    /// one member is [`CONTENT_KEY`] is answered with those blocks (an image as an image);
    /// every other tool's value, such as a value read back from the key-value store, stays
    /// JSON text whatever it holds. `toolcap mcp guard` names the guarded tools, so a guarded
    /// server's images reach the client as images (docs/guard.md).
    pub fn with_content_from<S: Into<String>>(
        mut self,
        tools: impl IntoIterator<Item = S>,
    ) -> Self {
        let mut content_from = self.offer.content_from.clone();
        content_from.extend(tools.into_iter().map(Into::into));
        self.offer = Arc::new(Offer {
            tools: self.offer.tools.clone(),
            filter: self.offer.filter.clone(),
            content_from,
        });
        self
    }

    /// How often a running call with a progress token reports progress (default one second).
    pub fn with_progress_interval(mut self, interval: Duration) -> Self {
        if let Some(shared) = Arc::get_mut(&mut self.shared) {
            shared.progress_interval = interval.max(Duration::from_millis(10));
        }
        self
    }

    /// The tools a client sees in `tools/list`.
    pub fn tools(&self) -> &[rmcp::model::Tool] {
        &self.offer.tools
    }

    /// A handler for one connection, with a session id of its own.
    pub fn session(&self) -> McpSession {
        let n = self.shared.sessions.fetch_add(1, Ordering::Relaxed);
        McpSession::new(
            Arc::clone(&self.shared),
            Arc::clone(&self.offer),
            format!("{}-{n}", self.shared.epoch),
        )
    }

    /// Serves one session over this process's stdin and stdout until the client closes them,
    /// or stops reading: a write to stdout that fails ends the session, cancelling its calls.
    ///
    /// # Ambient Authority
    ///
    /// Reads stdin and writes stdout; nothing may print to stdout while it runs.
    ///
    /// # Errors
    ///
    /// When the client does not complete the `initialize` handshake, or the transport fails.
    pub async fn serve_stdio(&self) -> Result<(), ServeError> {
        let (input, output) = rmcp::transport::io::stdio_pipes();
        let hung_up = tokio_util::sync::CancellationToken::new();
        let output = hangup::HangUp::new(output, hung_up.clone());
        let running = self
            .session()
            .serve((input, output))
            .await
            .map_err(|e| ServeError(e.to_string()))?;
        let stop = running.cancellation_token();
        // Cancels the session when the client hangs up, then waits for it to end below.
        let hang_up = async move {
            hung_up.cancelled().await;
            stop.cancel();
            std::future::pending().await
        };
        tokio::select! {
            quit = running.waiting() => quit.map(drop).map_err(|e| ServeError(e.to_string())),
            never = hang_up => never,
        }
    }

    /// Serves one session over any transport `rmcp` accepts (a pair of async reader and writer,
    /// a duplex stream, a sink and stream of messages) until it closes.
    ///
    /// # Errors
    ///
    /// When the client does not complete the `initialize` handshake, or the transport fails.
    pub async fn serve_transport<T, E, A>(&self, transport: T) -> Result<(), ServeError>
    where
        T: rmcp::transport::IntoTransport<rmcp::RoleServer, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let running = self
            .session()
            .serve(transport)
            .await
            .map_err(|e| ServeError(e.to_string()))?;
        running
            .waiting()
            .await
            .map(drop)
            .map_err(|e| ServeError(e.to_string()))
    }
}

/// Serving a session failed: the handshake did not complete or the transport broke.
#[derive(Debug)]
pub struct ServeError(String);

impl std::fmt::Display for ServeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MCP session ended with an error: {}", self.0)
    }
}

impl std::error::Error for ServeError {}
