//! The connector under the pooled client: the one place a name is resolved, its addresses
//! checked, and a connection (and TLS session) made — only to the addresses that were checked.

use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use capability_types::backend::{HostMatch, HostPolicy};
use capability_types::{CapabilityError, DenialCode};
use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use crate::addr::restricted;
use crate::resolver::Resolver;

/// Why a connection was not made.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConnectError {
    /// The policy refused the host or every address it resolved to.
    #[error(transparent)]
    Policy(CapabilityError),
    /// Name resolution, TCP or TLS failed.
    #[error("{0}")]
    Failed(String),
    /// The connection did not complete in time.
    #[error("connecting to {0} timed out")]
    Timeout(String),
}

/// A plain or TLS connection.
pub(crate) enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl Connection for Stream {
    fn connected(&self) -> Connected {
        Connected::new()
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// Resolves once, filters the addresses through the policy, connects to a checked address.
#[derive(Clone)]
pub(crate) struct PolicyConnector {
    pub(crate) hosts: Arc<dyn HostPolicy>,
    pub(crate) resolver: Arc<dyn Resolver>,
    pub(crate) tls: TlsConnector,
    pub(crate) connect_timeout: Duration,
}

impl tower_service::Service<http::Uri> for PolicyConnector {
    type Response = TokioIo<Stream>;
    type Error = ConnectError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let this = self.clone();
        Box::pin(async move { this.connect(uri).await.map(TokioIo::new) })
    }
}

/// Checks `host:port` against `hosts`, resolves it once, keeps the addresses the match allows
/// (an explicitly named host may reach restricted address classes, a wildcard match may not) and
/// connects to the first that answers. Shared by the fetcher and the egress proxy.
pub(crate) async fn connect_checked(
    hosts: &dyn HostPolicy,
    resolver: &dyn Resolver,
    host: &str,
    port: u16,
    connect_timeout: Duration,
) -> Result<TcpStream, ConnectError> {
    let how = hosts.check(host, port).map_err(ConnectError::Policy)?;
    let candidates: Vec<IpAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![ip],
        Err(_) => tokio::time::timeout(connect_timeout, resolver.resolve(host, port))
            .await
            .map_err(|_| ConnectError::Timeout(host.to_owned()))?
            .map_err(|e| ConnectError::Failed(format!("cannot resolve {host}: {e}")))?,
    };
    let allowed: Vec<IpAddr> = match how {
        HostMatch::Explicit => candidates.clone(),
        HostMatch::Wildcard => candidates
            .iter()
            .copied()
            .filter(|ip| restricted(*ip).is_none())
            .collect(),
    };
    if allowed.is_empty() {
        return Err(match candidates.first() {
            Some(ip) => denied(format!(
                "{host} resolves to {} ({ip}), which a host matched by a wildcard may not reach, nor any host under restricted_addresses = \"never\"",
                restricted(*ip).unwrap_or("a refused address")
            )),
            None => ConnectError::Failed(format!("{host} resolved to no address")),
        });
    }
    let mut last_error = None;
    for ip in allowed {
        let addr = SocketAddr::new(ip, port);
        match tokio::time::timeout(connect_timeout, TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => {
                // What is written goes out at once: a request's head and body, or what a tunnel
                // relays, written apart, would otherwise wait for the server's acknowledgement,
                // which it delays by up to 40 ms (docs/decisions.md, "The egress proxy").
                if let Err(e) = stream.set_nodelay(true) {
                    tracing::debug!(target: "toolcap::fetch", error = %e, "cannot turn Nagle's algorithm off");
                }
                return Ok(stream);
            }
            Ok(Err(e)) => {
                last_error = Some(ConnectError::Failed(format!(
                    "cannot connect to {host} ({addr}): {e}"
                )))
            }
            Err(_) => last_error = Some(ConnectError::Timeout(format!("{host} ({addr})"))),
        }
    }
    Err(last_error.unwrap_or_else(|| ConnectError::Failed(format!("cannot connect to {host}"))))
}

fn denied(message: String) -> ConnectError {
    ConnectError::Policy(CapabilityError::denied(DenialCode::HostNotAllowed, message))
}

impl PolicyConnector {
    async fn connect(self, uri: http::Uri) -> Result<Stream, ConnectError> {
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            other => return Err(denied(format!("scheme {other:?} is not http or https"))),
        };
        let raw_host = uri
            .host()
            .ok_or_else(|| denied("the URL has no host".to_owned()))?;
        let host = raw_host.trim_start_matches('[').trim_end_matches(']');
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        // Checked again here: a pooled client connects lazily, and this is the last point
        // before a socket exists.
        let tcp = connect_checked(
            &*self.hosts,
            &*self.resolver,
            host,
            port,
            self.connect_timeout,
        )
        .await?;
        let _ = tcp.set_nodelay(true);
        if !https {
            return Ok(Stream::Plain(tcp));
        }
        let name = rustls::pki_types::ServerName::try_from(host.to_owned())
            .map_err(|_| ConnectError::Failed(format!("{host} is not a valid TLS server name")))?;
        let tls = tokio::time::timeout(self.connect_timeout, self.tls.connect(name, tcp))
            .await
            .map_err(|_| ConnectError::Timeout(format!("TLS with {host}")))?
            .map_err(|e| ConnectError::Failed(format!("TLS with {host} failed: {e}")))?;
        Ok(Stream::Tls(Box::new(tls)))
    }
}
