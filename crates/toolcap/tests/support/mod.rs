//! What the command line's tests share: where `.ci/mcp-deps` put the pinned MCP peers, and when
//! to skip; a loopback HTTP server that counts who reached it.
#![allow(
    clippy::print_stderr,
    dead_code,
    reason = "a test that skips says so; each test binary uses part of this"
)]

use std::path::PathBuf;

/// The cache of pinned MCP peers (`$TOOLCAP_MCP_CACHE`, or `~/.cache/toolcap-mcp`) when every
/// path in `needs` (relative to it) is there. Otherwise the test skips with a message, except
/// in CI (`CI` set), where `.ci/run` installs them and their absence fails the test.
pub(crate) fn mcp_cache(needs: &[&str]) -> Option<PathBuf> {
    let cache = std::env::var_os("TOOLCAP_MCP_CACHE")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/toolcap-mcp"))
        })?;
    if needs.iter().all(|n| cache.join(n).exists()) {
        return Some(cache);
    }
    let message = format!(
        "the pinned MCP peers are not in {} (run `bash .ci/mcp-deps`)",
        cache.display()
    );
    assert!(std::env::var_os("CI").is_none(), "{message}");
    eprintln!("SKIPPED: {message}");
    None
}

/// A loopback HTTP server that answers every request `200 ok` and counts the connections it
/// takes (up to 64): its port and the count, for a test that must show a host was never reached.
pub(crate) fn counting_server() -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{Read, Write};
    use std::sync::atomic::Ordering;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = std::sync::Arc::clone(&hits);
    std::thread::spawn(move || {
        for stream in listener.incoming().take(64) {
            let Ok(mut stream) = stream else { continue };
            counter.fetch_add(1, Ordering::SeqCst);
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok");
        }
    });
    (port, hits)
}
