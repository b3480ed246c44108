//! [`PreparedSandbox::spawn`](crate::PreparedSandbox::spawn): what it takes (the program to
//! start, the child's own home), what it keeps from the child (what runs later outside any
//! sandbox), and the confined child it started.

use std::path::{Path, PathBuf};

use capability_types::CapabilityError;

use crate::watch::Watch;
use crate::{EgressReceiver, PreparedSandbox, git, hide, sys};

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
    /// The child's own home: a directory made for this launch in the policy's homes
    /// ([`SandboxPolicy::homes`](crate::SandboxPolicy::homes)), directly in
    /// [`ScratchDir::path`](crate::ScratchDir::path). The child reads and writes it at its
    /// path and sees no other home there (docs/isolation-model.md, "Each child's own home");
    /// one anywhere else is refused (`input_invalid`). `None`: the child has no home there.
    pub home: Option<&'a Path>,
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
            .field("home", &self.home)
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
/// and waits for its end, so that the stack it runs on can be released, and then sets aside
/// what the child made of the places that run later ([`set_aside`](Self::set_aside)), unless
/// that was done once the child had ended: a call cancelled, or a long-lived child (a guarded
/// MCP server) stopped, leaves nothing behind that the last look before its end missed.
#[derive(Debug)]
pub struct ChildEnd {
    pub(crate) report: std::os::fd::OwnedFd,
    pub(crate) _stack: sys::spawn::ReaperStack,
    pub(crate) watch: crate::Watch,
    /// Set when [`set_aside`](Self::set_aside) looked after the reaper had ended: what it
    /// found then is final.
    pub(crate) settled: std::sync::atomic::AtomicBool,
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
    /// [`set_aside`](Self::set_aside) renames them so that nothing runs them.
    pub fn watch(&self) -> &crate::Watch {
        &self.watch
    }

    /// Sets aside what the child made ([`Watch::set_aside`](crate::Watch::set_aside)), and
    /// returns each place with where it went. Called while the child runs (between the calls a
    /// guarded server answers), it looks at what is there now; called once the reaper has
    /// ended, its answer is final, and dropping this does not look again.
    ///
    /// # Errors
    ///
    /// As [`Watch::set_aside`](crate::Watch::set_aside).
    pub fn set_aside(&self) -> std::io::Result<Vec<(PathBuf, PathBuf)>> {
        // Whether it had ended before the look: then nothing was made after it.
        let ended = self._stack.ended();
        let moved = self.watch.set_aside()?;
        if ended {
            self.settled
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(moved)
    }
}

impl Drop for ChildEnd {
    fn drop(&mut self) {
        if self.settled.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        // The whole tree ends first, so that nothing makes a place again once it is looked at.
        self._stack.end();
        match self.watch.set_aside() {
            Ok(moved) if moved.is_empty() => {}
            Ok(moved) => {
                for (made, aside) in moved {
                    tracing::warn!(
                        target: "toolcap::sandbox",
                        "a confined child made {}; set aside when it ended",
                        self.watch.describe(&made, &aside)
                    );
                }
            }
            Err(e) => tracing::error!(
                target: "toolcap::sandbox",
                "a confined child may have made a place a shell or an agent's client runs code \
                 from, or one the policy denies, which could not be set aside when it ended: {e}"
            ),
        }
    }
}

impl PreparedSandbox {
    /// What a child started in `cwd` is kept from among what runs later outside any sandbox
    /// (git's places, and those `runs_later` and `elsewhere` name), `writable` saying which of
    /// them the caller's policy lets it write: the masks its mount namespace binds first, and
    /// the places to look at when it ends (docs/policy.md, "Kept from children").
    fn kept_from_child(
        &self,
        cwd: &Path,
        writable: Option<&(dyn Fn(&Path) -> bool + Sync)>,
        runs_later: &[&str],
        elsewhere: &[PathBuf],
    ) -> Result<(Vec<hide::Mask>, Watch), CapabilityError> {
        git::masks(
            &self.inner.write,
            cwd,
            writable,
            runs_later,
            elsewhere,
            &self.inner.scratch,
            &self.inner.covered,
        )
        .map_err(|e| {
            CapabilityError::not_available(format!(
                "the child cannot be kept from what git, a shell or an agent's client runs \
                 later: {e}"
            ))
        })
    }

