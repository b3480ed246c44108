//! The channel between a capsule host and its worker: two rings of bytes in one memory file both
//! processes map, one ring each way, and a socket pair kept as the doorbell
//! (docs/isolation-model.md, "The channel: rings in shared memory, a socket as the doorbell").
//!
//! The rings carry the frames of [`wire`](crate::wire), byte for byte what a socket carried
//! before, read by the same [`FrameReader`](crate::wire::FrameReader) with the same limits. What
//! changes is how the bytes cross: a side puts bytes into the ring and moves its counter; the
//! other side, polling, sees the counter move without a system call. A side that is about to
//! sleep says so in the ring's header, and the other side, once it has put bytes in (or taken
//! bytes out, for a writer waiting for room), writes one byte to the socket to wake it. The
//! socket also tells each side when the other has gone: its end closes with the process.
//!
//! The worker is not trusted, so the host reads everything the worker can write as hostile:
//! a counter is checked against the host's own count before it is used (a ring never holds more
//! than its size, a reader never takes back what it took), bytes are copied out of the shared
//! memory into the reader's own buffer before anything parses them (the worker can change them
//! while they are read, which only makes a malformed frame), and no Rust reference is ever made
//! to the shared bytes (the raw parts are in `sys/shm.rs`). The memory file is sealed at its
//! size, so the worker cannot shrink it under the host's mapping. Any counter out of range is
//! `InvalidData`: the worker broke the protocol and is lost.

mod blocking;
mod hostile;

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::pin::Pin;
use std::sync::atomic::{Ordering, fence};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, ready};

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

pub use self::blocking::BlockingEnd;
pub use self::hostile::{Counter, overwrite_counter_in_worker, write_raw_in_worker};
use crate::sys::shm::{self, Field, Mapping, SharedRing, Sink};

/// The bytes each ring holds.
pub const RING_BYTES: usize = shm::RING_BYTES;
/// The host-to-worker ring is the mapping's first.
const TO_WORKER: usize = 0;
/// The worker-to-host ring, its second.
const TO_HOST: usize = 1;

/// The descriptor a worker finds the shared memory on (its channel's socket is on 3).
pub const SHARED_FD: RawFd = 4;

fn out_of_range(which: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("the peer's count of bytes {which} is out of range: it broke the protocol"),
    )
}

/// One side's hold on a ring: its own count of bytes (never read back from the shared memory),
/// its flag, and the order in which they meet the other side's. A side that moved its count
/// then looks at the other's flag, and a side that set its flag then looks at the other's count,
/// each with a full fence between: one of the two always sees the other (docs/isolation-model.md,
/// "The channel: rings in shared memory, a socket as the doorbell").
#[derive(Debug)]
struct Hold {
    ring: SharedRing,
    /// Bytes this side has moved through the ring so far.
    count: u64,
    /// Where this side's count and flag live, and the other side's.
    mine: (Field, Field),
    theirs: (Field, Field),
    /// Whether this side's flag is set.
    flagged: bool,
}

impl Hold {
    fn new(ring: SharedRing, consumer: bool) -> Hold {
        let (reader, writer) = (
            (Field::Head, Field::ConsumerAsleep),
            (Field::Tail, Field::ProducerWaiting),
        );
        let (mine, theirs) = if consumer {
            (reader, writer)
        } else {
            (writer, reader)
        };
        Hold {
            ring,
            count: 0,
            mine,
            theirs,
            flagged: false,
        }
    }

    /// The other side's count, as it says.
    fn their_count(&self) -> u64 {
        self.ring.counter(self.theirs.0).load(Ordering::Acquire)
    }

    /// Moves this side's count on by `n` and publishes it (clearing this side's flag); whether
    /// the other side's flag is set, read after the count is out.
    fn advance(&mut self, n: usize) -> bool {
        self.count = self.count.wrapping_add(n as u64);
        self.ring
            .counter(self.mine.0)
            .store(self.count, Ordering::Release);
        if self.flagged {
            self.ring.flag(self.mine.1).store(0, Ordering::Relaxed);
            self.flagged = false;
        }
        fence(Ordering::SeqCst);
        self.ring.flag(self.theirs.1).load(Ordering::Relaxed) != 0
    }

