//! Paths: resolution against the context's working directory, component-wise coverage, the
//! deny floor, and the file system intersection.

use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use capability_policy::normalize_lexically;

use super::{Dropped, Intersection};

pub use super::keep::{kept_from_writes, kept_places};
pub use super::later::{RUNS_LATER_NAMES, RunsLater, git_run_area, runs_later};

/// Resolves `path` for matching: relative paths join `working_dir` (never the process's
/// directory), then `.` and `..` fold lexically. NUL bytes and a relative working directory are
/// refused.
///
/// ```
/// use capability_core::matching::path::resolve_path;
/// use std::path::Path;
/// let wd = Path::new("/srv/work");
/// assert_eq!(resolve_path(Path::new("../data/x"), wd).unwrap(), Path::new("/srv/data/x"));
/// assert_eq!(resolve_path(Path::new("/etc/../srv"), wd).unwrap(), Path::new("/srv"));
/// ```
pub fn resolve_path(path: &Path, working_dir: &Path) -> Result<PathBuf, String> {
    if path.as_os_str().as_bytes().contains(&0) {
        return Err(format!(
            "path {:?} contains a NUL byte",
            path.display().to_string()
        ));
    }
    if path.as_os_str().is_empty() {
        return Err("path is empty".to_owned());
    }
    if is_normalized_absolute(path) {
        return Ok(path.to_path_buf());
    }
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        if !working_dir.is_absolute() {
            return Err(format!(
                "working directory {} is not absolute",
                working_dir.display()
            ));
        }
        working_dir.join(path)
    };
    // A plain relative name under a normalised working directory (`notes.md`, `a/b.txt`, most
    // calls) joins into a path that is normalised already: nothing to rebuild.
    if is_normalized_absolute(&joined) {
        return Ok(joined);
    }
    Ok(normalize_lexically(&joined))
}

/// Whether an absolute path is already in the form [`normalize_lexically`] produces: no empty,
/// `.` or `..` component and no trailing `/`. Such a path needs no rebuilding.
fn is_normalized_absolute(path: &Path) -> bool {
    let b = path.as_os_str().as_bytes();
    if b.first() != Some(&b'/') {
        return false;
    }
    if b.len() == 1 {
        return true;
    }
    b.last() != Some(&b'/')
        && b[1..]
            .split(|c| *c == b'/')
            .all(|c| !c.is_empty() && c != b"." && c != b"..")
}

/// Whether `path` lies at or under `root`, compared by component (`/srv/up` does not cover
/// `/srv/uploads`). Both must be normalised absolute paths (as [`resolve_path`] and
/// [`normalize_lexically`] produce), for which a byte prefix ending at a `/` boundary is the
/// same as a component prefix, and much cheaper.
pub fn is_within(path: &Path, root: &Path) -> bool {
    within(path, root, |p, r| p == r)
}

/// Whether `path` lies at or under `root`, their bytes compared with `same`.
fn within(path: &Path, root: &Path, same: impl Fn(&[u8], &[u8]) -> bool) -> bool {
    let (p, r) = (path.as_os_str().as_bytes(), root.as_os_str().as_bytes());
    if r == b"/" {
        return p.first() == Some(&b'/');
    }
    p.len() >= r.len() && same(&p[..r.len()], r) && (p.len() == r.len() || p[r.len()] == b'/')
}

/// [`is_within`], each name compared as a file system that does not tell names apart compares
/// it ([`capability_types::fold_name`]: ASCII case, `ſ`, `ı`, ligatures, invisible characters,
/// trailing dots): how a deny rule is matched, since such a file system takes `.ENV`, `.env.`
/// and `.e\u{200B}nv` for `.env` (docs/policy.md, "Names in any case"). Where names are told
/// apart it refuses a place or two more, never fewer.
pub fn is_within_any_case(path: &Path, root: &Path) -> bool {
    within_any_case(path, plain(path.as_os_str().as_bytes()), root)
}

/// Whether `path` lies within any of `roots` as [`is_within_any_case`] says: how the deny rules
/// are asked, `path` looked at once for all of them.
pub fn is_within_any_of_any_case(path: &Path, roots: &[PathBuf]) -> bool {
    let path_plain = plain(path.as_os_str().as_bytes());
    roots.iter().any(|r| within_any_case(path, path_plain, r))
}

/// [`is_within_any_case`], told whether `path` is [`plain`].
fn within_any_case(path: &Path, path_plain: bool, root: &Path) -> bool {
    let (p, r) = (path.as_os_str().as_bytes(), root.as_os_str().as_bytes());
    if path_plain && plain(r) {
        return within(path, root, <[u8]>::eq_ignore_ascii_case);
    }
    // Name by name: each folded, or the path's a short name the drive could have made for the
    // root's (`ENV~1` for `.env`).
    let (p, r) = (
        capability_types::fold_path(p),
        capability_types::fold_path(r),
    );
    if r.as_ref() == b"/" {
        return p.first() == Some(&b'/');
    }
    let (mut p, r) = (p.split(|b| *b == b'/'), r.split(|b| *b == b'/'));
    r.into_iter().all(|root_name| {
        p.next().is_some_and(|name| {
            name == root_name || super::short::may_be_short_for(name, root_name)
        })
    })
}

