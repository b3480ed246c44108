//! The writer of a stdio session that notices the client has stopped reading.
//!
//! `rmcp` logs a failed write and goes on, so a client that closed its end of the server's
//! stdout while holding its stdin (or a client that died while another process kept that pipe
//! open) left a server answering into a broken pipe for ever, its calls and their children
//! running. A write that fails here cancels the session instead (docs/mcp.md, "Cancellation and
//! progress").

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::AsyncWrite;
use tokio_util::sync::CancellationToken;

/// `inner`, whose first failed write, flush or shutdown cancels `hung_up`.
pub(crate) struct HangUp<W> {
    inner: W,
    hung_up: CancellationToken,
}

impl<W> HangUp<W> {
    pub(crate) fn new(inner: W, hung_up: CancellationToken) -> Self {
        Self { inner, hung_up }
    }

    /// Passes `polled` on; an error that says the other end is gone (any but a retry's)
    /// cancels the session.
    fn seen<T>(&self, polled: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if let Poll::Ready(Err(e)) = &polled
            && !matches!(
                e.kind(),
                io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock
            )
        {
            self.hung_up.cancel();
        }
        polled
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for HangUp<W> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.seen(polled)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_flush(cx);
        self.seen(polled)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.seen(polled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt as _;

    /// A writer that fails each write with the next of `errors`, then accepts everything.
    struct Failing(Vec<io::ErrorKind>);

    impl AsyncWrite for Failing {
        fn poll_write(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            match self.0.pop() {
                Some(kind) => Poll::Ready(Err(kind.into())),
                None => Poll::Ready(Ok(buf.len())),
            }
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn a_broken_pipe_hangs_up_and_a_retry_does_not() {
        let hung_up = CancellationToken::new();
        let mut retried = HangUp::new(
            Failing(vec![io::ErrorKind::WouldBlock, io::ErrorKind::Interrupted]),
            hung_up.clone(),
        );
        for _ in 0..2 {
            assert!(retried.write(b"x").await.is_err());
        }
        assert_eq!(retried.write(b"x").await.unwrap(), 1);
        assert!(!hung_up.is_cancelled());

        let mut broken = HangUp::new(Failing(vec![io::ErrorKind::BrokenPipe]), hung_up.clone());
        assert!(broken.write(b"x").await.is_err());
        assert!(hung_up.is_cancelled());
    }
}
