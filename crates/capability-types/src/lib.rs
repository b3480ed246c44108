//! Declarations, policies and scoped-object traits for toolcap: the one crate plugin authors depend on.
//!
//! A tool *declares* what it touches ([`ToolCapabilities`]); a personality *allows* what a
//! session may touch ([`PersonalityPolicy`]); `capability-core` checks the first against the
//! second and hands the tool scoped objects ([`ScopedFetch`], [`ScopedFs`],
//! [`ScopedSecretsResolver`], [`ScopedProcess`], [`KeyValueStore`]) inside its
//! [`ToolContext`] that enforce the intersection on every call.
//!
//! This crate holds data and traits only: it performs no I/O, starts no runtime and depends on
//! nothing heavier than `serde`, `thiserror`, `async-trait`, `http`, `bytes` and `secrecy`.
//!
//! # Declaring a tool
//!
//! ```
//! use capability_types::{async_trait, CapabilityError, FsPaths, Tool, ToolCapabilities, ToolContext};
//! use serde_json::{json, Value};
//!
//! struct WordCount;
//!
//! #[async_trait]
//! impl Tool for WordCount {
//!     fn name(&self) -> &str { "word_count" }
//!     fn description(&self) -> &str { "Counts the words of a text file" }
//!     fn input_schema(&self) -> Value {
//!         json!({"type": "object", "required": ["path"], "properties": {"path": {"type": "string"}}})
//!     }
//!     fn capabilities(&self) -> ToolCapabilities {
//!         // Reads whatever the active personality lets it read; touches nothing else.
//!         ToolCapabilities::none().with_fs_read(FsPaths::FromPersonality)
//!     }
//!     async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<Value, CapabilityError> {
//!         let path = args["path"].as_str()
//!             .ok_or_else(|| CapabilityError::invalid_input("path: expected a string"))?;
//!         let text = ctx.fs()?.read(path.as_ref()).await?;
//!         Ok(json!(text.split_whitespace().count()))
//!     }
//! }
//!
//! // The declaration is data: a reviewer reads it, not the code above.
//! assert_eq!(
//!     serde_json::to_string(&WordCount.capabilities()).unwrap(),
//!     r#"{"fs_reach":{"read":"from-personality"}}"#,
//! );
//! ```
//!
//! # Features
//!
//! - `toml` — parse personality files written in TOML ([`PolicyFormat::Toml`]).
//! - `yaml` — parse personality files written in YAML ([`PolicyFormat::Yaml`]).
//!
//! Without a feature, parsing that format fails with [`PolicyError::UnsupportedFormat`]; it never
//! falls back to another format.
//!
//! # Denied by default
//!
//! An absent category is not declared and yields no scoped object. Unknown fields in a
//! declaration or a policy file are errors, so a typo can never silently drop a restriction.
#![deny(missing_docs)]

mod cancel;
mod capabilities;
mod context;
mod env;
mod error;
mod grant;
mod policy;
mod result;
mod scoped;
mod secret_ref;
mod serde_util;
mod strict;
mod tool;

pub use async_trait::async_trait;
pub use secrecy::{ExposeSecret, SecretString};

pub use crate::cancel::{CancellationToken, Cancelled};
pub use crate::capabilities::{
    FsPaths, FsReach, NetworkCapability, ProcessCapability, StorageCapability, StorageKind,
    StorageScope, ToolCapabilities,
};
pub use crate::context::ToolContext;
pub use crate::env::{is_fixed_env_name, is_refused_env_name, is_safe_env_name, valid_env_name};
pub use crate::error::{CapabilityError, CapabilityValidationError, DenialCode, PolicyError};
pub use crate::grant::{
    EgressFactory, EgressSession, FetchFactory, FsAccess, FsFactory, FsGrant, HostMatch,
    HostPolicy, KvStoreFactory, NetworkGrant, PathAccess, PathPolicy, ProcessFactory, ProcessGrant,
    ProcessPolicy, SecretsFactory, SecretsGrant, StorageGrant,
};
pub use crate::policy::{
    EnvRules, NarrowFs, NarrowNetwork, NarrowProcess, Narrowing, NetworkRules, PersonalityPolicy,
    PolicyFormat, PolicyFsReach, ProcessRules, Safety, SandboxMode, ToolConstraints,
    check_binary_spec, normalize_lexically, valid_tool_name,
};
pub use crate::result::{ErrorCode, MAX_VALUE_DEPTH, ToolResult, value_depth};
pub use crate::scoped::{
    DirEntry, FileKind, FsMetadata, KeyValueStore, ProcessOutput, ScopedFetch, ScopedFs,
    ScopedProcess, ScopedSecretsResolver, SpawnOptions,
};
pub use crate::secret_ref::SecretRef;
pub use crate::strict::{MAX_POLICY_BYTES, MAX_POLICY_DEPTH, check_policy_text};
pub use crate::tool::Tool;
