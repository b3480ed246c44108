//! Spawn cost: `ScopedProcess::spawn` of `/bin/true` against `std::process::Command` in the same
//! run (design.md §9).
#![allow(
    missing_docs,
    clippy::disallowed_methods,
    reason = "the baseline is the unscoped std spawn"
)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use capability_core::{CompiledPolicy, resolve};
use capability_process::{ProcessBackend, ProcessConfig};
use capability_types::{
    PathPolicy, PolicyFormat, ProcessFactory, ProcessGrant, ProcessPolicy, SpawnOptions,
    ToolCapabilities,
};
use criterion::{Criterion, criterion_group, criterion_main};

fn spawn(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let policy = CompiledPolicy::load(
        "id = \"bench\"\n[safety.process]\nallow = [\"true\"]\n",
        PolicyFormat::Toml,
        None,
    )
    .unwrap();
    let resolved = resolve(
        "run_command",
        &ToolCapabilities::none().with_process(["*"]),
        &policy,
        "s",
        Path::new("/"),
    );
    let process = resolved.process.unwrap();
    let paths: Arc<dyn PathPolicy> = Arc::new(capability_core::ResolvedPaths::default());
    let grant = ProcessGrant::new("run_command", process as Arc<dyn ProcessPolicy>, paths);
    let backend = ProcessBackend::new(ProcessConfig::from_process_env());
    let scoped = backend.scoped_process(grant).unwrap();

    let mut group = c.benchmark_group("spawn");
    group.bench_function("std_command_true", |b| {
        b.iter(|| std::process::Command::new("/bin/true").status().unwrap())
    });
    group.bench_function("scoped_spawn_true", |b| {
        b.iter(|| {
            rt.block_on(scoped.spawn("true", &[], SpawnOptions::default()))
                .unwrap()
        })
    });
    group.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .sample_size(30)
}

criterion_group! { name = benches; config = config(); targets = spawn }
criterion_main!(benches);
