//! The places git runs code from that a path's spelling does not tell: where a repository's
//! configuration, or the user's own, points git for its hooks (`core.hooksPath`: a directory of
//! the working tree under a name of its own, `.githooks`, `scripts/hooks`, or one for every
//! repository, `~/.githooks`), and the hooks and configuration of a git directory not called
//! `.git` (a bare repository, one kept apart from its working tree). Git runs what is there at
//! the user's next commit, outside any sandbox (docs/policy.md, "Git's hooks and
//! configuration"). The file system backend refuses a tool's writes there, the guard a server's
//! arguments; the sandbox keeps a child from them.

#![allow(
    clippy::disallowed_methods,
    reason = "the repository's configuration is read to find where its hooks are"
)]

use std::path::{Component, Path, PathBuf};

/// The most of a configuration file read: its `core` section comes first in what git writes.
const CONFIG_LIMIT: u64 = 64 * 1024;

/// The directory `core.hooksPath` names for the repository whose working tree holds `path`:
/// the first directory above `path`, and beneath or at `within`, that holds a `.git` (a
/// directory, or a file naming one) is the working tree, and its git directory's `config` and
/// `config.worktree` (and those of the git directory a `commondir` names) say where the hooks
/// are, or else the user's own configuration (`~/.gitconfig` and its kin). A relative value is read
/// from the working tree, and `~/` from the home directory, as git reads them. `None` when no
/// such repository or setting is found, or when it names another account's home (`~name`);
/// included files (`[include]`) are not read.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let repo = dir.path().join("svc");
/// std::fs::create_dir_all(repo.join(".git")).unwrap();
/// std::fs::write(repo.join(".git/config"), "[core]\n\thooksPath = .githooks\n").unwrap();
/// let hook = repo.join(".githooks/pre-commit");
/// assert_eq!(
///     capability_sandbox::hooks_path_for(&hook, dir.path()),
///     Some(repo.join(".githooks"))
/// );
/// ```
pub fn hooks_path_for(path: &Path, within: &Path) -> Option<PathBuf> {
    hooks_for(path, within, user_hooks_setting().as_deref()).map(|(hooks, _)| hooks)
}

/// Whose configuration names a hooks directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Named {
    /// The repository's own.
    Repository,
    /// The user's (global or system), which holds for every repository without its own.
    User,
}

/// [`hooks_path_for`], with the user's own setting `user` as written, and whose it is.
fn hooks_for(path: &Path, within: &Path, user: Option<&str>) -> Option<(PathBuf, Named)> {
    for dir in path.ancestors().skip(1) {
        if !dir.starts_with(within) {
            return None;
        }
        let dot_git = dir.join(".git");
        // Through a link too (git follows one): reading where it leads can only add a refusal.
        let Ok(meta) = std::fs::metadata(&dot_git) else {
            continue;
        };
        return if meta.is_dir() {
            configured_hooks(dir, &dot_git, user)
        } else if meta.is_file() {
            configured_hooks(dir, &pointed_at(&dot_git, dir)?, user)
        } else {
            None
        };
    }
    None
}

/// The hooks directory the git directory `git_dir` of the working tree `work_tree` is
/// configured with (`core.hooksPath`), resolved as git resolves it; the last setting wins,
/// `config.worktree` after `config`, and without either the user's own (`user`, as written).
pub(crate) fn configured_hooks(
    work_tree: &Path,
    git_dir: &Path,
    user: Option<&str>,
) -> Option<(PathBuf, Named)> {
    let common = small_file(&git_dir.join("commondir"), 4096)
        .map(|c| git_dir.join(c.trim()))
        .filter(|c| c.is_dir());
    let mut value = None;
    for dir in common.iter().map(PathBuf::as_path).chain([git_dir]) {
        for name in ["config", "config.worktree"] {
            if let Some(v) = small_file(&dir.join(name), CONFIG_LIMIT)
                .as_deref()
                .and_then(hooks_path_setting)
            {
                value = Some(v);
            }
        }
    }
    match value {
        Some(own) => Some((hooks_dir(&own, Some(work_tree))?, Named::Repository)),
        None => Some((hooks_dir(user?, Some(work_tree))?, Named::User)),
    }
}

