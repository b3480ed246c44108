//! `cargo xtask bench`: runs every criterion benchmark (one package, `tests/benches/`), then
//! prints each measurement against its baseline from the same run as a ratio. With `--write`,
//! the table also replaces the generated section of docs/benchmarks.md, so the page is
//! regenerated from one place.

use std::path::Path;

use anyhow::{Context, Result, bail};

/// (benchmark, baseline, budget ratio or absolute budget in ns, what the budget means).
struct Row {
    subject: &'static str,
    baseline: Option<&'static str>,
    budget: Budget,
}

enum Budget {
    /// subject − baseline must stay under this many nanoseconds.
    AddedNs(f64),
    /// subject must stay under this many nanoseconds.
    AbsoluteNs(f64),
    /// subject / baseline must stay under this.
    Ratio(f64),
}

const ROWS: &[Row] = &[
    Row {
        subject: "call/resolve_guard_execute",
        baseline: Some("call/bare_execute"),
        budget: Budget::AddedNs(1_000.0),
    },
    Row {
        subject: "call/resolve_guard_execute_wildcards",
        baseline: Some("call/bare_execute"),
        budget: Budget::AddedNs(1_000.0),
    },
    Row {
        subject: "call/resolve_guard_execute_uncached",
        baseline: Some("call/bare_execute"),
        budget: Budget::AddedNs(f64::INFINITY),
    },
    Row {
        subject: "hosts/match/10",
        baseline: None,
        budget: Budget::AbsoluteNs(200.0),
    },
    Row {
        subject: "hosts/match/100",
        baseline: None,
        budget: Budget::AbsoluteNs(200.0),
    },
    Row {
        subject: "hosts/match/1000",
        baseline: None,
        budget: Budget::AbsoluteNs(200.0),
    },
    Row {
        subject: "hosts/check_with_normalize/1000",
        baseline: None,
        budget: Budget::AbsoluteNs(1_000.0),
    },
    Row {
        subject: "hosts/check_with_idna/1000",
        baseline: None,
        budget: Budget::AddedNs(f64::INFINITY),
    },
    // The path check without a known home directory (the deny floor then looks at every
    // path) against the same check with one: reported.
    Row {
        subject: "paths/check_home_unknown",
        baseline: Some("paths/check_home_known"),
        budget: Budget::AddedNs(f64::INFINITY),
    },
    // The per-call path (issue 19), from `tests/benches/dispatch.rs`: a no-op tool declaring
    // all five categories with the real factories, and one declaring nothing.
    Row {
        subject: "dispatch/single_five",
        baseline: Some("dispatch/bare_five"),
        budget: Budget::Ratio(3.0),
    },
    Row {
        subject: "dispatch/batch_1_five",
        baseline: Some("dispatch/single_five"),
        budget: Budget::Ratio(1.5),
    },
    Row {
        subject: "dispatch/batch_100_five_per_call",
        baseline: Some("dispatch/single_five"),
        budget: Budget::Ratio(1.0),
    },
    Row {
        subject: "dispatch/batch_10000_five_per_call",
        baseline: Some("dispatch/single_five"),
        budget: Budget::Ratio(1.0),
    },
    // The batch figures against the single call made over a batch built the same way (the
    // allocator's share of a batch, whoever dispatches), and the bare call likewise: reported.
    Row {
        subject: "dispatch/batch_100_five_per_call",
        baseline: Some("dispatch/single_100_five_per_call"),
        budget: Budget::AddedNs(f64::INFINITY),
    },
    Row {
        subject: "dispatch/batch_10000_five_per_call",
        baseline: Some("dispatch/single_10000_five_per_call"),
        budget: Budget::AddedNs(f64::INFINITY),
    },
    Row {
        subject: "dispatch/single_100_five_per_call",
        baseline: Some("dispatch/bare_100_five_per_call"),
        budget: Budget::AddedNs(f64::INFINITY),
    },
    // What the caller of a batch spends per call with no dispatch at all (building its calls,
    // the tool's own call, dropping its results) against the single call the batch targets
    // compare with: where it is over 1.0×, a batch of that size cannot meet its target whatever
    // the registry does (docs/benchmarks.md, "The per-call path (issue 19), 2026-11-23").
    Row {
        subject: "dispatch/bare_100_five_per_call",
        baseline: Some("dispatch/single_five"),
        budget: Budget::AddedNs(f64::INFINITY),
    },
    Row {
        subject: "dispatch/bare_10000_five_per_call",
        baseline: Some("dispatch/single_five"),
        budget: Budget::AddedNs(f64::INFINITY),
    },
    Row {
        subject: "dispatch/batch_1_nothing",
        baseline: Some("dispatch/bare_nothing"),
        budget: Budget::Ratio(2.0),
    },
    // Two workers against one: at least 1.6× faster, so at most 1/1.6 of the time.
    Row {
        subject: "dispatch/batch_10000_mt2_per_call",
        baseline: Some("dispatch/batch_10000_mt1_per_call"),
        budget: Budget::Ratio(0.625),
    },
    Row {
        subject: "registry/execute_parallel_1",
        baseline: Some("call/bare_execute"),
        budget: Budget::AddedNs(f64::INFINITY),
    },
    Row {
        subject: "registry/execute_parallel_100_per_call",
        baseline: Some("call/bare_execute"),
        budget: Budget::AddedNs(f64::INFINITY),
    },
    // The scoped spawn does more than a plain one (resolution, a scratch HOME, its own process
    // group, capped pipes, a group kill at the end); compared with the plain spawn of the run.
    // A tool reads inside an async fn either way; the awaited plain read is the like-for-like
    // baseline, and the raw one is reported beside it.
    Row {
        subject: "fs/scoped_read_4k",
        baseline: Some("fs/std_read_4k_awaited"),
        budget: Budget::Ratio(1.2),
    },
    Row {
        subject: "fs/scoped_read_4k",
        baseline: Some("fs/std_read_4k"),
        budget: Budget::AddedNs(f64::INFINITY),
    },
    Row {
        subject: "fetch/scoped_get",
        baseline: Some("fetch/bare_hyper_util_get"),
        budget: Budget::Ratio(1.1),
    },
    Row {
        subject: "kv/memory_get",
        baseline: None,
        budget: Budget::AddedNs(f64::INFINITY),
    },
    Row {
        subject: "kv/memory_set",
        baseline: None,
        budget: Budget::AddedNs(f64::INFINITY),
    },
    Row {
        subject: "kv/embedded_get",
        baseline: None,
        budget: Budget::AddedNs(f64::INFINITY),
    },
    Row {
        subject: "kv/embedded_set",
        baseline: None,
        budget: Budget::AddedNs(f64::INFINITY),
    },
    Row {
        subject: "kv/embedded_set_64_concurrent_per_op",
        baseline: Some("kv/embedded_set"),
        budget: Budget::AddedNs(f64::INFINITY),
    },
    Row {
        subject: "kv/redis_get",
        baseline: None,
        budget: Budget::AddedNs(f64::INFINITY),
    },
    Row {
        subject: "kv/redis_set",
        baseline: None,
        budget: Budget::AddedNs(f64::INFINITY),
    },
    // Sandboxed (the default): Landlock and seccomp (docs/semantics.md, "Performance budgets": within 1.6× of a plain spawn
    // and under a third of bwrap's). The budget is against the bare `status()`; a plain spawn
    // that captures output as the scoped one does (`Command::output`) is reported beside it, and
    // so is the sandbox's own cost (sandboxed against unsandboxed). bwrap must be installed.
    Row {
        subject: "spawn/scoped_spawn_true",
        baseline: Some("spawn/std_command_true"),
        budget: Budget::Ratio(1.6),
    },
    Row {
        subject: "spawn/scoped_spawn_true",
        baseline: Some("spawn/std_command_true_output"),
        budget: Budget::AddedNs(f64::INFINITY),
    },
    Row {
        subject: "spawn/scoped_spawn_true",
        baseline: Some("spawn/scoped_spawn_true_unsandboxed"),
        budget: Budget::AddedNs(f64::INFINITY),
    },
    Row {
        subject: "spawn/scoped_spawn_true",
        baseline: Some("spawn/bwrap_true"),
        budget: Budget::Ratio(1.0 / 3.0),
    },
    Row {
        subject: "spawn/scoped_spawn_true_unsandboxed",
        baseline: Some("spawn/std_command_true"),
        budget: Budget::Ratio(1.2),
    },
    // A child that writes a project (a repository, a `.vscode`, a `.claude`, a `.bashrc`: each
    // bound read-only, and what it makes there looked for when it ends), against one without:
    // reported.
    Row {
        subject: "spawn/scoped_spawn_true_in_project",
        baseline: Some("spawn/scoped_spawn_true"),
        budget: Budget::AddedNs(f64::INFINITY),
    },
    // The capsule (issue 8): a call whose tool runs in a warm worker, one that starts its worker
    // (spawn, self-confinement, handshake), and one scoped read over the worker's channel, each
    // against the same call in process; the warm call also against a bare round trip to another
    // process (both sides asleep in `read`), the floor a call pays when neither side polls.
    // docs/semantics.md, "Performance budgets", sets no budget for these: reported.
    Row {
        subject: "capsule/warm_call",
        baseline: Some("capsule/in_process_call"),
        budget: Budget::AddedNs(f64::INFINITY),
    },
    Row {
        subject: "capsule/warm_call",
        baseline: Some("capsule/process_round_trip"),
        budget: Budget::AddedNs(f64::INFINITY),
    },
    // Where a warm call's time goes: the worker driven by a host that only encodes, polls and
    // decodes, against the floor of a round trip between two processes that both poll.
    Row {
        subject: "capsule/worker_round_trip",
        baseline: Some("capsule/polling_round_trip"),
        budget: Budget::AddedNs(f64::INFINITY),
    },
    Row {
        subject: "capsule/warm_call",
        baseline: Some("capsule/worker_round_trip"),
        budget: Budget::AddedNs(f64::INFINITY),
    },
    Row {
        subject: "capsule/warm_call_multi_thread",
        baseline: Some("capsule/in_process_call_multi_thread"),
        budget: Budget::AddedNs(f64::INFINITY),
    },
    Row {
        subject: "capsule/cold_start_call",
        baseline: Some("capsule/in_process_call"),
        budget: Budget::AddedNs(f64::INFINITY),
    },
    Row {
        subject: "capsule/warm_scoped_read",
        baseline: Some("capsule/in_process_scoped_read"),
        budget: Budget::AddedNs(f64::INFINITY),
    },
    // An exchange through the egress proxy's CONNECT tunnel, each request written in two
    // parts, against the same exchange on a direct connection: what the relay adds, and a
    // guard against a relayed write held back by Nagle's algorithm (20 ms an exchange before
    // the fix; docs/benchmarks.md, "The egress tunnel").
    Row {
        subject: "egress/tunnel_exchange",
        baseline: Some("egress/direct_exchange"),
        budget: Budget::Ratio(1.5),
    },
    // An MCP `read_file` round trip (issue 16), from `tests/benches/mcp.rs`: toolcap's server
    // against a bare rmcp server that checks nothing, paired call by call.
    Row {
        subject: "mcp/toolcap_read_file",
        baseline: Some("mcp/bare_read_file"),
        budget: Budget::Ratio(1.2),
    },
    // The same over Streamable HTTP on loopback, one kept-alive connection a server: what the
    // session machinery and toolcap's HTTP checks add, and a guard against an answer held back
    // by Nagle's algorithm (43 ms a call before the fix; docs/benchmarks.md, "MCP over HTTP").
    Row {
        subject: "mcp/toolcap_http_read_file",
        baseline: Some("mcp/bare_http_read_file"),
        budget: Budget::Ratio(1.5),
    },
];

