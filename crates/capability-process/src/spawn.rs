//! `ScopedSpawner`: one tool's view of child processes.

use std::fmt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use capability_sandbox::SandboxPolicy;
use capability_types::backend::{FsAccess, PathPolicy, ProcessGrant, SandboxMode};
use capability_types::{
    CapabilityError, DenialCode, ProcessOutput, ScopedProcess, SpawnOptions, check_binary_spec,
};
use rustix::process::Signal;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::{Inner, SandboxKey, sys};

/// Runs the child processes of one tool, within its grant.
pub struct ScopedSpawner {
    grant: ProcessGrant,
    inner: Arc<Inner>,
}

impl fmt::Debug for ScopedSpawner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScopedSpawner")
            .field("tool", &self.grant.tool)
            .field("allowed", &self.grant.process.allowed_binaries())
            .finish_non_exhaustive()
    }
}

/// What the checks decided: the file to run, the name it runs as, and its environment.
struct Plan {
    program: PathBuf,
    arg0: String,
    env: Vec<(String, String)>,
    cwd: Option<PathBuf>,
}

impl ScopedSpawner {
    pub(crate) fn new(grant: ProcessGrant, inner: Arc<Inner>) -> Self {
        Self { grant, inner }
    }

    fn refuse_binary(binary: &str) -> CapabilityError {
        CapabilityError::denied(
            DenialCode::BinaryNotAllowed,
            format!(
                "{} is not in the declared allowedBinaries",
                binary.escape_debug()
            ),
        )
    }

    /// Every check of docs/semantics.md, "Binaries" and "Child environment", before anything is started.
    fn plan(
        &self,
        binary: &str,
        args: &[String],
        options: &SpawnOptions,
    ) -> Result<Plan, CapabilityError> {
        if check_binary_spec(binary, false).is_err() {
            return Err(Self::refuse_binary(binary));
        }
        let allowed_specs = self.grant.process.allowed_binaries();
        // A request that names an allowed entry as it is written is that entry's file, resolved
        // once; any other (a path, a name the personality does not list) is resolved for this
        // call only, so a link is taken for what it leads to now, and what calls name is
        // never remembered (docs/semantics.md, "Binaries").
        let program = if allowed_specs.iter().any(|spec| spec == binary) {
            self.inner.resolve(binary)
        } else {
            sys::resolve_binary(binary, &self.inner.config.search_path)
        }
        .ok_or_else(|| Self::refuse_binary(binary))?;
        // The allowed spec whose canonical file this is; the child runs under that spec's name,
        // so a multicall binary (busybox) allowed as `ls` cannot be run as `rm`.
        let allowed = allowed_specs
            .iter()
            .find(|spec| self.inner.resolve(spec).as_deref() == Some(program.as_path()))
            .ok_or_else(|| Self::refuse_binary(binary))?;
        let arg0 = Path::new(allowed)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or(allowed)
            .to_owned();
        if args.iter().any(|a| a.contains('\0')) {
            return Err(CapabilityError::invalid_input(
                "an argument contains a NUL byte",
            ));
        }
        self.grant
            .process
            .check_args(binary, allowed, &program, args)?;

        let config = &self.inner.config;
        let mut env: Vec<(String, String)> = vec![("PATH".to_owned(), config.child_path.clone())];
        let lang = config
            .host_env
            .get("LANG")
            .cloned()
            .unwrap_or_else(|| "C.UTF-8".to_owned());
        env.push(("LANG".to_owned(), lang));
        // Git uses only the repositories it is pointed at, and no program starts an editor; no
        // call can set these names.
        env.extend(capability_sandbox::child_fixed_env());
        for name in self.grant.process.env_allow() {
            if let Some(value) = config.host_env.get(name) {
                env.push((name.clone(), value.clone()));
            }
        }
        for (name, value) in &options.env {
            self.grant.process.check_env(name)?;
            if value.contains('\0') {
                return Err(CapabilityError::invalid_input(format!(
                    "the value of {name} contains a NUL byte"
                )));
            }
            if let Some(why) = capability_sandbox::call_env_value_refusal(name, value) {
                return Err(CapabilityError::denied(DenialCode::EnvNotAllowed, why));
            }
            env.retain(|(k, _)| k != name);
            env.push((name.clone(), value.clone()));
        }

        // A working directory the tool may read, where it really leads: a symlink on the way
        // must not lead out of the read reach.
        let readable_dir = |dir: &Path| -> Result<PathBuf, CapabilityError> {
            let checked = self.grant.paths.check(dir, FsAccess::Read)?;
            let real = sys::canonical_dir(&checked.path).map_err(|e| {
                CapabilityError::failed(format!(
                    "working directory {}: {e}",
                    checked.path.display()
                ))
            })?;
            self.grant.paths.check(&real, FsAccess::Read)?;
            Ok(real)
        };
        let cwd = match &options.cwd {
            Some(cwd) => Some(readable_dir(cwd)?),
            // The session's working directory when the tool may read it (where an agent
            // expects `git status` to run), else none: the child's scratch home.
            None => readable_dir(Path::new(".")).ok(),
        };
        Ok(Plan {
            program,
            arg0,
            env,
            cwd,
        })
    }
}

