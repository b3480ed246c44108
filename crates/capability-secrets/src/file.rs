//! A secrets file: TOML or dotenv, readable by its owner alone.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use capability_types::{SecretRef, SecretString};

use crate::backend::{BackendError, SecretsBackend};
use crate::sys::{OpenError, read_private_file};

/// The syntax of a secrets file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SecretsFileFormat {
    /// A TOML table of strings; nested tables join names with `/`
    /// (`[providers.exa] key = "..."` is `providers/exa/key`). A name spelled twice (that and
    /// `"providers/exa/key" = "..."`) is refused, as a dotenv name defined twice is.
    Toml,
    /// `NAME=value` lines; `#` comments, blank lines and a leading `export ` are allowed; a value
    /// may be wrapped in single quotes (taken literally) or double quotes (`\n`, `\"`, `\\`
    /// escapes). A comment may follow a value, as the dotenv readers of Node, Python and Rust
    /// take one: after an unquoted value, from a `#` that follows a space or a tab (`sk#4` is
    /// one value); after a quoted value, nothing else may.
    Dotenv,
}

impl SecretsFileFormat {
    /// `.toml` is TOML; anything else (`.env`, `secrets.env`, no extension) is dotenv.
    pub fn from_path(path: &Path) -> Self {
        match path.extension().and_then(|e| e.to_str()) {
            Some("toml") => SecretsFileFormat::Toml,
            _ => SecretsFileFormat::Dotenv,
        }
    }
}

/// Secrets read once from a file that only its owner can access.
///
/// The file is opened without following a final symlink; its type, permissions and owner are
/// checked on the opened descriptor. It is refused if it is not a regular file, if group or
/// others have any permission on it, if another user than this one and root owns it, or if it
/// lies in a directory (at any depth) anyone may write without the sticky bit or another user
/// owns. No error message quotes the file's contents.
pub struct FileSecrets {
    path: PathBuf,
    values: HashMap<String, SecretString>,
}

impl FileSecrets {
    /// Reads `path` in the format its extension names.
    ///
    /// # Ambient Authority
    ///
    /// Opens `path` from the process's file system view.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, BackendError> {
        let path = path.as_ref();
        Self::open_as(path, SecretsFileFormat::from_path(path))
    }

    /// Reads `path` as `format`.
    ///
    /// # Ambient Authority
    ///
    /// Opens `path` from the process's file system view.
    pub fn open_as(
        path: impl AsRef<Path>,
        format: SecretsFileFormat,
    ) -> Result<Self, BackendError> {
        let path = path.as_ref();
        let shown = path.display();
        let file = read_private_file(path).map_err(|e| match e {
            OpenError::Io(e) => BackendError::new(format!("cannot open secrets file {shown}: {e}")),
            OpenError::NotRegular => BackendError::new(format!("secrets file {shown} is not a regular file")),
            OpenError::Exposed(mode) => BackendError::new(format!(
                "secrets file {shown} is accessible by group or others (mode {mode:04o}); run `chmod 600 {shown}`"
            )),
            OpenError::Theirs(uid) => BackendError::new(format!(
                "secrets file {shown} is owned by another user (uid {uid}), who chooses the values tools are given; use a file of your own"
            )),
            OpenError::Swappable(swap) => BackendError::new(format!(
                "secrets file {shown} {swap}, and with it the values tools are given; keep it in a directory only you can change"
            )),
            OpenError::NotUtf8 => BackendError::new(format!("secrets file {shown} is not valid UTF-8")),
        })?;
        let values = match format {
            SecretsFileFormat::Toml => parse_toml(&file.contents),
            SecretsFileFormat::Dotenv => parse_dotenv(&file.contents),
        }
        .map_err(|why| BackendError::new(format!("secrets file {shown}: {why}")))?;
        Ok(Self {
            path: path.to_path_buf(),
            values,
        })
    }

    /// The names the file defines, sorted.
    pub fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.values.keys().map(String::as_str).collect();
        names.sort_unstable();
        names
    }
}

