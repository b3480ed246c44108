//! The compact encoding of the two messages every capsule call sends: the call
//! ([`ToWorker::Call`]) and its result ([`FromWorker::Done`]).
//!
//! Read and written as JSON, these two cost more than the crossing between the processes did
//! (docs/isolation-model.md, "The wire format"). Here a value is a tag byte followed by its
//! contents, every length a big-endian `u32` counted before anything is allocated for it, every
//! string checked for UTF-8, nesting limited to [`MAX_DEPTH`], an object's duplicate key and
//! anything left over after the message refused, and the memory its values take counted as they
//! are made, up to [`MAX_DECODED`](crate::wire::MAX_DECODED). The rarer parts (a call's context,
//! an error) stay JSON inside, read as strictly as the JSON messages are.
//!
//! A compact header starts with its message's tag (1 for a call, 2 for a result), a byte no
//! JSON text starts with, so [`decode`](crate::wire::decode) tells the two encodings apart by
//! the first byte. The layout (`u32` and `u64` big-endian, `str` a `u32` length and UTF-8):
//!
//! ```text
//! call:   01 | seq u64 | call_id str | args value | 00, or 01 + context as JSON str | lifted
//! result: 02 | seq u64 | 00 + value, or 01 + error as JSON str | lifted
//! lifted: u32 count | (place u32, length u32) each
//! value:  00 null | 01 false | 02 true | 03 u64 | 04 i64 (negative only) | 05 f64 (finite)
//!         | 06 str | 07 u32 count + values | 08 u32 count + (key str, value) each
//! ```

use bytes::{Buf, BufMut, TryGetError};
use serde_json::map::Entry;
use serde_json::{Map, Number, Value};

use crate::wire::{CallContext, FrameError, FromWorker, MAX_MESSAGE, ToWorker, WireError};

/// The first byte of a compact [`ToWorker::Call`].
pub(crate) const CALL: u8 = 0x01;
/// The first byte of a compact [`FromWorker::Done`].
pub(crate) const DONE: u8 = 0x02;
/// Bytes below this start a compact header; JSON text starts with `{` or white space.
pub(crate) const FIRST_JSON_BYTE: u8 = 0x09;

/// The deepest nesting of arrays and objects a compact value may have, on either side: what
/// `serde_json` reads at most, so a value that crosses as JSON crosses compactly too.
pub const MAX_DEPTH: usize = 128;

const NULL: u8 = 0;
const FALSE: u8 = 1;
const TRUE: u8 = 2;
const UNSIGNED: u8 = 3;
const NEGATIVE: u8 = 4;
const FLOAT: u8 = 5;
const STRING: u8 = 6;
const ARRAY: u8 = 7;
const OBJECT: u8 = 8;

/// The most items reserved for an array before they are read: each takes 32 bytes as a
/// `Value` and as little as one on the wire.
const RESERVED_ITEMS: usize = 1024;

/// What a decoded value takes at least, counted against the message's budget: the `Value`
/// itself (the whole value, an array's item, an object's value), and a string's bytes...
const VALUE_BYTES: usize = std::mem::size_of::<Value>();
/// ...and an object's key, besides its bytes (the map's own nodes are not counted: what is
/// counted is never more than the value takes, so a value a worker could hold is never refused).
const KEY_BYTES: usize = std::mem::size_of::<String>();

const OK: u8 = 0;
const ERR: u8 = 1;
const ABSENT: u8 = 0;
const PRESENT: u8 = 1;

fn malformed(what: impl Into<String>) -> FrameError {
    FrameError::Malformed(format!("compact message: {}", what.into()))
}

/// Writes a [`ToWorker::Call`]'s header.
pub(crate) fn write_call(
    out: &mut Vec<u8>,
    seq: u64,
    call_id: &str,
    args: &Value,
    context: Option<&CallContext>,
    lifted: &[(u32, u32)],
) -> Result<(), FrameError> {
    out.push(CALL);
    out.put_u64(seq);
    write_str(out, call_id)?;
    write_value(out, args)?;
    match context {
        None => out.push(ABSENT),
        Some(context) => {
            out.push(PRESENT);
            write_str(out, &serde_json::to_string(context)?)?;
        }
    }
    write_lifted(out, lifted)
}

