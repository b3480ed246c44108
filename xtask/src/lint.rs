//! `cargo xtask lint`: the source backstop (docs/architecture.md, "The enforcement points": the source backstop).
//!
//! The source rules (ambient authority, declared vs used) are `capability-lint`'s, the same
//! engine `toolcap lint DIR` runs for plugin crates (docs/lint.md). This workspace adds:
//! - `capability-types`, `capability-policy` and `capability-core` are held to the rules
//!   whether or not they implement `Tool`;
//! - **crate boundaries**: `capability-types` depends only on the data crates; backends never
//!   on `capability-core` or on one another; `capability-core` on no other workspace crate.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use capability_lint::{CrateSources, Finding, Report, Rule};

/// Crates that are always held to the ambient-authority rule.
const RESTRICTED: &[&str] = &["capability-types", "capability-policy", "capability-core"];
/// Backend crates: each depends on `capability-types`, never on core or on each other.
const BACKENDS: &[&str] = &[
    "capability-fetch",
    "capability-fs",
    "capability-secrets",
    "capability-process",
    "capability-kv",
];
/// The only dependencies `capability-types` may have.
const TYPES_ALLOWED: &[&str] = &[
    "serde",
    "serde_json",
    "thiserror",
    "async-trait",
    "http",
    "bytes",
    "secrecy",
];
/// The only dependencies `capability-policy` may have: the plugin contract and the parsers.
const POLICY_ALLOWED: &[&str] = &[
    "capability-types",
    "serde",
    "serde_json",
    "serde_path_to_error",
    "thiserror",
    "toml",
    "serde_norway",
];

pub(crate) fn run(root: &Path) -> Result<()> {
    let report = lint_workspace(root)?;
    print!("{}", report.to_text());
    if report.errors() > 0 {
        bail!("{} lint finding(s)", report.errors());
    }
    Ok(())
}

