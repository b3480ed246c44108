//! Argument parsing shared by the standard tools: a typed struct per tool, unknown fields
//! refused, and errors that name the field.

use capability_types::CapabilityError;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Parses a tool's JSON arguments; the error is `input_invalid` and names the bad field.
pub(crate) fn parse<T: DeserializeOwned>(args: Value) -> Result<T, CapabilityError> {
    if !args.is_object() {
        return Err(CapabilityError::invalid_input(
            "arguments: expected a JSON object",
        ));
    }
    serde_path_to_error::deserialize(args).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        if path.is_empty() || path == "." {
            CapabilityError::invalid_input(inner)
        } else {
            CapabilityError::invalid_input(format!("{path}: {inner}"))
        }
    })
}
