//! The host side: start confined workers, run calls in them, answer their requests through the
//! call's own scoped objects, and contain every way a worker can fail.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use capability_core::{IsolationKey, ToolIsolation};
use capability_sandbox::Support;
use capability_types::{CapabilityError, Tool, ToolContext};
use serde_json::Value;
use tokio::io::AsyncReadExt;

use crate::channel::{Lost, Worker};
use crate::config::CapsuleConfig;
use crate::pool::Idle;
use crate::sys;
use crate::wire::{FrameReader, FromWorker, WorkerSettings};
use crate::worker::WORKER_FLAG;

/// How many bytes of a worker's stderr are kept for error messages.
const STDERR_TAIL: usize = 2048;

/// Runs tools in confined worker processes: the [`ToolIsolation`] of
/// [`DefaultToolRegistry::with_isolation`](capability_core::DefaultToolRegistry::with_isolation).
///
/// Each worker is this program (or [`CapsuleConfig::program`]) re-executed in worker mode; it
/// confines itself with [`SandboxPolicy::isolated`](capability_sandbox::SandboxPolicy::isolated)
/// before any tool code runs and then owns nothing but its channel. Every scoped-object call the
/// tool makes arrives here as a request and is answered through the call's own scoped objects,
/// which check the policy again. A worker that crashes, exits, is killed, sends a malformed frame
/// or outlives the call's timeout is gone; the call fails (`execution_failed` or `timeout`) and
/// other calls go on. Workers are reused only for the same tool under the same compiled
/// personality, in the same session: what a tool keeps in memory reaches no other session. A
/// worker started ahead ([`CapsuleConfig::spare_workers`]) has served nobody when a new
/// session's first call takes it.
pub struct Capsule {
    inner: Arc<Inner>,
}

/// What a [`Capsule`] holds, shared with the tasks that start workers ahead.
struct Inner {
    config: CapsuleConfig,
    support: Support,
    idle: Mutex<Idle>,
    failures: Mutex<HashMap<IsolationKey, VecDeque<Instant>>>,
    started: AtomicU64,
    /// Capsule calls in flight: the channel is polled only while there is one.
    in_flight: AtomicUsize,
    /// The configured polling time, or zero on a machine where polling cannot help.
    spin: Duration,
}

impl fmt::Debug for Capsule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Capsule")
            .field("config", &self.inner.config)
            .field("support", &self.inner.support)
            .field("workers_started", &self.workers_started())
            .finish_non_exhaustive()
    }
}

impl Capsule {
    /// A capsule with these settings. Probes the kernel unless the config says what it supports;
    /// an unsupported kernel is not an error here — every call is then refused with
    /// `not_available`, naming why.
    ///
    /// # Ambient Authority
    ///
    /// Probes the kernel here; each call later starts confined worker processes of the
    /// configured binary and talks to them over pipes.
    pub fn new(config: CapsuleConfig) -> Self {
        let support = config
            .support
            .clone()
            .unwrap_or_else(capability_sandbox::probe);
        let spin = if crate::spin::worth_it() {
            config.spin
        } else {
            Duration::ZERO
        };
        let inner = Inner {
            config,
            support,
            idle: Mutex::new(Idle::default()),
            failures: Mutex::new(HashMap::new()),
            started: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
            spin,
        };
        Self {
            inner: Arc::new(inner),
        }
    }

    /// How many workers were started so far: for a call that found none, and ahead
    /// ([`CapsuleConfig::spare_workers`]).
    pub fn workers_started(&self) -> u64 {
        self.inner.started.load(Ordering::Relaxed)
    }

    /// How many idle workers are kept for `key`.
    pub fn idle_workers(&self, key: &IsolationKey) -> usize {
        self.inner
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .by_key
            .get(key)
            .map_or(0, Vec::len)
    }

    /// Ends the idle workers that served `session`, and says how many there were: no call of
    /// the session will come again ([`ToolIsolation::session_ended`], which the registry's
    /// [`end_session`](capability_core::DefaultToolRegistry::end_session) calls). A worker still
    /// serving a call of the session is not touched; it goes idle when its call ends, and the
    /// idle limit ends it in its turn.
    pub fn end_session(&self, session: &str) -> usize {
        let taken = self
            .inner
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take_session(session);
        // Dropped (so killed) outside the lock.
        taken.len()
    }

