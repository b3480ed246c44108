//! The ambient-authority rule (docs/architecture.md, "The enforcement points": the source
//! backstop): in a crate that holds tools, any reach for `std::fs`, `std::process`, `std::net`
//! sockets, `std::env::var*`, `tokio::{fs,process,net}` and the other runtimes' and common
//! crates' equivalents, an HTTP client crate, or a system call made directly (`libc`, `rustix`,
//! `nix`, inline assembly, an `extern` block), unsafe code, and a function handed to the linker
//! or the loader (`no_mangle`, `export_name`, `link_section`, the `ctor` crates) is a finding
//! (the list is `banned.rs`) — through `use` (with aliases,
//! groups and globs), fully qualified paths, `extern crate` renames and paths inside macro
//! bodies (docs/lint.md, "Rules"). Parsed with `syn`, not grepped.
//!
//! An exemption is a comment `// toolcap: allow(<path>, reason = "...")` on the line of the
//! finding or the line above it.

use std::collections::HashMap;
use std::path::Path;

use proc_macro2::{LineColumn, TokenStream, TokenTree};
use syn::visit::Visit;

use crate::banned::{BANNED, PATH_PROBES, PLACING, is_cargos_own};
use crate::expand::{MAX_DEPTH, Macros};
use crate::{Exemption, Finding, Rule};

/// Lints one parsed source file. `path` is used for reporting only.
pub(crate) fn lint_source(
    path: &Path,
    source: &str,
    ast: &syn::File,
    macros: &Macros,
) -> (Vec<Finding>, Vec<Exemption>) {
    let mut collector = Collector {
        aliases: HashMap::new(),
        hits: Vec::new(),
        macros,
        depth: 0,
        budget: EXPANSION_BUDGET,
        past_budget: None,
    };
    collector.collect_aliases(ast);
    collector.visit_file(ast);
    let lines: Vec<&str> = source.lines().collect();
    let strings = literals(source);
    let mut findings = Vec::new();
    if let Some(line) = collector.past_budget {
        findings.push(Finding::new(
            Rule::UncheckedSource,
            path,
            line,
            "a macro call that expands deeper or larger than the lint reads",
            format!(
                "macros that expand to less (at most {MAX_DEPTH} calls deep, {EXPANSION_BUDGET} \
                 tokens a file)"
            ),
        ));
    }
    let mut exemptions = Vec::new();
    collector
        .hits
        .sort_by(|a, b| (a.line, &a.what).cmp(&(b.line, &b.what)));
    collector.hits.dedup();
    for hit in collector.hits {
        let banned = BANNED.iter().find(|(b, _)| {
            hit.what == *b
                || hit.what.starts_with(&format!("{b}::"))
                || hit.what.starts_with(&format!("{b}("))
                || b.starts_with(&format!("{}::", hit.what.trim_end_matches("::*")))
        });
        let instead = banned
            .map(|(_, i)| *i)
            .unwrap_or("the scoped objects of the ToolContext");
        match exemption_for(&lines, &strings, hit.line, &hit.what) {
            Some(Ok(reason)) => exemptions.push(Exemption {
                file: path.to_path_buf(),
                line: hit.line,
                what: hit.what,
                reason,
            }),
            Some(Err(problem)) => findings.push(Finding {
                rule: Rule::AmbientAuthority,
                file: path.to_path_buf(),
                line: hit.line,
                what: format!("{} ({problem})", hit.what),
                instead: instead.to_owned(),
            }),
            None => findings.push(Finding {
                rule: Rule::AmbientAuthority,
                file: path.to_path_buf(),
                line: hit.line,
                what: hit.what,
                instead: instead.to_owned(),
            }),
        }
    }
    (findings, exemptions)
}