fn lint_workspace(root: &Path) -> Result<Report> {
    let mut report = Report::default();
    report.root = root.to_path_buf();
    let mut dirs: Vec<PathBuf> = Vec::new();
    for area in ["crates", "examples"] {
        let area_dir = root.join(area);
        dirs.extend(
            std::fs::read_dir(&area_dir)
                .with_context(|| format!("reading {}", area_dir.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.join("Cargo.toml").is_file()),
        );
    }
    dirs.sort();
    for dir in dirs {
        let krate = CrateSources::read(&dir)?;
        let rel_manifest = dir
            .join("Cargo.toml")
            .strip_prefix(root)
            .map(Path::to_path_buf)
            .unwrap_or_else(|_| dir.join("Cargo.toml"));
        report
            .findings
            .extend(check_manifest(&rel_manifest, &krate.manifest));
        if RESTRICTED.contains(&krate.name.as_str()) || krate.holds_tools() {
            krate.lint(root, &mut report);
        } else {
            report.skipped_crates.push(krate.name.clone());
        }
    }
    Ok(report)
}

/// The dependency names of a manifest (normal, build and target-specific; not dev).
fn dependencies(manifest: &toml::Table) -> Vec<String> {
    let mut out = Vec::new();
    let mut tables = vec![
        manifest.get("dependencies"),
        manifest.get("build-dependencies"),
    ];
    if let Some(targets) = manifest.get("target").and_then(toml::Value::as_table) {
        for t in targets.values() {
            tables.push(t.get("dependencies"));
            tables.push(t.get("build-dependencies"));
        }
    }
    for table in tables
        .into_iter()
        .flatten()
        .filter_map(toml::Value::as_table)
    {
        for (key, value) in table {
            // `package = "..."` renames: the real crate is what matters.
            let real = value
                .get("package")
                .and_then(toml::Value::as_str)
                .unwrap_or(key);
            out.push(real.to_owned());
        }
    }
    out.sort();
    out
}

pub(crate) fn check_manifest(path: &Path, manifest: &toml::Table) -> Vec<Finding> {
    let name = manifest
        .get("package")
        .and_then(|p| p.get("name"))
        .and_then(|n| n.as_str())
        .unwrap_or_default();
    let deps = dependencies(manifest);
    let finding =
        |what: String, instead: &str| Finding::new(Rule::CrateBoundary, path, 1, what, instead);
    let mut out = Vec::new();
    if name == "capability-types" {
        for d in deps.iter().filter(|d| !TYPES_ALLOWED.contains(&d.as_str())) {
            out.push(finding(
                format!("capability-types depends on {d}"),
                "only data crates here (serde, thiserror, async-trait, http, bytes, secrecy); move the dependency to a backend",
            ));
        }
    }
    if name == "capability-policy" {
        for d in deps
            .iter()
            .filter(|d| !POLICY_ALLOWED.contains(&d.as_str()))
        {
            out.push(finding(
                format!("capability-policy depends on {d}"),
                "capability-types and the parsers only; the personality model does no I/O",
            ));
        }
    }
    if BACKENDS.contains(&name) {
        for d in &deps {
            if d == "capability-core" || (BACKENDS.contains(&d.as_str()) && d != name) {
                out.push(finding(
                    format!("backend {name} depends on {d}"),
                    "capability-types only; compose backends in capability-tools, toolcap or tests",
                ));
            }
        }
    }
    // The kernel layer and the capsule: each on exactly the crates its job needs.
    for (krate, allowed) in [
        ("capability-sandbox", &["capability-types"][..]),
        (
            "capability-capsule",
            &["capability-types", "capability-core", "capability-sandbox"][..],
        ),
    ] {
        if name == krate {
            for d in deps
                .iter()
                .filter(|d| d.starts_with("capability-") && !allowed.contains(&d.as_str()))
            {
                out.push(finding(
                    format!("{krate} depends on {d}"),
                    "only the crates in its row of the boundary table (docs/architecture.md, \"Crate graph\")",
                ));
            }
        }
    }
    // A plugin (anything under examples/) compiles against the plugin contract alone.
    if path.starts_with("examples") {
        for d in deps
            .iter()
            .filter(|d| d.starts_with("capability-") && *d != "capability-types")
        {
            out.push(finding(
                format!("plugin {name} depends on {d}"),
                "capability-types only: a plugin declares tools, the host composes the rest",
            ));
        }
    }
    if name == "capability-core" {
        for d in deps.iter().filter(|d| {
            d.starts_with("capability-")
                && !["capability-types", "capability-policy"].contains(&d.as_str())
        }) {
            out.push(finding(
                format!("capability-core depends on {d}"),
                "capability-types and capability-policy only; backends are passed in as factories",
            ));
        }
        for d in deps
            .iter()
            .filter(|d| ["hyper", "hyper-util", "reqwest", "ureq", "isahc"].contains(&d.as_str()))
        {
            out.push(finding(
                format!("capability-core depends on {d}"),
                "the ScopedFetch trait; HTTP lives in capability-fetch",
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crate_boundaries() {
        let manifest = |text: &str| -> toml::Table { text.parse().unwrap() };
        let p = Path::new("Cargo.toml");
        let backend = manifest(
            "[package]\nname = \"capability-fs\"\n[dependencies]\ncapability-types = \"0.1\"\ncapability-core = \"0.1\"\nkv = { package = \"capability-kv\", version = \"0.1\" }\n",
        );
        let whats: Vec<String> = check_manifest(p, &backend)
            .into_iter()
            .map(|f| f.what)
            .collect();
        assert_eq!(
            whats,
            [
                "backend capability-fs depends on capability-core",
                "backend capability-fs depends on capability-kv"
            ]
        );
        let types = manifest(
            "[package]\nname = \"capability-types\"\n[dependencies]\nserde = \"1\"\ntokio = \"1\"\n[dev-dependencies]\nproptest = \"1\"\n",
        );
        let whats: Vec<String> = check_manifest(p, &types)
            .into_iter()
            .map(|f| f.what)
            .collect();
        assert_eq!(whats, ["capability-types depends on tokio"]);
        let sandbox: toml::Table =
            "[package]\nname = \"capability-sandbox\"\n[dependencies]\ncapability-types = \"0.1\"\ncapability-core = \"0.1\"\n"
                .parse()
                .unwrap();
        let whats: Vec<String> =
            check_manifest(Path::new("crates/capability-sandbox/Cargo.toml"), &sandbox)
                .into_iter()
                .map(|f| f.what)
                .collect();
        assert_eq!(whats, ["capability-sandbox depends on capability-core"]);
        let plugin: toml::Table =
            "[package]\nname = \"my-plugin\"\n[dependencies]\ncapability-types = \"0.1\"\ncapability-fs = \"0.1\"\n"
                .parse()
                .unwrap();
        let whats: Vec<String> =
            check_manifest(Path::new("examples/my-plugin/Cargo.toml"), &plugin)
                .into_iter()
                .map(|f| f.what)
                .collect();
        assert_eq!(whats, ["plugin my-plugin depends on capability-fs"]);
        let core = manifest(
            "[package]\nname = \"capability-core\"\n[dependencies]\ncapability-types = \"0.1\"\ncapability-fetch = \"0.1\"\n[target.'cfg(unix)'.dependencies]\nhyper = \"1\"\n",
        );
        let whats: Vec<String> = check_manifest(p, &core)
            .into_iter()
            .map(|f| f.what)
            .collect();
        assert_eq!(
            whats,
            [
                "capability-core depends on capability-fetch",
                "capability-core depends on hyper"
            ]
        );
        let fine = manifest(
            "[package]\nname = \"capability-fetch\"\n[dependencies]\ncapability-types = \"0.1\"\nhyper = \"1\"\n",
        );
        assert!(check_manifest(p, &fine).is_empty());
    }

    #[test]
    fn the_workspace_itself_is_clean() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let report = lint_workspace(root).unwrap();
        assert_eq!(report.errors(), 0, "{}", report.to_text());
    }
}
