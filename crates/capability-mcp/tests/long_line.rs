//! A 100 MB line on the MCP transport is dropped without being buffered whole
//! (docs/mcp.md, "Hostile input"). Alone in its test binary: the peak resident size it
//! measures is the process's, and whatever another test beside it holds counts in it (a
//! neighbour that failed and symbolised its backtrace once added 100 MB).
#![allow(clippy::disallowed_methods, reason = "reads /proc/self/status")]

mod common;

use common::{Raw, Scratch, server};

/// The peak resident size of this process, in KiB.
fn peak_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

// guarantee: G-MCP-04
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_megabyte_line_is_dropped_with_bounded_memory() {
    let scratch = Scratch::new();
    let (server, _) = server(&scratch).await;
    let mut raw = Raw::initialized(&server, false).await;
    let before = peak_kib();
    // Streamed in 1 MiB pieces so the test itself does not hold 100 MB.
    raw.send_streamed(
        br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":""#,
        &vec![b'a'; 1 << 20],
        100,
        b"\"}}",
    )
    .await;
    raw.ping(2).await;
    let grown_mib = peak_kib().saturating_sub(before) / 1024;
    assert!(
        grown_mib < 64,
        "a 100 MB line grew the peak resident size by {grown_mib} MiB"
    );
}