    /// How many idle workers are kept in all ([`CapsuleConfig::max_idle_workers`] at most).
    pub fn idle_workers_total(&self) -> usize {
        self.inner
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .total
    }
}

impl Inner {
    fn settings(&self) -> WorkerSettings {
        WorkerSettings {
            max_frame: self.config.max_frame,
            address_space: self.config.address_space,
            cpu_seconds: self.config.cpu_seconds,
            open_files: self.config.open_files,
            file_size: Some(0),
            spin_micros: u64::try_from(self.spin.as_micros()).unwrap_or(u64::MAX),
        }
    }

    /// An idle worker for a call of `session` ([`Idle::take`]).
    fn take_idle(&self, key: &IsolationKey, session: &str) -> Option<Worker> {
        let runtime = current_runtime();
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take(key, runtime, session)
    }

    /// Keeps `worker` idle: up to `warm_workers` of its session, or `spare_workers` when it has
    /// served nobody yet.
    fn put_idle(&self, key: &IsolationKey, worker: Worker) {
        let limit = match worker.session() {
            Some(_) => self.config.warm_workers,
            None => self.config.spare_workers,
        };
        let evicted = self
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .put(key, worker, limit, self.config.max_idle_workers);
        // Dropped (so killed) outside the lock.
        drop(evicted);
    }

    /// Starts workers ahead for `key` in the background, until `spare_workers` of them (idle
    /// and never used, or starting) wait for the next session's first call
    /// (docs/isolation-model.md, "Workers started ahead").
    fn start_ahead(self: &Arc<Self>, key: &IsolationKey) {
        let wanted = self.config.spare_workers;
        if wanted == 0 {
            return;
        }
        let runtime = current_runtime();
        let missing = {
            let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
            let missing = wanted.saturating_sub(idle.ahead(key, runtime));
            idle.starting(key, runtime, missing);
            missing
        };
        for _ in 0..missing {
            let (inner, key) = (Arc::clone(self), key.clone());
            tokio::spawn(async move {
                // A start that fails is counted as a failure where it is one (`start`); the
                // next call then starts a worker of its own, and says why it cannot.
                let started = inner.start(&key).await;
                inner
                    .idle
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .starting_done(&key, runtime);
                if let Ok(worker) = started {
                    inner.put_idle(&key, worker);
                }
            });
        }
    }

    /// Counts a failure of `key`'s worker, and forgets every failure past the window, whatever
    /// its key: keys come and go with personalities (one compiled per session, say), and the map
    /// holds only what the budget still counts.
    fn record_failure(&self, key: &IsolationKey) {
        let mut failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
        let window = self.config.restart_window;
        failures.retain(|_, times| {
            while times.front().is_some_and(|t| t.elapsed() > window) {
                times.pop_front();
            }
            !times.is_empty()
        });
        failures
            .entry(key.clone())
            .or_default()
            .push_back(Instant::now());
    }

    /// Refuses when `key` used up its restart budget within the window.
    fn check_budget(&self, key: &IsolationKey) -> Result<(), CapabilityError> {
        let mut failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(times) = failures.get_mut(key) else {
            return Ok(());
        };
        let window = self.config.restart_window;
        while times.front().is_some_and(|t| t.elapsed() > window) {
            times.pop_front();
        }
        if times.len() >= self.config.restart_budget as usize {
            return Err(CapabilityError::not_available(format!(
                "the capsule of tool {} failed {} times within {window:?}; it is not restarted \
                 until that window has passed",
                key.tool,
                times.len()
            )));
        }
        Ok(())
    }

