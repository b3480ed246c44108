//! Invocation constraints (`max_invocations`, `only_after`, `forbidden`) and the argument gate,
//! through `execute_parallel`.

mod support;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use capability_core::PolicyFormat;
use capability_core::{
    AuditKind, CompiledPolicy, DefaultToolRegistry, ExecutionContext, MemoryAuditSink, ToolCall,
};
use capability_types::{ErrorCode, FsPaths, ToolCapabilities};
use serde_json::{Value, json};
use support::{Behaviour, TestTool, policy, recording_backends};

fn call(id: &str, tool: &str, args: Value) -> ToolCall {
    ToolCall::new(id, tool, args)
}

fn outcomes(results: &[capability_core::ToolCallResult]) -> Vec<String> {
    results
        .iter()
        .map(|r| match r.result.error_message() {
            None => "ok".to_owned(),
            Some(e) => e.to_owned(),
        })
        .collect()
}

#[tokio::test]
async fn max_invocations_counts_per_invocation_in_input_order() {
    let echo = TestTool::new("echo", ToolCapabilities::none(), Behaviour::Echo);
    let runs = Arc::clone(&echo.runs);
    let mut registry = DefaultToolRegistry::new(None);
    registry.register(echo).unwrap();
    let ctx = ExecutionContext::new(
        "s",
        policy("id = \"p\"\n[constraints.echo]\nmax_invocations = 2\n"),
        "/tmp",
    );
    let results = registry
        .execute_parallel(
            (0..4)
                .map(|i| call(&i.to_string(), "echo", json!({})))
                .collect(),
            &ctx,
        )
        .await;
    let refused = "CONSTRAINT_NOT_MET: echo may run at most 2 time(s) per invocation";
    assert_eq!(outcomes(&results), ["ok", "ok", refused, refused]);
    assert_eq!(results[2].result.code(), Some(ErrorCode::Denied));
    let again = registry.execute(call("5", "echo", json!({})), &ctx).await;
    assert_eq!(
        again.result.error_message(),
        Some(refused),
        "the count spans batches of one invocation"
    );
    let fresh = ctx.clone().new_invocation();
    assert!(
        registry
            .execute(call("6", "echo", json!({})), &fresh)
            .await
            .result
            .is_ok(),
        "a new invocation starts from zero"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 3, "refused calls never ran");
}

