//! The source lint on any Rust source a crate under review can hold: checking never panics
//! and never hangs, whatever its macros expand to (`macro_rules!` calls are read expanded,
//! within a depth and a budget of tokens), and the same source gives the same findings.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

/// Deeper than this the parser (syn) runs out of stack, which `toolcap lint` contains by
/// checking in a child process (docs/lint.md, "Sources it cannot read"); the fuzzer would only
/// find that again.
const MAX_NESTING: usize = 200;

fuzz_target!(|data: &[u8]| {
    let Ok(source) = std::str::from_utf8(data) else {
        return;
    };
    let mut depth = 0usize;
    for b in source.bytes() {
        match b {
            b'(' | b'[' | b'{' | b'<' => depth += 1,
            b')' | b']' | b'}' | b'>' => depth = depth.saturating_sub(1),
            _ => {}
        }
        if depth > MAX_NESTING {
            return;
        }
    }
    let path = Path::new("fuzzed.rs");
    let Ok((findings, exemptions)) = capability_lint::lint_source(path, source) else {
        return;
    };
    // (Lines are not checked here: proc-macro2 keeps no source locations when built for
    // fuzzing, so every line reads 0; the fixture tests check them.)
    let (again, _) = capability_lint::lint_source(path, source).expect("it parsed once");
    assert_eq!(
        format!("{findings:?}"),
        format!("{again:?}"),
        "the same source, the same findings"
    );
    for exemption in &exemptions {
        assert!(!exemption.reason.trim().is_empty(), "an exemption has a reason");
    }
});
