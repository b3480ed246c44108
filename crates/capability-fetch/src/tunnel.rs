//! What the egress proxy checks inside a CONNECT tunnel: the name a TLS client asks for, and
//! each plain HTTP request's site, so that an address that serves many names is asked only for
//! allowed ones (docs/isolation-model.md, "The egress proxy reads what a tunnel opens with").
//!
//! A tunnel whose first line is an HTTP request ([`Opening::Http`](crate::sni::Opening)) is not
//! relayed as bytes: the proxy serves it as HTTP/1, checks each request's `Host` and
//! absolute-form target, and sends the request on over the tunnel's one upstream connection as
//! hyper writes it, so what the server parses is what was checked.

use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use capability_types::backend::{HostMatch, HostPolicy};
use capability_types::{CapabilityError, DenialCode};
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::sync::Mutex;

use crate::addr::restricted;
use crate::egress::{Body, for_the_server, full};

/// Whether a server at an allowed address may be asked for `name` on `port`, the name a TLS
/// client or an HTTP request inside a tunnel gives: the tool's host policy must allow it, and a
/// name it allows only through a wildcard may not be one that stands for a restricted address
/// (an address literal of a restricted class, or `localhost`), which a front may serve to
/// itself. The reason, when not.
pub(crate) fn name_allowed(hosts: &dyn HostPolicy, name: &str, port: u16) -> Result<(), String> {
    let how = hosts.check(name, port).map_err(|e| e.to_string())?;
    if how == HostMatch::Wildcard {
        let bare = name.trim_start_matches('[').trim_end_matches(']');
        let lower = bare.trim_end_matches('.').to_ascii_lowercase();
        let why = match bare.parse::<IpAddr>() {
            Ok(ip) => restricted(ip),
            Err(_) if lower == "localhost" || lower.ends_with(".localhost") => {
                Some("a loopback name")
            }
            Err(_) => None,
        };
        if let Some(why) = why {
            let message =
                format!("{name} is {why}, which a host matched by a wildcard may not ask for");
            return Err(CapabilityError::denied(DenialCode::HostNotAllowed, message).to_string());
        }
    }
    Ok(())
}

/// Waits for whichever side of a tunnel speaks first: the child (its first bytes read onto
/// `first`, `true`) or the server (`false`; nothing read). A server that speaks first (SMTP,
/// FTP, a database's greeting) is no TLS or HTTP server, which wait for their client, so it
/// picks no site by a name the child sends, and the tunnel is relayed as it is; a proxy that
/// waited for the child here left such a server's greeting unrelayed and both sides waiting.
pub(crate) async fn child_speaks_first<C: AsyncRead + Unpin>(
    client: &mut C,
    upstream: &tokio::net::TcpStream,
    first: &mut Vec<u8>,
) -> io::Result<bool> {
    first.reserve(4096);
    let mut read = std::pin::pin!(client.read_buf(first));
    let mut ready = std::pin::pin!(upstream.readable());
    std::future::poll_fn(|cx| {
        if let Poll::Ready(read) = read.as_mut().poll(cx) {
            return Poll::Ready(read.map(|_| true));
        }
        ready.as_mut().poll(cx).map(|ready| ready.map(|()| false))
    })
    .await
}

/// Bytes already read from a stream, handed out again before the stream's own.
pub(crate) struct Prefixed<T> {
    head: Vec<u8>,
    at: usize,
    inner: T,
}

