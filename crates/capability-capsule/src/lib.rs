//! The capsule: chosen tools run in a confined worker process, and the host answers — and
//! checks again — every scoped-object call they make.
//!
//! Scoped objects stop a tool that plays by the rules. A tool (or a library it uses) that calls
//! `std::fs::read`, opens a `TcpStream`, reads `/proc/self/environ`, forks, or calls
//! `process::exit` is not stopped by them. In a capsule it is stopped by the kernel:
//!
//! * the host ([`Capsule`]) re-executes its own binary in worker mode; the worker's `main`
//!   begins with [`run_worker_if_requested`], which confines the process with
//!   [`SandboxPolicy::isolated`](capability_sandbox::SandboxPolicy::isolated) — an empty root
//!   of its own (no path names anything, so not even a file's size or existence can be learnt),
//!   Landlock with no file system access at all, seccomp refusing new sockets, new processes,
//!   `ptrace`, `io_uring`, `inotify` and the rest, resource limits, a cleared environment —
//!   *before* it builds or calls any tool (what the loader runs before `main`, and functions
//!   exported under a C library's name, are outside this: docs/isolation-model.md, "Code linked
//!   into the binary");
//! * every scoped object the tool receives in the worker is a proxy: fetch, fs, secrets,
//!   process and kv calls travel as framed requests over the worker's channel (rings in memory
//!   shared with the host, a socket as their doorbell; see [`ring`]) and are answered by
//!   the host through the call's own scoped objects, which enforce the policy again;
//! * a worker that panics, aborts, exits, segfaults, runs out of memory, loops past the call's
//!   timeout, or sends a malformed frame is gone: that call ends with `execution_failed` (or
//!   `timeout`), the host and other calls go on, and a restart budget stops a crash loop;
//! * idle workers are kept warm per (tool, compiled personality, session), never shared across
//!   them, and they end with their session (`DefaultToolRegistry::end_session`).
//!
//! ```no_run
//! use std::sync::Arc;
//! use capability_capsule::{Capsule, CapsuleConfig, run_worker_if_requested};
//! use capability_core::{DefaultToolRegistry, IsolationSelection};
//! # fn my_tools() -> Vec<Arc<dyn capability_types::Tool>> { Vec::new() }
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     // In a worker this never returns; in the host it returns at once.
//!     run_worker_if_requested(my_tools);
//!     let capsule = Capsule::new(CapsuleConfig::current_exe()?);
//!     let mut registry = DefaultToolRegistry::new(None)
//!         .with_isolation(Arc::new(capsule), IsolationSelection::All);
//!     for tool in my_tools() {
//!         registry.register_arc(tool)?;
//!     }
//!     // ... registry.execute_parallel(calls, &ctx).await in the agent loop ...
//!     // ... and when a conversation is over: registry.end_session("its session id") ...
//!     Ok(())
//! }
//! ```
//!
//! Linux only; elsewhere, and on a kernel without Landlock, every capsule call is refused with
//! `not_available`. See `docs/isolation-model.md` for what the capsule guarantees and what it
//! does not.

#![deny(missing_docs)]

#[cfg(target_os = "linux")]
mod channel;
pub mod compact;
#[cfg(target_os = "linux")]
mod config;
#[cfg(target_os = "linux")]
mod host;
pub mod ops;
#[cfg(target_os = "linux")]
mod pool;
#[cfg(target_os = "linux")]
pub mod ring;
#[cfg(target_os = "linux")]
mod spin;
#[cfg(target_os = "linux")]
mod sys;
pub mod wire;
#[cfg(target_os = "linux")]
mod worker;

#[cfg(target_os = "linux")]
pub use crate::channel::MAX_REQUESTS_IN_FLIGHT;
#[cfg(target_os = "linux")]
pub use crate::config::CapsuleConfig;
#[cfg(target_os = "linux")]
pub use crate::host::Capsule;
#[cfg(target_os = "linux")]
pub use crate::worker::{WORKER_FLAG, run_worker_if_requested};