    /// What a process started in `cwd` (relative to this process's working directory, or
    /// this one when `None`) is kept from, when no policy is at hand to say what of it the
    /// process may write (`apply_to`, `confine_current_process`): nothing of it writable, and no
    /// place reached by another name known, only the write roots and the names of
    /// [`RUNS_LATER_NAMES`](capability_types::backend::RUNS_LATER_NAMES). Without write roots,
    /// nothing (the places are kept only beneath one).
    pub(crate) fn kept_without_policy(
        &self,
        cwd: Option<&Path>,
    ) -> Result<Vec<hide::Mask>, CapabilityError> {
        if self.inner.write.is_empty() {
            return Ok(Vec::new());
        }
        let here = std::env::current_dir().map_err(|e| {
            CapabilityError::not_available(format!("the working directory cannot be known: {e}"))
        })?;
        let cwd = cwd.map_or_else(|| here.clone(), |dir| here.join(dir));
        let names = &capability_types::backend::RUNS_LATER_NAMES;
        self.kept_from_child(&cwd, None, names, &[])
            .map(|(kept, _)| kept)
    }

    /// Starts `launch.program` confined, without copying this process: the child shares this
    /// process's memory until it executes the program (as `posix_spawn` does), which keeps the
    /// cost of a confined spawn independent of the host's size. `fork`, which
    /// [`apply_to`](Self::apply_to) needs, copies the page tables of the whole host and cost
    /// more than the confinement itself in a benchmark process.
    ///
    /// Refuses (`not_available`) naming the step that failed in the child; nothing runs
    /// unconfined. Arguments or variables containing NUL are `input_invalid`.
    ///
    /// # Ambient Authority
    ///
    /// Starts processes: a reaper in new namespaces (PID, and mount, network or user as the
    /// policy needs) and the program under it, with the pipes the launch names.
    pub fn spawn(&self, launch: &Launch<'_>) -> Result<ConfinedChild, CapabilityError> {
        use std::ffi::CString;
        use std::os::unix::ffi::OsStrExt;
        let c = |bytes: &[u8], what: &str| {
            CString::new(bytes)
                .map_err(|_| CapabilityError::invalid_input(format!("{what} contains a NUL byte")))
        };
        let program = c(launch.program.as_os_str().as_bytes(), "the program path")?;
        let mut argv = vec![c(launch.arg0.as_bytes(), "argv[0]")?];
        for arg in launch.args {
            argv.push(c(arg.as_bytes(), "an argument")?);
        }
        let mut envp = Vec::with_capacity(launch.env.len());
        for (name, value) in launch.env {
            envp.push(c(
                format!("{name}={value}").as_bytes(),
                "an environment variable",
            )?);
        }
        let cwd = c(launch.cwd.as_os_str().as_bytes(), "the working directory")?;
        let home = match launch.home {
            Some(home) => Some(c(self.own_home(home)?.as_os_str().as_bytes(), "the home")?),
            None => None,
        };
        let (git, mut watch) = self.kept_from_child(
            launch.cwd,
            launch.git_writable,
            &launch.kept_names(),
            launch.runs_later_places,
        )?;
        // A denied place no mount covers, since it is not there: looked for when the child
        // ends (docs/policy.md, "Kept from children").
        for place in &self.inner.denied {
            watch.also_denied(place);
        }
        let started = self.inner.spawn(
            &program,
            &argv,
            &envp,
            &cwd,
            launch.stdin,
            git,
            home.as_deref(),
        )?;
        Ok(ConfinedChild {
            pid: started.pid,
            stdin: started.stdin,
            stdout: started.stdout,
            stderr: started.stderr,
            egress: started.egress.map(|channel| EgressReceiver { channel }),
            end: ChildEnd {
                report: started.report,
                _stack: started.stack,
                watch,
                settled: std::sync::atomic::AtomicBool::new(false),
            },
        })
    }

    /// `home`, when it is a directory of its own in the policy's homes
    /// ([`SandboxPolicy::homes`](crate::SandboxPolicy::homes)): named there by one plain name.
    fn own_home<'h>(&self, home: &'h Path) -> Result<&'h Path, CapabilityError> {
        let Some(dir) = &self.inner.homes else {
            return Err(CapabilityError::invalid_input(
                "a launch names a home, and the sandbox's policy has no homes",
            ));
        };
        let mut parts = home.components();
        let named = matches!(parts.next_back(), Some(std::path::Component::Normal(_)));
        if !named || parts.as_path() != dir.as_path() {
            return Err(CapabilityError::invalid_input(format!(
                "{} is not a directory of its own in the children's homes ({})",
                home.display(),
                dir.display()
            )));
        }
        Ok(home)
    }
}
