//! The egress proxy with hostile clients: it decides on the CONNECT target or the absolute-form
//! URI and never on the `Host` header, refuses what it cannot decide on, and ends with its
//! session. Served here on a host loopback listener (in production the listener lives in the
//! child's network namespace), against real loopback servers.
#![allow(
    clippy::disallowed_methods,
    reason = "the test listens on host loopback where a child's namespace would hold the listener"
)]

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use capability_core::PolicyFormat;
use capability_core::{CompiledPolicy, resolve};
use capability_fetch::{EgressProxy, FetchConfig};
use capability_types::ToolCapabilities;
use capability_types::backend::{EgressFactory, EgressSession, HostPolicy, NetworkGrant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[path = "support/tls.rs"]
mod tls;
use tls::{tls_material, tls_material_with};

/// A server that answers with its name and the Host header it saw; counts connections.
async fn server(name: &'static str) -> (u16, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&hits);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let n = stream.read(&mut buf).await.unwrap_or(0);
                let request = String::from_utf8_lossy(&buf[..n]).to_lowercase();
                let host = request
                    .lines()
                    .find_map(|l| l.strip_prefix("host: "))
                    .unwrap_or("")
                    .trim()
                    .to_owned();
                let body = format!("{name} host={host}");
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(response.as_bytes()).await;
            });
        }
    });
    (port, hits)
}

fn grant(allow: &str) -> NetworkGrant {
    let policy = CompiledPolicy::load(
        &format!("id = \"p\"\n[safety.network]\nallow = [\"{allow}\"]\n"),
        PolicyFormat::Toml,
        None,
    )
    .unwrap();
    let resolved = resolve(
        "curl_tool",
        &ToolCapabilities::none().with_network(["*"]),
        &policy,
        "s",
        Path::new("/"),
    );
    NetworkGrant::new(
        "curl_tool",
        resolved.network.unwrap() as Arc<dyn HostPolicy>,
    )
}

async fn proxy(allow: &str) -> (u16, Box<dyn EgressSession>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let session = EgressProxy::new(&FetchConfig::default())
        .serve(grant(allow), listener)
        .unwrap();
    (port, session)
}

