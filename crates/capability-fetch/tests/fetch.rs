//! `ScopedHttp` against real hyper servers on loopback (plain and TLS), counting the TCP
//! connections each server accepts.

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use capability_core::PolicyFormat;
use capability_core::{CompiledPolicy, resolve};
use capability_fetch::{FetchBackend, FetchConfig};
use capability_types::backend::{FetchFactory, HostPolicy, NetworkGrant};
use capability_types::{CapabilityError, DenialCode, ErrorCode, ScopedFetch, ToolCapabilities};
use http::{HeaderMap, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

#[path = "support/tls.rs"]
mod tls;
use tls::tls_material;

#[derive(Debug, Clone)]
struct Seen {
    method: Method,
    path: String,
    headers: HeaderMap,
    body: Bytes,
}

struct Server {
    addr: SocketAddr,
    connections: Arc<AtomicUsize>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Server {
    fn url(&self, scheme: &str, host: &str, path: &str) -> String {
        format!("{scheme}://{host}:{}{path}", self.addr.port())
    }
    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

/// Routes: `/echo`, `/redirect?status=302&to=URL`, `/chain/N`, `/big`, `/slow`.
async fn route(
    req: Request<Incoming>,
    seen: Arc<Mutex<Vec<Seen>>>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let path = parts
        .uri
        .path_and_query()
        .map(ToString::to_string)
        .unwrap_or_default();
    seen.lock().unwrap().push(Seen {
        method: parts.method.clone(),
        path: path.clone(),
        headers: parts.headers.clone(),
        body: body.clone(),
    });
    let query = |key: &str| {
        parts
            .uri
            .query()
            .unwrap_or("")
            .split('&')
            .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
            .map(str::to_owned)
    };
    let response = |status: u16, body: Bytes| {
        Response::builder()
            .status(status)
            .body(Full::new(body))
            .unwrap()
    };
    Ok(match parts.uri.path() {
        "/echo" => response(
            200,
            Bytes::from(format!(
                "{} {} {}",
                parts.method,
                path,
                String::from_utf8_lossy(&body)
            )),
        ),
        "/redirect" => {
            let status: u16 = query("status").and_then(|s| s.parse().ok()).unwrap_or(302);
            let to = query("to").unwrap_or_default();
            Response::builder()
                .status(status)
                .header("location", to)
                .body(Full::new(Bytes::new()))
                .unwrap()
        }
        p if p.starts_with("/chain/") => {
            let n: u32 = p["/chain/".len()..].parse().unwrap();
            if n == 0 {
                response(200, Bytes::from("end"))
            } else {
                Response::builder()
                    .status(302)
                    .header("location", format!("/chain/{}", n - 1))
                    .body(Full::new(Bytes::new()))
                    .unwrap()
            }
        }
        p if p == "/big" || p.starts_with("/big/") => response(200, Bytes::from(vec![b'x'; 2048])),
        "/slow" => {
            tokio::time::sleep(Duration::from_secs(5)).await;
            response(200, Bytes::from("late"))
        }
        _ => response(404, Bytes::new()),
    })
}

async fn start(ip: &str, tls: Option<tokio_rustls::TlsAcceptor>) -> Server {
    let listener = TcpListener::bind((ip.parse::<IpAddr>().unwrap(), 0))
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let connections = Arc::new(AtomicUsize::new(0));
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let (c, s) = (Arc::clone(&connections), Arc::clone(&seen));
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            c.fetch_add(1, Ordering::SeqCst);
            let (s, tls) = (Arc::clone(&s), tls.clone());
            tokio::spawn(async move {
                let service = service_fn(move |req| route(req, Arc::clone(&s)));
                let builder = hyper::server::conn::http1::Builder::new();
                match tls {
                    None => {
                        let _ = builder
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    }
                    Some(acceptor) => {
                        if let Ok(stream) = acceptor.accept(stream).await {
                            let _ = builder
                                .serve_connection(TokioIo::new(stream), service)
                                .await;
                        }
                    }
                }
            });
        }
    });
    Server {
        addr,
        connections,
        seen,
    }
}

