//! The scoped-object traits a tool receives in its [`ToolContext`](crate::ToolContext), and the
//! plain data they exchange. Implementations live in the backend crates.

use std::fmt;
use std::path::Path;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use bytes::Bytes;
use secrecy::SecretString;
use serde_json::Value;

use crate::error::CapabilityError;
use crate::secret_ref::SecretRef;

/// HTTP(S) requests, limited to the tool's resolved host set.
///
/// Implementations refuse with [`DenialCode::HostNotAllowed`](crate::DenialCode) before any
/// connection is made, re-check every redirect hop, and cap response sizes.
///
/// ```
/// # async fn example(ctx: &capability_types::ToolContext) -> Result<(), capability_types::CapabilityError> {
/// use bytes::Bytes;
/// let request = http::Request::get("https://api.github.com/zen").body(Bytes::new()).unwrap();
/// // Refused with HOST_NOT_ALLOWED unless the resolved host set allows it.
/// let response = ctx.fetch()?.fetch(request).await?;
/// println!("{}", String::from_utf8_lossy(response.body()));
/// # Ok(()) }
/// ```
#[async_trait]
pub trait ScopedFetch: Send + Sync {
    /// Sends `request` (absolute URI) and returns the whole response.
    async fn fetch(
        &self,
        request: http::Request<Bytes>,
    ) -> Result<http::Response<Bytes>, CapabilityError>;
}

/// File access, limited to the tool's resolved read and write reach.
///
/// Relative paths resolve against the context's working directory, never the process's.
/// Refusals carry [`DenialCode::PathNotReachable`](crate::DenialCode).
///
/// ```
/// # async fn example(ctx: &capability_types::ToolContext) -> Result<(), capability_types::CapabilityError> {
/// use std::path::Path;
/// let fs = ctx.fs()?;
/// let notes = fs.read(Path::new("notes.md")).await?; // relative to the context's working directory
/// fs.append(Path::new("/srv/out/log.txt"), notes.as_bytes()).await?; // needs write reach there
/// # Ok(()) }
/// ```
#[async_trait]
pub trait ScopedFs: Send + Sync {
    /// Reads a UTF-8 text file.
    async fn read(&self, path: &Path) -> Result<String, CapabilityError>;
    /// Reads a file's bytes.
    async fn read_bytes(&self, path: &Path) -> Result<Vec<u8>, CapabilityError>;
    /// Writes a whole file atomically; returns the number of bytes written.
    async fn write(&self, path: &Path, contents: &[u8]) -> Result<u64, CapabilityError>;
    /// Appends to a file, creating it when missing (write reach required); returns the number
    /// of bytes appended. Not atomic: a reader may see part of an append in progress.
    async fn append(&self, path: &Path, contents: &[u8]) -> Result<u64, CapabilityError>;
    /// Whether the path exists (readable reach required).
    async fn exists(&self, path: &Path) -> Result<bool, CapabilityError>;
    /// The entries of a directory, sorted by name.
    async fn list(&self, path: &Path) -> Result<Vec<DirEntry>, CapabilityError>;
    /// Creates a directory and its missing parents (write reach required).
    async fn mkdir(&self, path: &Path) -> Result<(), CapabilityError>;
    /// Metadata of a path, without following a final symlink.
    async fn metadata(&self, path: &Path) -> Result<FsMetadata, CapabilityError>;
    /// Removes a file or an empty directory (write reach required).
    async fn remove(&self, path: &Path) -> Result<(), CapabilityError>;
}

/// What kind of file system object a path names.
///
/// ```
/// use capability_types::{DirEntry, FileKind};
/// let entry = DirEntry::new("src", FileKind::Dir);
/// assert_eq!(serde_json::to_string(&entry.kind).unwrap(), r#""dir""#);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FileKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (never followed by metadata).
    Symlink,
    /// Anything else: a socket, FIFO or device.
    Other,
}

/// One entry of [`ScopedFs::list`].
///
/// ```
/// use capability_types::{DirEntry, FileKind};
/// let entry = DirEntry::new("notes.md", FileKind::File);
/// assert_eq!((entry.name.as_str(), entry.kind), ("notes.md", FileKind::File));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct DirEntry {
    /// The entry's file name.
    pub name: String,
    /// What it is.
    pub kind: FileKind,
}

