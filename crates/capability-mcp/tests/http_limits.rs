//! What one HTTP endpoint keeps for its clients is bounded: sessions, connections, and how long
//! a connection may sit without sending a request (docs/mcp.md, "HTTP"). Anyone who can reach
//! the port (on loopback, every local account unless a token is required) could otherwise open
//! sessions until the server's memory runs out, or hold connections until its descriptors do.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use capability_mcp::HttpOptions;
use common::{Scratch, server};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

/// A raw HTTP/1.1 exchange: the status, the headers (names lower-cased) and the body.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Sends `method /mcp` with `headers` and `body` on a connection of its own, and reads the
/// answer to its end (the connection is closed after it).
async fn exchange(addr: SocketAddr, method: &str, headers: &[(&str, &str)], body: &str) -> Answer {
    let mut request = format!(
        "{method} /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        addr.port(),
        body.len()
    );
    if !headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("content-type"))
    {
        request.push_str("Content-Type: application/json\r\n");
    }
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut raw))
        .await
        .expect("an answer within 20 s")
        .unwrap();
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status in {raw:?}"));
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Answer {
        status,
        headers,
        body: body.to_owned(),
    }
}

fn initialize() -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}})
    .to_string()
}

/// Opens a session with a handshake; its id.
async fn open_session(addr: SocketAddr) -> String {
    let opened = exchange(addr, "POST", &[], &initialize()).await;
    assert_eq!(opened.status, 200, "{}", opened.body);
    opened
        .header("mcp-session-id")
        .expect("a session id")
        .to_owned()
}

/// Serves `options` (on 127.0.0.1:0) until the test ends; its address.
async fn serving(scratch: &Scratch, options: HttpOptions) -> SocketAddr {
    let (server, _) = server(scratch).await;
    let bound = server.bind_http(options).await.unwrap();
    let addr = bound.local_addr().unwrap();
    tokio::spawn(bound.run());
    addr
}

fn loopback() -> HttpOptions {
    HttpOptions::loopback("127.0.0.1:0".parse().unwrap())
}

