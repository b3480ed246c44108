//! The capsule lab: a binary that is its own capsule worker (the one call at the top of `main`)
//! and, with `host`, a host that runs one escape attempt in a capsule and prints the result —
//! started by the tests with a secret planted in its environment.
#![allow(
    clippy::print_stdout,
    clippy::disallowed_methods,
    reason = "a test binary: prints its result and reads the planted variable"
)]

mod tools;

use std::sync::Arc;

use capability_capsule::{Capsule, CapsuleConfig, run_worker_if_requested};
use capability_core::{
    CapabilityBackends, CompiledPolicy, DefaultToolRegistry, ExecutionContext, IsolationSelection,
    ToolCall,
};
use capability_fs::{FsBackend, FsConfig};
use serde_json::json;

/// A worker that says `ready` without confining itself (the lab's `liar` tool): the host must
/// not believe it.
fn lie_if_asked() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) != Some(capability_capsule::WORKER_FLAG)
        || args.get(2).map(String::as_str) != Some("liar")
    {
        return;
    }
    use std::io::{Read, Write};
    let mut channel =
        capability_capsule::ring::BlockingEnd::adopt_in_worker().expect("the channel");
    let ready = capability_capsule::wire::encode(
        &capability_capsule::wire::FromWorker::Ready {},
        &[],
        capability_capsule::wire::DEFAULT_MAX_FRAME,
    )
    .expect("a ready frame");
    let _ = channel.write_all(&ready);
    let mut sink = Vec::new();
    let _ = channel.read_to_end(&mut sink);
    std::process::exit(0);
}

fn main() {
    lie_if_asked();
    run_worker_if_requested(tools::lab_tools);
    let mut args = std::env::args().skip(1);
    if args.next().as_deref() != Some("host") {
        println!("usage: capsule-lab host ATTEMPT (or started as a capsule worker)");
        std::process::exit(2);
    }
    let attempt = args.next().unwrap_or_default();
    let needle = std::env::var("LAB_PLANTED").unwrap_or_default();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async move {
        let capsule = Capsule::new(CapsuleConfig::current_exe().expect("own binary"));
        let backends =
            CapabilityBackends::new().with_fs(Arc::new(FsBackend::new(FsConfig::default())));
        let mut registry = DefaultToolRegistry::new(Some(backends))
            .with_isolation(Arc::new(capsule), IsolationSelection::All);
        for tool in tools::lab_tools() {
            registry.register_arc(tool).expect("lab tools register");
        }
        let ctx = ExecutionContext::new("lab", Arc::new(CompiledPolicy::none(None)), "/");
        let call = ToolCall::new("1", "escape", json!({"attempt": attempt, "needle": needle}));
        let result = registry.execute(call, &ctx).await;
        let own = std::fs::read("/proc/self/environ").unwrap_or_default();
        let planted_here = !needle.is_empty() && String::from_utf8_lossy(&own).contains(&needle);
        println!(
            "{}",
            json!({"result": result.result, "planted_in_host": planted_here})
        );
    });
}