    async fn start(&self, key: &IsolationKey) -> Result<Worker, CapabilityError> {
        if let Some(reason) = self.support.refusal() {
            return Err(CapabilityError::not_available(format!(
                "tool {} runs in a capsule, and this kernel cannot confine one: {reason}",
                key.tool
            )));
        }
        self.check_budget(key)?;
        let settings = serde_json::to_string(&self.settings())
            .map_err(|e| CapabilityError::failed(format!("capsule settings: {e}")))?;
        let unavailable = |what: String| {
            CapabilityError::not_available(format!(
                "the capsule worker for tool {} cannot start: {what}",
                key.tool
            ))
        };
        let (host_end, worker_end) =
            crate::ring::for_worker().map_err(|e| unavailable(format!("its channel: {e}")))?;
        let mut command = sys::worker_command(&self.config.program, worker_end);
        command
            .arg(WORKER_FLAG)
            .arg(&key.tool)
            .arg(settings)
            .env_clear()
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut command = tokio::process::Command::from(command);
        command.kill_on_drop(true);
        let spawned = command.spawn();
        // The command holds the worker's end of the channel: close it here, so that the host
        // sees end-of-file when the worker dies (and the memory file: the mappings keep it).
        drop(command);
        let mut child =
            spawned.map_err(|e| unavailable(format!("{}: {e}", self.config.program.display())))?;
        self.started.fetch_add(1, Ordering::Relaxed);
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let stderr_task = child.stderr.take().map(|mut pipe| {
            let tail = Arc::clone(&stderr);
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                while let Ok(n) = pipe.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    let mut tail = tail.lock().unwrap_or_else(PoisonError::into_inner);
                    tail.extend_from_slice(&buf[..n]);
                    let excess = tail.len().saturating_sub(STDERR_TAIL);
                    tail.drain(..excess);
                }
            })
        });
        let (reader, writer) = host_end
            .register()
            .map_err(|e| unavailable(format!("channel: {e}")))?;
        let mut worker = Worker {
            child,
            writer,
            frames: FrameReader::new(reader, self.config.max_frame),
            stderr,
            stderr_task,
            seq: 0,
            max_frame: self.config.max_frame,
            runtime: current_runtime(),
            context: None,
            out: Vec::new(),
        };
        let first = tokio::time::timeout(self.config.start_timeout, worker.receive()).await;
        match first {
            Ok(Ok((FromWorker::Ready {}, _))) => {
                // Its word is not enough: the kernel must show the worker confined.
                match worker.child.id().map(sys::shows_confinement) {
                    Some(Ok(true)) => Ok(worker),
                    Some(Ok(false)) => {
                        self.record_failure(key);
                        Err(unavailable(
                            "it said it was ready, but the kernel shows no seccomp filter and no_new_privs on it"
                                .to_owned(),
                        ))
                    }
                    Some(Err(e)) => {
                        self.record_failure(key);
                        Err(unavailable(format!(
                            "its confinement cannot be checked: {e}"
                        )))
                    }
                    None => {
                        self.record_failure(key);
                        Err(unavailable("it exited as it became ready".to_owned()))
                    }
                }
            }
            Ok(Ok((FromWorker::Refused { reason }, _))) => Err(unavailable(format!(
                "it could not confine itself: {reason}"
            ))),
            Ok(Ok((other, _))) => {
                self.record_failure(key);
                Err(unavailable(format!(
                    "it sent {other:?} before it was ready"
                )))
            }
            Ok(Err(lost)) => {
                self.record_failure(key);
                Err(unavailable(worker.describe_loss(&lost).await))
            }
            Err(_) => {
                self.record_failure(key);
                Err(unavailable(format!(
                    "it was not ready within {:?}",
                    self.config.start_timeout
                )))
            }
        }
    }

    async fn run(
        self: &Arc<Self>,
        key: &IsolationKey,
        mut args: Value,
        ctx: &ToolContext,
    ) -> Result<Value, CapabilityError> {
        loop {
            // An idle worker is handed out without asking the kernel whether it still lives (a
            // system call per call): one that died while idle cannot take the call's frame, and
            // the call goes on to the next idle worker or a fresh one.
            let (mut worker, idle) = match self.take_idle(key, &ctx.session_id) {
                Some(worker) => (worker, true),
                None => (self.start(key).await?, false),
            };
            // A call that found no worker of its session (a new session's first, each of the
            // stateless mode's) took one started ahead, or started its own: another is started
            // ahead once it has its answer.
            let ahead = worker.session().is_none();
            // Until the call ends cleanly, dropping this (timeout, cancellation) counts as a
            // failure of the worker, which the drop of `worker` kills.
            let mut guard = FailureGuard {
                capsule: self,
                key,
                armed: true,
            };
            let in_flight = InFlight::enter(&self.in_flight);
            // Poll for the answer only when no other capsule call shares the runtime's threads.
            let spin = if in_flight.alone {
                self.spin
            } else {
                Duration::ZERO
            };
            match worker.call(args, ctx, spin).await {
                Ok(result) => {
                    guard.armed = false;
                    self.put_idle(key, worker);
                    if ahead {
                        self.start_ahead(key);
                    }
                    return result;
                }
                // Died while idle: not this tool's failure, and the call never ran.
                Err(Lost::Undelivered(back, _)) if idle => {
                    guard.armed = false;
                    args = back;
                }
                Err(Lost::Undelivered(_, lost) | Lost::Midway(lost)) => {
                    let why = worker.describe_loss(&lost).await;
                    return Err(CapabilityError::failed(format!(
                        "tool {} failed in its capsule: {why}",
                        key.tool
                    )));
                }
            }
        }
    }
}

