//! The crate's own `macro_rules!`, expanded where a call matches one of their arms, so that a
//! path the macro puts together from what its caller passes (`call!(std, fs)` into
//! `$a::$b::read_to_string`) is read as the path it becomes (docs/lint.md, "Rules").
//!
//! A small matcher, not the compiler's: an arm is matched when its pattern is made of plain
//! tokens, groups and fragments (`$name:ident`, `$name:path`, `$name:expr`, …); an arm with a
//! repetition (`$(…)*`) is not matched, and a call no arm matches is read as written, as before.
//! The macro's body is read as tokens in any case.

use std::collections::HashMap;

use proc_macro2::{Delimiter, Group, Ident, TokenStream, TokenTree};
use syn::visit::Visit;

/// How deep one expansion may lead through others (a macro that calls itself stops there): half
/// the compiler's own default `recursion_limit`, deep enough for a macro that takes its input a
/// token at a time.
pub(crate) const MAX_DEPTH: usize = 64;

/// The `macro_rules!` of a crate, by name: each arm's pattern and body.
#[derive(Default)]
pub(crate) struct Macros {
    rules: HashMap<String, Vec<(Vec<TokenTree>, TokenStream)>>,
}

impl Macros {
    /// The `macro_rules!` defined in `files` (a later definition of a name adds its arms after
    /// the earlier one's: either may be what a call means).
    pub(crate) fn collect<'a>(files: impl IntoIterator<Item = &'a syn::File>) -> Self {
        struct V<'m>(&'m mut Macros);
        impl<'ast> Visit<'ast> for V<'_> {
            fn visit_item_macro(&mut self, m: &'ast syn::ItemMacro) {
                if m.mac.path.is_ident("macro_rules")
                    && let Some(name) = &m.ident
                {
                    let arms = arms(m.mac.tokens.clone());
                    self.0
                        .rules
                        .entry(name.to_string())
                        .or_default()
                        .extend(arms);
                }
                syn::visit::visit_item_macro(self, m);
            }
        }
        let mut macros = Macros::default();
        for file in files {
            V(&mut macros).visit_file(file);
        }
        macros
    }

    /// The expansions of a call of `name` with `input` by every arm that matches, each in a
    /// block of its own, with their size in tokens; `None` when no arm matches, `Err(())` when
    /// they would hold more than `limit` tokens (they are not built past that). The compiler
    /// takes the first arm that matches; this matcher is not the compiler's (it may match an arm
    /// the compiler would not), so every arm it matches is read: a refusal too many, never one
    /// too few.
    pub(crate) fn expand(
        &self,
        name: &str,
        input: &TokenStream,
        limit: usize,
    ) -> Option<Result<(TokenStream, usize), ()>> {
        let input: Vec<TokenTree> = input.clone().into_iter().collect();
        let mut out: Vec<TokenTree> = Vec::new();
        let mut size = 0;
        for (pattern, body) in self.rules.get(name)? {
            let mut bound = HashMap::new();
            if !matches(pattern, &input, &mut bound) {
                continue;
            }
            let tokens = substitute(body.clone(), &bound, &mut size, limit);
            if size > limit {
                return Some(Err(()));
            }
            out.push(TokenTree::Group(Group::new(Delimiter::Brace, tokens)));
        }
        (!out.is_empty()).then(|| Ok((out.into_iter().collect(), size)))
    }
}

/// The arms of a `macro_rules!` body: `(pattern) => { body }`, separated by `;`.
fn arms(tokens: TokenStream) -> Vec<(Vec<TokenTree>, TokenStream)> {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let mut out = Vec::new();
    let mut at = 0;
    while at + 3 < tokens.len() + 1 {
        if let (
            Some(TokenTree::Group(pattern)),
            Some(TokenTree::Punct(eq)),
            Some(TokenTree::Punct(gt)),
            Some(TokenTree::Group(body)),
        ) = (
            tokens.get(at),
            tokens.get(at + 1),
            tokens.get(at + 2),
            tokens.get(at + 3),
        ) && eq.as_char() == '='
            && gt.as_char() == '>'
        {
            out.push((pattern.stream().into_iter().collect(), body.stream()));
            at += 4;
        } else {
            at += 1;
        }
    }
    out
}

