//! The personality model of toolcap: what a session may touch, whatever its tools declare.
//!
//! A personality ([`PersonalityPolicy`]) is read from a policy file (TOML, YAML or JSON with the
//! same structure), checked whole ([`PolicyError`] names the field), and narrowed per batch or
//! per call by a [`Narrowing`] that can only restrict it. The rules are written in
//! docs/policy.md; `capability-core` compiles a checked personality into the matchers its three
//! enforcement points use, and re-exports this crate, so most users never name it.
//!
//! Plugin authors do not depend on this crate: a tool compiles against `capability-types` only.
//!
//! ```
//! # #[cfg(feature = "toml")] {
//! use capability_policy::{PersonalityPolicy, PolicyFormat};
//! let policy = PersonalityPolicy::parse(
//!     "id = \"reader\"\n[fs_reach]\nread = [\"~/notes\"]\n",
//!     PolicyFormat::Toml,
//!     Some("/home/ada".as_ref()),
//! )
//! .unwrap();
//! assert_eq!(policy.fs_reach.read, [std::path::Path::new("/home/ada/notes")]);
//! # }
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
//! An empty personality allows nothing. Unknown fields, duplicate keys, relative paths and
//! loader-hook environment names are errors at load time, so a typo can never silently drop a
//! restriction (docs/policy.md, "Strict parsing").
#![deny(missing_docs)]

mod env;
mod error;
#[cfg(feature = "yaml")]
mod ethos;
#[cfg(feature = "yaml")]
mod ethos_downgrade;
#[cfg(feature = "yaml")]
mod ethos_lines;
#[cfg(feature = "yaml")]
mod ethos_mcp;
#[cfg(feature = "yaml")]
mod ethos_reach;
mod names;
mod narrowing;
mod parse;
mod personality;
mod strict;

pub use crate::env::{
    REFUSED_ENV_NAMES, REFUSED_ENV_PREFIXES, is_fixed_env_name, is_refused_env_name,
    is_safe_env_name, valid_env_name,
};
pub use crate::error::PolicyError;
#[cfg(feature = "yaml")]
pub use crate::ethos::{
    ETHOS_ALWAYS_ASKS, ETHOS_ALWAYS_DENY, ETHOS_DEFINITION_ENTRIES, ETHOS_OTHER_FILES,
    ETHOS_POLICY_FILES, ETHOS_SMART_ASKS, ETHOS_STATE_DEFINITIONS, ETHOS_STATE_DENY, EthosFiles,
    EthosVars, ethos_definition_rules,
};
#[cfg(feature = "yaml")]
pub use crate::ethos_downgrade::{ETHOS_DOWNGRADED, ETHOS_RUN_SCOPED, ETHOS_SCHEDULERS};
pub use crate::names::{is_mcp_server_entry, valid_tool_name};
pub use crate::narrowing::{NarrowFs, NarrowNetwork, NarrowProcess, Narrowing};
pub use crate::personality::{
    AfterUntrusted, AttachmentRules, EnvRules, EscalateRules, NetworkRules, PersonalityPolicy,
    PolicyFormat, PolicyFsReach, ProcessRules, RestrictedAddresses, Safety, ToolConstraints,
    normalize_lexically,
};
pub use crate::strict::{
    MAX_POLICY_BYTES, MAX_POLICY_DEPTH, check_policy_text, check_text_within, json_duplicate_key,
};
