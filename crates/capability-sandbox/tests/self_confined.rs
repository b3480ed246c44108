//! A process that confines itself (`PreparedSandbox::confine_current_process`) with a write root
//! is kept from what runs later there, as a spawned child is: it cannot plant a hook in a
//! repository of its write root nor change a `.bashrc` or a `.mcp.json` there, and it still
//! writes a file beside them. Checked on disk by the process that started it.
//!
//! Its own `main` (no test harness): confining needs a process of one thread, so this test
//! starts itself again as that process, which confines itself, tries, and reports.
#![allow(
    clippy::disallowed_methods,
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a test that starts itself as a confined process and builds its fixture directly"
)]

use std::path::Path;
use std::process::Command;

/// Set in the started copy: the write root it confines itself to.
const ROOT_VAR: &str = "TOOLCAP_SELF_CONFINED_ROOT";

fn main() {
    if !cfg!(target_os = "linux") {
        println!("self_confined: kernel confinement is Linux only; nothing to check here");
        return;
    }
    match std::env::var_os(ROOT_VAR) {
        Some(root) => confined(Path::new(&root)),
        None => a_process_that_confines_itself_cannot_plant_what_runs_later(),
    }
}

/// The confined copy: confines itself to `root`, then tries each write and prints `name=0` for
/// one that succeeded, `name=1` for one refused.
fn confined(root: &Path) {
    let repo = root.join("repo");
    std::env::set_current_dir(&repo).expect("the repository");
    let prepared = capability_sandbox::SandboxPolicy::new()
        .write(root)
        .prepare()
        .expect("a sandbox for the write root");
    if let Err(e) = prepared.confine_current_process() {
        println!("refused: {e}");
        return;
    }
    let tries: [(&str, &Path); 4] = [
        ("hook", Path::new(".git/hooks/pre-commit")),
        ("config", Path::new(".git/config")),
        ("rc", Path::new("../.bashrc")),
        ("mcp", Path::new("../.mcp.json")),
    ];
    for (name, path) in tries {
        let wrote = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, b"evil\n"));
        println!("{name}={}", u8::from(wrote.is_err()));
    }
    let beside = std::fs::write("notes.md", "fine\n");
    println!("notes={}", u8::from(beside.is_err()));
}

// guarantee: G-FS-09
// guarantee: G-FS-10
// guarantee: G-FS-11
fn a_process_that_confines_itself_cannot_plant_what_runs_later() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let root = dir.path();
    let repo = root.join("repo");
    std::fs::create_dir(&repo).expect("the repository's directory");
    let init = Command::new("git")
        .args(["init", "-q"])
        .current_dir(&repo)
        .status()
        .expect("git starts");
    assert!(init.success(), "git init");
    let config = std::fs::read_to_string(repo.join(".git/config")).expect("git's configuration");
    for file in [".bashrc", ".mcp.json"] {
        std::fs::write(root.join(file), "as it was\n").expect("a runs-later file");
    }
    let out = Command::new(std::env::current_exe().expect("this test's own path"))
        .env(ROOT_VAR, root)
        .output()
        .expect("the confined copy starts");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}{stderr}");
    for refused in ["hook", "config", "rc", "mcp"] {
        assert!(
            stdout.contains(&format!("{refused}=1")),
            "{refused} was written: {stdout}{stderr}"
        );
    }
    assert!(stdout.contains("notes=0"), "{stdout}{stderr}");
    assert!(!repo.join(".git/hooks/pre-commit").exists());
    assert_eq!(
        std::fs::read_to_string(repo.join(".git/config")).expect("git's configuration"),
        config
    );
    for file in [".bashrc", ".mcp.json"] {
        assert_eq!(
            std::fs::read_to_string(root.join(file)).expect("a runs-later file"),
            "as it was\n",
            "{file}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(repo.join("notes.md")).expect("the file beside"),
        "fine\n"
    );
    println!("self_confined: ok");
}
