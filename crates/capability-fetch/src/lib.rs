//! The HTTP backend for toolcap: a [`ScopedFetch`] that reaches only the hosts a tool's
//! resolved scope allows.
//!
//! What every request goes through (docs/semantics.md, "Fetch"):
//!
//! - the URL is parsed with the WHATWG parser; only `http` and `https`, never user-info;
//! - the host is checked against the tool's [`HostPolicy`] *before* any connection, so a refused
//!   host is never contacted; a caller's `Host` header is dropped (it follows the URL);
//! - a name is resolved **once**, and the connection goes to one of the addresses that were
//!   checked, so there is no window for DNS rebinding. Loopback, private, link-local (cloud
//!   metadata), CGNAT, multicast and reserved addresses are refused unless the resolved scope
//!   names that host or address explicitly;
//! - every redirect hop (at most [`FetchConfig::max_redirects`], default 10) is checked again,
//!   and `Authorization`, `Cookie` and `Proxy-Authorization` are dropped when a redirect leaves
//!   the origin;
//! - response bodies are capped ([`FetchConfig::max_body`], default 10 MiB); connecting and the
//!   whole request each have a timeout.
//!
//! HTTPS uses rustls (ring) with Mozilla's root store from `webpki-roots`, plus any roots added
//! with [`FetchConfig::add_root_certificate`]; there is no other TLS stack. HTTP/1.1 only.
//!
//! ```
//! use std::sync::Arc;
//! use capability_core::CapabilityBackends;
//! use capability_fetch::{FetchBackend, FetchConfig};
//!
//! let backends = CapabilityBackends::new().with_fetch(Arc::new(FetchBackend::new(FetchConfig::default()).unwrap()));
//! # let _ = backends;
//! ```
#![deny(missing_docs)]

mod addr;
mod connect;
mod egress;
mod resolver;
mod retry;
mod scoped;
mod sni;
mod tunnel;

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use capability_types::backend::{FetchFactory, HostPolicy, NetworkGrant};
use capability_types::{CapabilityError, ScopedFetch};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rustls::pki_types::CertificateDer;

use crate::connect::PolicyConnector;

/// The headers that steer one connection rather than the request (RFC 9110, "Connection"): a
/// client sets them for its own hop, and neither the scoped fetch nor the egress proxy passes on
/// a caller's (docs/semantics.md, "Fetch").
pub(crate) const CONNECTION_HEADERS: [&str; 5] =
    ["connection", "keep-alive", "te", "trailer", "upgrade"];
pub use crate::egress::{EGRESS_MAX_CONNECTIONS, EgressProxy};
pub use crate::resolver::{Resolution, Resolver, StaticResolver, SystemResolver};

/// Why the address `ip` may not be reached through a wildcard pattern (loopback, private,
/// link-local, this network, multicast, reserved, and IPv4 inside IPv6), or `None` for a public
/// address. The fetcher applies it to every address a wildcard-matched name resolves to; `toolcap
/// explain` applies it to an address written in the URL, which needs no resolution to decide.
///
/// ```
/// use capability_fetch::address_refusal;
/// assert!(address_refusal("0.0.0.0".parse().unwrap()).is_some());
/// assert!(address_refusal("169.254.169.254".parse().unwrap()).is_some());
/// assert!(address_refusal("1.1.1.1".parse().unwrap()).is_none());
/// ```
pub fn address_refusal(ip: std::net::IpAddr) -> Option<&'static str> {
    crate::addr::restricted(ip)
}

/// The URL a fetch of `text` would request, or the refusal the fetcher gives before any host is
/// looked at: not an absolute URL or no host (`input_invalid`), a scheme other than `http` and
/// `https`, or user-info (`HOST_NOT_ALLOWED`). The fetcher itself checks every request and
/// every redirect hop with this function; `toolcap explain` asks it too.
///
/// ```
/// use capability_fetch::check_url;
/// assert_eq!(check_url("https://api.github.com/zen").unwrap().host_str(), Some("api.github.com"));
/// assert!(check_url("file:///etc/passwd").unwrap_err().to_string().starts_with("HOST_NOT_ALLOWED"));
/// assert!(check_url("https://user:pw@api.github.com/").is_err());
/// ```
pub fn check_url(text: &str) -> Result<url::Url, CapabilityError> {
    crate::scoped::parse_url(text)
}
use crate::scoped::HttpClient;
pub use crate::scoped::ScopedHttp;

/// Settings of the fetch backend.
#[derive(Clone)]
#[non_exhaustive]
pub struct FetchConfig {
    /// Response bodies larger than this fail (default 10 MiB).
    pub max_body: usize,
    /// Name resolution, TCP connect and TLS handshake, each (default 10 s).
    pub connect_timeout: Duration,
    /// The whole request, redirects included (default 30 s).
    pub total_timeout: Duration,
    /// Redirect hops followed (default 10).
    pub max_redirects: usize,
    /// Trust Mozilla's root store (default true).
    pub mozilla_roots: bool,
    /// Extra trusted roots (DER).
    pub extra_roots: Vec<CertificateDer<'static>>,
    /// Where host names are resolved (default: the system's resolver).
    pub resolver: Arc<dyn Resolver>,
}

