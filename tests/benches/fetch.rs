//! ScopedFetch GET on loopback against a bare hyper-util client (pooled, keep-alive) in the same
//! run (docs/semantics.md, "Performance budgets"); and an exchange, a GET and a TLS connection
//! through the egress proxy's tunnel against the same on a direct connection.
#![allow(
    missing_docs,
    clippy::disallowed_methods,
    reason = "the baseline is the unscoped client"
)]

use std::convert::Infallible;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use capability_core::PolicyFormat;
use capability_core::{CompiledPolicy, resolve};
use capability_fetch::{EgressProxy, FetchBackend, FetchConfig};
use capability_types::ToolCapabilities;
use capability_types::backend::{EgressFactory, FetchFactory, HostPolicy, NetworkGrant};
use criterion::{Criterion, criterion_group, criterion_main};
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};

#[path = "support/paired.rs"]
mod paired;

/// What a tool declaring every host (`["*"]`) is granted under a personality that allows one
/// loopback port.
fn loopback_grant(tool: &str, port: u16) -> NetworkGrant {
    grant_of(tool, &format!("127.0.0.1:{port}"))
}

/// What a tool declaring every host (`["*"]`) is granted under a personality that allows
/// `host` (with its port).
fn grant_of(tool: &str, host: &str) -> NetworkGrant {
    let policy = CompiledPolicy::load(
        &format!("id = \"bench\"\n[safety.network]\nallow = [\"{host}\"]\n"),
        PolicyFormat::Toml,
        None,
    )
    .unwrap();
    let resolved = resolve(
        tool,
        &ToolCapabilities::none().with_network(["*"]),
        &policy,
        "s",
        Path::new("/"),
    );
    NetworkGrant::new(tool, resolved.network.unwrap() as Arc<dyn HostPolicy>)
}

fn fetch(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let addr = rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                tokio::spawn(async move {
                    let service = service_fn(|_req| async {
                        Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from_static(
                            b"hello",
                        ))))
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        addr
    });
    let url = format!("http://127.0.0.1:{}/", addr.port());

    let bare: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let grant = loopback_grant("fetch_url", addr.port());
    let scoped = FetchBackend::new(FetchConfig::default())
        .unwrap()
        .scoped_fetch(grant)
        .unwrap();

    let bare_get = || {
        rt.block_on(async {
            let response = bare.get(url.parse().unwrap()).await.unwrap();
            response.into_body().collect().await.unwrap().to_bytes()
        })
    };
    let scoped_get = || {
        rt.block_on(scoped.fetch(http::Request::get(url.as_str()).body(Bytes::new()).unwrap()))
            .unwrap()
    };
    let mut group = c.benchmark_group("fetch");
    group.bench_function("bare_hyper_util_get", |b| b.iter(bare_get));
    group.bench_function("scoped_get", |b| b.iter(scoped_get));
    group.finish();

    // The budgeted ratio, timed paired as well (docs/benchmarks.md, "Paired budgets").
    if paired::measuring() {
        paired::Rows::default()
            .each(
                ("fetch/scoped_get", "fetch/bare_hyper_util_get"),
                scoped_get,
                bare_get,
            )
            .write("fetch-paired.json");
    }
}

/// A connection to the loopback `port` and one through a CONNECT tunnel of the proxy on
/// `proxy_port`, both without Nagle's algorithm.
fn direct_and_tunneled(port: u16, proxy_port: u16) -> (std::net::TcpStream, std::net::TcpStream) {
    (direct(port), tunneled("127.0.0.1", port, proxy_port))
}

/// A connection to the loopback `port`, without Nagle's algorithm.
fn direct(port: u16) -> std::net::TcpStream {
    let direct = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    direct.set_nodelay(true).unwrap();
    direct
}

