//! Who a test runs as, copying a program to run it from elsewhere, and the out-of-memory scores
//! of processes seen from outside (shared by the test files of several crates through
//! `#[path]`: capability-process, toolcap).
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

/// The out-of-memory scores (`oom_score_adj`) of the processes whose last argument is
/// `last_argument`, once at least one is there (read from outside, as the kernel's killer sees
/// them; a confined child cannot read its own `/proc`), or none after 15 seconds.
pub(crate) fn oom_scores_of(last_argument: &str) -> Vec<String> {
    let needle = format!("{last_argument}\0");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    loop {
        let found: Vec<String> = std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter(|e| {
                std::fs::read(e.path().join("cmdline"))
                    .is_ok_and(|c| c.ends_with(needle.as_bytes()))
            })
            .filter_map(|e| std::fs::read_to_string(e.path().join("oom_score_adj")).ok())
            .map(|s| s.trim().to_owned())
            .collect();
        if !found.is_empty() || std::time::Instant::now() > deadline {
            return found;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}
