//! The test kit (`capability_tools::testing`, docs/testing.md) used as a plugin author uses it:
//! every scoped object from a reach description, a registry in one line, a loopback HTTP
//! server reached under a real-looking name, and "not found" told from "not allowed".
#![allow(
    clippy::disallowed_methods,
    reason = "tests build fixture files and a loopback server"
)]

use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use capability_tools::testing::TestReach;
use capability_types::{
    CapabilityError, DenialCode, ErrorCode, SpawnOptions, Tool, ToolCapabilities, ToolContext,
    ToolResult, async_trait,
};
use serde_json::{Value, json};

/// A hyper server on loopback answering `hello` to everything, counting connections.
async fn hello_server() -> (u16, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&hits);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let service = hyper::service::service_fn(|_req| async {
                    Ok::<_, std::convert::Infallible>(http::Response::new(
                        http_body_util::Full::new(Bytes::from_static(b"hello")),
                    ))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (port, hits)
}

fn denial<T: std::fmt::Debug>(r: Result<T, CapabilityError>) -> DenialCode {
    match r {
        Err(e) => e
            .denial_code()
            .unwrap_or_else(|| panic!("not a denial: {e}")),
        Ok(v) => panic!("expected a refusal, got {v:?}"),
    }
}

// guarantee: G-TEST-01
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_scoped_object_from_a_reach_description() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join("out")).unwrap();
    std::fs::create_dir_all(root.join("private")).unwrap();
    std::fs::write(root.join("a.md"), "alpha").unwrap();
    std::fs::write(root.join("private/key"), "k").unwrap();
    let (port, hits) = hello_server().await;
    let reach = TestReach::new()
        .read(&root)
        .write(root.join("out"))
        .deny(root.join("private"))
        .host("api.example.test")
        .host("*.wild.test")
        .resolve("api.example.test", IpAddr::V4(Ipv4Addr::LOCALHOST))
        .resolve("svc.wild.test", IpAddr::V4(Ipv4Addr::LOCALHOST))
        .binary("echo")
        .secret("api/key", "s3cret");

    // Files: in reach, out of reach, denied, missing.
    let fs = reach.fs().unwrap();
    assert_eq!(fs.read(Path::new("a.md")).await.unwrap(), "alpha");
    assert_eq!(fs.write(&root.join("out/b.md"), b"beta").await.unwrap(), 4);
    assert_eq!(
        denial(fs.read(Path::new("/etc/hostname")).await),
        DenialCode::PathNotReachable
    );
    assert_eq!(
        denial(fs.read(&root.join("private/key")).await),
        DenialCode::PathNotReachable
    );
    assert_eq!(
        denial(fs.write(&root.join("a.md"), b"x").await),
        DenialCode::PathNotReachable
    );
    let missing = fs.read(Path::new("nope.md")).await.unwrap_err();
    assert!(missing.is_not_found(), "{missing}");
    assert_eq!(missing.result_code(), ErrorCode::NotFound);
    let outside_missing = fs.read(Path::new("/nonexistent/x")).await.unwrap_err();
    assert!(
        !outside_missing.is_not_found(),
        "outside the reach a missing file is refused, so nothing is learnt about it"
    );

    // HTTP through the resolver hook: an explicitly named host reaches the loopback server;
    // the private-address rule holds for a wildcard-matched name.
    let fetch = reach.fetch().unwrap();
    let url = |host: &str| format!("http://{host}:{port}/");
    let response = fetch
        .fetch(
            http::Request::get(url("api.example.test"))
                .body(Bytes::new())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(response.body().as_ref(), b"hello");
    assert_eq!(
        denial(
            fetch
                .fetch(
                    http::Request::get(url("svc.wild.test"))
                        .body(Bytes::new())
                        .unwrap()
                )
                .await
        ),
        DenialCode::HostNotAllowed
    );
    assert_eq!(
        denial(
            fetch
                .fetch(
                    http::Request::get(url("other.test"))
                        .body(Bytes::new())
                        .unwrap()
                )
                .await
        ),
        DenialCode::HostNotAllowed
    );
    assert_eq!(
        hits.load(Ordering::SeqCst),
        1,
        "only the allowed request connected"
    );

    // Secrets, storage, processes.
    let secrets = reach.secrets().unwrap();
    assert_eq!(
        secrecy::ExposeSecret::expose_secret(&secrets.resolve("api/key").await.unwrap()),
        "s3cret"
    );
    assert_eq!(
        denial(secrets.resolve("other").await),
        DenialCode::SecretNotDeclared
    );
    let kv = reach.kv().unwrap();
    kv.set("k", json!(1), None).await.unwrap();
    assert_eq!(kv.get("k").await.unwrap(), Some(json!(1)));
    let process = reach.process().unwrap();
    let out = process
        .spawn("echo", &["hi".to_owned()], SpawnOptions::default())
        .await;
    let out = out.unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "hi");
    assert_eq!(
        denial(process.spawn("cat", &[], SpawnOptions::default()).await),
        DenialCode::BinaryNotAllowed
    );
}

/// A plugin tool: counts the words of a file it reads through its ScopedFs.
struct Words;

#[async_trait]
impl Tool for Words {
    fn name(&self) -> &str {
        "words"
    }
    fn description(&self) -> &str {
        "Counts words"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn capabilities(&self) -> ToolCapabilities {
        ToolCapabilities::none().with_fs_read(capability_types::FsPaths::FromPersonality)
    }
    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<Value, CapabilityError> {
        let path = args["path"].as_str().unwrap_or_default();
        match ctx.fs()?.read(Path::new(path)).await {
            Ok(text) => Ok(json!(text.split_whitespace().count())),
            // The tool tells "missing" from "refused" without reading strings.
            Err(e) if e.is_not_found() => Ok(json!({"missing": path})),
            Err(e) => Err(e),
        }
    }
}

// guarantee: G-TEST-01
#[tokio::test]
async fn a_registry_in_one_line_and_a_context_for_a_direct_call() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(root.join("a.md"), "one two three").unwrap();
    let reach = TestReach::new().read(&root);
    let registry = reach.registry([Arc::new(Words) as Arc<dyn Tool>]).unwrap();
    assert_eq!(
        registry.call("words", json!({"path": "a.md"})).await,
        ToolResult::Ok(json!(3))
    );
    assert_eq!(
        registry.call("words", json!({"path": "b.md"})).await,
        ToolResult::Ok(json!({"missing": "b.md"}))
    );
    match registry
        .call("words", json!({"path": "/etc/hostname"}))
        .await
    {
        ToolResult::Err { code, error } => {
            assert_eq!(code, ErrorCode::Denied);
            assert!(error.starts_with("PATH_NOT_REACHABLE"), "{error}");
        }
        other => panic!("{other:?}"),
    }
    assert!(!registry.audit.events().is_empty(), "calls are audited");

    let ctx = reach.context_for(&Words).unwrap();
    assert_eq!(
        Words.execute(json!({"path": "a.md"}), &ctx).await.unwrap(),
        json!(3)
    );

    // A reach that is not a valid policy says so.
    let bad = TestReach::new().read("relative/path");
    let Err(err) = bad.fs() else {
        panic!("a relative path is not a valid reach")
    };
    let err = err.to_string();
    assert!(err.contains("test reach"), "{err}");
}
