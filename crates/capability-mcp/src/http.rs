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
use std::sync::Arc;

use bytes::Bytes;
use http::{Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt as _, Full};
// toolcap: allow(hyper_util::rt::TokioIo, reason = "the MCP endpoint this crate serves (its listening socket and connections), not a tool's reach")
use hyper_util::rt::TokioIo;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use sha2::{Digest as _, Sha256};
// toolcap: allow(tokio::net::TcpListener, reason = "the MCP endpoint this crate serves (its listening socket and connections), not a tool's reach")
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::McpServer;

/// The largest request body accepted (larger gets `413 Payload Too Large`).
pub const MAX_REQUEST_BYTES: usize = 4 * 1024 * 1024;

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
}

impl HttpOptions {
    /// Loopback only, on `bind`, open to every process on the machine.
    pub fn loopback(bind: SocketAddr) -> Self {
        Self {
            bind,
            remote: None,
            allowed_origins: Vec::new(),
            token: None,
        }
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
    stop: CancellationToken,
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
        let service = StreamableHttpService::new(
            move || Ok(server.session()),
            Arc::new(LocalSessionManager::default()),
            config,
        );
        let token = match options.remote {
            Some(remote) => Some(remote.token),
            None => options.token,
        };
        Ok(HttpServer {
            listener,
            service,
            token: token.map(Arc::new),
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
    pub async fn run(self) {
        let Self {
            listener,
            service,
            token,
            stop,
        } = self;
        loop {
            let accepted = tokio::select! {
                () = stop.cancelled() => return,
                accepted = listener.accept() => accepted,
            };
            let Ok((stream, _)) = accepted else {
                continue;
            };
            let service = service.clone();
            let token = token.clone();
            let stop = stop.clone();
            tokio::spawn(async move {
                // toolcap: allow(hyper::service::service_fn, reason = "the MCP endpoint this crate serves (its listening socket and connections), not a tool's reach")
                let handler = hyper::service::service_fn(move |request| {
                    let mut service = service.clone();
                    let token = token.clone();
                    async move {
                        if let Some(token) = &token
                            && !token.admits(request.headers().get(header::AUTHORIZATION))
                        {
                            return Ok::<_, Infallible>(unauthorized());
                        }
                        tower_service::Service::call(&mut service, request).await
                    }
                });
                // toolcap: allow(hyper::server::conn::http1::Builder::new, reason = "the MCP endpoint this crate serves (its listening socket and connections), not a tool's reach")
                let connection = hyper::server::conn::http1::Builder::new()
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

fn unauthorized() -> Response<BoxBody<Bytes, Infallible>> {
    let mut response =
        Response::new(Full::new(Bytes::from_static(b"a bearer token is required\n")).boxed());
    *response.status_mut() = StatusCode::UNAUTHORIZED;
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer"),
    );
    response
}
