//! Where code would run from, outside any sandbox, if a tool wrote there: git's places of a
//! repository, the shells' startup files, what agents, editors and build tools read from a
//! project (docs/policy.md, "Git's hooks and configuration", "Shell startup files", "What agents
//! and editors run", "What build tools run"). Decided from a path's spelling.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The names of the files in a git directory whose settings can make git run a command
/// (`core.fsmonitor`, `core.hooksPath`, `core.pager`, an alias starting with `!`, ...), and of
/// the one that names another git directory to take the hooks and configuration from
/// (`commondir`, which git reads in any git directory, not only a linked worktree's).
const GIT_CONFIG_NAMES: [&[u8]; 3] = [b"config", b"config.worktree", b"commondir"];

/// Where git, run by the user later and outside any sandbox, would find code to run, as the
/// area that keeps `path` from writes (docs/policy.md, "Git's hooks and configuration"): a
/// `.git` itself (a repository's directory, or the file that points at one), its `hooks` and
/// everything under them, its `config`, `config.worktree` and `commondir`, and the same of the git
/// directories kept inside it (`modules/…` of submodules, `worktrees/…` of linked worktrees).
/// `None` for anything else, the rest of a `.git` among it (objects, refs, the index). Decided
/// from the path's spelling; `path` must be normalised and absolute, as the checks have it.
///
/// ```
/// use capability_core::matching::path::git_run_area;
/// use std::path::Path;
/// let area = |p: &str| git_run_area(Path::new(p)).map(|a| a.display().to_string());
/// assert_eq!(area("/r/.git/hooks/pre-commit").as_deref(), Some("/r/.git/hooks"));
/// assert_eq!(area("/r/.git/config").as_deref(), Some("/r/.git/config"));
/// assert_eq!(area("/r/.git/objects/ab/cd"), None);
/// assert_eq!(area("/r/src/main.rs"), None);
/// ```
pub fn git_run_area(path: &Path) -> Option<PathBuf> {
    folded(path, |p| git_run_area_as_written(p).map(|area| (area, ()))).map(|(area, ())| area)
}

/// `find` of `path` with each name folded as a file system that does not tell names apart
/// folds it ([`capability_types::fold_name`]): such a file system (Windows' drives under WSL,
/// exFAT, ext4 or tmpfs with casefold, HFS+) takes `.Git/HOOKS`, `.g\u{131}t/hooks` and
/// `.claude\u{200D}` for `.git/hooks` and `.claude`, so the names are matched as it would
/// (docs/policy.md, "Names in any case"). The area found is the same part of `path` as
/// written: as many names from the start, since folding keeps every `/`.
fn folded<T>(path: &Path, find: impl Fn(&Path) -> Option<(PathBuf, T)>) -> Option<(PathBuf, T)> {
    let bytes = path.as_os_str().as_bytes();
    let std::borrow::Cow::Owned(folded) = capability_types::fold_path(bytes) else {
        return find(path);
    };
    let (area, what) = find(Path::new(std::ffi::OsStr::from_bytes(&folded)))?;
    let names = area.as_os_str().as_bytes().split(|b| *b == b'/').count();
    let len = bytes
        .split(|b| *b == b'/')
        .take(names)
        .map(|name| name.len() + 1)
        .sum::<usize>()
        .saturating_sub(1)
        .min(bytes.len());
    Some((
        PathBuf::from(std::ffi::OsStr::from_bytes(&bytes[..len])),
        what,
    ))
}

/// [`git_run_area`] of `path` as it is spelled.
fn git_run_area_as_written(path: &Path) -> Option<PathBuf> {
    let bytes = path.as_os_str().as_bytes();
    // Most paths name no `.git` at all: one pass finds out.
    if !bytes.windows(5).any(|w| w == b"/.git") {
        return None;
    }
    let parts: Vec<&[u8]> = bytes.split(|c| *c == b'/').collect();
    let at = parts.iter().position(|c| *c == b".git")?;
    // The path up to and with its part `n` (each part but the last followed by its `/`).
    let through = |n: usize| {
        let len = parts[..=n].iter().map(|p| p.len() + 1).sum::<usize>() - 1;
        PathBuf::from(std::ffi::OsStr::from_bytes(&bytes[..len]))
    };
    let rest = &parts[at + 1..];
    let config = |name: &&[u8]| GIT_CONFIG_NAMES.contains(name);
    match rest {
        [] => Some(path.to_path_buf()),
        [name] if config(name) => Some(path.to_path_buf()),
        [b"hooks", ..] => Some(through(at + 1)),
        [b"modules" | b"worktrees", inner @ ..] => {
            if let Some(i) = inner.iter().position(|c| *c == b"hooks") {
                return Some(through(at + 2 + i));
            }
            inner
                .last()
                .filter(|name| config(name))
                .map(|_| path.to_path_buf())
        }
        _ => None,
    }
}