/// Issue 19's targets: (subject, baseline, the greatest ratio), by the dispatch benchmark's
/// path names (`TOOLCAP_DISPATCH_COUNT=list`) and the capsule benchmark's. The timed rows above
/// hold the dispatch ones as budgets; the paired and the counted tables report against them.
pub(crate) const TARGETS: &[(&str, &str, f64)] = &[
    ("single_five", "bare_five", 3.0),
    ("batch_1_five", "single_five", 1.5),
    ("batch_100_five", "single_five", 1.0),
    ("batch_10000_five", "single_five", 1.0),
    ("batch_1_nothing", "bare_nothing", 2.0),
    ("warm_call", "in_process_call", 2.0),
    ("warm_scoped_read", "in_process_scoped_read", 3.0),
];

/// The files of paired ratios the benchmarks write into `target/criterion`.
const PAIRED_FILES: &[&str] = &[
    "dispatch-paired.json",
    "capsule-paired.json",
    "fs-paired.json",
    "fetch-paired.json",
    "egress-paired.json",
    "spawn-paired.json",
    "mcp-paired.json",
];

/// The dispatch benchmark names its paired paths as `TOOLCAP_DISPATCH_COUNT` does; these are
/// the criterion ids of the rows they stand for. Every other paired row is named by its id.
const PAIRED_IDS: &[(&str, &str)] = &[
    ("bare_five", "dispatch/bare_five"),
    ("bare_nothing", "dispatch/bare_nothing"),
    ("single_five", "dispatch/single_five"),
    ("batch_1_five", "dispatch/batch_1_five"),
    ("batch_1_nothing", "dispatch/batch_1_nothing"),
    ("batch_100_five", "dispatch/batch_100_five_per_call"),
    ("batch_10000_five", "dispatch/batch_10000_five_per_call"),
    ("bare_100_five", "dispatch/bare_100_five_per_call"),
    ("bare_10000_five", "dispatch/bare_10000_five_per_call"),
];

