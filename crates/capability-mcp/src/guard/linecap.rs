//! The guarded server's output, held to `output_bytes` per message (docs/guard.md,
//! "Supervision"): a line longer than that ends the read with an error, so the transport
//! closes, the in-flight calls fail at once and the server is stopped and restarted within its
//! budget, instead of the guard reading (and the call waiting on) a flood.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};

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
}