#[async_trait]
impl ScopedProcess for ScopedSpawner {
    fn check(
        &self,
        binary: &str,
        args: &[String],
        options: &SpawnOptions,
    ) -> Result<(), CapabilityError> {
        self.plan(binary, args, options).map(drop)
    }

    async fn spawn(
        &self,
        binary: &str,
        args: &[String],
        options: SpawnOptions,
    ) -> Result<ProcessOutput, CapabilityError> {
        let plan = self.plan(binary, args, &options)?;
        let config = &self.inner.config;
        // Each call's HOME is fresh and private to the call, inside the tool's scratch parent
        // (which a prepared sandbox grants writes beneath); a confined child sees its own home
        // there and no other (docs/isolation-model.md, "Each child's own home"). Dropped last,
        // after the child's group is gone: its name goes then, the directory just after
        // (`sys::ScratchHome`).
        let home_parent = self
            .inner
            .home_parent(&self.grant.tool)
            .map_err(|e| CapabilityError::failed(format!("cannot create a scratch home: {e}")))?;
        let home = sys::scratch_home(home_parent.path())
            .map_err(|e| CapabilityError::failed(format!("cannot create a scratch home: {e}")))?;
        let timeout = options
            .timeout
            .unwrap_or(config.default_timeout)
            .min(config.max_timeout);

        let sandboxed = self.grant.process.sandbox() == SandboxMode::Required;
        // A tool that declares network may let its sandboxed children reach its hosts through
        // the egress proxy; without a proxy (or a network grant) they have no network.
        let egress = match (&self.grant.network, &config.egress) {
            (Some(network), Some(proxy)) if sandboxed => Some((network.clone(), proxy)),
            _ => None,
        };
        let mut env = plan.env.clone();
        env.push(("HOME".to_owned(), home.path().display().to_string()));
        // Its temporary directory is its private home too, unless the call names one its
        // personality lets it set: `/tmp` is not the child's to write (docs/isolation-model.md,
        // "Children").
        if !env.iter().any(|(name, _)| name == "TMPDIR") {
            env.push(("TMPDIR".to_owned(), home.path().display().to_string()));
        }
        if egress.is_some() {
            // The proxy is the only way out; a variable of the tool's cannot point elsewhere.
            capability_sandbox::point_at_egress_proxy(&mut env);
        }
        let cwd = plan
            .cwd
            .clone()
            .unwrap_or_else(|| home.path().to_path_buf());
        let started = if sandboxed {
            // Reads beneath the tool's reach, writes beneath its write roots and the scratch
            // home, execution of this program and the system directories only.
            let mut limits = config.sandbox_limits;
            let call_cpu = timeout.as_secs_f64().ceil() as u64;
            limits.cpu_seconds = Some(limits.cpu_seconds.map_or(call_cpu, |c| c.min(call_cpu)));
            let mut policy = SandboxPolicy::from_paths(&*self.grant.paths)
                .homes(&home_parent)
                .exec(&plan.program)
                .limits(limits);
            if egress.is_some() {
                policy = policy.egress_proxy();
            }
            let key = SandboxKey {
                tool: self.grant.tool.clone(),
                read: identified(policy.read_paths()),
                write: identified(policy.write_paths()),
                hidden: identified(policy.hidden_paths()),
                // Looked at before the sandbox is prepared, so an entry made while it is
                // changes the time and is found by the next call.
                listed: listed(&policy),
                program: identify(&plan.program),
                limits,
                egress: policy.has_egress_proxy(),
            };
            let prepared = self
                .inner
                .sandbox(key, || policy.prepare_with(&config.sandbox_support))?;
            Started::confined(
                &prepared,
                &*self.grant.paths,
                &plan,
                args,
                &env,
                &cwd,
                home.path(),
                options.stdin.is_some(),
            )?
        } else {
            Started::plain(&plan, args, &env, &cwd, options.stdin.is_some())
                .map_err(|e| CapabilityError::failed(format!("cannot start {binary}: {e}")))?
        };
        let Started {
            mut child,
            pgid,
            stdin,
            stdout,
            stderr,
            egress: receiver,
        } = started;
        // Whatever happens below, nothing of this call may outlive it.
        let _group = GroupGuard(pgid);
        // The child's proxy runs until the call ends.
        let _proxy = match (receiver, egress) {
            (Some(receiver), Some((network, proxy))) => {
                Some(proxy.serve(network, receiver.receive()?)?)
            }
            _ => None,
        };

        let stdin_task = match (stdin, options.stdin) {
            (Some(mut pipe), Some(bytes)) => Some(tokio::spawn(async move {
                // A child that does not read its input closes the pipe; that is not an error.
                let _ = pipe.write_all(&bytes).await;
                drop(pipe);
            })),
            _ => None,
        };
        let cap = config.output_cap;
        // The call's wall time is bounded whatever holds its pipes: past the timeout and the
        // kill grace (twice: the leader's, then the pipes'), reading stops and what was read is
        // kept.
        let read_deadline = tokio::time::Instant::from_std(capability_types::deadline(
            tokio::time::Instant::now().into_std(),
            timeout.saturating_add(config.kill_grace.saturating_mul(2)),
        ));
        let stdout = tokio::spawn(read_capped(Some(stdout), cap, read_deadline));
        let stderr = tokio::spawn(read_capped(Some(stderr), cap, read_deadline));
        let waiting =
            |e: std::io::Error| CapabilityError::failed(format!("waiting for {binary}: {e}"));

        let waited = match tokio::time::timeout(timeout, child.wait()).await {
            Ok(exit) => exit.map(|exit| (exit, false)),
            Err(_) => {
                sys::signal_group(pgid, Signal::TERM);
                let exit = match tokio::time::timeout(config.kill_grace, child.wait()).await {
                    Ok(exit) => exit,
                    Err(_) => {
                        sys::signal_group(pgid, Signal::KILL);
                        child.wait().await
                    }
                };
                exit.map(|exit| (exit, true))
            }
        };
        // The leader is gone; end what it left behind so the pipes close.
        sys::signal_group(pgid, Signal::KILL);
        // What it made is set aside whatever else failed below (a wait or a pipe's reader).
        let made = child.refuse_what_it_made(binary);
        let (exit, timed_out) = waited.map_err(waiting)?;
        if let Some(task) = stdin_task {
            let _ = task.await;
        }
        let (out, out_cut) = stdout
            .await
            .map_err(|e| CapabilityError::failed(e.to_string()))?;
        let (err, err_cut) = stderr
            .await
            .map_err(|e| CapabilityError::failed(e.to_string()))?;
        made?;
        Ok(
            ProcessOutput::new(exit.code, exit.signal, out, err, out_cut || err_cut)
                .with_timed_out(timed_out),
        )
    }
}

