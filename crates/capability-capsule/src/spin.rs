//! Waiting for the peer's next frame by polling the channel for a short while before sleeping
//! (docs/isolation-model.md, "The warm path").
//!
//! On a virtual machine, waking a process that sleeps in `epoll_wait` costs tens of
//! microseconds (the idle vCPU has to be woken), twice per round trip: more than the whole call
//! the round trip carries. When one call is in flight, host and worker each poll the channel for
//! at most [`CapsuleConfig::spin`](crate::CapsuleConfig::spin) before they sleep, so a quick
//! answer is taken without either side having gone to sleep. A poll reads the ring's counter in
//! the shared memory (`ring.rs`), not a socket: no system call. The CPU this burns is bounded by
//! that time per wait, and nothing polls on a machine with one CPU.

use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::ring::RingReader;
use crate::wire::{FrameError, FrameReader};

/// How often the clock is read while polling (a look at the ring is a load from memory; the
/// clock costs more, and need not be read every round).
const ROUNDS_PER_CLOCK: u32 = 64;

/// How often the polling thread offers its CPU to others (a `sched_yield`, a system call).
const ROUNDS_PER_YIELD: u32 = 512;

/// Whether polling can help here: it needs a CPU for each side.
pub(crate) fn worth_it() -> bool {
    std::thread::available_parallelism().is_ok_and(|n| n.get() > 1)
}

