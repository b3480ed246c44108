//! One conformance suite, run against the memory, embedded and Redis stores: every store must
#![allow(
    clippy::disallowed_methods,
    reason = "finding a free port for an unreachable Redis"
)]
//! behave identically.

mod support;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use capability_kv::{EmbeddedStore, KvBackend, KvLimits, MemoryStore, RawStore, RedisStore};
use capability_types::backend::{KvStoreFactory, StorageGrant};
use capability_types::{CapabilityError, KeyValueStore, StorageScope};
use serde_json::{Value, json};

fn scoped(backend: &KvBackend, namespace: &str, ttl: Option<Duration>) -> Arc<dyn KeyValueStore> {
    backend
        .kv_store(StorageGrant::new(
            "t",
            StorageScope::Session,
            namespace,
            ttl,
        ))
        .unwrap()
}

/// Keys that must never escape their namespace, reach another one, or act as patterns.
const HOSTILE: &[&str] = &[
    ":", "a:b", "1:x:", "..", "../x", "*", "?", "[", "]", "[a-z]", "%", "_", "\0", "a\0b", "\\",
    "*:*", "^", "-",
];

async fn conformance<S: RawStore + 'static>(store: Arc<S>, label: &str) {
    let backend = KvBackend::new(Arc::clone(&store), KvLimits::default().max_value(64));
    let a = scoped(&backend, "session:a", None);
    let ab = scoped(&backend, "session:ab", None);

    // issue 13, class 9: a value planted around the scoped view (another client of the same
    // store) larger than the limit is refused on read too, not read and passed on whole.
    let planted = format!("[{}1]", "1,".repeat(4096)).into_bytes();
    store
        .set("session:a", "planted", planted, None)
        .await
        .unwrap();
    let err = a.get("planted").await.unwrap_err();
    assert!(
        err.to_string().contains("read limit of 64 bytes"),
        "{label}: {err}"
    );
    let fits = b"[1,2]".to_vec();
    store.set("session:a", "fits", fits, None).await.unwrap();
    assert_eq!(a.get("fits").await.unwrap(), Some(json!([1, 2])), "{label}");
    a.delete("planted").await.unwrap();
    a.delete("fits").await.unwrap();

    // Round trips of JSON values.
    for (i, v) in [
        json!({"n": 1, "list": [1, "x"]}),
        json!("text"),
        json!(3.5),
        json!(null),
        json!(true),
    ]
    .into_iter()
    .enumerate()
    {
        a.set(&format!("value{i}"), v.clone(), None).await.unwrap();
        assert_eq!(
            a.get(&format!("value{i}")).await.unwrap(),
            Some(v),
            "{label}"
        );
    }

    // Namespace isolation with hostile keys.
    for key in HOSTILE {
        a.set(key, json!(format!("a:{key}")), None).await.unwrap();
    }
    ab.set("x", json!("ab"), None).await.unwrap();
    a.set("bx", json!("a-bx"), None).await.unwrap();
    for key in HOSTILE {
        assert_eq!(
            a.get(key).await.unwrap(),
            Some(json!(format!("a:{key}"))),
            "{label}: {key:?}"
        );
        assert_eq!(
            ab.get(key).await.unwrap(),
            None,
            "{label}: {key:?} leaked into another namespace"
        );
    }
    assert_eq!(
        ab.list("").await.unwrap(),
        ["x"],
        "{label}: list('ab') sees only its own keys"
    );
    assert_eq!(a.get("x").await.unwrap(), None, "{label}");
    assert_eq!(ab.get("bx").await.unwrap(), None, "{label}");
    // Prefixes are literal, never patterns.
    assert_eq!(a.list("*").await.unwrap(), ["*", "*:*"], "{label}");
    assert_eq!(a.list("[").await.unwrap(), ["[", "[a-z]"], "{label}");
    assert_eq!(a.list("%").await.unwrap(), ["%"], "{label}");
    assert_eq!(a.list("_").await.unwrap(), ["_"], "{label}");
    assert_eq!(a.list("?").await.unwrap(), ["?"], "{label}");
    assert_eq!(a.list("\0").await.unwrap(), ["\0"], "{label}");
    assert_eq!(a.list("..").await.unwrap(), ["..", "../x"], "{label}");

    // Exact case, sorted.
    let c = scoped(&backend, "personality:case", None);
    for k in ["b", "a", "B", "ab", "A1"] {
        c.set(k, json!(k), None).await.unwrap();
    }
    assert_eq!(
        c.list("").await.unwrap(),
        ["A1", "B", "a", "ab", "b"],
        "{label}"
    );
    assert_eq!(c.list("a").await.unwrap(), ["a", "ab"], "{label}");
    assert!(c.list("AB").await.unwrap().is_empty(), "{label}");

    // Delete.
    assert!(c.delete("a").await.unwrap(), "{label}");
    assert!(!c.delete("a").await.unwrap(), "{label}");
    assert_eq!(c.get("a").await.unwrap(), None, "{label}");

    // TTLs: explicit, default, zero.
    let t = scoped(&backend, "tool:ttl", Some(Duration::from_millis(300)));
    t.set("short", json!(1), Some(Duration::from_millis(150)))
        .await
        .unwrap();
    t.set("default", json!(2), None).await.unwrap();
    t.set("long", json!(3), Some(Duration::from_secs(600)))
        .await
        .unwrap();
    assert_eq!(
        t.list("").await.unwrap(),
        ["default", "long", "short"],
        "{label}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        t.get("short").await.unwrap(),
        None,
        "{label}: expired by its own TTL"
    );
    assert_eq!(
        t.get("default").await.unwrap(),
        None,
        "{label}: expired by ttlSecondsDefault"
    );
    assert_eq!(t.get("long").await.unwrap(), Some(json!(3)), "{label}");
    assert_eq!(
        t.list("").await.unwrap(),
        ["long"],
        "{label}: expired keys are not listed"
    );
    assert!(
        !t.delete("short").await.unwrap(),
        "{label}: an expired key does not exist"
    );
    let err = t
        .set("long", json!(4), Some(Duration::ZERO))
        .await
        .unwrap_err();
    assert_eq!(
        err,
        CapabilityError::invalid_input("ttl: must be greater than zero"),
        "{label}"
    );
    assert_eq!(
        t.get("long").await.unwrap(),
        Some(json!(3)),
        "{label}: a refused write changes nothing"
    );
    // A TTL longer than any clock counts (a tool may pass `ttl_seconds` up to 2^63 - 1) is a
    // value that stays, in every store: neither a panic nor an error.
    for (i, ttl) in [Duration::from_secs(i64::MAX.unsigned_abs()), Duration::MAX]
        .into_iter()
        .enumerate()
    {
        let key = format!("forever{i}");
        t.set(&key, json!(i), Some(ttl))
            .await
            .unwrap_or_else(|e| panic!("{label}: {ttl:?}: {e}"));
        assert_eq!(
            t.get(&key).await.unwrap(),
            Some(json!(i)),
            "{label}: {ttl:?}"
        );
        assert!(t.delete(&key).await.unwrap(), "{label}");
    }

    // Limits.
    let big = "k".repeat(1025);
    assert_eq!(
        a.set(&big, json!(1), None).await.unwrap_err(),
        CapabilityError::invalid_input("key: 1025 bytes exceed the limit of 1024 bytes")
    );
    assert!(matches!(
        a.get(&big).await,
        Err(CapabilityError::InvalidInput(_))
    ));
    assert!(matches!(
        a.list(&big).await,
        Err(CapabilityError::InvalidInput(_))
    ));
    assert_eq!(
        a.set("", json!(1), None).await.unwrap_err(),
        CapabilityError::invalid_input("key: must not be empty")
    );
    a.set("sized", json!("small"), None).await.unwrap();
    let err = a
        .set("sized", json!("x".repeat(80)), None)
        .await
        .unwrap_err();
    assert_eq!(
        err,
        CapabilityError::invalid_input("value: 82 bytes exceed the limit of 64 bytes"),
        "{label}"
    );
    assert_eq!(
        a.get("sized").await.unwrap(),
        Some(json!("small")),
        "{label}: an over-limit write changes nothing"
    );
    a.set(&"k".repeat(1024), json!("x".repeat(62)), None)
        .await
        .unwrap();
}

