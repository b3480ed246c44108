//! Where the paths of a policy really lead: reach roots, deny rules and the deny floor are
//! resolved through symbolic links when the policy loads, and request paths that name a root by
//! its spelling are matched where the root really is (docs/policy.md, "Symbolic links in a
//! policy").

use std::path::{Path, PathBuf};

use capability_policy::normalize_lexically;

use crate::matching::path::is_within;

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
