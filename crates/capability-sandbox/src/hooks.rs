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

use crate::gitconfig::{ConfigRead, hooks_dir, user_config};

/// Whose configuration names a hooks directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Named {
    /// The repository's own.
    Repository,
    /// The user's (global or system), which holds for every repository without its own.
    User,
}

/// What a repository's configuration, with the user's, says git runs code from.
#[derive(Debug, Default)]
pub(crate) struct Configured {
    /// The hooks directories: the one in force first, then those an included file names.
    pub(crate) hooks: Vec<(PathBuf, Named)>,
    /// The files the repository's configuration includes.
    pub(crate) included: Vec<PathBuf>,
}

/// [`Configured`] for the repository whose working tree holds `path` (the first directory
/// above it, beneath or at `within`, with a `.git`), with the user's configuration `user`.
fn repository_of(path: &Path, within: &Path, user: &ConfigRead) -> Option<Configured> {
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
            Some(configured_hooks(dir, &dot_git, user))
        } else if meta.is_file() {
            Some(configured_hooks(dir, &pointed_at(&dot_git, dir)?, user))
        } else {
            None
        };
    }
    None
}

/// What the git directory `git_dir` of the working tree `work_tree` is configured with, as git
/// reads it: `config`, then `config.worktree` (of the git directory a `commondir` names, then
/// its own), the last `core.hooksPath` in force, and without one the user's (`user`).
pub(crate) fn configured_hooks(work_tree: &Path, git_dir: &Path, user: &ConfigRead) -> Configured {
    let common = small_file(&git_dir.join("commondir"), 4096)
        .map(|c| git_dir.join(c.trim()))
        .filter(|c| c.is_dir());
    let files: Vec<PathBuf> = common
        .iter()
        .map(PathBuf::as_path)
        .chain([git_dir])
        .flat_map(|d| [d.join("config"), d.join("config.worktree")])
        .collect();
    let own = ConfigRead::of(&files);
    let mut hooks = Vec::new();
    match (&own.hooks_path, &user.hooks_path) {
        (Some(value), _) => {
            hooks.extend(hooks_dir(value, Some(work_tree)).map(|h| (h, Named::Repository)))
        }
        (None, Some(value)) => {
            hooks.extend(hooks_dir(value, Some(work_tree)).map(|h| (h, Named::User)))
        }
        (None, None) => {}
    }
    for (value, named) in own
        .included_hooks
        .iter()
        .map(|v| (v, Named::Repository))
        .chain(user.included_hooks.iter().map(|v| (v, Named::User)))
    {
        hooks.extend(hooks_dir(value, Some(work_tree)).map(|h| (h, named)));
    }
    Configured {
        hooks,
        included: own.included,
    }
}

/// The hooks directories the user's own configuration names for every repository: those
/// absolute or in the home directory (`~/.githooks`); a relative one is each repository's.
pub(crate) fn user_hooks_dirs(user: &ConfigRead) -> Vec<PathBuf> {
    user.hooks_path
        .iter()
        .chain(&user.included_hooks)
        .filter_map(|v| hooks_dir(v, None))
        .collect()
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
    /// A configuration file the user's configuration or the repository's includes
    /// (`[include]`, `[includeIf]`), which git reads as its own.
    IncludedConfig(PathBuf),
    /// The hooks (`area`, the directory) or a configuration file (`area`, the file) of a git
    /// directory not called `.git`.
    OtherGitDir {
        /// The git directory.
        git_dir: PathBuf,
        /// What keeps the path: the hooks directory or the configuration file.
        area: PathBuf,
    },
    /// A directory that the write of its `HEAD`, `commondir` or `objects` would make a git
    /// directory ([`would_make_git_dir`]): git would then run the hooks and configuration
    /// already in it. No write root lifts it, the directory itself as a root included.
    NewGitDir(PathBuf),
}

impl GitPlace {
    /// The same kind of place at `area` (where a link of its name leads).
    fn at(&self, area: PathBuf) -> GitPlace {
        match self {
            GitPlace::ConfiguredHooks(_) => GitPlace::ConfiguredHooks(area),
            GitPlace::UserHooks(_) => GitPlace::UserHooks(area),
            GitPlace::IncludedConfig(_) => GitPlace::IncludedConfig(area),
            GitPlace::OtherGitDir { git_dir, .. } => GitPlace::OtherGitDir {
                git_dir: git_dir.clone(),
                area,
            },
            GitPlace::NewGitDir(_) => GitPlace::NewGitDir(area),
        }
    }

    /// The directory or file that keeps the path: what a personality lists to allow it.
    pub fn area(&self) -> &Path {
        match self {
            GitPlace::ConfiguredHooks(hooks)
            | GitPlace::UserHooks(hooks)
            | GitPlace::IncludedConfig(hooks)
            | GitPlace::NewGitDir(hooks) => hooks,
            GitPlace::OtherGitDir { area, .. } => area,
        }
    }
}

