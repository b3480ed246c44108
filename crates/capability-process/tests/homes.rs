//! A confined child's `HOME` is its own: children of one tool running at once, one after the
//! other, or under a personality that reads the temporary directory their homes are made in,
//! never see what another child kept there (docs/isolation-model.md, "Each child's own home").
//! Real children of one `ProcessBackend`, as `toolcap mcp serve` runs the calls of several
//! sessions through one tool.
#![allow(
    clippy::unwrap_used,
    clippy::panic,
    clippy::disallowed_methods,
    reason = "tests: real directories, looked at from the host"
)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use capability_core::{CompiledPolicy, PolicyFormat, resolve};
use capability_process::{ProcessBackend, ProcessConfig};
use capability_types::backend::{PathPolicy, ProcessFactory, ProcessGrant, ProcessPolicy};
use capability_types::{FsPaths, ProcessOutput, ScopedProcess, SpawnOptions, ToolCapabilities};

struct Fixture {
    _dirs: Vec<tempfile::TempDir>,
    /// The session's directory: read and written by the tool.
    root: PathBuf,
    /// Where the backend makes its scratch directories.
    scratch: PathBuf,
}

fn fixture() -> Fixture {
    let root = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let (r, s) = (
        root.path().canonicalize().unwrap(),
        scratch.path().canonicalize().unwrap(),
    );
    Fixture {
        _dirs: vec![root, scratch],
        root: r,
        scratch: s,
    }
}

/// A tool that reads and writes the session's directory (and reads `extra_read`) and may start
/// `sh`, from one backend whose scratch directories are made in the fixture's.
fn tool(fx: &Fixture, extra_read: Option<&Path>) -> Arc<dyn ScopedProcess> {
    let extra = extra_read.map_or_else(String::new, |p| format!(", \"{}\"", p.display()));
    let toml = format!(
        "id = \"p\"\n[fs_reach]\nread = [\"{r}\"{extra}]\nwrite = [\"{r}\"]\n\
         [safety.process]\nallow = [\"sh\"]\n",
        r = fx.root.display()
    );
    let policy = CompiledPolicy::load(&toml, PolicyFormat::Toml, None).unwrap();
    let caps = ToolCapabilities::none()
        .with_process(["*"])
        .with_fs_read(FsPaths::FromPersonality)
        .with_fs_write(FsPaths::FromPersonality);
    let resolved = resolve("builder", &caps, &policy, "s", &fx.root);
    let grant = ProcessGrant::new(
        "builder",
        resolved.process.unwrap() as Arc<dyn ProcessPolicy>,
        resolved.fs.unwrap() as Arc<dyn PathPolicy>,
    );
    let config = ProcessConfig::with_host_env(Default::default())
        .scratch_root(fx.scratch.clone())
        .kill_grace(Duration::from_millis(200));
    ProcessBackend::new(config).scoped_process(grant).unwrap()
}

async fn sh(tool: &dyn ScopedProcess, script: &str) -> ProcessOutput {
    tool.spawn(
        "sh",
        &["-c".to_owned(), script.to_owned()],
        SpawnOptions::default().timeout(Duration::from_secs(30)),
    )
    .await
    .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Starts a child that keeps a token in its home and then waits; returns once the token is
/// written. Dropping the returned task's handle does not end the child: abort it.
async fn keeper(tool: &Arc<dyn ScopedProcess>, fx: &Fixture) -> tokio::task::JoinHandle<()> {
    let ready = fx.root.join("keeper-ready");
    let script = format!(
        "echo token-of-the-first > \"$HOME/token\" && mkdir \"$HOME/.cache\" && \
         echo cached-secret > \"$HOME/.cache/creds\" && echo ready > {} && sleep 30",
        ready.display()
    );
    let task = {
        let tool = Arc::clone(tool);
        tokio::spawn(async move {
            let _ = sh(&*tool, &script).await;
        })
    };
    for _ in 0..300 {
        if ready.exists() {
            return task;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the first child never wrote its token");
}

/// What a second child tries, to find the first's home: its own home's parent, every entry
/// there and beneath, and `find` over `dir`.
fn prober(dir: &Path) -> String {
    format!(
        "ls -a \"$HOME/..\"; \
         for f in \"$HOME/token\" \"$HOME\"/../*/token \"$HOME\"/../*/.cache/creds; do \
           cat \"$f\" 2>/dev/null; done; \
         find {d} \\( -name token -o -name creds \\) -exec cat {{}} \\; 2>/dev/null; \
         echo own > \"$HOME/own\" && cat \"$HOME/own\"",
        d = dir.display()
    )
}

/// The [`prober`]'s output: nothing of the [`keeper`]'s home, and its own home written.
fn saw_only_its_own(out: &ProcessOutput) {
    let seen = text(&out.stdout);
    assert!(
        !seen.contains("token-of-the-first") && !seen.contains("cached-secret"),
        "the second child read the first's home: {seen}"
    );
    assert!(
        seen.ends_with("own\n"),
        "the second child writes its own home: {seen} / {}",
        text(&out.stderr)
    );
}

// guarantee: G-PROC-06
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn children_of_one_tool_running_at_once_see_only_their_own_home() {
    let fx = fixture();
    let tool = tool(&fx, None);
    let first = keeper(&tool, &fx).await;
    let out = sh(&*tool, &prober(&fx.scratch)).await;
    first.abort();
    saw_only_its_own(&out);
}

// guarantee: G-PROC-06
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_that_reads_the_temporary_directory_still_sees_no_other_home() {
    // The personality's reach includes the directory the homes are made in: the homes are
    // there on the disk, by their path, and still out of another child's sight.
    let fx = fixture();
    let tool = tool(&fx, Some(&fx.scratch));
    let first = keeper(&tool, &fx).await;
    let out = sh(&*tool, &prober(&fx.scratch)).await;
    first.abort();
    saw_only_its_own(&out);
}

// guarantee: G-PROC-06
#[tokio::test]
async fn a_call_leaves_nothing_for_the_next_one() {
    let fx = fixture();
    let tool = tool(&fx, None);
    let out = sh(
        &*tool,
        "echo left > \"$HOME/left\"; echo left > \"$HOME/../left\"; \
         mkdir \"$HOME/../kept\" && echo left > \"$HOME/../kept/left\"; \
         echo left > \"$HOME/../../left\"; rm -f \"$HOME/../../.toolcap-owner\"; echo done",
    )
    .await;
    assert_eq!(text(&out.stdout), "done\n", "{}", text(&out.stderr));
    let out = sh(
        &*tool,
        "cat \"$HOME/left\" \"$HOME/../left\" \"$HOME/../kept/left\" 2>/dev/null; \
         ls -a \"$HOME\" \"$HOME/..\"",
    )
    .await;
    let seen = text(&out.stdout);
    assert!(
        !seen.contains("left") && !seen.contains("kept"),
        "the next call found what the first left: {seen}"
    );
    // Nothing the first call made is on the disk either.
    let leftovers: Vec<PathBuf> = walk(&fx.scratch)
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n == "left" || n == "kept"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    // Nor did it take the lock that tells a live owner's directory from an abandoned one.
    let locks = walk(&fx.scratch)
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n == ".toolcap-owner"))
        .count();
    assert_eq!(locks, 1, "the tool's scratch directory keeps its lock file");
}

/// Every path beneath `dir`, not following symbolic links.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                pending.push(path.clone());
            }
            found.push(path);
        }
    }
    found
}
