//! Streamable HTTP: `toolcap mcp serve --http` (docs/mcp.md, "HTTP").
//!
//! Loopback by default. Every request's `Host` must name an allowed host and a present `Origin`
//! must be a loopback origin (or one the options allow), which defeats DNS rebinding: a page on
//! `http://evil.example` that resolves to 127.0.0.1 still sends its own `Origin`. A
//! non-loopback address needs [`RemoteAccess`]: a bearer token checked on every request. On
//! loopback a token is optional ([`HttpOptions::with_token`]): without one, every process on the
//! machine, of any user, can call the tools.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt as _, Full};
// toolcap: allow(hyper_util::rt::TokioIo, reason = "the MCP endpoint this crate serves (its listening socket and connections), not a tool's reach")
use hyper_util::rt::TokioIo;
// toolcap: allow(hyper_util::rt::TokioTimer, reason = "the timer of the MCP endpoint's connections (their idle timeout), not a tool's reach")
use hyper_util::rt::TokioTimer;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use sha2::{Digest as _, Sha256};
// toolcap: allow(tokio::net::TcpListener, reason = "the MCP endpoint this crate serves (its listening socket and connections), not a tool's reach")
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::McpServer;

/// The largest request body accepted (larger gets `413 Payload Too Large`).
pub const MAX_REQUEST_BYTES: usize = 4 * 1024 * 1024;

/// How many sessions an endpoint keeps open at once unless told otherwise
/// ([`HttpOptions::with_max_sessions`]).
pub const DEFAULT_MAX_SESSIONS: usize = 64;

/// How many connections an endpoint serves at once unless told otherwise
/// ([`HttpOptions::with_max_connections`]).
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;

/// How long a connection may go without sending a whole request head unless told otherwise
/// ([`HttpOptions::with_idle_timeout`]).
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// How the HTTP endpoint is exposed.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HttpOptions {
    /// The address to listen on; loopback unless [`remote`](Self::remote) is set.
    pub bind: SocketAddr,
    /// Access from other machines: required for a non-loopback address.
    pub remote: Option<RemoteAccess>,
    /// Browser origins allowed besides loopback ones (`http://localhost:*`, ...), with scheme.
    pub allowed_origins: Vec<String>,
    /// A token every request on a loopback address must carry; with [`remote`](Self::remote),
    /// the remote access's token is the one checked.
    pub token: Option<BearerToken>,
    /// The most sessions open at once; a handshake past it gets `503` until one ends (its client
    /// closes it, or it is idle for five minutes).
    pub max_sessions: usize,
    /// The most connections served at once; one past it waits, unanswered, until another closes.
    pub max_connections: usize,
    /// A connection that sends no whole request head for this long is closed: one that is
    /// silent from the start, that trickles a head, or that sits idle between requests.
    pub idle_timeout: Duration,
}

impl HttpOptions {
    /// Loopback only, on `bind`, open to every process on the machine.
    pub fn loopback(bind: SocketAddr) -> Self {
        Self {
            bind,
            remote: None,
            allowed_origins: Vec::new(),
            token: None,
            max_sessions: DEFAULT_MAX_SESSIONS,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
        }
    }

    /// Keeps at most `max` sessions open at once (at least one).
    pub fn with_max_sessions(mut self, max: usize) -> Self {
        self.max_sessions = max.max(1);
        self
    }

    /// Serves at most `max` connections at once (at least one).
    pub fn with_max_connections(mut self, max: usize) -> Self {
        self.max_connections = max.max(1);
        self
    }

    /// Closes a connection that sends no whole request head for `timeout`.
    pub fn with_idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = timeout;
        self
    }

    /// Allows access from other machines with `remote`'s token and host names.
    pub fn with_remote(mut self, remote: RemoteAccess) -> Self {
        self.remote = Some(remote);
        self
    }

    /// Requires `token` on every request on loopback too: on a machine other users share,
    /// loopback is theirs as well.
    pub fn with_token(mut self, token: BearerToken) -> Self {
        self.token = Some(token);
        self
    }
}

/// A bearer token every request must carry (`Authorization: Bearer TOKEN`). Only its SHA-256 is
/// kept.
#[derive(Clone)]
pub struct BearerToken {
    digest: [u8; 32],
}

impl std::fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BearerToken(..)")
    }
}