#[async_trait]
impl ToolIsolation for Capsule {
    async fn execute(
        &self,
        key: &IsolationKey,
        _tool: &dyn Tool,
        args: Value,
        ctx: &ToolContext,
    ) -> Result<Value, CapabilityError> {
        self.inner.run(key, args, ctx).await
    }

    fn session_ended(&self, session: &str) {
        self.end_session(session);
    }
}

/// The runtime the caller runs on (`None` outside one; then no call can run anyway).
fn current_runtime() -> Option<tokio::runtime::Id> {
    tokio::runtime::Handle::try_current().ok().map(|h| h.id())
}

/// One capsule call in flight, counted while it lives.
struct InFlight<'a> {
    count: &'a AtomicUsize,
    /// No other capsule call was in flight when this one entered.
    alone: bool,
}

impl<'a> InFlight<'a> {
    fn enter(count: &'a AtomicUsize) -> Self {
        let before = count.fetch_add(1, Ordering::Relaxed);
        InFlight {
            count,
            alone: before == 0,
        }
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Counts a failure unless disarmed (the call ended with an answer from the worker).
struct FailureGuard<'a> {
    capsule: &'a Inner,
    key: &'a IsolationKey,
    armed: bool,
}

impl Drop for FailureGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.capsule.record_failure(self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(tool: &str, policy: u64) -> IsolationKey {
        IsolationKey {
            tool: tool.to_owned(),
            policy,
        }
    }

    /// A host that compiles a personality per session sees a new key for each; failures past
    /// the window are forgotten as new ones come, so the map holds only what the budget still
    /// counts (it used to keep a key for every personality that ever failed).
    // guarantee: G-CAP-05
    #[test]
    fn failures_past_the_window_are_forgotten_whatever_their_key() {
        let capsule = Capsule::new(
            CapsuleConfig::new("/nonexistent/worker")
                .restart_budget(3, Duration::from_millis(30))
                .support(Support::unsupported("a test")),
        );
        let capsule = &capsule.inner;
        for policy in 0..300 {
            capsule.record_failure(&key("crashy", policy));
        }
        assert!(capsule.check_budget(&key("crashy", 7)).is_ok(), "one each");
        for _ in 0..3 {
            capsule.record_failure(&key("crashy", 7));
        }
        assert!(
            capsule.check_budget(&key("crashy", 7)).is_err(),
            "over budget"
        );
        std::thread::sleep(Duration::from_millis(60));
        capsule.record_failure(&key("other", 0));
        let failures = capsule
            .failures
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        assert_eq!(
            failures.len(),
            1,
            "only the failure within the window is kept"
        );
        drop(failures);
        assert!(
            capsule.check_budget(&key("crashy", 7)).is_ok(),
            "the window passed"
        );
    }
}