/// Sends `request` raw and returns everything the proxy answers until it closes or 2 s pass.
async fn raw(port: u16, request: &str) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(2), stream.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_follow_the_target_never_the_host_header() {
    let (allowed, _) = server("allowed").await;
    let (forbidden, forbidden_hits) = server("forbidden").await;
    let (port, _session) = proxy(&format!("127.0.0.1:{allowed}")).await;

    // Allowed URI, forbidden Host header: goes to the allowed host, with the URI's Host.
    let out = raw(
        port,
        &format!("GET http://127.0.0.1:{allowed}/ HTTP/1.1\r\nHost: 127.0.0.1:{forbidden}\r\nConnection: close\r\n\r\n"),
    )
    .await;
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    assert!(
        out.ends_with(&format!("allowed host=127.0.0.1:{allowed}")),
        "{out}"
    );

    // Forbidden URI, allowed Host header: refused.
    let out = raw(
        port,
        &format!("GET http://127.0.0.1:{forbidden}/ HTTP/1.1\r\nHost: 127.0.0.1:{allowed}\r\nConnection: close\r\n\r\n"),
    )
    .await;
    assert!(out.starts_with("HTTP/1.1 403"), "{out}");
    assert!(out.contains("HOST_NOT_ALLOWED"), "{out}");

    // CONNECT to the forbidden port: refused before any connection.
    let out = raw(
        port,
        &format!("CONNECT 127.0.0.1:{forbidden} HTTP/1.1\r\nHost: 127.0.0.1:{allowed}\r\n\r\n"),
    )
    .await;
    assert!(out.starts_with("HTTP/1.1 403"), "{out}");
    assert_eq!(forbidden_hits.load(Ordering::SeqCst), 0);

    // CONNECT to the allowed one: a tunnel that carries bytes both ways.
    let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    stream
        .write_all(format!("CONNECT 127.0.0.1:{allowed} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        stream.read_exact(&mut byte).await.unwrap();
        head.push(byte[0]);
    }
    assert!(
        head.starts_with(b"HTTP/1.1 200 OK\r\n"),
        "{}",
        String::from_utf8_lossy(&head)
    );
    // Inside it, a request's Host is checked too (a_plain_tunnel_asks_the_allowed_address_only_for_allowed_names).
    stream
        .write_all(format!("GET / HTTP/1.1\r\nHost: 127.0.0.1:{allowed}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(2), stream.read_to_end(&mut out)).await;
    let out = String::from_utf8_lossy(&out);
    assert!(
        out.ends_with(&format!("allowed host=127.0.0.1:{allowed}")),
        "{out:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_it_cannot_decide_on_are_refused() {
    let (allowed, hits) = server("allowed").await;
    let (port, _session) = proxy(&format!("127.0.0.1:{allowed}")).await;
    for (request, status) in [
        // Origin form: only the Host header would name the target.
        (
            format!("GET / HTTP/1.1\r\nHost: 127.0.0.1:{allowed}\r\nConnection: close\r\n\r\n"),
            "400",
        ),
        // https in absolute form (the proxy would have to speak TLS for the client).
        (
            format!(
                "GET https://127.0.0.1:{allowed}/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            ),
            "400",
        ),
        (
            format!(
                "GET ftp://127.0.0.1:{allowed}/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            ),
            "400",
        ),
        // CONNECT without a port.
        (
            "CONNECT 127.0.0.1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".to_owned(),
            "400",
        ),
        // Userinfo tricks and other hosts.
        (
            format!(
                "GET http://127.0.0.1:{allowed}@169.254.169.254/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            ),
            "403",
        ),
        (
            "CONNECT 169.254.169.254:80 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                .to_owned(),
            "403",
        ),
        (
            format!("CONNECT localhost:{allowed} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
            "403",
        ),
    ] {
        let out = raw(port, &request).await;
        assert!(
            out.starts_with(&format!("HTTP/1.1 {status}")),
            "{request:?} -> {out}"
        );
    }
    // Garbage is not HTTP: the connection ends, nothing is reached.
    let out = raw(port, "\u{0}\u{1}NOT HTTP AT ALL\r\n\r\n").await;
    assert!(!out.contains("200"), "{out}");
    assert_eq!(hits.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_ends_with_its_session() {
    let (allowed, _) = server("allowed").await;
    let (port, session) = proxy(&format!("127.0.0.1:{allowed}")).await;
    let out = raw(
        port,
        &format!("GET http://127.0.0.1:{allowed}/ HTTP/1.1\r\nConnection: close\r\n\r\n"),
    )
    .await;
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    drop(session);
    tokio::time::sleep(Duration::from_millis(100)).await;
    // The listener was closed with the accept task.
    assert!(TcpStream::connect(("127.0.0.1", port)).await.is_err());
}

/// How many connections to `port` on loopback an accept has taken: established, and owned by
/// a descriptor (one still in the listener's queue has none), from `/proc/net/tcp`.
fn accepted_on(port: u16) -> usize {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    table
        .lines()
        .skip(1)
        .filter(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let local_port = fields[1].rsplit(':').next().unwrap();
            u16::from_str_radix(local_port, 16).ok() == Some(port)
                && fields[3] == "01"
                && fields[9] != "0"
        })
        .count()
}

/// A GET of the server on `allowed` through the proxy on `port`, on a connection of its own:
/// whatever came back within 10 s.
async fn get_through(port: u16, allowed: u16) -> String {
    let request = format!("GET http://127.0.0.1:{allowed}/ HTTP/1.1\r\nConnection: close\r\n\r\n");
    let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).to_string()
}

// guarantee: G-NET-04
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_holding_connections_cannot_take_the_hosts_descriptors() {
    // A confined child (a guarded MCP server lives as long as the guard) can open connections
    // to its proxy and hold them; each one the proxy accepts is a descriptor of the host's, which
    // every other call and server of the host shares.
    let (allowed, _) = server("allowed").await;
    let (port, _session) = proxy(&format!("127.0.0.1:{allowed}")).await;
    // 200: past the limit, the listener's queue (128 here) takes the rest.
    let mut held = Vec::new();
    for _ in 0..200 {
        held.push(TcpStream::connect(("127.0.0.1", port)).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let taken = accepted_on(port);
    assert_eq!(
        taken,
        capability_fetch::EGRESS_MAX_CONNECTIONS,
        "the proxy took {taken} of the child's 200 connections"
    );
    // A connection past the limit waits; its request is answered once a held one closes.
    let waiting = tokio::spawn(get_through(port, allowed));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!waiting.is_finished(), "served past the limit");
    drop(held);
    let out = waiting.await.unwrap();
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
}

// guarantee: G-NET-04
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tunnel_counts_against_the_limit_while_it_lasts() {
    // A CONNECT tunnel takes its connection over from the proxy's HTTP server: it keeps its
    // place under the limit until it closes, not only until its answer went out.
    let (allowed, _) = server("allowed").await;
    let (port, _session) = proxy(&format!("127.0.0.1:{allowed}")).await;
    let mut tunnels = Vec::new();
    for _ in 0..capability_fetch::EGRESS_MAX_CONNECTIONS {
        tunnels.push(tunnel_to(port, "127.0.0.1", allowed).await);
    }
    let waiting = tokio::spawn(get_through(port, allowed));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !waiting.is_finished(),
        "served past the limit while the tunnels last"
    );
    drop(tunnels.pop());
    let out = waiting.await.unwrap();
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
}

/// A tunnel to `host:target` through the proxy on `port`, its `200` read.
async fn tunnel_to(port: u16, host: &str, target: u16) -> TcpStream {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let connect = format!("CONNECT {host}:{target} HTTP/1.1\r\nHost: {host}:{target}\r\n\r\n");
    stream.write_all(connect.as_bytes()).await.unwrap();
    let mut head = [0u8; 128];
    let n = stream.read(&mut head).await.unwrap();
    assert!(
        head[..n].starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&head[..n])
    );
    stream
}

/// A TLS client's configuration that trusts `root` (none: nothing).
fn client_config(root: Option<&[u8]>) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    if let Some(root) = root {
        roots.add(root.to_vec().into()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    Arc::new(config)
}

/// The first record a real TLS client (rustls) sends, asking for `name` (an address asks for
/// none).
fn client_hello(name: &str) -> Vec<u8> {
    let name = rustls::pki_types::ServerName::try_from(name.to_owned()).unwrap();
    let mut client = rustls::ClientConnection::new(client_config(None), name).unwrap();
    let mut first = Vec::new();
    client.write_tls(&mut first).unwrap();
    first
}

/// Opens a tunnel to `host:target` through the proxy on `port`, sends `first`, and returns what
/// came back through it within 2 s.
async fn through_tunnel(port: u16, host: &str, target: u16, first: &[u8]) -> String {
    let mut stream = tunnel_to(port, host, target).await;
    stream.write_all(first).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(2), stream.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).to_string()
}

// guarantee: G-KERN-07
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tunnel_asks_the_allowed_address_only_for_allowed_names() {
    // A server that serves many names at one address routes a TLS connection by the name in
    // its ClientHello: through a tunnel to an allowed host, a child could otherwise ask for a
    // name the personality never allowed. The loopback server stands for such an address; what
    // reaches it answers with its name, so an empty answer means nothing was forwarded.
    let (allowed, _) = server("allowed").await;
    let (port, _session) = proxy(&format!("127.0.0.1:{allowed}")).await;
    let refused = through_tunnel(port, "127.0.0.1", allowed, &client_hello("evil.example")).await;
    assert_eq!(refused, "", "a ClientHello for another name was forwarded");
    // Cut short, or spread over records: its name cannot be known, so it is refused too.
    let whole = client_hello("evil.example");
    let refused = through_tunnel(port, "127.0.0.1", allowed, &whole[..whole.len() - 3]).await;
    assert_eq!(refused, "", "a ClientHello cut short was forwarded");
    // What the tunnel's target may be asked still goes through: a ClientHello that names no
    // host (a client addressing an IP sends none), and what is not TLS at all; an allowed name
    // in the next test.
    for first in [
        client_hello("127.0.0.1"),
        b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".to_vec(),
    ] {
        let answer = through_tunnel(port, "127.0.0.1", allowed, &first).await;
        assert!(answer.contains("allowed"), "{answer:?}");
    }
}

/// A TLS server on loopback (its certificate names `localhost`), answering one line; counts the
/// handshakes it completed. Returns its port, the count and the certificate.
async fn tls_server() -> (u16, Arc<AtomicUsize>, Vec<u8>) {
    tls_server_of(tls_material()).await
}

/// [`tls_server`] with the acceptor and certificate given.
async fn tls_server_of(
    (acceptor, der): (tokio_rustls::TlsAcceptor, Vec<u8>),
) -> (u16, Arc<AtomicUsize>, Vec<u8>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let handshakes = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&handshakes);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            let counted = Arc::clone(&counted);
            tokio::spawn(async move {
                if let Ok(mut tls) = acceptor.accept(stream).await {
                    counted.fetch_add(1, Ordering::SeqCst);
                    let _ = tls.write_all(b"hello over tls\n").await;
                    let _ = tls.shutdown().await;
                }
            });
        }
    });
    (port, handshakes, der)
}

/// A real TLS client through a tunnel to `localhost:<target>`, asking for `name`: the line the
/// server sent, or the error.
async fn tls_through(port: u16, target: u16, name: &str, root: &[u8]) -> Result<String, String> {
    let stream = tunnel_to(port, "localhost", target).await;
    let connector = tokio_rustls::TlsConnector::from(client_config(Some(root)));
    let server_name = rustls::pki_types::ServerName::try_from(name.to_owned()).unwrap();
    let handshake = tokio::time::timeout(
        Duration::from_secs(5),
        connector.connect(server_name, stream),
    )
    .await
    .map_err(|_| "timed out".to_owned())?;
    let mut tls = handshake.map_err(|e| e.to_string())?;
    let mut out = String::new();
    tls.read_to_string(&mut out)
        .await
        .map_err(|e| e.to_string())?;
    Ok(out)
}

// guarantee: G-KERN-07
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_tls_client_gets_through_for_its_allowed_name_only() {
    let (target, handshakes, root) = tls_server().await;
    let (port, _session) = proxy(&format!("localhost:{target}")).await;
    assert_eq!(
        tls_through(port, target, "localhost", &root)
            .await
            .as_deref(),
        Ok("hello over tls\n")
    );
    // The same address, another name: the proxy closes the tunnel before the server sees it.
    let refused = tls_through(port, target, "evil.example", &root).await;
    assert!(refused.is_err(), "{refused:?}");
    assert_eq!(
        handshakes.load(Ordering::SeqCst),
        1,
        "only the allowed name reached the server"
    );
}

/// A server that stands for an address serving many names (a shared front, a pages host): it
/// keeps each connection open and answers every request with the name it was asked for (the
/// `Host` header, or the authority of an absolute-form target). Returns its port, every name it
/// answered for, and every byte it received.
#[allow(
    clippy::type_complexity,
    reason = "a test helper's three handles, each read once"
)]
async fn many_names_server() -> (
    u16,
    Arc<std::sync::Mutex<Vec<String>>>,
    Arc<std::sync::Mutex<Vec<u8>>>,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let received = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (kept, all) = (Arc::clone(&seen), Arc::clone(&received));
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let (seen, all) = (Arc::clone(&kept), Arc::clone(&all));
            tokio::spawn(async move {
                let mut buf = Vec::new();
                loop {
                    // Leading empty lines are skipped, as RFC 9112 lets a server do.
                    while buf.starts_with(b"\r\n") {
                        buf.drain(..2);
                    }
                    if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
                        buf.drain(..end + 4);
                        let target = head.split_whitespace().nth(1).unwrap_or("").to_owned();
                        let name = target
                            .strip_prefix("http://")
                            .map(|rest| rest.split('/').next().unwrap_or("").to_owned())
                            .or_else(|| {
                                head.lines()
                                    .find_map(|l| l.strip_prefix("host:"))
                                    .map(|h| h.trim().to_owned())
                            })
                            .unwrap_or_default();
                        seen.lock().unwrap().push(name.clone());
                        let body = format!("site {name}");
                        let response = format!(
                            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        if stream.write_all(response.as_bytes()).await.is_err() {
                            return;
                        }
                        continue;
                    }
                    let mut chunk = [0u8; 4096];
                    match stream.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => {
                            all.lock().unwrap().extend_from_slice(&chunk[..n]);
                            buf.extend_from_slice(&chunk[..n]);
                        }
                    }
                }
            });
        }
    });
    (port, seen, received)
}