/// The criterion id a paired row's name stands for.
fn criterion_id(name: &str) -> &str {
    PAIRED_IDS
        .iter()
        .find(|(path, _)| *path == name)
        .map_or(name, |(_, id)| id)
}

/// The paired median of `subject` / `baseline` (criterion ids), when one was measured.
fn paired_median(paired: &[serde_json::Value], subject: &str, baseline: &str) -> Option<f64> {
    paired
        .iter()
        .find(|row| {
            criterion_id(row["subject"].as_str().unwrap_or_default()) == subject
                && criterion_id(row["baseline"].as_str().unwrap_or_default()) == baseline
        })
        .and_then(|row| row["median"].as_f64())
}

/// The budgeted ratio of `subject` / `baseline` (criterion ids), if the table holds one.
fn budget_of(subject: &str, baseline: &str) -> Option<f64> {
    ROWS.iter().find_map(|row| match row.budget {
        Budget::Ratio(r) if row.subject == subject && row.baseline == Some(baseline) => Some(r),
        _ => None,
    })
}

/// The lines around the generated table in docs/benchmarks.md.
const BEGIN: &str = "<!-- cargo xtask bench --write: begin -->";
const END: &str = "<!-- cargo xtask bench --write: end -->";

pub(crate) fn run(root: &Path, extra: &[String]) -> Result<()> {
    let write = extra.iter().any(|a| a == "--write");
    // `--instructions`: only the dispatch paths' instruction counts, nothing timed.
    if extra.iter().any(|a| a == "--instructions") {
        if write {
            bail!("--write regenerates the whole table; run `cargo xtask bench --write` instead");
        }
        println!("{}", super::instructions::table(root)?);
        return Ok(());
    }
    // `--report`: the table from the last run's estimates, without measuring again.
    let report_only = extra.iter().any(|a| a == "--report");
    if !report_only {
        let passed: Vec<&String> = extra
            .iter()
            .filter(|a| !matches!(a.as_str(), "--write" | "--report"))
            .collect();
        let mut cmd = super::cargo();
        cmd.args(["bench", "-p", "tests", "--benches", "--locked", "--"])
            .args(passed);
        super::run(cmd)?;
    }
    let paired = paired(root)?;
    let (mut table, mut over) = report(root, &paired)?;
    let (allocations, heavy) = allocations(root)?;
    table.push_str(&allocations);
    over.extend(heavy);
    table.push_str(&paired_table(&paired));
    // Counted, not timed: reported beside the table, never a budget of its own.
    if !report_only {
        table.push_str(&super::instructions::table(root)?);
    }
    println!("{table}");
    if write {
        write_table(root, &table)?;
        println!("wrote the table into docs/benchmarks.md");
    }
    if !over.is_empty() {
        bail!("over budget or not measured: {}", over.join(", "));
    }
    Ok(())
}