#[tokio::test]
async fn every_tool_is_counted_alone_whichever_was_counted_first() {
    // An invocation counts the first tool it counts without a lock, and the others in a table
    // (docs/decisions.md, "The per-call path"): each tool's count and limit are its own, asking
    // for a count changes nothing, and a limit holds for the first tool and the others alike,
    // in batches of one and of several.
    let registry = support::echo_registry(&["first", "second", "third"]);
    let ctx = ExecutionContext::new(
        "s",
        policy(
            "id = \"p\"\n[constraints.first]\nmax_invocations = 3\n\
             [constraints.second]\nmax_invocations = 2\n",
        ),
        "/tmp",
    );
    // Asking first claims nothing for the tool asked about.
    assert_eq!(ctx.invocation.dispatched("third"), 0);
    let one = |tool: &'static str| {
        let (registry, ctx) = (&registry, &ctx);
        async move { registry.execute(call("1", tool, json!({})), ctx).await }
    };
    assert!(one("first").await.result.is_ok());
    assert!(one("third").await.result.is_ok());
    let batch = registry
        .execute_parallel(
            [
                "first", "second", "first", "second", "second", "third", "first",
            ]
            .iter()
            .enumerate()
            .map(|(i, tool)| call(&i.to_string(), tool, json!({})))
            .collect(),
            &ctx,
        )
        .await;
    let limit = |tool: &str, n: u32| {
        format!("CONSTRAINT_NOT_MET: {tool} may run at most {n} time(s) per invocation")
    };
    assert_eq!(
        outcomes(&batch),
        [
            "ok".to_owned(),
            "ok".to_owned(),
            "ok".to_owned(),
            "ok".to_owned(),
            limit("second", 2),
            "ok".to_owned(),
            limit("first", 3),
        ]
    );
    assert_eq!(
        one("first").await.result.error_message(),
        Some(limit("first", 3).as_str())
    );
    assert_eq!(
        one("second").await.result.error_message(),
        Some(limit("second", 2).as_str())
    );
    // Refused calls are not counted; a tool no limit bounds is counted all the same.
    let counted: Vec<u32> = ["first", "second", "third", "never"]
        .iter()
        .map(|tool| ctx.invocation.dispatched(tool))
        .collect();
    assert_eq!(counted, [3, 2, 2, 0]);
    // An invocation whose first tool no limit bounds counts it all the same, batch or not.
    let unbounded = ctx.clone().new_invocation();
    let batch = (0..3)
        .map(|i| call(&i.to_string(), "third", json!({})))
        .collect();
    assert!(
        registry
            .execute_parallel(batch, &unbounded)
            .await
            .iter()
            .all(|r| r.result.is_ok())
    );
    assert!(
        registry
            .execute(call("4", "third", json!({})), &unbounded)
            .await
            .result
            .is_ok()
    );
    assert_eq!(unbounded.invocation.dispatched("third"), 4);
    // Another invocation counts from zero, with its own first tool.
    let fresh = ctx.clone().new_invocation();
    assert!(
        registry
            .execute(call("9", "second", json!({})), &fresh)
            .await
            .result
            .is_ok()
    );
    assert!(
        registry
            .execute(call("9", "first", json!({})), &fresh)
            .await
            .result
            .is_ok()
    );
    assert_eq!(fresh.invocation.dispatched("second"), 1);
    assert_eq!(fresh.invocation.dispatched("first"), 1);
}

#[tokio::test]
async fn only_after_needs_a_success_in_an_earlier_batch() {
    let mut registry = DefaultToolRegistry::new(None);
    registry
        .register(TestTool::new(
            "fetch",
            ToolCapabilities::none(),
            Behaviour::Echo,
        ))
        .unwrap();
    registry
        .register(TestTool::new(
            "reader",
            ToolCapabilities::none(),
            Behaviour::Echo,
        ))
        .unwrap();
    registry
        .register(TestTool::new(
            "broken",
            ToolCapabilities::none(),
            Behaviour::Panic,
        ))
        .unwrap();
    let ctx = ExecutionContext::new(
        "s",
        policy("id = \"p\"\n[constraints.fetch]\nonly_after = [\"reader\", \"broken\"]\n"),
        "/tmp",
    );
    let first = registry
        .execute_parallel(
            vec![
                call("1", "fetch", json!({})),
                call("2", "reader", json!({})),
                call("3", "broken", json!({})),
            ],
            &ctx,
        )
        .await;
    assert_eq!(
        outcomes(&first)[0],
        "CONSTRAINT_NOT_MET: fetch may run only after reader, broken completed successfully in an earlier batch of this invocation"
    );
    let second = registry.execute(call("4", "fetch", json!({})), &ctx).await;
    assert_eq!(
        second.result.error_message(),
        Some(
            "CONSTRAINT_NOT_MET: fetch may run only after broken completed successfully in an earlier batch of this invocation"
        ),
        "reader counts now; a panicked call never counts as completed"
    );
    assert!(ctx.invocation.completed("reader") && !ctx.invocation.completed("broken"));
}

