//! `cargo xtask structure`: the shape of the workspace, held as rules (docs/architecture.md,
//! "Rules the checks hold").
//!
//! - **Citations.** A comment, message or page that names `docs/<page>.md` (or, inside docs/,
//!   links `<page>.md`) names a page that exists; a section it quotes right after the page
//!   (`docs/policy.md, "Strict parsing"`) is a heading of that page. Nothing cites `design.md`:
//!   the design lives in docs/.
//! - **Room sizes.** No file under `crates/*/src` is over [`MAX_FILE_LINES`] lines before its
//!   `#[cfg(test)]` module, and the plugin contract (`capability-types`) stays under
//!   [`MAX_TYPES_LINES`] such lines in all.
//! - **Crate guards.** Every library crate denies `missing_docs`; `unsafe` appears only in a
//!   crate's `sys` module (`src/sys.rs` or `src/sys/`); every public enum of a library crate is
//!   `#[non_exhaustive]` unless it carries `// toolcap: exhaustive(reason = "...")`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use capability_lint::rust_files;

use anyhow::{Context, Result, bail};
use syn::visit::Visit;

/// The most lines a source file may hold before its test module.
pub(crate) const MAX_FILE_LINES: usize = 700;
/// The most non-test lines the plugin contract may hold (raised from 2,000 when the contract
/// gained the not-found error kind and the attachments category, from 2,400 when the path
/// policy gained `runs_later_names`, which the kernel layer asks, from 2,410 when the names
/// themselves, `RUNS_LATER_NAMES`, moved in: a path policy returns them, and the kernel layer
/// keeps them from a command its caller confines with no policy at hand, and from 2,470 when
/// `shown` learned the characters drawn as nothing and `visible` joined it, sharing their
/// table: what a person is shown and what a model is handed must be escaped alike, and from
/// 2,500 when `RUNS_LATER_NAMES` gained the build tools' and package managers' configuration,
/// ten names, one a line, and from 2,520 when it gained the other shells' startup files and
/// directories, eleven more, and from 2,535 when it gained the project configuration of nine
/// more agents' clients, twelve names, and from 2,547 when `fold_name` joined the names it
/// folds: the path policy and the kernel layer must take the same spellings of them for one
/// name, as a file system that does not tell names apart does, and from 2,651 when
/// `RUNS_LATER_NAMES` gained what the programs a user starts in a terminal run as they start,
/// the editors' startup and `~/.local/bin`, twenty-one names, and the rule that folding never
/// makes a name empty, `.` or `..`, and from 2,677 when it gained what debuggers, interpreters,
/// rustup's environment, kubectl, direnv, mise, a desktop session, sbt, Gradle and Bundler run
/// as they start, twenty-seven names, and from 2,704 when it gained Helix's workspace
/// configuration, one name, and from 2,705 when `ProcessPolicy::check_args` gained the allowed
/// entry a request resolved to, so that a program named otherwise is held to its rules).
pub(crate) const MAX_TYPES_LINES: usize = 2707;

pub(crate) fn run(root: &Path) -> Result<()> {
    let mut findings = Vec::new();
    findings.extend(citations(root)?);
    findings.extend(sizes(root)?);
    findings.extend(guards(root)?);
    for f in &findings {
        println!("error: {f}");
    }
    if !findings.is_empty() {
        bail!("{} structure finding(s)", findings.len());
    }
    println!(
        "structure: citations resolve, no file over {MAX_FILE_LINES} lines, every crate guarded"
    );
    Ok(())
}

/// Tracked text files: sources, manifests, docs, CI scripts.
fn tracked(root: &Path) -> Result<Vec<PathBuf>> {
    let out = std::process::Command::new("git")
        .args(["ls-files", "--cached", "--others", "--exclude-standard"])
        .current_dir(root)
        .output()
        .context("running git ls-files")?;
    if !out.status.success() {
        bail!("git ls-files failed");
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| {
            l.ends_with(".rs")
                || l.ends_with(".md")
                || l.ends_with(".toml")
                || l.starts_with(".ci/")
                || l.ends_with(".sh")
        })
        .map(PathBuf::from)
        .collect())
}

/// The headings of a Markdown page, without their `#`s.
fn headings(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix('#'))
        .map(|l| l.trim_start_matches('#').trim().to_owned())
        .collect()
}