impl Default for FetchConfig {
    fn default() -> Self {
        Self {
            max_body: 10 * 1024 * 1024,
            connect_timeout: Duration::from_secs(10),
            total_timeout: Duration::from_secs(30),
            max_redirects: 10,
            mozilla_roots: true,
            extra_roots: Vec::new(),
            resolver: Arc::new(SystemResolver),
        }
    }
}

impl FetchConfig {
    /// Sets the body cap.
    pub fn max_body(mut self, bytes: usize) -> Self {
        self.max_body = bytes;
        self
    }
    /// Sets the connect timeout.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }
    /// Sets the whole-request timeout.
    pub fn total_timeout(mut self, timeout: Duration) -> Self {
        self.total_timeout = timeout;
        self
    }
    /// Sets the redirect limit.
    pub fn max_redirects(mut self, hops: usize) -> Self {
        self.max_redirects = hops;
        self
    }
    /// Trusts `der` as a root certificate too.
    pub fn add_root_certificate(mut self, der: Vec<u8>) -> Self {
        self.extra_roots.push(CertificateDer::from(der));
        self
    }
    /// Whether Mozilla's root store is trusted.
    pub fn mozilla_roots(mut self, on: bool) -> Self {
        self.mozilla_roots = on;
        self
    }
    /// Resolves host names with `resolver` instead of the system's (tests map names to
    /// loopback servers with a [`StaticResolver`]). The answers are checked like the
    /// system's: a resolver cannot widen what a tool may reach.
    pub fn resolver(mut self, resolver: impl Resolver) -> Self {
        self.resolver = Arc::new(resolver);
        self
    }
}

impl fmt::Debug for FetchConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FetchConfig")
            .field("max_body", &self.max_body)
            .field("connect_timeout", &self.connect_timeout)
            .field("total_timeout", &self.total_timeout)
            .field("max_redirects", &self.max_redirects)
            .field("mozilla_roots", &self.mozilla_roots)
            .field("extra_roots", &self.extra_roots.len())
            .finish()
    }
}

/// Builds a [`ScopedHttp`] per tool. Keeps one pooled client per resolved host set, so calls of
/// the same tool under the same personality reuse connections; a connection is never shared
/// between host sets.
#[derive(Clone)]
pub struct FetchBackend {
    config: Arc<FetchConfig>,
    tls: tokio_rustls::TlsConnector,
    clients: Arc<Mutex<HashMap<usize, PooledClient>>>,
}

/// A client and the host set it was built for (held, so its address is never reused as a key).
type PooledClient = (Arc<dyn HostPolicy>, HttpClient);

impl fmt::Debug for FetchBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FetchBackend")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl FetchBackend {
    const MAX_CLIENTS: usize = 256;

    /// A backend with `config`. Fails when a configured root certificate is invalid or no root
    /// is trusted at all.
    pub fn new(config: FetchConfig) -> Result<Self, CapabilityError> {
        let mut roots = rustls::RootCertStore::empty();
        if config.mozilla_roots {
            roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        }
        for der in &config.extra_roots {
            roots.add(der.clone()).map_err(|e| {
                CapabilityError::invalid_input(format!("invalid root certificate: {e}"))
            })?;
        }
        if roots.is_empty() {
            return Err(CapabilityError::invalid_input(
                "no trusted root certificates: HTTPS could reach nothing",
            ));
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| CapabilityError::failed(format!("TLS setup: {e}")))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Self {
            config: Arc::new(config),
            tls: tokio_rustls::TlsConnector::from(Arc::new(tls)),
            clients: Arc::default(),
        })
    }

    fn client_for(&self, hosts: &Arc<dyn HostPolicy>) -> HttpClient {
        // Keyed by the policy object itself; the entry holds it, so the address is never reused.
        let key = Arc::as_ptr(hosts).cast::<()>() as usize;
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, client)) = clients.get(&key) {
            return client.clone();
        }
        if clients.len() >= Self::MAX_CLIENTS {
            clients.clear();
        }
        let connector = PolicyConnector {
            hosts: Arc::clone(hosts),
            resolver: Arc::clone(&self.config.resolver),
            tls: self.tls.clone(),
            connect_timeout: self.config.connect_timeout,
        };
        let client: HttpClient = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build(connector);
        clients.insert(key, (Arc::clone(hosts), client.clone()));
        client
    }
}

impl FetchFactory for FetchBackend {
    fn scoped_fetch(&self, grant: NetworkGrant) -> Result<Arc<dyn ScopedFetch>, CapabilityError> {
        let client = self.client_for(&grant.hosts);
        Ok(Arc::new(ScopedHttp::new(
            grant.tool,
            grant.hosts,
            client,
            Arc::clone(&self.config),
        )))
    }
}
