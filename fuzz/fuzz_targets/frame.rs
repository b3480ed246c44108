//! The capsule's wire frames: decoding arbitrary bytes never panics or allocates past the
//! announced lengths, and the frame reader joins pieces or refuses them.
#![no_main]

use std::sync::OnceLock;

use bytes::Bytes;
use capability_capsule::wire::{FrameReader, FromWorker, ToWorker, decode, encode};
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
    let _ = decode::<ToWorker>(Bytes::copy_from_slice(data));
    if let Ok((message, blobs)) = decode::<FromWorker>(Bytes::copy_from_slice(data)) {
        // What decodes encodes again, and decodes to the same.
        let frame = encode(&message, &blobs, MAX).expect("a decoded message encodes");
        let mut reader = FrameReader::new(&frame[..], MAX);
        let body = runtime()
            .block_on(reader.next())
            .expect("its own frame reads")
            .expect("one body");
        let (again, blobs_again) = decode::<FromWorker>(body).expect("its own frame decodes");
        assert_eq!((again, blobs_again), (message, blobs));
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