/// Every cited page of `text` (`docs/x.md`, or `x.md` in a link when `in_docs`), with the line
/// and the section quoted right after it.
pub(crate) fn cited(text: &str, in_docs: bool) -> Vec<(usize, String, Option<String>)> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find(".md") {
            let before = &rest[..at];
            // Past the last character that cannot be in a path (a letter beyond ASCII is more
            // than one byte).
            let start = before
                .char_indices()
                .rev()
                .find(|&(_, c)| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '/' | '.')))
                .map_or(0, |(i, c)| i + c.len_utf8());
            let name = &before[start..];
            let after = &rest[at + 3..];
            let page = if let Some(page) = name.strip_prefix("docs/") {
                Some(page.to_owned())
            } else if name == "design" || name.ends_with("/design") {
                Some("design".to_owned())
            } else if in_docs && before[..start].ends_with('(') && !name.contains('/') {
                Some(name.to_owned())
            } else {
                None
            };
            if let Some(page) = page.filter(|p| !p.is_empty()) {
                out.push((n + 1, page, quoted_section(after)));
            }
            rest = after;
        }
    }
    out
}

/// `, "Section"` or ` "Section"` right after a page name (a link's `)` may come first).
fn quoted_section(after: &str) -> Option<String> {
    let after = after.strip_prefix(')').unwrap_or(after);
    let after = after.strip_prefix(',').unwrap_or(after).trim_start();
    let inner = after.strip_prefix('"')?;
    let end = inner.find('"')?;
    Some(inner[..end].to_owned())
}

fn citations(root: &Path) -> Result<Vec<String>> {
    let mut findings = Vec::new();
    for file in tracked(root)? {
        let shown = file.display().to_string();
        let Ok(text) = std::fs::read_to_string(root.join(&file)) else {
            continue;
        };
        // This file names the forbidden page in its own rules and tests.
        if shown == "xtask/src/structure.rs" {
            continue;
        }
        let in_docs = shown.starts_with("docs/");
        for (line, page, section) in cited(&text, in_docs) {
            if page == "design" {
                findings.push(format!(
                    "{shown}:{line}: cites design.md, which is not in the repository — cite the docs/ page that says it"
                ));
                continue;
            }
            let target = root.join("docs").join(format!("{page}.md"));
            let Ok(page_text) = std::fs::read_to_string(&target) else {
                findings.push(format!(
                    "{shown}:{line}: cites docs/{page}.md, which does not exist"
                ));
                continue;
            };
            if let Some(section) = section
                && !headings(&page_text)
                    .iter()
                    .any(|h| h.contains(section.as_str()))
            {
                findings.push(format!(
                    "{shown}:{line}: cites section \"{section}\" of docs/{page}.md, which has no such heading"
                ));
            }
        }
    }
    Ok(findings)
}

/// Lines of `source` before its first `#[cfg(test)]` at the start of a line.
pub(crate) fn non_test_lines(source: &str) -> usize {
    source
        .lines()
        .take_while(|l| !l.starts_with("#[cfg(test)]"))
        .count()
}

fn library_crates(root: &Path) -> Result<Vec<(String, PathBuf)>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(root.join("crates"))? {
        let dir = entry?.path();
        if dir.join("src/lib.rs").is_file() {
            let name = dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            out.push((name, dir));
        }
    }
    out.sort();
    Ok(out)
}

fn sizes(root: &Path) -> Result<Vec<String>> {
    let mut findings = Vec::new();
    for entry in std::fs::read_dir(root.join("crates"))? {
        let src = entry?.path().join("src");
        if !src.is_dir() {
            continue;
        }
        let mut total = 0;
        for file in rust_files(&src)? {
            let lines = non_test_lines(&std::fs::read_to_string(&file)?);
            total += lines;
            if lines > MAX_FILE_LINES {
                findings.push(format!(
                    "{}: {lines} lines before its tests (at most {MAX_FILE_LINES}): split it by responsibility",
                    file.strip_prefix(root).unwrap_or(&file).display()
                ));
            }
        }
        if src.ends_with("capability-types/src") && total > MAX_TYPES_LINES {
            findings.push(format!(
                "crates/capability-types: {total} non-test lines (at most {MAX_TYPES_LINES}): the plugin contract holds only what a plugin author compiles against"
            ));
        }
    }
    Ok(findings)
}

/// Whether `path` lies in its crate's `sys` module.
fn in_sys_module(src: &Path, path: &Path) -> bool {
    let rel = path.strip_prefix(src).unwrap_or(path);
    rel == Path::new("sys.rs") || rel.starts_with("sys")
}