/// Sends `pieces` through `stream` a little apart (a child may send a request a byte at a
/// time), then returns what came back within 2 s.
async fn drip(stream: &mut TcpStream, pieces: &[&[u8]]) -> String {
    for piece in pieces {
        stream.write_all(piece).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(2), stream.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).to_string()
}

// guarantee: G-KERN-07
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_tunnel_asks_the_allowed_address_only_for_allowed_names() {
    // Through a tunnel that does not open with TLS, an HTTP request names its site in the clear,
    // in its Host header (or its target): an address that serves many names answers for the one
    // asked, so a child allowed one site of a shared host could otherwise reach every other one
    // (and leave what it likes in their logs, in a path or a query).
    let (front, seen, received) = many_names_server().await;
    let (port, _session) = proxy(&format!("127.0.0.1:{front}")).await;
    let allowed = format!("127.0.0.1:{front}");
    let hostile: Vec<Vec<Vec<u8>>> = vec![
        vec![b"GET / HTTP/1.1\r\nHost: evil.example\r\n\r\n".to_vec()],
        // An empty line first, which servers skip.
        vec![b"\r\nGET / HTTP/1.1\r\nHost: evil.example\r\n\r\n".to_vec()],
        // A byte at a time at first: the first read holds no whole line.
        vec![
            b"G".to_vec(),
            b"ET /x?leak=1 HTTP/1.1\r\n".to_vec(),
            b"Host: evil.example\r\n\r\n".to_vec(),
        ],
        // The target in absolute form names the site, whatever Host says.
        vec![format!("GET http://evil.example/ HTTP/1.1\r\nHost: {allowed}\r\n\r\n").into_bytes()],
        // Methods in lower case, and an extension method.
        vec![b"get / HTTP/1.1\r\nHost: evil.example\r\n\r\n".to_vec()],
        vec![b"PROPFIND / HTTP/1.1\r\nHost: evil.example\r\n\r\n".to_vec()],
        // A line ended by a bare CR, which a lenient server may take for a line's end.
        vec![b"GET / HTTP/1.1\rHost: evil.example\r\r\x00".to_vec()],
        // An allowed first request, then another site on the same tunnel.
        vec![
            format!("GET / HTTP/1.1\r\nHost: {allowed}\r\n\r\n").into_bytes(),
            b"GET /second HTTP/1.1\r\nHost: evil.example\r\n\r\n".to_vec(),
        ],
    ];
    for pieces in &hostile {
        let mut stream = tunnel_to(port, "127.0.0.1", front).await;
        let pieces: Vec<&[u8]> = pieces.iter().map(Vec::as_slice).collect();
        let out = drip(&mut stream, &pieces).await;
        assert!(!out.contains("site evil"), "{pieces:?} -> {out:?}");
    }
    let names = seen.lock().unwrap().clone();
    assert!(
        names.iter().all(|n| n == &allowed),
        "the address was asked for another site: {names:?}"
    );
    let bytes = String::from_utf8_lossy(&received.lock().unwrap()).to_string();
    assert!(
        !bytes.contains("evil"),
        "the other site's name reached the address: {bytes:?}"
    );
    // What the tunnel's target may be asked still goes through, on one tunnel, twice.
    let mut stream = tunnel_to(port, "127.0.0.1", front).await;
    let first = format!("GET / HTTP/1.1\r\nHost: {allowed}\r\n\r\n");
    let second = format!("GET /again HTTP/1.1\r\nHost: {allowed}\r\nConnection: close\r\n\r\n");
    let out = drip(&mut stream, &[first.as_bytes(), second.as_bytes()]).await;
    assert_eq!(
        out.matches(&format!("site {allowed}")).count(),
        2,
        "{out:?}"
    );
    // A client that shuts its side once its request is written still gets the answer.
    let mut stream = tunnel_to(port, "127.0.0.1", front).await;
    stream.write_all(first.as_bytes()).await.unwrap();
    stream.shutdown().await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(2), stream.read_to_end(&mut out)).await;
    let out = String::from_utf8_lossy(&out);
    assert!(out.ends_with(&format!("site {allowed}")), "{out:?}");
}