/// Whether `path` is the same however a file system that does not tell names apart folds it,
/// but for ASCII case: ASCII, no `~` (a short name's mark), no name ending in a dot or a space.
/// One pass, no allocation: the deny rules ask it of every path checked.
fn plain(path: &[u8]) -> bool {
    let mut last = b'/';
    for &b in path {
        if !b.is_ascii() || b == b'~' || (b == b'/' && matches!(last, b'.' | b' ')) {
            return false;
        }
        last = b;
    }
    !matches!(last, b'.' | b' ')
}

/// One protected area of the deny floor.
#[derive(Debug, Clone, PartialEq, Eq)]
enum FloorEntry {
    /// A path and everything under it, optionally except one exact path.
    Tree {
        root: PathBuf,
        except: Option<PathBuf>,
    },
    /// Entries of `dir` whose name starts with `prefix` (`/etc/sudoers*`), and everything under them.
    NamePrefix { dir: PathBuf, prefix: &'static str },
    /// Any path with a component of this name, or with these components one after another
    /// when the name has several (`.config/gh`), and everything under it (used for
    /// home-relative entries when the home directory is unknown: failing closed means
    /// protecting every such place).
    Component(&'static str),
}

impl FloorEntry {
    /// `root` and everything under it but `except`.
    fn tree(root: PathBuf, except: Option<PathBuf>) -> Self {
        FloorEntry::Tree { root, except }
    }

    /// Whether only a path with a component beginning with a dot can lie in this area (every
    /// home entry, where the home is known or not): a path without one is covered by none.
    fn needs_dot(&self) -> bool {
        let has_dot = |p: &Path| DotParts::of(p.as_os_str().as_bytes()).next().is_some();
        match self {
            FloorEntry::Tree { root, .. } => has_dot(root),
            FloorEntry::NamePrefix { dir, .. } => has_dot(dir),
            FloorEntry::Component(name) => name.starts_with('.'),
        }
    }

    fn covers(&self, path: &Path) -> bool {
        match self {
            FloorEntry::Tree { root, except } => {
                is_within(path, root) && except.as_deref() != Some(path)
            }
            FloorEntry::NamePrefix { dir, prefix } => {
                // `dir/` followed by a name starting with `prefix`.
                let (p, d) = (path.as_os_str().as_bytes(), dir.as_os_str().as_bytes());
                p.len() > d.len() + 1
                    && p.starts_with(d)
                    && p[d.len()] == b'/'
                    && p[d.len() + 1..].starts_with(prefix.as_bytes())
            }
            FloorEntry::Component(name) if name.starts_with('.') => {
                let p = path.as_os_str().as_bytes();
                DotParts::of(p).any(|start| names_at(p, start, name))
            }
            FloorEntry::Component(name) => {
                // At every name (`SNAP_ENTRIES`), not only at those that begin with a dot.
                let p = path.as_os_str().as_bytes();
                p.iter()
                    .enumerate()
                    .filter(|(_, b)| **b == b'/')
                    .any(|(at, _)| names_at(p, at + 1, name))
            }
        }
    }
}

/// The protected places of a home directory, relative to it (docs/semantics.md, "Paths"): keys,
/// the files where tools (AI agents' clients among them) keep their credentials and tokens, and
/// the histories where typed secrets stay. Each begins with a dot, which [`DenyFloor::blocks`]
/// relies on when the home directory is unknown (a test holds it).
pub(crate) const HOME_ENTRIES: [&str; 91] = [
    ".ssh",
    ".aws",
    ".gnupg",
    ".netrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".docker/config.json",
    // Every kubeconfig kept there, and the OIDC tokens kubelogin caches beneath it.
    ".kube",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".config/gh",
    ".config/gcloud",
    ".azure",
    ".codex/auth.json",
    ".claude/.credentials.json",
    ".gemini/oauth_creds.json",
    ".config/github-copilot",
    ".vault-token",
    ".terraform.d/credentials.tfrc.json",
    ".m2/settings.xml",
    ".gradle/gradle.properties",
    ".bash_history",
    ".zsh_history",
    ".psql_history",
    ".mysql_history",
    // Databases' and version control's password files (git's own store where XDG puts it,
    // Emacs's netrc).
    ".pgpass",
    ".my.cnf",
    ".config/git/credentials",
    ".authinfo",
    ".authinfo.gpg",
    // Package registries' keys.
    ".gem/credentials",
    ".composer/auth.json",
    ".config/composer/auth.json",
    // Platforms' and clouds' command lines: their tokens and keys.
    ".config/hub",
    ".config/glab-cli",
    ".config/doctl",
    ".config/netlify",
    ".terraformrc",
    ".s3cfg",
    ".boto",
    ".mc/config.json",
    ".config/rclone",
    ".databrickscfg",
    ".fly",
    ".oci",
    // Password managers, keyrings and the NSS certificate and key database.
    ".config/op",
    ".config/1Password",
    ".password-store",
    ".local/share/keyrings",
    ".pki",
    // Browsers' profiles: their cookies are signed-in sessions, and they keep saved passwords.
    ".mozilla",
    ".config/google-chrome",
    ".config/chromium",
    ".config/BraveSoftware",
    ".config/microsoft-edge",
    // What Flatpak keeps of each application it runs: browsers' profiles, password managers',
    // chat clients' keys.
    ".var/app",
    // AI agents' and their editors' own keys: the home directory's dotenv (Gemini CLI and aider
    // read it) and Gemini CLI's, OpenCode's, Crush's, Amp's and Goose's stores, Qwen Code's
    // sign-in, Continue's and aider's configurations (they hold API keys), and the editors'
    // global storage (Cursor keeps its session tokens there).
    ".env",
    ".gemini/.env",
    ".local/share/opencode/auth.json",
    ".local/share/crush/crush.json",
    ".local/share/amp/secrets.json",
    ".config/goose/secrets.yaml",
    ".qwen/oauth_creds.json",
    ".continue/config.yaml",
    ".continue/config.json",
    ".continue/.env",
    ".aider.conf.yml",
    ".config/Cursor/User/globalStorage",
    ".config/Code/User/globalStorage",
    ".config/Windsurf/User/globalStorage",
    // What interpreters' prompts kept of what was typed (a `redis-cli` `AUTH` among it).
    ".python_history",
    ".node_repl_history",
    ".sqlite_history",
    ".rediscli_history",
    // A mail client's profile (its saved passwords), the browsers besides the four above, the
    // chat applications' signed-in sessions (Slack's cookies, Discord's token, Signal's
    // database key, Telegram's session), and the saved passwords of FileZilla, Pidgin and
    // Remmina.
    ".thunderbird",
    ".config/vivaldi",
    ".config/opera",
    ".config/Slack",
    ".config/discord",
    ".config/Signal",
    ".local/share/TelegramDesktop",
    ".config/filezilla",
    ".purple",
    ".config/remmina",
    ".local/share/remmina",
    // The MCP clients' own lists of servers, where a server's token sits in its `env` (Claude
    // Code's `~/.claude.json` holds an API key too), and Claude Desktop's configuration with
    // its signed-in session beside it.
    ".claude.json",
    ".config/Claude",
    ".cursor/mcp.json",
    ".codeium/windsurf/mcp_config.json",
    ".config/Code/User/mcp.json",
];

/// The home directory's places beneath `~/snap`, where a snap keeps its profile: Ubuntu's own
/// Firefox, Chromium and Thunderbird are snaps. They do not begin with a dot, so where the home
/// directory is unknown each is looked for as a run of names anywhere in a path, at every name
/// rather than only at those that begin with a dot (docs/semantics.md, "Paths").
pub(crate) const SNAP_ENTRIES: [&str; 3] = [
    "snap/firefox/common/.mozilla",
    "snap/chromium/common/chromium",
    "snap/thunderbird/common/.thunderbird",
];

/// How the name of the directory of children's homes that a process's tool makes in the
/// temporary directory begins (`capability-process`).
pub const CHILD_HOMES_PREFIX: &str = "toolcap-home-";

/// How the name of a guarded MCP server's home in the temporary directory begins
/// (`capability-mcp`).
pub const GUARD_HOME_PREFIX: &str = "toolcap-guard-";

/// The built-in deny floor of docs/semantics.md, "Paths": `~/.ssh`, `~/.aws`, `~/.gnupg`, `~/.netrc`
/// and the other credential files and histories of a home directory (`HOME_ENTRIES`),
/// `/etc/shadow`, `/etc/gshadow` and their backups `/etc/shadow-` and `/etc/gshadow-`,
/// `/etc/sudoers*`, the host keys `/etc/ssh/ssh_host_*`, `/etc/ssl/private`, `/proc`, `/sys`,
/// `/dev` except `/dev/null`, and, with [`DenyFloor::with_scratch`], toolcap's scratch
/// directories in the temporary directory (the children's homes, guarded servers' homes).
///
/// A floor entry is lifted only for paths under a personality root that lies inside the
/// protected area itself (a personality that lists `/proc` may read `/proc/cpuinfo`; one that
/// lists `/` may not). Deny rules are never lifted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DenyFloor {
    /// The areas only a path with a component beginning with a dot can lie in (every home
    /// entry's), apart from the others, so that a path without one is compared with none of
    /// them ([`DenyFloor::blocks`]).
    dotted: Vec<FloorEntry>,
    /// The other areas (`/etc/shadow`, `/proc`, ...).
    plain: Vec<FloorEntry>,
}

impl DenyFloor {
    /// The floor for a user whose home directory is `home`. With no home, the home entries
    /// protect every place of those names. A home that is not absolute, or that is `/` however
    /// it is spelled (a container's default for an account without one), is no home: the keys
    /// of such a user lie anywhere but in `/.ssh`.
    pub fn new(home: Option<&Path>) -> Self {
        let home = home
            .filter(|h| h.is_absolute())
            .map(normalize_lexically)
            .filter(|h| h.as_os_str() != "/");
        let mut entries: Vec<FloorEntry> = match home.as_deref() {
            Some(home) => HOME_ENTRIES
                .iter()
                .chain(&SNAP_ENTRIES)
                .map(|name| FloorEntry::tree(normalize_lexically(&home.join(name)), None))
                .collect(),
            None => HOME_ENTRIES
                .iter()
                .chain(&SNAP_ENTRIES)
                .map(|name| FloorEntry::Component(name))
                .collect(),
        };
        let tree = |root: &str| FloorEntry::tree(PathBuf::from(root), None);
        entries.extend([
            tree("/etc/shadow"),
            tree("/etc/gshadow"),
            // The copies `passwd`, `useradd` and their kin leave beside the two: the same hashes.
            tree("/etc/shadow-"),
            tree("/etc/gshadow-"),
            FloorEntry::NamePrefix {
                dir: PathBuf::from("/etc"),
                prefix: "sudoers",
            },
            FloorEntry::NamePrefix {
                dir: PathBuf::from("/etc/ssh"),
                prefix: "ssh_host_",
            },
            tree("/etc/ssl/private"),
            tree("/proc"),
            tree("/sys"),
            FloorEntry::tree(PathBuf::from("/dev"), Some(PathBuf::from("/dev/null"))),
        ]);
        let mut floor = Self {
            dotted: Vec::new(),
            plain: Vec::new(),
        };
        floor.extend(entries);
        floor
    }

