//! The egress proxy: how a confined child reaches exactly its tool's hosts.
//!
//! A child with egress runs in a network namespace of its own whose loopback has one listening
//! socket; the host accepts on that socket (its descriptor was handed over before the child
//! ran), so nothing in the child's namespace reaches anything but this proxy. For each request
//! the proxy decides on the CONNECT target (HTTPS) or the absolute-form request URI (HTTP) —
//! never on the `Host` header of a request to the proxy — with the tool's own host policy, then
//! resolves once, applies the same address checks as
//! [`ScopedFetch`](capability_types::ScopedFetch) (restricted address classes only for
//! explicitly named hosts) and connects to the checked address. Inside a tunnel, the names a
//! server at that address would route by (a ClientHello's, each plain request's `Host`) must be
//! allowed too ([`crate::sni`], [`crate::tunnel`]). Every decision is an audit event
//! (`toolcap::audit`, `egress_allowed` / `egress_denied`).

use std::convert::Infallible;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use capability_types::CapabilityError;
use capability_types::backend::{EgressFactory, EgressSession, NetworkGrant};
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::AsyncWriteExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::{AbortHandle, JoinSet};

use crate::connect::{ConnectError, connect_checked};
use crate::resolver::SystemResolver;
use crate::retry::{self, Refusal};
use crate::sni::Opening;
use crate::tunnel::{self, Prefixed, Refused, name_allowed};
use crate::{CONNECTION_HEADERS, FetchConfig};

pub(crate) type Body = BoxBody<Bytes, hyper::Error>;

/// How many connections one child's proxy serves at once (docs/isolation-model.md, "Limits").
/// Each costs the host a descriptor (a tunnel, two), and the host's descriptors are shared by
/// every call and guarded server it runs; a connection past the limit waits in the kernel's
/// queue, unanswered, until one of the child's others closes.
pub const EGRESS_MAX_CONNECTIONS: usize = 128;

/// How long the proxy waits after a failed `accept` (the host out of descriptors, say) before
/// it tries again.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// Serves the egress proxy of confined children (an [`EgressFactory`] for
/// `capability-process`).
#[derive(Debug, Clone)]
pub struct EgressProxy {
    connect_timeout: Duration,
}

impl EgressProxy {
    /// A proxy with the connect timeout of `config`.
    pub fn new(config: &FetchConfig) -> Self {
        Self {
            connect_timeout: config.connect_timeout,
        }
    }
}

/// The tasks of one child's proxy; dropping it ends them all (listener, connections, tunnels).
struct Session {
    tasks: Arc<Mutex<Vec<AbortHandle>>>,
}

impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EgressSession").finish_non_exhaustive()
    }
}

impl EgressSession for Session {}

impl Drop for Session {
    fn drop(&mut self) {
        for task in self
            .tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain(..)
        {
            task.abort();
        }
    }
}

impl EgressFactory for EgressProxy {
    fn serve(
        &self,
        grant: NetworkGrant,
        listener: std::net::TcpListener,
    ) -> Result<Box<dyn EgressSession>, CapabilityError> {
        let unavailable =
            |e: std::io::Error| CapabilityError::not_available(format!("egress proxy: {e}"));
        let runtime = tokio::runtime::Handle::try_current().map_err(|e| {
            CapabilityError::not_available(format!("egress proxy: no async runtime: {e}"))
        })?;
        listener.set_nonblocking(true).map_err(unavailable)?;
        let _entered = runtime.enter();
        let listener = tokio::net::TcpListener::from_std(listener).map_err(unavailable)?;
        let tasks = Arc::new(Mutex::new(Vec::new()));
        let proxy = Arc::new(Proxy {
            grant,
            connect_timeout: self.connect_timeout,
            tasks: Arc::clone(&tasks),
        });
        let accept = runtime.spawn(async move {
            let mut connections = JoinSet::new();
            let limit = Arc::new(Semaphore::new(EGRESS_MAX_CONNECTIONS));
            loop {
                // Taken before the accept: past the limit, the child's next connection waits.
                let Ok(permit) = Arc::clone(&limit).acquire_owned().await else {
                    return;
                };
                let stream = match listener.accept().await {
                    Ok((stream, _)) => {
                        // Relayed bytes go on at once (see `connect_checked`).
                        if let Err(e) = stream.set_nodelay(true) {
                            tracing::debug!(target: "toolcap::egress", error = %e, "cannot turn Nagle's algorithm off");
                        }
                        stream
                    }
                    Err(e) => {
                        // The listener stays ready while the cause lasts: at once, this would
                        // spin; ending here would leave the child without its network.
                        tracing::warn!(target: "toolcap::egress", error = %e, "cannot accept a connection; trying again shortly");
                        drop(permit);
                        tokio::time::sleep(ACCEPT_PAUSE).await;
                        continue;
                    }
                };
                // Held by the connection and by a tunnel it hands its socket to.
                let permit = Arc::new(permit);
                let proxy = Arc::clone(&proxy);
                connections.spawn(async move {
                    let service = service_fn(move |req| {
                        let proxy = Arc::clone(&proxy);
                        let permit = Arc::clone(&permit);
                        async move { Ok::<_, Infallible>(proxy.handle(req, permit).await) }
                    });
                    let conn = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .with_upgrades();
                    // No timeout of its own: the session (the child's spawn call, under its
                    // timeout, or a guarded server's life) bounds every connection and tunnel,
                    // and the limit bounds how many there are.
                    let _ = conn.await;
                });
                // Reap finished connections as we go.
                while connections.try_join_next().is_some() {}
            }
        });
        tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(accept.abort_handle());
        Ok(Box::new(Session { tasks }))
    }
}