/// `hello` with one more extension, of type `kind`, holding `body`: the lengths of the
/// extensions, the message and the record are mended to fit.
fn with_extension(hello: &[u8], kind: u16, body: &[u8]) -> Vec<u8> {
    // Record header (5), message type and length (4), version and random (34).
    let mut at = 5 + 4 + 34;
    at += 1 + usize::from(hello[at]);
    at += 2 + usize::from(u16::from_be_bytes([hello[at], hello[at + 1]]));
    at += 1 + usize::from(hello[at]);
    let extensions = u16::from_be_bytes([hello[at], hello[at + 1]]);
    let added = 4 + body.len();
    let mut out = hello.to_vec();
    out.splice(at..at + 2, (extensions + added as u16).to_be_bytes());
    let end = at + 2 + usize::from(extensions);
    let mut extension = kind.to_be_bytes().to_vec();
    extension.extend_from_slice(&(body.len() as u16).to_be_bytes());
    extension.extend_from_slice(body);
    out.splice(end..end, extension);
    let message = out.len() - 9;
    out[6..9].copy_from_slice(&(message as u32).to_be_bytes()[1..]);
    let record = out.len() - 5;
    out[3..5].copy_from_slice(&(record as u16).to_be_bytes());
    out
}

// guarantee: G-KERN-07
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_hello_that_hides_its_name_is_refused() {
    // With Encrypted Client Hello the name in the clear is a cover, and the front routes by the
    // name encrypted to it: an outer name the personality allows could carry any other.
    // The server records every byte it gets: nothing of a refused hello may reach it.
    let (allowed, _, received) = many_names_server().await;
    let (port, _session) = proxy(&format!("localhost:{allowed}")).await;
    let plain = client_hello("localhost");
    // The outer ClientHello's `encrypted_client_hello` (0xfe0d): type outer, a cipher suite, a
    // config id, an encapsulated key and a payload; and the draft's `encrypted_server_name`
    // (0xffce).
    let mut ech = vec![0u8, 0x00, 0x01, 0x00, 0x01, 0x2a, 0x00, 0x20];
    ech.extend_from_slice(&[7u8; 32]);
    ech.extend_from_slice(&[0x00, 0x40]);
    ech.extend_from_slice(&[9u8; 64]);
    for hidden in [
        with_extension(&plain, 0xfe0d, &ech),
        with_extension(&plain, 0xffce, &[1u8; 40]),
    ] {
        let refused = through_tunnel(port, "localhost", allowed, &hidden).await;
        assert_eq!(refused, "", "the tunnel answered");
        assert!(
            received.lock().unwrap().is_empty(),
            "a ClientHello that hides its name reached the server"
        );
    }
    // The same hello with another extension of no such kind still goes through, whole.
    let other = with_extension(&plain, 0x0017, &[]);
    through_tunnel(port, "localhost", allowed, &other).await;
    assert_eq!(*received.lock().unwrap(), other);
}

