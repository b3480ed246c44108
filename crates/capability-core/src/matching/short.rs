//! Windows' short names (8.3 names), which a drive that makes them takes for the long names
//! they stand for: `GIT~1` for `.git`, `CLAUDE~1` for `.claude`, `MCP~1.JSO` for `.mcp.json`,
//! also when WSL reaches the drive under `/mnt/c` (docs/policy.md, "Names in any case"). Git
//! refuses them in a tree for the same reason (`core.protectNTFS`).

use std::path::PathBuf;

/// Whether `name` has the form of a short name: a stem of at most eight characters ending in
/// `~` and a number (`GIT~1`, `CLAUD~12`, `GI7A2B~1`), then perhaps a dot and an extension of
/// one to three characters (`MCP~1.JSO`). Case is not looked at, as the drive does not.
pub(crate) fn is_short_name(name: &[u8]) -> bool {
    let (stem, ext) = match name.iter().rposition(|b| *b == b'.') {
        Some(dot) => (&name[..dot], Some(&name[dot + 1..])),
        None => (name, None),
    };
    let Some(tilde) = stem.iter().rposition(|b| *b == b'~') else {
        return false;
    };
    let (base, number) = (&stem[..tilde], &stem[tilde + 1..]);
    let plain = |b: &u8| b.is_ascii_graphic() && !matches!(b, b'.' | b'~' | b'/');
    stem.len() <= 8
        && !base.is_empty()
        && base.iter().all(plain)
        && number.first().is_some_and(|d| (b'1'..=b'9').contains(d))
        && number.iter().all(u8::is_ascii_digit)
        && ext.is_none_or(|e| (1..=3).contains(&e.len()) && e.iter().all(plain))
}

/// Whether a drive could have made `short` (a name of [`is_short_name`]'s form) for `long`:
/// their stems begin alike (the long name's without its leading dots, its dots and spaces, in
/// upper case: Windows keeps up to six of its characters, or two and a hash of the rest) and
/// their extensions agree (the long name's first three characters after its last dot).
pub(crate) fn may_be_short_for(short: &[u8], long: &[u8]) -> bool {
    if !is_short_name(short) {
        return false;
    }
    let upper = |s: &[u8]| s.to_ascii_uppercase();
    let (short_stem, short_ext) = split_ext(short);
    let base = &short_stem[..short_stem.iter().rposition(|b| *b == b'~').unwrap_or(0)];
    let long = &long[long.iter().take_while(|b| **b == b'.').count()..];
    let (long_stem, long_ext) = split_ext(long);
    let long_stem: Vec<u8> = long_stem
        .iter()
        .filter(|b| !matches!(b, b'.' | b' '))
        .map(u8::to_ascii_uppercase)
        .collect();
    let head = &upper(base)[..base.len().min(2)];
    let ext_agrees = match (short_ext, long_ext) {
        (None, None) => true,
        (Some(s), Some(l)) => upper(s) == upper(&l[..l.len().min(3)]),
        _ => false,
    };
    long_stem.starts_with(head) && ext_agrees
}

/// `name` split at its last dot, when one follows something.
fn split_ext(name: &[u8]) -> (&[u8], Option<&[u8]>) {
    match name.iter().rposition(|b| *b == b'.') {
        Some(dot) if dot > 0 => (&name[..dot], Some(&name[dot + 1..])),
        _ => (name, None),
    }
}

/// `path` (absolute, normalised) up to and with its first name of a short name's form.
pub(crate) fn short_name_area(path: &[u8]) -> Option<PathBuf> {
    // Most paths have no `~` at all: one pass finds out.
    if !path.contains(&b'~') {
        return None;
    }
    super::later::area_through_first(path, is_short_name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_are_told_by_their_form_and_matched_to_what_they_may_stand_for() {
        for name in [
            "GIT~1",
            "git~1",
            "CLAUDE~1",
            "MCP~1.JSO",
            "GI7A2B~1",
            "CLAUD~12",
            "A~9.D",
        ] {
            assert!(is_short_name(name.as_bytes()), "{name}");
        }
        for name in [
            "a~b",
            "x~1y.md",
            "file.txt~",
            "backup.~1~",
            "~1",
            "LONGNAME~1",
            "A~0",
            "a~1.json",
            "notes~draft.md",
            "A~1.",
        ] {
            assert!(!is_short_name(name.as_bytes()), "{name}");
        }
        for (short, long) in [
            ("GIT~1", ".git"),
            ("CLAUDE~1", ".claude"),
            ("claude~2", ".claude"),
            ("MCP~1.JSO", ".mcp.json"),
            ("ENV~1", ".env"),
            ("CL7A2B~1", ".claude"),
            ("ENVIRO~1.D", "environment.d"),
        ] {
            assert!(
                may_be_short_for(short.as_bytes(), long.as_bytes()),
                "{short} {long}"
            );
        }
        for (short, long) in [
            ("GIT~1", ".claude"),
            ("MCP~1", ".mcp.json"),
            ("MCP~1.TXT", ".mcp.json"),
            ("git", ".git"),
        ] {
            assert!(
                !may_be_short_for(short.as_bytes(), long.as_bytes()),
                "{short} {long}"
            );
        }
        assert_eq!(
            short_name_area(b"/ws/GIT~1/hooks/pre-commit"),
            Some(PathBuf::from("/ws/GIT~1"))
        );
        assert_eq!(short_name_area(b"/ws/notes~1.md.bak/x"), None);
        assert_eq!(short_name_area(b"/ws/a/b"), None);
    }
}
