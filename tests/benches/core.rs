//! Benchmarks for docs/semantics.md, "Performance budgets": the per-call cost of resolution + guard against a bare call,
//! host matching at 10 / 100 / 1,000 patterns, registry overhead, and the path check with and
//! without a known home directory. `cargo xtask bench`
//! prints them as ratios against the baseline measured in the same run.
#![allow(missing_docs, clippy::unwrap_used)]

use std::future::Future;
use std::hint::black_box;
use std::path::Path;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use capability_core::PolicyFormat;
use capability_core::matching::host::{HostPattern, HostSet};
use capability_core::{
    CapabilityBackends, CompiledPolicy, DefaultToolRegistry, ExecutionContext, ResolutionCache,
    ToolCall, resolve, resolve_capabilities,
};
use capability_types::backend::{
    FetchFactory, FsFactory, FsGrant, HostPolicy, KvStoreFactory, NetworkGrant, StorageGrant,
};
use capability_types::{
    CapabilityError, FsPaths, KeyValueStore, ScopedFetch, ScopedFs, StorageScope, Tool,
    ToolCapabilities, ToolContext, async_trait,
};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};

/// Polls a future that is ready at once (the benchmarked tool never awaits anything pending).
fn ready<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("benchmark future was not ready"),
    }
}

struct Noop(ToolCapabilities);
#[async_trait]
impl Tool for Noop {
    fn name(&self) -> &str {
        "noop"
    }
    fn description(&self) -> &str {
        "does nothing"
    }
    fn input_schema(&self) -> Value {
        json!({})
    }
    fn capabilities(&self) -> ToolCapabilities {
        self.0.clone()
    }
    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<Value, CapabilityError> {
        black_box(ctx.scoped_fs.is_some());
        Ok(args)
    }
}

#[derive(Debug)]
struct Backends;
struct NoFetch;
#[async_trait]
impl ScopedFetch for NoFetch {
    async fn fetch(
        &self,
        _: http::Request<Bytes>,
    ) -> Result<http::Response<Bytes>, CapabilityError> {
        Err(CapabilityError::failed("unused"))
    }
}
struct NoFs;
#[async_trait]
impl capability_types::ScopedFs for NoFs {
    async fn read(&self, _: &Path) -> Result<String, CapabilityError> {
        Err(CapabilityError::failed("unused"))
    }
    async fn read_bytes(&self, _: &Path) -> Result<Vec<u8>, CapabilityError> {
        Err(CapabilityError::failed("unused"))
    }
    async fn write(&self, _: &Path, _: &[u8]) -> Result<u64, CapabilityError> {
        Err(CapabilityError::failed("unused"))
    }
    async fn append(&self, _: &Path, _: &[u8]) -> Result<u64, CapabilityError> {
        Err(CapabilityError::failed("unused"))
    }
    async fn exists(&self, _: &Path) -> Result<bool, CapabilityError> {
        Ok(false)
    }
    async fn list(&self, _: &Path) -> Result<Vec<capability_types::DirEntry>, CapabilityError> {
        Ok(Vec::new())
    }
    async fn mkdir(&self, _: &Path) -> Result<(), CapabilityError> {
        Ok(())
    }
    async fn metadata(&self, _: &Path) -> Result<capability_types::FsMetadata, CapabilityError> {
        Err(CapabilityError::failed("unused"))
    }
    async fn remove(&self, _: &Path) -> Result<(), CapabilityError> {
        Ok(())
    }
}
struct NoKv;
#[async_trait]
impl KeyValueStore for NoKv {
    async fn get(&self, _: &str) -> Result<Option<Value>, CapabilityError> {
        Ok(None)
    }
    async fn set(&self, _: &str, _: Value, _: Option<Duration>) -> Result<(), CapabilityError> {
        Ok(())
    }
    async fn delete(&self, _: &str) -> Result<bool, CapabilityError> {
        Ok(false)
    }
    async fn list(&self, _: &str) -> Result<Vec<String>, CapabilityError> {
        Ok(Vec::new())
    }
}
// The factories hand out shared objects, as a real backend with a pooled client would.
impl FetchFactory for Backends {
    fn scoped_fetch(&self, _: NetworkGrant) -> Result<Arc<dyn ScopedFetch>, CapabilityError> {
        Ok(Arc::new(NoFetch))
    }
}
impl FsFactory for Backends {
    fn scoped_fs(&self, _: FsGrant) -> Result<Arc<dyn ScopedFs>, CapabilityError> {
        Ok(Arc::new(NoFs))
    }
}
impl KvStoreFactory for Backends {
    fn kv_store(&self, _: StorageGrant) -> Result<Arc<dyn KeyValueStore>, CapabilityError> {
        Ok(Arc::new(NoKv))
    }
}

