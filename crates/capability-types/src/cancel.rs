//! A runtime-free cancellation token shared by a batch of tool calls and the tools themselves.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};

/// A cloneable flag that tells every holder to stop.
///
/// Cancelling is one-way and sticky. Tools that run long loops should check
/// [`is_cancelled`](Self::is_cancelled) or race their work against
/// [`cancelled`](Self::cancelled); the registry also drops a call's future when its batch is
/// cancelled, so a tool that only awaits is stopped at its next `.await`.
///
/// This crate holds no runtime, so the token is a small atomic flag plus the wakers of the
/// futures that wait on it.
///
/// ```
/// use capability_types::CancellationToken;
/// let token = CancellationToken::new();
/// let seen_by_the_tool = token.clone();
/// assert!(!seen_by_the_tool.is_cancelled());
/// token.cancel();
/// assert!(seen_by_the_tool.is_cancelled());
/// ```
#[derive(Clone, Default)]
pub struct CancellationToken {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    cancelled: AtomicBool,
    next_id: AtomicU64,
    /// Wakers of pending `Cancelled` futures, by id; a future removes its entry when dropped,
    /// so a long-lived token does not accumulate the wakers of finished calls.
    waiters: Mutex<HashMap<u64, Waker>>,
}

impl CancellationToken {
    /// A token that is not cancelled.
    pub fn new() -> Self {
        Self::default()
    }

    /// Cancels the token and wakes every future waiting on it.
    pub fn cancel(&self) {
        self.inner.cancelled.store(true, Ordering::SeqCst);
        let waiters = std::mem::take(
            &mut *self
                .inner
                .waiters
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        for waker in waiters.into_values() {
            waker.wake();
        }
    }

    /// Whether [`cancel`](Self::cancel) has been called on this token or a clone of it.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::SeqCst)
    }

    /// Whether `other` is this token or a clone of it (cancelling one cancels the other).
    ///
    /// ```
    /// use capability_types::CancellationToken;
    /// let token = CancellationToken::new();
    /// assert!(token.same_as(&token.clone()));
    /// assert!(!token.same_as(&CancellationToken::new()));
    /// ```
    pub fn same_as(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// A future that completes once the token is cancelled.
    pub fn cancelled(&self) -> Cancelled {
        Cancelled {
            token: self.clone(),
            id: None,
        }
    }
}

impl fmt::Debug for CancellationToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancellationToken")
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

/// The future returned by [`CancellationToken::cancelled`].
///
/// ```
/// let token = capability_types::CancellationToken::new();
/// token.cancel();
/// let _ready_at_once: capability_types::Cancelled = token.cancelled();
/// ```
#[derive(Debug)]
#[must_use = "futures do nothing unless awaited"]
pub struct Cancelled {
    token: CancellationToken,
    id: Option<u64>,
}

impl Future for Cancelled {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if this.token.is_cancelled() {
            return Poll::Ready(());
        }
        let inner = &this.token.inner;
        let mut waiters = inner.waiters.lock().unwrap_or_else(PoisonError::into_inner);
        // Checked again under the lock: `cancel` sets the flag before taking the lock, so either
        // we see the flag here or `cancel` sees our waker.
        if this.token.is_cancelled() {
            return Poll::Ready(());
        }
        let id = *this
            .id
            .get_or_insert_with(|| inner.next_id.fetch_add(1, Ordering::Relaxed));
        match waiters.get_mut(&id) {
            Some(w) if w.will_wake(cx.waker()) => {}
            Some(w) => w.clone_from(cx.waker()),
            None => {
                waiters.insert(id, cx.waker().clone());
            }
        }
        Poll::Pending
    }
}

impl Drop for Cancelled {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            self.token
                .inner
                .waiters
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiter_count(token: &CancellationToken) -> usize {
        token
            .inner
            .waiters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
    use std::sync::atomic::AtomicUsize;
    use std::task::Wake;

    struct CountingWaker(AtomicUsize);
    impl Wake for CountingWaker {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn cancel_wakes_waiters_and_is_sticky() {
        let token = CancellationToken::new();
        let clone = token.clone();
        let counter = Arc::new(CountingWaker(AtomicUsize::new(0)));
        let waker = Waker::from(counter.clone());
        let mut cx = Context::from_waker(&waker);
        let mut fut = Box::pin(clone.cancelled());
        assert_eq!(fut.as_mut().poll(&mut cx), Poll::Pending);
        assert!(!clone.is_cancelled());
        token.cancel();
        assert_eq!(counter.0.load(Ordering::SeqCst), 1);
        assert_eq!(fut.as_mut().poll(&mut cx), Poll::Ready(()));
        assert!(clone.is_cancelled());
        drop(fut);
        // A future created after cancellation is ready at once.
        assert_eq!(
            Box::pin(token.cancelled()).as_mut().poll(&mut cx),
            Poll::Ready(())
        );
    }

    #[test]
    fn dropped_futures_deregister() {
        let token = CancellationToken::new();
        let waker = Waker::from(Arc::new(CountingWaker(AtomicUsize::new(0))));
        let mut cx = Context::from_waker(&waker);
        for _ in 0..1_000 {
            let mut fut = Box::pin(token.cancelled());
            assert_eq!(fut.as_mut().poll(&mut cx), Poll::Pending);
            assert_eq!(
                fut.as_mut().poll(&mut cx),
                Poll::Pending,
                "re-polling does not add a second entry"
            );
            assert_eq!(waiter_count(&token), 1);
        }
        assert_eq!(
            waiter_count(&token),
            0,
            "a long-lived token keeps no wakers of finished waits"
        );
    }
}