fn fetcher(allow: &[String], config: FetchConfig) -> Arc<dyn ScopedFetch> {
    let list = allow
        .iter()
        .map(|a| format!("{a:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    let policy = CompiledPolicy::load(
        &format!("id = \"p\"\n[safety.network]\nallow = [{list}]\n"),
        PolicyFormat::Toml,
        None,
    )
    .unwrap();
    let resolved = resolve(
        "fetch_url",
        &ToolCapabilities::none().with_network(["*"]),
        &policy,
        "s",
        Path::new("/"),
    );
    let hosts = resolved.network.unwrap() as Arc<dyn HostPolicy>;
    FetchBackend::new(config)
        .unwrap()
        .scoped_fetch(NetworkGrant::new("fetch_url", hosts))
        .unwrap()
}

fn get(url: &str) -> Request<Bytes> {
    Request::get(url).body(Bytes::new()).unwrap()
}

fn denial(r: Result<Response<Bytes>, CapabilityError>) -> String {
    match r {
        Err(CapabilityError::Denied {
            code: DenialCode::HostNotAllowed,
            message,
        }) => message,
        other => panic!("expected HOST_NOT_ALLOWED, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allowed_request_arrives_intact() {
    let server = start("127.0.0.1", None).await;
    let fetch = fetcher(
        &[format!("127.0.0.1:{}", server.addr.port())],
        FetchConfig::default(),
    );
    let request = Request::post(server.url("http", "127.0.0.1", "/echo?x=1"))
        .header("x-custom", "kept")
        .header("host", "evil.example")
        .body(Bytes::from("payload"))
        .unwrap();
    let response = fetch.fetch(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.body().as_ref(), b"POST /echo?x=1 payload");
    let seen = server.seen();
    assert_eq!(seen[0].headers["x-custom"], "kept");
    assert_eq!(
        seen[0].headers["host"],
        format!("127.0.0.1:{}", server.addr.port()),
        "a caller's Host header never reaches the server"
    );
    assert!(
        seen[0].headers["user-agent"]
            .to_str()
            .unwrap()
            .starts_with("toolcap/")
    );
    // Another spelling of the same address is the same address.
    let hex = fetch
        .fetch(get(&server.url("http", "0x7f.0.0.1", "/echo")))
        .await
        .unwrap();
    assert_eq!(hex.status(), StatusCode::OK);
}

// guarantee: G-NET-01
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_host_is_never_contacted() {
    let server = start("127.0.0.1", None).await;
    let fetch = fetcher(&["api.example.com".to_owned()], FetchConfig::default());
    let port = server.addr.port();
    assert_eq!(
        denial(
            fetch
                .fetch(get(&server.url("http", "127.0.0.1", "/echo")))
                .await
        ),
        "127.0.0.1 is not in the declared allowedHosts"
    );
    assert_eq!(
        denial(
            fetch
                .fetch(get(&format!("http://user:pw@api.example.com:{port}/")))
                .await
        ),
        "URLs with user-info are refused"
    );
    // `http::Uri` cannot even hold `file:///etc/passwd`; with an authority it can, and is refused.
    assert_eq!(
        denial(fetch.fetch(get("file://localhost/etc/passwd")).await),
        "file: only http and https URLs may be fetched"
    );
    denial(fetch.fetch(get("ftp://api.example.com/x")).await);
    assert!(matches!(
        fetch.fetch(get("/relative")).await,
        Err(CapabilityError::InvalidInput(_))
    ));
    assert_eq!(server.connections(), 0);
}

// guarantee: G-NET-01
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loopback_through_a_wildcard_is_refused_before_connecting() {
    let server = start("127.0.0.1", None).await;
    let fetch = fetcher(&["*".to_owned()], FetchConfig::default());
    let message = denial(
        fetch
            .fetch(get(&server.url("http", "localhost", "/echo")))
            .await,
    );
    assert!(
        message.starts_with("localhost resolves to a loopback address"),
        "{message}"
    );
    let message = denial(
        fetch
            .fetch(get(&server.url("http", "127.0.0.1", "/echo")))
            .await,
    );
    assert_eq!(
        message,
        "127.0.0.1 resolves to a loopback address (127.0.0.1), which a host matched by a wildcard may not reach, nor any host under restricted_addresses = \"never\""
    );
    denial(
        fetch
            .fetch(get(&server.url("http", "[::ffff:127.0.0.1]", "/echo")))
            .await,
    );
    denial(
        fetch
            .fetch(get(&server.url("http", "2130706433", "/echo")))
            .await,
    );
    denial(
        fetch
            .fetch(get("http://169.254.169.254/latest/meta-data/"))
            .await,
    );
    assert_eq!(server.connections(), 0);

    // Named explicitly, the same host may be reached.
    let explicit = fetcher(&["localhost".to_owned()], FetchConfig::default());
    let response = explicit
        .fetch(get(&server.url("http", "localhost", "/echo")))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
}

// guarantee: G-NET-02
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_to_a_refused_host_is_refused() {
    let allowed = start("127.0.0.1", None).await;
    let other = start("127.0.0.2", None).await;
    let fetch = fetcher(
        &[format!("127.0.0.1:{}", allowed.addr.port())],
        FetchConfig::default(),
    );
    let target = other.url("http", "127.0.0.2", "/echo");
    let message = denial(
        fetch
            .fetch(get(&allowed.url(
                "http",
                "127.0.0.1",
                &format!("/redirect?to={target}"),
            )))
            .await,
    );
    assert_eq!(message, "127.0.0.2 is not in the declared allowedHosts");
    assert_eq!(
        other.connections(),
        0,
        "the redirect target was never contacted"
    );
    denial(
        fetch
            .fetch(get(&allowed.url(
                "http",
                "127.0.0.1",
                "/redirect?to=file:///etc/passwd",
            )))
            .await,
    );
    let userinfo = format!("http://u:p@127.0.0.1:{}/echo", allowed.addr.port());
    denial(
        fetch
            .fetch(get(&allowed.url(
                "http",
                "127.0.0.1",
                &format!("/redirect?to={userinfo}"),
            )))
            .await,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirect_chains_are_followed_up_to_the_limit() {
    let server = start("127.0.0.1", None).await;
    let fetch = fetcher(
        &[format!("127.0.0.1:{}", server.addr.port())],
        FetchConfig::default(),
    );
    let response = fetch
        .fetch(get(&server.url("http", "127.0.0.1", "/chain/10")))
        .await
        .unwrap();
    assert_eq!(response.body().as_ref(), b"end");
    let err = fetch
        .fetch(get(&server.url("http", "127.0.0.1", "/chain/11")))
        .await
        .unwrap_err();
    assert_eq!(err.result_code(), ErrorCode::ExecutionFailed);
    assert!(
        err.to_string().starts_with("more than 10 redirects"),
        "{err}"
    );
}

// guarantee: G-NET-02
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_never_follow_a_redirect_to_another_origin() {
    let a = start("127.0.0.1", None).await;
    let b = start("127.0.0.1", None).await;
    let fetch = fetcher(&["127.0.0.1".to_owned()], FetchConfig::default());
    let with_credentials = |url: String| {
        Request::get(url)
            .header("authorization", "Bearer secret")
            .header("cookie", "session=1")
            .header("proxy-authorization", "Basic x")
            .header("x-custom", "kept")
            .body(Bytes::new())
            .unwrap()
    };
    let cross = b.url("http", "127.0.0.1", "/echo");
    fetch
        .fetch(with_credentials(a.url(
            "http",
            "127.0.0.1",
            &format!("/redirect?to={cross}"),
        )))
        .await
        .unwrap();
    let at_b = &b.seen()[0];
    for name in ["authorization", "cookie", "proxy-authorization"] {
        assert!(!at_b.headers.contains_key(name), "{name} crossed origins");
    }
    assert_eq!(at_b.headers["x-custom"], "kept");
    fetch
        .fetch(with_credentials(a.url(
            "http",
            "127.0.0.1",
            "/redirect?to=/echo",
        )))
        .await
        .unwrap();
    let same = a.seen().last().cloned().unwrap();
    assert_eq!(same.path, "/echo");
    assert_eq!(
        same.headers["authorization"], "Bearer secret",
        "same origin keeps credentials"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirect_methods() {
    let server = start("127.0.0.1", None).await;
    let fetch = fetcher(&["127.0.0.1".to_owned()], FetchConfig::default());
    let post = |path: &str| {
        Request::post(server.url("http", "127.0.0.1", path))
            .body(Bytes::from("form"))
            .unwrap()
    };
    let r = fetch
        .fetch(post("/redirect?status=303&to=/echo"))
        .await
        .unwrap();
    assert_eq!(
        r.body().as_ref(),
        b"GET /echo ",
        "303 turns POST into a bodiless GET"
    );
    let r = fetch
        .fetch(post("/redirect?status=307&to=/echo"))
        .await
        .unwrap();
    assert_eq!(
        r.body().as_ref(),
        b"POST /echo form",
        "307 keeps the method and body"
    );
    let r = fetch
        .fetch(post("/redirect?status=302&to=/echo"))
        .await
        .unwrap();
    assert_eq!(r.body().as_ref(), b"GET /echo ");
    let last = server.seen().last().cloned().unwrap();
    assert_eq!((last.method, last.body.len()), (Method::GET, 0));
    assert!(!last.headers.contains_key("content-length") || last.headers["content-length"] == "0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversize_bodies_and_slow_servers_fail() {
    let server = start("127.0.0.1", None).await;
    let fetch = fetcher(
        &["127.0.0.1".to_owned()],
        FetchConfig::default()
            .max_body(1024)
            .total_timeout(Duration::from_millis(300)),
    );
    let err = fetch
        .fetch(get(&server.url("http", "127.0.0.1", "/big")))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "the response body of {} exceeds the 1024 byte limit",
            server.url("http", "127.0.0.1", "")
        )
    );
    let err = fetch
        .fetch(get(&server.url("http", "127.0.0.1", "/slow")))
        .await
        .unwrap_err();
    assert_eq!(err.result_code(), ErrorCode::Timeout);
    assert!(err.to_string().ends_with("took longer than 300ms"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_with_a_custom_root() {
    let (acceptor, root) = tls_material();
    let server = start("127.0.0.1", Some(acceptor)).await;
    let allow = [
        format!("localhost:{}", server.addr.port()),
        format!("127.0.0.1:{}", server.addr.port()),
    ];
    let trusted = fetcher(&allow, FetchConfig::default().add_root_certificate(root));
    let r = trusted
        .fetch(get(&server.url("https", "localhost", "/echo")))
        .await
        .unwrap();
    assert_eq!(r.body().as_ref(), b"GET /echo ");
    let r = trusted
        .fetch(get(&server.url("https", "127.0.0.1", "/echo")))
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);

    let untrusted = fetcher(&allow, FetchConfig::default());
    let err = untrusted
        .fetch(get(&server.url("https", "localhost", "/echo")))
        .await
        .unwrap_err();
    assert_eq!(err.result_code(), ErrorCode::ExecutionFailed);
    assert!(
        err.to_string().contains("TLS with localhost failed"),
        "{err}"
    );
}

/// A resolver that answers a public address first and a loopback one after (a rebinding DNS
/// server), counting how often it is asked.
struct Rebinding {
    asked: Arc<AtomicUsize>,
}

impl capability_fetch::Resolver for Rebinding {
    fn resolve<'a>(&'a self, _host: &'a str, _port: u16) -> capability_fetch::Resolution<'a> {
        let n = self.asked.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            Ok(if n == 0 {
                // TEST-NET-3: public-looking, never answers here.
                vec!["203.0.113.7".parse().unwrap()]
            } else {
                vec!["127.0.0.1".parse().unwrap(), "203.0.113.7".parse().unwrap()]
            })
        })
    }
}

// guarantee: G-NET-03
/// docs/testing.md, "Fetch without the network": a test maps names to a loopback server with a
/// resolver, and the address rules still hold through it: a wildcard-matched name that the
/// resolver sends to loopback is refused (or that address skipped) and never contacted, however
/// the answers change between calls; only an explicitly named host reaches the loopback server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_test_resolver_maps_names_and_cannot_widen_what_is_reached() {
    let server = start("127.0.0.1", None).await;
    let loopback: IpAddr = "127.0.0.1".parse().unwrap();
    let table = capability_fetch::StaticResolver::new()
        .with("API.example.test", [loopback])
        .with("evil.example.test", [loopback]);
    let config = || {
        FetchConfig::default()
            .resolver(table.clone())
            .connect_timeout(Duration::from_millis(300))
    };
    // Named explicitly: the test reaches its loopback server under a real-looking name.
    let explicit = fetcher(&["api.example.test".to_owned()], config());
    let response = explicit
        .fetch(get(&server.url("http", "api.example.test", "/echo")))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(server.connections(), 1);
    // Through a wildcard, the same mapping is a private-address refusal, before any connection.
    let wildcard = fetcher(&["*.example.test".to_owned()], config());
    let message = denial(
        wildcard
            .fetch(get(&server.url("http", "evil.example.test", "/echo")))
            .await,
    );
    assert!(
        message.starts_with("evil.example.test resolves to a loopback address"),
        "{message}"
    );
    // A name the table does not have does not resolve (no fall-through to the system's DNS).
    let missing = wildcard
        .fetch(get(&server.url("http", "other.example.test", "/echo")))
        .await
        .unwrap_err();
    assert!(
        missing
            .to_string()
            .contains("not in the test resolver's table"),
        "{missing}"
    );
    assert_eq!(server.connections(), 1);

    // A rebinding resolver: a public answer first, loopback after. Each connection resolves
    // once and connects only to what it checked, so loopback is never contacted.
    let asked = Arc::new(AtomicUsize::new(0));
    let rebinding = fetcher(
        &["*.example.test".to_owned()],
        FetchConfig::default()
            .resolver(Rebinding {
                asked: Arc::clone(&asked),
            })
            .connect_timeout(Duration::from_millis(300)),
    );
    for _ in 0..3 {
        let r = rebinding
            .fetch(get(&server.url("http", "rebind.example.test", "/echo")))
            .await;
        assert!(r.is_err(), "{r:?}");
    }
    assert!(
        asked.load(Ordering::SeqCst) >= 2,
        "the resolver was asked again"
    );
    assert_eq!(
        server.connections(),
        1,
        "the loopback server saw no rebinding connection"
    );
}

// guarantee: G-NET-05
/// A URL's path, query and fragment often carry what a tool put there (a webhook's token in the
/// path, an API key in the query, a presigned redirect's signature): a fetch's errors name the
/// URL by its origin alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fetch_error_names_a_url_by_its_origin_alone() {
    let server = start("127.0.0.1", None).await;
    let fetch = fetcher(
        &["127.0.0.1".to_owned()],
        FetchConfig::default()
            .max_body(1024)
            .total_timeout(Duration::from_millis(300)),
    );
    let url = |path: &str| server.url("http", "127.0.0.1", path);
    let origin = url("");
    let cases = [
        ("/big?key=SECRET-1#SECRET-2", "exceeds the 1024 byte limit"),
        // A webhook's token in the path.
        ("/big/T000/SECRET-3", "exceeds the 1024 byte limit"),
        ("/slow?key=SECRET-1", "took longer than 300ms"),
        // The URL a redirect leads to (a presigned one, say), read past its limit.
        (
            "/redirect?status=302&to=/big/SECRET-4?sig=SECRET-1",
            "exceeds the 1024 byte limit",
        ),
        // Too many redirects, named by where they started.
        ("/chain/50?token=SECRET-1", "redirects"),
        // A redirect to what is no URL, named by where it came from.
        (
            "/redirect?status=302&to=http://[SECRET-1",
            "redirected to an invalid URL",
        ),
    ];
    for (path, why) in cases {
        let err = fetch.fetch(get(&url(path))).await.unwrap_err().to_string();
        assert!(!err.contains("SECRET"), "{path}: {err}");
        assert!(err.contains(&origin) && err.contains(why), "{path}: {err}");
    }
}
