//! What a call returns when the tool itself cannot say: a panic's message, a value over the
//! result budget, a slot that was never filled, and the task guard that stops a dropped call.

use std::time::Duration;

use capability_types::{ErrorCode, ToolResult};
use serde_json::Value;

use super::ToolCallResult;

/// Aborts the task when dropped, so a dropped batch does not leave tools running.
pub(super) struct AbortOnDrop<T>(pub(super) tokio::task::JoinHandle<T>);

impl<T> AbortOnDrop<T> {
    pub(super) async fn join(mut self) -> Result<T, tokio::task::JoinError> {
        (&mut self.0).await
    }
}

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The text of a panic's payload (a `&str` or `String`), for an `execution_failed` message.
pub fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}

pub(super) fn unreachable_result() -> ToolCallResult {
    // Every slot is filled exactly once; this keeps the registry panic-free if that ever broke.
    ToolCallResult {
        call_id: String::new(),
        tool: String::new(),
        result: ToolResult::error(
            ErrorCode::ExecutionFailed,
            "internal error: the call produced no result",
        ),
        duration: Duration::ZERO,
    }
}

/// Truncates a value whose JSON exceeds `budget` bytes: a string keeps its first `budget` bytes
/// (on a character boundary); anything else becomes the first `budget` bytes of its JSON text.
/// Either way the marker `…[truncated: N of M bytes omitted]` ends the string.
pub fn apply_budget(value: Value, budget: usize) -> Value {
    let text = match &value {
        Value::String(s) => {
            if s.len() <= budget {
                return value;
            }
            s.clone()
        }
        other => {
            let json = other.to_string();
            if json.len() <= budget {
                return value;
            }
            json
        }
    };
    let mut cut = budget.min(text.len());
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    Value::String(format!(
        "{}…[truncated: {} of {} bytes omitted]",
        &text[..cut],
        text.len() - cut,
        text.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn budget_truncates_with_marker() {
        assert_eq!(apply_budget(json!("short"), 10), json!("short"));
        let v = apply_budget(json!("héllo world"), 2);
        assert_eq!(
            v,
            json!("h…[truncated: 11 of 12 bytes omitted]"),
            "never splits a character"
        );
        let v = apply_budget(json!({"a": [1, 2, 3]}), 5);
        assert_eq!(v, json!("{\"a\":…[truncated: 8 of 13 bytes omitted]"));
        assert_eq!(apply_budget(json!([1]), 100), json!([1]));
    }

    #[test]
    fn panic_payloads_become_messages() {
        assert_eq!(panic_message(Box::new("static")), "static");
        assert_eq!(panic_message(Box::new(String::from("owned"))), "owned");
        assert_eq!(panic_message(Box::new(7_u8)), "non-string panic payload");
        assert_eq!(
            unreachable_result().result.code(),
            Some(ErrorCode::ExecutionFailed)
        );
    }
}
