//! Attachments, the sixth category (docs/semantics.md, "Attachments"): a call's tool sees the
//! attachments handed to that call whose kind its declaration and the personality both allow,
//! by id, with bounded reads; the next call sees only its own; every handing is audited.

mod support;

use std::sync::Arc;

use capability_core::{
    Attachment, AuditKind, CompiledPolicy, DefaultToolRegistry, ExecutionContext, MemoryAuditSink,
    PolicyFormat, ToolCall, build_manifest, diff, validate_declaration,
};
use capability_types::{
    AttachmentsCapability, CapabilityError, ErrorCode, MAX_ATTACHMENT_READ, Tool, ToolCapabilities,
    ToolContext, ToolResult, async_trait,
};
use serde_json::{Value, json};

/// Lists what it was handed, reads one attachment's range if asked.
struct Viewer(ToolCapabilities);

#[async_trait]
impl Tool for Viewer {
    fn name(&self) -> &str {
        "viewer"
    }
    fn description(&self) -> &str {
        "Looks at attachments"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn capabilities(&self) -> ToolCapabilities {
        self.0.clone()
    }
    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<Value, CapabilityError> {
        let attachments = ctx.attachments()?;
        if let Some(id) = args["read"].as_str() {
            let offset = args["offset"].as_u64().unwrap_or(0);
            let len = usize::try_from(args["len"].as_u64().unwrap_or(16)).unwrap();
            let bytes = attachments.read(id, offset, len).await?;
            return Ok(json!(String::from_utf8_lossy(&bytes)));
        }
        let listed = attachments.list().await?;
        Ok(json!(
            listed
                .iter()
                .map(|a| format!("{}:{}:{}:{}", a.id, a.kind, a.name, a.size))
                .collect::<Vec<_>>()
        ))
    }
}

const PERSONALITY: &str = "id = \"p\"\n[attachments]\nkinds = [\"image/*\", \"application/pdf\"]\n";

fn images() -> ToolCapabilities {
    ToolCapabilities::none().with_attachments(AttachmentsCapability::kinds(["image"]).unwrap())
}

fn given() -> Vec<Arc<Attachment>> {
    vec![
        Arc::new(
            Attachment::new(
                "cat",
                "image/png",
                "/home/ada/Pictures/cat.png",
                "PNG-bytes-of-a-cat",
            )
            .unwrap(),
        ),
        Arc::new(Attachment::new("doc", "application/pdf", "report.pdf", "%PDF-1.7").unwrap()),
        Arc::new(Attachment::new("txt", "text/plain", "notes.txt", "hello").unwrap()),
    ]
}

fn registry(caps: ToolCapabilities) -> (DefaultToolRegistry, Arc<MemoryAuditSink>) {
    let sink = Arc::new(MemoryAuditSink::new());
    let mut registry = DefaultToolRegistry::new(None).with_audit_sink(sink.clone());
    registry.register(Viewer(caps)).unwrap();
    (registry, sink)
}

fn policy(text: &str) -> Arc<CompiledPolicy> {
    Arc::new(CompiledPolicy::load(text, PolicyFormat::Toml, None).unwrap())
}

// guarantee: G-ATT-01
#[tokio::test]
async fn a_call_sees_its_own_allowed_attachments_by_id_only() {
    let (registry, sink) = registry(images());
    let ctx = ExecutionContext::new("s", policy(PERSONALITY), "/tmp");
    let call = ToolCall::new("1", "viewer", json!({})).with_attachments(given());
    let r = registry.execute(call, &ctx).await;
    // Declared image ∩ personality image/* + pdf: the cat only; the name without its path.
    assert_eq!(
        r.result,
        ToolResult::Ok(json!(["cat:image/png:cat.png:18"]))
    );
    // The next call was handed nothing, so it sees nothing.
    let r = registry
        .execute(ToolCall::new("2", "viewer", json!({})), &ctx)
        .await;
    assert_eq!(r.result, ToolResult::Ok(json!([])));
    // Reads: a range; a filtered kind and an unknown id are both "not found"; a read above the
    // bound is invalid input.
    let read = |args: Value| {
        let call = ToolCall::new("r", "viewer", args).with_attachments(given());
        let registry = &registry;
        let ctx = &ctx;
        async move { registry.execute(call, ctx).await.result }
    };
    assert_eq!(
        read(json!({"read": "cat", "offset": 4, "len": 5})).await,
        ToolResult::Ok(json!("bytes"))
    );
    assert_eq!(
        read(json!({"read": "cat", "offset": 100})).await,
        ToolResult::Ok(json!(""))
    );
    for hidden in ["doc", "txt", "nope"] {
        match read(json!({"read": hidden})).await {
            ToolResult::Err { code, .. } => assert_eq!(code, ErrorCode::NotFound, "{hidden}"),
            other => panic!("{hidden}: {other:?}"),
        }
    }
    match read(json!({"read": "cat", "len": MAX_ATTACHMENT_READ + 1})).await {
        ToolResult::Err { code, .. } => assert_eq!(code, ErrorCode::InputInvalid),
        other => panic!("{other:?}"),
    }
    // Audit names the ids handed to the call, and only those.
    let called: Vec<Option<Vec<String>>> = sink
        .events()
        .into_iter()
        .filter(|e| e.event == AuditKind::ToolCalled)
        .map(|e| e.attachments)
        .collect();
    assert_eq!(called[0], Some(vec!["cat".to_owned()]));
    assert_eq!(called[1], Some(vec![]));
}

// guarantee: G-ATT-01
#[tokio::test]
async fn no_declaration_or_no_personality_bound_means_no_attachments() {
    // A tool that declares nothing gets no attachments object at all.
    let (undeclared, _) = registry(ToolCapabilities::none());
    let ctx = ExecutionContext::new("s", policy(PERSONALITY), "/tmp");
    let r = undeclared
        .execute(
            ToolCall::new("1", "viewer", json!({})).with_attachments(given()),
            &ctx,
        )
        .await;
    match r.result {
        ToolResult::Err { code, error } => {
            assert_eq!(code, ErrorCode::NotAvailable);
            assert!(error.contains("attachments"), "{error}");
        }
        other => panic!("{other:?}"),
    }
    // A personality without [attachments] allows none, whatever the tool declares.
    let any = ToolCapabilities::none().with_attachments(AttachmentsCapability::any());
    let (declared, _) = registry(any.clone());
    let bare = ExecutionContext::new("s", policy("id = \"p\"\n"), "/tmp");
    let r = declared
        .execute(
            ToolCall::new("1", "viewer", json!({})).with_attachments(given()),
            &bare,
        )
        .await;
    assert_eq!(r.result, ToolResult::Ok(json!([])));
    // Validation reports what the personality will not grant.
    let found = validate_declaration("viewer", &any, &policy(PERSONALITY));
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].capability, "attachments");
}

