//! Declared vs used: for each `impl Tool`, which `ToolContext` scoped objects `execute` uses,
//! against what `capabilities()` declares, when the declaration can be read statically.
//!
//! Using an object that is not declared is an error: at run time that field is `None`, so the
//! tool fails on every call. Declaring what is never used is a warning: access nobody needs.

use std::collections::BTreeSet;

use syn::visit::Visit;

/// A scoped-object category.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Category {
    Network,
    Fs,
    Secrets,
    Process,
    Storage,
    Attachments,
}

impl Category {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Category::Network => "network",
            Category::Fs => "fs_reach",
            Category::Secrets => "secrets",
            Category::Process => "process",
            Category::Storage => "storage",
            Category::Attachments => "attachments",
        }
    }
}

/// One finding about one tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mismatch {
    pub(crate) line: usize,
    pub(crate) tool: String,
    pub(crate) category: Category,
    /// `true`: used but not declared (an error); `false`: declared but not used (a warning).
    pub(crate) undeclared_use: bool,
}

/// The context accessors and fields that reach each category.
fn category_of_context_member(name: &str) -> Option<Category> {
    Some(match name {
        "fetch" | "scoped_fetch" => Category::Network,
        "fs" | "scoped_fs" => Category::Fs,
        "secrets" | "secrets_resolver" => Category::Secrets,
        "process" | "scoped_process" => Category::Process,
        "kv" | "kv_store" => Category::Storage,
        "attachments" | "scoped_attachments" => Category::Attachments,
        _ => return None,
    })
}

/// The builder methods and JSON keys that declare each category.
fn category_of_declaration(name: &str) -> Option<Category> {
    Some(match name {
        "with_network" | "network" => Category::Network,
        "with_fs_read" | "with_fs_write" | "fs_reach" => Category::Fs,
        "with_secrets" | "secrets" => Category::Secrets,
        "with_process" | "process" => Category::Process,
        "with_storage" | "storage" => Category::Storage,
        "with_attachments" | "attachments" => Category::Attachments,
        _ => return None,
    })
}

/// Members used on the context parameter (or any expression) inside `execute`.
#[derive(Default)]
struct Uses(BTreeSet<Category>);

impl<'ast> Visit<'ast> for Uses {
    fn visit_expr_method_call(&mut self, m: &'ast syn::ExprMethodCall) {
        if m.args.is_empty()
            && let Some(c) = category_of_context_member(&m.method.to_string())
        {
            self.0.insert(c);
        }
        syn::visit::visit_expr_method_call(self, m);
    }
    fn visit_expr_field(&mut self, f: &'ast syn::ExprField) {
        if let syn::Member::Named(name) = &f.member
            && let Some(c) = category_of_context_member(&name.to_string())
        {
            self.0.insert(c);
        }
        syn::visit::visit_expr_field(self, f);
    }
}

/// What a `capabilities()` body declares; `None` when it cannot be read statically.
struct Declares<'a> {
    found: BTreeSet<Category>,
    readable: bool,
    file: &'a syn::File,
    depth: usize,
}

