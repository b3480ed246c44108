//! One MCP connection: `tools/list` and `tools/call` through the registry (docs/mcp.md).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use capability_core::{
    Admission, EscalationSubject, ExecutionContext, Invocation, ToolCall, ToolCallResult,
    ToolFilter, mask_arguments,
};
use capability_types::{CancellationToken, ErrorCode, ToolResult};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CustomRequest,
    CustomResult, Implementation, InputRequests, InputRequiredResult, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ProgressToken, ProtocolVersion,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::{Peer, RequestContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;

use crate::approval::{self, Route};
use crate::{Offer, Shared};

/// The most bytes of an unknown tool's name its error repeats.
const UNKNOWN_NAME_SHOWN: usize = 256;

/// The request `_meta` entry in which a client narrows one call's toolset (docs/mcp.md,
/// "Per-call tool filters"): Ethos's filter shape.
pub const FILTER_META_KEY: &str = "toolcap/toolFilter";

/// The member of a tool's result that carries MCP content blocks (docs/mcp.md, "Tools"): a
/// tool the server lets answer so ([`McpServer::with_content_from`](crate::McpServer::with_content_from))
/// whose value is an object with this one member, an array of content blocks (text, images,
/// audio, resource links, embedded resources, as MCP writes them), is answered with those
/// blocks rather than with its value as JSON text. The guard relays a guarded server's images
/// this way.
///
/// ```
/// use capability_mcp::CONTENT_KEY;
/// let screenshot = serde_json::json!({CONTENT_KEY: [
///     {"type": "text", "text": "the page"},
///     {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
/// ]});
/// # let _ = screenshot;
/// ```
pub const CONTENT_KEY: &str = "toolcap/mcpContent";

/// The handler of one MCP connection: its own session id (in every audit event of its calls),
/// its own invocation (`max_invocations` counts per session; the requests of the stateless
/// 2026-07-28 protocol, which has no sessions, share one invocation of the server's), the
/// server's registry and policy.
/// When its last clone is dropped (rmcp drops it once the connection has ended and the requests
/// it was serving have returned), the registry is told that the session is over
/// ([`DefaultToolRegistry::end_session`](capability_core::DefaultToolRegistry::end_session)): a
/// capsule ends the session's warm workers then.
#[derive(Clone)]
pub struct McpSession {
    /// The server and the session's id, held by every clone of the handler: when the last
    /// goes (the connection ended and its requests returned), the registry is told the
    /// session is over.
    session: Arc<Session>,
    offer: Arc<Offer>,
    invocation: Arc<Invocation>,
    calls: Arc<AtomicU64>,
}

/// The server a session belongs to and its id. When dropped, it tells the registry that no
/// call of the session will come again: the capsule ends the session's warm workers then
/// (docs/mcp.md, "Sessions").
struct Session {
    shared: Arc<Shared>,
    id: Arc<str>,
}

impl Drop for Session {
    fn drop(&mut self) {
        self.shared.registry.end_session(&self.id);
    }
}

impl std::fmt::Debug for McpSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpSession")
            .field("id", &self.session.id)
            .finish_non_exhaustive()
    }
}

impl McpSession {
    pub(crate) fn new(shared: Arc<Shared>, offer: Arc<Offer>, id: String) -> Self {
        Self {
            session: Arc::new(Session {
                shared,
                id: Arc::from(id),
            }),
            offer,
            invocation: Invocation::new(),
            calls: Arc::new(AtomicU64::new(0)),
        }
    }

    /// The session id this connection's calls are audited under.
    pub fn id(&self) -> &str {
        &self.session.id
    }

    fn context(&self) -> ExecutionContext {
        ExecutionContext {
            session_id: Arc::clone(&self.session.id),
            policy: Arc::clone(&self.session.shared.policy),
            working_dir: Arc::clone(&self.session.shared.working_dir),
            cancellation: CancellationToken::new(),
            call_timeout: None,
            invocation: Arc::clone(&self.invocation),
            tool_filter: None,
        }
    }

