//! docs/reference.md is the list a reader has of the environment names no personality may
//! allow (docs/policy.md, "Child environment", sends readers there): every refused name and
//! family is in it.
#![allow(
    clippy::disallowed_methods,
    reason = "the test reads the project's own reference page"
)]

/// The reference's paragraph of refused names, from its heading to the blank line after it.
fn refused_paragraph() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/reference.md");
    let reference = std::fs::read_to_string(path).expect("docs/reference.md");
    let start = reference
        .find("**Refused environment names**")
        .expect("reference.md has the list of refused environment names");
    let rest = &reference[start..];
    rest[..rest.find("\n\n").unwrap_or(rest.len())].to_owned()
}

#[test]
fn the_reference_lists_every_refused_name() {
    let list = refused_paragraph();
    let missing: Vec<String> = capability_policy::REFUSED_ENV_NAMES
        .iter()
        .map(|n| (*n).to_owned())
        .chain(
            capability_policy::REFUSED_ENV_PREFIXES
                .iter()
                .map(|p| format!("{p}*")),
        )
        .filter(|name| !list.contains(&format!("`{name}`")))
        .collect();
    assert!(missing.is_empty(), "not in docs/reference.md: {missing:?}");
}
