//! The plugin contract of toolcap: declarations, the tool trait, scoped-object traits, errors
//! and the backend interface. The one crate plugin and backend authors depend on.
//!
//! A tool *declares* what it touches ([`ToolCapabilities`]); a personality (the
//! `capability-policy` crate) *allows* what a session may touch; `capability-core` checks the
//! first against the second and hands the tool scoped objects ([`ScopedFetch`], [`ScopedFs`],
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
//!     fn input_schema(&self) -> Value { json!({"type": "object", "required": ["path"]}) }
//!     fn capabilities(&self) -> ToolCapabilities {
//!         // Reads whatever the active personality lets it read; touches nothing else.
//!         ToolCapabilities::none().with_fs_read(FsPaths::FromPersonality)
//!     }
//!     async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<Value, CapabilityError> {
//!         let path = args["path"].as_str().ok_or(CapabilityError::invalid_input("path"))?;
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
//! **Denied by default**: an absent category yields no scoped object, and an unknown field in a
//! declaration is an error, so a typo can never silently drop a restriction.
#![deny(missing_docs)]

mod attachments;
pub mod backend;
mod cancel;
mod capabilities;
mod context;
mod error;
mod fold;
mod scoped;
mod secret_ref;
mod serde_util;
mod text;
mod time;
mod tool;

pub use async_trait::async_trait;
pub use secrecy::{ExposeSecret, SecretString};
#[doc(hidden)]
pub use serde as __serde;

pub use crate::attachments::{
    AttachmentInfo, AttachmentsCapability, MAX_ATTACHMENT_READ, ScopedAttachments,
    check_kind_pattern, kind_matches,
};
pub use crate::cancel::{CancellationToken, Cancelled};
pub use crate::capabilities::{
    FsPaths, FsReach, NetworkCapability, ProcessCapability, StorageCapability, StorageKind,
    StorageScope, ToolCapabilities, check_binary_spec,
};
pub use crate::context::ToolContext;
pub use crate::error::{
    CapabilityError, DenialCode, ErrorCode, MAX_VALUE_DEPTH, ToolResult, value_depth,
};
pub use crate::fold::{fold_name, fold_path, same_name};
pub use crate::scoped::{
    DirEntry, FileKind, FsMetadata, KeyValueStore, ProcessOutput, ScopedFetch, ScopedFs,
    ScopedProcess, ScopedSecretsResolver, SpawnOptions,
};
pub use crate::secret_ref::SecretRef;
pub use crate::text::{shown, visible};
pub use crate::time::deadline;
pub use crate::tool::Tool;
