//! The capsule's wire frames: decoding arbitrary bytes (JSON and compact headers) never panics
//! or allocates past the announced lengths, what decodes encodes again to the same message,
//! lifted strings are put back or refused (never in the wrong place), and the frame reader
//! joins pieces or refuses them.
#![no_main]

use std::sync::OnceLock;

use bytes::Bytes;
use capability_capsule::wire::{
    FrameReader, FromWorker, Message, ToWorker, decode, encode, lift_strings, restore_strings,
};
use libfuzzer_sys::fuzz_target;

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime")
    })
}

const MAX: usize = 1 << 16;

fuzz_target!(|data: &[u8]| {
    if let Ok((ToWorker::Call { args, lifted, .. }, blobs)) =
        decode::<ToWorker>(Bytes::copy_from_slice(data))
    {
        restored(args, &lifted, &blobs);
    }
    if let Ok((FromWorker::Done { result: Ok(value), lifted, .. }, blobs)) =
        decode::<FromWorker>(Bytes::copy_from_slice(data))
    {
        restored(value, &lifted, &blobs);
    }
    if let Ok((message, blobs)) = decode::<FromWorker>(Bytes::copy_from_slice(data)) {
        round_trip(message, blobs);
    }
    if let Ok((message, blobs)) = decode::<ToWorker>(Bytes::copy_from_slice(data)) {
        round_trip(message, blobs);
    }
    let mut reader = FrameReader::new(data, MAX);
    runtime().block_on(async {
        for _ in 0..8 {
            match reader.next().await {
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => break,
            }
        }
    });
});

/// What decodes (in either encoding) encodes again, and decodes to the same: a JSON call or
/// result is written back compactly, so this also holds the two encodings to one meaning.
fn round_trip<M: Message + PartialEq + std::fmt::Debug>(message: M, blobs: Vec<Bytes>) {
    let frame = encode(&message, &blobs, MAX).expect("a decoded message encodes");
    let mut reader = FrameReader::new(&frame[..], MAX);
    let body = runtime()
        .block_on(reader.next())
        .expect("its own frame reads")
        .expect("one body");
    let (again, blobs_again) = decode::<M>(body).expect("its own frame decodes");
    assert_eq!((again, blobs_again), (message, blobs));
}

/// Puts a message's lifted strings back; when that succeeds, lifting them again gives the same
/// places and bytes (a string put back is exactly where it was taken from).
fn restored(mut value: serde_json::Value, lifted: &[(u32, u32)], blobs: &[Bytes]) {
    let empty_places = value.clone();
    if restore_strings(&mut value, lifted, blobs).is_ok() {
        let mut again = value;
        let (places, blobs_again) = lift_strings(&mut again);
        // Every string put back that is long enough is lifted again; when nothing else is
        // (no shorter string was lifted, no other long string was in the header), lifting gives
        // back exactly the places, the bytes and the value with its places empty.
        let long = lifted
            .iter()
            .all(|(_, len)| *len as usize >= capability_capsule::wire::LIFTED_LEN);
        if long && places.len() == lifted.len() {
            assert_eq!(places, lifted);
            assert_eq!(blobs_again, blobs);
            assert_eq!(again, empty_places);
        }
    }
}
