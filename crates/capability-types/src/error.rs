//! Errors and outcomes: call-time denials with stable codes and the JSON result of one call (docs/reference.md).

use std::fmt;

use serde::de::Deserializer;
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The stable code at the start of every policy refusal's message (docs/reference.md, "Denial codes").
///
/// Scripts and tests match on these; they never change meaning.
///
/// ```
/// let code: capability_types::DenialCode = serde_json::from_str(r#""PATH_NOT_REACHABLE""#).unwrap();
/// assert_eq!(code.as_str(), "PATH_NOT_REACHABLE");
/// ```
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
    /// A tool left out by a per-call tool filter (`allowedTools`, `allowedMcpServers`, …).
    ToolFilteredOut,
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
            DenialCode::ToolFilteredOut => "TOOL_FILTERED_OUT",
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
    /// What the operation names does not exist (a file, a directory, a secret): allowed to
    /// look, nothing there. Distinct from [`Denied`](Self::Denied), which says "not allowed".
    #[error("{0}")]
    NotFound(String),
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

    /// Something the operation names does not exist, named in `message`.
    pub fn not_found(message: impl Into<String>) -> Self {
        CapabilityError::NotFound(message.into())
    }

    /// Whether this says "not there" rather than "not allowed" or "failed":
    ///
    /// ```
    /// use capability_types::{CapabilityError, DenialCode};
    /// assert!(CapabilityError::not_found("no such file: a.md").is_not_found());
    /// assert!(!CapabilityError::denied(DenialCode::PathNotReachable, "read of /etc").is_not_found());
    /// ```
    pub fn is_not_found(&self) -> bool {
        matches!(self, CapabilityError::NotFound(_))
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
            CapabilityError::NotFound(_) => ErrorCode::NotFound,
            CapabilityError::Failed(_) => ErrorCode::ExecutionFailed,
        }
    }
}

/// Why a call did not succeed. Serialised in `snake_case`.
///
/// ```
/// use capability_types::{CapabilityError, ErrorCode};
/// assert_eq!(CapabilityError::invalid_input("path: required").result_code(), ErrorCode::InputInvalid);
/// assert_eq!(serde_json::to_string(&ErrorCode::NotAvailable).unwrap(), r#""not_available""#);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorCode {
    /// The arguments are malformed.
    InputInvalid,
    /// The tool, a backend it needs, or the tool itself is not available.
    NotAvailable,
    /// A policy refused the call or something it tried to do.
    Denied,
    /// The tool failed or panicked.
    ExecutionFailed,
    /// The call ran out of time.
    Timeout,
    /// The call was cancelled.
    Cancelled,
    /// Something the call named does not exist.
    NotFound,
}

impl ErrorCode {
    /// The code as it appears in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InputInvalid => "input_invalid",
            ErrorCode::NotAvailable => "not_available",
            ErrorCode::Denied => "denied",
            ErrorCode::ExecutionFailed => "execution_failed",
            ErrorCode::Timeout => "timeout",
            ErrorCode::Cancelled => "cancelled",
            ErrorCode::NotFound => "not_found",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The outcome of a tool call: `{"ok":true,"value":...}` or
/// `{"ok":false,"code":"...","error":"..."}`.
///
/// ```
/// use capability_types::{ErrorCode, ToolResult};
/// let ok = ToolResult::Ok(serde_json::json!(3));
/// assert_eq!(serde_json::to_string(&ok).unwrap(), r#"{"ok":true,"value":3}"#);
/// let err = ToolResult::error(ErrorCode::Denied, "PATH_NOT_REACHABLE: read not permitted for /etc/passwd");
/// assert_eq!(
///     serde_json::to_string(&err).unwrap(),
///     r#"{"ok":false,"code":"denied","error":"PATH_NOT_REACHABLE: read not permitted for /etc/passwd"}"#,
/// );
/// ```
#[derive(Debug, Clone, PartialEq)]
// toolcap: exhaustive(reason = "a result is a success or a failure, by definition")
pub enum ToolResult {
    /// The call succeeded with this value.
    Ok(Value),
    /// The call did not succeed.
    Err {
        /// Why, as a machine-readable code.
        code: ErrorCode,
        /// What happened, for a person.
        error: String,
    },
}

impl ToolResult {
    /// A failed result.
    pub fn error(code: ErrorCode, error: impl Into<String>) -> Self {
        ToolResult::Err {
            code,
            error: error.into(),
        }
    }

    /// Whether the call succeeded.
    pub fn is_ok(&self) -> bool {
        matches!(self, ToolResult::Ok(_))
    }

    /// The error code of a failed call.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            ToolResult::Ok(_) => None,
            ToolResult::Err { code, .. } => Some(*code),
        }
    }

    /// The value of a successful call.
    pub fn value(&self) -> Option<&Value> {
        match self {
            ToolResult::Ok(v) => Some(v),
            ToolResult::Err { .. } => None,
        }
    }

    /// The message of a failed call.
    pub fn error_message(&self) -> Option<&str> {
        match self {
            ToolResult::Ok(_) => None,
            ToolResult::Err { error, .. } => Some(error),
        }
    }
}

