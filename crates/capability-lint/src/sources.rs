//! Which files a crate's sources are (docs/lint.md, "Which files are checked"): every `.rs` file
//! under `src/`, and whatever the compiler would also build from elsewhere, found by following
//! the module tree: a `[lib]` or `[[bin]]` path in the manifest, a `#[path = "…"]` module, an
//! `include!("…")`, and the plain `mod m;` of a file found that way. What the lint cannot follow
//! (a symbolic link among the sources, a file outside the crate's directory, an `include!` of a
//! path it cannot read statically, a `#[path]` whose file is not there) is a finding of
//! [`Rule::UncheckedSource`], never a silent pass.

use std::collections::{BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

use crate::{Finding, LintError, Rule};

/// The largest source file read: a file larger than this cannot be checked.
const MAX_SOURCE_BYTES: u64 = 8 << 20;

/// A parsed source file: path, text and syntax tree.
pub(crate) type Source = (PathBuf, String, syn::File);

/// The sources of the crate in `dir` (canonical) whose manifest is `manifest`, and the findings
/// for what could not be followed (paths in findings relative to `dir`).
pub(crate) fn collect(
    dir: &Path,
    manifest: &toml::Table,
) -> Result<(Vec<Source>, Vec<Finding>), LintError> {
    let mut walk = Walk {
        dir,
        seen: BTreeSet::new(),
        queue: VecDeque::new(),
        unchecked: Vec::new(),
    };
    let src = dir.join("src");
    for file in files_under(&src, dir, &mut walk.unchecked).map_err(|e| LintError::new(&src, e))? {
        walk.seen.insert(file.clone());
        walk.queue.push_back((file, false));
    }
    for target in target_paths(manifest) {
        walk.follow(&dir.join(target), Path::new("Cargo.toml"), 1);
    }
    let mut sources = Vec::new();
    while let Some((file, outside_src)) = walk.queue.pop_front() {
        let (text, ast) = read(&file)?;
        let rel = file.strip_prefix(dir).unwrap_or(&file).to_path_buf();
        let mut pulls = Pulls::default();
        pulls.visit_file(&ast);
        let here = file.parent().unwrap_or(dir).to_path_buf();
        let stem = file.file_stem().map(PathBuf::from).unwrap_or_default();
        for pull in pulls.found {
            match pull {
                Pull::Module {
                    line,
                    path,
                    inline,
                    name,
                } => {
                    // A plain `mod m;` at the top of a file under `src/` is a file under `src/`,
                    // already walked; elsewhere it is followed like a `#[path]`.
                    if path.is_none() && !outside_src && inline.is_empty() {
                        continue;
                    }
                    let candidates =
                        module_candidates(&here, &stem, &inline, &name, path.as_deref());
                    let found: Vec<_> = candidates.iter().filter(|c| c.exists()).collect();
                    if found.is_empty() && path.is_some() {
                        walk.unchecked.push(finding(
                            &rel,
                            line,
                            "a `#[path]` module whose file is not there",
                        ));
                    }
                    for candidate in found {
                        walk.follow(candidate, &rel, line);
                    }
                }
                Pull::Include {
                    line,
                    path: Some(path),
                } => walk.follow(&here.join(path), &rel, line),
                Pull::Include { line, path: None } => {
                    walk.unchecked.push(finding(
                        &rel,
                        line,
                        "an `include!` of a path the lint cannot read statically",
                    ));
                }
                Pull::Data {
                    line,
                    which,
                    path: Some(path),
                } => walk.data(&here.join(path), which, &rel, line),
                Pull::Data {
                    line,
                    which,
                    path: None,
                } => {
                    let what = format!("an `{which}!` of a path the lint cannot read statically");
                    walk.unchecked.push(finding(&rel, line, &what));
                }
            }
        }
        sources.push((file, text, ast));
    }
    sources.sort_by(|a, b| a.0.cmp(&b.0));
    Ok((sources, walk.unchecked))
}

/// A finding of [`Rule::UncheckedSource`].
fn finding(file: &Path, line: usize, what: &str) -> Finding {
    Finding::new(
        Rule::UncheckedSource,
        file,
        line,
        what,
        "a plain file of the crate, under src/ or reached by a literal #[path] or include! inside the crate's directory",
    )
}

/// The walk of one crate's module tree: the files seen, those still to read (each with whether
/// it lies outside `src/`), and what could not be followed.
struct Walk<'a> {
    dir: &'a Path,
    seen: BTreeSet<PathBuf>,
    queue: VecDeque<(PathBuf, bool)>,
    unchecked: Vec<Finding>,
}

