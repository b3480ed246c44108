//! The channel between a capsule host and its worker: two rings of bytes in one memory file both
//! processes map, one ring each way, and a socket pair kept as the doorbell
//! (docs/isolation-model.md, "The warm path").
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
//! to the shared bytes. The memory file is sealed at its size, so the worker cannot shrink it
//! under the host's mapping. Any counter out of range is `InvalidData`: the worker broke the
//! protocol and is lost.
#![allow(unsafe_code)] // a shared mapping and copies in and out of it; each block says why it is sound
#![allow(
    clippy::disallowed_methods,
    reason = "the capsule's own channel to the worker it starts"
)]

use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::pin::Pin;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use bytes::{BufMut, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The bytes each ring holds.
pub const RING_BYTES: usize = 256 << 10;
/// A ring's header: its four fields, each on a cache line of its own.
const HEADER: usize = 256;
/// A ring with its header.
const RING_SPAN: usize = HEADER + RING_BYTES;
/// The memory file: the host's ring to the worker, then the worker's to the host.
const SHARED_LEN: usize = 2 * RING_SPAN;
/// Where the host-to-worker ring begins in the file.
const TO_WORKER: usize = 0;
/// Where the worker-to-host ring begins.
const TO_HOST: usize = RING_SPAN;

/// Header fields: the count of bytes ever put in (written by the producer)...
const TAIL: usize = 0;
/// ...ever taken out (by the consumer)...
const HEAD: usize = 64;
/// ...whether the consumer sleeps, or is about to (by the consumer)...
const CONSUMER_ASLEEP: usize = 128;
/// ...and whether the producer waits for room (by the producer).
const PRODUCER_WAITING: usize = 192;

/// The descriptor a worker finds the shared memory on (its channel's socket is on 3).
pub const SHARED_FD: RawFd = 4;

/// The shared memory, mapped; unmapped when the last end that uses it is dropped.
#[derive(Debug)]
struct Mapping {
    base: NonNull<u8>,
}

// SAFETY: the mapping is plain memory valid for `SHARED_LEN` bytes until `drop`; every access to
// it goes through atomics or raw copies, never through a Rust reference to the bytes.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `base` is the start of a mapping of `SHARED_LEN` bytes made by `map`, and no
        // end that could still touch it exists (each holds an `Arc` of this mapping).
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), SHARED_LEN);
        }
    }
}

impl Mapping {
    /// A fresh memory file of the channel's size, sealed at that size, and its mapping.
    fn create() -> io::Result<(Arc<Mapping>, OwnedFd)> {
        // SAFETY: memfd_create takes a NUL-terminated name and flags.
        let raw = unsafe {
            libc::memfd_create(
                c"toolcap-capsule".as_ptr(),
                libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
            )
        };
        if raw < 0 {
            return Err(io::Error::other(format!(
                "memfd_create: {}",
                io::Error::last_os_error()
            )));
        }
        // SAFETY: `raw` was just returned by memfd_create and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let len = libc::off_t::try_from(SHARED_LEN).map_err(io::Error::other)?;
        // SAFETY: ftruncate and fcntl take plain integers.
        unsafe {
            if libc::ftruncate(fd.as_raw_fd(), len) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The worker holds this file too: sealed, it can neither shrink it under the host's
            // mapping (a fault in the host) nor grow it, and the seals cannot be lifted.
            let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;
            if libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, seals) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        let mapping = Mapping::map(fd.as_fd())?;
        Ok((mapping, fd))
    }

    /// Maps a memory file made by [`create`](Self::create), after checking that it is one:
    /// its size, and its seals.
    fn adopt(fd: BorrowedFd<'_>) -> io::Result<Arc<Mapping>> {
        // SAFETY: `stat` is a plain out-parameter for fstat.
        let mut stat: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fstat writes into `stat`, which lives across the call.
        if unsafe { libc::fstat(fd.as_raw_fd(), &mut stat) } != 0 {
            return Err(io::Error::last_os_error());
        }
        if usize::try_from(stat.st_size).ok() != Some(SHARED_LEN) {
            return Err(io::Error::other(format!(
                "the shared memory is {} bytes, not {SHARED_LEN}",
                stat.st_size
            )));
        }
        // SAFETY: fcntl takes plain integers.
        let seals = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) };
        if seals < 0 || seals & libc::F_SEAL_SHRINK == 0 {
            return Err(io::Error::other(
                "the shared memory is not sealed at its size",
            ));
        }
        Mapping::map(fd)
    }

    fn map(fd: BorrowedFd<'_>) -> io::Result<Arc<Mapping>> {
        // SAFETY: a fresh shared mapping of a file at least `SHARED_LEN` long (created or
        // checked so by the callers); the kernel picks the address.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                SHARED_LEN,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::other(format!(
                "mmap: {}",
                io::Error::last_os_error()
            )));
        }
        let base = NonNull::new(base.cast::<u8>())
            .ok_or_else(|| io::Error::other("mmap returned a null address"))?;
        Ok(Arc::new(Mapping { base }))
    }
}