/// Replaces the generated section of docs/benchmarks.md with `table`.
fn write_table(root: &Path, table: &str) -> Result<()> {
    let path = root.join("docs/benchmarks.md");
    let page = std::fs::read_to_string(&path).context("reading docs/benchmarks.md")?;
    let (Some(begin), Some(end)) = (page.find(BEGIN), page.find(END)) else {
        bail!("docs/benchmarks.md has no `{BEGIN}` … `{END}` section to regenerate");
    };
    if end < begin {
        bail!("docs/benchmarks.md: the end marker comes before the begin marker");
    }
    let machine = machine();
    let updated = format!(
        "{}{BEGIN}\n{machine}\n{table}\n{}",
        &page[..begin],
        &page[end..]
    );
    std::fs::write(&path, updated).context("writing docs/benchmarks.md")
}

/// One line naming the machine and the day, for the generated section.
fn machine() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let date = std::process::Command::new("date")
        .arg("-u")
        .arg("+%Y-%m-%d")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    format!(
        "Generated by `cargo xtask bench --write` on {date}: {cpus} CPUs, Linux {}, release profile, criterion means.",
        kernel.trim()
    )
}

fn mean_ns(root: &Path, id: &str) -> Result<f64> {
    // A benchmark in a group lives at `group/name`; a lone `bench_function("a/b")` at `a_b`.
    let dir = root.join("target/criterion");
    let grouped = dir.join(id).join("new/estimates.json");
    let path = if grouped.is_file() {
        grouped
    } else {
        dir.join(id.replace('/', "_")).join("new/estimates.json")
    };
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("no estimate at {}", path.display()))?;
    let json: serde_json::Value = serde_json::from_str(&text)?;
    json["mean"]["point_estimate"]
        .as_f64()
        .with_context(|| format!("no mean in {}", path.display()))
}

