//! The embedded store: one redb file, crash-safe, with group commit.
//!
//! Keys are stored as `u32 BE length of namespace ‖ namespace ‖ key`, so a namespace is a
//! length-prefixed binary prefix no key can imitate. Values are `u64 BE expiry in ms since the
//! epoch (0 = never) ‖ JSON bytes`.
//!
//! All writes go through one writer thread. It takes every write that is waiting, applies them
//! in one transaction and commits it durably; only then is each `set` acknowledged. Concurrent
//! writers share one fsync, and an acknowledged write survives a crash of the process.
#![allow(clippy::disallowed_methods, reason = "the embedded store's file layer")]

use std::fmt;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::Duration;

use async_trait::async_trait;
use capability_types::CapabilityError;
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use tokio::sync::oneshot;

use crate::{RawStore, now_ms};

const KV: TableDefinition<'_, &[u8], &[u8]> = TableDefinition::new("toolcap_kv");

/// Writes waiting at most this many per transaction.
const MAX_BATCH: usize = 4096;
/// Idle time after which the writer purges expired entries.
const PURGE_AFTER_IDLE: Duration = Duration::from_secs(60);

enum Op {
    Set { key: Vec<u8>, value: Vec<u8> },
    Delete { key: Vec<u8> },
}

struct Job {
    op: Op,
    ack: oneshot::Sender<Result<bool, String>>,
}