/// What would run code from a place a tool may not write, and when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RunsLater {
    /// Git, when the user next runs it in the repository ([`git_run_area`]).
    Git,
    /// A shell as it starts (`.bashrc`, `.profile`, `.zshrc`, fish's configuration), git as it
    /// reads the user's configuration (`.gitconfig`, `.config/git/config`), the user's login
    /// session (`.pam_environment`, `.xprofile`, systemd user units, autostart entries), or a
    /// program the user starts (an editor, a debugger, an interpreter, kubectl, direnv at a
    /// `cd`), or a command first on the `PATH`.
    Startup,
    /// An AI agent's client or an editor, when it next opens the project: the hooks, plugins
    /// and MCP servers of `.mcp.json`, `opencode.json`, `crush.json`, `.claude`, `.cursor`,
    /// `.codex`, `.agents`, `.gemini`, `.kiro`, `.roo`, `.continue`, `.windsurf`, `.clinerules`,
    /// `.opencode`, `.qwen`, `.kilocode`, `.amazonq` and `.junie`, aider's lint and test
    /// commands, the tasks, servers and run configurations of `.vscode`, `.zed`, `.helix` and
    /// `.idea`.
    Client,
    /// A build tool or package manager, when the user next builds or installs in the project:
    /// cargo's `.cargo/config.toml`, rustup's `rust-toolchain.toml`, npm's `.npmrc`, yarn's
    /// `.yarnrc.yml`, pnpm's `.pnpmfile.cjs`, bun's `bunfig.toml`, Maven's `.mvn` and `.mavenrc`,
    /// sbt's `.jvmopts` and `.sbtopts`, Gradle's init scripts and properties, Bundler's
    /// `.bundle`, and a dev container's configuration.
    Build,
    /// Mercurial, when the user next runs it in the repository: the hooks and extensions of
    /// its `.hg/hgrc`.
    Mercurial,
    /// A name of the form of a Windows short name (`GIT~1`, `CLAUDE~1`, `MCP~1.JSO`), which a
    /// drive that makes them (Windows' drives under WSL) takes for a longer name, perhaps one
    /// of the places above.
    ShortName,
}

impl RunsLater {
    /// What runs code from such a place, and when, as a refusal says it.
    pub fn why(self) -> &'static str {
        match self {
            RunsLater::Git => {
                "git runs the hooks and configuration of a repository outside any sandbox, when \
                 the user next runs git there"
            }
            RunsLater::Client => {
                "an AI agent's client or an editor runs what it says when it next opens the \
                 project, outside any sandbox"
            }
            RunsLater::Startup => {
                "a shell, git, the user's login session or a program the user starts reads it \
                 as it starts, and runs what \
                 it says outside any sandbox"
            }
            RunsLater::Build => {
                "a build tool or package manager (cargo, rustup, npm, yarn, pnpm, bun, Maven, sbt, \
                 Gradle, Bundler) or \
                 a dev container runs what it names when the user next builds or installs in \
                 the project, outside any sandbox"
            }
            RunsLater::Mercurial => {
                "Mercurial runs the hooks and loads the extensions a repository's .hg/hgrc \
                 names, outside any sandbox, when the user next runs hg there"
            }
            RunsLater::ShortName => {
                "the name has the form of a Windows short name, which a drive that makes them \
                 (a Windows drive under WSL) takes for a longer name, perhaps `.git`, `.claude` \
                 or another place whose code runs outside any sandbox; write the long name"
            }
        }
    }
}

/// The files in a project whose commands an agent's client runs as it opens it or as it works
/// there: the MCP servers of `.mcp.json` (Claude Code), `opencode.json` and `opencode.jsonc`
/// (OpenCode), `crush.json` and `.crush.json` (Crush), and the lint and test commands of
/// `.aider.conf.yml` (aider runs them after its edits).
const CLIENT_FILES: [&[u8]; 6] = [
    b".mcp.json",
    b"opencode.json",
    b"opencode.jsonc",
    b"crush.json",
    b".crush.json",
    b".aider.conf.yml",
];

/// The files in a project (in any directory of it) that a build tool or package manager reads
/// as the user builds or installs there, and whose settings name a program it runs: rustup's
/// toolchain file (`path` = a toolchain of any binaries), npm's `.npmrc` (`node-options`,
/// `script-shell`), yarn's (`yarnPath`, `yarn-path`), bun's `bunfig.toml` (`preload`), pnpm's
/// hooks (`.pnpmfile.cjs`, run at every install), the dev container file VS Code offers to
/// open (its `initializeCommand` runs on the host), Maven's `.mavenrc` (its launcher sources it
/// as shell code before every `mvn`) and sbt's `.jvmopts` and `.sbtopts` (the JVM's options, a
/// `-javaagent` among them, read in the project by sbt's launcher).
const BUILD_FILES: [&[u8]; 11] = [
    b"rust-toolchain.toml",
    b"rust-toolchain",
    b".npmrc",
    b".yarnrc.yml",
    b".yarnrc",
    b"bunfig.toml",
    b".devcontainer.json",
    b".pnpmfile.cjs",
    b".mavenrc",
    b".jvmopts",
    b".sbtopts",
];

/// Mercurial's configuration of a repository, which it reads at every `hg` command there: a
/// hook (`[hooks] pre-status = …`, run before `hg status`) or an extension
/// (`[extensions] x = /path/x.py`, Python loaded into every command) runs a program.
const HG_CONFIGS: [&[u8]; 1] = [b"/.hg/hgrc"];

/// cargo's configuration, which it reads in the directory it builds in and every one above it
/// (`build.rustc-wrapper`, a target's `runner` and `linker` run at the next `cargo build`).
const CARGO_CONFIGS: [&[u8]; 2] = [b"/.cargo/config.toml", b"/.cargo/config"];

