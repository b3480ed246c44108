//! Operations per second of each store: get and set, and for the durable embedded store single
//! awaited writes against 64 concurrent writers sharing group commits.
#![allow(
    missing_docs,
    clippy::disallowed_methods,
    reason = "the benchmark starts a redis-server"
)]

#[path = "../../crates/capability-kv/tests/support/mod.rs"]
mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use capability_kv::{EmbeddedStore, KvBackend, KvLimits, MemoryStore, RawStore, RedisStore};
use capability_types::backend::{KvStoreFactory, StorageGrant};
use capability_types::{KeyValueStore, StorageScope};
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;

fn scoped<S: RawStore + 'static>(store: Arc<S>) -> Arc<dyn KeyValueStore> {
    KvBackend::new(store, KvLimits::default())
        .kv_store(StorageGrant::new(
            "bench",
            StorageScope::Session,
            "session:bench",
            None,
        ))
        .unwrap()
}

fn get_and_set(
    c: &mut Criterion,
    rt: &tokio::runtime::Runtime,
    name: &str,
    kv: &Arc<dyn KeyValueStore>,
) {
    let value = json!({"status": "ok", "count": 42});
    rt.block_on(kv.set("hot", value.clone(), None)).unwrap();
    c.bench_function(&format!("kv/{name}_get"), |b| {
        b.iter(|| rt.block_on(kv.get("hot")).unwrap())
    });
    let mut i = 0u64;
    c.bench_function(&format!("kv/{name}_set"), |b| {
        b.iter(|| {
            i += 1;
            rt.block_on(kv.set(&format!("k{}", i % 1000), value.clone(), None))
                .unwrap()
        })
    });
}

fn kv(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    get_and_set(c, &rt, "memory", &scoped(MemoryStore::new()));

    let dir = tempfile::tempdir().unwrap();
    let embedded = scoped(EmbeddedStore::open(dir.path().join("bench.redb")).unwrap());
    get_and_set(c, &rt, "embedded", &embedded);
    c.bench_function("kv/embedded_set_64_concurrent_per_op", |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for round in 0..iters {
                rt.block_on(async {
                    let mut set = tokio::task::JoinSet::new();
                    for w in 0..64u64 {
                        let kv = Arc::clone(&embedded);
                        set.spawn(async move {
                            kv.set(&format!("c{}", (round * 64 + w) % 4096), json!(w), None)
                                .await
                                .unwrap()
                        });
                    }
                    while set.join_next().await.is_some() {}
                });
            }
            start.elapsed() / 64
        })
    });

    let server = support::RedisServer::start();
    let redis = scoped(
        rt.block_on(RedisStore::connect(&server.url, Some("bench")))
            .unwrap(),
    );
    get_and_set(c, &rt, "redis", &redis);
    drop(server);
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30)
}

criterion_group! { name = benches; config = config(); targets = kv }
criterion_main!(benches);
