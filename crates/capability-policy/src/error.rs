//! Why a policy cannot be used.

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
