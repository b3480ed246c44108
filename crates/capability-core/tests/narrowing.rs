//! Per-invocation narrowing through the registry: a batch run under an extra policy that can
//! only restrict.

mod support;

use std::sync::Arc;

use capability_core::{DefaultToolRegistry, ExecutionContext, ToolCall};
use capability_core::{Narrowing, PolicyFormat};
use capability_types::{FsPaths, ToolCapabilities};
use serde_json::json;
use support::{Behaviour, TestTool, policy, recording_backends};

const PERSONALITY: &str = r#"
id = "wide"
[fs_reach]
read = ["/srv/data"]
[safety.network]
allow = ["*.example.com"]
[constraints.fetcher]
max_invocations = 5
"#;

#[tokio::test]
async fn a_narrowed_batch_gets_less_never_more() {
    let (backends, _) = recording_backends();
    let mut registry = DefaultToolRegistry::new(Some(backends));
    registry
        .register(TestTool::new(
            "reader",
            ToolCapabilities::none().with_fs_read(FsPaths::FromPersonality),
            Behaviour::ReadFile,
        ))
        .unwrap();
    registry
        .register(TestTool::new(
            "fetcher",
            ToolCapabilities::none().with_network(["*"]),
            Behaviour::Fetch,
        ))
        .unwrap();
    let ctx = ExecutionContext::new("s", policy(PERSONALITY), "/srv/data");
    let narrowing = Narrowing::parse(
        r#"
toolset = ["reader", "fetcher", "not_in_personality_toolset_anyway"]
[fs_reach]
read = ["/srv/data/public", "/etc"]
deny = ["/srv/data/public/drafts"]
[network]
allow = ["api.example.com", "evil.org"]
[constraints.fetcher]
max_invocations = 1
"#,
        PolicyFormat::Toml,
        None,
    )
    .unwrap();
    let narrow = ctx.narrowed(&narrowing).unwrap();
    let calls = vec![
        ToolCall::new("1", "reader", json!({"path": "public/a.md"})),
        ToolCall::new("2", "reader", json!({"path": "internal/b.md"})),
        ToolCall::new("3", "reader", json!({"path": "public/drafts/c.md"})),
        ToolCall::new("4", "reader", json!({"path": "/etc/hostname"})),
        ToolCall::new("5", "fetcher", json!({"url": "https://api.example.com/x"})),
        ToolCall::new("6", "fetcher", json!({"url": "https://api.example.com/y"})),
        ToolCall::new("7", "fetcher", json!({"url": "https://www.example.com/"})),
    ];
    let results = registry.execute_parallel(calls.clone(), &narrow).await;
    let shown: Vec<String> = results
        .iter()
        .map(|r| r.result.error_message().unwrap_or("ok").to_owned())
        .collect();
    assert_eq!(
        shown,
        [
            "ok",
            "PATH_NOT_REACHABLE: read not permitted for /srv/data/internal/b.md",
            "PATH_NOT_REACHABLE: read not permitted for /srv/data/public/drafts/c.md",
            "PATH_NOT_REACHABLE: read not permitted for /etc/hostname",
            "ok",
            "CONSTRAINT_NOT_MET: fetcher may run at most 1 time(s) per invocation",
            "CONSTRAINT_NOT_MET: fetcher may run at most 1 time(s) per invocation",
        ],
        "/etc and evil.org are not in the personality, so the narrowing cannot add them"
    );
    // The same calls without the narrowing, in a fresh invocation: the personality's reach.
    let wide = registry
        .execute_parallel(calls, &ctx.clone().new_invocation())
        .await;
    let ok: Vec<bool> = wide.iter().map(|r| r.result.is_ok()).collect();
    assert_eq!(ok, [true, true, true, false, true, true, true]);
    let _ = Arc::clone(&narrow.policy);
}

#[test]
fn hostile_narrowings_are_refused() {
    let cases = [
        ("[network]\nallow = [\"*.com\"]\n", "network.allow[0]"),
        ("[network]\ndeny = [\"https://x\"]\n", "network.deny[0]"),
        ("[fs_reach]\nread = [\"relative\"]\n", "fs_reach.read[0]"),
        ("[process]\nallow = [\"*\"]\n", "safety.process.allow[0]"),
        ("[netwrok]\nallow = []\n", "netwrok"),
        ("toolset = [\"Bad Name\"]\n", "toolset[0]"),
        (
            "[fs_reach]\ndeny_write = [\"/srv/x*\"]\n",
            "fs_reach.deny_write[0]",
        ),
        (
            "[fs_reach]\ndeny_write = [\"/*/x\"]\n",
            "fs_reach.deny_write[0]",
        ),
    ];
    let base =
        capability_core::CompiledPolicy::load(PERSONALITY, PolicyFormat::Toml, None).unwrap();
    for (text, field) in cases {
        let err = Narrowing::parse(text, PolicyFormat::Toml, None)
            .and_then(|n| base.narrow(&n).map(|_| ()))
            .unwrap_err();
        assert_eq!(err.field(), Some(field), "{text}: {err}");
    }
}