    /// Every area, the dotted ones first.
    fn entries(&self) -> impl Iterator<Item = &FloorEntry> {
        self.dotted.iter().chain(&self.plain)
    }

    /// Adds `entries`, each where it belongs.
    fn extend(&mut self, entries: impl IntoIterator<Item = FloorEntry>) {
        for entry in entries {
            if entry.needs_dot() {
                self.dotted.push(entry);
            } else {
                self.plain.push(entry);
            }
        }
    }

    /// Whether some protected area overlaps `root` (lies inside it, or contains it). When none
    /// does, no path under `root` can be blocked by the floor, and the check can be skipped.
    pub fn overlaps(&self, root: &Path) -> bool {
        self.entries().any(|entry| match entry {
            FloorEntry::Tree { root: area, .. } => is_within(root, area) || is_within(area, root),
            FloorEntry::NamePrefix { dir, .. } => entry.covers(root) || is_within(dir, root),
            FloorEntry::Component(_) => true,
        })
    }

    /// Whether `path` is protected, given the personality roots (of the access in question)
    /// that could lift an entry.
    pub fn blocks(&self, path: &Path, personality_roots: &[PathBuf]) -> bool {
        // The names protected wherever they appear all begin with a dot (`HOME_ENTRIES`; the
        // snap places are among the other areas): a path without a component that does is
        // covered by none of them, found in one pass instead of one per name; nor by an area
        // whose own path has one (every home entry's, where the home is known: a project
        // beneath the home is compared with none of them).
        let p = path.as_os_str().as_bytes();
        // Where the components that begin with a dot start, found once for every name.
        let mut dots = [0usize; 8];
        let mut found = 0;
        for start in DotParts::of(p) {
            if found == dots.len() {
                found = usize::MAX;
                break;
            }
            dots[found] = start;
            found += 1;
        }
        let areas = if found == 0 {
            &self.dotted[..0]
        } else {
            &self.dotted[..]
        };
        areas.iter().chain(&self.plain).any(|entry| {
            let covers = match entry {
                FloorEntry::Component(name) if found != usize::MAX && name.starts_with('.') => {
                    dots[..found].iter().any(|&start| names_at(p, start, name))
                }
                _ => entry.covers(path),
            };
            covers
                && !personality_roots
                    .iter()
                    .any(|root| is_within(path, root) && entry.covers(root))
        })
    }
}

/// The starts of the components of a normalised path that begin with a dot (each just past a
/// `/` followed by `.`).
struct DotParts<'a> {
    path: &'a [u8],
    from: usize,
}