impl DirEntry {
    /// An entry.
    pub fn new(name: impl Into<String>, kind: FileKind) -> Self {
        Self {
            name: name.into(),
            kind,
        }
    }
}

/// Metadata returned by [`ScopedFs::metadata`].
///
/// ```
/// use capability_types::{FileKind, FsMetadata};
/// let meta = FsMetadata::new(FileKind::File, 42, None);
/// assert_eq!((meta.kind, meta.len, meta.modified), (FileKind::File, 42, None));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FsMetadata {
    /// What the path names.
    pub kind: FileKind,
    /// Size in bytes.
    pub len: u64,
    /// Last modification time, where the platform reports it.
    pub modified: Option<SystemTime>,
}

impl FsMetadata {
    /// Metadata.
    pub fn new(kind: FileKind, len: u64, modified: Option<SystemTime>) -> Self {
        Self {
            kind,
            len,
            modified,
        }
    }
}

/// Secrets, limited to the tool's declared refs.
///
/// An undeclared name is refused with
/// [`DenialCode::SecretNotDeclared`](crate::DenialCode) before any backend is asked.
///
/// ```
/// # async fn example(ctx: &capability_types::ToolContext) -> Result<(), capability_types::CapabilityError> {
/// use capability_types::ExposeSecret;
/// let secrets = ctx.secrets()?;
/// // Only a name the tool declared resolves; anything else is SECRET_NOT_DECLARED.
/// let token = secrets.resolve("GITHUB_TOKEN").await?;
/// assert!(!token.expose_secret().is_empty());
/// # Ok(()) }
/// ```
#[async_trait]
pub trait ScopedSecretsResolver: Send + Sync {
    /// The value of the secret `name`.
    async fn resolve(&self, name: &str) -> Result<SecretString, CapabilityError>;
    /// The refs the tool declared.
    fn declared(&self) -> &[SecretRef];
}

/// Child processes, limited to the tool's resolved binaries, argument rules and environment.
///
/// ```
/// # async fn example(ctx: &capability_types::ToolContext) -> Result<(), capability_types::CapabilityError> {
/// use capability_types::SpawnOptions;
/// let args = ["status".to_owned(), "--short".to_owned()];
/// // Never through a shell; the binary, argv, environment and cwd are checked first.
/// let output = ctx.process()?.spawn("git", &args, SpawnOptions::default().cwd("repo")).await?;
/// println!("{}", String::from_utf8_lossy(&output.stdout));
/// # Ok(()) }
/// ```
#[async_trait]
pub trait ScopedProcess: Send + Sync {
    /// Runs `binary` with `args` (never through a shell) and waits for it.
    async fn spawn(
        &self,
        binary: &str,
        args: &[String],
        options: SpawnOptions,
    ) -> Result<ProcessOutput, CapabilityError>;

    /// Every check [`spawn`](Self::spawn) makes before it starts anything (binary, argv,
    /// environment, working directory), with the same errors, and nothing started. `toolcap
    /// explain` asks this.
    ///
    /// The default refuses with `not_available`: a backend that cannot tell without running
    /// the child must not claim a spawn would pass.
    fn check(
        &self,
        binary: &str,
        args: &[String],
        options: &SpawnOptions,
    ) -> Result<(), CapabilityError> {
        let _ = (args, options);
        Err(CapabilityError::not_available(format!(
            "this process backend cannot check a spawn of {} without running it",
            binary.escape_debug()
        )))
    }
}