// guarantee: G-KERN-07
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_tunnel_carries_that_is_not_a_request_still_goes_through() {
    // A server that speaks first (SMTP, FTP, a database's greeting): its greeting reaches the
    // child before the child has said anything, and the child's answer reaches the server.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let greeting = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                stream.write_all(b"220 mail ready\r\n").await.unwrap();
                let mut line = [0u8; 64];
                let n = stream.read(&mut line).await.unwrap_or(0);
                let _ = stream
                    .write_all(
                        format!("250 got {}", String::from_utf8_lossy(&line[..n])).as_bytes(),
                    )
                    .await;
            });
        }
    });
    let (port, _session) = proxy(&format!("127.0.0.1:{greeting}")).await;
    // The tunnel's head is read a byte at a time: the greeting may follow it in one read.
    let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let connect = format!("CONNECT 127.0.0.1:{greeting} HTTP/1.1\r\nHost: x\r\n\r\n");
    stream.write_all(connect.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        stream.read_exact(&mut byte).await.unwrap();
        head.push(byte[0]);
    }
    assert!(head.starts_with(b"HTTP/1.1 200"), "{head:?}");
    let mut hello = [0u8; 16];
    tokio::time::timeout(Duration::from_secs(5), stream.read_exact(&mut hello))
        .await
        .expect("the server's greeting never came through")
        .unwrap();
    assert_eq!(&hello, b"220 mail ready\r\n");
    stream.write_all(b"EHLO child\r\n").await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(2), stream.read_to_end(&mut out)).await;
    assert_eq!(String::from_utf8_lossy(&out), "250 got EHLO child\r\n");

    // A binary request that the server answers (a length-prefixed protocol): relayed as it is,
    // at once, though its first bytes hold no line.
    let (echo, _) = server("binary").await;
    let (port, _session) = proxy(&format!("127.0.0.1:{echo}")).await;
    let answer = through_tunnel(port, "127.0.0.1", echo, b"\x00\x05hello").await;
    assert!(answer.contains("binary"), "{answer:?}");
    // Text that is no request line, ended: relayed as it is.
    let answer = through_tunnel(port, "127.0.0.1", echo, b"SSH-2.0-OpenSSH_9.6\r\n").await;
    assert!(answer.contains("binary"), "{answer:?}");
}