/// The fragments that take one token tree; the others take tokens up to what follows them.
const ONE_TREE: &[&str] = &["ident", "tt", "literal", "lifetime"];

/// What a fragment was bound to: its tokens, or, inside a repetition, its tokens in each round.
/// One level of repetition is read; a repetition inside another is not matched.
#[derive(Clone, Debug)]
enum Bound {
    One(Vec<TokenTree>),
    Many(Vec<Vec<TokenTree>>),
}

/// Whether `input` matches `pattern` whole, binding each fragment's tokens.
fn matches(pattern: &[TokenTree], input: &[TokenTree], bound: &mut HashMap<String, Bound>) -> bool {
    match_from(pattern, input, 0, None, bound, false) == Some(input.len())
}

/// A repetition's separator (none, or one token: `,`, `;`, `::`, `=>`, which are several
/// joined punctuation marks here), its operator, `*`, `+` or `?`, after the `$(…)` at `at`,
/// and where the pattern goes on after them.
fn repetition(tokens: &[TokenTree], at: usize) -> Option<(Vec<TokenTree>, char, usize)> {
    let op = |t: Option<&TokenTree>| match t {
        Some(TokenTree::Punct(p)) if matches!(p.as_char(), '*' | '+' | '?') => Some(p.as_char()),
        _ => None,
    };
    if let Some(op) = op(tokens.get(at + 2)) {
        return Some((Vec::new(), op, at + 3));
    }
    // A separator of one token (`,+` is `,` then `+`, joined or not), else of two or three
    // joined punctuation marks (`::*`, `=>*`, `..=*`).
    (1..=3).find_map(|len| {
        let separator = tokens.get(at + 2..at + 2 + len)?;
        let joined = separator[..len - 1].iter().all(
            |t| matches!(t, TokenTree::Punct(p) if p.spacing() == proc_macro2::Spacing::Joint),
        );
        let op = op(tokens.get(at + 2 + len))?;
        (len == 1 || joined).then(|| (separator.to_vec(), op, at + 3 + len))
    })
}

/// Whether `input` holds `separator` at `at`.
fn separated(input: &[TokenTree], at: usize, separator: &[TokenTree]) -> bool {
    separator
        .iter()
        .enumerate()
        .all(|(k, s)| input.get(at + k).is_some_and(|t| same(t, s)))
}