impl fmt::Debug for FileSecrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileSecrets")
            .field("path", &self.path)
            .field("names", &self.names())
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl SecretsBackend for FileSecrets {
    async fn lookup(&self, name: &str) -> Result<Option<SecretString>, BackendError> {
        Ok(self.values.get(name).cloned())
    }
}

/// Whether `name` is a secret's name; a TOML key that is not is quoted in the error (it is a
/// key by the file's syntax), a `.env` line's text before its `=` is not: a value pasted on a
/// line of its own, base64 with its `=` padding, would be shown.
fn check_name(name: &str, line: Option<usize>) -> Result<(), String> {
    match SecretRef::parse(name) {
        Ok(r) if !r.is_glob() => Ok(()),
        _ => Err(match line {
            Some(l) => format!(
                "line {l}: the text before `=` is not a valid secret name (letters, digits, `_`, \
                 `-`, `.` and `/` between names)"
            ),
            None => format!("{name:?} is not a valid secret name"),
        }),
    }
}

/// Parses a TOML secrets table. Errors name lines and keys, never values: a TOML parser's own
/// message quotes the offending source line, which may be a secret, so it is not passed on.
fn parse_toml(text: &str) -> Result<HashMap<String, SecretString>, String> {
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        let line = e
            .span()
            // Bytes, not a str slice: an offset inside a character must not panic.
            .map(|s| {
                text.as_bytes()[..s.start.min(text.len())]
                    .iter()
                    .filter(|b| **b == b'\n')
                    .count()
                    + 1
            });
        match line {
            Some(l) => format!("not valid TOML (line {l})"),
            None => "not valid TOML".to_owned(),
        }
    })?;
    let mut out = HashMap::new();
    flatten(&table, "", &mut out)?;
    Ok(out)
}

fn flatten(
    table: &toml::Table,
    prefix: &str,
    out: &mut HashMap<String, SecretString>,
) -> Result<(), String> {
    for (key, value) in table {
        let name = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}/{key}")
        };
        match value {
            toml::Value::String(s) => {
                check_name(&name, None)?;
                // `"a/b" = …` and `[a] b = …` are two TOML keys and one secret: which value a
                // tool is given must not be the table's order.
                if out.contains_key(&name) {
                    return Err(format!("{name:?} is defined twice"));
                }
                out.insert(name, SecretString::from(s.clone()));
            }
            toml::Value::Table(t) => flatten(t, &name, out)?,
            other => return Err(format!("{name:?} is a {}, not a string", other.type_str())),
        }
    }
    Ok(())
}

fn parse_dotenv(text: &str) -> Result<HashMap<String, SecretString>, String> {
    let mut out = HashMap::new();
    for (index, raw) in text.lines().enumerate() {
        let line_no = index + 1;
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line
            .strip_prefix("export ")
            .map(str::trim_start)
            .unwrap_or(line);
        let (name, value) = line
            .split_once('=')
            .ok_or_else(|| format!("line {line_no}: expected NAME=value"))?;
        let name = name.trim();
        check_name(name, Some(line_no))?;
        let value = unquote(value.trim()).map_err(|why| format!("line {line_no}: {why}"))?;
        if out
            .insert(name.to_owned(), SecretString::from(value))
            .is_some()
        {
            return Err(format!("line {line_no}: {name} is defined twice"));
        }
    }
    Ok(out)
}

