//! The source backstop of toolcap (docs/lint.md): checks a crate's Rust sources against what
//! its tools declare, with the same engine as `cargo xtask lint` and `toolcap lint DIR`.
//!
//! The rules apply to every crate that holds tools (one that implements `Tool`, or sets
//! `[package.metadata.toolcap] holds-tools = true`):
//!
//! - **ambient authority** ([`Rule::AmbientAuthority`]): no reach for the file system,
//!   processes, sockets, the environment or an HTTP client except through the scoped objects
//!   of the `ToolContext`;
//! - **declared vs used** ([`Rule::UndeclaredUse`], [`Rule::UnusedDeclaration`]): an
//!   `execute` that uses a scoped object its `capabilities()` does not declare fails on every
//!   call (an error); a declaration nothing uses is access nobody needs (a warning).
//!
//! The files checked are the crate's module tree, followed beyond `src/` (`#[path]`,
//! `include!`, the manifest's target paths); what cannot be followed is an error of its own
//! ([`Rule::UncheckedSource`]).
//!
//! ```
//! let report = capability_lint::lint_source(
//!     std::path::Path::new("src/lib.rs"),
//!     "fn f() { let _ = std::fs::read(\"/etc/passwd\"); }",
//! ).unwrap();
//! assert_eq!(report.0.len(), 1);
//! assert_eq!(report.0[0].rule, capability_lint::Rule::AmbientAuthority);
//! ```
#![deny(missing_docs)]
#![allow(
    clippy::disallowed_methods,
    reason = "a linter reads the sources it is asked to check"
)]

mod ambient;
mod banned;
mod declared;
mod expand;
mod sarif;
mod sources;

use std::fmt;
use std::path::{Path, PathBuf};

use capability_types::shown;
use syn::visit::Visit;

/// What a finding is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Rule {
    /// A reach for the file system, processes, sockets, the environment or an HTTP client
    /// outside the scoped objects (or an exemption comment without a reason).
    AmbientAuthority,
    /// `execute` uses a scoped object that `capabilities()` does not declare.
    UndeclaredUse,
    /// `capabilities()` declares a category that `execute` never uses (a warning).
    UnusedDeclaration,
    /// A dependency across a boundary the workspace forbids (`cargo xtask lint` only).
    CrateBoundary,
    /// Code the compiler would build that the lint cannot read: a symbolic link among the
    /// sources, a source outside the crate's directory, an `include!` of a path that is not a
    /// literal, a `#[path]` module whose file is not there.
    UncheckedSource,
}

impl Rule {
    /// Every rule, in the order of their ids.
    pub const ALL: [Rule; 5] = [
        Rule::AmbientAuthority,
        Rule::UndeclaredUse,
        Rule::UnusedDeclaration,
        Rule::CrateBoundary,
        Rule::UncheckedSource,
    ];

    /// The stable id (`TC001` …), as SARIF `ruleId`.
    pub fn id(self) -> &'static str {
        match self {
            Rule::AmbientAuthority => "TC001",
            Rule::UndeclaredUse => "TC002",
            Rule::UnusedDeclaration => "TC003",
            Rule::CrateBoundary => "TC004",
            Rule::UncheckedSource => "TC005",
        }
    }

    /// A short name in words.
    pub fn name(self) -> &'static str {
        match self {
            Rule::AmbientAuthority => "ambient-authority",
            Rule::UndeclaredUse => "undeclared-use",
            Rule::UnusedDeclaration => "unused-declaration",
            Rule::CrateBoundary => "crate-boundary",
            Rule::UncheckedSource => "unchecked-source",
        }
    }

    /// One sentence on what the rule checks.
    pub fn description(self) -> &'static str {
        match self {
            Rule::AmbientAuthority => {
                "A crate that holds tools reaches files, processes, sockets, the environment (the building machine's too, through env!) or HTTP only through the scoped objects of the ToolContext."
            }
            Rule::UndeclaredUse => {
                "A tool's execute uses only the scoped objects its capabilities() declares (an undeclared one is None at run time)."
            }
            Rule::UnusedDeclaration => {
                "A tool declares only the categories its execute uses (an unused declaration is access nobody needs)."
            }
            Rule::CrateBoundary => {
                "Crates depend only across the boundaries of the workspace's crate graph."
            }
            Rule::UncheckedSource => {
                "Every file the compiler builds into a crate that holds tools is a file of the crate: no symbolic link among the sources, no source or include_str!/include_bytes! data outside the crate's directory, no include! of a computed path."
            }
        }
    }

    /// Whether a finding of this rule fails the check.
    pub fn is_error(self) -> bool {
        !matches!(self, Rule::UnusedDeclaration)
    }
}

