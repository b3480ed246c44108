//! The capsule's wire format: length-prefixed frames over the worker's channel (the rings of
//! [`ring`](crate::ring) on Linux).
//!
//! A frame is a big-endian `u32` body length followed by the body:
//!
//! ```text
//! u32 header length | u8 blob count (at most 4) | u32 length of each blob | header | blobs
//! ```
//!
//! The header is one message ([`ToWorker`] or [`FromWorker`]). The two every call sends, the
//! call and its result, are written compactly (a tag byte, lengths, the values' bytes; see
//! [`compact`] and [`Message`]); the others are JSON, externally tagged —
//! `{"request": {...}}` — so they are read in one pass, unknown fields refused. The first byte
//! tells the two apart, and either encoding of a message is read. The blobs carry bytes that
//! would be wasteful in the header (file contents, bodies, child output, and the long strings
//! of a call's arguments and its result when a sender lifts them, see [`lift_strings`]). Every
//! length is checked against the frame before anything is allocated for it, and a frame larger
//! than the agreed maximum is refused unread. A peer that sends a malformed frame is dropped.
//!
//! A body larger than one frame travels in pieces: every piece but the last has the high bit of
//! its length prefix set ([`CONTINUED`]), and the reader joins them, up to [`MAX_MESSAGE`] bytes in
//! all. So a result or a request is limited by [`MAX_MESSAGE`], not by the frame size: the same
//! limits hold in process mode and in the capsule (docs/isolation-model.md, "Limits").

use std::path::PathBuf;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use capability_types::{CapabilityError, DenialCode, ErrorCode};

pub use crate::ops::Op;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::compact;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The largest frame either side accepts unless configured otherwise (16 MiB).
pub const DEFAULT_MAX_FRAME: usize = 16 << 20;

/// The high bit of a length prefix: more pieces of the same body follow.
pub const CONTINUED: u32 = 1 << 31;

/// The largest body (a message and its blobs) that may travel in pieces (1 GiB).
pub const MAX_MESSAGE: usize = 1 << 30;

/// The most memory the values of one message may take once read (4 GiB, a worker's default
/// address space): the host builds no more from a worker's message than such a worker could
/// have held itself, where a message's bytes could otherwise decode to some 32 times their
/// size. A compact header is counted as it is read and refused at the limit; a JSON header, which
/// `serde_json` reads whole, is refused unread when it is longer than a sixteenth of it (JSON's
/// worst case, `[0,0,…`, is 32 bytes of `Value` for 2 of text). See docs/isolation-model.md, "The
/// wire format".
pub const MAX_DECODED: u64 = 4 << 30;

/// How many bytes of values a byte of JSON text can decode to at most.
const JSON_AMPLIFICATION: u64 = 16;

/// At most this many blobs ride in one frame.
const MAX_BLOBS: usize = 4;