/// Allocations per call of the dispatch benchmark (written by `tests/benches/dispatch.rs`), with
/// the budget of issue 19 (at most 4 on the registry's paths), and the paths over it.
fn allocations(root: &Path) -> Result<(String, Vec<&'static str>)> {
    let path = root.join("target/criterion/dispatch-allocations.json");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("no allocation counts at {}", path.display()))?;
    let counts: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&text)?;
    let mut table = String::from("\n| allocations per call | count | budget |\n|---|---:|---|\n");
    let mut over = Vec::new();
    for (name, count) in &counts {
        let count = count.as_f64().unwrap_or(f64::INFINITY);
        let budgeted = name.starts_with("batch_");
        let ok = !budgeted || count <= 4.0;
        if !ok {
            over.push("dispatch allocations");
        }
        table.push_str(&format!(
            "| {name} | {count:.2} | {}{} |\n",
            if budgeted { "≤ 4" } else { "(reported)" },
            if ok { "" } else { " **over**" }
        ));
    }
    Ok((table, over))
}

/// The benchmarks' paired ratios (written by `tests/benches/support/paired.rs`): issue 19's
/// ratios and the budgeted ones, each with its subject and baseline alternated in short rounds.
fn paired(root: &Path) -> Result<Vec<serde_json::Value>> {
    let mut rows: Vec<serde_json::Value> = Vec::new();
    for file in PAIRED_FILES {
        let path = root.join("target/criterion").join(file);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("no paired ratios at {}", path.display()))?;
        let more: Vec<serde_json::Value> = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a list of paired ratios", path.display()))?;
        rows.extend(more);
    }
    Ok(rows)
}

/// The paired ratios as a table, each against issue 19's target where it sets one, or else
/// against the row's budget.
fn paired_table(rows: &[serde_json::Value]) -> String {
    let mut table = String::from(
        "\n| paired ratio (median of rounds) | subject / baseline | least – most | target or budget |\n|---|---:|---:|---|\n",
    );
    for row in rows {
        let (subject, baseline) = (
            row["subject"].as_str().unwrap_or("?"),
            row["baseline"].as_str().unwrap_or("?"),
        );
        let number = |key: &str| row[key].as_f64().unwrap_or(f64::NAN);
        let median = number("median");
        let target = TARGETS
            .iter()
            .find(|(s, b, _)| *s == subject && *b == baseline)
            .map(|(_, _, t)| (*t, ""))
            .or_else(|| {
                budget_of(criterion_id(subject), criterion_id(baseline)).map(|b| (b, " budget"))
            });
        table.push_str(&format!(
            "| {subject} / {baseline} ({} rounds) | {median:.2}× | {:.2}× – {:.2}× | {} |\n",
            number("rounds"),
            number("least"),
            number("most"),
            match target {
                Some((t, what)) if median <= t => format!("≤ {t:.2}×{what}"),
                Some((t, what)) => format!("≤ {t:.2}×{what} (over)"),
                None => "—".to_owned(),
            }
        ));
    }
    table
}