/// One finding: where, which rule, what was found and what to use instead.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Finding {
    /// The rule.
    pub rule: Rule,
    /// The file, relative to the directory that was checked.
    pub file: PathBuf,
    /// The line (1-based).
    pub line: usize,
    /// What was found.
    pub what: String,
    /// What to use instead.
    pub instead: String,
}

impl Finding {
    /// A finding of `rule` at `file:line`.
    pub fn new(
        rule: Rule,
        file: impl Into<PathBuf>,
        line: usize,
        what: impl Into<String>,
        instead: impl Into<String>,
    ) -> Self {
        Self {
            rule,
            file: file.into(),
            line,
            what: what.into(),
            instead: instead.into(),
        }
    }
}

impl fmt::Display for Finding {
    /// One line; the file's name and what was found, which the checked sources choose (a
    /// string literal's text, a path), shown escaped ([`shown`]).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}: {} [{} {}] — use {}",
            shown(&self.file.display().to_string()),
            self.line,
            shown(&self.what),
            self.rule.id(),
            self.rule.name(),
            self.instead
        )
    }
}

/// An accepted exemption: a `// toolcap: allow(<path>, reason = "...")` comment.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Exemption {
    /// The file, relative to the directory that was checked.
    pub file: PathBuf,
    /// The line of the exempted use.
    pub line: usize,
    /// What was exempted.
    pub what: String,
    /// The reason the comment gives.
    pub reason: String,
}

/// A source or manifest that could not be read or parsed: the check cannot vouch for it.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct LintError {
    /// The file.
    pub path: PathBuf,
    /// Why.
    pub message: String,
}

impl LintError {
    fn new(path: &Path, message: impl fmt::Display) -> Self {
        Self {
            path: path.to_path_buf(),
            message: message.to_string(),
        }
    }
}

/// What checking one crate (or a workspace of them) found.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Report {
    /// The directory that was checked (absolute); findings are relative to it.
    pub root: PathBuf,
    /// Findings, errors and warnings, by file and line.
    pub findings: Vec<Finding>,
    /// Accepted exemptions.
    pub exemptions: Vec<Exemption>,
    /// The crates that hold tools and were checked, by name.
    pub checked_crates: Vec<String>,
    /// The crates that hold no tools, which the rules do not apply to.
    pub skipped_crates: Vec<String>,
    /// How many source files were checked.
    pub files: usize,
    /// The checked crates that have a build script, each with the script's path relative to
    /// the root: code that runs where the crate is built, which the lint does not read.
    pub build_scripts: Vec<(String, PathBuf)>,
}

impl Report {
    /// How many findings fail the check.
    pub fn errors(&self) -> usize {
        self.findings.iter().filter(|f| f.rule.is_error()).count()
    }

    /// The report as lines of text: findings (`error:` / `warning:`), exemptions, a summary.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for f in &self.findings {
            let level = if f.rule.is_error() {
                "error"
            } else {
                "warning"
            };
            out.push_str(&format!("{level}: {f}\n"));
        }
        for e in &self.exemptions {
            // The file's name and the reason are the checked sources' words, which a change
            // proposes: shown escaped, so that terminal controls in them cannot hide a line.
            out.push_str(&format!(
                "exempt: {}:{}: {} (reason: {})\n",
                shown(&e.file.display().to_string()),
                e.line,
                shown(&e.what),
                shown(&e.reason)
            ));
        }
        for (name, script) in &self.build_scripts {
            out.push_str(&format!(
                "note: crate {name} has a build script ({}), which runs where the crate is built and which the lint does not read (docs/lint.md, \"What it does not see\")\n",
                shown(&script.display().to_string())
            ));
        }
        for name in &self.skipped_crates {
            out.push_str(&format!(
                "note: crate {name} holds no tools (docs/lint.md, \"Rules\": which crates are checked); not checked\n"
            ));
        }
        out.push_str(&format!(
            "lint: {} error(s), {} warning(s), {} exemption(s) in {} file(s) of {} crate(s)\n",
            self.errors(),
            self.findings.len() - self.errors(),
            self.exemptions.len(),
            self.files,
            self.checked_crates.len()
        ));
        out
    }

    /// The report as a SARIF 2.1.0 log (one run), for GitHub code scanning and editors.
    /// Exemptions are results with an in-source suppression, so a viewer shows them as such.
    pub fn to_sarif(&self) -> serde_json::Value {
        sarif::log(self)
    }
}

