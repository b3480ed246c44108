//! Reading git's configuration files for what makes git run code that a path's spelling does
//! not tell: `core.hooksPath`, and the files `[include]` and `[includeIf]` take in, which git
//! reads as its own configuration (docs/policy.md, "Git's hooks and configuration").

#![allow(
    clippy::disallowed_methods,
    reason = "git's configuration is read to find where it runs code from"
)]

use std::path::{Path, PathBuf};

use crate::hooks::{normalized, small_file};

/// The most of a configuration file read: its `core` section comes first in what git writes.
const CONFIG_LIMIT: u64 = 64 * 1024;

/// How deep includes are followed, as git's own limit.
const MAX_INCLUDE_DEPTH: usize = 10;

/// The most included files kept for one reading.
const MAX_INCLUDED: usize = 64;

/// One setting toolcap reads, in the order a file gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Setting {
    /// `core.hooksPath`, as written.
    HooksPath(String),
    /// `include.path` or `includeIf.<condition>.path`, as written.
    Include(String),
}

/// What a chain of configuration files says.
#[derive(Debug, Default, Clone)]
pub(crate) struct ConfigRead {
    /// The last `core.hooksPath` the files themselves set.
    pub(crate) hooks_path: Option<String>,
    /// Every `core.hooksPath` a file they include sets (whether git takes it depends on the
    /// order and on an `includeIf`'s condition, so each is kept).
    pub(crate) included_hooks: Vec<String>,
    /// The files they include, at any depth, where git reads them (whether or not they exist,
    /// and whatever an `includeIf`'s condition: a file made there would be read).
    pub(crate) included: Vec<PathBuf>,
}

impl ConfigRead {
    /// `files`, in the order git reads them, with what they include.
    pub(crate) fn of(files: &[PathBuf]) -> Self {
        let mut read = Self::default();
        for file in files {
            read.file(file, 0);
        }
        read
    }

    fn file(&mut self, file: &Path, depth: usize) {
        let Some(text) = small_file(file, CONFIG_LIMIT) else {
            return;
        };
        for setting in settings(&text) {
            match setting {
                Setting::HooksPath(value) if depth == 0 => self.hooks_path = Some(value),
                Setting::HooksPath(value) => self.included_hooks.push(value),
                Setting::Include(value) => {
                    let Some(included) = include_path(&value, file) else {
                        continue;
                    };
                    if self.included.contains(&included) || self.included.len() >= MAX_INCLUDED {
                        continue;
                    }
                    self.included.push(included.clone());
                    if depth < MAX_INCLUDE_DEPTH {
                        self.file(&included, depth + 1);
                    }
                }
            }
        }
    }
}

/// The user's own configuration, as git reads it: the system's (`GIT_CONFIG_SYSTEM`, or
/// `/etc/gitconfig`), then the global one (`GIT_CONFIG_GLOBAL`, or
/// `$XDG_CONFIG_HOME/git/config`, by default `~/.config/git/config`, then `~/.gitconfig`). Its
/// `core.hooksPath` holds for every repository whose own configuration sets none.
pub(crate) fn user_config() -> ConfigRead {
    let var = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let mut files = vec![var("GIT_CONFIG_SYSTEM").unwrap_or_else(|| "/etc/gitconfig".into())];
    match var("GIT_CONFIG_GLOBAL") {
        Some(global) => files.push(global),
        None => {
            let home = var("HOME");
            if let Some(config) =
                var("XDG_CONFIG_HOME").or_else(|| home.as_ref().map(|h| h.join(".config")))
            {
                files.push(config.join("git/config"));
            }
            files.extend(home.map(|h| h.join(".gitconfig")));
        }
    }
    ConfigRead::of(&files)
}

/// Where a `core.hooksPath` of `value` leads: absolute as it is, `~` and `~/…` from the home
/// directory (`HOME`), relative from `work_tree` (where git runs the hooks). `None` for an empty
/// value, another account's home (`~name`), or a relative one without a working tree.
pub(crate) fn hooks_dir(value: &str, work_tree: Option<&Path>) -> Option<PathBuf> {
    from_home(value).unwrap_or_else(|| {
        if value.is_empty() || value.starts_with('~') {
            None
        } else if value.starts_with('/') {
            Some(normalized(Path::new(value)))
        } else {
            Some(normalized(&work_tree?.join(value)))
        }
    })
}