/// What Gradle reads from its user home at every build: the init scripts it runs before the
/// build's own (`init.gradle`, `init.gradle.kts`, everything under `init.d`) and the properties
/// it starts its daemon with (`org.gradle.jvmargs`, a `-javaagent` among them).
const GRADLE_FILES: [&[u8]; 3] = [
    b"/.gradle/init.gradle",
    b"/.gradle/init.gradle.kts",
    b"/.gradle/gradle.properties",
];

/// The directory of Gradle's init scripts (see [`GRADLE_FILES`]).
const GRADLE_DIRS: [&[u8]; 1] = [b"/.gradle/init.d"];

/// The dev container directory (`.devcontainer/devcontainer.json` and the files it names), and
/// Maven's (`.mvn/jvm.config`'s options, a `-javaagent` among them, and the extensions of
/// `.mvn/extensions.xml`, loaded at the next `mvn` or `./mvnw`), and Bundler's (`.bundle/config`
/// names the Gemfile `bundle exec` evaluates, in the project or the home).
const BUILD_DIRS: [&[u8]; 3] = [b".devcontainer", b".mvn", b".bundle"];

/// The directories in a project whose settings make an agent's client or an editor run a
/// command as it opens the project, or as the user works in it: Claude Code's hooks, status
/// line and MCP servers; Cursor's, Codex's (and its `.agents` skills, which Codex keeps
/// read-only itself), Gemini CLI's, Kiro's, Roo Code's and Continue's MCP servers; VS Code's
/// tasks (some run when the folder opens) and settings that name programs; Zed's language
/// servers and context servers; Helix's language servers (`.helix/languages.toml`, loaded
/// for a workspace the user once trusted, whatever it holds now); JetBrains' run configurations; Windsurf's hooks and MCP servers
/// (`.windsurf/hooks.json`, `mcp_config.json`), Cline's hook scripts (`.clinerules/hooks`),
/// OpenCode's plugins (`.opencode/plugin`), Qwen Code's MCP servers (`.qwen/settings.json`),
/// Kilo Code's (`.kilocode/mcp.json`), Amazon Q's agents with their hooks and MCP servers
/// (`.amazonq/cli-agents`, `.amazonq/mcp.json`) and Junie's MCP servers (`.junie/mcp`).
const CLIENT_DIRS: [&[u8]; 19] = [
    b".claude",
    b".cursor",
    b".codex",
    b".agents",
    b".gemini",
    b".kiro",
    b".roo",
    b".continue",
    b".vscode",
    b".zed",
    b".helix",
    b".idea",
    b".windsurf",
    b".clinerules",
    b".opencode",
    b".qwen",
    b".kilocode",
    b".amazonq",
    b".junie",
];

/// Where the git hook managers keep what a repository's hooks run, in its working tree: husky's
/// hook scripts (`core.hooksPath` is `.husky` or `.husky/_`, which calls them), and the
/// configurations pre-commit, lefthook and overcommit read at every commit to decide which
/// commands to run. Git runs them when the user next commits, outside any sandbox.
const HOOK_DIRS: [&[u8]; 1] = [b".husky"];

/// The hook managers' configuration files (see [`HOOK_DIRS`]).
const HOOK_FILES: [&[u8]; 10] = [
    b".pre-commit-config.yaml",
    b"lefthook.yml",
    b".lefthook.yml",
    b"lefthook.yaml",
    b".lefthook.yaml",
    b"lefthook-local.yml",
    b".lefthook-local.yml",
    b"lefthook-local.yaml",
    b".lefthook-local.yaml",
    b".overcommit.yml",
];

/// The names of the files bash, zsh and sh read as they start (and `.bash_aliases`, which the
/// `.bashrc` Debian and Ubuntu give every user reads), and those of csh and tcsh (`.cshrc`,
/// `.tcshrc`, `.login`, `.logout`), ksh and mksh (`.kshrc`, `.mkshrc`: their `ENV` when none is
/// set) and xonsh (`.xonshrc`); of git's user configuration (`core.hooksPath`, `core.fsmonitor`
/// and `!` aliases there run commands in every repository); and of what a graphical or PAM
/// login reads into the session (`.pam_environment`, `.xprofile`, `.xsessionrc`, `.xsession`,
/// `.xinitrc`: an `LD_PRELOAD` there, or a command); and of what the programs a user starts in
/// a terminal run as they start: R's and Octave's startup code and R's environment (`.Rprofile`,
/// `.Renviron`, `.octaverc`, read from the working directory first), irb's and pry's (likewise),
/// tmux's and screen's configuration (`run-shell`, `exec`), psql's and sqlite's (`\!`,
/// `.shell`), gdb's and lldb's (a home's are always read), and the editors' (vim's, emacs's: a
/// command there runs as the editor starts); and the debuggers' and interpreters' that read one
/// in the working directory as well as the home: pdb's `.pdbrc` (a `!` line is Python), IEx's
/// `.iex.exs`, GHCi's `.ghci` (`:!` runs a shell), the OCaml toplevel's `.ocamlinit` and the
/// Perl debugger's `.perldb`. Written in lower case, as they are matched ([`folded`]).
const STARTUP_NAMES: [&[u8]; 44] = [
    b".bashrc",
    b".bash_profile",
    b".bash_login",
    b".bash_logout",
    b".bash_aliases",
    b".profile",
    b".zshrc",
    b".zprofile",
    b".zshenv",
    b".zlogin",
    b".zlogout",
    b".cshrc",
    b".tcshrc",
    b".login",
    b".logout",
    b".kshrc",
    b".mkshrc",
    b".xonshrc",
    b".gitconfig",
    b".pam_environment",
    b".xprofile",
    b".xsessionrc",
    b".xsession",
    b".xinitrc",
    b".rprofile",
    b".renviron",
    b".octaverc",
    b".irbrc",
    b".pryrc",
    b".tmux.conf",
    b".screenrc",
    b".psqlrc",
    b".sqliterc",
    b".gdbinit",
    b".lldbinit",
    b".vimrc",
    b".gvimrc",
    b".exrc",
    b".emacs",
    b".pdbrc",
    b".iex.exs",
    b".ghci",
    b".ocamlinit",
    b".perldb",
];