type Reader = Box<dyn AsyncRead + Unpin + Send>;
type Writer = Box<dyn AsyncWrite + Unpin + Send>;

/// How a child ended.
struct Exit {
    code: Option<i32>,
    signal: Option<i32>,
}

/// A child that runs: started by tokio (unconfined, through `posix_spawn`) or by the sandbox
/// (confined, without copying this process).
enum Child {
    Plain(tokio::process::Child),
    /// The reaper of the child's PID namespace, and what tells the program's own end.
    Confined(sys::PidWaiter, capability_sandbox::ChildEnd),
}

impl Child {
    /// Once a confined child has ended: what it made, where none was, of the places a shell,
    /// an agent's client, an editor or a git hook manager runs code from, set aside
    /// (`NAME.refused-by-toolcap`) and the call refused for it; a mount could not keep a name
    /// that did not exist (docs/policy.md, "Kept from children").
    fn refuse_what_it_made(&self, binary: &str) -> Result<(), CapabilityError> {
        let Child::Confined(_, end) = self else {
            return Ok(());
        };
        let moved = end.set_aside().map_err(|e| {
            CapabilityError::failed(format!(
                "{binary} made a place a shell or an agent's client runs code from, or one the \
                 policy denies, and it could not be set aside: {e}"
            ))
        })?;
        if moved.is_empty() {
            return Ok(());
        }
        let list = moved
            .iter()
            .map(|(made, aside)| end.watch().describe(made, aside))
            .collect::<Vec<_>>()
            .join("; ");
        Err(CapabilityError::denied(
            DenialCode::PathNotReachable,
            format!(
                "write not permitted: {binary} made {list}; it was set aside (a personality that \
                 means to allow a place that runs later lists it among its write roots)"
            ),
        ))
    }

