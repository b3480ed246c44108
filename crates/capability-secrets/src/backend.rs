//! The backend trait and the environment and in-memory backends.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fmt;

use async_trait::async_trait;
use capability_types::{SecretRef, SecretString};

/// A backend failed for a reason other than "no such secret". Never carries a secret value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BackendError(String);

impl BackendError {
    /// An error with a message (which must not contain a secret value).
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

/// Where secret values come from. The resolver has already checked that `name` is a declared,
/// well-formed exact name before a backend is asked.
#[async_trait]
pub trait SecretsBackend: Send + Sync + fmt::Debug {
    /// The value of `name`, or `None` when this backend does not have it.
    async fn lookup(&self, name: &str) -> Result<Option<SecretString>, BackendError>;
}

/// Secrets held in memory.
#[derive(Default)]
pub struct MemorySecrets {
    values: HashMap<String, SecretString>,
}

impl MemorySecrets {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a secret. Names are not checked here; the resolver only ever asks for valid names.
    pub fn with(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.values
            .insert(name.into(), SecretString::from(value.into()));
        self
    }
}

impl fmt::Debug for MemorySecrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut names: Vec<&String> = self.values.keys().collect();
        names.sort();
        f.debug_struct("MemorySecrets")
            .field("names", &names)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl SecretsBackend for MemorySecrets {
    async fn lookup(&self, name: &str) -> Result<Option<SecretString>, BackendError> {
        Ok(self.values.get(name).cloned())
    }
}

/// Secrets from environment variables: an explicit ref → variable map, and optionally a prefix
/// rule that maps any ref to `PREFIX` + the ref upper-cased with `/`, `-` and `.` as `_`.
///
/// The variables are read once, when the backend is built, so a tool cannot change what it will
/// see by changing the process environment later.
pub struct EnvSecrets {
    vars: HashMap<OsString, OsString>,
    map: HashMap<String, String>,
    prefix: Option<String>,
}

impl EnvSecrets {
    /// A backend over the current process environment.
    ///
    /// # Ambient Authority
    ///
    /// This reads the whole process environment (once, now). Only refs mapped by
    /// [`map`](Self::map) or the [prefix rule](Self::with_prefix_rule) are ever answered.
    pub fn from_process_env() -> Self {
        Self::from_vars(crate::sys::environment())
    }

    /// A backend over the given variables (for tests and for hosts that pass an environment).
    pub fn from_vars<I, K, V>(vars: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<OsString>,
        V: Into<OsString>,
    {
        Self {
            vars: vars
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
            map: HashMap::new(),
            prefix: None,
        }
    }

    /// Maps the exact ref `name` to the variable `var`.
    pub fn map(mut self, name: impl Into<String>, var: impl Into<String>) -> Self {
        self.map.insert(name.into(), var.into());
        self
    }

    /// Maps refs without an explicit entry to `prefix` + a one-to-one spelling of the ref, for
    /// the two conventions refs are written in:
    ///
    /// - a flat upper-case name (`A-Z`, `0-9`, single inner `_`) is taken as it is:
    ///   `GITHUB_TOKEN` reads `TOOLCAP_SECRET_GITHUB_TOKEN`;
    /// - a path of two or more lower-case segments (`a-z`, `0-9`, single inner `-`) is
    ///   upper-cased, with `-` written `_` and `/` written `__`: `providers/exa/api-key` reads
    ///   `TOOLCAP_SECRET_PROVIDERS__EXA__API_KEY`.
    ///
    /// Any other ref (`Providers/Exa`, `github-token`, `a_b/c`, `a/b.c`) needs an explicit
    /// [`map`](Self::map). The restriction keeps the rule injective, so two different refs never
    /// read the same variable: with plain case folding and `-`/`/` → `_`, a tool granted
    /// `providers/exa/*` could read the value meant for `providers/exa-public/key` as
    /// `providers/exa/public-key`. The prefix should be distinctive (`TOOLCAP_SECRET_`), so
    /// that no ordinary variable is reachable.
    pub fn with_prefix_rule(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = Some(prefix.into());
        self
    }

    /// The variable a ref maps to, if any.
    pub fn variable_for(&self, name: &str) -> Option<String> {
        if let Some(var) = self.map.get(name) {
            return Some(var.clone());
        }
        let prefix = self.prefix.as_ref()?;
        prefix_rule_body(name).map(|body| format!("{prefix}{body}"))
    }
}

/// The variable body the prefix rule gives `name`, or `None` when `name` follows neither
/// convention of [`EnvSecrets::with_prefix_rule`]. Flat names never contain `__` and paths
/// always do, so the two conventions cannot meet.
fn prefix_rule_body(name: &str) -> Option<String> {
    /// Words of `allowed` bytes joined by single `sep`s: no empty word anywhere.
    fn words(s: &str, sep: char, allowed: fn(u8) -> bool) -> bool {
        s.split(sep)
            .all(|word| !word.is_empty() && word.bytes().all(allowed))
    }
    let upper = |b: u8| b.is_ascii_uppercase() || b.is_ascii_digit();
    let lower = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if !name.contains('/') {
        return words(name, '_', upper).then(|| name.to_owned());
    }
    name.split('/')
        .all(|segment| words(segment, '-', lower))
        .then(|| {
            name.to_ascii_uppercase()
                .replace('-', "_")
                .replace('/', "__")
        })
}

impl fmt::Debug for EnvSecrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EnvSecrets")
            .field("map", &self.map)
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl SecretsBackend for EnvSecrets {
    async fn lookup(&self, name: &str) -> Result<Option<SecretString>, BackendError> {
        // Only well-formed exact names ever map to a variable.
        if !SecretRef::parse(name).is_ok_and(|r| !r.is_glob()) {
            return Ok(None);
        }
        let Some(var) = self.variable_for(name) else {
            return Ok(None);
        };
        match self.vars.get(&OsString::from(&var)) {
            None => Ok(None),
            Some(value) => match value.to_str() {
                Some(v) => Ok(Some(SecretString::from(v.to_owned()))),
                None => Err(BackendError::new(format!(
                    "variable {var} (for secret {name}) is not valid UTF-8"
                ))),
            },
        }
    }
}
