//! Crash safety of the embedded store: a child process writes 10,000 keys, acknowledging each
//! after `set` returns; it is killed with SIGKILL at a random point; every acknowledged key must
//! be there after reopening, and no entry may be corrupt.
#![allow(
    clippy::disallowed_methods,
    clippy::print_stderr,
    reason = "the test re-executes itself as the writing child and reports where it was killed"
)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

use capability_kv::{EmbeddedStore, KvBackend, KvLimits};
use capability_types::{KvStoreFactory, StorageGrant, StorageScope};
use serde_json::json;

const CHILD_ENV: &str = "TOOLCAP_KV_CRASH_CHILD_STORE";

/// The child: does nothing unless started by the parent test with the store path.
#[tokio::test]
async fn crash_child() {
    let Ok(path) = std::env::var(CHILD_ENV) else {
        return;
    };
    let backend = KvBackend::new(EmbeddedStore::open(&path).unwrap(), KvLimits::default());
    let kv = backend
        .kv_store(StorageGrant::new(
            "t",
            StorageScope::Session,
            "session:crash",
            None,
        ))
        .unwrap();
    let mut out = std::io::stdout().lock();
    for i in 0..10_000u32 {
        kv.set(
            &format!("key-{i:05}"),
            json!({"i": i, "pad": "x".repeat(64)}),
            None,
        )
        .await
        .unwrap();
        writeln!(out, "ack {i}").unwrap();
        out.flush().unwrap();
    }
}

#[tokio::test]
async fn acknowledged_writes_survive_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crash.redb");
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let kill_after = 200 + (nanos % 1_500); // a different point each run
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "crash_child",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_ENV, &path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut acked: Option<u32> = None;
    let mut lines = BufReader::new(stdout).lines();
    while let Some(Ok(line)) = lines.next() {
        if let Some(i) = line.strip_prefix("ack ").and_then(|n| n.parse().ok()) {
            acked = Some(i);
            if i + 1 >= kill_after {
                child.kill().unwrap(); // SIGKILL
                break;
            }
        }
    }
    // Acknowledgements the child printed before it died still count.
    for line in lines.map_while(Result::ok) {
        if let Some(i) = line.strip_prefix("ack ").and_then(|n| n.parse().ok()) {
            acked = Some(i);
        }
    }
    let status = child.wait().unwrap();
    assert!(
        !status.success(),
        "the child was killed, not finished: {status:?}"
    );
    let acked = acked.expect("the child acknowledged some writes before it was killed");
    eprintln!(
        "killed after {} acknowledged writes (aimed at {kill_after})",
        acked + 1
    );

    let store = EmbeddedStore::open(&path).unwrap();
    let entries = store.scan_all().unwrap();
    assert!(
        entries.iter().all(|(_, _, ok)| *ok),
        "a corrupt entry after the crash"
    );
    let backend = KvBackend::new(store, KvLimits::default());
    let kv = backend
        .kv_store(StorageGrant::new(
            "t",
            StorageScope::Session,
            "session:crash",
            None,
        ))
        .unwrap();
    for i in 0..=acked {
        let value = kv.get(&format!("key-{i:05}")).await.unwrap();
        assert_eq!(
            value.as_ref().and_then(|v| v["i"].as_u64()),
            Some(u64::from(i)),
            "acknowledged key {i} of {acked} is missing"
        );
    }
    assert!(entries.len() as u32 > acked);
}
