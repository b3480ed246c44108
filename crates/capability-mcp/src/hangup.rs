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

    fn seen<T>(&self, polled: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if let Poll::Ready(Err(_)) = &polled {
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