// guarantee: G-KERN-07
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_line_held_back_is_refused_not_relayed() {
    // A child that sends the start of a request line and waits, to have it relayed unread and
    // send the rest (and another site's name) after: the tunnel ends instead.
    let (front, _, received) = many_names_server().await;
    let (port, _session) = proxy(&format!("127.0.0.1:{front}")).await;
    let mut stream = tunnel_to(port, "127.0.0.1", front).await;
    stream.write_all(b"GET /x HTTP/1.1").await.unwrap();
    let started = std::time::Instant::now();
    let mut out = Vec::new();
    let ended = tokio::time::timeout(Duration::from_secs(15), stream.read_to_end(&mut out)).await;
    assert!(ended.is_ok(), "the tunnel stayed open");
    assert!(
        started.elapsed() >= Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    // Too late: nothing more goes through.
    let _ = stream.write_all(b"\r\nHost: evil.example\r\n\r\n").await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        received.lock().unwrap().is_empty(),
        "the held-back line was relayed"
    );
}

// guarantee: G-KERN-07
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_closes_a_kept_alive_connection_closes_the_tunnel() {
    // A server closes an idle kept-alive connection when it likes; a client then sees its
    // connection end and sends its next request on a new one. Through a tunnel served as HTTP
    // the child must see the same, not an error answer for a request it would have resent.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port_up = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf).await;
                let _ = stream
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                    .await;
                // Closed after a pause, as an idle connection is.
                tokio::time::sleep(Duration::from_millis(100)).await;
            });
        }
    });
    let (port, _session) = proxy(&format!("127.0.0.1:{port_up}")).await;
    let mut stream = tunnel_to(port, "127.0.0.1", port_up).await;
    let request = format!("GET / HTTP/1.1\r\nHost: 127.0.0.1:{port_up}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = vec![0u8; 512];
    let mut got = Vec::new();
    while !got.ends_with(b"ok") {
        let n = stream.read(&mut answer).await.unwrap();
        assert!(n > 0, "{got:?}");
        got.extend_from_slice(&answer[..n]);
    }
    // The server has closed its side: the tunnel ends without another word.
    let mut rest = Vec::new();
    let ended = tokio::time::timeout(Duration::from_secs(2), stream.read_to_end(&mut rest)).await;
    assert!(
        ended.is_ok(),
        "the tunnel stayed open after the server closed"
    );
    assert!(rest.is_empty(), "{:?}", String::from_utf8_lossy(&rest));
}

/// A TLS server of OpenSSL's (python's `ssl` module) serving two names at one address, as a
/// shared front does: `localhost` and `evil.example`, each with a certificate and context of
/// its own, chosen by the name each ClientHello asks for. It prints `asked <name>` for every
/// ClientHello's name and `ended` when a connection's handshake ends, one line each. With
/// `postgres` as its first argument it is a PostgreSQL front that routes by name (as Neon's
/// does): a connection opens with an SSLRequest, answered `S`, and TLS follows.
const TWO_NAMES_SERVER: &str = "import socket, ssl, sys\n\
    postgres = sys.argv[1] == 'postgres'\n\
    contexts = {}\n\
    for name, cert, key in zip(sys.argv[2::3], sys.argv[3::3], sys.argv[4::3]):\n\
    \x20   c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)\n\
    \x20   c.load_cert_chain(cert, key)\n\
    \x20   contexts[name] = c\n\
    first = contexts['localhost']\n\
    def chosen(sslobj, name, ctx):\n\
    \x20   print('asked', name, flush=True)\n\
    \x20   if name in contexts:\n\
    \x20       sslobj.context = contexts[name]\n\
    first.sni_callback = chosen\n\
    listener = socket.create_server(('127.0.0.1', 0))\n\
    print(listener.getsockname()[1], flush=True)\n\
    while True:\n\
    \x20   conn, _ = listener.accept()\n\
    \x20   try:\n\
    \x20       if postgres and conn.makefile('rb').read(8) == bytes([0, 0, 0, 8, 4, 210, 22, 47]):\n\
    \x20           conn.sendall(b'S')\n\
    \x20       first.wrap_socket(conn, server_side=True).close()\n\
    \x20   except (OSError, ssl.SSLError):\n\
    \x20       pass\n\
    \x20   conn.close()\n\
    \x20   print('ended', flush=True)\n";