/// A connection through a CONNECT tunnel to `host:port` of the proxy on `proxy_port` (its
/// answer read a byte at a time, so nothing after it is taken), without Nagle's algorithm.
fn tunneled(host: &str, port: u16, proxy_port: u16) -> std::net::TcpStream {
    use std::io::{Read as _, Write as _};
    let mut tunnel = std::net::TcpStream::connect(("127.0.0.1", proxy_port)).unwrap();
    tunnel.set_nodelay(true).unwrap();
    tunnel
        .write_all(format!("CONNECT {host}:{port} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
        .unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        tunnel.read_exact(&mut byte).unwrap();
        head.push(byte[0]);
    }
    assert!(head.starts_with(b"HTTP/1.1 200"), "{head:?}");
    tunnel
}

/// One exchange of a request/answer protocol whose client writes each request in two parts, as
/// an HTTP client writes a head and then a body: 50 bytes (a binary frame: two bytes of length,
/// then its content, so the proxy relays it as it is rather than reading it as the start of an
/// HTTP request), a pause that lets them travel apart, 50 more, then the server's 10-byte answer.
fn exchange(stream: &mut std::net::TcpStream) {
    use std::io::{Read as _, Write as _};
    let mut head = [b'h'; 50];
    head[..2].copy_from_slice(&98u16.to_be_bytes());
    stream.write_all(&head).unwrap();
    std::thread::sleep(Duration::from_micros(50));
    stream.write_all(&[b'b'; 50]).unwrap();
    let mut answer = [0u8; 10];
    stream.read_exact(&mut answer).unwrap();
}

/// A server of that protocol on loopback (every connection without Nagle's algorithm, as a
/// server of such a protocol sets it), a direct connection to it, and one through a CONNECT
/// tunnel of the egress proxy that allows it; the proxy's session lives as long as the tunnel.
fn egress_connections(
    rt: &tokio::runtime::Runtime,
) -> (
    std::net::TcpStream,
    std::net::TcpStream,
    Box<dyn capability_types::backend::EgressSession>,
) {
    use std::io::{Read as _, Write as _};
    let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in server.incoming() {
            let Ok(mut stream) = stream else { return };
            stream.set_nodelay(true).unwrap();
            std::thread::spawn(move || {
                let mut request = [0u8; 100];
                while stream.read_exact(&mut request).is_ok() {
                    if stream.write_all(b"0123456789").is_err() {
                        return;
                    }
                }
            });
        }
    });
    let grant = loopback_grant("tunnel", port);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let proxy_port = listener.local_addr().unwrap().port();
    let session = {
        let _entered = rt.enter();
        EgressProxy::new(&FetchConfig::default())
            .serve(grant, listener)
            .unwrap()
    };
    let (direct, tunnel) = direct_and_tunneled(port, proxy_port);
    (direct, tunnel, session)
}

fn egress(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (direct, tunnel, _session) = egress_connections(&rt);
    let (direct, tunnel) = (
        std::cell::RefCell::new(direct),
        std::cell::RefCell::new(tunnel),
    );
    let direct_exchange = || exchange(&mut direct.borrow_mut());
    let tunnel_exchange = || exchange(&mut tunnel.borrow_mut());
    let mut group = c.benchmark_group("egress");
    group.bench_function("direct_exchange", |b| b.iter(direct_exchange));
    group.bench_function("tunnel_exchange", |b| b.iter(tunnel_exchange));
    group.finish();
    if paired::measuring() {
        paired::Rows::default()
            .each(
                ("egress/tunnel_exchange", "egress/direct_exchange"),
                tunnel_exchange,
                direct_exchange,
            )
            .write("egress-paired.json");
    }
}

/// One GET on a kept-alive connection, its `ok` answer read whole.
fn http_get(stream: &mut std::net::TcpStream, host: &str) {
    use std::io::{Read as _, Write as _};
    stream
        .write_all(format!("GET / HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes())
        .unwrap();
    let mut got = Vec::new();
    let mut chunk = [0u8; 512];
    loop {
        let n = stream.read(&mut chunk).unwrap();
        assert!(n > 0, "the connection ended: {got:?}");
        got.extend_from_slice(&chunk[..n]);
        if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n")
            && got.len() >= end + 4 + 2
        {
            return;
        }
    }
}

/// An HTTP server on loopback that keeps connections alive and answers each request `ok`; a
/// direct connection to it and one through a CONNECT tunnel of the egress proxy (which serves
/// the tunnel as HTTP, each request's `Host` checked: docs/isolation-model.md, "The egress proxy
/// reads what a tunnel opens with"). GETs on each; criterion's means only (no paired budget: a
/// round's ratio swings with which side's threads the other left awake).
fn egress_http(c: &mut Criterion) {
    use std::io::{Read as _, Write as _};
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in server.incoming() {
            let Ok(mut stream) = stream else { return };
            stream.set_nodelay(true).unwrap();
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 512];
                loop {
                    while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        buf.drain(..end + 4);
                        if stream
                            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                            .is_err()
                        {
                            return;
                        }
                    }
                    match stream.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
            });
        }
    });
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let proxy_port = listener.local_addr().unwrap().port();
    let _session = {
        let _entered = rt.enter();
        EgressProxy::new(&FetchConfig::default())
            .serve(loopback_grant("tunnel_http", port), listener)
            .unwrap()
    };
    let (direct, tunnel) = direct_and_tunneled(port, proxy_port);
    let host = format!("127.0.0.1:{port}");
    let (direct, tunnel) = (
        std::cell::RefCell::new(direct),
        std::cell::RefCell::new(tunnel),
    );
    let direct_get = || http_get(&mut direct.borrow_mut(), &host);
    let tunnel_get = || http_get(&mut tunnel.borrow_mut(), &host);
    let mut group = c.benchmark_group("egress");
    group.bench_function("direct_http_get", |b| b.iter(direct_get));
    group.bench_function("tunnel_http_get", |b| b.iter(tunnel_get));
    group.finish();
}