struct Proxy {
    grant: NetworkGrant,
    connect_timeout: Duration,
    tasks: Arc<Mutex<Vec<AbortHandle>>>,
}

pub(crate) fn full(status: StatusCode, text: String) -> Response<Body> {
    let mut response = Response::new(
        Full::new(Bytes::from(text))
            .map_err(|never: Infallible| match never {})
            .boxed(),
    );
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain"),
    );
    response
}

/// Headers that belong to the hop to the proxy, beside [`CONNECTION_HEADERS`], and are not
/// forwarded.
const PROXY_HEADERS: [&str; 3] = [
    "proxy-connection",
    "proxy-authorization",
    "proxy-authenticate",
];

impl Proxy {
    fn track(&self, task: AbortHandle) {
        let mut tasks = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        tasks.retain(|t| !t.is_finished());
        tasks.push(task);
    }

    fn audit(&self, allowed: bool, via: &str, host: &str, port: u16, reason: Option<&str>) {
        let kind = if allowed {
            "egress_allowed"
        } else {
            "egress_denied"
        };
        tracing::info!(
            target: "toolcap::audit",
            kind,
            tool = %self.grant.tool,
            via,
            host,
            port,
            reason = reason.unwrap_or(""),
            "egress {}",
            if allowed { "allowed" } else { "denied" }
        );
    }

    /// Answers `req`, one of a connection that holds `permit` (one of the limit's).
    async fn handle(
        self: Arc<Self>,
        req: Request<Incoming>,
        permit: Arc<OwnedSemaphorePermit>,
    ) -> Response<Body> {
        if req.method() == Method::CONNECT {
            return self.tunnel(req, permit).await;
        }
        self.forward(req).await
    }

    /// Refuses or reports a failed connection, with the audit event.
    fn refuse(&self, via: &str, host: &str, port: u16, error: ConnectError) -> Response<Body> {
        let (status, text) = match &error {
            ConnectError::Policy(e) => (StatusCode::FORBIDDEN, e.to_string()),
            ConnectError::Failed(_) => (StatusCode::BAD_GATEWAY, error.to_string()),
            ConnectError::Timeout(_) => (StatusCode::GATEWAY_TIMEOUT, error.to_string()),
        };
        self.audit(false, via, host, port, Some(&text));
        full(status, text)
    }