/// Looks for `// toolcap: allow(<what>, reason = "...")` on `line` or the line above, whose
/// `<what>` covers the flagged path. `Err` when the comment is there but has no reason.
fn exemption_for(
    lines: &[&str],
    strings: &[(LineColumn, LineColumn)],
    line: usize,
    what: &str,
) -> Option<Result<String, String>> {
    for l in [line, line.saturating_sub(1)] {
        let Some(text) = l.checked_sub(1).and_then(|i| lines.get(i)) else {
            continue;
        };
        let Some(at) = text.find("// toolcap: allow(") else {
            continue;
        };
        // The words inside a string (or on a line of one that spans lines) are no comment.
        let here = LineColumn {
            line: l,
            column: text[..at].chars().count(),
        };
        if strings
            .iter()
            .any(|(start, end)| *start <= here && here < *end)
        {
            continue;
        }
        let rest = &text[at + "// toolcap: allow(".len()..];
        let Some(close) = rest.rfind(')') else {
            continue;
        };
        let inner = &rest[..close];
        let (target, reason) = match inner.split_once(',') {
            Some((t, r)) => (t.trim(), r.trim()),
            None => (inner.trim(), ""),
        };
        let covers = what == target
            || what.starts_with(&format!("{target}::"))
            || what.starts_with(&format!("{target}("));
        if !covers {
            continue;
        }
        let reason = reason
            .strip_prefix("reason")
            .map(str::trim_start)
            .and_then(|r| r.strip_prefix('='))
            .map(str::trim);
        return Some(
            match reason
                .and_then(|r| r.strip_prefix('"'))
                .and_then(|r| r.strip_suffix('"'))
            {
                Some(r) if !r.trim().is_empty() => Ok(r.to_owned()),
                _ => Err("exemption without a reason".to_owned()),
            },
        );
    }
    None
}

/// Where each literal of `source` begins and ends (strings, raw strings, byte strings and
/// characters, at every depth), for [`exemption_for`]; none when the source does not tokenize
/// (it did parse, so it does).
fn literals(source: &str) -> Vec<(LineColumn, LineColumn)> {
    fn walk(tokens: TokenStream, out: &mut Vec<(LineColumn, LineColumn)>) {
        for token in tokens {
            match token {
                TokenTree::Literal(l) => out.push((l.span().start(), l.span().end())),
                TokenTree::Group(g) => walk(g.stream(), out),
                TokenTree::Ident(_) | TokenTree::Punct(_) => {}
            }
        }
    }
    let mut out = Vec::new();
    if let Ok(tokens) = source.parse::<TokenStream>() {
        walk(tokens, &mut out);
    }
    out
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Hit {
    line: usize,
    what: String,
}

struct Collector<'m> {
    /// Local name → full path, from `use` renames, plain imports and `extern crate` renames.
    aliases: HashMap<String, Vec<String>>,
    hits: Vec<Hit>,
    /// The crate's `macro_rules!`, whose calls are read expanded too.
    macros: &'m Macros,
    /// How many expansions deep the reading is.
    depth: usize,
    /// How many more tokens expansions may bring into the file's reading.
    budget: usize,
    /// The line of the first call not read expanded for the depth or the budget: a finding, so
    /// that a crate cannot hide a path behind a pile of expansions.
    past_budget: Option<usize>,
}

/// How many tokens the expansions of one file may add to its reading.
const EXPANSION_BUDGET: usize = 250_000;

fn is_banned(path: &[String]) -> bool {
    BANNED.iter().any(|(b, _)| {
        let b: Vec<&str> = b.split("::").collect();
        path.len() >= b.len() && path.iter().zip(&b).all(|(p, b)| p == b)
    })
}

/// A glob import of `prefix` brings a banned path into scope.
fn glob_brings_banned(prefix: &[String]) -> bool {
    BANNED.iter().any(|(b, _)| {
        let b: Vec<&str> = b.split("::").collect();
        b.len() > prefix.len() && prefix.iter().zip(&b).all(|(p, b)| p == b)
    }) || is_banned(prefix)
}