/// Why a frame could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The peer closed the channel in the middle of a frame.
    #[error("the peer closed the channel in the middle of a frame")]
    Truncated,
    /// The frame is larger than the agreed maximum.
    #[error("a frame of {len} bytes exceeds the limit of {max} bytes")]
    TooLarge {
        /// The announced (or encoded) length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The body's lengths do not add up, or there are too many blobs.
    #[error("malformed frame: {0}")]
    Malformed(String),
    /// The header is not a valid message.
    #[error("malformed message: {0}")]
    Message(#[from] serde_json::Error),
    /// The channel failed, or the peer broke its protocol (a ring's count out of range).
    #[error("channel error: {0}")]
    Io(#[from] std::io::Error),
}

/// A message of the capsule's protocol: how [`encode`] writes its header and [`decode`] reads
/// it back. Implemented by [`ToWorker`] and [`FromWorker`] only.
pub trait Message: Sized + sealed::Sealed {
    /// Appends the header: compact for a call and its result, JSON for the rest.
    fn write_header(&self, out: &mut Vec<u8>) -> Result<(), FrameError>;
    /// Reads a header in either encoding, refusing anything else.
    fn read_header(header: &[u8]) -> Result<Self, FrameError>;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::ToWorker {}
    impl Sealed for super::FromWorker {}
}

/// A header read by `read_compact` when its first byte is a compact tag (below any byte a JSON
/// text starts with), else as JSON; its values taking at most `budget` bytes either way.
fn read_either<M: for<'de> Deserialize<'de>>(
    header: &[u8],
    budget: u64,
    read_compact: fn(&[u8], u64) -> Result<M, FrameError>,
) -> Result<M, FrameError> {
    if header
        .first()
        .is_some_and(|b| *b < compact::FIRST_JSON_BYTE)
    {
        return read_compact(header, budget);
    }
    if (header.len() as u64).saturating_mul(JSON_AMPLIFICATION) > budget {
        return Err(FrameError::Malformed(format!(
            "a JSON header of {} bytes could decode to more than {budget} bytes of values",
            header.len()
        )));
    }
    Ok(serde_json::from_slice(header)?)
}

impl Message for ToWorker {
    fn write_header(&self, out: &mut Vec<u8>) -> Result<(), FrameError> {
        match self {
            ToWorker::Call {
                seq,
                call_id,
                args,
                context,
                lifted,
            } => compact::write_call(out, *seq, call_id, args, context.as_ref(), lifted),
            other => Ok(serde_json::to_writer(out, other)?),
        }
    }
    fn read_header(header: &[u8]) -> Result<Self, FrameError> {
        read_either(header, MAX_DECODED, compact::read_to_worker)
    }
}

impl Message for FromWorker {
    fn write_header(&self, out: &mut Vec<u8>) -> Result<(), FrameError> {
        match self {
            FromWorker::Done {
                seq,
                result,
                lifted,
            } => compact::write_done(out, *seq, result, lifted),
            other => Ok(serde_json::to_writer(out, other)?),
        }
    }
    fn read_header(header: &[u8]) -> Result<Self, FrameError> {
        read_either(header, MAX_DECODED, compact::read_from_worker)
    }
}

/// Encodes `message` and `blobs` as one frame (length prefix included).
pub fn encode<M: Message>(message: &M, blobs: &[Bytes], max: usize) -> Result<Vec<u8>, FrameError> {
    let mut out = Vec::new();
    encode_into(&mut out, message, blobs, max)?;
    Ok(out)
}

/// The most buffer a sender keeps between frames: a large frame's is not held while it idles.
pub(crate) const KEPT_BUFFER: usize = 64 << 10;

/// Empties a sender's buffer for its next frame, and lets it go if a large frame grew it past
/// [`KEPT_BUFFER`].
pub(crate) fn reuse(buf: &mut Vec<u8>) {
    buf.clear();
    if buf.capacity() > KEPT_BUFFER {
        *buf = Vec::new();
    }
}

/// [`encode`], appending the frame to `out` (a sender's buffer, kept between frames); on an
/// error `out` is left as it was.
pub fn encode_into<M: Message>(
    out: &mut Vec<u8>,
    message: &M,
    blobs: &[Bytes],
    max: usize,
) -> Result<(), FrameError> {
    let start = out.len();
    let written = append_frame(out, start, message, blobs, max);
    if written.is_err() {
        out.truncate(start);
    }
    written
}

fn append_frame<M: Message>(
    out: &mut Vec<u8>,
    start: usize,
    message: &M,
    blobs: &[Bytes],
    max: usize,
) -> Result<(), FrameError> {
    if blobs.len() > MAX_BLOBS {
        return Err(FrameError::Malformed(format!(
            "{} blobs (at most {MAX_BLOBS})",
            blobs.len()
        )));
    }
    let too_large = |len: usize| FrameError::TooLarge {
        len,
        max: MAX_MESSAGE,
    };
    let blob_bytes: usize = blobs.iter().map(Bytes::len).sum();
    // Written in place: the frame's length prefix and the header's length are filled in once
    // the header is written, so a frame in one piece is built without a copy of its body.
    out.reserve(4 + 4 + 1 + 4 * blobs.len() + 256 + blob_bytes);
    out.put_u32(0);
    out.put_u32(0);
    // Fits: checked against MAX_BLOBS above.
    out.put_u8(blobs.len() as u8);
    for blob in blobs {
        out.put_u32(u32::try_from(blob.len()).map_err(|_| too_large(blob.len()))?);
    }
    let header_at = out.len();
    message.write_header(out)?;
    let header_len = out.len() - header_at;
    let body_len = out.len() - start - 4 + blob_bytes;
    if body_len > MAX_MESSAGE {
        return Err(too_large(body_len));
    }
    let header_len = u32::try_from(header_len).map_err(|_| too_large(header_len))?;
    out[start + 4..start + 8].copy_from_slice(&header_len.to_be_bytes());
    for blob in blobs {
        out.extend_from_slice(blob);
    }
    // One frame, or pieces of at most `max` bytes (at least one byte each).
    let piece = max.clamp(1, (CONTINUED - 1) as usize);
    if body_len <= piece {
        // Fits: at most `piece` < 2^31.
        out[start..start + 4].copy_from_slice(&(body_len as u32).to_be_bytes());
        return Ok(());
    }
    let body = out.split_off(start + 4);
    out.truncate(start);
    let pieces = body_len.div_ceil(piece);
    out.reserve(4 * pieces + body_len);
    let mut chunks = body.chunks(piece).peekable();
    while let Some(chunk) = chunks.next() {
        // Fits: at most `piece` < 2^31.
        let len = chunk.len() as u32;
        out.put_u32(if chunks.peek().is_some() {
            len | CONTINUED
        } else {
            len
        });
        out.extend_from_slice(chunk);
    }
    Ok(())
}

/// Splits a frame body (without its length prefix) into its message and blobs.
pub fn decode<M: Message>(mut body: Bytes) -> Result<(M, Vec<Bytes>), FrameError> {
    let malformed = |what: &str| FrameError::Malformed(what.to_owned());
    if body.len() < 5 {
        return Err(malformed("shorter than its fixed header"));
    }
    let header_len = body.get_u32() as usize;
    let count = usize::from(body.get_u8());
    if count > MAX_BLOBS {
        return Err(FrameError::Malformed(format!(
            "{count} blobs (at most {MAX_BLOBS})"
        )));
    }
    if body.len() < 4 * count {
        return Err(malformed("blob lengths cut short"));
    }
    let mut lengths = Vec::with_capacity(count);
    for _ in 0..count {
        lengths.push(body.get_u32() as usize);
    }
    let announced = lengths
        .iter()
        .try_fold(header_len, |sum, len| sum.checked_add(*len))
        .ok_or_else(|| malformed("lengths overflow"))?;
    if announced != body.len() {
        return Err(FrameError::Malformed(format!(
            "the lengths announce {announced} bytes but {} follow",
            body.len()
        )));
    }
    let header = body.split_to(header_len);
    let message = M::read_header(&header)?;
    let blobs = lengths.into_iter().map(|len| body.split_to(len)).collect();
    Ok((message, blobs))
}

/// Reads frames from one stream, keeping a partial frame between calls, so that
/// [`next`](Self::next) may be cancelled (in a `select!`) without losing bytes.
#[derive(Debug)]
pub struct FrameReader<R> {
    reader: R,
    buf: BytesMut,
    max: usize,
    /// The pieces of a body that came in continued frames so far.
    pending: BytesMut,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// Frames of at most `max` bytes from `reader`.
    pub fn new(reader: R, max: usize) -> Self {
        Self {
            reader,
            buf: BytesMut::with_capacity(64 << 10),
            max,
            pending: BytesMut::new(),
        }
    }

    /// The next body, its pieces joined; `Ok(None)` when the peer closed the channel between
    /// bodies. Cancel-safe: its only await is a `read_buf` into the kept buffer, and pieces
    /// already read are kept.
    pub async fn next(&mut self) -> Result<Option<Bytes>, FrameError> {
        loop {
            if let Some(body) = self.buffered()? {
                return Ok(Some(body));
            }
            if self.reader.read_buf(&mut self.buf).await? == 0 {
                return if self.buf.is_empty() && self.pending.is_empty() {
                    Ok(None)
                } else {
                    Err(FrameError::Truncated)
                };
            }
        }
    }
}

impl<R> FrameReader<R> {
    /// The next body if the bytes read so far hold all of it; `Ok(None)` when more must be
    /// read. Checks each frame's length against the limits before waiting for its bytes.
    pub fn buffered(&mut self) -> Result<Option<Bytes>, FrameError> {
        while self.buf.len() >= 4 {
            let prefix = u32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]);
            let continued = prefix & CONTINUED != 0;
            let len = (prefix & !CONTINUED) as usize;
            if len > self.max {
                return Err(FrameError::TooLarge { len, max: self.max });
            }
            if self.pending.len() + len > MAX_MESSAGE {
                return Err(FrameError::TooLarge {
                    len: self.pending.len() + len,
                    max: MAX_MESSAGE,
                });
            }
            if self.buf.len() < 4 + len {
                self.buf.reserve(4 + len - self.buf.len());
                return Ok(None);
            }
            let mut frame = self.buf.split_to(4 + len);
            frame.advance(4);
            if continued {
                self.pending.extend_from_slice(&frame);
                continue;
            }
            if self.pending.is_empty() {
                return Ok(Some(frame.freeze()));
            }
            let mut whole = std::mem::take(&mut self.pending);
            whole.extend_from_slice(&frame);
            return Ok(Some(whole.freeze()));
        }
        Ok(None)
    }

    /// The stream and the buffer of bytes read from it, for a caller that reads without
    /// awaiting (the capsule's polling wait); what it appends is parsed by
    /// [`buffered`](Self::buffered).
    #[cfg(target_os = "linux")]
    pub(crate) fn parts(&mut self) -> (&mut R, &mut BytesMut) {
        (&mut self.reader, &mut self.buf)
    }
}

