//! Path resolution and reach checks: `resolve_path` yields a normalised absolute path,
//! `is_within` agrees with a component-wise reference, and the area `runs_later` keeps a path
//! from writes in is a normalised place that holds it (a git one only where the path has a
//! `.git` component or names a hook manager's place, a client's or a shell's one named as
//! `RUNS_LATER_NAMES` names them, the list the kernel layer looks for).
#![no_main]

use std::path::{Component, Path};

use capability_core::matching::path::{
    RUNS_LATER_NAMES, RunsLater, is_within, resolve_path, runs_later,
};
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
    if let Some((area, runs)) = runs_later(&resolved) {
        assert!(
            normalised(&area) && is_within(&resolved, &area),
            "{resolved:?} kept in {area:?}"
        );
        // The area's own name, as the kernel layer looks for it (`RUNS_LATER_NAMES`: the
        // client's, the startup files' and the hook managers' places), folded as a file
        // system that does not tell names apart folds it (docs/policy.md, "Names in any case").
        let named = area.file_name().and_then(|n| n.to_str());
        let lower = capability_types::fold_path(area.as_os_str().as_encoded_bytes());
        let listed = RUNS_LATER_NAMES
            .iter()
            .any(|n| lower.ends_with(format!("/{n}").as_bytes()));
        if runs == RunsLater::Git {
            assert!(
                resolved
                    .components()
                    .any(|c| capability_types::same_name(c.as_os_str().as_encoded_bytes(), b".git"))
                    || listed,
                "{resolved:?} is git's"
            );
        }
        // A client's place has a name of the list (since 2026-12-06 some without a dot:
        // `opencode.json`, `crush.json`), and no name that is not.
        if runs == RunsLater::Client {
            assert!(
                listed && named.is_some(),
                "{resolved:?} kept in {area:?} for a client"
            );
        }
        if runs == RunsLater::Startup {
            assert!(listed, "{resolved:?} kept in {area:?} for a shell");
        }
    }
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