/// A value as the dotenv readers of Node, Python and Rust read it: unquoted, it ends at a `#`
/// that follows a space or a tab (a comment); quoted, at its closing quote, after which only a
/// comment may follow.
fn unquote(value: &str) -> Result<String, &'static str> {
    if let Some(inner) = value.strip_prefix('\'') {
        let (inner, rest) = inner.split_once('\'').ok_or("unterminated single quote")?;
        return only_a_comment(rest).map(|()| inner.to_owned());
    }
    let Some(inner) = value.strip_prefix('"') else {
        let end = value
            .char_indices()
            .find(|&(i, c)| c == '#' && value[..i].ends_with([' ', '\t']))
            .map_or(value.len(), |(i, _)| i);
        return Ok(value[..end].trim_end().to_owned());
    };
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return only_a_comment(&inner[i + 1..]).map(|()| out),
            '\\' => match chars.next() {
                Some((_, 'n')) => out.push('\n'),
                Some((_, '"')) => out.push('"'),
                Some((_, '\\')) => out.push('\\'),
                _ => return Err("unknown escape in a double-quoted value"),
            },
            c => out.push(c),
        }
    }
    Err("unterminated double quote")
}

/// What follows a quoted value: nothing, or a comment.
fn only_a_comment(rest: &str) -> Result<(), &'static str> {
    let rest = rest.trim_start();
    if rest.is_empty() || rest.starts_with('#') {
        Ok(())
    } else {
        Err("only a comment may follow a quoted value")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use capability_types::ExposeSecret;

    fn get<'a>(m: &'a HashMap<String, SecretString>, k: &str) -> &'a str {
        m[k].expose_secret()
    }

    #[test]
    fn dotenv_syntax() {
        let m = parse_dotenv(
            "# comment\n\nGITHUB_TOKEN=ghp_1\nexport OPENAI=sk 2\nQ=\"a\\\"b\\nc\"\nS='lit\\n'\nproviders/exa/key = spaced \n",
        )
        .unwrap();
        assert_eq!(get(&m, "GITHUB_TOKEN"), "ghp_1");
        assert_eq!(get(&m, "OPENAI"), "sk 2");
        assert_eq!(get(&m, "Q"), "a\"b\nc");
        assert_eq!(get(&m, "S"), "lit\\n");
        assert_eq!(get(&m, "providers/exa/key"), "spaced");
    }

    #[test]
    fn dotenv_errors_name_lines_not_values() {
        for (text, expected) in [
            ("A=1\nsk-live-secret-value\n", "line 2: expected NAME=value"),
            ("A=1\nA=2\n", "line 2: A is defined twice"),
            (
                "../x=sk-live-secret-value\n",
                "line 1: the text before `=` is not a valid secret name (letters, digits, `_`, \
                 `-`, `.` and `/` between names)",
            ),
            // A value pasted on a line of its own, its base64 padding taken for the `=`.
            (
                "A=1\nsk-live+secret/value==\n",
                "line 2: the text before `=` is not a valid secret name (letters, digits, `_`, \
                 `-`, `.` and `/` between names)",
            ),
            (
                "A=\"sk-live-secret-value\n",
                "line 1: unterminated double quote",
            ),
            (
                "A=\"sk-live\\q\"\n",
                "line 1: unknown escape in a double-quoted value",
            ),
        ] {
            let err = parse_dotenv(text).unwrap_err();
            assert_eq!(err, expected);
            assert!(!err.contains("sk-live"));
        }
    }

    #[test]
    fn toml_flattens_and_hides_values_in_errors() {
        let m = parse_toml("TOKEN = \"t\"\n[providers.exa]\nkey = \"k\"\n").unwrap();
        assert_eq!(get(&m, "TOKEN"), "t");
        assert_eq!(get(&m, "providers/exa/key"), "k");
        let err = parse_toml("A = \"ok\"\nB = sk-live-secret-value\n").unwrap_err();
        assert_eq!(err, "not valid TOML (line 2)");
        assert_eq!(
            parse_toml("A = 5\n").unwrap_err(),
            "\"A\" is a integer, not a string"
        );
        assert!(
            parse_toml("\"a/..\" = \"x\"\n")
                .unwrap_err()
                .contains("not a valid secret name")
        );
    }
}
