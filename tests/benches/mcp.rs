//! A `read_file` round trip through toolcap's MCP server against the same tool served by a bare
//! `rmcp` server that checks nothing, in the same run, over the same in-memory pipe and the same
//! client (docs/mcp.md; docs/benchmarks.md, "MCP"); and the same two over Streamable HTTP on
//! loopback, stateless 2026-07-28 requests on one kept-alive connection each, as an HTTP client
//! library sends them.
//!
//! With `TOOLCAP_MCP_COUNT=<bare|toolcap>:<calls>` it makes that many calls of one server and
//! stops, without criterion: for counting a call's instructions under callgrind.
#![allow(
    missing_docs,
    clippy::disallowed_methods,
    reason = "the bare baseline reads the file directly, as an unchecked MCP server does"
)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use capability_core::{CompiledPolicy, PolicyFormat};
use capability_mcp::{HttpOptions, McpServer};
use capability_tools::{StandardConfig, Store, standard_registry};
use criterion::{Criterion, criterion_group, criterion_main};

#[path = "support/paired.rs"]
mod paired;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt as _};
use serde_json::json;
use tokio::io::{
    AsyncBufReadExt, AsyncReadExt as _, AsyncWriteExt, BufReader, DuplexStream, ReadHalf, WriteHalf,
};
use tokio::net::TcpStream;

/// An MCP server with one tool, `read_file`, that reads what it is asked to: no declaration, no
/// policy, no audit. What toolcap is compared with.
#[derive(Clone)]
struct Bare {
    root: PathBuf,
}

impl ServerHandler for Bare {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut tool = Tool::default();
        tool.name = "read_file".into();
        tool.input_schema = Arc::new(serde_json::Map::new());
        Ok(ListToolsResult::with_all_items(vec![tool]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let path = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("path"))
            .and_then(|p| p.as_str())
            .unwrap_or_default();
        // The cheapest read there is: a blocking 4 KiB read on the runtime thread (no
        // spawn_blocking hop, which `tokio::fs` would add and which would flatter toolcap).
        let text = std::fs::read_to_string(self.root.join(path))
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
    }
}

/// A client that makes one `read_file` call of its server.
trait ReadFile {
    async fn read_file(&mut self);
}

/// `iters` calls of `timed`, each after an untimed call of `other`, so both servers are measured
/// under the same machine conditions at the same moments; the time of the timed calls.
fn interleaved(
    rt: &tokio::runtime::Runtime,
    timed: &mut impl ReadFile,
    other: &mut impl ReadFile,
    iters: u64,
) -> Duration {
    rt.block_on(async {
        let mut spent = Duration::ZERO;
        for _ in 0..iters {
            other.read_file().await;
            let start = Instant::now();
            timed.read_file().await;
            spent += start.elapsed();
        }
        spent
    })
}

/// `n` calls of `client`, one after another.
fn calls(rt: &tokio::runtime::Runtime, client: &mut impl ReadFile, n: u64) {
    rt.block_on(async {
        for _ in 0..n {
            client.read_file().await;
        }
    });
}

/// toolcap's server of `read_file` under a personality that reads `root`, as the command line
/// makes it: the home directory is known, so the deny floor is exact (without one, every path
/// is scanned for `.ssh`, `.aws` and the like).
async fn toolcap_server(root: &Path) -> McpServer {
    let policy = CompiledPolicy::load(
        &format!(
            "id = \"bench\"\ntoolset = [\"read_file\"]\n[fs_reach]\nread = [\"{}\"]\n",
            root.display()
        ),
        PolicyFormat::Toml,
        Some(Path::new("/home/bench")),
    )
    .unwrap();
    let registry = standard_registry(StandardConfig::new(Store::Memory))
        .await
        .unwrap();
    McpServer::new(registry, Arc::new(policy), root)
}

/// The client end: writes one `tools/call` line, reads one response line.
struct Client {
    reader: BufReader<ReadHalf<DuplexStream>>,
    writer: WriteHalf<DuplexStream>,
    line: String,
    next: u64,
}