    /// Runs one `tools/call`.
    async fn call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let CallToolRequestParams {
            name,
            arguments,
            input_responses,
            request_state,
            meta,
            ..
        } = request;
        let name = name.as_ref();
        if self.session.shared.registry.capabilities(name).is_none() {
            // The name as the client sent it, escaped and cut: an error repeats no megabyte of
            // what it was given (docs/semantics.md, "The registry").
            return Err(ErrorData::invalid_params(
                format!(
                    "unknown tool \"{}\"",
                    capability_core::shown_at_most(name, UNKNOWN_NAME_SHOWN)
                ),
                None,
            ));
        }
        let args = Value::Object(arguments.unwrap_or_default());
        let n = self.calls.fetch_add(1, Ordering::Relaxed);
        let call = ToolCall::new(format!("{}/{n}", self.session.id), name, args);
        let stateless = context
            .protocol_version()
            .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28);
        let mut ctx = self.context();
        if stateless {
            // A stateless request belongs to no session: the personality's invocation
            // constraints count such requests together (docs/mcp.md, "Sessions").
            ctx.invocation = Arc::clone(&self.session.shared.stateless_invocation);
        }
        if let Some(filter) = &self.offer.filter {
            ctx = ctx.with_tool_filter(filter.clone());
        }
        // The caller's own narrowing for this call, in the request's `_meta`.
        let own = meta.as_ref().and_then(|m| m.get(FILTER_META_KEY));
        if let Some(value) = own.or_else(|| context.meta.get(FILTER_META_KEY)) {
            let filter = ToolFilter::from_value(value).map_err(|e| {
                ErrorData::invalid_params(format!("_meta {FILTER_META_KEY:?}: {e}"), None)
            })?;
            ctx = ctx.with_tool_filter(filter);
        }
        // Only a personality with `[escalate]` rules ever asks (and only then is the client's
        // elicitation support looked up).
        let can_ask = self.session.shared.escalates
            && context
                .client_capabilities()
                .is_some_and(|c| c.elicitation.is_some());
        let route = match (stateless, request_state.as_deref()) {
            (true, Some(state)) => {
                let answer = self
                    .session
                    .shared
                    .approvals
                    .redeem(state, &call.tool, &call.args, input_responses.as_ref())
                    .map_err(|e| ErrorData::invalid_params(e, None))?;
                Route::Answered(answer)
            }
            _ if !can_ask => Route::Refuse(
                "the MCP client did not declare elicitation support, so a call that needs \
                 approval cannot be asked about and is refused",
            ),
            (true, None) => {
                // More subjects than a dialog shows are refused by the registry unasked.
                if let Admission::NeedsApproval { subjects, .. } =
                    self.session.shared.registry.admission(&call, &ctx)
                    && capability_core::too_much_to_ask(&subjects).is_none()
                {
                    return Ok(self.input_required(&call, &subjects).into());
                }
                Route::Refuse(
                    "the call asked for approval while running; an MCP client on protocol \
                     2026-07-28 can only be asked before a call starts",
                )
            }
            (false, _) => Route::Elicit(context.peer.clone()),
        };
        let _route = self
            .session
            .shared
            .escalates
            .then(|| self.session.shared.approvals.route(&call.id, route));
        let progress = context.meta.get_progress_token();
        let blocks = self.offer.content_from.contains(&call.tool);
        let outcome = self
            .run(
                call,
                &ctx,
                &context,
                progress.map(|t| (t, context.peer.clone())),
            )
            .await;
        Ok(to_mcp(outcome.result, blocks).into())
    }

    /// The `input_required` answer to a call that needs approval (protocol 2026-07-28): the
    /// elicitation, and a state handle bound to this call.
    fn input_required(
        &self,
        call: &ToolCall,
        subjects: &[EscalationSubject],
    ) -> InputRequiredResult {
        let message = approval::describe(&call.tool, subjects, &mask_arguments(&call.args));
        let state = self.session.shared.approvals.issue(&call.tool, &call.args);
        let mut requests = InputRequests::new();
        requests.insert(
            approval::INPUT_KEY.to_owned(),
            approval::input_request(message),
        );
        InputRequiredResult::new(Some(requests), Some(state))
    }

    /// Runs the call; cancels it when the client cancels the request, and reports progress
    /// while it runs when the client asked for it.
    async fn run(
        &self,
        call: ToolCall,
        ctx: &ExecutionContext,
        request: &RequestContext<RoleServer>,
        progress: Option<(ProgressToken, Peer<RoleServer>)>,
    ) -> ToolCallResult {
        let execution = self.session.shared.registry.execute(call, ctx);
        tokio::pin!(execution);
        // No timer at all unless the client asked for progress; then the first tick is one
        // interval in (a call that ends sooner reports nothing).
        let period = self.session.shared.progress_interval;
        let mut ticks = progress.as_ref().map(|_| {
            let first = capability_types::deadline(tokio::time::Instant::now().into_std(), period);
            let mut ticks = tokio::time::interval_at(first.into(), period);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            ticks
        });
        let mut elapsed = 0u32;
        let mut cancelled = false;
        loop {
            tokio::select! {
                // The call first: one that finishes at its first poll (most do) never registers
                // with the cancellation token or the timer.
                biased;
                outcome = &mut execution => return outcome,
                () = request.ct.cancelled(), if !cancelled => {
                    // The registry sees the cancellation, drops the tool's future (which kills a
                    // child or capsule worker) and audits the call as cancelled.
                    cancelled = true;
                    ctx.cancellation.cancel();
                }
                _ = tick(&mut ticks), if !cancelled => {
                    elapsed += 1;
                    if let Some((token, peer)) = &progress {
                        let mut note = ProgressNotificationParam::new(token.clone(), f64::from(elapsed));
                        note.message = Some("running".to_owned());
                        // A client that went away cannot be told; the call goes on until it
                        // ends or is cancelled.
                        let _ = peer.notify_progress(note).await;
                    }
                }
            }
        }
    }
}