/// Writes a [`FromWorker::Done`]'s header.
pub(crate) fn write_done(
    out: &mut Vec<u8>,
    seq: u64,
    result: &Result<Value, WireError>,
    lifted: &[(u32, u32)],
) -> Result<(), FrameError> {
    out.push(DONE);
    out.put_u64(seq);
    match result {
        Ok(value) => {
            out.push(OK);
            write_value(out, value)?;
        }
        Err(error) => {
            out.push(ERR);
            write_str(out, &serde_json::to_string(error)?)?;
        }
    }
    write_lifted(out, lifted)
}

/// Reads a compact [`ToWorker`] header (its first byte included), its values taking at most
/// `budget` bytes.
pub(crate) fn read_to_worker(header: &[u8], budget: u64) -> Result<ToWorker, FrameError> {
    let mut input = Reader::new(header, budget);
    match input.byte()? {
        CALL => {
            let seq = input.u64()?;
            let call_id = input.owned_str()?;
            let args = input.value()?;
            let context = match input.byte()? {
                ABSENT => None,
                PRESENT => Some(serde_json::from_str(input.str()?)?),
                other => return Err(malformed(format!("context marker {other}"))),
            };
            let lifted = input.lifted()?;
            input.end()?;
            Ok(ToWorker::Call {
                seq,
                call_id,
                args,
                context,
                lifted,
            })
        }
        other => Err(malformed(format!("tag {other} is no message to a worker"))),
    }
}

/// Reads a compact [`FromWorker`] header (its first byte included), its values taking at most
/// `budget` bytes.
pub(crate) fn read_from_worker(header: &[u8], budget: u64) -> Result<FromWorker, FrameError> {
    let mut input = Reader::new(header, budget);
    match input.byte()? {
        DONE => {
            let seq = input.u64()?;
            let result = match input.byte()? {
                OK => Ok(input.value()?),
                ERR => Err(serde_json::from_str(input.str()?)?),
                other => return Err(malformed(format!("result marker {other}"))),
            };
            let lifted = input.lifted()?;
            input.end()?;
            Ok(FromWorker::Done {
                seq,
                result,
                lifted,
            })
        }
        other => Err(malformed(format!("tag {other} is no message to a host"))),
    }
}

fn write_len(out: &mut Vec<u8>, len: usize) -> Result<(), FrameError> {
    let len = u32::try_from(len)
        .ok()
        .filter(|len| (*len as usize) <= MAX_MESSAGE)
        .ok_or(FrameError::TooLarge {
            len,
            max: MAX_MESSAGE,
        })?;
    out.put_u32(len);
    Ok(())
}

fn write_str(out: &mut Vec<u8>, text: &str) -> Result<(), FrameError> {
    write_len(out, text.len())?;
    out.extend_from_slice(text.as_bytes());
    Ok(())
}

fn write_lifted(out: &mut Vec<u8>, lifted: &[(u32, u32)]) -> Result<(), FrameError> {
    write_len(out, lifted.len())?;
    for (place, len) in lifted {
        out.put_u32(*place);
        out.put_u32(*len);
    }
    Ok(())
}

/// Writes `value`, refusing one nested deeper than [`MAX_DEPTH`] (checked as it goes, so a
/// deep value costs no more stack than the limit allows).
fn write_value(out: &mut Vec<u8>, value: &Value) -> Result<(), FrameError> {
    write_nested(out, value, 0)
}