#[test]
fn hostile_attachments_and_kinds_are_refused() {
    for (id, kind) in [
        ("", "image/png"),
        ("../x", "image/png"),
        ("a/b", "image/png"),
        (".", "image/png"),
        ("ok", "image"),
        ("ok", "image/*"),
        ("ok", "image/png png"),
        ("ok", "/png"),
    ] {
        assert!(Attachment::new(id, kind, "x", "").is_err(), "{id} {kind}");
    }
    let a = Attachment::new("ok", "IMAGE/PNG", "..\\..\\evil\u{7}.png", "").unwrap();
    assert_eq!(a.info().kind, "image/png");
    assert_eq!(a.info().name, "evil.png");
    for text in [
        r#"{"attachments":{"kinds":["image/"]}}"#,
        r#"{"attachments":{"kinds":"all"}}"#,
        r#"{"attachments":{"kind":["image"]}}"#,
        r#"{"attachments":{"kinds":["image"],"kinds":["*"]}}"#,
        r#"{"attachments":"images"}"#,
        r#"{"attachments":{}}"#,
        r#"{"attachments":["*"]}"#,
    ] {
        assert!(
            serde_json::from_str::<ToolCapabilities>(text).is_err(),
            "{text}"
        );
    }
    assert!(
        CompiledPolicy::load(
            "id = \"p\"\n[attachments]\nkinds = [\"png\"]\n",
            PolicyFormat::Toml,
            None
        )
        .is_err()
    );
    assert!(
        CompiledPolicy::load(
            "id = \"p\"\n[attachments]\nkind = [\"*\"]\n",
            PolicyFormat::Toml,
            None
        )
        .is_err()
    );
}

