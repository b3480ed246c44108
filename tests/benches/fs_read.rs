//! ScopedFs read against `std::fs::read` of the same 4 KiB file in the same run (docs/semantics.md, "Performance budgets").
#![allow(
    missing_docs,
    clippy::disallowed_methods,
    reason = "the baseline is the unscoped std read"
)]

use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use capability_core::PolicyFormat;
use capability_core::{CompiledPolicy, resolve};
use capability_fs::{FsBackend, FsConfig};
use capability_types::backend::{FsFactory, FsGrant, PathPolicy};
use capability_types::{FsPaths, ToolCapabilities};
use criterion::{Criterion, criterion_group, criterion_main};

#[path = "support/paired.rs"]
mod paired;

fn read(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join("data/reports")).unwrap();
    let file = root.join("data/reports/q3.txt");
    std::fs::write(&file, vec![b'x'; 4096]).unwrap();
    let toml = format!(
        "id = \"bench\"\n[fs_reach]\nread = [\"{}\"]\n",
        root.join("data").display()
    );
    // As the command line does: the home directory is known, so the deny floor is exact.
    let policy =
        CompiledPolicy::load(&toml, PolicyFormat::Toml, Some(Path::new("/home/bench"))).unwrap();
    let caps = ToolCapabilities::none().with_fs_read(FsPaths::FromPersonality);
    let resolved = resolve("read_file", &caps, &policy, "s", &root);
    let grant = FsGrant::new("read_file", resolved.fs.unwrap() as Arc<dyn PathPolicy>);
    let paths = Arc::clone(&grant.paths);
    let fs = FsBackend::new(FsConfig::default())
        .scoped_fs(grant)
        .unwrap();
    // A current-thread runtime without blocking-pool hops would be unfair to the baseline, so
    // the scoped read is measured as tools use it: awaited on a runtime.
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();

    let mut group = c.benchmark_group("fs");
    group.bench_function("std_read_4k", |b| {
        b.iter(|| std::fs::read(black_box(&file)).unwrap())
    });
    // The same plain read as a tool without toolcap would do it: inside an async fn, awaited.
    let awaited_read = || {
        rt.block_on(async { std::fs::read(black_box(&file)) })
            .unwrap()
    };
    group.bench_function("std_read_4k_awaited", |b| b.iter(awaited_read));
    // The lexical policy check alone (part of scoped_read_4k).
    group.bench_function("policy_check", |b| {
        b.iter(|| {
            paths
                .check(
                    black_box(Path::new(&file)),
                    capability_types::backend::FsAccess::Read,
                )
                .unwrap()
        })
    });
    let scoped_read = || {
        rt.block_on(fs.read_bytes(black_box(Path::new(&file))))
            .unwrap()
    };
    group.bench_function("scoped_read_4k", |b| b.iter(scoped_read));
    group.finish();

    // The budgeted ratio, timed paired as well (docs/benchmarks.md, "Paired budgets").
    if paired::measuring() {
        paired::Rows::default()
            .each(
                ("fs/scoped_read_4k", "fs/std_read_4k_awaited"),
                scoped_read,
                awaited_read,
            )
            .write("fs-paired.json");
    }
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(40)
}

criterion_group! { name = benches; config = config(); targets = read }
criterion_main!(benches);