impl Client {
    async fn connect(server: DuplexStream) -> Self {
        let (reader, writer) = tokio::io::split(server);
        let mut client = Self {
            reader: BufReader::new(reader),
            writer,
            line: String::new(),
            next: 1,
        };
        client
            .send(
                &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"}}}),
            )
            .await;
        client.recv().await;
        client
            .send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        client
    }

    async fn send(&mut self, message: &serde_json::Value) {
        let mut line = message.to_string();
        line.push('\n');
        self.writer.write_all(line.as_bytes()).await.unwrap();
    }

    async fn recv(&mut self) -> &str {
        self.line.clear();
        self.reader.read_line(&mut self.line).await.unwrap();
        &self.line
    }
}

impl ReadFile for Client {
    async fn read_file(&mut self) {
        let id = self.next;
        self.next += 1;
        let request = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"read_file\",\"arguments\":{{\"path\":\"q3.txt\"}}}}}}\n"
        );
        self.writer.write_all(request.as_bytes()).await.unwrap();
        let answer = self.recv().await;
        assert!(answer.contains("\"isError\":false"), "{answer}");
    }
}

/// A client of one MCP endpoint over HTTP/1.1: one connection, kept alive, that sends each
/// `tools/call` as a stateless 2026-07-28 request and reads its answer whole.
struct HttpClient {
    stream: BufReader<TcpStream>,
    request: Vec<u8>,
    answer: Vec<u8>,
}

impl HttpClient {
    async fn connect(addr: std::net::SocketAddr) -> Self {
        let stream = TcpStream::connect(addr).await.unwrap();
        // As client libraries set it: the request goes out at once, whatever the server does.
        stream.set_nodelay(true).unwrap();
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "read_file", "arguments": {"path": "q3.txt"}, "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}}}})
        .to_string();
        let request = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nMcp-Protocol-Version: 2026-07-28\r\n\
             Mcp-Method: tools/call\r\nMcp-Name: read_file\r\nContent-Length: {}\r\n\r\n{body}",
            addr.port(),
            body.len()
        );
        Self {
            stream: BufReader::new(stream),
            request: request.into_bytes(),
            answer: Vec::new(),
        }
    }
}

impl ReadFile for HttpClient {
    /// One `read_file`: the request, then the answer's head and its body (chunked or with a
    /// length) read to their end.
    async fn read_file(&mut self) {
        self.stream
            .get_mut()
            .write_all(&self.request)
            .await
            .unwrap();
        self.answer.clear();
        let mut length = None;
        let mut chunked = false;
        let mut line = String::new();
        loop {
            line.clear();
            self.stream.read_line(&mut line).await.unwrap();
            let lower = line.to_ascii_lowercase();
            if let Some(n) = lower.strip_prefix("content-length:") {
                length = n.trim().parse::<usize>().ok();
            }
            chunked |= lower.starts_with("transfer-encoding:") && lower.contains("chunked");
            if line == "\r\n" || line.is_empty() {
                break;
            }
        }
        if chunked {
            loop {
                line.clear();
                self.stream.read_line(&mut line).await.unwrap();
                let size = usize::from_str_radix(line.trim(), 16).unwrap();
                let start = self.answer.len();
                self.answer.resize(start + size + 2, 0);
                self.stream
                    .read_exact(&mut self.answer[start..])
                    .await
                    .unwrap();
                self.answer.truncate(start + size);
                if size == 0 {
                    break;
                }
            }
        } else {
            let n = length.expect("a length or chunks");
            self.answer.resize(n, 0);
            self.stream.read_exact(&mut self.answer).await.unwrap();
        }
        let text = String::from_utf8_lossy(&self.answer);
        assert!(text.contains("\"isError\":false"), "{text}");
    }
}

/// The bare server over Streamable HTTP: rmcp's own service, on a loopback port, each
/// connection without Nagle's algorithm (as a server that answers in several writes must be);
/// its address.
async fn bare_over_http(root: PathBuf) -> std::net::SocketAddr {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    let service = StreamableHttpService::new(
        move || Ok(Bare { root: root.clone() }),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            stream.set_nodelay(true).unwrap();
            let service = service.clone();
            tokio::spawn(async move {
                let handler = hyper::service::service_fn(move |request| {
                    let service = service.clone();
                    async move { Ok::<_, std::convert::Infallible>(service.handle(request).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), handler)
                    .await;
            });
        }
    });
    addr
}