// guarantee: G-MCP-10
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_past_the_limit_are_refused_until_one_ends() {
    let scratch = Scratch::new();
    let addr = serving(&scratch, loopback().with_max_sessions(3)).await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(open_session(addr).await);
    }
    // The fourth: 503, a JSON-RPC error that says why and what to do, and when to try again.
    let refused = exchange(addr, "POST", &[], &initialize()).await;
    assert_eq!(refused.status, 503, "{}", refused.body);
    assert!(
        refused.header("retry-after").is_some(),
        "{:?}",
        refused.headers
    );
    assert!(refused.header("mcp-session-id").is_none());
    let error: Value = serde_json::from_str(&refused.body).expect("a JSON-RPC error");
    assert_eq!(error["id"], 1, "{error}");
    let message = error["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("3 sessions") && message.contains("DELETE"),
        "{message}"
    );
    // A session that is already open goes on.
    let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}).to_string();
    let open = exchange(
        addr,
        "POST",
        &[
            ("Mcp-Session-Id", &ids[0]),
            ("Mcp-Protocol-Version", "2025-11-25"),
        ],
        &ping,
    )
    .await;
    assert_eq!(open.status, 200, "{}", open.body);
    // One ended by its client makes room for another.
    let closed = exchange(
        addr,
        "DELETE",
        &[
            ("Mcp-Session-Id", &ids[1]),
            ("Mcp-Protocol-Version", "2025-11-25"),
        ],
        "",
    )
    .await;
    assert!(closed.status < 300, "{} {}", closed.status, closed.body);
    let mut admitted = None;
    for _ in 0..100 {
        let again = exchange(addr, "POST", &[], &initialize()).await;
        if again.status == 200 {
            admitted = Some(again);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(admitted.is_some(), "no room after a session ended");
}

// guarantee: G-MCP-10
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_limit_holds_against_handshakes_sent_at_once() {
    let scratch = Scratch::new();
    let addr = serving(&scratch, loopback().with_max_sessions(2)).await;
    let all = futures_join(addr, 12).await;
    let opened = all.iter().filter(|a| a.status == 200).count();
    let refused = all.iter().filter(|a| a.status == 503).count();
    assert_eq!(
        (opened, refused),
        (2, 10),
        "{:?}",
        all.iter().map(|a| a.status).collect::<Vec<_>>()
    );
}

/// `n` handshakes sent together, each on its own connection.
async fn futures_join(addr: SocketAddr, n: usize) -> Vec<Answer> {
    let tasks: Vec<_> = (0..n)
        .map(|_| tokio::spawn(async move { exchange(addr, "POST", &[], &initialize()).await }))
        .collect();
    let mut answers = Vec::new();
    for task in tasks {
        answers.push(task.await.unwrap());
    }
    answers
}

// guarantee: G-MCP-10
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_sends_no_request_is_closed() {
    let scratch = Scratch::new();
    let addr = serving(
        &scratch,
        loopback().with_idle_timeout(Duration::from_millis(300)),
    )
    .await;
    // Silent from the start, and half a request head.
    let mut silent = TcpStream::connect(addr).await.unwrap();
    let mut partial = TcpStream::connect(addr).await.unwrap();
    partial
        .write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .await
        .unwrap();
    for stream in [&mut silent, &mut partial] {
        let mut buf = [0u8; 512];
        let read = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf))
            .await
            .expect("the server closes an idle connection");
        // Closed: the end of the stream, or a reset; perhaps after an error status.
        if let Ok(n) = read
            && n > 0
        {
            let said = String::from_utf8_lossy(&buf[..n]);
            assert!(said.starts_with("HTTP/1.1 4"), "{said}");
        }
    }
    // The server still serves, and a stream it is sending on (a session's event stream, which
    // carries nothing for long stretches) is not idle: it stays open past the timeout.
    let session = open_session(addr).await;
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let headers = [
        ("Mcp-Session-Id", session.as_str()),
        ("Mcp-Protocol-Version", "2025-11-25"),
    ];
    let noted = exchange(addr, "POST", &headers, &initialized.to_string()).await;
    assert!(noted.status < 300, "{}", noted.status);
    let mut events = TcpStream::connect(addr).await.unwrap();
    let get = format!(
        "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAccept: text/event-stream\r\n\
         Mcp-Session-Id: {session}\r\nMcp-Protocol-Version: 2025-11-25\r\n\r\n",
        addr.port()
    );
    events.write_all(get.as_bytes()).await.unwrap();
    let mut head = [0u8; 512];
    let n = events.read(&mut head).await.unwrap();
    assert!(
        String::from_utf8_lossy(&head[..n]).starts_with("HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&head[..n])
    );
    let quiet = tokio::time::timeout(Duration::from_millis(1500), async {
        loop {
            match events.read(&mut head).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(quiet.is_err(), "the event stream was closed as idle");
}

// guarantee: G-MCP-10
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_limit_wait_for_one_to_close() {
    let scratch = Scratch::new();
    let addr = serving(
        &scratch,
        loopback()
            .with_max_connections(2)
            .with_idle_timeout(Duration::from_secs(60)),
    )
    .await;
    let first = TcpStream::connect(addr).await.unwrap();
    let second = TcpStream::connect(addr).await.unwrap();
    // The third connects (the kernel queues it) but is not served while two are open.
    let third = tokio::spawn(async move { exchange(addr, "POST", &[], &initialize()).await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!third.is_finished(), "served past the limit");
    drop(first);
    let answer = tokio::time::timeout(Duration::from_secs(10), third)
        .await
        .expect("served once a connection closed")
        .unwrap();
    assert_eq!(answer.status, 200);
    drop(second);
}

// guarantee: G-MCP-10
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_body_over_the_limit_is_refused_unread() {
    let scratch = Scratch::new();
    let addr = serving(&scratch, loopback()).await;
    let session = open_session(addr).await;
    // Valid JSON-RPC, one byte a padding, past 4 MiB: a handshake and a request of a session.
    let padding = "x".repeat(capability_mcp::MAX_REQUEST_BYTES);
    let big =
        json!({"jsonrpc": "2.0", "id": 9, "method": "ping", "params": {"_meta": {"pad": padding}}})
            .to_string();
    let big_handshake = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "pad": padding,
        "clientInfo": {"name": "raw", "version": "1"}}})
    .to_string();
    let refused = exchange(addr, "POST", &[], &big_handshake).await;
    assert_eq!(refused.status, 413, "{}", refused.body);
    let headers = [
        ("Mcp-Session-Id", session.as_str()),
        ("Mcp-Protocol-Version", "2025-11-25"),
    ];
    let refused = exchange(addr, "POST", &headers, &big).await;
    assert_eq!(refused.status, 413, "{}", refused.body);
    // The session and the server go on.
    let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}).to_string();
    assert_eq!(exchange(addr, "POST", &headers, &ping).await.status, 200);
}