fn write_nested(out: &mut Vec<u8>, value: &Value, depth: usize) -> Result<(), FrameError> {
    match value {
        Value::Null => out.push(NULL),
        Value::Bool(false) => out.push(FALSE),
        Value::Bool(true) => out.push(TRUE),
        Value::Number(number) => write_number(out, number),
        Value::String(text) => {
            out.push(STRING);
            write_str(out, text)?;
        }
        Value::Array(items) => {
            let depth = deeper(depth)?;
            out.push(ARRAY);
            write_len(out, items.len())?;
            for item in items {
                write_nested(out, item, depth)?;
            }
        }
        Value::Object(map) => {
            let depth = deeper(depth)?;
            out.push(OBJECT);
            write_len(out, map.len())?;
            for (key, item) in map {
                write_str(out, key)?;
                write_nested(out, item, depth)?;
            }
        }
    }
    Ok(())
}

fn deeper(depth: usize) -> Result<usize, FrameError> {
    if depth >= MAX_DEPTH {
        return Err(malformed(format!(
            "nested deeper than {MAX_DEPTH} arrays and objects"
        )));
    }
    Ok(depth + 1)
}

fn write_number(out: &mut Vec<u8>, number: &Number) {
    if let Some(n) = number.as_u64() {
        out.push(UNSIGNED);
        out.put_u64(n);
    } else if let Some(n) = number.as_i64() {
        out.push(NEGATIVE);
        out.put_i64(n);
    } else {
        // Without `arbitrary_precision` (this workspace's `serde_json`), a number that is
        // neither integer is an `f64`, and a finite one.
        out.push(FLOAT);
        out.put_f64(number.as_f64().unwrap_or(f64::NAN));
    }
}

/// A number the header ends before (`bytes`' checked reads, big-endian as written).
fn cut_short(e: TryGetError) -> FrameError {
    malformed(format!(
        "{} bytes announced where {} are left",
        e.requested, e.available
    ))
}