impl Walk<'_> {
    /// Where `file` (named at `from:line` as `what`: "a source", "an `include_str!` of a
    /// file") lies, when that is inside the crate's directory; a finding otherwise. A target that
    /// is not there is the compiler's to report; one that is there but cannot be resolved (a
    /// link to nowhere, a directory it may not search) is ours.
    fn inside(&mut self, file: &Path, what: &str, from: &Path, line: usize) -> Option<PathBuf> {
        let Ok(real) = std::fs::canonicalize(file) else {
            if std::fs::symlink_metadata(file).is_ok() {
                let what = format!("{what} that cannot be resolved ({})", file.display());
                self.unchecked.push(finding(from, line, &what));
            }
            return None;
        };
        if real.starts_with(self.dir) {
            return Some(real);
        }
        let what = format!("{what} outside the crate's directory ({})", real.display());
        self.unchecked.push(finding(from, line, &what));
        None
    }

    /// Queues `file` (named at `from:line`) unless it was seen; refuses a file outside the
    /// crate's directory, or one that is not a regular file.
    fn follow(&mut self, file: &Path, from: &Path, line: usize) {
        let Some(real) = self.inside(file, "a source", from, line) else {
            return;
        };
        if !std::fs::metadata(&real).is_ok_and(|m| m.is_file()) {
            let what = format!("a source that is not a regular file ({})", real.display());
            self.unchecked.push(finding(from, line, &what));
        } else if self.seen.insert(real.clone()) {
            self.queue.push_back((real, true));
        }
    }

    /// An `include_str!` or `include_bytes!` of `file` (named at `from:line`): the compiler reads
    /// it from the building machine and builds it into the tool, so it must be a file of the
    /// crate, where a reviewer sees it (not `~/.ssh/id_ed25519`, nor a link in the crate that
    /// leads there). It is not read as a source.
    fn data(&mut self, file: &Path, which: &str, from: &Path, line: usize) {
        self.inside(file, &format!("an `{which}!` of a file"), from, line);
    }
}