/// 8 tasks × 10,000 mixed operations on 50 overlapping keys; afterwards every key holds either
/// nothing or the last value some task wrote there, and `list` agrees with `get`.
async fn concurrency<S: RawStore + 'static>(store: Arc<S>, label: &str) {
    let backend = KvBackend::new(store, KvLimits::default());
    let kv = scoped(&backend, "session:concurrent", None);
    let mut tasks = Vec::new();
    for task in 0..8u64 {
        let kv = Arc::clone(&kv);
        tasks.push(tokio::spawn(async move {
            // Per key, this task's last operation: Some(value) for a set, None for a delete.
            let mut last: HashMap<String, Option<Value>> = HashMap::new();
            let mut seed = task.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            for i in 0..10_000u64 {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let key = format!("k{}", seed % 50);
                match seed % 10 {
                    0..=4 => {
                        let value = json!({"task": task, "i": i});
                        kv.set(&key, value.clone(), None).await.unwrap();
                        last.insert(key, Some(value));
                    }
                    5..=7 => {
                        kv.get(&key).await.unwrap();
                    }
                    8 => {
                        kv.delete(&key).await.unwrap();
                        last.insert(key, None);
                    }
                    _ => {
                        kv.list("k1").await.unwrap();
                    }
                }
            }
            last
        }));
    }
    let mut lasts = Vec::new();
    for t in tasks {
        lasts.push(t.await.unwrap());
    }
    let mut present = BTreeSet::new();
    for n in 0..50 {
        let key = format!("k{n}");
        match kv.get(&key).await.unwrap() {
            Some(value) => {
                let task = value["task"].as_u64().unwrap() as usize;
                assert_eq!(
                    lasts[task].get(&key),
                    Some(&Some(value.clone())),
                    "{label}: {key} holds a value its writer later replaced"
                );
                present.insert(key);
            }
            None => assert!(
                lasts
                    .iter()
                    .any(|l| l.get(&key).is_some_and(Option::is_none))
                    || lasts.iter().all(|l| !l.contains_key(&key)),
                "{label}: {key} is empty though no task's last operation on it was a delete"
            ),
        }
    }
    let listed: BTreeSet<String> = kv.list("").await.unwrap().into_iter().collect();
    assert_eq!(listed, present, "{label}: list agrees with get");
}