impl<T> Prefixed<T> {
    pub(crate) fn new(head: Vec<u8>, inner: T) -> Self {
        Self { head, at: 0, inner }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Prefixed<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.at < this.head.len() {
            let n = buf.remaining().min(this.head.len() - this.at);
            buf.put_slice(&this.head[this.at..this.at + n]);
            this.at += n;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Prefixed<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// A refusal of one request inside a tunnel, and what it names.
pub(crate) struct Refused {
    pub(crate) name: String,
    pub(crate) port: u16,
    pub(crate) why: String,
}

/// Serves the plain HTTP a tunnel carries (`client`, with what was read of it first) until
/// either side ends or a request is refused: each request is relayed over `upstream` (the
/// connection to the tunnel's target, `port`) only if the names it gives are allowed by
/// `hosts`. `refused` is told of each refusal (for the audit).
pub(crate) async fn serve_http<C, U>(
    client: C,
    upstream: U,
    hosts: Arc<dyn HostPolicy>,
    port: u16,
    refused: impl Fn(Refused) + Send + Sync + 'static,
) where
    C: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    U: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let Ok((sender, conn)) = hyper::client::conn::http1::handshake(TokioIo::new(upstream)).await
    else {
        return;
    };
    let sender = Arc::new(Mutex::new(sender));
    let refused = Arc::new(refused);
    let service = service_fn(move |req: Request<Incoming>| {
        let (sender, hosts, refused) = (
            Arc::clone(&sender),
            Arc::clone(&hosts),
            Arc::clone(&refused),
        );
        async move {
            let response = match check(&req, &*hosts, port) {
                Err(refusal) => {
                    let text = refusal.why.clone();
                    refused(refusal);
                    closing(full(StatusCode::FORBIDDEN, text))
                }
                Ok(()) => relay(req, &sender).await,
            };
            Ok::<_, std::convert::Infallible>(response)
        }
    });
    let server = hyper::server::conn::http1::Builder::new()
        // A client may shut its side once its request is written and still wait for the
        // answer, as it could through the bytes relayed before.
        .half_close(true)
        .serve_connection(TokioIo::new(client), service);
    // The upstream connection is driven beside the server, in this task: the server first (a
    // request it reads goes out when the connection is polled next, in the same pass), then the
    // connection, then the server again (an answer the connection read is written at once). When
    // the connection ends (the server closed it, as a server closes an idle kept-alive one), the
    // answer it brought is still written to the child and then the tunnel ends, as the relayed
    // bytes ended, so the child's client sends its next request on a new connection; a request
    // already on its way is answered `502`.
    let (mut server, mut conn) = (std::pin::pin!(server), std::pin::pin!(conn));
    let mut upstream_open = true;
    std::future::poll_fn(|cx| {
        if server.as_mut().poll(cx).is_ready() {
            return Poll::Ready(());
        }
        if upstream_open && conn.as_mut().poll(cx).is_ready() {
            upstream_open = false;
            server.as_mut().graceful_shutdown();
        }
        server.as_mut().poll(cx).map(drop)
    })
    .await;
}

/// The names a request inside a tunnel gives a server to route by (its absolute-form target's
/// authority, and its `Host`), each checked; `port` is the tunnel's, for a name given without
/// one.
fn check(req: &Request<Incoming>, hosts: &dyn HostPolicy, port: u16) -> Result<(), Refused> {
    let refuse = |name: &str, at: u16, why: String| Refused {
        name: name.to_owned(),
        port: at,
        why,
    };
    if req.method() == Method::CONNECT {
        return Err(refuse("", port, "a CONNECT inside a tunnel".to_owned()));
    }
    let mut hosts_given = req.headers().get_all(header::HOST).iter();
    let host = hosts_given.next();
    if hosts_given.next().is_some() {
        return Err(refuse(
            "",
            port,
            "a request with two Host headers".to_owned(),
        ));
    }
    let host = match host {
        None => None,
        Some(value) => Some(
            value
                .to_str()
                .ok()
                .and_then(|v| v.parse::<http::uri::Authority>().ok())
                .filter(|a| !a.as_str().contains('@'))
                .ok_or_else(|| refuse("", port, "a Host header that names no host".to_owned()))?,
        ),
    };
    for authority in req.uri().authority().into_iter().chain(host.as_ref()) {
        let at = authority.port_u16().unwrap_or(port);
        let name = authority.host();
        name_allowed(
            hosts,
            name.trim_start_matches('[').trim_end_matches(']'),
            at,
        )
        .map_err(|why| refuse(name, at, why))?;
    }
    Ok(())
}

/// Sends `req` on over the tunnel's upstream connection, in origin form, without the headers
/// that belong to the hop to the proxy.
async fn relay(
    mut req: Request<Incoming>,
    sender: &Mutex<hyper::client::conn::http1::SendRequest<Incoming>>,
) -> Response<Body> {
    for_the_server(&mut req);
    let mut sender = sender.lock().await;
    if sender.ready().await.is_err() {
        return closing(full(StatusCode::BAD_GATEWAY, "upstream: closed".to_owned()));
    }
    match sender.send_request(req).await {
        Ok(response) => response.map(BodyExt::boxed),
        Err(e) => closing(full(StatusCode::BAD_GATEWAY, format!("upstream: {e}"))),
    }
}

/// `response`, marked as the last on its connection.
fn closing(mut response: Response<Body>) -> Response<Body> {
    response.headers_mut().insert(
        header::CONNECTION,
        header::HeaderValue::from_static("close"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use capability_core::{CompiledPolicy, PolicyFormat, resolve};
    use capability_types::ToolCapabilities;

    fn hosts(allow: &str) -> Arc<dyn HostPolicy> {
        let policy = CompiledPolicy::load(
            &format!("id = \"p\"\n[safety.network]\nallow = [{allow}]\n"),
            PolicyFormat::Toml,
            None,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let resolved = resolve(
            "t",
            &ToolCapabilities::none().with_network(["*"]),
            &policy,
            "s",
            std::path::Path::new("/"),
        );
        resolved.network.unwrap_or_else(|| panic!("no network"))
    }

    #[test]
    fn a_name_inside_a_tunnel_is_held_to_the_hosts_and_their_address_rules() {
        let any = hosts("\"*\"");
        for name in ["example.com", "api.example.com", "93.184.216.34"] {
            assert_eq!(name_allowed(&*any, name, 80), Ok(()), "{name}");
        }
        // Through a wildcard, no name that stands for a restricted address: a front could serve
        // its own loopback, metadata or private sites to it.
        for name in [
            "localhost",
            "LOCALHOST.",
            "admin.localhost",
            "127.0.0.1",
            "169.254.169.254",
            "10.0.0.1",
            "[::1]",
            "::ffff:127.0.0.1",
        ] {
            let got = name_allowed(&*any, name, 80);
            assert!(
                got.as_ref()
                    .is_err_and(|e| e.starts_with("HOST_NOT_ALLOWED")),
                "{name}: {got:?}"
            );
        }
        // Named exactly, they may be asked for.
        let exact = hosts("\"localhost\", \"127.0.0.1\"");
        assert_eq!(name_allowed(&*exact, "localhost", 80), Ok(()));
        assert_eq!(name_allowed(&*exact, "127.0.0.1", 80), Ok(()));
        // And what the hosts do not allow is refused whatever it is.
        let one = hosts("\"api.example.com:443\"");
        assert!(name_allowed(&*one, "evil.example", 443).is_err());
        assert!(name_allowed(&*one, "api.example.com", 80).is_err());
        assert_eq!(name_allowed(&*one, "API.example.com.", 443), Ok(()));
    }
}
