//! ScopedFetch GET on loopback against a bare hyper-util client (pooled, keep-alive) in the same
//! run (docs/semantics.md, "Performance budgets").
#![allow(
    missing_docs,
    clippy::disallowed_methods,
    reason = "the baseline is the unscoped client"
)]

use std::convert::Infallible;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use capability_core::PolicyFormat;
use capability_core::{CompiledPolicy, resolve};
use capability_fetch::{FetchBackend, FetchConfig};
use capability_types::ToolCapabilities;
use capability_types::backend::{FetchFactory, HostPolicy, NetworkGrant};
use criterion::{Criterion, criterion_group, criterion_main};
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};

#[path = "support/paired.rs"]
mod paired;

fn fetch(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let addr = rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                tokio::spawn(async move {
                    let service = service_fn(|_req| async {
                        Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from_static(
                            b"hello",
                        ))))
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        addr
    });
    let url = format!("http://127.0.0.1:{}/", addr.port());

    let bare: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let policy = CompiledPolicy::load(
        &format!(
            "id = \"bench\"\n[safety.network]\nallow = [\"127.0.0.1:{}\"]\n",
            addr.port()
        ),
        PolicyFormat::Toml,
        None,
    )
    .unwrap();
    let resolved = resolve(
        "fetch_url",
        &ToolCapabilities::none().with_network(["*"]),
        &policy,
        "s",
        Path::new("/"),
    );
    let grant = NetworkGrant::new(
        "fetch_url",
        resolved.network.unwrap() as Arc<dyn HostPolicy>,
    );
    let scoped = FetchBackend::new(FetchConfig::default())
        .unwrap()
        .scoped_fetch(grant)
        .unwrap();

    let bare_get = || {
        rt.block_on(async {
            let response = bare.get(url.parse().unwrap()).await.unwrap();
            response.into_body().collect().await.unwrap().to_bytes()
        })
    };
    let scoped_get = || {
        rt.block_on(scoped.fetch(http::Request::get(url.as_str()).body(Bytes::new()).unwrap()))
            .unwrap()
    };
    let mut group = c.benchmark_group("fetch");
    group.bench_function("bare_hyper_util_get", |b| b.iter(bare_get));
    group.bench_function("scoped_get", |b| b.iter(scoped_get));
    group.finish();

    // The budgeted ratio, timed paired as well (docs/benchmarks.md, "Paired budgets").
    if paired::measuring() {
        paired::Rows::default()
            .each(
                ("fetch/scoped_get", "fetch/bare_hyper_util_get"),
                scoped_get,
                bare_get,
            )
            .write("fetch-paired.json");
    }
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .sample_size(40)
}

criterion_group! { name = benches; config = config(); targets = fetch }
criterion_main!(benches);