/// A listing is bounded as a directory listing is (G-FS-08): past `KvLimits::max_list` keys
/// under the prefix it fails, naming the limit, instead of gathering every key of a namespace
/// (a model that set a million keys, a shared Redis) into memory and into the model's context.
async fn listing_is_bounded<S: RawStore + 'static>(store: Arc<S>, label: &str) {
    let backend = KvBackend::new(store, KvLimits::default().max_list(20));
    let kv = scoped(&backend, "session:listing", None);
    for i in 0..25 {
        kv.set(&format!("many:{i:02}"), json!(i), None)
            .await
            .unwrap();
    }
    for i in 0..5 {
        kv.set(&format!("few:{i}"), json!(i), None).await.unwrap();
    }
    for prefix in ["many:", ""] {
        let err = kv.list(prefix).await.unwrap_err();
        assert_eq!(
            err.result_code(),
            capability_types::ErrorCode::ExecutionFailed,
            "{label}: {err}"
        );
        assert!(
            err.to_string().contains("more than 20 keys"),
            "{label}: {err}"
        );
    }
    assert_eq!(kv.list("few:").await.unwrap().len(), 5, "{label}");
    for i in 0..10 {
        kv.delete(&format!("many:{i:02}")).await.unwrap();
    }
    assert_eq!(kv.list("many:").await.unwrap().len(), 15, "{label}");
    // Exactly at the limit is within it.
    assert_eq!(kv.list("").await.unwrap().len(), 20, "{label}");
}

