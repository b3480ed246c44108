//! Paired timing, shared by the benchmarks that report issue 19's ratios or hold a budgeted
//! ratio: a subject and its baseline alternate in short rounds (the order swapped every round),
//! so a slow moment of this shared machine slows both sides of a round alike, where criterion's
//! separate means can land in different moments of a run (docs/benchmarks.md, "Paired
//! budgets").

use std::path::Path;
use std::time::{Duration, Instant};

/// One side of a pair: runs its path `n` times.
pub(crate) type Side<'a> = &'a mut dyn FnMut(u64);

/// Iterations of `run` that take at least `at_least` (doubling from one).
fn calibrated(run: Side<'_>, at_least: Duration) -> u64 {
    let mut n = 1;
    loop {
        let start = Instant::now();
        run(n);
        if start.elapsed() >= at_least || n >= 1 << 24 {
            return n;
        }
        n *= 2;
    }
}

/// Nanoseconds per call of `n` iterations of a path of `calls` calls each.
fn per_call_ns(run: Side<'_>, n: u64, calls: usize) -> f64 {
    let start = Instant::now();
    run(n);
    start.elapsed().as_nanos() as f64 / (n as f64 * calls as f64)
}

/// A paired ratio: the median of the rounds' ratios, their least and greatest.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ratio {
    pub(crate) median: f64,
    pub(crate) least: f64,
    pub(crate) most: f64,
}

/// `subject` / `baseline` per call (each side with its calls per iteration) over `rounds`
/// rounds of about `round` a side.
fn paired(
    (subject, s_calls): (Side<'_>, usize),
    (baseline, b_calls): (Side<'_>, usize),
    rounds: usize,
    round: Duration,
) -> Ratio {
    let (s_n, b_n) = (calibrated(subject, round), calibrated(baseline, round));
    let mut ratios: Vec<f64> = (0..rounds)
        .map(|i| {
            if i % 2 == 0 {
                let s = per_call_ns(subject, s_n, s_calls);
                s / per_call_ns(baseline, b_n, b_calls)
            } else {
                let b = per_call_ns(baseline, b_n, b_calls);
                per_call_ns(subject, s_n, s_calls) / b
            }
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    Ratio {
        median: ratios[rounds / 2],
        least: ratios[0],
        most: ratios[rounds - 1],
    }
}

/// Rounds of a pair, and about how long each side of a round runs.
const ROUNDS: usize = 41;
const ROUND: Duration = Duration::from_millis(10);

/// The paired ratios of one benchmark, measured one pair at a time and written together.
#[derive(Default)]
pub(crate) struct Rows(Vec<(&'static str, &'static str, usize, Ratio)>);

impl Rows {
    /// Times `subject` / `baseline` per call, each side with its calls per iteration.
    pub(crate) fn pair(
        &mut self,
        (subject_name, baseline_name): (&'static str, &'static str),
        subject: (Side<'_>, usize),
        baseline: (Side<'_>, usize),
    ) -> &mut Self {
        let ratio = paired(subject, baseline, ROUNDS, ROUND);
        self.0.push((subject_name, baseline_name, ROUNDS, ratio));
        self
    }

    /// Times `subject()` / `baseline()`, one call of each per iteration.
    #[allow(
        dead_code,
        reason = "every benchmark includes this module; dispatch and capsule time paths of their own shape"
    )]
    pub(crate) fn each<A, B>(
        &mut self,
        names: (&'static str, &'static str),
        mut subject: impl FnMut() -> A,
        mut baseline: impl FnMut() -> B,
    ) -> &mut Self {
        self.pair(
            names,
            (
                &mut |n| (0..n).for_each(|_| drop(std::hint::black_box(subject()))),
                1,
            ),
            (
                &mut |n| (0..n).for_each(|_| drop(std::hint::black_box(baseline()))),
                1,
            ),
        )
    }

    /// Writes the rows to `target/criterion/<file>`, where `cargo xtask bench` reads them, and
    /// prints them.
    pub(crate) fn write(&self, file: &str) {
        write(file, &self.0);
    }
}

/// Whether criterion is measuring (not only listing the benchmarks or running each once as a
/// test): the paired step runs only then.
pub(crate) fn measuring() -> bool {
    !std::env::args().any(|a| a == "--list" || a == "--test")
}

/// Writes `rows` (subject, baseline, rounds, ratio) to `target/criterion/<file>`, where
/// `cargo xtask bench` reads them, and prints them.
#[allow(
    clippy::print_stderr,
    reason = "a benchmark prints what it measured beside criterion's output"
)]
fn write(file: &str, rows: &[(&str, &str, usize, Ratio)]) {
    let shown: Vec<String> = rows
        .iter()
        .map(|(subject, baseline, rounds, r)| {
            format!(
                "  {{\"subject\": \"{subject}\", \"baseline\": \"{baseline}\", \"rounds\": {rounds}, \"median\": {:.3}, \"least\": {:.3}, \"most\": {:.3}}}",
                r.median, r.least, r.most
            )
        })
        .collect();
    let json = format!("[\n{}\n]\n", shown.join(",\n"));
    eprintln!("paired ratios:\n{json}");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/criterion");
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(dir.join(file), json);
}