/// The next body, if one arrives within `spin`; `Ok(None)` otherwise, and also on a read error,
/// which the caller's awaited read then reports.
pub(crate) fn next_within(
    frames: &mut FrameReader<RingReader>,
    spin: Duration,
) -> Result<Option<Bytes>, FrameError> {
    if let Some(body) = frames.buffered()? {
        return Ok(Some(body));
    }
    if spin.is_zero() {
        return Ok(None);
    }
    // Read first after ROUNDS_PER_CLOCK looks (most frames of a warm call come sooner), so
    // the wait is `spin` from then: longer by those few looks.
    let mut until = None;
    let mut rounds = 0u32;
    loop {
        let (reader, buf) = frames.parts();
        match reader.read_now(buf) {
            Err(_) => return Ok(None),
            Ok(0) => std::hint::spin_loop(),
            Ok(_) => {
                if let Some(body) = frames.buffered()? {
                    return Ok(Some(body));
                }
            }
        }
        // Counted whether bytes came or not: a peer that keeps sending without ever completing
        // a body must not hold this thread past `spin` (the call's timeout runs only when the
        // caller's task yields).
        rounds += 1;
        if rounds.is_multiple_of(ROUNDS_PER_CLOCK) {
            let now = Instant::now();
            if now >= *until.get_or_insert_with(|| capability_types::deadline(now, spin)) {
                return Ok(None);
            }
        }
        // Now and then the CPU is offered to others: a look at the ring is no system call, so
        // without this a peer that the scheduler put on this CPU would wait for the next tick.
        if rounds.is_multiple_of(ROUNDS_PER_YIELD) {
            std::thread::yield_now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ring::{BlockingEnd, adopt};
    use crate::wire::{CONTINUED as CONTINUED_BIT, FromWorker, decode, encode};
    use std::io::Write;
    use std::os::fd::AsFd;

    const MAX: usize = 1 << 20;

    /// A worker's end, read as the worker reads it, and a host's written by hand.
    fn pair() -> (FrameReader<RingReader>, BlockingEnd) {
        let (host, worker) = BlockingEnd::for_worker().unwrap_or_else(|e| panic!("{e}"));
        let socket = std::os::unix::net::UnixStream::from(worker.channel);
        let (reader, _writer) = adopt(socket, worker.shared.as_fd())
            .and_then(crate::ring::Unregistered::register)
            .unwrap_or_else(|e| panic!("{e}"));
        (FrameReader::new(reader, MAX), host)
    }

    fn ready_frame() -> Vec<u8> {
        encode(&FromWorker::Ready {}, &[Bytes::from_static(b"blob")], MAX)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_frame_that_arrives_in_pieces_while_polling_is_taken_whole() {
        // The longest wait there is (`Duration::MAX`) is a wait with no end, not a clock overflow.
        for spin in [Duration::from_secs(5), Duration::MAX] {
            let rt = runtime();
            let _guard = rt.enter();
            let (mut frames, mut peer) = pair();
            let frame = ready_frame();
            let (head, tail) = frame.split_at(3);
            let (head, tail) = (head.to_vec(), tail.to_vec());
            let writer = std::thread::spawn(move || {
                peer.write_all(&head).unwrap_or_else(|e| panic!("{e}"));
                std::thread::sleep(Duration::from_millis(5));
                peer.write_all(&tail).unwrap_or_else(|e| panic!("{e}"));
                peer
            });
            let body = next_within(&mut frames, spin)
                .unwrap_or_else(|e| panic!("{e}"))
                .unwrap_or_else(|| panic!("the frame came within the time"));
            let (message, blobs) = decode::<FromWorker>(body).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(message, FromWorker::Ready {});
            assert_eq!(blobs, vec![Bytes::from_static(b"blob")]);
            drop(writer.join());
        }
    }

    #[test]
    fn nothing_within_the_time_or_no_time_at_all_leaves_the_bytes_for_the_awaited_read() {
        let rt = runtime();
        let (mut frames, mut peer) = {
            let _guard = rt.enter();
            pair()
        };
        assert!(matches!(next_within(&mut frames, Duration::ZERO), Ok(None)));
        let started = Instant::now();
        assert!(matches!(
            next_within(&mut frames, Duration::from_millis(2)),
            Ok(None)
        ));
        assert!(started.elapsed() >= Duration::from_millis(2));
        // Half a frame is kept while polling gives up, and the awaited read finishes it (the
        // reader said it sleeps, so the rest of the frame rings its doorbell).
        let frame = ready_frame();
        peer.write_all(&frame[..6])
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(
            next_within(&mut frames, Duration::from_millis(2)),
            Ok(None)
        ));
        let rest = frame[6..].to_vec();
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            peer.write_all(&rest).unwrap_or_else(|e| panic!("{e}"));
            peer
        });
        let body = rt.block_on(frames.next()).unwrap_or_else(|e| panic!("{e}"));
        assert!(body.is_some());
        drop(writer.join());
    }

    #[test]
    fn a_peer_that_keeps_sending_never_holds_the_poller_past_its_time() {
        // Continued frames, back to back, for as long as the channel is open: bytes are there
        // at every look, and no body ever completes (each piece is within the frame limit, and
        // the body's limit is larger than what the writer sends in the time). Polling still
        // gives up after its time (the caller's awaited read then yields to the runtime, where
        // the call's timeout runs).
        let rt = runtime();
        let (mut frames, mut peer) = {
            let _guard = rt.enter();
            pair()
        };
        peer.set_timeout(Some(Duration::from_secs(2)));
        let writer = std::thread::spawn(move || {
            let mut piece = (CONTINUED_BIT | (4 << 10)).to_be_bytes().to_vec();
            piece.resize(4 + (4 << 10), b'x');
            let started = Instant::now();
            while started.elapsed() < Duration::from_millis(300) && peer.write_all(&piece).is_ok() {
            }
        });
        std::thread::sleep(Duration::from_millis(2));
        let started = Instant::now();
        let got = next_within(&mut frames, Duration::from_millis(5));
        let took = started.elapsed();
        assert!(
            matches!(got, Ok(None) | Err(FrameError::TooLarge { .. })),
            "nothing whole arrived"
        );
        assert!(took < Duration::from_millis(250), "polled for {took:?}");
        drop(frames);
        drop(writer.join());
    }

    #[test]
    fn end_of_file_and_oversized_frames_are_not_swallowed() {
        let rt = runtime();
        let (mut frames, peer) = {
            let _guard = rt.enter();
            pair()
        };
        drop(peer);
        // End of file: polling says nothing, and the awaited read reports the close.
        assert!(matches!(
            next_within(&mut frames, Duration::from_millis(50)),
            Ok(None)
        ));
        assert!(matches!(rt.block_on(frames.next()), Ok(None)));

        let (mut frames, mut peer) = {
            let _guard = rt.enter();
            pair()
        };
        peer.write_all(&u32::MAX.to_be_bytes())
            .unwrap_or_else(|e| panic!("{e}"));
        // A length over the limit is refused as soon as it is read, not waited for.
        assert!(matches!(
            next_within(&mut frames, Duration::from_secs(5)),
            Err(FrameError::TooLarge { .. })
        ));
    }
}