/// Key-value state in one crash-safe file.
pub struct EmbeddedStore {
    path: PathBuf,
    db: Arc<Database>,
    /// `None` only while dropping.
    writer: Option<Sender<Job>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for EmbeddedStore {
    /// Ends the writer thread and waits for it, so that the file is closed (and its lock
    /// released) when the store is dropped: another process may open it right after.
    fn drop(&mut self) {
        drop(self.writer.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl fmt::Debug for EmbeddedStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EmbeddedStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

fn encode_key(namespace: &str, key: &str) -> Vec<u8> {
    let ns = namespace.as_bytes();
    let mut out = Vec::with_capacity(4 + ns.len() + key.len());
    out.extend_from_slice(&u32::try_from(ns.len()).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(ns);
    out.extend_from_slice(key.as_bytes());
    out
}

fn encode_value(value: &[u8], ttl: Option<Duration>) -> Vec<u8> {
    let expires = ttl.map_or(0, |t| {
        now_ms()
            .saturating_add(u64::try_from(t.as_millis()).unwrap_or(u64::MAX))
            .max(1)
    });
    let mut out = Vec::with_capacity(8 + value.len());
    out.extend_from_slice(&expires.to_be_bytes());
    out.extend_from_slice(value);
    out
}

/// Splits a stored value into (expiry, payload); `None` when it is too short to be one.
fn decode_value(stored: &[u8]) -> Option<(u64, &[u8])> {
    let (head, body) = stored.split_at_checked(8)?;
    Some((u64::from_be_bytes(head.try_into().ok()?), body))
}

fn live(stored: &[u8], now: u64) -> bool {
    decode_value(stored).is_some_and(|(exp, _)| exp == 0 || exp > now)
}

fn storage_error(e: impl fmt::Display) -> CapabilityError {
    CapabilityError::failed(format!("key-value store: {e}"))
}

impl EmbeddedStore {
    /// Opens (or creates, readable by the owner only) the store at `path`.
    ///
    /// # Ambient Authority
    ///
    /// Opens `path` from the process's file system view. A file another process holds open
    /// is refused with `not_available`.
    pub fn open(path: impl AsRef<Path>) -> Result<Arc<Self>, CapabilityError> {
        let path = path.as_ref().to_path_buf();
        if !path.exists() {
            use std::os::unix::fs::OpenOptionsExt;
            let created = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path);
            if let Err(e) = created
                && e.kind() != std::io::ErrorKind::AlreadyExists
            {
                return Err(CapabilityError::not_available(format!(
                    "cannot create the key-value store {}: {e}",
                    path.display()
                )));
            }
        }
        let db = Database::create(&path).map_err(|e| {
            CapabilityError::not_available(format!(
                "cannot open the key-value store {}: {e}",
                path.display()
            ))
        })?;
        let txn = db.begin_write().map_err(storage_error)?;
        txn.open_table(KV).map_err(storage_error)?;
        txn.commit().map_err(storage_error)?;
        let db = Arc::new(db);
        let (writer, jobs) = mpsc::channel();
        let for_thread = Arc::clone(&db);
        let thread = std::thread::Builder::new()
            .name("toolcap-kv-writer".to_owned())
            .spawn(move || write_loop(&for_thread, &jobs))
            .map_err(|e| {
                CapabilityError::not_available(format!("cannot start the key-value writer: {e}"))
            })?;
        Ok(Arc::new(Self {
            path,
            db,
            writer: Some(writer),
            thread: Some(thread),
        }))
    }

    /// Every entry's raw bytes, for integrity checks: (namespace, key, decodable payload).
    pub fn scan_all(&self) -> Result<Vec<(String, String, bool)>, CapabilityError> {
        let txn = self.db.begin_read().map_err(storage_error)?;
        let table = txn.open_table(KV).map_err(storage_error)?;
        let mut out = Vec::new();
        for item in table.iter().map_err(storage_error)? {
            let (k, v) = item.map_err(storage_error)?;
            let k = k.value();
            let ns_len = k
                .get(..4)
                .and_then(|b| b.try_into().ok())
                .map(u32::from_be_bytes)
                .unwrap_or(u32::MAX) as usize;
            let (ns, key) = match k.get(4..4 + ns_len) {
                Some(ns) => (
                    String::from_utf8_lossy(ns).into_owned(),
                    String::from_utf8_lossy(&k[4 + ns_len..]).into_owned(),
                ),
                None => (String::new(), String::new()),
            };
            let ok = decode_value(v.value())
                .is_some_and(|(_, body)| serde_json::from_slice::<serde_json::Value>(body).is_ok());
            out.push((ns, key, ok));
        }
        Ok(out)
    }

    async fn submit(&self, op: Op) -> Result<bool, CapabilityError> {
        let (ack, done) = oneshot::channel();
        self.writer
            .as_ref()
            .ok_or_else(|| CapabilityError::not_available("the key-value writer has stopped"))?
            .send(Job { op, ack })
            .map_err(|_| CapabilityError::not_available("the key-value writer has stopped"))?;
        done.await
            .map_err(|_| CapabilityError::not_available("the key-value writer has stopped"))?
            .map_err(storage_error)
    }
}

fn write_loop(db: &Database, jobs: &Receiver<Job>) {
    loop {
        let first = match jobs.recv_timeout(PURGE_AFTER_IDLE) {
            Ok(job) => job,
            Err(RecvTimeoutError::Timeout) => {
                let _ = purge(db);
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => return,
        };
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match jobs.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        match apply(db, &batch) {
            Ok(results) => {
                for (job, result) in batch.into_iter().zip(results) {
                    let _ = job.ack.send(Ok(result));
                }
            }
            Err(e) => {
                let message = e.to_string();
                for job in batch {
                    let _ = job.ack.send(Err(message.clone()));
                }
            }
        }
    }
}

/// Applies a batch in one durable transaction.
fn apply(db: &Database, batch: &[Job]) -> Result<Vec<bool>, redb::Error> {
    let now = now_ms();
    let txn = db.begin_write()?;
    let mut results = Vec::with_capacity(batch.len());
    {
        let mut table = txn.open_table(KV)?;
        for job in batch {
            match &job.op {
                Op::Set { key, value } => {
                    table.insert(key.as_slice(), value.as_slice())?;
                    results.push(true);
                }
                Op::Delete { key } => {
                    let existed = table
                        .remove(key.as_slice())?
                        .is_some_and(|old| live(old.value(), now));
                    results.push(existed);
                }
            }
        }
    }
    txn.commit()?;
    Ok(results)
}

fn purge(db: &Database) -> Result<usize, redb::Error> {
    let now = now_ms();
    let txn = db.begin_write()?;
    let removed;
    {
        let mut table = txn.open_table(KV)?;
        let expired: Vec<Vec<u8>> = table
            .iter()?
            .filter_map(Result::ok)
            .filter(|(_, v)| !live(v.value(), now))
            .map(|(k, _)| k.value().to_vec())
            .collect();
        removed = expired.len();
        for key in expired {
            table.remove(key.as_slice())?;
        }
    }
    txn.commit()?;
    Ok(removed)
}

#[async_trait]
impl RawStore for EmbeddedStore {
    async fn get(&self, namespace: &str, key: &str) -> Result<Option<Vec<u8>>, CapabilityError> {
        let txn = self.db.begin_read().map_err(storage_error)?;
        let table = txn.open_table(KV).map_err(storage_error)?;
        let Some(stored) = table
            .get(encode_key(namespace, key).as_slice())
            .map_err(storage_error)?
        else {
            return Ok(None);
        };
        match decode_value(stored.value()) {
            Some((exp, body)) if exp == 0 || exp > now_ms() => Ok(Some(body.to_vec())),
            Some(_) => Ok(None),
            None => Err(CapabilityError::failed(format!(
                "the stored entry of {key:?} is corrupt"
            ))),
        }
    }

    async fn set(
        &self,
        namespace: &str,
        key: &str,
        value: Vec<u8>,
        ttl: Option<Duration>,
    ) -> Result<(), CapabilityError> {
        self.submit(Op::Set {
            key: encode_key(namespace, key),
            value: encode_value(&value, ttl),
        })
        .await
        .map(drop)
    }

    async fn delete(&self, namespace: &str, key: &str) -> Result<bool, CapabilityError> {
        self.submit(Op::Delete {
            key: encode_key(namespace, key),
        })
        .await
    }

    async fn list(&self, namespace: &str, prefix: &str) -> Result<Vec<String>, CapabilityError> {
        let start = encode_key(namespace, prefix);
        let head = encode_key(namespace, "").len();
        let now = now_ms();
        let txn = self.db.begin_read().map_err(storage_error)?;
        let table = txn.open_table(KV).map_err(storage_error)?;
        let range = table
            .range::<&[u8]>((Bound::Included(start.as_slice()), Bound::Unbounded))
            .map_err(storage_error)?;
        let mut keys = Vec::new();
        for item in range {
            let (k, v) = item.map_err(storage_error)?;
            let k = k.value();
            if !k.starts_with(&start) {
                break;
            }
            if live(v.value(), now) {
                keys.push(String::from_utf8_lossy(&k[head..]).into_owned());
            }
        }
        Ok(keys)
    }
}
