//! `cargo xtask guarantees`: docs/guarantees.md and the tests agree, both ways.
//!
//! Every row of the register (an ID `G-XX-NN`) must be cited by at least one test, with a
//! comment `// guarantee: G-XX-NN` above it; every ID a test cites must be a row; every test a
//! row names in its tests column must exist (`fn name`). IDs are unique.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::{Context, Result, bail};

/// The register's rows: ID, and the test names its tests column gives.
fn register(text: &str) -> Result<BTreeMap<String, Vec<String>>> {
    let mut rows = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let Some(id) = cells.get(1).filter(|c| is_id(c)) else {
            continue;
        };
        let tests = cells.get(4).map(|c| backticked(c)).unwrap_or_default();
        if rows.insert((*id).to_owned(), tests).is_some() {
            bail!("docs/guarantees.md:{}: {id} is given twice", n + 1);
        }
    }
    Ok(rows)
}

fn is_id(text: &str) -> bool {
    let mut parts = text.split('-');
    matches!(
        (parts.next(), parts.next(), parts.next(), parts.next()),
        (Some("G"), Some(area), Some(num), None)
            if !area.is_empty()
                && area.bytes().all(|b| b.is_ascii_uppercase())
                && num.len() == 2
                && num.bytes().all(|b| b.is_ascii_digit())
    )
}

fn backticked(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// IDs cited by `// guarantee:` comments, with where, and every `fn` name, in `files`.
fn scan(files: &[(String, String)]) -> (BTreeMap<String, Vec<String>>, BTreeSet<String>) {
    let mut cited: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut fns = BTreeSet::new();
    for (path, source) in files {
        for (n, line) in source.lines().enumerate() {
            let line = line.trim_start();
            if let Some(list) = line.strip_prefix("// guarantee:") {
                for id in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                    cited
                        .entry(id.to_owned())
                        .or_default()
                        .push(format!("{path}:{}", n + 1));
                }
            }
            let rest = line
                .strip_prefix("pub(crate) ")
                .or_else(|| line.strip_prefix("pub "))
                .unwrap_or(line);
            let rest = rest.strip_prefix("async ").unwrap_or(rest);
            if let Some(rest) = rest.strip_prefix("fn ") {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                fns.insert(name);
            }
        }
    }
    (cited, fns)
}

/// The problems, one line each (empty: they agree).
fn check(register_text: &str, files: &[(String, String)]) -> Result<Vec<String>> {
    let rows = register(register_text)?;
    let (cited, fns) = scan(files);
    let mut problems = Vec::new();
    for (id, tests) in &rows {
        if !cited.contains_key(id) {
            problems.push(format!("{id}: no test cites it (`// guarantee: {id}`)"));
        }
        for test in tests {
            if !fns.contains(test) {
                problems.push(format!(
                    "{id}: names `{test}`, which is no function of the tests"
                ));
            }
        }
    }
    for (id, places) in &cited {
        if !rows.contains_key(id) {
            problems.push(format!(
                "{}: cites {id}, which docs/guarantees.md does not have",
                places.join(", ")
            ));
        }
    }
    Ok(problems)
}

fn sources(root: &Path) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    let mut stack = vec![root.join("crates"), root.join("tests")];
    while let Some(dir) = stack.pop() {
        for entry in
            std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))?
        {
            let path = entry?.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "target") {
                    stack.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path)?;
                let rel = path.strip_prefix(root).unwrap_or(&path);
                out.push((rel.display().to_string(), text));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Runs the check on the workspace at `root`.
pub(crate) fn run(root: &Path) -> Result<()> {
    let path = root.join("docs/guarantees.md");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let files = sources(root)?;
    let problems = check(&text, &files)?;
    for p in &problems {
        eprintln!("guarantees: {p}");
    }
    if !problems.is_empty() {
        bail!(
            "docs/guarantees.md and the tests disagree in {} place(s)",
            problems.len()
        );
    }
    let rows = register(&text)?.len();
    println!("guarantees: {rows} rows, each cited by a test, every citation a row");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const REGISTER: &str = "| ID | g | l | tests | limits |\n|---|---|---|---|---|\n\
        | G-FS-01 | x | backend | `reads_stay_inside` | — |\n\
        | G-FS-02 | y | kernel | `gone` | — |\n";

    fn files(source: &str) -> Vec<(String, String)> {
        vec![("t.rs".to_owned(), source.to_owned())]
    }

    #[test]
    fn both_ways_and_named_tests() {
        let ok =
            "// guarantee: G-FS-01, G-FS-02\n#[test]\nfn reads_stay_inside() {}\nfn gone() {}\n";
        assert!(check(REGISTER, &files(ok)).unwrap().is_empty());
        let uncited = "// guarantee: G-FS-01\nfn reads_stay_inside() {}\nfn gone() {}\n";
        assert_eq!(
            check(REGISTER, &files(uncited)).unwrap(),
            ["G-FS-02: no test cites it (`// guarantee: G-FS-02`)"]
        );
        let unknown =
            "// guarantee: G-FS-01, G-FS-02, G-NET-09\nfn reads_stay_inside() {}\nfn gone() {}\n";
        assert_eq!(
            check(REGISTER, &files(unknown)).unwrap(),
            ["t.rs:1: cites G-NET-09, which docs/guarantees.md does not have"]
        );
        let renamed = "// guarantee: G-FS-01, G-FS-02\nfn reads_stay_inside() {}\n";
        assert_eq!(
            check(REGISTER, &files(renamed)).unwrap(),
            ["G-FS-02: names `gone`, which is no function of the tests"]
        );
        let twice = format!("{REGISTER}| G-FS-01 | again | x | `gone` | — |\n");
        assert!(register(&twice).is_err());
    }

    #[test]
    fn the_workspace_agrees_with_its_register() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let text = std::fs::read_to_string(root.join("docs/guarantees.md")).unwrap();
        let problems = check(&text, &sources(root).unwrap()).unwrap();
        assert!(problems.is_empty(), "{problems:#?}");
    }
}
