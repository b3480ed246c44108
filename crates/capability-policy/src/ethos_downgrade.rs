//! Ethos's post-read downgrade (`safety.injectionDefense.postReadDowngrade`) as toolcap's
//! `[after_untrusted]` (docs/policy.md, "Ethos personality directories", "After untrusted
//! output").
//!
//! Ethos turns it on for every personality that does not turn it off: after a step in which a
//! tool it marks `outputIsUntrusted` returned, the tools of its list are refused for the next
//! `turns` steps of the run (two unless said), and, in the later Ethos, its memory writers and
//! the tools that schedule a later run for the rest of the run. Ethos reads the block a line at
//! a time; toolcap reads it as YAML too and takes whichever reading refuses more: the downgrade
//! is off only where both read `enabled: false`, it lasts the longer of the two `turns`, and it
//! pauses the tools either list names.

use serde_json::{Map, Value};

use crate::AfterUntrusted;
use crate::names::{is_mcp_server_entry, valid_tool_name};

/// The tools Ethos pauses after an untrusted result when a personality names none
/// (`postReadDowngrade.tools` absent or `auto`): its `DEFAULT_DOWNGRADED_TOOLS`, the later
/// Ethos's memory and skill writers included.
pub const ETHOS_DOWNGRADED: [&str; 14] = [
    "terminal",
    "run_code",
    "run_tests",
    "write_file",
    "patch_file",
    "web_extract",
    "browse_url",
    "browser_click",
    "browser_type",
    "process_start",
    "process_stop",
    "memory_write",
    "team_memory_write",
    "skill_propose",
];

/// Of the paused tools, those the later Ethos refuses for the rest of the run once it has seen
/// an untrusted result (its `RUN_SCOPED_DOWNGRADE_TOOLS`: what they write, a later session's
/// system prompt reads).
pub const ETHOS_RUN_SCOPED: [&str; 3] = ["memory_write", "team_memory_write", "skill_propose"];

/// The tools that schedule a later run whose prompt this run writes, which the later Ethos
/// refuses for the rest of a run that has seen an untrusted result whatever the list says (its
/// `RUN_SCOPED_SCHEDULERS`). Ethos lets some of their calls through (`cron` that only lists,
/// `delegate_task` in the foreground); toolcap does not read their arguments and holds every
/// call: stricter.
pub const ETHOS_SCHEDULERS: [&str; 7] = [
    "cron",
    "goal_create",
    "kanban_create",
    "kanban_create_goal",
    "kanban_create_swarm",
    "kanban_decompose",
    "delegate_task",
];

/// What one reading of `postReadDowngrade` says.
struct Reading {
    off: bool,
    turns: u32,
    tools: Vec<String>,
}

/// One reading of the block (`None`: no block, Ethos's defaults). Ethos's own reading gives
/// every scalar as text; YAML's gives booleans and numbers too, read the same way.
fn reading(block: Option<&Value>) -> Reading {
    let field = |name: &str| block.and_then(|b| b.get(name));
    let off = match field("enabled") {
        Some(Value::Bool(false)) => true,
        Some(Value::String(s)) => s == "false",
        _ => false,
    };
    let turns = match field("turns") {
        Some(Value::Number(n)) => n.as_u64(),
        Some(Value::String(s)) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => {
            Some(s.parse::<u64>().unwrap_or(u64::MAX))
        }
        _ => None,
    }
    .map_or(2, |n| u32::try_from(n).unwrap_or(u32::MAX));
    let tools = match field("tools") {
        Some(Value::Array(list)) => list
            .iter()
            .map(|v| match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect(),
        _ => ETHOS_DOWNGRADED.iter().map(|t| (*t).to_owned()).collect(),
    };
    Reading { off, turns, tools }
}

/// `[after_untrusted]` for an Ethos personality, from its `safety` block as YAML (`yaml`) and as
/// Ethos reads it (`ethos`); `None` only where both readings turn the downgrade off.
pub(crate) fn after_untrusted(
    yaml: Option<&Value>,
    ethos: Option<&Map<String, Value>>,
) -> Option<AfterUntrusted> {
    let downgrade = |safety: Option<&Value>| {
        safety
            .and_then(|s| s.get("injectionDefense"))
            .and_then(|i| i.get("postReadDowngrade"))
            .cloned()
    };
    let ethos = ethos.map(|m| Value::Object(m.clone()));
    let (a, b) = (
        reading(downgrade(yaml).as_ref()),
        reading(downgrade(ethos.as_ref()).as_ref()),
    );
    if a.off && b.off {
        return None;
    }
    // A name no tool can have (Ethos reads any text) matches nothing here.
    let mut pause: Vec<String> = a
        .tools
        .into_iter()
        .chain(b.tools)
        .filter(|t| valid_tool_name(t) || is_mcp_server_entry(t))
        .collect();
    pause.sort();
    pause.dedup();
    let mut hold: Vec<String> = ETHOS_RUN_SCOPED
        .iter()
        .filter(|t| pause.iter().any(|p| p == *t))
        .chain(ETHOS_SCHEDULERS.iter())
        .map(|t| (*t).to_owned())
        .collect();
    hold.sort();
    Some(AfterUntrusted {
        pause,
        batches: a.turns.max(b.turns),
        hold,
        // The state dirs, which the caller knows.
        hold_writes: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// With no block, Ethos's defaults; off only where both readings say so; the longer
    /// `turns` and both lists.
    #[test]
    fn the_downgrade_reads_as_the_stricter_of_ethos_and_yaml() {
        let on = after_untrusted(None, None).unwrap();
        assert_eq!(on.batches, 2);
        assert!(on.pause.iter().any(|t| t == "write_file"));
        assert!(on.hold.iter().any(|t| t == "memory_write"));
        assert!(on.hold.iter().any(|t| t == "cron"));
        let block = |v: Value| json!({ "injectionDefense": { "postReadDowngrade": v } });
        let off_yaml = block(json!({ "enabled": false }));
        let off_ethos = block(json!({ "enabled": "false" }));
        let as_map = |v: &Value| v.as_object().unwrap().clone();
        assert_eq!(
            after_untrusted(Some(&off_yaml), Some(&as_map(&off_ethos))),
            None
        );
        // `enabled: false # off` is `false # off` to Ethos, which turns nothing off.
        let commented = block(json!({ "enabled": "false # off" }));
        assert!(after_untrusted(Some(&off_yaml), Some(&as_map(&commented))).is_some());
        let turns = after_untrusted(
            Some(&block(
                json!({ "turns": 3, "tools": ["terminal", "Not A Tool"] }),
            )),
            Some(&as_map(&block(
                json!({ "turns": "5", "tools": ["write_file"] }),
            ))),
        )
        .unwrap();
        assert_eq!(turns.batches, 5);
        assert_eq!(turns.pause, ["terminal", "write_file"]);
        // The memory writers are held only where they are paused; the schedulers always.
        assert!(!turns.hold.iter().any(|t| t == "memory_write"));
        assert!(turns.hold.iter().any(|t| t == "goal_create"));
    }
}