impl Collector<'_> {
    fn collect_aliases(&mut self, ast: &syn::File) {
        struct A<'a>(&'a mut HashMap<String, Vec<String>>);
        impl<'ast> Visit<'ast> for A<'_> {
            fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
                let mut leaves = Vec::new();
                use_leaves(&u.tree, &mut Vec::new(), &mut leaves);
                for (full, local, _) in leaves {
                    if let Some(local) = local {
                        self.0.insert(local, full);
                    }
                }
            }
            fn visit_item_extern_crate(&mut self, e: &'ast syn::ItemExternCrate) {
                if let Some((_, rename)) = &e.rename {
                    self.0.insert(unraw(rename), vec![unraw(&e.ident)]);
                }
            }
        }
        A(&mut self.aliases).visit_file(ast);
    }

    /// Expands the first segment through the alias map (repeatedly, for chains of aliases).
    fn expand(&self, segments: Vec<String>) -> Vec<String> {
        let mut segments = segments;
        for _ in 0..8 {
            let Some(first) = segments.first() else { break };
            match self.aliases.get(first) {
                Some(full) if full.len() > 1 || full[0] != *first => {
                    let mut expanded = full.clone();
                    expanded.extend(segments.into_iter().skip(1));
                    segments = expanded;
                }
                _ => break,
            }
        }
        segments
    }

    /// A path in code: a finding when, its first name expanded through the file's imports, it
    /// names something banned. A path of one name is a local (`let home = …`, `glob`) unless an
    /// import made it more, and a crate is reached by more than its name.
    fn check(&mut self, segments: Vec<String>, line: usize) {
        let segments = self.expand(segments);
        if segments.len() > 1 && is_banned(&segments) {
            self.hits.push(Hit {
                line,
                what: segments.join("::"),
            });
        }
    }

    /// A call of `name` without arguments, where `name` is one of [`PATH_PROBES`].
    fn path_probe(&mut self, name: &str, line: usize) {
        if PATH_PROBES.contains(&name) {
            self.hits.push(Hit {
                line,
                what: format!("std::path::Path::{name}"),
            });
        }
    }

    /// `print!` or `println!` (`mac`), which write to the host's standard output.
    fn printing(&mut self, mac: &str, line: usize) {
        let mac = mac.trim_start_matches("r#");
        if mac == "print" || mac == "println" {
            self.hits.push(Hit {
                line,
                what: format!("{mac}!"),
            });
        }
    }

    /// `env!(args)` or `option_env!(args)` when `mac` is one of them, unless it names one of
    /// Cargo's own variables; one whose name is not a literal is a finding too.
    fn compile_time_env(&mut self, mac: &str, args: &TokenStream, line: usize) {
        let mac = mac.trim_start_matches("r#");
        if mac != "env" && mac != "option_env" {
            return;
        }
        let first: TokenStream = args
            .clone()
            .into_iter()
            .take_while(|t| !matches!(t, TokenTree::Punct(p) if p.as_char() == ','))
            .collect();
        let what = match syn::parse2::<syn::LitStr>(first) {
            Ok(name) if is_cargos_own(&name.value()) => return,
            Ok(name) => format!("{mac}!(\"{}\")", name.value()),
            Err(_) => format!("{mac}!(…)"),
        };
        self.hits.push(Hit { line, what });
    }

    /// A call of one of the crate's `macro_rules!` (`name`, with `input`), read expanded
    /// ([`Macros::expand`]); what the expansion holds is reported at the call's `line`.
    fn expanded(&mut self, name: &str, input: &TokenStream, line: usize) {
        let Some(expansion) = self.macros.expand(name, input, self.budget) else {
            return;
        };
        let (expansion, size) = match expansion {
            Ok(expanded) if self.depth < MAX_DEPTH => expanded,
            _ => {
                self.past_budget.get_or_insert(line);
                return;
            }
        };
        self.budget -= size;
        let before = self.hits.len();
        self.depth += 1;
        self.scan_tokens(expansion);
        self.depth -= 1;
        for hit in &mut self.hits[before..] {
            hit.line = line;
        }
    }

    /// `unsafe` or one of [`PLACING`] as a word of a macro's body or an attribute.
    fn placing_or_unsafe(&mut self, word: &proc_macro2::Ident) {
        let name = unraw(word);
        if name == "unsafe" || PLACING.contains(&name.as_str()) {
            self.hits.push(Hit {
                line: word.span().start().line,
                what: name,
            });
        }
    }

    /// `unsafe` at `span`: an unsafe block, function, impl or trait.
    fn unsafe_at(&mut self, span: proc_macro2::Span) {
        self.hits.push(Hit {
            line: span.start().line,
            what: "unsafe".to_owned(),
        });
    }

    fn scan_tokens(&mut self, tokens: TokenStream) {
        let tokens: Vec<TokenTree> = tokens.into_iter().map(pasted).collect();
        let mut i = 0;
        while i < tokens.len() {
            match &tokens[i] {
                TokenTree::Group(g) => {
                    self.scan_tokens(g.stream());
                    i += 1;
                }
                TokenTree::Punct(dot) if dot.as_char() == '.' => {
                    // `.exists()` in a macro's body, which is not parsed as code.
                    if let (Some(TokenTree::Ident(name)), Some(TokenTree::Group(args))) =
                        (tokens.get(i + 1), tokens.get(i + 2))
                        && args.delimiter() == proc_macro2::Delimiter::Parenthesis
                        && args.stream().is_empty()
                    {
                        self.path_probe(&unraw(name), name.span().start().line);
                    }
                    i += 1;
                }
                TokenTree::Ident(first) => {
                    self.placing_or_unsafe(first);
                    let line = first.span().start().line;
                    let mut segments = vec![unraw(first)];
                    let mut j = i + 1;
                    while j + 2 < tokens.len() + 1 {
                        match (&tokens.get(j), &tokens.get(j + 1), &tokens.get(j + 2)) {
                            (
                                Some(TokenTree::Punct(a)),
                                Some(TokenTree::Punct(b)),
                                Some(TokenTree::Ident(next)),
                            ) if a.as_char() == ':' && b.as_char() == ':' => {
                                segments.push(unraw(next));
                                j += 3;
                            }
                            _ => break,
                        }
                    }
                    // `env!("…")` in a macro's body (`format!("{}", env!("HOME"))`).
                    if let (Some(TokenTree::Punct(bang)), Some(TokenTree::Group(args))) =
                        (tokens.get(j), tokens.get(j + 1))
                        && bang.as_char() == '!'
                        && let Some(name) = segments.last()
                    {
                        self.compile_time_env(name, &args.stream(), line);
                        self.printing(name, line);
                        if segments.len() == 1 {
                            self.expanded(name, &args.stream(), line);
                        }
                    }
                    if segments.len() > 1 {
                        let segments = segments
                            .into_iter()
                            .map(|s| s.trim_start_matches("r#").to_owned())
                            .collect();
                        self.check(segments, line);
                    }
                    i = j.max(i + 1);
                }
                TokenTree::Punct(_) | TokenTree::Literal(_) => i += 1,
            }
        }
    }
}

