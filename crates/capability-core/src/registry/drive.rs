//! How the calls of a batch are driven once admitted, and the clock they share: in input order,
//! each polled once where it starts, and only a call that has to wait is handed to a set that
//! wakes it (docs/decisions.md, "The per-call path").
//!
//! A call whose tool finishes at its first poll (most tools: they compute, or their scoped
//! object answers from memory) then costs no task node, no waker and no allocation: its future
//! is written into a pinned home that the next call reuses. A call that waits keeps its home
//! until it finishes, in a [`FuturesUnordered`] that polls it only when it is woken.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures_util::stream::{FuturesUnordered, StreamExt};

/// A pinned place for one call's future, reused from call to call.
type Home<F> = Pin<Box<Option<F>>>;

/// A call that did not finish at its first poll, with its place in the batch.
struct Waiting<F> {
    index: usize,
    home: Option<Home<F>>,
}

impl<F: Future> Future for Waiting<F> {
    /// The call's place, its output, and its emptied home for the next call.
    type Output = (usize, F::Output, Option<Home<F>>);

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // `Waiting` is `Unpin`: the future lives behind the `Pin<Box>`.
        let this = self.get_mut();
        let Some(home) = this.home.as_mut() else {
            // Polled after it finished; `FuturesUnordered` never does.
            return Poll::Pending;
        };
        let Some(future) = home.as_mut().as_pin_mut() else {
            return Poll::Pending;
        };
        match future.poll(cx) {
            Poll::Ready(output) => {
                home.as_mut().set(None);
                Poll::Ready((this.index, output, this.home.take()))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

/// Runs a future made by `start` for each of `items`, in input order, with at most `limit` of
/// them waiting at once, and returns their outputs in input order (`total` is how many there
/// are; `missing` stands in for an output that never came, which only a future the driver lost
/// could cause). Each future is made where it will live, in its pinned home: a call's future is
/// large, and handing made futures through an iterator copied each one several times
/// (docs/decisions.md, "The per-call path").
///
/// Each future is polled once as soon as it is started, before the next one is; one that is
/// not done then joins the waiting set, and when `limit` are waiting the next one starts only
/// after one of them has finished. The outputs are in input order whatever order they finish
/// in. Dropping the returned future drops every future still running.
pub(super) async fn in_order<T, F>(
    items: impl IntoIterator<Item = T>,
    mut start: impl FnMut(T) -> F,
    total: usize,
    limit: usize,
    mut missing: impl FnMut() -> F::Output,
) -> Vec<F::Output>
where
    F: Future,
{
    let limit = limit.max(1);
    // The outputs of the calls before the first that waited, pushed as they come; from that
    // call on, each output has a slot, filled whenever it finishes.
    let mut outputs: Vec<F::Output> = Vec::with_capacity(total);
    let mut slots: Vec<Option<F::Output>> = Vec::new();
    let mut spare: Option<Home<F>> = None;
    let mut waiting = FuturesUnordered::new();
    let keep = |slots: &mut Vec<Option<F::Output>>, index: usize, output| {
        if let Some(slot) = slots.get_mut(index) {
            *slot = Some(output);
        }
    };
    for (index, item) in items.into_iter().enumerate() {
        let mut home = spare.take().unwrap_or_else(|| Box::pin(None));
        // Made where it will live: a call's future is large, and every move of it is a copy.
        home.as_mut().set(Some(start(item)));
        let first = std::future::poll_fn(|cx| {
            Poll::Ready(home.as_mut().as_pin_mut().map(|future| future.poll(cx)))
        })
        .await;
        // The first call that waits, and every call after it, is kept by its place after it.
        let after = outputs.len();
        match first {
            Some(Poll::Ready(output)) => {
                home.as_mut().set(None);
                spare = Some(home);
                if slots.is_empty() {
                    outputs.push(output);
                } else {
                    keep(&mut slots, index - after, output);
                }
            }
            Some(Poll::Pending) => {
                if slots.is_empty() {
                    slots = (index..total.max(index + 1)).map(|_| None).collect();
                }
                waiting.push(Waiting {
                    index: index - after,
                    home: Some(home),
                });
                while waiting.len() >= limit {
                    let Some((at, output, home)) = waiting.next().await else {
                        break;
                    };
                    spare = spare.or(home);
                    keep(&mut slots, at, output);
                }
            }
            // The home was just filled.
            None => {}
        }
    }
    while let Some((at, output, _)) = waiting.next().await {
        keep(&mut slots, at, output);
    }
    outputs.extend(slots.into_iter().map(|o| o.unwrap_or_else(&mut missing)));
    outputs
}

/// The clock of one batch: when its checks began, and its latest reading.
///
/// Every call of a batch counts its duration from when the batch's checks began (they are all
/// made first, in input order). Each call reads the clock once, when it ends; the next call's
/// deadline counts from that reading instead of a reading of its own. Between the two, only a
/// call's bookkeeping runs: the driver waits for nothing between one call's end and the next
/// call's start except another call's end, which is read in turn
/// ([`in_order`]). A batch costs one reading per call, instead of three.
pub(super) struct Clock {
    start: Instant,
    /// The latest reading, in nanoseconds after `start`.
    latest: AtomicU64,
}

impl Clock {
    /// A clock read now.
    pub(super) fn start() -> Self {
        Clock {
            start: Instant::now(),
            latest: AtomicU64::new(0),
        }
    }

    /// Reads the clock, keeps the reading as the latest, and returns it as the time since the
    /// batch began (the one subtraction of a reading a call needs).
    pub(super) fn read(&self) -> Duration {
        let since = Instant::now().saturating_duration_since(self.start);
        self.latest.store(
            u64::try_from(since.as_nanos()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        since
    }

    /// The latest reading, as the time since the batch began.
    pub(super) fn latest(&self) -> Duration {
        Duration::from_nanos(self.latest.load(Ordering::Relaxed))
    }

    /// The deadline of a call that starts `since` after the batch began and may run for
    /// `timeout`; worked out only if the call has to wait for it.
    pub(super) fn deadline(&self, since: Duration, timeout: Duration) -> Deadline {
        Deadline {
            start: self.start,
            since,
            timeout,
        }
    }
}

/// When a call's time is up, kept in parts: a call done at its first poll never needs the
/// instant, and adding to an instant costs more than keeping its parts.
#[derive(Debug, Clone, Copy)]
pub(super) struct Deadline {
    start: Instant,
    since: Duration,
    /// How long the call may run.
    pub(super) timeout: Duration,
}

impl Deadline {
    /// The instant the call's time is up. A timeout too long for the clock to count (say
    /// `Duration::MAX`) is up in thirty years, as `tokio::time::timeout` has it.
    pub(super) fn instant(self) -> tokio::time::Instant {
        let started = self.start + self.since;
        tokio::time::Instant::from_std(capability_types::deadline(started, self.timeout))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap_or_else(|e| panic!("runtime: {e}"))
    }

    #[test]
    fn outputs_come_back_in_input_order_whatever_order_they_finish_in() {
        let outputs = runtime().block_on(in_order(
            0..6u64,
            |i| async move {
                // The even ones finish at once, the odd ones later and in reverse.
                if i % 2 == 1 {
                    tokio::time::sleep(Duration::from_millis(30 - 5 * i)).await;
                }
                i
            },
            6,
            4,
            || u64::MAX,
        ));
        assert_eq!(
            outputs,
            (0..6u64).collect::<Vec<_>>(),
            "every output in its place"
        );
    }

    #[test]
    fn no_more_than_the_limit_wait_at_once_and_waiting_ones_overlap() {
        let now = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let started = std::time::Instant::now();
        let outputs = runtime().block_on(in_order(
            0..12,
            |i| {
                let (now, most) = (Arc::clone(&now), Arc::clone(&most));
                async move {
                    let running = now.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(running, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(40)).await;
                    now.fetch_sub(1, Ordering::SeqCst);
                    i
                }
            },
            12,
            3,
            || usize::MAX,
        ));
        assert_eq!(outputs, (0..12).collect::<Vec<_>>());
        assert_eq!(most.load(Ordering::SeqCst), 3, "three at once, never four");
        // Four rounds of three, not twelve one after another (480 ms).
        assert!(
            started.elapsed() < Duration::from_millis(400),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn dropping_the_batch_drops_the_calls_still_waiting() {
        struct Flag(Arc<AtomicUsize>);
        impl Drop for Flag {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let dropped = Arc::new(AtomicUsize::new(0));
        let rt = runtime();
        let result = rt.block_on(async {
            tokio::time::timeout(
                Duration::from_millis(20),
                in_order(
                    0..5,
                    |_| {
                        let flag = Flag(Arc::clone(&dropped));
                        async move {
                            let _flag = flag;
                            std::future::pending::<()>().await;
                        }
                    },
                    5,
                    8,
                    || (),
                ),
            )
            .await
        });
        assert!(result.is_err(), "the calls never finish");
        assert_eq!(
            dropped.load(Ordering::SeqCst),
            5,
            "all five dropped with the batch"
        );
    }

    #[test]
    fn a_home_is_reused_after_a_call_that_waited() {
        // Mixed: waiting calls hand their homes back; every output is still there.
        let outputs = runtime().block_on(in_order(
            0..50u64,
            |i| async move {
                if i % 7 == 0 {
                    tokio::task::yield_now().await;
                }
                i * 2
            },
            50,
            2,
            || u64::MAX,
        ));
        assert_eq!(outputs, (0..50u64).map(|i| i * 2).collect::<Vec<_>>());
    }

    #[test]
    fn outputs_before_the_first_wait_and_after_it_keep_their_places() {
        // The first calls finish at once, then one waits longest, then a mix; and a batch whose
        // iterator yields fewer than `total` gets the stand-in for the rest.
        let outputs = runtime().block_on(in_order(
            0..8u64,
            |i| async move {
                match i {
                    3 => tokio::time::sleep(Duration::from_millis(30)).await,
                    5 | 6 => tokio::task::yield_now().await,
                    _ => {}
                }
                i
            },
            10,
            4,
            || u64::MAX,
        ));
        assert_eq!(outputs, vec![0, 1, 2, 3, 4, 5, 6, 7, u64::MAX, u64::MAX]);
    }
}
