//! What the guard is to a server it guards: an MCP client that introduces itself as toolcap and
//! takes none of the requests a server may make of its client (docs/guard.md, "What a server
//! may ask of its client").
//!
//! A server may ask its client for a completion from the model (`sampling/createMessage`), for
//! an answer from the person (`elicitation/create`) and for the client's roots (`roots/list`).
//! The guard is the guarded server's client, and it relays none of them to its own client: a
//! server held to a reach must not get the model's words, the person's typing or the names of
//! the user's projects through the guard. Each is answered "method not found", which is what
//! a client that did not declare the capability answers (the guard declares none), rather than
//! a made-up answer (an empty list of roots, a declined form) the server could take for the
//! person's.
//!
//! A server's `notifications/tools/list_changed` is not relayed either; it makes the next call
//! list the server's tools again, and a server whose offered tools changed is marked down.
//!
//! Sampling, roots and logging are deprecated since the 2026-07-28 protocol (SEP-2577), and a
//! server speaking an earlier one may still use them: the guard answers them as long as the
//! SDK can read them.
#![allow(
    deprecated,
    reason = "the guard answers requests of protocol versions before 2026-07-28, which servers still send"
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestMethod, CreateMessageRequestParams,
    CreateMessageResult, ElicitRequestParams, ElicitResult, ElicitationCreateRequestMethod,
    Implementation, InputRequest, InputRequiredResult, ListRootsRequestMethod, ListRootsResult,
    LoggingMessageNotificationParam,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ClientHandler, ErrorData, RoleClient};

/// How many of a server's requests the guard says it refused, per start of the server: the
/// client keeps the guard's stderr as the server's log, and a server asking a million times
/// must not write a million lines there (what it writes on stderr itself is capped too).
const SAID_AT_MOST: u32 = 8;

/// The guard's side of one guarded server's MCP session.
#[derive(Debug, Clone)]
pub(super) struct GuardClient {
    /// The server's name in the guard configuration, for the log.
    server: Arc<str>,
    /// How many refusals were said so far.
    said: Arc<AtomicU32>,
    /// Whether the server said its tools changed (`notifications/tools/list_changed`) since
    /// this was last asked.
    tools_changed: Arc<AtomicBool>,
}

impl GuardClient {
    /// The client for the server configured as `server`.
    pub(super) fn new(server: &str) -> Self {
        GuardClient {
            server: server.into(),
            said: Arc::new(AtomicU32::new(0)),
            tools_changed: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Whether the server said its tools changed since this was last asked; the supervisor
    /// then lists them again before the next call (docs/guard.md, "Pinning what the model is
    /// shown").
    pub(super) fn take_tools_changed(&self) -> bool {
        self.tools_changed.swap(false, Ordering::AcqRel)
    }

    /// Says on stderr (which a client keeps as the server's log) that the server asked for
    /// `what` and was refused.
    fn refused(&self, what: &str) {
        let said = self.said.fetch_add(1, Ordering::Relaxed);
        if said < SAID_AT_MOST {
            tracing::warn!(
                target: "toolcap::guard",
                "the MCP server {} asked its client for {what}: refused, the guard relays \
                 nothing a server asks of its client",
                self.server
            );
        } else if said == SAID_AT_MOST {
            tracing::warn!(
                target: "toolcap::guard",
                "the MCP server {} keeps asking its client for what the guard does not relay; \
                 the guard refuses the rest without saying so until the server is restarted",
                self.server
            );
        }
    }
}

impl ClientHandler for GuardClient {
    /// toolcap, by name and version, declaring no client capability.
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("toolcap", env!("CARGO_PKG_VERSION"))
                .with_title("toolcap mcp guard"),
        )
    }

    async fn create_message(
        &self,
        _: CreateMessageRequestParams,
        _: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        self.refused("sampling/createMessage (a completion from the model)");
        Err(ErrorData::method_not_found::<CreateMessageRequestMethod>())
    }

    async fn create_elicitation(
        &self,
        _: ElicitRequestParams,
        _: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        self.refused("elicitation/create (an answer from the person)");
        Err(ErrorData::method_not_found::<ElicitationCreateRequestMethod>())
    }

    async fn list_roots(
        &self,
        _: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        self.refused("roots/list (the client's roots)");
        Err(ErrorData::method_not_found::<ListRootsRequestMethod>())
    }

    /// Not relayed: the client keeps being shown the first listing. Noted, so that the next
    /// call lists the tools again and finds out whether the offered ones changed.
    async fn on_tool_list_changed(&self, _: NotificationContext<RoleClient>) {
        self.tools_changed.store(true, Ordering::Release);
    }

    /// A log message goes where the server's stderr goes (`toolcap -v`), escaped; never to the
    /// client.
    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        // Nothing is built for a log nobody reads (a server may send thousands).
        if !tracing::enabled!(target: "toolcap::guard", tracing::Level::DEBUG) {
            return;
        }
        let data = match &params.data {
            serde_json::Value::String(text) => std::borrow::Cow::Borrowed(text.as_str()),
            other => std::borrow::Cow::Owned(other.to_string()),
        };
        tracing::debug!(
            target: "toolcap::guard",
            server = %self.server,
            level = ?params.level,
            "{}",
            capability_types::shown(&data)
        );
    }
}

/// What an `input_required` result asks the client for, by method, for the refusal's message
/// (what the server wrote in its requests is not repeated to the model).
pub(super) fn asked_for(asked: &InputRequiredResult) -> String {
    let methods: std::collections::BTreeSet<&str> = asked
        .input_requests
        .iter()
        .flat_map(|requests| requests.values())
        .map(|request| match request {
            InputRequest::CreateMessage(_) => "sampling/createMessage",
            InputRequest::Elicitation(_) => "elicitation/create",
            InputRequest::ListRoots(_) => "roots/list",
            _ => "a request of another kind",
        })
        .collect();
    if methods.is_empty() {
        "no request in it".to_owned()
    } else {
        methods.into_iter().collect::<Vec<_>>().join(", ")
    }
}