// guarantee: G-FS-14
#[test]
fn a_narrowing_keeps_more_from_writes_and_never_less() {
    use capability_core::{CompiledPolicy, resolve};
    use capability_types::backend::{FsAccess, PathPolicy};
    use std::path::Path;
    let personality = CompiledPolicy::load(
        "id = \"p\"\n[fs_reach]\nread = [\"/srv/ws\"]\nwrite = [\"/srv/ws\"]\ndeny_write = [\"/srv/ws/*/toolset.yaml\"]\n",
        PolicyFormat::Toml,
        None,
    )
    .unwrap();
    let narrowing = Narrowing::parse(
        "[fs_reach]\ndeny_write = [\"/srv/ws/shared\"]\n",
        PolicyFormat::Toml,
        None,
    )
    .unwrap();
    let narrowed = personality.narrow(&narrowing).unwrap();
    let caps = ToolCapabilities::none()
        .with_fs_read(FsPaths::FromPersonality)
        .with_fs_write(FsPaths::FromPersonality);
    let paths = resolve("writer", &caps, &narrowed, "s", Path::new("/srv/ws"))
        .fs
        .unwrap();
    for kept in [
        "/srv/ws/a/toolset.yaml",
        "/srv/ws/shared/x",
        "/srv/ws/Shared/y",
    ] {
        let refused = paths.check(Path::new(kept), FsAccess::Write).unwrap_err();
        assert!(
            refused.to_string().contains("deny_write"),
            "{kept}: {refused}"
        );
        assert!(
            paths.check(Path::new(kept), FsAccess::Read).is_ok(),
            "{kept}"
        );
    }
    assert!(
        paths
            .check(Path::new("/srv/ws/a/notes.md"), FsAccess::Write)
            .is_ok()
    );
    // The personality's own rule holds under the narrowing too (it only adds).
    let only = resolve("writer", &caps, &personality, "s", Path::new("/srv/ws"))
        .fs
        .unwrap();
    assert!(
        only.check(Path::new("/srv/ws/shared/x"), FsAccess::Write)
            .is_ok()
    );
}

// guarantee: G-FS-15
/// A narrowing may keep more places apart, never fewer: its `apart` adds to the personality's,
/// and a place kept apart is reached only through a root at or beneath it, under the
/// narrowing as under the personality. Hostile entries are refused naming the field.
#[test]
fn a_narrowing_keeps_more_places_apart_and_never_fewer() {
    use capability_core::{CompiledPolicy, resolve};
    use capability_types::backend::{FsAccess, PathPolicy};
    use std::path::Path;
    let personality = CompiledPolicy::load(
        "id = \"p\"\n[fs_reach]\nread = [\"/srv\", \"/srv/state/me\"]\napart = [\"/srv/state\"]\n",
        PolicyFormat::Toml,
        None,
    )
    .unwrap();
    let narrowing = Narrowing::parse(
        "[fs_reach]\napart = [\"/srv/cache\"]\n",
        PolicyFormat::Toml,
        None,
    )
    .unwrap();
    let narrowed = personality.narrow(&narrowing).unwrap();
    let caps = ToolCapabilities::none().with_fs_read(FsPaths::FromPersonality);
    let paths = resolve("reader", &caps, &narrowed, "s", Path::new("/srv"))
        .fs
        .unwrap();
    for apart in [
        "/srv/state/other/MEMORY.md",
        "/srv/State/x",
        "/srv/cache/x",
        "/srv/state",
    ] {
        let refused = paths.check(Path::new(apart), FsAccess::Read).unwrap_err();
        assert!(
            refused.to_string().contains("fs_reach.apart"),
            "{apart}: {refused}"
        );
    }
    for open in ["/srv/notes.md", "/srv/state/me/MEMORY.md", "/srv/stately"] {
        assert!(
            paths.check(Path::new(open), FsAccess::Read).is_ok(),
            "{open}"
        );
    }
    for (hostile, field) in [
        ("[fs_reach]\napart = [\"/\"]\n", "fs_reach.apart[0]"),
        (
            "[fs_reach]\napart = [\"/srv\", \"state\"]\n",
            "fs_reach.apart[1]",
        ),
        ("[fs_reach]\napart = \"/srv\"\n", "apart"),
    ] {
        let err = Narrowing::parse(hostile, PolicyFormat::Toml, None).unwrap_err();
        assert!(err.to_string().contains(field), "{hostile}: {err}");
    }
}

