//! The embedded store: one redb file, crash-safe, with group commit, shared by processes.
//!
//! Keys are stored as `u32 BE length of namespace ‖ namespace ‖ key`, so a namespace is a
//! length-prefixed binary prefix no key can imitate. Values are `u64 BE expiry in ms since the
//! epoch (0 = never) ‖ JSON bytes`.
//!
//! All writes go through one writer thread. It takes every write that is waiting, applies them
//! in one transaction and commits it durably; only then is each `set` acknowledged. Concurrent
//! writers share one fsync, and an acknowledged write survives a crash of the process.
//!
//! The file is locked (by redb, `flock`) only while the store is in use: the writer thread
//! closes it once nothing has used it for [`HOLD`], and whoever needs it next opens it again,
//! waiting for another process to let go for up to the store's lock wait. So the processes of
//! one user (two MCP servers, a server and `toolcap call`) share one file, one at a time
//! (docs/semantics.md, "Storage scopes").
#![allow(clippy::disallowed_methods, reason = "the embedded store's file layer")]

use std::fmt;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use capability_types::CapabilityError;
use redb::{Database, DatabaseError, ReadableDatabase, ReadableTable, TableDefinition};
use tokio::sync::oneshot;

use crate::{RawStore, now_ms};

const KV: TableDefinition<'_, &[u8], &[u8]> = TableDefinition::new("toolcap_kv");

/// Writes waiting at most this many per transaction.
const MAX_BATCH: usize = 4096;
/// How long the file stays open (and locked) after its last use.
const HOLD: Duration = Duration::from_millis(100);
/// Expired entries are purged, when the file is closed, at most this often.
const PURGE_EVERY: Duration = Duration::from_secs(60);

enum Op {
    Set { key: Vec<u8>, value: Vec<u8> },
    Delete { key: Vec<u8> },
}

/// What the writer thread is asked.
enum Msg {
    /// A write, acknowledged once committed.
    Job {
        op: Op,
        ack: oneshot::Sender<Result<bool, CapabilityError>>,
    },
    /// Open the file for a reader (waiting for another process if need be), and say when.
    Open(oneshot::Sender<Result<(), CapabilityError>>),
    /// The file was opened by another thread: start counting its idle time.
    Opened,
}

/// The file, open while in use, and what decides when to close it.
struct Shared {
    path: PathBuf,
    lock_wait: Duration,
    /// `Some` while the file is open (and locked). Readers clone the `Arc` for one transaction,
    /// so a close waits for them.
    db: Mutex<Option<Arc<Database>>>,
    /// When the file was last used, in ms since `epoch`.
    used: AtomicU64,
    epoch: Instant,
}

impl Shared {
    fn touch(&self) {
        let ms = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.used.store(ms, Ordering::Relaxed);
    }

    fn idle(&self) -> Duration {
        let now = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        Duration::from_millis(now.saturating_sub(self.used.load(Ordering::Relaxed)))
    }

    fn slot(&self) -> std::sync::MutexGuard<'_, Option<Arc<Database>>> {
        self.db.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The open file, if it is open.
    fn current(&self) -> Option<Arc<Database>> {
        let db = self.slot().clone();
        if db.is_some() {
            self.touch();
        }
        db
    }

    /// The open file, opened now if it is not: another process holding it is waited for, up to
    /// the lock wait. Blocks the calling thread. Whether it was opened by this call.
    fn acquire(&self) -> Result<(Arc<Database>, bool), CapabilityError> {
        let mut slot = self.slot();
        if let Some(db) = slot.as_ref() {
            self.touch();
            return Ok((Arc::clone(db), false));
        }
        let db = open_waiting(&self.path, self.lock_wait)?;
        // A file first opened by another process's store has its table; one made by another
        // program's redb may not.
        with_table(&db)?;
        let db = Arc::new(db);
        *slot = Some(Arc::clone(&db));
        self.touch();
        Ok((db, true))
    }
}