    /// Decides on `authority:port` with the tool's host policy and the fetcher's address
    /// checks, connects to the checked address, and audits the decision either way.
    async fn connect(
        &self,
        via: &str,
        authority: &http::uri::Authority,
        port: u16,
    ) -> Result<tokio::net::TcpStream, Response<Body>> {
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']');
        match connect_checked(
            &*self.grant.hosts,
            &SystemResolver,
            host,
            port,
            self.connect_timeout,
        )
        .await
        {
            Ok(tcp) => {
                self.audit(true, via, host, port, None);
                Ok(tcp)
            }
            Err(e) => Err(self.refuse(via, host, port, e)),
        }
    }

    /// A CONNECT tunnel: it holds `permit` while it lasts, since it takes over the connection.
    /// A tunnel that opens with TLS is forwarded only once its ClientHello is read whole and
    /// the name it asks for (if any) is allowed as well ([`sni`](crate::sni)).
    async fn tunnel(
        self: Arc<Self>,
        req: Request<Incoming>,
        permit: Arc<OwnedSemaphorePermit>,
    ) -> Response<Body> {
        let Some(authority) = req.uri().authority().cloned() else {
            return full(
                StatusCode::BAD_REQUEST,
                "CONNECT needs host:port".to_owned(),
            );
        };
        let Some(port) = authority.port_u16() else {
            return full(StatusCode::BAD_REQUEST, "CONNECT needs a port".to_owned());
        };
        let upstream = match self.connect("connect", &authority, port).await {
            Ok(tcp) => tcp,
            Err(refusal) => return refusal,
        };
        let proxy = Arc::clone(&self);
        let task = tokio::spawn(async move {
            let _permit = permit;
            let mut upstream = upstream;
            let Ok(upgraded) = hyper::upgrade::on(req).await else {
                return;
            };
            let mut client = TokioIo::new(upgraded);
            let mut first = Vec::new();
            match tunnel::child_speaks_first(&mut client, &upstream, &mut first).await {
                Ok(true) => {}
                Ok(false) => {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
                    return;
                }
                Err(_) => return,
            }
            let allowed = |name: &str| name_allowed(&*proxy.grant.hosts, name, port);
            let refusal = match crate::sni::opening(&mut client, &mut first).await {
                Ok(Opening::NotTls) => {
                    if upstream.write_all(&first).await.is_ok() {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
                    }
                    return;
                }
                // The server's answer decides whether another ClientHello follows, which is
                // decided on in turn.
                Ok(Opening::Hello(name)) => {
                    match retry::hello(client, upstream, first, name, allowed).await {
                        Some(refusal) => refusal,
                        None => return,
                    }
                }
                Ok(Opening::TlsRequest) => {
                    match retry::after_tls_request(client, upstream, first, allowed).await {
                        Some(refusal) => refusal,
                        None => return,
                    }
                }
                Ok(Opening::Http) => {
                    // Served as HTTP, each request's names checked, until either side ends.
                    let hosts = Arc::clone(&proxy.grant.hosts);
                    let audit = Arc::clone(&proxy);
                    let refused = move |r: Refused| {
                        audit.audit(false, "tunnel-http", &r.name, r.port, Some(&r.why))
                    };
                    tunnel::serve_http(
                        Prefixed::new(first, client),
                        upstream,
                        hosts,
                        port,
                        refused,
                    )
                    .await;
                    return;
                }
                Err(why) => Refusal { name: None, why },
            };
            // The tunnel ends here: the child sees its connection closed.
            let name = refusal.name.unwrap_or_else(|| authority.host().to_owned());
            proxy.audit(false, "tls", &name, port, Some(&refusal.why));
        });
        self.track(task.abort_handle());
        Response::new(
            Full::new(Bytes::new())
                .map_err(|never| match never {})
                .boxed(),
        )
    }

    async fn forward(&self, mut req: Request<Incoming>) -> Response<Body> {
        let uri = req.uri().clone();
        if uri.scheme_str() != Some("http") {
            let text = if uri.scheme().is_none() {
                "the proxy takes absolute-form http:// requests and CONNECT".to_owned()
            } else {
                format!(
                    "scheme {:?}: use CONNECT for https",
                    uri.scheme_str().unwrap_or_default()
                )
            };
            return full(StatusCode::BAD_REQUEST, text);
        }
        let Some(authority) = uri.authority().cloned() else {
            return full(StatusCode::BAD_REQUEST, "the URI has no host".to_owned());
        };
        let port = authority.port_u16().unwrap_or(80);
        let upstream = match self.connect("http", &authority, port).await {
            Ok(tcp) => tcp,
            Err(refusal) => return refusal,
        };
        let (mut sender, conn) =
            match hyper::client::conn::http1::handshake(TokioIo::new(upstream)).await {
                Ok(pair) => pair,
                Err(e) => return full(StatusCode::BAD_GATEWAY, format!("upstream: {e}")),
            };
        let task = tokio::spawn(async move {
            let _ = conn.await;
        });
        self.track(task.abort_handle());
        // Origin-form to the server, with the Host the decision was made on.
        for_the_server(&mut req);
        if let Ok(value) = header::HeaderValue::from_str(authority.as_str()) {
            req.headers_mut().insert(header::HOST, value);
        }
        match sender.send_request(req).await {
            Ok(response) => response.map(BodyExt::boxed),
            Err(e) => full(StatusCode::BAD_GATEWAY, format!("upstream: {e}")),
        }
    }
}

/// `req` as it goes on to the server: its target in origin form, without the headers that
/// belong to the hop to the proxy.
pub(crate) fn for_the_server<B>(req: &mut Request<B>) {
    let origin = req
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .parse()
        .unwrap_or_else(|_| http::Uri::from_static("/"));
    *req.uri_mut() = origin;
    let headers = req.headers_mut();
    for name in CONNECTION_HEADERS.iter().chain(&PROXY_HEADERS) {
        headers.remove(*name);
    }
}
