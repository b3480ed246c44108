//! Argument parsing shared by the standard tools: a typed struct per tool, unknown fields
//! refused, and errors that name the field.

use capability_types::CapabilityError;
use schemars::JsonSchema;
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

/// The JSON schema of an argument type, generated from the type itself (JSON Schema 2020-12,
/// without `$schema` and `title`), so the schema a client sees and the parser that checks the
/// arguments cannot drift apart.
pub(crate) fn schema_of<T: JsonSchema>() -> Value {
    let mut schema = schemars::generate::SchemaSettings::draft2020_12()
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value();
    if let Some(map) = schema.as_object_mut() {
        map.remove("$schema");
        map.remove("title");
    }
    schema
}