impl<'a> DotParts<'a> {
    fn of(path: &'a [u8]) -> Self {
        Self { path, from: 0 }
    }
}

impl Iterator for DotParts<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        let at = self.path[self.from..].windows(2).position(|w| w == b"/.")?;
        let start = self.from + at + 1;
        self.from = start;
        Some(start)
    }
}

/// Whether `name`'s components (one, or several joined by `/`) are those of `path` from byte
/// `start`, each whole: `name` there, followed by a `/` or the end.
fn names_at(path: &[u8], start: usize, name: &str) -> bool {
    let rest = &path[start..];
    rest.starts_with(name.as_bytes()) && rest.get(name.len()).is_none_or(|c| *c == b'/')
}

impl DenyFloor {
    /// The protected area that covers `path`, as a path (`dir/prefix*` for a name prefix).
    pub fn area_of(&self, path: &Path) -> Option<PathBuf> {
        self.entries().find(|e| e.covers(path)).map(|e| match e {
            FloorEntry::Tree { root, .. } => root.clone(),
            FloorEntry::NamePrefix { dir, prefix } => dir.join(format!("{prefix}*")),
            FloorEntry::Component(name) => PathBuf::from(name),
        })
    }

    /// This floor with `places` too (another account's `~/.ssh`, found where it is by
    /// the home entries' names): each protected as this user's own entries are, and, being a
    /// place rather than a name, covered for children too. A place already inside a place of
    /// the floor adds nothing.
    pub fn with_places(mut self, places: impl IntoIterator<Item = PathBuf>) -> Self {
        for root in places {
            let root = normalize_lexically(&root);
            let known = self
                .entries()
                .any(|e| !matches!(e, FloorEntry::Component(_)) && e.covers(&root));
            if root.is_absolute() && !known {
                self.extend([FloorEntry::tree(root, None)]);
            }
        }
        self
    }