/// Where a `core.hooksPath` of `value` leads: absolute as it is, `~` and `~/…` from the home
/// directory (`HOME`), relative from `work_tree` (where git runs the hooks). `None` for an empty
/// value, another account's home (`~name`), or a relative one without a working tree.
fn hooks_dir(value: &str, work_tree: Option<&Path>) -> Option<PathBuf> {
    let home = || {
        std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from)
    };
    let dir = if value.is_empty() {
        return None;
    } else if value == "~" {
        home()?
    } else if let Some(rest) = value.strip_prefix("~/") {
        home()?.join(rest)
    } else if value.starts_with('~') {
        return None;
    } else if value.starts_with('/') {
        PathBuf::from(value)
    } else {
        work_tree?.join(value)
    };
    Some(normalized(&dir))
}

/// The user's own `core.hooksPath`, as written: the last of the system's configuration
/// (`GIT_CONFIG_SYSTEM`, or `/etc/gitconfig`) and the global one (`GIT_CONFIG_GLOBAL`, or
/// `$XDG_CONFIG_HOME/git/config`, by default `~/.config/git/config`, then `~/.gitconfig`), as
/// git reads them (docs/policy.md, "Git's hooks and configuration"). It holds for every
/// repository whose own configuration does not set one.
pub(crate) fn user_hooks_setting() -> Option<String> {
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
    let mut value = None;
    for file in files {
        if let Some(v) = small_file(&file, CONFIG_LIMIT)
            .as_deref()
            .and_then(hooks_path_setting)
        {
            value = Some(v);
        }
    }
    value
}

/// The one hooks directory the user's own setting (`setting`, as written) names for every
/// repository, when it is absolute or in the home directory (`~/.githooks`); a relative one is
/// each repository's ([`hooks_path_for`]).
pub(crate) fn user_hooks_dir(setting: &str) -> Option<PathBuf> {
    hooks_dir(setting, None)
}

/// A place git runs code from that a rule decided from a path's spelling cannot know
/// ([`git_place_of`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum GitPlace {
    /// Beneath the hooks directory the enclosing repository's `core.hooksPath` names.
    ConfiguredHooks(PathBuf),
    /// Beneath the hooks directory the user's own configuration names (`~/.gitconfig`), for
    /// every repository (an absolute one) or for the enclosing repository (a relative one).
    UserHooks(PathBuf),
    /// The hooks (`area`, the directory) or a configuration file (`area`, the file) of a git
    /// directory not called `.git`.
    OtherGitDir {
        /// The git directory.
        git_dir: PathBuf,
        /// What keeps the path: the hooks directory or the configuration file.
        area: PathBuf,
    },
}

impl GitPlace {
    /// The directory or file that keeps the path: what a personality lists to allow it.
    pub fn area(&self) -> &Path {
        match self {
            GitPlace::ConfiguredHooks(hooks) | GitPlace::UserHooks(hooks) => hooks,
            GitPlace::OtherGitDir { area, .. } => area,
        }
    }
}

/// Where `path`, beneath the write root `root`, lies in a place git runs code from that a rule
/// decided from a path's spelling cannot know (docs/policy.md, "Git's hooks and
/// configuration"): the hooks directory its repository's configuration names
/// ([`hooks_path_for`]) or the user's own configuration names (for every repository, when it
/// is absolute or in the home directory), or the hooks and configuration of a git directory of
/// another name ([`git_dir_area`]). `None` also where `root` lies at or inside that place: the personality
/// lists it.
///
/// # Ambient Authority
///
/// Reads the enclosing repository's configuration and the user's (found through `HOME`,
/// `XDG_CONFIG_HOME`, `GIT_CONFIG_GLOBAL` and `GIT_CONFIG_SYSTEM`, as git finds it), and asks
/// the directories above `path` that it would be a git directory's hooks or configuration of
/// whether they are one.
pub fn git_place_of(path: &Path, root: &Path) -> Option<GitPlace> {
    let user = user_hooks_setting();
    let unlisted = |p: &GitPlace| !root.starts_with(p.area());
    let repository = hooks_for(path, root, user.as_deref())
        .filter(|(hooks, _)| path.starts_with(hooks))
        .map(|(hooks, named)| match named {
            Named::Repository => GitPlace::ConfiguredHooks(hooks),
            Named::User => GitPlace::UserHooks(hooks),
        });
    let everywhere = || {
        user_hooks_dir(user.as_deref()?)
            .filter(|hooks| path.starts_with(hooks))
            .map(GitPlace::UserHooks)
    };
    let other =
        || git_dir_area(path, root).map(|(git_dir, area)| GitPlace::OtherGitDir { git_dir, area });
    repository
        .filter(unlisted)
        .or_else(|| everywhere().filter(unlisted))
        .or_else(|| other().filter(unlisted))
}