/// The next tick, or never when there is no interval.
async fn tick(ticks: &mut Option<tokio::time::Interval>) {
    match ticks {
        Some(ticks) => {
            ticks.tick().await;
        }
        None => std::future::pending().await,
    }
}

/// A registry result as an MCP tool result: a success's value as text (a string as is, content
/// blocks under [`CONTENT_KEY`] as they are where `blocks` lets them be, anything else as
/// JSON); a failure with `isError: true` and a text that starts with its stable code.
pub(crate) fn to_mcp(result: ToolResult, blocks: bool) -> CallToolResult {
    match result {
        ToolResult::Ok(Value::String(text)) => {
            CallToolResult::success(vec![ContentBlock::text(text)])
        }
        ToolResult::Ok(Value::Object(only))
            if blocks && only.len() == 1 && only.contains_key(CONTENT_KEY) =>
        {
            // Read in place: the blocks may hold megabytes of an image.
            match <Vec<ContentBlock> as serde::Deserialize>::deserialize(&only[CONTENT_KEY]) {
                Ok(blocks) => CallToolResult::success(blocks),
                // Not content blocks after all: the value as it is, as for any other object.
                Err(_) => CallToolResult::success(vec![ContentBlock::text(
                    Value::Object(only).to_string(),
                )]),
            }
        }
        ToolResult::Ok(value) => {
            CallToolResult::success(vec![ContentBlock::text(value.to_string())])
        }
        ToolResult::Err { code, error } => {
            CallToolResult::error(vec![ContentBlock::text(error_text(code, &error))])
        }
    }
}

/// `PATH_NOT_REACHABLE: ...` for a policy refusal (its message already starts with its code),
/// `INPUT_INVALID: ...`, `TIMEOUT: ...` and so on for the other failures.
pub(crate) fn error_text(code: ErrorCode, message: &str) -> String {
    let starts_with_code = message.split_once(':').is_some_and(|(head, _)| {
        !head.is_empty() && head.bytes().all(|b| b.is_ascii_uppercase() || b == b'_')
    });
    if code == ErrorCode::Denied && starts_with_code {
        message.to_owned()
    } else {
        format!("{}: {message}", code.as_str().to_ascii_uppercase())
    }
}

