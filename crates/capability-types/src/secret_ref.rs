//! Secret references: the names a tool declares it will read, exact or as a `/*` prefix glob.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A declared secret: an exact name (`GITHUB_TOKEN`, `providers/exa/key`) or a prefix glob
/// ending in `/*` (`providers/exa/*`).
///
/// Names are `/`-separated segments of ASCII letters, digits, `_`, `-` and `.`. A segment may
/// not be empty, `.` or `..`, and `*` may appear only as the whole last segment, so a ref can
/// never be used to walk out of its prefix. Globs are compared segment by segment:
/// `providers/exa/*` matches `providers/exa/key` and `providers/exa/v2/key`, never
/// `providers/exa` itself nor `providers/exa-evil/key`.
///
/// ```
/// use capability_types::SecretRef;
/// let glob = SecretRef::parse("providers/exa/*").unwrap();
/// assert!(glob.matches("providers/exa/key"));
/// assert!(!glob.matches("providers/exa-evil/key"));
/// assert!(!glob.matches("providers/exa/../openai/key"));
/// assert!(SecretRef::parse("providers/../x").is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SecretRef {
    text: String,
    glob: bool,
}

impl SecretRef {
    /// Parses and checks a ref; the error names what is wrong with it.
    pub fn parse(text: &str) -> Result<Self, String> {
        if text.is_empty() {
            return Err("secret ref is empty".to_owned());
        }
        let (body, glob) = match text.strip_suffix("/*") {
            Some(body) => (body, true),
            None => (text, false),
        };
        check_name(body).map_err(|why| format!("secret ref {text:?} {why}"))?;
        Ok(Self {
            text: text.to_owned(),
            glob,
        })
    }

    /// The ref as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether this is a `/*` prefix glob.
    pub fn is_glob(&self) -> bool {
        self.glob
    }

    /// Whether the secret `name` is covered by this ref. A `name` that is not itself a valid
    /// exact ref (empty, traversal segments, wildcards) is never covered.
    pub fn matches(&self, name: &str) -> bool {
        if check_name(name).is_err() {
            return false;
        }
        if !self.glob {
            return self.text == name;
        }
        let prefix = &self.text[..self.text.len() - 1]; // keeps the trailing '/'
        name.len() > prefix.len() && name.starts_with(prefix)
    }

    /// Whether every name this ref matches is also matched by `other` (`a/b` ⊂ `a/*` ⊂ `*`-free
    /// shorter globs). Used to compare declarations without string comparison.
    pub fn is_covered_by(&self, other: &SecretRef) -> bool {
        if !other.glob {
            return !self.glob && self.text == other.text;
        }
        let prefix = &other.text[..other.text.len() - 1];
        let own = if self.glob {
            &self.text[..self.text.len() - 1]
        } else {
            &self.text[..]
        };
        own.len() > prefix.len() && own.starts_with(prefix)
            || (self.glob && self.text == other.text)
    }
}

fn check_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("has an empty name");
    }
    for segment in name.split('/') {
        match segment {
            "" => return Err("has an empty segment"),
            "." | ".." => return Err("has a traversal segment"),
            _ => {}
        }
        if !segment
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
        {
            return Err(
                "may contain only ASCII letters, digits, '_', '-', '.' and '/' (with '/*' only at the end)",
            );
        }
    }
    Ok(())
}

impl TryFrom<String> for SecretRef {
    type Error = String;
    fn try_from(text: String) -> Result<Self, String> {
        Self::parse(&text)
    }
}

impl From<SecretRef> for String {
    fn from(r: SecretRef) -> String {
        r.text
    }
}

impl fmt::Display for SecretRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_refuses_bad_refs() {
        for bad in [
            "", "/", "a//b", "a/./b", "../x", "a/..", "a/*/b", "*", "a*", "a b", "a\0b", "/*",
            "a/b/", "é",
        ] {
            assert!(SecretRef::parse(bad).is_err(), "{bad:?} must be refused");
        }
        assert!(SecretRef::parse("GITHUB_TOKEN").is_ok());
        assert!(SecretRef::parse("providers/exa/*").unwrap().is_glob());
    }

    #[test]
    fn exact_and_glob_matching() {
        let exact = SecretRef::parse("GITHUB_TOKEN").unwrap();
        assert!(exact.matches("GITHUB_TOKEN"));
        assert!(!exact.matches("github_token"));
        assert!(!exact.matches("GITHUB_TOKEN2"));
        let glob = SecretRef::parse("providers/exa/*").unwrap();
        assert!(glob.matches("providers/exa/key"));
        assert!(glob.matches("providers/exa/v2/key"));
        assert!(!glob.matches("providers/exa"));
        assert!(!glob.matches("providers/exa/"));
        assert!(!glob.matches("providers/exa/../../etc"));
        assert!(!glob.matches("providers/exa/./key"));
        assert!(!glob.matches("providers/exa-evil/key"));
        assert!(!glob.matches("providers/exa/*"));
    }

    #[test]
    fn coverage_between_refs() {
        let p = |s| SecretRef::parse(s).unwrap();
        assert!(p("a/b/c").is_covered_by(&p("a/*")));
        assert!(p("a/b/*").is_covered_by(&p("a/*")));
        assert!(p("a/*").is_covered_by(&p("a/*")));
        assert!(!p("a/*").is_covered_by(&p("a/b/*")));
        assert!(!p("a").is_covered_by(&p("a/*")));
        assert!(!p("ab/c").is_covered_by(&p("a/*")));
        assert!(p("x").is_covered_by(&p("x")));
        assert!(!p("x/*").is_covered_by(&p("x")));
    }

    #[test]
    fn serde_round_trip_and_refusal() {
        let r: SecretRef = serde_json::from_str("\"providers/exa/*\"").unwrap();
        assert_eq!(serde_json::to_string(&r).unwrap(), "\"providers/exa/*\"");
        let err = serde_json::from_str::<SecretRef>("\"a/../b\"").unwrap_err();
        assert!(err.to_string().contains("traversal"), "{err}");
    }
}