/// A TLS server on loopback for `localhost` that answers each connection's handshake with one
/// line and closes; its key exchange groups are `groups` (P-256 alone makes a client that
/// offers X25519 first be asked again). Returns its port and certificate.
fn tls_line_server(groups: Vec<&'static dyn rustls::crypto::SupportedKxGroup>) -> (u16, Vec<u8>) {
    use std::io::Write as _;
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let der = cert.cert.der().to_vec();
    let key = rustls::pki_types::PrivateKeyDer::try_from(cert.signing_key.serialize_der()).unwrap();
    let mut provider = rustls::crypto::ring::default_provider();
    provider.kx_groups = groups;
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(provider))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![der.clone().into()], key)
        .unwrap();
    let config = Arc::new(config);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            stream.set_nodelay(true).unwrap();
            let config = Arc::clone(&config);
            std::thread::spawn(move || {
                let connection = rustls::ServerConnection::new(config).unwrap();
                let mut tls = rustls::StreamOwned::new(connection, stream);
                let _ = tls.write_all(b"hi\n");
                tls.conn.send_close_notify();
                let _ = tls.flush();
            });
        }
    });
    (port, der)
}

/// A TLS connection for `localhost` over `stream` (direct, or a tunnel's), its one line read.
fn tls_line(stream: std::net::TcpStream, client: &Arc<rustls::ClientConfig>) {
    use std::io::Read as _;
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let connection = rustls::ClientConnection::new(Arc::clone(client), name).unwrap();
    let mut tls = rustls::StreamOwned::new(connection, stream);
    let mut line = Vec::new();
    tls.read_to_end(&mut line).unwrap();
    assert_eq!(line, b"hi\n");
}

/// A new TLS connection a call, direct and through a CONNECT tunnel (whose ClientHello the
/// proxy reads, and the server's first message before the rest: docs/isolation-model.md, "The
/// egress proxy reads what a tunnel opens with"); once with a server that takes the client's
/// first key share, once with one that asks for another (a HelloRetryRequest, and a second
/// ClientHello the proxy reads too). Criterion's means only.
fn egress_tls(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("egress");
    for (name, groups) in [
        (
            "tls_connect",
            rustls::crypto::ring::default_provider().kx_groups,
        ),
        (
            "tls_connect_retry",
            vec![rustls::crypto::ring::kx_group::SECP256R1],
        ),
    ] {
        let (port, der) = tls_line_server(groups);
        let mut roots = rustls::RootCertStore::empty();
        roots.add(der.into()).unwrap();
        let client = Arc::new(
            rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth(),
        );
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let proxy_port = listener.local_addr().unwrap().port();
        let _session = {
            let _entered = rt.enter();
            EgressProxy::new(&FetchConfig::default())
                .serve(grant_of(name, &format!("localhost:{port}")), listener)
                .unwrap()
        };
        group.bench_function(format!("direct_{name}"), |b| {
            b.iter(|| tls_line(direct(port), &client))
        });
        group.bench_function(format!("tunnel_{name}"), |b| {
            b.iter(|| tls_line(tunneled("localhost", port, proxy_port), &client))
        });
    }
    group.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .sample_size(40)
}

criterion_group! { name = benches; config = config(); targets = fetch, egress, egress_http, egress_tls }
criterion_main!(benches);