impl ServerHandler for McpSession {
    fn get_info(&self) -> ServerConfig {
        let personality = self.session.shared.policy.id().unwrap_or("(unnamed)");
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("toolcap", env!("CARGO_PKG_VERSION")))
            .with_instructions(format!(
                "Tools confined by toolcap under the personality {personality}. A refused call \
                 returns an error whose text starts with a stable code (for example \
                 PATH_NOT_REACHABLE or HOST_NOT_ALLOWED) and says what was refused."
            ))
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        // Every tool is on the first page and no cursor is handed out, so any cursor is one
        // this server never gave: invalid params, as MCP's pagination asks (docs/mcp.md,
        // "Hostile input"), rather than the first page again to a client that follows it.
        if request.is_some_and(|r| r.cursor.is_some()) {
            return Err(ErrorData::invalid_params(
                "invalid cursor: this server lists every tool on one page and hands out no cursor",
                None,
            ));
        }
        Ok(ListToolsResult::with_all_items(self.offer.tools.clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // Boxed: rmcp runs each request's handler in a task of its own, and a task's future is
        // copied whole as the task is made and as it finishes. The call's future (the registry's
        // included) is some 4 KB, larger than anything else rmcp's handler holds; in a box it
        // is made once on the heap and never copied (docs/benchmarks.md, "MCP").
        Box::pin(self.call(request, context)).await
    }

    /// rmcp hands over as "custom" every request it could not parse, including a standard
    /// method whose params have the wrong shape (`tools/call` with `"arguments": "x"`): that is
    /// invalid params (`-32602`), not an unknown method (`-32601`).
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        let method = request.method.as_str();
        if STANDARD_METHODS.contains(&method) {
            Err(ErrorData::invalid_params(
                format!("malformed params for {method}"),
                None,
            ))
        } else {
            Err(ErrorData::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                format!("method not found: {method}"),
                None,
            ))
        }
    }
}

/// The client-to-server request methods of MCP.
const STANDARD_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
    "tasks/get",
    "tasks/list",
    "tasks/cancel",
    "tasks/result",
    "server/discover",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_texts_start_with_a_stable_code() {
        assert_eq!(
            error_text(ErrorCode::Denied, "PATH_NOT_REACHABLE: read of /etc"),
            "PATH_NOT_REACHABLE: read of /etc"
        );
        assert_eq!(
            error_text(ErrorCode::InputInvalid, "path: missing field"),
            "INPUT_INVALID: path: missing field"
        );
        assert_eq!(error_text(ErrorCode::Denied, "refused"), "DENIED: refused");
        assert_eq!(error_text(ErrorCode::Timeout, "X: y"), "TIMEOUT: X: y");
    }

    #[test]
    fn results_become_text_content() {
        let ok = to_mcp(ToolResult::Ok(Value::from("hello")), false);
        assert_eq!(ok.is_error, Some(false));
        let json = serde_json::to_value(&ok).unwrap();
        assert_eq!(json["content"][0]["text"], "hello");
        let err = to_mcp(
            ToolResult::error(ErrorCode::Denied, "HOST_NOT_ALLOWED: evil.test"),
            true,
        );
        assert_eq!(err.is_error, Some(true));
        let json = serde_json::to_value(&err).unwrap();
        assert_eq!(json["content"][0]["text"], "HOST_NOT_ALLOWED: evil.test");
    }

    #[test]
    fn content_blocks_under_the_content_key_are_answered_as_blocks() {
        let blocks = serde_json::json!([
            {"type": "text", "text": "the page"},
            {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
        ]);
        let answered = to_mcp(
            ToolResult::Ok(serde_json::json!({CONTENT_KEY: blocks})),
            true,
        );
        let json = serde_json::to_value(&answered).unwrap();
        assert_eq!(json["content"], blocks, "{json}");
        assert_eq!(json["isError"], false);
        // From a tool not let answer blocks (a value read back from the store, say), anything
        // else under the key, or beside it: a value like any other, JSON text.
        for (value, blocks) in [
            (serde_json::json!({CONTENT_KEY: blocks}), false),
            (serde_json::json!({CONTENT_KEY: "not blocks"}), true),
            (
                serde_json::json!({CONTENT_KEY: [{"type": "no such kind"}]}),
                true,
            ),
            (serde_json::json!({CONTENT_KEY: blocks, "other": 1}), true),
        ] {
            let answered =
                serde_json::to_value(to_mcp(ToolResult::Ok(value.clone()), blocks)).unwrap();
            assert_eq!(answered["content"][0]["type"], "text", "{answered}");
            let text = answered["content"][0]["text"].as_str().unwrap();
            assert_eq!(serde_json::from_str::<Value>(text).unwrap(), value);
        }
    }
}