/// The bytes of a header not read yet, and how much more memory its values may take.
struct Reader<'a> {
    bytes: &'a [u8],
    /// Bytes of values this message may still decode to.
    left: u64,
    /// What it could decode to in all ([`MAX_DECODED`](crate::wire::MAX_DECODED) unless a
    /// test says otherwise).
    budget: u64,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8], budget: u64) -> Self {
        Reader {
            bytes,
            left: budget,
            budget,
        }
    }

    /// Counts `n` bytes of decoded values against the message's budget, before they are made:
    /// a value costs at least what it takes in memory, so a message that would decode to more
    /// than its budget is refused having built no more than the budget (docs/isolation-model.md,
    /// "The wire format").
    fn charge(&mut self, n: usize) -> Result<(), FrameError> {
        match self.left.checked_sub(n as u64) {
            Some(left) => {
                self.left = left;
                Ok(())
            }
            None => Err(malformed(format!(
                "values of more than {} bytes in one message",
                self.budget
            ))),
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], FrameError> {
        if n > self.bytes.len() {
            return Err(malformed(format!(
                "{n} bytes announced where {} are left",
                self.bytes.len()
            )));
        }
        let (taken, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(taken)
    }

    fn byte(&mut self) -> Result<u8, FrameError> {
        self.bytes.try_get_u8().map_err(cut_short)
    }

    fn u32(&mut self) -> Result<u32, FrameError> {
        self.bytes.try_get_u32().map_err(cut_short)
    }

    fn u64(&mut self) -> Result<u64, FrameError> {
        self.bytes.try_get_u64().map_err(cut_short)
    }

    /// A count of things each at least `least` bytes long: never more than the bytes left
    /// can hold, so what is reserved for them is bounded by the frame.
    fn count(&mut self, least: usize) -> Result<usize, FrameError> {
        let count = self.u32()? as usize;
        if count.saturating_mul(least) > self.bytes.len() {
            return Err(malformed(format!(
                "{count} items announced where {} bytes are left",
                self.bytes.len()
            )));
        }
        Ok(count)
    }

    fn str(&mut self) -> Result<&'a str, FrameError> {
        let len = self.u32()? as usize;
        std::str::from_utf8(self.take(len)?).map_err(|_| malformed("a string that is not UTF-8"))
    }

    /// A string the message keeps, its bytes counted against the budget.
    fn owned_str(&mut self) -> Result<String, FrameError> {
        let text = self.str()?;
        self.charge(text.len())?;
        Ok(text.to_owned())
    }

    fn lifted(&mut self) -> Result<Vec<(u32, u32)>, FrameError> {
        let count = self.count(8)?;
        let mut lifted = Vec::with_capacity(count);
        for _ in 0..count {
            lifted.push((self.u32()?, self.u32()?));
        }
        Ok(lifted)
    }

    /// A whole value: the `Value` itself is counted here, an array's items and an object's
    /// entries where they are announced, so that a vector or a map is counted before it grows.
    fn value(&mut self) -> Result<Value, FrameError> {
        self.charge(VALUE_BYTES)?;
        self.nested(0)
    }

    fn nested(&mut self, depth: usize) -> Result<Value, FrameError> {
        Ok(match self.byte()? {
            NULL => Value::Null,
            FALSE => Value::Bool(false),
            TRUE => Value::Bool(true),
            UNSIGNED => Value::from(self.u64()?),
            NEGATIVE => {
                let n = self.bytes.try_get_i64().map_err(cut_short)?;
                // What the writer sends as unsigned never comes as negative: one number, one
                // encoding.
                if n >= 0 {
                    return Err(malformed("a non-negative number tagged negative"));
                }
                Value::from(n)
            }
            FLOAT => {
                let n = self.bytes.try_get_f64().map_err(cut_short)?;
                Number::from_f64(n)
                    .map(Value::Number)
                    .ok_or_else(|| malformed("a number that is not finite"))?
            }
            STRING => Value::String(self.owned_str()?),
            ARRAY => {
                let depth = deeper(depth)?;
                let count = self.count(1)?;
                self.charge(count.saturating_mul(VALUE_BYTES))?;
                // Reserved up to a bound, then grown by what is really there: an array of one-
                // byte items that announces a count and breaks off early costs no more than
                // what came before it (docs/isolation-model.md, "The wire format"). It grows
                // by doubling, but never past its count: it takes no more than was counted.
                let mut items = Vec::with_capacity(count.min(RESERVED_ITEMS));
                for _ in 0..count {
                    if items.len() == items.capacity() {
                        items.reserve_exact(items.len().min(count - items.len()));
                    }
                    items.push(self.nested(depth)?);
                }
                Value::Array(items)
            }
            OBJECT => {
                let depth = deeper(depth)?;
                // A key is at least its length, a value at least its tag.
                let count = self.count(5)?;
                self.charge(count.saturating_mul(KEY_BYTES + VALUE_BYTES))?;
                let mut map = Map::new();
                for _ in 0..count {
                    let key = self.owned_str()?;
                    let item = self.nested(depth)?;
                    match map.entry(key) {
                        Entry::Vacant(place) => {
                            place.insert(item);
                        }
                        Entry::Occupied(_) => return Err(malformed("a key twice in one object")),
                    }
                }
                Value::Object(map)
            }
            other => return Err(malformed(format!("value tag {other}"))),
        })
    }

    /// Nothing may follow a message.
    fn end(&self) -> Result<(), FrameError> {
        if self.bytes.is_empty() {
            Ok(())
        } else {
            Err(malformed(format!(
                "{} bytes after the message",
                self.bytes.len()
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{MAX_DECODED, Message, decode, encode};
    use bytes::Bytes;
    use capability_types::ErrorCode;
    use serde_json::json;
    use std::path::PathBuf;

    fn context() -> CallContext {
        CallContext {
            session_id: "s".into(),
            personality_id: Some("p".into()),
            tool: "t".into(),
            working_dir: PathBuf::from("/w"),
            fetch: true,
            fs: false,
            secrets: Some(vec!["env:KEY".into()]),
            process: false,
            kv: true,
            attachments: false,
        }
    }

    /// Every kind of value, at its edges.
    fn every_kind() -> Value {
        json!({
            "null": null, "no": false, "yes": true,
            "zero": 0, "max": u64::MAX, "min": i64::MIN, "minus one": -1,
            "float": 1.5, "integral float": 2.0, "tiny": f64::MIN_POSITIVE, "negative zero": -0.0,
            "empty": "", "escapes": "\"\\\n\t\u{0}", "unicode": "ünï ✓ 𝄞",
            "long": "x".repeat(70_000),
            "nested": [[], {}, [[{"a": [1, "b", null]}]]],
            "": "an empty key",
        })
    }

    fn body(frame: Vec<u8>) -> Bytes {
        Bytes::from(frame).slice(4..)
    }

    fn calls() -> Vec<ToWorker> {
        vec![
            ToWorker::Call {
                seq: 1,
                call_id: "c".into(),
                args: every_kind(),
                context: Some(context()),
                lifted: Vec::new(),
            },
            ToWorker::Call {
                seq: u64::MAX,
                call_id: String::new(),
                args: Value::Null,
                context: None,
                lifted: vec![(0, 300), (7, 256)],
            },
        ]
    }

    fn results() -> Vec<FromWorker> {
        vec![
            FromWorker::Done {
                seq: 3,
                result: Ok(every_kind()),
                lifted: Vec::new(),
            },
            FromWorker::Done {
                seq: 4,
                result: Err(WireError {
                    code: ErrorCode::ExecutionFailed,
                    denial: None,
                    message: "it broke".into(),
                }),
                lifted: Vec::new(),
            },
            FromWorker::Done {
                seq: 5,
                result: Ok(json!("")),
                lifted: vec![(0, 256)],
            },
        ]
    }

    // guarantee: G-CAP-03
    #[test]
    fn calls_and_results_are_written_compactly_and_read_back_the_same() {
        for call in calls() {
            let mut header = Vec::new();
            call.write_header(&mut header).unwrap();
            assert_eq!(header[0], CALL);
            assert_eq!(read_to_worker(&header, MAX_DECODED).unwrap(), call);
            let (back, blobs) =
                decode::<ToWorker>(body(encode(&call, &[], 1 << 20).unwrap())).unwrap();
            assert_eq!((back, blobs), (call, Vec::new()));
        }
        for done in results() {
            let mut header = Vec::new();
            done.write_header(&mut header).unwrap();
            assert_eq!(header[0], DONE);
            assert_eq!(read_from_worker(&header, MAX_DECODED).unwrap(), done);
        }
    }

    #[test]
    fn the_json_encoding_of_the_same_message_reads_the_same() {
        for call in calls() {
            let json = serde_json::to_vec(&call).unwrap();
            assert_eq!(ToWorker::read_header(&json).unwrap(), call);
        }
        for done in results() {
            let json = serde_json::to_vec(&done).unwrap();
            assert_eq!(FromWorker::read_header(&json).unwrap(), done);
        }
        // The other messages stay JSON.
        let mut header = Vec::new();
        FromWorker::Ready {}.write_header(&mut header).unwrap();
        assert_eq!(header, br#"{"ready":{}}"#);
    }

    #[test]
    fn every_truncation_and_every_extra_byte_is_refused() {
        let mut headers = Vec::new();
        for call in calls() {
            let mut header = Vec::new();
            call.write_header(&mut header).unwrap();
            headers.push((header, true));
        }
        for done in results() {
            let mut header = Vec::new();
            done.write_header(&mut header).unwrap();
            headers.push((header, false));
        }
        for (header, to_worker) in headers {
            // Every cut but the whole: every byte of the first 200 (every field but the long
            // string's bytes), then every 997th.
            for cut in (0..header.len()).filter(|cut| *cut < 200 || cut % 997 == 0) {
                let part = &header[..cut];
                let refused = if to_worker {
                    read_to_worker(part, MAX_DECODED).is_err()
                } else {
                    read_from_worker(part, MAX_DECODED).is_err()
                };
                assert!(
                    refused,
                    "a header cut at {cut} of {} was read",
                    header.len()
                );
            }
            let mut longer = header.clone();
            longer.push(0);
            let error = if to_worker {
                read_to_worker(&longer, MAX_DECODED).unwrap_err()
            } else {
                read_from_worker(&longer, MAX_DECODED).unwrap_err()
            };
            assert!(
                error.to_string().contains("1 bytes after the message"),
                "{error}"
            );
        }
    }

    /// A header of a call whose arguments are the given value bytes.
    fn call_with(value: &[u8]) -> Vec<u8> {
        let mut header = vec![CALL];
        header.extend_from_slice(&7u64.to_be_bytes());
        header.extend_from_slice(&1u32.to_be_bytes());
        header.push(b'c');
        header.extend_from_slice(value);
        header.push(ABSENT);
        header.extend_from_slice(&0u32.to_be_bytes());
        header
    }

    fn refused(header: &[u8], why: &str) {
        match read_to_worker(header, MAX_DECODED) {
            Err(e) => assert!(e.to_string().contains(why), "{e} (expected {why:?})"),
            Ok(message) => panic!("read {message:?}, expected a refusal for {why:?}"),
        }
    }

    #[test]
    fn hostile_headers_are_refused_with_what_is_wrong() {
        // The frame is well formed: only the value changes.
        assert!(read_to_worker(&call_with(&[NULL]), MAX_DECODED).is_ok());
        refused(&call_with(&[9]), "value tag 9");
        refused(&call_with(&[0xff]), "value tag 255");
        // Counts beyond the bytes left are refused before anything is reserved for them.
        for tag in [ARRAY, OBJECT] {
            let mut value = vec![tag];
            value.extend_from_slice(&u32::MAX.to_be_bytes());
            refused(&call_with(&value), "items announced");
        }
        let mut value = vec![STRING];
        value.extend_from_slice(&u32::MAX.to_be_bytes());
        refused(&call_with(&value), "bytes announced");
        let mut value = vec![STRING];
        value.extend_from_slice(&2u32.to_be_bytes());
        value.extend_from_slice(&[0xc3, 0x28]);
        refused(&call_with(&value), "not UTF-8");
        // A key twice: refused, not the later one kept.
        let mut value = vec![OBJECT];
        value.extend_from_slice(&2u32.to_be_bytes());
        for _ in 0..2 {
            value.extend_from_slice(&1u32.to_be_bytes());
            value.push(b'k');
            value.push(TRUE);
        }
        refused(&call_with(&value), "a key twice");
        // One number, one encoding; no number that JSON cannot carry.
        let mut value = vec![NEGATIVE];
        value.extend_from_slice(&5i64.to_be_bytes());
        refused(&call_with(&value), "tagged negative");
        for n in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let mut value = vec![FLOAT];
            value.extend_from_slice(&n.to_bits().to_be_bytes());
            refused(&call_with(&value), "not finite");
        }
        // Markers and tags out of their range.
        let mut header = call_with(&[NULL]);
        let at = header.len() - 5;
        header[at] = 2;
        refused(&header, "context marker 2");
        let mut header = call_with(&[NULL]);
        header[0] = DONE;
        refused(&header, "no message to a worker");
        assert!(
            read_from_worker(&call_with(&[NULL]), MAX_DECODED)
                .unwrap_err()
                .to_string()
                .contains("no message to a host")
        );
        // A context is read as strictly as a JSON message: an unknown field is refused.
        let mut header = call_with(&[NULL]);
        header.truncate(header.len() - 5);
        header.push(PRESENT);
        let mut json = serde_json::to_value(context()).unwrap();
        json["root"] = json!(true);
        let json = json.to_string();
        header.extend_from_slice(&u32::try_from(json.len()).unwrap().to_be_bytes());
        header.extend_from_slice(json.as_bytes());
        header.extend_from_slice(&0u32.to_be_bytes());
        refused(&header, "unknown field");
    }

    /// The least budget `header` is read within: it is refused at one byte less.
    fn least_budget(header: &[u8], least: u64) {
        assert!(
            read_to_worker(header, least).is_ok(),
            "refused within {least} bytes"
        );
        refused_within(
            header,
            least - 1,
            &format!("values of more than {} bytes", least - 1),
        );
    }

    fn refused_within(header: &[u8], budget: u64, why: &str) {
        match read_to_worker(header, budget) {
            Err(e) => assert!(e.to_string().contains(why), "{e} (expected {why:?})"),
            Ok(message) => panic!("read {message:?}, expected a refusal for {why:?}"),
        }
    }

    // guarantee: G-CAP-02
    #[test]
    fn a_message_is_refused_before_its_values_take_more_than_its_budget() {
        // What is counted, exactly: the whole value, each item and each entry as a `Value`,
        // each key as a `String`, and every string's bytes (the call's id "c" among them).
        let value = 32u64;
        let key = 24u64;
        let nulls = [&[ARRAY][..], &1000u32.to_be_bytes(), &[NULL; 1000]].concat();
        least_budget(&call_with(&nulls), 1 + value + 1000 * value);
        least_budget(
            &call_with(&[STRING, 0, 0, 0, 6, b'a', b'b', b'c', b'd', b'e', b'f']),
            1 + value + 6,
        );
        let object = [
            &[OBJECT][..],
            &1u32.to_be_bytes(),
            &3u32.to_be_bytes(),
            b"key",
            &[NULL],
        ]
        .concat();
        least_budget(&call_with(&object), 1 + value + key + value + 3);
        // An array is counted when it is announced, before its items are read: a count the
        // budget cannot hold is refused at once (here, before the bad tag of its first item).
        let announced = [&[ARRAY][..], &1000u32.to_be_bytes(), &[9], &[NULL; 999]].concat();
        refused_within(&call_with(&announced), 1000 * value, "values of more than");
        refused_within(
            &call_with(&announced),
            1 + value + 1000 * value,
            "value tag 9",
        );
        // The worst a byte can do: a one-byte null is a 32-byte `Value`. Under the real budget a
        // message of nulls is refused once it would decode to 4 GiB, about 128 MiB of them; a
        // result reads the same way.
        assert_eq!(MAX_DECODED / value, 1 << 27);
        let done = [
            &[DONE][..],
            &1u64.to_be_bytes(),
            &[OK],
            &nulls,
            &0u32.to_be_bytes(),
        ]
        .concat();
        assert!(read_from_worker(&done, value + 1000 * value).is_ok());
        match read_from_worker(&done, value + 1000 * value - 1) {
            Err(e) => assert!(e.to_string().contains("values of more than"), "{e}"),
            Ok(message) => panic!("read {message:?}"),
        }
    }

    fn nested(depth: usize) -> Value {
        (0..depth).fold(json!(1), |inner, _| json!([inner]))
    }

    #[test]
    fn nesting_is_limited_alike_on_both_sides_and_costs_no_more_stack_than_the_limit() {
        let fits = ToWorker::Call {
            seq: 1,
            call_id: "c".into(),
            args: nested(MAX_DEPTH),
            context: None,
            lifted: Vec::new(),
        };
        let mut header = Vec::new();
        fits.write_header(&mut header).unwrap();
        assert_eq!(read_to_worker(&header, MAX_DECODED).unwrap(), fits);

        let mut header = Vec::new();
        let too_deep = FromWorker::Done {
            seq: 1,
            result: Ok(nested(MAX_DEPTH + 1)),
            lifted: Vec::new(),
        };
        let error = too_deep.write_header(&mut header).unwrap_err();
        assert!(
            error.to_string().contains("nested deeper than 128"),
            "{error}"
        );

        // Read: a million opening arrays are refused at the limit, not followed down.
        let mut value = Vec::new();
        for _ in 0..1_000_000 {
            value.push(ARRAY);
            value.extend_from_slice(&1u32.to_be_bytes());
        }
        value.push(NULL);
        refused(&call_with(&value), "nested deeper than 128");
    }
}
