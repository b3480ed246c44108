//! The settings of a [`Capsule`](crate::Capsule).

use std::path::PathBuf;
use std::time::Duration;

use capability_sandbox::Support;
use capability_types::CapabilityError;

use crate::wire::DEFAULT_MAX_FRAME;

/// Settings of a [`Capsule`](crate::Capsule). The defaults suit an interactive agent.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CapsuleConfig {
    /// The binary re-executed as a worker; its `main` must begin with
    /// [`run_worker_if_requested`](crate::run_worker_if_requested). Default: this process's own
    /// executable.
    pub program: PathBuf,
    /// Address space of a worker (`RLIMIT_AS`, default 4 GiB).
    pub address_space: Option<u64>,
    /// CPU seconds over a worker's whole life (`RLIMIT_CPU`, default none: a warm worker serves
    /// many calls, and each call's wall-clock timeout already ends a loop).
    pub cpu_seconds: Option<u64>,
    /// Open descriptors of a worker (`RLIMIT_NOFILE`, default 64).
    pub open_files: Option<u64>,
    /// The largest frame either side sends (default 16 MiB). Larger answers are refused with an
    /// error naming the limit; a worker that sends a larger frame is ended.
    pub max_frame: usize,
    /// Idle workers kept per (tool, personality, session, tokio runtime) for the next call
    /// (default 2; 0 starts a fresh worker for every call). A worker serves one session only
    /// (docs/isolation-model.md, "The warm path").
    pub warm_workers: usize,
    /// Workers started ahead per (tool, personality, tokio runtime), that have served no call
    /// yet (default 0). A call that finds no idle worker of its session (a new session's first
    /// call, and in the stateless 2026-07-28 HTTP mode every call) takes one of them instead of
    /// waiting for a worker to start, and another is started in the background once it has its
    /// answer. Only a tool that has been called gets them; they count among the idle workers
    /// ([`max_idle_workers`](Self::max_idle_workers)). A server whose sessions come and go
    /// (`toolcap mcp serve --capsule --http` keeps one) trades a process per tool for a
    /// worker's start on each new session's first call (docs/isolation-model.md, "Workers
    /// started ahead").
    pub spare_workers: usize,
    /// Idle workers kept in all (default 16). Past it, the worker idle the longest is ended: a
    /// host that compiles a personality per session, or narrows one per task, leaves workers
    /// of personalities nobody asks for again, which would otherwise stay as processes.
    pub max_idle_workers: usize,
    /// At most this many worker failures (crash, exit, timeout, malformed frame) per (tool,
    /// personality) within [`restart_window`](Self::restart_window); then no new worker is
    /// started until the window has passed, and calls fail with `not_available` (default 5).
    pub restart_budget: u32,
    /// The window of the restart budget (default 60 s).
    pub restart_window: Duration,
    /// How long a new worker may take to confine itself and say it is ready (default 10 s).
    pub start_timeout: Duration,
    /// What this kernel can enforce (default: probed). Set it to
    /// [`Support::unsupported`] to see the refusal path.
    pub support: Option<Support>,
    /// How long the host, waiting for a worker's answer, and the worker, waiting for the host's
    /// next frame, poll the channel before they sleep (default 50 µs; zero never polls). It
    /// applies only while one capsule call is in flight and on machines with more than one CPU:
    /// a quick answer is then taken without a process wake-up, which on a virtual machine costs
    /// more than the call (docs/isolation-model.md, "The warm path"). At most this much CPU
    /// time is spent per wait.
    pub spin: Duration,
}

impl CapsuleConfig {
    /// The defaults, with `program` as the worker binary.
    pub fn new(program: impl Into<PathBuf>) -> Self {
        Self {
            program: program.into(),
            address_space: Some(4 << 30),
            cpu_seconds: None,
            open_files: Some(64),
            max_frame: DEFAULT_MAX_FRAME,
            warm_workers: 2,
            spare_workers: 0,
            max_idle_workers: 16,
            restart_budget: 5,
            restart_window: Duration::from_secs(60),
            start_timeout: Duration::from_secs(10),
            support: None,
            spin: Duration::from_micros(50),
        }
    }

    /// The defaults, with this process's own executable as the worker binary: the program
    /// running now (`/proc/self/exe`, which a child resolves to its parent's executable), not
    /// the file at its path, which an upgrade may have replaced since (a new version need not
    /// speak this one's protocol).
    ///
    /// # Errors
    ///
    /// `not_available` when this process's executable cannot be found (no `/proc`).
    ///
    /// # Ambient Authority
    ///
    /// Names this process's own executable (`/proc/self/exe`).
    #[allow(
        clippy::disallowed_methods,
        reason = "the host's own executable, named in the docs' Ambient Authority"
    )]
    pub fn current_exe() -> Result<Self, CapabilityError> {
        const RUNNING: &str = "/proc/self/exe";
        std::fs::metadata(RUNNING).map_err(|e| {
            CapabilityError::not_available(format!(
                "the capsule cannot find its own binary ({RUNNING}): {e}"
            ))
        })?;
        Ok(Self::new(RUNNING))
    }

    /// Sets the worker's address-space limit.
    pub fn address_space(mut self, bytes: Option<u64>) -> Self {
        self.address_space = bytes;
        self
    }
    /// Sets the worker's CPU-time limit.
    pub fn cpu_seconds(mut self, seconds: Option<u64>) -> Self {
        self.cpu_seconds = seconds;
        self
    }
    /// Sets the frame limit (at least 64 KiB).
    pub fn max_frame(mut self, bytes: usize) -> Self {
        self.max_frame = bytes.max(64 << 10);
        self
    }
    /// Sets how many idle workers are kept per (tool, personality, session).
    pub fn warm_workers(mut self, n: usize) -> Self {
        self.warm_workers = n;
        self
    }

    /// Keeps `n` workers started ahead per (tool, personality, runtime), for new sessions'
    /// first calls ([`spare_workers`](Self::spare_workers)).
    pub fn spare_workers(mut self, n: usize) -> Self {
        self.spare_workers = n;
        self
    }

    /// Keeps at most `n` idle workers in all.
    pub fn max_idle_workers(mut self, n: usize) -> Self {
        self.max_idle_workers = n;
        self
    }
    /// Sets the restart budget.
    pub fn restart_budget(mut self, failures: u32, window: Duration) -> Self {
        self.restart_budget = failures;
        self.restart_window = window;
        self
    }
    /// Sets the start timeout.
    pub fn start_timeout(mut self, timeout: Duration) -> Self {
        self.start_timeout = timeout;
        self
    }
    /// Sets how long each side polls the channel before it sleeps ([`spin`](Self::spin); zero
    /// never polls).
    pub fn spin(mut self, spin: Duration) -> Self {
        self.spin = spin;
        self
    }
    /// Overrides the probed kernel support.
    pub fn support(mut self, support: Support) -> Self {
        self.support = Some(support);
        self
    }
}