/// Makes the store's table in `db` unless it is there (a write, only the first time).
fn with_table(db: &Database) -> Result<(), CapabilityError> {
    let read = db.begin_read().map_err(storage_error)?;
    match read.open_table(KV) {
        Ok(_) => return Ok(()),
        Err(redb::TableError::TableDoesNotExist(_)) => {}
        Err(e) => return Err(storage_error(e)),
    }
    drop(read);
    let txn = db.begin_write().map_err(storage_error)?;
    txn.open_table(KV).map_err(storage_error)?;
    txn.commit().map_err(storage_error)
}

/// Opens the file, retrying while another process (or a reader of this one still finishing
/// with a closed handle) holds its lock, for up to `wait`.
fn open_waiting(path: &Path, wait: Duration) -> Result<Database, CapabilityError> {
    let deadline = capability_types::deadline(Instant::now(), wait);
    let mut pause = Duration::from_millis(1);
    loop {
        match try_open(path)? {
            Some(db) => return Ok(db),
            None if Instant::now() < deadline => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(25));
            }
            None => {
                return Err(CapabilityError::not_available(format!(
                    "the key-value store {} is in use by another process, which did not let go \
                     of it within {wait:?}",
                    path.display()
                )));
            }
        }
    }
}

/// Refuses a store path in a directory another account can change: one (at any depth, links
/// on the way and their directories included) anyone may write without the sticky bit, one a
/// group somebody else is in may write without it, or one of another user's
/// ([`capability_sandbox::swappable_through`]). Whoever can write it can rename the store's file
/// away and put theirs in its place, which the store would open the next time it takes the file
/// up after a pause. In a sticky one (`/tmp`) only an entry's owner can. Checked before
/// anything is made there.
fn in_directories_of_ours(path: &Path) -> Result<(), CapabilityError> {
    let refused = |why: String| {
        CapabilityError::not_available(format!("the key-value store {} {why}", path.display()))
    };
    match capability_sandbox::swappable_through(path) {
        Ok(None) => Ok(()),
        Ok(Some(swap)) => Err(refused(format!(
            "{swap}, and with it the store's file; keep the store in a directory only you \
             can change"
        ))),
        Err(e) => Err(refused(format!("cannot be examined: {e}"))),
    }
}

/// Refuses a store path another account could have planted in a shared directory: a symbolic
/// link of another user's (the store would initialise an empty file it names, or create one
/// where it dangles), a file of another user (who could read and change every value), and a
/// file another account may write (by its mode, its group or its access control list:
/// [`capability_sandbox::changeable_by_others`]), who could change every value. The user's own
/// links and root's are followed. Checked once, when the store opens: the directories
/// it lies in are the user's or root's, or sticky ([`in_directories_of_ours`]), so nobody else
/// can replace a file or link of this user's afterwards.
fn planted(path: &Path) -> Result<(), CapabilityError> {
    use std::os::unix::fs::MetadataExt as _;
    let refused = |why: String| {
        CapabilityError::not_available(format!("the key-value store {} {why}", path.display()))
    };
    let me = rustix::process::geteuid().as_raw();
    let link =
        std::fs::symlink_metadata(path).map_err(|e| refused(format!("cannot be examined: {e}")))?;
    if link.file_type().is_symlink() && link.uid() != me && link.uid() != 0 {
        return Err(refused(format!(
            "is a symbolic link of another user's (uid {}); give the path of a file of your own",
            link.uid()
        )));
    }
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        // The user's own link that leads nowhere yet: the store is made where it leads.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(refused(format!("cannot be examined: {e}"))),
    };
    if meta.uid() != me {
        return Err(refused(format!(
            "is owned by another user (uid {}); a store is its own user's alone",
            meta.uid()
        )));
    }
    // A FIFO, a device or a directory is no store: refused by name rather than by what the
    // database's own open makes of it (`Invalid argument`), and a disk's device never written.
    if !meta.is_file() {
        return Err(refused(
            "is not a regular file (a FIFO, a socket, a device or a directory); give the path \
             of a file"
                .to_owned(),
        ));
    }
    // Whoever else may write it can change every value.
    if let Some(how) =
        capability_sandbox::changeable_by_others(path, meta.mode(), meta.uid(), meta.gid())
    {
        return Err(refused(format!(
            "{how}, and with it every value; {}",
            how.remedy(path)
        )));
    }
    Ok(())
}

