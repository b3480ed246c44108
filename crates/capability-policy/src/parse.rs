//! Reading a policy document (a personality, a narrowing, an Ethos file) in JSON, TOML or YAML:
//! strictly (a key given twice, an unknown field, nesting or size past the limits refused), with
//! errors that name the field and, for TOML, the line (docs/policy.md).

use crate::{PolicyError, PolicyFormat};

fn syntax(field: Option<String>, message: String) -> PolicyError {
    PolicyError::Syntax {
        field: field.filter(|f| !f.is_empty() && f != "."),
        message,
    }
}

/// Parses any of the policy documents in `format`, with errors that name the field.
pub(crate) fn parse_any<T: serde::de::DeserializeOwned>(
    text: &str,
    format: PolicyFormat,
) -> Result<T, PolicyError> {
    // A byte-order mark (what Windows editors write first) means nothing in UTF-8; the YAML
    // parser took it for the start of a second document, and JSON's for a syntax error.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    crate::strict::check_policy_text(text, format).map_err(|e| syntax(None, e))?;
    match format {
        PolicyFormat::Json => {
            let mut de = serde_json::Deserializer::from_str(text);
            let value = from_deserializer(&mut de)?;
            de.end().map_err(|e| syntax(None, e.to_string()))?;
            Ok(value)
        }
        PolicyFormat::Toml => parse_toml(text),
        PolicyFormat::Yaml => parse_yaml(text),
    }
}

fn from_deserializer<'de, D, T>(de: D) -> Result<T, PolicyError>
where
    D: serde::Deserializer<'de>,
    D::Error: std::fmt::Display,
    T: serde::Deserialize<'de>,
{
    serde_path_to_error::deserialize(de).map_err(|e| {
        let field = e.path().to_string();
        syntax(Some(field), e.into_inner().to_string())
    })
}

#[cfg(feature = "toml")]
fn parse_toml<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, PolicyError> {
    // toml's own messages quote the source with a caret diagram over several lines; a policy
    // error is one line: where, and what.
    let one_line = |e: &toml::de::Error| {
        let message = e.message().trim_end_matches('\n').replace('\n', " ");
        match e.span() {
            Some(span) => {
                // Bytes, not a str slice: an offset inside a character must not panic.
                let before = &text.as_bytes()[..span.start.min(text.len())];
                let line = before.iter().filter(|b| **b == b'\n').count() + 1;
                let column = before.len()
                    - before
                        .iter()
                        .rposition(|b| *b == b'\n')
                        .map_or(0, |i| i + 1)
                    + 1;
                format!("TOML line {line}, column {column}: {message}")
            }
            None => format!("TOML: {message}"),
        }
    };
    let de = toml::Deserializer::parse(text).map_err(|e| syntax(None, one_line(&e)))?;
    serde_path_to_error::deserialize(de).map_err(|e| {
        let field = e.path().to_string();
        syntax(Some(field), one_line(e.inner()))
    })
}

#[cfg(not(feature = "toml"))]
fn parse_toml<T>(_: &str) -> Result<T, PolicyError> {
    Err(PolicyError::UnsupportedFormat(
        "TOML support is not compiled in (enable the `toml` feature of capability-policy)"
            .to_owned(),
    ))
}

#[cfg(feature = "yaml")]
fn parse_yaml<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, PolicyError> {
    // A first pass into a generic value finds a key given twice in one mapping, which the typed
    // pass would let the last one win for maps (constraints).
    if let Err(e) = serde_norway::from_str::<serde_norway::Value>(text) {
        let message = e.to_string();
        if let Some(at) = message.find("duplicate entry with key ") {
            let rest = &message[at + "duplicate entry with key ".len()..];
            let key = rest
                .split(" at line")
                .next()
                .unwrap_or(rest)
                .trim_matches('"')
                .to_owned();
            let line = e.location().map_or(0, |l| l.line());
            return Err(syntax(
                None,
                crate::strict::yaml_duplicate(text, &key, line),
            ));
        }
        if message.contains("duplicate entry") {
            return Err(syntax(None, message));
        }
    }
    from_deserializer(serde_norway::Deserializer::from_str(text))
}

#[cfg(not(feature = "yaml"))]
fn parse_yaml<T>(_: &str) -> Result<T, PolicyError> {
    Err(PolicyError::UnsupportedFormat(
        "YAML support is not compiled in (enable the `yaml` feature of capability-policy)"
            .to_owned(),
    ))
}