/// The editors' own directories, whose every file the editor may run as it starts (vim's
/// `plugin` scripts, emacs's `init.el`).
const EDITOR_DIRS: [&[u8]; 2] = [b".vim", b".emacs.d"];

/// The directories whose every file a login or a shell runs or reads into the session: the
/// configuration of fish, nushell, PowerShell, xonsh and elvish, the user's systemd units
/// (started at login), the desktop's autostart entries and the session's environment
/// (`environment.d`), tmux's, neovim's and emacs's, Plasma's `env` scripts (sourced at login),
/// and what direnv and mise run at every `cd` (direnv's `direnvrc`, sourced before every
/// `.envrc`, and the prefixes its `direnv.toml` trusts; mise's global configuration, trusted
/// as it is, whose hooks and sourced scripts run).
const STARTUP_DIRS: [&[u8]; 14] = [
    b"/.config/fish",
    b"/.config/nushell",
    b"/.config/powershell",
    b"/.config/xonsh",
    b"/.config/elvish",
    b"/.config/systemd/user",
    b"/.config/autostart",
    b"/.config/environment.d",
    b"/.config/tmux",
    b"/.config/nvim",
    b"/.config/emacs",
    b"/.config/plasma-workspace/env",
    b"/.config/direnv",
    b"/.config/mise",
];

/// The files of a home a program the user starts reads as it starts, and runs what it says:
/// git's user configuration, rustup's `.cargo/env` (sourced by the `.profile` and `.bashrc` its
/// installer edits; `env.fish` by fish), kubectl's `.kube/config` (a user's credential plugin,
/// `exec`, runs at every command) and GHCi's `.ghc/ghci.conf`.
const STARTUP_FILES: [&[u8]; 5] = [
    b"/.config/git/config",
    b"/.cargo/env",
    b"/.cargo/env.fish",
    b"/.kube/config",
    b"/.ghc/ghci.conf",
];

/// The directories of a home outside `.config` whose files a program or the user's session runs
/// as it starts: Python's user site (`.local/lib/pythonX.Y/site-packages`, imported at every
/// Python start, where the `import` lines of a `.pth` file run, and `usercustomize`), Julia's
/// `startup.jl`, direnv's allow records (an `.envrc` recorded there runs at the next `cd`
/// without asking), and what a desktop session starts from `.local/share`: a desktop entry
/// (one of an application's name replaces the system's, and runs when the user opens it or a
/// file of its type), a user unit, a D-Bus service (started when a program asks for its name).
const HOME_DIRS: [&[u8]; 6] = [
    b"/.local/lib",
    b"/.julia/config",
    b"/.local/share/direnv",
    b"/.local/share/applications",
    b"/.local/share/systemd/user",
    b"/.local/share/dbus-1/services",
];

/// The directories whose commands a login puts first on the `PATH` (Debian's and Ubuntu's
/// `.profile` add `~/.local/bin` when it exists, and pip's and pipx's user installs fill it;
/// rustup's `.cargo/env` puts `~/.cargo/bin` first, and `cargo install` fills it): a `git` or an
/// `ls` there runs in the user's next terminal instead of the system's.
const PATH_DIRS: [&[u8]; 2] = [b"/.local/bin", b"/.cargo/bin"];

/// Every place [`runs_later`] names outside a repository's git directory, as a relative path
/// from the directory it is found in (kept in `capability-types`, where the kernel layer reads
/// it too: docs/policy.md, "Kept from children").
pub use capability_types::backend::RUNS_LATER_NAMES;

