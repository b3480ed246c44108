//! `cargo xtask bench --instructions` (and the end of every `cargo xtask bench`): the dispatch
//! paths of issue 19 counted in instructions under callgrind. Timings on the project's shared VM
//! move by ±30 % between runs, and the ratios built from them move with it; an instruction count
//! is the same from run to run for the same binary, so it shows what a change to the per-call
//! path did even in a noisy hour. It is not a time: a malloc-heavy path retires more
//! instructions per nanosecond than a branchy one, so its ratios differ from the timed ones
//! (docs/benchmarks.md, "Instructions per call").

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use super::bench::TARGETS;

/// The environment variable `tests/benches/dispatch.rs` reads: `<path>:<iterations>`.
const COUNT_VAR: &str = "TOOLCAP_DISPATCH_COUNT";

/// The instruction table, or a line saying why there is none (no valgrind on this machine).
pub(crate) fn table(root: &Path) -> Result<String> {
    let found = Command::new("valgrind").arg("--version").output();
    if !found.is_ok_and(|o| o.status.success()) {
        return Ok(
            "\ninstructions per call: not counted (valgrind not found; `apt-get install valgrind`)\n"
                .to_owned(),
        );
    }
    let exe = dispatch_executable(root)?;
    let mut counted: Vec<(String, f64)> = Vec::new();
    for (path, calls) in paths(&exe)? {
        let path = path.as_str();
        // Two runs of different lengths: their difference is the path's own instructions,
        // without the process's start, the setup and the first iteration's warm-up.
        let short = (20_000 / calls).max(2);
        let long = 2 * short;
        let (a, b) = (collected(&exe, path, short)?, collected(&exe, path, long)?);
        if b <= a {
            bail!("{path}: {long} iterations counted {b} instructions, {short} counted {a}");
        }
        counted.push((
            path.to_owned(),
            (b - a) as f64 / ((long - short) * calls) as f64,
        ));
    }
    let of = |name: &str| {
        counted
            .iter()
            .find(|(p, _)| *p == name)
            .map(|(_, n)| *n)
            .unwrap_or(f64::NAN)
    };
    let mut table = String::from(
        "\n| instructions per call (callgrind) | count | baseline | ratio | issue 19's target (timed) |\n|---|---:|---:|---:|---|\n",
    );
    for (path, n) in &counted {
        let (path, n) = (path.as_str(), *n);
        match TARGETS.iter().find(|(subject, _, _)| *subject == path) {
            Some(&(_, baseline, target)) => {
                let ratio = n / of(baseline);
                table.push_str(&format!(
                    "| {path} | {n:.0} | {:.0} ({baseline}) | {ratio:.2}× | ≤ {target:.2}×{} |\n",
                    of(baseline),
                    if ratio <= target { "" } else { " (over)" }
                ));
            }
            None => table.push_str(&format!("| {path} | {n:.0} | — | — | — |\n")),
        }
    }
    Ok(table)
}

/// The dispatch benchmark's executable, built if it is not.
fn dispatch_executable(root: &Path) -> Result<PathBuf> {
    let mut cmd = super::cargo();
    cmd.args([
        "bench",
        "-p",
        "tests",
        "--bench",
        "dispatch",
        "--no-run",
        "--locked",
        "--message-format=json",
    ]);
    let out = cmd
        .output()
        .context("could not build the dispatch benchmark")?;
    if !out.status.success() {
        bail!(
            "building the dispatch benchmark failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|m| m["target"]["name"] == "dispatch")
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .map(|exe| root.join(exe))
        .context("cargo named no executable for the dispatch benchmark")
}

/// The paths the benchmark can run alone, with their calls per iteration, as it lists them.
fn paths(exe: &Path) -> Result<Vec<(String, u64)>> {
    let out = Command::new(exe)
        .env(COUNT_VAR, "list")
        .output()
        .context("could not start the dispatch benchmark")?;
    if !out.status.success() {
        bail!(
            "the dispatch benchmark could not list its paths ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let listed: Option<Vec<(String, u64)>> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| {
            let (path, calls) = line.split_once(' ')?;
            Some((path.to_owned(), calls.parse().ok().filter(|n| *n > 0)?))
        })
        .collect();
    match listed {
        Some(paths) if !paths.is_empty() => Ok(paths),
        _ => bail!("the dispatch benchmark listed no paths"),
    }
}

/// The instructions callgrind counted for `iterations` of `path` (the whole process).
fn collected(exe: &Path, path: &str, iterations: u64) -> Result<u64> {
    let out = Command::new("valgrind")
        .args(["--tool=callgrind", "--callgrind-out-file=/dev/null"])
        .arg(exe)
        .env(COUNT_VAR, format!("{path}:{iterations}"))
        .output()
        .context("could not start valgrind")?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        bail!("callgrind on {path} failed ({}):\n{stderr}", out.status);
    }
    instructions_in(&stderr)
        .with_context(|| format!("callgrind printed no instruction count for {path}:\n{stderr}"))
}

/// The count of callgrind's `==123== Collected : 80797072` line (its only event: instructions).
fn instructions_in(stderr: &str) -> Option<u64> {
    stderr
        .lines()
        .find_map(|line| line.split_once("Collected :").map(|(_, n)| n.trim()))
        .and_then(|n| n.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::instructions_in;

    #[test]
    fn the_count_is_read_from_callgrinds_summary_and_nothing_else() {
        let stderr = "==7== Callgrind, a call-graph generating cache profiler\n==7== Events    : Ir\n==7== Collected : 80797072\n==7== I   refs:      80,797,072\n";
        assert_eq!(instructions_in(stderr), Some(80_797_072));
        assert_eq!(instructions_in("==7== Collected : lots\n"), None);
        assert_eq!(instructions_in("no summary: the program crashed\n"), None);
    }
}