/// Where an include's `path` leads: as [`hooks_dir`], a relative one from the directory of the
/// file that includes it, as git reads it.
fn include_path(value: &str, including: &Path) -> Option<PathBuf> {
    hooks_dir(value, including.parent())
}

/// `~` and `~/…` read from `HOME`: `Some(None)` when there is no home to read them from, `None`
/// for a value that does not start so.
fn from_home(value: &str) -> Option<Option<PathBuf>> {
    let rest = if value == "~" {
        ""
    } else {
        value.strip_prefix("~/")?
    };
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    Some(home.map(|h| normalized(&h.join(rest))))
}

/// The settings of a configuration's text toolcap reads, in order ([`entries`]: as git reads
/// them); a line that cannot be read gives none.
pub(crate) fn settings(text: &str) -> Vec<Setting> {
    entries(text)
        .into_iter()
        .flatten()
        .filter_map(
            |e| match (e.section.as_str(), e.subsection.is_some(), e.key.as_str()) {
                ("core", false, "hookspath") => Some(Setting::HooksPath(e.value)),
                ("include", false, "path") | ("includeif", true, "path") => {
                    Some(Setting::Include(e.value))
                }
                _ => None,
            },
        )
        .collect()
}

/// One setting of a configuration's text: its section and key in lower case, its subsection as
/// written (lower case in the older `[section.subsection]` form, as git reads it), its value
/// without quotes, escapes taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) section: String,
    pub(crate) subsection: Option<String>,
    pub(crate) key: String,
    pub(crate) value: String,
}

/// The settings of a configuration's text in order, read as git reads them: a UTF-8 byte-order
/// mark skipped, sections in any case, `[section "subsection"]` and `[section.subsection]`, a
/// setting after a section's header on the same line, quotes, escapes and comments. `Err` with
/// the line's number (from 1) for a line git reads and this reading cannot: a header that does
/// not close, a setting before any section, a key that is none, a value continued on the next
/// line or with an escape git refuses. After a header that cannot be read, its settings are not
/// given either.
pub(crate) fn entries(text: &str) -> Vec<Result<Entry, usize>> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut section: Option<(String, Option<String>)> = None;
    let mut out = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let mut rest = line.trim_start();
        if let Some(header) = rest.strip_prefix('[') {
            let Some((parsed, after)) = header_of(header) else {
                section = None;
                out.push(Err(number + 1));
                continue;
            };
            section = Some(parsed);
            rest = after.trim_start();
        }
        if rest.is_empty() || rest.starts_with(['#', ';']) {
            continue;
        }
        out.push(entry(section.as_ref(), rest).ok_or(number + 1));
    }
    out
}

/// The setting `rest` of a line (past its section's header, if on the same line) in `section`.
fn entry(section: Option<&(String, Option<String>)>, rest: &str) -> Option<Entry> {
    let (section, subsection) = section?;
    let key_len = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .unwrap_or(rest.len());
    let (key, after) = rest.split_at(key_len);
    if !key.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return None;
    }
    let after = after.trim_start();
    let value = if let Some(value) = after.strip_prefix('=') {
        value_of(value)?
    } else if after.is_empty() || after.starts_with(['#', ';']) {
        String::new()
    } else {
        return None;
    };
    Some(Entry {
        section: section.clone(),
        subsection: subsection.clone(),
        key: key.to_ascii_lowercase(),
        value,
    })
}