fn policy() -> CompiledPolicy {
    CompiledPolicy::load(
        r#"
id = "bench"
[fs_reach]
read = ["/srv/data", "/srv/shared"]
write = ["/srv/out"]
deny = ["/srv/data/private"]
[safety.network]
allow = ["api.github.com", "*.example.com", "*.internal.example.org"]
"#,
        PolicyFormat::Toml,
        Some(Path::new("/home/bench")),
    )
    .unwrap()
}

fn calls(c: &mut Criterion) {
    let backends = CapabilityBackends::new()
        .with_fetch(Arc::new(Backends))
        .with_fs(Arc::new(Backends))
        .with_kv(Arc::new(Backends));
    let policy = policy();
    let explicit = Noop(
        ToolCapabilities::none()
            .with_network(["api.github.com", "docs.example.com"])
            .with_fs_read(FsPaths::Paths(vec!["/srv/data/reports".into()]))
            .with_storage(StorageScope::Session, None),
    );
    let wildcards = Noop(
        ToolCapabilities::none()
            .with_network(["*"])
            .with_fs_read(FsPaths::FromPersonality)
            .with_storage(StorageScope::Personality, None),
    );
    let args = json!({"path": "a.txt"});

    // Baseline: the tool called directly with a context built ahead of time.
    let scoped = resolve_capabilities(
        "noop",
        &explicit.0,
        &policy,
        "s",
        Path::new("/srv/data"),
        Some(&backends),
    )
    .unwrap();
    let mut prebuilt = ToolContext::new("s", "/srv/data");
    scoped.install(&mut prebuilt);
    let mut group = c.benchmark_group("call");
    group.bench_function("bare_execute", |b| {
        b.iter(|| ready(explicit.execute(black_box(args.clone()), &prebuilt)))
    });
    // What the registry does per call: a cached intersection, the per-call part, the guard,
    // the scoped objects, the context, and the call.
    let cache = ResolutionCache::new();
    for (name, tool) in [
        ("resolve_guard_execute", &explicit),
        ("resolve_guard_execute_wildcards", &wildcards),
    ] {
        group.bench_function(name, |b| {
            b.iter(|| {
                let scoped = cache
                    .resolve_capabilities(
                        "noop",
                        &tool.0,
                        black_box(&policy),
                        "s",
                        Path::new("/srv/data"),
                        Some(&backends),
                    )
                    .unwrap();
                let mut ctx = ToolContext::new("s", "/srv/data");
                scoped.install(&mut ctx);
                ready(tool.execute(black_box(args.clone()), &ctx))
            })
        });
    }
    // The first call of a tool under a personality: the intersection itself, uncached.
    group.bench_function("resolve_guard_execute_uncached", |b| {
        b.iter(|| {
            let scoped = resolve_capabilities(
                "noop",
                &explicit.0,
                black_box(&policy),
                "s",
                Path::new("/srv/data"),
                Some(&backends),
            )
            .unwrap();
            let mut ctx = ToolContext::new("s", "/srv/data");
            scoped.install(&mut ctx);
            ready(explicit.execute(black_box(args.clone()), &ctx))
        })
    });
    group.finish();
}