impl<'ast> Visit<'ast> for Declares<'_> {
    fn visit_expr_field(&mut self, f: &'ast syn::ExprField) {
        // A declaration read from a field is decided at run time.
        self.readable = false;
        syn::visit::visit_expr_field(self, f);
    }
    fn visit_expr_path(&mut self, p: &'ast syn::ExprPath) {
        // A variable (or `self`) rather than a type or constant: not statically readable.
        if p.path.segments.len() == 1 {
            let name = p.path.segments[0].ident.to_string();
            if name.starts_with(|c: char| c.is_lowercase() || c == '_') {
                self.readable = false;
            }
        }
        syn::visit::visit_expr_path(self, p);
    }
    fn visit_expr_method_call(&mut self, m: &'ast syn::ExprMethodCall) {
        if let Some(c) = category_of_declaration(&m.method.to_string()) {
            self.found.insert(c);
        }
        syn::visit::visit_expr_method_call(self, m);
    }
    fn visit_expr_call(&mut self, call: &'ast syn::ExprCall) {
        if let syn::Expr::Path(p) = call.func.as_ref() {
            let last = p
                .path
                .segments
                .last()
                .map(|s| s.ident.to_string())
                .unwrap_or_default();
            let first = p
                .path
                .segments
                .first()
                .map(|s| s.ident.to_string())
                .unwrap_or_default();
            if first == "ToolCapabilities"
                || first == "AttachmentsCapability"
                || last == "none"
                || last == "default"
                || last == "unwrap"
            {
                // Constructors of an empty declaration, or of a category's value.
            } else if last == "from_str" && first == "serde_json" {
                // A JSON literal: read its top-level keys.
                match call.args.first() {
                    Some(syn::Expr::Lit(syn::ExprLit {
                        lit: syn::Lit::Str(s),
                        ..
                    })) => match serde_json::from_str::<serde_json::Value>(&s.value()) {
                        Ok(serde_json::Value::Object(map)) => {
                            self.found
                                .extend(map.keys().filter_map(|k| category_of_declaration(k)));
                        }
                        _ => self.readable = false,
                    },
                    _ => self.readable = false,
                }
            } else if p.path.segments.len() == 1 && self.depth < 4 {
                // A helper function in the same file: read its body.
                match find_fn(self.file, &last) {
                    Some(f) => {
                        self.depth += 1;
                        self.visit_block(&f.block);
                        self.depth -= 1;
                    }
                    None => self.readable = false,
                }
            } else {
                self.readable = false;
            }
        }
        syn::visit::visit_expr_call(self, call);
    }
}

fn find_fn<'a>(file: &'a syn::File, name: &str) -> Option<&'a syn::ItemFn> {
    file.items.iter().find_map(|item| match item {
        syn::Item::Fn(f) if f.sig.ident == name => Some(f),
        _ => None,
    })
}

fn tool_name(imp: &syn::ItemImpl) -> String {
    match imp.self_ty.as_ref() {
        syn::Type::Path(p) => p
            .path
            .segments
            .last()
            .map(|s| s.ident.to_string())
            .unwrap_or_default(),
        _ => "<tool>".to_owned(),
    }
}

/// Every mismatch in a parsed file.
pub(crate) fn check_file(file: &syn::File) -> (Vec<Mismatch>, Vec<String>) {
    let mut mismatches = Vec::new();
    let mut unreadable = Vec::new();
    for item in &file.items {
        let syn::Item::Impl(imp) = item else { continue };
        let is_tool = imp
            .trait_
            .as_ref()
            .is_some_and(|(_, p, _)| p.segments.last().is_some_and(|s| s.ident == "Tool"));
        if !is_tool {
            continue;
        }
        let name = tool_name(imp);
        let method = |n: &str| {
            imp.items.iter().find_map(|i| match i {
                syn::ImplItem::Fn(f) if f.sig.ident == n => Some(f),
                _ => None,
            })
        };
        let (Some(caps), Some(exec)) = (method("capabilities"), method("execute")) else {
            continue;
        };
        let mut declares = Declares {
            found: BTreeSet::new(),
            readable: true,
            file,
            depth: 0,
        };
        declares.visit_block(&caps.block);
        if !declares.readable {
            unreadable.push(name);
            continue;
        }
        let mut uses = Uses::default();
        uses.visit_block(&exec.block);
        let line = exec.sig.ident.span().start().line;
        for c in uses.0.difference(&declares.found) {
            mismatches.push(Mismatch {
                line,
                tool: name.clone(),
                category: *c,
                undeclared_use: true,
            });
        }
        for c in declares.found.difference(&uses.0) {
            // A child's cwd is checked against the fs read reach: process makes fs_reach used.
            if *c == Category::Fs && uses.0.contains(&Category::Process) {
                continue;
            }
            let line = caps.sig.ident.span().start().line;
            mismatches.push(Mismatch {
                line,
                tool: name.clone(),
                category: *c,
                undeclared_use: false,
            });
        }
    }
    (mismatches, unreadable)
}