/// The `.rs` files under `src`, sorted; a symbolic link there is a finding (named relative to
/// `dir`), never followed.
pub(crate) fn files_under(
    src: &Path,
    dir: &Path,
    unchecked: &mut Vec<Finding>,
) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    if !src.is_dir() {
        return Ok(out);
    }
    let mut stack = vec![src.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d)? {
            let entry = entry?;
            let path = entry.path();
            let kind = entry.file_type()?;
            if kind.is_symlink() {
                let rel = path.strip_prefix(dir).unwrap_or(&path);
                unchecked.push(finding(rel, 1, "a symbolic link among the sources"));
            } else if kind.is_dir() {
                stack.push(path);
            } else if kind.is_file() && path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// The `path` of the manifest's `[lib]` and `[[bin]]` targets.
fn target_paths(manifest: &toml::Table) -> Vec<String> {
    let lib = manifest.get("lib").into_iter();
    let bins = manifest
        .get("bin")
        .and_then(toml::Value::as_array)
        .into_iter()
        .flatten();
    lib.chain(bins)
        .filter_map(|t| t.get("path").and_then(toml::Value::as_str))
        .map(str::to_owned)
        .collect()
}

/// Where the compiler may look for module `name` declared in a file of directory `here` and
/// stem `stem`, inside inline modules `inline`, with an optional `#[path]`: both the rule for a
/// `mod.rs`-like file (a crate root, `mod.rs`) and for any other file, since which one applies
/// depends on how the file itself was reached.
fn module_candidates(
    here: &Path,
    stem: &Path,
    inline: &[String],
    name: &str,
    path: Option<&str>,
) -> Vec<PathBuf> {
    let nested: PathBuf = inline.iter().collect();
    let mut out = Vec::new();
    for base in [here.join(&nested), here.join(stem).join(&nested)] {
        match path {
            // At the top of a file, `#[path]` is relative to the file's directory whatever
            // kind the file is.
            Some(path) if inline.is_empty() => out.push(here.join(path)),
            Some(path) => out.push(base.join(path)),
            None => {
                out.push(base.join(format!("{name}.rs")));
                out.push(base.join(name).join("mod.rs"));
            }
        }
    }
    // Kept as written: the compiler opens the joined path, so `..` after a directory that is
    // a link goes up from where the link leads (worked out lexically, it named a decoy inside
    // the crate while the compiler built a file outside it).
    out.sort();
    out.dedup();
    out
}

/// The text of `file`, a regular file of at most [`MAX_SOURCE_BYTES`]: a crate under review is
/// not trusted, and a FIFO in it would hold `open` for ever, a link to `/dev/zero` fill the
/// memory (its `Cargo.toml` as much as its sources).
pub(crate) fn read_text(file: &Path) -> Result<String, LintError> {
    use std::io::Read as _;
    let regular = |meta: std::io::Result<std::fs::Metadata>| match meta {
        Ok(meta) if meta.is_file() => Ok(()),
        Ok(_) => Err(LintError::new(file, "not a regular file; not checked")),
        Err(e) => Err(LintError::new(file, e)),
    };
    // Looked at before it is opened (a FIFO's `open` waits for a writer), and again once open.
    regular(std::fs::metadata(file))?;
    let handle = std::fs::File::open(file).map_err(|e| LintError::new(file, e))?;
    regular(handle.metadata())?;
    let mut text = String::new();
    handle
        .take(MAX_SOURCE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| LintError::new(file, e))?;
    if text.len() as u64 > MAX_SOURCE_BYTES {
        return Err(LintError::new(
            file,
            format!("larger than {MAX_SOURCE_BYTES} bytes; not checked"),
        ));
    }
    Ok(text)
}

/// Reads and parses a source file; a file an `include!` brings in may be an expression, which
/// is parsed inside a function on its first line (so that its lines keep their numbers).
fn read(file: &Path) -> Result<(String, syn::File), LintError> {
    let text = read_text(file)?;
    let parsed = syn::parse_file(&text).or_else(|first| {
        syn::parse_file(&format!("fn __toolcap_included() {{ {text}\n}}")).map_err(|_| first)
    });
    let ast =
        parsed.map_err(|e| LintError::new(file, format!("line {}: {e}", e.span().start().line)))?;
    Ok((text, ast))
}

/// What a file pulls in.
enum Pull {
    /// A file module, inside inline modules `inline`, with its `#[path]` if it has one.
    Module {
        line: usize,
        path: Option<String>,
        inline: Vec<String>,
        name: String,
    },
    /// An `include!`, with its path when it is a string literal.
    Include { line: usize, path: Option<String> },
    /// An `include_str!` or `include_bytes!` (`which`), with its path when it is a string
    /// literal: a file read when the crate is built, and built into it.
    Data {
        line: usize,
        which: &'static str,
        path: Option<String>,
    },
}

/// The pulls of one file, in order.
#[derive(Default)]
struct Pulls {
    found: Vec<Pull>,
    /// The directories of the inline modules the visit is inside.
    inline: Vec<String>,
}

impl<'ast> Visit<'ast> for Pulls {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        let (paths, always) = path_values(&m.attrs);
        if m.content.is_some() {
            // An inline module's `#[path]` names the directory of the modules inside it.
            let dir = paths
                .first()
                .cloned()
                .unwrap_or_else(|| m.ident.to_string());
            self.inline.push(dir);
            syn::visit::visit_item_mod(self, m);
            self.inline.pop();
            return;
        }
        let line = m.ident.span().start().line;
        let mut pull = |path| {
            self.found.push(Pull::Module {
                line,
                path,
                inline: self.inline.clone(),
                name: m.ident.to_string(),
            });
        };
        // A `#[cfg_attr(…, path = "…")]` applies only under its condition: the plain file
        // applies otherwise, so both are followed.
        if !always {
            pull(None);
        }
        for path in paths {
            pull(Some(path));
        }
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        if let Some(last) = mac.path.segments.last()
            && let Some(pull) = pull_of(&last.ident, &mac.tokens)
        {
            self.found.push(pull);
        }
        includes_in(&mac.tokens, &mut self.found);
        modules_in(&mac.tokens, &self.inline, &mut self.found);
    }
}

/// The paths an item's `#[path = "…"]` and `#[cfg_attr(…, path = "…")]` give it, and whether
/// one applies whatever the configuration. A path that is not a string literal is given as one
/// that cannot exist, so that it is reported, not skipped.
fn path_values(attrs: &[syn::Attribute]) -> (Vec<String>, bool) {
    let mut out = Vec::new();
    let mut always = false;
    for attr in attrs {
        // `#[r#path = …]` is `#[path = …]`.
        let named = |word: &str| {
            attr.path()
                .get_ident()
                .is_some_and(|i| crate::ambient::unraw(i) == word)
        };
        if named("path") {
            always = true;
            out.push(match &attr.meta {
                syn::Meta::NameValue(syn::MetaNameValue {
                    value:
                        syn::Expr::Lit(syn::ExprLit {
                            lit: syn::Lit::Str(s),
                            ..
                        }),
                    ..
                }) => s.value(),
                _ => String::from("\0"),
            });
        } else if named("cfg_attr")
            && let syn::Meta::List(list) = &attr.meta
        {
            let trees: Vec<TokenTree> = list.tokens.clone().into_iter().collect();
            for (i, tree) in trees.iter().enumerate() {
                if let TokenTree::Ident(id) = tree
                    && crate::ambient::unraw(id) == "path"
                    && matches!(trees.get(i + 1), Some(TokenTree::Punct(p)) if p.as_char() == '=')
                {
                    let value = trees
                        .get(i + 2)
                        .and_then(|t| syn::parse2::<syn::LitStr>(t.clone().into()).ok());
                    out.push(value.map_or_else(|| String::from("\0"), |s| s.value()));
                }
            }
        }
    }
    (out, always)
}