impl BearerToken {
    /// The token `token` (one trailing line end is read past).
    ///
    /// # Errors
    ///
    /// When the token is shorter than 16 characters or holds whitespace or control characters.
    pub fn new(token: &str) -> Result<Self, HttpError> {
        let token = token.trim_end_matches(['\n', '\r']);
        if token.len() < 16 || token.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(HttpError(
                "the bearer token must be at least 16 characters, without whitespace".to_owned(),
            ));
        }
        Ok(Self {
            digest: Sha256::digest(token.as_bytes()).into(),
        })
    }

    /// Whether `header` is `Bearer TOKEN` with the right token (compared as digests, so the time
    /// taken does not tell how much of a guess was right).
    fn admits(&self, header: Option<&header::HeaderValue>) -> bool {
        let Some(value) = header.and_then(|h| h.to_str().ok()) else {
            return false;
        };
        let Some(token) = value
            .strip_prefix("Bearer ")
            .or_else(|| value.strip_prefix("bearer "))
        else {
            return false;
        };
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        digest
            .iter()
            .zip(self.digest.iter())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
    }
}

/// What a non-loopback endpoint requires: a bearer token, and the host names clients use to
/// reach it (checked against `Host`).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RemoteAccess {
    token: BearerToken,
    /// Host names (or `host:port`) clients reach the server by.
    pub hosts: Vec<String>,
}

impl RemoteAccess {
    /// Requires `Authorization: Bearer TOKEN` on every request.
    ///
    /// # Errors
    ///
    /// When the token is shorter than 16 characters or holds whitespace or control characters.
    pub fn new(token: &str, hosts: Vec<String>) -> Result<Self, HttpError> {
        Ok(Self {
            token: BearerToken::new(token)?,
            hosts,
        })
    }
}

/// The HTTP endpoint could not be set up.
#[derive(Debug)]
pub struct HttpError(String);

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for HttpError {}

/// A bound Streamable HTTP endpoint, serving until [`shutdown`](Self::shutdown).
pub struct HttpServer {
    // toolcap: allow(tokio::net::TcpListener, reason = "the MCP endpoint this crate serves (its listening socket and connections), not a tool's reach")
    listener: TcpListener,
    service: StreamableHttpService<crate::McpSession, LocalSessionManager>,
    /// The token every request must carry, if any.
    token: Option<Arc<BearerToken>>,
    /// The sessions' table and its limit.
    sessions: Arc<Sessions>,
    /// One permit per connection served.
    connections: Arc<Semaphore>,
    idle_timeout: Duration,
    stop: CancellationToken,
}

/// The open sessions (rmcp's table, which drops a session when it ends) and how many may be.
struct Sessions {
    manager: Arc<LocalSessionManager>,
    max: usize,
    /// Held from a handshake's count of the open sessions to its session's creation, so that
    /// handshakes sent at once cannot all see room for one more.
    opening: tokio::sync::Mutex<()>,
    /// How long a request's body may take to arrive whole, from its head.
    body_within: Duration,
}

impl std::fmt::Debug for HttpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpServer")
            .field("listener", &self.listener)
            .finish_non_exhaustive()
    }
}

impl McpServer {
    /// Binds the Streamable HTTP endpoint described by `options`.
    ///
    /// # Ambient Authority
    ///
    /// Opens a listening TCP socket.
    ///
    /// # Errors
    ///
    /// When the address is not loopback and no [`RemoteAccess`] is given, or it cannot be bound.
    pub async fn bind_http(&self, options: HttpOptions) -> Result<HttpServer, HttpError> {
        let loopback = options.bind.ip().is_loopback();
        if !loopback && options.remote.is_none() {
            return Err(HttpError(format!(
                "{} is not a loopback address: serving other machines needs --allow-remote and a \
                 bearer token",
                options.bind
            )));
        }
        // toolcap: allow(tokio::net::TcpListener::bind, reason = "the MCP endpoint this crate serves (its listening socket and connections), not a tool's reach")
        let listener = TcpListener::bind(options.bind)
            .await
            .map_err(|e| HttpError(format!("cannot listen on {}: {e}", options.bind)))?;
        let port = listener
            .local_addr()
            .map_err(|e| HttpError(e.to_string()))?
            .port();
        let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1", "[::1]"]
            .iter()
            .map(|h| (*h).to_owned())
            .collect();
        let mut origins: Vec<String> = ["localhost", "127.0.0.1", "[::1]"]
            .iter()
            .flat_map(|h| [format!("http://{h}:{port}"), format!("https://{h}:{port}")])
            .collect();
        if let Some(remote) = &options.remote {
            hosts.push(options.bind.ip().to_string());
            hosts.extend(remote.hosts.iter().cloned());
        }
        origins.extend(options.allowed_origins.iter().cloned());
        let stop = CancellationToken::new();
        let config = StreamableHttpServerConfig::default()
            .with_allowed_hosts(hosts)
            .with_allowed_origins(origins)
            .enforce_origin_validation()
            .with_max_request_body_bytes(MAX_REQUEST_BYTES)
            .with_cancellation_token(stop.clone());
        let server = self.clone();
        let manager = Arc::new(LocalSessionManager::default());
        let service =
            StreamableHttpService::new(move || Ok(server.session()), Arc::clone(&manager), config);
        let token = match options.remote {
            Some(remote) => Some(remote.token),
            None => options.token,
        };
        Ok(HttpServer {
            listener,
            service,
            token: token.map(Arc::new),
            sessions: Arc::new(Sessions {
                manager,
                max: options.max_sessions.max(1),
                opening: tokio::sync::Mutex::new(()),
                body_within: options.idle_timeout,
            }),
            connections: Arc::new(Semaphore::new(options.max_connections.max(1))),
            idle_timeout: options.idle_timeout,
            stop,
        })
    }
}