/// Strings of at least this many bytes in a call's arguments or its result ride in the frame's
/// blob instead of its JSON header: written as JSON, a
/// string costs about a nanosecond a byte to escape and as much to read back, against a copy.
pub const LIFTED_LEN: usize = 256;

/// Takes the strings of at least [`LIFTED_LEN`] bytes out of `value`, leaving each one empty:
/// their places (counted among all the value's strings in document order, an object's values
/// in the order of their keys) with their lengths, and the frame's blobs: none when nothing was long
/// enough, else one holding their bytes, joined. [`restore_strings`] puts them back.
pub fn lift_strings(value: &mut Value) -> (Vec<(u32, u32)>, Vec<Bytes>) {
    let mut places = Vec::new();
    let mut taken: Vec<String> = Vec::new();
    let mut ordinal = 0u32;
    each_string(value, |text| {
        if let (true, Ok(len)) = (text.len() >= LIFTED_LEN, u32::try_from(text.len())) {
            places.push((ordinal, len));
            taken.push(std::mem::take(text));
        }
        ordinal = ordinal.saturating_add(1);
        Ok(())
    })
    .unwrap_or(());
    let blobs = match taken.len() {
        0 => Vec::new(),
        1 => vec![Bytes::from(taken.pop().unwrap_or_default().into_bytes())],
        _ => vec![Bytes::from(taken.concat().into_bytes())],
    };
    (places, blobs)
}

