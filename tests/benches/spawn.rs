//! Spawn cost: `ScopedProcess::spawn` of `/bin/true`, sandboxed (the default) and not, against
//! `std::process::Command` and `bwrap --ro-bind / / --unshare-net` in the same run (docs/semantics.md, "Performance budgets").
#![allow(
    missing_docs,
    clippy::disallowed_methods,
    clippy::print_stderr,
    reason = "the baselines are unscoped spawns; a missing bwrap is said on stderr"
)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use capability_core::PolicyFormat;
use capability_core::{CompiledPolicy, resolve};
use capability_process::{ProcessBackend, ProcessConfig};
use capability_types::backend::{PathPolicy, ProcessFactory, ProcessGrant, ProcessPolicy};
use capability_types::{FsPaths, SpawnOptions, ToolCapabilities};
use criterion::{Criterion, criterion_group, criterion_main};

#[path = "support/paired.rs"]
mod paired;

fn spawn(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let backend = ProcessBackend::new(ProcessConfig::from_process_env());
    let scoped_under = |sandbox: &str| {
        let policy = CompiledPolicy::load(
            &format!(
                "id = \"bench\"\n[safety.process]\nallow = [\"true\"]\nsandbox = \"{sandbox}\"\n"
            ),
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
        let paths: Arc<dyn PathPolicy> = Arc::new(capability_core::ResolvedPaths::default());
        let process = resolved.process.unwrap() as Arc<dyn ProcessPolicy>;
        backend
            .scoped_process(ProcessGrant::new("run_command", process, paths))
            .unwrap()
    };
    let scoped = scoped_under("required");
    let unsandboxed = scoped_under("off");
    // A child that writes a project: a repository (its git directory bound read-only), an
    // existing `.vscode`, `.claude` and `.bashrc` (each bound read-only), and what it might make
    // there looked for when it ends (docs/policy.md, "Kept from children").
    let project = tempfile::tempdir().unwrap();
    let root = project.path().canonicalize().unwrap();
    for dir in [".git/hooks", ".vscode", ".claude", "src"] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    for file in [
        ".git/config",
        ".git/HEAD",
        ".claude/settings.json",
        ".bashrc",
    ] {
        std::fs::write(root.join(file), "").unwrap();
    }
    // A child that writes a tree of 16 × 16 × 16 directories: the walk reads 273 of them and
    // asks 4,096 what they hold as the child starts, and again when it ends (docs/policy.md,
    // "A repository a child makes").
    let tree = tempfile::tempdir().unwrap();
    let tree_root = tree.path().canonicalize().unwrap();
    for a in 0..16 {
        for b in 0..16 {
            for c in 0..16 {
                std::fs::create_dir_all(tree_root.join(format!("{a}/{b}/{c}"))).unwrap();
            }
        }
    }
    let writer_in = |root: &Path| {
        let policy = CompiledPolicy::load(
            &format!(
                "id = \"bench\"\n[fs_reach]\nread = [\"{r}\"]\nwrite = [\"{r}\"]\n\
                 [safety.process]\nallow = [\"true\"]\n",
                r = root.display()
            ),
            PolicyFormat::Toml,
            None,
        )
        .unwrap();
        let caps = ToolCapabilities::none()
            .with_process(["*"])
            .with_fs_read(FsPaths::FromPersonality)
            .with_fs_write(FsPaths::FromPersonality);
        let resolved = resolve("builder", &caps, &policy, "s", root);
        let grant = ProcessGrant::new(
            "builder",
            resolved.process.unwrap() as Arc<dyn ProcessPolicy>,
            resolved.fs.unwrap() as Arc<dyn PathPolicy>,
        );
        backend.scoped_process(grant).unwrap()
    };
    let in_project = writer_in(&root);
    let in_tree = writer_in(&tree_root);

    let std_true = || std::process::Command::new("/bin/true").status().unwrap();
    let scoped_true = || {
        rt.block_on(scoped.spawn("true", &[], SpawnOptions::default()))
            .unwrap()
    };
    let in_project_true = || {
        rt.block_on(in_project.spawn("true", &[], SpawnOptions::default()))
            .unwrap()
    };
    let in_tree_true = || {
        rt.block_on(in_tree.spawn("true", &[], SpawnOptions::default()))
            .unwrap()
    };
    let unsandboxed_true = || {
        rt.block_on(unsandboxed.spawn("true", &[], SpawnOptions::default()))
            .unwrap()
    };
    let bwrap_true = || {
        std::process::Command::new("/usr/bin/bwrap")
            .args(["--ro-bind", "/", "/", "--unshare-net", "/bin/true"])
            .status()
            .unwrap()
    };
    let bwrap = Path::new("/usr/bin/bwrap").exists();
    let mut group = c.benchmark_group("spawn");
    group.bench_function("std_command_true", |b| b.iter(std_true));
    // Like for like: a scoped spawn captures stdout and stderr, as `output()` does.
    group.bench_function("std_command_true_output", |b| {
        b.iter(|| std::process::Command::new("/bin/true").output().unwrap())
    });
    group.bench_function("scoped_spawn_true", |b| b.iter(scoped_true));
    group.bench_function("scoped_spawn_true_in_project", |b| b.iter(in_project_true));
    group.bench_function("scoped_spawn_true_in_tree", |b| b.iter(in_tree_true));
    group.bench_function("scoped_spawn_true_unsandboxed", |b| {
        b.iter(unsandboxed_true)
    });
    // The reference sandbox of docs/semantics.md, "Performance budgets", when installed (`apt-get install bubblewrap`).
    if bwrap {
        group.bench_function("bwrap_true", |b| b.iter(bwrap_true));
    } else {
        eprintln!("spawn/bwrap_true skipped: /usr/bin/bwrap is not installed");
    }
    group.finish();

    // The budgeted ratios, timed paired as well (docs/benchmarks.md, "Paired budgets"); the
    // one against bwrap only where bwrap is installed (`cargo xtask bench` fails without it).
    if paired::measuring() {
        let mut rows = paired::Rows::default();
        rows.each(
            ("spawn/scoped_spawn_true", "spawn/std_command_true"),
            &scoped_true,
            &std_true,
        )
        .each(
            (
                "spawn/scoped_spawn_true_unsandboxed",
                "spawn/std_command_true",
            ),
            &unsandboxed_true,
            &std_true,
        );
        if bwrap {
            rows.each(
                ("spawn/scoped_spawn_true", "spawn/bwrap_true"),
                &scoped_true,
                &bwrap_true,
            );
        }
        rows.write("spawn-paired.json");
    }
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .sample_size(30)
}

criterion_group! { name = benches; config = config(); targets = spawn }
criterion_main!(benches);