// guarantee: G-KV-01
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_conforms() {
    conformance(MemoryStore::new(), "memory").await;
    listing_is_bounded(MemoryStore::new(), "memory").await;
}

// guarantee: G-KV-01
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_conforms() {
    let dir = tempfile::tempdir().unwrap();
    conformance(
        EmbeddedStore::open(dir.path().join("kv.redb")).unwrap(),
        "embedded",
    )
    .await;
    listing_is_bounded(
        EmbeddedStore::open(dir.path().join("listing.redb")).unwrap(),
        "embedded",
    )
    .await;
}

// guarantee: G-KV-01
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_conforms() {
    let server = support::RedisServer::start();
    conformance(
        RedisStore::connect(&server.url, Some("conformance"))
            .await
            .unwrap(),
        "redis",
    )
    .await;
    listing_is_bounded(
        RedisStore::connect(&server.url, Some("listing"))
            .await
            .unwrap(),
        "redis",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_concurrency() {
    concurrency(MemoryStore::new(), "memory").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_concurrency() {
    let dir = tempfile::tempdir().unwrap();
    concurrency(
        EmbeddedStore::open(dir.path().join("kv.redb")).unwrap(),
        "embedded",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_concurrency() {
    let server = support::RedisServer::start();
    concurrency(
        RedisStore::connect(&server.url, Some("concurrency"))
            .await
            .unwrap(),
        "redis",
    )
    .await;
}

/// The sweeper purges without a read; an interval of zero (which `tokio::time::interval`
/// refuses with a panic) sweeps as often as it can instead of never.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memory_sweeper_purges_expired_entries() {
    for interval in [Duration::from_millis(50), Duration::ZERO] {
        let store = MemoryStore::with_sweeper(interval);
        let backend = KvBackend::new(Arc::clone(&store), KvLimits::default());
        let kv = scoped(&backend, "session:sweep", None);
        for i in 0..100 {
            kv.set(&format!("k{i}"), json!(i), Some(Duration::from_millis(20)))
                .await
                .unwrap();
        }
        kv.set("kept", json!(1), None).await.unwrap();
        assert!(store.len_including_expired() > 1, "{interval:?}");
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(
            store.len_including_expired(),
            1,
            "expired entries are removed without being read ({interval:?})"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_that_cannot_be_reached_is_not_available() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let err = RedisStore::connect(&format!("redis://127.0.0.1:{port}/"), None)
        .await
        .unwrap_err();
    assert_eq!(
        err.result_code(),
        capability_types::ErrorCode::NotAvailable,
        "{err}"
    );
    let err = RedisStore::connect("not a url", None).await.unwrap_err();
    assert!(matches!(err, CapabilityError::InvalidInput(_)), "{err}");
}

/// A Redis URL's password (and its user) are never shown: not in the error of a server that
/// cannot be reached, nor of one that refuses the password, nor in a connected store's `Debug`,
/// whatever characters the password holds (an `@` in it included: a URL's user information
/// ends at its last `@`).
// guarantee: G-KV-04
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_urls_credentials_are_never_shown() {
    let secrets = ["hunter2", "pa@ss-word", "s3cr3t#x", "us:er"];
    let hidden = |what: &str, text: &str| {
        for secret in ["hunter2", "pa@ss", "ss-word", "s3cr3t", "us:er"] {
            assert!(!text.contains(secret), "{what} shows `{secret}`: {text}");
        }
    };
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    for password in secrets {
        for url in [
            format!("redis://:{password}@127.0.0.1:{closed}/"),
            format!("redis://us:er:{password}@127.0.0.1:{closed}/0"),
            format!("redis://default:{password}@127.0.0.1:{closed}"),
        ] {
            let err = RedisStore::connect(&url, None).await.unwrap_err();
            hidden("an unreachable server's error", &err.to_string());
            assert!(
                err.to_string().contains(&format!("127.0.0.1:{closed}")),
                "the server is still named: {err}"
            );
        }
    }
    // A URL that does not parse is not echoed either.
    for url in ["redis://:hunter2@[::1", "redis://:hunter2@127.0.0.1:99999/"] {
        let err = RedisStore::connect(url, None).await.unwrap_err();
        hidden("an unparsable URL's error", &err.to_string());
    }
    // A server that wants a password, given the wrong one and then the right one.
    let server = support::RedisServer::start_with(&["--requirepass", "pa@ss-word"]);
    let port = server
        .url
        .trim_end_matches('/')
        .rsplit(':')
        .next()
        .unwrap()
        .to_owned();
    let err = RedisStore::connect(&format!("redis://:hunter2@127.0.0.1:{port}/"), None)
        .await
        .unwrap_err();
    hidden("a refused password's error", &err.to_string());
    let store = RedisStore::connect(&format!("redis://:pa@ss-word@127.0.0.1:{port}/"), None)
        .await
        .unwrap();
    hidden("a connected store's Debug", &format!("{store:?}"));
    assert!(
        format!("{store:?}").contains(&format!("127.0.0.1:{port}")),
        "{store:?}"
    );
}

/// A process that holds a file's lock and does not let go until told: flock(1), whose lock
/// redb honours, around a `cat` that ends when its input is closed.
struct Holder(std::process::Child);

impl Holder {
    /// Started, and given time to take the lock (it waits for any holder before it).
    fn start(path: &std::path::Path) -> Self {
        let child = std::process::Command::new("flock")
            .arg(path)
            .arg("cat")
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(300));
        Holder(child)
    }

    fn let_go(mut self) {
        drop(self.0.stdin.take());
        self.0.wait().unwrap();
    }
}

/// Two stores on one file (two processes of one user, here two handles of one process) share
/// it: each holds the file only while in use, so each sees what the other wrote; one that
/// another process never lets go of fails with `not_available` past its lock wait, and works
/// again once it is let go (docs/semantics.md, "Storage scopes").
// guarantee: G-KV-03
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_stores_share_one_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kv.redb");
    let first = KvBackend::new(EmbeddedStore::open(&path).unwrap(), KvLimits::default());
    let second = KvBackend::new(EmbeddedStore::open(&path).unwrap(), KvLimits::default());
    let (a, b) = (
        scoped(&first, "session:s", None),
        scoped(&second, "session:s", None),
    );
    a.set("k", json!("from a"), None).await.unwrap();
    assert_eq!(b.get("k").await.unwrap(), Some(json!("from a")));
    b.set("k", json!("from b"), None).await.unwrap();
    assert_eq!(a.get("k").await.unwrap(), Some(json!("from b")));
    assert!(a.delete("k").await.unwrap());
    assert_eq!(b.get("k").await.unwrap(), None);

    drop((a, b, first, second));
    let holder = Holder::start(&path);
    let waiting = KvBackend::new(
        EmbeddedStore::open_with_lock_wait(&path, Duration::from_millis(200)).unwrap(),
        KvLimits::default(),
    );
    let c = scoped(&waiting, "session:s", None);
    let started = std::time::Instant::now();
    let refused = c.get("k").await.unwrap_err();
    assert!(
        matches!(refused, CapabilityError::NotAvailable(_)),
        "{refused:?}"
    );
    assert!(
        refused.to_string().contains("in use by another process"),
        "{refused}"
    );
    assert!(started.elapsed() >= Duration::from_millis(200));
    let refused = c.set("k", json!(1), None).await.unwrap_err();
    assert!(
        matches!(refused, CapabilityError::NotAvailable(_)),
        "{refused:?}"
    );
    holder.let_go();
    c.set("k", json!(2), None).await.unwrap();
    assert_eq!(c.get("k").await.unwrap(), Some(json!(2)));
}

/// A store opened while another program holds its file (so not checked then) that turns out
/// to be a redb file of that program's, without the store's table: reads find nothing, writes
/// make the table, as in a file the store made itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_first_opened_while_held_gets_its_table_when_it_opens_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other.redb");
    {
        let other: redb::TableDefinition<'_, &str, u64> = redb::TableDefinition::new("other");
        let db = redb::Database::create(&path).unwrap();
        let txn = db.begin_write().unwrap();
        txn.open_table(other).unwrap().insert("x", 1).unwrap();
        txn.commit().unwrap();
    }
    let holder = Holder::start(&path);
    let backend = KvBackend::new(EmbeddedStore::open(&path).unwrap(), KvLimits::default());
    holder.let_go();
    let kv = scoped(&backend, "session:s", None);
    assert_eq!(kv.get("k").await.unwrap(), None);
    assert_eq!(kv.list("").await.unwrap(), Vec::<String>::new());
    kv.set("k", json!(1), None).await.unwrap();
    assert_eq!(kv.get("k").await.unwrap(), Some(json!(1)));
}

/// Two stores on one file, each used by several tasks with pauses around the store's idle close
/// (100 ms), so files are closed and opened again while reads and writes are under way: every
/// operation succeeds and every write is read back by the other store.
// guarantee: G-KV-03
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn shared_stores_closing_and_reopening_under_load_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kv.redb");
    let backends = [
        KvBackend::new(EmbeddedStore::open(&path).unwrap(), KvLimits::default()),
        KvBackend::new(EmbeddedStore::open(&path).unwrap(), KvLimits::default()),
    ];
    let mut tasks = Vec::new();
    for task in 0..6u64 {
        let mine = scoped(&backends[(task % 2) as usize], "session:s", None);
        let theirs = scoped(&backends[((task + 1) % 2) as usize], "session:s", None);
        tasks.push(tokio::spawn(async move {
            for round in 0..6u64 {
                let key = format!("t{task}-r{round}");
                mine.set(&key, json!(round), None).await.unwrap();
                // Around the idle close: before it, at it, after it.
                let pause = [0, 60, 95, 105, 140, 30][((task + round) % 6) as usize];
                tokio::time::sleep(Duration::from_millis(pause)).await;
                assert_eq!(theirs.get(&key).await.unwrap(), Some(json!(round)), "{key}");
                assert!(
                    theirs
                        .list(&format!("t{task}-"))
                        .await
                        .unwrap()
                        .contains(&key)
                );
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let all = scoped(&backends[0], "session:s", None)
        .list("t")
        .await
        .unwrap();
    assert_eq!(all.len(), 36);
}

/// A store path another account could have planted in a shared directory (`/tmp`) is refused
/// when the store opens, and what it names is left as it was: a symbolic link of another user's
/// (redb would initialise an empty file it names, wherever that is, or create one where it
/// dangles), and a file owned by another user (who could read and change every value). The
/// user's own links are followed.
// guarantee: G-KV-03
#[test]
fn a_store_path_planted_by_another_account_is_refused() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let chown = |path: &std::path::Path, link: bool| {
        let mut command = std::process::Command::new("chown");
        if link {
            command.arg("-h");
        }
        command
            .arg("65534:65534")
            .arg(path)
            .status()
            .unwrap()
            .success()
    };
    // What is not a regular file is no store: a FIFO, a directory.
    let fifo = dir.path().join("fifo.redb");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    for place in [fifo, dir.path().to_path_buf()] {
        let Err(e) = EmbeddedStore::open(&place) else {
            panic!("{place:?} opened as a store");
        };
        assert!(
            e.to_string().contains("not a regular file"),
            "{place:?}: {e}"
        );
    }
    // The user's own: a file, and their link to another file of theirs.
    assert!(EmbeddedStore::open(dir.path().join("own.redb")).is_ok());
    let own_link = dir.path().join("own-link.redb");
    std::os::unix::fs::symlink(dir.path().join("own.redb"), &own_link).unwrap();
    assert!(EmbeddedStore::open(&own_link).is_ok());
    let own_dangling = dir.path().join("own-dangling.redb");
    std::os::unix::fs::symlink(dir.path().join("made-here.redb"), &own_dangling).unwrap();
    assert!(EmbeddedStore::open(&own_dangling).is_ok());
    assert!(
        dir.path().join("made-here.redb").exists(),
        "made where the link leads"
    );

    // A store in a directory of the user's inside one anyone may write without the sticky bit:
    // whoever can write the outer one can swap the file (when the store reopens it after a
    // pause, it would be theirs). Refused before anything is made there.
    let open = dir.path().join("shared");
    std::fs::create_dir_all(open.join("me")).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let swappable = open.join("me/state.redb");
    let Err(e) = EmbeddedStore::open(&swappable) else {
        panic!("a store in a directory others can change was opened");
    };
    assert!(
        e.to_string()
            .contains(&format!("lies in {}", open.display()))
            && e.to_string().contains("777"),
        "{e}"
    );
    assert!(!swappable.exists(), "nothing made there");
    // The user's own link, in a safe place, to a file there: where the file is counts.
    let pointer = dir.path().join("pointer.redb");
    std::os::unix::fs::symlink(&swappable, &pointer).unwrap();
    let Err(e) = EmbeddedStore::open(&pointer) else {
        panic!("a link to a store in a directory others can change was opened");
    };
    assert!(e.to_string().contains("777"), "{e}");
    assert!(!swappable.exists(), "nothing made there");
    // Writable by its group only, where somebody else is in that group (`nobody`'s, which
    // only root can give; CI runs as root): its members can swap the file too.
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o775)).unwrap();
    let given = std::process::Command::new("chgrp")
        .arg("65534")
        .arg(&open)
        .status()
        .is_ok_and(|s| s.success());
    if given {
        let Err(e) = EmbeddedStore::open(&swappable) else {
            panic!("a store in a directory another's group can change was opened");
        };
        assert!(
            e.to_string()
                .contains(&format!("lies in {}", open.display()))
                && e.to_string().contains("gid 65534"),
            "{e}"
        );
        assert!(!swappable.exists(), "nothing made there");
    }
    // With the sticky bit (as on /tmp), only an entry's owner can rename it.
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
    assert!(EmbeddedStore::open(&swappable).is_ok());

    // The user's own store file that anyone may write: whoever can write it can change every
    // value. Refused, the file untouched; once only its owner may write it, opened.
    let writable = dir.path().join("writable.redb");
    assert!(EmbeddedStore::open(&writable).is_ok());
    std::fs::set_permissions(&writable, std::fs::Permissions::from_mode(0o666)).unwrap();
    let before = std::fs::read(&writable).unwrap();
    let Err(e) = EmbeddedStore::open(&writable) else {
        panic!("a store file anyone may write was opened");
    };
    assert!(
        e.to_string()
            .contains("has mode 666: other users can change it"),
        "{e}"
    );
    assert_eq!(std::fs::read(&writable).unwrap(), before);
    std::fs::set_permissions(&writable, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert!(EmbeddedStore::open(&writable).is_ok());

    // Another user's (needs root to arrange; CI runs as root).
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "").unwrap();
    let link = dir.path().join("link.redb");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let dangling = dir.path().join("dangling.redb");
    std::os::unix::fs::symlink(dir.path().join("made-by-the-store"), &dangling).unwrap();
    let theirs = dir.path().join("theirs.redb");
    std::fs::write(&theirs, "").unwrap();
    if chown(&link, true) && chown(&dangling, true) && chown(&theirs, false) {
        for (planted, said) in [
            (&link, "symbolic link of another user"),
            (&dangling, "symbolic link of another user"),
            (&theirs, "owned by another user"),
        ] {
            let Err(e) = EmbeddedStore::open(planted) else {
                panic!("{planted:?} was opened");
            };
            assert!(e.to_string().contains(said), "{planted:?}: {e}");
        }
        assert_eq!(
            std::fs::read(&victim).unwrap(),
            b"",
            "the linked file is untouched"
        );
        assert!(!dir.path().join("made-by-the-store").exists());
        assert_eq!(std::fs::read(&theirs).unwrap(), b"");
    }
}