/// Puts back the strings [`lift_strings`] took: with no places there must be no blob; with
/// places, one blob, each place an empty string of `value`, the places in order, the lengths
/// on character boundaries, and the blob used whole. Anything else is a malformed frame.
pub fn restore_strings(
    value: &mut Value,
    lifted: &[(u32, u32)],
    blobs: &[Bytes],
) -> Result<(), FrameError> {
    let malformed = |what: &str| FrameError::Malformed(format!("lifted strings: {what}"));
    let blob = match (lifted.is_empty(), blobs) {
        (true, []) => return Ok(()),
        (false, [blob]) => blob,
        _ => return Err(malformed("the blobs do not match the places")),
    };
    let mut places = lifted.iter().peekable();
    let mut ordinal = 0u32;
    let mut offset = 0usize;
    each_string(value, |text| {
        if let Some(&&(at, len)) = places.peek()
            && at == ordinal
        {
            places.next();
            if !text.is_empty() {
                return Err(malformed("a place that is not an empty string"));
            }
            let end = offset
                .checked_add(len as usize)
                .filter(|end| *end <= blob.len())
                .ok_or_else(|| malformed("longer than the blob"))?;
            let piece = blob.get(offset..end).unwrap_or_default();
            *text = std::str::from_utf8(piece)
                .map_err(|_| malformed("not UTF-8"))?
                .to_owned();
            offset = end;
        }
        ordinal = ordinal.saturating_add(1);
        Ok(())
    })?;
    if places.next().is_some() {
        return Err(malformed(
            "places out of order or beyond the value's strings",
        ));
    }
    if offset != blob.len() {
        return Err(malformed("bytes left over in the blob"));
    }
    Ok(())
}