/// Opens the file, or `None` when another process (or a reader of this one still finishing
/// with a closed handle) holds its lock.
fn try_open(path: &Path) -> Result<Option<Database>, CapabilityError> {
    match Database::create(path) {
        Ok(db) => Ok(Some(db)),
        Err(DatabaseError::DatabaseAlreadyOpen) => Ok(None),
        Err(e) => Err(CapabilityError::not_available(format!(
            "cannot open the key-value store {}: {e}",
            path.display()
        ))),
    }
}

/// Key-value state in one crash-safe file, which processes share one at a time.
pub struct EmbeddedStore {
    shared: Arc<Shared>,
    /// `None` only while dropping.
    writer: Option<Sender<Msg>>,
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
            .field("path", &self.shared.path)
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
    /// How long a store waits for another process to let go of the file, unless
    /// [`open_with_lock_wait`](Self::open_with_lock_wait) says otherwise.
    pub const DEFAULT_LOCK_WAIT: Duration = Duration::from_secs(5);

    /// Opens (or creates, readable by the owner only) the store at `path`, waiting up to
    /// [`DEFAULT_LOCK_WAIT`](Self::DEFAULT_LOCK_WAIT) for another process whenever the file is in use.
    ///
    /// # Ambient Authority
    ///
    /// Opens `path` from the process's file system view.
    pub fn open(path: impl AsRef<Path>) -> Result<Arc<Self>, CapabilityError> {
        Self::open_with_lock_wait(path, Self::DEFAULT_LOCK_WAIT)
    }

    /// [`open`](Self::open), waiting up to `lock_wait` for another process that holds the
    /// file; past it, an operation fails with `not_available`.
    ///
    /// The file is checked now (a file that is not a store is refused here), unless another
    /// process holds it at this moment: then it is checked when this store first opens it.
    ///
    /// # Ambient Authority
    ///
    /// Opens `path` from the process's file system view.
    pub fn open_with_lock_wait(
        path: impl AsRef<Path>,
        lock_wait: Duration,
    ) -> Result<Arc<Self>, CapabilityError> {
        let path = path.as_ref().to_path_buf();
        in_directories_of_ours(&path)?;
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
        planted(&path)?;
        // In use by another process (`None`): checked when this store first opens it.
        let db = match try_open(&path)? {
            Some(db) => {
                with_table(&db)?;
                Some(Arc::new(db))
            }
            None => None,
        };
        let shared = Arc::new(Shared {
            path,
            lock_wait,
            db: Mutex::new(db),
            used: AtomicU64::new(0),
            epoch: Instant::now(),
        });
        let (writer, jobs) = mpsc::channel();
        let for_thread = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("toolcap-kv-writer".to_owned())
            .spawn(move || write_loop(&for_thread, &jobs))
            .map_err(|e| {
                CapabilityError::not_available(format!("cannot start the key-value writer: {e}"))
            })?;
        Ok(Arc::new(Self {
            shared,
            writer: Some(writer),
            thread: Some(thread),
        }))
    }