/// What a mismatch means, without its location.
pub(crate) fn describe(m: &Mismatch) -> String {
    if m.undeclared_use {
        format!(
            "{} uses its {} object but capabilities() does not declare {} (it is None at run time)",
            m.tool,
            m.category.name(),
            m.category.name()
        )
    } else {
        format!(
            "{} declares {} but execute never uses it",
            m.tool,
            m.category.name()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(src: &str) -> Vec<(String, &'static str, bool)> {
        let file = syn::parse_file(src).unwrap();
        check_file(&file)
            .0
            .into_iter()
            .map(|m| (m.tool, m.category.name(), m.undeclared_use))
            .collect()
    }

    const HEAD: &str = "use capability_types::*;\n";

    #[test]
    fn used_but_not_declared_is_an_error() {
        let src = format!(
            "{HEAD}struct T;\nimpl Tool for T {{\n fn capabilities(&self) -> ToolCapabilities {{ ToolCapabilities::none().with_network([\"*\"]) }}\n async fn execute(&self, a: Value, ctx: &ToolContext) -> R {{ ctx.fs()?.read(p).await; ctx.fetch()?; ctx.kv_store.clone(); }}\n}}"
        );
        assert_eq!(
            run(&src),
            [
                ("T".to_owned(), "fs_reach", true),
                ("T".to_owned(), "storage", true)
            ]
        );
    }

    #[test]
    fn attachments_are_a_category_like_the_others() {
        let used = format!(
            "{HEAD}struct T;\nimpl Tool for T {{\n fn capabilities(&self) -> ToolCapabilities {{ ToolCapabilities::none() }}\n async fn execute(&self, a: Value, ctx: &ToolContext) -> R {{ ctx.attachments()?.list().await; }}\n}}"
        );
        assert_eq!(run(&used), [("T".to_owned(), "attachments", true)]);
        let declared = format!(
            "{HEAD}struct T;\nimpl Tool for T {{\n fn capabilities(&self) -> ToolCapabilities {{ ToolCapabilities::none().with_attachments(AttachmentsCapability::any()) }}\n async fn execute(&self, a: Value, ctx: &ToolContext) -> R {{ Ok(a) }}\n}}"
        );
        assert_eq!(run(&declared), [("T".to_owned(), "attachments", false)]);
    }

    #[test]
    fn declared_but_unused_is_a_warning() {
        let src = format!(
            "{HEAD}struct T;\nimpl Tool for T {{\n fn capabilities(&self) -> ToolCapabilities {{ ToolCapabilities::none().with_secrets([]).with_fs_read(FsPaths::FromPersonality) }}\n async fn execute(&self, a: Value, ctx: &ToolContext) -> R {{ ctx.fs()?; }}\n}}"
        );
        assert_eq!(run(&src), [("T".to_owned(), "secrets", false)]);
    }

    #[test]
    fn json_literals_and_helpers_are_read() {
        let src = format!(
            "{HEAD}fn decl() -> ToolCapabilities {{ ToolCapabilities::none().with_storage(S, None) }}\nstruct A;\nimpl Tool for A {{\n fn capabilities(&self) -> ToolCapabilities {{ decl() }}\n async fn execute(&self, a: Value, ctx: &ToolContext) -> R {{ ctx.kv()?; }}\n}}\nstruct B;\nimpl Tool for B {{\n fn capabilities(&self) -> ToolCapabilities {{ serde_json::from_str(r#\"{{\"network\":{{\"allowedHosts\":[\"*\"]}}}}\"#).unwrap() }}\n async fn execute(&self, a: Value, ctx: &ToolContext) -> R {{ ctx.fetch()?; ctx.process()?; }}\n}}"
        );
        assert_eq!(run(&src), [("B".to_owned(), "process", true)]);
    }

    #[test]
    fn process_makes_fs_reach_used_and_unreadable_declarations_are_skipped() {
        let src = format!(
            "{HEAD}struct T;\nimpl Tool for T {{\n fn capabilities(&self) -> ToolCapabilities {{ ToolCapabilities::none().with_process([\"*\"]).with_fs_read(FsPaths::FromPersonality) }}\n async fn execute(&self, a: Value, ctx: &ToolContext) -> R {{ ctx.process()?; }}\n}}\nstruct U(ToolCapabilities);\nimpl Tool for U {{\n fn capabilities(&self) -> ToolCapabilities {{ self.0.clone() }}\n async fn execute(&self, a: Value, ctx: &ToolContext) -> R {{ ctx.fs()?; }}\n}}"
        );
        let file = syn::parse_file(&src).unwrap();
        let (mismatches, unreadable) = check_file(&file);
        assert!(mismatches.is_empty(), "{mismatches:?}");
        assert_eq!(
            unreadable,
            ["U"],
            "a declaration held in a field is left to run time"
        );
    }
}
