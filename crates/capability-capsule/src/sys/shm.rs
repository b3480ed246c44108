//! The raw parts of the capsule's channel (`ring/`): the shared memory file and its mapping, a
//! ring's header fields and bytes reached through raw pointers, and the doorbell socket's
//! `send`, `recv` and `poll`. Everything here is a safe function over one unsafe block; the
//! channel's logic (`ring/`) has none (docs/isolation-model.md, "The channel: rings in shared
//! memory, a socket as the doorbell").
//!
//! The worker writes this memory too and is not trusted: no Rust reference is ever made to the
//! shared bytes (only to the header's atomics, which have interior mutability), copies go
//! through raw pointers into or out of this process's own memory, and every index is checked
//! here against the ring's size, whatever the caller computed.
#![allow(unsafe_code)] // a shared mapping and copies in and out of it; each block says why it is sound

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64};

use bytes::{BufMut, BytesMut};
use tokio::io::ReadBuf;

/// The bytes each ring holds.
pub(crate) const RING_BYTES: usize = 256 << 10;
/// A ring's header: its four fields, each on a cache line of its own.
const HEADER: usize = 256;
/// A ring with its header.
const RING_SPAN: usize = HEADER + RING_BYTES;
/// The memory file: two rings.
const SHARED_LEN: usize = 2 * RING_SPAN;

/// A field of a ring's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Field {
    /// The count of bytes ever put in (written by the producer).
    Tail,
    /// The count of bytes ever taken out (by the consumer).
    Head,
    /// Whether the consumer sleeps, or is about to (by the consumer).
    ConsumerAsleep,
    /// Whether the producer waits for room (by the producer).
    ProducerWaiting,
}

impl Field {
    fn offset(self) -> usize {
        match self {
            Field::Tail => 0,
            Field::Head => 64,
            Field::ConsumerAsleep => 128,
            Field::ProducerWaiting => 192,
        }
    }
}

/// The shared memory, mapped; unmapped when the last view of it is dropped.
#[derive(Debug)]
pub(crate) struct Mapping {
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
        // view that could still touch it exists (each holds an `Arc` of this mapping).
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), SHARED_LEN);
        }
    }
}

impl Mapping {
    /// A fresh memory file of the channel's size, sealed at that size, and its mapping.
    pub(crate) fn create() -> io::Result<(Arc<Mapping>, OwnedFd)> {
        let fd = memfd(SHARED_LEN)?;
        // The worker holds this file too: sealed, it can neither shrink it under the host's
        // mapping (a fault in the host) nor grow it, and the seals cannot be lifted.
        seal(
            fd.as_fd_ref(),
            libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL,
        )?;
        let mapping = Mapping::map(fd.as_fd_ref())?;
        Ok((mapping, fd))
    }