    /// Waits for the child to end; may be called again after being cancelled.
    async fn wait(&mut self) -> std::io::Result<Exit> {
        match self {
            Child::Plain(child) => child.wait().await.map(|status| Exit {
                code: status.code(),
                signal: status.signal(),
            }),
            Child::Confined(waiter, end) => {
                let reaper = waiter.wait().await?;
                // The program's own status when the reaper saw it end; the reaper's when it was
                // killed first (a timeout).
                let (code, signal) = end.status().unwrap_or(reaper);
                Ok(Exit { code, signal })
            }
        }
    }
}

/// A started child and its pipes.
struct Started {
    child: Child,
    pgid: u32,
    stdin: Option<Writer>,
    stdout: Reader,
    stderr: Reader,
    egress: Option<capability_sandbox::EgressReceiver>,
}

impl Started {
    fn plain(
        plan: &Plan,
        args: &[String],
        env: &[(String, String)],
        cwd: &Path,
        stdin: bool,
    ) -> std::io::Result<Self> {
        let mut command = tokio::process::Command::new(&plan.program);
        command
            .arg0(&plan.arg0)
            .args(args)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .current_dir(cwd)
            .stdin(if stdin { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let mut child = command.spawn()?;
        let pgid = child
            .id()
            .ok_or_else(|| std::io::Error::other("the child exited before it could be tracked"))?;
        let missing = || std::io::Error::other("a pipe of the child is missing");
        let stdout: Reader = Box::new(child.stdout.take().ok_or_else(missing)?);
        let stderr: Reader = Box::new(child.stderr.take().ok_or_else(missing)?);
        let stdin = child.stdin.take().map(|pipe| Box::new(pipe) as Writer);
        Ok(Started {
            child: Child::Plain(child),
            pgid,
            stdin,
            stdout,
            stderr,
            egress: None,
        })
    }

    /// `paths`: the tool's reach, whose writes decide which of the places git, a shell or an
    /// agent's client runs code from its child may write (a personality that lists one as a
    /// write root), and which names of the latter are kept from the child where they exist
    /// (docs/policy.md, "Kept from children"). `home`: the call's own, in the sandbox's homes.
    #[allow(
        clippy::too_many_arguments,
        reason = "the parts of one launch, from the one call that makes it"
    )]
    fn confined(
        prepared: &capability_sandbox::PreparedSandbox,
        paths: &dyn PathPolicy,
        plan: &Plan,
        args: &[String],
        env: &[(String, String)],
        cwd: &Path,
        home: &Path,
        stdin: bool,
    ) -> Result<Self, CapabilityError> {
        let git_writable = |p: &Path| paths.check(p, FsAccess::Write).is_ok();
        let elsewhere = paths.runs_later_places();
        let launch = capability_sandbox::Launch {
            program: &plan.program,
            arg0: std::ffi::OsStr::new(&plan.arg0),
            args,
            env,
            cwd,
            stdin,
            git_writable: Some(&git_writable),
            runs_later: paths.runs_later_names(),
            runs_later_places: &elsewhere,
            home: Some(home),
        };
        let child = prepared.spawn(&launch)?;
        let failed = |e: std::io::Error| {
            // The child runs; it must not outlive this failure.
            sys::signal_group(child.pid, Signal::KILL);
            CapabilityError::failed(format!("cannot watch the confined child: {e}"))
        };
        let waiter = sys::PidWaiter::new(child.pid).map_err(failed)?;
        let stdout: Reader = Box::new(sys::pipe_reader(child.stdout).map_err(failed)?);
        let stderr: Reader = Box::new(sys::pipe_reader(child.stderr).map_err(failed)?);
        let stdin = match child.stdin {
            Some(fd) => Some(Box::new(sys::pipe_writer(fd).map_err(failed)?) as Writer),
            None => None,
        };
        Ok(Started {
            child: Child::Confined(waiter, child.end),
            pgid: child.pid,
            stdin,
            stdout,
            stderr,
            egress: child.egress,
        })
    }
}

