//! `[after_untrusted]`: the tools a personality pauses after a batch that ran a tool whose
//! output is untrusted, and holds for the rest of the invocation (docs/policy.md, "After
//! untrusted output"), through `execute_parallel`, `execute` and the dry run.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use capability_core::{Admission, DefaultToolRegistry, ExecutionContext, ToolCall};
use capability_types::{CapabilityError, DenialCode, Tool, ToolCapabilities, ToolContext};
use serde_json::{Value, json};
use support::policy;

/// A tool that counts its runs; `untrusted` says its results are.
struct Counted {
    name: &'static str,
    untrusted: bool,
    runs: Arc<AtomicUsize>,
}

#[async_trait]
impl Tool for Counted {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "counts its runs"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn capabilities(&self) -> ToolCapabilities {
        ToolCapabilities::none()
    }
    fn output_is_untrusted(&self) -> bool {
        self.untrusted
    }
    async fn execute(&self, _: Value, _: &ToolContext) -> Result<Value, CapabilityError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        Ok(json!("ran"))
    }
}

/// `fetch` (untrusted output), `shell` and `note` (trusted), `mcp__web__read` (untrusted), and
/// a counter of every run.
fn registry() -> (DefaultToolRegistry, Arc<AtomicUsize>) {
    let runs = Arc::new(AtomicUsize::new(0));
    let mut registry = DefaultToolRegistry::new(None);
    for (name, untrusted) in [
        ("fetch", true),
        ("shell", false),
        ("note", false),
        ("other", false),
        ("mcp__web__read", true),
    ] {
        registry
            .register(Counted {
                name,
                untrusted,
                runs: Arc::clone(&runs),
            })
            .unwrap();
    }
    (registry, runs)
}

const POLICY: &str = "id = \"p\"\n[after_untrusted]\npause = [\"shell\", \"mcp__web__*\"]\n\
                      batches = 2\nhold = [\"note\"]\n";

/// What each call of a batch came to: `ok`, `paused`, `held`, or the error.
async fn batch(
    registry: &DefaultToolRegistry,
    ctx: &ExecutionContext,
    tools: &[&str],
) -> Vec<String> {
    let calls = tools
        .iter()
        .enumerate()
        .map(|(i, t)| ToolCall::new(i.to_string(), *t, json!({})))
        .collect();
    registry
        .execute_parallel(calls, ctx)
        .await
        .iter()
        .map(|r| match r.result.error_message() {
            None => "ok".to_owned(),
            Some(e) if e.contains("is paused for 2 batch(es)") => "paused".to_owned(),
            Some(e) if e.contains("is held for the rest of this invocation") => "held".to_owned(),
            Some(e) => e.to_owned(),
        })
        .collect()
}

// guarantee: G-REG-17
/// A batch that runs a tool whose output is untrusted pauses the `pause` tools in the next two
/// batches, and holds the `hold` tools for the rest of the invocation; the batch itself, tools
/// named by neither, and a new invocation are not affected; the refused calls never run and
/// say why, with the stable code.
#[tokio::test]
async fn after_an_untrusted_result_the_paused_tools_wait_and_the_held_ones_stay_refused() {
    let (registry, runs) = registry();
    let ctx = ExecutionContext::new("s", policy(POLICY), "/tmp");
    // Nothing untrusted yet: everything runs, in a batch of one and of several.
    assert_eq!(batch(&registry, &ctx, &["shell"]).await, ["ok"]);
    assert_eq!(
        batch(&registry, &ctx, &["note", "shell"]).await,
        ["ok", "ok"]
    );
    // The untrusted result and the calls beside it in its batch.
    assert_eq!(
        batch(&registry, &ctx, &["shell", "fetch", "shell", "note"]).await,
        ["ok", "ok", "ok", "ok"]
    );
    // The next two batches: paused, held; a tool named by neither runs.
    assert_eq!(
        batch(
            &registry,
            &ctx,
            &["shell", "note", "other", "mcp__web__read"]
        )
        .await,
        ["paused", "held", "ok", "paused"]
    );
    let one = registry
        .execute(ToolCall::new("x", "shell", json!({})), &ctx)
        .await;
    assert_eq!(
        one.result
            .error_message()
            .map(|m| m.split(':').next().unwrap_or_default()),
        Some(DenialCode::ConstraintNotMet.as_str()),
        "{one:?}"
    );
    // Two batches later the pause has lifted; the hold has not.
    assert_eq!(
        batch(&registry, &ctx, &["shell", "note"]).await,
        ["ok", "held"]
    );
    assert!(ctx.invocation.saw_untrusted_output());
    // A new invocation (the user's next message) starts clear.
    let fresh = ctx.clone().new_invocation();
    assert_eq!(
        batch(&registry, &fresh, &["note", "shell"]).await,
        ["ok", "ok"]
    );
    // 2 + 4 + 1 (other) + 1 (shell) + 2 = every call that was not refused.
    assert_eq!(runs.load(Ordering::SeqCst), 1 + 2 + 4 + 1 + 1 + 2);
}