    /// This floor with toolcap's scratch directories in each of `temp_dirs`: every directory
    /// there whose name begins with [`CHILD_HOMES_PREFIX`] or [`GUARD_HOME_PREFIX`], another
    /// process's as much as this one's. What a child or a guarded server keeps in its home (a
    /// token, a credential cache) is its own, not a tool's, nor another child's: the kernel
    /// layer leaves a child only its own home of them (docs/semantics.md, "Paths").
    pub fn with_scratch(mut self, temp_dirs: impl IntoIterator<Item = PathBuf>) -> Self {
        let mut entries = Vec::new();
        for dir in temp_dirs {
            let dir = normalize_lexically(&dir);
            if !dir.is_absolute() || dir.as_os_str() == "/" {
                continue;
            }
            for prefix in [CHILD_HOMES_PREFIX, GUARD_HOME_PREFIX] {
                let entry = FloorEntry::NamePrefix {
                    dir: dir.clone(),
                    prefix,
                };
                if !entries.contains(&entry) && !self.entries().any(|e| e == &entry) {
                    entries.push(entry);
                }
            }
        }
        self.extend(entries);
        self
    }

    /// This floor with every area also where `real` says it really leads (a home directory or
    /// `/etc` reached through a symbolic link is protected under both names).
    pub fn with_real(mut self, real: impl Fn(&Path) -> PathBuf) -> Self {
        let mut extra = Vec::new();
        for entry in self.entries() {
            match entry {
                FloorEntry::Tree { root, except } => {
                    let resolved = real(root);
                    if &resolved != root {
                        extra.push(FloorEntry::tree(resolved, except.as_deref().map(&real)));
                    }
                }
                FloorEntry::NamePrefix { dir, prefix } => {
                    let resolved = real(dir);
                    if &resolved != dir {
                        extra.push(FloorEntry::NamePrefix {
                            dir: resolved,
                            prefix,
                        });
                    }
                }
                FloorEntry::Component(_) => {}
            }
        }
        self.extend(extra);
        self
    }

    /// The protected areas as paths for the kernel layer, leaving out those a personality root
    /// lies inside (lifted). Entries of a directory that start with a prefix are written
    /// `dir/prefix*`; component entries (no known home) have no path and are left out.
    pub fn areas(&self, personality_roots: &[PathBuf]) -> Vec<PathBuf> {
        self.entries()
            .filter_map(|entry| {
                let area = match entry {
                    FloorEntry::Tree { root, .. } => root.clone(),
                    FloorEntry::NamePrefix { dir, prefix } => dir.join(format!("{prefix}*")),
                    FloorEntry::Component(_) => return None,
                };
                let lifted = personality_roots.iter().any(|r| entry.covers(r));
                (!lifted).then_some(area)
            })
            .collect()
    }
}

impl Default for DenyFloor {
    /// The floor with no known home directory (the stricter one).
    fn default() -> Self {
        Self::new(None)
    }
}

