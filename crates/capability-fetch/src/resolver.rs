//! Where host names are resolved: the system by default, a fixed table in tests
//! (docs/testing.md, "Fetch without the network").
//!
//! Whatever a resolver answers goes through the same checks as the system's answer: the name is
//! resolved once per connection, a wildcard-matched name may not reach loopback, private,
//! link-local or reserved addresses, and the connection goes only to an address that was
//! checked. A resolver can choose addresses; it cannot widen what may be reached.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;

/// The future a [`Resolver`] returns.
pub type Resolution<'a> = Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send + 'a>>;

/// Resolves a host name to addresses. The fetch backend asks it once per connection
/// ([`FetchConfig::resolver`](crate::FetchConfig::resolver)).
pub trait Resolver: Send + Sync + 'static {
    /// The addresses of `host` (a name, never an address literal) for `port`.
    fn resolve<'a>(&'a self, host: &'a str, port: u16) -> Resolution<'a>;
}

/// The operating system's resolver (`getaddrinfo`, through tokio). The default.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

impl Resolver for SystemResolver {
    fn resolve<'a>(&'a self, host: &'a str, port: u16) -> Resolution<'a> {
        Box::pin(async move {
            let mut ips: Vec<IpAddr> = tokio::net::lookup_host((host, port))
                .await?
                .map(|a| a.ip())
                .collect();
            ips.dedup();
            Ok(ips)
        })
    }
}

/// A fixed table from names to addresses, for tests: a name not in the table does not resolve
/// (it never falls through to the system's DNS, so a test cannot reach the network by
/// accident). Names are matched without regard to ASCII case.
///
/// ```
/// use capability_fetch::{FetchConfig, StaticResolver};
/// let resolver = StaticResolver::new().with("api.example.test", [std::net::Ipv4Addr::LOCALHOST.into()]);
/// let config = FetchConfig::default().resolver(resolver);
/// # let _ = config;
/// ```
#[derive(Debug, Clone, Default)]
pub struct StaticResolver {
    table: HashMap<String, Vec<IpAddr>>,
}

impl StaticResolver {
    /// An empty table: nothing resolves.
    pub fn new() -> Self {
        Self::default()
    }

    /// Maps `host` to `addresses` (replacing an earlier entry for it).
    pub fn with(mut self, host: &str, addresses: impl IntoIterator<Item = IpAddr>) -> Self {
        self.table
            .insert(host.to_ascii_lowercase(), addresses.into_iter().collect());
        self
    }
}

impl Resolver for StaticResolver {
    fn resolve<'a>(&'a self, host: &'a str, _port: u16) -> Resolution<'a> {
        let found = self.table.get(&host.to_ascii_lowercase()).cloned();
        Box::pin(async move {
            found.ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("{host} is not in the test resolver's table"),
                )
            })
        })
    }
}