/// `mod name;` anywhere in a macro's tokens (a macro body is not parsed as code), with the
/// attributes right before it (`#[path = "…"]`, `#[cfg_attr(…, path = "…")]`), read as the
/// module it declares where the macro is called: the compiler builds it once the macro expands.
fn modules_in(tokens: &TokenStream, inline: &[String], out: &mut Vec<Pull>) {
    let trees: Vec<TokenTree> = tokens.clone().into_iter().collect();
    for (i, tree) in trees.iter().enumerate() {
        match tree {
            TokenTree::Ident(word) if word == "mod" => {
                // The name, or a fragment the macro's caller gives (`mod $m;`): a module with a
                // `#[path]` is found by its path whatever its name.
                let (name, end) = match (trees.get(i + 1), trees.get(i + 2), trees.get(i + 3)) {
                    (Some(TokenTree::Ident(name)), Some(TokenTree::Punct(end)), _) => {
                        (name.clone(), end)
                    }
                    (
                        Some(TokenTree::Punct(dollar)),
                        Some(TokenTree::Ident(name)),
                        Some(TokenTree::Punct(end)),
                    ) if dollar.as_char() == '$' => (name.clone(), end),
                    _ => continue,
                };
                if end.as_char() != ';' {
                    continue;
                }
                // The attributes before it: `#` and a bracketed group, back to back (a `pub`
                // or other visibility between them and `mod` too).
                let mut attrs = Vec::new();
                let mut at = i;
                while at >= 1 {
                    match &trees[at - 1] {
                        TokenTree::Ident(v) if v == "pub" || v == "crate" || v == "super" => {
                            at -= 1;
                        }
                        TokenTree::Group(g)
                            if g.delimiter() == proc_macro2::Delimiter::Parenthesis =>
                        {
                            at -= 1;
                        }
                        TokenTree::Group(g)
                            if g.delimiter() == proc_macro2::Delimiter::Bracket
                                && at >= 2
                                && matches!(&trees[at - 2], TokenTree::Punct(p) if p.as_char() == '#') =>
                        {
                            let meta = syn::parse2::<syn::Meta>(g.stream());
                            if let Ok(meta) = meta {
                                attrs.push(syn::Attribute {
                                    pound_token: Default::default(),
                                    style: syn::AttrStyle::Outer,
                                    bracket_token: Default::default(),
                                    meta,
                                });
                            }
                            at -= 2;
                        }
                        _ => break,
                    }
                }
                let (paths, always) = path_values(&attrs);
                let line = name.span().start().line;
                let mut pull = |path| {
                    out.push(Pull::Module {
                        line,
                        path,
                        inline: inline.to_vec(),
                        name: name.to_string(),
                    });
                };
                if !always {
                    pull(None);
                }
                for path in paths {
                    pull(Some(path));
                }
            }
            TokenTree::Group(group) => modules_in(&group.stream(), inline, out),
            _ => {}
        }
    }
}

/// The string literal that is all of `tokens`, if it is one.
fn literal(tokens: &TokenStream) -> Option<String> {
    syn::parse2::<syn::LitStr>(tokens.clone())
        .ok()
        .map(|s| s.value())
}

/// What the macro `name!(args)` pulls in, if it is `include!`, `include_str!` or
/// `include_bytes!`.
fn pull_of(name: &proc_macro2::Ident, args: &TokenStream) -> Option<Pull> {
    let line = name.span().start().line;
    let path = literal(args);
    // `r#include!` is `include!`.
    match crate::ambient::unraw(name).as_str() {
        "include" => Some(Pull::Include { line, path }),
        "include_str" => Some(Pull::Data {
            line,
            which: "include_str",
            path,
        }),
        "include_bytes" => Some(Pull::Data {
            line,
            which: "include_bytes",
            path,
        }),
        _ => None,
    }
}

/// `include ! (…)`, `include_str ! (…)` and `include_bytes ! (…)` anywhere in a macro's tokens
/// (a macro body is not parsed as code).
fn includes_in(tokens: &TokenStream, out: &mut Vec<Pull>) {
    let trees: Vec<TokenTree> = tokens.clone().into_iter().collect();
    for (i, tree) in trees.iter().enumerate() {
        match tree {
            TokenTree::Ident(id) => {
                if let (Some(TokenTree::Punct(bang)), Some(TokenTree::Group(args))) =
                    (trees.get(i + 1), trees.get(i + 2))
                    && bang.as_char() == '!'
                    && let Some(pull) = pull_of(id, &args.stream())
                {
                    out.push(pull);
                }
            }
            TokenTree::Group(group) => includes_in(&group.stream(), out),
            _ => {}
        }
    }
}