/// One ring of the mapping: its header and its bytes.
#[derive(Debug, Clone)]
struct Ring {
    mapping: Arc<Mapping>,
    offset: usize,
}

impl Ring {
    fn field<T>(&self, at: usize) -> &T {
        // SAFETY: `offset + at` lies in the header of a ring inside the mapping, on a 64-byte
        // boundary of a page-aligned mapping (aligned for the atomics); the atomics have
        // interior mutability, so a shared reference to memory another process writes is
        // sound; the reference lives no longer than `self`, which keeps the mapping.
        unsafe { &*self.mapping.base.as_ptr().add(self.offset + at).cast::<T>() }
    }

    fn counter(&self, at: usize) -> &AtomicU64 {
        self.field(at)
    }

    fn flag(&self, at: usize) -> &AtomicU32 {
        self.field(at)
    }

    fn data(&self) -> *mut u8 {
        // SAFETY: the ring's bytes follow its header inside the mapping.
        unsafe { self.mapping.base.as_ptr().add(self.offset + HEADER) }
    }
}

fn out_of_range(which: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("the peer's count of bytes {which} is out of range: it broke the protocol"),
    )
}

/// The side of a ring that takes bytes out.
#[derive(Debug)]
struct Consumer {
    ring: Ring,
    /// Bytes taken so far: this side's own count, never read back from the shared memory.
    head: u64,
    /// Whether this side has said it sleeps.
    asleep: bool,
}

impl Consumer {
    /// Copies up to `room` bytes the ring holds now to `dst`; the count, and whether the
    /// producer waits for the room this made (it must then be woken).
    fn take(&mut self, dst: *mut u8, room: usize) -> io::Result<(usize, bool)> {
        let tail = self.ring.counter(TAIL).load(Ordering::Acquire);
        let held = tail.wrapping_sub(self.head);
        if held > RING_BYTES as u64 {
            return Err(out_of_range("put in"));
        }
        let n = room.min(held as usize);
        if n == 0 {
            return Ok((0, false));
        }
        let at = (self.head % RING_BYTES as u64) as usize;
        let first = n.min(RING_BYTES - at);
        // SAFETY: `at + first <= RING_BYTES` and `n - first < RING_BYTES` stay inside the ring's
        // bytes; `dst` has room for `n` bytes (the caller's contract) and is this process's own
        // memory, not the mapping. The producer does not write these bytes until `head` moves
        // past them; one that does anyway only garbles what is read, which the frame reader
        // then refuses.
        unsafe {
            std::ptr::copy_nonoverlapping(self.ring.data().add(at), dst, first);
            std::ptr::copy_nonoverlapping(self.ring.data(), dst.add(first), n - first);
        }
        self.head = self.head.wrapping_add(n as u64);
        self.ring.counter(HEAD).store(self.head, Ordering::Release);
        if self.asleep {
            self.ring.flag(CONSUMER_ASLEEP).store(0, Ordering::Relaxed);
            self.asleep = false;
        }
        fence(Ordering::SeqCst);
        let waiting = self.ring.flag(PRODUCER_WAITING).load(Ordering::Relaxed) != 0;
        Ok((n, waiting))
    }

    /// Says this side is about to sleep; the next check of the ring must come after it.
    fn sleeping(&mut self) {
        if !self.asleep {
            self.ring.flag(CONSUMER_ASLEEP).store(1, Ordering::SeqCst);
            self.asleep = true;
        }
        fence(Ordering::SeqCst);
    }
}

/// The side of a ring that puts bytes in.
#[derive(Debug)]
struct Producer {
    ring: Ring,
    /// Bytes put in so far: this side's own count.
    tail: u64,
    /// Whether this side has said it waits for room.
    waiting: bool,
}

