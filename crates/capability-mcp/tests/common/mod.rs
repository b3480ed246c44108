//! A raw JSON-RPC peer over an in-memory pipe to a real `McpServer` with the standard tools and
//! their real backends: what a client sends, byte for byte, and what comes back.
#![allow(
    clippy::disallowed_methods,
    reason = "the test harness builds fixture files and reads /proc"
)]
#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use capability_core::{CompiledPolicy, MemoryAuditSink, PolicyFormat};
use capability_mcp::McpServer;
use capability_tools::{StandardConfig, Store, standard_registry};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, ReadHalf, WriteHalf};

/// A scratch directory: `work/` (the reach) with `notes.md`, and `canary.txt` outside it.
pub struct Scratch {
    pub dir: tempfile::TempDir,
    pub work: PathBuf,
    pub canary: PathBuf,
}

pub const CANARY: &str = "canary-7d1f3c-do-not-leak";

impl Scratch {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let work = root.join("work");
        std::fs::create_dir(&work).unwrap();
        std::fs::write(work.join("notes.md"), "hello from notes\n").unwrap();
        let canary = root.join("canary.txt");
        std::fs::write(&canary, CANARY).unwrap();
        Self { dir, work, canary }
    }

    /// A personality with read and write reach on `work/`, writes under `work/ask/` escalated,
    /// and `sleep` allowed.
    pub fn policy(&self) -> CompiledPolicy {
        let w = self.work.display();
        let text = format!(
            r#"id = "mcp-test"
toolset = ["read_file", "write_file", "list_dir", "run_command", "kv_get", "kv_set"]
[fs_reach]
read = ["{w}"]
write = ["{w}"]
[safety.process]
allow = ["sleep"]
[escalate]
write_paths = ["{w}/ask"]
"#
        );
        CompiledPolicy::load(&text, PolicyFormat::Toml, None).unwrap()
    }
}

/// A server over the standard tools with an in-memory store and audit sink.
pub async fn server(scratch: &Scratch) -> (McpServer, Arc<MemoryAuditSink>) {
    let audit = Arc::new(MemoryAuditSink::new());
    let registry = standard_registry(StandardConfig::new(Store::Memory))
        .await
        .unwrap()
        .with_audit_sink(audit.clone());
    let server = McpServer::new(registry, Arc::new(scratch.policy()), &scratch.work)
        .with_progress_interval(Duration::from_millis(50));
    (server, audit)
}

/// The client end of one session.
pub struct Raw {
    reader: BufReader<ReadHalf<DuplexStream>>,
    writer: WriteHalf<DuplexStream>,
    pub task: tokio::task::JoinHandle<Result<(), capability_mcp::ServeError>>,
}

impl Raw {
    /// Starts a session of `server` on a pipe.
    pub fn connect(server: &McpServer) -> Self {
        let (client, server_end) = tokio::io::duplex(1 << 20);
        let server = server.clone();
        let task =
            tokio::spawn(async move { server.serve_transport(tokio::io::split(server_end)).await });
        let (reader, writer) = tokio::io::split(client);
        Self {
            reader: BufReader::new(reader),
            writer,
            task,
        }
    }

    /// Starts a session and completes the handshake (protocol 2025-11-25), with elicitation
    /// declared or not.
    pub async fn initialized(server: &McpServer, elicitation: bool) -> Self {
        let mut raw = Self::connect(server);
        let capabilities = if elicitation {
            json!({"elicitation": {"form": {}}})
        } else {
            json!({})
        };
        raw.send(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": capabilities,
            "clientInfo": {"name": "raw-test", "version": "1"}}}),
        )
        .await;
        let init = raw.recv().await.expect("an initialize response");
        assert_eq!(init["result"]["serverInfo"]["name"], "toolcap", "{init}");
        raw.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        raw
    }

    pub async fn send(&mut self, message: Value) {
        self.send_line(&message.to_string()).await;
    }

    pub async fn send_line(&mut self, line: &str) {
        self.writer.write_all(line.as_bytes()).await.unwrap();
        self.writer.write_all(b"\n").await.unwrap();
        self.writer.flush().await.unwrap();
    }

    /// One line of `prefix`, `count` copies of `chunk`, `suffix`, written piece by piece.
    pub async fn send_streamed(
        &mut self,
        prefix: &[u8],
        chunk: &[u8],
        count: usize,
        suffix: &[u8],
    ) {
        self.writer.write_all(prefix).await.unwrap();
        for _ in 0..count {
            self.writer.write_all(chunk).await.unwrap();
        }
        self.writer.write_all(suffix).await.unwrap();
        self.writer.write_all(b"\n").await.unwrap();
        self.writer.flush().await.unwrap();
    }

    /// Closes the client's writing side (the server sees end of input).
    pub async fn close(&mut self) {
        self.writer.shutdown().await.unwrap();
    }

    /// The next message, or `None` when the server closed or said nothing for 20 s.
    pub async fn recv(&mut self) -> Option<Value> {
        let mut line = String::new();
        match tokio::time::timeout(Duration::from_secs(20), self.reader.read_line(&mut line)).await
        {
            Ok(Ok(n)) if n > 0 => Some(serde_json::from_str(&line).expect("the server sent JSON")),
            _ => None,
        }
    }

    /// The response to request `id`, collecting whatever else arrives before it.
    pub async fn response(&mut self, id: i64) -> (Value, Vec<Value>) {
        let mut other = Vec::new();
        loop {
            let message = self.recv().await.expect("a response");
            if message["id"] == json!(id) && message.get("method").is_none() {
                return (message, other);
            }
            other.push(message);
        }
    }

    /// A `ping` and its empty answer: the session is alive. Returns whatever arrived before
    /// the answer.
    pub async fn ping(&mut self, id: i64) -> Vec<Value> {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "ping"}))
            .await;
        let (pong, before) = self.response(id).await;
        assert_eq!(pong["result"], json!({}), "{pong}");
        before
    }

    /// Sends a `tools/call` without waiting for its answer.
    pub async fn call_no_wait(&mut self, id: i64, tool: &str, args: Value) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": args}}))
            .await;
    }

    /// Calls a tool and returns the response and everything that arrived before it.
    pub async fn call(&mut self, id: i64, tool: &str, args: Value) -> (Value, Vec<Value>) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": args}}))
            .await;
        self.response(id).await
    }
}

/// Whether `check` holds within 10 s, asked every 10 ms: for what the server records after the
/// answer the test waited for (the audit record of a call that was not answered, or was
/// cancelled).
pub async fn eventually(mut check: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !check() {
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    true
}

/// The text of a tool result.
pub fn text(response: &Value) -> String {
    response["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Pids of live processes whose command line contains `needle`.
pub fn processes_with(needle: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let state = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let zombie = state
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
        if cmdline.contains(needle) && !zombie {
            found.push(pid);
        }
    }
    found
}

pub fn exists(path: &Path) -> bool {
    path.exists()
}