// guarantee: G-REG-19
/// A tool whose process was confined once, as it started (a guarded MCP server), to its
/// declaration under the personality then, is called only where the call resolves to that same
/// reach: under the personality it runs; in an invocation narrowed where its reach lies (a
/// place beneath its write root kept from writes, a root taken away, a host taken away) it is
/// refused with the stable code, saying what differs, and never runs; a narrowing that leaves
/// its reach as it was (a place kept from writes elsewhere) lets it run.
#[tokio::test]
async fn a_tool_confined_once_is_not_called_under_a_narrower_reach() {
    let (backends, _) = recording_backends();
    let personality = policy(
        "id = \"p\"\n[fs_reach]\nread = [\"/srv\"]\nwrite = [\"/srv/ws\", \"/srv/notes\"]\n\
         deny = [\"/srv/ws/private\"]\n\
         [safety.network]\nallow = [\"api.example.com\", \"cdn.example.com\"]\n\
         [safety.process]\nallow = [\"sh\", \"ls\"]\n",
    );
    let caps = ToolCapabilities::none()
        .with_fs_read(FsPaths::Paths(vec!["/srv/ws".into()]))
        .with_fs_write(FsPaths::Paths(vec!["/srv/ws".into()]))
        .with_network(["api.example.com"])
        .with_process(["sh"]);
    let confined = Arc::new(capability_core::resolve(
        "mcp__s",
        &caps,
        &personality,
        "start",
        std::path::Path::new("/srv"),
    ));
    let tool = Arc::new(TestTool::new("mcp__s__t", caps, Behaviour::Echo));
    let runs = Arc::clone(&tool.runs);
    let mut registry = DefaultToolRegistry::new(Some(backends));
    registry
        .register_confined(Arc::clone(&tool) as _, confined)
        .unwrap();
    let ctx = ExecutionContext::new("s", personality, "/srv");
    let call = || ToolCall::new("1", "mcp__s__t", json!({}));
    let outcome = |narrowing: Option<&str>| {
        let ctx = match narrowing {
            Some(text) => ctx
                .narrowed(&Narrowing::parse(text, PolicyFormat::Toml, None).unwrap())
                .unwrap(),
            None => ctx.clone(),
        };
        let registry = &registry;
        async move {
            registry
                .execute(call(), &ctx)
                .await
                .result
                .error_message()
                .map(str::to_owned)
        }
    };
    assert_eq!(outcome(None).await, None);
    // Kept from writes elsewhere, or where the process could not reach already (a place it
    // was started with hidden): nothing it could do changes.
    for narrowing in [
        "[fs_reach]\ndeny_write = [\"/srv/notes\"]\n",
        "[fs_reach]\ndeny_write = [\"/srv/ws/private\"]\n",
        "[fs_reach]\ndeny = [\"/srv/ws/private/keys\"]\n",
    ] {
        assert_eq!(outcome(Some(narrowing)).await, None, "{narrowing}");
    }
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 4);
    for (narrowing, code, names) in [
        (
            "[fs_reach]\ndeny_write = [\"/srv/ws/held\"]\n",
            "PATH_NOT_REACHABLE: ",
            "/srv/ws/held",
        ),
        (
            "[fs_reach]\ndeny = [\"/srv/ws/secret\"]\n",
            "PATH_NOT_REACHABLE: ",
            "/srv/ws/secret",
        ),
        (
            "[fs_reach]\nwrite = [\"/srv/notes\"]\n",
            "PATH_NOT_REACHABLE: ",
            "/srv/ws",
        ),
        (
            "[network]\nallow = [\"cdn.example.com\"]\n",
            "HOST_NOT_ALLOWED: ",
            "hosts",
        ),
        (
            "[process]\nallow = [\"ls\"]\n",
            "BINARY_NOT_ALLOWED: ",
            "sh",
        ),
        (
            "[process]\ndeny_args = [\"sh -c*\"]\n",
            "BINARY_NOT_ALLOWED: ",
            "sh -c*",
        ),
        (
            "[escalate]\nhosts = [\"api.example.com\"]\n",
            "HOST_NOT_ALLOWED: ",
            "approval",
        ),
        (
            "[escalate]\nwrite_paths = [\"/srv/ws\"]\n",
            "PATH_NOT_REACHABLE: ",
            "approval",
        ),
    ] {
        let refused = outcome(Some(narrowing)).await.unwrap_or_default();
        assert!(
            refused.starts_with(code) && refused.contains(names) && refused.contains("mcp__s__t"),
            "{narrowing}: {refused}"
        );
    }
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 4);
}