// guarantee: G-ATT-01
#[test]
fn the_manifest_shows_and_diff_reports_attachment_kinds() {
    let p = policy(PERSONALITY);
    let before = images();
    let after = ToolCapabilities::none().with_attachments(
        AttachmentsCapability::kinds(["image", "application/pdf", "text/plain"]).unwrap(),
    );
    let old = build_manifest([("viewer", &before)], Some(&p));
    let new = build_manifest([("viewer", &after)], Some(&p));
    assert_eq!(
        old.tools["viewer"].effective.as_ref().unwrap().attachments,
        Some(vec!["image".to_owned()])
    );
    assert_eq!(
        new.tools["viewer"].effective.as_ref().unwrap().attachments,
        Some(vec!["image".to_owned(), "application/pdf".to_owned()])
    );
    let widenings: Vec<String> = diff(&old, &new).iter().map(ToString::to_string).collect();
    assert!(
        widenings.iter().any(|w| w.contains("attachments.widened")
            && w.contains("declaration")
            && w.contains("text/plain")),
        "{widenings:?}"
    );
    assert!(
        widenings.iter().any(|w| w.contains("attachments.widened")
            && w.contains("effective")
            && w.contains("application/pdf")),
        "{widenings:?}"
    );
    assert!(diff(&new, &old).is_empty(), "narrowing is not reported");
    // The declaration round-trips in Ethos's form inside the manifest.
    let text = new.to_pretty_json();
    assert!(text.contains(r#""kinds": ["#), "{text}");
}

/// A tool that takes any kind the policy lets through.
fn anything() -> ToolCapabilities {
    ToolCapabilities::none().with_attachments(AttachmentsCapability::any())
}

// guarantee: G-ATT-01
#[tokio::test]
async fn a_narrowing_can_only_take_attachment_kinds_away() {
    let (registry, _) = registry(anything());
    let wide =
        "id = \"p\"\n[attachments]\nkinds = [\"image\", \"application/pdf\", \"text/plain\"]\n";
    let ctx = ExecutionContext::new("s", policy(wide), "/tmp");
    let seen = |ctx: ExecutionContext| {
        let registry = &registry;
        async move {
            let call = ToolCall::new("1", "viewer", json!({})).with_attachments(given());
            match registry.execute(call, &ctx).await.result {
                ToolResult::Ok(value) => value,
                other => panic!("{other:?}"),
            }
        }
    };
    let narrowed = |text: &str| {
        ctx.narrowed(&capability_core::Narrowing::parse(text, PolicyFormat::Toml, None).unwrap())
            .unwrap()
    };
    let all = json!([
        "cat:image/png:cat.png:18",
        "doc:application/pdf:report.pdf:8",
        "txt:text/plain:notes.txt:5"
    ]);
    assert_eq!(seen(ctx.clone()).await, all, "the personality's kinds");
    assert_eq!(
        seen(narrowed("toolset = [\"viewer\"]\n")).await,
        all,
        "no [attachments] in the narrowing: the personality's"
    );
    // `application/*` is narrowed to the personality's pdf; `text` to its text/plain; `video`
    // adds nothing; `image/jpeg` takes the png away.
    assert_eq!(
        seen(narrowed(
            "[attachments]\nkinds = [\"image/jpeg\", \"application/*\", \"video\"]\n"
        ))
        .await,
        json!(["doc:application/pdf:report.pdf:8"])
    );
    assert_eq!(
        seen(narrowed("[attachments]\nkinds = [\"*\"]\n")).await,
        all,
        "`*` in a narrowing adds nothing to the personality's"
    );
    assert_eq!(
        seen(narrowed("[attachments]\nkinds = []\n")).await,
        json!([]),
        "an empty list: none"
    );
    // A narrowing of a personality without [attachments] still gets none.
    let none = ExecutionContext::new("s", policy("id = \"p\"\n"), "/tmp");
    let narrowed_none = none
        .narrowed(
            &capability_core::Narrowing::parse(
                "[attachments]\nkinds = [\"*\"]\n",
                PolicyFormat::Toml,
                None,
            )
            .unwrap(),
        )
        .unwrap();
    assert_eq!(seen(narrowed_none).await, json!([]));
    // A kind that is not a pattern is refused by name.
    let err = capability_core::Narrowing::parse(
        "[attachments]\nkinds = [\"images\"]\n",
        PolicyFormat::Toml,
        None,
    )
    .unwrap_err();
    assert!(err.to_string().contains("attachments.kinds[0]"), "{err}");
}

// guarantee: G-ATT-01
#[test]
fn a_narrowed_kind_list_matches_exactly_the_kinds_both_lists_match() {
    // Every pair of small lists over the patterns' shapes, against kinds of every class.
    let patterns = [
        "*",
        "file",
        "image",
        "image/*",
        "image/png",
        "text",
        "text/plain",
        "application/*",
        "application/pdf",
        "video",
    ];
    let kinds = [
        "image/png",
        "image/jpeg",
        "text/plain",
        "text/html",
        "application/pdf",
        "application/zip",
        "video/mp4",
        "audio/ogg",
    ];
    let lists: Vec<Vec<&str>> = (0..patterns.len())
        .flat_map(|a| (a..patterns.len()).map(move |b| vec![patterns[a], patterns[b]]))
        .chain(patterns.iter().map(|p| vec![*p]))
        .chain([vec![]])
        .collect();
    let toml_list = |l: &[&str]| {
        l.iter()
            .map(|k| format!("{k:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let matches =
        |list: &[String], kind: &str| list.iter().any(|p| capability_types::kind_matches(p, kind));
    for mine in &lists {
        let base = CompiledPolicy::load(
            &format!("id = \"p\"\n[attachments]\nkinds = [{}]\n", toml_list(mine)),
            PolicyFormat::Toml,
            None,
        )
        .unwrap();
        for theirs in &lists {
            let narrowing = capability_core::Narrowing::parse(
                &format!("[attachments]\nkinds = [{}]\n", toml_list(theirs)),
                PolicyFormat::Toml,
                None,
            )
            .unwrap();
            let narrowed = base.narrow(&narrowing).unwrap();
            let mine: Vec<String> = mine.iter().map(|s| s.to_string()).collect();
            let theirs: Vec<String> = theirs.iter().map(|s| s.to_string()).collect();
            for kind in kinds {
                assert_eq!(
                    matches(narrowed.attachment_kinds(), kind),
                    matches(&mine, kind) && matches(&theirs, kind),
                    "{mine:?} narrowed by {theirs:?} gave {:?}, for {kind}",
                    narrowed.attachment_kinds()
                );
            }
        }
    }
}
