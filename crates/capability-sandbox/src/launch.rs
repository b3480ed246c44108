//! What [`PreparedSandbox::spawn`](crate::PreparedSandbox::spawn) takes and gives: the program
//! to start, and the confined child it started.

use std::path::{Path, PathBuf};

use crate::{EgressReceiver, sys};

/// A program to start confined with [`PreparedSandbox::spawn`](crate::PreparedSandbox::spawn).
#[derive(Clone, Copy)]
pub struct Launch<'a> {
    /// The file to execute (absolute).
    pub program: &'a Path,
    /// What the program sees as `argv[0]`.
    pub arg0: &'a std::ffi::OsStr,
    /// The arguments after `argv[0]`.
    pub args: &'a [String],
    /// The whole environment of the child (nothing is inherited).
    pub env: &'a [(String, String)],
    /// The working directory.
    pub cwd: &'a Path,
    /// Whether the child's stdin is a pipe (returned in [`ConfinedChild::stdin`]) rather than
    /// `/dev/null`.
    pub stdin: bool,
    /// Of the places git runs code from in the child's write roots (a repository's git
    /// directory, its hooks, configuration and `commondir`, and its `.git` itself), and of those
    /// a shell or an agent's client runs code from (`.bashrc`, `.mcp.json`, `.claude`,
    /// `.vscode`, ...: `capability_types::backend::runs_later`), those the caller's policy lets
    /// children write; `None`: none. A git directory it does not name is read-only to the child
    /// whole; the others are kept from the child's writes (docs/policy.md, "Git's hooks and
    /// configuration", "Shell startup files", "What agents and editors run").
    pub git_writable: Option<&'a (dyn Fn(&Path) -> bool + Sync)>,
    /// Names of places whose contents run later outside any sandbox (`PathPolicy::
    /// runs_later_names`: `.bashrc`, `.claude`, `.config/fish`): each found where git's are
    /// looked for, and not [`git_writable`](Self::git_writable), is kept read-only. Those of
    /// [`RUNS_LATER_NAMES`](capability_types::backend::RUNS_LATER_NAMES) are kept whatever this
    /// holds (an empty list keeps them too); a caller's other names are kept beside them.
    pub runs_later: &'a [&'a str],
    /// Such places by another name, where they really are (`PathPolicy::runs_later_places`: a
    /// home's `.bashrc` linked into a dotfiles repository): each that exists beneath a write
    /// root, and is not [`git_writable`](Self::git_writable), is kept read-only too.
    pub runs_later_places: &'a [PathBuf],
}

impl<'a> Launch<'a> {
    /// The names of places kept from the child: those of
    /// [`RUNS_LATER_NAMES`](capability_types::backend::RUNS_LATER_NAMES) always, and the
    /// caller's others beside them, so that a launch that names none (a struct literal's empty
    /// list) keeps as much as one that names them all.
    #[cfg(target_os = "linux")]
    pub(crate) fn kept_names(&self) -> std::borrow::Cow<'a, [&'a str]> {
        let built_in: &'static [&'static str] = &capability_types::backend::RUNS_LATER_NAMES;
        if self.runs_later.iter().all(|name| built_in.contains(name)) {
            return std::borrow::Cow::Borrowed(built_in);
        }
        let mut names = built_in.to_vec();
        names.extend(
            self.runs_later
                .iter()
                .filter(|name| !built_in.contains(name)),
        );
        std::borrow::Cow::Owned(names)
    }
}

impl std::fmt::Debug for Launch<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Launch")
            .field("program", &self.program)
            .field("arg0", &self.arg0)
            .field("args", &self.args)
            .field("env", &self.env.iter().map(|(k, _)| k).collect::<Vec<_>>())
            .field("cwd", &self.cwd)
            .field("stdin", &self.stdin)
            .field("git_writable", &self.git_writable.is_some())
            .field("runs_later", &self.runs_later)
            .field("runs_later_places", &self.runs_later_places)
            .finish()
    }
}

/// A child started by [`PreparedSandbox::spawn`](crate::PreparedSandbox::spawn): the reaper of the child's own PID namespace,
/// the leader of its own process group, not yet reaped (the caller waits for `pid`). When the
/// reaper ends, the kernel ends every process of the namespace; `SIGKILL` to it ends them all,
/// `SIGTERM`, `SIGINT` and `SIGHUP` are passed on to them.
#[derive(Debug)]
#[non_exhaustive]
pub struct ConfinedChild {
    /// The reaper's pid (and process group id), in the caller's PID namespace.
    pub pid: u32,
    /// The write end of its stdin, non-blocking (when [`Launch::stdin`]).
    pub stdin: Option<std::os::fd::OwnedFd>,
    /// The read end of its stdout, non-blocking.
    pub stdout: std::os::fd::OwnedFd,
    /// The read end of its stderr, non-blocking.
    pub stderr: std::os::fd::OwnedFd,
    /// The host's end of its egress, with [`SandboxPolicy::egress_proxy`](crate::SandboxPolicy::egress_proxy).
    pub egress: Option<EgressReceiver>,
    /// How the program itself ended, once the reaper has.
    pub end: ChildEnd,
}

/// The program's own end, as its reaper reports it, and the reaper's stack. Keep this until the
/// reaper has been waited for: dropping it kills the reaper (and with it the whole namespace)
/// and waits for its end, so that the stack it runs on can be released.
#[derive(Debug)]
pub struct ChildEnd {
    pub(crate) report: std::os::fd::OwnedFd,
    pub(crate) _stack: sys::spawn::ReaperStack,
    pub(crate) watch: crate::Watch,
}

impl ChildEnd {
    /// After the reaper has ended: the program's `(exit code, signal)`, or `None` when the reaper
    /// was killed before the program ended (then the reaper's own status is the answer).
    pub fn status(&self) -> Option<(Option<i32>, Option<i32>)> {
        sys::spawn::read_status(&self.report)
    }

    /// What the child made, where none was when it started, of the places a shell, an agent's
    /// client, an editor or a git hook manager runs code from ([`Launch::runs_later`], in its
    /// write roots, its working directory and those above it): a mount could not keep them.
    /// Call it once the child has ended ([`Watch::set_aside`](crate::Watch::set_aside) renames
    /// them so that nothing runs them).
    pub fn watch(&self) -> &crate::Watch {
        &self.watch
    }
}
