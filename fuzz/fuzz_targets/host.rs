//! Host patterns and host names (IDN, IPv6, odd IPv4 spellings): parsing never panics,
//! normalising is idempotent, and a set of one exact pattern matches exactly its host.
#![no_main]

use capability_core::matching::host::{HostPattern, HostSet, normalize_host};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (pattern, host) = text.split_once('\n').unwrap_or((text, text));
    if let Ok(normal) = normalize_host(host) {
        assert_eq!(
            normalize_host(&normal).as_deref(),
            Ok(normal.as_str()),
            "normalising {host:?} is not idempotent"
        );
        // An exact pattern for a normalised name matches that name.
        if !normal.contains(['*', ':', '[']) {
            if let Ok(exact) = HostPattern::parse(&normal) {
                let set = HostSet::new([exact]);
                assert_eq!(set.lookup(&normal, 443), Some(true), "{normal:?}");
            }
        }
    }
    if let Ok(parsed) = HostPattern::parse(pattern) {
        let set = HostSet::new([parsed]);
        if let Ok(normal) = normalize_host(host) {
            let _ = set.lookup(&normal, 443);
        }
    }
});
