//! Where the paths of a policy really lead: reach roots, deny rules and the deny floor are
//! resolved through symbolic links when the policy loads, and request paths that name a root by
//! its spelling are matched where the root really is (docs/policy.md, "Symbolic links in a
//! policy").

use std::path::{Path, PathBuf};

use capability_policy::normalize_lexically;

use crate::matching::path::{RUNS_LATER_NAMES, RunsLater, is_within, runs_later};

/// `path` (absolute, normalised) with its longest existing prefix resolved through every
/// symbolic link; the components after it are kept as written. A path whose prefix cannot be
/// resolved at all stays as it is.
#[allow(
    clippy::disallowed_methods,
    reason = "policy loading resolves the operator's own paths; no tool reaches this"
)]
pub(crate) fn resolve_real(path: &Path) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    loop {
        // toolcap: allow(std::fs::canonicalize, reason = "policy loading resolves the operator's own roots, deny rules and floor through symbolic links")
        if let Ok(real) = std::fs::canonicalize(&existing) {
            let mut out = real;
            for component in rest.iter().rev() {
                out.push(component);
            }
            return normalize_lexically(&out);
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                existing = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// Roots named through a symbolic link: each spelling with the place it resolved to, longest
/// spelling first.
#[derive(Debug, Clone, Default)]
pub(crate) struct Aliases(Vec<(PathBuf, PathBuf)>);

impl Aliases {
    pub(crate) fn add(&mut self, spelled: &Path, real: &Path) {
        if spelled != real && !self.0.iter().any(|(s, _)| s == spelled) {
            self.0.push((spelled.to_path_buf(), real.to_path_buf()));
            self.0
                .sort_by_key(|(s, _)| std::cmp::Reverse(s.as_os_str().len()));
        }
    }

    /// `path` with the longest spelled root it lies under replaced by the real one.
    pub(crate) fn rewrite(&self, path: PathBuf) -> PathBuf {
        for (spelled, real) in &self.0 {
            if is_within(&path, spelled) {
                let rest = path.strip_prefix(spelled).unwrap_or(Path::new(""));
                return if rest.as_os_str().is_empty() {
                    real.clone()
                } else {
                    real.join(rest)
                };
            }
        }
        path
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// A place whose contents run later outside any sandbox, reached by another name: where a
/// home's or a write root's `.bashrc`, `.claude`, `.config/git/config`, ... really leads when it
/// is a symbolic link, or lies beneath one (docs/policy.md, "Reached by another name").
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LaterAlias {
    /// Where the place really is (normalised, absolute).
    pub(crate) real: PathBuf,
    /// The place by the name a shell, git or a client reads it.
    pub(crate) named: PathBuf,
    /// What runs it.
    pub(crate) runs: RunsLater,
}

/// The most links followed from one place, as the kernel's own limit.
const MAX_LINKS: usize = 40;

/// The places of [`RUNS_LATER_NAMES`] in each of `bases` (a home directory, the write roots)
/// that really lie somewhere else: each where it leads, a link that leads nowhere yet included
/// (what it names is made where it points). Read when a policy loads, as its roots are.
#[allow(
    clippy::disallowed_methods,
    reason = "policy loading reads where the operator's own places lead; no tool reaches this"
)]
pub(crate) fn later_aliases<'a>(bases: impl Iterator<Item = &'a Path>) -> Vec<LaterAlias> {
    let mut out: Vec<LaterAlias> = Vec::new();
    for base in bases {
        for name in RUNS_LATER_NAMES {
            // Most are not there at all, a link included: one question each, not a resolution.
            let first = name.split('/').next().unwrap_or(name);
            // toolcap: allow(std::fs::symlink_metadata, reason = "policy loading asks whether the operator's own places exist")
            if std::fs::symlink_metadata(base.join(first)).is_err() {
                continue;
            }
            let named = normalize_lexically(&base.join(name));
            let Some((area, runs)) = runs_later(&named) else {
                continue;
            };
            let mut real = resolve_real(&area);
            // A dangling link: `canonicalize` cannot follow it, so it is followed here.
            for _ in 0..MAX_LINKS {
                // toolcap: allow(std::fs::read_link, reason = "policy loading reads where the operator's own places lead")
                let Ok(target) = std::fs::read_link(&real) else {
                    break;
                };
                let parent = real.parent().unwrap_or(Path::new("/")).to_path_buf();
                real = resolve_real(&normalize_lexically(&parent.join(target)));
            }
            if real != area && !out.iter().any(|a| a.real == real) {
                out.push(LaterAlias {
                    real,
                    named: area,
                    runs,
                });
            }
        }
    }
    out
}