// guarantee: G-REG-17
/// A refused untrusted tool arms nothing; an untrusted tool that keeps coming back keeps the
/// pause going; a personality without the table pauses nothing; and `batches = 0` pauses
/// nothing but still holds.
#[tokio::test]
async fn the_pause_follows_what_was_admitted_and_only_under_the_table() {
    let (registry, _) = registry();
    // `fetch` forbidden: its refused calls read nothing.
    let forbidden = format!("{POLICY}[constraints.fetch]\nforbidden = true\n");
    let ctx = ExecutionContext::new("s", policy(&forbidden), "/tmp");
    assert!(batch(&registry, &ctx, &["fetch"]).await[0].starts_with("CONSTRAINT_NOT_MET"));
    assert_eq!(
        batch(&registry, &ctx, &["shell", "note"]).await,
        ["ok", "ok"]
    );
    // A batch of no call is no step of the pause.
    let ctx = ExecutionContext::new("s", policy(POLICY), "/tmp");
    assert_eq!(batch(&registry, &ctx, &["fetch"]).await, ["ok"]);
    for _ in 0..3 {
        assert!(batch(&registry, &ctx, &[]).await.is_empty());
    }
    assert_eq!(batch(&registry, &ctx, &["shell"]).await, ["paused"]);
    // Read again in each batch: each pauses the next two.
    let ctx = ExecutionContext::new("s", policy(POLICY), "/tmp");
    for _ in 0..3 {
        assert_eq!(batch(&registry, &ctx, &["fetch", "shell"]).await[0], "ok");
        assert_eq!(batch(&registry, &ctx, &["shell"]).await, ["paused"]);
    }
    // No table: nothing paused or held.
    let plain = ExecutionContext::new("s", policy("id = \"p\"\n"), "/tmp");
    assert_eq!(batch(&registry, &plain, &["fetch"]).await, ["ok"]);
    assert_eq!(
        batch(&registry, &plain, &["shell", "note"]).await,
        ["ok", "ok"]
    );
    assert!(!plain.invocation.saw_untrusted_output());
    // No batches of pause: the hold alone.
    let zero = POLICY.replace("batches = 2", "batches = 0");
    let ctx = ExecutionContext::new("s", policy(&zero), "/tmp");
    assert_eq!(batch(&registry, &ctx, &["fetch"]).await, ["ok"]);
    assert_eq!(
        batch(&registry, &ctx, &["shell", "note"]).await,
        ["ok", "held"]
    );
}