impl Producer {
    /// How many bytes the ring has room for now.
    fn room(&self) -> io::Result<usize> {
        let head = self.ring.counter(HEAD).load(Ordering::Acquire);
        let used = self.tail.wrapping_sub(head);
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
        let at = (self.tail % RING_BYTES as u64) as usize;
        let first = n.min(RING_BYTES - at);
        // SAFETY: as in `Consumer::take`, the other way: inside the ring's bytes, from this
        // process's own memory, into bytes the consumer has taken already.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), self.ring.data().add(at), first);
            std::ptr::copy_nonoverlapping(src.as_ptr().add(first), self.ring.data(), n - first);
        }
        self.tail = self.tail.wrapping_add(n as u64);
        self.ring.counter(TAIL).store(self.tail, Ordering::Release);
        if self.waiting {
            self.ring.flag(PRODUCER_WAITING).store(0, Ordering::Relaxed);
            self.waiting = false;
        }
        fence(Ordering::SeqCst);
        let asleep = self.ring.flag(CONSUMER_ASLEEP).load(Ordering::Relaxed) != 0;
        Ok((n, asleep))
    }

    /// Says this side waits for room; the next check of the ring must come after it.
    fn waiting(&mut self) {
        if !self.waiting {
            self.ring.flag(PRODUCER_WAITING).store(1, Ordering::SeqCst);
            self.waiting = true;
        }
        fence(Ordering::SeqCst);
    }

    /// Bytes put in that the consumer has not taken (as the consumer's counter says).
    fn untaken(&self) -> u64 {
        let head = self.ring.counter(HEAD).load(Ordering::Acquire);
        self.tail.wrapping_sub(head)
    }
}

