//! `ScopedHttp`: one tool's HTTP(S), with every hop of a redirect chain checked.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use capability_types::backend::HostPolicy;
use capability_types::{CapabilityError, DenialCode, ScopedFetch};
use http::header::{
    AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, COOKIE, EXPECT, HOST, HeaderName, LOCATION,
    PROXY_AUTHORIZATION, TRANSFER_ENCODING, USER_AGENT,
};
use http::{HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::Client;
use url::Url;

use crate::connect::{ConnectError, PolicyConnector};
use crate::{CONNECTION_HEADERS, FetchConfig};

pub(crate) type HttpClient = Client<PolicyConnector, Full<Bytes>>;

/// The HTTP(S) view of one tool, confined to its resolved host set.
pub struct ScopedHttp {
    tool: String,
    hosts: Arc<dyn HostPolicy>,
    client: HttpClient,
    config: Arc<FetchConfig>,
}

impl fmt::Debug for ScopedHttp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScopedHttp")
            .field("tool", &self.tool)
            .field("hosts", &self.hosts.patterns())
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

fn refuse(message: String) -> CapabilityError {
    CapabilityError::denied(DenialCode::HostNotAllowed, message)
}

/// A URL as a fetch's errors show it: its origin alone. Its path, query and fragment often
/// carry what a tool put there (a webhook's token in the path, an API key in the query, a
/// presigned URL's signature after a redirect), and an error goes to the model and the audit
/// log (docs/decisions.md, "capability-fetch").
fn shown(url: &Url) -> String {
    url.origin().ascii_serialization()
}

/// [`shown`] for a URL that is text: its scheme and authority, as far as they can be told
/// apart (a URL that does not parse is shown up to its query or fragment: it is the caller's
/// own, and what is wrong with it may lie anywhere before those).
fn shown_text(text: &str) -> String {
    match Url::parse(text) {
        Ok(url) => shown(&url),
        Err(_) => text.split(['?', '#']).next().unwrap_or_default().to_owned(),
    }
}

/// Parses with the WHATWG parser and refuses what may never be fetched.
pub(crate) fn parse_url(text: &str) -> Result<Url, CapabilityError> {
    let url = Url::parse(text).map_err(|e| {
        CapabilityError::invalid_input(format!(
            "{:?} is not an absolute URL: {e}",
            shown_text(text)
        ))
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(refuse(format!(
            "{}: only http and https URLs may be fetched",
            url.scheme()
        )));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(refuse("URLs with user-info are refused".to_owned()));
    }
    if url.host_str().is_none() {
        return Err(CapabilityError::invalid_input(format!(
            "{text:?} has no host"
        )));
    }
    Ok(url)
}

/// The headers that frame a request, which the client sets and a caller may not, beside
/// [`CONNECTION_HEADERS`] (docs/semantics.md, "Fetch"): the body goes with its own length, and a
/// caller's `Content-Length` once cut it short, or, with no body, left the server waiting for
/// bytes the connection's next request would have supplied. `Host` follows the URL.
const FRAMING_HEADERS: [HeaderName; 4] = [HOST, CONTENT_LENGTH, TRANSFER_ENCODING, EXPECT];

/// Credentials never follow a redirect to another origin.
const CREDENTIAL_HEADERS: [http::header::HeaderName; 3] =
    [AUTHORIZATION, COOKIE, PROXY_AUTHORIZATION];

impl ScopedHttp {
    pub(crate) fn new(
        tool: String,
        hosts: Arc<dyn HostPolicy>,
        client: HttpClient,
        config: Arc<FetchConfig>,
    ) -> Self {
        Self {
            tool,
            hosts,
            client,
            config,
        }
    }

    fn check(&self, url: &Url) -> Result<(), CapabilityError> {
        let host = url.host_str().unwrap_or_default();
        let port = url.port_or_known_default().unwrap_or(80);
        self.hosts.check(host, port).map(drop)
    }

    async fn fetch_hops(
        &self,
        request: Request<Bytes>,
    ) -> Result<Response<Bytes>, CapabilityError> {
        let (parts, mut body) = request.into_parts();
        let mut url = parse_url(&parts.uri.to_string())?;
        let mut method = parts.method;
        let mut headers = parts.headers;
        // The Host header follows the URL (a caller cannot aim it elsewhere), and the framing
        // and the connection are the client's.
        for name in &FRAMING_HEADERS {
            headers.remove(name);
        }
        for name in CONNECTION_HEADERS {
            headers.remove(name);
        }
        if !headers.contains_key(USER_AGENT) {
            headers.insert(
                USER_AGENT,
                HeaderValue::from_static(concat!("toolcap/", env!("CARGO_PKG_VERSION"))),
            );
        }
        for hop in 0..=self.config.max_redirects {
            // Before any connection: a refused host is never contacted.
            self.check(&url)?;
            let uri: http::Uri = url
                .as_str()
                .parse()
                .map_err(|e| CapabilityError::invalid_input(format!("{}: {e}", shown(&url))))?;
            let mut request = Request::new(Full::new(body.clone()));
            *request.method_mut() = method.clone();
            *request.uri_mut() = uri;
            *request.headers_mut() = headers.clone();
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| client_error(&e, &url))?;

            let status = response.status();
            let location = response.headers().get(LOCATION).cloned();
            if let (true, Some(location)) = (status.is_redirection(), location) {
                if hop == self.config.max_redirects {
                    return Err(CapabilityError::failed(format!(
                        "more than {} redirects, starting from {}",
                        self.config.max_redirects,
                        shown_text(&parts.uri.to_string())
                    )));
                }
                let location = location.to_str().map_err(|_| {
                    CapabilityError::failed(format!(
                        "{} redirected with a Location that is not text",
                        shown(&url)
                    ))
                })?;
                let next = url.join(location).map_err(|e| {
                    CapabilityError::failed(format!(
                        "{} redirected to an invalid URL: {e}",
                        shown(&url)
                    ))
                })?;
                let next = parse_url(next.as_str())?;
                if next.origin() != url.origin() {
                    for name in &CREDENTIAL_HEADERS {
                        headers.remove(name);
                    }
                }
                let to_get = status == StatusCode::SEE_OTHER && method != Method::HEAD
                    || matches!(status, StatusCode::MOVED_PERMANENTLY | StatusCode::FOUND)
                        && method == Method::POST;
                if to_get {
                    method = Method::GET;
                    body = Bytes::new();
                    for name in [CONTENT_LENGTH, CONTENT_TYPE, TRANSFER_ENCODING] {
                        headers.remove(name);
                    }
                }
                url = next;
                continue;
            }

            let (parts, incoming) = response.into_parts();
            let cap = self.config.max_body;
            let collected = Limited::new(incoming, cap).collect().await.map_err(|e| {
                if e.is::<http_body_util::LengthLimitError>() {
                    CapabilityError::failed(format!(
                        "the response body of {} exceeds the {cap} byte limit",
                        shown(&url)
                    ))
                } else {
                    CapabilityError::failed(format!("reading the response of {}: {e}", shown(&url)))
                }
            })?;
            return Ok(Response::from_parts(parts, collected.to_bytes()));
        }
        Err(CapabilityError::failed(
            "redirect loop ended without a response",
        ))
    }
}

/// Finds the connector's own error in the client's error chain.
fn client_error(e: &hyper_util::client::legacy::Error, url: &Url) -> CapabilityError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if let Some(connect) = err.downcast_ref::<ConnectError>() {
            return match connect {
                ConnectError::Policy(denial) => denial.clone(),
                ConnectError::Timeout(what) => {
                    CapabilityError::Timeout(format!("connecting to {what} timed out"))
                }
                ConnectError::Failed(message) => CapabilityError::failed(message.clone()),
            };
        }
        source = err.source();
    }
    CapabilityError::failed(format!(
        "request to {} failed: {e}",
        url.host_str().unwrap_or_default()
    ))
}

#[async_trait]
impl ScopedFetch for ScopedHttp {
    async fn fetch(&self, request: Request<Bytes>) -> Result<Response<Bytes>, CapabilityError> {
        // The target is written out only when the message needs it.
        let target = request.uri().clone();
        let total = self.config.total_timeout;
        tokio::time::timeout(total, self.fetch_hops(request))
            .await
            .map_err(|_| {
                CapabilityError::Timeout(format!(
                    "fetching {} took longer than {total:?}",
                    shown_text(&target.to_string())
                ))
            })?
    }
}