/// A server process, killed when dropped (a failing test must not leave it running).
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The lines a server prints, as they come.
type Said = std::sync::mpsc::Receiver<String>;

/// The OpenSSL server of [`TWO_NAMES_SERVER`] (`mode` its first argument), started: its
/// process, its port, the lines it prints, and the certificate it serves for `localhost`.
fn two_names_server(dir: &Path, mode: &str) -> (Killed, u16, Said, Vec<u8>) {
    use std::io::BufRead as _;
    let mut args = vec![
        "-c".to_owned(),
        TWO_NAMES_SERVER.to_owned(),
        mode.to_owned(),
    ];
    let mut root = Vec::new();
    for name in ["localhost", "evil.example"] {
        let cert = rcgen::generate_simple_self_signed(vec![name.to_owned()]).unwrap();
        if root.is_empty() {
            root = cert.cert.der().to_vec();
        }
        let (crt, key) = (
            dir.join(format!("{name}.crt")),
            dir.join(format!("{name}.key")),
        );
        std::fs::write(&crt, cert.cert.pem()).unwrap();
        std::fs::write(&key, cert.signing_key.serialize_pem()).unwrap();
        args.extend([name.to_owned(), crt.display().to_string()]);
        args.push(key.display().to_string());
    }
    let mut child = Killed(
        std::process::Command::new("/usr/bin/python3")
            .args(&args)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let (lines, said) = std::sync::mpsc::channel();
    let stdout = std::io::BufReader::new(child.0.stdout.take().unwrap());
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let port = said.recv_timeout(Duration::from_secs(10)).unwrap();
    (child, port.parse().unwrap(), said, root)
}

/// The names the server asked for on one connection, once its handshake ended.
fn asked_until_ended(said: &Said) -> Vec<String> {
    let mut lines = Vec::new();
    while let Ok(line) = said.recv_timeout(Duration::from_secs(5)) {
        if line == "ended" {
            break;
        }
        lines.push(line);
    }
    lines
}

/// A TLS 1.3 ClientHello record asking for `name`, offering X25519 with the key `share`, or
/// no key at all (`None`), which makes any server answer with a HelloRetryRequest for one.
fn hello_offering(name: &str, share: Option<[u8; 32]>) -> Vec<u8> {
    fn extension(kind: u16, body: &[u8]) -> Vec<u8> {
        let mut out = kind.to_be_bytes().to_vec();
        out.extend_from_slice(&(body.len() as u16).to_be_bytes());
        out.extend_from_slice(body);
        out
    }
    let mut sni = ((name.len() + 3) as u16).to_be_bytes().to_vec();
    sni.push(0);
    sni.extend_from_slice(&(name.len() as u16).to_be_bytes());
    sni.extend_from_slice(name.as_bytes());
    let mut shares = Vec::new();
    if let Some(key) = share {
        shares.extend_from_slice(&[0x00, 0x1d, 0x00, 0x20]);
        shares.extend_from_slice(&key);
    }
    let mut key_share = (shares.len() as u16).to_be_bytes().to_vec();
    key_share.extend_from_slice(&shares);
    let extensions = [
        extension(0, &sni),
        extension(10, &[0x00, 0x02, 0x00, 0x1d]),
        extension(13, &[0x00, 0x06, 0x08, 0x04, 0x04, 0x03, 0x04, 0x01]),
        extension(43, &[0x02, 0x03, 0x04]),
        extension(51, &key_share),
    ]
    .concat();
    let mut body = vec![0x03, 0x03];
    body.extend_from_slice(&[1u8; 32]);
    body.push(32);
    body.extend_from_slice(&[3u8; 32]);
    body.extend_from_slice(&[0x00, 0x02, 0x13, 0x01, 0x01, 0x00]);
    body.extend_from_slice(&(extensions.len() as u16).to_be_bytes());
    body.extend_from_slice(&extensions);
    let mut record = vec![0x16, 0x03, 0x01];
    record.extend_from_slice(&((body.len() + 4) as u16).to_be_bytes());
    record.push(1);
    record.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
    record.extend_from_slice(&body);
    record
}

/// The `random` of a HelloRetryRequest (RFC 8446, 4.1.3).
const RETRY_RANDOM: [u8; 32] = [
    0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91,
    0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
];

/// What `stream` sends within 2 s or until it closes.
async fn answer_of(stream: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let until = tokio::time::Instant::now() + Duration::from_secs(2);
    while let Ok(Ok(n)) = tokio::time::timeout_at(until, stream.read(&mut buf)).await {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
        // A ServerHello's head is enough to tell what it is.
        if out.len() >= 5 + 4 + 2 + 32 {
            break;
        }
    }
    out
}

// guarantee: G-KERN-07
/// A TLS 1.3 server that answers a ClientHello with a HelloRetryRequest reads a second one,
/// and OpenSSL's takes the name the second asks for (openssl/openssl#32472): a child that asked
/// for an allowed name first and another second reached the other name's context at the
/// allowed address, past a proxy that read only the first. Against a real OpenSSL server with
/// two names: the second ClientHello, after the change_cipher_spec a client in compatibility
/// mode sends first, must ask for an allowed name too, or the tunnel ends before the server
/// sees it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_client_hello_after_a_retry_asks_for_an_allowed_name_only() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, target, said, _) = two_names_server(dir.path(), "tls");
    let (port, _session) = proxy(&format!("localhost:{target}")).await;
    let change_cipher_spec = [0x14, 0x03, 0x03, 0x00, 0x01, 0x01];
    for (second, reached) in [("evil.example", false), ("localhost", true)] {
        let mut stream = tunnel_to(port, "localhost", target).await;
        stream
            .write_all(&hello_offering("localhost", None))
            .await
            .unwrap();
        let retry = answer_of(&mut stream).await;
        assert!(
            retry.len() >= 43 && retry[..6] == [0x16, 0x03, 0x03, retry[3], retry[4], 2],
            "no ServerHello: {retry:02x?}"
        );
        assert_eq!(retry[11..43], RETRY_RANDOM, "not a HelloRetryRequest");
        let mut next = change_cipher_spec.to_vec();
        next.extend_from_slice(&hello_offering(second, Some([9u8; 32])));
        stream.write_all(&next).await.unwrap();
        let answer = answer_of(&mut stream).await;
        drop(stream);
        let lines = asked_until_ended(&said);
        let asked_second = lines.contains(&format!("asked {second}")) && lines.len() == 2;
        assert_eq!(asked_second, reached, "{second}: the server saw {lines:?}");
        assert!(
            lines.starts_with(&["asked localhost".to_owned()]),
            "{lines:?}"
        );
        // Let through, the server goes on with its ServerHello; refused, the tunnel ends.
        let server_hello = answer.len() >= 43 && answer[5] == 2 && answer[11..43] != RETRY_RANDOM;
        assert_eq!(server_hello, reached, "{second}: {answer:02x?}");
    }
    // A real client asked to retry (rustls offers X25519 first; this server takes P-256 only)
    // completes its handshake through the tunnel, its second ClientHello let through.
    let mut provider = rustls::crypto::ring::default_provider();
    provider.kx_groups = vec![rustls::crypto::ring::kx_group::SECP256R1];
    let (target, handshakes, root) = tls_server_of(tls_material_with(provider)).await;
    let (port, _session) = proxy(&format!("localhost:{target}")).await;
    assert_eq!(
        tls_through(port, target, "localhost", &root)
            .await
            .as_deref(),
        Ok("hello over tls\n")
    );
    assert_eq!(handshakes.load(Ordering::SeqCst), 1);
}