/// Intersects declared paths with a personality's list for one access. Each declared path
/// under a personality root is kept; a declared path that contains personality roots is
/// narrowed to them (and reported); one that meets no personality root is dropped. The result
/// is never wider than either side.
pub fn intersect_paths(
    declared: &[PathBuf],
    personality: &[PathBuf],
    field: &str,
) -> Intersection<PathBuf> {
    let mut out = Intersection::default();
    for d in declared {
        let shown = d.display().to_string();
        if !d.is_absolute() || d.components().any(|c| matches!(c, Component::ParentDir)) {
            out.dropped.push(Dropped::new(
                &shown,
                format!("{shown} is not a normalised absolute path"),
            ));
            continue;
        }
        let d = normalize_lexically(d);
        if personality.iter().any(|p| d.starts_with(p)) {
            out.granted.push(d);
            continue;
        }
        let inner: Vec<&PathBuf> = personality.iter().filter(|p| p.starts_with(&d)).collect();
        if inner.is_empty() {
            out.dropped.push(Dropped::new(
                &shown,
                format!("{shown} is outside every path of the personality's {field}"),
            ));
        } else {
            out.dropped.push(Dropped::new(
                &shown,
                format!(
                    "{shown} is wider than the personality's {field}; narrowed to {}",
                    inner
                        .iter()
                        .map(|p| p.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
            out.granted.extend(inner.into_iter().cloned());
        }
    }
    out.granted.sort();
    out.granted.dedup();
    // A root inside another granted root adds nothing; sorted order puts parents first.
    let mut kept: Vec<PathBuf> = Vec::with_capacity(out.granted.len());
    for root in out.granted.drain(..) {
        if !kept.iter().any(|k| root.starts_with(k)) {
            kept.push(root);
        }
    }
    out.granted = kept;
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pb(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    #[test]
    fn deny_matching_ignores_case_by_component() {
        let w = |p: &str, r: &str| is_within_any_case(Path::new(p), Path::new(r));
        assert!(w("/srv/App/.ENV", "/srv/app/.env"));
        assert!(w("/srv/app/SECRETS/k", "/srv/app/secrets"));
        assert!(!w("/srv/app/secretsx", "/srv/app/secrets"));
        assert!(!w("/srv/app", "/srv/app/secrets"));
        assert!(w("/x", "/"));
        assert!(
            w("/srv/ÄPP/.env", "/srv/äpp/.env"),
            "every letter, as a case table folds it"
        );
    }

    #[test]
    fn component_coverage_not_string_prefix() {
        assert!(is_within(Path::new("/anything"), Path::new("/")));
        assert!(is_within(Path::new("/"), Path::new("/")));
        assert!(
            is_normalized_absolute(Path::new("/a/b")) && is_normalized_absolute(Path::new("/"))
        );
        for not_normal in ["/a/", "/a//b", "/a/./b", "/a/..", "a/b", "", "/."] {
            assert!(
                !is_normalized_absolute(Path::new(not_normal)),
                "{not_normal}"
            );
        }
        assert!(is_within(Path::new("/srv/up/x"), Path::new("/srv/up")));
        assert!(is_within(Path::new("/srv/up"), Path::new("/srv/up")));
        assert!(!is_within(Path::new("/srv/uploads"), Path::new("/srv/up")));
        assert!(!is_within(Path::new("/srv"), Path::new("/srv/up")));
    }

    #[test]
    fn relative_and_dotdot_resolution() {
        let wd = Path::new("/work/session");
        assert_eq!(
            resolve_path(Path::new("a.txt"), wd).unwrap(),
            pb("/work/session/a.txt")
        );
        assert_eq!(
            resolve_path(Path::new("./a/../b"), wd).unwrap(),
            pb("/work/session/b")
        );
        assert_eq!(
            resolve_path(Path::new("../../../../etc/passwd"), wd).unwrap(),
            pb("/etc/passwd")
        );
        assert_eq!(
            resolve_path(Path::new("/srv/data/../../etc"), wd).unwrap(),
            pb("/etc")
        );
        assert!(
            resolve_path(Path::new("a\0b"), wd)
                .unwrap_err()
                .contains("NUL")
        );
        assert!(resolve_path(Path::new(""), wd).is_err());
        assert!(
            resolve_path(Path::new("x"), Path::new("rel"))
                .unwrap_err()
                .contains("not absolute")
        );
    }

    #[test]
    fn a_relative_path_resolves_as_its_normalised_join_whatever_the_working_directory() {
        // The plain join is returned as is only when it is already what normalising gives.
        let dirs = [
            "/", "/w", "/w/x", "/w/x/", "/w/./x", "/w/../x", "/w//x", "/..",
        ];
        let paths = [
            "a", "a/b", "a/", "./a", "a/.", "..", "a/../b", "a//b", ".", "...", "a/.../b",
        ];
        for dir in dirs {
            for path in paths {
                let got = resolve_path(Path::new(path), Path::new(dir)).unwrap();
                let want = normalize_lexically(&Path::new(dir).join(path));
                assert_eq!(got, want, "{path} under {dir}");
                assert!(is_normalized_absolute(&got), "{path} under {dir}: {got:?}");
            }
        }
    }

    /// The snap places (no leading dot) are places beneath a known home, and runs of names
    /// anywhere in a path when the home is unknown, matched at whole names only.
    #[test]
    fn the_snap_profiles_are_floor_places_with_a_home_or_without() {
        let known = DenyFloor::new(Some(Path::new("/home/ada")));
        let blind = DenyFloor::new(None);
        let root = [pb("/")];
        for (floor, blocked) in [
            (
                &known,
                "/home/ada/snap/chromium/common/chromium/Default/Cookies",
            ),
            (
                &known,
                "/home/ada/snap/firefox/common/.mozilla/firefox/p/key4.db",
            ),
            (&known, "/home/ada/snap/thunderbird/common/.thunderbird"),
            (
                &blind,
                "/srv/u/snap/chromium/common/chromium/Default/Cookies",
            ),
            (&blind, "/snap/chromium/common/chromium"),
            (
                &blind,
                "/x/snap/thunderbird/common/.thunderbird/p/logins.json",
            ),
        ] {
            assert!(floor.blocks(&pb(blocked), &root), "{blocked}");
        }
        for (floor, open) in [
            (&known, "/home/ada/snap/chromium/common/Downloads/a.pdf"),
            (
                &known,
                "/home/bob/snap/chromium/common/chromium/Default/Cookies",
            ),
            (
                &blind,
                "/srv/u/mysnap/chromium/common/chromium/Default/Cookies",
            ),
            (&blind, "/srv/u/snap/chromium/common/chromium-old/x"),
            (&blind, "/srv/u/snap/chromium/common"),
        ] {
            assert!(!floor.blocks(&pb(open), &root), "{open}");
        }
    }

    /// Toolcap's scratch directories in each temporary directory are floor places, by their
    /// names' prefixes: another process's as much as this one's, and only those.
    #[test]
    fn the_scratch_directories_are_floor_places() {
        let floor = DenyFloor::new(Some(Path::new("/home/ada"))).with_scratch([
            pb("/tmp"),
            pb("/run/user/1000/tmp/"),
            pb("/tmp"),
            pb("rel"),
            pb("/"),
        ]);
        for blocked in [
            "/tmp/toolcap-home-AbC123",
            "/tmp/toolcap-home-AbC123/d/toolcap-home-x/.cache/token",
            "/tmp/toolcap-guard-Q1/d/memory.json",
            "/run/user/1000/tmp/toolcap-home-z/d",
        ] {
            assert!(floor.blocks(&pb(blocked), &[pb("/")]), "{blocked}");
        }
        for open in [
            "/tmp",
            "/tmp/toolcap-homework/x",
            "/tmp/other/toolcap-home-x",
            "/srv/toolcap-home-x",
            "/toolcap-home-x",
        ] {
            assert!(!floor.blocks(&pb(open), &[pb("/")]), "{open}");
        }
        // Named twice, added once; a relative directory or `/` adds nothing.
        let once = DenyFloor::new(Some(Path::new("/home/ada")))
            .with_scratch([pb("/tmp"), pb("/run/user/1000/tmp")]);
        assert_eq!(floor, once);
        // A personality root inside one lifts it, as for any floor place.
        let root = pb("/tmp/toolcap-guard-Q1");
        assert!(!floor.blocks(
            &pb("/tmp/toolcap-guard-Q1/d/m"),
            std::slice::from_ref(&root)
        ));
    }

    #[test]
    fn deny_floor() {
        let floor = DenyFloor::new(Some(Path::new("/home/ada")));
        let root = [pb("/")];
        for blocked in [
            "/home/ada/.ssh/id_ed25519",
            "/home/ada/.aws",
            "/home/ada/.netrc",
            "/etc/shadow",
            "/etc/shadow-",
            "/etc/gshadow-",
            "/etc/sudoers",
            "/etc/sudoers.d/x",
            "/etc/ssh/ssh_host_rsa_key",
            "/etc/ssl/private",
            "/etc/ssl/private/x.key",
            "/proc/self/environ",
            "/sys/kernel",
            "/dev/sda",
            "/dev",
        ] {
            assert!(floor.blocks(Path::new(blocked), &root), "{blocked}");
        }
        for open in [
            "/dev/null",
            "/etc/passwd",
            "/home/ada/.sshx",
            "/home/bob/.ssh",
            "/etc/sudo.conf",
            "/etc/shadow.d",
            "/etc/ssh/sshd_config",
            "/etc/ssl/certs/x.pem",
            "/procfs",
        ] {
            assert!(!floor.blocks(Path::new(open), &root), "{open}");
        }
        // An explicit personality root inside a protected area lifts it for that subtree only.
        assert!(!floor.blocks(Path::new("/proc/cpuinfo"), &[pb("/proc")]));
        assert!(!floor.blocks(Path::new("/proc/cpuinfo"), &[pb("/proc/cpuinfo")]));
        assert!(floor.blocks(Path::new("/proc/self/environ"), &[pb("/proc/cpuinfo")]));
        assert!(floor.blocks(Path::new("/proc/cpuinfo"), &[pb("/")]));
        // Without a home directory, every such directory is protected.
        assert!(
            floor.overlaps(Path::new("/"))
                && floor.overlaps(Path::new("/home/ada"))
                && floor.overlaps(Path::new("/proc/1"))
        );
        assert!(floor.overlaps(Path::new("/etc")) && floor.overlaps(Path::new("/etc/sudoers.d")));
        assert!(floor.overlaps(Path::new("/etc/ssl")) && floor.overlaps(Path::new("/etc/ssh")));
        assert!(
            !floor.overlaps(Path::new("/srv/data"))
                && !floor.overlaps(Path::new("/etc/ssl/certs"))
                && !floor.overlaps(Path::new("/home/bob"))
        );
        let blind = DenyFloor::new(None);
        for no_home in ["/", "//", "/tmp/..", "home/ada"] {
            assert_eq!(DenyFloor::new(Some(Path::new(no_home))), blind, "{no_home}");
        }
        assert!(blind.blocks(Path::new("/home/bob/.ssh/id_rsa"), &root));
        assert!(blind.blocks(Path::new("/srv/x/.aws/credentials"), &root));
        assert!(blind.blocks(Path::new("/srv/x/.netrc"), &root));
        assert!(!blind.blocks(Path::new("/srv/x/.netrcx"), &root));
        assert!(!blind.blocks(Path::new("/srv/x.ssh/key"), &root));
        // More components that begin with a dot than `blocks` notes: each still looked at.
        let deep = "/.a/.b/.c/.d/.e/.f/.g/.h/.i";
        assert!(blind.blocks(Path::new(&format!("{deep}/.config/gh/hosts.yml")), &root));
        assert!(!blind.blocks(Path::new(&format!("{deep}/.config/other")), &root));
        assert!(blind.blocks(Path::new("/srv/.config/gh"), &root));
        assert!(!blind.blocks(Path::new("/srv/.config/ghost"), &root));
    }

    #[test]
    fn the_entries_of_other_homes_are_protected_where_they_are() {
        let places = [pb("/home/bob/.ssh"), pb("/home/bob/.config/gh")];
        let root = [pb("/")];
        for floor in [
            DenyFloor::new(Some(Path::new("/home/ada"))).with_places(places.clone()),
            DenyFloor::new(None).with_places(places.clone()),
        ] {
            assert!(floor.blocks(Path::new("/home/bob/.ssh/id_rsa"), &root));
            assert!(floor.blocks(Path::new("/home/bob/.config/gh/hosts.yml"), &root));
            let areas = floor.areas(&root);
            assert!(areas.contains(&pb("/home/bob/.ssh")), "{areas:?}");
            assert!(areas.contains(&pb("/home/bob/.config/gh")), "{areas:?}");
            assert!(!areas.contains(&pb("/home/bob/.aws")), "{areas:?}");
        }
        // This user's own entries, or places inside the floor, add nothing.
        let own = DenyFloor::new(Some(Path::new("/home/bob")));
        assert_eq!(own.clone().with_places(places.clone()), own);
        let system = DenyFloor::new(None);
        assert_eq!(system.clone().with_places([pb("/proc/x/.ssh")]), system);
    }

    #[test]
    fn without_a_home_every_protected_name_is_found_wherever_it_appears() {
        // `blocks` passes over paths with no component that begins with a dot.
        assert!(HOME_ENTRIES.iter().all(|name| name.starts_with('.')));
        let blind = DenyFloor::new(None);
        let root = [pb("/")];
        let mut blocked = 0;
        // Every path of up to five pieces from an alphabet of near misses, protected names and
        // the parts of the places of two components among them: blocked exactly when some of
        // its components, one after another, are one of the places.
        let pieces = [
            "/",
            ".",
            "ssh",
            ".ssh",
            ".aws",
            "x",
            ".netrc",
            ".config",
            "gh",
            ".cargo",
            "credentials",
            "s",
        ];
        for p in super::super::every_joining(&pieces, 5) {
            let path = format!("/{p}");
            let parts: Vec<&str> = path.split('/').skip(1).collect();
            let named = HOME_ENTRIES.iter().any(|entry| {
                let entry: Vec<&str> = entry.split('/').collect();
                parts.windows(entry.len()).any(|w| w == entry.as_slice())
            });
            let outside = ["/proc", "/sys", "/dev", "/etc"]
                .iter()
                .any(|area| is_within(Path::new(&path), Path::new(area)));
            if !outside {
                assert_eq!(blind.blocks(Path::new(&path), &root), named, "{path}");
                blocked += usize::from(named);
            }
        }
        assert!(blocked > 1000, "the alphabet reaches the names ({blocked})");
    }

    #[test]
    fn path_intersection_never_widens() {
        let personality = [pb("/srv/data"), pb("/srv/out")];
        let i = intersect_paths(
            &[pb("/srv/data/a"), pb("/etc"), pb("/srv")],
            &personality,
            "fs_reach.read",
        );
        assert_eq!(i.granted, [pb("/srv/data"), pb("/srv/out")]);
        assert_eq!(i.dropped.len(), 2);
        assert!(i.dropped[0].reason.contains("outside every path"));
        assert!(
            i.dropped[1]
                .reason
                .contains("narrowed to /srv/data, /srv/out")
        );
        let i = intersect_paths(&[pb("/srv/up")], &[pb("/srv/uploads")], "fs_reach.write");
        assert!(i.granted.is_empty());
        let i = intersect_paths(&[pb("/srv/data/../../etc")], &personality, "fs_reach.read");
        assert!(i.granted.is_empty(), "{i:?}");
        let i = intersect_paths(&[pb("/srv/data")], &[], "fs_reach.read");
        assert!(i.granted.is_empty() && i.dropped.len() == 1);
    }
}