fn hosts(c: &mut Criterion) {
    let mut group = c.benchmark_group("hosts");
    for n in [10usize, 100, 1_000] {
        // Half exact hosts, half suffix wildcards; the request matches the last wildcard.
        let patterns: Vec<HostPattern> = (0..n)
            .map(|i| {
                if i % 2 == 0 {
                    format!("api{i}.service{i}.com")
                } else {
                    format!("*.tenant{i}.example.net")
                }
            })
            .map(|p| HostPattern::parse(&p).unwrap())
            .collect();
        let last_wildcard = (0..n).rev().find(|i| i % 2 == 1).unwrap();
        let request = format!("eu.api.tenant{last_wildcard}.example.net");
        let set = HostSet::new(patterns.clone());
        group.bench_with_input(BenchmarkId::new("match", n), &request, |b, host| {
            b.iter(|| set.lookup(black_box(host), 443))
        });
        if n == 1_000 {
            let text: Vec<String> = patterns.iter().map(ToString::to_string).collect();
            let mut p = capability_core::PersonalityPolicy::default();
            p.id = "hosts".into();
            p.safety.network.allow = text;
            let compiled = CompiledPolicy::compile(p, None).unwrap();
            let caps = ToolCapabilities::none().with_network(["*"]);
            let resolved = resolve("t", &caps, &compiled, "s", Path::new("/"))
                .network
                .unwrap();
            // As a caller might write it: capitals and a trailing dot (lower-cased on the fast
            // path), and with a label only the full WHATWG parser maps (IDNA, punycode).
            let raw = format!("EU.api.tenant{last_wildcard}.example.net.");
            let idn = format!("Bücher.tenant{last_wildcard}.example.net.");
            for (name, host) in [("check_with_normalize", &raw), ("check_with_idna", &idn)] {
                assert!(resolved.check(host, 443).is_ok(), "{host} is allowed");
                group.bench_with_input(BenchmarkId::new(name, n), host, |b, host| {
                    b.iter(|| resolved.check(black_box(host), 443).is_ok())
                });
            }
        }
    }
    group.finish();
}

fn registry(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let backends = CapabilityBackends::new()
        .with_fetch(Arc::new(Backends))
        .with_fs(Arc::new(Backends))
        .with_kv(Arc::new(Backends));
    let mut registry = DefaultToolRegistry::new(Some(backends));
    registry
        .register(Noop(
            ToolCapabilities::none()
                .with_network(["*"])
                .with_fs_read(FsPaths::FromPersonality),
        ))
        .unwrap();
    let ctx = ExecutionContext::new("s", Arc::new(policy()), "/srv/data");
    let mut group = c.benchmark_group("registry");
    group.bench_function("execute_parallel_1", |b| {
        b.iter(|| {
            rt.block_on(
                registry.execute_parallel(vec![ToolCall::new("1", "noop", json!({}))], &ctx),
            )
        })
    });
    group.bench_function("execute_parallel_100_per_call", |b| {
        b.iter_custom(|iters| {
            let start = std::time::Instant::now();
            for _ in 0..iters {
                let calls = (0..100)
                    .map(|i| ToolCall::new(i.to_string(), "noop", json!({})))
                    .collect();
                black_box(rt.block_on(registry.execute_parallel(calls, &ctx)));
            }
            start.elapsed() / 100
        })
    });
    group.finish();
}

/// The path check every `ScopedFs` operation makes (a relative name under the read root), with
/// the home directory known, as the command line loads a personality from `$HOME`, and unknown
/// (no `$HOME`), when the deny floor protects `.ssh`, `.aws`, `.gnupg` and `.netrc` wherever
/// they appear and so looks at every path checked; and under a root of the whole home
/// directory, where every home entry of the floor is compared with each path.
fn paths(c: &mut Criterion) {
    let text = "id = \"p\"\n[fs_reach]\nread = [\"/srv/data\"]\n";
    let caps = ToolCapabilities::none().with_fs_read(FsPaths::FromPersonality);
    let mut group = c.benchmark_group("paths");
    for (name, home) in [
        ("check_home_known", Some(Path::new("/home/user"))),
        ("check_home_unknown", None),
    ] {
        let policy = CompiledPolicy::load(text, PolicyFormat::Toml, home).unwrap();
        let fs = resolve("t", &caps, &policy, "s", Path::new("/srv/data"))
            .fs
            .unwrap();
        let path = Path::new("reports/2026/q3-summary.txt");
        fs.reaches(path).unwrap();
        group.bench_function(name, |b| b.iter(|| fs.reaches(black_box(path))));
    }
    // The floor at its widest: a personality that reaches the whole home directory (an Ethos
    // personality started there), where every home entry of the floor lies beneath the root
    // and each path checked is compared with all of them.
    let policy = CompiledPolicy::load(
        "id = \"p\"\n[fs_reach]\nread = [\"~\"]\n",
        PolicyFormat::Toml,
        Some(Path::new("/home/user")),
    )
    .unwrap();
    let fs = resolve("t", &caps, &policy, "s", Path::new("/home/user"))
        .fs
        .unwrap();
    let path = Path::new("/home/user/src/app/reports/q3-summary.txt");
    fs.reaches(path).unwrap();
    group.bench_function("check_under_home_root", |b| {
        b.iter(|| fs.reaches(black_box(path)))
    });
    group.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(40)
}

criterion_group! { name = benches; config = config(); targets = calls, hosts, registry, paths }
criterion_main!(benches);