/// Paths with the identity of what they name now.
fn identified(paths: &[std::path::PathBuf]) -> Vec<(std::path::PathBuf, Option<(u64, u64)>)> {
    paths.iter().map(|p| identify(p)).collect()
}

fn identify(path: &std::path::Path) -> (std::path::PathBuf, Option<(u64, u64)>) {
    (path.to_path_buf(), sys::identity(path))
}

/// The directories where one of `policy`'s hidden name prefixes is matched
/// ([`SandboxPolicy::prefix_dirs`]), each with when it last changed (see [`SandboxKey`]'s
/// `listed`).
fn listed(policy: &SandboxPolicy) -> Vec<(std::path::PathBuf, Option<std::time::SystemTime>)> {
    policy
        .prefix_dirs()
        .into_iter()
        .map(|dir| (dir.to_path_buf(), sys::changed(dir)))
        .collect()
}

/// Kills the process group when dropped (a cancelled call, an error on the way).
struct GroupGuard(u32);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        sys::signal_group(self.0, Signal::KILL);
    }
}

/// Reads a pipe to its end, keeping the first `cap` bytes and draining the rest so the child
/// never blocks on a full pipe. Returns the bytes and whether any were dropped.
/// Stops at `deadline` (counted as truncated): a pipe held open by something that escaped the
/// kill must not hold the call.
async fn read_capped<R: AsyncRead + Unpin>(
    pipe: Option<R>,
    cap: usize,
    deadline: tokio::time::Instant,
) -> (Bytes, bool) {
    let Some(mut pipe) = pipe else {
        return (Bytes::new(), false);
    };
    let mut kept = Vec::new();
    let mut truncated = false;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match tokio::time::timeout_at(deadline, pipe.read(&mut buf)).await {
            Err(_) => {
                truncated = true;
                break;
            }
            Ok(Ok(0) | Err(_)) => break,
            Ok(Ok(n)) => {
                let room = cap.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
                truncated |= n > room;
            }
        }
    }
    (Bytes::from(kept), truncated)
}