/// Where `path`, beneath the write root `root`, lies in a place git runs code from that a rule
/// decided from a path's spelling cannot know (docs/policy.md, "Git's hooks and
/// configuration"): the hooks directory its repository's configuration names (the repository
/// is the first directory above `path`, beneath or at `root`, with a `.git`; a relative value is
/// read from its working tree, `~/` from the home directory) or the user's own configuration
/// names (for every repository without its own; one absolute or in the home directory wherever
/// it is), a configuration file either includes, or the hooks and configuration of a git
/// directory of another name ([`git_dir_area`]). `None` also where `root` lies at or inside
/// that place: the personality lists it.
///
/// ```
/// use capability_sandbox::{GitPlace, git_place_of};
/// let dir = tempfile::tempdir().unwrap();
/// let repo = dir.path().join("svc");
/// std::fs::create_dir_all(repo.join(".git")).unwrap();
/// std::fs::write(repo.join(".git/config"), "[core]\n\thooksPath = .githooks\n").unwrap();
/// let hook = repo.join(".githooks/pre-commit");
/// assert_eq!(
///     git_place_of(&hook, dir.path()),
///     Some(GitPlace::ConfiguredHooks(repo.join(".githooks")))
/// );
/// assert_eq!(git_place_of(&repo.join("src/main.rs"), dir.path()), None);
/// ```
///
/// # Ambient Authority
///
/// Reads the enclosing repository's configuration and the user's (found through `HOME`,
/// `XDG_CONFIG_HOME`, `GIT_CONFIG_GLOBAL` and `GIT_CONFIG_SYSTEM`, as git finds it), and asks
/// the directories above `path` that it would be a git directory's hooks or configuration of
/// whether they are one.
pub fn git_place_of(path: &Path, root: &Path) -> Option<GitPlace> {
    let user = user_config();
    let repository = repository_of(path, root, &user).unwrap_or_default();
    let hooks = repository
        .hooks
        .into_iter()
        .map(|(hooks, named)| match named {
            Named::Repository => GitPlace::ConfiguredHooks(hooks),
            Named::User => GitPlace::UserHooks(hooks),
        });
    let everywhere = user_hooks_dirs(&user).into_iter().map(GitPlace::UserHooks);
    let included = user
        .included
        .into_iter()
        .chain(repository.included)
        .map(GitPlace::IncludedConfig);
    let other = git_dir_area(path, root)
        .map(|(git_dir, area)| GitPlace::OtherGitDir { git_dir, area })
        .or_else(|| would_make_git_dir(path, root).map(GitPlace::NewGitDir));
    // A configured place that is, or lies beyond, a symbolic link is also where the link leads:
    // git follows it, so a write there changes what git runs (docs/policy.md, "Reached by
    // another name").
    let configured = hooks.chain(everywhere).chain(included);
    configured
        .flat_map(|place| {
            let led = leads_to(place.area()).map(|real| place.at(real));
            std::iter::once(place).chain(led)
        })
        .chain(other)
        // A write root at or inside the place lifts it (the personality lists it), but for a
        // directory a write would make a git directory: no tool makes one by hand.
        .find(|place| {
            path.starts_with(place.area())
                && (matches!(place, GitPlace::NewGitDir(_)) || !root.starts_with(place.area()))
        })
}

/// Where `path` leads when a symbolic link is on its way (the place itself, or a directory
/// above it), as git reaches it: its real path where it exists; where a link leads nowhere yet,
/// the place the link names (followed as the kernel follows links, up to forty), with its
/// parent's real path; where it is missing, its name beneath its parent's real path (the parent
/// as spelled when that is missing too). `None` when that is `path` itself: no link is on its
/// way.
pub(crate) fn leads_to(path: &Path) -> Option<PathBuf> {
    let resolved = |p: &Path| std::fs::canonicalize(p).ok();
    let within = |p: &Path| -> Option<PathBuf> {
        // Its parent resolved (or as spelled, when missing too), and its own name.
        let parent = p.parent()?;
        Some(
            resolved(parent)
                .unwrap_or_else(|| parent.to_path_buf())
                .join(p.file_name()?),
        )
    };
    let mut at = path.to_path_buf();
    let mut found = None;
    for _ in 0..40 {
        if let Some(real) = resolved(&at) {
            found = Some(real);
            break;
        }
        match std::fs::symlink_metadata(&at) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let target = std::fs::read_link(&at).ok()?;
                at = normalized(&at.parent()?.join(target));
            }
            _ => {
                found = within(&at);
                break;
            }
        }
    }
    found.filter(|led| led != path)
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

/// The directory, beneath `within`, that `path` (or a directory on its way, which a `mkdir`
/// would make with it) would make a git directory as git tells one where it is none now: a
/// `HEAD` beside an `objects` directory or a `commondir`, or one of those beside a `HEAD`. A
/// git directory is told by what is in it, so
/// its configuration and hooks can be written while it is none, and it made one last; git
/// would then run them when the user next runs git there or beneath (docs/policy.md, "Git's
/// hooks and configuration"). Only a path named so is asked.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let src = dir.path().join("src");
/// std::fs::create_dir_all(src.join("objects")).unwrap();
/// assert_eq!(
///     capability_sandbox::would_make_git_dir(&src.join("HEAD"), dir.path()),
///     Some(src.clone())
/// );
/// assert_eq!(capability_sandbox::would_make_git_dir(&src.join("README"), dir.path()), None);
/// ```
pub fn would_make_git_dir(path: &Path, within: &Path) -> Option<PathBuf> {
    // The path itself, and each directory on its way that a `mkdir` would make with it.
    path.ancestors()
        .take_while(|p| p.starts_with(within) && *p != within)
        .find_map(completed_by)
}

