//! A [`Report`] as a SARIF 2.1.0 log (OASIS Static Analysis Results Interchange Format), the
//! format GitHub code scanning uploads and editors' SARIF viewers read (docs/lint.md, "SARIF").

use serde_json::{Value, json};

use crate::{Report, Rule};

/// Where the rules are explained.
const HELP_URI: &str = "https://example.invalid/toolcap/docs/lint.md";

/// The log: one run of the `toolcap-lint` driver, its rules, and one result per finding and per
/// exemption (the latter suppressed in source). Paths are relative to `%SRCROOT%`, the checked
/// directory.
pub(crate) fn log(report: &Report) -> Value {
    let rules: Vec<Value> = Rule::ALL.iter().map(|&r| rule(r)).collect();
    let index = |r: Rule| Rule::ALL.iter().position(|&x| x == r).unwrap_or(0);
    let mut results: Vec<Value> = report
        .findings
        .iter()
        .map(|f| {
            json!({
                "ruleId": f.rule.id(),
                "ruleIndex": index(f.rule),
                "level": level(f.rule),
                "message": {"text": format!("{} — use {}", f.what, f.instead)},
                "locations": [location(&f.file, f.line)],
            })
        })
        .collect();
    results.extend(report.exemptions.iter().map(|e| {
        json!({
            "ruleId": Rule::AmbientAuthority.id(),
            "ruleIndex": index(Rule::AmbientAuthority),
            "level": level(Rule::AmbientAuthority),
            "message": {"text": format!("{} (exempted)", e.what)},
            "locations": [location(&e.file, e.line)],
            "suppressions": [{"kind": "inSource", "justification": e.reason}],
        })
    }));
    let mut root = report.root.display().to_string();
    if !root.ends_with('/') {
        root.push('/');
    }
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "toolcap-lint",
                "informationUri": HELP_URI,
                "version": env!("CARGO_PKG_VERSION"),
                "semanticVersion": env!("CARGO_PKG_VERSION"),
                "rules": rules,
            }},
            "originalUriBaseIds": {"%SRCROOT%": {"uri": file_uri(&root)}},
            "columnKind": "unicodeCodePoints",
            "results": results,
        }],
    })
}

fn rule(r: Rule) -> Value {
    json!({
        "id": r.id(),
        "name": pascal(r.name()),
        "shortDescription": {"text": r.description()},
        "fullDescription": {"text": r.description()},
        "helpUri": format!("{HELP_URI}#{}", r.name()),
        "help": {"text": r.description()},
        "defaultConfiguration": {"level": level(r)},
    })
}

fn level(r: Rule) -> &'static str {
    if r.is_error() { "error" } else { "warning" }
}

fn location(file: &std::path::Path, line: usize) -> Value {
    json!({"physicalLocation": {
        "artifactLocation": {"uri": relative_uri(file), "uriBaseId": "%SRCROOT%"},
        "region": {"startLine": line.max(1)},
    }})
}

/// `ambient-authority` → `AmbientAuthority` (SARIF rule names are identifiers).
fn pascal(name: &str) -> String {
    name.split('-')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// A relative path as a URI reference: `/`-separated, each byte outside the unreserved set
/// percent-encoded.
fn relative_uri(path: &std::path::Path) -> String {
    let text = path.to_string_lossy();
    percent_encode(&text)
}

fn file_uri(absolute: &str) -> String {
    format!("file://{}", percent_encode(absolute))
}

fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_uris() {
        assert_eq!(pascal("ambient-authority"), "AmbientAuthority");
        assert_eq!(
            relative_uri(std::path::Path::new("src/a b#.rs")),
            "src/a%20b%23.rs"
        );
        assert_eq!(file_uri("/tmp/x y/"), "file:///tmp/x%20y/");
    }
}