/// Checks one source file: the ambient-authority rule and declared-vs-used. `path` is what
/// findings name. A file that does not parse is an error, never a clean result.
pub fn lint_source(path: &Path, source: &str) -> Result<(Vec<Finding>, Vec<Exemption>), LintError> {
    let ast = syn::parse_file(source)
        .map_err(|e| LintError::new(path, format!("line {}: {e}", e.span().start().line)))?;
    let macros = expand::Macros::collect([&ast]);
    Ok(lint_parsed(path, source, &ast, &macros))
}

/// [`lint_source`] on an already parsed file.
fn lint_parsed(
    path: &Path,
    source: &str,
    ast: &syn::File,
    macros: &expand::Macros,
) -> (Vec<Finding>, Vec<Exemption>) {
    let (mut findings, exemptions) = ambient::lint_source(path, source, ast, macros);
    let (mismatches, _unreadable) = declared::check_file(ast);
    for m in mismatches {
        let (rule, instead) = if m.undeclared_use {
            (
                Rule::UndeclaredUse,
                format!("a `{}` declaration in capabilities()", m.category.name()),
            )
        } else {
            (
                Rule::UnusedDeclaration,
                "no declaration: drop it from capabilities()".to_owned(),
            )
        };
        findings.push(Finding::new(
            rule,
            path,
            m.line,
            declared::describe(&m),
            instead,
        ));
    }
    findings.sort_by_key(|a| (a.line, a.rule));
    (findings, exemptions)
}

/// Whether a parsed file implements `Tool` for some type.
pub fn implements_tool(ast: &syn::File) -> bool {
    struct V(bool);
    impl<'ast> Visit<'ast> for V {
        fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
            if let Some((_, path, _)) = &i.trait_
                && path
                    .segments
                    .last()
                    .is_some_and(|s| ambient::unraw(&s.ident) == "Tool")
            {
                self.0 = true;
            }
            syn::visit::visit_item_impl(self, i);
        }
        /// `impl … Tool for` written in a macro's body, which is not parsed as an item.
        fn visit_macro(&mut self, m: &'ast syn::Macro) {
            self.0 |= impl_tool_in(m.tokens.clone());
            syn::visit::visit_macro(self, m);
        }
    }
    let mut v = V(false);
    v.visit_file(ast);
    v.0
}

/// Whether `tokens` (a macro's body, at any depth) hold `impl`, then, before the item's body or
/// its end, `Tool for`.
fn impl_tool_in(tokens: proc_macro2::TokenStream) -> bool {
    use proc_macro2::TokenTree;
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    tokens.iter().enumerate().any(|(at, t)| match t {
        TokenTree::Group(g) => impl_tool_in(g.stream()),
        TokenTree::Ident(i) if i == "impl" => {
            let header = tokens[at + 1..].iter().take_while(|t| match t {
                TokenTree::Group(g) => g.delimiter() != proc_macro2::Delimiter::Brace,
                TokenTree::Punct(p) => p.as_char() != ';',
                _ => true,
            });
            let words: Vec<String> = header
                .filter_map(|t| match t {
                    TokenTree::Ident(i) => Some(ambient::unraw(i)),
                    _ => None,
                })
                .collect();
            words.windows(2).any(|w| w[0] == "Tool" && w[1] == "for")
        }
        _ => false,
    })
}

/// One crate, read from disk: its name, manifest and parsed sources.
pub struct CrateSources {
    /// The package name.
    pub name: String,
    /// The crate directory.
    pub dir: PathBuf,
    /// The manifest.
    pub manifest: toml::Table,
    /// Each source file: under `src/`, and what the module tree brings in from elsewhere in the
    /// crate's directory (docs/lint.md, "Which files are checked"): path, text and syntax tree.
    pub sources: Vec<(PathBuf, String, syn::File)>,
    /// What the module tree brings in that the lint cannot read ([`Rule::UncheckedSource`]).
    pub unchecked: Vec<Finding>,
}

impl fmt::Debug for CrateSources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CrateSources")
            .field("name", &self.name)
            .field("dir", &self.dir)
            .field("sources", &self.sources.len())
            .finish_non_exhaustive()
    }
}

