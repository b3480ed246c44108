//! `cargo xtask fuzz [TARGET] [--time SECS]`: coverage-guided fuzzing of toolcap's input surfaces
//! with libFuzzer (`libfuzzer-sys`) on the stable toolchain.
//!
//! The targets live in `fuzz/` (a workspace of its own): they are built in release with
//! LLVM's sanitizer-coverage instrumentation (`-Cpasses=sancov-module` and its options, all
//! stable flags; no AddressSanitizer, which needs nightly: Rust's own checks and the targets'
//! assertions are the oracle). Each run first replays `fuzz/regressions/TARGET/` (inputs that
//! once failed, kept for good), then fuzzes from `fuzz/corpus/TARGET/` into a scratch corpus, so
//! a run never edits the repository; a crash is written to `target/fuzz/artifacts/TARGET/` and
//! fails the run. `cargo xtask check` runs every target for a few seconds (the smoke run); long
//! runs are recorded in docs/guarantees.md.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// Every fuzz target (a binary of `fuzz/`).
pub(crate) const TARGETS: &[&str] = &[
    "policy",
    "declaration",
    "path",
    "host",
    "frame",
    "kv_key",
    "call_args",
    "manifest",
    "ethos",
    "lint",
];

/// Seconds per target in the smoke run of `cargo xtask check`.
pub(crate) const SMOKE_SECS: u64 = 4;

const COVERAGE_FLAGS: &str = "-Cpasses=sancov-module \
    -Cllvm-args=-sanitizer-coverage-level=4 \
    -Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
    -Cllvm-args=-sanitizer-coverage-pc-table \
    -Cllvm-args=-sanitizer-coverage-trace-compares \
    --cfg fuzzing -Cdebug-assertions -Coverflow-checks";

fn host_triple() -> Result<String> {
    let out = Command::new(std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into()))
        .arg("-vV")
        .output()
        .context("running rustc -vV")?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_owned))
        .context("rustc -vV names no host")
}

/// Builds every target with coverage instrumentation; returns the directory of the binaries.
fn build(root: &Path) -> Result<PathBuf> {
    let triple = host_triple()?;
    let target_dir = root.join("target/fuzz");
    // `--target` keeps the flags off build scripts and proc macros (they are not fuzzed, and
    // instrumented they would not link without libFuzzer).
    let status = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .current_dir(root)
        .args([
            "build",
            "--release",
            "--bins",
            "--manifest-path",
            "fuzz/Cargo.toml",
        ])
        .args(["--target", &triple])
        .env("RUSTFLAGS", COVERAGE_FLAGS)
        .env("CARGO_TARGET_DIR", &target_dir)
        .status()
        .context("building the fuzz targets")?;
    if !status.success() {
        bail!("building the fuzz targets failed ({status})");
    }
    Ok(target_dir.join(triple).join("release"))
}

/// What one run did, from libFuzzer's last lines.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    pub(crate) runs: Option<u64>,
    pub(crate) coverage: Option<u64>,
    pub(crate) features: Option<u64>,
}

fn parse_outcome(stderr: &str) -> Outcome {
    let mut out = Outcome::default();
    for line in stderr.lines() {
        if let Some(rest) = line.strip_prefix("Done ") {
            out.runs = rest.split_whitespace().next().and_then(|n| n.parse().ok());
        }
        let number_after = |key: &str| {
            line.split_whitespace()
                .skip_while(|w| *w != key)
                .nth(1)
                .and_then(|n| n.parse::<u64>().ok())
        };
        if let Some(c) = number_after("cov:") {
            out.coverage = Some(c);
        }
        if let Some(f) = number_after("ft:") {
            out.features = Some(f);
        }
    }
    out
}

fn run_target(root: &Path, bins: &Path, target: &str, secs: u64) -> Result<Outcome> {
    let binary = bins.join(target);
    let regressions = root.join("fuzz/regressions").join(target);
    let artifacts = root.join("target/fuzz/artifacts").join(target);
    std::fs::create_dir_all(&artifacts)?;
    // Inputs that once failed: each replayed once.
    if regressions.is_dir() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&regressions)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file())
            .collect();
        files.sort();
        if !files.is_empty() {
            let status = Command::new(&binary).args(&files).status()?;
            if !status.success() {
                bail!("fuzz target {target}: a regression input fails again ({status})");
            }
        }
    }
    let scratch = root.join("target/fuzz/corpus").join(target);
    std::fs::create_dir_all(&scratch)?;
    let seeds = root.join("fuzz/corpus").join(target);
    let mut command = Command::new(&binary);
    command
        .arg(format!("-max_total_time={secs}"))
        .arg("-rss_limit_mb=2048")
        .arg("-timeout=10")
        .arg("-print_final_stats=1")
        .arg(format!("-artifact_prefix={}/", artifacts.display()))
        .arg(&scratch);
    if seeds.is_dir() {
        command.arg(&seeds);
    }
    let output = command
        .output()
        .with_context(|| format!("running {}", binary.display()))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        let tail: Vec<&str> = stderr.lines().rev().take(30).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        bail!(
            "fuzz target {target} failed ({}); the input is in {} — keep it in fuzz/regressions/{target}/ once fixed:\n{}",
            output.status,
            artifacts.display(),
            tail.join("\n")
        );
    }
    Ok(parse_outcome(&stderr))
}

/// `cargo xtask fuzz [TARGET] [--time SECS]`.
pub(crate) fn run(root: &Path, args: &[String]) -> Result<()> {
    let mut secs = 60;
    let mut chosen: Vec<&str> = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--time" => {
                secs = it
                    .next()
                    .and_then(|s| s.parse().ok())
                    .context("--time takes a number of seconds")?;
            }
            name => match TARGETS.iter().find(|t| **t == name) {
                Some(t) => chosen.push(t),
                None => bail!(
                    "unknown fuzz target {name:?} (targets: {})",
                    TARGETS.join(", ")
                ),
            },
        }
    }
    if chosen.is_empty() {
        chosen = TARGETS.to_vec();
    }
    fuzz(root, &chosen, secs)
}

/// The smoke run of `cargo xtask check`.
pub(crate) fn smoke(root: &Path) -> Result<()> {
    fuzz(root, TARGETS, SMOKE_SECS)
}

fn fuzz(root: &Path, targets: &[&str], secs: u64) -> Result<()> {
    let bins = build(root)?;
    println!("| target | seconds | executions | coverage (cov) | features (ft) |");
    println!("|---|---:|---:|---:|---:|");
    for target in targets {
        let outcome = run_target(root, &bins, target, secs)?;
        let show = |n: Option<u64>| n.map_or_else(|| "?".to_owned(), |n| n.to_string());
        println!(
            "| {target} | {secs} | {} | {} | {} |",
            show(outcome.runs),
            show(outcome.coverage),
            show(outcome.features)
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libfuzzer_figures_are_read() {
        let stderr = "#2\tINITED cov: 10 ft: 11 corp: 1/1b\n#4096\tpulse  cov: 57 ft: 80 corp: 9/90b\nDone 12345 runs in 4 second(s)\n";
        let o = parse_outcome(stderr);
        assert_eq!(
            (o.runs, o.coverage, o.features),
            (Some(12345), Some(57), Some(80))
        );
    }
}