    /// Sets this side's flag (it is about to sleep, or waits for room); the next look at the
    /// other side's count comes after it.
    fn flag(&mut self) {
        if !self.flagged {
            self.ring.flag(self.mine.1).store(1, Ordering::SeqCst);
            self.flagged = true;
        }
        fence(Ordering::SeqCst);
    }

    /// Where in the ring's bytes this side's count points.
    fn at(&self) -> usize {
        (self.count % RING_BYTES as u64) as usize
    }
}

/// The side of a ring that takes bytes out.
#[derive(Debug)]
struct Consumer {
    hold: Hold,
}

impl Consumer {
    /// Copies as many bytes as the ring holds now and `sink` has room for; the count, and
    /// whether the producer waits for the room this made (it must then be woken).
    fn take(&mut self, sink: &mut Sink<'_, '_>) -> io::Result<(usize, bool)> {
        let held = self.hold.their_count().wrapping_sub(self.hold.count);
        if held > RING_BYTES as u64 {
            return Err(out_of_range("put in"));
        }
        let n = sink.room().min(held as usize);
        if n == 0 {
            return Ok((0, false));
        }
        // The producer does not write these bytes until the count moves past them; one that
        // does anyway only garbles what is read, which the frame reader then refuses.
        self.hold.ring.copy_out(self.hold.at(), n, sink);
        Ok((n, self.hold.advance(n)))
    }

    /// Says this side is about to sleep; the next check of the ring must come after it.
    fn sleeping(&mut self) {
        self.hold.flag();
    }
}

/// The side of a ring that puts bytes in.
#[derive(Debug)]
struct Producer {
    hold: Hold,
}

impl Producer {
    /// How many bytes the ring has room for now.
    fn room(&self) -> io::Result<usize> {
        let used = self.hold.count.wrapping_sub(self.hold.their_count());
        if used > RING_BYTES as u64 {
            return Err(out_of_range("taken out"));
        }
        Ok(RING_BYTES - used as usize)
    }

    /// Puts as much of `src` as there is room for; the count, and whether the consumer sleeps
    /// (it must then be woken).
    fn put(&mut self, src: &[u8]) -> io::Result<(usize, bool)> {
        let n = self.room()?.min(src.len());
        if n == 0 {
            return Ok((0, false));
        }
        // Into bytes the consumer has taken already.
        self.hold.ring.copy_in(self.hold.at(), &src[..n]);
        Ok((n, self.hold.advance(n)))
    }

    /// Says this side waits for room; the next check of the ring must come after it.
    fn waiting(&mut self) {
        self.hold.flag();
    }

    /// Bytes put in that the consumer has not taken (as the consumer's counter says).
    fn untaken(&self) -> u64 {
        self.hold.count.wrapping_sub(self.hold.their_count())
    }
}

/// Wakes the other side: one byte on the socket, without waiting. A full socket already holds
/// wake-ups the other side has not read, so it is woken anyway. An error: the other side is
/// gone.
fn ring_doorbell(socket: BorrowedFd<'_>) -> io::Result<()> {
    shm::send_byte(socket).map(drop)
}

/// What [`drain_doorbell`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Drained {
    /// The socket is empty.
    Empty,
    /// The other side rings faster than this side reads: the rest waits for the next look, so
    /// that a peer that floods the socket cannot hold this thread.
    More,
    /// The other side has closed its end (or reset it: a side that ends with wake-ups unread
    /// resets the connection instead of closing it).
    Closed,
}

/// Reads the wake-ups the socket holds without waiting, at most 16 KiB of them.
fn drain_doorbell(socket: BorrowedFd<'_>) -> io::Result<Drained> {
    let mut sink = [0u8; 1024];
    for _ in 0..16 {
        match shm::recv_now(socket, &mut sink) {
            Ok(Some(0)) => return Ok(Drained::Closed),
            Ok(Some(_)) => {}
            Ok(None) => return Ok(Drained::Empty),
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return Ok(Drained::Closed),
            Err(e) => return Err(e),
        }
    }
    Ok(Drained::More)
}

