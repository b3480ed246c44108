//! One end of a capsule channel used without a runtime: for hosts and workers written by hand.

use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use super::{
    Consumer, Drained, Producer, WorkerDescriptors, adopt, drain_doorbell, for_worker,
    ring_doorbell,
};
use crate::sys::shm::{self, Sink};

/// One end of a capsule channel used without a runtime: for a host or a worker written by hand
/// (the tests and benchmarks that speak the protocol frame by frame), and for the worker's
/// words before its runtime exists. [`Read`] and [`Write`] carry the channel's bytes; a read
/// returns 0 once the other side has gone and everything it wrote was read.
#[derive(Debug)]
pub struct BlockingEnd {
    pub(super) socket: UnixStream,
    pub(super) consumer: Consumer,
    pub(super) producer: Producer,
    pub(super) timeout: Option<Duration>,
    pub(super) closed: bool,
}

impl BlockingEnd {
    /// A new channel: the host's end, and the descriptors to start a worker with (its
    /// channel's socket as descriptor 3, the shared memory as [`SHARED_FD`](super::SHARED_FD)).
    ///
    /// # Errors
    ///
    /// The memory file or the socket pair cannot be made.
    pub fn for_worker() -> io::Result<(BlockingEnd, WorkerDescriptors)> {
        let (host, worker) = for_worker()?;
        Ok((host.blocking()?, worker))
    }

    /// The worker's end made from `descriptors` in this process: for a worker written by hand
    /// that runs in a thread or a forked child of the host (tests and benchmarks).
    ///
    /// # Errors
    ///
    /// The shared memory is not the channel's sealed memory file.
    pub fn worker_end(descriptors: WorkerDescriptors) -> io::Result<BlockingEnd> {
        let socket = UnixStream::from(descriptors.channel);
        adopt(socket, descriptors.shared.as_fd())?.blocking()
    }

    /// The worker's end, in a process started as a worker (its channel's socket on descriptor
    /// 3, the shared memory on [`SHARED_FD`](super::SHARED_FD), which is closed once mapped): for a worker
    /// written by hand. A real worker uses [`run_worker_if_requested`](crate::run_worker_if_requested).
    ///
    /// # Errors
    ///
    /// Descriptor 3 is not a socket, or descriptor 4 is not the channel's sealed memory file.
    pub fn adopt_in_worker() -> io::Result<BlockingEnd> {
        let socket = crate::sys::adopt_channel()?;
        let shared = crate::sys::adopt_shared()?;
        adopt(socket, shared.as_fd())?.blocking()
    }

    /// Closes the channel: the other side finds end of file once it has read what this side
    /// wrote.
    ///
    /// # Errors
    ///
    /// The socket's `shutdown` fails.
    pub fn shutdown(&self) -> io::Result<()> {
        self.socket.shutdown(std::net::Shutdown::Both)
    }

    /// How long a read or a write waits for the other side before it fails with `TimedOut`
    /// (`None`, the default: for ever).
    pub fn set_timeout(&mut self, timeout: Option<Duration>) {
        self.timeout = timeout;
    }

    /// Reads what the channel holds now, without waiting: 0 when it holds nothing.
    ///
    /// # Errors
    ///
    /// The other side broke the protocol (a counter out of range).
    pub fn read_now(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let (n, wake) = self.consumer.take(&mut Sink::Slice(buf, 0))?;
        if wake {
            let _ = ring_doorbell(self.socket.as_fd());
        }
        Ok(n)
    }

    /// Sleeps until the other side rings, or closes its end, or `until` passes.
    fn sleep(&mut self, until: Option<Instant>) -> io::Result<()> {
        let wait_ms = match until {
            None => -1,
            Some(until) => {
                let left = until.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(io::ErrorKind::TimedOut.into());
                }
                i32::try_from(left.as_millis().max(1)).unwrap_or(i32::MAX)
            }
        };
        shm::wait_readable(self.socket.as_fd(), wait_ms)?;
        if drain_doorbell(self.socket.as_fd())? == Drained::Closed {
            self.closed = true;
        }
        Ok(())
    }
}

impl AsFd for BlockingEnd {
    /// The channel's socket (its doorbell).
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.socket.as_fd()
    }
}

impl Read for BlockingEnd {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let until = self
            .timeout
            .map(|t| capability_types::deadline(Instant::now(), t));
        loop {
            let n = self.read_now(buf)?;
            if n > 0 || buf.is_empty() {
                return Ok(n);
            }
            if self.closed {
                return Ok(0);
            }
            self.consumer.sleeping();
            let n = self.read_now(buf)?;
            if n > 0 {
                return Ok(n);
            }
            self.sleep(until)?;
        }
    }
}

impl Write for BlockingEnd {
    fn write(&mut self, src: &[u8]) -> io::Result<usize> {
        let until = self
            .timeout
            .map(|t| capability_types::deadline(Instant::now(), t));
        loop {
            let (n, wake) = self.producer.put(src)?;
            if wake {
                ring_doorbell(self.socket.as_fd())?;
            }
            if n > 0 || src.is_empty() {
                return Ok(n);
            }
            if self.closed {
                return Err(io::ErrorKind::BrokenPipe.into());
            }
            self.producer.waiting();
            if self.producer.room()? > 0 {
                continue;
            }
            self.sleep(until)?;
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The counters of the channel's shared memory a test overwrites as a hostile peer would.
#[cfg(test)]
impl BlockingEnd {
    /// The count of bytes this end claims to have put into the ring it writes.
    pub(super) fn forge_tail(&self, value: u64) {
        self.producer
            .hold
            .ring
            .counter(crate::sys::shm::Field::Tail)
            .store(value, std::sync::atomic::Ordering::SeqCst);
    }

    /// The count of bytes this end claims to have taken from the ring it reads.
    pub(super) fn forge_head(&self, value: u64) {
        self.consumer
            .hold
            .ring
            .counter(crate::sys::shm::Field::Head)
            .store(value, std::sync::atomic::Ordering::SeqCst);
    }
}