#[tokio::test]
async fn each_invocation_learns_its_own_completions_whatever_others_ran_in_between() {
    // The registry remembers per tool the last invocation it completed in; invocations that
    // take turns must each still learn of their own successes, and only of those.
    let mut registry = DefaultToolRegistry::new(None);
    registry
        .register(TestTool::new(
            "reader",
            ToolCapabilities::none(),
            Behaviour::Echo,
        ))
        .unwrap();
    let first = ExecutionContext::new("s", policy("id = \"p\"\n"), "/tmp");
    let second = first.clone().new_invocation();
    let third = first.clone().new_invocation();
    assert_ne!(first.invocation.id(), second.invocation.id());
    for ctx in [&first, &second, &first, &second] {
        let results = registry
            .execute_parallel(
                vec![
                    call("1", "reader", json!({})),
                    call("2", "reader", json!({})),
                ],
                ctx,
            )
            .await;
        assert_eq!(outcomes(&results), ["ok", "ok"]);
        assert!(ctx.invocation.completed("reader"));
    }
    assert!(
        !third.invocation.completed("reader"),
        "an invocation where the tool never ran"
    );
    assert!(
        registry
            .execute(call("3", "reader", json!({})), &third)
            .await
            .result
            .is_ok()
    );
    assert!(third.invocation.completed("reader"));
}

/// A registry holding one echoing tool named `name` that declares nothing, with an audit sink:
/// the registry, the count of the tool's runs, the sink.
fn audited_echo(
    name: &'static str,
) -> (
    DefaultToolRegistry,
    Arc<std::sync::atomic::AtomicUsize>,
    Arc<MemoryAuditSink>,
) {
    let tool = TestTool::new(name, ToolCapabilities::none(), Behaviour::Echo);
    let runs = Arc::clone(&tool.runs);
    let audit = Arc::new(MemoryAuditSink::new());
    let mut registry = DefaultToolRegistry::new(None).with_audit_sink(audit.clone());
    registry.register(tool).unwrap();
    (registry, runs, audit)
}