impl HttpServer {
    /// The address it listens on (with the port chosen when `:0` was asked for).
    ///
    /// # Errors
    ///
    /// When the socket cannot say.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// A handle that stops the server (and ends every session) when called.
    pub fn shutdown(&self) -> impl Fn() + Send + Sync + 'static {
        let stop = self.stop.clone();
        move || stop.cancel()
    }

    /// Serves until shut down.
    ///
    /// At most [`HttpOptions::max_connections`] connections are served at once: past that, no
    /// connection is accepted until one closes. A failed `accept` (out of descriptors, say) is
    /// tried again after a pause, not at once: the listener stays ready while the cause lasts,
    /// and retrying at once would spin.
    pub async fn run(self) {
        let Self {
            listener,
            service,
            token,
            sessions,
            connections,
            idle_timeout,
            stop,
        } = self;
        loop {
            let permit = tokio::select! {
                () = stop.cancelled() => return,
                permit = Arc::clone(&connections).acquire_owned() => permit,
            };
            let Ok(permit) = permit else {
                return;
            };
            let accepted = tokio::select! {
                () = stop.cancelled() => return,
                accepted = listener.accept() => accepted,
            };
            let stream = match accepted {
                Ok((stream, _)) => {
                    // An answer goes out in several writes (its head, each event, the end): with
                    // Nagle's algorithm, a write waits for the client's acknowledgement of the
                    // one before, which a client delays by up to 40 ms (docs/mcp.md, "HTTP").
                    if let Err(e) = stream.set_nodelay(true) {
                        tracing::debug!(target: "toolcap::mcp", error = %e, "cannot turn Nagle's algorithm off on a connection");
                    }
                    stream
                }
                Err(e) => {
                    tracing::warn!(target: "toolcap::mcp", error = %e, "cannot accept a connection; trying again shortly");
                    drop(permit);
                    tokio::select! {
                        () = stop.cancelled() => return,
                        () = tokio::time::sleep(ACCEPT_PAUSE) => {}
                    }
                    continue;
                }
            };
            let service = service.clone();
            let token = token.clone();
            let sessions = Arc::clone(&sessions);
            let stop = stop.clone();
            tokio::spawn(async move {
                let _permit = permit;
                // toolcap: allow(hyper::service::service_fn, reason = "the MCP endpoint this crate serves (its listening socket and connections), not a tool's reach")
                let handler = hyper::service::service_fn(move |request| {
                    let service = service.clone();
                    let token = token.clone();
                    let sessions = Arc::clone(&sessions);
                    async move {
                        if let Some(token) = &token
                            && !token.admits(request.headers().get(header::AUTHORIZATION))
                        {
                            return Ok::<_, Infallible>(unauthorized());
                        }
                        Ok(sessions.handle(service, request).await)
                    }
                });
                // toolcap: allow(hyper::server::conn::http1::Builder::new, reason = "the MCP endpoint this crate serves (its listening socket and connections), not a tool's reach")
                let connection = hyper::server::conn::http1::Builder::new()
                    // toolcap: allow(hyper_util::rt::TokioTimer::new, reason = "the timer of the MCP endpoint's connections (their idle timeout), not a tool's reach")
                    .timer(TokioTimer::new())
                    .header_read_timeout(idle_timeout)
                    // toolcap: allow(hyper_util::rt::TokioIo::new, reason = "the MCP endpoint this crate serves (its listening socket and connections), not a tool's reach")
                    .serve_connection(TokioIo::new(stream), handler);
                tokio::pin!(connection);
                tokio::select! {
                    _ = connection.as_mut() => {}
                    () = stop.cancelled() => connection.as_mut().graceful_shutdown(),
                }
            });
        }
    }
}

