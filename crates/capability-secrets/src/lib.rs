//! The secrets backend for toolcap: a [`ScopedSecretsResolver`](capability_types::ScopedSecretsResolver) that answers only for the refs a
//! tool declared, over pluggable [`SecretsBackend`]s.
//!
//! Three backends ship here:
//! - [`EnvSecrets`] — process environment variables, through an explicit ref → variable map and
//!   an optional prefix rule (`providers/exa/key` → `TOOLCAP_SECRET_PROVIDERS__EXA__KEY`);
//! - [`FileSecrets`] — a TOML or dotenv file, refused when group or others have any access to it;
//! - [`MemorySecrets`] — values held in memory, for tests and hosts that fetch secrets themselves.
//!
//! [`SecretsResolverFactory`] plugs them into `capability-core`:
//!
//! ```
//! use std::sync::Arc;
//! use capability_core::CapabilityBackends;
//! use capability_secrets::{MemorySecrets, SecretsResolverFactory};
//!
//! let memory = MemorySecrets::new().with("GITHUB_TOKEN", "ghp_example");
//! let backends = CapabilityBackends::new()
//!     .with_secrets(Arc::new(SecretsResolverFactory::new(vec![Arc::new(memory)])));
//! # let _ = backends;
//! ```
//!
//! # Denied by default
//!
//! A name outside the tool's declared refs is refused with `SECRET_NOT_DECLARED` before any
//! backend is asked. Values are [`SecretString`](capability_types::SecretString)s: `Debug`
//! and `Display` never show them, and no error of this crate contains one.
#![deny(missing_docs)]

mod backend;
mod file;
mod resolver;
mod sys;

pub use crate::backend::{BackendError, EnvSecrets, MemorySecrets, SecretsBackend};
pub use crate::file::{FileSecrets, SecretsFileFormat};
pub use crate::resolver::{ScopedSecrets, SecretsResolverFactory};
/// Who else can change a file, asked of the secrets file here; the questions live in the
/// kernel layer, where the embedded store asks them too (docs/policy.md, "Who else can change a
/// file").
pub use capability_sandbox::{
    Changeable, GroupOpen, Swappable, Writer, changeable_by_others, group_open, swappable_through,
};