/// Wakes the other side: one byte on the socket, without waiting. A full socket already holds
/// wake-ups the other side has not read, so it is woken anyway. An error: the other side is
/// gone.
fn ring_doorbell(socket: BorrowedFd<'_>) -> io::Result<()> {
    loop {
        // SAFETY: send reads one byte from a live buffer; MSG_NOSIGNAL keeps a closed peer from
        // raising SIGPIPE.
        let sent = unsafe {
            libc::send(
                socket.as_raw_fd(),
                [1u8].as_ptr().cast(),
                1,
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        if sent >= 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::WouldBlock => return Ok(()),
            io::ErrorKind::Interrupted => {}
            _ => return Err(e),
        }
    }
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
        // SAFETY: recv writes at most `sink.len()` bytes into `sink`.
        let got = unsafe {
            libc::recv(
                socket.as_raw_fd(),
                sink.as_mut_ptr().cast(),
                sink.len(),
                libc::MSG_DONTWAIT,
            )
        };
        match got {
            0 => return Ok(Drained::Closed),
            n if n > 0 => {}
            _ => {
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::WouldBlock => return Ok(Drained::Empty),
                    io::ErrorKind::Interrupted => {}
                    io::ErrorKind::ConnectionReset => return Ok(Drained::Closed),
                    _ => return Err(e),
                }
            }
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
    /// Copies what the ring holds now into `dst` (at most `room` bytes), waking the other side
    /// if it waits for the room.
    fn take(&mut self, dst: *mut u8, room: usize) -> io::Result<usize> {
        let (n, wake) = self.consumer.take(dst, room)?;
        if wake {
            // A writer that is gone does not need the room.
            let _ = self.doorbell.ring();
        }
        Ok(n)
    }

    /// Appends what the ring holds now to `buf`, without waiting: the count, 0 when it is
    /// empty (the polling wait of `spin.rs`).
    pub(crate) fn read_now(&mut self, buf: &mut BytesMut) -> io::Result<usize> {
        if buf.capacity() - buf.len() < 4096 {
            buf.reserve(64 << 10);
        }
        let spare = buf.chunk_mut();
        let n = self.take(spare.as_mut_ptr(), spare.len())?;
        // SAFETY: `take` initialised the first `n` bytes of the spare capacity.
        unsafe { buf.advance_mut(n) };
        Ok(n)
    }

    fn poll_take(
        &mut self,
        cx: &mut Context<'_>,
        dst: *mut u8,
        room: usize,
    ) -> Poll<io::Result<usize>> {
        let n = self.take(dst, room)?;
        if n > 0 || room == 0 || self.closed {
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
        let n = self.take(dst, room)?;
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
        let this = self.get_mut();
        // SAFETY: `take` only writes the bytes it reports, and they are marked filled below.
        let unfilled = unsafe { buf.unfilled_mut() };
        let (dst, room) = (unfilled.as_mut_ptr().cast::<u8>(), unfilled.len());
        let n = ready!(this.poll_take(cx, dst, room))?;
        // SAFETY: `take` initialised `n` bytes of the unfilled part.
        unsafe { buf.assume_init(n) };
        buf.advance(n);
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

/// A worker's channel as [`write_raw_in_worker`] and [`overwrite_counter_in_worker`] reach it.
#[derive(Debug)]
struct Raw {
    producer: Arc<Mutex<Producer>>,
    /// The ring the worker reads.
    incoming: Ring,
    doorbell: Arc<Doorbell>,
}

static RAW: OnceLock<Raw> = OnceLock::new();

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
        let mut poll = libc::pollfd {
            fd: raw.doorbell.socket.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: poll reads and writes one live `pollfd`.
        unsafe { libc::poll(&mut poll, 1, 100) };
        if drain_doorbell(raw.doorbell.socket.as_fd())? == Drained::Closed {
            return Err(io::ErrorKind::BrokenPipe.into());
        }
    }
    Ok(())
}

/// A counter of a worker's channel, as [`overwrite_counter_in_worker`] names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
            .ring
            .counter(TAIL)
            .swap(value, Ordering::SeqCst),
        Counter::TakenFromHost => raw.incoming.counter(HEAD).swap(value, Ordering::SeqCst),
    };
    // Wakes the host, as a frame put in would, so that it looks.
    raw.doorbell.ring()?;
    Ok(was)
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
        let ring = |offset| Ring {
            mapping: Arc::clone(mapping),
            offset,
        };
        let (reads, writes) = match self {
            Side::Host => (TO_HOST, TO_WORKER),
            Side::Worker => (TO_WORKER, TO_HOST),
        };
        (
            Consumer {
                ring: ring(reads),
                head: 0,
                asleep: false,
            },
            Producer {
                ring: ring(writes),
                tail: 0,
                waiting: false,
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
            let _ = RAW.set(Raw {
                producer: Arc::clone(&producer),
                incoming: consumer.ring.clone(),
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

/// One end of a capsule channel used without a runtime: for a host or a worker written by hand
/// (the tests and benchmarks that speak the protocol frame by frame), and for the worker's
/// words before its runtime exists. [`Read`] and [`Write`] carry the channel's bytes; a read
/// returns 0 once the other side has gone and everything it wrote was read.
#[derive(Debug)]
pub struct BlockingEnd {
    socket: UnixStream,
    consumer: Consumer,
    producer: Producer,
    timeout: Option<Duration>,
    closed: bool,
}

impl BlockingEnd {
    /// A new channel: the host's end, and the descriptors to start a worker with (its
    /// channel's socket as descriptor 3, the shared memory as [`SHARED_FD`]).
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
    /// 3, the shared memory on [`SHARED_FD`], which is closed once mapped): for a worker
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
        let (n, wake) = self.consumer.take(buf.as_mut_ptr(), buf.len())?;
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
        let mut poll = libc::pollfd {
            fd: self.socket.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: poll reads and writes one live `pollfd`.
        let got = unsafe { libc::poll(&mut poll, 1, wait_ms) };
        if got < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(())
            } else {
                Err(e)
            };
        }
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
        let until = self.timeout.map(|t| Instant::now() + t);
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
        let until = self.timeout.map(|t| Instant::now() + t);
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
    fn forge_tail(&self, value: u64) {
        self.producer
            .ring
            .counter(TAIL)
            .store(value, Ordering::SeqCst);
    }

    /// The count of bytes this end claims to have taken from the ring it reads.
    fn forge_head(&self, value: u64) {
        self.consumer
            .ring
            .counter(HEAD)
            .store(value, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

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
            // SAFETY: send reads a live buffer.
            let n = unsafe {
                libc::send(
                    host.as_fd().as_raw_fd(),
                    chunk.as_ptr().cast(),
                    chunk.len(),
                    libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                )
            };
            if n <= 0 {
                break;
            }
            sent += n as usize;
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
    fn memory_that_is_not_the_channel_s_is_refused() {
        // The wrong size, and the right size without seals.
        for (len, seal) in [(4096, true), (SHARED_LEN, false)] {
            // SAFETY: as in `Mapping::create`.
            let fd = unsafe {
                let raw = libc::memfd_create(c"t".as_ptr(), libc::MFD_ALLOW_SEALING);
                assert!(raw >= 0);
                OwnedFd::from_raw_fd(raw)
            };
            // SAFETY: plain integers.
            unsafe {
                assert_eq!(libc::ftruncate(fd.as_raw_fd(), len as libc::off_t), 0);
                if seal {
                    libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, libc::F_SEAL_SHRINK);
                }
            }
            assert!(Mapping::adopt(fd.as_fd()).is_err(), "{len} {seal}");
        }
    }

    // guarantee: G-CAP-04
    #[test]
    fn the_host_s_memory_file_cannot_be_shrunk_or_grown() {
        let (_host, worker) = BlockingEnd::for_worker().unwrap_or_else(|e| panic!("{e}"));
        for len in [0, SHARED_LEN as libc::off_t * 2] {
            // SAFETY: plain integers.
            let done = unsafe { libc::ftruncate(worker.shared.as_raw_fd(), len) };
            assert_ne!(done, 0, "ftruncate to {len} must fail");
        }
    }
}