/// One side's socket, registered with the runtime, shared by its reader and its writer (a side
/// waits on it for one of them at a time: the host's call and the worker's loop are each one
/// task).
#[derive(Debug)]
struct Doorbell {
    socket: tokio::net::UnixStream,
}

impl Doorbell {
    fn ring(&self) -> io::Result<()> {
        ring_doorbell(self.socket.as_fd())
    }

    /// Takes the wake-ups rung so far and registers `cx` for the next one: `Pending` once
    /// registered, `Ready(Ok(()))` when the other side has closed its end.
    fn poll_drain(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            ready!(self.socket.poll_read_ready(cx))?;
            // Read through tokio so that it learns the socket is empty and waits again.
            let drained =
                self.socket.try_io(tokio::io::Interest::READABLE, || {
                    match drain_doorbell(self.socket.as_fd())? {
                        Drained::Empty => Err(io::ErrorKind::WouldBlock.into()),
                        other => Ok(other),
                    }
                });
            match drained {
                Ok(Drained::Closed) => return Poll::Ready(Ok(())),
                Ok(_) => {
                    // More than one look's worth: the task looks again after the others had
                    // their turn.
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

/// The reading half of a side's channel: frames from the other side.
#[derive(Debug)]
pub(crate) struct RingReader {
    consumer: Consumer,
    doorbell: Arc<Doorbell>,
    /// The other side has closed its end: what the ring still holds is all there is.
    closed: bool,
}

impl RingReader {
    /// Copies what the ring holds now into `sink`, waking the other side if it waits for the
    /// room.
    fn take(&mut self, sink: &mut Sink<'_, '_>) -> io::Result<usize> {
        let (n, wake) = self.consumer.take(sink)?;
        if wake {
            // A writer that is gone does not need the room.
            let _ = self.doorbell.ring();
        }
        Ok(n)
    }

    /// Appends what the ring holds now to `buf`, without waiting: the count, 0 when it is
    /// empty (the polling wait of `spin.rs`).
    pub(crate) fn read_now(&mut self, buf: &mut BytesMut) -> io::Result<usize> {
        self.take(&mut Sink::Bytes(buf))
    }

    fn poll_take(
        &mut self,
        cx: &mut Context<'_>,
        sink: &mut Sink<'_, '_>,
    ) -> Poll<io::Result<usize>> {
        let n = self.take(sink)?;
        if n > 0 || sink.room() == 0 || self.closed {
            return Poll::Ready(Ok(n));
        }
        self.consumer.sleeping();
        match self.doorbell.poll_drain(cx) {
            Poll::Ready(Ok(())) => self.closed = true,
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => {}
        }
        // After saying it sleeps and registering for the doorbell: bytes put in before this
        // check are seen here, and a producer that put bytes in after it saw the flag and rang.
        let n = self.take(sink)?;
        if n > 0 || self.closed {
            Poll::Ready(Ok(n))
        } else {
            Poll::Pending
        }
    }
}

impl AsyncRead for RingReader {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        ready!(self.get_mut().poll_take(cx, &mut Sink::ReadBuf(buf)))?;
        Poll::Ready(Ok(()))
    }
}

/// The writing half of a side's channel: frames to the other side.
#[derive(Debug)]
pub(crate) struct RingWriter {
    /// Shared with [`write_raw_in_worker`] in a worker (one producer at a time, in order).
    producer: Arc<Mutex<Producer>>,
    doorbell: Arc<Doorbell>,
}

impl RingWriter {
    /// Puts as much of `src` as there is room for, waking the other side if it sleeps; an error
    /// when the other side is gone (found when it has to be woken) or broke the protocol.
    fn put(&mut self, src: &[u8]) -> io::Result<usize> {
        let (n, wake) = lock(&self.producer).put(src)?;
        if wake {
            self.doorbell.ring()?;
        }
        Ok(n)
    }

    /// Writes what the ring has room for now: `WouldBlock` when it has none.
    pub(crate) fn try_write(&mut self, src: &[u8]) -> io::Result<usize> {
        match self.put(src)? {
            0 if !src.is_empty() => Err(io::ErrorKind::WouldBlock.into()),
            n => Ok(n),
        }
    }

    fn poll_room(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if lock(&self.producer).room()? > 0 {
            return Poll::Ready(Ok(()));
        }
        lock(&self.producer).waiting();
        let closed = match self.doorbell.poll_drain(cx) {
            Poll::Ready(Ok(())) => true,
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => false,
        };
        if lock(&self.producer).room()? > 0 {
            Poll::Ready(Ok(()))
        } else if closed {
            Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()))
        } else {
            Poll::Pending
        }
    }

    /// Ready when the ring has room again (or the other side is gone: an error).
    pub(crate) async fn writable(&mut self) -> io::Result<()> {
        std::future::poll_fn(|cx| self.poll_room(cx)).await
    }

    /// Whether the other side left bytes this side wrote untaken (as its counter says): a frame
    /// it did not take whole, it never acted on.
    pub(crate) fn untaken(&self) -> bool {
        lock(&self.producer).untaken() != 0
    }
}

impl AsyncWrite for RingWriter {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        src: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        loop {
            let n = this.put(src)?;
            if n > 0 || src.is_empty() {
                return Poll::Ready(Ok(n));
            }
            ready!(this.poll_room(cx))?;
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Bytes are the other side's as soon as they are put in.
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

fn lock(producer: &Mutex<Producer>) -> std::sync::MutexGuard<'_, Producer> {
    producer.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Which side of the channel an end is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Host,
    Worker,
}

impl Side {
    /// The ring this side reads, and the one it writes.
    fn rings(self, mapping: &Arc<Mapping>) -> (Consumer, Producer) {
        let ring = |n| SharedRing::nth(mapping, n);
        let (reads, writes) = match self {
            Side::Host => (TO_HOST, TO_WORKER),
            Side::Worker => (TO_WORKER, TO_HOST),
        };
        (
            Consumer {
                hold: Hold::new(ring(reads), true),
            },
            Producer {
                hold: Hold::new(ring(writes), false),
            },
        )
    }
}

/// A side's end as it is made, before it is handed to a runtime or used blocking.
#[derive(Debug)]
pub(crate) struct Unregistered {
    mapping: Arc<Mapping>,
    socket: UnixStream,
    side: Side,
}

/// What a worker is started with: its channel's socket (descriptor 3 in the worker) and the
/// shared memory ([`SHARED_FD`]).
#[derive(Debug)]
pub struct WorkerDescriptors {
    /// The worker's end of the doorbell socket.
    pub channel: OwnedFd,
    /// The memory file of the rings.
    pub shared: OwnedFd,
}

/// A new channel: the host's end, and what the worker is started with.
pub(crate) fn for_worker() -> io::Result<(Unregistered, WorkerDescriptors)> {
    let (mapping, shared) = Mapping::create()?;
    let (host, worker) = UnixStream::pair()?;
    Ok((
        Unregistered {
            mapping,
            socket: host,
            side: Side::Host,
        },
        WorkerDescriptors {
            channel: OwnedFd::from(worker),
            shared,
        },
    ))
}

/// A worker's end, from its channel's socket and the shared memory's descriptor (which may be
/// closed once this returns: the mapping stays).
pub(crate) fn adopt(socket: UnixStream, shared: BorrowedFd<'_>) -> io::Result<Unregistered> {
    Ok(Unregistered {
        mapping: Mapping::adopt(shared)?,
        socket,
        side: Side::Worker,
    })
}

impl Unregistered {
    /// The end's halves, its socket registered with the current runtime's reactor.
    pub(crate) fn register(self) -> io::Result<(RingReader, RingWriter)> {
        self.socket.set_nonblocking(true)?;
        let doorbell = Arc::new(Doorbell {
            socket: tokio::net::UnixStream::from_std(self.socket)?,
        });
        let (consumer, producer) = self.side.rings(&self.mapping);
        let producer = Arc::new(Mutex::new(producer));
        if self.side == Side::Worker {
            // The first registered end of this process's channel; a second (none in a worker)
            // would not replace it.
            let _ = hostile::RAW.set(hostile::Raw {
                producer: Arc::clone(&producer),
                incoming: consumer.hold.ring.clone(),
                doorbell: Arc::clone(&doorbell),
            });
        }
        Ok((
            RingReader {
                consumer,
                doorbell: Arc::clone(&doorbell),
                closed: false,
            },
            RingWriter { producer, doorbell },
        ))
    }