/// Calls `f` on every string of `value`, in document order with each object's values in the
/// order of their keys, without recursion.
///
/// Key order, not the map's own: the two ends of a channel may be different binaries, and a
/// binary whose `serde_json` keeps insertion order (`preserve_order`) iterates a decoded object
/// in the order it was written, while one that does not iterates it sorted. Counted by keys,
/// both ends number a value's strings alike. Sorted maps (this workspace's) are taken as they
/// are.
fn each_string(
    value: &mut Value,
    mut f: impl FnMut(&mut String) -> Result<(), FrameError>,
) -> Result<(), FrameError> {
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        match value {
            Value::String(text) => f(text)?,
            Value::Array(items) => stack.extend(items.iter_mut().rev()),
            Value::Object(map) => {
                if map.keys().zip(map.keys().skip(1)).all(|(a, b)| a < b) {
                    stack.extend(map.values_mut().rev());
                } else {
                    let mut entries: Vec<_> = map.iter_mut().collect();
                    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
                    stack.extend(entries.into_iter().rev().map(|(_, v)| v));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Writes one encoded frame.
pub async fn write_frame<W: AsyncWrite + Unpin>(
    writer: &mut W,
    frame: &[u8],
) -> Result<(), FrameError> {
    writer.write_all(frame).await?;
    writer.flush().await?;
    Ok(())
}

/// The settings a worker is started with (its one command-line argument after the tool name).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerSettings {
    /// The largest frame either side sends.
    pub max_frame: usize,
    /// `RLIMIT_AS` in bytes.
    pub address_space: Option<u64>,
    /// `RLIMIT_CPU` in seconds.
    pub cpu_seconds: Option<u64>,
    /// `RLIMIT_NOFILE`.
    pub open_files: Option<u64>,
    /// `RLIMIT_FSIZE` in bytes.
    pub file_size: Option<u64>,
    /// How long the worker polls its channel for the host's next frame before it sleeps, in
    /// microseconds (0: it never polls). See [`CapsuleConfig::spin`](crate::CapsuleConfig::spin).
    #[serde(default)]
    pub spin_micros: u64,
}

/// What the host sends a worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
#[non_exhaustive]
pub enum ToWorker {
    /// Run one call. The worker runs one call at a time.
    Call {
        /// The call's number on this worker; requests of the call carry it.
        seq: u64,
        /// The call's id in its batch.
        call_id: String,
        /// The arguments.
        args: Value,
        /// The rest of the call's identity and the scoped objects it has; absent when they are
        /// those of this worker's previous call (the host sends them only when they change, and
        /// a worker that has none refuses the call as a protocol error).
        context: Option<CallContext>,
        /// Where the arguments' long strings go back ([`lift_strings`]); their bytes are the
        /// frame's one blob.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        lifted: Vec<(u32, u32)>,
    },
    /// The answer to a [`FromWorker::Request`].
    Reply {
        /// The request's id.
        id: u64,
        /// The answer, in the shape its operation defines (its bytes ride in the frame's
        /// blobs; see [`Operation::Answer`](crate::ops::Operation::Answer)).
        result: Result<Value, WireError>,
    },
}

/// The identity of a call (but its id) and which scoped objects it has: the same for the calls
/// of one session and directory, so sent once for them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallContext {
    /// The session.
    pub session_id: String,
    /// The personality.
    pub personality_id: Option<String>,
    /// The tool's name.
    pub tool: String,
    /// Relative paths resolve against this directory (on the host).
    pub working_dir: PathBuf,
    /// The call has a fetcher.
    pub fetch: bool,
    /// The call has a file system view.
    pub fs: bool,
    /// The call has a secrets resolver with these declared refs.
    pub secrets: Option<Vec<String>>,
    /// The call has a spawner.
    pub process: bool,
    /// The call has a key-value store.
    pub kv: bool,
    /// The call has attachments (an older host leaves it out: none).
    #[serde(default)]
    pub attachments: bool,
}

/// What a worker sends its host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
#[non_exhaustive]
pub enum FromWorker {
    /// The worker confined itself and waits for calls.
    Ready {},
    /// The worker could not confine itself and exits.
    Refused {
        /// Why.
        reason: String,
    },
    /// A scoped-object call of the running call.
    Request {
        /// Answered by the reply of the same id.
        id: u64,
        /// The running call's number.
        seq: u64,
        /// What is asked.
        op: Op,
    },
    /// The call's result.
    Done {
        /// The call's number.
        seq: u64,
        /// What `execute` returned, its long strings left empty when they ride in the frame's
        /// blob ([`lift_strings`]).
        result: Result<Value, WireError>,
        /// Where the result's long strings go back: (their place among the value's strings,
        /// their length in bytes), in order; their bytes are the frame's one blob.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        lifted: Vec<(u32, u32)>,
    },
}

/// A [`CapabilityError`] on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireError {
    /// The result code.
    pub code: ErrorCode,
    /// The denial code, for `denied`.
    pub denial: Option<DenialCode>,
    /// The message (for a denial, without its code prefix).
    pub message: String,
}

impl From<&CapabilityError> for WireError {
    fn from(e: &CapabilityError) -> Self {
        let message = match e {
            CapabilityError::Denied { message, .. } => message.clone(),
            other => other.to_string(),
        };
        WireError {
            code: e.result_code(),
            denial: e.denial_code(),
            message,
        }
    }
}

impl From<WireError> for CapabilityError {
    fn from(e: WireError) -> Self {
        match (e.code, e.denial) {
            (ErrorCode::Denied, Some(code)) => CapabilityError::denied(code, e.message),
            (ErrorCode::InputInvalid, _) => CapabilityError::InvalidInput(e.message),
            (ErrorCode::NotAvailable, _) => CapabilityError::NotAvailable(e.message),
            (ErrorCode::Timeout, _) => CapabilityError::Timeout(e.message),
            (ErrorCode::Cancelled, _) => CapabilityError::Cancelled,
            (ErrorCode::NotFound, _) => CapabilityError::NotFound(e.message),
            // A denial without a code, or a code this build does not know: a failure, never
            // something weaker.
            _ => CapabilityError::Failed(e.message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const MAX: usize = 1 << 16;

    fn body(frame: &[u8]) -> Bytes {
        Bytes::copy_from_slice(&frame[4..])
    }

    /// The body of a frame whose header is `json`, without blobs.
    fn frame(json: &str) -> Bytes {
        let mut body = Vec::new();
        body.put_u32(json.len() as u32);
        body.put_u8(0);
        body.extend_from_slice(json.as_bytes());
        Bytes::from(body)
    }

    #[test]
    fn frames_round_trip_with_blobs() {
        let op = FromWorker::Request {
            id: 7,
            seq: 1,
            op: Op::from(crate::ops::FsWrite {
                path: PathBuf::from("/w/out.txt"),
            }),
        };
        let frame = encode(&op, &[Bytes::from_static(b"hello\0world")], MAX).unwrap();
        assert_eq!(
            u32::from_be_bytes(frame[..4].try_into().unwrap()) as usize,
            frame.len() - 4
        );
        let (back, blobs): (FromWorker, _) = decode(body(&frame)).unwrap();
        assert_eq!(back, op);
        assert_eq!(blobs, vec![Bytes::from_static(b"hello\0world")]);
    }

    #[test]
    fn a_call_carries_its_context_or_leaves_it_to_the_previous_call() {
        let context = CallContext {
            session_id: "s".into(),
            personality_id: Some("p".into()),
            tool: "echo".into(),
            working_dir: PathBuf::from("/w"),
            fetch: false,
            fs: true,
            secrets: Some(vec!["TOKEN".into()]),
            process: false,
            kv: false,
            attachments: false,
        };
        for context in [Some(context), None] {
            let call = ToWorker::Call {
                seq: 3,
                call_id: "c".into(),
                args: serde_json::json!({"a": [1, 2]}),
                context,
                lifted: Vec::new(),
            };
            let (back, _): (ToWorker, _) = decode(body(&encode(&call, &[], MAX).unwrap())).unwrap();
            assert_eq!(back, call);
        }
        // The call's id is the call's, not the context's; the older tagged form is refused.
        for hostile in [
            r#"{"call":{"seq":1,"call_id":"c","args":{},"context":{"session_id":"s","personality_id":null,"call_id":"c","tool":"t","working_dir":"/w","fetch":false,"fs":false,"secrets":null,"process":false,"kv":false}}}"#,
            r#"{"type":"call","seq":1,"call_id":"c","args":{},"context":null}"#,
            r#"{"call":{"seq":1,"args":{},"context":null}}"#,
        ] {
            assert!(
                matches!(
                    decode::<ToWorker>(frame(hostile)),
                    Err(FrameError::Message(_))
                ),
                "{hostile}"
            );
        }
    }

    #[test]
    fn errors_keep_their_code_and_a_denial_never_weakens() {
        let denied = CapabilityError::denied(DenialCode::PathNotReachable, "read of /etc");
        let wire = WireError::from(&denied);
        assert_eq!(wire.message, "read of /etc");
        assert_eq!(CapabilityError::from(wire), denied);
        let forged = WireError {
            code: ErrorCode::Denied,
            denial: None,
            message: "x".into(),
        };
        assert_eq!(
            CapabilityError::from(forged).result_code(),
            ErrorCode::ExecutionFailed
        );
    }

    // guarantee: G-CAP-03
    #[tokio::test]
    async fn a_body_larger_than_a_frame_travels_in_pieces() {
        // issue 13, class 8: what process mode returns, the capsule returns too.
        let big = Bytes::from((0..3 * MAX + 17).map(|i| i as u8).collect::<Vec<u8>>());
        let frame = encode(&FromWorker::Ready {}, std::slice::from_ref(&big), MAX).unwrap();
        assert!(u32::from_be_bytes(frame[..4].try_into().unwrap()) & CONTINUED != 0);
        let small = encode(&FromWorker::Refused { reason: "x".into() }, &[], MAX).unwrap();
        let mut stream = frame.clone();
        stream.extend_from_slice(&small);
        let mut frames = FrameReader::new(&stream[..], MAX);
        let (message, blobs): (FromWorker, _) =
            decode(frames.next().await.unwrap().unwrap()).unwrap();
        assert_eq!((message, blobs), (FromWorker::Ready {}, vec![big]));
        let (message, _): (FromWorker, _) = decode(frames.next().await.unwrap().unwrap()).unwrap();
        assert_eq!(message, FromWorker::Refused { reason: "x".into() });
        assert!(frames.next().await.unwrap().is_none());
        // Cut inside the pieces: truncated, not a clean end.
        let mut cut = FrameReader::new(&frame[..MAX + 8], MAX);
        assert!(matches!(cut.next().await, Err(FrameError::Truncated)));
    }

    #[test]
    fn oversized_frames_are_refused_before_and_after_encoding() {
        let five = Bytes::from_static(b"x");
        assert!(matches!(
            encode(
                &FromWorker::Ready {},
                &[five.clone(), five.clone(), five.clone(), five.clone(), five],
                MAX
            ),
            Err(FrameError::Malformed(_))
        ));
    }

    #[tokio::test]
    async fn frames_appended_to_a_kept_buffer_read_back_in_order_and_a_failed_one_leaves_it_whole()
    {
        let mut out = b"queued".to_vec();
        let done = FromWorker::Done {
            seq: 1,
            result: Ok(serde_json::json!({"text": "x".repeat(100)})),
            lifted: Vec::new(),
        };
        encode_into(&mut out, &done, &[], MAX).unwrap();
        // Split into pieces of 16 bytes, after a frame in one piece.
        encode_into(
            &mut out,
            &FromWorker::Ready {},
            &[Bytes::from_static(b"b")],
            16,
        )
        .unwrap();
        let before = out.clone();
        let five = vec![Bytes::from_static(b"x"); 5];
        assert!(encode_into(&mut out, &FromWorker::Ready {}, &five, MAX).is_err());
        let too_deep = FromWorker::Done {
            seq: 2,
            result: Ok((0..200).fold(serde_json::json!(1), |v, _| serde_json::json!([v]))),
            lifted: Vec::new(),
        };
        assert!(encode_into(&mut out, &too_deep, &[], MAX).is_err());
        assert_eq!(out, before, "a frame that failed left nothing behind");
        assert_eq!(&out[..6], b"queued");
        let mut reader = FrameReader::new(&out[6..], MAX);
        let first = reader.next().await.unwrap().unwrap();
        assert_eq!(decode::<FromWorker>(first).unwrap(), (done, Vec::new()));
        let second = reader.next().await.unwrap().unwrap();
        assert_eq!(
            decode::<FromWorker>(second).unwrap(),
            (FromWorker::Ready {}, vec![Bytes::from_static(b"b")])
        );
        assert!(reader.next().await.unwrap().is_none());
    }

    #[tokio::test]
    async fn a_hostile_length_prefix_is_refused_unread() {
        let mut input: &[u8] = &[0xff, 0xff, 0xff, 0xff, 1, 2, 3];
        assert!(matches!(
            FrameReader::new(&mut input, MAX).next().await,
            Err(FrameError::TooLarge {
                len: 0x7fff_ffff,
                ..
            })
        ));
    }

    #[tokio::test]
    async fn truncation_is_told_apart_from_a_clean_close() {
        let mut empty: &[u8] = &[];
        assert!(
            FrameReader::new(&mut empty, MAX)
                .next()
                .await
                .unwrap()
                .is_none()
        );
        let mut half_prefix: &[u8] = &[0, 0];
        assert!(matches!(
            FrameReader::new(&mut half_prefix, MAX).next().await,
            Err(FrameError::Truncated)
        ));
        let mut half_body: &[u8] = &[0, 0, 0, 9, 1, 2];
        assert!(matches!(
            FrameReader::new(&mut half_body, MAX).next().await,
            Err(FrameError::Truncated)
        ));
    }

    #[tokio::test]
    async fn the_frame_reader_reassembles_split_frames_and_refuses_hostile_ones() {
        let one = encode(&FromWorker::Ready {}, &[Bytes::from_static(b"abc")], MAX).unwrap();
        let two = encode(&FromWorker::Refused { reason: "x".into() }, &[], MAX).unwrap();
        let mut stream = one.clone();
        stream.extend_from_slice(&two);
        // Delivered a byte at a time: every frame comes out whole, then a clean end.
        let (mut tx, rx) = tokio::io::duplex(1);
        let writer = tokio::spawn(async move {
            for byte in stream {
                tx.write_all(&[byte]).await.unwrap();
            }
        });
        let mut frames = FrameReader::new(rx, MAX);
        let first = frames.next().await.unwrap().unwrap();
        assert_eq!(first.as_ref(), &one[4..]);
        let second = frames.next().await.unwrap().unwrap();
        assert_eq!(second.as_ref(), &two[4..]);
        writer.await.unwrap();
        assert!(frames.next().await.unwrap().is_none());

        let mut hostile = FrameReader::new(&[0xff, 0xff, 0xff, 0xff, 0][..], MAX);
        assert!(matches!(
            hostile.next().await,
            Err(FrameError::TooLarge { .. })
        ));
        let mut cut = FrameReader::new(&one[..one.len() - 1], MAX);
        assert!(matches!(cut.next().await, Err(FrameError::Truncated)));
    }

    #[test]
    fn inconsistent_lengths_are_malformed() {
        let frame = encode(&FromWorker::Ready {}, &[Bytes::from_static(b"abc")], MAX).unwrap();
        let mut bad = frame[4..].to_vec();
        // Claim a longer blob than follows.
        bad[5..9].copy_from_slice(&10u32.to_be_bytes());
        assert!(matches!(
            decode::<FromWorker>(Bytes::from(bad)),
            Err(FrameError::Malformed(_))
        ));
        // A header length that runs past the end.
        let mut bad = frame[4..].to_vec();
        bad[0..4].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(matches!(
            decode::<FromWorker>(Bytes::from(bad)),
            Err(FrameError::Malformed(_))
        ));
        // Too many blobs announced.
        let mut bad = frame[4..].to_vec();
        bad[4] = 200;
        assert!(matches!(
            decode::<FromWorker>(Bytes::from(bad)),
            Err(FrameError::Malformed(_))
        ));
        for short in [&[][..], &[0, 0, 0][..], &[0, 0, 0, 0, 2, 0, 0][..]] {
            assert!(matches!(
                decode::<FromWorker>(Bytes::copy_from_slice(short)),
                Err(FrameError::Malformed(_))
            ));
        }
    }

    #[test]
    fn unknown_messages_and_fields_are_refused() {
        for hostile in [
            r#"{"ready":{"extra":1}}"#,
            r#"{"escalate":{}}"#,
            r#"{"request":{"id":1,"seq":1,"op":{"op":"fs_read","path":"/x","follow":true}}}"#,
            r#"{"request":{"id":1,"seq":1,"op":{"op":"format_disk"}}}"#,
            r#"{"done":{"seq":1,"result":{"Ok":1},"also":2}}"#,
            r#"{"done":{"seq":1,"result":{"Ok":1}},"ready":{}}"#,
            r#"{"type":"ready"}"#,
            r#"not json"#,
            "",
        ] {
            assert!(
                matches!(
                    decode::<FromWorker>(frame(hostile)),
                    Err(FrameError::Message(_))
                ),
                "{hostile}"
            );
        }
        let (ok, _): (FromWorker, _) = decode(frame(r#"{"ready":{}}"#)).unwrap();
        assert_eq!(ok, FromWorker::Ready {});
    }

    // guarantee: G-CAP-02
    #[test]
    fn a_json_header_that_could_decode_past_the_budget_is_refused_unread() {
        // `serde_json` reads a header whole, so its length is what is checked: JSON's worst,
        // `[0,0,…`, is 32 bytes of values for every 2 of text.
        let header = br#"{"done":{"seq":1,"result":{"Ok":[0,0,0,0]}}}"#;
        let least = header.len() as u64 * JSON_AMPLIFICATION;
        assert!(read_either(header, least, compact::read_from_worker).is_ok());
        match read_either(header, least - 1, compact::read_from_worker) {
            Err(FrameError::Malformed(why)) => assert!(
                why.contains(&format!("could decode to more than {} bytes", least - 1)),
                "{why}"
            ),
            other => panic!("{other:?}"),
        }
        // Under the real budget, a JSON header may be up to 256 MiB long.
        assert_eq!(MAX_DECODED / JSON_AMPLIFICATION, 256 << 20);
    }

    // guarantee: G-CAP-03
    #[test]
    fn long_strings_are_lifted_in_document_order_and_restored_whole() {
        let long = |c: char| c.to_string().repeat(LIFTED_LEN);
        let original = json!({
            "a": long('a'),
            "b": ["short", long('ü'), {"c": long('c'), "d": 7}],
            "e": "x".repeat(LIFTED_LEN - 1),
        });
        let mut value = original.clone();
        let (lifted, blobs) = lift_strings(&mut value);
        let blob = &blobs[0];
        // Visited: a, "short", ü…, c…, e: the second, fourth and fifth strings stay.
        assert_eq!(
            lifted,
            vec![
                (0, LIFTED_LEN as u32),
                (2, 2 * LIFTED_LEN as u32),
                (3, LIFTED_LEN as u32)
            ]
        );
        assert_eq!(blob.len(), 4 * LIFTED_LEN);
        assert_eq!(value["a"], json!(""), "left empty");
        assert_eq!(
            value["e"], original["e"],
            "one byte short of the length stays"
        );
        // Through a frame, as the worker sends it and the host reads it.
        let done = FromWorker::Done {
            seq: 1,
            result: Ok(value),
            lifted,
        };
        let sent = encode(&done, &blobs, MAX).unwrap();
        let (back, blobs): (FromWorker, _) = decode(body(&sent)).unwrap();
        let FromWorker::Done {
            result: Ok(mut value),
            lifted,
            ..
        } = back
        else {
            panic!("{back:?}")
        };
        restore_strings(&mut value, &lifted, &blobs).unwrap();
        assert_eq!(value, original);
        // Nothing long: nothing lifted, and a frame without the field reads as before.
        let mut plain = json!({"n": [1, "two"]});
        assert_eq!(lift_strings(&mut plain), (Vec::new(), Vec::new()));
        let (old, _): (FromWorker, _) =
            decode(frame(r#"{"done":{"seq":1,"result":{"Ok":{"n":1}}}}"#)).unwrap();
        assert!(matches!(old, FromWorker::Done { lifted, .. } if lifted.is_empty()));
    }

    #[test]
    fn lifted_strings_that_do_not_fit_their_value_are_malformed() {
        let value = || json!({"a": "", "b": ["", "kept"]});
        let blob = "αβ".as_bytes(); // 4 bytes, two characters of two bytes
        for (lifted, blob, why) in [
            (vec![(0, 4)], blob, "fits"),
            (vec![(2, 4)], blob, "a place that is not an empty string"),
            (vec![(1, 2), (0, 2)], blob, "out of order"),
            (vec![(0, 2), (0, 2)], blob, "twice"),
            (vec![(9, 4)], blob, "beyond the value's strings"),
            (vec![(0, 5)], blob, "longer than the blob"),
            (vec![(0, 2)], blob, "bytes left over"),
            (vec![(0, 1), (1, 3)], blob, "not on a character boundary"),
            (vec![(0, 2)], &[0xff, 0xfe][..], "not UTF-8"),
            (vec![(0, u32::MAX)], blob, "a length past any blob"),
        ] {
            let mut v = value();
            let outcome = restore_strings(&mut v, &lifted, &[Bytes::copy_from_slice(blob)]);
            if why == "fits" {
                assert!(outcome.is_ok(), "{outcome:?}");
                assert_eq!(v["a"], json!("αβ"));
            } else {
                assert!(
                    matches!(outcome, Err(FrameError::Malformed(_))),
                    "{why}: {outcome:?}"
                );
            }
        }
        // Places without a blob, a blob without places, two blobs.
        let one = Bytes::from_static(b"ab");
        for (lifted, blobs) in [
            (vec![(0, 2)], vec![]),
            (vec![], vec![one.clone()]),
            (vec![(0, 1), (1, 1)], vec![one.slice(..1), one.slice(1..)]),
        ] {
            let outcome = restore_strings(&mut value(), &lifted, &blobs);
            assert!(
                matches!(outcome, Err(FrameError::Malformed(_))),
                "{lifted:?} with {} blobs: {outcome:?}",
                blobs.len()
            );
        }
        assert!(
            restore_strings(&mut value(), &[], &[]).is_ok(),
            "nothing lifted"
        );
    }
}
