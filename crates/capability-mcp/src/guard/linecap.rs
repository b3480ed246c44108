//! The guarded server's output, held to `output_bytes` per message (docs/guard.md,
//! "Supervision"): a line longer than that ends the read with an error, so the transport
//! closes, the in-flight calls fail at once and the server is stopped and restarted within its
//! budget, instead of the guard reading (and the call waiting on) a flood. Its stderr is
//! drained a line at a time with each line's start kept and the rest dropped as it comes
//! ([`drain_lines`]).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncReadExt, ReadBuf};

/// A reader of newline-delimited messages that fails once a message passes `max` bytes.
pub(crate) struct LineCap<R> {
    inner: R,
    since_newline: usize,
    max: usize,
    tripped: Arc<AtomicBool>,
}

impl<R> LineCap<R> {
    /// `inner`, with messages of at most `max` bytes; `tripped` is set when one is longer.
    pub(crate) fn new(inner: R, max: usize, tripped: Arc<AtomicBool>) -> Self {
        Self {
            inner,
            since_newline: 0,
            max,
            tripped,
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for LineCap<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.tripped.load(Ordering::Relaxed) {
            return Poll::Ready(Err(overflow(self.max)));
        }
        let before = buf.filled().len();
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = &polled {
            for &b in &buf.filled()[before..] {
                if b == b'\n' {
                    this.since_newline = 0;
                } else {
                    this.since_newline += 1;
                    if this.since_newline > this.max {
                        this.tripped.store(true, Ordering::Relaxed);
                        // A read that fails hands back nothing.
                        buf.set_filled(before);
                        return Poll::Ready(Err(overflow(this.max)));
                    }
                }
            }
        }
        polled
    }
}

fn overflow(max: usize) -> io::Error {
    io::Error::other(format!(
        "the server wrote a message longer than output_bytes ({max} bytes)"
    ))
}

/// Reads `pipe` to its end, handing `each` the first `max_lines` lines (a last one without a
/// newline included), each cut to its first `keep` bytes (as UTF-8, invalid sequences
/// replaced) and with its control characters shown escaped
/// ([`shown`](capability_types::shown)), and dropping the rest
/// as it comes: a line that never ends holds no more than `keep` bytes and one read's buffer,
/// and the writer never blocks on a full pipe.
pub(crate) async fn drain_lines<R: AsyncRead + Unpin>(
    mut pipe: R,
    max_lines: usize,
    keep: usize,
    mut each: impl FnMut(&str),
) {
    let mut buf = vec![0u8; 8192];
    let mut line = Vec::with_capacity(keep.min(buf.len()));
    let mut lines = 0usize;
    let mut hand = |line: &mut Vec<u8>, lines: &mut usize| {
        if *lines < max_lines {
            each(&capability_types::shown(&String::from_utf8_lossy(line)));
            *lines += 1;
        }
        line.clear();
    };
    loop {
        let n = match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for piece in buf[..n].split_inclusive(|&b| b == b'\n') {
            let (body, ends) = match piece.split_last() {
                Some((b'\n', body)) => (body, true),
                _ => (piece, false),
            };
            let room = keep.saturating_sub(line.len());
            line.extend_from_slice(&body[..body.len().min(room)]);
            if ends {
                hand(&mut line, &mut lines);
            }
        }
    }
    if !line.is_empty() {
        hand(&mut line, &mut lines);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn a_long_line_ends_the_read_and_short_ones_pass() {
        let tripped = Arc::new(AtomicBool::new(false));
        let data: &[u8] = b"short\nalso short\n";
        let mut ok = LineCap::new(data, 10, Arc::clone(&tripped));
        let mut out = Vec::new();
        ok.read_to_end(&mut out).await.unwrap();
        assert_eq!(out, data);
        assert!(!tripped.load(Ordering::Relaxed));
        let long = [b'x'; 64];
        let mut capped = LineCap::new(&long[..], 10, Arc::clone(&tripped));
        let err = capped.read_to_end(&mut Vec::new()).await.unwrap_err();
        assert!(
            err.to_string()
                .contains("longer than output_bytes (10 bytes)")
        );
        assert!(tripped.load(Ordering::Relaxed));
    }

    #[tokio::test]
    async fn stderr_lines_are_cut_counted_and_drained_to_the_end() {
        let mut data = vec![b'x'; 5 << 20];
        data.extend_from_slice(b"\nshort\n\xff\xfe bytes\n");
        for i in 0..10 {
            data.extend_from_slice(format!("line {i}\n").as_bytes());
        }
        data.extend_from_slice(b"no newline at the end");
        let mut seen = Vec::new();
        drain_lines(&data[..], 5, 8, |l| seen.push(l.to_owned())).await;
        assert_eq!(
            seen,
            [
                "xxxxxxxx",
                "short",
                "\u{fffd}\u{fffd} bytes",
                "line 0",
                "line 1"
            ]
        );
        // Every line counted, none kept past the first ones; the last, unended, is a line.
        let mut all = 0;
        drain_lines(&data[..], usize::MAX, 500, |_| all += 1).await;
        assert_eq!(all, 14);
    }

    /// What a server writes on stderr reaches the log, and so a terminal, with its control
    /// characters shown, not obeyed: a carriage return would let a line overwrite the start the
    /// log gave it (its level and the server's name), an escape sequence set the terminal's
    /// title, its clipboard or its colours. Text outside ASCII passes as it is.
    // guarantee: G-MCP-08
    #[tokio::test]
    async fn stderr_lines_reach_the_log_with_their_control_characters_shown() {
        let data = "one\r2026 INFO toolcap::audit allowed\n\u{1b}]52;c;cHduZWQ=\u{7}\u{1b}[2K\u{9b}31m\tk\u{e9}p\u{8}t\n";
        let mut seen = Vec::new();
        drain_lines(data.as_bytes(), 10, 500, |l| seen.push(l.to_owned())).await;
        assert_eq!(
            seen,
            [
                "one\\r2026 INFO toolcap::audit allowed",
                "\\u{1b}]52;c;cHduZWQ=\\u{7}\\u{1b}[2K\\u{9b}31m\\tk\u{e9}p\\u{8}t",
            ]
        );
    }
}
