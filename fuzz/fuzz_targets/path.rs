//! Path resolution and reach checks: `resolve_path` yields a normalised absolute path, and
//! `is_within` agrees with a component-wise reference.
#![no_main]

use std::path::{Component, Path};

use capability_core::matching::path::{is_within, resolve_path};
use libfuzzer_sys::fuzz_target;

fn normalised(p: &Path) -> bool {
    p.is_absolute()
        && p.components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (path, root) = text.split_once('\n').unwrap_or((text, "/srv/root"));
    let wd = Path::new("/srv/root/work");
    let Ok(resolved) = resolve_path(Path::new(path), wd) else {
        return;
    };
    assert!(normalised(&resolved), "{path:?} resolved to {resolved:?}");
    let Ok(root) = resolve_path(Path::new(root), wd) else {
        return;
    };
    // The reference: component-wise prefix.
    assert_eq!(
        is_within(&resolved, &root),
        resolved.starts_with(&root),
        "{resolved:?} within {root:?}"
    );
});