fn mcp(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap().join("data");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("q3.txt"), "x".repeat(4096)).unwrap();
    // One thread for client and server alike: the comparison is of the work each server does
    // per call, not of how two worker threads happen to be scheduled on a shared machine.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();

    let (mut bare, mut toolcap) = rt.block_on(async {
        let (client_end, server_end) = tokio::io::duplex(1 << 16);
        let bare_server = Bare { root: root.clone() };
        tokio::spawn(async move {
            let running = bare_server.serve(server_end).await.unwrap();
            let _ = running.waiting().await;
        });
        let bare = Client::connect(client_end).await;

        let server = toolcap_server(&root).await;
        let (client_end, server_end) = tokio::io::duplex(1 << 16);
        tokio::spawn(async move {
            let _ = server.serve_transport(server_end).await;
        });
        let toolcap = Client::connect(client_end).await;
        (bare, toolcap)
    });
    let (mut bare_http, mut toolcap_http) = rt.block_on(async {
        let bare = HttpClient::connect(bare_over_http(root.clone()).await).await;
        let server = toolcap_server(&root).await;
        let bound = server
            .bind_http(HttpOptions::loopback("127.0.0.1:0".parse().unwrap()))
            .await
            .unwrap();
        let addr = bound.local_addr().unwrap();
        tokio::spawn(bound.run());
        let toolcap = HttpClient::connect(addr).await;
        (bare, toolcap)
    });

    // `TOOLCAP_MCP_COUNT=<bare|toolcap>:<calls>`: that many calls of one server and nothing
    // else, to count its instructions per call under callgrind (two counts, their difference).
    if let Ok(spec) = std::env::var("TOOLCAP_MCP_COUNT") {
        let (side, n) = spec
            .split_once(':')
            .and_then(|(side, n)| Some((side, n.parse::<u64>().ok()?)))
            .unwrap_or_else(|| {
                panic!("TOOLCAP_MCP_COUNT={spec:?}: expected <bare|toolcap>:<calls>")
            });
        let client = match side {
            "bare" => &mut bare,
            "toolcap" => &mut toolcap,
            other => panic!("TOOLCAP_MCP_COUNT: no server {other:?}; bare or toolcap"),
        };
        calls(&rt, client, n);
        return;
    }
    // Paired: every timed call of one server follows an untimed call of the other, so both are
    // measured under the same machine conditions at the same moments (this machine's timings
    // drift by tens of percent from one second to the next).
    let mut group = c.benchmark_group("mcp");
    group.bench_function("bare_read_file", |b| {
        b.iter_custom(|iters| interleaved(&rt, &mut bare, &mut toolcap, iters))
    });
    group.bench_function("toolcap_read_file", |b| {
        b.iter_custom(|iters| interleaved(&rt, &mut toolcap, &mut bare, iters))
    });
    // Over HTTP, paired call by call in the same way.
    group.bench_function("bare_http_read_file", |b| {
        b.iter_custom(|iters| interleaved(&rt, &mut bare_http, &mut toolcap_http, iters))
    });
    group.bench_function("toolcap_http_read_file", |b| {
        b.iter_custom(|iters| interleaved(&rt, &mut toolcap_http, &mut bare_http, iters))
    });
    group.finish();

    // The budgeted ratio, timed paired as well (docs/benchmarks.md, "Paired budgets"): here in
    // rounds of many calls, beside the call-by-call interleaving above.
    if paired::measuring() {
        paired::Rows::default()
            .pair(
                ("mcp/toolcap_read_file", "mcp/bare_read_file"),
                (&mut |n| calls(&rt, &mut toolcap, n), 1),
                (&mut |n| calls(&rt, &mut bare, n), 1),
            )
            .pair(
                ("mcp/toolcap_http_read_file", "mcp/bare_http_read_file"),
                (&mut |n| calls(&rt, &mut toolcap_http, n), 1),
                (&mut |n| calls(&rt, &mut bare_http, n), 1),
            )
            .write("mcp-paired.json");
    }
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
}

criterion_group! { name = benches; config = config(); targets = mcp }
criterion_main!(benches);
