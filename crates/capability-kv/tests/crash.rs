//! Crash safety of the embedded store: a child process writes keys, acknowledging each after
//! `set` returns; it is killed with SIGKILL at a random point; every acknowledged key must be
//! there after reopening, and no entry may be corrupt. Repeated on one store file: 12 rounds in
//! `cargo test`, `TOOLCAP_CRASH_ROUNDS` (100 in `cargo xtask soak`) otherwise.
#![allow(
    clippy::disallowed_methods,
    clippy::print_stderr,
    reason = "the test re-executes itself as the writing child and reports where it was killed"
)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

use capability_kv::{EmbeddedStore, KvBackend, KvLimits};
use capability_types::StorageScope;
use capability_types::backend::{KvStoreFactory, StorageGrant};
use serde_json::json;

const CHILD_ENV: &str = "TOOLCAP_KV_CRASH_CHILD_STORE";
const ROUND_ENV: &str = "TOOLCAP_KV_CRASH_CHILD_ROUND";

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
    let round: u32 = std::env::var(ROUND_ENV)
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(0);
    let mut out = std::io::stdout().lock();
    for i in 0..10_000u32 {
        kv.set(
            &format!("r{round:03}-key-{i:05}"),
            json!({"i": i, "pad": "x".repeat(64)}),
            None,
        )
        .await
        .unwrap();
        writeln!(out, "ack {i}").unwrap();
        out.flush().unwrap();
    }
}

/// One round: a child writes on `path` until it is killed after about `kill_after` acknowledged
/// writes; returns the last acknowledged index.
fn kill_round(path: &std::path::Path, round: u32, kill_after: u32) -> u32 {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "crash_child",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_ENV, path)
        .env(ROUND_ENV, round.to_string())
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
        "round {round}: the child was killed, not finished: {status:?}"
    );
    acked.expect("the child acknowledged some writes before it was killed")
}

// guarantee: G-KV-02
#[tokio::test]
async fn acknowledged_writes_survive_sigkill() {
    let rounds: u32 = std::env::var("TOOLCAP_CRASH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(12);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crash.redb");
    let mut acknowledged: Vec<u32> = Vec::new();
    for round in 0..rounds {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        // A different point each round: from the first writes to a few hundred in.
        let kill_after = 1 + (nanos.wrapping_mul(2_654_435_761) % 400);
        let acked = kill_round(&path, round, kill_after);
        acknowledged.push(acked);

        let store = EmbeddedStore::open(&path).unwrap();
        let entries = store.scan_all().unwrap();
        assert!(
            entries.iter().all(|(_, _, ok)| *ok),
            "round {round}: a corrupt entry after the crash"
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
        // Every acknowledged write of every round so far, whole.
        for (r, last) in acknowledged.iter().enumerate() {
            for i in 0..=*last {
                let value = kv.get(&format!("r{r:03}-key-{i:05}")).await.unwrap();
                assert_eq!(
                    value.as_ref().and_then(|v| v["i"].as_u64()),
                    Some(u64::from(i)),
                    "round {round}: acknowledged key {i} of round {r} is missing"
                );
            }
        }
        drop(kv);
        drop(backend);
    }
    eprintln!("{rounds} kills; acknowledged writes per round: {acknowledged:?}; every one present");
}