/// A section's header after its `[`: the section (lower case) and subsection, and what follows
/// the `]`; `None` for one git would not read.
fn header_of(header: &str) -> Option<((String, Option<String>), &str)> {
    let name_len = header
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '.'))
        .unwrap_or(header.len());
    let (name, rest) = header.split_at(name_len);
    if name.is_empty() {
        return None;
    }
    if let Some(after) = rest.strip_prefix(']') {
        // `[section.subsection]`: the subsection in lower case, as git reads it.
        let name = name.to_ascii_lowercase();
        return Some(match name.split_once('.') {
            Some((section, sub)) => ((section.to_owned(), Some(sub.to_owned())), after),
            None => ((name, None), after),
        });
    }
    if name.contains('.') {
        return None;
    }
    let quoted = rest.trim_start().strip_prefix('"')?;
    let mut sub = String::new();
    let mut chars = quoted.char_indices();
    while let Some((at, c)) = chars.next() {
        match c {
            '\\' => sub.push(chars.next()?.1),
            '"' => {
                let after = quoted[at + 1..].strip_prefix(']')?;
                return Some(((name.to_ascii_lowercase(), Some(sub)), after));
            }
            c => sub.push(c),
        }
    }
    None
}

/// A value after its `=`, as git reads it: quotes removed, escapes taken, a comment after it
/// dropped; `None` for one continued on the next line or with an escape git refuses.
fn value_of(value: &str) -> Option<String> {
    let mut out = String::new();
    let mut quoted = false;
    let mut chars = value.trim_start().chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => quoted = !quoted,
            '\\' => match chars.next()? {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                'b' => {
                    out.pop();
                }
                c @ ('"' | '\\') => out.push(c),
                _ => return None,
            },
            '#' | ';' if !quoted => break,
            c => out.push(c),
        }
    }
    (!quoted).then(|| out.trim_end().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hooks_path(text: &str) -> Option<String> {
        settings(text).into_iter().rev().find_map(|s| match s {
            Setting::HooksPath(v) => Some(v),
            Setting::Include(_) => None,
        })
    }

    #[test]
    fn the_settings_are_read_as_git_reads_them() {
        assert_eq!(
            hooks_path("[core]\n\thooksPath = .githooks\n"),
            Some(".githooks".into())
        );
        assert_eq!(
            hooks_path("[CORE]\nHOOKSPATH=\"a b\" # x\n"),
            Some("a b".into())
        );
        assert_eq!(
            hooks_path("[core]\nhookspath = x ; c\n[core]\nhooksPath = y\n"),
            Some("y".into())
        );
        assert_eq!(hooks_path("[remote \"core\"]\nhooksPath = x\n"), None);
        assert_eq!(hooks_path("[core \"sub\"]\nhooksPath = x\n"), None);
        assert_eq!(hooks_path("[user]\nhooksPath = x\n"), None);
        assert_eq!(
            settings(
                "[include]\npath = a\n[includeIf \"gitdir:~/w/\"]\n\tPATH = \"b c\"\n[user]\npath = d\n"
            ),
            vec![Setting::Include("a".into()), Setting::Include("b c".into())]
        );
        assert_eq!(settings("[include \"x\"]\npath = a\n"), vec![]);
        // A setting on its section's header line, which git reads as any other.
        assert_eq!(
            hooks_path("[core] hooksPath = .githooks\n"),
            Some(".githooks".into())
        );
        assert_eq!(
            settings("[include]path=a\n[includeIf \"gitdir:/w/\"] path = \"b\\\"c\"\n"),
            vec![
                Setting::Include("a".into()),
                Setting::Include("b\"c".into())
            ]
        );
    }

    /// Includes are followed from the including file's directory, at most ten deep, each file
    /// once (a loop of two files ends), missing ones kept.
    #[test]
    fn includes_are_followed_where_git_follows_them_and_end() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(
            d.join("main"),
            "[include]\npath = a\n[include]\npath = missing\n",
        )
        .unwrap();
        std::fs::write(d.join("a"), "[include]\npath = b\n[core]\nhooksPath = h\n").unwrap();
        std::fs::write(d.join("b"), "[include]\npath = a\n").unwrap();
        let read = ConfigRead::of(&[d.join("main")]);
        assert_eq!(
            read.included,
            vec![d.join("a"), d.join("b"), d.join("missing")]
        );
        assert_eq!(read.included_hooks, vec!["h".to_owned()]);
        assert_eq!(read.hooks_path, None);
    }
}