/// How long the server waits after a failed `accept` before it tries again.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// An HTTP response as rmcp's service gives it.
type Answer = Response<BoxBody<Bytes, Infallible>>;

impl Sessions {
    /// Hands `request` to rmcp's service, unless it is a handshake that would open a session
    /// past the limit (`503`). Only a `POST` without a session id can open one. A `POST`'s body
    /// is read whole here first (rmcp reads every body whole anyway), so that one rmcp cannot
    /// read as a message is answered as the MCP transport asks: `400` and a JSON-RPC error
    /// ([`malformed`]).
    async fn handle(
        &self,
        mut service: StreamableHttpService<crate::McpSession, LocalSessionManager>,
        // toolcap: allow(hyper::body::Incoming, reason = "a request to the MCP endpoint this crate serves, not a tool's reach")
        request: http::Request<Incoming>,
    ) -> Answer {
        use tower_service::Service as _;
        let stalled = Arc::new(AtomicBool::new(false));
        let request = request.map(|body| Punctual::new(body, self.body_within, &stalled));
        if request.method() != http::Method::POST {
            let answer = unwrap_infallible(service.call(request).await);
            // rmcp answers a body it could not read with 500; it was the client's.
            if stalled.load(Ordering::Relaxed) {
                return too_slow();
            }
            return answer;
        }
        let (parts, body) = request.into_parts();
        let body = match http_body_util::Limited::new(body, MAX_REQUEST_BYTES)
            .collect()
            .await
        {
            Ok(collected) => collected.to_bytes(),
            Err(e) if e.is::<Stalled>() => {
                return too_slow();
            }
            Err(e) if e.is::<http_body_util::LengthLimitError>() => {
                return plain(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "the request body is over 4 MiB\n",
                );
            }
            Err(_) => {
                return plain(
                    StatusCode::BAD_REQUEST,
                    "the request body could not be read\n",
                );
            }
        };
        let handshake = if parts.headers.contains_key(SESSION_ID_HEADER) {
            None
        } else {
            opens_session(&body)
        };
        let declared_json = declares_json(&parts.headers);
        let request = http::Request::from_parts(parts, Full::new(body.clone()));
        let answer = match handshake {
            None => unwrap_infallible(service.call(request).await),
            Some(id) => {
                let _turn = self.opening.lock().await;
                if self.manager.sessions.read().await.len() >= self.max {
                    return self.full(id);
                }
                unwrap_infallible(service.call(request).await)
            }
        };
        // rmcp answers a body declared JSON that it cannot read as a message with `415`, which
        // is for a body of the wrong type.
        if answer.status() == StatusCode::UNSUPPORTED_MEDIA_TYPE && declared_json {
            return malformed(&body);
        }
        answer
    }

    /// The answer to a handshake when every session is in use: a JSON-RPC error to its
    /// request, with `503` and `Retry-After`.
    fn full(&self, id: serde_json::Value) -> Answer {
        let max = self.max;
        let body = serde_json::json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {
                "code": -32000,
                "message": format!(
                    "this server keeps at most {max} sessions open, and all {max} are in use: \
                     end one (HTTP DELETE with its Mcp-Session-Id) or wait until one has been \
                     idle for five minutes"
                ),
            },
        });
        let mut response = json_answer(StatusCode::SERVICE_UNAVAILABLE, &body);
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, header::HeaderValue::from_static("5"));
        response
    }
}

// toolcap: allow(hyper::body::Incoming, reason = "a request to the MCP endpoint this crate serves, not a tool's reach")
type Incoming = hyper::body::Incoming;

/// A request body that must arrive whole within a time from its first poll (the request's
/// head has arrived by then): a client that sends a head and then a body a byte at a time, or
/// never, would otherwise hold its connection for as long as it liked.
struct Punctual {
    body: Incoming,
    within: Duration,
    /// Set the first time the body has to be waited for.
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    /// Set when the deadline passed.
    stalled: Arc<AtomicBool>,
}

impl Punctual {
    fn new(body: Incoming, within: Duration, stalled: &Arc<AtomicBool>) -> Self {
        Self {
            body,
            within,
            deadline: None,
            stalled: Arc::clone(stalled),
        }
    }
}