fn guards(root: &Path) -> Result<Vec<String>> {
    let mut findings = Vec::new();
    for (name, dir) in library_crates(root)? {
        let src = dir.join("src");
        let lib = std::fs::read_to_string(src.join("lib.rs"))?;
        if !lib.contains("#![deny(missing_docs)]") {
            findings.push(format!(
                "crates/{name}/src/lib.rs: does not deny missing_docs (add #![deny(missing_docs)])"
            ));
        }
        for file in rust_files(&src)? {
            let source = std::fs::read_to_string(&file)?;
            let ast =
                syn::parse_file(&source).with_context(|| format!("parsing {}", file.display()))?;
            let shown = file
                .strip_prefix(root)
                .unwrap_or(&file)
                .display()
                .to_string();
            let mut v = Guards::default();
            v.visit_file(&ast);
            if !in_sys_module(&src, &file) {
                for line in &v.unsafe_lines {
                    findings.push(format!(
                        "{shown}:{line}: unsafe outside the crate's sys module — move the raw call into src/sys.rs behind a safe function"
                    ));
                }
            }
            let lines: Vec<&str> = source.lines().collect();
            for (line, enum_name) in &v.open_enums {
                let above = lines
                    .get(line.saturating_sub(6)..line.saturating_sub(1))
                    .unwrap_or_default();
                if !above.iter().any(|l| l.contains("toolcap: exhaustive(")) {
                    findings.push(format!(
                        "{shown}:{line}: public enum {enum_name} is not #[non_exhaustive] (or mark it `// toolcap: exhaustive(reason = \"...\")`)"
                    ));
                }
            }
        }
    }
    Ok(findings)
}

#[derive(Default)]
struct Guards {
    unsafe_lines: Vec<usize>,
    open_enums: Vec<(usize, String)>,
    /// Depth of non-public or test modules being visited.
    hidden: usize,
}

impl<'ast> Visit<'ast> for Guards {
    fn visit_expr_unsafe(&mut self, e: &'ast syn::ExprUnsafe) {
        self.unsafe_lines.push(e.unsafe_token.span.start().line);
        syn::visit::visit_expr_unsafe(self, e);
    }
    fn visit_signature(&mut self, s: &'ast syn::Signature) {
        if let Some(u) = &s.unsafety {
            self.unsafe_lines.push(u.span.start().line);
        }
        syn::visit::visit_signature(self, s);
    }
    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        if let Some(u) = &i.unsafety {
            self.unsafe_lines.push(u.span.start().line);
        }
        syn::visit::visit_item_impl(self, i);
    }
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        let test = m.attrs.iter().any(|a| {
            a.path().is_ident("cfg") && a.parse_args::<syn::Ident>().is_ok_and(|i| i == "test")
        });
        self.hidden += usize::from(test);
        syn::visit::visit_item_mod(self, m);
        self.hidden -= usize::from(test);
    }
    fn visit_item_enum(&mut self, e: &'ast syn::ItemEnum) {
        let public = matches!(e.vis, syn::Visibility::Public(_));
        let marked = e.attrs.iter().any(|a| a.path().is_ident("non_exhaustive"));
        if public && !marked && self.hidden == 0 {
            self.open_enums
                .push((e.enum_token.span.start().line, e.ident.to_string()));
        }
        syn::visit::visit_item_enum(self, e);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_and_sections_are_read_from_comments_and_links() {
        let found = cited(
            "// see docs/policy.md, \"Strict parsing\" and docs/semantics.md\n//! design.md §5\n",
            false,
        );
        assert_eq!(
            found,
            [
                (1, "policy".to_owned(), Some("Strict parsing".to_owned())),
                (1, "semantics".to_owned(), None),
                (2, "design".to_owned(), None),
            ]
        );
        let in_docs = cited(
            "see [semantics.md](semantics.md), \"Hosts\", and x.md\n",
            true,
        );
        assert_eq!(
            in_docs,
            [(1, "semantics".to_owned(), Some("Hosts".to_owned()))]
        );
        // Outside docs/, a bare page name is not a citation of docs/.
        assert!(cited("README.md and CHANGELOG.md", false).is_empty());
        // A letter beyond ASCII before a page name ends the name, whatever its length.
        assert_eq!(
            cited("\"DONNÉES/plan.md\" (Édocs/policy.md)", false),
            [(1, "policy".to_owned(), None)]
        );
    }

    #[test]
    fn test_modules_do_not_count_towards_a_file_size() {
        assert_eq!(non_test_lines("a\nb\n#[cfg(test)]\nmod tests {}\n"), 2);
        assert_eq!(non_test_lines("a\n    #[cfg(test)]\nb\n"), 3);
    }

    #[test]
    fn unsafe_and_open_enums_are_found_outside_tests() {
        let ast: syn::File = syn::parse_str(
            "pub enum Open { A }\n#[non_exhaustive]\npub enum Closed { A }\nfn f() { unsafe { g() } }\n#[cfg(test)]\nmod tests { pub enum T { A } }\n",
        )
        .unwrap();
        let mut v = Guards::default();
        v.visit_file(&ast);
        assert_eq!(v.open_enums, [(1, "Open".to_owned())]);
        assert_eq!(v.unsafe_lines, [4]);
        assert!(in_sys_module(
            Path::new("/c/src"),
            Path::new("/c/src/sys/clone.rs")
        ));
        assert!(in_sys_module(
            Path::new("/c/src"),
            Path::new("/c/src/sys.rs")
        ));
        assert!(!in_sys_module(
            Path::new("/c/src"),
            Path::new("/c/src/system.rs")
        ));
    }
}