/// An identifier's name, a raw one's without its `r#` (`r#std` names `std`).
pub(crate) fn unraw(ident: &proc_macro2::Ident) -> String {
    syn::ext::IdentExt::unraw(ident).to_string()
}

/// A `[<…>]` group, which the `paste` crates (and their forks) join into one name when the
/// macro expands (`[<st d>]` is `std`, `[<"v" ar>]` is `var`, `[<STD:lower>]` is `std`), read as
/// that name; any other token as it is.
fn pasted(token: TokenTree) -> TokenTree {
    let TokenTree::Group(group) = &token else {
        return token;
    };
    let inner: Vec<TokenTree> = group.stream().into_iter().collect();
    let (Some(TokenTree::Punct(open)), Some(TokenTree::Punct(close))) =
        (inner.first(), inner.last())
    else {
        return token;
    };
    if group.delimiter() != proc_macro2::Delimiter::Bracket
        || open.as_char() != '<'
        || close.as_char() != '>'
        || inner.len() < 3
    {
        return token;
    }
    let mut name = String::new();
    let mut pieces = inner[1..inner.len() - 1].iter().peekable();
    while let Some(piece) = pieces.next() {
        match piece {
            TokenTree::Ident(i) => name.push_str(&unraw(i)),
            TokenTree::Literal(l) => name.push_str(l.to_string().trim_matches('"')),
            // `:lower`, `:upper` and the other case modifiers apply to the whole name.
            TokenTree::Punct(p) if p.as_char() == ':' => match pieces.next() {
                Some(TokenTree::Ident(m)) if m == "lower" || m == "snake" => {
                    name = name.to_lowercase();
                }
                Some(TokenTree::Ident(m)) if m == "upper" => name = name.to_uppercase(),
                _ => {}
            },
            _ => return token,
        }
    }
    // ASCII only: what `Ident::new` takes without a panic, and every name the list holds.
    let is_name = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !is_name {
        return token;
    }
    TokenTree::Ident(proc_macro2::Ident::new(&name, group.span()))
}