/// Where code would run from, outside any sandbox, if a tool wrote `path`, as the area that
/// keeps it from writes, and what runs it (docs/policy.md, "Git's hooks and configuration",
/// "Shell startup files", "What agents and editors run" and "What build tools run"): git's
/// places of a repository ([`git_run_area`]); the git hook managers' places in a working tree
/// (everything under a `.husky`, a `.pre-commit-config.yaml`, lefthook's and overcommit's
/// configurations); a file named as a shell's startup file or git's user configuration, in any
/// directory; `.config/git/config` and everything under `.config/fish`,
/// `.config/systemd/user`, `.config/autostart` and `.config/environment.d`; a `.mcp.json`, and
/// everything under a `.claude`, `.cursor`, `.codex`, `.gemini`, `.vscode` or `.idea`, in any
/// directory; a build tool's or package manager's configuration (`.cargo/config.toml`,
/// `rust-toolchain.toml`, `.npmrc`, `.yarnrc.yml`, `.pnpmfile.cjs`, `bunfig.toml`, `.mvn`, a
/// dev container's), in any directory; and, failing those, a name of the form of a Windows short
/// name (`GIT~1`, [`RunsLater::ShortName`]). Decided from the path's spelling, the names folded
/// as a file system that does not tell names apart folds them (`.Claude`, `.BASHRC`,
/// `.g\u{131}t`: one file there; [`capability_types::fold_name`]); `path` must be normalised
/// and absolute.
///
/// ```
/// use capability_core::matching::path::{RunsLater, runs_later};
/// use std::path::Path;
/// let runs = |p: &str| runs_later(Path::new(p)).map(|(_, what)| what);
/// assert_eq!(runs("/home/ada/.bashrc"), Some(RunsLater::Startup));
/// assert_eq!(runs("/home/ada/.config/fish/conf.d/x.fish"), Some(RunsLater::Startup));
/// assert_eq!(runs("/srv/repo/.git/config"), Some(RunsLater::Git));
/// assert_eq!(runs("/home/ada/.bashrc.orig"), None);
/// assert_eq!(runs("/srv/app/.claude/settings.json"), Some(RunsLater::Client));
/// assert_eq!(runs("/srv/app/.mcp.json"), Some(RunsLater::Client));
/// assert_eq!(runs("/srv/App/.CLAUDE/Settings.json"), Some(RunsLater::Client));
/// assert_eq!(runs("/srv/app/.husky/pre-commit"), Some(RunsLater::Git));
/// assert_eq!(runs("/srv/app/.pre-commit-config.yaml"), Some(RunsLater::Git));
/// ```
pub fn runs_later(path: &Path) -> Option<(PathBuf, RunsLater)> {
    folded(path, runs_later_as_written).or_else(|| {
        super::short::short_name_area(path.as_os_str().as_bytes())
            .map(|area| (area, RunsLater::ShortName))
    })
}

/// [`runs_later`] of `path` as it is spelled.
fn runs_later_as_written(path: &Path) -> Option<(PathBuf, RunsLater)> {
    if let Some(area) = git_run_area_as_written(path) {
        return Some((area, RunsLater::Git));
    }
    let bytes = path.as_os_str().as_bytes();
    let name = path.file_name()?.as_bytes();
    if HOOK_FILES.contains(&name) {
        return Some((path.to_path_buf(), RunsLater::Git));
    }
    if let Some(area) = component_area(bytes, &HOOK_DIRS) {
        return Some((area, RunsLater::Git));
    }
    if STARTUP_NAMES.contains(&name) || STARTUP_FILES.iter().any(|f| bytes.ends_with(f)) {
        return Some((path.to_path_buf(), RunsLater::Startup));
    }
    if CLIENT_FILES.contains(&name) {
        return Some((path.to_path_buf(), RunsLater::Client));
    }
    if let Some(area) = client_area(bytes) {
        return Some((area, RunsLater::Client));
    }
    if HG_CONFIGS.iter().any(|c| bytes.ends_with(c)) {
        return Some((path.to_path_buf(), RunsLater::Mercurial));
    }
    if BUILD_FILES.contains(&name)
        || CARGO_CONFIGS
            .iter()
            .chain(GRADLE_FILES.iter())
            .any(|c| bytes.ends_with(c))
    {
        return Some((path.to_path_buf(), RunsLater::Build));
    }
    // The directories below all start with a dot, and most paths have no such name.
    if !bytes.windows(2).any(|w| w == b"/.") {
        return None;
    }
    if let Some(area) = component_area(bytes, &BUILD_DIRS).or_else(|| dir_area(bytes, &GRADLE_DIRS))
    {
        return Some((area, RunsLater::Build));
    }
    if let Some(area) = component_area(bytes, &EDITOR_DIRS) {
        return Some((area, RunsLater::Startup));
    }
    if let Some(area) = dir_area(bytes, &PATH_DIRS).or_else(|| dir_area(bytes, &HOME_DIRS)) {
        return Some((area, RunsLater::Startup));
    }
    // Most paths have no `/.config/` at all: one pass finds out.
    if !bytes.windows(9).any(|w| w == b"/.config/") {
        return None;
    }
    dir_area(bytes, &STARTUP_DIRS).map(|area| (area, RunsLater::Startup))
}

/// The path up to and with the first of `dirs` (each `/`-led, of one or more names) that `path`
/// holds as whole names.
fn dir_area(path: &[u8], dirs: &[&[u8]]) -> Option<PathBuf> {
    dirs.iter().find_map(|dir| {
        // Every place it is spelled, not only the first (`/.config/fishy/.config/fish`).
        let end = path
            .windows(dir.len())
            .enumerate()
            .map(|(at, _)| at + dir.len())
            .find(|&end| path[..end].ends_with(dir) && (path.len() == end || path[end] == b'/'))?;
        Some(PathBuf::from(std::ffi::OsStr::from_bytes(&path[..end])))
    })
}

/// The first directory of `path` (normalised, absolute) named as one of [`CLIENT_DIRS`], with
/// the path up to and with it.
fn client_area(path: &[u8]) -> Option<PathBuf> {
    component_area(path, &CLIENT_DIRS)
}

/// The first part of `path` (normalised, absolute) named as one of `names` (each a dot and a
/// name), with the path up to and with it.
fn component_area(path: &[u8], names: &[&[u8]]) -> Option<PathBuf> {
    // Most paths have no part starting with a dot and the second letter of one of the names
    // (`/.c`, `/.g`, `/.v`, `/.i` for the clients'): one pass finds out.
    if !path
        .windows(3)
        .any(|w| w[..2] == *b"/." && names.iter().any(|n| n.get(1) == Some(&w[2])))
    {
        return None;
    }
    area_through_first(path, |part| names.contains(&part))
}

