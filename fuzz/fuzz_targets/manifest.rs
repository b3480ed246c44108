//! Permission manifests and their diff: any declaration, with or without any personality,
//! gives a manifest that reads back as itself; a manifest is never a widening of itself; and a
//! diff between any two of them never panics.
#![no_main]

use capability_core::{CompiledPolicy, Manifest, PolicyFormat, build_manifest, diff};
use capability_types::ToolCapabilities;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // A declaration (JSON), a NUL, a personality (the selector byte picks its format).
    let Some(split) = data.iter().position(|b| *b == 0) else {
        return;
    };
    let (declaration, rest) = (&data[..split], &data[split + 1..]);
    let Ok(caps) = serde_json::from_slice::<ToolCapabilities>(declaration) else {
        return;
    };
    let policy = rest.split_first().and_then(|(&selector, text)| {
        let text = std::str::from_utf8(text).ok()?;
        let format = match selector % 3 {
            0 => PolicyFormat::Json,
            1 => PolicyFormat::Toml,
            _ => PolicyFormat::Yaml,
        };
        CompiledPolicy::load(text, format, Some(std::path::Path::new("/home/fuzz"))).ok()
    });
    let bare = build_manifest([("fuzzed", &caps)], None);
    let effective = build_manifest([("fuzzed", &caps)], policy.as_ref());
    for manifest in [&bare, &effective] {
        let text = manifest.to_pretty_json();
        let read = Manifest::parse(&text).expect("a built manifest reads back");
        assert_eq!(&read, manifest, "a manifest reads back as itself");
        assert!(diff(manifest, manifest).is_empty(), "a manifest widens itself");
    }
    let _ = diff(&bare, &effective);
    let _ = diff(&effective, &bare);
    let none = build_manifest(std::iter::empty(), None);
    let added = diff(&none, &bare);
    assert!(
        added.iter().any(|w| w.tool == "fuzzed"),
        "a new tool is not reported"
    );
});