impl From<Result<Value, CapabilityError>> for ToolResult {
    fn from(r: Result<Value, CapabilityError>) -> Self {
        match r {
            Ok(v) => ToolResult::Ok(v),
            Err(e) => ToolResult::error(e.result_code(), e.to_string()),
        }
    }
}

impl Serialize for ToolResult {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            ToolResult::Ok(value) => {
                let mut m = s.serialize_map(Some(2))?;
                m.serialize_entry("ok", &true)?;
                m.serialize_entry("value", value)?;
                m.end()
            }
            ToolResult::Err { code, error } => {
                let mut m = s.serialize_map(Some(3))?;
                m.serialize_entry("ok", &false)?;
                m.serialize_entry("code", code)?;
                m.serialize_entry("error", error)?;
                m.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for ToolResult {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Raw {
            ok: bool,
            #[serde(default)]
            value: Option<Value>,
            #[serde(default)]
            code: Option<ErrorCode>,
            #[serde(default)]
            error: Option<String>,
        }
        let raw = Raw::deserialize(d)?;
        use serde::de::Error;
        match (raw.ok, raw.value, raw.code, raw.error) {
            (true, value, None, None) => Ok(ToolResult::Ok(value.unwrap_or(Value::Null))),
            (false, None, Some(code), Some(error)) => Ok(ToolResult::Err { code, error }),
            (true, ..) => Err(D::Error::custom("an ok result has only `ok` and `value`")),
            (false, ..) => Err(D::Error::custom(
                "a failed result has `ok`, `code` and `error` and no `value`",
            )),
        }
    }
}

/// The deepest nesting of arrays and objects a tool's arguments or result may have (100). The
/// same in process mode and in the capsule, where a value travels inside a message that adds a
/// few levels of its own and JSON decoding stops at 128 (docs/isolation-model.md, "Limits").
///
/// ```
/// use capability_types::{MAX_VALUE_DEPTH, value_depth};
/// let deep = (0..MAX_VALUE_DEPTH + 1).fold(serde_json::json!(1), |v, _| serde_json::json!([v]));
/// assert!(value_depth(&deep) > MAX_VALUE_DEPTH);
/// ```
pub const MAX_VALUE_DEPTH: usize = 100;

/// How deeply `value` nests arrays and objects (a scalar is 0), counted without recursion.
///
/// ```
/// use capability_types::value_depth;
/// assert_eq!(value_depth(&serde_json::json!(1)), 0);
/// assert_eq!(value_depth(&serde_json::json!({"a": [1, {"b": []}]})), 4);
/// ```
pub fn value_depth(value: &serde_json::Value) -> usize {
    use serde_json::Value;
    // Only nested containers go on the stack: flat arguments allocate nothing.
    fn push_nested<'a>(v: &'a Value, depth: usize, stack: &mut Vec<(&'a Value, usize)>) {
        let mut push = |item: &'a Value| {
            if item.is_array() || item.is_object() {
                stack.push((item, depth + 1));
            }
        };
        match v {
            Value::Array(items) => items.iter().for_each(&mut push),
            Value::Object(map) => map.values().for_each(&mut push),
            _ => {}
        }
    }
    if !(value.is_array() || value.is_object()) {
        return 0;
    }
    let mut deepest = 1;
    let mut stack = Vec::new();
    push_nested(value, 1, &mut stack);
    while let Some((v, depth)) = stack.pop() {
        deepest = deepest.max(depth);
        push_nested(v, depth, &mut stack);
    }
    deepest
}

#[cfg(test)]
mod tests {
    use super::DenialCode;
    use super::*;

    #[test]
    fn round_trip_and_hostile_shapes() {
        for text in [
            r#"{"ok":true,"value":{"a":[1,2]}}"#,
            r#"{"ok":false,"code":"timeout","error":"slow"}"#,
        ] {
            let r: ToolResult = serde_json::from_str(text).unwrap();
            assert_eq!(serde_json::to_string(&r).unwrap(), text);
        }
        for bad in [
            r#"{"ok":true,"value":1,"code":"denied"}"#,
            r#"{"ok":false,"code":"denied"}"#,
            r#"{"ok":false,"code":"nope","error":"x"}"#,
            r#"{"ok":false,"code":"denied","error":"x","value":1}"#,
            r#"{"ok":"yes"}"#,
            r#"{"ok":true,"extra":1}"#,
        ] {
            assert!(
                serde_json::from_str::<ToolResult>(bad).is_err(),
                "{bad} accepted"
            );
        }
    }

    #[test]
    fn errors_map_to_codes() {
        let cases = [
            (
                CapabilityError::denied(DenialCode::EnvNotAllowed, "x"),
                ErrorCode::Denied,
            ),
            (CapabilityError::invalid_input("x"), ErrorCode::InputInvalid),
            (CapabilityError::not_available("x"), ErrorCode::NotAvailable),
            (CapabilityError::Timeout("x".into()), ErrorCode::Timeout),
            (CapabilityError::Cancelled, ErrorCode::Cancelled),
            (CapabilityError::failed("x"), ErrorCode::ExecutionFailed),
        ];
        for (err, code) in cases {
            assert_eq!(ToolResult::from(Err(err)).code(), Some(code));
        }
    }
}
