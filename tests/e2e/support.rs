//! What several areas share: a loopback HTTP/1.1 server.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A server on `127.0.0.1` that reads one request per connection (up to 8 KiB), answers `200`
/// with an `x-server: <name>` header and the body `respond` makes of the raw request, and closes.
/// Returns its port and a count of the connections it accepted.
pub(crate) async fn http_server(
    name: &'static str,
    respond: impl Fn(&str) -> String + Send + Sync + 'static,
) -> (u16, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let count = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&count);
    let respond = Arc::new(respond);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            let respond = Arc::clone(&respond);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let n = stream.read(&mut buf).await.unwrap_or(0);
                let body = respond(&String::from_utf8_lossy(&buf[..n]));
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nx-server: {name}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(response.as_bytes()).await;
            });
        }
    });
    (port, count)
}