#[tokio::test]
async fn forbidden_tools_never_run_and_are_audited_as_constraint_denials() {
    let (registry, runs, audit) = audited_echo("wipe");
    let ctx = ExecutionContext::new(
        "s",
        policy("id = \"ops\"\n[constraints.wipe]\nforbidden = true\n"),
        "/tmp",
    );
    let r = registry.execute(call("1", "wipe", json!({})), &ctx).await;
    assert_eq!(
        r.result.error_message(),
        Some("CONSTRAINT_NOT_MET: wipe is forbidden under personality ops")
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    let kinds: Vec<AuditKind> = audit.events().into_iter().map(|e| e.event).collect();
    assert_eq!(kinds, [AuditKind::ConstraintDenied]);
}

/// `reject_args`: a call whose top-level argument is a string the rule lists is refused before
/// its tool runs, in a batch of one and among others, and audited as a constraint denial; any
/// other value, a value that is not a string, or the same text deeper in the arguments is
/// not (as Ethos's `mcp.yaml` rule reads). A narrowing adds values and never takes one away.
#[tokio::test]
async fn reject_args_refuses_the_listed_values_of_an_argument_and_nothing_else() {
    let (registry, runs, audit) = audited_echo("save_issue");
    let ctx = ExecutionContext::new(
        "s",
        policy(
            "id = \"triage\"\n[constraints.save_issue]\nreject_args = { status = [\"Done\", \"Cancelled\"], \"team-id\" = [\"core\"] }\n",
        ),
        "/tmp",
    );
    let refused = |arg: &str, value: &str| {
        format!(
            "CONSTRAINT_NOT_MET: save_issue: argument {arg:?} may not be {value:?} under personality triage"
        )
    };
    let cases = [
        (json!({"status": "Done"}), refused("status", "Done")),
        (
            json!({"status": "Cancelled", "title": "x"}),
            refused("status", "Cancelled"),
        ),
        (
            json!({"title": "x", "team-id": "core"}),
            refused("team-id", "core"),
        ),
        (json!({"status": "Open"}), "ok".to_owned()),
        (json!({"status": "done"}), "ok".to_owned()),
        (json!({"status": "Done "}), "ok".to_owned()),
        (json!({"status": ["Done"]}), "ok".to_owned()),
        (json!({"update": {"status": "Done"}}), "ok".to_owned()),
        (json!({"Status": "Done"}), "ok".to_owned()),
        (json!("Done"), "ok".to_owned()),
    ];
    let calls: Vec<ToolCall> = cases
        .iter()
        .enumerate()
        .map(|(i, (args, _))| call(&i.to_string(), "save_issue", args.clone()))
        .collect();
    let expected: Vec<&str> = cases.iter().map(|(_, e)| e.as_str()).collect();
    let results = registry.execute_parallel(calls, &ctx).await;
    assert_eq!(outcomes(&results), expected);
    assert_eq!(results[0].result.code(), Some(ErrorCode::Denied));
    assert_eq!(runs.load(Ordering::SeqCst), 7, "refused calls never ran");
    let alone = registry
        .execute(call("a", "save_issue", json!({"status": "Done"})), &ctx)
        .await;
    assert_eq!(
        alone.result.error_message(),
        Some(refused("status", "Done").as_str())
    );
    assert_eq!(runs.load(Ordering::SeqCst), 7);
    let denials = audit
        .events()
        .into_iter()
        .filter(|e| e.event == AuditKind::ConstraintDenied)
        .count();
    assert_eq!(denials, 4);

    // A narrowing's rule adds to the personality's; it cannot take a value away.
    let narrowing = capability_core::Narrowing::parse(
        "[constraints.save_issue]\nreject_args = { status = [\"Open\"] }\n",
        PolicyFormat::Toml,
        None,
    )
    .unwrap();
    let narrow = ctx.narrowed(&narrowing).unwrap();
    let results = registry
        .execute_parallel(
            ["Done", "Open", "Triage"]
                .iter()
                .map(|s| call(s, "save_issue", json!({"status": s})))
                .collect(),
            &narrow,
        )
        .await;
    assert_eq!(
        outcomes(&results),
        [
            refused("status", "Done"),
            refused("status", "Open"),
            "ok".to_owned()
        ]
    );
}

#[tokio::test]
async fn the_argument_gate_checks_every_path_argument() {
    let (backends, _) = recording_backends();
    let mut registry = DefaultToolRegistry::new(Some(backends));
    let no_fs = TestTool::new("no_fs", ToolCapabilities::none(), Behaviour::Echo);
    let runs = Arc::clone(&no_fs.runs);
    registry.register(no_fs).unwrap();
    registry
        .register(TestTool::new(
            "with_fs",
            ToolCapabilities::none().with_fs_read(FsPaths::FromPersonality),
            Behaviour::Echo,
        ))
        .unwrap();
    registry
        .register(TestTool::new(
            "opted_out",
            ToolCapabilities::none(),
            Behaviour::Echo,
        ))
        .unwrap();
    let ctx = ExecutionContext::new(
        "s",
        policy(
            "id = \"p\"\n[fs_reach]\nread = [\"/srv/data\"]\ndeny = [\"/srv/data/private\"]\n[constraints.opted_out]\npath_gate = false\n",
        ),
        "/srv/data",
    );
    let cases = [
        (
            "no_fs",
            json!({"path": "/etc/passwd"}),
            "PATH_NOT_REACHABLE: read not permitted for /etc/passwd",
        ),
        (
            "no_fs",
            json!({"a": [{"b": "/srv/data/x"}]}),
            "PATH_NOT_REACHABLE: read not permitted for /srv/data/x",
        ),
        (
            "no_fs",
            json!({"u": "file:///etc/shadow"}),
            "PATH_NOT_REACHABLE: read not permitted for /etc/shadow",
        ),
        (
            "no_fs",
            json!({"u": "FILE://remote.example/share"}),
            "PATH_NOT_REACHABLE: FILE://remote.example/share is not a local file URL",
        ),
        (
            "no_fs",
            json!({"url": "https://x.example/a", "rel": "notes/a.md", "n": 5}),
            "ok",
        ),
        // `//x` is `/x` to the kernel: a protocol-relative URL is read as the path it also is
        // (a tool that takes one names it among its data arguments).
        (
            "no_fs",
            json!({"cdn": "//etc/passwd"}),
            "PATH_NOT_REACHABLE: read not permitted for /etc/passwd",
        ),
        // A member's name is read as its value is: a map from paths to what to write there.
        (
            "no_fs",
            json!({"files": {"/etc/passwd": "x"}}),
            "PATH_NOT_REACHABLE: read not permitted for /etc/passwd",
        ),
        (
            "no_fs",
            json!({"a": [{"file:///etc/shadow": 1}]}),
            "PATH_NOT_REACHABLE: read not permitted for /etc/shadow",
        ),
        ("with_fs", json!({"path": "/srv/data/reports/q3.csv"}), "ok"),
        ("with_fs", json!({"files": {"/srv/data/a.md": "x"}}), "ok"),
        (
            "with_fs",
            json!({"path": "/srv/data/../../etc/passwd"}),
            "PATH_NOT_REACHABLE: read not permitted for /etc/passwd",
        ),
        (
            "with_fs",
            json!({"paths": ["/srv/data/a", "/srv/data/private/key"]}),
            "PATH_NOT_REACHABLE: read not permitted for /srv/data/private/key",
        ),
        ("opted_out", json!({"path": "/api/v1/repos"}), "ok"),
        // Multi-byte text where a byte-7 slice would split a character must not panic.
        (
            "no_fs",
            json!({"a": "fileéé://x", "b": "ﬁle://", "c": "日本語のテキスト"}),
            "ok",
        ),
    ];
    let calls: Vec<ToolCall> = cases
        .iter()
        .enumerate()
        .map(|(i, (t, a, _))| call(&i.to_string(), t, a.clone()))
        .collect();
    let results = registry.execute_parallel(calls, &ctx).await;
    let expected: Vec<&str> = cases.iter().map(|(_, _, e)| *e).collect();
    assert_eq!(outcomes(&results), expected);
    assert_eq!(
        runs.load(Ordering::SeqCst),
        2,
        "gated calls never ran (the two ungated no_fs calls did)"
    );
}

#[test]
fn hostile_constraint_sections_are_refused() {
    let cases = [
        (
            "id = \"p\"\n[constraints.echo]\nmax_invocations = 0\n",
            "constraints.echo.max_invocations",
            "use forbidden",
        ),
        (
            "id = \"p\"\n[constraints.echo]\nonly_after = [\"echo\"]\n",
            "constraints.echo.only_after[0]",
            "another tool",
        ),
        (
            "id = \"p\"\n[constraints.\"Bad Name\"]\nforbidden = true\n",
            "constraints.Bad Name",
            "not a tool name",
        ),
        (
            "id = \"p\"\n[constraints.echo]\nmax_calls = 3\n",
            "constraints.echo.max_calls",
            "unknown field",
        ),
        (
            "id = \"p\"\n[constraints.echo]\nmax_invocations = -1\n",
            "constraints.echo.max_invocations",
            "invalid value",
        ),
        (
            "id = \"p\"\n[constraints.echo]\nreject_args = { \"\" = [\"x\"] }\n",
            "constraints.echo.reject_args",
            "empty",
        ),
        (
            "id = \"p\"\n[constraints.echo]\nreject_args = { status = \"Done\" }\n",
            "constraints.echo.reject_args.status",
            "invalid type",
        ),
        (
            "id = \"p\"\n[constraints.echo]\nreject_args = { status = [1] }\n",
            "constraints.echo.reject_args.status[0]",
            "invalid type",
        ),
        (
            "id = \"p\"\n[escalate]\nhost = [\"a.example.com\"]\n",
            "escalate.host",
            "unknown field",
        ),
        (
            "id = \"p\"\n[escalate]\nhosts = [\"*.com\"]\n",
            "escalate.hosts[0]",
            "single-label",
        ),
        (
            "id = \"p\"\n[escalate]\nwrite_paths = [\"relative\"]\n",
            "escalate.write_paths[0]",
            "not absolute",
        ),
        (
            "id = \"p\"\n[escalate]\ntools = [\"read_file\", \"Read File\"]\n",
            "escalate.tools[1]",
            "not a tool name",
        ),
        (
            "id = \"p\"\n[escalate]\ncalls = [\"rm -rf\", \" \\t\"]\n",
            "escalate.calls[1]",
            "blank",
        ),
        (
            "id = \"p\"\n[escalate]\ncalls = [\"\"]\n",
            "escalate.calls[0]",
            "blank",
        ),
        (
            "id = \"p\"\n[escalate]\ncalls = [1]\n",
            "escalate.calls[0]",
            "invalid type",
        ),
        (
            "id = \"p\"\n[escalate]\ntools = \"write_file\"\n",
            "escalate.tools",
            "invalid type",
        ),
        (
            "id = \"p\"\n[escalate]\ntimeout_seconds = 0\n",
            "escalate.timeout_seconds",
            "at least 1",
        ),
    ];
    for (toml, field, needle) in cases {
        let err = CompiledPolicy::load(toml, PolicyFormat::Toml, None).unwrap_err();
        assert_eq!(err.field(), Some(field), "{toml}: {err}");
        assert!(err.to_string().contains(needle), "{toml}: {err}");
    }
}

// guarantee: G-REG-18
/// `[refuse] calls`: a call whose text (the tool's name and its arguments as JSON, keys sorted)
/// holds a rule is refused before anything runs, whoever would approve it, and the dry run
/// says the same; a call that holds none runs; a blank rule refuses the policy.
#[tokio::test]
async fn a_call_whose_text_holds_a_refuse_rule_never_runs_and_nobody_is_asked() {
    use capability_core::{Admission, ApprovalHandler, ApprovalRequest};
    #[derive(Debug)]
    struct Yes(Arc<std::sync::atomic::AtomicUsize>);
    #[async_trait::async_trait]
    impl ApprovalHandler for Yes {
        async fn approve(&self, _: &ApprovalRequest) -> Result<bool, String> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok(true)
        }
    }
    let echo = TestTool::new("echo", ToolCapabilities::none(), Behaviour::Echo);
    let runs = Arc::clone(&echo.runs);
    let asked = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut registry =
        DefaultToolRegistry::new(None).with_approval_handler(Arc::new(Yes(Arc::clone(&asked))));
    registry.register(echo).unwrap();
    let ctx = ExecutionContext::new(
        "s",
        policy(
            "id = \"p\"\n[refuse]\ncalls = [\"rm -rf\", \"echo {\\\"a\\\":1,\\\"b\\\"\"]\n\
             [escalate]\ncalls = [\"rm -rf\"]\n",
        ),
        "/tmp",
    );
    let results = registry
        .execute_parallel(
            vec![
                call("1", "echo", json!({"cmd": "rm -rf /"})),
                call("2", "echo", json!({"cmd": "ls"})),
                // Keys sorted: `{"b":2,"a":1}` reads as `{"a":1,"b":2}`.
                call("3", "echo", json!({"b": 2, "a": 1})),
            ],
            &ctx,
        )
        .await;
    assert_eq!(
        outcomes(&results),
        [
            "CONSTRAINT_NOT_MET: echo is refused under personality p: the call holds rm -rf (refuse.calls)",
            "ok",
            "CONSTRAINT_NOT_MET: echo is refused under personality p: the call holds echo {\"a\":1,\"b\" (refuse.calls)",
        ]
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1, "refused calls never ran");
    assert_eq!(asked.load(Ordering::SeqCst), 0, "nobody was asked");
    let dry = registry.admission(&call("4", "echo", json!({"cmd": "rm -rf ~"})), &ctx);
    assert!(
        matches!(&dry, Admission::Refused { message, .. } if message.contains("refuse.calls")),
        "{dry:?}"
    );
    let blank = capability_core::CompiledPolicy::load(
        "id = \"p\"\n[refuse]\ncalls = [\"x\", \"  \"]\n",
        PolicyFormat::Toml,
        None,
    )
    .unwrap_err();
    assert_eq!(blank.field(), Some("refuse.calls[1]"), "{blank}");
}