    /// Maps a memory file made by [`create`](Self::create), after checking that it is one: its
    /// size, and its seals.
    pub(crate) fn adopt(fd: BorrowedFd<'_>) -> io::Result<Arc<Mapping>> {
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

/// Borrowing an owned descriptor (a short name for `as_fd`, which needs its trait in scope).
trait AsFdRef {
    fn as_fd_ref(&self) -> BorrowedFd<'_>;
}

impl AsFdRef for OwnedFd {
    fn as_fd_ref(&self) -> BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(self)
    }
}

/// A memory file of `len` bytes that can be sealed, closed on exec.
fn memfd(len: usize) -> io::Result<OwnedFd> {
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
    truncate(fd.as_fd_ref(), len)?;
    Ok(fd)
}

/// Sets the file's size.
fn truncate(fd: BorrowedFd<'_>, len: usize) -> io::Result<()> {
    let len = libc::off_t::try_from(len).map_err(io::Error::other)?;
    // SAFETY: ftruncate takes plain integers.
    if unsafe { libc::ftruncate(fd.as_raw_fd(), len) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Adds `seals` to a memory file.
fn seal(fd: BorrowedFd<'_>, seals: libc::c_int) -> io::Result<()> {
    // SAFETY: fcntl takes plain integers.
    if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, seals) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Where bytes copied out of a ring go: this process's own memory.
#[derive(Debug)]
pub(crate) enum Sink<'a, 'b> {
    /// A slice, from its position onwards (the position moves past what is copied).
    Slice(&'a mut [u8], usize),
    /// The unfilled part of a read buffer.
    ReadBuf(&'a mut ReadBuf<'b>),
    /// The end of a growable buffer (it grows as needed).
    Bytes(&'a mut BytesMut),
}

impl Sink<'_, '_> {
    /// How many bytes it takes.
    pub(crate) fn room(&self) -> usize {
        match self {
            Sink::Slice(slice, at) => slice.len().saturating_sub(*at),
            Sink::ReadBuf(buf) => buf.remaining(),
            Sink::Bytes(_) => usize::MAX,
        }
    }

    /// Copies `len` bytes from `src` to the sink's next position. Panics (before any copy) if
    /// the sink has no room for them.
    ///
    /// # Safety
    ///
    /// `src` is valid for reads of `len` bytes (it may change meanwhile: another process may
    /// write it).
    unsafe fn fill(&mut self, src: *const u8, len: usize) {
        assert!(len <= self.room(), "a copy larger than its sink");
        match self {
            Sink::Slice(slice, at) => {
                // SAFETY: `at + len <= slice.len()` (checked above); `src` per the contract.
                unsafe { std::ptr::copy_nonoverlapping(src, slice.as_mut_ptr().add(*at), len) };
                *at += len;
            }
            Sink::ReadBuf(buf) => {
                // SAFETY: only `len` bytes of the unfilled part are written, and they are then
                // marked initialised and filled.
                unsafe {
                    let unfilled: &mut [MaybeUninit<u8>] = buf.unfilled_mut();
                    std::ptr::copy_nonoverlapping(src, unfilled.as_mut_ptr().cast::<u8>(), len);
                    buf.assume_init(len);
                }
                buf.advance(len);
            }
            Sink::Bytes(bytes) => {
                bytes.reserve(len);
                // SAFETY: `reserve` made room for `len` bytes of spare capacity, which are
                // written and then counted as the buffer's.
                unsafe {
                    std::ptr::copy_nonoverlapping(src, bytes.chunk_mut().as_mut_ptr(), len);
                    bytes.advance_mut(len);
                }
            }
        }
    }
}

/// One ring of the mapping: its header and its bytes.
#[derive(Debug, Clone)]
pub(crate) struct SharedRing {
    mapping: Arc<Mapping>,
    offset: usize,
}

impl SharedRing {
    /// The first ring (`0`) or the second (`1`) of `mapping`.
    pub(crate) fn nth(mapping: &Arc<Mapping>, n: usize) -> SharedRing {
        assert!(n < 2, "a channel has two rings");
        SharedRing {
            mapping: Arc::clone(mapping),
            offset: n * RING_SPAN,
        }
    }

    fn field<T>(&self, field: Field) -> &T {
        // SAFETY: the field lies in the header of a ring inside the mapping, on a 64-byte
        // boundary of a page-aligned mapping (aligned for the atomics); the atomics have interior
        // mutability, so a shared reference to memory another process writes is sound; the
        // reference lives no longer than `self`, which keeps the mapping.
        unsafe {
            &*self
                .mapping
                .base
                .as_ptr()
                .add(self.offset + field.offset())
                .cast::<T>()
        }
    }

    /// A count of the header ([`Field::Tail`] or [`Field::Head`]).
    pub(crate) fn counter(&self, field: Field) -> &AtomicU64 {
        self.field(field)
    }

    /// A flag of the header ([`Field::ConsumerAsleep`] or [`Field::ProducerWaiting`]).
    pub(crate) fn flag(&self, field: Field) -> &AtomicU32 {
        self.field(field)
    }

    /// The ring's byte `at`, as a raw pointer; `at` is checked.
    fn byte(&self, at: usize) -> *mut u8 {
        assert!(at <= RING_BYTES, "a place outside the ring");
        // SAFETY: `at <= RING_BYTES`, so the result lies inside the ring's span of the mapping
        // (or one past its bytes, for an empty copy).
        unsafe { self.mapping.base.as_ptr().add(self.offset + HEADER + at) }
    }

    /// Copies `src` into the ring from `at` on, wrapping at its end. Panics if `at` or the
    /// length is out of the ring.
    pub(crate) fn copy_in(&self, at: usize, src: &[u8]) {
        assert!(
            at < RING_BYTES && src.len() <= RING_BYTES,
            "a copy outside the ring"
        );
        let first = src.len().min(RING_BYTES - at);
        // SAFETY: both pieces lie inside the ring's bytes (checked above and by `byte`) and
        // come from this process's own memory; nothing in this process holds a reference to
        // the ring's bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), self.byte(at), first);
            std::ptr::copy_nonoverlapping(src.as_ptr().add(first), self.byte(0), src.len() - first);
        }
    }

    /// Copies `len` bytes of the ring from `at` on, wrapping at its end, to `sink`. Panics if
    /// `at` or `len` is out of the ring, or the sink has no room.
    pub(crate) fn copy_out(&self, at: usize, len: usize, sink: &mut Sink<'_, '_>) {
        assert!(
            at < RING_BYTES && len <= RING_BYTES,
            "a copy outside the ring"
        );
        assert!(len <= sink.room(), "a copy larger than its sink");
        let first = len.min(RING_BYTES - at);
        // SAFETY: both pieces lie inside the ring's bytes (checked above and by `byte`); the
        // peer may write them meanwhile, which only garbles what is copied.
        unsafe {
            sink.fill(self.byte(at), first);
            sink.fill(self.byte(0), len - first);
        }
    }
}

/// Sends one byte on the socket without waiting: `Ok(false)` when the socket is full, an error
/// when the other side is gone (`MSG_NOSIGNAL`: no `SIGPIPE`).
pub(crate) fn send_byte(socket: BorrowedFd<'_>) -> io::Result<bool> {
    loop {
        // SAFETY: send reads one byte from a live buffer.
        let sent = unsafe {
            libc::send(
                socket.as_raw_fd(),
                [1u8].as_ptr().cast(),
                1,
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        if sent >= 0 {
            return Ok(true);
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::WouldBlock => return Ok(false),
            io::ErrorKind::Interrupted => {}
            _ => return Err(e),
        }
    }
}

/// Reads what the socket holds into `buf` without waiting: `Ok(None)` when it holds nothing,
/// `Ok(Some(0))` at end of file.
pub(crate) fn recv_now(socket: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<Option<usize>> {
    loop {
        // SAFETY: recv writes at most `buf.len()` bytes into `buf`.
        let got = unsafe {
            libc::recv(
                socket.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if let Ok(n) = usize::try_from(got) {
            return Ok(Some(n));
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::WouldBlock => return Ok(None),
            io::ErrorKind::Interrupted => {}
            _ => return Err(e),
        }
    }
}

/// Sends `buf` on the socket without waiting, as much as it takes: the count, 0 when it is full.
#[cfg(test)]
pub(crate) fn send_now(socket: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: send reads `buf.len()` bytes from a live buffer.
    let sent = unsafe {
        libc::send(
            socket.as_raw_fd(),
            buf.as_ptr().cast(),
            buf.len(),
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        )
    };
    match usize::try_from(sent) {
        Ok(n) => Ok(n),
        Err(_) => {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::WouldBlock {
                Ok(0)
            } else {
                Err(e)
            }
        }
    }
}

/// Waits until the socket has something to read (or its peer closed it), at most `wait_ms`
/// milliseconds (`-1`: for ever). An interrupted wait returns early.
pub(crate) fn wait_readable(socket: BorrowedFd<'_>, wait_ms: i32) -> io::Result<()> {
    let mut poll = libc::pollfd {
        fd: socket.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: poll reads and writes one live `pollfd`.
    if unsafe { libc::poll(&mut poll, 1, wait_ms) } < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    Ok(())
}

/// Memory files that are not the channel's, and changes to the channel's, for the ring's tests.
#[cfg(test)]
pub(crate) mod testing {
    use super::*;

    /// A memory file of `len` bytes, sealed against shrinking or not.
    pub(crate) fn memory_file(len: usize, sealed: bool) -> io::Result<OwnedFd> {
        let fd = memfd(len)?;
        if sealed {
            seal(fd.as_fd_ref(), libc::F_SEAL_SHRINK)?;
        }
        Ok(fd)
    }

    /// Sets a memory file's size.
    pub(crate) fn resize(fd: BorrowedFd<'_>, len: usize) -> io::Result<()> {
        truncate(fd, len)
    }

    /// The channel's size.
    pub(crate) const CHANNEL_LEN: usize = SHARED_LEN;
}