/// A body that did not arrive in time.
#[derive(Debug)]
struct Stalled;

impl std::fmt::Display for Stalled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the request body did not arrive in time")
    }
}

impl std::error::Error for Stalled {}

// toolcap: allow(hyper::body::Body, reason = "a request body of the MCP endpoint this crate serves, not a tool's reach")
impl hyper::body::Body for Punctual {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        // toolcap: allow(hyper::body::Frame, reason = "a request body of the MCP endpoint this crate serves, not a tool's reach")
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        use std::task::Poll;
        let this = &mut *self;
        if let Poll::Ready(frame) = Pin::new(&mut this.body).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        let within = this.within;
        let deadline = this
            .deadline
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(within)));
        match deadline.as_mut().poll(cx) {
            Poll::Ready(()) => {
                this.stalled.store(true, Ordering::Relaxed);
                Poll::Ready(Some(Err(Box::new(Stalled))))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    // toolcap: allow(hyper::body::SizeHint, reason = "a request body of the MCP endpoint this crate serves, not a tool's reach")
    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// The header that names a request's session.
const SESSION_ID_HEADER: &str = "mcp-session-id";

/// The id of the request in `body` if it is a handshake that opens a session: an `initialize`
/// request without the protocol version in its `_meta` (one with it is answered in the
/// stateless 2026-07-28 mode, and opens none), as rmcp decides. Anything else, unparsable
/// bodies included, is rmcp's to answer.
fn opens_session(body: &[u8]) -> Option<serde_json::Value> {
    use rmcp::model::{ClientJsonRpcMessage, ClientRequest, GetMeta as _, JsonRpcMessage};
    /// Only the method, read without building the rest.
    #[derive(serde::Deserialize)]
    struct Method {
        method: Option<String>,
    }
    let method: Method = serde_json::from_slice(body).ok()?;
    if method.method.as_deref() != Some("initialize") {
        return None;
    }
    match serde_json::from_slice::<ClientJsonRpcMessage>(body).ok()? {
        JsonRpcMessage::Request(request)
            if matches!(request.request, ClientRequest::InitializeRequest(_))
                && request.request.get_meta().protocol_version().is_none() =>
        {
            serde_json::to_value(&request.id).ok()
        }
        _ => None,
    }
}

/// Whether `headers` declare a JSON body, as rmcp checks it: the media type of `Content-Type`,
/// without its parameters, is `application/json`.
fn declares_json(headers: &http::HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| {
            let essence = value.split_once(';').map_or(value, |(essence, _)| essence);
            essence.trim().eq_ignore_ascii_case("application/json")
        })
}

/// The answer to a `POST` whose body is not a JSON-RPC message: `400` and a JSON-RPC error,
/// `-32700` when the body is not JSON at all and `-32600` when it is JSON of another shape (a
/// batch, a bare value, an id that is an object), as the MCP transport asks. The error has no
/// `id` member: none could be read, and MCP's error responses omit it then (a request id is a
/// string or a number, never `null`), as rmcp's own do.
fn malformed(body: &[u8]) -> Answer {
    let (code, message) = match serde_json::from_slice::<serde::de::IgnoredAny>(body) {
        Err(e) => (-32700, format!("Parse error: the body is not JSON ({e})")),
        Ok(_) => (
            -32600,
            "Invalid Request: the body is not one JSON-RPC message".to_owned(),
        ),
    };
    let error = serde_json::json!({
        "jsonrpc": "2.0",
        "error": {"code": code, "message": message},
    });
    json_answer(StatusCode::BAD_REQUEST, &error)
}

/// A JSON answer with `status`.
fn json_answer(status: StatusCode, body: &serde_json::Value) -> Answer {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}

/// rmcp's service never fails: its errors are answers.
fn unwrap_infallible(answer: Result<Answer, Infallible>) -> Answer {
    match answer {
        Ok(answer) => answer,
        Err(never) => match never {},
    }
}

/// The answer to a request whose body did not arrive whole in time.
fn too_slow() -> Answer {
    plain(
        StatusCode::REQUEST_TIMEOUT,
        "the request body did not arrive in time\n",
    )
}

/// A plain-text answer with `status`.
fn plain(status: StatusCode, text: &'static str) -> Answer {
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    *response.status_mut() = status;
    response
}

/// The answer to a request without the right bearer token.
fn unauthorized() -> Answer {
    let mut response = plain(StatusCode::UNAUTHORIZED, "a bearer token is required\n");
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer"),
    );
    response
}
