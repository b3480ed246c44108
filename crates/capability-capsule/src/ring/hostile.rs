//! What a hostile tool can do to its worker's channel, for tests of the host against one (the
//! capsule lab's escape attempts): bytes written as they are, counts overwritten. The host reads
//! everything a worker sends, and every count it keeps in the shared memory, as hostile; these
//! give a tool no power it lacks, since the channel's memory is its worker's own.

use std::io;
use std::os::fd::AsFd;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock};

use super::{Doorbell, Drained, Producer, drain_doorbell, lock};
use crate::sys::shm::{self, Field, SharedRing};

/// A worker's channel as [`write_raw_in_worker`] and [`overwrite_counter_in_worker`] reach it.
#[derive(Debug)]
pub(super) struct Raw {
    pub(super) producer: Arc<Mutex<Producer>>,
    /// The ring the worker reads.
    pub(super) incoming: SharedRing,
    pub(super) doorbell: Arc<Doorbell>,
}

/// Set by the worker's end when it is registered (`Unregistered::register`).
pub(super) static RAW: OnceLock<Raw> = OnceLock::new();

/// Writes `bytes` onto this worker's channel to its host as they are, after what the worker has
/// written so far, waiting for room as long as the host takes bytes: what a hostile tool can do
/// in its worker, for tests of the host against one (the capsule lab's escape attempts). The
/// host reads everything a worker sends as hostile; this gives a tool no power it lacks, since
/// the channel's memory is the worker's own.
///
/// # Errors
///
/// This process is not a capsule worker serving calls, the host has gone, or the channel's
/// counters are out of range.
pub fn write_raw_in_worker(bytes: &[u8]) -> io::Result<()> {
    let raw = RAW
        .get()
        .ok_or_else(|| io::Error::other("not a capsule worker serving calls"))?;
    let mut at = 0;
    while at < bytes.len() {
        let (n, wake) = lock(&raw.producer).put(&bytes[at..])?;
        if wake {
            raw.doorbell.ring()?;
        }
        at += n;
        if n > 0 {
            continue;
        }
        {
            let mut producer = lock(&raw.producer);
            producer.waiting();
            if producer.room()? > 0 {
                continue;
            }
        }
        shm::wait_readable(raw.doorbell.socket.as_fd(), 100)?;
        if drain_doorbell(raw.doorbell.socket.as_fd())? == Drained::Closed {
            return Err(io::ErrorKind::BrokenPipe.into());
        }
    }
    Ok(())
}

/// A counter of a worker's channel, as [`overwrite_counter_in_worker`] names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Counter {
    /// The count of bytes the worker has put into its ring to the host.
    PutToHost,
    /// The count of bytes the worker has taken from the host's ring to it.
    TakenFromHost,
}

/// Overwrites one of this worker's channel counters in the shared memory with `value`, wakes
/// the host, and returns what the counter held: what a hostile tool can do in its worker, for tests of the host
/// against one (the capsule lab's escape attempts). The host checks every counter a worker can
/// write before it uses it, and ends a worker whose counter is out of range.
///
/// # Errors
///
/// This process is not a capsule worker serving calls.
pub fn overwrite_counter_in_worker(counter: Counter, value: u64) -> io::Result<u64> {
    let raw = RAW
        .get()
        .ok_or_else(|| io::Error::other("not a capsule worker serving calls"))?;
    let was = match counter {
        Counter::PutToHost => lock(&raw.producer)
            .hold
            .ring
            .counter(Field::Tail)
            .swap(value, Ordering::SeqCst),
        Counter::TakenFromHost => raw
            .incoming
            .counter(Field::Head)
            .swap(value, Ordering::SeqCst),
    };
    // Wakes the host, as a frame put in would, so that it looks.
    raw.doorbell.ring()?;
    Ok(was)
}
