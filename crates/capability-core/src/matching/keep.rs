//! `[fs_reach] deny_write`: places a policy keeps from writes while they stay readable, each a
//! path whose names may be `*` (any one name), matched in any case as deny rules are
//! (docs/policy.md, "Kept from writes").

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use super::path::is_within;

/// The names of `path` after its root.
fn names(path: &Path) -> impl Iterator<Item = &OsStr> {
    path.components().filter_map(|c| match c {
        Component::Normal(name) => Some(name),
        _ => None,
    })
}

/// Whether `path` (absolute, normalised) is `rule` or lies beneath it, each of `rule`'s names
/// matching the path's name in its place: `*` any name, another in any case and by the short
/// name a drive could make for it, as deny rules match. The directory where a rule's first `*`
/// stands is kept itself too (not what lies beneath it but the rule's places): made, replaced or
/// removed, it would take every name there with it.
fn kept_by(path: &Path, rule: &Path) -> bool {
    let same = |name: &OsStr, wanted: &OsStr| {
        let (name, wanted) = (
            capability_types::fold_name(name.as_bytes()),
            capability_types::fold_name(wanted.as_bytes()),
        );
        name == wanted || super::short::may_be_short_for(&name, &wanted)
    };
    let mut path_names = names(path);
    let mut wanted_names = names(rule);
    loop {
        match (wanted_names.next(), path_names.next()) {
            // The rule's names all matched: the path is its place or beneath it.
            (None, _) => return true,
            // The path ended where the rule's `*` stands: it is that directory.
            (Some(wanted), None) => return wanted == "*",
            (Some(wanted), Some(name)) => {
                if wanted != "*" && !same(name, wanted) {
                    return false;
                }
            }
        }
    }
}

/// The first of `rules` that keeps `path` (absolute, normalised) from writes, if any.
pub fn kept_from_writes<'r>(path: &Path, rules: &'r [PathBuf]) -> Option<&'r PathBuf> {
    rules.iter().find(|rule| kept_by(path, rule))
}

/// The places a confined child with write roots `roots` is kept from, for `rules`: each rule
/// without `*`, and for a rule with one, the directory where its `*` stands (so the child makes
/// no new name there) and, for each write root that lies beneath that directory, the rule with
/// the root's name in place of the `*` (a root inside a kept place is writable again). Only
/// places beneath a root are kept: the child writes nowhere else.
pub fn kept_places(rules: &[PathBuf], roots: &[PathBuf]) -> Vec<PathBuf> {
    let beneath_a_root = |p: &Path| roots.iter().any(|r| is_within(p, r));
    let mut out: Vec<PathBuf> = Vec::new();
    let keep = |place: PathBuf, out: &mut Vec<PathBuf>| {
        if beneath_a_root(&place) && !out.contains(&place) {
            out.push(place);
        }
    };
    for rule in rules {
        let all: Vec<&OsStr> = names(rule).collect();
        let Some(star) = all.iter().position(|n| *n == "*") else {
            keep(rule.clone(), &mut out);
            continue;
        };
        let base: PathBuf = std::iter::once(OsStr::new("/"))
            .chain(all[..star].iter().copied())
            .collect();
        keep(base.clone(), &mut out);
        for root in roots {
            let Ok(below) = root.strip_prefix(&base) else {
                continue;
            };
            let Some(name) = names(below).next() else {
                continue;
            };
            // What follows the `*`, with any later `*` keeping its whole directory.
            let mut place = base.join(name);
            for part in &all[star + 1..] {
                if *part == "*" {
                    break;
                }
                place.push(part);
            }
            keep(place, &mut out);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(list: &[&str]) -> Vec<PathBuf> {
        list.iter().map(PathBuf::from).collect()
    }

    #[test]
    fn a_rule_keeps_its_place_and_what_lies_beneath_in_any_spelling() {
        let r = rules(&["/h/.ethos/personalities/*/toolset.yaml", "/h/.ethos/skills"]);
        for kept in [
            "/h/.ethos/personalities/other/toolset.yaml",
            "/h/.ethos/personalities/new-one/toolset.yaml",
            "/h/.ethos/personalities/other/TOOLSET.YAML",
            "/h/.Ethos/personalities/other/toolset.yaml.",
            "/h/.ethos/personalities/other/toolset.yaml/x",
            "/h/.ethos/skills",
            "/h/.ethos/skills/a/SKILL.md",
            "/h/.ethos/ſkills/a",
            // Where the `*` stands: the directory itself.
            "/h/.ethos/personalities",
            "/h/.ethos/Personalities",
        ] {
            assert!(kept_from_writes(Path::new(kept), &r).is_some(), "{kept}");
        }
        for free in [
            "/h/.ethos/personalities/other/MEMORY.md",
            "/h/.ethos/personalities/other",
            "/h/.ethos/personalities/toolset.yaml",
            "/h/.ethos/personalities/a/b/toolset.yaml",
            "/h/.ethos/skillset",
            "/h/.ethos",
            "/h",
        ] {
            assert!(kept_from_writes(Path::new(free), &r).is_none(), "{free}");
        }
    }

    #[test]
    fn a_child_is_kept_from_the_places_beneath_its_roots() {
        let r = rules(&[
            "/h/.ethos/personalities/*/toolset.yaml",
            "/h/.ethos/personalities/*/skills",
            "/h/.ethos/skills",
        ]);
        // A root over the whole state dir: the directory of personalities and the skills.
        assert_eq!(
            kept_places(&r, &rules(&["/h/.ethos"])),
            rules(&["/h/.ethos/personalities", "/h/.ethos/skills"])
        );
        // A personality's own directory as its root: its definitions in it.
        assert_eq!(
            kept_places(&r, &rules(&["/h/.ethos/personalities/me", "/srv/ws"])),
            rules(&[
                "/h/.ethos/personalities/me/toolset.yaml",
                "/h/.ethos/personalities/me/skills"
            ])
        );
        // Roots elsewhere: nothing.
        assert!(kept_places(&r, &rules(&["/srv/ws"])).is_empty());
    }
}
