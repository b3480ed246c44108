//! The arguments of a call (what `toolcap call TOOL ARGS_JSON` passes on): admission never
//! panics, and an absolute path outside the tool's reach anywhere in the arguments keeps the
//! tool from running.
#![no_main]

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use capability_core::{
    CompiledPolicy, DefaultToolRegistry, ExecutionContext, ToolCall, matching::path::is_within,
};
use capability_types::{CapabilityError, FsPaths, Tool, ToolCapabilities, ToolContext, async_trait};
use capability_core::{PolicyFormat};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

static RAN: AtomicBool = AtomicBool::new(false);

#[derive(Debug)]
struct Echo;

#[async_trait]
impl Tool for Echo {
    fn name(&self) -> &str {
        "echo"
    }
    fn description(&self) -> &str {
        "echoes"
    }
    fn input_schema(&self) -> Value {
        serde_json::json!({"type": "object"})
    }
    fn capabilities(&self) -> ToolCapabilities {
        ToolCapabilities::none().with_fs_read(FsPaths::FromPersonality)
    }
    async fn execute(&self, args: Value, _ctx: &ToolContext) -> Result<Value, CapabilityError> {
        RAN.store(true, Ordering::SeqCst);
        Ok(args)
    }
}

struct Fixture {
    runtime: tokio::runtime::Runtime,
    registry: DefaultToolRegistry,
    ctx: ExecutionContext,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a runtime");
        let mut registry = DefaultToolRegistry::new(None);
        registry.register(Echo).expect("registers");
        let policy = CompiledPolicy::load(
            "id = \"fuzz\"\n[fs_reach]\nread = [\"/srv/data\"]\n",
            PolicyFormat::Toml,
            None,
        )
        .expect("loads");
        let ctx = ExecutionContext::new("s", Arc::new(policy), "/srv/data");
        Fixture {
            runtime,
            registry,
            ctx,
        }
    })
}

fn outside_path(value: &Value) -> bool {
    match value {
        Value::String(s) => {
            // `//x` is `/x` to the kernel, and the gate reads it so.
            s.starts_with('/') && {
                let p = capability_core::matching::path::resolve_path(Path::new(s), Path::new("/"));
                p.map(|p| !is_within(&p, Path::new("/srv/data")))
                    .unwrap_or(true)
            }
        }
        Value::Array(items) => items.iter().any(outside_path),
        Value::Object(map) => map.values().any(outside_path),
        _ => false,
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(args) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    if !args.is_object() {
        return;
    }
    let f = fixture();
    RAN.store(false, Ordering::SeqCst);
    let call = ToolCall::new("c", "echo", args.clone());
    let results = f
        .runtime
        .block_on(f.registry.execute_parallel(vec![call], &f.ctx));
    assert_eq!(results.len(), 1);
    if outside_path(&args) {
        assert!(
            !RAN.load(Ordering::SeqCst),
            "ran with a path outside the reach: {args}"
        );
    }
});