    /// Every entry's raw bytes, for integrity checks: (namespace, key, decodable payload).
    /// Blocks the calling thread while another process holds the file.
    pub fn scan_all(&self) -> Result<Vec<(String, String, bool)>, CapabilityError> {
        let (db, opened) = self.shared.acquire()?;
        if opened {
            self.send(Msg::Opened)?;
        }
        let txn = db.begin_read().map_err(storage_error)?;
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

    fn send(&self, msg: Msg) -> Result<(), CapabilityError> {
        self.writer
            .as_ref()
            .ok_or_else(stopped)?
            .send(msg)
            .map_err(|_| stopped())
    }

    /// The open file for a read: the one open now, or one the writer thread opens (waiting
    /// there, not in the caller's task, for another process to let go).
    async fn reader(&self) -> Result<Arc<Database>, CapabilityError> {
        loop {
            if let Some(db) = self.shared.current() {
                return Ok(db);
            }
            let (opened, done) = oneshot::channel();
            self.send(Msg::Open(opened))?;
            done.await.map_err(|_| stopped())??;
            // Closed again before this read got it only after `HOLD` unused: rare, and then
            // asked again.
        }
    }

    async fn submit(&self, op: Op) -> Result<bool, CapabilityError> {
        let (ack, done) = oneshot::channel();
        self.send(Msg::Job { op, ack })?;
        done.await.map_err(|_| stopped())?
    }
}

fn stopped() -> CapabilityError {
    CapabilityError::not_available("the key-value writer has stopped")
}

/// The writer thread: applies the writes, opens the file for readers, and closes it once it is
/// idle (purging expired entries first, at most every [`PURGE_EVERY`]).
fn write_loop(shared: &Shared, jobs: &Receiver<Msg>) {
    let mut purged: Option<Instant> = None;
    loop {
        let open = shared.slot().is_some();
        let first = if open {
            match jobs.recv_timeout(HOLD) {
                Ok(msg) => msg,
                Err(RecvTimeoutError::Timeout) => {
                    if shared.idle() >= HOLD {
                        close(shared, &mut purged);
                    }
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => return,
            }
        } else {
            match jobs.recv() {
                Ok(msg) => msg,
                Err(_) => return,
            }
        };
        let mut batch = Vec::new();
        let mut next = Some(first);
        while let Some(msg) = next.take() {
            match msg {
                Msg::Job { op, ack } => batch.push((op, ack)),
                Msg::Open(reply) => {
                    let _ = reply.send(shared.acquire().map(drop));
                }
                Msg::Opened => {}
            }
            if batch.len() < MAX_BATCH {
                next = jobs.try_recv().ok();
            }
        }
        if batch.is_empty() {
            continue;
        }
        let applied = shared
            .acquire()
            .and_then(|(db, _)| apply(&db, batch.iter().map(|(op, _)| op)).map_err(storage_error));
        match applied {
            Ok(results) => {
                for ((_, ack), result) in batch.into_iter().zip(results) {
                    let _ = ack.send(Ok(result));
                }
            }
            Err(e) => {
                for (_, ack) in batch {
                    let _ = ack.send(Err(e.clone()));
                }
            }
        }
    }
}

/// Closes the file (once its readers are done with it), purging first when a purge is due.
fn close(shared: &Shared, purged: &mut Option<Instant>) {
    let mut slot = shared.slot();
    if purged.is_none_or(|at| at.elapsed() >= PURGE_EVERY)
        && let Some(db) = slot.as_ref()
    {
        let _ = purge(db);
        *purged = Some(Instant::now());
    }
    *slot = None;
}

/// Applies a batch in one durable transaction.
fn apply<'a>(
    db: &Database,
    batch: impl ExactSizeIterator<Item = &'a Op>,
) -> Result<Vec<bool>, redb::Error> {
    let now = now_ms();
    let txn = db.begin_write()?;
    let mut results = Vec::with_capacity(batch.len());
    {
        let mut table = txn.open_table(KV)?;
        for op in batch {
            match op {
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
        let db = self.reader().await?;
        let txn = db.begin_read().map_err(storage_error)?;
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
        self.list_limited(namespace, prefix, usize::MAX).await
    }

    async fn list_limited(
        &self,
        namespace: &str,
        prefix: &str,
        max: usize,
    ) -> Result<Vec<String>, CapabilityError> {
        let start = encode_key(namespace, prefix);
        let head = encode_key(namespace, "").len();
        let now = now_ms();
        let db = self.reader().await?;
        let txn = db.begin_read().map_err(storage_error)?;
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
                crate::check_list_limit(prefix, keys.len(), max)?;
            }
        }
        Ok(keys)
    }
}
