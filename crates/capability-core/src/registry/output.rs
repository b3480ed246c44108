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

/// The longest error message a call returns, in bytes ([`bounded_message`]).
pub const MAX_ERROR_MESSAGE: usize = 8 * 1024;

/// How much of an over-long message's end is kept: where an error says why (an operating
/// system's reason follows the path it was about).
const KEPT_END: usize = 2 * 1024;

/// `message`, or, when it is longer than [`MAX_ERROR_MESSAGE`] bytes, its beginning and its end
/// with how many bytes between them were left out. An error often repeats what the call gave
/// (a path, a binary's name, a tool's name), and a model or an audit log should not be handed a
/// megabyte of its own argument back; the beginning keeps the stable code and what was refused,
/// the end the reason (docs/semantics.md, "The registry").
pub fn bounded_message(message: String) -> String {
    if message.len() <= MAX_ERROR_MESSAGE {
        return message;
    }
    // Room for the marker between the two parts, whatever the count.
    const MARKER_ROOM: usize = 64;
    let mut head = MAX_ERROR_MESSAGE - KEPT_END - MARKER_ROOM;
    while !message.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = message.len() - KEPT_END;
    while !message.is_char_boundary(tail) {
        tail += 1;
    }
    format!(
        "{}… ({} bytes not shown) …{}",
        &message[..head],
        tail - head,
        &message[tail..]
    )
}

/// Whether `value` nests arrays and objects more than `max` levels deep
/// (`capability_types::value_depth(value) > max`), decided without measuring the whole depth:
/// it goes no more than `max + 1` levels down (so a hostile depth costs it nothing), and a
/// shallow value costs a walk of its items and no allocation. Every call's result passes it
/// (docs/benchmarks.md, "Instructions per call").
pub(crate) fn nests_deeper_than(value: &serde_json::Value, max: usize) -> bool {
    use serde_json::Value;
    // A scalar item is looked at here, not in a call of its own.
    let below = |v: &Value| {
        matches!(v, Value::Array(_) | Value::Object(_)) && max > 0 && nests_deeper_than(v, max - 1)
    };
    match value {
        Value::Array(items) => max == 0 || items.iter().any(below),
        Value::Object(map) => max == 0 || map.values().any(below),
        _ => false,
    }
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

    // guarantee: G-REG-16
    #[test]
    fn a_long_message_keeps_its_beginning_and_its_end() {
        assert_eq!(bounded_message("short".to_owned()), "short");
        let exact = "x".repeat(MAX_ERROR_MESSAGE);
        assert_eq!(bounded_message(exact.clone()), exact, "at the bound, whole");
        // A denial repeating a megabyte of its path, with the reason at the end; multi-byte
        // characters around both cuts.
        let long = format!(
            "PATH_NOT_REACHABLE: read not permitted for /etc/{}: File name too long",
            "é".repeat(500_000)
        );
        let bounded = bounded_message(long.clone());
        assert!(bounded.len() <= MAX_ERROR_MESSAGE, "{}", bounded.len());
        assert!(bounded.starts_with("PATH_NOT_REACHABLE: read not permitted for /etc/é"));
        assert!(
            bounded.ends_with("éé: File name too long"),
            "the reason kept"
        );
        let (head, rest) = bounded.split_once("… (").unwrap();
        let (count, tail) = rest.split_once(" bytes not shown) …").unwrap();
        assert_eq!(
            head.len() + count.parse::<usize>().unwrap() + tail.len(),
            long.len(),
            "the count is what was left out"
        );
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

    fn nested() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<i64>().prop_map(serde_json::Value::from),
            "[a-z]{0,3}".prop_map(serde_json::Value::from),
        ];
        leaf.prop_recursive(12, 64, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::Array),
                proptest::collection::btree_map("[a-c]", inner, 0..4)
                    .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        #[test]
        fn nests_deeper_than_agrees_with_the_depth(value in nested(), max in 0usize..14) {
            proptest::prop_assert_eq!(
                nests_deeper_than(&value, max),
                capability_types::value_depth(&value) > max,
                "{} at {}", value, max
            );
        }
    }

    #[test]
    fn nests_deeper_than_stops_at_its_bound() {
        // A million levels: answered from the first 101, without overflowing the stack.
        let mut deep = serde_json::json!(1);
        for _ in 0..1_000_000 {
            deep = serde_json::Value::Array(vec![deep]);
        }
        assert!(nests_deeper_than(&deep, capability_types::MAX_VALUE_DEPTH));
        // serde_json drops nested values recursively: take it apart by hand.
        while let serde_json::Value::Array(mut items) = deep {
            deep = items.pop().unwrap_or(serde_json::Value::Null);
        }
    }
}
