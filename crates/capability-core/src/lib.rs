//! toolcap's enforcement points: matching, registration validation, call-time resolution, the
//! fail-closed guard, the registry and audit.
//!
//! `capability-core` depends on `capability-types` (the plugin contract) and `capability-policy`
//! (the personality model, re-exported here); it performs no I/O of its own. The
//! backends that touch the world are passed in as [`CapabilityBackends`] (factories from the
//! backend crates), and the audit file is a writer the caller opened.
//!
//! The three enforcement points:
//!
//! 1. **Registration** — [`validate_registration`] reports, as data, every declared entry the
//!    personality will not grant.
//! 2. **Call time** — [`resolve_capabilities`] intersects the declaration with the personality
//!    and builds the scoped objects a tool receives; the intersection functions in
//!    [`matching`] are the same ones the validator uses.
//! 3. **Fail-closed guard** — [`check_backends`]: a tool that declares a category whose backend
//!    is not configured fails with `not_available` and never runs.
//!
//! [`DefaultToolRegistry::execute_parallel`] runs all three for every call.
//!
//! # Denied by default
//!
//! No personality ([`CompiledPolicy::none`]) or an empty list allows nothing. Deny lists and
//! the built-in deny floor win over allow lists.
#![deny(missing_docs)]

mod accounts;
mod after_untrusted;
mod attachments;
pub mod audit;
pub(crate) mod canonical;
mod escalation;
mod filter;
mod isolation;
pub mod manifest;
pub mod matching;
mod policy;
mod realpath;
mod registry;
mod resolve;
mod restrictions;
mod validate;

pub use capability_policy::{
    AttachmentRules, EnvRules, EscalateRules, MAX_POLICY_BYTES, MAX_POLICY_DEPTH, NarrowFs,
    NarrowNetwork, NarrowProcess, Narrowing, NetworkRules, PersonalityPolicy, PolicyError,
    PolicyFormat, PolicyFsReach, ProcessRules, RestrictedAddresses, Safety, ToolConstraints,
    check_policy_text, is_fixed_env_name, is_mcp_server_entry, is_refused_env_name,
    is_safe_env_name, json_duplicate_key, normalize_lexically, valid_env_name, valid_tool_name,
};
#[cfg(feature = "yaml")]
pub use capability_policy::{
    ETHOS_ALWAYS_DENY, ETHOS_DEFINITION_ENTRIES, ETHOS_OTHER_FILES, ETHOS_POLICY_FILES,
    ETHOS_STATE_DEFINITIONS, ETHOS_STATE_DENY, EthosFiles, EthosVars, ethos_definition_rules,
};

pub use crate::attachments::{Attachment, AttachmentCache};
pub use crate::audit::{
    AuditError, AuditEvent, AuditKind, AuditSink, DurableWrite, EVENT_LINE_START, FsyncPolicy,
    JsonLinesAuditSink, MemoryAuditSink, begins_an_event, whole_lines_len,
};
pub use crate::canonical::canonical_json;
pub use crate::escalation::{
    ApprovalHandler, ApprovalRequest, EscalationSubject, MAX_SUBJECT_BYTES_ASKED,
    MAX_SUBJECTS_ASKED, mask_arguments, mask_arguments_with, shown, shown_at_most, too_much_to_ask,
};
pub use crate::filter::{ToolFilter, ToolFilterError};
pub use crate::isolation::{IsolationKey, IsolationSelection, ToolIsolation};
pub use crate::manifest::{
    MAX_MANIFEST_BYTES, Manifest, Widening, WideningCode, build_manifest, diff,
};
pub use crate::policy::{CompiledPolicy, DeniedRoot, FloorLift, InternationalHost};
pub use crate::registry::{
    Admission, Admitted, DefaultToolRegistry, ExecutionContext, Invocation, MAX_ERROR_MESSAGE,
    RegistryConfig, RegistryError, ToolCall, ToolCallResult, apply_budget, bounded_message,
    panic_message,
};
pub use crate::resolve::{
    Approvals, Backend, CapabilityBackends, Intersected, Plan, ResolutionCache,
    ResolvedCapabilities, ResolvedHosts, ResolvedPaths, ResolvedProcess, ScopedObjects,
    build_scoped, check_backends, needs_backends, resolve, resolve_capabilities,
};
pub use crate::validate::{
    CapabilityValidationError, validate_declaration, validate_registration,
    validate_tools_for_personality,
};