/// The table of the last run, and the rows over budget or not measured. A row whose estimate
/// is missing (its benchmark was skipped, say `bwrap` on a machine without it) is shown as not
/// measured, with the reason, instead of ending the report: the rest of the table still prints,
/// and the run still fails. A budgeted ratio that was also timed paired is judged by its paired
/// median, the figure this shared machine repeats (docs/benchmarks.md, "Paired budgets").
fn report(root: &Path, paired: &[serde_json::Value]) -> Result<(String, Vec<&'static str>)> {
    let mut table = String::from("\n| benchmark | mean | baseline | ratio | added | budget |\n");
    table.push_str("|---|---:|---:|---:|---:|---|\n");
    let mut over = Vec::new();
    for row in ROWS {
        match row_line(root, row, paired) {
            Ok((line, ok)) => {
                if !ok {
                    over.push(row.subject);
                }
                table.push_str(&line);
            }
            Err(e) => {
                over.push(row.subject);
                table.push_str(&format!(
                    "| {} | **not measured** | {} | | | {e:#} |\n",
                    row.subject,
                    row.baseline.unwrap_or("—")
                ));
            }
        }
    }
    Ok((table, over))
}

/// One row of the table, and whether it is within its budget.
fn row_line(root: &Path, row: &Row, paired: &[serde_json::Value]) -> Result<(String, bool)> {
    let subject = mean_ns(root, row.subject)?;
    let base = row.baseline.map(|b| mean_ns(root, b)).transpose()?;
    let (baseline, ratio, added) = match (row.baseline, base) {
        (Some(b), Some(base)) => (
            format!("{} ({b})", fmt_ns(base)),
            format!("{:.2}×", subject / base),
            fmt_ns(subject - base),
        ),
        _ => ("—".to_owned(), "—".to_owned(), "—".to_owned()),
    };
    let (budget, ok) = match row.budget {
        Budget::AddedNs(b) if b.is_infinite() && row.baseline.is_none() => {
            (format!("(reported: {:.0} ops/s)", 1e9 / subject), true)
        }
        Budget::AddedNs(b) if b.is_infinite() => ("(reported)".to_owned(), true),
        Budget::AddedNs(b) => (
            format!("< {} added", fmt_ns(b)),
            subject - base.unwrap_or(0.0) < b,
        ),
        Budget::AbsoluteNs(b) => (format!("< {}", fmt_ns(b)), subject < b),
        Budget::Ratio(r) => match row
            .baseline
            .and_then(|b| paired_median(paired, row.subject, b))
        {
            Some(median) => (format!("< {r:.2}× (paired {median:.2}×)"), median < r),
            None => (
                format!("< {r:.2}×"),
                subject / base.unwrap_or(f64::INFINITY) < r,
            ),
        },
    };
    let line = format!(
        "| {} | {} | {baseline} | {ratio} | {added} | {budget}{} |\n",
        row.subject,
        fmt_ns(subject),
        if ok { "" } else { " **over**" }
    );
    Ok((line, ok))
}

fn fmt_ns(ns: f64) -> String {
    if ns.abs() >= 1_000_000.0 {
        format!("{:.2} ms", ns / 1_000_000.0)
    } else if ns.abs() >= 1_000.0 {
        format!("{:.2} µs", ns / 1_000.0)
    } else {
        format!("{ns:.1} ns")
    }
}

#[cfg(test)]
mod tests {
    use super::paired_table;

    #[test]
    fn rows_without_an_estimate_are_shown_as_not_measured_and_fail_the_run() {
        // A root whose target/criterion holds one estimate: the subject of the first row only.
        let first = &super::ROWS[0];
        let root = criterion_root("report", &[(first.subject, 250.0)]);
        let (table, over) = super::report(&root, &[]).unwrap_or_else(|e| panic!("{e:#}"));
        let _ = std::fs::remove_dir_all(&root);
        assert_eq!(over.len(), super::ROWS.len(), "every row fails: {over:?}");
        assert!(
            table.contains(&format!("| {} | **not measured** |", first.subject)),
            "{table}"
        );
        assert!(
            table.contains("no estimate at"),
            "the reason is shown: {table}"
        );
    }