    /// The end used without a runtime.
    pub(crate) fn blocking(self) -> io::Result<BlockingEnd> {
        self.socket.set_nonblocking(true)?;
        let (consumer, producer) = self.side.rings(&self.mapping);
        Ok(BlockingEnd {
            socket: self.socket,
            consumer,
            producer,
            timeout: None,
            closed: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::time::{Duration, Instant};

    /// Both ends of a channel, the worker's adopted as a worker adopts it.
    fn pair() -> (BlockingEnd, BlockingEnd) {
        let (host, worker) = BlockingEnd::for_worker().unwrap_or_else(|e| panic!("{e}"));
        let worker = BlockingEnd::worker_end(worker).unwrap_or_else(|e| panic!("{e}"));
        (host, worker)
    }

    #[test]
    fn bytes_cross_both_ways_in_order_across_the_ring_s_end() {
        let (mut host, mut worker) = pair();
        // More than a ring holds, so the writer waits for room and the ring wraps many times;
        // the bytes come out in order.
        let sent: Vec<u8> = (0..(RING_BYTES * 3 + 12_345))
            .map(|i| (i % 251) as u8)
            .collect();
        let expected = sent.clone();
        let writer = std::thread::spawn(move || {
            host.write_all(&sent).unwrap_or_else(|e| panic!("{e}"));
            host
        });
        let mut got = vec![0u8; expected.len()];
        worker
            .read_exact(&mut got)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(got == expected, "the bytes arrived as sent");
        let mut host = writer.join().unwrap_or_else(|_| panic!("writer"));
        worker.write_all(b"back").unwrap_or_else(|e| panic!("{e}"));
        let mut back = [0u8; 4];
        host.read_exact(&mut back).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(&back, b"back");
    }

    /// Writes `value` a byte at a time, with a pause of `pause` spins between bytes.
    fn trickle(end: &mut BlockingEnd, value: u32, pause: u32) {
        for byte in value.to_le_bytes() {
            end.write_all(&[byte]).unwrap_or_else(|e| panic!("{e}"));
            for _ in 0..pause {
                std::hint::spin_loop();
            }
        }
    }

    #[test]
    fn small_messages_that_meet_a_sleeping_reader_arrive_whole_and_in_order() {
        // Each side answers the other's numbered message with the next number, a byte at a
        // time with pauses of varying length between the bytes (and now and then a sleep), so
        // that a byte finds the reader now polling, now between saying it sleeps and looking
        // again, now asleep: every path between the flag and the doorbell. A lost wake-up hangs
        // (the read's timeout), a lost byte breaks the numbering.
        let (mut host, mut worker) = pair();
        host.set_timeout(Some(Duration::from_secs(10)));
        worker.set_timeout(Some(Duration::from_secs(10)));
        const ROUNDS: u32 = 5_000;
        let echo = std::thread::spawn(move || {
            for round in 0..ROUNDS {
                let mut got = [0u8; 4];
                worker
                    .read_exact(&mut got)
                    .unwrap_or_else(|e| panic!("worker: {e}"));
                assert_eq!(
                    u32::from_le_bytes(got),
                    2 * round,
                    "the host's message {round}"
                );
                if round % 50 == 0 {
                    std::thread::sleep(Duration::from_micros(u64::from(round % 97)));
                }
                trickle(&mut worker, 2 * round + 1, round % 61 * 7);
            }
        });
        for round in 0..ROUNDS {
            if round % 70 == 0 {
                std::thread::sleep(Duration::from_micros(u64::from(round % 89)));
            }
            trickle(&mut host, 2 * round, round % 53 * 9);
            let mut got = [0u8; 4];
            host.read_exact(&mut got)
                .unwrap_or_else(|e| panic!("host: {e}"));
            assert_eq!(
                u32::from_le_bytes(got),
                2 * round + 1,
                "the worker's answer {round}"
            );
        }
        echo.join().unwrap_or_else(|_| panic!("the echo failed"));
    }

    #[test]
    fn a_look_at_a_flooded_doorbell_reads_a_bounded_share_and_says_there_is_more() {
        // A hostile peer can write wake-ups faster than they are read. One look reads at most
        // 16 KiB of them and says more are waiting (the reader then yields to its runtime, so
        // the call's timer still fires on a current-thread runtime); looks go on until the
        // socket is empty.
        let (host, worker) = BlockingEnd::for_worker().unwrap_or_else(|e| panic!("{e}"));
        let ours = UnixStream::from(worker.channel);
        let chunk = [1u8; 4096];
        let mut sent = 0usize;
        loop {
            match shm::send_now(host.as_fd(), &chunk).unwrap_or_else(|e| panic!("{e}")) {
                0 => break,
                n => sent += n,
            }
        }
        assert!(
            sent > 16 << 10,
            "the socket holds more than one look's share ({sent})"
        );
        assert_eq!(drain_doorbell(ours.as_fd()).ok(), Some(Drained::More));
        let mut looks = 1;
        loop {
            match drain_doorbell(ours.as_fd()).unwrap_or_else(|e| panic!("{e}")) {
                Drained::More => looks += 1,
                Drained::Empty => break,
                Drained::Closed => panic!("the host's end is open"),
            }
        }
        assert!(looks >= sent / (16 << 10), "{looks} looks for {sent} bytes");
        drop(host);
        assert_eq!(drain_doorbell(ours.as_fd()).ok(), Some(Drained::Closed));
    }

    #[test]
    fn a_side_that_goes_leaves_what_it_wrote_and_then_end_of_file() {
        let (mut host, mut worker) = pair();
        worker
            .write_all(b"last words")
            .unwrap_or_else(|e| panic!("{e}"));
        drop(worker);
        let mut got = Vec::new();
        host.read_to_end(&mut got).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(got, b"last words");
        // Writing to a side that has gone fails once the ring is full (it is never woken).
        let mut fails = None;
        for _ in 0..=(RING_BYTES / 4096 + 1) {
            if let Err(e) = host.write(&[0u8; 4096]) {
                fails = Some(e.kind());
                break;
            }
        }
        assert_eq!(fails, Some(io::ErrorKind::BrokenPipe));
    }

    // guarantee: G-CAP-04
    #[test]
    fn counters_out_of_range_are_refused_not_followed() {
        // A worker that claims to have put in more than a ring holds, or to have taken more
        // than the host put in. (Counters wrap: a claim that lands within a ring's size of the
        // host's own count is one the host cannot tell from the truth, and harms only the
        // worker's own reading.)
        for (tail, value) in [
            (true, RING_BYTES as u64 + 1),
            (true, u64::MAX / 2),
            (false, 1),
            (false, RING_BYTES as u64 * 7),
        ] {
            let (mut host, worker) = pair();
            if tail {
                worker.forge_tail(value);
                let mut buf = [0u8; 16];
                let e = host.read_now(&mut buf).err().map(|e| e.kind());
                assert_eq!(e, Some(io::ErrorKind::InvalidData), "tail {value}");
            } else {
                worker.forge_head(value);
                let e = host.write(b"x").err().map(|e| e.kind());
                assert_eq!(e, Some(io::ErrorKind::InvalidData), "head {value}");
            }
        }
    }

    // guarantee: G-CAP-04
    #[test]
    fn whatever_a_peer_writes_in_the_counts_a_side_neither_panics_nor_oversteps() {
        // A hostile worker sets the counts the host reads to anything, between the host's
        // reads and writes of any size. Every read is refused (`InvalidData`) or takes at most
        // what the ring holds and the buffer has room for; every write is refused or puts at
        // most what there is room for; nothing panics (the copies check their places too).
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let (mut host, worker) = pair();
        let mut buf = vec![0u8; RING_BYTES + 17];
        let src = vec![7u8; RING_BYTES + 17];
        let (mut refused, mut moved) = (0u32, 0u32);
        for _ in 0..20_000 {
            // Near the host's own counts (within a few rings either way), or anywhere.
            let near = |count: u64, r: u64| match r % 4 {
                0 => r,
                _ => count
                    .wrapping_add(r % (4 * RING_BYTES as u64))
                    .wrapping_sub(2 * RING_BYTES as u64),
            };
            let (r1, r2, r3) = (next(), next(), next());
            let len = (r3 % (RING_BYTES as u64 + 17)) as usize;
            if r1 % 2 == 0 {
                worker.forge_tail(near(host.consumer.hold.count, r2));
                match host.read_now(&mut buf[..len]) {
                    Ok(n) => {
                        assert!(n <= len && n <= RING_BYTES);
                        moved += 1;
                    }
                    Err(e) => {
                        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
                        refused += 1;
                    }
                }
            } else {
                worker.forge_head(near(host.producer.hold.count, r2));
                match host.producer.put(&src[..len]) {
                    Ok((n, _)) => {
                        assert!(n <= len && n <= RING_BYTES);
                        moved += 1;
                    }
                    Err(e) => {
                        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
                        refused += 1;
                    }
                }
            }
        }
        assert!(
            refused > 1000 && moved > 1000,
            "{refused} refused, {moved} moved"
        );
    }

    #[test]
    fn a_read_waits_no_longer_than_its_timeout() {
        let (mut host, _worker) = pair();
        host.set_timeout(Some(Duration::from_millis(30)));
        let started = Instant::now();
        let e = host.read(&mut [0u8; 8]).err().map(|e| e.kind());
        assert_eq!(e, Some(io::ErrorKind::TimedOut));
        assert!(started.elapsed() >= Duration::from_millis(30));
    }

    #[test]
    fn a_timeout_too_long_for_the_clock_is_no_timeout() {
        let (mut host, mut worker) = pair();
        host.set_timeout(Some(Duration::MAX));
        worker.set_timeout(Some(Duration::MAX));
        worker.write_all(b"abc").unwrap();
        let mut got = [0u8; 3];
        host.read_exact(&mut got).unwrap();
        host.write_all(b"de").unwrap();
        let mut back = [0u8; 2];
        worker.read_exact(&mut back).unwrap();
        assert_eq!((&got, &back), (b"abc", b"de"));
    }

    #[test]
    fn memory_that_is_not_the_channel_s_is_refused() {
        // The wrong size, and the right size without seals.
        for (len, sealed) in [(4096, true), (shm::testing::CHANNEL_LEN, false)] {
            let fd = shm::testing::memory_file(len, sealed).unwrap_or_else(|e| panic!("{e}"));
            assert!(Mapping::adopt(fd.as_fd()).is_err(), "{len} {sealed}");
        }
    }

    // guarantee: G-CAP-04
    #[test]
    fn the_host_s_memory_file_cannot_be_shrunk_or_grown() {
        let (_host, worker) = BlockingEnd::for_worker().unwrap_or_else(|e| panic!("{e}"));
        for len in [0, shm::testing::CHANNEL_LEN * 2] {
            assert!(
                shm::testing::resize(worker.shared.as_fd(), len).is_err(),
                "resizing to {len} must fail"
            );
        }
    }
}