impl CrateSources {
    /// Reads the crate in `dir`: its `Cargo.toml`, every `.rs` file under `src/`, and what the
    /// module tree brings in from elsewhere.
    pub fn read(dir: &Path) -> Result<Self, LintError> {
        let dir = &std::fs::canonicalize(dir).map_err(|e| LintError::new(dir, e))?;
        let manifest_path = dir.join("Cargo.toml");
        let text = sources::read_text(&manifest_path)?;
        let manifest: toml::Table = text
            .parse()
            .map_err(|e| LintError::new(&manifest_path, e))?;
        let name = manifest
            .get("package")
            .and_then(|p| p.get("name"))
            .and_then(toml::Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let (sources, unchecked) = sources::collect(dir, &manifest)?;
        Ok(Self {
            name,
            dir: dir.to_path_buf(),
            manifest,
            sources,
            unchecked,
        })
    }

    /// Whether the rules apply: the crate implements `Tool`, or its manifest says it holds
    /// tools (`[package.metadata.toolcap] holds-tools = true`).
    pub fn holds_tools(&self) -> bool {
        let marked = self
            .manifest
            .get("package")
            .and_then(|p| p.get("metadata"))
            .and_then(|m| m.get("toolcap"))
            .and_then(|t| t.get("holds-tools"))
            .and_then(toml::Value::as_bool)
            .unwrap_or(false);
        marked || self.sources.iter().any(|(_, _, ast)| implements_tool(ast))
    }

    /// The crate's dependencies, by the name it gives them, each with its table (a version
    /// alone reads as an empty one): `[dependencies]` and every `[target.….dependencies]`.
    fn dependencies(&self) -> impl Iterator<Item = (&str, toml::Table)> {
        let target_tables = self
            .manifest
            .get("target")
            .and_then(toml::Value::as_table)
            .into_iter()
            .flat_map(|targets| targets.values())
            .filter_map(|t| t.get("dependencies"));
        self.manifest
            .get("dependencies")
            .into_iter()
            .chain(target_tables)
            .filter_map(toml::Value::as_table)
            .flat_map(|deps| deps.iter())
            .map(|(name, spec)| (name.as_str(), spec.as_table().cloned().unwrap_or_default()))
    }

    /// Applies the rules to every source file, naming files relative to `root`.
    pub fn lint(&self, root: &Path, report: &mut Report) {
        // The sources' paths are canonical (`read`); so must the root be for them to be named
        // relative to it.
        let root = &std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
        // A macro is called in files other than the one that defines it (`#[macro_use]`).
        let macros = expand::Macros::collect(self.sources.iter().map(|(_, _, ast)| ast));
        for (file, source, ast) in &self.sources {
            let rel = file.strip_prefix(root).unwrap_or(file);
            let (findings, exemptions) = lint_parsed(rel, source, ast, &macros);
            report.findings.extend(findings);
            report.exemptions.extend(exemptions);
            report.files += 1;
        }
        // A proc macro's output is built into the tools that use it and is in no source.
        let proc_macro = self
            .manifest
            .get("lib")
            .and_then(|l| l.get("proc-macro"))
            .and_then(toml::Value::as_bool)
            == Some(true);
        if proc_macro {
            let manifest = self.dir.join("Cargo.toml");
            report.findings.push(Finding::new(
                Rule::UncheckedSource,
                manifest.strip_prefix(root).unwrap_or(&manifest),
                1,
                "a proc-macro crate, whose code is generated when the tool is built",
                "code written in the tool's crates (a macro_rules! body is read); a proc macro is \
                 a dependency for the review to read",
            ));
        }
        for finding in &self.unchecked {
            let mut finding = finding.clone();
            let file = self.dir.join(&finding.file);
            finding.file = file.strip_prefix(root).unwrap_or(&file).to_path_buf();
            report.findings.push(finding);
        }
        if let Some(script) = self.build_script() {
            let script = script.strip_prefix(root).unwrap_or(&script).to_path_buf();
            report.build_scripts.push((self.name.clone(), script));
        }
        report.checked_crates.push(self.name.clone());
    }

    /// The crate's build script, if it has one: `package.build` when it names a file,
    /// `build.rs` beside the manifest when the manifest says nothing (Cargo's own rule); none
    /// for `build = false`.
    fn build_script(&self) -> Option<PathBuf> {
        let named = self.manifest.get("package").and_then(|p| p.get("build"));
        let script = match named {
            Some(toml::Value::String(path)) => self.dir.join(path),
            Some(_) => return None,
            None => self.dir.join("build.rs"),
        };
        script.is_file().then_some(script)
    }
}

/// Checks the crate in `dir`, or every member of the workspace whose root is `dir`, as
/// `toolcap lint DIR` does: the rules apply to the crates that hold tools; others are listed
/// as skipped. A manifest or source that cannot be read is an error.
///
/// A source nested a few thousand levels deep runs the parser out of stack, which aborts the
/// process: on sources it does not trust, a program runs this in a process of its own, as
/// `toolcap lint` does (docs/lint.md, "Sources it cannot read").
pub fn lint_dir(dir: &Path) -> Result<Report, LintError> {
    let root = std::fs::canonicalize(dir).map_err(|e| LintError::new(dir, e))?;
    let top = CrateSources::read(&root)?;
    let mut crates = Vec::new();
    if let Some(members) = top
        .manifest
        .get("workspace")
        .and_then(|w| w.get("members"))
        .and_then(toml::Value::as_array)
    {
        for member in members.iter().filter_map(toml::Value::as_str) {
            for member_dir in expand_member(&root, member)? {
                if member_dir != root {
                    crates.push(CrateSources::read(&member_dir)?);
                }
            }
        }
    }
    let workspace_deps = top
        .manifest
        .get("workspace")
        .and_then(|w| w.get("dependencies"))
        .and_then(toml::Value::as_table)
        .cloned()
        .unwrap_or_default();
    if top.manifest.contains_key("package") {
        crates.insert(0, top);
    }
    let checked = crates_to_check(&root, &workspace_deps, &mut crates)?;
    let mut report = Report {
        root: root.clone(),
        ..Report::default()
    };
    for (krate, checked) in crates.iter().zip(checked) {
        if checked {
            krate.lint(&root, &mut report);
        } else {
            report.skipped_crates.push(krate.name.clone());
        }
    }
    Ok(report)
}

/// Which of `crates` `toolcap lint` applies the rules to (docs/lint.md, "Rules"): those that
/// hold tools, those that depend on `capability-types` (a tool made by another crate's derive
/// has no `impl` in its sources), and, at any depth, the crates beneath `root` that a checked
/// crate depends on by path (its own code, moved next door), which are read and added to
/// `crates` when the workspace does not list them.
fn crates_to_check(
    root: &Path,
    workspace_deps: &toml::Table,
    crates: &mut Vec<CrateSources>,
) -> Result<Vec<bool>, LintError> {
    let mut checked: Vec<bool> = crates
        .iter()
        .map(|k| {
            // By the package's name, whatever the crate calls it (`types = { package = … }`).
            k.holds_tools()
                || k.dependencies().any(|(name, spec)| {
                    spec.get("package")
                        .and_then(toml::Value::as_str)
                        .unwrap_or(name)
                        == "capability-types"
                })
        })
        .collect();
    let mut queue: Vec<usize> = (0..crates.len()).filter(|&i| checked[i]).collect();
    while let Some(i) = queue.pop() {
        let paths: Vec<PathBuf> = crates[i]
            .dependencies()
            .filter_map(|(name, spec)| {
                let path = match spec.get("path") {
                    Some(path) => crates[i].dir.join(path.as_str()?),
                    None if spec.get("workspace").and_then(toml::Value::as_bool) == Some(true) => {
                        root.join(workspace_deps.get(name)?.get("path")?.as_str()?)
                    }
                    None => return None,
                };
                std::fs::canonicalize(path).ok()
            })
            .filter(|path| path.starts_with(root))
            .collect();
        for path in paths {
            let at = match crates.iter().position(|k| k.dir == path) {
                Some(at) if checked[at] => continue,
                Some(at) => at,
                None => {
                    crates.push(CrateSources::read(&path)?);
                    checked.push(false);
                    crates.len() - 1
                }
            };
            checked[at] = true;
            queue.push(at);
        }
    }
    Ok(checked)
}

/// A workspace `members` entry: a directory, or a directory ending in `/*` (each
/// subdirectory with a `Cargo.toml`).
fn expand_member(root: &Path, member: &str) -> Result<Vec<PathBuf>, LintError> {
    let Some(parent) = member.strip_suffix("/*") else {
        return Ok(vec![root.join(member)]);
    };
    let dir = root.join(parent);
    let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| LintError::new(&dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("Cargo.toml").is_file())
        .collect();
    out.sort();
    Ok(out)
}

/// Every `.rs` file under `dir`, sorted (none when `dir` does not exist); a symbolic link is not
/// followed.
pub fn rust_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    sources::files_under(dir, dir, &mut Vec::new())
}