    /// A root whose `target/criterion` holds the given means.
    fn criterion_root(name: &str, means: &[(&str, f64)]) -> std::path::PathBuf {
        let root = std::env::temp_dir().join(format!("xtask-{name}-{}", std::process::id()));
        for (id, mean) in means {
            let dir = root.join("target/criterion").join(id).join("new");
            std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
            std::fs::write(
                dir.join("estimates.json"),
                format!(r#"{{"mean": {{"point_estimate": {mean}}}}}"#),
            )
            .unwrap_or_else(|e| panic!("{e}"));
        }
        root
    }

    #[test]
    fn a_budgeted_ratio_timed_paired_is_judged_by_its_paired_median() {
        let row = super::ROWS
            .iter()
            .find(|r| {
                r.subject == "fs/scoped_read_4k" && r.baseline == Some("fs/std_read_4k_awaited")
            })
            .unwrap_or_else(|| panic!("the fs row"));
        // Criterion's means put it over its 1.2× budget; the paired median does not.
        let root = criterion_root(
            "paired-budget",
            &[
                ("fs/scoped_read_4k", 130.0),
                ("fs/std_read_4k_awaited", 100.0),
            ],
        );
        let paired = |median: f64| -> Vec<serde_json::Value> {
            vec![serde_json::json!({"subject": "fs/scoped_read_4k",
                "baseline": "fs/std_read_4k_awaited", "rounds": 41, "median": median,
                "least": 0.9, "most": 1.4})]
        };
        let (line, ok) =
            super::row_line(&root, row, &paired(1.05)).unwrap_or_else(|e| panic!("{e:#}"));
        assert!(ok, "{line}");
        assert!(
            line.contains("| 1.30× |"),
            "the means' ratio is still shown: {line}"
        );
        assert!(line.contains("< 1.20× (paired 1.05×) |"), "{line}");
        // And the other way: the means under, the paired median over.
        let (line, ok) =
            super::row_line(&root, row, &paired(1.25)).unwrap_or_else(|e| panic!("{e:#}"));
        assert!(!ok, "{line}");
        assert!(line.contains("(paired 1.25×) **over**"), "{line}");
        // Without a paired figure, the means decide, as before.
        let (line, ok) = super::row_line(&root, row, &[]).unwrap_or_else(|e| panic!("{e:#}"));
        let _ = std::fs::remove_dir_all(&root);
        assert!(!ok, "{line}");
        assert!(line.ends_with("| < 1.20× **over** |\n"), "{line}");
    }

    #[test]
    fn dispatch_paths_stand_for_their_criterion_rows() {
        let paired = vec![serde_json::json!({"subject": "batch_100_five",
            "baseline": "single_five", "rounds": 41, "median": 0.9, "least": 0.8, "most": 1.1})];
        assert_eq!(
            super::paired_median(
                &paired,
                "dispatch/batch_100_five_per_call",
                "dispatch/single_five"
            ),
            Some(0.9)
        );
        assert_eq!(
            super::paired_median(&paired, "dispatch/batch_1_five", "dispatch/single_five"),
            None
        );
    }

    #[test]
    fn paired_ratios_are_reported_against_their_targets() {
        let rows: Vec<serde_json::Value> = serde_json::from_str(
            r#"[{"subject": "batch_1_five", "baseline": "single_five", "rounds": 41, "median": 1.42, "least": 1.3, "most": 1.6},
                {"subject": "batch_1_nothing", "baseline": "bare_nothing", "rounds": 41, "median": 2.5, "least": 2.1, "most": 3.0},
                {"subject": "something_else", "baseline": "bare_five", "rounds": 3, "median": 9.0, "least": 8.0, "most": 10.0},
                {"subject": "warm_scoped_read", "baseline": "in_process_scoped_read", "rounds": 41, "median": 2.9, "least": 2.5, "most": 3.5},
                {"subject": "fetch/scoped_get", "baseline": "fetch/bare_hyper_util_get", "rounds": 41, "median": 1.04, "least": 0.9, "most": 1.2}]"#,
        )
        .unwrap_or_default();
        let table = paired_table(&rows);
        assert!(
            table.contains(
                "| batch_1_five / single_five (41 rounds) | 1.42× | 1.30× – 1.60× | ≤ 1.50× |"
            ),
            "{table}"
        );
        assert!(
            table.contains("| 2.50× | 2.10× – 3.00× | ≤ 2.00× (over) |"),
            "{table}"
        );
        assert!(table.contains("| 9.00× | 8.00× – 10.00× | — |"), "{table}");
        assert!(
            table.contains("| warm_scoped_read / in_process_scoped_read (41 rounds) | 2.90× | 2.50× – 3.50× | ≤ 3.00× |"),
            "the capsule's targets: {table}"
        );
        assert!(
            table.contains("| 1.04× | 0.90× – 1.20× | ≤ 1.10× budget |"),
            "a budgeted row against its budget: {table}"
        );
    }
}