/// The names in a git directory whose settings make git run a command, or name another git
/// directory to take hooks and configuration from.
const CONFIG_NAMES: [&str; 3] = ["config", "config.worktree", "commondir"];

/// Where `path` would change what git runs, in a git directory not called `.git` (whose places
/// the write rule knows by name): a bare repository (`backup.git`), or one kept apart from its
/// working tree (`git init --separate-git-dir`), told by what is in it as git tells it (a
/// `HEAD` file, and an `objects` directory or a `commondir`). The git directory, beneath or at
/// `within`, and the area that keeps `path`: its `hooks` or the configuration file itself
/// (docs/policy.md, "Git's hooks and configuration"). Only the directories `path` would be in
/// such a place of are asked, so a path with no part named `hooks` and no configuration's name
/// costs nothing.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let bare = dir.path().join("backup.git");
/// std::fs::create_dir_all(bare.join("objects")).unwrap();
/// std::fs::write(bare.join("HEAD"), "ref: refs/heads/main\n").unwrap();
/// let hook = bare.join("hooks/post-receive");
/// assert_eq!(
///     capability_sandbox::git_dir_area(&hook, dir.path()),
///     Some((bare.clone(), bare.join("hooks")))
/// );
/// assert_eq!(capability_sandbox::git_dir_area(&bare.join("README"), dir.path()), None);
/// ```
pub fn git_dir_area(path: &Path, within: &Path) -> Option<(PathBuf, PathBuf)> {
    let mut parts = path.components().rev().peekable();
    let mut depth = 0;
    for dir in path.ancestors().skip(1) {
        if !dir.starts_with(within) {
            return None;
        }
        depth += 1;
        // The part of `path` right beneath `dir`.
        let Some(Component::Normal(next)) = parts.next() else {
            return None;
        };
        let area = if next == "hooks" {
            dir.join("hooks")
        } else if depth == 1 && CONFIG_NAMES.iter().any(|n| next == *n) {
            path.to_path_buf()
        } else {
            continue;
        };
        if !named_by_git(dir) && is_git_dir(dir) {
            return Some((dir.to_path_buf(), area));
        }
    }
    None
}

/// Whether `dir` is a `.git` or lies inside one (a submodule's or a linked worktree's git
/// directory): places the write rule knows by name.
pub(crate) fn named_by_git(dir: &Path) -> bool {
    dir.components().any(|c| c.as_os_str() == ".git")
}

/// Whether `dir` is a git directory as git tells one: a `HEAD` (a file, or a link as older
/// gits made it), and an `objects` directory or a `commondir` (a linked worktree's); the last
/// two not through a link.
pub(crate) fn is_git_dir(dir: &Path) -> bool {
    let is = |name: &str, dir_wanted: bool| {
        std::fs::symlink_metadata(dir.join(name))
            .is_ok_and(|m| if dir_wanted { m.is_dir() } else { m.is_file() })
    };
    let head = std::fs::symlink_metadata(dir.join("HEAD"))
        .is_ok_and(|m| m.is_file() || m.file_type().is_symlink());
    head && (is("objects", true) || is("commondir", false))
}