/// Matches `pattern` against `input` from `start`, as far as the pattern goes: where the input
/// it matched ends, or `None`. `follow` is the token that comes after this pattern where it is
/// nested (a repetition's separator, or what follows the repetition), for a fragment at its end.
fn match_from(
    pattern: &[TokenTree],
    input: &[TokenTree],
    start: usize,
    follow: Option<&TokenTree>,
    bound: &mut HashMap<String, Bound>,
    repeated: bool,
) -> Option<usize> {
    let (mut p, mut i) = (0, start);
    while p < pattern.len() {
        match (&pattern[p], pattern.get(p + 1)) {
            (TokenTree::Punct(dollar), Some(TokenTree::Ident(name))) if dollar.as_char() == '$' => {
                let fragment = match (pattern.get(p + 2), pattern.get(p + 3)) {
                    (Some(TokenTree::Punct(colon)), Some(TokenTree::Ident(f)))
                        if colon.as_char() == ':' =>
                    {
                        f.to_string()
                    }
                    _ => return None,
                };
                p += 4;
                let end = if ONE_TREE.contains(&fragment.as_str()) {
                    // An `ident` is one identifier, as the compiler has it.
                    if fragment == "ident" && !matches!(input.get(i), Some(TokenTree::Ident(_))) {
                        return None;
                    }
                    i + 1
                } else {
                    // Up to the next token the pattern names (another fragment cannot follow
                    // these directly), or the end of the input.
                    let next = match pattern.get(p) {
                        Some(TokenTree::Punct(d)) if d.as_char() == '$' => return None,
                        Some(next) => Some(next),
                        None => follow,
                    };
                    match next {
                        Some(next) => i + input.get(i..)?.iter().position(|t| same(t, next))?,
                        None => input.len(),
                    }
                };
                if end <= i || end > input.len() {
                    return None;
                }
                bound.insert(name.to_string(), Bound::One(input[i..end].to_vec()));
                i = end;
            }
            (TokenTree::Punct(dollar), Some(TokenTree::Group(group)))
                if dollar.as_char() == '$' =>
            {
                let (separator, op, next) = repetition(pattern, p)?;
                if repeated {
                    return None;
                }
                let inner: Vec<TokenTree> = group.stream().into_iter().collect();
                let follow_inner = separator.first().or(pattern.get(next)).or(follow);
                let mut rounds: Vec<HashMap<String, Bound>> = Vec::new();
                loop {
                    if op == '?' && rounds.len() == 1 {
                        break;
                    }
                    let mut at = i;
                    if !rounds.is_empty() && !separator.is_empty() {
                        if !separated(input, at, &separator) {
                            break;
                        }
                        at += separator.len();
                    }
                    let mut round = HashMap::new();
                    match match_from(&inner, input, at, follow_inner, &mut round, true) {
                        Some(end) if end > at => {
                            rounds.push(round);
                            i = end;
                        }
                        _ => break,
                    }
                }
                if op == '+' && rounds.is_empty() {
                    return None;
                }
                let names: Vec<String> = rounds.iter().flat_map(|r| r.keys().cloned()).collect();
                for name in names {
                    let each = rounds
                        .iter()
                        .map(|r| match r.get(&name) {
                            Some(Bound::One(tokens)) => tokens.clone(),
                            _ => Vec::new(),
                        })
                        .collect();
                    bound.insert(name, Bound::Many(each));
                }
                p = next;
            }
            (TokenTree::Group(g), _) => {
                let Some(TokenTree::Group(h)) = input.get(i) else {
                    return None;
                };
                let (gs, hs): (Vec<TokenTree>, Vec<TokenTree>) = (
                    g.stream().into_iter().collect(),
                    h.stream().into_iter().collect(),
                );
                if g.delimiter() != h.delimiter()
                    || match_from(&gs, &hs, 0, None, bound, repeated) != Some(hs.len())
                {
                    return None;
                }
                p += 1;
                i += 1;
            }
            (plain, _) => {
                if !input.get(i).is_some_and(|t| same(t, plain)) {
                    return None;
                }
                p += 1;
                i += 1;
            }
        }
    }
    Some(i)
}

/// Whether two plain tokens are the same token.
fn same(a: &TokenTree, b: &TokenTree) -> bool {
    match (a, b) {
        (TokenTree::Ident(a), TokenTree::Ident(b)) => a == b,
        (TokenTree::Punct(a), TokenTree::Punct(b)) => a.as_char() == b.as_char(),
        (TokenTree::Literal(a), TokenTree::Literal(b)) => a.to_string() == b.to_string(),
        (TokenTree::Group(a), TokenTree::Group(b)) => a.delimiter() == b.delimiter(),
        _ => false,
    }
}

/// The names `$name` stands for in `tokens`, at every depth.
fn named_in(tokens: &TokenStream, out: &mut Vec<String>) {
    let tokens: Vec<TokenTree> = tokens.clone().into_iter().collect();
    for (at, token) in tokens.iter().enumerate() {
        match (token, tokens.get(at + 1)) {
            (TokenTree::Punct(d), Some(TokenTree::Ident(name))) if d.as_char() == '$' => {
                out.push(name.to_string());
            }
            (TokenTree::Group(g), _) => named_in(&g.stream(), out),
            _ => {}
        }
    }
}