// guarantee: G-MCP-10
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_body_that_stalls_is_not_waited_for() {
    // A head in time and then a body that never comes (or comes a byte at a time): without a
    // limit, each such request holds one of the server's connections for as long as the
    // client likes.
    let scratch = Scratch::new();
    let addr = serving(
        &scratch,
        loopback().with_idle_timeout(Duration::from_millis(300)),
    )
    .await;
    let session = open_session(addr).await;
    for with_session in [false, true] {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let mut head = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: 1000\r\n",
            addr.port()
        );
        if with_session {
            head.push_str(&format!(
                "Mcp-Session-Id: {session}\r\nMcp-Protocol-Version: 2025-11-25\r\n"
            ));
        }
        head.push_str("\r\n{\"jsonrpc\":");
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut out = Vec::new();
        let ended = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut out))
            .await
            .is_ok();
        assert!(
            ended,
            "a stalled body held its connection (with a session: {with_session})"
        );
        let said = String::from_utf8_lossy(&out);
        assert!(said.starts_with("HTTP/1.1 408"), "{said}");
    }
    // The server, and the session, go on.
    let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}).to_string();
    let headers = [
        ("Mcp-Session-Id", session.as_str()),
        ("Mcp-Protocol-Version", "2025-11-25"),
    ];
    assert_eq!(exchange(addr, "POST", &headers, &ping).await.status, 200);
}

// guarantee: G-MCP-10
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handshake_written_oddly_is_counted_like_any_other() {
    // The limit's own reading of a handshake must not be one a client can slip past while the
    // SDK still takes it for `initialize`: a key given twice, an escaped method name.
    let scratch = Scratch::new();
    let addr = serving(&scratch, loopback().with_max_sessions(1)).await;
    assert_eq!(exchange(addr, "POST", &[], &initialize()).await.status, 200);
    let params = r#"{"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}"#;
    for odd in [
        format!(
            r#"{{"jsonrpc": "2.0", "id": 1, "method": "ping", "method": "initialize", "params": {params}}}"#
        ),
        format!(
            r#"{{"jsonrpc": "2.0", "id": 1, "method": "initialize", "method": "initialize", "params": {params}}}"#
        ),
        format!(
            r#"{{"jsonrpc": "2.0", "id": 1, "method": "in\u0069tialize", "params": {params}}}"#
        ),
    ] {
        let answer = exchange(addr, "POST", &[], &odd).await;
        assert!(
            answer.header("mcp-session-id").is_none(),
            "{odd}: a session past the limit ({} {})",
            answer.status,
            answer.body
        );
    }
}

/// A body that is not JSON, or JSON that is no JSON-RPC message, gets `400` and a JSON-RPC error
/// (`-32700` parse error, `-32600` invalid request) with no `id` member, as MCP's error
/// responses have it when no id could be read, with or without a session; before, such a body
/// got `415 Unsupported Media Type` and a line of plain text. A body that is not declared JSON
/// still gets `415`.
// guarantee: G-MCP-10
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_body_gets_a_json_rpc_error_with_400() {
    let scratch = Scratch::new();
    let addr = serving(&scratch, loopback()).await;
    let session = open_session(addr).await;
    let with_session = [
        ("Mcp-Session-Id", session.as_str()),
        ("Mcp-Protocol-Version", "2025-11-25"),
    ];
    for headers in [&[][..], &with_session[..]] {
        for (body, code) in [
            ("not json", -32700),
            ("{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\":", -32700),
            ("\u{feff}{]", -32700),
            ("[1, 2]", -32600),
            (
                "{\"jsonrpc\": \"2.0\", \"id\": {\"an\": \"object\"}, \"method\": \"ping\"}",
                -32600,
            ),
            ("42", -32600),
        ] {
            let answer = exchange(addr, "POST", headers, body).await;
            let session = !headers.is_empty();
            assert_eq!(
                answer.status, 400,
                "{body:?} (session {session}): {}",
                answer.body
            );
            assert_eq!(answer.header("content-type"), Some("application/json"));
            let error: Value = serde_json::from_str(&answer.body)
                .unwrap_or_else(|e| panic!("{body:?}: {e}: {}", answer.body));
            assert_eq!(error["jsonrpc"], "2.0", "{error}");
            assert!(error.get("id").is_none(), "no id could be read: {error}");
            assert_eq!(error["error"]["code"], code, "{body:?}: {error}");
            assert!(error["error"]["message"].is_string(), "{error}");
        }
    }
    let mut plain = with_session.to_vec();
    plain.push(("Content-Type", "text/plain"));
    let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}).to_string();
    assert_eq!(exchange(addr, "POST", &plain, &ping).await.status, 415);
    // The session goes on.
    assert_eq!(
        exchange(addr, "POST", &with_session, &ping).await.status,
        200
    );
}