/// The last `core.hooksPath` a git configuration's text sets: section and key in any case,
/// the value without its quotes or a comment after it.
fn hooks_path_setting(text: &str) -> Option<String> {
    let mut in_core = false;
    let mut value = None;
    for line in text.lines() {
        let line = line.trim();
        if let Some(section) = line.strip_prefix('[') {
            let name = section.split([']', ' ', '"']).next().unwrap_or("");
            in_core = name.eq_ignore_ascii_case("core") && !section.contains('"');
            continue;
        }
        if !in_core {
            continue;
        }
        let Some((key, rest)) = line.split_once('=') else {
            continue;
        };
        if !key.trim().eq_ignore_ascii_case("hookspath") {
            continue;
        }
        let rest = rest.trim();
        let v = match rest.strip_prefix('"') {
            Some(quoted) => quoted.split('"').next().unwrap_or(""),
            None => rest.split(['#', ';']).next().unwrap_or("").trim(),
        };
        value = Some(v.to_owned());
    }
    value
}

/// `path` with its `.` and `..` parts taken away, as written (no link followed).
fn normalized(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The git directory a `.git` file in `dir` points at (`gitdir: PATH`, relative to `dir`), if
/// it says one that exists.
pub(crate) fn pointed_at(file: &Path, dir: &Path) -> Option<PathBuf> {
    let text = small_file(file, 4096)?;
    let target = text.lines().next()?.strip_prefix("gitdir:")?.trim();
    // Where it really is: the file may say `../..` or go through links, and only a place
    // beneath the write roots is looked into.
    std::fs::canonicalize(dir.join(target))
        .ok()
        .filter(|t| t.is_dir())
}

/// The first `limit` bytes of the regular file at `path`, as text (bytes that are not UTF-8
/// replaced); `None` for anything else. Opened
/// without following a link and without waiting: a child may have left a FIFO there, whose open
/// would wait for a writer that never comes.
pub(crate) fn small_file(path: &Path, limit: u64) -> Option<String> {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(limit).read_to_end(&mut bytes).ok()?;
    // Lossily: a configuration may hold a name in another encoding, and the setting after it
    // must still be read.
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_setting_is_read_as_git_reads_it() {
        let read = |t: &str| hooks_path_setting(t);
        assert_eq!(
            read("[core]\n\thooksPath = .githooks\n"),
            Some(".githooks".into())
        );
        assert_eq!(read("[CORE]\nHOOKSPATH=\"a b\" # x\n"), Some("a b".into()));
        assert_eq!(
            read("[core]\nhookspath = x ; c\n[core]\nhooksPath = y\n"),
            Some("y".into())
        );
        assert_eq!(read("[remote \"core\"]\nhooksPath = x\n"), None);
        assert_eq!(read("[core \"sub\"]\nhooksPath = x\n"), None);
        assert_eq!(read("[user]\nhooksPath = x\n"), None);
        assert_eq!(normalized(Path::new("/r/./a/../b")), PathBuf::from("/r/b"));
    }

    /// A configuration that is not all UTF-8 (a name in Latin-1), one with a line as long as
    /// the limit, and a FIFO where the configuration should be: the setting is read where it
    /// can be, and nothing waits.
    #[test]
    fn hostile_configurations_are_read_without_failing_open_or_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let (tree, git) = (dir.path(), dir.path().join(".git"));
        std::fs::create_dir(&git).unwrap();
        let mut config = b"[user]\n\tname = Ren\xe9\n[core]\n\thooksPath = hooks\n".to_vec();
        std::fs::write(git.join("config"), &config).unwrap();
        assert_eq!(
            configured_hooks(tree, &git, None),
            Some((tree.join("hooks"), Named::Repository))
        );
        config.splice(0..0, vec![b'#'; 70 * 1024]);
        std::fs::write(git.join("config"), &config).unwrap();
        assert_eq!(
            configured_hooks(tree, &git, None),
            None,
            "past the limit, not read"
        );
        // Without its own, the user's holds, relative to the working tree.
        assert_eq!(
            configured_hooks(tree, &git, Some(".githooks")),
            Some((tree.join(".githooks"), Named::User))
        );
        std::fs::remove_file(git.join("config")).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(git.join("config"))
            .status()
            .unwrap();
        assert!(made.success());
        assert_eq!(configured_hooks(tree, &git, None), None);
    }
}
