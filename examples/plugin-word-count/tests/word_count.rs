//! How a plugin author tests a tool with toolcap's test kit (docs/testing.md): a reach in one
//! line, the tool called through a real registry, and the refusals it must get.
#![allow(
    clippy::disallowed_methods,
    reason = "the test writes its fixture files"
)]

use std::sync::Arc;

use capability_tools::testing::TestReach;
use capability_types::{ErrorCode, Tool, ToolResult};
use plugin_word_count::WordCount;
use serde_json::json;

#[tokio::test]
async fn counts_a_file_in_reach_and_is_refused_outside_it() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.md"), "two words\nthree more words").unwrap();
    let registry = TestReach::new()
        .read(dir.path())
        .registry([Arc::new(WordCount) as Arc<dyn Tool>])
        .unwrap();

    let counted = registry
        .call("word_count", json!({"path": "notes.md"}))
        .await;
    assert_eq!(
        counted,
        ToolResult::Ok(json!({"lines": 2, "words": 5, "bytes": 26}))
    );

    match registry
        .call("word_count", json!({"path": "/etc/passwd"}))
        .await
    {
        ToolResult::Err { code, error } => {
            assert_eq!(code, ErrorCode::Denied);
            assert!(error.starts_with("PATH_NOT_REACHABLE"), "{error}");
        }
        other => panic!("{other:?}"),
    }
    match registry
        .call("word_count", json!({"path": "missing.md"}))
        .await
    {
        ToolResult::Err { code, .. } => assert_eq!(code, ErrorCode::NotFound),
        other => panic!("{other:?}"),
    }
}
