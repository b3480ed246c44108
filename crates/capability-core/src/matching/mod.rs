//! The one implementation of toolcap's matching rules (docs/semantics.md): hosts, paths, binaries
//! argv patterns and URL schemes. The validator, the resolver and — through the policy objects built from
//! it — every backend call these functions; none of them has a second copy.

pub mod binary;
pub mod exec_options;
pub mod host;
mod keep;
mod later;
pub mod path;
pub mod scheme;
mod short;

/// The outcome of intersecting a tool's declaration with a personality's rules for one
/// category: what is granted, and what was dropped and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Intersection<T> {
    /// The entries the tool may use.
    pub granted: Vec<T>,
    /// Declared entries that were dropped, with the reason (reported by the validator).
    pub dropped: Vec<Dropped>,
}

impl<T> Intersection<T> {
    /// Nothing granted: every declared entry dropped for `reason` (an empty personality list).
    pub(crate) fn refuse_all(declared: &[String], reason: &str) -> Self {
        Self {
            granted: Vec::new(),
            dropped: declared.iter().map(|d| Dropped::new(d, reason)).collect(),
        }
    }
}

impl<T> Default for Intersection<T> {
    fn default() -> Self {
        Self {
            granted: Vec::new(),
            dropped: Vec::new(),
        }
    }
}

/// A declared entry the intersection dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dropped {
    /// The entry as declared.
    pub entry: String,
    /// Why it was dropped.
    pub reason: String,
}

impl Dropped {
    pub(crate) fn new(entry: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            entry: entry.into(),
            reason: reason.into(),
        }
    }
}

/// Every string of one to `most` pieces of `pieces`, shortest first: the exhaustive inputs of
/// the matching rules' near-miss tests.
#[cfg(test)]
fn every_joining(pieces: &[&str], most: usize) -> Vec<String> {
    let mut all = Vec::new();
    let mut level = vec![String::new()];
    for _ in 0..most {
        level = level
            .iter()
            .flat_map(|s| pieces.iter().map(move |p| format!("{s}{p}")))
            .collect();
        all.extend(level.iter().cloned());
    }
    all
}