/// `path` up to and with its first name for which `is` holds.
pub(super) fn area_through_first(path: &[u8], is: impl Fn(&[u8]) -> bool) -> Option<PathBuf> {
    let mut end = 0;
    for part in path.split(|c| *c == b'/') {
        end += part.len();
        if is(part) {
            return Some(PathBuf::from(std::ffi::OsStr::from_bytes(&path[..end])));
        }
        end += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`RUNS_LATER_NAMES`] is the lists [`runs_later`] matches, no more and no less: each
    /// name, found in a directory, is a place it names, and so is everything beneath one that
    /// is a directory; and every list's entry is among the names.
    #[test]
    fn the_names_the_kernel_layer_keeps_are_those_runs_later_matches() {
        let listed: Vec<String> = STARTUP_NAMES
            .iter()
            .chain(CLIENT_FILES.iter())
            .chain(CLIENT_DIRS.iter())
            .chain(HOOK_DIRS.iter())
            .chain(HOOK_FILES.iter())
            .chain(BUILD_FILES.iter())
            .chain(BUILD_DIRS.iter())
            .chain(EDITOR_DIRS.iter())
            .map(|n| String::from_utf8(n.to_vec()).unwrap())
            .chain(
                CARGO_CONFIGS
                    .iter()
                    .chain(HG_CONFIGS.iter())
                    .chain(GRADLE_FILES.iter())
                    .chain(STARTUP_FILES.iter())
                    .chain(STARTUP_DIRS.iter())
                    .chain(PATH_DIRS.iter())
                    .chain(HOME_DIRS.iter())
                    .chain(GRADLE_DIRS.iter())
                    .map(|d| String::from_utf8(d[1..].to_vec()).unwrap()),
            )
            .collect();
        let mut names: Vec<&str> = RUNS_LATER_NAMES.to_vec();
        let mut want: Vec<&str> = listed.iter().map(String::as_str).collect();
        names.sort_unstable();
        want.sort_unstable();
        assert_eq!(names, want);
        for name in RUNS_LATER_NAMES {
            let place = Path::new("/srv/app").join(name);
            assert_eq!(
                runs_later(&place).map(|(area, _)| area),
                Some(place.clone()),
                "{name}"
            );
        }
    }

    // guarantee: G-FS-11
    /// Where case is not told apart, every spelling is the place: matched in any ASCII case,
    /// the area given as the path spells it.
    #[test]
    fn the_names_are_matched_in_any_case_and_given_back_as_spelled() {
        for (path, area) in [
            ("/srv/App/.CLAUDE/Settings.json", "/srv/App/.CLAUDE"),
            ("/srv/App/.Git/HOOKS/pre-commit", "/srv/App/.Git/HOOKS"),
            ("/srv/App/.Git/Config", "/srv/App/.Git/Config"),
            ("/H/.BashRC", "/H/.BashRC"),
            ("/H/.Config/Fish/x.fish", "/H/.Config/Fish"),
            (
                "/srv/App/Rust-Toolchain.TOML",
                "/srv/App/Rust-Toolchain.TOML",
            ),
        ] {
            assert_eq!(
                runs_later(Path::new(path)).map(|(a, _)| a),
                Some(PathBuf::from(area)),
                "{path}"
            );
        }
        assert_eq!(runs_later(Path::new("/srv/App/README.md")), None);
        assert_eq!(runs_later(Path::new("/srv/App/.BashRC.orig")), None);
    }

    // guarantee: G-FS-10
    /// A directory of the lists is found wherever it is spelled as whole names, not only where
    /// its spelling first appears.
    #[test]
    fn a_startup_directory_is_found_after_a_name_that_begins_like_it() {
        for (path, area) in [
            (
                "/h/.config/fishy/.config/fish/x.fish",
                "/h/.config/fishy/.config/fish",
            ),
            (
                "/h/.local/binaries/.local/bin/git",
                "/h/.local/binaries/.local/bin",
            ),
            ("/h/.local/bin", "/h/.local/bin"),
        ] {
            assert_eq!(
                runs_later(Path::new(path)).map(|(a, _)| a),
                Some(PathBuf::from(area)),
                "{path}"
            );
        }
        assert_eq!(runs_later(Path::new("/h/.local/binaries/x")), None);
        assert_eq!(runs_later(Path::new("/h/.config/fishy/x")), None);
    }

    // guarantee: G-FS-10
    #[test]
    fn shells_run_their_startup_files_and_nothing_named_like_them() {
        let runs = |p: &str| runs_later(Path::new(p)).map(|(a, w)| (a.display().to_string(), w));
        for path in [
            "/h/.bashrc",
            "/h/.bash_profile",
            "/h/.profile",
            "/h/.zshenv",
            "/h/.gitconfig",
            "/h/.config/git/config",
            "/h/.tcshrc",
            "/h/sub/.kshrc",
            "/h/sub/.bashrc",
            "/h/.bash_aliases",
            "/h/.pam_environment",
            "/h/.xprofile",
            "/h/.xsessionrc",
        ] {
            assert_eq!(
                runs(path),
                Some((path.to_owned(), RunsLater::Startup)),
                "{path}"
            );
        }
        for (path, area) in [
            ("/h/.config/fish", "/h/.config/fish"),
            ("/h/.config/fish/config.fish", "/h/.config/fish"),
            ("/h/.config/nushell/config.nu", "/h/.config/nushell"),
            ("/h/.config/elvish/rc.elv", "/h/.config/elvish"),
            ("/h/.config/fish/a/b", "/h/.config/fish"),
            ("/h/.config/autostart/x.desktop", "/h/.config/autostart"),
            (
                "/h/.config/systemd/user/x.service",
                "/h/.config/systemd/user",
            ),
            (
                "/h/.config/systemd/user/default.target.wants/x.service",
                "/h/.config/systemd/user",
            ),
            (
                "/h/.config/environment.d/50-x.conf",
                "/h/.config/environment.d",
            ),
        ] {
            assert_eq!(
                runs(path),
                Some((area.to_owned(), RunsLater::Startup)),
                "{path}"
            );
        }
        assert_eq!(
            runs("/r/.git/hooks/x"),
            Some(("/r/.git/hooks".to_owned(), RunsLater::Git))
        );
        for path in [
            "/h/.bashrc.orig",
            "/h/bashrc",
            "/h/.config/git/ignore",
            "/h/.config/nushellx",
            "/h/.tcshrc.bak",
            "/h/.config/fishy",
            "/h/.config/fish.bak/x",
            "/h/.config/systemd/system.conf",
            "/h/.config/autostarted/x",
            "/h/profile",
            "/",
        ] {
            assert_eq!(runs(path), None, "{path}");
        }
    }

    // guarantee: G-FS-10
    // guarantee: G-FS-11
    /// What debuggers, interpreters, rustup's environment, kubectl, direnv, mise, a desktop
    /// session, sbt, Gradle and Bundler read as they start is matched, with the area that
    /// keeps it; names that only begin like them are not.
    #[test]
    fn programs_and_sessions_run_what_they_read_as_they_start_and_nothing_named_like_it() {
        let runs = |p: &str| runs_later(Path::new(p)).map(|(a, w)| (a.display().to_string(), w));
        for (path, area, what) in [
            ("/p/.pdbrc", "/p/.pdbrc", RunsLater::Startup),
            ("/p/src/.iex.exs", "/p/src/.iex.exs", RunsLater::Startup),
            ("/p/.ghci", "/p/.ghci", RunsLater::Startup),
            ("/h/.ghc/ghci.conf", "/h/.ghc/ghci.conf", RunsLater::Startup),
            ("/p/.ocamlinit", "/p/.ocamlinit", RunsLater::Startup),
            ("/p/.perldb", "/p/.perldb", RunsLater::Startup),
            ("/h/.cargo/env", "/h/.cargo/env", RunsLater::Startup),
            ("/h/.cargo/bin/git", "/h/.cargo/bin", RunsLater::Startup),
            ("/h/.kube/config", "/h/.kube/config", RunsLater::Startup),
            (
                "/h/.local/lib/python3.11/site-packages/x.pth",
                "/h/.local/lib",
                RunsLater::Startup,
            ),
            (
                "/h/.julia/config/startup.jl",
                "/h/.julia/config",
                RunsLater::Startup,
            ),
            (
                "/h/.local/share/applications/x.desktop",
                "/h/.local/share/applications",
                RunsLater::Startup,
            ),
            (
                "/h/.local/share/direnv/allow/ab",
                "/h/.local/share/direnv",
                RunsLater::Startup,
            ),
            (
                "/h/.config/direnv/direnvrc",
                "/h/.config/direnv",
                RunsLater::Startup,
            ),
            (
                "/h/.config/mise/config.toml",
                "/h/.config/mise",
                RunsLater::Startup,
            ),
            (
                "/h/.config/plasma-workspace/env/x.sh",
                "/h/.config/plasma-workspace/env",
                RunsLater::Startup,
            ),
            ("/h/.mavenrc", "/h/.mavenrc", RunsLater::Build),
            ("/p/.jvmopts", "/p/.jvmopts", RunsLater::Build),
            ("/p/.sbtopts", "/p/.sbtopts", RunsLater::Build),
            (
                "/h/.gradle/init.gradle",
                "/h/.gradle/init.gradle",
                RunsLater::Build,
            ),
            (
                "/h/.gradle/init.d/x.gradle",
                "/h/.gradle/init.d",
                RunsLater::Build,
            ),
            ("/p/.bundle/config", "/p/.bundle", RunsLater::Build),
            ("/P/.PDBRC", "/P/.PDBRC", RunsLater::Startup),
        ] {
            assert_eq!(runs(path), Some((area.to_owned(), what)), "{path}");
        }
        for path in [
            "/p/pdbrc",
            "/p/.pdbrc.bak",
            "/h/.cargo/environment",
            "/h/.cargo/registry/x",
            "/h/.cargo/binaries/x",
            "/h/.kube/cache/x",
            "/h/.local/library/x",
            "/h/.local/share/x",
            "/h/.julia/logs/x",
            "/h/.gradle/caches/x",
            "/h/.gradle/init.d.bak",
            "/p/gradle.properties",
            "/p/bundle/config",
            "/h/.config/miser/x",
        ] {
            assert_eq!(runs(path), None, "{path}");
        }
    }

    // guarantee: G-FS-11
    #[test]
    fn agents_and_editors_run_their_project_configuration_and_nothing_named_like_it() {
        let runs = |p: &str| runs_later(Path::new(p)).map(|(a, w)| (a.display().to_string(), w));
        for (path, area) in [
            ("/p/.mcp.json", "/p/.mcp.json"),
            ("/p/web/.mcp.json", "/p/web/.mcp.json"),
            ("/p/.claude", "/p/.claude"),
            ("/p/.claude/settings.json", "/p/.claude"),
            ("/p/.claude/commands/a/b.md", "/p/.claude"),
            ("/p/.cursor/mcp.json", "/p/.cursor"),
            ("/p/.codex/config.toml", "/p/.codex"),
            ("/p/.gemini/settings.json", "/p/.gemini"),
            ("/p/.vscode/tasks.json", "/p/.vscode"),
            ("/p/.idea/workspace.xml", "/p/.idea"),
            ("/p/.agents/skills/deploy/SKILL.md", "/p/.agents"),
            ("/p/.kiro/settings/mcp.json", "/p/.kiro"),
            ("/p/.roo/mcp.json", "/p/.roo"),
            ("/p/.continue/mcpServers/db.yaml", "/p/.continue"),
            ("/p/.zed/settings.json", "/p/.zed"),
            ("/p/.helix/languages.toml", "/p/.helix"),
            ("/p/opencode.json", "/p/opencode.json"),
            ("/p/web/opencode.jsonc", "/p/web/opencode.jsonc"),
            ("/p/crush.json", "/p/crush.json"),
            ("/p/.crush.json", "/p/.crush.json"),
            ("/p/.aider.conf.yml", "/p/.aider.conf.yml"),
            ("/p/.windsurf/hooks.json", "/p/.windsurf"),
            ("/p/.clinerules/hooks/PreToolUse", "/p/.clinerules"),
            ("/p/.clinerules", "/p/.clinerules"),
            ("/p/.opencode/plugin/x.ts", "/p/.opencode"),
            ("/p/.qwen/settings.json", "/p/.qwen"),
            ("/p/.kilocode/mcp.json", "/p/.kilocode"),
            ("/p/.amazonq/cli-agents/a.json", "/p/.amazonq"),
            ("/p/.junie/mcp/mcp.json", "/p/.junie"),
            ("/.vscode/x", "/.vscode"),
            ("/p/.vscode/.claude/x", "/p/.vscode"),
        ] {
            assert_eq!(
                runs(path),
                Some((area.to_owned(), RunsLater::Client)),
                "{path}"
            );
        }
        for path in [
            "/p/.mcp.json.example",
            "/p/mcp.json",
            "/p/claude/settings.json",
            "/p/.claudeignore",
            "/p/.vscodeignore",
            "/p/.cursorrules",
            "/p/opencode.json.bak",
            "/p/docs/crush.md",
            "/p/.aider.chat.history.md",
            "/p/.windsurfrules",
            "/p/.codexx/config.toml",
            "/p/docs/.idea.md",
            "/p/.cache/x",
            "/p/.github/workflows/ci.yml",
            "/p/.agentsrc",
            "/p/.zedrc/x",
            "/p/roo/mcp.json",
            "/p/.continuerc.json",
        ] {
            assert_eq!(runs(path), None, "{path}");
        }
    }

    // guarantee: G-FS-09
    #[test]
    fn git_runs_code_from_hooks_and_config_and_nothing_else_of_a_git_directory() {
        let area = |p: &str| git_run_area(Path::new(p)).map(|a| a.display().to_string());
        for (path, want) in [
            ("/r/.git", "/r/.git"),
            ("/r/sub/.git", "/r/sub/.git"),
            ("/r/.git/hooks", "/r/.git/hooks"),
            ("/r/.git/hooks/pre-commit", "/r/.git/hooks"),
            ("/r/.git/hooks/a/b", "/r/.git/hooks"),
            ("/r/.git/config", "/r/.git/config"),
            ("/r/.git/config.worktree", "/r/.git/config.worktree"),
            ("/r/.git/commondir", "/r/.git/commondir"),
            (
                "/r/.git/worktrees/w/commondir",
                "/r/.git/worktrees/w/commondir",
            ),
            (
                "/r/.git/modules/lib/commondir",
                "/r/.git/modules/lib/commondir",
            ),
            ("/r/.git/modules/lib/config", "/r/.git/modules/lib/config"),
            (
                "/r/.git/modules/a/b/hooks/post-checkout",
                "/r/.git/modules/a/b/hooks",
            ),
            (
                "/r/.git/worktrees/w/config.worktree",
                "/r/.git/worktrees/w/config.worktree",
            ),
            ("/.git/config", "/.git/config"),
        ] {
            assert_eq!(area(path).as_deref(), Some(want), "{path}");
        }
        for path in [
            "/r/.git/HEAD",
            "/r/.git/index",
            "/r/.git/objects/ab/cdef",
            "/r/.git/refs/heads/main",
            "/r/.git/info/exclude",
            "/r/.git/logs/HEAD",
            "/r/.git/modules/lib/HEAD",
            "/r/.gitignore",
            "/r/.github/workflows/ci.yml",
            "/r/x.git/config",
            "/r/.gitconfig",
            "/r/.git2/config",
            "/r/config",
            "/r/hooks/pre-commit",
            "/",
        ] {
            assert_eq!(area(path), None, "{path}");
        }
    }
}