/// Flattens a use tree into (full path, local name if any, line). Globs end in `*` and have no
/// local name; `self` in a group names the group's prefix.
fn use_leaves(
    tree: &syn::UseTree,
    prefix: &mut Vec<String>,
    out: &mut Vec<(Vec<String>, Option<String>, usize)>,
) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(unraw(&p.ident));
            use_leaves(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let line = n.ident.span().start().line;
            if n.ident == "self" {
                out.push((prefix.clone(), prefix.last().cloned(), line));
            } else {
                let mut full = prefix.clone();
                full.push(unraw(&n.ident));
                out.push((full, Some(unraw(&n.ident)), line));
            }
        }
        syn::UseTree::Rename(r) => {
            let line = r.ident.span().start().line;
            let mut full = prefix.clone();
            if r.ident != "self" {
                full.push(unraw(&r.ident));
            }
            out.push((full, Some(unraw(&r.rename)), line));
        }
        syn::UseTree::Glob(g) => {
            let mut full = prefix.clone();
            full.push("*".to_owned());
            out.push((full, None, g.star_token.span.start().line));
        }
        syn::UseTree::Group(g) => {
            for t in &g.items {
                use_leaves(t, prefix, out);
            }
        }
    }
}

impl<'ast> Visit<'ast> for Collector<'_> {
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let mut leaves = Vec::new();
        use_leaves(&u.tree, &mut Vec::new(), &mut leaves);
        for (full, _, line) in leaves {
            let full = self.expand(full);
            if full.last().is_some_and(|s| s == "*") {
                let prefix = &full[..full.len() - 1];
                if glob_brings_banned(prefix) {
                    self.hits.push(Hit {
                        line,
                        what: full.join("::"),
                    });
                }
            } else if is_banned(&full) {
                self.hits.push(Hit {
                    line,
                    what: full.join("::"),
                });
            }
        }
    }

    fn visit_item_extern_crate(&mut self, e: &'ast syn::ItemExternCrate) {
        let name = unraw(&e.ident);
        if is_banned(std::slice::from_ref(&name)) {
            self.hits.push(Hit {
                line: e.ident.span().start().line,
                what: name,
            });
        }
    }

    /// An `extern` block declares foreign functions, which call what they like.
    fn visit_item_foreign_mod(&mut self, m: &'ast syn::ItemForeignMod) {
        self.hits.push(Hit {
            line: m.abi.extern_token.span.start().line,
            what: "extern".to_owned(),
        });
        syn::visit::visit_item_foreign_mod(self, m);
    }

    fn visit_expr_unsafe(&mut self, e: &'ast syn::ExprUnsafe) {
        self.unsafe_at(e.unsafe_token.span);
        syn::visit::visit_expr_unsafe(self, e);
    }

    /// An unsafe function, of the crate's own or in an impl or a trait: its body is unsafe code.
    fn visit_signature(&mut self, s: &'ast syn::Signature) {
        if let Some(token) = &s.unsafety {
            self.unsafe_at(token.span);
        }
        syn::visit::visit_signature(self, s);
    }

    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        if let Some(token) = &i.unsafety {
            self.unsafe_at(token.span);
        }
        syn::visit::visit_item_impl(self, i);
    }

    fn visit_item_trait(&mut self, t: &'ast syn::ItemTrait) {
        if let Some(token) = &t.unsafety {
            self.unsafe_at(token.span);
        }
        syn::visit::visit_item_trait(self, t);
    }

    /// `#[no_mangle]`, `#[export_name = …]`, `#[link_section = …]`, in any spelling: the
    /// attribute's words are read wherever they nest (`unsafe(…)`, `cfg_attr(…)`), its strings
    /// are not (`#[doc = "no_mangle"]`).
    fn visit_attribute(&mut self, a: &'ast syn::Attribute) {
        fn words(tokens: TokenStream, out: &mut Vec<proc_macro2::Ident>) {
            for t in tokens {
                match t {
                    TokenTree::Ident(i) => out.push(i),
                    TokenTree::Group(g) => words(g.stream(), out),
                    TokenTree::Punct(_) | TokenTree::Literal(_) => {}
                }
            }
        }
        let (path, tokens) = match &a.meta {
            syn::Meta::Path(path) => (path, None),
            syn::Meta::List(list) => (&list.path, Some(list.tokens.clone())),
            syn::Meta::NameValue(nv) => (&nv.path, None),
        };
        let mut found: Vec<proc_macro2::Ident> =
            path.segments.iter().map(|s| s.ident.clone()).collect();
        if let Some(tokens) = tokens {
            words(tokens, &mut found);
        }
        for word in found {
            if PLACING.contains(&unraw(&word).as_str()) {
                self.placing_or_unsafe(&word);
            }
        }
        syn::visit::visit_attribute(self, a);
    }

    fn visit_expr_method_call(&mut self, m: &'ast syn::ExprMethodCall) {
        if m.args.is_empty() {
            self.path_probe(&unraw(&m.method), m.method.span().start().line);
        }
        syn::visit::visit_expr_method_call(self, m);
    }

    /// `<std::path::Path>::exists(p)`: the type in the angle brackets is the path's start.
    fn visit_expr_path(&mut self, e: &'ast syn::ExprPath) {
        if let Some(qself) = &e.qself
            && qself.position == 0
            && let syn::Type::Path(ty) = &*qself.ty
            && let Some(first) = e.path.segments.first()
        {
            let segments = ty
                .path
                .segments
                .iter()
                .chain(&e.path.segments)
                .map(|s| unraw(&s.ident))
                .collect();
            self.check(segments, first.ident.span().start().line);
        }
        syn::visit::visit_expr_path(self, e);
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segments: Vec<String> = p.segments.iter().map(|s| unraw(&s.ident)).collect();
        if let Some(first) = p.segments.first() {
            let line = first.ident.span().start().line;
            self.check(segments, line);
        }
        syn::visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        if let Some(last) = m.path.segments.last() {
            let line = last.ident.span().start().line;
            self.compile_time_env(&unraw(&last.ident), &m.tokens, line);
            self.printing(&unraw(&last.ident), line);
            if m.path.segments.len() == 1 {
                self.expanded(&unraw(&last.ident), &m.tokens, line);
            }
        }
        self.scan_tokens(m.tokens.clone());
        syn::visit::visit_macro(self, m);
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn lint(source: &str) -> (Vec<String>, Vec<Exemption>) {
        let ast = syn::parse_file(source).unwrap();
        let macros = Macros::collect([&ast]);
        let (f, e) = lint_source(Path::new("fixture.rs"), source, &ast, &macros);
        (
            f.into_iter()
                .map(|f| format!("{}:{}", f.line, f.what))
                .collect(),
            e,
        )
    }

    // guarantee: G-LINT-01
    /// `fixtures/lint/*.rs`: one file per evasion (and clean files), each ending with
    /// `// expect: LINE:path | ...` or `// expect: clean`.
    #[test]
    fn the_fixture_set() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/lint");
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        let (mut evasions, mut clean) = (0, 0);
        for file in files {
            let source = std::fs::read_to_string(&file).unwrap();
            let expect_line = source.lines().last().unwrap();
            let expected: Vec<String> = match expect_line.strip_prefix("// expect: ").unwrap() {
                "clean" => Vec::new(),
                list => list.split(" | ").map(str::to_owned).collect(),
            };
            if expected.is_empty() {
                clean += 1
            } else {
                evasions += 1
            }
            let (findings, _) = lint(&source);
            assert_eq!(findings, expected, "{}", file.display());
        }
        assert!(
            evasions >= 20 && clean >= 5,
            "the fixture set is there: {evasions} evasions, {clean} clean files"
        );
    }

    /// A macro that calls itself ten times over, or with arguments that double at each call,
    /// would take the lint longer than any review; past its depth and its budget of tokens,
    /// the call is a finding, not a pass, and the reading ends at once.
    #[test]
    fn a_pile_of_expansions_is_a_finding_not_a_hang() {
        let fan = format!(
            "macro_rules! m {{ ($x:ident) => {{ {} }}; }}\nfn f() {{ m!(a); }}\n",
            "m!($x);".repeat(10)
        );
        let doubling = "macro_rules! d { ($($x:tt)*) => {}; ($x:tt) => { d!(($x $x)); }; }\n\
                        macro_rules! e { ($x:tt) => { e!(($x $x)); }; }\nfn g() { e!(a); }\n";
        for source in [fan.as_str(), doubling] {
            let (findings, _) = lint(source);
            assert!(
                findings
                    .iter()
                    .any(|f| f.contains("expands deeper or larger than the lint reads")),
                "{source}: {findings:?}"
            );
        }
        // Within its depth, the same kind of macro is read expanded.
        let (findings, _) = lint(
            "macro_rules! deep { (0 $p:ident) => { std::$p::read(\"x\") }; (1 $p:ident) => { deep!(0 $p) }; }\n\
             fn h() { deep!(1 fs); }\n",
        );
        assert_eq!(findings, ["2:std::fs::read"]);
        // A macro that takes its input a token at a time, twenty calls deep, is read to its end.
        let (findings, _) = lint(&format!(
            "macro_rules! munch {{ (; $p:ident) => {{ std::$p::read(\"x\") }}; ($t:tt $($rest:tt)*) => {{ munch!($($rest)*) }}; }}\n\
             fn m() {{ munch!({} ; fs); }}\n",
            "a ".repeat(20)
        ));
        assert_eq!(findings, ["2:std::fs::read"]);
    }

    #[test]
    fn exemptions_need_a_reason_and_are_listed() {
        let (findings, exemptions) = lint(
            "// toolcap: allow(std::fs, reason = \"the fs backend's sys module\")\nfn f() { std::fs::read(\"/x\"); }",
        );
        assert!(findings.is_empty(), "{findings:?}");
        assert_eq!(exemptions.len(), 1);
        assert_eq!(exemptions[0].reason, "the fs backend's sys module");
        let (findings, _) = lint("fn f() { std::fs::read(\"/x\"); } // toolcap: allow(std::fs)");
        assert_eq!(findings, ["1:std::fs::read (exemption without a reason)"]);
        let (findings, _) =
            lint("// toolcap: allow(std::net, reason = \"x\")\nfn f() { std::fs::read(\"/x\"); }");
        assert_eq!(
            findings,
            ["2:std::fs::read"],
            "an exemption covers only what it names"
        );
    }
}