// guarantee: G-KERN-07
/// A PostgreSQL client asks the server to start TLS (an SSLRequest, answered `S`) and then
/// sends its ClientHello, whose name a front that serves many databases at one address routes
/// by (Neon picks the endpoint by it): a proxy that took the request for a protocol it relays
/// as bytes let a child allowed one endpoint reach another through its address. The ClientHello
/// after the server's `S` is read and decided on as a tunnel's first one is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_hello_after_a_postgres_ssl_request_asks_for_an_allowed_name_only() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, target, said, root) = two_names_server(dir.path(), "postgres");
    let (port, _session) = proxy(&format!("localhost:{target}")).await;
    for (name, reached) in [("evil.example", false), ("localhost", true)] {
        let mut stream = tunnel_to(port, "localhost", target).await;
        // The request a byte at a time: read whole all the same.
        for byte in [0u8, 0, 0, 8, 4, 210, 22, 47] {
            stream.write_all(&[byte]).await.unwrap();
        }
        let mut answer = [0u8; 1];
        stream.read_exact(&mut answer).await.unwrap();
        assert_eq!(&answer, b"S");
        let connector = tokio_rustls::TlsConnector::from(client_config(Some(&root)));
        let server_name = rustls::pki_types::ServerName::try_from(name.to_owned()).unwrap();
        let handshake = tokio::time::timeout(
            Duration::from_secs(5),
            connector.connect(server_name, stream),
        )
        .await
        .unwrap();
        assert_eq!(handshake.is_ok(), reached, "{name}: {:?}", handshake.err());
        drop(handshake);
        let lines = asked_until_ended(&said);
        assert_eq!(
            lines,
            [format!("asked {name}")][..usize::from(reached)],
            "{name}: what the server was asked"
        );
    }
}
