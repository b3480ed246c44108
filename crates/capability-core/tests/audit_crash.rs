//! Crash safety of the JSON-lines audit file: a child process runs calls through a registry whose
//! sink writes (and fsyncs) one line per event, printing each call's id once its result is back;
//! it is killed with SIGKILL at a random point. After every kill every line but a torn last one
//! is a valid event (the next open trims the torn one), and every acknowledged call's completion
//! is in it. 10 rounds in
//! `cargo test`, `TOOLCAP_CRASH_ROUNDS` (100 in `cargo xtask soak`) otherwise.
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    clippy::print_stdout,
    reason = "the test re-executes itself as the auditing child and reads the audit file"
)]

mod support;

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use capability_core::{
    AuditEvent, AuditKind, DefaultToolRegistry, ExecutionContext, FsyncPolicy, JsonLinesAuditSink,
    ToolCall,
};
use capability_types::ToolCapabilities;
use serde_json::json;
use support::{Behaviour, TestTool, policy};

const CHILD_ENV: &str = "TOOLCAP_AUDIT_CRASH_CHILD_FILE";

/// The audit file as the sink's durable writer (the host opens it; the sink has no authority).
struct AuditFile(std::fs::File);

impl Write for AuditFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

impl capability_core::DurableWrite for AuditFile {
    fn sync_data(&mut self) -> std::io::Result<()> {
        self.0.sync_data()
    }
}

/// Trims the file to its whole lines (`whole_lines_len`), as `toolcap`'s host does.
fn trim_torn_tail(file: &mut std::fs::File) {
    let text = std::fs::read(format!(
        "/proc/self/fd/{}",
        std::os::fd::AsRawFd::as_raw_fd(file)
    ))
    .unwrap();
    let whole = capability_core::whole_lines_len(&text).unwrap_or(0);
    if whole < text.len() {
        file.set_len(whole as u64).unwrap();
    }
}

/// The child: does nothing unless started by the parent test with the audit file's path.
#[tokio::test]
async fn audit_crash_child() {
    let Ok(path) = std::env::var(CHILD_ENV) else {
        return;
    };
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .open(&path)
        .unwrap();
    // As toolcap's host does when it opens an audit file: a torn last line is trimmed.
    trim_torn_tail(&mut file);
    let sink = Arc::new(JsonLinesAuditSink::with_policy(
        AuditFile(file),
        FsyncPolicy::EveryEvent,
    ));
    let mut registry = DefaultToolRegistry::new(None).with_audit_sink(sink);
    registry
        .register(TestTool::new(
            "echo",
            ToolCapabilities::none(),
            Behaviour::Echo,
        ))
        .unwrap();
    let ctx = ExecutionContext::new("crash", policy("id = \"crash\"\n"), "/");
    let pid = std::process::id();
    let mut out = std::io::stdout().lock();
    for i in 0..100_000u32 {
        let id = format!("{pid}-{i}");
        let result = registry
            .execute(ToolCall::new(&id, "echo", json!({"i": i})), &ctx)
            .await;
        assert_eq!(result.call_id, id);
        writeln!(out, "ack {id}").unwrap();
        out.flush().unwrap();
    }
}

/// One round: the child audits calls until it is killed after about `kill_after` of them.
fn kill_round(path: &std::path::Path, kill_after: usize) -> Vec<String> {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "audit_crash_child",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_ENV, path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut acked = Vec::new();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    while let Some(Ok(line)) = lines.next() {
        if let Some(id) = line.strip_prefix("ack ") {
            acked.push(id.to_owned());
            if acked.len() >= kill_after {
                child.kill().unwrap(); // SIGKILL
                break;
            }
        }
    }
    for line in lines.map_while(Result::ok) {
        if let Some(id) = line.strip_prefix("ack ") {
            acked.push(id.to_owned());
        }
    }
    assert!(
        !child.wait().unwrap().success(),
        "the child was killed, not finished"
    );
    acked
}

// guarantee: G-REG-08
#[test]
fn the_audit_file_survives_sigkill_whole() {
    let rounds: u32 = std::env::var("TOOLCAP_CRASH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(10);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let mut acknowledged: Vec<String> = Vec::new();
    for round in 0..rounds {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .subsec_nanos() as usize;
        let kill_after = 1 + (nanos.wrapping_mul(2_654_435_761) % 300);
        acknowledged.extend(kill_round(&path, kill_after));

        let text = std::fs::read(&path).unwrap();
        // A kill can cut the last write short (the kernel stops between pages once SIGKILL is
        // pending): at most the last line is partial, and the next open trims it.
        let whole = capability_core::whole_lines_len(&text).unwrap_or(0);
        let torn = &text[whole..];
        assert!(
            !torn.contains(&b'\n'),
            "round {round}: only the last line can be partial"
        );
        let mut completed = HashSet::new();
        for (n, line) in text[..whole].split(|b| *b == b'\n').enumerate() {
            if line.is_empty() {
                continue;
            }
            let event: AuditEvent = serde_json::from_slice(line)
                .unwrap_or_else(|e| panic!("round {round}: line {} is not an event: {e}", n + 1));
            if event.event == AuditKind::ToolCompleted {
                completed.insert(event.call_id);
            }
        }
        for id in &acknowledged {
            assert!(
                completed.contains(id),
                "round {round}: acknowledged call {id} has no completion in the audit file"
            );
        }
    }
    println!(
        "{rounds} kills; {} acknowledged calls, each completed in the audit file",
        acknowledged.len()
    );
}