/// Options of [`ScopedProcess::spawn`]. Starts empty: no working directory (the scratch home),
/// no extra variables, no stdin, the backend's default timeout.
///
/// ```
/// use capability_types::SpawnOptions;
/// let options = SpawnOptions::default().cwd("/srv/repo").env("TZ", "UTC").stdin(&b"in"[..]);
/// // Values never show in Debug output: they may be credentials.
/// assert!(!format!("{options:?}").contains("UTC"));
/// ```
#[derive(Default, Clone)]
#[non_exhaustive]
pub struct SpawnOptions {
    /// Working directory; must lie inside the tool's read reach.
    pub cwd: Option<std::path::PathBuf>,
    /// Extra variables for the child, checked against the refused hook list.
    pub env: Vec<(String, String)>,
    /// Bytes written to the child's stdin, which is then closed.
    pub stdin: Option<Bytes>,
    /// Kill the process group after this long.
    pub timeout: Option<Duration>,
}

impl fmt::Debug for SpawnOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Values of `env` may be credentials passed on purpose: show names only.
        let names: Vec<&str> = self.env.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("SpawnOptions")
            .field("cwd", &self.cwd)
            .field("env", &names)
            .field("stdin_bytes", &self.stdin.as_ref().map(Bytes::len))
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl SpawnOptions {
    /// Sets the working directory (without one: the session's, when the reach holds it).
    pub fn cwd(mut self, cwd: impl Into<std::path::PathBuf>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }
    /// Adds a variable.
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }
    /// Sets stdin.
    pub fn stdin(mut self, bytes: impl Into<Bytes>) -> Self {
        self.stdin = Some(bytes.into());
        self
    }
    /// Sets the timeout.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
}

/// What a child process did.
///
/// ```
/// use capability_types::ProcessOutput;
/// let out = ProcessOutput::new(Some(0), None, "hi\n".into(), Default::default(), false);
/// assert_eq!((out.exit_code, out.timed_out), (Some(0), false));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProcessOutput {
    /// Exit status, when it exited normally.
    pub exit_code: Option<i32>,
    /// The signal that ended it, when one did (reported apart from the exit code).
    pub signal: Option<i32>,
    /// Captured stdout, up to the cap.
    pub stdout: Bytes,
    /// Captured stderr, up to the cap.
    pub stderr: Bytes,
    /// Whether stdout or stderr hit the cap.
    pub truncated: bool,
    /// Whether the process group was killed because the timeout passed.
    pub timed_out: bool,
}

impl ProcessOutput {
    /// An output record.
    pub fn new(
        exit_code: Option<i32>,
        signal: Option<i32>,
        stdout: Bytes,
        stderr: Bytes,
        truncated: bool,
    ) -> Self {
        Self {
            exit_code,
            signal,
            stdout,
            stderr,
            truncated,
            timed_out: false,
        }
    }

    /// Marks the output as that of a process killed on timeout.
    pub fn with_timed_out(mut self, timed_out: bool) -> Self {
        self.timed_out = timed_out;
        self
    }
}

/// Key-value state in the namespace the resolver derived from the declared storage scope.
///
/// The tool never sees or builds its namespace, and no key can reach outside it. Values are
/// JSON. A TTL of zero is refused as invalid input; expired keys are invisible.
///
/// ```
/// # async fn example(ctx: &capability_types::ToolContext) -> Result<(), capability_types::CapabilityError> {
/// use std::time::Duration;
/// let kv = ctx.kv()?; // already inside the tool's namespace
/// kv.set("last_run", serde_json::json!("2026-11-23"), Some(Duration::from_secs(3600))).await?;
/// assert_eq!(kv.get("last_run").await?, Some(serde_json::json!("2026-11-23")));
/// assert_eq!(kv.list("last").await?, ["last_run"]);
/// # Ok(()) }
/// ```
#[async_trait]
pub trait KeyValueStore: Send + Sync {
    /// The value of `key`, if set and not expired.
    async fn get(&self, key: &str) -> Result<Option<Value>, CapabilityError>;
    /// Sets `key`; `ttl: None` applies the declaration's `ttlSecondsDefault` (or no expiry).
    async fn set(
        &self,
        key: &str,
        value: Value,
        ttl: Option<Duration>,
    ) -> Result<(), CapabilityError>;
    /// Deletes `key`; whether it existed.
    async fn delete(&self, key: &str) -> Result<bool, CapabilityError>;
    /// Live keys starting with `prefix` (exact case), sorted.
    async fn list(&self, prefix: &str) -> Result<Vec<String>, CapabilityError>;
}