/// The directory `part` (its last part named `HEAD`, `objects` or `commondir`) would complete
/// as a git directory, when it is none now.
fn completed_by(part: &Path) -> Option<PathBuf> {
    let name = part.file_name()?;
    let is = |wanted: &str| capability_types::same_name(name.as_encoded_bytes(), wanted.as_bytes());
    if !is("HEAD") && !is("objects") && !is("commondir") {
        return None;
    }
    let dir = part.parent()?;
    if named_by_git(dir) || is_git_dir(dir) {
        return None;
    }
    let has = |name: &str, dir_wanted: bool| {
        std::fs::symlink_metadata(dir.join(name)).is_ok_and(|m| {
            if dir_wanted {
                m.is_dir()
            } else {
                m.is_file() || m.file_type().is_symlink()
            }
        })
    };
    let completes = if is("HEAD") {
        has("objects", true) || has("commondir", false)
    } else {
        has("HEAD", false)
    };
    completes.then(|| dir.to_path_buf())
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
    use std::os::unix::fs::MetadataExt as _;
    let kind = |name: &str| {
        Ok::<_, std::convert::Infallible>(
            std::fs::symlink_metadata(dir.join(name))
                .ok()
                .map(|m| m.mode() & libc::S_IFMT),
        )
    };
    git_dir_by(kind).unwrap_or(false)
}

/// [`is_git_dir`]'s rule over `kind`, which gives the type bits (`S_IFMT`) of a name inside the
/// directory, not following a final link, or `None` when nothing is there: how the walk asks
/// it relative to a descriptor (`walk.rs`).
pub(crate) fn git_dir_by<E>(
    mut kind: impl FnMut(&str) -> Result<Option<u32>, E>,
) -> Result<bool, E> {
    let head = kind("HEAD")?;
    Ok(matches!(head, Some(libc::S_IFREG | libc::S_IFLNK))
        && (kind("objects")? == Some(libc::S_IFDIR) || kind("commondir")? == Some(libc::S_IFREG)))
}

/// `path` with its `.` and `..` parts taken away, as written (no link followed).
pub(crate) fn normalized(path: &Path) -> PathBuf {
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
    fn paths_are_normalised_as_written() {
        assert_eq!(normalized(Path::new("/r/./a/../b")), PathBuf::from("/r/b"));
    }

    /// Where a configured place leads: a plain directory nowhere else; a link where it leads;
    /// a link leading nowhere yet to what it names, through a chain of links and a link above
    /// it; a loop nowhere at all.
    #[test]
    fn a_place_leads_where_its_links_lead() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(d.join("tools/hooks")).unwrap();
        std::fs::create_dir(d.join("shared")).unwrap();
        let link = |target: &str, name: &str| std::os::unix::fs::symlink(target, d.join(name));
        link("tools/hooks", "hooks-link").unwrap();
        link("shared/missing", "dangling").unwrap();
        link("dangling", "chain").unwrap();
        link("shared", "above").unwrap();
        link("loop-b", "loop-a").unwrap();
        link("loop-a", "loop-b").unwrap();
        assert_eq!(leads_to(&d.join("tools/hooks")), None);
        assert_eq!(leads_to(&d.join("hooks-link")), Some(d.join("tools/hooks")));
        assert_eq!(
            leads_to(&d.join("dangling")),
            Some(d.join("shared/missing"))
        );
        assert_eq!(leads_to(&d.join("chain")), Some(d.join("shared/missing")));
        assert_eq!(leads_to(&d.join("above/new")), Some(d.join("shared/new")));
        assert_eq!(leads_to(&d.join("loop-a")), None);
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
        let none = ConfigRead::default();
        let hooks = |user: &ConfigRead| configured_hooks(tree, &git, user).hooks;
        assert_eq!(hooks(&none), vec![(tree.join("hooks"), Named::Repository)]);
        config.splice(0..0, vec![b'#'; 70 * 1024]);
        std::fs::write(git.join("config"), &config).unwrap();
        assert_eq!(hooks(&none), vec![], "past the limit, not read");
        // Without its own, the user's holds, relative to the working tree.
        let user = ConfigRead {
            hooks_path: Some(".githooks".into()),
            ..ConfigRead::default()
        };
        assert_eq!(hooks(&user), vec![(tree.join(".githooks"), Named::User)]);
        std::fs::remove_file(git.join("config")).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(git.join("config"))
            .status()
            .unwrap();
        assert!(made.success());
        assert_eq!(hooks(&none), vec![]);
    }
}