// guarantee: G-REG-17
/// The dry run (`toolcap explain`) answers as the next batch would, and counts nothing: asking
/// does not use up a batch of the pause.
#[tokio::test]
async fn the_dry_run_answers_as_the_next_batch_and_counts_nothing() {
    let (registry, _) = registry();
    let ctx = ExecutionContext::new("s", policy(POLICY), "/tmp");
    let ask = |tool: &'static str| registry.admission(&ToolCall::new("d", tool, json!({})), &ctx);
    assert!(matches!(ask("shell"), Admission::Admitted(_)));
    assert!(matches!(ask("fetch"), Admission::Admitted(_)));
    // The dry run of an untrusted tool armed nothing.
    assert_eq!(batch(&registry, &ctx, &["shell"]).await, ["ok"]);
    assert_eq!(batch(&registry, &ctx, &["fetch"]).await, ["ok"]);
    for _ in 0..5 {
        match ask("shell") {
            Admission::Refused {
                denial, message, ..
            } => {
                assert_eq!(denial, Some(DenialCode::ConstraintNotMet));
                assert!(message.contains("paused"), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(batch(&registry, &ctx, &["shell"]).await, ["paused"]);
    assert_eq!(batch(&registry, &ctx, &["shell"]).await, ["paused"]);
    assert_eq!(batch(&registry, &ctx, &["shell"]).await, ["ok"]);
}

// guarantee: G-REG-17
/// `hold_writes`: the policy a held batch runs under keeps those places from writes, and only
/// those, in the personality and in any narrowing of it; a place that is no absolute path, or
/// `/`, refuses the policy naming the field.
#[test]
fn a_held_invocation_keeps_its_hold_writes_places_from_writes_in_every_narrowing() {
    use capability_core::{CompiledPolicy, Narrowing, PolicyFormat, resolve};
    use capability_types::FsPaths;
    use capability_types::backend::{FsAccess, PathPolicy};
    use std::path::Path;
    let toml = "id = \"p\"\n[fs_reach]\nread = [\"/srv\"]\nwrite = [\"/srv\"]\n\
                [after_untrusted]\nhold_writes = [\"/srv/state\", \"~/.agent\"]\n";
    let home = Some(Path::new("/srv/home"));
    let base = CompiledPolicy::load(toml, PolicyFormat::Toml, home).unwrap();
    let caps = ToolCapabilities::none()
        .with_fs_read(FsPaths::FromPersonality)
        .with_fs_write(FsPaths::FromPersonality);
    let write = |policy: &CompiledPolicy, path: &str| {
        let resolved = resolve("w", &caps, policy, "s", Path::new("/srv"));
        resolved.fs.unwrap().check(Path::new(path), FsAccess::Write)
    };
    for policy in [base.clone(), base.narrow(&Narrowing::default()).unwrap()] {
        assert!(write(&policy, "/srv/state/MEMORY.md").is_ok());
        let held = policy
            .held_after_untrusted()
            .expect("a variant for held batches");
        for kept in ["/srv/state/MEMORY.md", "/srv/state", "/srv/home/.agent/x"] {
            let err = write(held, kept).unwrap_err().to_string();
            assert!(err.starts_with("PATH_NOT_REACHABLE"), "{kept}: {err}");
        }
        assert!(write(held, "/srv/project/main.rs").is_ok());
        assert!(
            resolve("w", &caps, held, "s", Path::new("/srv"))
                .fs
                .unwrap()
                .check(Path::new("/srv/state/MEMORY.md"), FsAccess::Read)
                .is_ok(),
            "reading stays"
        );
    }
    // Without places to hold, there is no variant.
    let plain = CompiledPolicy::load(
        "id = \"p\"\n[after_untrusted]\npause = [\"x\"]\n",
        PolicyFormat::Toml,
        home,
    )
    .unwrap();
    assert!(plain.held_after_untrusted().is_none());
    for (entry, why) in [("\"state\"", "absolute"), ("\"/\"", "names no place")] {
        let err = CompiledPolicy::load(
            &format!("id = \"p\"\n[after_untrusted]\nhold_writes = [{entry}]\n"),
            PolicyFormat::Toml,
            home,
        )
        .unwrap_err();
        assert_eq!(err.field(), Some("after_untrusted.hold_writes[0]"), "{err}");
        assert!(err.to_string().contains(why), "{err}");
    }
}
