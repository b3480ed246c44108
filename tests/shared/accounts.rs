//! Who a test runs as, and copying a program to run it from elsewhere (shared by the test files
//! of several crates through `#[path]`: capability-process, toolcap).
#![allow(dead_code, reason = "each test binary uses part of this")]

use std::path::Path;

/// Whether this process runs as root.
pub(crate) fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"))
}

/// Copies the program `from` to `to` in a process of its own (`cp`): a copy this process wrote
/// would be open for writing in any child another test forks meanwhile, until that child
/// executes, and running the copy then fails with `Text file busy`.
pub(crate) fn copy_program(from: &Path, to: &Path) {
    let done = std::process::Command::new("cp")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(done.success(), "cp {from:?} {to:?}");
}
