//! Errors: call-time denials with stable codes, registration findings, and policy-file errors.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::result::ErrorCode;

/// The stable code at the start of every policy refusal's message (design.md §7).
///
/// Scripts and tests match on these; they never change meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[non_exhaustive]
pub enum DenialCode {
    /// A fetch to a host outside the resolved host set, or to a refused address.
    HostNotAllowed,
    /// A secret outside the tool's declared refs.
    SecretNotDeclared,
    /// A path outside the resolved read or write reach, or under a deny rule.
    PathNotReachable,
    /// A binary outside the resolved allowed binaries.
    BinaryNotAllowed,
    /// An argv matching a `deny_args` pattern.
    ArgsNotAllowed,
    /// An environment variable a child may not receive.
    EnvNotAllowed,
    /// A tool outside the personality's toolset.
    ToolNotInToolset,
    /// An invocation constraint (`max_invocations`, `only_after`, `forbidden`).
    ConstraintNotMet,
    /// A call that needs approval was not approved (denied, no handler, handler error, timeout).
    EscalationRefused,
}

impl DenialCode {
    /// The code as it appears in messages and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            DenialCode::HostNotAllowed => "HOST_NOT_ALLOWED",
            DenialCode::SecretNotDeclared => "SECRET_NOT_DECLARED",
            DenialCode::PathNotReachable => "PATH_NOT_REACHABLE",
            DenialCode::BinaryNotAllowed => "BINARY_NOT_ALLOWED",
            DenialCode::ArgsNotAllowed => "ARGS_NOT_ALLOWED",
            DenialCode::EnvNotAllowed => "ENV_NOT_ALLOWED",
            DenialCode::ToolNotInToolset => "TOOL_NOT_IN_TOOLSET",
            DenialCode::ConstraintNotMet => "CONSTRAINT_NOT_MET",
            DenialCode::EscalationRefused => "ESCALATION_REFUSED",
        }
    }
}

impl fmt::Display for DenialCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error of a scoped object or a tool.
///
/// A denial's `Display` starts with its stable code:
///
/// ```
/// use capability_types::{CapabilityError, DenialCode, ErrorCode};
/// let err = CapabilityError::denied(
///     DenialCode::HostNotAllowed,
///     "api.stripe.com is not in the declared allowedHosts",
/// );
/// assert_eq!(err.to_string(), "HOST_NOT_ALLOWED: api.stripe.com is not in the declared allowedHosts");
/// assert_eq!(err.result_code(), ErrorCode::Denied);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CapabilityError {
    /// A policy refusal.
    #[error("{code}: {message}")]
    Denied {
        /// The stable code.
        code: DenialCode,
        /// What was refused; never the policy's full rule list, never a secret value.
        message: String,
    },
    /// The arguments or a value given to a scoped object are malformed.
    #[error("{0}")]
    InvalidInput(String),
    /// A capability or backend the call needs is not there.
    #[error("{0}")]
    NotAvailable(String),
    /// The operation ran out of time.
    #[error("{0}")]
    Timeout(String),
    /// The operation was cancelled.
    #[error("cancelled")]
    Cancelled,
    /// The operation itself failed (an I/O error, a non-policy backend failure, ...).
    #[error("{0}")]
    Failed(String),
}

impl CapabilityError {
    /// A policy refusal with its stable code.
    pub fn denied(code: DenialCode, message: impl Into<String>) -> Self {
        CapabilityError::Denied {
            code,
            message: message.into(),
        }
    }

    /// Malformed input, named in `message`.
    pub fn invalid_input(message: impl Into<String>) -> Self {
        CapabilityError::InvalidInput(message.into())
    }

    /// A missing capability or backend, named in `message`.
    pub fn not_available(message: impl Into<String>) -> Self {
        CapabilityError::NotAvailable(message.into())
    }

    /// A failure of the operation itself.
    pub fn failed(message: impl Into<String>) -> Self {
        CapabilityError::Failed(message.into())
    }

    /// The denial code, when this is a policy refusal.
    pub fn denial_code(&self) -> Option<DenialCode> {
        match self {
            CapabilityError::Denied { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// The [`ErrorCode`] a [`ToolResult`](crate::ToolResult) carries for this error.
    pub fn result_code(&self) -> ErrorCode {
        match self {
            CapabilityError::Denied { .. } => ErrorCode::Denied,
            CapabilityError::InvalidInput(_) => ErrorCode::InputInvalid,
            CapabilityError::NotAvailable(_) => ErrorCode::NotAvailable,
            CapabilityError::Timeout(_) => ErrorCode::Timeout,
            CapabilityError::Cancelled => ErrorCode::Cancelled,
            CapabilityError::Failed(_) => ErrorCode::ExecutionFailed,
        }
    }
}

/// One finding of registration validation: a declared capability the personality does not
/// grant, or a declaration that is malformed. Data, not a panic.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapabilityValidationError {
    /// The tool's name.
    pub tool: String,
    /// `network`, `fs_reach.read`, `fs_reach.write`, `process`, `secrets` or `storage`.
    pub capability: String,
    /// What is wrong, naming the value.
    pub message: String,
}

impl fmt::Display for CapabilityValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: {}", self.tool, self.capability, self.message)
    }
}

impl std::error::Error for CapabilityValidationError {}

/// A personality policy that cannot be used. Loading fails whole: a policy is never partly
/// applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// The text is not valid TOML / YAML / JSON, or does not have the policy's shape (unknown
    /// field, wrong type). `field` is the dotted path of the bad field when known.
    #[error("{}{message}", field.as_deref().map(|f| format!("field `{f}`: ")).unwrap_or_default())]
    Syntax {
        /// Dotted path of the offending field (`safety.network.allow[2]`), when known.
        field: Option<String>,
        /// The parser's message.
        message: String,
    },
    /// A field parsed but its value is not acceptable.
    #[error("field `{field}`: {message}")]
    Invalid {
        /// Dotted path of the offending field.
        field: String,
        /// What is wrong, naming the value.
        message: String,
    },
    /// The format's parser is not compiled in, or the format is unknown.
    #[error("unsupported policy format: {0}")]
    UnsupportedFormat(String),
}

impl PolicyError {
    /// An invalid value at `field`.
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        PolicyError::Invalid {
            field: field.into(),
            message: message.into(),
        }
    }

    /// The dotted path of the offending field, when known.
    pub fn field(&self) -> Option<&str> {
        match self {
            PolicyError::Syntax { field, .. } => field.as_deref(),
            PolicyError::Invalid { field, .. } => Some(field),
            PolicyError::UnsupportedFormat(_) => None,
        }
    }
}