/// `body` with each `$name` replaced by what it was bound to, each `$(…)` repetition by its
/// rounds, `$crate` by `crate`, counting the tokens made (at every depth) in `size` and
/// stopping once it is past `limit`.
fn substitute(
    body: TokenStream,
    bound: &HashMap<String, Bound>,
    size: &mut usize,
    limit: usize,
) -> TokenStream {
    let tokens: Vec<TokenTree> = body.into_iter().collect();
    let mut out: Vec<TokenTree> = Vec::with_capacity(tokens.len());
    let mut at = 0;
    while at < tokens.len() && *size <= limit {
        *size += 1;
        match (&tokens[at], tokens.get(at + 1)) {
            (TokenTree::Punct(dollar), Some(TokenTree::Ident(name))) if dollar.as_char() == '$' => {
                match bound.get(&name.to_string()) {
                    Some(Bound::One(tokens)) => {
                        *size += tokens.iter().map(tree_size).sum::<usize>();
                        if *size > limit {
                            break;
                        }
                        out.extend(tokens.iter().cloned());
                    }
                    // A repeated fragment outside its repetition: the compiler refuses it.
                    Some(Bound::Many(_)) => {}
                    None if name == "crate" => {
                        out.push(TokenTree::Ident(Ident::new("crate", name.span())));
                    }
                    None => out.extend([tokens[at].clone(), tokens[at + 1].clone()]),
                }
                at += 2;
            }
            (TokenTree::Punct(dollar), Some(TokenTree::Group(group)))
                if dollar.as_char() == '$' && repetition(&tokens, at).is_some() =>
            {
                let Some((separator, _, next)) = repetition(&tokens, at) else {
                    break;
                };
                let mut names = Vec::new();
                named_in(&group.stream(), &mut names);
                let rounds = names
                    .iter()
                    .filter_map(|n| match bound.get(n) {
                        Some(Bound::Many(each)) => Some(each.len()),
                        _ => None,
                    })
                    .max()
                    .unwrap_or(0);
                for round in 0..rounds {
                    if round > 0 {
                        out.extend(separator.iter().cloned());
                    }
                    let mut this = bound.clone();
                    for name in &names {
                        if let Some(Bound::Many(each)) = bound.get(name) {
                            this.insert(
                                name.clone(),
                                Bound::One(each.get(round).cloned().unwrap_or_default()),
                            );
                        }
                    }
                    out.extend(substitute(group.stream(), &this, size, limit));
                    if *size > limit {
                        break;
                    }
                }
                at = next;
            }
            (TokenTree::Group(g), _) => {
                let mut group =
                    Group::new(g.delimiter(), substitute(g.stream(), bound, size, limit));
                group.set_span(g.span());
                out.push(TokenTree::Group(group));
                at += 1;
            }
            (token, _) => {
                out.push(token.clone());
                at += 1;
            }
        }
    }
    out.into_iter().collect()
}

/// The tokens of one token tree, at every depth.
pub(crate) fn tree_size(tree: &TokenTree) -> usize {
    match tree {
        TokenTree::Group(g) => 1 + g.stream().into_iter().map(|t| tree_size(&t)).sum::<usize>(),
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expanded(defs: &str, name: &str, input: &str) -> Option<String> {
        let file = syn::parse_file(defs).unwrap();
        let macros = Macros::collect([&file]);
        macros
            .expand(name, &input.parse().unwrap(), usize::MAX)
            .map(|t| t.unwrap().0.to_string().replace(' ', ""))
    }

    #[test]
    fn a_call_is_expanded_by_every_arm_it_matches() {
        let defs = "macro_rules! m {\n\
                    (one $a:ident) => { first $a };\n\
                    ($a:ident, $b:ident) => { $a :: $b :: read() };\n\
                    ($p:path; $e:expr) => { $p($e) };\n\
                    ($($x:tt)*) => { many };\n\
                    }";
        assert_eq!(
            expanded(defs, "m", "one x").as_deref(),
            Some("{firstx}{many}")
        );
        assert_eq!(
            expanded(defs, "m", "std, fs").as_deref(),
            Some("{std::fs::read()}{many}")
        );
        assert_eq!(
            expanded(defs, "m", "std::env::var; \"X\"").as_deref(),
            Some("{std::env::var(\"X\")}{many}")
        );
        assert_eq!(expanded(defs, "m", "a b c d").as_deref(), Some("{many}"));
        assert_eq!(expanded(defs, "other", "x").as_deref(), None);
        // Two arms match: both are read. An `ident` is an identifier, not any token.
        let both = "macro_rules! b { ($a:expr) => { e $a }; ($a:ident) => { i $a }; }";
        assert_eq!(expanded(both, "b", "x").as_deref(), Some("{ex}{ix}"));
        assert_eq!(expanded(both, "b", "1").as_deref(), Some("{e1}"));
        // A repetition, one level deep, with its separator, in the pattern and in the body.
        let joined = "macro_rules! j { ($($p:ident),+ ; $f:ident) => { $($p)::* :: $f () }; \
                      ($($($x:tt)*),*) => { nested }; }";
        assert_eq!(
            expanded(joined, "j", "std, fs; read").as_deref(),
            Some("{std::fs::read()}")
        );
        assert_eq!(
            expanded(joined, "j", "; read").as_deref(),
            None,
            "`+` needs one"
        );
    }
}
